"""Dataset statistics for the data-preparation notebook: pure functions of a list of Episodes.

Every function takes :class:`guirl.data.schema.Episode` objects (MiniGUI or any loader in
:mod:`guirl.data.loaders`) and returns a ``pandas.DataFrame`` with a fixed column order and a
deterministic row order (count descending, then name), so the tables written by
:class:`guirl.report.Report` are byte-stable across runs.

Figures they feed: action-type distribution (CCPO, Figure 5), task categories and apps
(AndroidLong, Figures 4-5), steps and subgoals per task (AndroidLong, Figure 6).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Iterable, Sequence

import pandas as pd

from guirl.actions import ActionType
from guirl.data.schema import Episode, Step

__all__ = [
    "CCPO_TABLE1_ROWS",
    "table1_for_paper",
    "action_label",
    "action_type_distribution",
    "category_distribution",
    "app_distribution",
    "episode_lengths",
    "length_summary",
    "split_summary",
    "PAPER_SPLIT_SIZES",
    "split_sizes_vs_paper",
    "sample_steps",
    "draw_step",
]


def action_label(step: Step, detail: bool = False) -> str:
    """The action's type name; with ``detail`` a press names its key (``press_back``) and a
    scroll its direction and convention (``scroll_up_finger``)."""
    a = step.action
    if not detail:
        return a.type.value
    if a.type is ActionType.PRESS:
        return f"press_{a.key}"
    if a.type is ActionType.SCROLL:
        return f"scroll_{a.direction}_{a.convention}"
    if a.type is ActionType.TERMINATE:
        return f"terminate_{a.status}"
    return a.type.value


def _distribution(counter: Counter, name: str, count_col: str) -> pd.DataFrame:
    total = sum(counter.values())
    rows = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    df = pd.DataFrame(rows, columns=[name, count_col])
    df[count_col] = df[count_col].astype("int64")
    df["share"] = (df[count_col] / total) if total else pd.Series(dtype="float64")
    return df


def action_type_distribution(episodes: Iterable[Episode], detail: bool = False) -> pd.DataFrame:
    """Columns ``action_type, n_steps, share`` over all steps (share sums to 1; CCPO Figure 5)."""
    c = Counter(action_label(s, detail) for e in episodes for s in e.steps)
    return _distribution(c, "action_type", "n_steps")


def category_distribution(episodes: Iterable[Episode]) -> pd.DataFrame:
    """Columns ``category, n_tasks, share``; an empty category is reported as ``"(none)"``
    (AndroidLong Figure 4)."""
    c = Counter(e.category or "(none)" for e in episodes)
    return _distribution(c, "category", "n_tasks")


def app_distribution(episodes: Iterable[Episode]) -> pd.DataFrame:
    """Columns ``app, n_tasks, share``: tasks that involve each app (``apps``, else ``app``).

    A cross-app task counts once for every app it involves, so ``share`` is over app-task
    pairs (AndroidLong Figure 5).
    """
    c: Counter = Counter()
    for e in episodes:
        apps = set(e.apps) or ({e.app} if e.app else {"(none)"})
        c.update(apps)
    return _distribution(c, "app", "n_tasks")


def episode_lengths(episodes: Iterable[Episode]) -> pd.DataFrame:
    """One row per task: ``episode_id, split, category, n_steps, n_subgoals, n_apps``
    (AndroidLong Figure 6 plots the distributions of ``n_steps`` and ``n_subgoals``)."""
    rows = [
        {
            "episode_id": e.episode_id,
            "split": e.split,
            "category": e.category or "(none)",
            "n_steps": len(e.steps),
            "n_subgoals": len(e.subgoals),
            "n_apps": len(set(e.apps) or ({e.app} if e.app else set())),
        }
        for e in episodes
    ]
    cols = ["episode_id", "split", "category", "n_steps", "n_subgoals", "n_apps"]
    return pd.DataFrame(rows, columns=cols).astype({"n_steps": "int64", "n_subgoals": "int64", "n_apps": "int64"})


def length_summary(lengths: pd.DataFrame, by: str = "category") -> pd.DataFrame:
    """Per group of ``by`` plus an ``(all)`` row: ``n_tasks``, mean/median/max of ``n_steps``
    and mean of ``n_subgoals``, from :func:`episode_lengths` output."""
    cols = [by, "n_tasks", "steps_mean", "steps_median", "steps_max", "subgoals_mean"]
    if lengths.empty:
        return pd.DataFrame(columns=cols)

    def row(name: str, g: pd.DataFrame) -> dict:
        return {
            by: name,
            "n_tasks": int(len(g)),
            "steps_mean": float(g["n_steps"].mean()),
            "steps_median": float(g["n_steps"].median()),
            "steps_max": int(g["n_steps"].max()),
            "subgoals_mean": float(g["n_subgoals"].mean()),
        }

    rows = [row(str(k), g) for k, g in sorted(lengths.groupby(by), key=lambda kv: str(kv[0]))]
    rows.append(row("(all)", lengths))
    return pd.DataFrame(rows, columns=cols)


def split_summary(episodes: Iterable[Episode]) -> pd.DataFrame:
    """Per split: ``n_tasks, n_steps, steps_per_task, target_box_share`` where the last is the
    share of coordinate actions (click, long press, select, hover) that carry a target box."""
    acc: dict[str, list[int]] = {}
    coord = {ActionType.CLICK, ActionType.LONG_PRESS, ActionType.SELECT, ActionType.HOVER}
    for e in episodes:
        a = acc.setdefault(e.split, [0, 0, 0, 0])
        a[0] += 1
        a[1] += len(e.steps)
        for s in e.steps:
            if s.action.type in coord:
                a[2] += 1
                a[3] += s.target_box is not None
    rows = [
        {
            "split": k,
            "n_tasks": v[0],
            "n_steps": v[1],
            "steps_per_task": v[1] / v[0],
            "target_box_share": (v[3] / v[2]) if v[2] else float("nan"),
        }
        for k, v in sorted(acc.items())
    ]
    return pd.DataFrame(rows, columns=["split", "n_tasks", "n_steps", "steps_per_task", "target_box_share"])


#: The papers' sizes of each data set's splits: ``(split, quantity, number, location)`` with
#: quantity ``episodes``, ``steps`` or ``steps per episode``; ``(all)`` is the whole data set and
#: ``test (all)`` Mind2Web's three test splits together. A source the papers do not size (MiniGUI)
#: has none. Samples drawn from a split (CES App. B.1) are not split sizes and are not listed.
PAPER_SPLIT_SIZES: dict[str, tuple[tuple[str, str, float, str], ...]] = {
    "androidcontrol": (
        ("train", "episodes", 13604, "CCPO App. A.2 (official split)"),
        ("test", "episodes", 2855, "CCPO App. A.2 (official split)"),
        ("test", "steps", 500, "Co-EPG App. A (randomly sampled step-actions)"),
        ("(all)", "episodes", 15283, "CCPO Table 1, App. A.2"),
        ("(all)", "steps per episode", 5.5, "CCPO Table 1, App. A.2"),
    ),
    "guiodyssey": (
        ("(all)", "episodes", 8334, "CCPO App. A.2; CES App. B.3"),
        ("(all)", "episodes", 7735, "CCPO Table 1"),
        ("(all)", "steps per episode", 15.3, "CCPO App. A.2; CES Sec. 5.1, App. B.3"),
        ("(all)", "steps per episode", 15.4, "CCPO Table 1"),
    ),
    "mind2web": (
        ("train", "episodes", 1009, "Co-EPG App. A"),
        ("test (all)", "episodes", 1013, "Co-EPG App. A (cross-task, cross-website, cross-domain)"),
        ("(all)", "episodes", 2350, "CCPO Table 1"),
        ("(all)", "steps per episode", 7.3, "CCPO Table 1"),
    ),
    "aitz": (
        ("(all)", "episodes", 2504, "CES App. B.3"),
        ("(all)", "steps", 18643, "CES App. B.3 (screen-action pairs)"),
        ("(all)", "steps per episode", 7.5, "CES Sec. 5.1"),
    ),
    "amex": (
        ("(all)", "episodes", 3000, "CES App. B.3 (about 3,000 instructions)"),
        ("(all)", "steps per episode", 12.8, "CES Sec. 5.1, App. B.3"),
    ),
}
PAPER_SPLIT_SIZES["ccpo_androidcontrol"] = PAPER_SPLIT_SIZES["uis1"] = PAPER_SPLIT_SIZES["androidcontrol"]
PAPER_SPLIT_SIZES["ccpo_guiodyssey"] = PAPER_SPLIT_SIZES["guiodyssey"]
PAPER_SPLIT_SIZES["ccpo_mind2web"] = PAPER_SPLIT_SIZES["mind2web"]


def _sizes(eps: Sequence[Episode]) -> dict[str, float]:
    n, steps = len(eps), sum(len(e.steps) for e in eps)
    return {"episodes": float(n), "steps": float(steps), "steps per episode": steps / n if n else float("nan")}


def split_sizes_vs_paper(episodes: Iterable[Episode], source: str) -> pd.DataFrame:
    """Our split sizes beside the papers' (:data:`PAPER_SPLIT_SIZES`): one row per split (then
    ``test (all)`` when there are several test splits, then ``(all)``) and quantity (``episodes``,
    ``steps``, ``steps per episode``), columns ``split, quantity, ours, paper, location``; a paper
    number with no split of ours by that name has ``ours`` NaN, a split the papers do not size has
    ``paper`` NaN and an empty ``location``."""
    eps = list(episodes)
    groups: dict[str, list[Episode]] = {}
    for e in eps:
        groups.setdefault(e.split, []).append(e)
    order = sorted(groups, key=lambda k: (k != "train", k == "validation", k))
    ours = {k: _sizes(groups[k]) for k in order}
    tests = [k for k in order if k not in ("train", "validation")]
    if len(tests) > 1:
        ours["test (all)"] = _sizes([e for k in tests for e in groups[k]])
    ours["(all)"] = _sizes(eps)
    paper = PAPER_SPLIT_SIZES.get(source, ())
    rows = []
    for split, sizes in ours.items():
        for quantity, value in sizes.items():
            cited = [(num, where) for sp, q, num, where in paper if sp == split and q == quantity]
            for num, where in cited or [(float("nan"), "")]:
                rows.append(
                    {"split": split, "quantity": quantity, "ours": value, "paper": float(num), "location": where}
                )
    for split, quantity, num, where in paper:
        if split not in ours:
            rows.append(
                {"split": split, "quantity": quantity, "ours": float("nan"), "paper": float(num), "location": where}
            )
    return pd.DataFrame(rows, columns=["split", "quantity", "ours", "paper", "location"])


#: CCPO Table 1's row for each data source this repository converts (MiniGUI has none).
CCPO_TABLE1_ROWS = {
    "androidcontrol": "AndroidControl",
    "guiodyssey": "GUI-Odyssey",
    "mind2web": "Mind2Web",
    "aitw": "AITW",
    "ccpo_androidcontrol": "AndroidControl",
    "ccpo_guiodyssey": "GUI-Odyssey",
    "ccpo_mind2web": "Mind2Web",
}


def table1_for_paper(episodes: Iterable[Episode], source: str) -> pd.DataFrame:
    """Our data set in CCPO Table 1's cells (columns ``row``, ``column``, ``ours``, as
    :func:`guirl.report.paper_comparison` reads them): ``Tasks`` (episodes) and ``Avg steps``
    (steps per episode) under the paper's row for ``source`` (:data:`CCPO_TABLE1_ROWS`); an
    empty frame for a source the table does not list (MiniGUI), so the comparison shows the
    paper's rows alone."""
    eps = list(episodes)
    row = CCPO_TABLE1_ROWS.get(source)
    if row is None or not eps:
        return pd.DataFrame(columns=["row", "column", "ours"])
    n_steps = sum(len(e.steps) for e in eps)
    return pd.DataFrame(
        [
            {"row": row, "column": "Tasks", "ours": float(len(eps))},
            {"row": row, "column": "Avg steps", "ours": n_steps / len(eps)},
        ]
    )


