"""Notebook 04 (``04_ces_staged_rl``): CES end to end -- warm-up SFT of the Coordinator and the State
Tracker, stage 1 and stage 2 execution-feedback GRPO, the CES loop against its baselines and
ablations (CES Tables 1-3), online long-horizon MiniGUI tasks, the temporal judgement of Fig. 2, the
failure taxonomy of Fig. 5 and the training curves of Fig. 6.

* Inputs: :func:`model_folder` resolves a ``ces`` model source (a folder, ``tiny``, or another
  notebook's stage such as ``01_sft/sft_low``); :func:`coordinator_start` is where the Coordinator
  starts (the model 01's agents start from: 01's grounding model on the tiny profile,
  ``model.path`` on the paper profiles).
* Stages (:func:`ces_stages`, :func:`train`): ``warmup_coordinator`` and ``warmup_state_tracker``
  (``records`` SFT stages on :func:`write_warmup_records`' files, side by side), the optional
  ``weak_executor`` (01's Low-executor recipe for ``ces.weak_executor_steps`` steps: Table 2's
  second executor on the tiny profile), then ``stage1_coordinator`` (role ``ces.coordinator``, the
  frozen Executor as the stage input ``executor``) and ``stage2_state_tracker`` (role
  ``ces.state_tracker``, the stage-1 Coordinator frozen as the input ``coordinator``). Each a
  :class:`~guirl.train.launch.Stage`; a finished one is reused, a killed one resumes.
* Systems (:data:`SYSTEMS`, :func:`agents`): the loop of :class:`guirl.methods.ces.agent.CESAgent`
  with parts left out or swapped, one per row of Tables 1-3, per executor.
* Tables: :func:`table_layout` (Type / GR / SR per test split), :func:`paired_vs` (paired
  differences with 95% intervals), :func:`failure_table` / :func:`failure_paired` (Fig. 5),
  :func:`temporal_table` (Fig. 2); figures :func:`plot_rl_curves` (Fig. 6), :func:`plot_temporal`,
  :func:`plot_failures`. The stage table, the online paired table and the sentences are
  :mod:`guirl.studies.shared` (``stages.stage_table``, ``paired.online_paired``,
  ``paired.conclusions``); 04 evaluates with ``evaluation.paper_eval_config(cfg, "ces")``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.configbase import stage_updates
from guirl.methods.ces.config import ces_section, is_stage_ref
from guirl.studies.shared.inputs import base_model_dir, eval_splits, upstream_result
from guirl.train.launch import SFT_ENTRY, Stage, run_stage, run_stages
from guirl.train.rl import RL_ENTRY

__all__ = [
    "test_splits",
    "WARMUP_COORDINATOR",
    "WARMUP_TRACKER",
    "WEAK_EXECUTOR",
    "STAGE1",
    "STAGE2",
    "SYSTEMS",
    "System",
    "history",
    "model_name",
    "MAIN",
    "SFT_ONLY",
    "model_folder",
    "coordinator_start",
    "executor_sources",
    "write_warmup_records",
    "warmup_config",
    "rl_config",
    "ces_stages",
    "train",
    "agents",
    "table_layout",
    "paired_vs",
    "failure_table",
    "failure_paired",
    "temporal_table",
    "rl_curves",
    "plot_rl_curves",
    "plot_temporal",
    "plot_failures",
    "paper_rows",
    "with_deltas",
]


def test_splits(cfg: Config) -> dict[str, Any]:
    """04's test splits: the run's own (:func:`guirl.studies.shared.inputs.eval_splits`) and, when it
    trains on GUI-Odyssey (CES App. B.1), the AITZ and AMEX test splits converted for the same
    profile, named ``aitz/test`` and ``amex/test`` (Table 1's cross-data-set columns,
    :func:`guirl.methods.ces.evaluation.benchmark_splits`: a ``FileNotFoundError`` naming the command
    when one is not converted). MiniGUI runs keep their own splits."""
    from guirl.methods.ces.evaluation import TRAIN_SOURCE, benchmark_splits
    from guirl.paths import data_dir

    own = eval_splits(cfg)
    if cfg.data.source != TRAIN_SOURCE:
        return own
    return {**own, **benchmark_splits(data_dir(cfg.profile))}


WARMUP_COORDINATOR = "warmup_coordinator"
WARMUP_TRACKER = "warmup_state_tracker"
WEAK_EXECUTOR = "weak_executor"
STAGE1 = "stage1_coordinator"
STAGE2 = "stage2_state_tracker"
#: The executor 01 trained (the Low executor) and the one trained shorter here: labels in tables.
MAIN = "main"


def history(cfg: Config) -> str:
    """The history setting 04 trains and evaluates at: the first of ``eval.histories`` (the
    Executor's prompt window; the Coordinator and the State Tracker see no history)."""
    return cfg.eval.histories[0]


# ----------------------------------------------------------------------------- inputs
def model_folder(cfg: Config, source: str) -> Path:
    """The checkpoint folder of a ``ces`` model source: ``tiny`` (the offline tiny Qwen3 of
    :func:`guirl.models.build_tiny_text_model`, seed ``cfg.seed``), ``NN_notebook/stage`` (that
    stage's ``final`` folder for this profile, :func:`upstream_result`), else a local folder
    (relative to the repository; a clear error when it is missing)."""
    from guirl.models import adapter_base, build_tiny_text_model, resolve_checkpoint
    from guirl.paths import resolve_repo_path

    if source == "tiny":
        return build_tiny_text_model(seed=cfg.seed)
    if is_stage_ref(source):
        notebook, stage = source.split("/")
        return Path(upstream_result(cfg, notebook, stage)["final"])
    path = resolve_repo_path(source)
    return path if adapter_base(path) is not None else resolve_checkpoint(path, f"ces model {source!r}")


def coordinator_start(cfg: Config) -> Path:
    """Where the Coordinator's warm-up starts: the model 01's agents start from (01's grounding
    model when ``grounding.enabled``, the tiny profile; else ``model.path``: Qwen2.5-VL-7B on
    paper-7b, CES Sec. 5.1)."""
    if cfg.grounding.enabled:
        return Path(upstream_result(cfg, "01_sft", "grounding")["final"])
    return base_model_dir(cfg)


def executor_sources(cfg: Config, run_dir: Path) -> dict[str, Path]:
    """``{label: folder}`` of the Executors of Table 2, the training Executor first
    (``ces.executor_model``, label :data:`MAIN`), then ``weak`` (the shorter-trained Low executor,
    when ``ces.weak_executor_steps`` is set) and ``ces.table2_executors`` (labelled by folder name)."""
    sec = ces_section(cfg)
    out = {MAIN: model_folder(cfg, sec.executor_model)}
    if sec.weak_executor_steps is not None:
        out["weak"] = Path(run_dir) / WEAK_EXECUTOR / "final"
    for src in sec.table2_executors:
        out[Path(src).name] = model_folder(cfg, src)
    return out


# ----------------------------------------------------------------------------- warm-up data
def write_warmup_records(cfg: Config, data_dir: Path, run_dir: Path) -> dict[str, Path]:
    """The warm-up records of both roles (:mod:`guirl.methods.ces.data`) from ``ces.warmup.samples``
    training steps (seed ``cfg.seed``), written for ``records`` stages; ``{role: path}``."""
    from guirl.data.splits import load_splits
    from guirl.methods.ces.data import coordinator_records, gt_report_fn, sample_steps, tracker_records
    from guirl.methods.ces.rl import executor_prompting
    from guirl.train.data import write_records

    sec = ces_section(cfg)
    train = load_splits(data_dir)["train"]
    steps = sample_steps(train.episodes, sec.warmup.samples, seed=cfg.seed)
    prompting = executor_prompting(cfg, history(cfg))
    report = gt_report_fn(
        lambda s: prompting.write(s.action, tuple(s.screen_size)),
        with_instruction=sec.tracker_input == "instruction_and_output",
    )
    out = Path(run_dir) / "records"
    return {
        "coordinator": write_records(
            out / "coordinator.jsonl",
            coordinator_records(steps, image_root=train.image_root, data_dir=data_dir, think=sec.warmup.think),
        ),
        "state_tracker": write_records(out / "state_tracker.jsonl", tracker_records(steps, report=report)),
    }


# ----------------------------------------------------------------------------- stages
def warmup_config(cfg: Config) -> Config:
    """The warm-up SFT config (CES Sec. 5.1, App. B.2): the ``ces.warmup`` stage values (epochs,
    learning rate, trained by epochs) and its ``lora`` (LoRA rank 8, alpha 16 on the paper
    profiles; the tiny profile trains every parameter)."""
    return cfg.replace(stage_updates(ces_section(cfg).warmup))


def rl_config(cfg: Config, role: str, n_tasks: int) -> Config:
    """The config of one GRPO stage (``role``: ``coordinator`` or ``state_tracker``): the stage values
    of its ``ces`` column of Table 4 (:class:`guirl.methods.ces.config.CESRoleRL`), ``rl.max_steps``
    = its ``max_steps`` or ``ceil(epochs x n_tasks / prompts_per_step)``, the role and its reward,
    the Executor's history setting; checkpoints every ``rl.save_steps`` steps at most."""
    r = getattr(ces_section(cfg), role)
    steps = r.max_steps or max(1, math.ceil(r.epochs * n_tasks / r.prompts_per_step))
    updates: dict[str, Any] = {
        **stage_updates(r),
        "rl.role": f"ces.{role}",
        "rl.reward": None,
        "rl.histories": [history(cfg)],
        "rl.max_steps": steps,
        "rl.save_steps": min(cfg.rl.save_steps, steps),
    }
    return cfg.replace(updates)


def _pool_sizes(cfg: Config, data_dir: Path) -> tuple[int, int]:
    """Tasks of stage 1 and stage 2 (the RL pool: ``ces.rl_pool`` steps, stage 2's of ``t >= 1``)."""
    from guirl.data.splits import load_splits

    eps = load_splits(data_dir)["train"].episodes
    n = ces_section(cfg).rl_pool
    return min(n, sum(len(e.steps) for e in eps)), min(n, sum(len(e.steps) - 1 for e in eps))


def ces_stages(cfg: Config, *, data_dir: Path, run_dir: Path, records: Mapping[str, Path]) -> dict[str, Stage]:
    """The stages of 04 in training order (module doc), ``{name: Stage}``."""
    from guirl.studies.shared.agents import sft_agents

    sec = ces_section(cfg)
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    executor = model_folder(cfg, sec.executor_model)
    start = coordinator_start(cfg)
    wcfg = warmup_config(cfg)
    n1, n2 = _pool_sizes(cfg, data_dir)
    stages = {
        WARMUP_COORDINATOR: Stage(
            "records",
            SFT_ENTRY,
            wcfg,
            {"data": data_dir, "records": records["coordinator"]},
            start,
            run_dir / WARMUP_COORDINATOR,
        ),
        WARMUP_TRACKER: Stage(
            "records",
            SFT_ENTRY,
            wcfg,
            {"data": data_dir, "records": records["state_tracker"]},
            model_folder(cfg, sec.state_tracker_model),
            run_dir / WARMUP_TRACKER,
        ),
    }
    if sec.weak_executor_steps is not None:
        low = [a for a in sft_agents(cfg) if a.level == "Low"]
        if not low:
            raise ValueError("ces.weak_executor_steps needs sft.executor (01's Low-executor recipe)")
        stages[WEAK_EXECUTOR] = Stage(
            "sft",
            SFT_ENTRY,
            low[0].cfg.replace({"sft.max_steps": sec.weak_executor_steps}),
            {"data": data_dir},
            start,
            run_dir / WEAK_EXECUTOR,
        )
    stages[STAGE1] = Stage(
        STAGE1,
        RL_ENTRY,
        rl_config(cfg, "coordinator", n1),
        {"data": data_dir, "executor": executor},
        run_dir / WARMUP_COORDINATOR / "final",
        run_dir / STAGE1,
    )
    stages[STAGE2] = Stage(
        STAGE2,
        RL_ENTRY,
        rl_config(cfg, "state_tracker", n2),
        {"data": data_dir, "executor": executor, "coordinator": run_dir / STAGE1 / "final"},
        run_dir / WARMUP_TRACKER / "final",
        run_dir / STAGE2,
    )
    return stages


def train(stages: Mapping[str, Stage], *, parallel: int = 1, echo: bool = True) -> dict[str, dict[str, Any]]:
    """Train (reuse, or resume) the stages: the warm-ups and the weak executor side by side
    (``parallel`` at a time; they read no other stage's output), then stage 1, then stage 2."""
    first = [n for n in stages if n not in (STAGE1, STAGE2)]
    out = dict(zip(first, run_stages([stages[n] for n in first], parallel=parallel, echo=echo)))
    for name in (STAGE1, STAGE2):
        out[name] = run_stage(stages[name], echo=echo)
    return out


# ----------------------------------------------------------------------------- systems
@dataclass(frozen=True)
class System:
    """One row of CES Tables 1-3: which trained parts the loop uses (``coordinator`` /
    ``tracker``: ``"warmup"``, ``"rl"`` or ``None``), the Coordinator's memory (``"tracker"`` or
    ``"actions"``) and, without a Coordinator, the Executor's instruction (``"none"`` / ``"goal"`` /
    ``"goal_and_state"``: :class:`guirl.methods.ces.agent.CESAgent`)."""

    name: str
    coordinator: str | None = None
    tracker: str | None = None
    memory: str = "tracker"
    instruction: str = "none"


#: The systems of Tables 1-3 (Table 2 uses the first three with every Executor).
SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("Executor alone"),
        System("CES-P (warm-up)", "warmup", "warmup"),
        System("CES", "rl", "rl"),
        System("w/o Coordinator", None, "rl", instruction="goal_and_state"),  # CES Sec. 5.3: the tracker stays
        System("w/o State Tracker", "rl", None, memory="actions"),
    )
}
#: Table 3's "w/o RL (SFT only)" is the warm-up system.
SFT_ONLY = "CES-P (warm-up)"


