"""CCPO (guirl.methods.ccpo): progressive rollouts whose shared history screenshots are cropped to
the ROI aggregated from the group's rollouts and the annotation (Sec. 3.2, Algorithm 1), CASC at
inference (Table 13), prompt token accounting against the real processor, the RL stage through the
engine (in process, through accelerate with the paper-3b profile, resumed after a kill), and
notebook 02's helpers (Table 4 with a cost model, Figure 6, ROI screens)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from conftest import kill_after, stage_of
from guirl.actions.types import Action, ActionType
from guirl.config import load_config
from guirl.methods.ccpo.config import CCPOSection, reward_config
from guirl.methods.ccpo.progressive import ProgressiveCASC, aggregate_roi, casc_inference_history
from guirl.methods.ccpo.reward import CCPOConfig, ccpo_match
from guirl.prompts import PromptSpec
from guirl.rl.multiturn import IMAGE_SPECIAL_TOKENS, EpisodeTask, semi_online_metrics, semi_online_rollout
from guirl.rl.samples import RolloutArgs
from test_semi_online import BUDGET, H, RoundPolicy, W, make_episode, text_of

CLICK = ActionType.CLICK
TYPE = Action(ActionType.TYPE, text="milk")
WAIT = Action(ActionType.WAIT)


def click(x: float, y: float) -> Action:
    return Action(CLICK, point=(x, y))


VIEW = Image.new("RGB", (W, H), (10, 20, 30))  # a 280x504 model view (the tiny budget keeps it)


# ----------------------------------------------------------------------------- ROI construction by hand
# 280x504 px view, margin 28 px, smallest side 56 px, 28 px grid. A normalised point (x, y) is
# (280 x, 504 y) px; the ROI is the points' bounding box, padded by 28 px per side, grown to 56 px,
# aligned outward to the grid, kept on the screen.
@pytest.mark.parametrize(
    "gt, rollouts, kw, kind, roi",
    [
        # all rollouts agree with the annotation at (140, 252) px: (112, 224)-(168, 280)
        (click(0.5, 0.5), [click(0.5, 0.5)] * 3, {}, "crop", (112, 224, 168, 280)),
        # a rollout at (28, 50.4) px widens it: bbox (28, 50.4)-(140, 252) -> (0, 22.4)-(168, 280)
        # -> aligned (0, 0, 168, 280)
        (click(0.5, 0.5), [click(0.1, 0.1), click(0.5, 0.5)], {}, "crop", (0, 0, 168, 280)),
        # rollouts whose output was off the screen did not parse (None): only the annotation counts
        (click(0.5, 0.5), [None, None], {}, "crop", (112, 224, 168, 280)),
        # a rollout on the bottom-right corner (280, 504): bbox (140, 252)-(280, 504) + 28 px is
        # (112, 224)-(308, 532), slid back inside the screen with its size kept: (84, 196)-(280, 504)
        (click(0.5, 0.5), [click(1.0, 1.0)], {}, "crop", (84, 196, 280, 504)),
        # only the annotation is a coordinate action (the rollouts typed, failed, waited): ROI around
        # the gt point (70, 126): (42, 98)-(98, 154) -> aligned (28, 84)-(112, 168)
        (click(0.25, 0.25), [TYPE, None, WAIT], {}, "crop", (28, 84, 112, 168)),
        # no coordinate action anywhere: MAX-COMPRESS drops the screenshot, MIN keeps it full
        (TYPE, [TYPE, None], {}, "dropped", None),
        (TYPE, [TYPE, None], {"policy": "min"}, "full", None),
        # a rollout clicked on a type step: the paper decides by the annotated action (dropped),
        # the released code by any source (a crop around (140, 252))
        (TYPE, [click(0.5, 0.5)], {}, "dropped", None),
        (TYPE, [click(0.5, 0.5)], {"coordinate_steps": "any"}, "crop", (112, 224, 168, 280)),
        # a scroll is a coordinate action: its start and end points (140, 403.2), (140, 100.8)
        # -> (112, 72.8)-(168, 431.2) -> aligned (112, 56, 168, 448)
        (
            Action(ActionType.SCROLL, direction="up", convention="finger", point=(0.5, 0.8), point2=(0.5, 0.2)),
            [],
            {},
            "crop",
            (112, 56, 168, 448),
        ),
        # a direction-only scroll (AndroidControl) has no point: kept full even under MAX
        (Action(ActionType.SCROLL, direction="down", convention="content"), [None], {}, "full", None),
    ],
)
def test_aggregate_roi_cases(gt, rollouts, kw, kind, roi):
    obs, _ = aggregate_roi(VIEW, gt, rollouts, **kw)
    assert (obs.kind, obs.roi_px) == (kind, roi)
    if roi is not None:
        assert obs.image.size == (roi[2] - roi[0], roi[3] - roi[1])
        assert obs.image.tobytes() == VIEW.crop(roi).tobytes()


def test_aggregate_roi_includes_the_annotated_boxes():
    # gt box (0.4, 0.4)-(0.6, 0.6) = (112, 201.6)-(168, 302.4) px: padded and aligned to
    # (84, 168)-(196, 336); candidate box corners join only with include_candidates (released code)
    obs, pts = aggregate_roi(VIEW, click(0.5, 0.5), [], target_box=(0.4, 0.4, 0.6, 0.6))
    assert obs.roi_px == (84, 168, 196, 336) and pts == ((0.5, 0.5), (0.4, 0.4), (0.6, 0.6))
    cand = ((0.0, 0.0, 0.1, 0.1),)
    obs, _ = aggregate_roi(VIEW, click(0.5, 0.5), [], candidate_boxes=cand)
    assert obs.roi_px == (112, 224, 168, 280)
    # corners (0, 0), (28, 50.4) with the gt point: (-28, -28)-(168, 280) padded, slid inside
    obs, _ = aggregate_roi(VIEW, click(0.5, 0.5), [], candidate_boxes=cand, include_candidates=True)
    assert obs.roi_px == (0, 0, 196, 308)
    assert CCPOSection().include_candidates is False  # the paper's ROI is the default


# ----------------------------------------------------------------------------- ROIs on a real AndroidControl layout
def _fixtures():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py"
    )
    mf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mf)  # type: ignore[union-attr]
    return mf


def real_layout_history_tokens(tmp_path, *, candidates: str, include_candidates: bool) -> dict[str, list[int]]:
    """Visual tokens of the screenshots of the last step's 1AO and 3AO prompts (history crops,
    then the current screen) of the real-layout episode (:func:`make_androidcontrol_real_layout`:
    1080 x 2400, a full accessibility tree) at the paper-3b pixel budget, loaded with
    ``candidates`` and cropped by CCPO's training CASC with the annotation only (a group whose
    rollouts all agree with it)."""
    from guirl.data.loaders import load_dataset
    from guirl.methods.ccpo.casc import obs_tokens
    from guirl.methods.ccpo.history import training_history
    from guirl.methods.ccpo.progressive import load_model_view

    cfg = load_config("paper-3b", overrides=[f"ccpo.include_candidates={str(include_candidates).lower()}"])
    budget = {"min_pixels": cfg.model.min_pixels, "max_pixels": cfg.model.max_pixels}
    builder = training_history(cfg)
    root = tmp_path / candidates
    ep = load_dataset(
        "androidcontrol",
        _fixtures().make_androidcontrol_real_layout(root),
        image_dir=root / "out",
        candidates=candidates,
    ).episodes[0]
    views = [load_model_view(root / "out" / s.screenshot, **budget) for s in ep.steps]
    per_step = []
    for s, view in zip(ep.steps, views):
        obs, _ = aggregate_roi(
            view, s.action, [], target_box=s.target_box, candidate_boxes=s.candidate_boxes, **builder.kw
        )
        per_step.append(obs_tokens(obs, **budget))
    t = len(ep.steps) - 1
    current = visual_tokens_of(views[t], budget)
    return {tag: per_step[max(0, t - n) : t] + [current] for tag, n in (("1AO", 1), ("3AO", 3))}


def visual_tokens_of(image, budget):
    from guirl.imaging import visual_tokens

    return visual_tokens(image.height, image.width, **budget)


def test_casc_on_a_real_androidcontrol_layout_keeps_a_small_part_of_a_past_click(tmp_path):
    # Every accessibility node as a candidate and its corners in the ROI (the loader and CASC
    # defaults before): the root layouts span the screen, so each past click keeps the whole
    # 1092 x 2408 model view, 3,354 tokens. The paper's ROI (annotated point + acted element's box,
    # the loader's candidates = the clickable nodes containing the point): a small crop.
    before = real_layout_history_tokens(tmp_path, candidates="all", include_candidates=True)
    assert before == {"1AO": [3354, 3354], "3AO": [3354, 3354, 3354, 3354]}
    after = real_layout_history_tokens(tmp_path, candidates="containing", include_candidates=False)
    # model-view px = screen px x (1092/1080, 2408/2400); padded by 28 px, slid inside, on the grid:
    # the "Create" tab (216 x 126 px) -> (392, 2184)-(700, 2380), 11 x 7 = 77 tokens; the third row
    # (the clickable node under the thumbnail, 1080 x 400) -> 39 x 17 = 663; the first row's "more"
    # button (116 x 100 px at the right edge) -> (896, 448)-(1092, 616), 7 x 6 = 42
    assert after == {"1AO": [42, 3354], "3AO": [77, 663, 42, 3354]}
    assert all(tok <= 0.2 * 3354 for tok in after["3AO"][:-1])
    # the released code's reading (candidate corners join) on the same, now element-centred, candidates:
    # the "more" button's clickable row joins its ROI
    released = real_layout_history_tokens(tmp_path, candidates="containing", include_candidates=True)
    assert released == {"1AO": [663, 3354], "3AO": [77, 663, 663, 3354]}


# ----------------------------------------------------------------------------- progressive rollouts
def ccpo_matcher(parsed, gt):
    return ccpo_match(parsed, gt, CCPOConfig())


def _progressive(tmp_path, rounds, *, policy="max", n=3, threshold=-1):
    ep = make_episode(tmp_path)  # click (0.5, 0.5), type "milk", click (0.2, 0.75)
    builder = ProgressiveCASC(**BUDGET, policy=policy)
    rp = RoundPolicy(rounds)
    hook = semi_online_rollout(ccpo_matcher, patch_threshold=threshold, **BUDGET, history=builder)
    samples = hook(rp, [EpisodeTask(ep, PromptSpec("ccpo", 3, "nAO"), str(tmp_path))], RolloutArgs(n, seed=0))
    return samples, rp, builder, ep


def _rounds():
    right = [text_of(a) for a in (click(0.5, 0.5), TYPE, click(0.2, 0.75))]
    off_screen = '<action>{"action": "click", "coordinate": [9999, 9999]}</action>'
    near_corner = '<action>{"action": "click", "coordinate": [28, 56]}</action>'  # (0.1, 0.111)
    return [
        [right[0], near_corner, off_screen],  # step 0: A on target, B near the corner, C off the screen
        [right[1], right[0], right[1]],  # step 1 (type): B clicks instead (a coordinate on a type step)
        [right[2], right[2], right[2]],
    ]


def test_progressive_rollouts_share_the_cropped_history(tmp_path):
    samples, rp, builder, ep = _progressive(tmp_path, _rounds())
    view0 = Image.open(tmp_path / ep.steps[0].screenshot).convert("RGB")  # 280x504: its own model view
    # round 0: no history, the current screenshot full
    assert all(len(p[1]) == 1 for p in rp.prompts[0])
    # round 1: step 0's screenshot cropped to the ROI of the annotation (140, 252), A (140, 252) and
    # B (28, 56); C's off-screen output did not parse and adds nothing: bbox (28, 56)-(140, 252)
    # + 28 px -> (0, 28)-(168, 280); the same crop for the three trajectories
    crops = [p[1][0] for p in rp.prompts[1]]
    assert all(c.size == (168, 252) for c in crops) and crops[0] is crops[1] is crops[2]
    assert crops[0].tobytes() == view0.crop((0, 28, 168, 280)).tobytes()
    # round 2: step 1 (type) is dropped (MAX-COMPRESS decides by the annotated action even though
    # B clicked there), so each prompt shows the step-0 crop, step 1 as text only, the current screen
    for p in rp.prompts[2]:
        assert len(p[1]) == 2 and p[1][0] is crops[0] and isinstance(p[1][1], str)
        text = "".join(c.get("text", "") for c in p[0][1]["content"])
        assert "Step 1:" in text and "Step 2:" in text
    assert [(r.step, r.kind, r.roi_px) for r in builder.records] == [
        (0, "crop", (0, 28, 168, 280)),
        (1, "dropped", None),
    ]
    # the samples carry the image tokens the prompts really hold: step 2 = a 6x9 crop + a full screen
    s2 = [s for s in samples if s.info["step"] == 2]
    assert all(s.info["image_tokens"] == 6 * 9 + 180 and s.info["image_tokens_full"] == 3 * 180 for s in s2)
    # A matched every step (kept), B's step-1 click is patched (history shows "type milk")
    assert [s.info["decision"] for s in samples if s.info["rollout"] == 1] == ["patch", "patch", "keep"]


def test_min_compress_keeps_the_type_screenshot(tmp_path):
    _, rp, builder, _ = _progressive(tmp_path, _rounds(), policy="min")
    assert all(len(p[1]) == 3 and isinstance(p[1][1], Image.Image) and p[1][1].size == (W, H) for p in rp.prompts[2])
    assert [r.kind for r in builder.records] == ["crop", "full"]


def test_groups_do_not_share_rois(tmp_path):
    # two tasks of the same episode in one call: each group aggregates only its own rollouts
    ep = make_episode(tmp_path)
    right = text_of(click(0.5, 0.5))
    far = '<action>{"action": "click", "coordinate": [28, 56]}</action>'
    builder = ProgressiveCASC(**BUDGET)
    rp = RoundPolicy([[right, right, far, far], [right] * 4, [right] * 4])
    hook = semi_online_rollout(ccpo_matcher, patch_threshold=-1, **BUDGET, history=builder)
    task = EpisodeTask(ep, PromptSpec("ccpo", 3, "nAO"), str(tmp_path))
    hook(rp, [task, task], RolloutArgs(2, seed=0))
    sizes = [p[1][0].size for p in rp.prompts[1]]
    assert sizes == [(56, 56), (56, 56), (168, 252), (168, 252)]


def test_prompt_token_accounting_equals_the_processor(tmp_path):
    """``prompt_tokens_full`` = prompt tokens - (image + special tokens) + the same uncompressed:
    checked against the tiny Qwen2.5-VL processor on CCPO's prompts and the same rollouts'
    uncompressed prompts."""
    from guirl.models import build_tiny_model, load_processor
    from guirl.rl.logprobs import encode_samples

    proc = load_processor(build_tiny_model(), **BUDGET)
    casc, _, _, _ = _progressive(tmp_path, _rounds())
    ep = make_episode(tmp_path)
    hook = semi_online_rollout(ccpo_matcher, patch_threshold=-1, **BUDGET)  # same answers, full history
    full = hook(
        RoundPolicy(_rounds()), [EpisodeTask(ep, PromptSpec("ccpo", 3, "nAO"), str(tmp_path))], RolloutArgs(3, seed=0)
    )
    assert [s.info["step"] for s in casc] == [s.info["step"] for s in full]
    n_casc = encode_samples(proc, [s.prompt for s in casc], [(1,)] * len(casc))["prompt_tokens"].tolist()
    n_full = encode_samples(proc, [s.prompt for s in full], [(1,)] * len(full))["prompt_tokens"].tolist()
    for s, a, b in zip(casc, n_casc, n_full, strict=True):
        i = s.info
        predicted = a - i["image_tokens"] - IMAGE_SPECIAL_TOKENS * i["images"] + i["image_tokens_full"]
        predicted += IMAGE_SPECIAL_TOKENS * i["images_full"]
        assert predicted == b, (i["rollout"], i["step"])
    m = semi_online_metrics([s.info for s in casc], {"prompt_tokens": float(np.mean(n_casc))})
    assert m["prompt_tokens_full"] == pytest.approx(np.mean(n_full))
    assert m["compression_rate"] == pytest.approx(1 - np.mean(n_casc) / np.mean(n_full)) and m["compression_rate"] > 0


# ----------------------------------------------------------------------------- inference (Table 13)
def test_casc_at_inference_through_step_prompts(tmp_path):
    from guirl.rollout import step_prompts

    ep = make_episode(tmp_path)
    spec = PromptSpec("ccpo", 3, "nAO")
    records = []
    hook = casc_inference_history(**BUDGET, records=records, n_history=3)
    prompts = step_prompts([ep], spec, **BUDGET, image_root=tmp_path, history_builder=hook)
    # step 2: step 0's screenshot cropped around the click shown for it (no annotation boxes at test
    # time), step 1 (type) dropped, the current screenshot full
    messages, images = prompts[2].prompt
    assert len(images) == 2 and images[0].size == (56, 56) and images[1] == str(tmp_path / ep.steps[2].screenshot)
    assert [(r.step, r.kind) for r in records if r.step < 2][-2:] == [(0, "crop"), (1, "dropped")]
    plain = step_prompts([ep], spec, **BUDGET, image_root=tmp_path)
    assert len(plain[2].prompt[1]) == 3  # without the hook: every screenshot full
    assert prompts[2].target == plain[2].target  # the answer to learn / score is unchanged
    mn = step_prompts(
        [ep], spec, **BUDGET, image_root=tmp_path, history_builder=casc_inference_history(**BUDGET, policy="min")
    )
    assert len(mn[2].prompt[1]) == 3 and mn[2].prompt[1][1].size == (W, H)


def test_casc_at_inference_crops_as_training_does(tmp_path):
    """Table 13's "optimized inference" aligned with training CASC: with a ground-truth history the
    crop holds the point and the acted element's box, equal to the training crop of a group whose
    rollouts agreed with the annotation; an action outside the recorded box crops its point only."""
    import dataclasses

    from guirl.methods.ccpo.progressive import _acted_box, load_model_view
    from guirl.rollout import step_prompts

    ep = make_episode(tmp_path)  # click (0.5, 0.5), type "milk", click (0.2, 0.75)
    box = (0.3, 0.4, 0.7, 0.6)  # the clicked element: (84, 201.6)-(196, 302.4) px
    ep = dataclasses.replace(ep, steps=(dataclasses.replace(ep.steps[0], target_box=box), *ep.steps[1:]))
    spec = PromptSpec("ccpo", 3, "nAO")
    records = []
    prompts = step_prompts(
        [ep], spec, **BUDGET, image_root=tmp_path, history_builder=casc_inference_history(**BUDGET, records=records)
    )
    crop = prompts[1].prompt[1][0]
    # padded by 28 px and aligned: (56, 168)-(224, 336), 6 x 6 tokens (the point alone: 2 x 2)
    assert crop.size == (168, 168) and records[0].roi_px == (56, 168, 224, 336)
    view = load_model_view(tmp_path / ep.steps[0].screenshot, **BUDGET)
    trained, _ = aggregate_roi(view, ep.steps[0].action, [ep.steps[0].action] * 4, target_box=box)
    assert trained.roi_px == records[0].roi_px and trained.image.tobytes() == crop.tobytes()
    no_box = step_prompts(
        [ep], spec, **BUDGET, image_root=tmp_path, history_builder=casc_inference_history(**BUDGET, element_box=False)
    )
    assert no_box[1].prompt[1][0].size == (56, 56)  # the point alone (the rule before)
    # the model's own action outside the recorded element: its point only, not that element's box
    assert _acted_box(click(0.9, 0.9), box) is None and _acted_box(click(0.5, 0.5), box) == box
    assert _acted_box(TYPE, box) is None


# ----------------------------------------------------------------------------- one patch rule
def _role_matcher(monkeypatch, role: str, overrides=()):
    """The ``matcher`` a role's hook builder hands to the shared semi-online loop."""
    import guirl.rl.multiturn as mt
    from guirl.methods import get_role
    from guirl.rl.hooks import HookInputs

    seen = {}
    monkeypatch.setattr(mt, "semi_online_hooks", lambda cfg, data_dir, **kw: seen.update(kw))
    cfg = load_config("tiny", overrides=[f"rl.role={role}", "rl.reward=null", *overrides])
    get_role(role)(cfg, HookInputs(Path(".")))
    return seen["matcher"]


