"""Notebook 02 (``02_ccpo_rl``): SO-RL vs CCPO from the High-level SFT model (CCPO Tables 2, 4, 5, 10,
11, Figures 6 and 9, the ROI sample screens), so each notebook cell is a few library calls.

* :func:`main_runs` / :func:`ablation_runs`: the grid 02 trains as
  :class:`~guirl.studies.shared.rl_runs.RLRun` records (SO-RL and CCPO per ``eval.histories``
  setting; the ablations of Tables 5, 10 and 11 at ``ccpo.ablation_history``), run by
  :func:`guirl.studies.shared.rl_runs.run_rl_runs` through the one RL engine.
* :func:`fit_cost_model` / :func:`table4`: CCPO Table 4 measured side by side: mean prompt tokens
  per training sample, compression rate (``1 - CCPO tokens / SO-RL tokens`` at the same history
  setting, Table 4's definition, and the compression of CCPO's cropped history against the same
  prompts uncompressed), seconds per RL step, the speedup SO-RL / CCPO, the ratio of prompt
  tokens and the speedup the repository's cost model (:mod:`guirl.analysis.cost`, seconds per
  generated sample against the prompt length) predicts.
* :func:`plot_curves`, :func:`plot_prompt_tokens`: reward / KL curves, CCPO Figure 9 (whether RL
  moved the reward: :func:`guirl.studies.shared.stages.reward_rise`).
* :func:`ablation_table` / :func:`table10` / :func:`rollouts_table`: the Table 5 / 10 / 11 layouts.
* :func:`reward_curve` / :func:`plot_reward_curve`: CCPO Figure 6; :func:`roi_samples` /
  :func:`plot_rois`: progressive rollouts of a policy on a few training episodes and the history
  screenshots with the aggregated ROIs drawn on them.
* :func:`greedy_changed`: did RL move the greedy policy (share of test steps whose greedy output
  differs from the SFT model's, with an interval); :func:`time_breakdown`: where an RL step's time
  goes (rollouts, reward, reference / old log-probs, gradient steps) beside Table 4's s/step;
  :func:`restrict_records`: records on the test steps of other records (pairing subsets).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.analysis.cost import CostFit, fit_cost
from guirl.config import Config
from guirl.studies.shared.paired import conclusions as _conclusions
from guirl.studies.shared.paired import paired_table
from guirl.studies.shared.rl_runs import LABELS, RL_METHODS, RLRun, rl_log, rl_stage_config

__all__ = [
    "CASC_ONLY",
    "greedy_changed",
    "time_breakdown",
    "restrict_records",
    "main_runs",
    "ablation_runs",
    "rl_config",
    "rl_schedule",
    "fit_cost_model",
    "table4",
    "reward_curve",
    "roi_samples",
    "plot_rois",
    "ablation_table",
    "rollouts_table",
    "plot_curves",
    "paired_gains",
    "conclusions",
    "table10",
    "plot_reward_curve",
    "plot_prompt_tokens",
]


# ----------------------------------------------------------------------------- Table 4
def _usable_steps(df: pd.DataFrame, skip_first: int) -> pd.DataFrame:
    ok = df[(df["step"] > skip_first) & ~df["skipped"].astype(bool)]
    return ok[ok["prompt_tokens"].notna() & ok["step_seconds"].notna() & (ok["n_generated"] > 0)]


def fit_cost_model(logs: Iterable[pd.DataFrame], *, skip_first: int = 1, lower_degree_ok: bool = False) -> CostFit:
    """The repository's cost model (:func:`guirl.analysis.cost.fit_cost`: ``c0 + c1 L + c2 L^2``,
    coefficients >= 0) of the seconds per generated sample of an RL step (its ``step_seconds /
    n_generated``) against its mean prompt length ``L`` (``prompt_tokens``), over the steps of
    several runs; steps ``<= skip_first`` (warm-up) and skipped steps are left out. Needs steps at
    3 or more distinct lengths; with ``lower_degree_ok`` (seconds-sized smoke runs) 2 lengths give
    a linear fit and 1 a constant."""
    pts = [_usable_steps(df, skip_first) for df in logs]
    data = pd.concat(pts, ignore_index=True) if pts else pd.DataFrame()
    distinct = 0 if data.empty else int(data["prompt_tokens"].nunique())
    degree = min(2, distinct - 1)
    if degree < (0 if lower_degree_ok else 2):
        raise ValueError(
            f"fit_cost_model needs steps at 3 or more distinct prompt lengths, got {len(data)} steps "
            f"with {distinct} lengths; run more RL steps"
        )
    return fit_cost(
        data["prompt_tokens"].to_numpy(float), (data["step_seconds"] / data["n_generated"]).to_numpy(float), degree
    )


def _run_stats(df: pd.DataFrame, skip_first: int) -> dict[str, float]:
    steps = _usable_steps(df, skip_first)
    if steps.empty:
        raise ValueError(f"no usable RL step after step {skip_first} (every step skipped or missing)")
    w = steps["n_kept"].astype(float)
    tokens = float((steps["prompt_tokens"] * w).sum() / w.sum())
    full = math.nan
    if "prompt_tokens_full" in steps and steps["prompt_tokens_full"].notna().all():
        full = float((steps["prompt_tokens_full"] * w).sum() / w.sum())
    return {
        "tokens": tokens,
        "tokens_full": full,
        "seconds": float(steps["step_seconds"].mean()),
        "generated": float(steps["n_generated"].mean()),
        "steps": float(len(steps)),
    }


def table4(
    logs: Mapping[tuple[str, str], pd.DataFrame | Mapping[str, Any] | str | Path],
    *,
    baseline: str = "semi_online",
    skip_first: int = 1,
    cost_model: CostFit | None = None,
) -> pd.DataFrame:
    """CCPO Table 4 layout from RL logs measured side by side (same model, same data, same
    machine): one row per (method, history setting).

    Columns: ``Token Length`` (mean prompt tokens per trained sample, text + image), ``Compression
    Rate (%)`` (``1 - tokens / baseline tokens`` at the same history setting, Table 4's
    definition; 0 for the baseline), ``History Compression (%)`` (the method's prompts against the
    same prompts with full history screenshots), ``s/step`` (mean seconds per RL step),
    ``Speedup`` (baseline s/step / s/step), ``Token Ratio`` (baseline tokens / tokens) and
    ``Cost-model Speedup`` (the speedup :func:`fit_cost_model`, fitted on all the given runs
    unless ``cost_model`` is passed, predicts from the two mean lengths and samples per step).
    Steps ``<= skip_first`` (warm-up) are left out. ``logs`` values: data frames, stage results or
    log paths.
    """
    frames = {k: (v if isinstance(v, pd.DataFrame) else rl_log(v)) for k, v in logs.items()}
    stats = {k: _run_stats(df, skip_first) for k, df in frames.items()}
    model = cost_model or fit_cost_model(frames.values(), skip_first=skip_first)
    rows = []
    for (method, history), st in stats.items():
        base = stats.get((baseline, history))
        if base is None:
            raise KeyError(f"no {baseline} run for history {history}: Table 4 compares against it at the same setting")
        predicted = (base["generated"] * model.predict(base["tokens"])) / (
            st["generated"] * model.predict(st["tokens"])
        )
        rows.append(
            {
                "Model": LABELS.get(method, method),
                "History Length": history,
                "Token Length": st["tokens"],
                "Compression Rate (%)": 100.0 * (1.0 - st["tokens"] / base["tokens"]),
                "History Compression (%)": 100.0 * (1.0 - st["tokens"] / st["tokens_full"])
                if math.isfinite(st["tokens_full"])
                else math.nan,
                "s/step": st["seconds"],
                "Speedup": base["seconds"] / st["seconds"],
                "Token Ratio": base["tokens"] / st["tokens"],
                "Cost-model Speedup": predicted,
                "steps": int(st["steps"]),
            }
        )
    order = {m: i for i, m in enumerate(LABELS.values())}
    out = pd.DataFrame(rows)
    return out.sort_values(
        ["Model", "History Length"], key=lambda s: s.map(order) if s.name == "Model" else s
    ).reset_index(drop=True)


# ----------------------------------------------------------------------------- Figure 6
def reward_curve(cfg: Config, distances: Sequence[float] | None = None) -> pd.DataFrame:
    """CCPO Figure 6: the accuracy credit ``r_acc`` of a coordinate action and the step reward of
    a well-formed action of the right type, against the normalised distance to the target, for the
    ``ccpo`` section of ``cfg`` (its defaults when absent)."""
    from guirl.methods.ccpo.config import reward_config
    from guirl.methods.ccpo.history import ccpo_section
    from guirl.methods.ccpo.reward import ccpo_distance_weight

    rc = reward_config(ccpo_section(cfg))
    ds = list(distances) if distances is not None else list(np.linspace(0.0, 0.8, 161))
    acc = [ccpo_distance_weight(float(d), rc) for d in ds]
    return pd.DataFrame({"distance": ds, "r_acc": acc, "reward": [rc.alpha + rc.beta + rc.gamma * a for a in acc]})


# ----------------------------------------------------------------------------- ROI sample screens
def roi_samples(
    cfg: Config,
    model: Mapping[str, Any] | str | Path,
    data_dir: str | Path,
    *,
    history: str = "3AO",
    n_episodes: int = 2,
    seed: int = 0,
    progress: bool = False,
) -> list[Any]:
    """Progressive CCPO rollouts (``rl.group_size`` trajectories each, sampled as in training) of
    ``model`` (a stage result, e.g. an RL or SFT ``result.json``, or a full-model folder) on the
    first ``n_episodes`` training episodes; returns the
    :class:`guirl.methods.ccpo.progressive.ROIRecord` of every history screenshot CASC showed."""
    from guirl.data.splits import load_splits
    from guirl.methods.ccpo.history import training_history
    from guirl.methods.ccpo.rl import ccpo_matcher
    from guirl.models import load_model, load_processor, load_trained
    from guirl.prompts import prompt_spec
    from guirl.rl.multiturn import episode_tasks, semi_online_rollout
    from guirl.rl.samples import RolloutArgs
    from guirl.rl.semi_online import SemiOnlineConfig
    from guirl.rollout import HFPolicy

    stage_cfg = rl_stage_config(cfg, "ccpo", history)
    m, rl = stage_cfg.model, stage_cfg.rl
    builder = training_history(stage_cfg, keep_records=True)
    if builder is None:
        raise ValueError("ccpo.compress is 'none': there are no ROIs to show")
    train = load_splits(data_dir)["train"]
    tasks = episode_tasks(train.episodes[:n_episodes], [prompt_spec(stage_cfg, history)], image_root=train.image_root)
    if isinstance(model, Mapping):
        net, processor = load_trained(dict(model), min_pixels=m.min_pixels, max_pixels=m.max_pixels)
    else:
        net, processor = load_model(model), load_processor(model, min_pixels=m.min_pixels, max_pixels=m.max_pixels)
    policy = HFPolicy(net, processor, max_new_tokens=rl.max_new_tokens, batch_size=rl.rollout_batch_size)
    so = getattr(stage_cfg, "semi_online", None) or SemiOnlineConfig()
    hook = semi_online_rollout(
        ccpo_matcher(stage_cfg),
        patch_threshold=so.patch_threshold,
        min_pixels=m.min_pixels,
        max_pixels=m.max_pixels,
        history=builder,
        progress=progress,
    )
    hook(policy, tasks, RolloutArgs(group_size=rl.group_size, temperature=rl.temperature, top_p=rl.top_p, seed=seed))
    return list(builder.records)


def plot_rois(records: Sequence[Any], *, max_screens: int = 6, min_pixels: int, max_pixels: int):
    """The history screenshots of ``records`` (model views) with the aggregated points (dots) and
    the ROI CASC cropped to (rectangle); a dropped screenshot (non-coordinate step under
    MAX-COMPRESS) is shown greyed with its label. Returns a matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from guirl.methods.ccpo.progressive import load_model_view

    shown = list(records)[:max_screens]
    if not shown:
        raise ValueError("no ROI records to draw (did the rollouts reach a second step?)")
    fig, axes = plt.subplots(1, len(shown), figsize=(2.6 * len(shown), 4.6), squeeze=False)
    for ax, rec in zip(axes[0], shown):
        view = load_model_view(rec.screenshot, min_pixels=min_pixels, max_pixels=max_pixels)
        ax.imshow(view, alpha=0.35 if rec.kind == "dropped" else 1.0)
        w, h = view.size
        if rec.points:
            xs, ys = zip(*[(x * w, y * h) for x, y in rec.points])
            ax.scatter(xs, ys, s=14, c="red", zorder=3)
        if rec.roi_px is not None:
            x1, y1, x2, y2 = rec.roi_px
            ax.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, lw=2, ec="yellow", zorder=4))
        ax.set_title(f"{rec.episode_id} step {rec.step}\n{rec.kind}", fontsize=8)
        ax.set_axis_off()
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- notebook 02's grid
#: Label of Table 5's "+ CASC" run: CCPO's loop and CASC with SO-RL's (UI-S1's) reward.
CASC_ONLY = "CASC (UI-S1 reward)"


