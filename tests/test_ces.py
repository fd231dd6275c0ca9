"""CES (guirl.methods.ces): the role parsers and prompts, task states and warm-up records, the loop
as an agent (memory threaded step to step, the ablations), the RL roles' reward (the format term
reads the trained role's own text, not the Executor's), the failure taxonomy on hand-made cases,
the temporal judgement, the config section and notebook 04's helpers. The stage tests (stage 2
leaves the Coordinator bit-identical, resume after a kill between stages, the paper-profile dry
run) are in tests/test_ces_stages.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.actions.types import Action, ActionType
from guirl.config import load_config
from guirl.data.schema import Episode, Step
from guirl.methods.ces.agent import CESAgent, ExecutorPrompting
from guirl.methods.ces.analysis import (
    FAILURE_KINDS,
    classify_failure,
    failure_counts,
    seen_screens,
    state_judge,
    temporal_pairs,
)
from guirl.methods.ces.data import (
    INITIAL_STATE,
    coordinator_records,
    coordinator_target,
    gt_report_fn,
    sample_steps,
    state_after,
    state_before,
    tracker_records,
)
from guirl.methods.ces.roles import (
    format_think_answer,
    instruction_of,
    parse_ces_coordinator,
    parse_ces_state_tracker,
    state_of,
    tracker_prompt,
    user_turn,
)
from guirl.prompts import PromptSpec
from guirl.rollout import FunctionPolicy, agent_steps
from guirl.rollout.agents import Turn

W, H = 280, 504
BUDGET = dict(min_pixels=3136, max_pixels=141120)
LOW = PromptSpec(
    output_format="ccpo", n_history=1, history_mode="nAO", use_step_instruction=True, system_prompt="ccpo_short"
)
CLICK_OUT = '<action>{"action": "click", "coordinate": [10, 10]}</action>'


# ----------------------------------------------------------------------------- role parsers (moved from actions.formats)
@pytest.mark.parametrize(
    "fn, text, value, reason",
    [
        (parse_ces_coordinator, "<think>plan</think><answer>Open the Gmail app</answer>", "Open the Gmail app", ""),
        (parse_ces_state_tracker, "<answer>\n  Cart has 2 items.  \n</answer>", "Cart has 2 items.", ""),  # whitespace
        (parse_ces_coordinator, "<think>x</think>", None, "no <answer>"),  # missing answer
        (parse_ces_state_tracker, "<answer>  </answer>", None, "empty"),  # empty answer
        (parse_ces_coordinator, None, None, "must be str"),  # not a string
    ],
)
def test_ces_text_outputs(fn, text, value, reason):
    r = fn(text)
    assert r.value == value and r.ok == (value is not None)
    assert reason in r.reason


def test_ces_text_round_trip_and_thought():
    s = format_think_answer("Tap Send", thought="ready")
    r = parse_ces_coordinator(s)
    assert (r.value, r.thought) == ("Tap Send", "ready")
    with pytest.raises(ValueError):
        format_think_answer("  ")


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_ces_text_never_raises(text):
    assert isinstance(parse_ces_state_tracker(text).reason, str)
    assert isinstance(instruction_of(text), str) and isinstance(state_of(text, "prev"), str)


@pytest.mark.parametrize(
    "text, instruction, state",
    [
        ("<think>a</think><answer>Tap Add</answer>", "Tap Add", "Tap Add"),  # the answer
        ("Tap Add", "Tap Add", "Tap Add"),  # no tags: the text as it is
        ("<think>a</think> Tap  Add", "Tap Add", "Tap Add"),  # a thought and a loose answer
        ("<think>only a thought</think>", "", "prev"),  # nothing left: no instruction, the memory kept
        ("", "", "prev"),
    ],
)
def test_instruction_and_state_read_tolerantly(text, instruction, state):
    assert instruction_of(text) == instruction
    assert state_of(text, "prev") == state


def test_user_turn_puts_each_image_where_the_prompt_marks_it():
    msgs, images = user_turn("a <image> b <image>", ["x.png", "y.png"])
    kinds = [c["type"] for c in msgs[0]["content"]]
    assert kinds == ["text", "image", "text", "image"] and images == ["x.png", "y.png"]
    with pytest.raises(ValueError, match="1 <image> marks for 2 images"):
        user_turn("a <image>", ["x", "y"])


def test_tracker_prompt_is_text_only():
    msgs, images = tracker_prompt("goal", "state", "u")
    assert images == [] and isinstance(msgs[0]["content"], str)
    assert "Latest output of executor agent: u" in msgs[0]["content"] and msgs[0]["content"].endswith("state")


# ----------------------------------------------------------------------------- states and records
def _step(i, action, screen=("contacts", "list"), instr="", progress="", box=None, **kw):
    return Step(
        step_id=i,
        screenshot=f"s{i}.png",
        screen_size=(W, H),
        action=action,
        low_level_instruction=instr,
        target_box=box,
        progress_summary=progress,
        extra={"app": screen[0], "screen": screen[1], "subgoals_done": kw.get("done", 0)},
        screen_description=kw.get("desc", ""),
        intention=kw.get("intent", ""),
    )


def click(x, y):
    return Action(ActionType.CLICK, point=(x, y))


EPISODE = Episode(
    episode_id="e1",
    instruction="Add Bob and Eve to favorites",
    steps=(
        _step(
            0,
            click(0.2, 0.2),
            ("launcher", "home"),
            "Tap Contacts",
            "0/2 subgoals done. Nothing done yet.",
            (0.1, 0.1, 0.3, 0.3),
            desc="Home",
            intent="Open Contacts",
        ),
        _step(
            1,
            click(0.5, 0.3),
            ("contacts", "list"),
            "Tap 'Bob'",
            "0/2 subgoals done. Previous: Tap Contacts.",
            (0.4, 0.25, 0.6, 0.35),
        ),
        _step(
            2,
            click(0.8, 0.1),
            ("contacts", "detail"),
            "Tap Favorite",
            "0/2 subgoals done. Previous: Tap Contacts; Tap 'Bob'.",
            (0.7, 0.05, 0.9, 0.15),
        ),
        _step(
            3,
            Action(ActionType.PRESS, key="back"),
            ("contacts", "detail"),
            "Go back",
            "1/2 subgoals done. Previous: Tap 'Bob'; Tap Favorite.",
            done=1,
        ),
        _step(
            4,
            click(0.5, 0.4),
            ("contacts", "list"),
            "Tap 'Eve'",
            "1/2 subgoals done. Previous: Tap Favorite; Go back.",
            (0.4, 0.35, 0.6, 0.45),
            done=1,
        ),
    ),
    source="minigui",
    subgoals=("Bob is a favorite", "Eve is a favorite"),
    success=False,
)


def test_states_before_and_after_each_step():
    assert state_before(EPISODE, 0) == INITIAL_STATE  # the loop's memory before the first step, not the annotation
    assert state_before(EPISODE, 3) == "1/2 subgoals done. Previous: Tap 'Bob'; Tap Favorite."
    assert state_after(EPISODE, 2) == state_before(EPISODE, 3)  # "the context of the next step" (App. B.1)
    # after the last step: the same text from the subgoals met (an unsuccessful episode: the last count)
    assert state_after(EPISODE, 4) == "1/2 subgoals done. Previous: Go back; Tap 'Eve'."
    done = Episode(**{**EPISODE.__dict__, "success": True})
    assert state_after(done, 4).startswith("2/2 subgoals done.")
    other = Episode(**{**EPISODE.__dict__, "source": "guiodyssey"})
    assert state_after(other, 4) is None  # no next annotation on a real data set
    with pytest.raises(IndexError):
        state_before(EPISODE, 5)


@pytest.mark.parametrize(
    "think, expected",
    [
        ("description_intention", "<think>Home. Open Contacts.</think><answer>Tap Contacts</answer>"),  # App. B.1
        ("intention", "<think>Open Contacts.</think><answer>Tap Contacts</answer>"),
    ],
)
def test_coordinator_target(think, expected):
    assert coordinator_target(EPISODE, 0, think) == expected


def test_warmup_records_are_training_records(tmp_path):
    from guirl.train.data import read_records, write_records

    steps = sample_steps([EPISODE], 10, seed=0)
    assert sorted(t for _, t in steps) == [0, 1, 2, 3, 4]
    recs = coordinator_records(steps, image_root=tmp_path / "train", data_dir=tmp_path, think="intention")
    prompting = ExecutorPrompting("step_instruction", spec=LOW, **BUDGET)
    report = gt_report_fn(lambda s: prompting.write(s.action, s.screen_size), with_instruction=True)
    trk = tracker_records(steps, report=report)
    assert len(recs) == len(trk) == 5
    write_records(tmp_path / "c.jsonl", recs)
    back = read_records(write_records(tmp_path / "t.jsonl", trk), image_root=tmp_path)
    assert all(r["images"] == [] for r in back)
    r = next(r for r in trk if r["step_id"] == 2)
    text = r["prompt"][0]["content"]
    assert "Instruction: Tap Favorite\nAction: <action>" in text and text.endswith(state_before(EPISODE, 2))
    assert r["completion"][0]["content"] == format_think_answer(state_before(EPISODE, 3), thought="")
    c = next(r for r in recs if r["step_id"] == 0)
    assert c["images"] == ["train/s0.png"]  # relative to the stage's data folder


# ----------------------------------------------------------------------------- the loop
def _turn(key, t, history=()):
    return Turn(key, f"goal {key}", tuple(history), f"{key}-{t}.png", (W, H), None, t)


def _tracker_echo():
    """A State Tracker that appends '+' to the state it is given (so the state shows how many steps it went through)."""

    def fn(prompt):
        prev = prompt[0][0]["content"].split("Previous Task State: ")[1]
        return f"<think></think><answer>{prev}+</answer>"

    return FunctionPolicy(fn)


def test_the_loop_threads_each_episodes_memory_from_step_to_step():
    coord = FunctionPolicy(lambda p: "<think>x</think><answer>Tap it</answer>")
    executor = FunctionPolicy(lambda p: CLICK_OUT)
    agent = CESAgent(
        executor, ExecutorPrompting("step_instruction", spec=LOW, **BUDGET), coordinator=coord, tracker=_tracker_echo()
    )
    agent.reset(["a", "b"])
    seen = []
    for t in range(3):
        steps = agent.act([_turn("a", t), _turn("b", t)] if t != 1 else [_turn("a", t)])  # b skips a turn
        seen.append([s.info["state"] for s in steps])
    # the Coordinator read, at each step, the state the Tracker wrote at the previous step of *that* episode
    assert seen == [[INITIAL_STATE, INITIAL_STATE], [INITIAL_STATE + "+"], [INITIAL_STATE + "++", INITIAL_STATE + "+"]]
    assert agent.state("a") == INITIAL_STATE + "+++"
    state_in_prompt = coord.calls[-1][0][0][0][0]["content"][-1]["text"]
    assert f"Current state: {INITIAL_STATE}++" in state_in_prompt
    agent.reset(["a"])
    assert agent.state("a") == INITIAL_STATE and agent.state("b") == INITIAL_STATE + "++"


def test_the_loop_passes_the_instruction_to_the_executor_and_its_output_to_the_tracker():
    coord = FunctionPolicy(lambda p: "<think>x</think><answer>Tap Save</answer>")
    executor = FunctionPolicy(lambda p: CLICK_OUT)
    tracker = _tracker_echo()
    agent = CESAgent(
        executor,
        ExecutorPrompting("step_instruction", spec=LOW, **BUDGET),
        coordinator=coord,
        tracker=tracker,
        tracker_sees_instruction=True,
    )
    agent.reset(["a"])
    (step,) = agent.act([_turn("a", 0)])
    assert step.text == CLICK_OUT and step.info["instruction"] == "Tap Save"
    user = executor.calls[0][0][0][0][1]["content"]
    assert user[-1]["text"] == "\nInstruction for this step: Tap Save"  # the Low executor's step-instruction slot
    assert f"Instruction: Tap Save\nAction: {CLICK_OUT}" in tracker.calls[0][0][0][0][0]["content"]


@pytest.mark.parametrize(
    "mode, kw, executor_sees",
    [
        ("step_instruction", {}, None),  # Executor alone: no step instruction
        ("step_instruction", {"instruction": "goal"}, "goal a"),  # w/o Coordinator: the goal as the instruction
        ("ces_executor", {}, "goal a"),  # App. C's prompt has a command slot only: the goal fills it
    ],
)
def test_without_a_coordinator(mode, kw, executor_sees):
    executor = FunctionPolicy(lambda p: CLICK_OUT)
    spec = LOW if mode == "step_instruction" else None
    agent = CESAgent(executor, ExecutorPrompting(mode, spec=spec, **BUDGET), **kw)
    agent.reset(["a"])
    (step,) = agent.act([_turn("a", 0)])
    texts = " ".join(
        c.get("text", "")
        for m in executor.calls[0][0][0][0]
        for c in (m["content"] if isinstance(m["content"], list) else [])
    )
    if executor_sees is None:
        assert "Instruction for this step" not in texts
    elif mode == "ces_executor":
        assert f"execute the command {executor_sees}." in texts
    else:
        assert f"Instruction for this step: {executor_sees}" in texts
    assert step.info["instruction"] == (executor_sees if kw else None)


@pytest.mark.parametrize("mode", ["ces_executor", "step_instruction"])
def test_without_the_coordinator_is_not_the_executor_alone(mode):
    # CES Sec. 5.3 / Table 3: only the Coordinator is removed; the State Tracker keeps the task state,
    # which the Executor now reads beside the goal. The Executor alone (Table 1's baseline) has neither.
    from guirl.methods.ces.agent import goal_and_state
    from guirl.studies.ces_staged_rl import SYSTEMS

    spec = LOW if mode == "step_instruction" else None

    def prompt_text(agent, executor, t):
        agent.act([_turn("a", t)])
        msgs = executor.calls[-1][0][0][0]
        return " ".join(
            c.get("text", "") for m in msgs for c in (m["content"] if isinstance(m["content"], list) else [])
        )

    alone_exec = FunctionPolicy(lambda p: CLICK_OUT)
    alone = CESAgent(alone_exec, ExecutorPrompting(mode, spec=spec, **BUDGET))
    no_coord_exec = FunctionPolicy(lambda p: CLICK_OUT)
    tracker = _tracker_echo()
    s = SYSTEMS["w/o Coordinator"]
    assert (s.coordinator, s.tracker, s.instruction) == (None, "rl", "goal_and_state")
    no_coord = CESAgent(
        no_coord_exec, ExecutorPrompting(mode, spec=spec, **BUDGET), tracker=tracker, instruction=s.instruction
    )
    for a in (alone, no_coord):
        a.reset(["a"])
    texts = [(prompt_text(alone, alone_exec, t), prompt_text(no_coord, no_coord_exec, t)) for t in range(2)]
    assert all(a != b for a, b in texts)  # not the same prompt
    from guirl.methods.ces.data import INITIAL_STATE

    assert goal_and_state("goal a", INITIAL_STATE + "+") in texts[1][1] and "Task state" not in texts[1][0]
    assert len(tracker.calls) == 2  # the tracker ran at both steps


def test_without_the_tracker_the_coordinator_reads_the_last_four_actions():
    coord = FunctionPolicy(lambda p: "<answer>x</answer>")
    agent = CESAgent(
        FunctionPolicy(lambda p: CLICK_OUT),
        ExecutorPrompting("step_instruction", spec=LOW, **BUDGET),
        coordinator=coord,
        memory="actions",
    )
    agent.reset(["a"])
    hist = [(f"act{i}", f"s{i}.png") for i in range(6)]
    (step,) = agent.act([_turn("a", 6, hist)])
    assert step.info["state"] == "act2; act3; act4; act5"  # CES Sec. 5.3: the last four action histories


def test_the_loop_runs_through_agent_steps_and_online_play(tmp_path):
    from guirl.env.tasks import generate_tasks
    from guirl.rollout import play_online

    agent = CESAgent(
        FunctionPolicy(lambda p: '<action>{"action": "terminate", "status": "success"}</action>'),
        ExecutorPrompting("step_instruction", spec=LOW, **BUDGET),
        coordinator=FunctionPolicy(lambda p: "<answer>Finish</answer>"),
        tracker=_tracker_echo(),
    )
    recs = play_online(agent, generate_tasks(2, seed=3), LOW, width=W, height=H, max_turns=3, progress=False, **BUDGET)
    assert [len(r["agent_info"]) for r in recs] == [1, 1] and recs[0]["agent_info"][0]["instruction"] == "Finish"
    steps = agent_steps(agent, [EPISODE], LOW, image_root=tmp_path, max_steps=3, **BUDGET)
    assert [s.step.info["state"] for s in steps] == [INITIAL_STATE, INITIAL_STATE + "+", INITIAL_STATE + "++"]


# ----------------------------------------------------------------------------- the RL roles' reward
class _FakeExecutor:
    """Stands in for FrozenPolicy: every Executor answer is ``answer``; records the prompts."""

    answer = CLICK_OUT
    prompts: list = []

    def __init__(self, folder, cfg, *, max_new_tokens, desc=""):
        self.desc = desc

    def complete(self, prompts, **kw):
        from guirl.rollout import Completion

        type(self).prompts.append((self.desc, list(prompts)))
        return [
            [Completion(self.answer if self.desc == "executor" else "<think>t</think><answer>Tap A</answer>")]
            for _ in prompts
        ]


@pytest.fixture
def ces_cfg():
    return load_config(
        "tiny",
        overrides=["ces.rl_pool=6", "rl.histories=[1AO]", "ces.executor_prompt=step_instruction"],
    )


def _samples(task, texts, group=0):
    from guirl.rl.samples import Sample

    return [Sample(prompt=task.prompt, completion_ids=(1,), text=t, group=group, row=task.row) for t in texts]


@pytest.mark.parametrize("role", ["ces.coordinator", "ces.state_tracker"])
def test_the_format_term_reads_the_trained_roles_own_output(role, ces_cfg, minigui, monkeypatch):
    """CES eq. 22: R_format scores the Coordinator's (stage 1) / State Tracker's (stage 2) text. Two
    candidates whose Executor answers are identical (the same parsed action, the same executor
    reward) differ by exactly alpha1 when only one of them is well formed; an Executor answer in
    think/answer tags does not lend its format to a malformed candidate."""
    import guirl.methods as methods
    import guirl.methods.ces.rl as ces_rl
    from guirl.rl.hooks import HookInputs

    monkeypatch.setattr(ces_rl, "FrozenPolicy", _FakeExecutor)
    _FakeExecutor.prompts = []
    hooks = methods.get_role(role)(
        ces_cfg, HookInputs(data_dir=minigui, inputs={"executor": minigui, "coordinator": minigui})
    )
    task = hooks.tasks.next(1)[0]
    good = "<think>plan</think><answer>Tap 'Bob'</answer>"
    bad = "Tap 'Bob'"  # the same instruction / state, no tags
    samples = _samples(task, [good, bad])
    r = list(hooks.reward(samples))
    alpha1 = ces_cfg.ces.alpha1
    assert r[0].components["format"] == 1.0 and r[1].components["format"] == 0.0
    assert r[0].components["type"] == r[1].components["type"]
    assert r[0].total - r[1].total == pytest.approx(alpha1)
    _FakeExecutor.answer = "<think>well formed</think><answer>x</answer>"  # tags on the Executor's side only
    try:
        r2 = list(hooks.reward(_samples(task, [bad])))
    finally:
        _FakeExecutor.answer = CLICK_OUT
    assert r2[0].components["format"] == 0.0
    # the Executor ran once per distinct prompt, with the candidate's instruction in its step slot
    execs = [p for d, p in _FakeExecutor.prompts if d == "executor"]
    assert len(execs[0]) == 1  # both candidates gave the same instruction (stage 1) / the same Coordinator answer
    if role == "ces.coordinator":
        assert "Instruction for this step: Tap 'Bob'" in execs[0][0][0][1]["content"][-1]["text"]
        assert samples[0].info["instruction"] == "Tap 'Bob'"
    else:
        coord = [p for d, p in _FakeExecutor.prompts if d == "coordinator"][0]
        assert "Current state: Tap 'Bob'" in coord[0][0][0]["content"][-1]["text"]  # the sampled state reached it
        assert "state_match" in samples[0].info


def test_role_hooks_need_their_frozen_models(ces_cfg, minigui):
    import guirl.methods as methods
    from guirl.rl.hooks import HookInputs

    with pytest.raises(KeyError, match="needs the stage input 'executor'"):
        methods.get_role("ces.coordinator")(ces_cfg, HookInputs(data_dir=minigui))
    with pytest.raises(KeyError, match="needs the stage input 'coordinator'"):
        methods.get_role("ces.state_tracker")(ces_cfg, HookInputs(data_dir=minigui, inputs={"executor": minigui}))


def test_stage2_tasks_start_from_the_previous_steps_annotation(ces_cfg, minigui):
    from guirl.data.splits import load_splits
    from guirl.methods.ces.rl import executor_prompting, tracker_tasks

    train = load_splits(minigui)["train"]
    tasks = tracker_tasks(
        train.episodes, train.image_root, executor_prompting(ces_cfg, "1AO"), n=20, seed=0, with_instruction=True
    )
    assert tasks and all(t.t >= 1 for t in tasks)
    for task in tasks:
        prev = task.episode.steps[task.t - 1]
        text = task.prompt[0][0]["content"]
        assert (
            text.endswith(state_before(task.episode, task.t - 1))
            and f"Instruction: {prev.low_level_instruction}" in text
        )
        assert task.row["gt_state"] == state_before(task.episode, task.t)  # what the Tracker should write
        assert len(task.history) == task.t  # the Executor's prompt shows the annotated history


# ----------------------------------------------------------------------------- failure taxonomy
TRAIN_SEEN = {("launcher", "home"), ("contacts", "list"), ("contacts", "detail")}


@pytest.mark.parametrize(
    "pred, t, seen, kind",
    [
        (click(0.5, 0.3), 1, TRAIN_SEEN, None),  # right: not a failure
        # at step 4 (tap Eve on the list) the agent taps Bob again: right for step 1 on the same screen
        (click(0.5, 0.3), 4, TRAIN_SEEN, "state_loss"),
        # at step 1 it taps Eve: right for step 4 (later) on the same screen: skipped ahead
        (click(0.5, 0.4), 1, TRAIN_SEEN, "state_loss"),
        # Bob's detail screen: pressing back is right for step 3 on the same screen (detail), not step 2
        (Action(ActionType.PRESS, key="back"), 2, TRAIN_SEEN, "state_loss"),
        # the list screen was never in training: an out-of-distribution interface
        (click(0.9, 0.9), 4, {("launcher", "home")}, "generalisation_failure"),
        (Action(ActionType.TYPE, text="Bob"), 1, TRAIN_SEEN, "planning_error"),  # wrong kind of action
        (None, 1, TRAIN_SEEN, "planning_error"),  # no parsable action
        (click(0.9, 0.9), 1, TRAIN_SEEN, "perception_error"),  # a click, on no target
        (click(0.5, 0.95), 0, TRAIN_SEEN, "perception_error"),  # home screen: the only home step, missed
    ],
)
def test_failure_taxonomy_on_hand_made_cases(pred, t, seen, kind):
    assert classify_failure(pred, EPISODE, t, protocol="ces_paper", seen=seen) == kind


def test_failure_counts_from_prediction_records():
    from guirl.metrics.records import prediction_record

    recs = [
        prediction_record(
            model="m",
            split="s",
            history="1AO",
            episode=EPISODE,
            t=t,
            output=out,
            output_format="ccpo",
            protocol="ces_paper",
            **BUDGET,
        )
        for t, out in ((1, '<action>{"action": "click", "coordinate": [140, 151]}</action>'), (4, "garbage"))
    ]
    rows = failure_counts(recs, {"e1": EPISODE}, protocol="ces_paper", seen=seen_screens([EPISODE]))
    assert [(r["step_id"], r["kind"]) for r in rows] == [(4, "planning_error")]  # step 1's click is right
    assert set(FAILURE_KINDS) == {"state_loss", "generalisation_failure", "planning_error", "perception_error"}


# ----------------------------------------------------------------------------- temporal judgement
def test_temporal_pairs_and_the_state_judge():
    pairs = temporal_pairs([EPISODE], [1, 2, 4], 3, seed=0)
    assert [p.gap for p in pairs] == [1, 1, 1, 2, 2, 2, 4]  # gap 4 has one pair in a 5-step episode
    assert pairs == temporal_pairs([EPISODE], [1, 2, 4], 3, seed=0)
    for p in pairs:
        a, b = p.shown
        assert (a < b) == (p.answer == "A")
    # subgoal counts 0,0,0,1,1: the pair (2, 3) is told apart, (0, 1) is a tie (coin flip)
    from guirl.methods.ces.analysis import TemporalPair

    got = state_judge([TemporalPair(EPISODE, 2, 3, "later"), TemporalPair(EPISODE, 0, 1, "earlier")])
    assert got == [1.0, 0.5]


@pytest.mark.slow
def test_temporal_judge_scores_a_model(tmp_path, minigui):
    from guirl.data.splits import load_splits
    from guirl.methods.ces.analysis import judge_pairs
    from guirl.models import build_tiny_model, load_model, load_processor

    split = load_splits(minigui)["train"]
    pairs = temporal_pairs(split.episodes, [1, 2], 3, seed=1)
    path = build_tiny_model()
    scores = judge_pairs(load_model(path), load_processor(path, **BUDGET), pairs, split.image_root, batch=4)
    assert len(scores) == len(pairs) and set(scores) <= {0.0, 0.5, 1.0}


# ----------------------------------------------------------------------------- config and Method record
def test_the_paper_rule_is_the_default_protocol_and_the_as_run_one_an_option():
    import guirl.methods as methods

    assert methods.get("ces").eval_protocol == "ces_paper"
    from guirl.runner import DataSourceError, plan_run
    from guirl.studies.shared.evaluation import paper_eval_config

    # 04 scores with CES's rule on every profile and data set it runs on; the others stop in one line:
    # no experiment file changes the protocol silently
    for profile in ("tiny", "paper-7b"):
        for experiment in (None, "guiodyssey"):
            cfg = plan_run("notebooks/04_ces_staged_rl.ipynb", profile, experiment=experiment).config
            assert paper_eval_config(cfg, "ces").eval.protocol == "ces_paper", (profile, experiment)
        for experiment in ("aitz", "amex", "androidcontrol"):
            with pytest.raises(DataSourceError, match="pass --experiment guiodyssey"):
                plan_run("notebooks/04_ces_staged_rl.ipynb", profile, experiment=experiment)
            cfg = load_config(profile, experiment)  # the section itself holds CES's rule on any data set
            assert paper_eval_config(cfg, "ces").eval.protocol == "ces_paper", (profile, experiment)
    # the as-run evaluator is an option, and an override wins
    assert paper_eval_config(load_config("tiny", overrides=["eval.protocol=ces"]), "ces").eval.protocol == "ces"
    assert set(methods.get("ces").hooks) == {"ces.coordinator", "ces.state_tracker"}


@pytest.mark.parametrize(
    "override, message",
    [
        ("ces.executor_prompt=gui_r1", "executor_prompt"),
        ("ces.temporal_gaps=[0, 2]", "gap is at least 1"),
        ("ces.coordinator.eps_low=1.5", "eps_low"),
        ("ces.online_categories=[item_creation]", "online_categories"),
    ],
)
def test_bad_ces_values_fail_with_the_key(override, message):
    from guirl.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        load_config("tiny", overrides=[override])


# ----------------------------------------------------------------------------- notebook 04's helpers
def test_rl_stage_configs_come_from_table4_columns(ces_cfg):
    from guirl.studies.ces_staged_rl import rl_config, warmup_config

    sec = ces_cfg.ces
    c = rl_config(ces_cfg, "coordinator", 64)
    r = sec.coordinator
    assert (c.rl.role, c.rl.learning_rate, c.rl.prompts_per_step, c.rl.group_size) == (
        "ces.coordinator",
        r.learning_rate,
        r.prompts_per_step,
        r.group_size,
    )
    assert (c.rl.eps_low, c.rl.eps_high, c.rl.max_new_tokens) == (r.eps_low, r.eps_high, r.max_new_tokens)
    assert c.rl.max_steps == int(np.ceil(r.epochs * 64 / r.prompts_per_step)) and c.rl.dapo_std_threshold is None
    paper = load_config("paper-7b")
    p = rl_config(paper, "state_tracker", 3000)  # CES Table 4: 5 epochs of 3K tasks in batches of 32
    assert (p.rl.max_steps, p.rl.max_new_tokens, p.rl.learning_rate, p.rl.group_size) == (469, 512, 1e-6, 4)
    w = warmup_config(paper)  # CES Sec. 5.1, App. B.2
    assert (w.sft.learning_rate, w.sft.epochs, w.sft.max_steps, w.lora.r, w.lora.alpha) == (5e-5, 1, None, 8, 16)
    assert w.lora.enabled  # App. B.2: LoRA, whatever the profile's own lora.enabled
    assert warmup_config(paper.replace({"lora.enabled": False})).lora.enabled
    # an override of the kernel key reaches both roles (the one precedence rule), and the saved config shows it
    o = load_config("paper-7b", overrides=["rl.learning_rate=2e-6", "rl.max_steps=9"])
    assert o.ces.coordinator.learning_rate == o.ces.state_tracker.learning_rate == 2e-6
    assert (
        rl_config(o, "coordinator", 3000).rl.max_steps == 9
        and rl_config(o, "state_tracker", 30).rl.learning_rate == 2e-6
    )


def test_model_sources_resolve(tmp_path, ces_cfg, monkeypatch):
    from guirl.studies.ces_staged_rl import model_folder

    assert (model_folder(ces_cfg, "tiny") / "config.json").is_file()
    with pytest.raises(FileNotFoundError, match="make nb-01_sft"):
        model_folder(ces_cfg, "01_sft/sft_low")  # another notebook's stage, not run here
    run = tmp_path / "runs" / "tiny" / "01_sft" / "sft_low"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"final": str(tmp_path / "final")}))
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path / "runs"))
    assert model_folder(ces_cfg, "01_sft/sft_low") == tmp_path / "final"
    with pytest.raises(Exception, match="no local checkpoint folder"):
        model_folder(ces_cfg, "checkpoints/nowhere")


def test_table_layout_and_paper_rows():
    import pandas as pd

    from guirl.studies.ces_staged_rl import paper_rows, table_layout, with_deltas

    steps = pd.DataFrame(
        [
            {"model": m, "history": "1AO", "split": s, "TM": tm, "GR": 50.0, "SR": sr}
            for m, tm, sr in (("A", 60.0, 30.0), ("B", 70.0, 40.0))
            for s in ("x", "y")
        ]
    )
    t = table_layout(steps, {"A": "Executor alone", "B": "+ CES"}, ["x", "y"])
    assert list(t["row"]) == ["Executor alone", "+ CES"] and t.loc[1, "y SR"] == 40.0 and t.loc[0, "x Type"] == 60.0
    ours = paper_rows(t, {"+ CES": "GUI-R1-7B + CES (Ours) Multi-Agent"}, "x")
    assert list(ours["column"]) == ["GUI-Odyssey Type", "GUI-Odyssey GR", "GUI-Odyssey SR"]
    assert ours["ours"].tolist() == [70.0, 50.0, 40.0]
    d = with_deltas(t, {"+ CES": "Executor alone"})
    assert d.loc[1, "y SR delta"] == 10.0 and np.isnan(d.loc[0, "y SR delta"])  # Table 2's parentheses
    assert list(d.columns[2:5]) == ["x Type", "x Type delta", "x GR"]
    ours = paper_rows(d, {"+ CES": "GUI-Owl-7B CES"}, "y")
    assert dict(zip(ours["column"], ours["ours"])) == {
        "GUI-Odyssey Type": 70.0,
        "GUI-Odyssey Type delta": 10.0,
        "GUI-Odyssey GR": 50.0,
        "GUI-Odyssey GR delta": 0.0,
        "GUI-Odyssey SR": 40.0,
        "GUI-Odyssey SR delta": 10.0,
    }


def test_failure_tables_are_paired_over_the_same_steps():
    from guirl.data.splits import Split
    from guirl.metrics.records import prediction_record
    from guirl.studies.ces_staged_rl import failure_paired, failure_table

    cfg = load_config("tiny", overrides=["eval.bootstrap_samples=50"])
    outs = {
        "alone": ["garbage"] * 5,
        "ces": ['<action>{"action": "click", "coordinate": [56, 101]}</action>'] + ["garbage"] * 4,
    }
    recs = [
        prediction_record(
            model=m,
            split="s",
            history="1AO",
            episode=EPISODE,
            t=t,
            output=o[t],
            output_format="ccpo",
            protocol="ces_paper",
            **BUDGET,
        )
        for m, o in outs.items()
        for t in range(5)
    ]
    splits = {"s": Split("s", (EPISODE,), Path("."))}
    table = failure_table(cfg, recs, splits, [EPISODE], ["alone", "ces"])
    assert len(table) == 2 * len(FAILURE_KINDS)
    alone = table[table["model"] == "alone"].set_index("kind")
    assert alone.loc["planning_error", "n"] == 5 and alone.loc["planning_error", "share"] == 100.0
    paired = failure_paired(cfg, recs, splits, [EPISODE], "alone", "ces").set_index("kind")
    assert paired.loc["planning_error", "diff"] == pytest.approx(-20.0)  # one step fewer of five
    for r in paired.to_dict(orient="records"):
        assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0)


# ----------------------------------------------------------------------------- cross-data-set evaluation
def test_trained_on_guiodyssey_tested_on_aitz_and_amex(tmp_path):
    # CES App. B.1 / Table 1: the roles train on GUI-Odyssey's train split; AITZ's and AMEX's test
    # episodes are evaluated beside GUI-Odyssey's test split, each benchmark its own columns
    import importlib.util

    from guirl.data.loaders import convert_dataset
    from guirl.data.splits import load_splits
    from guirl.methods.ces.evaluation import CROSS_SOURCES, benchmark_splits, check_train_source

    spec = importlib.util.spec_from_file_location("mf", Path(__file__).parent / "fixtures" / "make_fixtures.py")
    mf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mf)  # type: ignore[union-attr]
    root = tmp_path / "data" / "paper-7b"
    with pytest.raises(FileNotFoundError, match=r"aitz/episodes.jsonl: aitz has not been converted.*--experiment aitz"):
        benchmark_splits(root)
    for name in ("guiodyssey", *CROSS_SOURCES):
        convert_dataset(name, mf.PUBLIC[name](tmp_path / "src"), root / name)
    splits = benchmark_splits(root)
    assert {k: len(v.episodes) for k, v in splits.items()} == {"aitz/test": 2, "amex/test": 4}
    assert all(v.name == k for k, v in splits.items())
    train = {e.episode_id for e in load_splits(root / "guiodyssey")["train"].episodes}
    assert not train & {e.episode_id for v in splits.values() for e in v.episodes}
    check_train_source("guiodyssey")
    with pytest.raises(ValueError, match="--experiment guiodyssey"):
        check_train_source("androidcontrol")


def test_04_evaluates_aitz_and_amex_beside_gui_odyssey(tmp_path, monkeypatch):
    """04 on GUI-Odyssey (its paper-profile default) tests on GUI-Odyssey's test split and AITZ's and
    AMEX's converted for the same profile (CES Table 1's columns); a MiniGUI run keeps its own."""
    import importlib.util

    from guirl.data.loaders import convert_dataset
    from guirl.runner import plan_run
    from guirl.studies import ces_staged_rl as cs

    spec = importlib.util.spec_from_file_location("mf", Path(__file__).parent / "fixtures" / "make_fixtures.py")
    mf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mf)  # type: ignore[union-attr]
    monkeypatch.setenv("GUIRL_DATA", str(tmp_path / "data"))
    cfg = plan_run("notebooks/04_ces_staged_rl.ipynb", "paper-7b").config
    root = tmp_path / "data" / "paper-7b"
    convert_dataset("guiodyssey", mf.PUBLIC["guiodyssey"](tmp_path / "src"), root / "guiodyssey")
    with pytest.raises(FileNotFoundError, match="aitz has not been converted"):
        cs.test_splits(cfg)
    for name in ("aitz", "amex"):
        convert_dataset(name, mf.PUBLIC[name](tmp_path / "src"), root / name)
    assert list(cs.test_splits(cfg)) == ["test", "aitz/test", "amex/test"]
