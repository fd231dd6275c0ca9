"""Notebook 03's Co-EPG loop as stages (:mod:`guirl.studies.coepg_iterations` is the notebook's module):
the set-up, the pools ``Pi_0`` / ``Phi_0``, the data ``D_k``, the SFT and GRPO stages of every
iteration and :func:`run_iterations`, resumable (a killed run continues at the last finished model)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.data.splits import load_splits
from guirl.methods.coepg.config import coepg_section, grpo_stage_config, pixel_budget, sft_stage_config
from guirl.methods.coepg.data import (
    PlanRow,
    Pool,
    StepRef,
    annotation_rows,
    e2e_records,
    enhance,
    grounder_records,
    planner_records,
    read_rows,
    training_steps,
    write_rows,
)
from guirl.methods.coepg.prompts import PlannerPromptSettings, planner_settings
from guirl.methods.coepg.rl import grounder_inputs
from guirl.studies.parts.coepg_iterations.models import _grounder, model_id, model_policy
from guirl.train.launch import SFT_ENTRY, Stage, run_stages
from guirl.train.rl import RL_ENTRY

__all__ = [
    "NOTEBOOK",
    "Setup",
    "Iteration",
    "LoopResult",
    "Runner",
    "Builder",
    "setup",
    "start_model",
    "pool_stages",
    "initial_pools",
    "build_data",
    "iteration_records",
    "sft_stages",
    "e2e_stage",
    "checkpoint_steps",
    "grpo_stage",
    "run_iterations",
    "run_name",
    "default_runner",
    "pool_label",
    "sft_label",
    "grpo_label",
    "E2E_LABEL",
    "OnSchedule",
    "plan_batch",
    "print_schedule",
]

NOTEBOOK = "03_coepg_iterations"
#: Label of the end-to-end baseline's stage (Table 3) in 03's ``stages`` and ``sft_schedule`` tables.
E2E_LABEL = "end-to-end baseline"


def pool_label(kind: str, j: int) -> str:
    """Label of pool model ``j`` of ``kind`` (``planners`` / ``verifiers``) in 03's stage tables."""
    return f"pool {kind.removesuffix('s')} {j}"


def grpo_label(k: int, r: int) -> str:
    """Label of iteration ``k``'s GRPO run ``r`` (``pi'_k``) in 03's stage tables."""
    return f"iter {k} planner GRPO (pi'_{k}) run {r}"


def sft_label(k: int, kind: str) -> str:
    """Label of iteration ``k``'s SFT stage of ``kind`` (``planner``: ``pi_k``, ``grounder``:
    ``phi_k``, ``e2e``: the end-to-end baseline) in 03's stage tables."""
    if kind == "e2e":
        return E2E_LABEL
    symbol = {"planner": "pi", "grounder": "phi"}[kind]
    return f"iter {k} {kind} SFT ({symbol}_{k})"


# ----------------------------------------------------------------------------- set-up
@dataclass(frozen=True)
class Setup:
    """What every step of the loop reads: the run config, the data folder, the run folder, the
    training steps (``coepg.max_train_steps``) and their index, the prompt settings, the pixel
    budget, the history format (the run's ``sft.output_format``) and the start model."""

    cfg: Config
    data_dir: Path
    run_dir: Path
    steps: tuple[StepRef, ...]
    settings: PlannerPromptSettings
    min_pixels: int
    max_pixels: int
    history_format: str
    start: Path
    index: Mapping[tuple[str, int], StepRef] = field(default_factory=dict)


def start_model(cfg: Config) -> Path:
    """The model every Co-EPG SFT stage starts from: 01's grounding model when the profile trains
    one (the tiny profile's random-init model cannot read a screen otherwise), else the base
    model (the paper profiles: Qwen2.5-VL)."""
    from guirl.studies.shared.inputs import base_model_dir, upstream_result

    if cfg.grounding.enabled:
        return Path(upstream_result(cfg, "01_sft", "grounding")["final"])
    return base_model_dir(cfg)


