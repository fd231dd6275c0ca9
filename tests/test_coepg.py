"""Co-EPG end to end (guirl.methods.coepg; the loop of guirl.studies.coepg_iterations):

* C-DREM's weightings (eq. 5 and the Table 4 ablations) and gates on hand-computed cases;
* the grounder's confidence (eq. 6) equals a manual log-softmax over the coordinate tokens of a
  real tiny-model forward pass;
* the verifier keeps exactly the plans whose grounded points are inside the target box;
* the pools keep the latest two models;
* the loop resumes after a kill between iterations at the last finished model;
* the P-G dual model answers offline and online through the shared loops;
* the stage configs carry the paper's App. B values; the paper-3b GRPO stage of the planner runs
  through ``accelerate launch`` on CPU with tiny checkpoints.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import stage_of
from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.config import load_config
from guirl.configbase import Sampling
from guirl.methods.coepg.agent import UNPARSABLE, PlannerGrounderAgent, read_planner
from guirl.methods.coepg.config import grpo_stage_config, sft_stage_config
from guirl.methods.coepg.data import PlanRow, Pool, enhance, is_verified, plan_hits, quality, training_steps
from guirl.methods.coepg.prompts import PlannerPromptSettings, enhancement_text, planner_prompt, planner_text
from guirl.methods.coepg.reward import (
    WEIGHTINGS,
    CoEPGConfig,
    GroundingOutput,
    coepg_plan_reward,
    coepg_reward,
)
from guirl.prompts import format_context
from guirl.rewards.base import GroundTruth
from guirl.rollout import FunctionPolicy

BOX = (0.4, 0.4, 0.6, 0.5)
CLICK_GT = GroundTruth(Action("click", point=(0.5, 0.45)), box=BOX)
TYPE_GT = GroundTruth(Action("type", text="hello world"))
TINY = PlannerPromptSettings(system_prompt="coepg_short", user_template=None, n_history=3)


def ok(a: Action):
    from guirl.actions.types import ParseResult

    return ParseResult(action=a)


# ----------------------------------------------------------------------------- C-DREM by hand
# Three grounders, priors 1:1:2, (mean log-prob, hit): A (-0.2, hit), B (-0.6, miss), C (-0.3, hit).
GROUNDING = [
    {"point": [0.5, 0.45], "token_logprobs": [-0.1, -0.3]},
    {"point": [0.9, 0.9], "token_logprobs": [-0.5, -0.7]},
    {"point": [0.45, 0.42], "token_logprobs": [-0.2, -0.4]},
]


@pytest.mark.parametrize(
    "weighting, weights, plan",
    [
        # eq. 5 literal: softmax(-0.2, -0.6, -0.6) = (0.427234, 0.286383, 0.286383); hits A and C
        ("cdrem", [0.427234, 0.286383, 0.286383], 0.713617),
        # w/o Confidence & Prior Weights: 1/3 each; two of three hit
        ("average", [1 / 3, 1 / 3, 1 / 3], 2 / 3),
        # w/o Confidence Weights: priors as shares 1:1:2 -> 0.25, 0.25, 0.5; A + C = 0.75
        ("prior", [0.25, 0.25, 0.5], 0.75),
        # w/o C-DREM: the trained grounder (last) alone, it hits
        ("single", [0.0, 0.0, 1.0], 1.0),
    ],
)
def test_weightings_by_hand(weighting, weights, plan):
    cfg = CoEPGConfig(priors=(1.0, 1.0, 2.0), weighting=weighting)
    got, w, hits = coepg_plan_reward(GROUNDING, CLICK_GT, cfg)
    assert w == pytest.approx(weights, abs=1e-6) and hits == [True, False, True]
    assert got == pytest.approx(plan, abs=1e-6)
    # eq. 9: the plan reward is the reward when type and value are right, 0 when the type is wrong
    assert coepg_reward(ok(Action("click", point=(0.1, 0.1))), CLICK_GT, grounding=GROUNDING, cfg=cfg).total == (
        pytest.approx(plan, abs=1e-6)
    )
    assert coepg_reward(ok(Action("type", text="x")), CLICK_GT, grounding=GROUNDING, cfg=cfg).total == 0.0
    # a step without a target: the type and value gates alone (F1 0.8 > 0.5 pays, 0.5 does not)
    assert coepg_reward(ok(Action("type", text="hello world again")), TYPE_GT, cfg=cfg).total == 1.0
    assert coepg_reward(ok(Action("type", text="hello there")), TYPE_GT, cfg=cfg).total == 0.0


def test_single_grounder_ignores_the_others_misses():
    # the trained grounder misses: single pays 0 even though both others hit
    g = [GROUNDING[0], GROUNDING[2], GROUNDING[1]]
    assert coepg_plan_reward(g, CLICK_GT, CoEPGConfig(weighting="single"))[0] == 0.0
    assert coepg_plan_reward(g, CLICK_GT, CoEPGConfig(weighting="average"))[0] == pytest.approx(2 / 3)


def test_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="weighting 'median'"):
        CoEPGConfig(weighting="median")  # type: ignore[arg-type]


@given(
    conf=st.lists(st.floats(-5, 0), min_size=3, max_size=3),
    hit=st.lists(st.booleans(), min_size=3, max_size=3),
    weighting=st.sampled_from(WEIGHTINGS),
    reading=st.sampled_from(["logprob", "prob"]),
)
def test_weights_are_a_distribution_and_the_reward_a_weighted_hit_rate(conf, hit, weighting, reading):
    g = [GroundingOutput(point=(0.5, 0.45) if h else (0.95, 0.95), token_logprobs=(c,)) for c, h in zip(conf, hit)]
    cfg = CoEPGConfig(priors=(1.0, 1.0, 2.0), confidence=reading, weighting=weighting)
    plan, w, hits = coepg_plan_reward(g, CLICK_GT, cfg)
    assert hits == hit and all(x >= 0 for x in w) and sum(w) == pytest.approx(1.0)
    assert plan == pytest.approx(sum(x for x, h in zip(w, hit) if h)) and 0.0 <= plan <= 1.0 + 1e-12


# ----------------------------------------------------------------------------- confidence (eq. 6)
@pytest.fixture(scope="module")
def tiny_model() -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model()


@pytest.mark.slow
def test_confidence_is_a_manual_log_softmax_over_the_coordinate_tokens(tiny_model, minigui):
    import torch

    from guirl.data.splits import load_splits
    from guirl.methods.coepg.grounding import coordinate_logprobs, coordinate_token_mask
    from guirl.methods.coepg.prompts import grounder_prompt
    from guirl.models import load_model, load_processor
    from guirl.rollout import open_image

    model, proc = load_model(tiny_model), load_processor(tiny_model, min_pixels=3136, max_pixels=141120)
    train = load_splits(minigui)["train"]
    shots = [f"{train.image_root}/{train.episodes[i].steps[0].screenshot}" for i in (0, 1)]
    prompts = [grounder_prompt(TINY, shots[0], "Tap the Contacts icon"), grounder_prompt(TINY, shots[1], "Send")]
    answers = [proc.tokenizer("(140, 252)")["input_ids"] + [proc.tokenizer.convert_tokens_to_ids("<|im_end|>")]]
    answers.append(proc.tokenizer("(7, 31)")["input_ids"])  # a shorter answer: right padding in the batch
    got = coordinate_logprobs(model, proc, prompts, answers)
    for prompt, ids, lp in zip(prompts, answers, got, strict=True):
        # by hand: the prompt alone through the processor, the answer appended, one forward, log-softmax
        text = proc.apply_chat_template(prompt[0], add_generation_prompt=True, tokenize=False)
        enc = proc(text=[text], images=[[open_image(prompt[1][0])]], return_tensors="pt")
        p = enc["input_ids"].shape[1]
        ids_t = torch.tensor([ids])
        full = {
            "input_ids": torch.cat([enc["input_ids"], ids_t], 1),
            "attention_mask": torch.ones(1, p + len(ids), dtype=torch.long),
            "pixel_values": enc["pixel_values"],
            "image_grid_thw": enc["image_grid_thw"],
            "mm_token_type_ids": torch.cat([enc["mm_token_type_ids"], torch.zeros(1, len(ids), dtype=torch.long)], 1),
        }
        with torch.no_grad():
            logits = model(**full).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        manual = [
            float(logp[p - 1 + i, tok])
            for i, tok in enumerate(ids)
            if any(c.isdigit() for c in proc.tokenizer.decode([tok]))
        ]
        assert len(manual) == sum(coordinate_token_mask(proc.tokenizer, ids)) == len(lp)
        assert lp == pytest.approx(manual, abs=1e-4)
    assert len(got[0]) == 6 and len(got[1]) == 3  # the digits of 140, 252 and of 7, 31
    # eq. 6: the confidence is their mean
    from guirl.methods.coepg.reward import grounding_confidence

    assert grounding_confidence(got[0]) == pytest.approx(sum(got[0]) / 6)


# ----------------------------------------------------------------------------- verification
@pytest.mark.parametrize(
    "points, rule, kept",
    [
        ([(0.5, 0.45), (0.41, 0.49)], "all", True),  # both inside
        ([(0.5, 0.45), (0.7, 0.45)], "all", False),  # one outside
        ([(0.5, 0.45), (0.7, 0.45)], "any", True),
        ([(0.6, 0.5), (0.4, 0.4)], "all", True),  # on the edges: inside (eq. 3, the box)
        ([None, (0.5, 0.45)], "all", False),  # a verifier with no point misses
        ([], "any", False),  # no verifier: nothing is verified
    ],
)
def test_verifier_keeps_a_plan_when_its_points_are_in_the_box(points, rule, kept):
    hits = plan_hits(points, CLICK_GT.action, BOX)
    assert is_verified(hits, rule) == kept


@given(
    box=st.tuples(st.floats(0, 0.5), st.floats(0, 0.5), st.floats(0.01, 0.5), st.floats(0.01, 0.5)),
    points=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=3),
)
def test_verified_iff_every_point_is_inside_the_box(box, points):
    b = (box[0], box[1], box[0] + box[2], box[1] + box[3])
    inside = [b[0] <= x <= b[2] and b[1] <= y <= b[3] for x, y in points]
    hits = plan_hits(points, Action("click", point=((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)), b)
    assert hits == inside and is_verified(hits, "all") == all(inside) and is_verified(hits, "any") == any(inside)


class FakeGrounder:
    """A verifier that answers each plan with a fixed point (``table[plan]``)."""

    def __init__(self, table):
        self.table = table

    def ground(self, queries):
        return [GroundingOutput(point=self.table.get(plan)) for _, _, plan in queries]


def test_enhance_keeps_exactly_the_verified_plans(minigui):
    from guirl.data.splits import load_splits

    train = load_splits(minigui)["train"]
    steps = training_steps(train.episodes, train.image_root, 12)
    coord = [r for r in steps if r.step.action.type.value in ("click", "long_press")]
    assert coord and len(coord) < len(steps)

    def planner(plans):
        return FunctionPolicy(lambda prompt: [f"<plan>{p}</plan><action>click</action><value></value>" for p in plans])

    # for every step: "good" lands on the step's own target, "edge" only for verifier 0, "bad" nowhere
    def table(j, ref):
        x1, y1, x2, y2 = ref.step.target_box
        centre = ((x1 + x2) / 2, (y1 + y2) / 2)
        return {"good": centre, "edge": centre if j == 0 else (2.0, 2.0), "bad": (2.0, 2.0)}

    class PerStep:
        def __init__(self, j):
            self.j = j

        def ground(self, queries):
            out = []
            for shot, _, plan in queries:
                ref = next(r for r in coord if r.screenshot() == shot)
                out.append(GroundingOutput(point=table(self.j, ref)[plan]))
            return out

    rows = enhance(
        steps,
        [("p0", lambda: planner(["good", "bad"])), ("p1", lambda: planner(["edge", "good"]))],
        [lambda: PerStep(0), lambda: PerStep(1)],
        TINY,
        history_format="ccpo",
        min_pixels=3136,
        max_pixels=141120,
        n=2,
        sampling=Sampling(do_sample=True, temperature=1.0),
        seed=0,
        verify="all",
    )
    plans = [r for r in rows if r.coordinate]
    assert {(r.plan, r.verified, r.keep) for r in plans} == {
        ("good", True, True),
        ("bad", False, False),
        ("edge", False, False),
    }
    assert all(r.planner == "p0" for r in plans if r.plan == "good")  # a repeated plan counts once, first proposer
    assert [r.hits for r in plans if r.plan == "edge"][0] == (True, False)
    free = [r for r in rows if not r.coordinate]  # steps without a target: kept once, plan None
    assert len(free) == len(steps) - len(coord) and all(r.keep and r.plan is None for r in free)
    q = quality(rows)
    assert q["purity"] == pytest.approx(1 / 3) and q["diversity"] == 3 and q["steps_kept"] == len(coord)


def test_quality_on_hand_rows():
    rows = [
        PlanRow("e", 0, "p", "a", True, (True,), True, True),
        PlanRow("e", 0, "p", "b", True, (False,), False, False),
        PlanRow("e", 1, "p", "a", True, (False,), False, False),
        PlanRow("e", 1, "p", None, True),  # an unparsable sample
        PlanRow("e", 2, "annotation", None, False, (), False, True),
    ]
    q = quality(rows)
    assert q["purity"] == pytest.approx(1 / 3) and q["diversity"] == pytest.approx(1.5)
    assert (q["plans_generated"], q["plans_verified"], q["unparsable"], q["steps"], q["steps_kept"], q["records"]) == (
        3,
        1,
        1,
        2,
        1,
        2,
    )
    assert q["verified_per_step"] == pytest.approx(0.5)


# ----------------------------------------------------------------------------- pools
@pytest.mark.parametrize(
    "start, added, expected",
    [
        (("v0", "v1"), ["phi1"], ("v1", "phi1")),
        (("v0", "v1"), ["phi1", "phi2"], ("phi1", "phi2")),
        (("v0", "v1"), ["phi1", "phi2", "phi3"], ("phi2", "phi3")),
        (("a", "b", "c"), [], ("b", "c")),  # more than two to start with: the latest two
        (("a",), ["b"], ("a", "b")),
    ],
)
def test_pools_keep_the_latest_two(start, added, expected):
    pool = Pool(start)
    for m in added:
        pool = pool.add(m)
    assert pool.members == expected


def test_pool_of_one_keeps_the_newest():
    assert Pool(("a", "b"), size=1).add("c").members == ("c",)


# ----------------------------------------------------------------------------- prompts, agent
def test_planner_prompt_history_and_enhancement():
    msgs, images = planner_prompt(TINY, "Send hi", ["a0", "a1", "a2", "a3"], "cur.png", enhancement="EXTRA")
    text = "".join(c.get("text", "") for c in msgs[1]["content"])
    assert images == ["cur.png"] and "Step 2: a1" in text and "a0" not in text  # the last 3 shown
    assert text.endswith("EXTRA") and msgs[1]["content"][1] == {"type": "image"}
    paper = PlannerPromptSettings()  # Table 12 high-level layout
    msgs, _ = planner_prompt(paper, "Send hi", ["a0"], "cur.png")
    assert "The current user goal/request is: Send hi" in msgs[1]["content"][0]["text"]
    assert msgs[0]["content"][0]["text"] == "You are a helpful assistant."


def test_mind2web_prompt_lists_the_referring_elements():
    """Co-EPG Table 9: the Mind2Web planner prompt shows the step's referring elements as lettered options;
    Table 12's AndroidControl prompt has no such slot and ignores them."""
    from guirl.methods.coepg.prompts import elements_text

    web = PlannerPromptSettings(user_template="coepg_mind2web")
    msgs, _ = planner_prompt(web, "Buy shoes", ["CLICK a"], "cur.png", elements=["<button> x", '<input> type="text"'])
    text = msgs[1]["content"][0]["text"]
    assert "Buy shoes" in text and "Step 1: CLICK a" in text
    assert 'A. <button> x\nB. <input> type="text"' in text and "{elements}" not in text
    assert "None" in planner_prompt(web, "Buy shoes", [], "cur.png")[0][1]["content"][0]["text"]
    msgs, _ = planner_prompt(PlannerPromptSettings(), "Send hi", [], "cur.png", elements=["<button> x"])
    assert "<button> x" not in msgs[1]["content"][0]["text"]
    assert elements_text([]) == "None"
    assert elements_text([f"e{i}" for i in range(28)]).splitlines()[25:] == ["Z. e25", "AA. e26", "AB. e27"]


