"""Notebook 03 (``03_coepg_iterations``): Co-EPG end to end (Co-EPG Sec. 4-5; Tables 3-7, Figures 2,
5, 6), so each notebook cell is a few library calls.

The loop (:func:`run_iterations`), every model a stage under ``runs/<profile>/03_coepg_iterations``
(a killed run resumes at the last finished model; a finished stage is reused; a data file whose
recorded inputs are unchanged is reused):

1. **Pools** ``Pi_0``, ``Phi_0``: ``coepg.planners`` / ``coepg.verifiers`` (local checkpoints of open
   VLMs on the paper profiles), or, when a list is empty (the tiny profile: no open VLM can be
   loaded), ``coepg.pool_size`` pool models trained here from the start model (01's grounding
   model): planners on the enhancement prompt -> the step annotation's plan
   (``Step.low_level_instruction``), verifiers on (screenshot, annotated plan) -> the annotated
   point; model ``j`` on the episodes ``i`` with ``i % pool_size == j`` and seed ``seed + 1 + j``
   (models trained differently: other data halves and seeds).
2. **D_0** (:func:`build_data`): the planner pool proposes plans with the Table 13 addition, the
   verifier pool keeps the ones it grounds inside the target box
   (:func:`guirl.methods.coepg.data.enhance`).
3. **Iteration k = 1..K**: SFT of ``pi_k`` (planner records of ``D_{k-1}``) and ``phi_k``
   (grounder records of ``D_{k-1}``: the verified plans, the grounder's distillation) from the
   start model, side by side; GRPO ``pi_k -> pi'_k`` (role ``coepg.planner``) with C-DREM over the
   auxiliary grounders and ``phi_k`` (``coepg.grounders``; on the tiny profile the verifier pool
   models, fixed as the paper's two Qwen VLMs are); then the pools take ``pi'_k`` and ``phi_k``
   (the latest two kept) and build ``D_k``. ``M_k = {pi'_k, phi_k}``; "Iteration k w/o GRPO" is
   ``{pi_k, phi_k}``. Iteration 1 also trains the end-to-end baseline (Table 3): one model on the
   same steps of ``D_0`` with the same SFT budget, answering the full action.

Evaluation (:func:`evaluate_models`): every agent on the same test steps: ``coepg.eval_steps``
steps of each test split, taken from its episodes in a seeded random order (App. A samples 500
step-actions at random), answered greedily, scored with Co-EPG's own protocol (the smallest-element
rule; Mind2Web's on Mind2Web); the dual model through
:class:`guirl.methods.coepg.agent.PlannerGrounderAgent` and
:func:`guirl.studies.shared.evaluation.evaluate_offline`. Averages over the splits (Avg SR, as
Table 6) pool their steps (equal counts per split). GRPO stages run ``coepg.n_runs`` training
seeds; a model without GRPO has one, its records repeated per seed for pairing.

Ablations (:func:`ablation_runs`): short GRPO runs from ``pi_1`` with the iteration-1 ensemble,
one per Table 4 row (the weighting) and Table 5 cell (priors x reading of eq. 5); the full
C-DREM row is the main iteration-1 run.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split, load_splits
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
    quality,
    read_rows,
    training_steps,
    write_rows,
)
from guirl.methods.coepg.prompts import PlannerPromptSettings, planner_settings
from guirl.methods.coepg.rl import grounder_inputs
from guirl.train.launch import SFT_ENTRY, Stage, run_stages
from guirl.train.rl import RL_ENTRY

__all__ = [
    "NOTEBOOK",
    "Setup",
    "Iteration",
    "LoopResult",
    "Ablation",
    "setup",
    "start_model",
    "pool_stages",
    "initial_pools",
    "build_data",
    "iteration_records",
    "sft_stages",
    "e2e_stage",
    "grpo_stage",
    "run_iterations",
    "ablation_runs",
    "run_ablations",
    "eval_order",
    "model_policy",
    "dual_agent",
    "evaluate_models",
    "with_seeds",
    "iteration_models",
    "iteration_pairs",
    "figure5_models",
    "figure5_table",
    "E2E",
    "pooled",
    "sr_table",
    "top_answer_share",
    "paired_rows",
    "iteration_table",
    "data_quality_table",
    "ablation_table",
    "ablation_models",
    "table4",
    "table5",
    "table4_rows",
    "table5_rows",
    "resolve_rows",
    "plot_figure2",
    "plot_figure5",
    "plot_figure6",
    "checkpoint_steps",
    "stage_rows",
    "grpo_curves",
    "iteration_label",
    "conclusions",
    "ablation_conclusions",
]

NOTEBOOK = "03_coepg_iterations"


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


# ----------------------------------------------------------------------------- models
def _model_id(folder: str | Path) -> str:
    """What identifies a model folder in a data file's record: the sha256 of its stage's
    fingerprint (the stage that wrote it), else its path."""
    folder = Path(folder)
    for f in (folder / "stage_fingerprint.json", folder.parent / "stage_fingerprint.json"):
        if f.is_file():
            return hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    return str(folder)


def _load(folder: str | Path, cfg: Config, lo: int, hi: int) -> tuple[Any, Any]:
    """``(model, processor)`` of a full-model folder or a LoRA adapter folder (merged into its base)."""
    from guirl.models import load_policy

    folder = Path(folder)
    adapter = folder / "adapter_config.json"
    kw = dict(min_pixels=lo, max_pixels=hi, dtype=cfg.model.torch_dtype, device=cfg.runtime.device)
    if adapter.is_file():
        base = json.loads(adapter.read_text())["base_model_name_or_path"]
        return load_policy(base, folder, **kw)
    return load_policy(folder, **kw)


def model_policy(cfg: Config, folder: str | Path, *, max_new_tokens: int) -> Any:
    """A greedy-by-default :class:`~guirl.rollout.HFPolicy` of a model folder at Co-EPG's pixel
    budget, ``eval.batch_size`` prompts per call."""
    from guirl.rollout import HFPolicy

    lo, hi = pixel_budget(cfg)
    model, processor = _load(folder, cfg, lo, hi)
    return HFPolicy(model, processor, max_new_tokens=max_new_tokens, batch_size=cfg.eval.batch_size)


def _grounder(cfg: Config, folder: str | Path) -> Any:
    from guirl.methods.coepg.grounding import load_grounder

    lo, hi = pixel_budget(cfg)
    sec = coepg_section(cfg)
    return load_grounder(
        folder,
        planner_settings(cfg),
        min_pixels=lo,
        max_pixels=hi,
        max_new_tokens=sec.grounder_max_new_tokens,
        batch_size=cfg.eval.batch_size,
        dtype=cfg.model.torch_dtype,
        device=cfg.runtime.device,
    )


def dual_agent(cfg: Config, planner: str | Path, grounder: str | Path) -> Any:
    """The P-G dual model ``{planner, grounder}`` (model folders) as an agent writing
    ``sft.output_format``."""
    from guirl.methods.coepg.agent import PlannerGrounderAgent

    sec = coepg_section(cfg)
    lo, hi = pixel_budget(cfg)
    return PlannerGrounderAgent(
        model_policy(cfg, planner, max_new_tokens=sec.planner_max_new_tokens),
        model_policy(cfg, grounder, max_new_tokens=sec.grounder_max_new_tokens),
        planner_settings(cfg),
        min_pixels=lo,
        max_pixels=hi,
        output_format=cfg.sft.output_format,
    )


# ----------------------------------------------------------------------------- data
def build_data(s: Setup, k: int, planners: Pool, verifiers: Pool, *, progress: bool = False) -> Path:
    """``D_k`` (rows of :func:`guirl.methods.coepg.data.enhance`) in ``run_dir/data/D<k>.jsonl``;
    reused when the file records the same inputs (pool members, settings, steps)."""
    sec = coepg_section(s.cfg)
    path = s.run_dir / "data" / f"D{k}.jsonl"
    meta = {
        "k": k,
        "planners": [_model_id(m) for m in planners.members],
        "verifiers": [_model_id(m) for m in verifiers.members],
        "n": sec.plans_per_planner,
        "temperature": sec.plan_temperature,
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
        temperature=sec.plan_temperature,
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


def _run_name(base: str, r: int) -> str:
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
    end-to-end baseline, the data files ``D_0 .. D_{K-1}`` and the auxiliary grounders."""

    setup: Setup
    pool: dict[str, list[dict[str, Any]]]
    iterations: list[Iteration]
    e2e: dict[str, Any]
    data: dict[int, Path]
    aux: list[str]

    def ensemble(self, k: int) -> list[str]:
        """The C-DREM ensemble of iteration ``k``: the auxiliary grounders, then ``phi_k``."""
        return [*self.aux, str(self.iterations[k - 1].grounder_sft["final"])]