def model_name(executor: str, system: str) -> str:
    """The model name of a (executor, system) pair in the prediction records."""
    return system if executor == MAIN else f"{system} [{executor}]"


def agents(
    cfg: Config, run_dir: Path, executors: Mapping[str, Path], systems: Mapping[str, Sequence[str]]
) -> dict[str, Callable[[], Any]]:
    """``{model name: builder}`` for :func:`guirl.studies.shared.evaluation.evaluation_grid`: the
    CES loop of each ``systems[executor]`` entry (:data:`SYSTEMS`), sharing loaded models (each
    folder loads once, with its role's generation budget)."""
    from guirl.methods.ces.agent import CESAgent
    from guirl.methods.ces.rl import FrozenPolicy, executor_prompting, role_policy_budget

    sec = ces_section(cfg)
    run_dir = Path(run_dir)
    folders = {
        ("coordinator", "warmup"): run_dir / WARMUP_COORDINATOR / "final",
        ("coordinator", "rl"): run_dir / STAGE1 / "final",
        ("state_tracker", "warmup"): run_dir / WARMUP_TRACKER / "final",
        ("state_tracker", "rl"): run_dir / STAGE2 / "final",
    }
    cache: dict[tuple[str, Path], Any] = {}

    def policy(role: str, folder: Path) -> Any:
        key = (role, Path(folder))
        if key not in cache:
            cache[key] = FrozenPolicy(folder, cfg, max_new_tokens=role_policy_budget(cfg, role), desc=role)
        return cache[key]

    prompting = executor_prompting(cfg, history(cfg))
    out: dict[str, Callable[[], Any]] = {}
    for label, names in systems.items():
        for name in names:
            s = SYSTEMS[name]

            def build(s: System = s, label: str = label) -> Any:
                return CESAgent(
                    policy("executor", executors[label]),
                    prompting,
                    coordinator=policy("coordinator", folders[("coordinator", s.coordinator)])
                    if s.coordinator
                    else None,
                    tracker=policy("state_tracker", folders[("state_tracker", s.tracker)]) if s.tracker else None,
                    memory=s.memory,  # type: ignore[arg-type]
                    instruction=s.instruction,  # type: ignore[arg-type]
                    tracker_sees_instruction=sec.tracker_input == "instruction_and_output",
                )

            out[model_name(label, name)] = build
    return out