def rl_schedule(cfg: Config, data_dir: Path) -> pd.DataFrame:
    """02's RL length, resolved before anything trains (CCPO Table 8): one row with the training
    trajectories (``tasks``: episodes of the train split, one task each), ``epochs``,
    ``prompts_per_step``, ``max_steps`` (``ccpo.rl.max_steps`` when set, else ``ceil(epochs x tasks
    / prompts_per_step)``), ``from`` (``epochs`` or ``max_steps``) and the samples per step
    (``prompts_per_step x rl.group_size`` trajectories)."""
    from guirl.data.splits import train_split
    from guirl.methods.ccpo.config import rl_steps
    from guirl.methods.ccpo.history import ccpo_section

    sec = ccpo_section(cfg).rl
    tasks = len(train_split(data_dir).episodes)
    steps = rl_steps(sec, tasks, cfg.rl.prompts_per_step)
    return pd.DataFrame(
        [
            {
                "tasks": tasks,
                "epochs": sec.epochs if sec.max_steps is None else None,
                "prompts_per_step": cfg.rl.prompts_per_step,
                "group_size": cfg.rl.group_size,
                "max_steps": steps,
                "from": "max_steps" if sec.max_steps is not None else "epochs",
                "ablation_max_steps": ccpo_section(cfg).ablation_max_steps or steps,
            }
        ]
    )


