"""guirl.rollout.agents: one policy as an agent gives exactly the prompts of the single-policy
loops; a stateful multi-model agent carries its state forward through each episode, online and on
recorded steps; evaluation takes agents as it takes policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.data.splits import load_splits
from guirl.env import generate_tasks
from guirl.env.expert import solve
from guirl.prompts import PromptSpec, format_context
from guirl.rollout import (
    AgentStep,
    FunctionPolicy,
    PolicyAgent,
    Turn,
    agent_steps,
    as_agent,
    play_online,
    step_prompts,
)

W, H = 280, 504
PX = {"min_pixels": 3136, "max_pixels": 141120}
FMT = get_format("ccpo")
CTX = format_context((W, H), **PX)


class CountingAgent:
    """A two-part toy agent: a "planner" that numbers the steps of each episode (its memory) and an
    "executor" that answers a fixed action; ``info`` records the plan."""

    output_format = "ccpo"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.memory: dict[str, int] = {}
        self.batches: list[list[tuple[str, int]]] = []

    def reset(self, keys):
        for k in keys:
            self.memory.pop(k, None)

    def act(self, turns, *, do_sample=False, temperature=1.0, top_p=1.0, seed=None):
        self.batches.append([(t.key, t.t) for t in turns])
        out = []
        for t in turns:
            self.memory[t.key] = self.memory.get(t.key, 0) + 1
            out.append(
                AgentStep(self.answer, {"plan": f"step {self.memory[t.key]} of {t.key}", "seen": len(t.history)})
            )
        return out


def test_policy_agent_prompts_equal_the_step_prompts(minigui: Path) -> None:
    split = load_splits(minigui)["test_in_domain"]
    for spec in (
        PromptSpec(n_history=3, history_mode="nAO", system_prompt="ccpo_short"),
        PromptSpec(n_history=1, history_mode="nAO", use_step_instruction=True, system_prompt="ccpo_short"),
        PromptSpec(output_format="qwen_mobile_use", n_history=2, history_mode="nA"),
    ):
        policy = FunctionPolicy(lambda p: "x")
        answered = agent_steps(
            PolicyAgent(policy, spec, **PX), split.episodes, spec, image_root=split.image_root, max_steps=12, **PX
        )
        expected = step_prompts(split.episodes, spec, image_root=split.image_root, max_steps=12, **PX)
        assert [(a.episode.episode_id, a.t) for a in answered] == [(e.episode.episode_id, e.t) for e in expected]
        by_key = {(a.episode.episode_id, a.t): a for a in answered}
        prompts = {}
        for call_prompts, _ in policy.calls:  # lockstep: one call per step index
            prompts.update({json.dumps(p, default=str): p for p in call_prompts})
        assert sorted(json.dumps(e.prompt, default=str) for e in expected) == sorted(prompts)
        assert all(by_key[(e.episode.episode_id, e.t)].step.text == "x" for e in expected)


def test_agent_state_runs_forward_through_each_episode(minigui: Path) -> None:
    split = load_splits(minigui)["test_in_domain"]
    spec = PromptSpec(n_history=1)
    agent = CountingAgent(FMT.format(Action("wait"), CTX))
    answered = agent_steps(agent, split.episodes, spec, image_root=split.image_root, **PX)
    for a in answered:  # the memory counts the steps of the agent's own episode, in order
        assert a.step.info == {"plan": f"step {a.t + 1} of {a.episode.episode_id}", "seen": a.t}
    assert all(len({t for _, t in batch}) == 1 for batch in agent.batches)  # one step index per call
    again = agent_steps(agent, split.episodes[:1], spec, image_root=split.image_root, **PX)
    assert again[0].step.info["plan"].startswith("step 1 of")  # a new pass starts each episode afresh


def test_online_agent_matches_its_policy_and_records_info() -> None:
    tasks = generate_tasks(6, seed=3, prefix="t")[1:3]
    expert = {t.instruction: [FMT.format(s.action, CTX) for s in solve(t, seed=0, render=False).steps] for t in tasks}
    spec = PromptSpec(n_history=1, history_mode="nAO")

    def scripted():
        turn: dict[str, int] = {}

        def answer(prompt):
            goal = prompt[0][1]["content"][0]["text"].removeprefix("Task: ").rstrip("\n")
            k = turn.get(goal, 0)
            turn[goal] = k + 1
            return expert[goal][k]

        return FunctionPolicy(answer)

    kw = dict(width=W, height=H, max_turns=6, progress=False, **PX)
    a, b = scripted(), scripted()
    plain = play_online(a, tasks, spec, **kw)
    wrapped = play_online(as_agent(b, spec, **PX), tasks, spec, **kw)
    assert plain == wrapped and all(r["success"] for r in plain)
    assert [c[0] for c in a.calls] == [c[0] for c in b.calls]  # the very same prompts, turn by turn
    agent = CountingAgent(FMT.format(Action("wait"), CTX))
    res = play_online(agent, tasks, spec, **{**kw, "max_turns": 3})
    assert [i["plan"] for i in res[0]["agent_info"]] == [f"step {k} of {tasks[0].task_id}" for k in (1, 2, 3)]
    assert [i["seen"] for i in res[1]["agent_info"]] == [0, 1, 2]  # the agent's own history grows
    assert "agent_info" not in plain[0]  # a plain policy adds no field


def test_turn_is_a_plain_record() -> None:
    t = Turn("e1", "goal", (("click", "a.png"),), "b.png", (W, H))
    assert (t.step_instruction, t.t) == (None, 0)
    with pytest.raises(AttributeError):
        t.key = "other"  # frozen: a loop hands the same turn to no one else