Runner = Callable[[Sequence[Stage], int], list[dict[str, Any]]]
Builder = Callable[[Setup, int, Pool, Pool], Path]


def _default_runner(stages: Sequence[Stage], parallel: int) -> list[dict[str, Any]]:
    return run_stages(list(stages), parallel=parallel, echo=False, progress=True)


def run_iterations(
    cfg: Config,
    *,
    s: Setup | None = None,
    runner: Runner | None = None,
    builder: Builder | None = None,
    progress: bool = True,
) -> LoopResult:
    """The Co-EPG loop (module doc), resumable: call again after a kill and it continues at the last
    finished model. ``runner(stages, parallel)`` trains stages (default
    :func:`guirl.train.launch.run_stages`); ``builder(setup, k, planners, verifiers)`` builds
    ``D_k`` (default :func:`build_data`): tests pass their own."""
    s = s or setup(cfg)
    runner = runner or _default_runner
    builder = builder or (lambda st, k, p, v: build_data(st, k, p, v, progress=progress))
    sec = coepg_section(cfg)
    par = cfg.runtime.parallel_stages
    stages = pool_stages(s)
    flat = stages["planners"] + stages["verifiers"]
    done = runner(flat, par) if flat else []
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
        trained = dict(zip(batch, runner(list(batch.values()), par), strict=True))
        # no records (nothing verified): no stage; the previous model stands (reported as skipped)
        prev_phi = iterations[-1].grounder_sft["final"] if iterations else str(s.start)
        pi = trained.get("planner") or _skipped(s.start, f"D{k - 1} has no planner record")
        phi = trained.get("grounder") or _skipped(prev_phi, f"D{k - 1} has no verified plan")
        if k == 1:
            e2e = trained.get("e2e") or _skipped(s.start, "D0 has no record")
        ensemble = [*aux, str(phi["final"])]
        grpo_runs = [
            grpo_stage(s, pi, ensemble, s.run_dir / f"iter{k}" / _run_name("planner_grpo", r), seed=cfg.seed + r)
            for r in range(sec.n_runs)
        ]
        grpo = runner(grpo_runs, par)
        iterations.append(Iteration(k, pi, phi, grpo, data[k - 1], planners, verifiers))
        planners, verifiers = planners.add(grpo[0]["final"]), verifiers.add(phi["final"])
        if k < sec.iterations:
            data[k] = builder(s, k, planners, verifiers)
    return LoopResult(s, pool, iterations, e2e, data, aux)