# ----------------------------------------------------------------------------- tables
#: Our metric names and CES's (Sec. 5.1: Type, GR, SR).
PAPER_METRICS = {"TM": "Type", "GR": "GR", "SR": "SR"}


def table_layout(steps: pd.DataFrame, models: Mapping[str, str], splits: Sequence[str]) -> pd.DataFrame:
    """CES's table layout: one row per ``models`` entry (``{our model name: row label}``), columns
    ``"<split> Type|GR|SR"`` (%) per test split; ``steps`` is
    :func:`guirl.studies.shared.evaluation.step_metrics`' frame."""
    cells = {(r["model"], r["split"]): r for r in steps.to_dict(orient="records")}
    rows = []
    for name, label in models.items():
        row: dict[str, Any] = {"row": label, "model": name}
        for split in splits:
            cell = cells.get((name, split))
            for ours, theirs in PAPER_METRICS.items():
                row[f"{split} {theirs}"] = float(cell[ours]) if cell is not None else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def paired_vs(
    cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]], metric: str = "exact"
) -> pd.DataFrame:
    """Paired differences ``B - A`` of a per-step metric (``exact``: SR, ``type_match``: Type) on the
    same test steps, per split, for each ``(A, B)`` (:func:`guirl.studies.shared.paired.paired_table`:
    ``A_value`` / ``B_value`` in %, ``diff`` / ``lo`` / ``hi`` in points, ``resolved``, ``verdict``),
    with the ``metric`` named as the paper names it."""
    from guirl.studies.shared.paired import paired_table

    t = paired_table(cfg, records, pairs, sr_columns=("A_value", "B_value"), metric=metric)
    t.insert(0, "metric", {"exact": "SR", "type_match": "Type"}.get(metric, metric))
    return t


