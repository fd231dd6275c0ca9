"""AndroidControl loader: GZIP TFRecord, one ``tf.train.Example`` per episode.

Features (``docs/dataset-formats.md``): ``episode_id`` (int), ``goal`` (bytes),
``screenshots`` (PNG bytes, one more than actions), ``accessibility_trees``,
``screenshot_widths`` / ``screenshot_heights`` (px), ``actions`` (JSON strings),
``step_instructions`` (one per action).

Candidate boxes (``candidates=``), each node's ``bounds_in_screen`` clipped to the screen (and
counted when it reaches past it):

* ``"containing"`` (default): the boxes around the acted element, as the converted AndroidControl
  files of UI-S1 and CCPO hold them (``check_options.candidate_bbox`` of
  ``android_control_evaluation_std.jsonl``, ``tests/fixtures/real/``): for a click or long press
  the **clickable** nodes whose bounds contain the point, smallest first; when no clickable node
  contains it, the smallest node that does; none for actions without a point. The released files
  hold 1-3 such boxes per click (the element, then the clickable containers around it) and never
  the window's root layouts, which contain every point (ASSUMPTION: "clickable" is the released
  converters' filter; they are not public). The target box is the first candidate, the smallest
  clickable node containing the point (the UI-S1 loader's target: the smallest candidate
  containing the point). These boxes drive UI-S1's "inside a 1.2x candidate box" rule
  (``uis1_reward``) and, with ``ccpo.include_candidates``, CASC's ROI.
* ``"all"``: every node of the accessibility tree (the root and status-bar nodes included), so
  that AgentCPM-GUI's "nearest boxes" evaluator sees the whole screen; the target box is then the
  smallest node containing the point. Under it a 1.2x-candidate-box rule accepts any click inside
  a full-screen root node, and CASC with candidate corners keeps the whole screen.

Units: ``click``/``long_press`` ``x, y`` are pixels, normalised by the step's screenshot width
and height. ``scroll.direction`` is the direction the *content* moves, stored as
``convention="content"`` (use :meth:`guirl.actions.Action.in_convention` for finger).

Accessibility trees: ``docs/dataset-formats.md`` only says "serialized a11y trees" with nodes carrying
``bounds_in_screen``. ASSUMPTION (stated, not documented in the notes): each entry is a
serialized ``android_env.AndroidAccessibilityForest`` protobuf (the proto AndroidControl was
recorded with), field numbers from android_env's ``proto/a11y/*.proto``: forest.windows=1,
window.tree=11, tree.nodes=1, node: unique_id=1, bounds_in_screen=2 (ProtoRect
left=1, top=2, right=3, bottom=4), class_name=3, content_description=4, text=7,
view_id_resource_name=10, is_clickable=14, is_scrollable=21. It is decoded with a minimal
wire-format reader (no generated protobuf code); bytes that do not decode as that message
raise :class:`DatasetFormatError` naming the step. Target box of a click/long press: above.

The notes name the action kinds but not the key holding them: this loader reads
``action_type`` (the key of the published files) and reports the keys present when it is absent.

Splits: ``Episode.split`` comes from the release's ``splits.json`` (``train`` / ``validation`` /
``test``) and ``Episode.extra["test_subsplits"]`` from ``test_subsplits.json`` when it is there
(:mod:`guirl.data.loaders._splits`); an episode ``splits.json`` does not list is a bad record.
``split=NAME`` stamps every episode ``NAME`` instead (the files are then not read).

TFRecord framing and gzip are read with the ``tfrecord`` package's ``tfrecord_iterator`` and
its ``example_pb2.Example``; the feature lists are read directly from the proto (the package's
``example_loader`` turns a one-element bytes list into a scalar and fails on empty lists).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import (
    AC_SPLITS_FILE,
    AC_TEST_SUBSPLITS_FILE,
    read_androidcontrol_splits,
    read_test_subsplits,
)
from guirl.data.loaders._common import (
    Ctx,
    DatasetFormatError,
    LoadResult,
    as_str,
    collect,
    json_value,
    list_files,
    need_image_dir,
    norm_point,
    number,
    report_skipped,
    req,
    save_png,
    screen_box,
    smallest_containing,
)
from guirl.data.schema import Episode, Step, UIElement

NAME = "androidcontrol"
FEATURES = (
    "episode_id",
    "goal",
    "screenshots",
    "accessibility_trees",
    "screenshot_widths",
    "screenshot_heights",
    "actions",
    "step_instructions",
)
_KEYS = {"navigate_home": "home", "navigate_back": "back"}
#: Values of ``candidates=`` (module doc).
CANDIDATES: tuple[str, ...] = ("containing", "all")


def _contains(box: Any, point: Any) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def candidates_and_target(
    point: tuple[float, float] | None, boxes: Any, clickable: Any, mode: str = "containing"
) -> tuple[tuple[Any, ...], Any]:
    """``(candidate boxes, target box)`` of one step (module doc) from the screen's node ``boxes``
    (normalised, tree order) and their ``clickable`` flags, for the action's ``point`` (``None``:
    an action without one). ``mode``: :data:`CANDIDATES`."""
    if mode not in CANDIDATES:
        raise ValueError(f"candidates={mode!r}: use one of {CANDIDATES}")
    boxes = list(boxes)
    if mode == "all":
        return tuple(boxes), (smallest_containing(point, boxes) if point is not None else None)
    if point is None:
        return (), None
    flags = list(clickable)
    inside = [(b, c) for b, c in zip(boxes, flags, strict=True) if _contains(b, point)]
    pick = [b for b, c in inside if c] or [b for b, _ in inside]

    def area(b: Any) -> float:
        return (b[2] - b[0]) * (b[3] - b[1])

    pick = sorted(pick, key=area)  # stable: equal areas keep tree order
    if not any(c for _, c in inside):
        pick = pick[:1]
    return tuple(pick), (pick[0] if pick else None)


# ----------------------------------------------------------------------------- protobuf wire
class WireError(ValueError):
    """Bytes that are not a valid protobuf message."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise WireError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def decode_fields(buf: bytes) -> dict[int, list[Any]]:
    """Protobuf wire format -> ``{field_number: [values]}`` (varints as int, LEN as bytes).

    Fixed32/64 fields are kept as raw bytes; groups (wire types 3/4) are rejected.
    """
    out: dict[int, list[Any]] = {}
    i = 0
    n = len(buf)
    while i < n:
        tag, i = _varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if num == 0:
            raise WireError("field number 0")
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            ln, i = _varint(buf, i)
            if i + ln > n:
                raise WireError("length-delimited field runs past the end")
            v, i = bytes(buf[i : i + ln]), i + ln
        elif wt == 1:
            if i + 8 > n:
                raise WireError("truncated fixed64")
            v, i = bytes(buf[i : i + 8]), i + 8
        elif wt == 5:
            if i + 4 > n:
                raise WireError("truncated fixed32")
            v, i = bytes(buf[i : i + 4]), i + 4
        else:
            raise WireError(f"unsupported wire type {wt}")
        out.setdefault(num, []).append(v)
    return out


