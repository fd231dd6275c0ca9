"""Shared pieces of the dataset loaders: the error type, the result type, unit conversions.

Every loader turns one public dataset format (``docs/dataset-formats.md``) into
:class:`guirl.data.schema.Episode` objects with canonical actions:

* points are normalised ``(x, y)`` in ``[0, 1]`` of the screenshot (pixels / size,
  ``[0, 1000]`` / 1000, or already normalised, depending on the source);
* boxes are normalised ``(x1, y1, x2, y2)``;
* a scroll always states its convention: ``"content"`` for AndroidControl's ``direction``,
  ``"finger"`` for every start/end finger motion (GUI-Odyssey, AITZ, AMEX, ``swipe``).

Bad input raises :class:`DatasetFormatError` naming the file, the record (episode id, line or
row) and the key. With ``skip_bad=True`` the loader records ``(file, record, reason)`` in
:attr:`LoadResult.skipped` instead, and :func:`report_skipped` emits a one-line warning. Bytes that
are not UTF-8 text are a bad record of their own (a JSONL line, a JSON file), never the end of
the load. Every loaded episode has at least one step and positive screen sizes
(:func:`check_episode`, run by :func:`collect`).

Adjustments: where a loader changes a value to make a record fit the schema (an element box a
few pixels off the screen clipped to it, a screenshot path remapped under ``image_root``), it
records ``(file, record, what)`` in :attr:`LoadResult.adjusted` (:meth:`Ctx.adjust`); nothing is
changed silently. :meth:`LoadResult.counts` gives records loaded / adjusted / rejected.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from guirl.actions import ActionError
from guirl.data.schema import Episode, SchemaError

logger = logging.getLogger("guirl.data.loaders")

T = TypeVar("T")
Box = tuple[float, float, float, float]


class DatasetFormatError(ValueError):
    """A record of a public dataset does not match its documented format.

    ``file``, ``record`` and ``key`` are kept as attributes; the message names all three and
    says how to proceed (fix the record, or load with ``skip_bad=True``).
    """

    def __init__(self, file: str | Path, record: str, key: str, problem: str) -> None:
        self.file = str(file)
        self.record = str(record)
        self.key = key
        self.problem = problem
        super().__init__(
            f"{self.file}: record {self.record}: key {key!r}: {problem} "
            "(fix the record, or load with skip_bad=True to skip and count it)"
        )


@dataclass
class LoadResult:
    """Episodes that loaded, ``(file, record, reason)`` for every record skipped, and
    ``(file, record, what)`` for every adjustment made to a record that loaded."""

    episodes: list[Episode] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    adjusted: list[tuple[str, str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """``loaded`` episodes, ``adjusted`` episodes (with at least one adjustment),
        ``adjustments`` in all, ``rejected`` records."""
        eps = {(f, r.split(" step ")[0]) for f, r, _ in self.adjusted}
        return {
            "loaded": len(self.episodes),
            "adjusted": len(eps),
            "adjustments": len(self.adjusted),
            "rejected": len(self.skipped),
        }


class Ctx:
    """Where we are (file + record) so that every error message can name them, and the
    adjustments made to the record (shared with its :meth:`sub` contexts)."""

    def __init__(self, file: str | Path, record: str, adjustments: list[tuple[str, str, str]] | None = None) -> None:
        self.file = str(file)
        self.record = str(record)
        self.adjustments: list[tuple[str, str, str]] = [] if adjustments is None else adjustments

    def error(self, key: str, problem: str) -> DatasetFormatError:
        return DatasetFormatError(self.file, self.record, key, problem)

    def sub(self, record: str) -> "Ctx":
        return Ctx(self.file, f"{self.record} {record}", self.adjustments)

    def adjust(self, key: str, what: str) -> None:
        """Record an adjustment of ``key`` in this record (reported, never silent)."""
        self.adjustments.append((self.file, self.record, f"{key}: {what}"))


def collect(
    items: Iterable[tuple[Ctx, Callable[[], T]]],
    result: list[T],
    skipped: list[tuple[str, str, str]],
    skip_bad: bool,
    adjusted: list[tuple[str, str, str]] | None = None,
) -> None:
    """Run each ``(ctx, build)``; on a bad record raise, or (``skip_bad``) record it as skipped.

    Any ``ValueError``/``KeyError``/``TypeError`` escaping ``build`` (a missed check), and the
    errors of a record past a bound (:data:`BOUND_ERRORS`: too deep, a number that overflows, a
    path the system refuses) are wrapped into a :class:`DatasetFormatError` naming the context, so
    nothing surfaces unnamed and ``skip_bad`` loses that record only. The adjustments of a record
    that loads go to ``adjusted``.
    """
    for ctx, build in items:
        n0 = len(ctx.adjustments)
        try:
            item = build()
            if isinstance(item, Episode):
                check_episode(ctx, item)
            result.append(item)
            if adjusted is not None:
                adjusted.extend(ctx.adjustments[n0:])
        except DatasetFormatError as e:
            if not skip_bad:
                raise
            skipped.append((e.file, e.record, f"{e.key}: {e.problem}"))
        except (ActionError, SchemaError, KeyError, TypeError, ValueError, IndexError, *BOUND_ERRORS) as e:
            err = ctx.error("?", f"{type(e).__name__}: {str(e)[:200]}")
            if not skip_bad:
                raise err from e
            skipped.append((err.file, err.record, err.problem))


def screen_size(ctx: Ctx, key: str, w: Any, h: Any) -> tuple[int, int]:
    """``(w, h)`` as a screen size in pixels: whole numbers greater than zero, else an error
    naming ``key`` (GUI-Odyssey has records with a -1080 x 0 device)."""
    if isinstance(w, bool) or isinstance(h, bool) or not all(isinstance(v, (int, float)) for v in (w, h)):
        raise ctx.error(key, f"screen size {w!r} x {h!r} is not two numbers")
    if not (math.isfinite(w) and math.isfinite(h) and int(w) == w and int(h) == h and w > 0 and h > 0):
        raise ctx.error(key, f"screen size {w!r} x {h!r} is impossible: width and height must be whole pixels > 0")
    return int(w), int(h)


def check_episode(ctx: Ctx, ep: Episode) -> None:
    """Reject an episode that no model could be trained or scored on: no steps, or a step whose
    screen size is not positive (:func:`screen_size`)."""
    if not ep.steps:
        raise ctx.error("steps", "the episode has no steps")
    for i, s in enumerate(ep.steps):
        screen_size(ctx.sub(f"step {i}"), "screen_size", *s.screen_size)


def report_skipped(name: str, result: LoadResult) -> LoadResult:
    """Emit a one-line summary (warning + log) when records were skipped or adjusted; returns
    ``result``."""
    if result.adjusted:
        c = result.counts()
        logger.info(
            "%s: loaded %d episodes, %d of them adjusted (%d adjustments; first: %s)",
            name,
            c["loaded"],
            c["adjusted"],
            c["adjustments"],
            result.adjusted[0],
        )
    if result.skipped:
        files = sorted({f for f, _, _ in result.skipped})
        msg = (
            f"{name}: skipped {len(result.skipped)} bad record(s) in {len(files)} file(s) "
            f"(kept {len(result.episodes)} episodes); first: {result.skipped[0]}"
        )
        logger.warning(msg)
        warnings.warn(msg, stacklevel=3)
    return result


# ----------------------------------------------------------------------------- bounds on a record
# A record past one of these bounds is a bad record of its own (named; skipped under skip_bad),
# never the end of the load or a stall: a decompression bomb of a PNG, JSON nested to exhaust the
# parser, a number that overflows the conversions after it, a path the file system refuses.

#: Pixels of one screenshot (width x height): Pillow's own decompression-bomb limit (a 1080 x 2400
#: phone screen has 2.6 M; a 30000 x 30000 PNG 900 M).
MAX_IMAGE_PIXELS = 89_478_485
#: Nesting of a JSON record (objects and arrays inside each other); the datasets nest 6 at most.
MAX_JSON_DEPTH = 64
#: The largest magnitude of a number in a record (coordinates, sizes, seconds): far above any real
#: value, far below an overflow (``1e308 * 1000`` is infinite).
MAX_NUMBER = 1e15
#: Characters of a screenshot path, and bytes of one of its parts (the usual file system limits).
MAX_PATH_CHARS = 1024
MAX_PATH_PART_BYTES = 255
#: What a record past a bound raises deep inside a conversion (caught by :func:`collect`).
BOUND_ERRORS: tuple[type[BaseException], ...] = (RecursionError, OverflowError, OSError)


def check_magnitude(ctx: Ctx, key: str, f: float) -> float:
    """``f`` when its magnitude is at most :data:`MAX_NUMBER`, else an error naming ``key``."""
    if abs(f) > MAX_NUMBER:
        raise ctx.error(key, f"number {f!r} is out of range (magnitude above {MAX_NUMBER:g})")
    return f


def check_depth(ctx: Ctx, key: str, value: Any) -> Any:
    """``value`` (decoded JSON) when it nests at most :data:`MAX_JSON_DEPTH` levels, else an error
    naming ``key``. Iterative: a deep value costs no recursion."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ctx.error(key, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return value