def _episodes(splits: Mapping[str, Any]) -> dict[str, Any]:
    return {ep.episode_id: ep for sp in splits.values() for ep in sp.episodes}


def _failure_matrix(
    records: Sequence[dict[str, Any]], kinds: Mapping[tuple[str, int], str], model: str
) -> tuple[dict[str, np.ndarray], list[tuple[str, str, int]]]:
    sel = sorted((r for r in records if r["model"] == model), key=lambda r: (r["split"], r["episode_id"], r["step_id"]))
    keys = [(r["split"], r["episode_id"], r["step_id"]) for r in sel]
    from guirl.methods.ces.analysis import FAILURE_KINDS

    mats = {k: np.array([float(kinds.get((model, key)) == k) for key in keys]) for k in FAILURE_KINDS}  # type: ignore[call-overload]
    return mats, keys


def _classified(
    cfg: Config, records: Sequence[dict[str, Any]], splits: Mapping[str, Any], train_episodes: Sequence[Any]
) -> dict[tuple[str, tuple[str, str, int]], str]:
    from guirl.methods.ces.analysis import failure_counts, seen_screens

    rows = failure_counts(records, _episodes(splits), protocol=cfg.eval.protocol, seen=seen_screens(train_episodes))
    return {(r["model"], (r["split"], r["episode_id"], r["step_id"])): r["kind"] for r in rows}