def rl_config(cfg: Config, data_dir: Path) -> Config:
    """``cfg`` with ``rl.max_steps`` set to 02's resolved RL length (:func:`rl_schedule`): what every
    RL run of 02 trains, the ablations too unless ``ccpo.ablation_max_steps`` is set."""
    steps = int(rl_schedule(cfg, data_dir)["max_steps"].iloc[0])
    return cfg.replace({"rl.max_steps": steps})


def main_runs(cfg: Config) -> list[RLRun]:
    """SO-RL and CCPO at every ``eval.histories`` setting (CCPO Tables 2 and 4), SO-RL first;
    labels ``SO-RL`` / ``CCPO`` (the history setting is a column of the tables)."""
    return [RLRun(m, h, LABELS[m]) for h in cfg.eval.histories for m in RL_METHODS]


def ablation_runs(cfg: Config) -> list[RLRun]:
    """The extra CCPO runs of the ablations at ``ccpo.ablation_history`` (none when it is null):
    "+ CASC" of Table 5 (:data:`CASC_ONLY`: CCPO's loop with SO-RL's reward, ``rl.reward:
    semi_online``; SO-RL and CCPO decide "matched" with one rule, so against SO-RL it changes CASC
    alone, and "+ CASC + CR", full CCPO, adds the coordinate-aware reward), MIN-COMPRESS (Table 10,
    ``ccpo.compress: min``) and every ``ccpo.ablation_group_sizes`` value other than
    ``rl.group_size`` (Table 11; the main CCPO run is the ``rl.group_size`` row), each
    ``ccpo.ablation_max_steps`` RL steps when set."""
    from guirl.methods.ccpo.history import ccpo_section

    sec = ccpo_section(cfg)
    h = sec.ablation_history
    if h is None:
        return []
    steps: tuple[tuple[str, Any], ...] = (
        () if sec.ablation_max_steps is None else (("rl.max_steps", sec.ablation_max_steps),)
    )
    runs = [
        RLRun("ccpo", h, CASC_ONLY, "casc", (("rl.reward", "semi_online"), *steps)),
        RLRun("ccpo", h, "CCPO MIN", "min", (("ccpo.compress", "min"), *steps)),
    ]
    runs += [
        RLRun("ccpo", h, f"CCPO {g} rollouts", f"g{g}", (("rl.group_size", g), *steps))
        for g in sec.ablation_group_sizes
        if g != cfg.rl.group_size
    ]
    return runs


