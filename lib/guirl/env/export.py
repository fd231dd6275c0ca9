"""Export MiniGUI expert trajectories as an episode dataset plus grounding samples.

Layout written by :func:`build_minigui_dataset` (all bytes deterministic in the arguments)::

    out_dir/
      manifest.json                 # arguments, split sizes, templates per split
      train/episodes.jsonl          # guirl.data.schema episodes; screenshot paths relative to train/
      train/images/<task_id>_<step>.png
      test_in_domain/...            # same templates and apps as train, different tasks/worlds
      test_unseen_task/...          # held-out task templates (one per category by default)
      test_unseen_app/...           # every template touching the held-out app ("notes" by default)
      grounding_train.jsonl         # AgentCPM-GUI-style grounding samples from the train screens

Grounding samples (AgentCPM-GUI Sec. 3, grounding pre-training: text-to-point, function-to-point,
box-to-text) are JSONL rows ``{"id", "image", "width", "height", "type", "question", "answer",
"point", "box", "element_id", "episode_id", "step_id"}`` where ``image`` is relative to
``out_dir``, ``point`` is the normalised ``[x, y]`` centre of the target element (``None`` for
box-to-text), ``box`` its normalised ``[x1, y1, x2, y2]``, and ``answer`` is the text the model
should produce: ``"[x, y]"`` (normalised, 3 decimals) for the two point tasks, the element's
label for box-to-text.

PNG determinism: images are saved with fixed zlib settings and no metadata chunks (PIL writes
no tIME chunk unless asked), so the same arguments give byte-identical files.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from guirl.data.grounding import write_grounding_rows
from guirl.data.schema import write_episodes
from guirl.env.core import MiniGUIEnv
from guirl.env.expert import ExpertError, Trajectory, solve, trajectory_to_episode
from guirl.env.render import render_with_boxes
from guirl.env.tasks import (
    DEFAULT_HELDOUT_APP,
    DEFAULT_UNSEEN_TEMPLATES,
    TEMPLATES,
    Task,
    generate_tasks,
    templates_for,
)

MINIGUI_SPLITS: tuple[str, ...] = ("train", "test_in_domain", "test_unseen_task", "test_unseen_app")
GROUNDING_TYPES: tuple[str, ...] = ("text_to_point", "function_to_point", "box_to_text")
#: Roles whose label is drawn as visible text (usable for text-to-point and box-to-text).
_TEXT_ROLES = frozenset(
    {"icon", "list_item", "button", "input", "toggle", "menu_item", "card", "title", "bubble", "text"}
)
_PNG_KW: dict[str, Any] = {"format": "PNG", "optimize": False, "compress_level": 6}

__all__ = [
    "GROUNDING_TYPES",
    "MINIGUI_SPLITS",
    "build_minigui_dataset",
    "grounding_samples",
    "plan_splits",
    "render_with_boxes",
]


def plan_splits(
    n_tasks: int,
    seed: int,
    test_fraction: float = 0.1,
    unseen_task_fraction: float = 0.1,
    unseen_app_fraction: float = 0.1,
    heldout_app: str = DEFAULT_HELDOUT_APP,
    unseen_templates: Sequence[str] = DEFAULT_UNSEEN_TEMPLATES,
) -> dict[str, list[Task]]:
    """Tasks per split, deterministic in ``seed``.

    ``test_unseen_app`` uses only templates touching ``heldout_app``; ``test_unseen_task`` only
    ``unseen_templates``; train and ``test_in_domain`` share the remaining templates (tasks and
    worlds differ). Fractions are of ``n_tasks``; train gets the rest (at least 1).
    """
    bad = [t for t in unseen_templates if t not in TEMPLATES]
    if bad:
        raise ValueError(f"unseen_templates {bad} unknown; known: {sorted(TEMPLATES)}")
    clash = [t for t in unseen_templates if heldout_app in TEMPLATES[t].apps]
    if clash:
        raise ValueError(f"unseen_templates {clash} use the held-out app {heldout_app!r}; pick others")
    n_in, n_ut, n_ua = (round(n_tasks * f) for f in (test_fraction, unseen_task_fraction, unseen_app_fraction))
    n_train = n_tasks - n_in - n_ut - n_ua
    if n_train < 1:
        raise ValueError(f"n_tasks={n_tasks} leaves no training task with these fractions")
    app_templates = [t for t in templates_for() if heldout_app in TEMPLATES[t].apps]
    if n_ua and not app_templates:
        raise ValueError(
            f"heldout_app {heldout_app!r} has no templates; apps: {sorted({a for t in TEMPLATES.values() for a in t.apps})}"
        )
    seen = generate_tasks(
        n_train + n_in, seed, exclude_apps=[heldout_app], exclude_templates=unseen_templates, prefix="mg"
    )
    random.Random(f"split-{seed}").shuffle(seen)
    out = {
        "train": sorted(seen[n_in:], key=lambda t: t.task_id),
        "test_in_domain": sorted(seen[:n_in], key=lambda t: t.task_id),
        "test_unseen_task": generate_tasks(
            n_ut, seed, template_ids=unseen_templates, exclude_apps=[heldout_app], prefix="mg-ut"
        )
        if n_ut
        else [],
        "test_unseen_app": generate_tasks(n_ua, seed, template_ids=app_templates, prefix="mg-ua") if n_ua else [],
    }
    return out


def grounding_samples(
    traj: Trajectory, image_paths: Sequence[str], rng: random.Random, per_screen: int = 3
) -> list[dict[str, Any]]:
    """Up to ``per_screen`` grounding samples per recorded screen, cycling the three types."""
    rows: list[dict[str, Any]] = []
    for i, (s, img) in enumerate(zip(traj.steps, image_paths)):
        els = [e for e in s.elements if e.role not in ("list", "dialog", "loading")]
        if not els:
            continue
        kinds = list(GROUNDING_TYPES)
        rng.shuffle(kinds)
        used: set[str] = set()
        for k in range(per_screen):
            kind = kinds[k % len(kinds)]
            if kind == "function_to_point":
                pool = [e for e in els if s.functions.get(e.element_id) and e.element_id not in used]
            else:
                pool = [e for e in els if e.role in _TEXT_ROLES and e.label and e.element_id not in used]
            if not pool:
                continue
            e = rng.choice(pool)
            used.add(e.element_id)
            cx, cy = round((e.box[0] + e.box[2]) / 2, 3), round((e.box[1] + e.box[3]) / 2, 3)
            box = [round(v, 3) for v in e.box]
            if kind == "text_to_point":
                q = rng.choice(["Where is '{}'?", "Point to '{}' on the screen.", "Find the element '{}'."]).format(
                    e.label
                )
                ans, pt = json.dumps([cx, cy]), [cx, cy]
            elif kind == "function_to_point":
                q = f"Which element {s.functions[e.element_id]}?"
                ans, pt = json.dumps([cx, cy]), [cx, cy]
            else:
                q = f"What does the element at {json.dumps(box)} say?"
                ans, pt = e.label, None
            rows.append(
                {
                    "id": f"{traj.task.task_id}-{i:02d}-{k}",
                    "image": img,
                    "width": 0,
                    "height": 0,
                    "type": kind,
                    "question": q,
                    "answer": ans,
                    "point": pt,
                    "box": box,
                    "element_id": e.element_id,
                    "episode_id": traj.task.task_id,
                    "step_id": i,
                }
            )
    return rows


def _export_split(
    name: str,
    tasks: Iterable[Task],
    root: Path,
    width: int,
    height: int,
    expert_seed: int,
    progress: bool,
    grounding: list[dict[str, Any]] | None,
    g_rng: random.Random,
    per_screen: int,
) -> tuple[Path, int, int]:
    split_dir = root / name
    (split_dir / "images").mkdir(parents=True, exist_ok=True)
    env = MiniGUIEnv(width=width, height=height, render=True)
    episodes = []
    n_steps = 0
    tasks = list(tasks)
    for task in tqdm(tasks, desc=f"minigui {name}", disable=not progress):
        traj = solve(task, env=env, seed=expert_seed)
        if not traj.success:
            raise ExpertError(f"{task.task_id} ({task.template_id}): expert finished but the env check failed")
        rel = []
        for i, s in enumerate(traj.steps):
            path = f"images/{task.task_id}_{i:02d}.png"
            assert s.screenshot is not None
            s.screenshot.save(split_dir / path, **_PNG_KW)
            rel.append(path)
        episodes.append(trajectory_to_episode(traj, rel, split=name, screen_size=(width, height)))
        n_steps += len(rel)
        if grounding is not None:
            rows = grounding_samples(traj, [f"{name}/{p}" for p in rel], g_rng, per_screen)
            for r in rows:
                r["width"], r["height"] = width, height
            grounding.extend(rows)
    path = split_dir / "episodes.jsonl"
    write_episodes(episodes, path)
    return path, len(episodes), n_steps


def build_minigui_dataset(
    out_dir: str | Path,
    n_tasks: int = 200,
    seed: int = 0,
    width: int = 280,
    height: int = 504,
    *,
    test_fraction: float = 0.1,
    unseen_task_fraction: float = 0.1,
    unseen_app_fraction: float = 0.1,
    heldout_app: str = DEFAULT_HELDOUT_APP,
    unseen_templates: Sequence[str] = DEFAULT_UNSEEN_TEMPLATES,
    grounding_per_screen: int = 3,
    expert_seed: int | None = None,
    progress: bool = True,
) -> dict[str, Path]:
    """Generate tasks, play them with the expert, and write the dataset under ``out_dir``.

    ``width``/``height`` are screenshot pixels (keep both multiples of 28 for Qwen2.5-VL:
    280x504 is 10x18 patches of 28 px = 180 visual tokens). ``n_tasks`` is the total over the
    four splits (fractions as in :func:`plan_splits`). ``expert_seed`` (default ``seed``) picks
    the expert's navigation style. Returns ``{"train": .../train/episodes.jsonl,
    "test_in_domain": ..., "test_unseen_task": ..., "test_unseen_app": ...,
    "grounding": .../grounding_train.jsonl, "manifest": .../manifest.json}``.
    Same arguments give byte-identical files.
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    # the manifest is written last: a build stopped half-way leaves none (readers rebuild), never an
    # earlier build's manifest beside half-written files
    (root / "manifest.json").unlink(missing_ok=True)
    plan = plan_splits(
        n_tasks, seed, test_fraction, unseen_task_fraction, unseen_app_fraction, heldout_app, unseen_templates
    )
    es = seed if expert_seed is None else expert_seed
    grounding: list[dict[str, Any]] = []
    out: dict[str, Path] = {}
    counts: dict[str, dict[str, int]] = {}
    for name in MINIGUI_SPLITS:
        path, n_ep, n_st = _export_split(
            name,
            plan[name],
            root,
            width,
            height,
            es,
            progress,
            grounding if name == "train" else None,
            random.Random(f"grounding-{seed}"),
            grounding_per_screen,
        )
        out[name] = path
        counts[name] = {"episodes": n_ep, "steps": n_st}
    gpath = write_grounding_rows(root, grounding)
    out["grounding"] = gpath
    manifest = {
        "source": "minigui",
        "n_tasks": n_tasks,
        "seed": seed,
        "expert_seed": es,
        "width": width,
        "height": height,
        "test_fraction": test_fraction,
        "unseen_task_fraction": unseen_task_fraction,
        "unseen_app_fraction": unseen_app_fraction,
        "heldout_app": heldout_app,
        "unseen_templates": list(unseen_templates),
        "grounding_per_screen": grounding_per_screen,
        "counts": counts,
        "grounding_samples": len(grounding),
        "templates": {k: sorted({t.template_id for t in v}) for k, v in plan.items()},
    }
    mpath = root / "manifest.json"
    mpath.write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    out["manifest"] = mpath
    return out