def failure_table(
    cfg: Config,
    records: Sequence[dict[str, Any]],
    splits: Mapping[str, Any],
    train_episodes: Sequence[Any],
    models: Sequence[str],
) -> pd.DataFrame:
    """CES Fig. 5 as a table: per model and failure kind (:data:`guirl.methods.ces.analysis.
    FAILURE_KINDS`, rule :func:`~guirl.methods.ces.analysis.classify_failure`), the steps of that
    kind (``n``), their share of all evaluated steps (``share``, %, with a 95% bootstrap interval
    over steps) and of the failed steps (``share_of_failures``, %)."""
    from guirl.methods.ces.analysis import FAILURE_KINDS
    from guirl.metrics.bootstrap import mean_with_ci

    kinds = _classified(cfg, records, splits, train_episodes)
    rows = []
    for model in models:
        mats, keys = _failure_matrix(records, kinds, model)
        failed = sum(int(m.sum()) for m in mats.values())
        for k in FAILURE_KINDS:
            m = mats[k]
            mean, lo, hi = mean_with_ci(m, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
            rows.append(
                {
                    "model": model,
                    "kind": k,
                    "n": int(m.sum()),
                    "n_steps": len(keys),
                    "share": 100 * mean,
                    "lo": 100 * lo,
                    "hi": 100 * hi,
                    "share_of_failures": 100 * float(m.sum()) / failed if failed else math.nan,
                }
            )
    return pd.DataFrame(rows)


def failure_paired(
    cfg: Config,
    records: Sequence[dict[str, Any]],
    splits: Mapping[str, Any],
    train_episodes: Sequence[Any],
    a: str,
    b: str,
) -> pd.DataFrame:
    """Per failure kind, the paired difference of its share of steps ``b - a`` (points, 95%
    interval over the same test steps): does ``b`` (CES) make fewer failures of that kind?"""
    from guirl.methods.ces.analysis import FAILURE_KINDS
    from guirl.metrics.paired import difference_row, paired_difference

    kinds = _classified(cfg, records, splits, train_episodes)
    ma, ka = _failure_matrix(records, kinds, a)
    mb, kb = _failure_matrix(records, kinds, b)
    if ka != kb:
        raise ValueError(f"failure_paired: {a!r} and {b!r} were not scored on the same steps")
    rows = []
    for k in FAILURE_KINDS:
        d = paired_difference(ma[k], mb[k], n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
        rows.append(
            {
                "kind": k,
                "A": a,
                "B": b,
                "A_share": 100 * ma[k].mean(),
                "B_share": 100 * mb[k].mean(),
                **difference_row(d),
            }
        )
    return pd.DataFrame(rows)


def temporal_table(
    cfg: Config,
    models: Mapping[str, Path],
    episodes: Sequence[Any],
    image_root: Path,
    *,
    gaps: Sequence[int],
    per_gap: int,
) -> pd.DataFrame:
    """CES Fig. 2's data: per judge (each model folder of ``models``, and ``annotated task
    state``) and step gap, the accuracy (%) of telling which of two screenshots of one trajectory
    came first (:mod:`guirl.methods.ces.analysis`), with a 95% bootstrap interval over the pairs,
    and ``chance`` (50)."""
    import torch

    from guirl.methods.ces.analysis import judge_pairs, state_judge, temporal_pairs
    from guirl.metrics.bootstrap import mean_with_ci
    from guirl.models import load_folder

    pairs = temporal_pairs(episodes, gaps, per_gap, seed=cfg.seed)
    m = cfg.model
    scores: dict[str, list[float]] = {}
    for name, folder in models.items():
        model, processor = load_folder(
            folder, min_pixels=m.min_pixels, max_pixels=m.max_pixels, dtype=m.torch_dtype, device=cfg.runtime.device
        )
        scores[name] = judge_pairs(model, processor, pairs, image_root, batch=cfg.eval.batch_size)
        del model
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    scores["annotated task state"] = state_judge(pairs)
    rows = []
    for name, sc in scores.items():
        for gap in gaps:
            v = np.array([s for s, p in zip(sc, pairs) if p.gap == gap])
            if not len(v):
                continue
            mean, lo, hi = mean_with_ci(v, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
            rows.append(
                {"judge": name, "gap": gap, "n": len(v), "accuracy": 100 * mean, "lo": 100 * lo, "hi": 100 * hi}
            )
    out = pd.DataFrame(rows)
    out["chance"] = 50.0
    return out


# ----------------------------------------------------------------------------- figures
def rl_curves(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """CES Fig. 6's data: the per-step logs of both GRPO stages, long format ``stage, step,
    variable, value`` (reward, its format / type / param components, KL, entropy, and the
    role's match rate)."""
    from guirl.studies.shared.stages import rl_curves as curves

    keep = (
        "reward",
        "reward/format",
        "reward/type",
        "reward/param",
        "kl",
        "entropy",
        "instruction_match",
        "state_match",
    )
    frames = [
        curves({stage: results[stage]}, keep).melt(id_vars=["stage", "step"], var_name="variable", value_name="value")
        for stage in (STAGE1, STAGE2)
    ]
    return pd.concat(frames, ignore_index=True)


def plot_rl_curves(curves: pd.DataFrame):
    """Two panels (Coordinator, State Tracker) of the stage logs over RL steps (CES Fig. 6 layout)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=False)
    for ax, (stage, title) in zip(axes, ((STAGE1, "Coordinator (stage 1)"), (STAGE2, "State Tracker (stage 2)"))):
        part = curves[
            (curves["stage"] == stage)
            & curves["variable"].isin(["reward", "reward/format", "reward/type", "reward/param", "kl"])
        ]
        sns.lineplot(data=part, x="step", y="value", hue="variable", marker="o", ax=ax)
        ax.set_title(title)
        ax.set_xlabel("RL step")
    fig.tight_layout()
    return fig


def plot_temporal(table: pd.DataFrame):
    """Accuracy against the step gap per judge, with the 95% intervals and chance (CES Fig. 2 layout)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for judge, part in table.groupby("judge", sort=False):
        ax.errorbar(
            part["gap"],
            part["accuracy"],
            yerr=[part["accuracy"] - part["lo"], part["hi"] - part["accuracy"]],
            marker="o",
            capsize=3,
            label=judge,
        )
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("step gap between the two screenshots")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_failures(table: pd.DataFrame):
    """Share of steps per failure kind and model with 95% intervals (CES Fig. 5 layout)."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(table["model"]))
    kinds = list(dict.fromkeys(table["kind"]))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    width = 0.8 / max(1, len(models))
    for i, model in enumerate(models):
        part = table[table["model"] == model].set_index("kind").loc[kinds]
        x = np.arange(len(kinds)) + i * width
        ax.bar(x, part["share"], width, label=model)
        ax.errorbar(
            x,
            part["share"],
            yerr=[part["share"] - part["lo"], part["hi"] - part["share"]],
            fmt="none",
            ecolor="k",
            capsize=2,
        )
    ax.set_xticks(np.arange(len(kinds)) + width * (len(models) - 1) / 2)
    ax.set_xticklabels([k.replace("_", " ") for k in kinds])
    ax.set_ylabel("share of steps (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- paper rows
def with_deltas(layout: pd.DataFrame, baselines: Mapping[str, str]) -> pd.DataFrame:
    """``layout`` with a ``"<split> <metric> delta"`` column (points) after each metric: the row
    minus its baseline row (``baselines``: ``{row: baseline row}``; CES Table 2 prints these in
    parentheses); ``nan`` for a row without a baseline."""
    out = layout.copy()
    metrics = [c for c in layout.columns if c.endswith(tuple(f" {m}" for m in PAPER_METRICS.values()))]
    recs = layout.to_dict(orient="records")
    by_row = {r["row"]: r for r in recs}
    for col in metrics:
        vals = [r[col] - by_row[baselines[r["row"]]][col] if r["row"] in baselines else math.nan for r in recs]
        out.insert(list(out.columns).index(col) + 1, f"{col} delta", vals)
    return out


def paper_rows(layout: pd.DataFrame, rows: Mapping[str, str], split: str, dataset: str = "GUI-Odyssey") -> pd.DataFrame:
    """Our cells of ``layout`` (:func:`table_layout`, with :func:`with_deltas`' columns when it has
    them) at ``split`` as the paper's cells ``(row, "<dataset> <metric>[ delta]")`` for
    :meth:`guirl.report.Report.compare`; ``rows`` maps our row label to the paper's row name."""
    out = []
    for ours, theirs in rows.items():
        sel = layout[layout["row"] == ours]
        if len(sel) != 1:
            raise KeyError(f"paper_rows: no single row {ours!r} in the layout")
        rec = sel.iloc[0]
        for metric in PAPER_METRICS.values():
            for suffix in ("", " delta"):
                col = f"{split} {metric}{suffix}"
                if col in rec and not math.isnan(float(rec[col])):
                    out.append({"row": theirs, "column": f"{dataset} {metric}{suffix}", "ours": float(rec[col])})
    return pd.DataFrame(out)