def check_path(ctx: Ctx, key: str, path: str) -> str:
    """A screenshot path of a record: at most :data:`MAX_PATH_CHARS` characters, each part at
    most :data:`MAX_PATH_PART_BYTES` bytes, no NUL, and, when relative, inside the folder it is
    relative to (a ``..`` that leaves it is refused: a record never reads a file outside its data
    set). An absolute path (the authors' machines) is kept as written (:func:`remap_image`)."""
    if len(path) > MAX_PATH_CHARS:
        raise ctx.error(key, f"path of {len(path)} characters (more than {MAX_PATH_CHARS}): {path[:60]!r}...")
    if "\0" in path:
        raise ctx.error(key, f"path holds a NUL character: {path[:80]!r}")
    long = next((part for part in Path(path).parts if len(part.encode("utf-8", "replace")) > MAX_PATH_PART_BYTES), None)
    if long is not None:
        raise ctx.error(key, f"path part of more than {MAX_PATH_PART_BYTES} bytes: {long[:60]!r}...")
    if not Path(path).is_absolute() and os.path.normpath(path).split(os.sep)[0] == "..":
        raise ctx.error(key, f"path {path!r} leads outside the data folder (..); paths are relative to it")
    return path


def check_pixels(ctx: Ctx, key: str, what: Any, w: int, h: int) -> tuple[int, int]:
    """``(w, h)`` when the image has at most :data:`MAX_IMAGE_PIXELS` pixels, else an error."""
    if w * h > MAX_IMAGE_PIXELS:
        raise ctx.error(key, f"image {what} is {w}x{h} = {w * h} pixels, more than {MAX_IMAGE_PIXELS}")
    return w, h