def _int32(v: int) -> int:
    """Two's-complement int32 from a varint (negative int32 are sign-extended to 64 bits)."""
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def _one(fields: dict[int, list[Any]], num: int, default: Any) -> Any:
    vals = fields.get(num)
    return vals[-1] if vals else default


def parse_a11y_forest(data: bytes) -> list[dict[str, Any]]:
    """Nodes of a serialized ``AndroidAccessibilityForest`` as dicts (see module docstring).

    Each dict: ``unique_id``, ``bounds`` (left, top, right, bottom px), ``class_name``,
    ``content_description``, ``text``, ``view_id``, ``clickable``, ``scrollable``.
    Raises :class:`WireError` on bytes that are not such a message.
    """
    nodes: list[dict[str, Any]] = []
    for window in decode_fields(data).get(1, []):
        if not isinstance(window, bytes):
            raise WireError("forest.windows is not a message")
        tree = _one(decode_fields(window), 11, b"")
        if not isinstance(tree, bytes):
            raise WireError("window.tree is not a message")
        for node in decode_fields(tree).get(1, []):
            if not isinstance(node, bytes):
                raise WireError("tree.nodes is not a message")
            f = decode_fields(node)
            rect = _one(f, 2, None)
            if rect is None:
                continue  # a node without bounds cannot be located on screen
            if not isinstance(rect, bytes):
                raise WireError("node.bounds_in_screen is not a message")
            r = decode_fields(rect)
            bounds = tuple(_int32(_one(r, k, 0)) for k in (1, 2, 3, 4))

            def s(k: int) -> str:
                v = _one(f, k, b"")
                if not isinstance(v, bytes):
                    raise WireError(f"node field {k} is not a string")
                return v.decode("utf-8", errors="replace")

            nodes.append(
                {
                    "unique_id": _int32(_one(f, 1, 0)) if isinstance(_one(f, 1, 0), int) else 0,
                    "bounds": bounds,
                    "class_name": s(3),
                    "content_description": s(4),
                    "text": s(7),
                    "view_id": s(10),
                    "clickable": bool(_one(f, 14, 0)),
                    "scrollable": bool(_one(f, 21, 0)),
                }
            )
    return nodes


