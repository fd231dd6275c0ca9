"""Notebook 03 (``03_coepg_iterations``): Co-EPG end to end (Co-EPG Sec. 4-5; Tables 3-7, Figures 2,
5, 6), so each notebook cell is a few library calls. The stage-level parts are in
``guirl.studies.parts.coepg_iterations`` (``loop``: the set-up, pools, data and stages; ``models``;
``ablations``; ``evaluation``); this module holds the tables and figures and names everything the
notebook calls.

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

Evaluation (:func:`evaluate_models`): every agent on the same test steps: ``coepg.eval.max_test_steps``
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

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.methods.coepg.data import PlanRow, quality, read_rows
from guirl.studies.parts.coepg_iterations.ablations import (
    READINGS,
    TABLE4,
    TABLE5,
    Ablation,
    ablation_label,
    ablation_models,
    ablation_runs,
    ratio,
    resolve_rows,
    run_ablations,
    table4_rows,
    table5_rows,
)
from guirl.studies.parts.coepg_iterations.evaluation import (
    E2E,
    eval_order,
    evaluate_models,
    figure5_models,
    figure5_table,
    iteration_label,
    iteration_models,
    iteration_pairs,
    pooled,
    sr,
    top_answer_share,
    with_seeds,
)
from guirl.studies.parts.coepg_iterations.loop import (
    E2E_LABEL,
    NOTEBOOK,
    Builder,
    Iteration,
    LoopResult,
    Runner,
    Setup,
    build_data,
    checkpoint_steps,
    e2e_stage,
    grpo_label,
    grpo_stage,
    initial_pools,
    iteration_records,
    plan_batch,
    pool_label,
    pool_stages,
    print_schedule,
    run_iterations,
    setup,
    sft_label,
    sft_stages,
    start_model,
)
from guirl.studies.parts.coepg_iterations.models import (
    checkpoint_model,
    dual_agent,
    model_policy,
)

__all__ = [
    "E2E_LABEL",
    "NOTEBOOK",
    "Builder",
    "Iteration",
    "LoopResult",
    "Runner",
    "Setup",
    "build_data",
    "checkpoint_steps",
    "e2e_stage",
    "grpo_stage",
    "grpo_label",
    "initial_pools",
    "iteration_records",
    "plan_batch",
    "pool_label",
    "pool_stages",
    "print_schedule",
    "run_iterations",
    "setup",
    "sft_label",
    "sft_stages",
    "start_model",
    "READINGS",
    "TABLE4",
    "TABLE5",
    "Ablation",
    "ablation_label",
    "ablation_models",
    "ablation_runs",
    "resolve_rows",
    "run_ablations",
    "table4_rows",
    "table5_rows",
    "E2E",
    "OWN_CAPTIONS",
    "own_tables",
    "scoring_protocol",
    "eval_order",
    "evaluate_models",
    "figure5_models",
    "figure5_table",
    "iteration_label",
    "iteration_models",
    "iteration_pairs",
    "pooled",
    "top_answer_share",
    "with_seeds",
    "checkpoint_model",
    "dual_agent",
    "model_policy",
    "sr_table",
    "paired_rows",
    "iteration_table",
    "data_quality_table",
    "ablation_table",
    "table4",
    "table5",
    "stage_rows",
    "schedule_writer",
    "grpo_curves",
    "plot_figure2",
    "plot_figure5",
    "plot_figure6",
    "ablation_conclusions",
    "conclusions",
]


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
            row[f"{sp} SR"] = sr(cfg, part)[0]
        avg, lo, hi, n = sr(cfg, mine)
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


def scoring_protocol(cfg: Config) -> str:
    """The protocol 03 scores with: Co-EPG's own (:func:`guirl.methods.coepg.evaluation.eval_protocol`:
    the smallest-element rule, Mind2Web's on Mind2Web), never the profile's ``eval.protocol``."""
    from guirl.methods.coepg.evaluation import eval_protocol

    return eval_protocol(cfg.data.source)


#: Captions of :func:`own_tables`' tables.
OWN_CAPTIONS = {
    "table2_levels": "Co-EPG Table 2 / 7 layout: step accuracy (%) at the High and Low instruction levels and their "
    "average (Avg Acc), the test splits pooled",
    "table1_mind2web": "Co-EPG Table 1 / 6 layout: Ele.Acc, Op.F1 and Step SR (%) per Mind2Web test split (macro over "
    "tasks) and Avg SR, the mean of the three Step SRs",
}


def own_tables(
    cfg: Config,
    models: Mapping[str, Callable[[], Any]],
    splits: Mapping[str, Any],
    records: Sequence[dict[str, Any]],
    *,
    labels: Mapping[str, Mapping[str, Any]] | None = None,
    evaluate: Callable[..., list[dict[str, Any]]] | None = None,
) -> tuple[dict[str, pd.DataFrame], list[dict[str, Any]]]:
    """Co-EPG's own tables of the evaluated ``models`` (``records``: their High-level records), by
    data set, and the extra records they needed: ``table2_levels`` (Table 2 / 7: the models
    evaluated again at the Low level, :func:`evaluate_models` with ``level="Low"``, when the
    planner prompt has a Low setting: :func:`guirl.methods.coepg.evaluation.eval_levels`, AndroidControl's
    Table 12 prompt) and ``table1_mind2web`` (Tables 1 / 6 on Mind2Web). ``({}, [])`` where neither
    applies (MiniGUI with this project's prompt layout: the TM / SR tables). ``evaluate``: the
    evaluator (default :func:`evaluate_models`)."""
    from guirl.methods.coepg.evaluation import MIND2WEB_SOURCES, androidcontrol_table, eval_levels, mind2web_table
    from guirl.methods.coepg.prompts import planner_settings

    evaluate = evaluate or evaluate_models
    names = list(dict.fromkeys(r["model"] for r in records))
    tables: dict[str, pd.DataFrame] = {}
    low: list[dict[str, Any]] = []
    m2w = cfg.data.source in MIND2WEB_SOURCES  # Mind2Web has one instruction level
    if not m2w and "Low" in eval_levels(planner_settings(cfg)):
        low = evaluate(cfg, models, splits, labels=labels, level="Low")
        tables["table2_levels"] = androidcontrol_table([*records, *low], names)
    if m2w:
        tables["table1_mind2web"] = mind2web_table(records, names, list(splits))
    return tables, low


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
        avg, lo, hi, n = sr(cfg, [r for r in pool if r["model"] == a.name])
        base = baseline(a).name
        row: dict[str, Any] = {"row": label, "model": a.name, "weighting": a.weighting, "priors": ratio(a.priors)}
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
    """One row per trained stage (:func:`guirl.studies.shared.stages.stage_table`), labelled with what
    it is: the pool models, each iteration's SFT and GRPO models, the end-to-end baseline, the
    ablation runs other than the main one."""
    from guirl.studies.shared.stages import stage_table

    rows: dict[str, Mapping[str, Any]] = {}
    for kind, rs in loop.pool.items():
        for j, r in enumerate(rs):
            rows[pool_label(kind, j)] = r
    for it in loop.iterations:
        rows[sft_label(it.k, "planner")] = it.planner_sft
        rows[sft_label(it.k, "grounder")] = it.grounder_sft
        for r, g in enumerate(it.grpo):
            rows[grpo_label(it.k, r)] = g
        if it.k == 1 and loop.e2e:
            rows[sft_label(1, "e2e")] = loop.e2e
    for name, rs in (ablations or {}).items():
        for r, g in enumerate(rs):
            if g not in loop.iterations[0].grpo:
                rows[ablation_label(name, r)] = g
    return stage_table(rows)


def schedule_writer(report: Any, captions: Mapping[str, str]) -> Callable[[str, pd.DataFrame], None]:
    """An ``on_schedule`` for :func:`run_iterations` and :func:`run_ablations`: before each batch of
    stages trains, print its lengths and write every row of its kind planned so far as the
    ``sft_schedule`` or ``rl_schedule`` table of ``report`` (:class:`guirl.report.Report`; captions
    by kind), so each table exists before the stages it lists train."""
    planned: dict[str, list[pd.DataFrame]] = {"sft": [], "rl": []}
    names = {"sft": "sft_schedule", "rl": "rl_schedule"}

    def write(kind: str, rows: pd.DataFrame) -> None:
        print_schedule(kind, rows)
        planned[kind].append(rows)
        report.table(names[kind], pd.concat(planned[kind], ignore_index=True), caption=captions[kind])

    return write


def grpo_curves(
    results: Mapping[str, Sequence[Mapping[str, Any]]], columns: Sequence[str] = ("reward", "reward_std", "kl")
) -> pd.DataFrame:
    """Long table ``run, seed, step, <columns>`` of GRPO stages' logs (``{run: [result per seed]}``;
    :func:`guirl.studies.shared.stages.rl_curves`)."""
    from guirl.studies.shared.stages import rl_curves

    runs = {(name, r): res for name, rs in results.items() for r, res in enumerate(rs)}
    return rl_curves(runs, columns, keys=("run", "seed"))


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
    """One sentence per row of :func:`ablation_table` (its baseline rows left out), worded from its
    ``verdict`` (the interval) only (:func:`guirl.studies.shared.paired.conclusions`)."""
    from guirl.studies.shared.paired import conclusions as worded

    return worded(table, names=("vs", "row"))


def conclusions(table: pd.DataFrame) -> str:
    """Sentences worded from the ``resolved`` marks of a :func:`paired_rows` table only."""
    from guirl.studies.shared.paired import conclusions as worded

    return worded(table)