def is_file(ctx: Ctx, key: str, path: Path) -> bool:
    """``path.is_file()``; a path the system refuses (too long, ...) is an error naming ``key``."""
    try:
        return path.is_file()
    except OSError as e:
        raise ctx.error(key, f"cannot look up {str(path)[:80]!r}...: {e.strerror or e}") from None


@contextlib.contextmanager
def _bomb_is_error() -> Iterator[None]:
    """Pillow's decompression-bomb warning (above :data:`MAX_IMAGE_PIXELS`) raised as an error."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        yield


# ----------------------------------------------------------------------------- field access
def req(ctx: Ctx, d: Any, key: str, types: type | tuple[type, ...]) -> Any:
    """``d[key]``, checked to be a mapping entry of the given type(s)."""
    if not isinstance(d, dict):
        raise ctx.error(key, f"expected an object holding {key!r}, got {type(d).__name__}")
    if key not in d:
        raise ctx.error(key, f"missing (keys present: {sorted(d)[:20]})")
    v = d[key]
    if isinstance(types, tuple):
        ok = isinstance(v, types) and not (bool not in types and isinstance(v, bool))
    else:
        ok = isinstance(v, types) and not (types is not bool and isinstance(v, bool))
    if not ok:
        want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ctx.error(key, f"expected {want}, got {type(v).__name__} {v!r:.80}")
    return v


def opt(ctx: Ctx, d: dict, key: str, types: type | tuple[type, ...], default: Any) -> Any:
    """``d[key]`` when present and not None (type-checked), else ``default``."""
    if d.get(key) is None:
        return default
    return req(ctx, d, key, types)


def number(ctx: Ctx, key: str, v: Any) -> float:
    """A finite real number within :data:`MAX_NUMBER` of zero (ints and numeric numpy scalars
    accepted, bools rejected)."""
    if isinstance(v, bool):
        raise ctx.error(key, f"expected a number, got bool {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ctx.error(key, f"expected a number, got {type(v).__name__} {v!r:.80}") from None
    if not math.isfinite(f):
        raise ctx.error(key, f"expected a finite number, got {v!r}")
    check_magnitude(ctx, key, f)
    return f


def numbers(ctx: Ctx, key: str, v: Any, n: int | None = None) -> list[float]:
    """A list of finite numbers (of length ``n`` when given)."""
    if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__"):
        raise ctx.error(key, f"expected a list of numbers, got {type(v).__name__} {v!r:.80}")
    out = [number(ctx, key, x) for x in v]
    if n is not None and len(out) != n:
        raise ctx.error(key, f"expected {n} numbers, got {len(out)}: {list(v)!r:.80}")
    return out


def json_value(ctx: Ctx, key: str, v: Any) -> Any:
    """Decode a JSON string (bytes accepted); non-strings are returned unchanged. Either is
    refused when nested deeper than :data:`MAX_JSON_DEPTH` (:func:`check_depth`)."""
    if isinstance(v, bytes):
        v = as_str(ctx, key, v)
    if not isinstance(v, str):
        return check_depth(ctx, key, v)
    try:
        return check_depth(ctx, key, json.loads(v))
    except json.JSONDecodeError as e:
        raise ctx.error(key, f"not valid JSON ({e.msg} at char {e.pos}): {v!r:.80}") from None
    except RecursionError:
        raise ctx.error(key, f"JSON nested deeper than {MAX_JSON_DEPTH} levels (the parser's own limit)") from None


def read_json_file(path: Path, record: str) -> Any:
    """Load a JSON file; bad JSON names the file and position, nesting past :data:`MAX_JSON_DEPTH`
    the file."""
    try:
        return check_depth(Ctx(path, record), "<file>", json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise DatasetFormatError(path, record, "<file>", f"not valid JSON: {e}") from None
    except UnicodeDecodeError as e:
        raise DatasetFormatError(path, record, "<file>", f"not UTF-8 text: {e}") from None
    except RecursionError:
        raise DatasetFormatError(
            path, record, "<file>", f"JSON nested deeper than {MAX_JSON_DEPTH} levels (the parser's own limit)"
        ) from None


# ----------------------------------------------------------------------------- units
def norm_point(ctx: Ctx, key: str, x: float, y: float, scale_x: float, scale_y: float) -> tuple[float, float]:
    """``(x / scale_x, y / scale_y)``; error when the point is outside the screen.

    ``scale`` is the screen width/height in pixels, or 1000 for ``[0, 1000]`` coordinates.
    """
    if scale_x <= 0 or scale_y <= 0:
        raise ctx.error(key, f"screen size must be positive, got {scale_x}x{scale_y}")
    if not (0 <= x <= scale_x and 0 <= y <= scale_y):
        raise ctx.error(key, f"point ({x}, {y}) is outside the screen [0, {scale_x}] x [0, {scale_y}]")
    return (x / scale_x, y / scale_y)


def norm_box(
    ctx: Ctx, key: str, box: Sequence[float], scale_x: float, scale_y: float, *, clamp: bool = False
) -> Box | None:
    """A pixel (or 0-1000) ``x1, y1, x2, y2`` box normalised to ``[0, 1]``.

    ``clamp=False``: a box outside the screen or with ``x2 < x1`` raises. ``clamp=True``
    (accessibility nodes, which may extend off screen): clamped, ``None`` when empty after it.
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    if x2 < x1 or y2 < y1:
        if clamp:
            return None
        raise ctx.error(key, f"box {list(box)} has x2 < x1 or y2 < y1")
    b = (x1 / scale_x, y1 / scale_y, x2 / scale_x, y2 / scale_y)
    if clamp:
        b = tuple(min(max(v, 0.0), 1.0) for v in b)  # type: ignore[assignment]
        return b if (b[2] > b[0] and b[3] > b[1]) else None
    eps = 1e-9
    if min(b) < -eps or max(b) > 1 + eps:
        raise ctx.error(key, f"box {list(box)} is outside the screen {scale_x}x{scale_y}")
    return tuple(min(max(v, 0.0), 1.0) for v in b)  # type: ignore[return-value]