def _parsed(action):
    from guirl.actions.types import ParseResult

    return ParseResult(action=action, raw="")


# target box 0.2 x 0.1 around the point (0.5, 0.5); MiniGUI targets are larger than tau_min = 0.04
_GT = __import__("guirl.rewards.base", fromlist=["GroundTruth"]).GroundTruth(
    click(0.5, 0.5), box=(0.4, 0.45, 0.6, 0.55), candidate_boxes=((0.4, 0.45, 0.6, 0.55),)
)
MATCH_CASES = [  # (prediction, UI-S1 extract_match, ccpo_match)
    (click(0.5, 0.5), True, True),
    (click(0.52, 0.52), True, True),  # 0.028 from the point
    (click(0.58, 0.5), True, False),  # inside the box, 0.08 from the point: only UI-S1's rule accepts
    (click(0.67, 0.5), False, False),  # outside the 1.2x box (x <= 0.62)
    (TYPE, False, False),
]


@pytest.mark.parametrize("pred, uis1, ccpo_rule", MATCH_CASES)
def test_so_rl_and_ccpo_decide_matched_with_one_rule(monkeypatch, pred, uis1, ccpo_rule):
    so = _role_matcher(monkeypatch, "semi_online")
    cc = _role_matcher(monkeypatch, "ccpo")
    assert so(_parsed(pred), _GT) is uis1 and cc(_parsed(pred), _GT) is uis1  # default: SO-RL's rule for both
    coupled = _role_matcher(monkeypatch, "ccpo", ["ccpo.match_rule=ccpo_reward"])  # the option
    assert coupled(_parsed(pred), _GT) is ccpo_rule is ccpo_match(_parsed(pred), _GT)
    assert so(_parsed(None), _GT) is False and cc(_parsed(None), _GT) is False  # an unparsable output


