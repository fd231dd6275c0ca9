"""SO-RL, the semi-online RL baseline (guirl.rl.multiturn, guirl.rl.semi_online,
guirl.methods.semi_online): rollouts whose history is the model's own output, patching and
stopping, discounted returns and step- plus episode-level advantages, DAPO over trajectories, the
config section, and a toy task through the engine whose rewarded action must become more likely."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from guirl.actions.formats import get_format
from guirl.actions.types import Action, ActionType
from guirl.config import load_config
from guirl.data.schema import Episode, Step
from guirl.prompts import PromptSpec, format_context
from guirl.rewards.base import RewardResult
from guirl.rl.multiturn import (
    EpisodeTask,
    episode_tasks,
    full_history_image_tokens,
    prompt_image_tokens,
    semi_online_advantage_hook,
    semi_online_metrics,
    semi_online_rollout,
    trajectory_dapo_hooks,
)
from guirl.rl.samples import RolloutArgs, Sample, TaskStream
from guirl.rl.semi_online import (
    SemiOnlineConfig,
    discounted_step_returns,
    select_top_groups,
    semi_online_advantages,
    trajectory_dapo_keep,
    trajectory_dapo_std,
)
from guirl.rollout import Completion

HYP = settings(max_examples=100, deadline=None)
BUDGET = {"min_pixels": 3136, "max_pixels": 141120}  # the tiny profile's pixel budget
W, H = 280, 504


def _actions() -> list[Action]:
    return [
        Action(ActionType.CLICK, point=(0.5, 0.5)),
        Action(ActionType.TYPE, text="milk"),
        Action(ActionType.CLICK, point=(0.2, 0.75)),
    ]


def make_episode(folder: Path, actions: list[Action] | None = None, eid: str = "ep0") -> Episode:
    """A recorded episode with one solid-colour 280x504 screenshot per step, saved under ``folder``."""
    actions = actions or _actions()
    steps = []
    for i, a in enumerate(actions):
        name = f"{eid}_{i}.png"
        Image.new("RGB", (W, H), (40 * i, 100, 200 - 40 * i)).save(folder / name)
        steps.append(Step(step_id=i, screenshot=name, screen_size=(W, H), action=a))
    return Episode(episode_id=eid, instruction="buy milk", steps=tuple(steps), source="test")


def text_of(a: Action) -> str:
    return get_format("ccpo").format(a, format_context((W, H), **BUDGET))


WRONG = '<action>{"action": "wait"}</action>'  # parses, never the annotated action here


class RoundPolicy:
    """Answers round ``r`` of a lockstep rollout with ``rounds[r]`` (one text per running
    trajectory, in trajectory order), so a test states exactly who answered what."""

    def __init__(self, rounds: list[list[str]]) -> None:
        self.rounds = list(rounds)
        self.prompts: list[list] = []

    def complete(self, prompts, *, n=1, do_sample=False, temperature=1.0, top_p=1.0, seed=None):
        assert n == 1
        texts = self.rounds.pop(0)
        assert len(texts) == len(prompts), f"{len(prompts)} running trajectories, script has {len(texts)}"
        self.prompts.append(list(prompts))
        return [[Completion(t, (1, 2))] for t in texts]


def exact(parsed, gt) -> bool:
    return parsed.ok and parsed.action == gt.action


SPEC3 = PromptSpec("ccpo", 3, "nAO")


def rollout(tmp_path, rounds, *, n, threshold, spec=SPEC3, actions=None):
    ep = make_episode(tmp_path, actions)
    policy = RoundPolicy(rounds)
    hook = semi_online_rollout(exact, patch_threshold=threshold, **BUDGET)
    samples = hook(policy, [EpisodeTask(ep, spec, str(tmp_path))], RolloutArgs(group_size=n, seed=0))
    return samples, policy, ep


def trace(samples) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for s in samples:
        out.setdefault(s.info["rollout"], []).append(s.info["decision"])
    return out


# ----------------------------------------------------------------------------- patching and stopping
def test_patching_and_stopping_with_threshold_one(tmp_path):
    a = _actions()
    right = [text_of(x) for x in a]
    # three trajectories of one episode, patch threshold 1 (CCPO Table 8)
    samples, policy, _ = rollout(
        tmp_path,
        [
            [right[0], WRONG, "garbage"],  # A right; B wrong -> patched; C unparsable -> patched
            [WRONG, WRONG, right[1]],  # A wrong -> patched; B's second error -> stops; C right
            [WRONG, WRONG],  # A and C: second error -> stop (B no longer runs)
        ],
        n=3,
        threshold=1,
    )
    assert trace(samples) == {0: ["keep", "patch", "stop"], 1: ["patch", "stop"], 2: ["patch", "keep", "stop"]}
    assert [s.info["matched"] for s in samples if s.info["rollout"] == 0] == [True, False, False]
    # every generated step is a sample, the stopping one included
    assert len(samples) == 8 and {s.group for s in samples} == {0}
    # the history is the trajectory's own: A's round-1 prompt shows A's own step-0 text, B's the
    # annotation (patched); C's patched unparsable output shows the annotation, not "garbage"
    r1 = policy.prompts[1]
    texts = ["".join(c.get("text", "") for c in p[0][1]["content"]) for p in r1]
    assert right[0] in texts[0] and right[0] in texts[1] and right[0] in texts[2]
    assert "garbage" not in texts[2]
    # round 2: A shows its patched step 1 (the annotated "type milk"), C its own right step 1
    r2 = ["".join(c.get("text", "") for c in p[0][1]["content"]) for p in policy.prompts[2]]
    assert all(right[1] in t for t in r2)


@pytest.mark.parametrize(
    "threshold, rounds, expected",
    [
        # threshold 0: no patching, the first error ends a trajectory at that step
        (0, [[WRONG, "R0"]], {0: ["stop"], 1: ["keep"]}),
        # unlimited patches (-1): every step is generated whatever the errors
        (-1, [[WRONG, WRONG], [WRONG, WRONG], [WRONG, WRONG]], {0: ["patch"] * 3, 1: ["patch"] * 3}),
        # an error on the last step stops a trajectory that would have ended anyway
        (1, [["R0", "R0"], ["R1", "R1"], ["R2", WRONG]], {0: ["keep"] * 3, 1: ["keep", "keep", "patch"]}),
        # threshold 2: two patches, the third error stops
        (2, [[WRONG], [WRONG], [WRONG]], {0: ["patch", "patch", "stop"]}),
    ],
)
def test_patch_threshold_cases(tmp_path, threshold, rounds, expected):
    right = [text_of(x) for x in _actions()]
    rounds = [[right[int(t[1])] if t.startswith("R") else t for t in r] for r in rounds]
    n = len(rounds[0])
    if threshold == 0:  # trajectory 1 keeps going alone after trajectory 0 stopped at step 0
        rounds += [[right[1]], [right[2]]]
        expected = {0: ["stop"], 1: ["keep", "keep", "keep"]}
    samples, policy, _ = rollout(tmp_path, rounds, n=n, threshold=threshold)
    assert trace(samples) == expected
    assert not policy.rounds  # the script was used up: no extra round


def test_all_trajectories_stop_at_step_zero(tmp_path):
    # threshold 0 and every first answer wrong: one round, one sample per trajectory, no more calls
    samples, policy, _ = rollout(tmp_path, [[WRONG, WRONG]], n=2, threshold=0)
    assert trace(samples) == {0: ["stop"], 1: ["stop"]} and len(policy.prompts) == 1


def test_history_window_one_to_three_ao(tmp_path):
    # 3AO: step t shows min(t, 3) earlier steps; on a 5-step episode 1-3AO with 3AO the most
    # frequent among steps that have a history (CCPO App. A.1.3)
    acts = _actions() + [Action(ActionType.CLICK, point=(0.6, 0.6)), Action(ActionType.CLICK, point=(0.3, 0.3))]
    ep = make_episode(tmp_path, acts)
    right = [text_of(x) for x in acts]
    hook = semi_online_rollout(exact, patch_threshold=1, **BUDGET)
    policy = RoundPolicy([[r] for r in right])
    samples = hook(policy, [EpisodeTask(ep, PromptSpec("ccpo", 3, "nAO"), str(tmp_path))], RolloutArgs(1, seed=0))
    assert [s.info["history_pairs"] for s in samples] == [0, 1, 2, 3, 3]
    assert [s.info["images"] for s in samples] == [1, 2, 3, 4, 4]  # history screenshots + current
    m = semi_online_metrics([s.info for s in samples], {"prompt_tokens": 1000.0})
    assert m["history_full_share"] == pytest.approx(2 / 5) and m["compression_rate"] == 0.0  # full screenshots


def test_full_history_image_tokens(tmp_path):
    ep = make_episode(tmp_path)
    spec3, spec1, spec_a = PromptSpec("ccpo", 3, "nAO"), PromptSpec("ccpo", 1, "nAO"), PromptSpec("ccpo", 3, "nA")
    # a 280x504 screen is 10 x 18 = 180 tokens under the tiny budget
    assert full_history_image_tokens(ep, 2, spec3, **BUDGET) == (3, 540)
    assert full_history_image_tokens(ep, 2, spec1, **BUDGET) == (2, 360)
    assert full_history_image_tokens(ep, 2, spec_a, **BUDGET) == (1, 180)  # nA: text history
    paths = [str(tmp_path / s.screenshot) for s in ep.steps]
    assert prompt_image_tokens(paths, **BUDGET) == 540
    assert prompt_image_tokens([Image.new("RGB", (56, 84))], **BUDGET) == 6


def test_tasks_and_groups(tmp_path):
    e0, e1 = make_episode(tmp_path, eid="a"), make_episode(tmp_path, eid="b")
    specs = [PromptSpec("ccpo", 1, "nAO"), PromptSpec("ccpo", 3, "nAO")]
    tasks = episode_tasks([e0, e1], specs, image_root=tmp_path)
    assert [(t.episode.episode_id, t.spec.tag) for t in tasks] == [
        ("a", "1AO"),
        ("a", "3AO"),
        ("b", "1AO"),
        ("b", "3AO"),
    ]
    right = [text_of(x) for x in _actions()]
    policy = RoundPolicy([[right[0]] * 4, [right[1]] * 4, [right[2]] * 4] * 2)
    hook = semi_online_rollout(exact, patch_threshold=1, **BUDGET)
    samples = hook(policy, tasks, RolloutArgs(group_size=2, seed=0))
    # one group per task (its index), two trajectories each, three steps each
    assert sorted({s.group for s in samples}) == [0, 1, 2, 3] and len(samples) == 4 * 2 * 3
    assert all(s.row["episode_id"] == ("a" if s.group < 2 else "b") for s in samples)


# ----------------------------------------------------------------------------- advantages and returns
def _adv_loop(rewards, groups, trajs, steps, matches, gamma, omega, std):
    """Reference: per trajectory returns, per-task trajectory returns, per (task, step) groups."""
    n = len(rewards)
    keys = sorted({(g, k) for g, k in zip(groups, trajs)})
    step_ret = [0.0] * n
    traj_ret = {}
    for key in keys:
        idx = sorted((i for i in range(n) if (groups[i], trajs[i]) == key), key=lambda i: steps[i])
        g = discounted_step_returns([rewards[i] for i in idx], gamma, [matches[i] for i in idx])
        for i, v in zip(idx, g):
            step_ret[i] = v
        traj_ret[key] = sum(rewards[i] for i in idx)

    def norm(vals):
        if len(vals) < 2 or max(vals) == min(vals):
            return [0.0] * len(vals)
        m = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
        return [(v - m) / (sd + 1e-6) if std else v - m for v in vals]

    a_ep = {}
    for g in set(groups):
        ks = [k for k in keys if k[0] == g]
        for k, v in zip(ks, norm([traj_ret[k] for k in ks])):
            a_ep[k] = v
    a_st = [0.0] * n
    for g, t in {(groups[i], steps[i]) for i in range(n)}:
        idx = [i for i in range(n) if groups[i] == g and steps[i] == t]
        for i, v in zip(idx, norm([step_ret[i] for i in idx])):
            a_st[i] = v
    return [a_ep[(groups[i], trajs[i])] + omega * a_st[i] for i in range(n)]


def test_semi_online_advantages_by_hand():
    # one task, two trajectories: A = (1.0 matched, 0.5 matched), B = (0.2 unmatched -> stopped)
    rewards, groups, trajs, steps, matches = [1.0, 0.5, 0.2], [0, 0, 0], [0, 0, 1], [0, 1, 0], [True, True, False]
    adv = semi_online_advantages(rewards, groups, trajs, steps, matches, gamma=0.5, mode="mean_norm")
    # trajectory returns 1.5 and 0.2 -> +0.65 / -0.65; step 0 returns: A 1 + 0.5 * 0.5 = 1.25,
    # B 0.2 -> +0.525 / -0.525; step 1 has one trajectory -> 0
    assert adv.tolist() == pytest.approx([0.65 + 0.525, 0.65, -0.65 - 0.525])
    # the released code's episode term: each step reward over all the task's steps (mean 17/30)
    code = semi_online_advantages(
        rewards, groups, trajs, steps, matches, gamma=0.5, mode="mean_norm", episode_return="step_reward"
    )
    mean = (1.0 + 0.5 + 0.2) / 3
    assert code.tolist() == pytest.approx([1.0 - mean + 0.525, 0.5 - mean, 0.2 - mean - 0.525])
    assert semi_online_advantages([], [], [], [], [], gamma=0.5).numel() == 0


@HYP
@given(
    data=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3), st.floats(0, 1), st.booleans()),
        min_size=1,
        max_size=24,
        unique_by=lambda x: (x[0], x[1], x[2]),
    ),
    gamma=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    omega=st.sampled_from([0.0, 1.0, 2.0]),
    std=st.booleans(),
)
def test_semi_online_advantages_equal_the_loop(data, gamma, omega, std):
    groups, trajs, steps, rewards, matches = (list(x) for x in zip(*data))
    got = semi_online_advantages(
        rewards, groups, trajs, steps, matches, gamma=gamma, omega=omega, mode="mean_std_norm" if std else "mean_norm"
    )
    ref = _adv_loop(rewards, groups, trajs, steps, matches, gamma, omega, std)
    assert got.tolist() == pytest.approx(ref, abs=1e-6)


def _samples(spec):
    """Samples from ``(group, rollout, step, reward, matched)`` tuples."""
    return [
        Sample(
            prompt=([], []),
            completion_ids=(1,),
            text="",
            group=g,
            info={"rollout": k, "step": t, "matched": m},
            reward=r,
        )
        for g, k, t, r, m in spec
    ]


def test_dapo_over_trajectories():
    # gamma 0.5; step-0 returns G_0 per trajectory, population std (np.std) per task
    so = SemiOnlineConfig(gamma=0.5)
    samples = _samples(
        [
            (0, 0, 0, 1.0, True), (0, 0, 1, 1.0, True),  # task 0: G_0 = 1.5 ...
            (0, 1, 0, 1.0, True), (0, 1, 1, 1.0, True),  # ... and 1.5: std 0 -> dropped
            (1, 0, 0, 1.0, True), (1, 0, 1, 1.0, True),  # task 1: G_0 = 1.5 ...
            (1, 1, 0, 0.2, False),  # ... and 0.2 (cut): std 0.65 -> kept at threshold 0.2
            (2, 0, 0, 0.5, False),  # task 2: one trajectory -> kept (the released rule)
            (3, 0, 0, 0.6, False), (3, 1, 0, 0.4, False),  # task 3: std 0.1 -> dropped at 0.2
        ]
    )  # fmt: skip
    keep, select = trajectory_dapo_hooks(so, 0.2)
    kept = {s.group for s, k in zip(samples, keep(samples)) if k}
    assert kept == {1, 2}
    cols = ([s.reward for s in samples], [s.group for s in samples], [s.info["rollout"] for s in samples],
            [s.info["step"] for s in samples], [s.info["matched"] for s in samples])  # fmt: skip
    stats = trajectory_dapo_std(*cols, gamma=0.5)
    assert stats[1] == (pytest.approx(0.65), 2) and stats[3] == (pytest.approx(0.1), 2) and stats[2] == (0.0, 1)
    assert trajectory_dapo_keep(*cols, gamma=0.5, std_threshold=0.05) == [s.group in (1, 2, 3) for s in samples]
    # top-B by the DAPO std (Algorithm 1 line 26): of tasks 1 (0.65), 3 (0.1), 0 (0), keep 2
    assert {s.group for s in select(samples, 2)} == {1, 3}
    assert trajectory_dapo_hooks(SemiOnlineConfig(dapo_select="first"), 0.2)[1] is None  # engine: first B


@pytest.mark.parametrize(
    "groups, scores, n, expected",
    [
        ([0, 0, 1, 2], {0: 0.1, 1: 0.5, 2: 0.3}, 2, [1, 2]),  # the two highest, in draw order
        ([0, 1, 2], {0: 0.5, 1: 0.5, 2: 0.5}, 2, [0, 1]),  # ties: earlier first
        ([0, 1], {0: 0.5}, 1, [0]),  # a group without a score ranks last
        ([0, 1], {0: 0.5, 1: 0.6}, 5, [0, 1]),  # fewer groups than asked
    ],
)
def test_select_top_groups(groups, scores, n, expected):
    assert select_top_groups(groups, scores, n) == expected


def test_advantage_hook_reads_the_section():
    so = SemiOnlineConfig(gamma=0.5, advantage_mode="mean_norm")
    samples = _samples([(0, 0, 0, 1.0, True), (0, 0, 1, 0.5, True), (0, 1, 0, 0.2, False)])
    adv = semi_online_advantage_hook(so)(samples)
    assert adv.tolist() == pytest.approx([0.65 + 0.525, 0.65, -0.65 - 0.525])  # the hand case above
    assert semi_online_advantage_hook(so)([]).numel() == 0


# ----------------------------------------------------------------------------- config
def test_config_section_defaults_and_bounds():
    cfg = load_config("tiny", overrides=["rl.role=semi_online"])
    assert cfg.rl.role == "semi_online"
    so = SemiOnlineConfig()  # CCPO Table 8 (AndroidControl column)
    assert (so.gamma, so.patch_threshold, so.advantage_weight) == (0.5, 1, 1.0)
    from guirl.config import ConfigError

    with pytest.raises(ConfigError, match="semi_online.gamma"):
        load_config("tiny", overrides=["semi_online.gamma=1.5"])
    with pytest.raises(ConfigError, match="rl.role"):
        load_config("tiny", overrides=["rl.role=agentcpm"])  # a method without an RL role


@pytest.mark.parametrize(
    "experiment, gamma, batch, dapo",
    [
        ("androidcontrol", 0.5, 32, 0.2),  # CCPO Table 8, AC
        ("guiodyssey", 0.3, 8, 0.1),  # GUI-Odyssey
        ("mind2web", 0.3, 16, 0.1),  # Mind2Web
    ],
)
def test_table8_per_data_set(experiment, gamma, batch, dapo):
    cfg = load_config("paper-3b", experiment=experiment)
    assert cfg.semi_online.gamma == gamma and cfg.rl.prompts_per_step == batch and cfg.rl.dapo_std_threshold == dapo
    assert cfg.rl.group_size == 8 and cfg.semi_online.patch_threshold == 1  # CCPO App. A.5, Table 8


def test_metrics_of_a_skipped_step():
    assert semi_online_metrics([], {"prompt_tokens": None})["compression_rate"] is None


# ----------------------------------------------------------------------------- the engine
@pytest.fixture(scope="module")
def tiny_model() -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model()


def _toy_hooks(folder: Path, sign: float):
    """A two-step recorded episode; an even first token earns 1, an odd one 0 at every step; every
    step "matches" (no patching), so trajectories run to the end. The advantage is SO-RL's
    (discounted step returns, step- and episode-level groups), times ``sign``."""
    from guirl.rl.hooks import RLHooks

    ep = make_episode(folder, _actions()[:2])
    spec = PromptSpec("ccpo", 1, "nAO")
    so = SemiOnlineConfig(gamma=0.5)
    adv = semi_online_advantage_hook(so)

    def reward(samples):
        return [RewardResult(float(s.completion_ids[0] % 2 == 0)) for s in samples]

    return RLHooks(
        tasks=TaskStream([EpisodeTask(ep, spec, str(folder))], seed=0),
        rollout=semi_online_rollout(lambda p, g: True, patch_threshold=1, **BUDGET),
        reward=reward,
        advantage=lambda samples: sign * adv(samples),
        metrics=semi_online_metrics,
    ), ep


def _p_even(model_dir: Path, prompt) -> float:
    from guirl.models import load_model, load_processor
    from guirl.rl.logprobs import FORWARD_KEYS, encode_samples

    model = load_model(model_dir)
    proc = load_processor(model_dir, **BUDGET)
    batch = encode_samples(proc, [prompt], [(0,)])
    with torch.no_grad():
        logits = model(**{k: batch[k] for k in FORWARD_KEYS}, logits_to_keep=2).logits[:, 0].float()
    return float(torch.softmax(logits, -1)[:, 0::2].sum(-1).mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    "sign, direction",
    [
        (1.0, +1),  # the rewarded (even) first token must become more likely
        (-1.0, -1),  # control: flipped SO-RL advantages make it less likely, so the first case can fail
    ],
)
def test_rewarded_action_probability_rises_with_the_so_rl_hooks(tiny_model, tmp_path, sign, direction):
    from guirl.prompts import build_prompt
    from guirl.rollout import HFPolicy
    from guirl.train.rl import LOG_FILE, read_log, train_rl

    hooks, ep = _toy_hooks(tmp_path, sign)
    cfg = load_config(
        "tiny",
        overrides=[
            "rl.max_new_tokens=1",
            "rl.group_size=8",
            "rl.prompts_per_step=1",
            "rl.learning_rate=0.03",
            "rl.beta=0",
            "rl.micro_batch_size=16",
            "rl.save_steps=1000",
            "rl.max_steps=6",
            "model.min_pixels=3136",
            "model.max_pixels=141120",
        ],
    )
    prompt0 = build_prompt(ep.instruction, [], str(tmp_path / ep.steps[0].screenshot), PromptSpec("ccpo", 1, "nAO"))
    before = _p_even(tiny_model, prompt0)

    def make_policy(model, processor):
        return HFPolicy(model, processor, max_new_tokens=1, batch_size=8)

    out = tmp_path / "run"
    result = train_rl(cfg, hooks, base_model=tiny_model, output_dir=out, make_policy=make_policy, progress=False)
    after = _p_even(Path(result["final"]), prompt0)
    assert abs(before - 0.5) < 0.02  # random init: even and odd ids about equally likely
    # measured (6 steps): 0.50 -> 1.00, and 0.50 -> 0.003 with flipped advantages
    assert direction * (after - before) > 0.15, (before, after)
    rows = read_log(out / LOG_FILE)
    # 8 trajectories x 2 steps a step; the metrics hook's fields are logged
    assert all(r["n_generated"] == 16 and r["history_pairs"] == 0.5 for r in rows)


def test_engine_keeps_the_top_groups_by_dapo_std_across_draws(tmp_path):
    """The engine's collect loop with the SO-RL DAPO hooks and a scripted policy: constant groups
    are dropped, more tasks drawn, and when a draw overfills the batch the groups with the largest
    step-0 return spread are kept (``select``), not the first ones."""
    from accelerate import Accelerator

    from guirl.rl.hooks import RLHooks
    from guirl.train.rl import _Engine

    ep = make_episode(tmp_path, _actions()[:1])  # one step per trajectory
    spec = PromptSpec("ccpo", 1, "nAO")
    tasks = [EpisodeTask(ep, spec, str(tmp_path)) for _ in range(4)]
    # task k's two trajectories earn (1, 1 - spread[k]): spreads 0 (dropped), 0.5, 0.9, 0.3
    spread = [0.0, 0.5, 0.9, 0.3]
    calls = iter(range(100))

    def rollout(policy, batch, args):
        out = []
        for g, _ in enumerate(batch):
            k = next(calls)
            for r in range(args.group_size):
                out.append(Sample(([], []), (1,), "", g, {"k": k}, {"rollout": r, "step": 0, "matched": False}))
        return out

    def reward(samples):
        return [RewardResult(1.0 - spread[s.row["k"]] * s.info["rollout"]) for s in samples]

    so = SemiOnlineConfig(gamma=0.5)
    keep, select = trajectory_dapo_hooks(so, 0.1)
    hooks = RLHooks(
        tasks=TaskStream(tasks, shuffle=False),
        rollout=rollout,
        reward=reward,
        advantage=semi_online_advantage_hook(so),
        keep=keep,
        select=select,
    )
    cfg = load_config("tiny", overrides=["rl.prompts_per_step=2", "rl.group_size=2", "rl.max_draws=3"])

    class Dummy:
        def eval(self):
            return self

    engine = _Engine(cfg, hooks, None, Dummy(), None, Accelerator(cpu=True))
    kept, generated, info = engine.collect(object(), step=1)
    # draw 1: tasks 0 (dropped), 1 (kept); draw 2: tasks 2, 3 -> three groups for two places:
    # the spreads 0.9 and 0.5 stay (stds 0.45 and 0.25), 0.3 goes
    assert info["draws"] == 2 and len(generated) == 8
    assert sorted({s.row["k"] for s in kept}) == [1, 2]