OFF_SCREEN = ("clip", "keep", "reject")


def screen_box(
    ctx: Ctx, key: str, box: Sequence[float], scale_x: float, scale_y: float, off_screen: str = "clip"
) -> Box | None:
    """An element box ``x1, y1, x2, y2`` (pixels, or [0, 1000] with scale 1000) normalised, with
    what reaches past the screen handled as ``off_screen`` says:

    * ``"clip"``: clipped to the screen and counted (:meth:`Ctx.adjust`); a box that is empty
      after clipping is dropped (``None``) and counted;
    * ``"keep"``: kept as annotated (normalised values may lie outside ``[0, 1]``): what the
      original evaluators compute with;
    * ``"reject"``: :class:`DatasetFormatError`.

    A box with ``x2 < x1`` or ``y2 < y1`` always raises.
    """
    if off_screen not in OFF_SCREEN:
        raise ValueError(f"off_screen must be one of {OFF_SCREEN}, got {off_screen!r}")
    if scale_x <= 0 or scale_y <= 0:
        raise ctx.error(key, f"screen size must be positive, got {scale_x}x{scale_y}")
    x1, y1, x2, y2 = (float(v) for v in box)
    if x2 < x1 or y2 < y1:
        raise ctx.error(key, f"box {list(box)} has x2 < x1 or y2 < y1")
    b = (x1 / scale_x, y1 / scale_y, x2 / scale_x, y2 / scale_y)
    if min(b) >= 0.0 and max(b) <= 1.0:
        return b
    if off_screen == "keep":
        return b
    if off_screen == "reject":
        raise ctx.error(key, f"box {list(box)} reaches outside the screen {scale_x}x{scale_y}")
    c = (min(max(b[0], 0.0), 1.0), min(max(b[1], 0.0), 1.0), min(max(b[2], 0.0), 1.0), min(max(b[3], 0.0), 1.0))
    if not (c[2] > c[0] and c[3] > c[1]):
        ctx.adjust(key, f"box {list(box)} lies outside the screen {scale_x:g}x{scale_y:g}: dropped")
        return None
    ctx.adjust(key, f"box {list(box)} clipped to the screen {scale_x:g}x{scale_y:g}")
    return c  # type: ignore[return-value]


