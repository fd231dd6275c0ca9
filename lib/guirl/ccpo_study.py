"""Notebook 02's library: SO-RL vs CCPO from the High-level SFT checkpoints (CCPO Tables 2, 4, 5, 10,
11, Figures 6 and 9, the ROI sample screens), so each notebook cell is a few lines.

* :func:`rl_stage_config` / :func:`run_rl_stage` / :func:`run_rl_grid`: one RL stage per
  (method, history setting) on top of the SFT result of that history setting, through
  :func:`guirl.train.launch.run_stage` and the one RL engine (``rl.method`` = ``semi_online`` or
  ``ccpo``, the method's own reward, ``rl.histories = [history]``: one model per setting, as
  CCPO reports CCPO-3B-1AO and -3AO separately).
* :func:`rl_log` / :func:`rl_curves`: the per-step logs (reward and its components, KL, prompt
  tokens, compression rate, step seconds) as data frames (reward / KL curves, Figure 9).
* :func:`table4`: CCPO Table 4 measured side by side: mean prompt tokens per training sample,
  compression rate (``1 - CCPO tokens / SO-RL tokens`` at the same history setting, Table 4's
  definition, and the compression of CCPO's cropped history against the same prompts
  uncompressed), seconds per RL step, the speedup SO-RL / CCPO, the ratio of prompt tokens and
  the speedup a cost model fitted to the measured step times predicts (:func:`fit_cost_model`:
  seconds per generated sample linear + quadratic in the prompt length; attention is what can
  make the step-time ratio exceed the token ratio at long prompts).
* :func:`reward_curve`: the distance reward of CCPO Figure 6 for a config.
* :func:`optimized_inference_history`: CASC at test time (CCPO Table 13) as the
  ``history_builder`` of :func:`guirl.evaluation.evaluate_offline` / ``evaluation_grid``.
* :class:`RLRun` / :func:`main_runs` / :func:`ablation_runs` / :func:`run_rl_runs`: the grid
  notebook 02 trains (SO-RL and CCPO per ``eval.histories`` setting; the ablations of Tables 5,
  10 and 11 at ``ccpo.ablation_history``), :func:`rl_policies` their evaluation policies, and
  :func:`ablation_table` / :func:`rollouts_table` the Table 5 / 10 / 11 layouts.
* :func:`roi_samples` / :func:`plot_rois`: progressive rollouts of a policy on a few training
  episodes and the history screenshots with the aggregated ROIs drawn on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config

__all__ = [
    "RL_METHODS",
    "LABELS",
    "rl_stage_config",
    "stage_name",
    "run_rl_stage",
    "run_rl_grid",
    "rl_log",
    "rl_curves",
    "CostModel",
    "fit_cost_model",
    "table4",
    "reward_curve",
    "optimized_inference_history",
    "roi_samples",
    "plot_rois",
    "RLRun",
    "main_runs",
    "ablation_runs",
    "run_rl_runs",
    "rl_policies",
    "ablation_table",
    "rollouts_table",
    "stage_summary",
    "plot_curves",
    "reward_rise",
    "paired_gains",
    "conclusions",
    "table10",
    "plot_reward_curve",
    "plot_prompt_tokens",
]

#: The two RL methods notebook 02 compares, in table order.
RL_METHODS: tuple[str, ...] = ("semi_online", "ccpo")
#: Row labels as the paper prints them.
LABELS: dict[str, str] = {"semi_online": "SO-RL", "ccpo": "CCPO"}


def _with(cfg: Config, updates: Mapping[str, Any]) -> Config:
    """``cfg`` with dotted keys replaced (validated like a yaml file; sections created when absent)."""
    data = cfg.to_dict()
    for key, value in updates.items():
        parts = key.split(".")
        node = data
        for p in parts[:-1]:
            if node.get(p) is None:
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
    return type(cfg).model_validate(data)


def rl_stage_config(cfg: Config, method: str, history: str, overrides: Mapping[str, Any] | None = None) -> Config:
    """The config of one RL stage: ``rl.method = method``, ``rl.reward = null`` (the method's own
    reward: UI-S1's for ``semi_online``, the ``ccpo`` section's for ``ccpo``), ``rl.histories =
    [history]``, then ``overrides`` (dotted keys, e.g. ``{"ccpo.compress": "min"}`` for Table 10
    or ``{"rl.group_size": 4}`` for Table 11)."""
    if method not in ("grpo", *RL_METHODS):
        from guirl.config import registry_names

        if method not in registry_names("rl_method"):
            raise ValueError(f"unknown RL method {method!r}; known: {', '.join(registry_names('rl_method'))}")
    updates: dict[str, Any] = {"rl.method": method, "rl.reward": None, "rl.histories": [history]}
    updates.update(overrides or {})
    return _with(cfg, updates)


def stage_name(method: str, history: str, tag: str = "") -> str:
    """Folder / stage label of an RL stage, e.g. ``ccpo_3AO`` or ``ccpo_3AO_min``."""
    return f"{method}_{history}" + (f"_{tag}" if tag else "")


def _base_model(sft: Mapping[str, Any] | str | Path) -> Path:
    """The model folder of an SFT result (``result.json`` content or a folder)."""
    if isinstance(sft, Mapping):
        return Path(sft["final"])
    return Path(sft)


def run_rl_stage(
    cfg: Config,
    method: str,
    history: str,
    *,
    sft: Mapping[str, Any] | str | Path,
    data_dir: Path,
    run_dir: Path,
    overrides: Mapping[str, Any] | None = None,
    tag: str = "",
    echo: bool = True,
) -> dict[str, Any]:
    """Train (or resume, or reuse) one RL stage from the SFT result ``sft`` of the same history
    setting (CCPO A.1.2: RL continues from the SFT model) under ``run_dir/<stage_name>``; returns
    its ``result.json`` (with the ``log`` path)."""
    from guirl.train.launch import run_stage
    from guirl.train.rl import RL_ENTRY

    stage_cfg = rl_stage_config(cfg, method, history, overrides)
    name = stage_name(method, history, tag)
    return run_stage(
        stage_cfg,
        name,
        data_dir=data_dir,
        base_model=_base_model(sft),
        output_dir=Path(run_dir) / name,
        entry=RL_ENTRY,
        echo=echo,
    )


def run_rl_grid(
    cfg: Config,
    sft: Mapping[str, Mapping[str, Any] | str | Path],
    *,
    data_dir: Path,
    run_dir: Path,
    methods: Sequence[str] = RL_METHODS,
    histories: Sequence[str] | None = None,
    echo: bool = True,
) -> dict[tuple[str, str], dict[str, Any]]:
    """:func:`run_rl_stage` for every method x history setting (``histories``: the keys of ``sft``,
    one SFT result per setting); ``{(method, history): result}``."""
    histories = list(histories or sft)
    missing = [h for h in histories if h not in sft]
    if missing:
        raise KeyError(f"no SFT result for history setting(s) {missing}; have {sorted(sft)}")
    return {
        (m, h): run_rl_stage(cfg, m, h, sft=sft[h], data_dir=data_dir, run_dir=run_dir, echo=echo)
        for h in histories
        for m in methods
    }


def rl_log(result: Mapping[str, Any] | str | Path) -> pd.DataFrame:
    """The per-step log of an RL stage (its ``result.json`` content, the stage folder or the log
    file) as a data frame, one row per step (``guirl.train.rl.LOG_FIELDS`` plus the method's)."""
    from guirl.train.rl import LOG_FILE, read_log

    if isinstance(result, Mapping):
        path = Path(result["log"])
    else:
        path = Path(result)
        if path.is_dir():
            path = path / LOG_FILE
    return pd.DataFrame(read_log(path))


def rl_curves(
    results: Mapping[tuple[str, str], Mapping[str, Any]], columns: Sequence[str] = ("reward", "kl")
) -> pd.DataFrame:
    """Long table ``method, history, step, <column>`` of several stages (reward / KL curves;
    ``prompt_tokens`` for CCPO Figure 9)."""
    frames = []
    for (method, history), res in results.items():
        df = rl_log(res)
        keep = [c for c in columns if c in df]
        part = df[["step", *keep]].copy()
        part.insert(0, "history", history)
        part.insert(0, "method", LABELS.get(method, method))
        frames.append(part)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["method", "history", "step"])