# ----------------------------------------------------------------------------- ablations
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


def _ratio(p: Sequence[float]) -> str:
    return ":".join(f"{v:g}" for v in p)


def _main(cfg: Config) -> Ablation:
    g = coepg_section(cfg).grpo
    return Ablation("main", g.weighting, tuple(float(v) for v in g.priors), g.confidence, True)


def table4_rows(cfg: Config) -> list[tuple[str, Ablation]]:
    """Table 4's rows as ``(label, run)``: each weighting at the run's priors and reading."""
    m = _main(cfg)
    return [(label, Ablation(f"t4_{w}", w, m.priors, m.confidence)) for label, w in TABLE4]


def table5_rows() -> list[tuple[str, Ablation]]:
    """Table 5's cells as ``(label, run)``: every prior ratio under both readings of eq. 5."""
    return [
        (f"priors {_ratio(p)} ({READINGS[c]})", Ablation(f"t5_{_ratio(p).replace(':', '-')}_{c}", "cdrem", p, c))
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
    main = _main(cfg)
    rows = [a for _, a in table4_rows(cfg)] + [a for _, a in table5_rows()]
    return list(_canonical(rows, main).values())


def resolve_rows(cfg: Config, rows: Sequence[tuple[str, Ablation]]) -> list[tuple[str, Ablation]]:
    """``rows`` with each run replaced by the distinct run of :func:`ablation_runs` it equals."""
    canon = _canonical(ablation_runs(cfg), _main(cfg))
    return [(label, canon[a.key]) for label, a in rows]


def run_ablations(
    loop: LoopResult, runs: Sequence[Ablation], *, runner: Runner | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Train (or reuse) every ablation run from ``pi_1`` with the iteration-1 ensemble, ``coepg.n_runs``
    seeds each; ``{name: [result per seed]}``, the main run's results for the run marked ``main``."""
    s, cfg = loop.setup, loop.setup.cfg
    runner = runner or _default_runner
    first = loop.iterations[0]
    n = coepg_section(cfg).n_runs
    stages, names = [], []
    for a in runs:
        if a.main:
            continue
        for r in range(n):
            stages.append(
                grpo_stage(
                    s,
                    first.planner_sft,
                    loop.ensemble(1),
                    s.run_dir / "ablations" / _run_name(a.name, r),
                    seed=cfg.seed + r,
                    **a.overrides(),
                )
            )
            names.append(a.name)
    results = runner(stages, cfg.runtime.parallel_stages) if stages else []
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


# ----------------------------------------------------------------------------- evaluation
def eval_order(cfg: Config, splits: Mapping[str, Split]) -> dict[str, Split]:
    """Each test split with its episodes in a seeded random order (``cfg.seed``), so that its first
    ``coepg.eval_steps`` steps are a random sample of episodes (App. A samples step-actions at
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
    the first ``coepg.eval_steps`` steps of each split (:func:`eval_order`), greedy, history of
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
                max_steps=sec.eval_steps,
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
        avg, lo, hi, n = _sr(cfg, [r for r in records if r["model"] == name and r.get("seed", 0) == 0])
        rows.append(
            {"run": label, "step": step, "model": name, "Avg SR": avg, "Avg SR lo": lo, "Avg SR hi": hi, "n_steps": n}
        )
    return pd.DataFrame(rows).sort_values(["run", "step"], kind="stable").reset_index(drop=True)


def pooled(records: Sequence[dict[str, Any]], split: str = "avg") -> list[dict[str, Any]]:
    """Records with every split renamed ``split``: their steps pooled (Avg SR over splits of equal
    step counts, Table 6's average)."""
    return [{**r, "split": split} for r in records]


def _sr(cfg: Config, records: Sequence[dict[str, Any]]) -> tuple[float, float, float, int]:
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


def sr_table(
    cfg: Config, records: Sequence[dict[str, Any]], models: Sequence[str], splits: Sequence[str]
) -> pd.DataFrame:
    """One row per model: TM and SR (%) per split and ``Avg SR`` (pooled over the splits) with its
    95% bootstrap interval (``Avg SR lo`` / ``hi``) and step count; records of every seed pooled.
    ``top answer (%)`` (:func:`top_answer_share`) flags a collapsed policy: 100 when the model
    wrote the same text on every counted step."""
    rows = []
    for m in models:
        mine = [r for r in records if r["model"] == m]
        row: dict[str, Any] = {"model": m}
        for sp in splits:
            part = [r for r in mine if r["split"] == sp]
            counted = [r for r in part if r.get("counted", True)]
            row[f"{sp} TM"] = 100 * float(np.mean([r["type_match"] for r in counted])) if counted else math.nan
            row[f"{sp} SR"] = _sr(cfg, part)[0]
        avg, lo, hi, n = _sr(cfg, mine)
        row.update({"Avg SR": avg, "Avg SR lo": lo, "Avg SR hi": hi, "n_steps": n})
        row["top answer (%)"] = top_answer_share(mine)
        rows.append(row)
    return pd.DataFrame(rows)


def paired_rows(
    cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]], *, per_split: bool = False
) -> pd.DataFrame:
    """Paired step-SR differences ``B - A`` over the pooled splits (``split = avg``; with
    ``per_split`` also each split), 95% interval over seeds and steps
    (:func:`guirl.studies.shared.paired.paired_table`)."""
    from guirl.studies.shared.paired import paired_table

    recs = pooled(records) + (list(records) if per_split else [])
    return paired_table(cfg, recs, pairs)


def iteration_label(k: int, grpo: bool) -> str:
    """Table 6 / 7's row names: ``Iteration k w/o GRPO`` and ``Iteration k (Mk)``."""
    return f"Iteration {k} (M{k})" if grpo else f"Iteration {k} w/o GRPO"


def iteration_table(cfg: Config, records: Sequence[dict[str, Any]], k_max: int, splits: Sequence[str]) -> pd.DataFrame:
    """Tables 6 / 7 layout: per iteration the SFT agent (w/o GRPO) and ``M_k``, TM / SR per split and
    Avg SR with its interval (:func:`sr_table`), plus ``iteration`` and ``grpo`` columns."""
    models = [iteration_label(k, g) for k in range(1, k_max + 1) for g in (False, True)]
    df = sr_table(cfg, records, models, splits)
    df.insert(1, "iteration", [k for k in range(1, k_max + 1) for _ in (0, 1)])
    df.insert(2, "grpo", [g for _ in range(1, k_max + 1) for g in (False, True)])
    return df


def data_quality_table(cfg: Config, data: Mapping[int, Path]) -> pd.DataFrame:
    """Figure 6's numbers per data set ``D_k`` (the data of iteration ``k + 1``): purity and diversity
    (:func:`guirl.methods.coepg.data.quality`) with 95% bootstrap intervals over the steps with a
    target (each step's verified share / distinct plans), plus the counts."""
    from guirl.metrics.bootstrap import mean_with_ci

    rows = []
    for k, path in sorted(data.items()):
        meta, plan_rows = read_rows(path)
        q = quality(plan_rows)
        per_step: dict[tuple[str, int], list[PlanRow]] = {}
        for r in plan_rows:
            if r.coordinate and r.plan is not None:
                per_step.setdefault((r.episode_id, r.t), []).append(r)
        div = [len({r.plan for r in rs}) for rs in per_step.values()]
        # purity as a ratio of sums: its interval resamples steps (plans of one step are not independent)
        n_b = cfg.eval.bootstrap_samples
        if per_step:
            ver = np.array([sum(r.verified for r in rs) for rs in per_step.values()], dtype=float)
            gen = np.array([len(rs) for rs in per_step.values()], dtype=float)
            rng = np.random.default_rng(cfg.seed)
            idx = rng.integers(0, len(gen), size=(n_b, len(gen)))
            ratios = ver[idx].sum(1) / gen[idx].sum(1)
            p_lo, p_hi = (
                float(min(np.quantile(ratios, 0.025), q["purity"])),
                float(max(np.quantile(ratios, 0.975), q["purity"])),
            )
            _, d_lo, d_hi = mean_with_ci(div, n_boot=n_b, seed=cfg.seed)
        else:
            p_lo = p_hi = d_lo = d_hi = math.nan
        rows.append(
            {
                "data": f"D{k}",
                "iteration": k + 1,
                "planners": len(meta.get("planners", [])),
                "purity": 100 * float(q["purity"]),
                "purity lo": 100 * p_lo,
                "purity hi": 100 * p_hi,
                "diversity": float(q["diversity"]),
                "diversity lo": d_lo,
                "diversity hi": d_hi,
                **{
                    k2: q[k2]
                    for k2 in (
                        "verified_per_step",
                        "plans_generated",
                        "plans_verified",
                        "unparsable",
                        "steps",
                        "steps_kept",
                        "records",
                    )
                },
            }
        )
    return pd.DataFrame(rows)


def ablation_table(
    cfg: Config,
    records: Sequence[dict[str, Any]],
    rows: Sequence[tuple[str, Ablation]],
    baseline: Callable[[Ablation], Ablation],
) -> pd.DataFrame:
    """One row per ``(label, run)``: Avg SR (pooled splits, every seed) with its interval, and the
    paired difference to the run ``baseline(run)`` (points, 95% interval over seeds and steps;
    the baseline's own row shows 0 and the verdict ``baseline``)."""
    from guirl.studies.shared.evaluation import paired_gain_table

    pool = pooled(records)
    out = []
    for label, a in rows:
        avg, lo, hi, n = _sr(cfg, [r for r in pool if r["model"] == a.name])
        base = baseline(a).name
        row: dict[str, Any] = {"row": label, "model": a.name, "weighting": a.weighting, "priors": _ratio(a.priors)}
        row.update({"confidence": a.confidence, "Avg SR": avg, "Avg SR lo": lo, "Avg SR hi": hi, "n_steps": n})
        if base == a.name:
            row.update({"vs": base, "diff": 0.0, "lo": 0.0, "hi": 0.0, "resolved": False, "verdict": "baseline"})
        else:
            g = paired_gain_table(cfg, pool, baseline=base, model=a.name).iloc[0]
            row.update({"vs": base, "diff": float(g["diff"]), "lo": float(g["lo"]), "hi": float(g["hi"])})
            row.update({"resolved": bool(g["resolved"]), "verdict": g["verdict"]})
        out.append(row)
    return pd.DataFrame(out)


def table4(cfg: Config, records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Co-EPG Table 4 layout: the four weightings, each against the single grounder (w/o C-DREM)."""
    rows = resolve_rows(cfg, table4_rows(cfg))
    single = rows[0][1]
    return ablation_table(cfg, records, rows, lambda a: single)


def table5(cfg: Config, records: Sequence[dict[str, Any]], c: float = -0.5) -> pd.DataFrame:
    """Co-EPG Table 5 layout under both readings of eq. 5: each prior ratio against 1:1:1 under the
    same reading, and ``w_phi``: the weight eq. 5 gives ``phi_k`` when the three grounders have
    the same confidence ``c`` (mean log-prob; the literal reading gives the larger prior the
    smaller weight, the intent the larger)."""
    from guirl.methods.coepg.reward import ensemble_weights

    rows = resolve_rows(cfg, table5_rows())
    base = {a.confidence: a for label, a in rows if a.priors == TABLE5[0]}
    df = ablation_table(cfg, records, rows, lambda a: base[a.confidence])
    conf = {"logprob": c, "prob": math.exp(c)}
    w = [ensemble_weights([conf[a.confidence]] * 3, list(a.priors))[2] for _, a in rows]
    df.insert(df.columns.get_loc("Avg SR"), f"w_phi at c={c:g}", w)
    return df


# ----------------------------------------------------------------------------- logs and curves
def stage_rows(loop: LoopResult, ablations: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> pd.DataFrame:
    """One row per trained stage: what it is, steps, records / samples, seconds, resumed from."""
    rows = []

    def add(what: str, r: Mapping[str, Any]) -> None:
        rows.append(
            {
                "stage": what,
                "steps": r.get("global_step"),
                "records": r.get("n_records"),
                "samples_trained": r.get("samples_trained"),
                "seconds": r.get("train_seconds"),
                "resumed_from": r.get("resumed_from"),
                "skipped": r.get("skipped"),
            }
        )

    for kind, rs in loop.pool.items():
        for j, r in enumerate(rs):
            add(f"pool {kind[:-1]} {j}", r)
    for it in loop.iterations:
        add(f"iter {it.k} planner SFT (pi_{it.k})", it.planner_sft)
        add(f"iter {it.k} grounder SFT (phi_{it.k})", it.grounder_sft)
        for r, g in enumerate(it.grpo):
            add(f"iter {it.k} planner GRPO (pi'_{it.k}) run {r}", g)
        if it.k == 1 and loop.e2e:
            add("end-to-end baseline", loop.e2e)
    for name, rs in (ablations or {}).items():
        for r, g in enumerate(rs):
            if g not in loop.iterations[0].grpo:
                add(f"ablation {name} run {r}", g)
    return pd.DataFrame(rows)


def grpo_curves(
    results: Mapping[str, Sequence[Mapping[str, Any]]], columns: Sequence[str] = ("reward", "reward_std", "kl")
) -> pd.DataFrame:
    """Long table ``run, seed, step, <columns>`` of GRPO stages' logs (:func:`guirl.studies.shared.rl_runs.rl_log`)."""
    from guirl.studies.shared.rl_runs import rl_log

    frames = []
    for name, rs in results.items():
        for r, res in enumerate(rs):
            df = rl_log(res)
            part = df[["step", *[c for c in columns if c in df]]].copy()
            part.insert(0, "seed", r)
            part.insert(0, "run", name)
            frames.append(part)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "seed", "step"])