def remap_image(ctx: Ctx, key: str, path: str, image_root: str | Path | None) -> str:
    """A screenshot path as stored: unchanged without ``image_root``; with it, a path that is
    absolute (the authors' machines) or does not exist under ``image_root`` is replaced by the
    longest trailing part of it that exists under ``image_root`` (counted), else by its file
    name (counted; the caller's file check then names the missing file)."""
    if image_root is None:
        return path
    root = Path(image_root)
    p = Path(path)
    if not p.is_absolute() and (root / p).exists():
        return path
    parts = p.parts[1:] if p.is_absolute() else p.parts
    for i in range(len(parts)):
        cand = Path(*parts[i:])
        if os.path.normpath(cand).split(os.sep)[0] == "..":  # never a file outside image_root
            continue
        if (root / cand).exists():
            ctx.adjust(key, f"screenshot {path!r} remapped to {str(cand)!r} under image_root")
            return str(cand)
    ctx.adjust(key, f"screenshot {path!r} remapped to {p.name!r} under image_root")
    return p.name


def finger_direction(start: Sequence[float], end: Sequence[float]) -> str:
    """Direction the finger moved from ``start`` to ``end`` (x right, y down), dominant axis.

    Ties (|dx| == |dy|) go to the vertical axis, the usual scroll axis on phones.
    """
    dx, dy = end[0] - start[0], end[1] - start[1]
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def smallest_containing(point: Sequence[float], boxes: Iterable[Box]) -> Box | None:
    """The smallest-area box containing ``point`` (edges included), or ``None``."""
    best: Box | None = None
    best_area = math.inf
    for b in boxes:
        if b[0] <= point[0] <= b[2] and b[1] <= point[1] <= b[3]:
            a = (b[2] - b[0]) * (b[3] - b[1])
            if a < best_area:
                best, best_area = b, a
    return best