def test_the_paper_recipe_takes_table_9s_prompt_on_mind2web():
    from guirl.config import load_config

    for profile in ("paper-3b", "paper-7b"):
        assert load_config(profile, "mind2web").coepg.user_template == "coepg_mind2web"
        assert load_config(profile).coepg.user_template == "coepg_androidcontrol_high"  # Table 12 on AndroidControl
        assert (
            load_config(profile, "mind2web", overrides=["coepg.user_template=null"]).coepg.user_template is None
        )  # an override wins
    assert load_config("tiny").coepg.user_template is None


def test_the_coepg_agent_passes_a_turns_referring_elements():
    from guirl.methods.coepg.agent import PlannerGrounderAgent
    from guirl.rollout.agents import Turn

    seen = []

    class Planner:
        def complete(self, prompts, **kw):
            seen.extend(prompts)
            return [
                [type("C", (), {"text": "<plan>None</plan><action>complete</action><value></value>"})()]
                for _ in prompts
            ]

    agent = PlannerGrounderAgent(
        Planner(),
        None,
        PlannerPromptSettings(user_template="coepg_mind2web"),
        min_pixels=3136,
        max_pixels=141120,
        output_format="coepg_planner",
    )
    turn = Turn(key="e", instruction="Buy", history=(), screenshot="s.png", screen_size=(200, 100), elements=("<a> x",))
    agent.act([turn])
    assert "A. <a> x" in seen[0][0][1]["content"][0]["text"]


