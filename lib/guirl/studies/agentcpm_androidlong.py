"""Notebook 07 (``07_agentcpm_androidlong``): AgentCPM-GUI's three stages with the compact JSON
action space, and AndroidLong's memory-in-reasoning agents trained with online GRPO on long loops.

**AgentCPM-GUI** (``methods/agentcpm``):

* data (Sec. 2.4): :func:`dedup` (intra-query de-duplication of 07's training trajectories by
  image-feature cosine similarity, :mod:`guirl.methods.agentcpm.dedup`), :func:`dedup_sweep`, and
  :func:`write_agentcpm_data`: the kept trajectories without the steps the paper's schema cannot
  write (open app, answer, recent apps: :func:`guirl.methods.agentcpm.data.compact_episode`), as a
  data folder whose ``train/images`` is a link to the source's;
* stages (:func:`agentcpm_stages`): Stage I is notebook 01's grounding model (reused, not trained
  again: its point answers are written in 01's output format, so the compact JSON SFT learns its
  own syntax and [0, 1000] grid on top), Stage II SFT in the ``agentcpm`` format
  (:func:`guirl.methods.agentcpm.config.sft_updates`), Stage III RFT = the generic ``grpo`` role
  with ``rl.reward: agentcpm`` (:func:`guirl.methods.agentcpm.config.rft_updates`), one engine;
* Table 1 (:func:`grounding_rows`, :func:`evaluate_grounding`, :func:`table1`): Fun2Point /
  Text2Point / Bbox2Text on MiniGUI test screens; Table 2 (:func:`compact_splits`,
  :func:`rescore`, :func:`table2`): TM / EM under the ``agentcpm`` protocol, other notebooks'
  prediction files re-scored through the unified mapping; Table 3: SFT vs RFT paired; tokens per
  action (:func:`token_table`).

**AndroidLong** (``methods/androidlong``):

* four models (:func:`androidlong_configs`, :func:`androidlong_stages`): 01's main agent continued
  by SFT on the expert's trajectories without / with the memory in its reasoning
  (:func:`guirl.methods.androidlong.memory.memory_records`, a ``records`` stage each), then online
  GRPO on long-loop tasks with a Subgoal-SR reward (role ``androidlong``);
* Table 6 (:func:`evaluate_online`, :func:`table6`, :func:`table6_paired`), Tables 8-9 and
  Figures 7-11 (:func:`by_group`, :func:`plot_distribution`, :func:`plot_by_group`), the App. D.1
  taxonomy (:func:`error_table`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split, load_splits
from guirl.train.launch import SFT_ENTRY, Stage

__all__ = [
    "ACPM_LABELS",
    "AL_ROWS",
    "GROUNDING_TASKS",
    "RUN",
    "Dedup",
    "agentcpm_stages",
    "androidlong_agent",
    "androidlong_configs",
    "androidlong_stages",
    "by_group",
    "compact_splits",
    "conclusions",
    "dedup",
    "dedup_sweep",
    "error_table",
    "evaluate_grounding",
    "evaluate_online",
    "grounding_rows",
    "mapping_agreement",
    "on_steps",
    "paper_apps",
    "paper_cells",
    "paper_rows_23",
    "plot_rl_curves",
    "reward_rise",
    "rl_curves",
    "stage_table",
    "tokenizer",
    "upstream_predictions",
    "plot_by_group",
    "plot_distribution",
    "rescore",
    "run_folder",
    "table1",
    "table2",
    "table6",
    "table6_paired",
    "token_table",
    "write_agentcpm_data",
]

#: The notebook's name (its folder under ``runs/<profile>`` and ``figures/<profile>``).
RUN = "07_agentcpm_androidlong"
#: Model names of the two AgentCPM-GUI stages this notebook trains.
ACPM_LABELS = {"sft": "AgentCPM SFT", "rft": "AgentCPM RFT"}
#: AndroidLong Table 6 rows by (memory, stage).
AL_ROWS = {
    (False, "sft"): "SFT (no memory)",
    (False, "grpo"): "+ GRPO (no memory)",
    (True, "sft"): "SFT (with memory)",
    (True, "grpo"): "+ GRPO (with memory)",
}
#: CAGUI's grounding tasks (AgentCPM-GUI Sec. 3.1, Table 1) by MiniGUI's grounding sample type.
GROUNDING_TASKS = {"function_to_point": "Fun2Point", "text_to_point": "Text2Point", "box_to_text": "Bbox2Text"}


def run_folder(cfg: Config) -> Path:
    """``runs/<profile>/07_agentcpm_androidlong``."""
    from guirl.paths import runs_dir

    return runs_dir(cfg.profile) / RUN


# ============================================================================ AgentCPM-GUI: data
@dataclass
class Dedup:
    """:func:`dedup`'s result: ``table`` (one row per training trajectory: ``episode_id``,
    ``query``, ``category``, ``n_steps``, ``group_size`` (trajectories of its query), ``max_similarity``
    (its highest cosine similarity to an earlier trajectory of its query kept at ``threshold``,
    ``nan`` for a query's first), ``kept``), the ``embeddings`` and the ``threshold``."""

    table: pd.DataFrame
    embeddings: np.ndarray
    threshold: float


def dedup(cfg: Config, split: Split, threshold: float | None = None) -> Dedup:
    """AgentCPM-GUI's intra-query de-duplication (Sec. 2.4) of ``split``'s trajectories: each
    trajectory the mean fixed pixel embedding of its screenshots, centred
    (:func:`guirl.methods.agentcpm.dedup.trajectory_embeddings`), grouped by instruction, a
    trajectory dropped when its cosine similarity to a kept one of its group exceeds ``threshold``
    (default ``agentcpm.dedup_threshold``)."""
    from guirl.methods.agentcpm.config import section
    from guirl.methods.agentcpm.dedup import cosine, deduplicate, trajectory_embeddings

    thr = section(cfg).dedup_threshold if threshold is None else float(threshold)
    eps = list(split.episodes)
    root = Path(split.image_root)
    emb = trajectory_embeddings([[root / s.screenshot for s in ep.steps] for ep in eps])
    queries = [ep.instruction for ep in eps]
    keep = deduplicate(queries, emb, thr)
    sizes = pd.Series(queries).value_counts()
    rows = []
    for i, ep in enumerate(eps):
        earlier = [j for j in range(i) if queries[j] == queries[i] and keep[j]]
        rows.append(
            {
                "episode_id": ep.episode_id,
                "query": ep.instruction,
                "category": ep.category,
                "n_steps": len(ep.steps),
                "group_size": int(sizes[ep.instruction]),
                "max_similarity": max((cosine(emb[i], emb[j]) for j in earlier), default=math.nan),
                "kept": bool(keep[i]),
            }
        )
    return Dedup(pd.DataFrame(rows), emb, thr)


def dedup_sweep(result: Dedup, thresholds: Sequence[float]) -> pd.DataFrame:
    """Trajectories and steps kept at each threshold (the same embeddings): ``threshold``,
    ``kept``, ``kept_share`` (%), ``kept_steps``, ``queries`` with more than one trajectory."""
    from guirl.methods.agentcpm.dedup import deduplicate

    t = result.table
    out = []
    for thr in thresholds:
        keep = np.asarray(deduplicate(list(t["query"]), result.embeddings, float(thr)))
        out.append(
            {
                "threshold": float(thr),
                "trajectories": len(t),
                "kept": int(keep.sum()),
                "kept_share": 100.0 * float(keep.mean()) if len(t) else math.nan,
                "kept_steps": int(t["n_steps"][keep].sum()),
                "shared_queries": int((t.drop_duplicates("query")["group_size"] > 1).sum()),
            }
        )
    return pd.DataFrame(out)


def write_agentcpm_data(source: Path, split: Split, kept: Sequence[str], out_dir: Path) -> dict[str, int]:
    """A data folder for 07's compact JSON stages: ``out_dir/train/episodes.jsonl`` with the
    trajectories of ``split`` whose ids are in ``kept`` (the de-duplication's), each without the
    steps the paper's schema cannot write (:func:`guirl.methods.agentcpm.data.compact_episode`);
    ``out_dir/train/images`` links to the split's images folder (``source``: the data folder, for the
    record). Rewritten only when its content changes (the stages fingerprint the folder by path).
    Returns counts: ``trajectories`` / ``steps`` of the split, ``kept`` trajectories, ``kept_steps``
    (their steps), ``schema_left_out`` (steps left out), ``train_steps`` (written)."""
    from guirl.data.schema import write_episodes
    from guirl.methods.agentcpm.data import compact_episode

    want = set(kept)
    chosen = [ep for ep in split.episodes if ep.episode_id in want]
    compact = [c for c in (compact_episode(ep) for ep in chosen) if c is not None]
    train = Path(out_dir) / "train"
    train.mkdir(parents=True, exist_ok=True)
    tmp = train / "episodes.jsonl.tmp"
    write_episodes(compact, tmp)
    target = train / "episodes.jsonl"
    if target.is_file() and target.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        tmp.replace(target)
    link = train / "images"
    images = (Path(split.image_root) / "images").resolve()
    if link.is_symlink() and Path(os.readlink(link)) != images:
        link.unlink()
    if not link.exists():
        link.symlink_to(images, target_is_directory=True)
    (Path(out_dir) / "source.json").write_text(json.dumps({"source": str(source), "kept": len(compact)}) + "\n")
    kept_steps = sum(len(ep.steps) for ep in chosen)
    train_steps = sum(len(ep.steps) for ep in compact)
    return {
        "trajectories": len(split.episodes),
        "steps": sum(len(ep.steps) for ep in split.episodes),
        "kept": len(chosen),
        "kept_steps": kept_steps,
        "schema_left_out": kept_steps - train_steps,
        "train_steps": train_steps,
    }


def compact_splits(splits: Mapping[str, Split]) -> tuple[dict[str, Split], pd.DataFrame]:
    """The test splits with the steps outside the paper's schema left out (AgentCPM-GUI B.5.2,
    B.6.2: ignored in evaluation), and per split the ``steps``, ``left_out`` and ``counted``."""
    from guirl.methods.agentcpm.data import compact_episode

    out, rows = {}, []
    for name, sp in splits.items():
        eps = [c for c in (compact_episode(ep) for ep in sp.episodes) if c is not None]
        out[name] = replace(sp, episodes=tuple(eps))
        n = sum(len(ep.steps) for ep in sp.episodes)
        kept = sum(len(ep.steps) for ep in eps)
        rows.append({"split": name, "steps": n, "left_out": n - kept, "counted": kept})
    return out, pd.DataFrame(rows)


# ============================================================================ AgentCPM-GUI: stages
def agentcpm_stages(cfg: Config, *, data_dir: Path, start: Path, run_dir: Path) -> tuple[Stage, Stage]:
    """Stage II (SFT in the compact JSON format, from ``start``: 01's grounding model, or the base
    model where there is none) and Stage III (RFT: GRPO with AgentCPM-GUI's reward, from the SFT
    model) on ``data_dir`` (:func:`write_agentcpm_data`'s folder), in ``run_dir/agentcpm_sft`` and
    ``run_dir/agentcpm_rft``. Configs: :func:`guirl.methods.agentcpm.config.sft_updates` /
    :func:`~guirl.methods.agentcpm.config.rft_updates`."""
    from guirl.methods.agentcpm.config import rft_updates, sft_updates
    from guirl.train.rl import RL_ENTRY

    n_train = sum(len(ep.steps) for ep in load_splits(data_dir)["train"].episodes)
    sft = Stage("sft", SFT_ENTRY, cfg.replace(sft_updates(cfg)), {"data": data_dir}, start, run_dir / "agentcpm_sft")
    rft = Stage(
        "agentcpm_rft",
        RL_ENTRY,
        cfg.replace(rft_updates(cfg, n_train_steps=n_train)),
        {"data": data_dir},
        sft.output_dir / "final",
        run_dir / "agentcpm_rft",
    )
    return sft, rft


# ============================================================================ AndroidLong: stages
def androidlong_configs(cfg: Config) -> dict[bool, Config]:
    """The run config of the models without (``False``) and with (``True``) memory
    (:func:`guirl.methods.androidlong.config.variant_updates`)."""
    from guirl.methods.androidlong.config import variant_updates

    return {memory: cfg.replace(variant_updates(cfg, memory=memory)) for memory in (False, True)}


def androidlong_stages(
    cfgs: Mapping[bool, Config], *, data_dir: Path, start: Path, run_dir: Path
) -> tuple[list[Stage], list[Stage]]:
    """``(sft, grpo)``: per memory setting a ``records`` SFT stage from ``start`` (01's main agent) on
    the expert's training trajectories written without / with memory
    (:func:`guirl.methods.androidlong.memory.memory_records`, saved under ``run_dir``), and a GRPO
    stage (role ``androidlong``) from it. Folders ``androidlong_sft_<tag>`` / ``androidlong_grpo_<tag>``
    (tag ``nomem`` / ``mem``)."""
    from guirl.methods.androidlong.memory import memory_records
    from guirl.prompts import prompt_spec
    from guirl.train.data import write_records
    from guirl.train.rl import RL_ENTRY

    train = load_splits(data_dir)["train"]
    sft, grpo = [], []
    for memory, c in cfgs.items():
        tag = "mem" if memory else "nomem"
        m = c.model
        records = [
            r
            for h in c.sft.histories
            for r in memory_records(
                train.episodes,
                prompt_spec(c, h),
                memory=memory,
                image_root=train.image_root,
                min_pixels=m.min_pixels,
                max_pixels=m.max_pixels,
            )
        ]
        path = write_records(run_dir / f"androidlong_records_{tag}.jsonl", records)
        s = Stage(
            "records", SFT_ENTRY, c, {"data": data_dir, "records": path}, start, run_dir / f"androidlong_sft_{tag}"
        )
        sft.append(s)
        grpo.append(
            Stage(
                f"androidlong_{tag}",
                RL_ENTRY,
                c,
                {"data": data_dir},
                s.output_dir / "final",
                run_dir / f"androidlong_grpo_{tag}",
            )
        )
    return sft, grpo


# ============================================================================ Table 1: grounding
def grounding_rows(
    cfg: Config, data_dir: Path, n_per_type: int | None = None, *, per_screen: int = 3
) -> list[dict[str, Any]]:
    """CAGUI's three grounding tasks on MiniGUI test screens: the test trajectories are played again
    by the scripted expert without rendering (same task, same expert seed as the data set's
    manifest; a trajectory that does not replay step for step is skipped), and MiniGUI's grounding
    samples are drawn from each recorded screen (:func:`guirl.env.export.grounding_samples`: the
    element's label -> its point, its function -> its point, its box -> its label); the first
    ``n_per_type`` (default ``agentcpm.grounding_samples``) of each type over the test splits in file
    order. ``image`` paths are relative to ``data_dir``."""
    import random

    from guirl.env.expert import solve
    from guirl.env.export import grounding_samples
    from guirl.env.tasks import Task
    from guirl.methods.agentcpm.config import section

    n_per_type = section(cfg).grounding_samples if n_per_type is None else int(n_per_type)
    manifest = json.loads((Path(data_dir) / "manifest.json").read_text())
    es = int(manifest.get("expert_seed", manifest.get("seed", cfg.seed)))
    rng = random.Random(f"grounding-test-{cfg.seed}")
    by_type: dict[str, list[dict[str, Any]]] = {k: [] for k in GROUNDING_TASKS}
    for name, sp in load_splits(data_dir).items():
        if name == "train":
            continue
        for ep in sp.episodes:
            if all(len(v) >= n_per_type for v in by_type.values()):
                break
            task = Task.from_dict(ep.extra["task"])
            w, h = ep.steps[0].screen_size
            traj = solve(task, seed=es, render=False, width=w, height=h)
            if [s.action for s in traj.steps] != [s.action for s in ep.steps]:
                continue
            rows = grounding_samples(traj, [f"{name}/{s.screenshot}" for s in ep.steps], rng, per_screen)
            for r in rows:
                if len(by_type[r["type"]]) < n_per_type:
                    by_type[r["type"]].append({**r, "width": w, "height": h, "split": name})
    return [r for k in GROUNDING_TASKS for r in by_type[k]]


def evaluate_grounding(
    cfg: Config,
    rows: Sequence[Mapping[str, Any]],
    models: Mapping[str, tuple[Any, str, str | None]],
    *,
    data_dir: Path,
) -> list[dict[str, Any]]:
    """Every grounding row answered by every model: ``models[name] = (source, output_format,
    system_prompt)`` (``source``: a stage result or a folder; the model is prompted as its grounding
    pre-training was, :func:`guirl.train.data.grounding_records`, greedy). A point task is right
    when the click its output parses to (``output_format``) lies inside the element's box (CAGUI
    scores points "under a predefined spatial tolerance" it does not give: the box is it here); a
    Bbox2Text answer when it equals the label after lower-casing and stripping. One record per
    (model, row): ``model``, ``task``, ``id``, ``output``, ``parse_ok``, ``correct``."""
    from guirl.actions.formats import get_format
    from guirl.prompts import format_context
    from guirl.studies.shared.evaluation import eval_policy
    from guirl.train.data import grounding_records

    m = cfg.model
    out: list[dict[str, Any]] = []
    for name, (source, fmt_name, system_prompt) in models.items():
        recs = grounding_records(
            rows,
            fmt_name,
            image_root=data_dir,
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
            system_prompt=system_prompt,
        )
        policy = eval_policy(cfg, source)
        answers = policy.complete([(r["prompt"], r["images"]) for r in recs])
        fmt = get_format(fmt_name)
        for row, comp in zip(rows, answers, strict=True):
            text = comp[0].text
            if row["type"] == "box_to_text":
                ok, correct = True, text.strip().lower() == str(row["answer"]).strip().lower()
            else:
                parsed = fmt.parse(
                    text, format_context((int(row["width"]), int(row["height"])), m.min_pixels, m.max_pixels)
                )
                p = parsed.action.point if parsed.ok and parsed.action is not None else None
                x1, y1, x2, y2 = row["box"]
                ok, correct = parsed.ok, p is not None and x1 <= p[0] <= x2 and y1 <= p[1] <= y2
            out.append(
                {
                    "model": name,
                    "task": GROUNDING_TASKS[row["type"]],
                    "id": row["id"],
                    "output": text,
                    "parse_ok": bool(ok),
                    "correct": bool(correct),
                }
            )
        del policy
    return out


def table1(cfg: Config, records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """AgentCPM-GUI Table 1 layout: one row per model, accuracy (%) of Fun2Point, Text2Point,
    Bbox2Text and their Average, each with its 95% bootstrap interval (``<task>_lo`` / ``_hi``;
    ``eval.bootstrap_samples``) and ``n`` samples per task."""
    from guirl.metrics.bootstrap import rate_with_ci

    df = pd.DataFrame(list(records))
    rows = []
    for model in dict.fromkeys(df["model"]):
        row: dict[str, Any] = {"model": model}
        sel = df[df["model"] == model]
        accs = []
        for task in GROUNDING_TASKS.values():
            v = sel[sel["task"] == task]["correct"].astype(float).to_numpy()
            r, lo, hi = rate_with_ci(v, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed) if len(v) else (math.nan,) * 3
            row.update({task: 100 * r, f"{task}_lo": 100 * lo, f"{task}_hi": 100 * hi})
            accs.append(100 * r)
            row["n"] = len(v)
        row["Average"] = float(np.mean(accs))
        rows.append(row)
    return pd.DataFrame(rows)


# ============================================================================ Table 2: TM / EM
def rescore(
    cfg: Config,
    records: Sequence[Mapping[str, Any]],
    splits: Mapping[str, Split],
    output_format: str,
    *,
    suffix: str = "",
) -> list[dict[str, Any]]:
    """Prediction records another notebook wrote (``output`` in ``output_format``) re-scored through
    the unified action space under the ``agentcpm`` protocol
    (:func:`guirl.methods.agentcpm.data.rescore`, ``agentcpm.mapping_variant``; the low-instruction
    reversal for models that saw the step instruction, the records' ``model`` ending in ``(Low)``).
    The ground truth and its boxes come from ``splits`` (the records' split, episode and step); steps
    left out of AgentCPM-GUI's scores are dropped. Model names get ``suffix``."""
    from guirl.methods.agentcpm import data as acpm
    from guirl.methods.agentcpm.config import section

    variant = section(cfg).mapping_variant
    steps = {(name, ep.episode_id, s.step_id): s for name, sp in splits.items() for ep in sp.episodes for s in ep.steps}
    m = cfg.model
    out = []
    for r in records:
        step = steps.get((r["split"], r["episode_id"], r["step_id"]))
        if step is None:
            continue
        res = acpm.rescore(
            r,
            step,
            output_format,
            variant=variant,
            low_instruction=str(r["model"]).endswith("(Low)"),
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
        )
        if res is not None:
            out.append({**res, "model": f"{r['model']}{suffix}"})
    return out


def mapping_agreement(direct: Sequence[Mapping[str, Any]], mapped: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per model, how often a step's verdicts scored directly and through the unified mapping agree
    (``type_match`` and ``exact``) on the steps both have: the mapping of a model's own format is
    the identity, so anything below 100% is a mapping bug."""
    key = ("model", "split", "episode_id", "step_id")
    a = {tuple(r[k] for k in key): r for r in direct}
    rows = []
    for model in dict.fromkeys(r["model"] for r in mapped):
        both = [(a[k], r) for r in mapped if r["model"] == model and (k := tuple(r[c] for c in key)) in a]
        rows.append(
            {
                "model": model,
                "steps": len(both),
                "type_match_agree": 100.0 * np.mean([x["type_match"] == y["type_match"] for x, y in both])
                if both
                else math.nan,
                "exact_agree": 100.0 * np.mean([x["exact"] == y["exact"] for x, y in both]) if both else math.nan,
            }
        )
    return pd.DataFrame(rows)


def table2(steps: pd.DataFrame, splits: Sequence[str]) -> pd.DataFrame:
    """AgentCPM-GUI Table 2 layout: one row per model, ``<split> TM`` / ``<split> EM`` (%: EM is the
    protocol's step success) per split, from :func:`guirl.studies.shared.evaluation.step_metrics`."""
    from guirl.studies.shared.evaluation import table2 as layout

    t = layout(steps, splits, metrics=("TM", "SR")).drop(columns="history")
    return t.rename(columns={f"{s} SR": f"{s} EM" for s in splits})


def token_table(cfg: Config, episodes: Sequence[Any], tokenizer: Any) -> pd.DataFrame:
    """Tokens per action of every output format (:func:`guirl.analysis.accounting.action_token_table`)
    over the ground-truth actions of ``episodes`` on their screens (the model's pixel budget),
    with the tiny model's tokenizer; sorted by tokens."""
    from guirl.analysis.accounting import action_token_table
    from guirl.prompts import format_context

    actions = [s.action for ep in episodes for s in ep.steps]
    size = episodes[0].steps[0].screen_size
    ctx = format_context(size, cfg.model.min_pixels, cfg.model.max_pixels)
    t = action_token_table(actions, ctx, {"tokens per action": tokenizer})
    t.insert(2, "expressible (%)", 100.0 * t["actions"] / len(actions))
    return t.sort_values("tokens per action", kind="stable", ignore_index=True)


# ============================================================================ AndroidLong: online
def androidlong_agent(cfg: Config, source: Any) -> Any:
    """The agent of one AndroidLong model: a :class:`~guirl.methods.androidlong.memory.MemoryAgent`
    when ``androidlong.memory``, else the plain policy (``source``: a stage result)."""
    from guirl.methods.androidlong.config import section
    from guirl.methods.androidlong.memory import MemoryAgent
    from guirl.prompts import prompt_spec
    from guirl.studies.shared.evaluation import eval_policy

    policy = eval_policy(cfg, source)
    if not section(cfg).memory:
        return policy
    spec = prompt_spec(cfg, cfg.eval.histories[0])
    return MemoryAgent(policy, spec, min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels)


def evaluate_online(cfgs: Mapping[bool, Config], results: Mapping[tuple[bool, str], Any], *, progress: bool = False):
    """Every AndroidLong model (:data:`AL_ROWS`) played online on the same tasks and runs
    (:func:`guirl.studies.shared.evaluation.evaluate_online` with its own config: the AndroidLong
    protocol of ``eval``), ``{row: OnlineEvaluation}``."""
    from guirl.studies.shared import evaluation as ev

    out = {}
    for (memory, stage), row in AL_ROWS.items():
        c = cfgs[memory]
        out[row] = ev.evaluate_online(c, androidlong_agent(c, results[(memory, stage)]), progress=progress)
    return out


def table6(evals: Mapping[str, Any]) -> pd.DataFrame:
    """AndroidLong Table 6 layout: per model Task SR and Subgoal SR (%) as mean and std over runs,
    ``mean ± std`` as text too, runs and tasks."""
    rows = []
    for name, ev in evals.items():
        s = ev.summary
        n_tasks = len({e["task_id"] for e in ev.episodes})
        rows.append(
            {
                "model": name,
                "Task SR": s["task_sr"],
                "Task SR std": s["task_sr_std"],
                "Subgoal SR": s["subgoal_sr"],
                "Subgoal SR std": s["subgoal_sr_std"],
                "Task SR (mean ± std)": f"{s['task_sr']:.1f} ± {s['task_sr_std']:.1f}",
                "n_runs": s["n_runs"],
                "n_tasks": n_tasks,
            }
        )
    return pd.DataFrame(rows)


def table6_paired(cfg: Config, evals: Mapping[str, Any], pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """``B - A`` of Task SR and Subgoal SR (points) for each ``(A, B)`` of ``pairs``, paired over the
    same runs and tasks, with a 95% two-way bootstrap interval over runs and tasks
    (:func:`guirl.metrics.paired.paired_difference`, ``eval.bootstrap_samples``)."""
    from guirl.metrics.paired import difference_row, paired_difference, paired_matrix

    rows = []
    for a, b in pairs:
        for metric, value in (("Task SR", "success"), ("Subgoal SR", "subgoal_rate")):

            def matrix(name: str, value: str = value) -> tuple[np.ndarray, list[Any], list[Any]]:
                eps = [{**e, value: float(e[value])} for e in evals[name].episodes]
                return paired_matrix(eps, value=value, seed_key="run", step_keys=("task_id",), name=name)

            (ma, ra, ta), (mb, rb, tb) = matrix(a), matrix(b)
            if (ra, ta) != (rb, tb):
                raise ValueError(f"table6_paired: {a!r} and {b!r} were not played on the same runs and tasks")
            d = paired_difference(ma, mb, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
            rows.append(
                {
                    "A": a,
                    "B": b,
                    "metric": metric,
                    "A_value": 100 * ma.mean(),
                    "B_value": 100 * mb.mean(),
                    **difference_row(d),
                }
            )
    return pd.DataFrame(rows)


def _task_apps(cfg: Config) -> dict[str, str]:
    """The main app of every online task (``task.apps[0]``)."""
    from guirl.studies.shared.evaluation import online_tasks

    return {
        t.task_id: t.apps[0]
        for k in range(cfg.eval.n_seeds)
        for t in online_tasks(cfg, k, same_tasks=cfg.eval.online_same_tasks)
    }


def by_group(cfg: Config, evals: Mapping[str, Any], key: str) -> pd.DataFrame:
    """AndroidLong Tables 8-9 layout (``key="app"``; ``"category"``: the layout per task category of
    Figures 8-9): one row per (model, group) with ``Subgoal SR`` and ``Task SR`` as fractions (the
    tables' unit), ``Task SR std`` over runs and ``n_tasks``. A task's app is its main one."""
    apps = _task_apps(cfg) if key == "app" else {}
    rows = []
    for name, ev in evals.items():
        df = pd.DataFrame(ev.episodes)
        df["app"] = df["task_id"].map(apps) if key == "app" else None
        for group, g in df.groupby(key, sort=True):
            per_run = g.groupby("run")["success"].mean()
            rows.append(
                {
                    "model": name,
                    key: group,
                    "Subgoal SR": float(g["subgoal_rate"].mean()),
                    "Task SR": float(g["success"].astype(float).mean()),
                    "Task SR std": float(per_run.std(ddof=0)),
                    "n_tasks": int(g["task_id"].nunique()),
                }
            )
    return pd.DataFrame(rows)


def plot_distribution(evals: Mapping[str, Any]):
    """AndroidLong Figure 7 analogue: the distribution of Subgoal SR over (task, model) pairs (each
    task's Subgoal SR averaged over runs), one histogram per model, stacked. Returns ``(figure,
    data)``."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    rows = []
    for name, ev in evals.items():
        df = pd.DataFrame(ev.episodes).groupby("task_id")["subgoal_rate"].mean()
        rows += [{"model": name, "task_id": t, "subgoal_sr": float(v)} for t, v in df.items()]
    data = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(6, 3))
    sns.histplot(data=data, x="subgoal_sr", hue="model", bins=np.linspace(0, 1, 11), multiple="stack", ax=ax)
    ax.set_xlabel("Subgoal SR of a task (mean over runs)")
    ax.set_title("Subgoal SR over task-model pairs")
    fig.tight_layout()
    return fig, data


def plot_by_group(table: pd.DataFrame, key: str):
    """AndroidLong Figures 8-11 analogues: Task SR and Subgoal SR per ``key`` (category or app), one
    bar per model, two panels. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, metric in zip(axes, ("Task SR", "Subgoal SR")):
        sns.barplot(data=table, x=key, y=metric, hue="model", ax=ax)
        ax.set_title(f"{metric} by {key}")
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
        ax.set_ylim(0, 1)
    fig.tight_layout()
    return fig


def error_table(evals: Mapping[str, Any]) -> pd.DataFrame:
    """AndroidLong App. D.1: per model, how many of its online episodes (all runs) fail in each kind
    of :func:`guirl.methods.androidlong.errors.classify_failure`, and how many succeed."""
    from guirl.methods.androidlong.errors import error_counts

    return pd.DataFrame([{"model": name, **error_counts(ev.episodes)} for name, ev in evals.items()])


# ============================================================================ stages, logs
def stage_table(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per stage of 07: ``kind`` (``sft`` / ``rl``), optimizer ``steps``, ``seconds``,
    ``records`` (SFT) or ``generated`` / ``trained`` samples (RL), ``resumed_from``."""
    rows = []
    for name, r in results.items():
        rl = "samples_generated" in r
        rows.append(
            {
                "stage": name,
                "kind": "rl" if rl else "sft",
                "steps": r.get("global_step"),
                "seconds": r.get("train_seconds"),
                "records": None if rl else r.get("n_records"),
                "generated": r.get("samples_generated") if rl else None,
                "trained": r.get("samples_trained") if rl else None,
                "resumed_from": r.get("resumed_from"),
            }
        )
    return pd.DataFrame(rows)


def rl_curves(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Long table ``stage, step, reward, reward_std, n_generated`` of RL stages' logs."""
    from guirl.studies.shared.rl_runs import rl_log

    frames = []
    for name, r in results.items():
        df = rl_log(r)
        frames.append(df[["step", "reward", "reward_std", "n_generated"]].assign(stage=name))
    cols = ["stage", "step", "reward", "reward_std", "n_generated"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def plot_rl_curves(curves: pd.DataFrame):
    """Mean reward per RL step, one panel per stage (rewards in each method's units)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = list(dict.fromkeys(curves["stage"])) or ["(none)"]
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3), squeeze=False)
    for ax, name in zip(axes[0], names):
        sns.lineplot(data=curves[curves["stage"] == name], x="step", y="reward", marker="o", ax=ax)
        ax.set_title(name)
        ax.set_xlabel("RL step")
    fig.tight_layout()
    return fig


def reward_rise(cfg: Config, results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Whether RL moved the reward, per RL stage: mean reward of the last half of its steps minus the
    first half (a one-step run compares the step with itself), ``x 100`` (points of the reward),
    with a 95% percentile bootstrap interval resampling the steps of each half
    (``eval.bootstrap_samples``); ``resolved`` when it excludes 0."""
    from guirl.studies.shared.rl_runs import rl_log

    rng = np.random.default_rng(cfg.seed)
    n_boot = cfg.eval.bootstrap_samples
    rows = []
    for name, r in results.items():
        if "samples_generated" not in r:
            continue
        rew = rl_log(r)["reward"].to_numpy(float)
        w = max(1, len(rew) // 2)
        first, last = rew[:w], rew[-w:]
        boot = last[rng.integers(0, w, (n_boot, w))].mean(1) - first[rng.integers(0, w, (n_boot, w))].mean(1)
        lo, hi = (100 * float(x) for x in np.quantile(boot, [0.025, 0.975]))
        rows.append(
            {
                "stage": name,
                "steps": len(rew),
                "first": float(first.mean()),
                "last": float(last.mean()),
                "diff": 100 * float(last.mean() - first.mean()),
                "lo": lo,
                "hi": hi,
                "resolved": bool(lo > 0 or hi < 0),
            }
        )
    return pd.DataFrame(rows)


# ============================================================================ inputs and layouts
def upstream_predictions(cfg: Config, notebook: str, *, history: str) -> tuple[list[dict[str, Any]], str]:
    """The prediction records ``notebook`` wrote (``runs/<profile>/<notebook>/predictions.jsonl``) at
    ``history``, and the output format they are written in (from the config that notebook saved,
    ``runs/<profile>/<notebook>.config.yaml``); a ``FileNotFoundError`` naming the make target when
    it has not run."""
    from guirl.config import load_config
    from guirl.paths import runs_dir
    from guirl.train.data import read_jsonl

    folder = runs_dir(cfg.profile)
    path, saved = folder / notebook / "predictions.jsonl", folder / f"{notebook}.config.yaml"
    for p in (path, saved):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: notebook {notebook} has not written it; run `make nb-{notebook}` first")
    records = [r for r in read_jsonl(path) if r.get("history") == history]
    return records, load_config(saved).sft.output_format


def on_steps(records: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records whose (split, episode, step) also appears in ``reference``."""
    keys = {(r["split"], r["episode_id"], r["step_id"]) for r in reference}
    return [dict(r) for r in records if (r["split"], r["episode_id"], r["step_id"]) in keys]


def paper_cells(table: pd.DataFrame, paper_row: str, model: str, columns: Sequence[str]) -> pd.DataFrame:
    """Our ``model``'s cells of ``table`` (one row per model) as the paper's row ``paper_row``."""
    sel = table[table["model"] == model]
    if len(sel) != 1:
        raise KeyError(f"paper_cells: no single row for model {model!r}")
    return pd.DataFrame([{"row": paper_row, "column": c, "ours": float(sel.iloc[0][c])} for c in columns])


def paper_rows_23(cfg: Config, steps: pd.DataFrame, *, split: str) -> pd.DataFrame:
    """Our compact JSON models as AgentCPM-GUI's rows of Tables 2 and 3 (``AgentCPM-GUI``: the RFT
    model; ``AgentCPM-GUI-SFT`` / ``-RFT``) in the AndroidControl column of the run's instruction level
    (``AC-High`` for a goal-only agent), TM and EM (our SR) on ``split``."""
    level = "Low" if cfg.sft.use_step_instruction else "High"
    rows = []
    for table, paper_row, model in (
        ("Table 2", "AgentCPM-GUI", ACPM_LABELS["rft"]),
        ("Table 3", "AgentCPM-GUI-SFT", ACPM_LABELS["sft"]),
        ("Table 3", "AgentCPM-GUI-RFT", ACPM_LABELS["rft"]),
    ):
        sel = steps[(steps["model"] == model) & (steps["split"] == split)]
        if len(sel) != 1:
            raise KeyError(f"paper_rows_23: no single row for {model!r} on {split}")
        for ours, paper_col in (("TM", "TM"), ("SR", "EM")):
            rows.append(
                {
                    "table": table,
                    "row": paper_row,
                    "column": f"AC-{level} {paper_col}",
                    "ours": float(sel.iloc[0][ours]),
                }
            )
    return pd.DataFrame(rows)


def paper_apps(by_app: pd.DataFrame) -> pd.DataFrame:
    """Our four models' per-app cells as AndroidLong's rows of Tables 8-9 (``AndroidLong (ours)
    <row>``) for the apps MiniGUI shares with AndroidLong (Calendar: Table 8, Contacts: Table 9)."""
    rows = []
    for app, table in (("calendar", "Table 8"), ("contacts", "Table 9")):
        for r in by_app[by_app["app"] == app].to_dict(orient="records"):
            for metric in ("Subgoal SR", "Task SR"):
                rows.append(
                    {
                        "table": table,
                        "row": f"AndroidLong (ours) {r['model']}",
                        "column": f"{app.capitalize()} {metric}",
                        "ours": float(r[metric]),
                    }
                )
    return pd.DataFrame(rows, columns=["table", "row", "column", "ours"])


def conclusions(table: pd.DataFrame) -> str:
    """One sentence per row of a paired table with a ``metric`` column, worded only from its interval."""
    lines = []
    for r in table.to_dict(orient="records"):
        span = f"{r['diff']:+.1f} points, 95% interval [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        what = f"{r['B']} vs {r['A']}, {r.get('metric', 'SR')} on {r['split']}"
        word = {"B > A": "higher", "B < A": "lower"}.get(r["verdict"])
        lines.append(f"{what}: {word} ({span})." if word else f"{what}: not resolved ({span}).")
    return "\n".join(lines)


def tokenizer(cfg: Config, result: Mapping[str, Any]) -> Any:
    """The tokenizer of a trained stage (the tiny model's: Qwen2.5-VL's vocabulary)."""
    from guirl.models import load_processor

    folder = Path(result["base_model"]) if result.get("adapter") else Path(result["final"])
    return load_processor(folder, min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels).tokenizer