def test_match_rules_are_one_setting_of_the_semi_online_section(monkeypatch):
    # a rule set named in semi_online.match_rules changes both roles' decision
    so = _role_matcher(monkeypatch, "semi_online", ["semi_online.match_rules=ccpo_reward"])
    cc = _role_matcher(monkeypatch, "ccpo", ["semi_online.match_rules=ccpo_reward"])
    far_inside = _parsed(click(0.58, 0.5))
    assert so(far_inside, _GT) is cc(far_inside, _GT)
    with pytest.raises(Exception, match="unknown matching rule set 'nope'"):
        load_config("tiny", overrides=["semi_online.match_rules=nope"])


# ----------------------------------------------------------------------------- config
def test_ccpo_section_and_reward_config():
    cfg = load_config("tiny", overrides=["rl.role=ccpo", "ccpo.compress=min", "ccpo.tau_min=0.1"])
    assert cfg.ccpo.compress == "min" and reward_config(cfg.ccpo).tau_min == 0.1
    assert reward_config(CCPOSection()) == CCPOConfig()  # paper defaults: tau_min 0.04 (App. A.2.1)
    assert reward_config(CCPOSection(reward_variant="code")) == CCPOConfig.code()
    assert reward_config(CCPOSection(distance_credit=False)).distance_credit is False  # "w/o CR"
    assert load_config("paper-3b").rl.group_size == 8  # N = 8 rollouts, CCPO App. A.5