def _metric_cells(steps: pd.DataFrame, model: str, history: str, split: str) -> dict[str, float]:
    row = steps[(steps["model"] == model) & (steps["history"] == history) & (steps["split"] == split)]
    if row.empty:
        raise KeyError(f"no step metrics for model {model!r}, history {history}, split {split}")
    r = row.iloc[0]
    return {k: float(r[k]) for k in ("TM", "GR", "SR")}


def ablation_table(steps: pd.DataFrame, rows: Sequence[tuple[str, str]], *, history: str, split: str) -> pd.DataFrame:
    """CCPO Table 5 layout: TM / GR / SR (%) of each ``(label, model)`` row on one split and
    history setting, and the change against the row above (``... delta``, points); ``steps`` is
    :func:`guirl.studies.shared.evaluation.step_metrics`' frame."""
    out = []
    prev: dict[str, float] | None = None
    for label, model in rows:
        cells = _metric_cells(steps, model, history, split)
        row: dict[str, Any] = {"row": label, "model": model, **cells}
        for k in ("TM", "GR", "SR"):
            row[f"{k} delta"] = math.nan if prev is None else cells[k] - prev[k]
        out.append(row)
        prev = cells
    return pd.DataFrame(out)


def rollouts_table(
    steps: pd.DataFrame, rows: Mapping[int, str], *, history: str, splits: Sequence[str], metric: str = "SR"
) -> pd.DataFrame:
    """CCPO Table 11 layout: ``metric`` (%) per split (and the step-weighted overall) for each
    rollout count ``{group_size: model}``."""
    out = []
    for g, model in sorted(rows.items()):
        row: dict[str, Any] = {"rollouts": g, "model": model}
        n_tot = 0.0
        acc = 0.0
        for split in splits:
            sel = steps[(steps["model"] == model) & (steps["history"] == history) & (steps["split"] == split)]
            if sel.empty:
                raise KeyError(f"no step metrics for model {model!r}, history {history}, split {split}")
            r = sel.iloc[0]
            row[split] = float(r[metric])
            n = float(r["n_counted"]) if metric == "SR" else float(r["n"])
            n_tot += n
            acc += n * float(r[metric])
        row["overall"] = acc / n_tot if n_tot else math.nan
        out.append(row)
    return pd.DataFrame(out)


