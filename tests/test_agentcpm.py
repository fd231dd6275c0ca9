"""AgentCPM-GUI's method folder (``guirl.methods.agentcpm``): the RFT reward on model text (Sec.
2.5.1, the App. C.2 schema as format check), the intra-query de-duplication (Sec. 2.4), the
action space over recorded episodes, the re-scoring through the unified mapping and the config
section's stage updates (Tables 4-5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action
from guirl.config import load_config
from guirl.data.schema import Episode, Step
from guirl.methods.agentcpm.config import longest_side_pixels, rft_updates, sft_updates
from guirl.methods.agentcpm.data import compact_episode, rescore, schema_error
from guirl.methods.agentcpm.dedup import cosine, deduplicate, pixel_embedding, trajectory_embeddings
from guirl.methods.agentcpm.reward import AgentCPMConfig, agentcpm_reward
from guirl.rewards.base import GroundTruth

CTX = FormatContext(width=1080, height=2400)
CLICK_GT = GroundTruth(Action("click", point=(0.5, 0.45)), box=(0.4, 0.4, 0.6, 0.5))
FMT = get_format("agentcpm")


def reward_of(text: str, gt: GroundTruth = CLICK_GT, **cfg) -> float:
    return agentcpm_reward(FMT.parse(text, CTX), gt, cfg=AgentCPMConfig(**cfg)).total


# ----------------------------------------------------------------------------- reward (Sec. 2.5.1)
@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"POINT":[500,450]}', 1.0),  # inside the gt box
        ('{"POINT":[590,490]}', 1.0),  # inside the box, off the point
        ('{"POINT":[500,580]}', 0.0),  # 0.13 from the point but outside the box: wrong
        ('{"POINT":[400,400]}', 1.0),  # on the box's corner: inside
        ('{"POINT":[399,400]}', 0.0),  # just outside
        ('{"thought":"tap it","POINT":[500,450]}', 1.0),  # a thought is part of the schema
        ('{"TYPE":"milk"}', 0.0),  # well formed, wrong type
        ('{"PRESS":"BACK"}', 0.0),
        ("tap the button", -1.0),  # no JSON
        ('{"POINT":[500,450]', -1.0),  # malformed
        ("{}", -1.0),  # missing fields
    ],
)
def test_reward_hand_cases(text, expected):
    assert reward_of(text) == expected


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"POINT":[500.5,450]}', "integer"),  # Location items are integers
        ('{"POINT":[500,1001]}', "0..1000"),  # in 0..1000
        ('{"POINT":[500]}', "0..1000"),  # two items
        ('{"PRESS":"APPSELECT"}', "PRESS"),  # HOME / BACK / ENTER only
        ('{"STATUS":"start","POINT":[500,450]}', "STATUS"),  # not in the paper's status enum
        ('{"POINT":[500,450],"foo":1}', "unknown key"),  # additionalProperties: false
        ('```json\n{"POINT":[500,450]}\n```', "JSON object"),  # the whole output is the object
        ('Action: {"POINT":[500,450]}', "JSON object"),  # no prose around it
        ('{"to":"up"}', "requires POINT"),  # to needs POINT
        ('{"duration":-5}', "duration"),  # minimum 0
        ('{"POINT":[500,450],"PRESS":"BACK"}', "more than one action"),
    ],
)
def test_the_schema_rejects_what_the_papers_rejects(text, why):
    # App. C.2's schema, read as AgentCPM-GUI's pipeline reads it: what it rejects is a format failure (-1)
    assert reward_of(text) == -1.0
    strict = FMT.parse(text, FormatContext(strict=True, pipeline="agentcpm_paper"))
    assert not strict.ok and why in strict.reason


def test_schema_options():
    assert reward_of('{"POINT":[500.5,450]}', schema="tolerant") == 1.0  # this project's parser reads floats
    assert reward_of('{"PRESS":"APPSELECT"}', schema="released") == 0.0  # the released schema has APPSELECT
    assert reward_of('{"STATUS":"start","POINT":[500,450]}', schema="released") == 1.0
    with pytest.raises(ValueError, match="schema"):
        AgentCPMConfig(schema="nope")


def test_a_bare_action_is_scored_as_given():
    assert agentcpm_reward(Action("click", point=(0.5, 0.45)), CLICK_GT).total == 1.0


def test_the_grpo_role_binds_the_sections_reward_settings():
    import guirl.methods as methods

    spec = methods.get_reward("agentcpm")
    bare = load_config("tiny", overrides={"agentcpm": None})
    assert methods.reward_fn(bare, spec) is spec.fn  # no section: the reward's defaults
    cfg = load_config("tiny", overrides=["agentcpm.rft.reward_schema=tolerant"])
    fn = methods.reward_fn(cfg, spec)
    assert fn(FMT.parse('{"POINT":[500.5,450]}', CTX), CLICK_GT).total == 1.0
    assert spec.fn(FMT.parse('{"POINT":[500.5,450]}', CTX), CLICK_GT).total == -1.0


# ----------------------------------------------------------------------------- de-duplication (Sec. 2.4)
def screen(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (504, 280), dtype=np.uint8))


def test_dedup_keeps_the_first_of_two_identical_trajectories_and_both_of_two_different_ones():
    a, b, c = [screen(0), screen(1)], [screen(0), screen(1)], [screen(2), screen(3)]
    emb = trajectory_embeddings([a, b, c])  # centred over the three
    assert deduplicate(["q", "q", "q"], emb, 0.98) == [True, False, True]
    # two different ones: both
    emb2 = trajectory_embeddings([a, c])
    assert deduplicate(["q", "q"], emb2, 0.98) == [True, True]
    # identical trajectories of different queries are never compared: b duplicates a but asks another query
    assert deduplicate(["q", "r", "q"], emb, 0.98) == [True, True, True]


def test_dedup_of_two_identical_trajectories_alone():
    # centred over two identical trajectories both embeddings are zero: similarity 1, a duplicate
    a = [screen(0)]
    emb = trajectory_embeddings([a, list(a)])
    assert np.allclose(emb, 0) and deduplicate(["q", "q"], emb, 0.5) == [True, False]


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1.0, 0.0], [1.0, 0.0], 1.0),
        ([1.0, 0.0], [0.0, 2.0], 0.0),
        ([1.0, 0.0], [-3.0, 0.0], -1.0),
        ([0.0, 0.0], [0.0, 0.0], 1.0),
        ([0.0, 0.0], [1.0, 0.0], 0.0),
    ],
)
def test_cosine(a, b, expected):
    assert cosine(np.array(a), np.array(b)) == pytest.approx(expected)


def test_dedup_threshold_is_strict():
    emb = np.array([[1.0, 0.0], [1.0, 1.0]])  # cosine 0.7071
    assert deduplicate(["q", "q"], emb, 0.7071) == [True, False]
    assert deduplicate(["q", "q"], emb, 0.71) == [True, True]
    with pytest.raises(ValueError, match="queries"):
        deduplicate(["q"], emb, 0.5)


def test_pixel_embedding_is_a_thumbnail():
    v = pixel_embedding(Image.new("RGB", (280, 504), (255, 255, 255)))
    assert v.shape == (180,) and np.allclose(v, 1.0)


# ----------------------------------------------------------------------------- action space over episodes
@pytest.mark.parametrize(
    "action, ok",
    [
        (Action("click", point=(0.5, 0.5)), True),
        (Action("long_press", point=(0.5, 0.5), duration_ms=1000), True),
        (Action("scroll", direction="up", convention="finger"), True),
        (Action("type", text="hi"), True),
        (Action("press", key="back"), True),
        (Action("wait", duration_ms=1000), True),
        (Action("terminate", status="success"), True),
        (Action("terminate", status="fail"), True),  # STATUS impossible
        (Action("press", key="recent"), False),  # no APPSELECT in the paper's enum
        (Action("open_app", text="Contacts"), False),
        (Action("answer", text="Lima"), False),
    ],
)
def test_schema_error(action, ok):
    assert (schema_error(action) is None) == ok
    if ok:  # everything the paper's schema writes passes its strict reading
        text = FMT.format(action, CTX)
        assert FMT.parse(text, FormatContext(strict=True, pipeline="agentcpm_paper")).ok, text


def step(i: int, action: Action, box=None) -> Step:
    return Step(step_id=i, screenshot=f"images/s{i}.png", screen_size=(280, 504), action=action, target_box=box)


def test_compact_episode_leaves_out_what_the_schema_cannot_write():
    ep = Episode(
        "e",
        "do it",
        (
            step(0, Action("open_app", text="Contacts")),
            step(1, Action("click", point=(0.5, 0.5))),
            step(2, Action("answer", text="x")),
            step(3, Action("terminate", status="success")),
        ),
        "minigui",
    )
    c = compact_episode(ep)
    assert [s.step_id for s in c.steps] == [1, 3] and c.extra["left_out"] == 2
    assert compact_episode(Episode("f", "x", (step(0, Action("answer", text="x")),), "minigui")) is None


def test_rescore_through_the_unified_mapping():
    st_click = step(0, Action("click", point=(0.5, 0.45)), box=(0.4, 0.4, 0.6, 0.5))
    kw = dict(min_pixels=3136, max_pixels=141120)
    ctx = FormatContext(width=280, height=504, min_pixels=3136, max_pixels=141120)
    ccpo = get_format("ccpo")
    right = ccpo.format(Action("click", point=(0.5, 0.45)), ctx)
    wrong = ccpo.format(Action("click", point=(0.9, 0.9)), ctx)
    rec = {"model": "m", "split": "s", "episode_id": "e", "step_id": 0}
    assert rescore({**rec, "output": right}, st_click, "ccpo", **kw)["exact"] is True
    assert rescore({**rec, "output": wrong}, st_click, "ccpo", **kw)["exact"] is False
    opened = rescore({**rec, "output": ccpo.format(Action("open_app", text="Notes"), ctx)}, st_click, "ccpo", **kw)
    assert opened["exact"] is False and opened["score_reason"].startswith("unmappable")
    bad = rescore({**rec, "output": "no action"}, st_click, "ccpo", **kw)
    assert bad["parse_ok"] is False and bad["exact"] is False
    # a step outside the schema is left out, as is a prediction the paper ignores in evaluation
    assert rescore({**rec, "output": right}, step(0, Action("open_app", text="Notes")), "ccpo", **kw) is None
    aguvis = get_format("aguvis").format(Action("open_app", text="Notes"), ctx)
    assert rescore({**rec, "output": aguvis}, st_click, "aguvis", **kw) is None
    # the identity mapping of AgentCPM-GUI's own format scores as the protocol does
    own = rescore({**rec, "output": '{"POINT":[500,450]}'}, st_click, "agentcpm", **kw)
    assert own["exact"] is True and own["mapped_action"]["point"] == [0.5, 0.45]
    with pytest.raises(KeyError, match="family"):
        rescore({**rec, "output": right}, st_click, "coat", **kw)


# ----------------------------------------------------------------------------- the section's stage updates
@pytest.mark.parametrize(
    "w, h, res, expected",
    [
        (1080, 2400, 1120, 504 * 1120),  # AndroidControl screens at Table 4's 1120
        (280, 504, 1120, 280 * 504),  # already fits: original size
        (2400, 1080, 1120, 504 * 1120),  # landscape
    ],
)
def test_longest_side_pixels(w, h, res, expected):
    assert longest_side_pixels(w, h, res) == expected


def test_paper_recipe_on_the_paper_profile():
    cfg = load_config("paper-3b")
    s = cfg.replace(sft_updates(cfg))
    # the paper profiles' default data set is AndroidControl: AgentCPM-GUI's AndroidControl rule scores it
    assert (s.sft.output_format, s.sft.system_prompt, s.eval.protocol) == ("agentcpm", None, "agentcpm_androidcontrol")
    for source, protocol in (
        ("guiodyssey", "agentcpm"),
        ("minigui", "agentcpm"),
        ("androidcontrol", "agentcpm_androidcontrol"),
    ):
        other = load_config(
            "paper-3b",
            source if source != "minigui" else None,
            [f"data.source={source}"] if source == "minigui" else None,
        )
        assert other.replace(sft_updates(other)).eval.protocol == protocol, source
    assert (s.sft.learning_rate, s.sft.epochs, s.sft.max_steps, s.sft.warmup_ratio) == (1e-5, 3, None, 0.05)  # Table 4
    assert s.sft.per_device_batch_size * s.sft.grad_accum == 1 and s.sft.lr_scheduler_type == "cosine"
    assert s.sft.histories == ["3AO"] and s.model.max_pixels == 504 * 1120  # 3 turns; longest side 1120
    assert s.runtime.activation_checkpointing is False
    r = cfg.replace(rft_updates(cfg, n_train_steps=1000))
    assert (r.rl.role, r.rl.reward, r.rl.dapo_std_threshold) == ("grpo", "agentcpm", None)
    assert (r.rl.group_size, r.rl.max_new_tokens, r.rl.learning_rate, r.rl.beta) == (8, 512, 1e-6, 0.04)  # Table 5
    assert (r.rl.weight_decay, r.rl.max_grad_norm, r.rl.micro_batch_size, r.rl.mini_batches) == (0.1, 1.0, 1, 1)
    # 1 x 32 accumulation x 8 GPUs = 256 completions per update = 32 prompts x 8 generations
    assert r.rl.prompts_per_step == 32
    assert r.rl.max_steps == math.ceil(3 * 1000 / 32)  # 3 epochs over the training steps (one history)


def test_the_tiny_recipe_trains_with_the_tiny_profiles_values():
    cfg = load_config("tiny", "07_agentcpm_androidlong.tiny")
    s = cfg.replace(sft_updates(cfg))
    assert s.sft.system_prompt == "agentcpm_short" and s.sft.learning_rate == cfg.sft.learning_rate
    assert s.sft.max_steps == cfg.agentcpm.sft.max_steps and s.model.max_pixels == cfg.model.max_pixels
    r = cfg.replace(rft_updates(cfg, n_train_steps=1000))
    assert r.rl.max_steps == cfg.agentcpm.rft.max_steps and r.rl.learning_rate == cfg.rl.learning_rate


# ----------------------------------------------------------------------------- hypothesis: what the reward reads
points = st.tuples(st.integers(0, 1000), st.integers(0, 1000))


@given(points)
def test_integer_points_inside_the_box_and_only_those_earn_1(p):
    text = f'{{"POINT":[{p[0]},{p[1]}]}}'
    inside = 400 <= p[0] <= 600 and 400 <= p[1] <= 500
    assert reward_of(text) == (1.0 if inside else 0.0)