# ----------------------------------------------------------------------------- notebook 02 helpers
def _log(method_tokens, seconds, n=16, steps=5, full=None):
    rows = []
    for k in range(1, steps + 1):
        L = method_tokens + 10 * k
        rows.append(
            {
                "step": k,
                "skipped": False,
                "prompt_tokens": float(L),
                "prompt_tokens_full": float(full + 10 * k) if full else None,
                "step_seconds": seconds(L) * n,
                "n_generated": n,
                "n_kept": n,
            }
        )
    return pd.DataFrame(rows)


def test_cost_model_recovers_a_quadratic():
    from guirl.studies.ccpo_rl import fit_cost_model

    def true(L):
        return 0.01 + 2e-4 * L + 3e-7 * L**2

    model = fit_cost_model([_log(400, true), _log(1200, true)], skip_first=0)
    assert model.coef == pytest.approx((0.01, 2e-4, 3e-7), rel=1e-6)  # guirl.analysis.cost: c0 + c1 L + c2 L^2
    assert model.degree == 2 and model.n_points == 10
    with pytest.raises(ValueError, match="3 or more"):
        fit_cost_model([_log(400, true, steps=2)], skip_first=0)
    # smoke-sized runs: 2 distinct lengths give a line through both points, 1 a constant
    line = fit_cost_model([_log(400, true, steps=2)], skip_first=0, lower_degree_ok=True)
    assert line.degree == 1 and len(line.coef) == 2 and min(line.coef) >= 0  # the one cost model: coefficients >= 0
    for L in (410, 420):  # the two steps' lengths, within the clamped intercept's reach
        assert line.predict(L) == pytest.approx(true(L), rel=1e-2)
    flat = fit_cost_model([_log(400, true, steps=1)], skip_first=0, lower_degree_ok=True)
    assert flat.degree == 0 and flat.coef == pytest.approx((true(410),))
    with pytest.raises(ValueError, match="0 lengths"):
        fit_cost_model([_log(400, true, steps=1)], skip_first=1, lower_degree_ok=True)