def test_enhancement_text_names_the_correct_action_value_and_box():
    ctx = format_context((280, 504), 3136, 141120)
    t = enhancement_text(Action("type", text="hi there"), (0.1, 0.2, 0.5, 0.3), ctx.space("resized"))
    assert "ACTION: type" in t and "VALUE: hi there" in t and "ELEMENT_BBOX: [28, 101, 140, 151]" in t
    assert planner_text(Action("click", point=(0.1, 0.1)), "the Send button").startswith("<plan>the Send button</plan>")


@pytest.mark.parametrize(
    "text, needs, plan, ok",
    [
        ("<plan>Send</plan><action>click</action><value></value>", True, "Send", True),
        ("<plan>None</plan><action>type</action><value>hi</value>", False, None, True),
        ("<plan></plan><action>click</action><value></value>", True, None, False),  # a target needs a plan
        ("<action>scroll</action><value>down</value>", False, None, True),
        ("nothing", True, None, False),
    ],
)
def test_read_planner(text, needs, plan, ok):
    a = read_planner(text)
    assert (a.needs_point, a.plan, a.ok) == (needs, plan, ok)


def _agent(planner_texts, grounder_text="(56, 101)"):
    planner = FunctionPolicy(lambda prompt: planner_texts[0])
    grounder = FunctionPolicy(lambda prompt: grounder_text)
    agent = PlannerGrounderAgent(planner, grounder, TINY, min_pixels=3136, max_pixels=141120, output_format="ccpo")
    return agent, planner, grounder