# ----------------------------------------------------------------------------- Table 4
@dataclass(frozen=True)
class CostModel:
    """Seconds per generated sample of an RL step as ``a + b * L + c * L**2`` of the mean prompt
    length ``L`` (tokens): a fixed cost, a cost linear in the tokens (MLP, projections, the
    vision tower) and a quadratic one (attention). ``n_points``: the steps it was fitted on;
    ``degree``: 2, or lower when the steps had too few distinct lengths (``b`` / ``c`` are then 0)."""

    a: float
    b: float
    c: float
    n_points: int
    degree: int = 2

    def seconds_per_sample(self, prompt_tokens: float) -> float:
        return self.a + self.b * prompt_tokens + self.c * prompt_tokens**2


def _usable_steps(df: pd.DataFrame, skip_first: int) -> pd.DataFrame:
    ok = df[(df["step"] > skip_first) & ~df["skipped"].astype(bool)]
    return ok[ok["prompt_tokens"].notna() & ok["step_seconds"].notna() & (ok["n_generated"] > 0)]


def fit_cost_model(logs: Iterable[pd.DataFrame], *, skip_first: int = 1, lower_degree_ok: bool = False) -> CostModel:
    """Least-squares :class:`CostModel` over the steps of several runs (each step: its
    ``step_seconds / n_generated`` against its mean ``prompt_tokens``); steps ``<= skip_first``
    (warm-up) and skipped steps are left out. Needs steps at 3 or more distinct lengths; with
    ``lower_degree_ok`` (seconds-sized smoke runs) 2 lengths give a linear fit and 1 a constant."""
    pts = [_usable_steps(df, skip_first) for df in logs]
    data = pd.concat(pts, ignore_index=True) if pts else pd.DataFrame()
    distinct = 0 if data.empty else int(data["prompt_tokens"].nunique())
    degree = min(2, distinct - 1)
    if degree < (0 if lower_degree_ok else 2):
        raise ValueError(
            f"fit_cost_model needs steps at 3 or more distinct prompt lengths, got {len(data)} steps "
            f"with {distinct} lengths; run more RL steps"
        )
    L = data["prompt_tokens"].to_numpy(float)
    y = (data["step_seconds"] / data["n_generated"]).to_numpy(float)
    scale = float(L.max())
    X = np.stack([(L / scale) ** k for k in range(degree + 1)], axis=1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    full = [float(coef[k]) / scale**k if k <= degree else 0.0 for k in range(3)]
    return CostModel(full[0], full[1], full[2], len(data), degree)


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
    cost_model: CostModel | None = None,
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
        predicted = (base["generated"] * model.seconds_per_sample(base["tokens"])) / (
            st["generated"] * model.seconds_per_sample(st["tokens"])
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
    from guirl.methods.ccpo.reward import ccpo_distance_weight
    from guirl.methods.ccpo.rl import ccpo_section

    rc = reward_config(ccpo_section(cfg))
    ds = list(distances) if distances is not None else list(np.linspace(0.0, 0.8, 161))
    acc = [ccpo_distance_weight(float(d), rc) for d in ds]
    return pd.DataFrame({"distance": ds, "r_acc": acc, "reward": [rc.alpha + rc.beta + rc.gamma * a for a in acc]})


# ----------------------------------------------------------------------------- Table 13
def optimized_inference_history(cfg: Config, *, records: list[Any] | None = None):
    """CCPO's "optimized inference" (App. A.6.1, Table 13): a history hook for
    :func:`guirl.evaluation.evaluate_offline` (``history_builder=``) that crops the history
    screenshots around the points of the actions they show, with the ``ccpo`` section's
    compression, margin and scroll rule and the model's pixel budget
    (:func:`guirl.methods.ccpo.progressive.casc_inference_history`)."""
    from guirl.methods.ccpo.progressive import casc_inference_history
    from guirl.methods.ccpo.rl import ccpo_section

    sec = ccpo_section(cfg)
    if sec.compress == "none":
        raise ValueError("ccpo.compress is 'none': optimized inference needs 'max' or 'min'")
    return casc_inference_history(
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels,
        policy=sec.compress,
        margin=sec.margin_px,
        min_size=sec.min_size_px,
        scroll_is_coordinate=sec.scroll_is_coordinate,
        n_history=max(int(h[0]) for h in cfg.eval.histories),
        records=records,
    )


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
    from functools import partial

    from guirl.data.splits import load_splits
    from guirl.methods.ccpo.config import reward_config
    from guirl.methods.ccpo.reward import ccpo_match
    from guirl.methods.ccpo.rl import ccpo_history, ccpo_section
    from guirl.models import load_model, load_processor, load_trained
    from guirl.rl.multiturn import episode_tasks, semi_online_rollout
    from guirl.rl.samples import RolloutArgs
    from guirl.rl.semi_online import SemiOnlineConfig
    from guirl.rollout import HFPolicy
    from guirl.train.sft import prompt_spec

    stage_cfg = rl_stage_config(cfg, "ccpo", history)
    m, rl = stage_cfg.model, stage_cfg.rl
    builder = ccpo_history(stage_cfg, keep_records=True)
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
        partial(ccpo_match, cfg=reward_config(ccpo_section(stage_cfg))),
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
@dataclass(frozen=True)
class RLRun:
    """One RL stage of notebook 02: ``method`` (``semi_online`` / ``ccpo``) at ``history`` with
    dotted config ``overrides``; ``name`` is its stage folder and ``label`` its row in the tables."""

    method: str
    history: str
    label: str
    tag: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return stage_name(self.method, self.history, self.tag)


def main_runs(cfg: Config) -> list[RLRun]:
    """SO-RL and CCPO at every ``eval.histories`` setting (CCPO Tables 2 and 4), SO-RL first;
    labels ``SO-RL`` / ``CCPO`` (the history setting is a column of the tables)."""
    return [RLRun(m, h, LABELS[m]) for h in cfg.eval.histories for m in RL_METHODS]


def ablation_runs(cfg: Config) -> list[RLRun]:
    """The extra CCPO runs of the ablations at ``ccpo.ablation_history`` (none when it is null):
    ``+CASC`` without the distance reward (Table 5, ``ccpo.distance_credit: false``), MIN-COMPRESS
    (Table 10, ``ccpo.compress: min``) and every ``ccpo.ablation_group_sizes`` value other than
    ``rl.group_size`` (Table 11; the main CCPO run is the ``rl.group_size`` row)."""
    from guirl.methods.ccpo.rl import ccpo_section

    sec = ccpo_section(cfg)
    h = sec.ablation_history
    if h is None:
        return []
    runs = [
        RLRun("ccpo", h, "CCPO w/o CR", "nocr", (("ccpo.distance_credit", False),)),
        RLRun("ccpo", h, "CCPO MIN", "min", (("ccpo.compress", "min"),)),
    ]
    runs += [
        RLRun("ccpo", h, f"CCPO {g} rollouts", f"g{g}", (("rl.group_size", g),))
        for g in sec.ablation_group_sizes
        if g != cfg.rl.group_size
    ]
    return runs


def run_rl_runs(
    cfg: Config,
    runs: Sequence[RLRun],
    *,
    sft: Mapping[str, Any] | str | Path,
    data_dir: Path,
    run_dir: Path,
    echo: bool = False,
) -> dict[str, dict[str, Any]]:
    """:func:`run_rl_stage` for each run (all from the same SFT result; a finished stage is
    reused), with a progress bar; ``{run.name: result}``."""
    from tqdm.auto import tqdm

    out: dict[str, dict[str, Any]] = {}
    bar = tqdm(runs, desc="RL stages")
    for run in bar:
        bar.set_postfix_str(run.name)
        out[run.name] = run_rl_stage(
            cfg,
            run.method,
            run.history,
            sft=sft,
            data_dir=data_dir,
            run_dir=run_dir,
            overrides=dict(run.overrides),
            tag=run.tag,
            echo=echo,
        )
    return out


def rl_policies(cfg: Config, runs: Sequence[RLRun], results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{run.label: builder}`` for :func:`guirl.evaluation.evaluation_grid` (one model in memory
    at a time)."""
    from guirl.evaluation import eval_policy

    return {run.label: (lambda r=results[run.name]: eval_policy(cfg, r)) for run in runs}


def _metric_cells(steps: pd.DataFrame, model: str, history: str, split: str) -> dict[str, float]:
    row = steps[(steps["model"] == model) & (steps["history"] == history) & (steps["split"] == split)]
    if row.empty:
        raise KeyError(f"no step metrics for model {model!r}, history {history}, split {split}")
    r = row.iloc[0]
    return {k: float(r[k]) for k in ("TM", "GR", "SR")}


def ablation_table(steps: pd.DataFrame, rows: Sequence[tuple[str, str]], *, history: str, split: str) -> pd.DataFrame:
    """CCPO Table 5 layout: TM / GR / SR (%) of each ``(label, model)`` row on one split and
    history setting, and the change against the row above (``... delta``, points); ``steps`` is
    :func:`guirl.evaluation.step_metrics`' frame."""
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


def stage_summary(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per RL stage: steps, samples generated and trained, training seconds, and the
    step it resumed from (``None``: trained from the start in this run or reused finished)."""
    return pd.DataFrame(
        [
            {
                "stage": name,
                "steps": r.get("global_step"),
                "generated": r.get("samples_generated"),
                "trained": r.get("samples_trained"),
                "seconds": r.get("train_seconds"),
                "resumed_from": r.get("resumed_from"),
            }
            for name, r in results.items()
        ]
    )


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


def reward_rise(
    results: Mapping[str, Mapping[str, Any]],
    names: Sequence[str] | None = None,
    *,
    window: int,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Whether RL moved the reward: per stage, mean reward of the last ``window`` steps minus the
    first ``window`` (``diff``), with a 95% percentile bootstrap interval resampling the steps of
    each window (``lo`` / ``hi``), ``resolved`` when it excludes 0. Rewards in the method's own
    units (SO-RL and CCPO rewards differ in scale). Needs ``2 * window`` logged steps."""
    if window < 1:
        raise ValueError(f"window={window}: need at least 1 step per window")
    rng = np.random.default_rng(seed)
    rows = []
    for name in names if names is not None else list(results):
        r = rl_log(results[name])["reward"].to_numpy(float)
        if len(r) < 2 * window:
            raise ValueError(f"stage {name}: {len(r)} logged steps, need {2 * window} for window={window}")
        first, last = r[:window], r[-window:]
        boot = last[rng.integers(0, window, (n_boot, window))].mean(1) - first[
            rng.integers(0, window, (n_boot, window))
        ].mean(1)
        lo, hi = (float(x) for x in np.quantile(boot, [0.025, 0.975]))
        rows.append(
            {
                "stage": name,
                "first": float(first.mean()),
                "last": float(last.mean()),
                "diff": float(last.mean() - first.mean()),
                "lo": lo,
                "hi": hi,
                "resolved": bool(lo > 0 or hi < 0),
                "window": window,
            }
        )
    return pd.DataFrame(rows)


def paired_gains(
    cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]], metric: str = "exact"
) -> pd.DataFrame:
    """:func:`guirl.evaluation.paired_gain_table` for each ``(baseline, model)`` pair, stacked:
    columns ``baseline``, ``model``, ``split``, ``history``, ``baseline SR`` / ``model SR`` (%),
    ``diff`` / ``lo`` / ``hi`` (points), ``resolved``, ``verdict``, ``n_seeds``, ``n_steps``."""
    from guirl.evaluation import paired_gain_table

    frames = []
    for base, model in pairs:
        t = paired_gain_table(cfg, records, baseline=base, model=model, metric=metric)
        t = t.rename(columns={base: "baseline SR", model: "model SR"})
        t.insert(0, "model", model)
        t.insert(0, "baseline", base)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def conclusions(gains: pd.DataFrame) -> str:
    """One sentence per row of :func:`paired_gains`, worded only from its interval (``verdict``):
    "higher" / "lower" when resolved, else "not resolved" with the interval."""
    lines = []
    for r in gains.to_dict(orient="records"):
        where = f"{r['split']} {r['history']}"
        span = f"{r['diff']:+.1f} points, 95% interval [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        if r["verdict"] == "B > A":
            lines.append(f"{r['model']} has a higher step SR than {r['baseline']} on {where} ({span}).")
        elif r["verdict"] == "B < A":
            lines.append(f"{r['model']} has a lower step SR than {r['baseline']} on {where} ({span}).")
        else:
            lines.append(f"{r['model']} vs {r['baseline']} on {where}: not resolved ({span}).")
    return "\n".join(lines)


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