def test_table4_layout_and_numbers():
    from guirl.studies.ccpo_rl import table4

    def cost(L):
        return 0.01 + 1e-5 * L + 1e-7 * L**2

    logs = {
        ("semi_online", "1AO"): _log(800, cost),
        ("ccpo", "1AO"): _log(500, cost, full=800),
        ("semi_online", "3AO"): _log(1500, cost),
        ("ccpo", "3AO"): _log(600, cost, full=1500),
    }
    t = table4(logs)
    assert list(t["Model"]) == ["SO-RL", "SO-RL", "CCPO", "CCPO"] and list(t["History Length"]) == ["1AO", "3AO"] * 2
    row = t[(t.Model == "CCPO") & (t["History Length"] == "3AO")].iloc[0]
    # steps 2..5: mean tokens 600 + 35 = 635 vs 1535; every step trains 16 samples
    assert row["Token Length"] == pytest.approx(635)
    assert row["Compression Rate (%)"] == pytest.approx(100 * (1 - 635 / 1535))
    assert row["History Compression (%)"] == pytest.approx(100 * (1 - 635 / 1535))
    assert row["Token Ratio"] == pytest.approx(1535 / 635)
    so_s = np.mean([cost(1500 + 10 * k) * 16 for k in range(2, 6)])
    cc_s = np.mean([cost(600 + 10 * k) * 16 for k in range(2, 6)])
    assert row["Speedup"] == pytest.approx(so_s / cc_s)
    # the cost model fitted on these exact step times predicts the measured speedup closely, and
    # more than the token ratio would (the quadratic term)
    assert row["Cost-model Speedup"] == pytest.approx(row["Speedup"], rel=0.01)
    so_row = t[(t.Model == "SO-RL") & (t["History Length"] == "1AO")].iloc[0]
    assert (
        so_row["Compression Rate (%)"] == 0 and so_row["Speedup"] == 1 and math.isnan(so_row["History Compression (%)"])
    )
    with pytest.raises(KeyError, match="no semi_online run for history 3AO"):
        table4({("ccpo", "3AO"): logs[("ccpo", "3AO")], ("semi_online", "1AO"): logs[("semi_online", "1AO")]})