def test_agent_combines_the_planners_type_with_the_grounders_point():
    from guirl.rollout import Turn

    turn = Turn("e", "goal", (("a0", "s0.png"),), "cur.png", (280, 504))
    agent, _, grounder = _agent(["<plan>Send</plan><action>click</action><value></value>"])
    [step] = agent.act([turn])
    ctx = format_context((280, 504), 3136, 141120)
    a = get_format("ccpo").parse(step.text, ctx).action
    assert a.type.value == "click" and a.point == pytest.approx((56 / 280, 101 / 504), abs=1e-9)
    assert step.info["plan"] == "Send" and step.info["grounder"] == "(56, 101)"
    assert grounder.calls[0][0][0][0][1]["content"][1]["text"] == "Send"  # the grounder reads the plan
    agent, _, grounder = _agent(["<plan>None</plan><action>type</action><value>hi</value>"])
    [step] = agent.act([turn])
    assert get_format("ccpo").parse(step.text, ctx).action == Action("type", text="hi") and not grounder.calls
    agent, _, _ = _agent(["<plan>x</plan><action>click</action><value></value>"], grounder_text="no point")
    assert agent.act([turn])[0].text.startswith(UNPARSABLE)
    agent, _, _ = _agent(["???"])
    assert agent.act([turn])[0].text.startswith(UNPARSABLE)


def test_agent_is_evaluated_offline_and_plays_online(minigui):
    from guirl.data.splits import load_splits
    from guirl.env.tasks import generate_tasks
    from guirl.prompts import PromptSpec
    from guirl.rollout import play_online
    from guirl.studies.shared.evaluation import evaluate_offline

    agent, planner, _ = _agent(["<plan>the first item</plan><action>click</action><value></value>"])
    split = load_splits(minigui)["train"]
    spec = PromptSpec("ccpo", 3, "nA", system_prompt="ccpo_short")
    recs = evaluate_offline(
        agent,
        split.episodes,
        spec,
        protocol="ccpo_androidcontrol_fixed",
        image_root=split.image_root,
        min_pixels=3136,
        max_pixels=141120,
        model_name="dual",
        split="test_in_domain",
        max_steps=5,
    )
    assert len(recs) == 5 and all(r["parse_ok"] and r["pred_type"] == "click" for r in recs)
    # the planner saw the ground-truth history written in the run's format (ccpo)
    second = planner.calls[1][0][0][0][1]["content"][0]["text"]
    assert "Previous actions:\nStep 1: <action>" in second
    out = play_online(
        agent,
        generate_tasks(1, seed=3),
        spec,
        width=280,
        height=504,
        max_turns=2,
        min_pixels=3136,
        max_pixels=141120,
        progress=False,
    )
    assert out[0]["turns"] == 2 and out[0]["n_unparsable"] == 0 and out[0]["agent_info"][0]["plan"] == "the first item"


# ----------------------------------------------------------------------------- Co-EPG's own evaluation
def test_low_level_prompt_shows_the_step_instruction():
    # Table 12: the low-level prompt adds the step's instruction; Table 2 reports High and Low
    from guirl.methods.coepg.prompts import at_level

    low = at_level(PlannerPromptSettings(), "Low")
    assert (low.user_template, low.level) == ("coepg_androidcontrol_low", "Low")
    msgs, _ = planner_prompt(low, "Send hi", ["a0"], "cur.png", step_instruction="tap the Send button")
    text = msgs[1]["content"][0]["text"]
    assert "The current user goal/request is: Send hi" in text and "tap the Send button" in text
    assert at_level(low, "High") == PlannerPromptSettings()
    with pytest.raises(ValueError, match="pass step_instruction"):
        planner_prompt(low, "Send hi", [], "cur.png")
    tiny_low = at_level(TINY, "Low")  # this project's layout: a "Step instruction:" line
    msgs, _ = planner_prompt(tiny_low, "Send hi", [], "cur.png", step_instruction="tap Send")
    assert "Step instruction: tap Send" in msgs[1]["content"][0]["text"]
    with pytest.raises(ValueError, match="does not fit level 'Low'"):
        PlannerPromptSettings(level="Low")  # the high-level template at the Low level
    with pytest.raises(ValueError, match="no Low-level version"):
        at_level(PlannerPromptSettings(user_template="coepg_mind2web"), "Low")


def test_agent_at_the_low_level_reads_each_turns_step_instruction():
    from guirl.methods.coepg.evaluation import agent_at_level
    from guirl.rollout import Turn

    agent, planner, _ = _agent(["<plan>Send</plan><action>click</action><value></value>"])
    low = agent_at_level(agent, "Low")
    turn = Turn("e", "goal", (), "cur.png", (280, 504), step_instruction="tap the Send button")
    low.act([turn])
    assert "Step instruction: tap the Send button" in planner.calls[-1][0][0][0][1]["content"][0]["text"]
    agent.act([turn])  # the High agent it came from is unchanged
    assert "Step instruction" not in planner.calls[-1][0][0][0][1]["content"][0]["text"]


