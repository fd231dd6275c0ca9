"""Multimodal-Mind2Web loader: parquet rows (one per action) grouped by ``annotation_id``.

Actions: ``operation`` is a JSON string with ``op`` in CLICK/TYPE/SELECT, ``original_op`` that
may also be HOVER or ENTER, and ``value``. Mapping: CLICK -> click; TYPE -> type (``value``,
point = target centre); SELECT -> select (``value``); original_op HOVER -> hover; original_op
ENTER -> press ``enter`` (target kept in ``target_box``).

Units: ``bounding_box_rect`` is ``"x,y,w,h"`` in screenshot pixels; boxes are normalised by
the screenshot size (decoded from the ``screenshot`` bytes) and the action point is the centre
of the first positive candidate. ``candidate_boxes`` = positive + negative candidates (clamped
to the screenshot, empty ones dropped). Screenshots are written as PNG under ``image_dir``.

SeeClick's Mind2Web JSON steps (``bbox`` ``{x, y, width, height}`` in pixels, ``operation``) are
read one at a time by :func:`step_from_seeclick` (the form SeeClick's and CCPO's evaluation
scripts score).

``extra["referring_elements"]``: the step's candidate elements as a candidate ranker hands them to
a model (Mind2Web's top-50, Deng et al. 2023, which Co-EPG's Table 9 prompt lists): one line per
element (:func:`element_text`: its tag and attributes, positions and ids left out), the positive
candidates and up to :data:`REFERRING_ELEMENTS` in all with negatives, in an order seeded by the
``action_uid``. The release's ranker scores are not in Multimodal-Mind2Web's rows, so every
positive is kept (a ranker's top 50 miss some) and the negatives are a seeded sample, not the
highest-ranked.

Steps are ordered by ``target_action_index``. ``split``: by default the parquet file name's
prefix before the first ``-`` (the Hub shard naming ``<split>-00000-of-00010.parquet``): one of
``train``, ``test_task``, ``test_website``, ``test_domain`` (:mod:`guirl.data.loaders._splits`;
another prefix stops the load naming the file), unless ``split=`` is given.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import MIND2WEB_SPLITS, SplitFileError
from guirl.data.loaders._common import (
    Ctx,
    LoadResult,
    as_str,
    collect,
    json_value,
    list_files,
    need_image_dir,
    norm_box,
    numbers,
    report_skipped,
    req,
    save_png,
    screen_box,
)
from guirl.data.schema import Episode, Step
from guirl.geometry import box_center, xywh_to_xyxy

NAME = "mind2web"
#: Candidate elements listed per step (Mind2Web's candidate generation keeps the top 50).
REFERRING_ELEMENTS = 50
#: Characters of one element's line (:func:`element_text`).
ELEMENT_TEXT_CHARS = 100
#: Attributes an element's line leaves out: positions and ids, not what a reader sees.
_HIDDEN_ATTRIBUTES = frozenset({"backend_node_id", "bounding_box_rect", "data_pw_testid_buckeye_candidate"})
COLUMNS = (
    "action_uid",
    "annotation_id",
    "confirmed_task",
    "website",
    "domain",
    "subdomain",
    "screenshot",
    "operation",
    "pos_candidates",
    "neg_candidates",
    "action_reprs",
    "target_action_index",
    "target_action_reprs",
)


def _image_bytes(ctx: Ctx, v: Any) -> bytes:
    """The screenshot cell: raw bytes, or the Hub ``Image`` struct ``{"bytes": ..., "path": ...}``."""
    if isinstance(v, dict):
        v = v.get("bytes")
    if not isinstance(v, (bytes, bytearray)):
        raise ctx.error("screenshot", f"expected image bytes or {{'bytes': ...}}, got {type(v).__name__}")
    return bytes(v)


def _candidates(ctx: Ctx, key: str, v: Any) -> list[dict]:
    """A candidates cell: a JSON string of a list, or a list of JSON strings / dicts."""
    v = json_value(ctx, key, v)
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if not isinstance(v, list):
        raise ctx.error(key, f"expected a list of candidates, got {type(v).__name__}")
    out = []
    for j, c in enumerate(v):
        c = json_value(ctx, f"{key}[{j}]", c)
        if not isinstance(c, dict):
            raise ctx.error(f"{key}[{j}]", f"expected an object with tag/attributes, got {c!r:.80}")
        attrs = json_value(ctx, f"{key}[{j}].attributes", req(ctx, c, "attributes", (str, dict)))
        if not isinstance(attrs, dict):
            raise ctx.error(f"{key}[{j}].attributes", f"expected an object, got {attrs!r:.80}")
        out.append({"tag": c.get("tag", ""), **attrs})
    return out


def element_text(cand: dict) -> str:
    """One candidate element (``{"tag": ..., <attributes>}``, as :func:`_candidates` reads it) as a
    line: ``<tag> name="value" ...`` with the non-empty attributes in their order, those of
    :data:`_HIDDEN_ATTRIBUTES` left out, cut to :data:`ELEMENT_TEXT_CHARS` characters."""
    attrs = " ".join(
        f'{k}="{" ".join(str(v).split())}"'
        for k, v in cand.items()
        if k != "tag" and k not in _HIDDEN_ATTRIBUTES and v not in (None, "")
    )
    return f"<{cand.get('tag') or 'element'}> {attrs}".strip()[:ELEMENT_TEXT_CHARS]


def referring_elements(positive: list[dict], negative: list[dict], seed: str) -> list[str]:
    """The lines of :func:`element_text` a model is shown for one step (module doc): every positive
    candidate and negatives up to :data:`REFERRING_ELEMENTS` in all, sampled and then ordered by a
    generator seeded with ``seed`` (the step's ``action_uid``)."""
    rng = random.Random(f"mind2web referring elements {seed}")
    room = max(0, REFERRING_ELEMENTS - len(positive))
    negs = rng.sample(negative, room) if len(negative) > room else list(negative)
    shown = [*positive, *negs]
    rng.shuffle(shown)
    return [element_text(c) for c in shown]


def _rect(ctx: Ctx, key: str, cand: dict) -> tuple[float, float, float, float]:
    r = req(ctx, cand, "bounding_box_rect", str)
    return xywh_to_xyxy(numbers(ctx, key, r.split(","), 4))


def action_from_operation(ctx: Ctx, op: str, original_op: str | None, value: Any, point: tuple[float, float]) -> Action:
    """A Mind2Web operation on the element whose centre is ``point``: CLICK -> click, TYPE ->
    type (``value``), SELECT -> select (``value``); ``original_op`` HOVER -> hover, ENTER ->
    press ``enter`` (both keep the point)."""
    orig = original_op or op
    value = "" if value is None else str(value)
    if orig == "HOVER":
        return Action(ActionType.HOVER, point=point)
    if orig == "ENTER":
        return Action(ActionType.PRESS, key="enter", point=point)
    if op == "CLICK" or orig == "CLICK":
        return Action(ActionType.CLICK, point=point)
    if op == "TYPE" or orig == "TYPE":
        return Action(ActionType.TYPE, point=point, text=value)
    if op == "SELECT" or orig == "SELECT":
        return Action(ActionType.SELECT, point=point, text=value)
    raise ctx.error("operation.op", f"unknown op {op!r} (original_op {orig!r}); expected CLICK, TYPE, SELECT")


def step_from_seeclick(
    step: dict, *, image_size: tuple[int, int], off_screen: str = "clip", ctx: Ctx | None = None, step_id: int = 0
) -> Step:
    """One SeeClick Mind2Web step (``bbox`` ``{x, y, width, height}`` px, or ``[x1, y1, x2, y2]``
    px, ``operation`` with
    ``op`` / ``original_op`` / ``value``) as a :class:`Step`; the box normalised as SeeClick's
    ``action2step`` does (``x / W``, ``(x + width) / W``, ...), reaching past the page clipped
    and counted, or kept (``off_screen``); the point is the centre of the box on the page."""
    ctx = ctx or Ctx("<record>", f"step {step_id}")
    w, h = image_size
    b = req(ctx, step, "bbox", (dict, list))
    if isinstance(b, list):  # [x1, y1, x2, y2] pixels (Co-EPG's evaluation rows)
        x1, y1, x2, y2 = numbers(ctx, "bbox", b, 4)
        x, y, bw, bh = x1, y1, x2 - x1, y2 - y1
    else:
        x, y, bw, bh = (float(req(ctx, b, k, (int, float))) for k in ("x", "y", "width", "height"))
    clipped = norm_box(ctx, "bbox", (x, y, x + bw, y + bh), w, h, clamp=True)
    box = screen_box(ctx, "bbox", (x, y, x + bw, y + bh), w, h, off_screen)
    if clipped is None or box is None:
        raise ctx.error("bbox", f"box {b} lies outside the {w}x{h} page")
    op = req(ctx, step, "operation", dict)
    kind = req(ctx, op, "op", str) if "op" in op else req(ctx, op, "original_op", str)
    point = box_center(clipped)
    action = action_from_operation(ctx, kind, op.get("original_op"), op.get("value"), point)
    return Step(
        step_id=step_id,
        screenshot="",
        screen_size=(w, h),
        action=action,
        target_box=box,
        extra={"op": kind, "original_op": op.get("original_op") or kind, "action_uid": str(step.get("action_uid", ""))},
    )


def _step(ctx: Ctx, row: dict, i: int, out_dir: Path) -> Step:
    uid = as_str(ctx, "action_uid", row["action_uid"])
    ann = as_str(ctx, "annotation_id", row["annotation_id"])
    rel, (w, h) = save_png(ctx, "screenshot", _image_bytes(ctx, row["screenshot"]), out_dir, f"{NAME}/{ann}/{uid}.png")
    op = json_value(ctx, "operation", row["operation"])
    if not isinstance(op, dict):
        raise ctx.error("operation", f"expected a JSON object, got {op!r:.80}")
    kind = req(ctx, op, "op", str)
    orig = op.get("original_op") or kind
    value = op.get("value") or ""
    pos = _candidates(ctx, "pos_candidates", row["pos_candidates"])
    neg = _candidates(ctx, "neg_candidates", row["neg_candidates"])
    if not pos:
        raise ctx.error("pos_candidates", "empty: the target element has no box, the action cannot be located")
    target = norm_box(ctx, "pos_candidates[0].bounding_box_rect", _rect(ctx, "pos_candidates[0].bounding_box_rect", pos[0]), w, h)
    assert target is not None
    cands = []
    for key, group in (("pos_candidates", pos), ("neg_candidates", neg)):
        for j, c in enumerate(group):
            b = norm_box(ctx, f"{key}[{j}]", _rect(ctx, f"{key}[{j}].bounding_box_rect", c), w, h, clamp=True)
            if b is not None:
                cands.append(b)
    point = box_center(target)
    action = action_from_operation(ctx, kind, orig, value, point)
    reprs = row.get("target_action_reprs")
    return Step(
        step_id=i,
        screenshot=rel,
        screen_size=(w, h),
        action=action,
        target_box=target,
        candidate_boxes=tuple(cands),
        extra={
            "action_uid": uid,
            "op": kind,
            "original_op": orig,
            "backend_node_id": str(pos[0].get("backend_node_id", "")),
            "target_action_reprs": str(reprs) if reprs is not None else "",
            "referring_elements": referring_elements(pos, neg, uid),
        },
    )


def load_mind2web(
    path: str | Path, *, image_dir: str | Path | None = None, skip_bad: bool = False, split: str | None = None
) -> LoadResult:
    """Load Multimodal-Mind2Web parquet file(s); one Episode per ``annotation_id``.

    A bad row skips (``skip_bad=True``) or fails its whole episode: the record is named
    ``row <i> (action_uid ...)`` of its file.
    """
    import pandas as pd

    out_dir = need_image_dir(NAME, image_dir)
    res = LoadResult()
    files = list_files(path, ("*.parquet", "**/*.parquet"), "Multimodal-Mind2Web parquet files")
    if split is None:
        odd = [f for f in files if f.stem.split("-", 1)[0] not in MIND2WEB_SPLITS]
        if odd:
            raise SplitFileError(
                f"{odd[0]}: the file name does not start with a split of the release ({', '.join(MIND2WEB_SPLITS)}, "
                "e.g. test_task-00000-of-00004.parquet); rename it or pass split=NAME"
            )
    for f in files:
        fsplit = split or f.stem.split("-", 1)[0]
        df = pd.read_parquet(f)
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            err = Ctx(f, "<all rows>").error(",".join(missing), f"columns missing (present: {list(df.columns)})")
            if not skip_bad:
                raise err
            res.skipped.append((err.file, err.record, err.problem))
            continue
        groups: dict[str, list[int]] = {}
        for r, ann in enumerate(df["annotation_id"].tolist()):
            groups.setdefault(str(ann), []).append(r)
        items = []
        for ann, rows in groups.items():
            gctx = Ctx(f, f"annotation_id {ann} (rows {rows[0]}..{rows[-1]})")

            def build(ann: str = ann, rows: list[int] = rows, gctx: Ctx = gctx) -> Episode:
                recs = []
                for r in rows:
                    row = df.iloc[r].to_dict()
                    rctx = Ctx(f, f"row {r} (action_uid {row.get('action_uid')}, annotation_id {ann})")
                    try:
                        idx = int(row["target_action_index"])
                    except (TypeError, ValueError):
                        raise rctx.error("target_action_index", f"expected an int, got {row['target_action_index']!r}") from None
                    recs.append((idx, r, row, rctx))
                recs.sort(key=lambda t: t[0])
                if [t[0] for t in recs] != list(range(len(recs))):
                    raise gctx.error("target_action_index", f"expected 0..{len(recs) - 1}, got {[t[0] for t in recs]}")
                steps = [_step(rctx, row, i, out_dir) for i, (_, _, row, rctx) in enumerate(recs)]
                first = recs[0][2]
                fctx = recs[0][3]
                reprs = first.get("action_reprs")
                return Episode(
                    episode_id=ann,
                    instruction=as_str(fctx, "confirmed_task", first["confirmed_task"]),
                    steps=tuple(steps),
                    source=NAME,
                    split=fsplit,
                    app=as_str(fctx, "website", first["website"]),
                    apps=(as_str(fctx, "website", first["website"]),),
                    category=as_str(fctx, "domain", first["domain"]),
                    extra={
                        "subdomain": as_str(fctx, "subdomain", first["subdomain"]),
                        "action_reprs": [str(x) for x in (reprs.tolist() if hasattr(reprs, "tolist") else reprs or [])],
                    },
                )

            items.append((gctx, build))
        collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(NAME, res)
