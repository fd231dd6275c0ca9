"""Notebook 03's ablation runs (Co-EPG Tables 4 and 5): short GRPO runs from ``pi_1`` with the
iteration-1 ensemble, one per weighting of Table 4 and per prior ratio and reading of eq. 5 of
Table 5; a run serving several cells is trained once, the full C-DREM row is the main run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guirl.config import Config
from guirl.methods.coepg.config import coepg_section
from guirl.studies.parts.coepg_iterations.loop import (
    LoopResult,
    OnSchedule,
    Runner,
    default_runner,
    grpo_stage,
    plan_batch,
    print_schedule,
    run_name,
)
from guirl.studies.parts.coepg_iterations.models import dual_agent

__all__ = [
    "Ablation",
    "TABLE4",
    "TABLE5",
    "READINGS",
    "ablation_runs",
    "ablation_label",
    "ablation_models",
    "ratio",
    "resolve_rows",
    "run_ablations",
    "table4_rows",
    "table5_rows",
    "main_run",
]


@dataclass(frozen=True)
class Ablation:
    """One ablation GRPO run from ``pi_1``: ``name`` (its folder), the ``coepg.grpo`` keys it sets
    (``weighting``, ``priors``, ``confidence``); ``main``: it equals the main iteration-1 run
    (reused, not trained again)."""

    name: str
    weighting: str = "cdrem"
    priors: tuple[float, ...] = (1.0, 1.0, 2.0)
    confidence: str = "logprob"
    main: bool = False

    @property
    def key(self) -> tuple[Any, ...]:
        """What decides the reward: the priors only matter to ``cdrem`` and ``prior``, the reading
        of eq. 5 only to ``cdrem``."""
        if self.weighting == "cdrem":
            return (self.weighting, self.priors, self.confidence)
        if self.weighting == "prior":
            return (self.weighting, self.priors)
        return (self.weighting,)

    def overrides(self) -> dict[str, Any]:
        return {
            "coepg__grpo__weighting": self.weighting,
            "coepg__grpo__priors": list(self.priors),
            "coepg__grpo__confidence": self.confidence,
        }


#: Co-EPG Table 4's rows, in the paper's order, and their weighting (Sec. 5.4).
TABLE4 = (
    ("w/o C-DREM", "single"),
    ("w/o Confidence & Prior Weights", "average"),
    ("w/o Confidence Weights", "prior"),
    ("C-DREM", "cdrem"),
)
#: Co-EPG Table 5's prior ratios (72B : 32B : phi_k), in the paper's order.
TABLE5 = ((1.0, 1.0, 1.0), (1.0, 1.0, 1.5), (1.0, 1.0, 2.0), (1.0, 1.0, 3.0))
#: The two readings of eq. 5 (``coepg.grpo.confidence``).
READINGS = {"logprob": "literal eq. 5", "prob": "intent"}


def ratio(p: Sequence[float]) -> str:
    return ":".join(f"{v:g}" for v in p)


def main_run(cfg: Config) -> Ablation:
    g = coepg_section(cfg).grpo
    return Ablation("main", g.weighting, tuple(float(v) for v in g.priors), g.confidence, True)


def table4_rows(cfg: Config) -> list[tuple[str, Ablation]]:
    """Table 4's rows as ``(label, run)``: each weighting at the run's priors and reading."""
    m = main_run(cfg)
    return [(label, Ablation(f"t4_{w}", w, m.priors, m.confidence)) for label, w in TABLE4]


def table5_rows() -> list[tuple[str, Ablation]]:
    """Table 5's cells as ``(label, run)``: every prior ratio under both readings of eq. 5."""
    return [
        (f"priors {ratio(p)} ({READINGS[c]})", Ablation(f"t5_{ratio(p).replace(':', '-')}_{c}", "cdrem", p, c))
        for c in READINGS
        for p in TABLE5
    ]


def _canonical(runs: Sequence[Ablation], main: Ablation) -> dict[tuple[Any, ...], Ablation]:
    out: dict[tuple[Any, ...], Ablation] = {main.key: main}
    for a in runs:
        out.setdefault(a.key, a)
    return out


def ablation_runs(cfg: Config) -> list[Ablation]:
    """The distinct GRPO runs of Tables 4 and 5 (a run serving several cells is listed once; the one
    equal to the main iteration-1 run is marked ``main``)."""
    main = main_run(cfg)
    rows = [a for _, a in table4_rows(cfg)] + [a for _, a in table5_rows()]
    return list(_canonical(rows, main).values())


def resolve_rows(cfg: Config, rows: Sequence[tuple[str, Ablation]]) -> list[tuple[str, Ablation]]:
    """``rows`` with each run replaced by the distinct run of :func:`ablation_runs` it equals."""
    canon = _canonical(ablation_runs(cfg), main_run(cfg))
    return [(label, canon[a.key]) for label, a in rows]


def ablation_label(name: str, r: int) -> str:
    """Label of seed ``r`` of ablation run ``name`` in 03's stage tables."""
    return f"ablation {name} run {r}"


def run_ablations(
    loop: LoopResult,
    runs: Sequence[Ablation],
    *,
    runner: Runner | None = None,
    on_schedule: OnSchedule | None = print_schedule,
) -> dict[str, list[dict[str, Any]]]:
    """Train (or reuse) every ablation run from ``pi_1`` with the iteration-1 ensemble, ``coepg.n_runs``
    seeds each; ``{name: [result per seed]}``, the main run's results for the run marked ``main``.
    Their RL steps go to ``on_schedule`` before they train (:func:`~guirl.studies.parts.coepg_iterations.loop.plan_batch`)."""
    s, cfg = loop.setup, loop.setup.cfg
    runner = runner or default_runner
    first = loop.iterations[0]
    n = coepg_section(cfg).n_runs
    stages, names = {}, []
    for a in runs:
        if a.main:
            continue
        for r in range(n):
            stages[ablation_label(a.name, r)] = grpo_stage(
                s,
                first.planner_sft,
                loop.ensemble(1),
                s.run_dir / "ablations" / run_name(a.name, r),
                seed=cfg.seed + r,
                **a.overrides(),
            )
            names.append(a.name)
    if stages:
        plan_batch(stages, on_schedule)
    results = runner(list(stages.values()), cfg.runtime.parallel_stages) if stages else []
    out: dict[str, list[dict[str, Any]]] = {a.name: [] for a in runs}
    for name, res in zip(names, results, strict=True):
        out[name].append(res)
    for a in runs:
        if a.main:
            out[a.name] = list(first.grpo)
    return out


def ablation_models(loop: LoopResult, runs: Sequence[Ablation], results: Mapping[str, Sequence[Mapping[str, Any]]]):
    """``({model name: build agent}, {model name: labels})`` of every ablation run and seed for
    :func:`evaluate_models`: planner = the run's GRPO result, grounder = ``phi_1``; the seeds of one
    run share its name (records carry ``seed``)."""
    cfg = loop.setup.cfg
    phi = loop.iterations[0].grounder_sft["final"]
    models, labels = {}, {}
    for a in runs:
        for r, res in enumerate(results[a.name]):
            key = a.name if r == 0 else f"{a.name}#{r}"
            models[key] = lambda res=res: dual_agent(cfg, res["final"], phi)
            labels[key] = {"seed": r}
    return models, labels
