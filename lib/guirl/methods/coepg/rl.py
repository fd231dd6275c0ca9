"""Co-EPG's planner GRPO for the RL engine (role ``coepg.planner``, Co-EPG Sec. 4.2-4.3, App. B).

The planner ``pi_k`` is trained with GRPO on the training steps (the first
``coepg.max_train_steps`` of the data folder's ``train`` split), one task per step: its prompt is
the planner's (:func:`guirl.methods.coepg.prompts.planner_prompt`, the ground-truth history
``h_t``), ``rl.group_size`` sampled answers per task. Each answer is scored with C-DREM
(:func:`guirl.methods.coepg.reward.coepg_reward`, the ``coepg`` section's priors, reading of eq. 5
and weighting): where the answer's type matches a step with a target, every grounding model of
the ensemble grounds the plan (:class:`guirl.methods.coepg.grounding.Grounder`: a point and the
log-probabilities of its coordinate tokens from a forward pass), the grounders side by side
(App. B fetches their rewards asynchronously). Advantages are eq. 10 (``rl.advantage``).

The ensemble is the stage's inputs ``grounder0``, ``grounder1``, ... in the order of
``coepg.grpo.priors`` (App. B: Qwen2.5-VL-72B, -32B, then the trained ``phi_k`` last), frozen,
loaded in the stage process on the first reward call (so that each rank puts them on its own
device). Besides the reward components of :func:`coepg_reward`, each sample logs, where its plan
was grounded, ``hit_<j>`` (grounder ``j`` put the point in the box) and ``w_<j>`` (its weight);
the engine's log averages them per step (``reward/hit_0``, ...).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guirl.configbase import RunConfig

if TYPE_CHECKING:
    from guirl.rl.hooks import HookInputs, RLHooks

__all__ = ["GROUNDER_INPUT", "grounder_inputs", "planner_tasks", "cdrem_reward_hook", "planner_rl_hooks"]

#: Stage inputs of the ensemble: ``grounder0``, ``grounder1``, ... (in the order of the priors).
GROUNDER_INPUT = "grounder"


def grounder_inputs(folders: Sequence[str | Path]) -> dict[str, Path]:
    """``{"grounder0": folder0, ...}``: the stage inputs of an ensemble, in the order of the priors."""
    return {f"{GROUNDER_INPUT}{j}": Path(f) for j, f in enumerate(folders)}


def _ensemble(inputs: HookInputs) -> list[Path]:
    names = sorted(
        (k for k in inputs.inputs if k.startswith(GROUNDER_INPUT) and k[len(GROUNDER_INPUT) :].isdigit()),
        key=lambda k: int(k[len(GROUNDER_INPUT) :]),
    )
    if not names:
        inputs.input(f"{GROUNDER_INPUT}0", "coepg.planner")  # raises, naming the inputs there are
    if [int(k[len(GROUNDER_INPUT) :]) for k in names] != list(range(len(names))):
        raise KeyError(f"role 'coepg.planner': grounder inputs must be numbered 0..N-1, got {names}")
    return [Path(inputs.inputs[k]) for k in names]


def planner_tasks(cfg: RunConfig, data_dir: Path) -> list[Any]:
    """One :class:`guirl.rl.hooks.StepTask` per training step (module doc): the planner's prompt with
    the ground-truth history, and the columns of the reward (``gt_action``, ``gt_box``,
    ``candidate_boxes``, ``screen_size``, ``screenshot``, ``episode_id``, ``step_id``)."""
    from guirl.data.splits import train_split
    from guirl.methods.coepg.config import coepg_section, pixel_budget
    from guirl.methods.coepg.data import history_texts, referring_elements, training_steps
    from guirl.methods.coepg.prompts import planner_prompt, planner_settings
    from guirl.rl.hooks import StepTask

    sec = coepg_section(cfg)
    train = train_split(data_dir)
    lo, hi = pixel_budget(cfg)
    settings = planner_settings(cfg)
    out = []
    for ref in training_steps(train.episodes, train.image_root, sec.max_train_steps):
        step = ref.step
        hist = history_texts(ref, cfg.sft.output_format, min_pixels=lo, max_pixels=hi)
        row = {
            "gt_action": json.dumps(step.action.to_dict()),
            "gt_box": list(step.target_box) if step.target_box else None,
            "candidate_boxes": [list(b) for b in step.candidate_boxes],
            "screen_size": list(step.screen_size),
            "screenshot": ref.screenshot(),
            "episode_id": ref.episode.episode_id,
            "step_id": step.step_id,
        }
        prompt = planner_prompt(
            settings, ref.episode.instruction, hist, ref.screenshot(), elements=referring_elements(step)
        )
        out.append(StepTask(prompt=prompt, row=row))
    return out


def cdrem_reward_hook(load_grounders: Any, rcfg: Any):
    """The reward hook (module doc): ``load_grounders()`` returns the ensemble (called once, on the
    first call); ``rcfg`` a :class:`~guirl.methods.coepg.reward.CoEPGConfig`."""
    from guirl.matching import get_rules, types_match
    from guirl.methods.coepg.agent import read_planner
    from guirl.methods.coepg.grounding import ground_all
    from guirl.methods.coepg.reward import coepg_plan_reward, coepg_reward, grounded_gt
    from guirl.rewards.base import GroundTruth, RewardResult

    rules = get_rules(rcfg.rules)
    state: dict[str, Any] = {}

    def reward(samples: Sequence[Any]) -> list[RewardResult]:
        if "grounders" not in state:
            state["grounders"] = load_grounders()
        grounders = state["grounders"]
        answers = [read_planner(s.text) for s in samples]
        gts = [GroundTruth.from_row(s.row) for s in samples]
        need = [
            i
            for i, (a, g) in enumerate(zip(answers, gts, strict=True))
            if a.ok and a.plan and grounded_gt(g.action) and types_match(a.parsed.action, g.action, rules)
        ]
        queries = [
            (samples[i].row["screenshot"], tuple(samples[i].row["screen_size"]), answers[i].plan or "") for i in need
        ]
        outs = ground_all(grounders, queries) if queries else [[] for _ in grounders]
        grounded = {i: [outs[j][q] for j in range(len(grounders))] for q, i in enumerate(need)}
        results = []
        for i, (a, g) in enumerate(zip(answers, gts, strict=True)):
            pred = a.parsed if a.ok else a.parsed.__class__.fail(a.parsed.reason or "no plan", raw=samples[i].text)
            r = coepg_reward(pred, g, grounding=grounded.get(i, ()), cfg=rcfg)
            comps = dict(r.components)
            for j in range(len(grounders)):
                comps[f"hit_{j}"] = math.nan
                comps[f"w_{j}"] = math.nan
            if i in grounded:
                _, w, hits = coepg_plan_reward(grounded[i], g, rcfg)
                for j, (wj, hj) in enumerate(zip(w, hits, strict=True)):
                    comps[f"hit_{j}"], comps[f"w_{j}"] = float(hj), float(wj)
            results.append(RewardResult(r.total, comps))
        return results

    reward.__name__ = "cdrem_reward"
    return reward


def planner_rl_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Engine hooks of the planner (role ``coepg.planner``; module doc). ``inputs.reward`` is
    ignored unless it names another reward than Co-EPG's: the planner's reward needs the
    grounders, so a foreign reward is an error."""
    from guirl.methods.coepg.config import coepg_section, pixel_budget
    from guirl.methods.coepg.grounding import load_grounder
    from guirl.methods.coepg.prompts import planner_settings
    from guirl.methods.coepg.reward import coepg_reward
    from guirl.rl.hooks import RLHooks, single_turn_rollout
    from guirl.rl.samples import TaskStream, group_advantage_hook

    if inputs.reward is not None and inputs.reward.fn is not coepg_reward:
        raise ValueError(
            f"role 'coepg.planner' trains with C-DREM (rl.reward: null or coepg), not {inputs.reward.name!r}"
        )
    sec = coepg_section(cfg)
    rcfg = sec.reward_config()
    folders = _ensemble(inputs)
    if rcfg.priors and len(rcfg.priors) != len(folders) and rcfg.weighting in ("cdrem", "prior"):
        raise ValueError(
            f"coepg.grpo.priors {tuple(rcfg.priors)} name {len(rcfg.priors)} grounders; the stage has "
            f"{len(folders)} ({', '.join(f.name for f in folders)})"
        )
    lo, hi = pixel_budget(cfg)
    settings = planner_settings(cfg)
    rl = cfg.rl

    def load() -> list[Any]:
        device = "cpu"
        if cfg.runtime.device == "cuda":
            import torch

            device = f"cuda:{torch.cuda.current_device()}"
        return [
            load_grounder(
                f,
                settings,
                min_pixels=lo,
                max_pixels=hi,
                max_new_tokens=sec.grounder_max_new_tokens,
                batch_size=rl.rollout_batch_size,
                dtype=cfg.model.torch_dtype,
                device=device,
            )
            for f in folders
        ]

    tasks = planner_tasks(cfg, inputs.data_dir)
    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed),
        rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
        reward=cdrem_reward_hook(load, rcfg),
        advantage=group_advantage_hook(rl.advantage, eps=rl.adv_eps),
    )