def test_a_typing_plan_that_names_an_element_is_grounded():
    # Mind2Web (Table 9): TYPE acts on an ELEMENT, so the grounder locates it; a type whose plan is
    # "None" (AndroidControl's input_text into the focused field) is not grounded
    from guirl.rollout import Turn

    turn = Turn("e", "goal", (), "cur.png", (280, 504))
    ctx = format_context((280, 504), 3136, 141120)
    agent, _, grounder = _agent(["<plan>the search box</plan><action>type</action><value>shoes</value>"])
    [step] = agent.act([turn])
    a = get_format("ccpo").parse(step.text, ctx).action
    assert a.type.value == "type" and a.text == "shoes" and a.point == pytest.approx((56 / 280, 101 / 504), abs=1e-9)
    assert grounder.calls and step.info["grounder"] == "(56, 101)"
    agent, _, _ = _agent(["<plan>the search box</plan><action>type</action><value>shoes</value>"], "no point")
    [step] = agent.act([turn])
    assert get_format("ccpo").parse(step.text, ctx).action == Action("type", text="shoes")  # still typed


def test_typing_step_with_an_element_earns_the_plan_reward():
    # a Mind2Web TYPE gt has the element's point and box: C-DREM rewards the plan that grounds inside it
    gt = GroundTruth(Action("type", text="blue shoes", point=(0.5, 0.45)), box=BOX)
    hit = [{"point": [0.5, 0.45], "token_logprobs": [-0.1]}]
    miss = [{"point": [0.9, 0.9], "token_logprobs": [-0.1]}]
    cfg = CoEPGConfig(priors=())
    typed = ok(Action("type", text="blue shoes", extra={"plan": "the search box"}))
    assert coepg_reward(typed, gt, grounding=hit, cfg=cfg).total == 1.0
    assert coepg_reward(typed, gt, grounding=miss, cfg=cfg).total == 0.0
    assert coepg_reward(typed, gt, grounding=(), cfg=cfg).total == 0.0  # no element named: no plan reward
    # AndroidControl's input_text has no point: judged by its value alone
    assert coepg_reward(ok(Action("type", text="hello world")), TYPE_GT, cfg=cfg).total == 1.0


def test_coepg_scores_with_its_own_protocol():
    from guirl.methods.coepg.evaluation import eval_levels, eval_protocol

    assert [eval_protocol(s) for s in ("androidcontrol", "minigui", "mind2web", "ccpo_mind2web")] == [
        "coepg",
        "coepg",
        "coepg_mind2web",
        "coepg_mind2web",
    ]
    assert eval_levels(PlannerPromptSettings()) == ("High", "Low") and eval_levels(TINY) == ("High",)


def _m2w_rec(model, split, task, pred, gt, box=BOX, exact=False):
    return {
        "model": model,
        "split": split,
        "episode_id": task,
        "pred_action": None if pred is None else pred.to_dict(),
        "gt_action": gt.to_dict(),
        "gt_box": list(box),
        "exact": exact,
    }


def test_mind2web_table_by_hand():
    # per split: Ele.Acc, Op.F1, Step SR, each averaged over a task's steps then over tasks; Avg SR is
    # the mean of the three splits' Step SR (Co-EPG Table 1)
    click = Action("click", point=(0.5, 0.45))
    typed = Action("type", text="blue shoes", point=(0.5, 0.45))
    recs = [
        # test_task: task t1 two steps (a right click; a type at the element with a half-right value),
        # task t2 one step (a click outside the box)
        _m2w_rec("M", "test_task", "t1", click, click),
        _m2w_rec("M", "test_task", "t1", Action("type", text="blue", point=(0.5, 0.45)), typed),
        _m2w_rec("M", "test_task", "t2", Action("click", point=(0.9, 0.9)), click),
        # test_website: one right step; test_domain: one unparsable step
        _m2w_rec("M", "test_website", "w1", typed, typed),
        _m2w_rec("M", "test_domain", "d1", None, click),
    ]
    from guirl.methods.coepg.evaluation import mind2web_table

    row = mind2web_table(recs, ["M"]).iloc[0]
    # t1: element 2/2, Op.F1 (1 + F1("type blue", "type blue shoes") = 0.8) / 2 = 0.9, SR 1/2; t2: 0, 1, 0
    assert row["test_task Ele.Acc"] == pytest.approx(50.0)
    assert row["test_task Op.F1"] == pytest.approx(95.0)
    assert row["test_task Step SR"] == pytest.approx(25.0)
    assert (row["test_website Step SR"], row["test_domain Step SR"], row["test_domain Op.F1"]) == (100.0, 0.0, 0.0)
    assert row["Avg SR"] == pytest.approx((25.0 + 100.0 + 0.0) / 3) and row["n_steps"] == 5


def test_androidcontrol_table_by_hand():
    from guirl.methods.coepg.evaluation import androidcontrol_table

    recs = [{"model": "M", "level": "High", "exact": e} for e in (True, False, False, True)]
    recs += [{"model": "M", "level": "Low", "exact": e} for e in (True, True, True, False)]
    recs += [{"model": "M", "level": "Low", "exact": False, "counted": False}]  # not in the denominator
    recs += [{"model": "N", "exact": True}]  # no level label: High; no Low evaluated
    t = androidcontrol_table(recs, ["M", "N"])
    assert t.iloc[0][["High", "Low", "Avg Acc", "n High", "n Low"]].tolist() == [50.0, 75.0, 62.5, 4, 4]
    assert t.iloc[1]["High"] == 100.0 and math.isnan(t.iloc[1]["Avg Acc"])


# ----------------------------------------------------------------------------- stage configs
def test_stage_configs_carry_the_papers_app_b_values():
    cfg = load_config("paper-3b")
    s = sft_stage_config(cfg)
    # App. B: lr 1e-6, 3 epochs, cosine; global batch 96 = 1 per GPU x 8 GPUs x 12 accumulation
    assert (s.sft.learning_rate, s.sft.epochs, s.sft.lr_scheduler_type, s.sft.grad_accum) == (1e-6, 3, "cosine", 12)
    assert s.model.max_pixels == 802816  # App. B: 1024 x 28 x 28
    g = grpo_stage_config(cfg, n_tasks=6862)
    r = g.rl
    # App. B: 7 rollouts, temperature 0.9, lr 5e-7, batch 294 = 42 groups, KL 0.01, clip 0.2, 3 epochs
    assert (r.role, r.group_size, r.temperature, r.learning_rate, r.prompts_per_step) == (
        "coepg.planner",
        7,
        0.9,
        5e-7,
        42,
    )
    assert (r.beta, r.eps_low, r.eps_high, r.dapo_std_threshold) == (0.01, 0.2, 0.2, None)
    assert r.max_steps == math.ceil(3 * 6862 / 42)
    assert g.coepg.reward_config() == CoEPGConfig(priors=(1.0, 1.0, 2.0), confidence="logprob", weighting="cdrem")
    # a kernel key set in a later layer wins over Co-EPG's value, and the resolved config shows it
    o = load_config("paper-3b", overrides=["rl.learning_rate=3e-6", "sft.grad_accum=6"])
    assert o.coepg.grpo.learning_rate == 3e-6 and grpo_stage_config(o, n_tasks=10).rl.learning_rate == 3e-6
    assert o.coepg.sft.grad_accum == 6 and sft_stage_config(o).sft.grad_accum == 6