def plot_curves(curves: pd.DataFrame, columns: Sequence[str] = ("reward", "kl")):
    """One panel per column of :func:`rl_curves`' long table, one line per (method, history)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 3.2), squeeze=False)
    for ax, col in zip(axes[0], columns):
        for (method, history), df in curves.groupby(["method", "history"], sort=False):
            ax.plot(df["step"], df[col], marker=".", label=f"{method} {history}")
        ax.set_xlabel("RL step")
        ax.set_title(col)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


#: Column names of :func:`paired_gains`: the two models and their step SR.
GAIN_NAMES = ("baseline", "model")
GAIN_SR_COLUMNS = ("baseline SR", "model SR")


def paired_gains(
    cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]], metric: str = "exact"
) -> pd.DataFrame:
    """:func:`guirl.studies.shared.paired.paired_table` of each ``(baseline, model)`` pair, with
    the columns named ``baseline`` / ``model`` and ``baseline SR`` / ``model SR`` (%)."""
    return paired_table(cfg, records, pairs, names=GAIN_NAMES, sr_columns=GAIN_SR_COLUMNS, metric=metric)


def conclusions(gains: pd.DataFrame) -> str:
    """One sentence per row of :func:`paired_gains`, worded only from its interval."""
    return _conclusions(gains, names=GAIN_NAMES)


def table10(
    steps: pd.DataFrame, t4: pd.DataFrame, *, history: str, split: str, models: Mapping[str, str]
) -> pd.DataFrame:
    """CCPO Table 10 layout at one history setting: for each ``{table4 label: step-metrics model}``
    (e.g. ``{"SO-RL": "SO-RL", "CCPO MIN": "CCPO MIN", "CCPO": "CCPO"}``), TM / GR / SR (%) on
    ``split`` beside the compression rate (%), seconds per RL step and the speedup of :func:`table4`'s
    row (``t4`` measured with SO-RL as the baseline)."""
    rows = []
    for label, model in models.items():
        eff = t4[(t4["Model"] == label) & (t4["History Length"] == history)]
        if len(eff) != 1:
            raise KeyError(f"table10: no single Table 4 row for {label!r} at {history}")
        e = eff.iloc[0]
        rows.append(
            {
                "row": label,
                **_metric_cells(steps, model, history, split),
                "Compression Rate (%)": float(e["Compression Rate (%)"]),
                "s/step": float(e["s/step"]),
                "Speedup": float(e["Speedup"]),
            }
        )
    return pd.DataFrame(rows)


def plot_reward_curve(curve: pd.DataFrame):
    """CCPO Figure 6 from :func:`reward_curve`: ``r_acc`` and the step reward vs the normalised
    distance to the target."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(curve["distance"], curve["r_acc"], label="accuracy credit r_acc")
    ax.plot(curve["distance"], curve["reward"], label="step reward (format + type + credit)")
    ax.set_xlabel("normalised distance to the target")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_prompt_tokens(curves: pd.DataFrame):
    """CCPO Figure 9: mean prompt tokens per trained sample over RL steps, one line per
    (method, history); CCPO's uncompressed length (``prompt_tokens_full``) dashed when logged."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for (method, history), df in curves.groupby(["method", "history"], sort=False):
        (line,) = ax.plot(df["step"], df["prompt_tokens"], marker=".", label=f"{method} {history}")
        if "prompt_tokens_full" in df and df["prompt_tokens_full"].notna().any() and method != LABELS["semi_online"]:
            ax.plot(df["step"], df["prompt_tokens_full"], ls="--", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("RL step")
    ax.set_ylabel("prompt tokens per sample")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- did RL move the policy
def _step_key(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return (r["split"], r["history"], r["episode_id"], r["step_id"], r.get("seed", 0))


def restrict_records(records: Sequence[dict[str, Any]], like: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``records`` on a test step (split, history, episode, step, seed) that ``like`` has, e.g.
    400-step records cut to the 60 steps a study-sized evaluation scored, so the two pair."""
    keys = {_step_key(r) for r in like}
    return [r for r in records if _step_key(r) in keys]