def setup(
    cfg: Config, *, run_dir: Path | None = None, start: Path | None = None, data_dir: Path | None = None
) -> Setup:
    """The :class:`Setup` of a run (defaults: ``runs/<profile>/03_coepg_iterations``,
    :func:`start_model`, the run's prepared data set)."""
    from guirl.paths import runs_dir
    from guirl.studies.shared.inputs import dataset_dir

    sec = coepg_section(cfg)
    data = Path(data_dir) if data_dir is not None else dataset_dir(cfg)
    train = load_splits(data)["train"]
    steps = tuple(training_steps(train.episodes, train.image_root, sec.max_train_steps))
    lo, hi = pixel_budget(cfg)
    return Setup(
        cfg=cfg,
        data_dir=data,
        run_dir=Path(run_dir) if run_dir is not None else runs_dir(cfg.profile) / NOTEBOOK,
        steps=steps,
        settings=planner_settings(cfg),
        min_pixels=lo,
        max_pixels=hi,
        history_format=cfg.sft.output_format,
        start=Path(start) if start is not None else start_model(cfg),
        index={ref.key: ref for ref in steps},
    )


def _records_stage(s: Setup, records: Path, out: Path, seed: int | None = None) -> Stage:
    cfg = sft_stage_config(s.cfg, **({} if seed is None else {"seed": seed}))
    return Stage(
        name="records",
        entry=SFT_ENTRY,
        cfg=cfg,
        inputs={"data": s.data_dir, "records": records},
        base_model=s.start,
        output_dir=out,
    )


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    from guirl.train.data import write_records

    return write_records(path, records)


def _planner_recs(s: Setup, rows: Sequence[PlanRow], *, enhancement: bool = False) -> list[dict[str, Any]]:
    return planner_records(
        rows,
        s.index,
        s.settings,
        data_dir=s.data_dir,
        history_format=s.history_format,
        min_pixels=s.min_pixels,
        max_pixels=s.max_pixels,
        enhancement=enhancement,
    )


def _grounder_recs(s: Setup, rows: Sequence[PlanRow]) -> list[dict[str, Any]]:
    return grounder_records(
        rows, s.index, s.settings, data_dir=s.data_dir, min_pixels=s.min_pixels, max_pixels=s.max_pixels
    )


# ----------------------------------------------------------------------------- pools (k = 0)
def pool_stages(s: Setup) -> dict[str, list[Stage]]:
    """``{"planners": [...], "verifiers": [...]}``: the pool models to train (module doc, step 1);
    a kind whose ``coepg.planners`` / ``coepg.verifiers`` list is set trains none."""
    sec = coepg_section(s.cfg)
    n = sec.pool_size
    episode_no = {ep_id: i for i, ep_id in enumerate(dict.fromkeys(ref.episode.episode_id for ref in s.steps))}
    out: dict[str, list[Stage]] = {"planners": [], "verifiers": []}
    for j in range(n):
        half = [ref for ref in s.steps if episode_no[ref.episode.episode_id] % n == j]
        rows = annotation_rows(half, coordinate_only=True)
        folder = s.run_dir / "pool"
        if not sec.planners:
            path = _write(folder / f"planner{j}.jsonl", _planner_recs(s, rows, enhancement=True))
            out["planners"].append(_records_stage(s, path, folder / f"planner{j}", seed=s.cfg.seed + 1 + j))
        if not sec.verifiers:
            path = _write(folder / f"verifier{j}.jsonl", _grounder_recs(s, rows))
            out["verifiers"].append(_records_stage(s, path, folder / f"verifier{j}", seed=s.cfg.seed + 1 + j))
    return out