# ----------------------------------------------------------------------------- the loop: resume
class FakeRunner:
    """Trains a stage by writing its ``final/`` folder and ``result.json``; a stage whose
    ``result.json`` was written from the same inputs (the records file's bytes, the base model, the
    grounders: what :func:`guirl.train.launch.stage_fingerprint` covers) is reused, as
    :func:`guirl.train.launch.run_stage` does; other inputs retrain it. ``kill_at``: raise when a
    stage of that folder name is about to train (a kill)."""

    def __init__(self, kill_at=None):
        self.trained, self.reused, self.kill_at = [], [], kill_at

    @staticmethod
    def fingerprint(stage) -> str:
        import hashlib

        parts = [str(stage.base_model)] + [
            f"{k}={hashlib.sha256(v.read_bytes()).hexdigest() if v.is_file() else v}"
            for k, v in sorted(stage.inputs.items())
        ]
        return "|".join(parts)

    def __call__(self, stages, parallel):
        out = []
        for s in stages:
            done = s.output_dir / "result.json"
            rel = str(s.output_dir.relative_to(s.output_dir.parents[1]))
            if done.is_file() and json.loads(done.read_text())["fingerprint"] == self.fingerprint(s):
                self.reused.append(rel)
                out.append(json.loads(done.read_text()))
                continue
            if self.kill_at is not None and self.kill_at in str(s.output_dir):
                raise KeyboardInterrupt(f"killed before {s.output_dir}")
            (s.output_dir / "final").mkdir(parents=True, exist_ok=True)
            res = {
                "final": str(s.output_dir / "final"),
                "base_model": str(s.base_model),
                "fingerprint": self.fingerprint(s),
            }
            done.write_text(json.dumps(res))
            self.trained.append(rel)
            out.append(res)
        return out


def test_loop_resumes_after_a_kill_between_iterations(minigui, tmp_path):
    from guirl.methods.coepg.data import annotation_rows, write_rows
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny", overrides=["coepg.max_train_steps=30", "coepg.iterations=3", "coepg.n_runs=1"])
    s = ci.setup(cfg, run_dir=tmp_path / "run", start=tmp_path / "start", data_dir=minigui)
    built = []

    def builder(st, k, planners, verifiers):
        path = st.run_dir / "data" / f"D{k}.jsonl"
        meta = {"k": k, "planners": list(planners.members), "verifiers": list(verifiers.members)}
        if not path.is_file() or ci.read_rows(path)[0] != meta:
            built.append((k, planners.members, verifiers.members))
            write_rows(path, annotation_rows(st.steps), meta)
        return path

    first = FakeRunner(kill_at="iter2")
    with pytest.raises(KeyboardInterrupt):
        ci.run_iterations(cfg, s=s, runner=first, builder=builder, progress=False)
    # before the kill: the pools, D_0, iteration 1 (SFT x2, the end-to-end baseline, GRPO) and D_1
    assert first.trained == [
        "pool/planner0", "pool/planner1", "pool/verifier0", "pool/verifier1",
        "iter1/planner_sft", "iter1/grounder_sft", "run/e2e", "iter1/planner_grpo",
    ]  # fmt: skip
    assert [b[0] for b in built] == [0, 1]
    again = FakeRunner()
    loop = ci.run_iterations(cfg, s=s, runner=again, builder=builder, progress=False)
    # the second call reuses every finished model and data set and trains from iteration 2 on
    assert set(again.reused) == set(first.trained)
    assert again.trained == [
        "iter2/planner_sft", "iter2/grounder_sft", "iter2/planner_grpo",
        "iter3/planner_sft", "iter3/grounder_sft", "iter3/planner_grpo",
    ]  # fmt: skip
    assert [b[0] for b in built] == [0, 1, 2]  # D_0 and D_1 were not built again
    # the pools rotate: D_1 from {Pi_0's second model, pi'_1} and {Phi_0's second, phi_1}; D_2 from the iterations'
    run = tmp_path / "run"
    assert built[1][1] == (str(run / "pool/planner1/final"), str(run / "iter1/planner_grpo/final"))
    assert built[1][2] == (str(run / "pool/verifier1/final"), str(run / "iter1/grounder_sft/final"))
    assert built[2][1] == (str(run / "iter1/planner_grpo/final"), str(run / "iter2/planner_grpo/final"))
    assert built[2][2] == (str(run / "iter1/grounder_sft/final"), str(run / "iter2/grounder_sft/final"))
    # C-DREM's ensemble: the fixed auxiliary grounders (the verifier pool models) and phi_k last
    assert loop.ensemble(3) == [
        str(run / "pool/verifier0/final"),
        str(run / "pool/verifier1/final"),
        str(run / "iter3/grounder_sft/final"),
    ]
    assert [it.k for it in loop.iterations] == [1, 2, 3] and sorted(loop.data) == [0, 1, 2]
    assert all(Path(it.planner_sft["base_model"]) == tmp_path / "start" for it in loop.iterations)  # SFT from the start


