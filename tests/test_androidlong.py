"""AndroidLong's method folder (``guirl.methods.androidlong``): the memory kept in the reasoning
(format round trip, memory from the expert's trajectories, SFT records, the memory agent), the
error taxonomy of App. D.1 on hand-made episodes, the config section's updates and the online GRPO
hooks (role ``androidlong``) with a scripted policy."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action
from guirl.config import load_config
from guirl.data.schema import Episode, Step
from guirl.methods.androidlong.config import variant_updates
from guirl.methods.androidlong.errors import ERROR_TYPES, classify_failure, error_counts
from guirl.methods.androidlong.memory import (
    MemoryAgent,
    memory_items,
    memory_records,
    memory_thought,
    parse_memory,
    read_step,
    step_item,
    write_step,
)
from guirl.prompts import PromptSpec
from guirl.rl.samples import RolloutArgs, Sample
from guirl.rollout import Completion, FunctionPolicy, Turn

CTX = FormatContext(width=280, height=504, min_pixels=3136, max_pixels=141120)
SPEC = PromptSpec(output_format="ccpo", n_history=1, history_mode="nAO", system_prompt="ccpo_short")

# ----------------------------------------------------------------------------- the memory format
items = st.lists(
    st.text(st.characters(blacklist_characters=";\n\r<>", blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
    .map(str.strip)
    .filter(lambda s: s and s != "none"),
    max_size=4,
)
actions = st.sampled_from(
    [
        Action("click", point=(0.25, 0.5)),
        Action("long_press", point=(0.7, 0.1), duration_ms=1000),
        Action("type", text="hello; there"),
        Action("scroll", direction="up", convention="finger"),
        Action("press", key="back"),
        Action("open_app", text="Contacts"),
        Action("answer", text="Lima"),
        Action("terminate", status="success"),
    ]
)


@given(actions, items)
def test_memory_format_round_trips(action, memory):
    text = write_step(action, memory, "ccpo", CTX)
    parsed, mem = read_step(text, "ccpo", CTX)
    assert parsed.ok and parsed.action == get_format("ccpo").project(action, CTX)
    assert mem == tuple(memory)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Memory: Ann; Bob", ("Ann", "Bob")),
        ("Memory: none", ()),
        ("  Memory:   Ann  ", ("Ann",)),
        ("I will tap Ann", None),  # a thought without a memory
        (None, None),
    ],
)
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


def test_memory_thought_and_step_without_memory():
    assert memory_thought([]) == "Memory: none" and memory_thought(["Ann", "Bob"]) == "Memory: Ann; Bob"
    with pytest.raises(ValueError, match="items"):
        memory_thought(["a;b"])
    plain = write_step(Action("click", point=(0.5, 0.5)), None, "ccpo", CTX)
    assert "<think>" not in plain and read_step(plain, "ccpo", CTX)[1] is None
    # an unparsable action still gives back the memory it wrote
    parsed, mem = read_step("<think>Memory: Ann</think>\n<action>{oops</action>", "ccpo", CTX)
    assert not parsed.ok and mem == ("Ann",)


# ----------------------------------------------------------------------------- memory from the expert
def step(i: int, intention: str, action: Action | None = None) -> Step:
    return Step(
        step_id=i,
        screenshot=f"images/s{i}.png",
        screen_size=(280, 504),
        action=action or Action("click", point=(0.5, 0.5)),
        intention=intention,
    )


@pytest.mark.parametrize(
    "intention, item",
    [
        ("Check the city of contact 2 of 4 (Bob)", "Bob"),
        ("Mark every unfinished note as done ('Buy milk')", "Buy milk"),
        ("Bob lives in Lima: add to favorites", None),
        ("Create the contact Ann", None),
        ("", None),
    ],
)
def test_step_item(intention, item):
    assert step_item(intention) == item


def test_memory_items_of_a_long_loop():
    ep = Episode(
        "e",
        "For each of the first 4 contacts ...",
        (
            step(0, ""),  # open the app
            step(1, "Check the city of contact 1 of 4 (Ann)"),
            step(2, "Ann lives in Lima: add to favorites"),
            step(3, "Ann lives in Lima: add to favorites"),  # back to the list
            step(4, "Check the city of contact 2 of 4 (Bob)"),
            step(5, "Check the city of contact 2 of 4 (Bob)"),
            step(6, "Check the city of contact 3 of 4 (Cleo)"),
            step(7, "Finish the task", Action("terminate", status="success")),
        ),
        "minigui",
    )
    assert memory_items(ep) == [(), (), (), (), ("Ann",), ("Ann",), ("Ann", "Bob"), ("Ann", "Bob", "Cleo")]
    assert memory_items(ep, max_items=2)[-1] == ("Bob", "Cleo")  # a short memory keeps the latest items


def test_memory_records_write_the_memory_in_completion_and_history():
    ep = Episode(
        "e",
        "loop",
        (
            step(0, "Check (Ann)"),
            step(1, "Check (Bob)", Action("press", key="back")),
            step(2, "done", Action("terminate", status="success")),
        ),
        "minigui",
    )
    kw = dict(image_root="/data", min_pixels=3136, max_pixels=141120)
    mem = memory_records([ep], SPEC, memory=True, **kw)
    plain = memory_records([ep], SPEC, memory=False, **kw)
    assert [r["memory"] for r in mem] == [[], ["Ann"], ["Ann", "Bob"]]
    done = mem[2]["completion"][0]["content"][0]["text"]
    assert done.startswith("<think>Memory: Ann; Bob</think>") and "terminate" in done
    history = "".join(c.get("text", "") for m in mem[2]["prompt"] for c in m["content"])
    assert "Memory: Ann</think>" in history  # the previous step's output, memory included
    assert all("<think>" not in r["completion"][0]["content"][0]["text"] for r in plain)
    assert [r["images"] for r in mem] == [r["images"] for r in plain]  # the same screens, paired
    assert mem[0]["images"] == ["/data/images/s0.png"]


def fixed_policy(texts):
    """A policy answering the k-th call with ``texts[k]`` for every prompt; records its prompts."""
    seen = []

    def fn(prompt):
        seen.append(prompt)
        return texts[min(len(seen) - 1, len(texts) - 1)]

    return FunctionPolicy(fn), seen


def test_memory_agent_carries_its_memory_in_the_history():
    policy, seen = fixed_policy(
        [
            '<think>Memory: none</think>\n<action>{"action": "click", "coordinate": [10, 10]}</action>',
            '<think>Memory: Ann</think>\n<action>{"action": "system_button", "button": "Back"}</action>',
        ]
    )
    agent = MemoryAgent(policy, SPEC, min_pixels=3136, max_pixels=141120)
    agent.reset(["e"])
    shot = "/x/s.png"
    t0 = Turn("e", "loop", (), shot, (280, 504))
    s0 = agent.act([t0])[0]
    assert s0.info == {"memory": [], "wrote_memory": True}
    # the loop shows the parsed action without reasoning: the agent puts its memory back
    t1 = Turn(
        "e", "loop", (('<action>{"action": "click", "coordinate": [10, 10]}</action>', shot),), shot, (280, 504), t=1
    )
    s1 = agent.act([t1])[0]
    assert s1.info["memory"] == ["Ann"]
    text = "".join(c.get("text", "") for m in seen[1][0] for c in m["content"])
    assert "<think>Memory: none</think>" in text
    agent.reset(["e"])
    assert agent.memories["e"] == []


# ----------------------------------------------------------------------------- error taxonomy (App. D.1)
def tr(screen="contacts/list", parsed=True, effect="changed", invalid=None):
    return {"screen": screen, "parsed": parsed, "effect": effect if parsed else None, "invalid": invalid}


CLICK = {"type": "click", "point": [0.5, 0.3]}
OTHER = {"type": "click", "point": [0.5, 0.7]}
SCROLL = {"type": "scroll", "direction": "up", "convention": "finger"}
STOP = {"type": "terminate", "status": "success"}


def episode(trace, actions, *, success=False, stopped=False):
    return {
        "task_id": "t",
        "success": success,
        "turns": len(trace),
        "stopped": stopped,
        "trace": trace,
        "actions": actions,
    }


@pytest.mark.parametrize(
    "ep, kind",
    [
        (episode([tr(), tr()], [CLICK, STOP], success=True, stopped=True), None),
        # half the turns unparsable: formality error (even though it also ran out of turns)
        (episode([tr(parsed=False), tr(parsed=False), tr(), tr()], [CLICK, OTHER]), "format_error"),
        # actions that did nothing and the agent went on: insufficient reflection
        (
            episode(
                [tr(effect="no_change"), tr(invalid="no focused field"), tr(), tr(screen="x/y")],
                [CLICK, {"type": "type", "text": "111"}, OTHER, STOP],
                stopped=True,
            ),
            "insufficient_reflection",
        ),
        # tapping the same place on the same screen again and again: inconsistency
        (
            episode(
                [tr(), tr(screen="c/detail"), tr(), tr(screen="c/detail"), tr()], [CLICK, OTHER, CLICK, OTHER, CLICK]
            ),
            "inconsistency",
        ),
        # the same tap on three different screens is not a loop; never stopped: turn limit
        (
            episode([tr(screen="a/1"), tr(screen="a/2"), tr(screen="a/3")], [CLICK, CLICK, CLICK]),
            "turn_limit",
        ),
        # stopped with subgoals left: insufficient exploration
        (episode([tr(), tr(), tr()], [CLICK, SCROLL, STOP], stopped=True), "insufficient_exploration"),
        # one unparsable turn of four is not a formality error
        (
            episode([tr(parsed=False), tr(), tr(screen="b/1"), tr(screen="b/2")], [CLICK, OTHER, STOP], stopped=True),
            "insufficient_exploration",
        ),
        # a single action without effect is not insufficient reflection
        (
            episode([tr(effect="no_change"), tr(), tr(), tr()], [CLICK, OTHER, SCROLL, STOP], stopped=True),
            "insufficient_exploration",
        ),
        # waits and the stop do not count as actions without effect
        (
            episode(
                [tr(effect="no_change"), tr(effect="no_change"), tr(), tr(effect="no_change")],
                [{"type": "wait"}, {"type": "wait"}, CLICK, STOP],
                stopped=True,
            ),
            "insufficient_exploration",
        ),
    ],
)
def test_error_taxonomy_rule(ep, kind):
    assert classify_failure(ep) == kind


def test_error_counts_and_a_broken_record():
    eps = [episode([tr()], [STOP], success=True, stopped=True), episode([tr()], [STOP], stopped=True)]
    counts = error_counts(eps)
    assert list(counts) == [*ERROR_TYPES, "success"] and counts["success"] == 1
    assert counts["insufficient_exploration"] == 1 and sum(counts.values()) == 2
    with pytest.raises(ValueError, match="actions"):
        classify_failure(episode([tr(), tr()], [CLICK]))


def test_play_online_records_what_the_taxonomy_reads():
    from guirl.env.tasks import generate_tasks
    from guirl.rollout import play_online

    tasks = generate_tasks(2, seed=3, categories=["long_loop"])
    answers = itertools.cycle(["garbage", '<action>{"action": "click", "coordinate": [5, 5]}</action>'])
    policy = FunctionPolicy(lambda prompt: next(answers))
    res = play_online(policy, tasks, SPEC, width=280, height=504, max_turns=4, min_pixels=3136, max_pixels=141120)
    for r in res:
        assert len(r["trace"]) == r["turns"] == 4 and r["stopped"] is False
        assert sum(not t["parsed"] for t in r["trace"]) == r["n_unparsable"]
        assert all(t["screen"].count("/") == 1 for t in r["trace"])
        assert classify_failure(r) in ERROR_TYPES


# ----------------------------------------------------------------------------- the section's updates
def test_variant_updates_on_the_paper_profile():
    cfg = load_config("paper-3b")
    mem = cfg.replace(variant_updates(cfg, memory=True))
    assert mem.androidlong.memory is True and mem.rl.role == "androidlong"
    assert (mem.sft.epochs, mem.sft.learning_rate, mem.sft.max_steps) == (2, 1e-5, None)  # App. C.2
    assert (mem.rl.learning_rate, mem.rl.beta, mem.rl.eps_low, mem.rl.eps_high) == (1e-6, 0.001, 0.2, 0.2)  # Table 7
    assert (mem.rl.group_size, mem.rl.prompts_per_step, mem.rl.max_new_tokens) == (8, 32, 2048 + 32)
    assert (mem.model.min_pixels, mem.model.max_pixels) == (65536, 500000)
    assert (mem.eval.n_seeds, mem.eval.online_same_tasks, mem.eval.online_sampling.do_sample) == (3, True, True)
    assert mem.rl.temperature == cfg.rl.temperature  # Table 7's value is missing: the engine's stands
    # verl's GRPO with no dynamic-sampling filter, though the profile's rl (CCPO Table 8) filters at 0.2
    assert (mem.rl.dapo_std_threshold, cfg.rl.dapo_std_threshold) == (None, 0.2)
    plain = cfg.replace(variant_updates(cfg, memory=False))
    assert plain.androidlong.memory is False and plain.eval.max_new_tokens == cfg.eval.max_new_tokens
    t = load_config("paper-3b", overrides=["rl.temperature=0.7"])  # the one spelling of the rollout temperature
    assert t.replace(variant_updates(t, memory=False)).rl.temperature == 0.7
    # a kernel key set in a later layer wins over AndroidLong's value (and the section shows the value that ran)
    o = load_config("paper-3b", overrides=["rl.learning_rate=4e-6", "eval.n_seeds=2", "sft.epochs=1"])
    v = o.replace(variant_updates(o, memory=False))
    assert (v.rl.learning_rate, v.eval.n_seeds, v.sft.epochs) == (4e-6, 2, 1) and o.androidlong.rl.learning_rate == 4e-6


def test_variant_updates_on_the_tiny_recipe():
    # the tiny recipe: the tiny profile's own training values (PROFILE) and 07's CPU sizes
    cfg = load_config("tiny", "07_agentcpm_androidlong.tiny")
    v = cfg.replace(variant_updates(cfg, memory=True))
    assert v.rl.learning_rate == cfg.rl.learning_rate and v.sft.max_steps == cfg.androidlong.sft.max_steps == 100
    assert (v.rl.group_size, v.rl.prompts_per_step, v.rl.max_steps) == (4, 2, 4)
    assert v.rl.dapo_std_threshold == cfg.rl.dapo_std_threshold  # the tiny profile's own filter
    assert (v.model.min_pixels, v.model.max_pixels, v.sft.learning_rate) == (
        cfg.model.min_pixels,
        cfg.model.max_pixels,
        cfg.sft.learning_rate,
    )
    assert v.eval.max_new_tokens == cfg.eval.max_new_tokens + cfg.androidlong.memory_tokens


# ----------------------------------------------------------------------------- online GRPO hooks
def test_online_grpo_hooks_with_a_scripted_policy(tmp_path):
    from guirl.methods.androidlong.rl import androidlong_rl_hooks
    from guirl.rl.hooks import HookInputs

    cfg = load_config("tiny", "07_agentcpm_androidlong.tiny", overlays=["smoke"])
    cfg = cfg.replace({**variant_updates(cfg, memory=True), "eval.max_turns": 3})
    hooks = androidlong_rl_hooks(cfg, HookInputs(data_dir=tmp_path))
    tasks = hooks.tasks.next(cfg.rl.prompts_per_step)
    assert all(t.category == "long_loop" for t in tasks)

    class Policy:
        def complete(self, prompts, n=1, **kw):
            return [
                [
                    Completion(
                        '<think>Memory: none</think>\n<action>{"action": "system_button", "button": "Back"}</action>',
                        (1, 2, 3),
                    )
                ]
                for _ in prompts
            ]

    samples = hooks.rollout(Policy(), tasks, RolloutArgs(group_size=cfg.rl.group_size, seed=1))
    n_eps = len(tasks) * cfg.rl.group_size
    assert len(samples) == n_eps * 3  # three turns each, every turn a sample
    assert {s.group for s in samples} == set(range(len(tasks)))
    rewards = hooks.reward(samples)
    assert all(0.0 <= r.total <= 1.0 and r.components["format"] == 1.0 for r in rewards)


def test_episode_advantage_is_per_episode():
    from guirl.methods.androidlong.rl import episode_advantage_hook

    def s(group, ep, reward, turn):
        return Sample(
            prompt=([], []),
            completion_ids=(1,),
            text="",
            group=group,
            info={"episode": ep, "turn": turn},
            reward=reward,
        )

    # group 0: two episodes, rewards 1.0 (3 turns) and 0.0 (1 turn): each turn takes its episode's advantage
    samples = [s(0, 0, 1.0, 0), s(0, 0, 1.0, 1), s(0, 0, 1.0, 2), s(0, 1, 0.0, 0), s(1, 2, 0.5, 0), s(1, 3, 0.5, 0)]
    adv = episode_advantage_hook("grpo")(samples).tolist()
    assert adv[0] == adv[1] == adv[2] > 0 > adv[3]
    assert math.isclose(adv[0], -adv[3], rel_tol=1e-6)  # the turn count does not weigh an episode
    assert adv[4] == adv[5] == 0.0  # equal rewards: no signal


def test_online_rollout_keeps_each_copys_turns(tmp_path):
    from guirl.methods.androidlong.rl import RecordingAgent

    policy, _ = fixed_policy(['<action>{"action": "click", "coordinate": [10, 10]}</action>'])
    agent = RecordingAgent(policy, SPEC, memory=False, min_pixels=3136, max_pixels=141120)
    agent.reset(["a", "b"])
    turns = [Turn("a", "x", (), "/s.png", (280, 504)), Turn("b", "y", (), "/s.png", (280, 504))]
    agent.act(turns)
    assert [len(agent.turns[k]) for k in ("a", "b")] == [1, 1]
    assert replace(turns[0]).key == "a"