def greedy_changed(
    records: Sequence[dict[str, Any]],
    pairs: Sequence[tuple[str, str]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Whether RL moved the greedy policy: for each ``(before, after)`` model pair and each (split,
    history) both were scored on, the share (%) of the same test steps whose greedy output text
    differs (``changed``, 95% percentile bootstrap interval over steps ``lo`` / ``hi``) and whose
    parsed action differs (``action_changed``), and the steps that became right / wrong under the
    protocol (``fixed`` / ``broken``, counts over counted steps). ``n_steps``: steps compared."""
    rng = np.random.default_rng(seed)
    by = {}
    for r in records:
        by.setdefault(r["model"], {})[_step_key(r)] = r
    rows = []
    for before, after in pairs:
        if before not in by or after not in by:
            raise KeyError(f"greedy_changed: no records of {before if before not in by else after!r}")
        cells: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
        for k, rb in by[before].items():
            ra = by[after].get(k)
            if ra is not None:
                cells.setdefault((k[0], k[1]), []).append((rb, ra))
        for (split, history), both in cells.items():
            diff = np.array([rb["output"] != ra["output"] for rb, ra in both], dtype=float)
            act = np.array([rb["pred_action"] != ra["pred_action"] for rb, ra in both], dtype=float)
            boot = diff[rng.integers(0, len(diff), (n_boot, len(diff)))].mean(1)
            lo, hi = (100.0 * float(x) for x in np.quantile(boot, [0.025, 0.975]))
            counted = [(rb, ra) for rb, ra in both if rb.get("counted", True)]
            rows.append(
                {
                    "before": before,
                    "after": after,
                    "split": split,
                    "history": history,
                    "changed": 100.0 * float(diff.mean()),
                    "lo": lo,
                    "hi": hi,
                    "action_changed": 100.0 * float(act.mean()),
                    "fixed": sum(1 for rb, ra in counted if not rb["exact"] and ra["exact"]),
                    "broken": sum(1 for rb, ra in counted if rb["exact"] and not ra["exact"]),
                    "n_steps": len(both),
                }
            )
    return pd.DataFrame(rows)


#: The parts of an RL step's time (``rl_log.jsonl`` fields, :data:`guirl.train.rl.LOG_FIELDS`) in
#: :func:`time_breakdown`'s column order; "other" is the rest of ``step_seconds``.
TIME_PARTS: dict[str, str] = {
    "gen_seconds": "rollouts (s)",
    "reward_seconds": "reward (s)",
    "logprob_ref_seconds": "ref log-probs (s)",
    "logprob_old_seconds": "old log-probs (s)",
    "grad_seconds": "fwd+bwd+optim (s)",
}


def time_breakdown(
    logs: Mapping[tuple[str, str], pd.DataFrame | Mapping[str, Any] | str | Path], *, skip_first: int = 1
) -> pd.DataFrame:
    """Where an RL step's time goes: per run (keyed ``(method, history)`` as :func:`table4`), the
    mean seconds per step of each :data:`TIME_PARTS` field and of the rest (``other``: prompt
    encoding and bookkeeping) over the same steps :func:`table4` averages (after ``skip_first``,
    updated steps), the step total (``s/step``, Table 4's) and each part's share of it (%)."""
    rows = []
    for (method, history), v in logs.items():
        df = _usable_steps(v if isinstance(v, pd.DataFrame) else rl_log(v), skip_first)
        if df.empty:
            raise ValueError(f"time_breakdown: no usable step of {method} {history}")
        total = float(df["step_seconds"].mean())
        row: dict[str, Any] = {"Model": LABELS.get(method, method), "History Length": history}
        parts = {name: float(df[k].fillna(0.0).mean()) if k in df else math.nan for k, name in TIME_PARTS.items()}
        row.update(parts)
        row["other (s)"] = total - sum(v for v in parts.values() if math.isfinite(v))
        row["s/step"] = total
        for name in [*TIME_PARTS.values(), "other (s)"]:
            row[name.replace("(s)", "(%)")] = 100.0 * row[name] / total if total > 0 else math.nan
        row["steps"] = len(df)
        rows.append(row)
    return pd.DataFrame(rows)