def initial_pools(s: Setup, results: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[Pool, Pool, list[str]]:
    """``(Pi_0, Phi_0, auxiliary grounders)`` from the config's checkpoint lists or the pool models
    trained (``results``: :func:`pool_stages`' kinds -> their results). The auxiliary grounders
    of C-DREM are ``coepg.grounders``, or the verifier pool when that list is empty. A grounder or
    verifier given as an endpoint URL is served (:func:`guirl.methods.coepg.grounding.grounder_source`)."""
    from guirl.methods.coepg.grounding import grounder_source
    from guirl.paths import resolve_repo_path

    sec = coepg_section(s.cfg)

    def members(listed: Sequence[str], kind: str) -> list[str]:
        if listed:
            return [str(resolve_repo_path(p)) for p in listed]
        return [str(r["final"]) for r in results.get(kind, [])]

    served = s.run_dir / "served"
    planners = Pool(tuple(members(sec.planners, "planners")), sec.pool_size)
    verifiers = Pool(
        tuple(str(grounder_source(p, served / f"verifier{j}")) for j, p in enumerate(sec.verifiers))
        or tuple(members([], "verifiers")),
        sec.pool_size,
    )
    aux = (
        [str(grounder_source(p, served / f"grounder{j}")) for j, p in enumerate(sec.grounders)]
        if sec.grounders
        else list(verifiers.members)
    )
    return planners, verifiers, aux


# ----------------------------------------------------------------------------- data
def build_data(s: Setup, k: int, planners: Pool, verifiers: Pool, *, progress: bool = False) -> Path:
    """``D_k`` (rows of :func:`guirl.methods.coepg.data.enhance`) in ``run_dir/data/D<k>.jsonl``;
    reused when the file records the same inputs (pool members, settings, steps)."""
    sec = coepg_section(s.cfg)
    path = s.run_dir / "data" / f"D{k}.jsonl"
    meta = {
        "k": k,
        "planners": [model_id(m) for m in planners.members],
        "verifiers": [model_id(m) for m in verifiers.members],
        "n": sec.plans_per_planner,
        "temperature": sec.plan_sampling.temperature,
        "sampling": sec.plan_sampling.model_dump(),
        "verify": sec.verify,
        "seed": s.cfg.seed + 100 * k,
        "steps": len(s.steps),
        "settings": repr(s.settings),
        "pixels": [s.min_pixels, s.max_pixels],
        "history_format": s.history_format,
        "data_dir": str(s.data_dir),
    }
    if path.is_file():
        try:
            if read_rows(path)[0] == meta:
                return path
        except (ValueError, json.JSONDecodeError):
            pass
    cfg = s.cfg
    rows = enhance(
        s.steps,
        [
            (
                Path(m).parent.name if Path(m).name == "final" else Path(m).name,
                lambda m=m: model_policy(cfg, m, max_new_tokens=sec.planner_max_new_tokens),
            )
            for m in planners.members
        ],
        [lambda m=m: _grounder(cfg, m) for m in verifiers.members],
        s.settings,
        history_format=s.history_format,
        min_pixels=s.min_pixels,
        max_pixels=s.max_pixels,
        n=sec.plans_per_planner,
        sampling=sec.plan_sampling,
        seed=meta["seed"],
        verify=sec.verify,
        progress=progress,
    )
    return write_rows(path, rows, meta)


def iteration_records(s: Setup, k: int, data: Path, *, e2e: bool = False) -> dict[str, Path]:
    """The records files of ``D_k`` (``planner``, ``grounder``; ``e2e`` too when asked), written
    next to it (same rows, same bytes: a stage that read them is reused). A kind with no record
    (e.g. no plan was verified: no grounder record) has no file and no key."""
    from guirl.prompts import prompt_spec

    _, rows = read_rows(data)
    folder = data.parent
    recs = {"planner": _planner_recs(s, rows), "grounder": _grounder_recs(s, rows)}
    if e2e:
        spec = prompt_spec(s.cfg, f"{s.settings.n_history}A")
        recs["e2e"] = e2e_records(
            rows, s.index, spec, data_dir=s.data_dir, min_pixels=s.min_pixels, max_pixels=s.max_pixels
        )
    out = {}
    for kind, rs in recs.items():
        path = folder / f"D{k}_{kind}.jsonl"
        if rs:
            out[kind] = _write(path, rs)
        else:
            path.unlink(missing_ok=True)
    return out


# ----------------------------------------------------------------------------- stages
def sft_stages(s: Setup, k: int, records: Mapping[str, Path]) -> dict[str, Stage]:
    """SFT of ``pi_k`` (``planner``) and ``phi_k`` (``grounder``) on ``D_{k-1}`` (``records``), both
    from the start model; a kind without records has no stage."""
    folder = s.run_dir / f"iter{k}"
    names = {"planner": "planner_sft", "grounder": "grounder_sft"}
    return {kind: _records_stage(s, records[kind], folder / names[kind]) for kind in names if kind in records}


def e2e_stage(s: Setup, records: Mapping[str, Path]) -> Stage:
    """The end-to-end baseline of Table 3: the same steps as ``pi_1`` and the same SFT settings."""
    return _records_stage(s, records["e2e"], s.run_dir / "e2e")


def checkpoint_steps(max_steps: int, points: int = 3) -> int:
    """Save interval of the GRPO stages: ``points`` checkpoints over the run (Figure 5's SR curve)."""
    return max(1, math.ceil(max_steps / points))


def grpo_stage(
    s: Setup, planner_sft: Mapping[str, Any], grounders: Sequence[str | Path], out: Path, **overrides: Any
) -> Stage:
    """GRPO of a planner SFT result with the C-DREM ensemble ``grounders`` (priors' order, the trained
    grounder last) in ``out``; ``overrides``: dotted keys with ``__`` (e.g. ``seed=1``,
    ``coepg__grpo__weighting="single"``)."""
    cfg = grpo_stage_config(s.cfg, len(s.steps), **overrides)
    cfg = cfg.replace({"rl.save_steps": checkpoint_steps(cfg.rl.max_steps), "rl.save_total_limit": 4})
    return Stage(
        name=out.name,
        entry=RL_ENTRY,
        cfg=cfg,
        inputs={"data": s.data_dir, **grounder_inputs(grounders)},
        base_model=Path(planner_sft["final"]),
        output_dir=out,
    )


def _skipped(model: str | Path, why: str) -> dict[str, Any]:
    """The result of a stage that had nothing to train on: the model it would have started from."""
    return {"final": str(model), "base_model": str(model), "skipped": why, "global_step": 0}


def run_name(base: str, r: int) -> str:
    return base if r == 0 else f"{base}_r{r}"


# ----------------------------------------------------------------------------- the loop
@dataclass
class Iteration:
    """One iteration's models: ``planner_sft`` (``pi_k``), ``grounder_sft`` (``phi_k``), ``grpo``
    (``pi'_k``, one result per run), the data it trained on (``data``: ``D_{k-1}``) and the pools
    that built it."""

    k: int
    planner_sft: dict[str, Any]
    grounder_sft: dict[str, Any]
    grpo: list[dict[str, Any]]
    data: Path
    planners: Pool
    verifiers: Pool


@dataclass
class LoopResult:
    """What :func:`run_iterations` trained: the set-up, the pool models, the iterations, the
    end-to-end baseline, the data files ``D_0 .. D_{K-1}``, the auxiliary grounders and the
    lengths of every stage, each row resolved before its stage trained: ``schedule`` of the SFT
    stages (:func:`guirl.studies.shared.stages.sft_schedule`) and ``rl_schedule`` of the GRPO stages
    (:func:`~guirl.studies.shared.stages.rl_schedule`), labelled as in 03's ``stages`` table
    (:func:`pool_label`, :func:`sft_label`, :func:`grpo_label`)."""

    setup: Setup
    pool: dict[str, list[dict[str, Any]]]
    iterations: list[Iteration]
    e2e: dict[str, Any]
    data: dict[int, Path]
    aux: list[str]
    schedule: pd.DataFrame = field(default_factory=pd.DataFrame)
    rl_schedule: pd.DataFrame = field(default_factory=pd.DataFrame)

    def ensemble(self, k: int) -> list[str]:
        """The C-DREM ensemble of iteration ``k``: the auxiliary grounders, then ``phi_k``."""
        return [*self.aux, str(self.iterations[k - 1].grounder_sft["final"])]


Runner = Callable[[Sequence[Stage], int], list[dict[str, Any]]]
Builder = Callable[[Setup, int, Pool, Pool], Path]
#: Called before a batch of stages trains with ``(kind, rows)``: ``"sft"`` and the batch's rows of
#: :func:`guirl.studies.shared.stages.sft_schedule`, then ``"rl"`` and its rows of
#: :func:`~guirl.studies.shared.stages.rl_schedule` (a kind the batch has no stage of is not called).
OnSchedule = Callable[[str, "pd.DataFrame"], None]


def print_schedule(kind: str, rows: pd.DataFrame) -> None:
    """The default :data:`OnSchedule`: print a batch's lengths before it trains."""
    what = "optimizer steps of the SFT stages" if kind == "sft" else "RL steps of the GRPO stages"
    print(f"{what} about to train:\n{rows.to_string(index=False)}", flush=True)


def plan_batch(batch: Mapping[str, Stage], on_schedule: OnSchedule | None) -> dict[str, pd.DataFrame]:
    """``{kind: rows}`` of ``batch`` (``{label: Stage}``): its SFT stages' :func:`sft_schedule` and
    its RL stages' :func:`rl_schedule`, each passed to ``on_schedule`` (``None``: not passed);
    a kind without a stage in the batch has no key."""
    from guirl.studies.shared.stages import rl_schedule, sft_schedule

    out = {}
    for kind, rows in (("sft", sft_schedule(batch)), ("rl", rl_schedule(batch))):
        if len(rows):
            out[kind] = rows
            if on_schedule is not None:
                on_schedule(kind, rows)
    return out


def default_runner(stages: Sequence[Stage], parallel: int) -> list[dict[str, Any]]:
    return run_stages(list(stages), parallel=parallel, echo=False, progress=True)


def run_iterations(
    cfg: Config,
    *,
    s: Setup | None = None,
    runner: Runner | None = None,
    builder: Builder | None = None,
    on_schedule: OnSchedule | None = print_schedule,
    progress: bool = True,
) -> LoopResult:
    """The Co-EPG loop (module doc), resumable: call again after a kill and it continues at the last
    finished model. ``runner(stages, parallel)`` trains stages (default
    :func:`guirl.train.launch.run_stages`); ``builder(setup, k, planners, verifiers)`` builds
    ``D_k`` (default :func:`build_data`): tests pass their own. Before each batch of stages trains
    (the pools; each iteration's ``pi_k`` / ``phi_k``; its GRPO runs), its lengths are resolved
    (:func:`plan_batch`) and passed to ``on_schedule`` (default: printed; ``None``: neither), and
    kept in :attr:`LoopResult.schedule` / :attr:`LoopResult.rl_schedule`."""
    s = s or setup(cfg)
    runner = runner or default_runner
    builder = builder or (lambda st, k, p, v: build_data(st, k, p, v, progress=progress))
    sec = coepg_section(cfg)
    par = cfg.runtime.parallel_stages
    planned: dict[str, list[pd.DataFrame]] = {"sft": [], "rl": []}

    def train(batch: Mapping[str, Stage]) -> list[dict[str, Any]]:
        if not batch:
            return []
        for kind, rows in plan_batch(batch, on_schedule).items():
            planned[kind].append(rows)
        return runner(list(batch.values()), par)

    stages = pool_stages(s)
    flat = {pool_label(kind, j): st for kind in ("planners", "verifiers") for j, st in enumerate(stages[kind])}
    done = train(flat)
    pool = {"planners": done[: len(stages["planners"])], "verifiers": done[len(stages["planners"]) :]}
    planners, verifiers, aux = initial_pools(s, pool)
    data = {0: builder(s, 0, planners, verifiers)}
    iterations: list[Iteration] = []
    e2e: dict[str, Any] = {}
    for k in range(1, sec.iterations + 1):
        recs = iteration_records(s, k - 1, data[k - 1], e2e=k == 1)
        batch = sft_stages(s, k, recs)
        if k == 1 and "e2e" in recs:
            batch["e2e"] = e2e_stage(s, recs)
        trained = dict(zip(batch, train({sft_label(k, kind): st for kind, st in batch.items()}), strict=True))
        # no records (nothing verified): no stage; the previous model stands (reported as skipped)
        prev_phi = iterations[-1].grounder_sft["final"] if iterations else str(s.start)
        pi = trained.get("planner") or _skipped(s.start, f"D{k - 1} has no planner record")
        phi = trained.get("grounder") or _skipped(prev_phi, f"D{k - 1} has no verified plan")
        if k == 1:
            e2e = trained.get("e2e") or _skipped(s.start, "D0 has no record")
        ensemble = [*aux, str(phi["final"])]
        grpo_runs = {
            grpo_label(k, r): grpo_stage(
                s, pi, ensemble, s.run_dir / f"iter{k}" / run_name("planner_grpo", r), seed=cfg.seed + r
            )
            for r in range(sec.n_runs)
        }
        grpo = train(grpo_runs)
        iterations.append(Iteration(k, pi, phi, grpo, data[k - 1], planners, verifiers))
        planners, verifiers = planners.add(grpo[0]["final"]), verifiers.add(phi["final"])
        if k < sec.iterations:
            data[k] = builder(s, k, planners, verifiers)
    sft, rl = (pd.concat(planned[k], ignore_index=True) if planned[k] else pd.DataFrame() for k in ("sft", "rl"))
    return LoopResult(s, pool, iterations, e2e, data, aux, sft, rl)