def checkpoint_model(result: Mapping[str, Any], step: int, out: Path) -> Path:
    """A loadable model folder of GRPO checkpoint ``step`` (the engine's ``checkpoint-<step>``: its
    ``model.safetensors`` over the run's start model), written once to ``out``."""
    import shutil

    src = Path(result["final"]).parent / f"checkpoint-{step}"
    if (out / "config.json").is_file():
        return out
    weights = src / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{src}: no model.safetensors (checkpoint {step} was not kept)")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(Path(result["base_model"]), tmp)
    shutil.copy2(weights, tmp / "model.safetensors")
    for f in tmp.glob("model-*.safetensors"):
        f.unlink()
    (tmp / "model.safetensors.index.json").unlink(missing_ok=True)
    tmp.rename(out)
    return out


# ----------------------------------------------------------------------------- figures
def plot_figure2(table: pd.DataFrame):
    """Co-EPG Figure 2 layout: Avg SR (%) per iteration with (solid) and without GRPO (dashed), 95%
    intervals as bars."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for grpo, style, label in ((True, "-o", "with GRPO (M_k)"), (False, "--s", "w/o GRPO")):
        part = table[table["grpo"] == grpo]
        err = [part["Avg SR"] - part["Avg SR lo"], part["Avg SR hi"] - part["Avg SR"]]
        ax.errorbar(part["iteration"], part["Avg SR"], yerr=err, fmt=style, capsize=3, label=label)
    ax.set_xticks(sorted(table["iteration"].unique()))
    ax.set_xlabel("iteration")
    ax.set_ylabel("Avg step SR (%)")
    ax.set_title("Co-EPG Figure 2 layout (MiniGUI)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_figure5(curves: pd.DataFrame, sr: pd.DataFrame):
    """Co-EPG Figure 5 layout: (left) mean reward per GRPO step, (right) Avg SR (%) at the
    checkpoints, single grounder vs the C-DREM ensemble."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.2))
    for run, part in curves.groupby("run", sort=False):
        m = part.groupby("step")["reward"].mean()
        a.plot(m.index, m.values, marker=".", label=run)
    a.set_xlabel("GRPO step")
    a.set_ylabel("mean reward")
    a.legend(fontsize=8)
    for run, part in sr.groupby("run", sort=False):
        err = [part["Avg SR"] - part["Avg SR lo"], part["Avg SR hi"] - part["Avg SR"]]
        b.errorbar(part["step"], part["Avg SR"], yerr=err, fmt="-o", capsize=3, label=run)
    b.set_xlabel("GRPO step")
    b.set_ylabel("Avg step SR (%)")
    b.legend(fontsize=8)
    fig.suptitle("Co-EPG Figure 5 layout: single grounder vs C-DREM")
    fig.tight_layout()
    return fig


