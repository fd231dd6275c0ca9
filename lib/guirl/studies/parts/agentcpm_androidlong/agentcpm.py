"""Notebook 07's AgentCPM-GUI part (:mod:`guirl.studies.agentcpm_androidlong` is the notebook's module):
the data (intra-query de-duplication, the compact JSON training folder), Stages I-III, the
grounding benchmark (Table 1), TM / EM with other formats re-scored through the unified mapping
(Table 2), the rows of Tables 2-3 and tokens per action."""

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
    "GROUNDING_TASKS",
    "STAGE_ONE",
    "Dedup",
    "dedup",
    "dedup_sweep",
    "write_agentcpm_data",
    "compact_splits",
    "agentcpm_grounding_stage",
    "agentcpm_stages",
    "stage_one",
    "grounding_rows",
    "table1_models",
    "evaluate_grounding",
    "table1",
    "rescore",
    "mapping_agreement",
    "table2",
    "token_table",
    "upstream_predictions",
    "paper_rows_23",
]

#: Model names of the two AgentCPM-GUI stages this notebook trains.
ACPM_LABELS = {"sft": "AgentCPM SFT", "rft": "AgentCPM RFT"}
#: AndroidLong Table 6 rows by (memory, stage).

#: CAGUI's grounding tasks (AgentCPM-GUI Sec. 3.1, Table 1) by MiniGUI's grounding sample type.
GROUNDING_TASKS = {"function_to_point": "Fun2Point", "text_to_point": "Text2Point", "box_to_text": "Bbox2Text"}


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


def screenshot_tops(episodes: Sequence[Any]) -> list[str]:
    """The first path component of every screenshot of ``episodes`` (paths relative to the split's
    image root: ``images`` for MiniGUI, the data set's own folder, e.g. ``androidcontrol``, for a
    converted one), sorted: what a data folder reusing those images must link."""
    return sorted({Path(s.screenshot).parts[0] for ep in episodes for s in ep.steps})


def write_agentcpm_data(source: Path, split: Split, kept: Sequence[str], out_dir: Path) -> dict[str, int]:
    """A data folder for 07's compact JSON stages: ``out_dir/train/episodes.jsonl`` with the
    trajectories of ``split`` whose ids are in ``kept`` (the de-duplication's), each without the
    steps the paper's schema cannot write (:func:`guirl.methods.agentcpm.data.compact_episode`);
    ``out_dir/train/<top>`` links to the split's image folders (:func:`screenshot_tops`) (``source``: the data folder, for the
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
    for top in screenshot_tops(compact):
        link, target = train / top, (Path(split.image_root) / top).resolve()
        if link.is_symlink() and Path(os.readlink(link)) != target:
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=target.is_dir())
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
#: The label of 07's own Stage I (the profiles without ``grounding.enabled``).
STAGE_ONE = "agentcpm_grounding"


def agentcpm_grounding_stage(cfg: Config, *, data_dir: Path, start: Path, run_dir: Path) -> Stage:
    """Stage I, grounding pre-training (AgentCPM-GUI Sec. 2.3), as 07's own stage: the ``grounding``
    SFT stage on ``data_dir``'s ``grounding_train.jsonl`` (a converted data set's: its training
    screens' UI elements as Text2Point / Bbox2Text rows, :func:`guirl.data.grounding.grounding_samples`;
    MiniGUI's on a MiniGUI folder) from ``start`` (the base model), in ``run_dir/agentcpm_grounding``,
    trained in Stage II's compact JSON format with AgentCPM-GUI's prompt
    (:func:`guirl.methods.agentcpm.config.grounding_updates`: a point answer is ``{"POINT":[x,y]}``
    on the 0-1000 grid) at the ``agentcpm.grounding`` stage values. A folder whose manifest counts no
    grounding rows (a data set without UI elements, GUI-Odyssey) or does not count them (converted
    before the rows were written) raises a ``ValueError`` naming the folder and the fix."""
    from guirl.data.grounding import GROUNDING_FILE
    from guirl.data.splits import read_manifest
    from guirl.methods.agentcpm.config import grounding_updates

    n = read_manifest(data_dir).get("grounding_samples")
    if n is None:
        raise ValueError(
            f"{data_dir}/manifest.json: no grounding_samples count for AgentCPM-GUI's Stage I; convert the data set "
            "again (make nb-00_data_prep) so that it writes grounding_train.jsonl"
        )
    if int(n) == 0:
        raise ValueError(
            f"{data_dir}/{GROUNDING_FILE}: 0 grounding samples for AgentCPM-GUI's Stage I (its training screens have no "
            "UI element with a unique text); run 07 on a data set with UI elements (androidcontrol, aitz, amex with a "
            "train split) or on a profile whose grounding.enabled trains 01's grounding model"
        )
    return Stage(
        "grounding", SFT_ENTRY, cfg.replace(grounding_updates(cfg)), {"data": data_dir}, start, run_dir / STAGE_ONE
    )


def stage_one(
    cfg: Config, *, grounding: Mapping[str, Any] | None, data_dir: Path, base_model: Path, run_dir: Path
) -> tuple[Stage | None, Path]:
    """AgentCPM-GUI's Stage I and where Stage II starts: with 01's grounding model (``grounding``, its
    result; the profiles with ``grounding.enabled``, the tiny one) ``(None, its final folder)``:
    nothing to train here; else ``(``:func:`agentcpm_grounding_stage` ``from base_model, its final
    folder)``."""
    if grounding is not None:
        return None, Path(grounding["final"])
    stage = agentcpm_grounding_stage(cfg, data_dir=data_dir, start=base_model, run_dir=run_dir)
    return stage, stage.output_dir / "final"


def agentcpm_stages(cfg: Config, *, data_dir: Path, start: Path, run_dir: Path) -> tuple[Stage, Stage]:
    """Stage II (SFT in the compact JSON format, from ``start``: the Stage I model of
    :func:`stage_one`) and Stage III (RFT: GRPO with AgentCPM-GUI's reward, from the SFT
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


def table1_models(
    results: Mapping[str, Any],
    *,
    grounding: Mapping[str, Any] | None,
    stage_one: Stage | None,
    cfg: Config,
    acfg: Config,
) -> dict[str, tuple[Any, str, str | None]]:
    """The models of Table 1 for :func:`evaluate_grounding` (``results``: 07's stage results by
    label), each prompted and parsed as it was trained: Stage I, either 01's grounding model
    (``grounding``, its result) in ``cfg``'s output format and prompt or 07's own stage
    (``stage_one``, :data:`STAGE_ONE`) in its config's (the compact JSON format), then the SFT and
    RFT models in ``acfg``'s (the compact JSON evaluation config)."""
    models: dict[str, tuple[Any, str, str | None]] = {}
    if grounding is not None:
        models["Stage I (01 grounding)"] = (grounding, cfg.sft.output_format, cfg.sft.system_prompt)
    if stage_one is not None:
        s = stage_one.cfg.sft
        models[f"Stage I ({STAGE_ONE})"] = (results[STAGE_ONE], s.output_format, s.system_prompt)
    for k in ("sft", "rft"):
        models[ACPM_LABELS[k]] = (results[f"agentcpm_{k}"], "agentcpm", acfg.sft.system_prompt)
    return models


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