def image_size(ctx: Ctx, key: str, path: Path) -> tuple[int, int]:
    """``(width, height)`` in pixels of an image file (reads the header only)."""
    from PIL import Image, UnidentifiedImageError

    if not is_file(ctx, key, path):
        raise ctx.error(key, f"screenshot file {path} does not exist (needed for the screen size)")
    try:
        with _bomb_is_error(), Image.open(path) as im:
            return check_pixels(ctx, key, path, *im.size)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ctx.error(key, f"image {path} is larger than {MAX_IMAGE_PIXELS} pixels: {e}") from None
    except (UnidentifiedImageError, OSError) as e:
        raise ctx.error(key, f"cannot read image {path}: {e}") from None


def save_png(ctx: Ctx, key: str, data: bytes, out_dir: Path, rel: str) -> tuple[str, tuple[int, int]]:
    """Decode image bytes (PNG/JPEG/...) and write them as PNG to ``out_dir / rel``.

    Returns ``(rel, (width, height))``; ``rel`` is the path stored in the schema, relative
    to ``out_dir`` (the folder that will hold ``episodes.jsonl``).
    """
    from PIL import Image, UnidentifiedImageError

    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) == 0:
        raise ctx.error(key, f"expected non-empty image bytes, got {type(data).__name__}")
    try:
        with _bomb_is_error():
            im = Image.open(io.BytesIO(bytes(data)))
            check_pixels(ctx, key, "the image bytes", *im.size)  # before decoding them
            im.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ctx.error(key, f"image bytes are larger than {MAX_IMAGE_PIXELS} pixels: {e}") from None
    except (UnidentifiedImageError, OSError) as e:
        raise ctx.error(key, f"image bytes cannot be decoded: {e}") from None
    dest = out_dir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    im.save(dest, format="PNG")
    return rel, im.size


def need_image_dir(name: str, image_dir: str | Path | None) -> Path:
    if image_dir is None:
        raise ValueError(
            f"{name} embeds screenshots as bytes: pass image_dir=<output folder>; the PNGs are "
            "written under it and the episodes store paths relative to it"
        )
    return Path(image_dir)


def list_files(path: str | Path, patterns: Sequence[str], what: str) -> list[Path]:
    """``path`` itself when it is a file, else the sorted files under it matching a pattern."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such file or folder ({what})")
    files = sorted({f for pat in patterns for f in p.glob(pat) if f.is_file()})
    if not files:
        raise FileNotFoundError(f"{p}: no {what} found (looked for {list(patterns)})")
    return files


def as_str(ctx: Ctx, key: str, v: Any) -> str:
    """``v`` as text: a string, or bytes decoded as UTF-8 (an error naming the first bad byte)."""
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ctx.error(key, f"not UTF-8 text: byte 0x{e.object[e.start]:02x} at column {e.start + 1}") from None
    if not isinstance(v, str):
        raise ctx.error(key, f"expected a string, got {type(v).__name__} {v!r:.80}")
    return v


def iter_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of every non-blank line of ``path``. Lines stay bytes: each
    record decodes its own (:func:`json_value`), so a bad byte costs that record only."""
    with path.open("rb") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                yield i, line