# ----------------------------------------------------------------------------- example
def _feature_list(ctx: Ctx, feats: Any, key: str, kind: str) -> list[Any]:
    if key not in feats:
        raise ctx.error(key, f"feature missing (present: {sorted(feats.keys())})")
    f = feats[key]
    which = f.WhichOneof("kind")
    if which is None:
        return []
    if which != kind:
        raise ctx.error(key, f"expected {kind}, got {which}")
    return list(getattr(f, kind).value)


def _action(ctx: Ctx, raw: Any, w: int, h: int) -> Action:
    d = json_value(ctx, "actions", raw)
    if not isinstance(d, dict):
        raise ctx.error("actions", f"expected a JSON object, got {d!r:.80}")
    t = req(ctx, d, "action_type", str)
    if t in ("click", "long_press"):
        x = number(ctx, "x", req(ctx, d, "x", (int, float)))
        y = number(ctx, "y", req(ctx, d, "y", (int, float)))
        at = ActionType.CLICK if t == "click" else ActionType.LONG_PRESS
        return Action(at, point=norm_point(ctx, "x/y", x, y, w, h))
    if t == "scroll":
        direction = req(ctx, d, "direction", str)
        if direction not in ("up", "down", "left", "right"):
            raise ctx.error("direction", f"expected up/down/left/right, got {direction!r}")
        return Action(ActionType.SCROLL, direction=direction, convention="content")  # type: ignore[arg-type]
    if t == "open_app":
        return Action(ActionType.OPEN_APP, text=req(ctx, d, "app_name", str))
    if t == "input_text":
        return Action(ActionType.TYPE, text=req(ctx, d, "text", str))
    if t in _KEYS:
        return Action(ActionType.PRESS, key=_KEYS[t])  # type: ignore[arg-type]
    if t == "wait":
        return Action(ActionType.WAIT)
    raise ctx.error(
        "action_type",
        f"unknown action type {t!r}; expected click, long_press, scroll, open_app, input_text, "
        "navigate_home, navigate_back, wait",
    )


def action_from_json(ctx: Ctx, raw: Any, w: int, h: int) -> Action:
    """One AndroidControl action (a JSON string or dict) -> canonical :class:`Action`;
    ``x`` / ``y`` pixels of a ``w`` x ``h`` screen."""
    return _action(ctx, raw, w, h)


def step_from_action(
    raw: Any,
    *,
    screen_size: tuple[int, int],
    element_boxes: Any = (),
    off_screen: str = "clip",
    ctx: Ctx | None = None,
) -> Step:
    """An AndroidControl action with element boxes given by the caller (``[x1, y1, x2, y2]``
    pixels, e.g. a golden file's ``elements``) as a :class:`Step`: the boxes are kept as the
    candidates, in order, and the target box is the smallest of them containing the point."""
    ctx = ctx or Ctx("<record>", "step")
    w, h = screen_size
    action = _action(ctx, raw, w, h)
    boxes = []
    for j, b in enumerate(element_boxes):
        nb = screen_box(ctx, f"elements[{j}]", b, w, h, off_screen)
        if nb is not None:
            boxes.append(nb)
    target = smallest_containing(action.point, boxes) if action.point else None
    return Step(
        step_id=0, screenshot="", screen_size=(w, h), action=action, target_box=target, candidate_boxes=tuple(boxes)
    )