def test_reward_curve_is_figure_6():
    from guirl.studies.ccpo_rl import reward_curve

    df = reward_curve(load_config("tiny"), [0.0, 0.04, 0.27, 0.5, 0.7])
    assert df["r_acc"].tolist() == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])
    assert df["reward"].tolist() == pytest.approx([1.0, 1.0, 0.775, 0.55, 0.55])


def test_rl_stage_config():
    from guirl.studies.shared.rl_runs import rl_stage_config, stage_name

    cfg = load_config("tiny")  # tiny's rl.reward is AgentCPM-GUI's (its generic GRPO)
    s = rl_stage_config(cfg, "ccpo", "3AO", {"ccpo.compress": "min", "rl.group_size": 4})
    assert (s.rl.role, s.rl.reward, s.rl.histories, s.ccpo.compress, s.rl.group_size) == (
        "ccpo",
        None,
        ["3AO"],
        "min",
        4,
    )
    assert rl_stage_config(cfg, "semi_online", "1AO").rl.role == "semi_online"
    assert stage_name("ccpo", "3AO", "min") == "ccpo_3AO_min"
    with pytest.raises(ValueError, match=r"replace rl.role=ces: rl.role: .ces. is not registered"):
        rl_stage_config(cfg, "ces", "1AO")


