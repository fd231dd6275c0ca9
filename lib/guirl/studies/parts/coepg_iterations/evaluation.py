"""Notebook 03's evaluation: every agent on the same test steps (``coepg.eval.max_test_steps`` of each
test split, episodes in a seeded random order, Co-EPG App. A), the models of each iteration and of
Figure 5's checkpoints, Avg SR over pooled splits with its interval."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split
from guirl.methods.coepg.config import coepg_section, pixel_budget
from guirl.studies.parts.coepg_iterations.ablations import Ablation
from guirl.studies.parts.coepg_iterations.loop import LoopResult, checkpoint_steps
from guirl.studies.parts.coepg_iterations.models import checkpoint_model, dual_agent, model_policy

__all__ = [
    "E2E",
    "eval_order",
    "evaluate_models",
    "with_seeds",
    "iteration_label",
    "iteration_models",
    "iteration_pairs",
    "figure5_models",
    "figure5_table",
    "pooled",
    "sr",
    "top_answer_share",
]


def eval_order(cfg: Config, splits: Mapping[str, Split]) -> dict[str, Split]:
    """Each test split with its episodes in a seeded random order (``cfg.seed``), so that its first
    ``coepg.eval.max_test_steps`` steps are a random sample of episodes (App. A samples step-actions at
    random)."""
    out = {}
    for name, sp in splits.items():
        eps = list(sp.episodes)
        random.Random(f"{cfg.seed}:{name}").shuffle(eps)
        out[name] = replace(sp, episodes=tuple(eps))
    return out


def evaluate_models(
    cfg: Config,
    models: Mapping[str, Callable[[], Any]],
    splits: Mapping[str, Split],
    *,
    labels: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool = True,
    level: str = "High",
) -> list[dict[str, Any]]:
    """Prediction records of every model (a function building an agent or policy, called once) on
    the first ``coepg.eval.max_test_steps`` steps of each split (:func:`eval_order`), greedy, history of
    ``coepg.n_history`` actions as text, scored with Co-EPG's own protocol
    (:func:`guirl.methods.coepg.evaluation.eval_protocol`: the smallest-element rule, or Mind2Web's),
    at instruction ``level`` (``"High"`` or ``"Low"``, Table 2; recorded as the ``level`` label);
    ``labels[name]`` is added to that model's records (``seed``: 0 unless given). A name
    ``"<model>#<anything>"`` is recorded as ``<model>`` (the seeds of one model, told apart by their
    ``seed`` label)."""
    from tqdm.auto import tqdm

    from guirl.methods.coepg.evaluation import agent_at_level, eval_protocol, level_spec
    from guirl.prompts import prompt_spec
    from guirl.studies.shared.evaluation import evaluate_offline

    sec = coepg_section(cfg)
    lo, hi = pixel_budget(cfg)
    spec = level_spec(prompt_spec(cfg, f"{sec.n_history}A"), level)
    out: list[dict[str, Any]] = []
    for name, build in tqdm(models.items(), desc="evaluation", disable=not progress):
        agent = agent_at_level(build(), level)
        for split_name, sp in splits.items():
            out += evaluate_offline(
                agent,
                sp.episodes,
                spec,
                protocol=eval_protocol(cfg.data.source),
                image_root=sp.image_root,
                min_pixels=lo,
                max_pixels=hi,
                model_name=name.split("#")[0],
                split=split_name,
                max_steps=sec.eval.max_test_steps,
                labels={"seed": 0, "level": level, **dict((labels or {}).get(name, {}))},
            )
        del agent
    return out


def with_seeds(records: Sequence[dict[str, Any]], seeds: Sequence[int], models: Sequence[str]) -> list[dict[str, Any]]:
    """The records of ``models`` (evaluated once, seed 0) repeated for every seed of ``seeds``, so
    that they pair with models trained per seed; other records unchanged."""
    out = []
    for r in records:
        if r["model"] in models:
            out += [{**r, "seed": sd} for sd in seeds]
        else:
            out.append(r)
    return out


def iteration_models(loop: LoopResult) -> tuple[dict[str, Callable[[], Any]], dict[str, dict[str, Any]]]:
    """``(models, labels)`` for :func:`evaluate_models`: per iteration the SFT dual model
    ``{pi_k, phi_k}`` and ``M_k = {pi'_k, phi_k}`` of every run (seed label), and the end-to-end
    baseline (a single policy answering the run's format)."""
    cfg = loop.setup.cfg
    models: dict[str, Callable[[], Any]] = {}
    labels: dict[str, dict[str, Any]] = {}
    for it in loop.iterations:
        phi = it.grounder_sft["final"]
        models[iteration_label(it.k, False)] = lambda it=it, phi=phi: dual_agent(cfg, it.planner_sft["final"], phi)
        for r, g in enumerate(it.grpo):
            key = iteration_label(it.k, True) + ("" if r == 0 else f"#{r}")
            models[key] = lambda g=g, phi=phi: dual_agent(cfg, g["final"], phi)
            labels[key] = {"seed": r}
    if loop.e2e:
        models[E2E] = lambda: model_policy(cfg, loop.e2e["final"], max_new_tokens=cfg.eval.max_new_tokens)
    return models, labels


#: The end-to-end baseline's model name (Co-EPG Table 3's row).
E2E = "End2End"


def iteration_pairs(k_max: int) -> list[tuple[str, str]]:
    """The paired comparisons of Tables 6 / 7 and Figure 2: GRPO within each iteration
    (``w/o GRPO -> M_k``), and each later iteration against the first, with and without GRPO."""
    pairs = [(iteration_label(k, False), iteration_label(k, True)) for k in range(1, k_max + 1)]
    pairs += [(iteration_label(1, g), iteration_label(k, g)) for g in (True, False) for k in range(2, k_max + 1)]
    return pairs


def figure5_models(
    loop: LoopResult, runs: Sequence[tuple[str, Ablation]], results: Mapping[str, Sequence[Mapping[str, Any]]]
) -> tuple[dict[str, Callable[[], Any]], dict[str, dict[str, Any]], list[tuple[str, str, int]]]:
    """The checkpoints of Figure 5's runs (``(label, run)``; their seed-0 GRPO stage) as dual
    agents with ``phi_1``: ``(models, labels, index)`` where ``index`` holds ``(model name, label,
    step)``; the final step is the run's own model, step 0 is ``pi_1`` (``Iteration 1 w/o GRPO``,
    evaluated with the iterations)."""
    cfg = loop.setup.cfg
    phi = loop.iterations[0].grounder_sft["final"]
    models: dict[str, Callable[[], Any]] = {}
    index: list[tuple[str, str, int]] = []
    for label, a in runs:
        res = results[a.name][0]
        steps = int(res["global_step"])
        every = checkpoint_steps(steps)
        index.append((iteration_label(1, False), label, 0))
        for step in range(every, steps, every):
            name = f"{a.name}@{step}"
            out = Path(res["final"]).parent / f"model-{step}"
            models[name] = lambda res=res, step=step, out=out: dual_agent(cfg, checkpoint_model(res, step, out), phi)
            index.append((name, label, step))
        index.append((a.name, label, steps))
    return models, {}, index


def figure5_table(
    cfg: Config, records: Sequence[dict[str, Any]], index: Sequence[tuple[str, str, int]]
) -> pd.DataFrame:
    """Avg SR (pooled splits) with its interval of each ``(model, run label, step)`` of ``index``."""
    rows = []
    for name, label, step in index:
        avg, lo, hi, n = sr(cfg, [r for r in records if r["model"] == name and r.get("seed", 0) == 0])
        rows.append(
            {"run": label, "step": step, "model": name, "Avg SR": avg, "Avg SR lo": lo, "Avg SR hi": hi, "n_steps": n}
        )
    return pd.DataFrame(rows).sort_values(["run", "step"], kind="stable").reset_index(drop=True)


def pooled(records: Sequence[dict[str, Any]], split: str = "avg") -> list[dict[str, Any]]:
    """Records with every split renamed ``split``: their steps pooled (Avg SR over splits of equal
    step counts, Table 6's average)."""
    return [{**r, "split": split} for r in records]


def sr(cfg: Config, records: Sequence[dict[str, Any]]) -> tuple[float, float, float, int]:
    from guirl.metrics.bootstrap import rate_with_ci

    vals = [float(r["exact"]) for r in records if r.get("counted", True)]
    if not vals:
        return math.nan, math.nan, math.nan, 0
    m, lo, hi = rate_with_ci(vals, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
    return 100 * m, 100 * lo, 100 * hi, len(vals)


def top_answer_share(records: Sequence[dict[str, Any]]) -> float:
    """Share (%) of the counted steps whose raw ``output`` text is the model's most frequent one:
    100 for a policy that writes the same answer everywhere (a collapsed planner), near
    100 / steps for one that never repeats; NaN without counted steps."""
    outs = Counter(str(r.get("output")) for r in records if r.get("counted", True))
    total = sum(outs.values())
    return 100 * outs.most_common(1)[0][1] / total if total else math.nan


def iteration_label(k: int, grpo: bool) -> str:
    """Table 6 / 7's row names: ``Iteration k w/o GRPO`` and ``Iteration k (Mk)``."""
    return f"Iteration {k} (M{k})" if grpo else f"Iteration {k} w/o GRPO"