def test_the_loop_resolves_each_batchs_length_before_it_trains(minigui, tmp_path):
    from guirl.methods.coepg.data import annotation_rows, write_rows
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny", overrides=["coepg.max_train_steps=20", "coepg.iterations=2", "coepg.n_runs=1"])
    s = ci.setup(cfg, run_dir=tmp_path / "run", start=tmp_path / "start", data_dir=minigui)

    def builder(st, k, planners, verifiers):
        return write_rows(st.run_dir / "data" / f"D{k}.jsonl", annotation_rows(st.steps), {"k": k})

    runner, calls = FakeRunner(), []

    def on_schedule(kind, rows):  # called before the batch trains: none of its stages is trained yet
        calls.append((kind, list(rows["stage"]), len(runner.trained)))

    loop = ci.run_iterations(cfg, s=s, runner=runner, builder=builder, on_schedule=on_schedule, progress=False)
    pools = [ci.pool_label(kind, j) for kind in ("planners", "verifiers") for j in range(cfg.coepg.pool_size)]
    it1 = [ci.sft_label(1, "planner"), ci.sft_label(1, "grounder"), ci.E2E_LABEL]
    it2 = [ci.sft_label(2, "planner"), ci.sft_label(2, "grounder")]
    assert calls == [
        ("sft", pools, 0),
        ("sft", it1, 4),
        ("rl", [ci.grpo_label(1, 0)], 7),
        ("sft", it2, 8),
        ("rl", [ci.grpo_label(2, 0)], 10),
    ]
    # the loop keeps the rows; their labels are the stage table's rows
    assert list(loop.schedule["stage"]) == pools + it1 + it2
    assert list(loop.rl_schedule["stage"]) == [ci.grpo_label(1, 0), ci.grpo_label(2, 0)]
    assert sorted(ci.stage_rows(loop)["stage"]) == sorted([*loop.schedule["stage"], *loop.rl_schedule["stage"]])
    assert (loop.schedule["optimizer_steps"] >= 1).all() and (loop.schedule["kind"] == "records").all()
    grpo_cfg = ci.grpo_stage(s, {"final": "x"}, [], tmp_path / "g").cfg
    assert (loop.rl_schedule["rl_steps"] == grpo_cfg.rl.max_steps).all() and set(loop.rl_schedule["role"]) == {
        "coepg.planner"
    }
    # a records stage's count is its records file's
    assert loop.schedule.set_index("stage").loc[ci.sft_label(1, "planner"), "records"] == len(
        (tmp_path / "run" / "data" / "D0_planner.jsonl").read_text().splitlines()
    )
    # the ablations announce their GRPO runs too, labelled as the stage table labels them
    got = []
    ablations = ci.run_ablations(
        loop,
        ci.ablation_runs(cfg),
        runner=runner,
        on_schedule=lambda kind, rows: got.append((kind, list(rows["stage"]))),
    )
    want = [ci.ablation_label(a.name, 0) for a in ci.ablation_runs(cfg) if not a.main]
    assert got == [("rl", want)]
    assert [r for r in ci.stage_rows(loop, ablations)["stage"] if r.startswith("ablation")] == want


def test_the_loop_prints_each_batch_by_default(minigui, tmp_path, capsys):
    from guirl.methods.coepg.data import annotation_rows, write_rows
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny", overrides=["coepg.max_train_steps=20", "coepg.iterations=1", "coepg.n_runs=1"])
    s = ci.setup(cfg, run_dir=tmp_path / "run", start=tmp_path / "start", data_dir=minigui)

    def builder(st, k, planners, verifiers):
        return write_rows(st.run_dir / "data" / f"D{k}.jsonl", annotation_rows(st.steps), {"k": k})

    ci.run_iterations(cfg, s=s, runner=FakeRunner(), builder=builder, progress=False)
    out = capsys.readouterr().out
    assert out.count("optimizer_steps") == 2 and out.count("rl_steps") == 1
    assert ci.pool_label("planners", 0) in out and ci.E2E_LABEL in out and ci.grpo_label(1, 0) in out


def test_the_schedule_writer_writes_each_kinds_rows_so_far(tmp_path):
    import pandas as pd

    from guirl.studies import coepg_iterations as ci

    class Tables:
        def __init__(self):
            self.written = {}

        def table(self, name, df, caption=""):
            self.written[name] = (list(df["stage"]), caption)

    report = Tables()
    write = ci.schedule_writer(report, {"sft": "S", "rl": "R"})
    write("sft", pd.DataFrame({"stage": ["a", "b"]}))
    write("rl", pd.DataFrame({"stage": ["g"]}))
    write("sft", pd.DataFrame({"stage": ["c"]}))
    assert report.written == {"sft_schedule": (["a", "b", "c"], "S"), "rl_schedule": (["g"], "R")}


def test_ablation_runs_cover_tables_4_and_5_once_each():
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny")
    runs = ci.ablation_runs(cfg)
    assert sum(a.main for a in runs) == 1 and len(runs) == 11  # 3 Table 4 rows + 7 Table 5 cells + the main run
    t4, t5 = ci.resolve_rows(cfg, ci.table4_rows(cfg)), ci.resolve_rows(cfg, ci.table5_rows())
    assert [a.weighting for _, a in t4] == ["single", "average", "prior", "cdrem"] and t4[3][1].main
    assert len(t5) == 8 and [a.main for _, a in t5].count(True) == 1  # 1:1:2 literal is the main run
    assert {a.name for _, a in t4 + t5} == {a.name for a in runs}


# ----------------------------------------------------------------------------- the GRPO stage (paper-3b dry run)
PAPER_CPU_DRY_RUN = [
    "model.torch_dtype=float32",
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",
    "coepg.model.max_pixels=141120",  # MiniGUI screens at the tiny budget (CPU time)
    "coepg.max_train_steps=8",
    "coepg.grpo.max_steps=2",
    "coepg.grpo.group_size=2",
    "coepg.grpo.prompts_per_step=2",
    "coepg.planner_max_new_tokens=12",
    "coepg.grounder_max_new_tokens=8",
    "rl.rollout_batch_size=4",
]