def test_inference_history_in_offline_evaluation(tmp_path):
    from guirl.methods.ccpo.history import inference_history
    from guirl.rollout import FunctionPolicy
    from guirl.studies.shared.evaluation import evaluate_offline

    cfg = load_config("tiny", overrides=["eval.histories=[3AO]"])
    ep = make_episode(tmp_path)
    hook = inference_history(cfg, n_history=max(int(h[0]) for h in cfg.eval.histories))
    seen = []

    def answer(prompt):
        seen.append([im.size if isinstance(im, Image.Image) else im for im in prompt[1]])
        return "<action>{}</action>"

    evaluate_offline(
        FunctionPolicy(answer),
        [ep],
        PromptSpec("ccpo", 3, "nAO"),
        protocol="ccpo",
        image_root=tmp_path,
        **BUDGET,
        model_name="x",
        split="test",
        history_builder=hook,
    )
    # step 2: the step-0 crop (56 x 56 around the click), step 1 (type) dropped, the current screen
    assert seen[-1][0] == (56, 56) and len(seen[-1]) == 2
    with pytest.raises(ValueError, match="compress"):
        inference_history(load_config("tiny", overrides=["ccpo.compress=none"]))


def test_plot_rois(tmp_path):
    from guirl.studies.ccpo_rl import plot_rois

    _, _, builder, _ = _progressive(tmp_path, _rounds())
    fig = plot_rois(builder.records, **BUDGET)
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="no ROI records"):
        plot_rois([], **BUDGET)


# ----------------------------------------------------------------------------- the RL stage
@pytest.fixture(scope="module")
def tiny_model() -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model()


STAGE = [
    "rl.role=ccpo",
    "rl.reward=null",
    "rl.histories=[3AO]",
    "rl.prompts_per_step=1",
    "rl.group_size=2",
    "rl.max_new_tokens=8",
    "rl.micro_batch_size=8",
    "rl.rollout_batch_size=4",
    "rl.dapo_std_threshold=null",
    "semi_online.patch_threshold=-1",  # the random tiny model never matches: keep whole episodes
]


@pytest.mark.slow
def test_ccpo_stage_in_process_logs_table4_fields(tiny_model, minigui, tmp_path):
    from guirl.rollout import HFPolicy
    from guirl.stages.rl import hooks_for
    from guirl.train.rl import LOG_FIELDS, LOG_FILE, read_log, train_rl

    cfg = load_config("tiny", overrides=[*STAGE, "rl.max_steps=2", "rl.save_steps=2"])
    hooks = hooks_for(cfg, minigui)
    result = train_rl(
        cfg,
        hooks,
        base_model=tiny_model,
        output_dir=tmp_path,
        make_policy=lambda m, p: HFPolicy(m, p, max_new_tokens=8, batch_size=4),
        progress=False,
    )
    assert result["role"] == "ccpo" and result["global_step"] == 2
    for r in read_log(tmp_path / LOG_FILE):
        assert set(LOG_FIELDS) <= set(r)
        for k in ("image_tokens", "image_tokens_full", "prompt_tokens_full", "compression_rate", "history_full_share"):
            assert r[k] is not None, k
        assert 0 < r["compression_rate"] < 1 and r["prompt_tokens_full"] > r["prompt_tokens"]  # CASC cropped
        assert {"reward/format", "reward/type", "reward/content"} <= set(r)  # eq. 11's components
        assert r["step_seconds"] > 0
        if not r["skipped"]:  # the update's parts: reference log-probs (beta > 0), no old ones (1 mini-batch)
            parts = r["logprob_ref_seconds"] + r["logprob_old_seconds"] + r["grad_seconds"]
            assert r["logprob_ref_seconds"] > 0 and r["logprob_old_seconds"] == 0 and r["grad_seconds"] > 0
            assert parts <= r["update_seconds"] and r["gen_seconds"] + r["update_seconds"] <= r["step_seconds"]