class _SplitOf:
    """The split of an episode id: one ``split`` for all, or the release's split files."""

    def __init__(self, split: str | None, splits_file: Path | None, subsplits_file: Path | None) -> None:
        self.split = split
        self.file = splits_file
        self.splits = read_androidcontrol_splits(splits_file) if split is None and splits_file else {}
        self.sub = read_test_subsplits(subsplits_file, self.splits) if self.splits and subsplits_file else {}

    def __call__(self, ctx: Ctx, eid: str) -> tuple[str, dict[str, Any]]:
        if self.split is not None:
            return self.split, {}
        if eid not in self.splits:
            raise ctx.error("episode_id", f"episode {eid} is in none of the splits of {self.file}")
        split = self.splits[eid]
        return split, ({"test_subsplits": list(self.sub.get(eid, ()))} if split == "test" and self.sub else {})


def _episode(ctx: Ctx, ex: Any, image_dir: Path, split_of: _SplitOf, off_screen: str, candidates: str) -> Episode:
    feats = ex.features.feature
    ids = _feature_list(ctx, feats, "episode_id", "int64_list")
    if len(ids) != 1:
        raise ctx.error("episode_id", f"expected one int, got {ids}")
    eid = str(ids[0])
    ctx = Ctx(ctx.file, f"{ctx.record} (episode_id {eid})", ctx.adjustments)
    split, split_extra = split_of(ctx, eid)
    goal = _feature_list(ctx, feats, "goal", "bytes_list")
    if len(goal) != 1:
        raise ctx.error("goal", f"expected one string, got {len(goal)}")
    shots = _feature_list(ctx, feats, "screenshots", "bytes_list")
    trees = _feature_list(ctx, feats, "accessibility_trees", "bytes_list")
    ws = _feature_list(ctx, feats, "screenshot_widths", "int64_list")
    hs = _feature_list(ctx, feats, "screenshot_heights", "int64_list")
    actions = _feature_list(ctx, feats, "actions", "bytes_list")
    instrs = _feature_list(ctx, feats, "step_instructions", "bytes_list")
    n = len(actions)
    for key, seq, want in (
        ("screenshots", shots, n + 1),
        ("accessibility_trees", trees, n + 1),
        ("screenshot_widths", ws, n + 1),
        ("screenshot_heights", hs, n + 1),
        ("step_instructions", instrs, n),
    ):
        if len(seq) != want:
            raise ctx.error(key, f"expected {want} entries for {n} actions, got {len(seq)}")
    steps = []
    shot_paths = []
    for i in range(n + 1):
        sctx = ctx.sub(f"step {i}")
        w, h = int(ws[i]), int(hs[i])
        rel, size = save_png(sctx, "screenshots", shots[i], image_dir, f"{NAME}/{eid}/{i}.png")
        if size != (w, h):
            raise sctx.error("screenshot_widths", f"says {w}x{h} but the PNG is {size[0]}x{size[1]}")
        shot_paths.append(rel)
        if i == n:
            break
        try:
            nodes = parse_a11y_forest(trees[i])
        except WireError as e:
            raise sctx.error(
                "accessibility_trees",
                f"cannot decode as an android_env AndroidAccessibilityForest protobuf ({e}); "
                "this loader assumes that serialization (see module docstring)",
            ) from None
        elements = []
        for nd in nodes:
            box = screen_box(sctx, f"bounds_in_screen of node {nd['unique_id']}", nd["bounds"], w, h, off_screen)
            if box is None:
                continue
            elements.append(
                UIElement(
                    element_id=str(nd["unique_id"]),
                    box=box,
                    label=nd["content_description"] or nd["text"],
                    role=nd["class_name"].rsplit(".", 1)[-1],
                    clickable=nd["clickable"],
                    scrollable=nd["scrollable"],
                    text=nd["text"],
                )
            )
        action = _action(sctx, actions[i], w, h)
        cands, target = candidates_and_target(
            action.point, [e.box for e in elements], [e.clickable for e in elements], candidates
        )
        steps.append(
            Step(
                step_id=i,
                screenshot=rel,
                screen_size=(w, h),
                action=action,
                low_level_instruction=as_str(sctx, "step_instructions", instrs[i]),
                target_box=target,
                candidate_boxes=cands,
                elements=tuple(elements),
            )
        )
    return Episode(
        episode_id=eid,
        instruction=as_str(ctx, "goal", goal[0]),
        steps=tuple(steps),
        source=NAME,
        split=split,
        extra={"final_screenshot": shot_paths[-1], **split_extra},
    )