@pytest.mark.slow
def test_paper_3b_planner_grpo_dry_run_through_accelerate(tiny_model, minigui, tmp_path):
    from guirl.methods.coepg.rl import grounder_inputs
    from guirl.train.launch import run_stage
    from guirl.train.rl import LOG_FILE, RL_ENTRY, read_log

    cfg = load_config("paper-3b", overrides=[f"model.path={tiny_model}", *PAPER_CPU_DRY_RUN, "rl.save_steps=2"])
    cfg = grpo_stage_config(cfg, n_tasks=8)
    assert cfg.lora.enabled and cfg.rl.role == "coepg.planner" and cfg.coepg.grpo.priors == (1.0, 1.0, 2.0)
    assert cfg.coepg.user_template == "coepg_androidcontrol_high"  # the paper's Table 12 prompt
    out = tmp_path / "planner_grpo"
    stage = stage_of(
        cfg, "planner_grpo", data_dir=minigui, base_model=tiny_model, output_dir=out, entry=RL_ENTRY,
        **grounder_inputs([tiny_model, tiny_model, tiny_model]),
    )  # fmt: skip
    result = run_stage(stage, echo=False)
    # full-parameter GRPO: Co-EPG's appendix trains the planner with ZeRO-3 offload at lr 5e-7, no LoRA
    assert result["global_step"] == 2 and result["role"] == "coepg.planner" and result["adapter"] is False
    assert not (out / "final" / "adapter_config.json").exists()
    rows = read_log(out / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2] and all(r["n_generated"] == 4 for r in rows)
    assert all("reward/plan_logprob" in r and "reward/plan_prob" in r for r in rows)


def test_a_data_set_without_verified_plans_trains_no_grounder(minigui, tmp_path):
    from dataclasses import replace

    from guirl.methods.coepg.data import annotation_rows, write_rows
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny", overrides=["coepg.max_train_steps=20", "coepg.iterations=2"])
    s = ci.setup(cfg, run_dir=tmp_path / "run", start=tmp_path / "start", data_dir=minigui)

    def builder(st, k, planners, verifiers):  # every plan failed verification: only steps without a target kept
        rows = [r if not r.coordinate else replace(r, keep=False) for r in annotation_rows(st.steps)]
        return write_rows(st.run_dir / "data" / f"D{k}.jsonl", rows, {"k": k})

    runner = FakeRunner()
    loop = ci.run_iterations(cfg, s=s, runner=runner, builder=builder, progress=False)
    assert not any("grounder_sft" in t for t in runner.trained) and "iter1/planner_sft" in runner.trained
    # phi_k is the model it would have started from, reported as skipped
    assert [it.grounder_sft["final"] for it in loop.iterations] == [str(tmp_path / "start")] * 2
    assert all("no verified plan" in it.grounder_sft["skipped"] for it in loop.iterations)
    assert "skipped" in ci.stage_rows(loop).columns


@pytest.mark.parametrize(
    ("outputs", "counted", "share"),
    [
        (["<action>complete</action>"] * 4, [True] * 4, 100.0),  # a collapsed planner
        (["a", "b", "a", "c"], [True] * 4, 50.0),
        (["a", "b", "c", "d"], [True] * 4, 25.0),
        (["a", "b", "b", "b"], [True, True, False, False], 50.0),  # uncounted steps left out
    ],
)
def test_top_answer_share_flags_a_policy_that_answers_the_same_everywhere(outputs, counted, share):
    from guirl.studies import coepg_iterations as ci

    recs = [{"output": o, "counted": c} for o, c in zip(outputs, counted, strict=True)]
    assert ci.top_answer_share(recs) == pytest.approx(share)
    assert math.isnan(ci.top_answer_share([]))


def test_sr_table_reports_the_top_answer_share_per_model():
    from guirl.studies import coepg_iterations as ci

    cfg = load_config("tiny")
    recs = [
        {"model": m, "split": "s", "output": out, "exact": ex, "type_match": ex, "counted": True}
        for m, outs in (("const", ["x"] * 4), ("varied", ["x", "y", "z", "w"]))
        for out, ex in zip(outs, [True, False, False, True], strict=True)
    ]
    t = ci.sr_table(cfg, recs, ["const", "varied"], ["s"]).set_index("model")
    assert t.loc["const", "top answer (%)"] == 100.0 and t.loc["varied", "top answer (%)"] == 25.0
    assert t.loc["const", "Avg SR"] == 50.0 and t.loc["const", "n_steps"] == 4


def test_03_adds_co_epgs_own_tables_where_the_data_has_them():
    """On a paper profile (AndroidControl's Table 12 prompt) 03 evaluates its models again at the
    Low level and writes Table 2's High / Low / Avg Acc; on Mind2Web the Ele.Acc / Op.F1 table;
    on the tiny profile's layout neither. Scoring names Co-EPG's protocol, not eval.protocol."""
    from guirl.config import load_config
    from guirl.studies import coepg_iterations as ci

    def rec(model, level, exact):
        return {"model": model, "level": level, "exact": exact, "counted": True, "split": "test"}

    high = [rec("M1", "High", True), rec("M1", "High", False)]
    calls = []

    def fake_evaluate(cfg, models, splits, *, labels=None, level="High"):
        calls.append(level)
        return [rec("M1", level, True), rec("M1", level, True)]

    paper = load_config("paper-7b")
    tables, low = ci.own_tables(paper, {"M1": object}, {"test": None}, high, evaluate=fake_evaluate)
    assert calls == ["Low"] and len(low) == 2 and list(tables) == ["table2_levels"]
    row = tables["table2_levels"].iloc[0]
    assert (row["High"], row["Low"], row["Avg Acc"], row["n High"], row["n Low"]) == (50.0, 100.0, 75.0, 2, 2)
    assert ci.scoring_protocol(paper) == "coepg" and paper.eval.protocol == "ccpo"
    m2w = load_config("paper-7b", "mind2web")
    assert ci.scoring_protocol(m2w) == "coepg_mind2web"
    calls.clear()
    step = {"pred_action": None, "gt_action": {"type": "click", "point": [0.5, 0.5]}, "gt_box": [0.4, 0.4, 0.6, 0.6]}
    m2w_records = [{**rec("M1", "High", False), **step, "episode_id": "t1", "split": "test_task"}]
    tables, low = ci.own_tables(m2w, {"M1": object}, {"test_task": None}, m2w_records, evaluate=fake_evaluate)
    assert calls == [] and low == [] and list(tables) == ["table1_mind2web"]  # one instruction level on Mind2Web
    assert tables["table1_mind2web"].iloc[0]["test_task Step SR"] == 0.0
    calls.clear()
    tiny_tables, tiny_low = ci.own_tables(
        load_config("tiny"), {"M1": object}, {"test": None}, high, evaluate=fake_evaluate
    )
    assert (tiny_tables, tiny_low, calls) == ({}, [], [])