def plot_figure6(table: pd.DataFrame):
    """Co-EPG Figure 6 layout: purity (%) and diversity (distinct plans per step) of the data of
    each iteration, with 95% intervals."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(7, 3))
    for ax, col, ylabel in ((a, "purity", "purity (%)"), (b, "diversity", "plans per step")):
        err = [table[col] - table[f"{col} lo"], table[f"{col} hi"] - table[col]]
        ax.errorbar(table["iteration"], table[col], yerr=err, fmt="-o", capsize=3)
        ax.set_xticks(list(table["iteration"]))
        ax.set_xlabel("iteration (its data D_{k-1})")
        ax.set_ylabel(ylabel)
    fig.suptitle("Co-EPG Figure 6 layout: data quality per iteration")
    fig.tight_layout()
    return fig


def ablation_conclusions(table: pd.DataFrame) -> str:
    """One sentence per row of :func:`ablation_table` (baseline rows skipped), worded from its
    ``verdict`` (the interval) only."""
    lines = []
    for r in table.to_dict(orient="records"):
        if r["verdict"] == "baseline":
            continue
        span = f"{r['diff']:+.1f} points, 95% interval [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        word = {"B > A": "higher than", "B < A": "lower than"}.get(r["verdict"])
        lines.append(
            f"{r['row']}: {word} {r['vs']} ({span})." if word else f"{r['row']} vs {r['vs']}: not resolved ({span})."
        )
    return "\n".join(lines)


def conclusions(table: pd.DataFrame) -> str:
    """Sentences worded from the ``resolved`` marks of a :func:`paired_rows` table only."""
    from guirl.studies.shared.paired import conclusions as _c

    return _c(table)