def load_androidcontrol(
    path: str | Path,
    *,
    image_dir: str | Path | None = None,
    skip_bad: bool = False,
    split: str | None = None,
    splits_file: str | Path | None = None,
    test_subsplits_file: str | Path | None = None,
    off_screen: str = "clip",
    candidates: str = "containing",
) -> LoadResult:
    """Load AndroidControl TFRecord file(s) (a file, or every file in a folder).

    Every accessibility node with bounds becomes an element (``Step.elements``); bounds reaching
    past the screen are clipped and counted (``off_screen``). ``candidates``: which nodes become
    candidate boxes (module doc): ``"containing"`` (the clickable nodes containing the acted
    point, smallest first, as UI-S1's and CCPO's converted files) or ``"all"`` (every node, for
    AgentCPM-GUI's evaluator).

    ``image_dir``: output folder; screenshots are written as
    ``image_dir/androidcontrol/<episode_id>/<i>.png`` and stored relative to ``image_dir``.
    Splits (module doc): ``splits_file`` (default ``splits.json`` in the TFRecords' folder) and
    ``test_subsplits_file`` (default ``test_subsplits.json`` there, optional); a missing
    ``splits.json`` raises :class:`~guirl.data.loaders._splits.SplitFileError` naming it.
    ``split=NAME`` stores ``NAME`` on every episode and reads no split file.
    """
    from tfrecord import example_pb2
    from tfrecord.reader import tfrecord_iterator

    if candidates not in CANDIDATES:
        raise ValueError(f"candidates={candidates!r}: use one of {CANDIDATES}")
    out_dir = need_image_dir(NAME, image_dir)
    files = list_files(path, ("*tfrecord*", "android_control*"), "AndroidControl TFRecord files")
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    sfile = Path(splits_file) if splits_file is not None else folder / AC_SPLITS_FILE
    tfile = Path(test_subsplits_file) if test_subsplits_file is not None else folder / AC_TEST_SUBSPLITS_FILE
    split_of = _SplitOf(split, None if split is not None else sfile, tfile)
    res = LoadResult()
    for f in files:
        it = tfrecord_iterator(str(f), compression_type="gzip")
        idx = 0
        while True:
            ctx = Ctx(f, f"#{idx}")
            try:
                raw = next(it)
            except StopIteration:
                break
            except (RuntimeError, OSError, EOFError) as e:
                err = ctx.error("<tfrecord>", f"cannot read the GZIP TFRecord framing: {e}")
                if not skip_bad:
                    raise err from e
                res.skipped.append((err.file, err.record + " and the rest of the file", err.problem))
                break
            ex = example_pb2.Example()

            def build(raw: Any = raw, ex: Any = ex, ctx: Ctx = ctx) -> Episode:
                try:
                    ex.ParseFromString(bytes(raw))
                except Exception as e:  # protobuf DecodeError has no stable import path
                    raise ctx.error("<example>", f"not a tf.train.Example: {e}") from None
                return _episode(ctx, ex, out_dir, split_of, off_screen, candidates)

            collect([(ctx, build)], res.episodes, res.skipped, skip_bad, res.adjusted)
            idx += 1
    return report_skipped(NAME, res)


__all__ = [
    "CANDIDATES",
    "candidates_and_target",
    "load_androidcontrol",
    "parse_a11y_forest",
    "decode_fields",
    "DatasetFormatError",
]