def sample_steps(episodes: Sequence[Episode], n: int, seed: int = 0) -> list[tuple[Episode, Step]]:
    """``n`` distinct steps that have a target box, drawn with ``random.Random(seed)`` (fewer
    when fewer exist); deterministic for a given input order and seed."""
    pool = [(e, s) for e in episodes for s in e.steps if s.target_box is not None]
    rng = random.Random(seed)
    return rng.sample(pool, min(n, len(pool)))


def draw_step(image, step: Step, color: tuple[int, int, int] = (230, 30, 30)):
    """A copy of ``image`` (PIL) with the step's target box outlined and its action point
    marked (and the end point of a swipe). Boxes and points are normalised, scaled here by
    the image's own size, so a resized screenshot is annotated correctly."""
    from PIL import ImageDraw

    im = image.convert("RGB").copy()
    d = ImageDraw.Draw(im)
    w, h = im.size
    lw = max(1, round(min(w, h) / 150))
    if step.target_box is not None:
        x1, y1, x2, y2 = step.target_box
        d.rectangle([x1 * w, y1 * h, x2 * w, y2 * h], outline=color, width=lw)
    r = max(2, lw * 2)
    for p in (step.action.point, step.action.point2):
        if p is not None:
            d.ellipse([p[0] * w - r, p[1] * h - r, p[0] * w + r, p[1] * h + r], outline=color, width=lw)
    if step.action.point is not None and step.action.point2 is not None:
        p, q = step.action.point, step.action.point2
        d.line([p[0] * w, p[1] * h, q[0] * w, q[1] * h], fill=color, width=lw)
    return im