# A paper profile with only what a CPU cannot do swapped out (checkpoint, precision, one CPU
# process instead of 8 GPUs with ZeRO-2) and the sizes cut; all-parameter RL with activation
# checkpointing, CCPO's reward, CASC (MAX), DAPO (0.2), KL and 4 mini-batches stay the profile's
# (CCPO Table 8).
PAPER_CPU_DRY_RUN = [
    "model.torch_dtype=float32",
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",
    "rl.role=ccpo",
    "rl.histories=[3AO]",
    "rl.prompts_per_step=1",
    "rl.group_size=2",
    "rl.max_new_tokens=8",
    "rl.max_draws=2",
    "rl.rollout_batch_size=4",
    "model.max_pixels=141120",  # MiniGUI screens at the tiny budget (CPU time)
]


@pytest.mark.slow
def test_paper_3b_ccpo_dry_run_through_accelerate_trains_all_parameters(tiny_model, minigui, tmp_path):
    import torch

    from guirl.train.launch import run_stage
    from guirl.train.rl import FINAL_DIR, LOG_FILE, RL_ENTRY, read_log

    cfg = load_config(
        "paper-3b", overrides=[f"model.path={tiny_model}", *PAPER_CPU_DRY_RUN, "rl.max_steps=2", "rl.save_steps=2"]
    )
    assert cfg.rl.dapo_std_threshold == 0.2 and cfg.rl.mini_batches == 4 and cfg.rl.learning_rate == 5e-7
    assert not cfg.rl.lora and cfg.runtime.activation_checkpointing  # CCPO Table 8: a full-parameter setup
    # RL continues from an SFT result that is a LoRA adapter (CCPO A.1.2, Table 7's LoRA SFT): the
    # engine merges it into its base and trains every parameter of the merged model
    from guirl.models import apply_lora, load_model

    sft = tmp_path / "sft_final"
    apply_lora(load_model(tiny_model), r=8, alpha=16, dropout=0.1).save_pretrained(str(sft))
    out = tmp_path / "ccpo_3AO"
    result = run_stage(
        stage_of(cfg, "ccpo_3AO", data_dir=minigui, base_model=sft, output_dir=out, entry=RL_ENTRY), echo=False
    )
    assert result["global_step"] == 2 and result["role"] == "ccpo" and result["adapter"] is False
    assert result["trainable_parameters"] == result["parameters"] > 0  # vision tower and LM alike
    assert result["learning_rate"] == 5e-7
    assert Path(result["base_model"]) == out / "base_merged"  # the SFT adapter, merged once
    assert (out / FINAL_DIR / "config.json").is_file() and not (out / FINAL_DIR / "adapter_config.json").exists()
    rows = read_log(out / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2] and all("compression_rate" in r for r in rows)
    if any(not r["skipped"] for r in rows):  # an update moved the vision tower and the language model
        start, final = load_model(out / "base_merged").state_dict(), load_model(out / FINAL_DIR).state_dict()
        moved = {k.split(".")[1] for k in start if not torch.equal(start[k], final[k])}
        assert {"visual", "language_model"} <= moved, moved


@pytest.mark.slow
def test_killed_ccpo_stage_resumes_with_the_same_state(tiny_model, minigui, tmp_path):
    from safetensors.torch import load_file

    from guirl.train.launch import prepare_stage, run_stage
    from guirl.train.rl import LOG_FILE, RESULT_FILE, RL_ENTRY, last_checkpoint, read_log

    cfg = load_config("tiny", overrides=[*STAGE, "rl.max_steps=3", "rl.save_steps=1", "rl.save_total_limit=5"])
    kw = dict(data_dir=minigui, base_model=tiny_model, entry=RL_ENTRY)
    ref = run_stage(stage_of(cfg, "ccpo_3AO", output_dir=tmp_path / "ref", **kw), echo=False)
    out = tmp_path / "killed"
    cmd = prepare_stage(stage_of(cfg, "ccpo_3AO", output_dir=out, **kw), echo=False)
    kill_after(cmd, out / "checkpoint-1" / "engine.json", 900, "step-1 checkpoint")
    assert not (out / RESULT_FILE).exists()
    killed_at = int(last_checkpoint(out).name.removeprefix("checkpoint-"))
    assert killed_at in (1, 2)
    result = run_stage(stage_of(cfg, "ccpo_3AO", output_dir=out, **kw), echo=False)
    assert result["first_step"] == killed_at and result["global_step"] == 3
    rows, ref_rows = read_log(out / LOG_FILE), read_log(tmp_path / "ref" / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r, q in zip(rows, ref_rows, strict=True):
        for k in ("reward", "loss", "kl", "prompt_tokens", "image_tokens", "compression_rate"):
            assert r[k] == (None if q[k] is None else pytest.approx(q[k], rel=1e-5, abs=1e-7)), (r["step"], k)
    a = load_file(str(Path(result["final"]) / "model.safetensors"))
    b = load_file(str(Path(ref["final"]) / "model.safetensors"))
    assert all(np.allclose(a[k].numpy(), b[k].numpy(), atol=1e-6) for k in a)
