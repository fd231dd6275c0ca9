"""Adapters from :mod:`guirl.rewards` functions to TRL 1.16 ``GRPOTrainer`` reward functions.

TRL calls each reward function as ``fn(prompts=..., completions=..., completion_ids=..., **kwargs)``
(``GRPOTrainer._calculate_rewards``) where

* ``completions`` is a list of strings, or (conversational datasets) a list of message lists
  ``[{"role": "assistant", "content": str | [{"type": "text", "text": ...}, ...]}]``;
* every extra dataset column arrives as a keyword argument holding one value per completion
  (already repeated ``num_generations`` times), plus ``trainer_state``, ``log_extra(column,
  values)`` and ``log_metric(name, value)``;
* the function returns one float (or ``None`` -> NaN, "not applicable") per completion, and TRL
  logs it under ``reward_func.__name__``.

Ground truth comes from columns: ``gt_action`` (JSON of :meth:`Action.to_dict`), optional
``gt_box`` and ``candidate_boxes`` (:meth:`GroundTruth.from_row`). Model text is parsed by the
``parse(text, row) -> ParseResult`` callable (e.g. :class:`FormatParser`, a registered output format
that takes the screen size from the row and the model's pixel budget from the run config); a
parser that raises is treated as a failed parse, except for a missing pixel budget or a missing
column, which are the caller's errors and raise.

The adapters are frozen dataclasses with ``__call__`` and ``__name__`` (:class:`FormatParser`,
:class:`TRLReward`, :class:`TRLComponents`), not closures, so they pickle: worker processes
(data-loader workers, ``datasets.map(num_proc=...)``, multi-process trainers) receive them by value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from guirl.actions.types import ParseResult
from guirl.imaging import PixelBudgetError, check_budget
from guirl.rewards.base import GroundTruth, RewardInputError, RewardResult

__all__ = [
    "FormatParser",
    "TRLComponents",
    "TRLReward",
    "as_trl_components",
    "as_trl_reward",
    "completion_text",
    "format_parser",
    "score_completions",
]

ParseFn = Callable[[str, Mapping[str, Any]], ParseResult]
GtFn = Callable[[Mapping[str, Any]], GroundTruth]
ExtrasFn = Callable[[str, ParseResult, Mapping[str, Any]], Mapping[str, Any]]

_TRL_RESERVED = ("trainer_state", "log_extra", "log_metric", "environments", "prompts", "completion_ids")


def completion_text(completion: Any) -> str:
    """Text of one completion: a string as is; a message list -> the assistant contents joined."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence):
        parts: list[str] = []
        for msg in completion:
            if not isinstance(msg, Mapping):
                raise TypeError(f"conversational completion items must be dicts, got {type(msg).__name__}")
            if msg.get("role", "assistant") != "assistant":
                continue
            content = msg.get("content", "")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, Sequence):
                parts.extend(
                    str(c.get("text", "")) for c in content if isinstance(c, Mapping) and c.get("type") == "text"
                )
        return "".join(parts)
    raise TypeError(f"completion must be a string or a list of messages, got {type(completion).__name__}")


def _rows(n: int, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    cols = {k: v for k, v in kwargs.items() if k not in _TRL_RESERVED and isinstance(v, (list, tuple))}
    for k, v in cols.items():
        if len(v) != n:
            raise ValueError(f"column {k!r} has {len(v)} values for {n} completions")
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


@dataclass(frozen=True)
class FormatParser:
    """``parse(text, row)`` for the registered output format ``format_name`` (:mod:`guirl.actions.formats`).

    The row must hold ``size_column`` = ``[width, height]`` of the original screenshot in pixels
    (the format converts the model's coordinates with it); a missing or malformed column raises
    :class:`RewardInputError` naming it (an input error, not a parse failure).

    Formats whose coordinates are pixels of the image the model saw (``coord_kind == "resized"``:
    ``ccpo``, ``qwen_mobile_use``, ``ces_executor``, ...) need that image's size: either the
    model's pixel budget ``min_pixels`` / ``max_pixels`` (``cfg.model.min_pixels`` /
    ``max_pixels``; :meth:`from_config`) or a row column ``image_size_column`` = ``[width,
    height]`` of the resized image. There is no default budget: constructing a parser for such a
    format without either raises :class:`guirl.imaging.PixelBudgetError` naming the arguments
    (CCPO-29 in ``docs/fidelity/ccpo.md``: the library default read a 1080x2400 screen at
    672x1484 px, so a centre click parsed as (0.81, 0.81)). A plain picklable object (the format
    is looked up by name at call time), so it crosses process boundaries.
    """

    format_name: str
    _: KW_ONLY
    min_pixels: int | None = None
    max_pixels: int | None = None
    size_column: str = "screen_size"
    image_size_column: str | None = None

    def __post_init__(self) -> None:
        from guirl.actions.formats import get_format

        fmt = get_format(self.format_name)  # an unknown name fails here, naming the registered formats
        given = self.min_pixels is not None or self.max_pixels is not None
        if given or (fmt.coord_kind == "resized" and self.image_size_column is None):
            try:
                check_budget(self.min_pixels, self.max_pixels, f"FormatParser({self.format_name!r})")
            except PixelBudgetError as e:
                raise PixelBudgetError(
                    f"{e}; format {self.format_name!r} writes pixels of the resized image: give min_pixels and "
                    "max_pixels (FormatParser.from_config(cfg)) or image_size_column"
                ) from None

    @classmethod
    def from_config(cls, cfg: Any, format_name: str | None = None, **kwargs: Any) -> FormatParser:
        """The parser of ``format_name`` (default ``cfg.sft.output_format``) with the run's pixel
        budget ``cfg.model.min_pixels`` / ``cfg.model.max_pixels``."""
        name = format_name if format_name is not None else cfg.sft.output_format
        return cls(name, min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels, **kwargs)

    @property
    def __name__(self) -> str:
        return f"parse_{self.format_name}"

    def _pair(self, row: Mapping[str, Any], column: str, what: str) -> tuple[int, int]:
        v = row.get(column)
        if v is None or isinstance(v, (str, bytes)) or len(v) != 2:
            raise RewardInputError(
                f"format {self.format_name!r} needs column {column!r} = [width, height] of {what} in pixels; "
                f"row has {sorted(row)}"
            )
        return int(v[0]), int(v[1])

    def context(self, row: Mapping[str, Any]) -> Any:
        """The ``FormatContext`` of one row: its screen size, the resized image size (from
        ``image_size_column``) or the pixel budget."""
        from guirl.actions.formats import FormatContext

        w, h = self._pair(row, self.size_column, "the original screenshot")
        if self.image_size_column is not None:
            iw, ih = self._pair(row, self.image_size_column, "the image the model saw")
            return FormatContext(width=w, height=h, image_width=iw, image_height=ih)
        return FormatContext(width=w, height=h, min_pixels=self.min_pixels, max_pixels=self.max_pixels)

    def __call__(self, text: str, row: Mapping[str, Any]) -> ParseResult:
        from guirl.actions.formats import get_format

        return get_format(self.format_name).parse(text, self.context(row))


def format_parser(
    name: str,
    *,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    size_column: str = "screen_size",
    image_size_column: str | None = None,
) -> FormatParser:
    """:class:`FormatParser` for the registered output format ``name`` (a format in resized pixels
    needs the model's ``min_pixels`` / ``max_pixels`` or an ``image_size_column``)."""
    return FormatParser(
        name,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        size_column=size_column,
        image_size_column=image_size_column,
    )


def _safe_parse(parse: ParseFn, text: str, row: Mapping[str, Any]) -> ParseResult:
    try:
        pr = parse(text, row)
    except (RewardInputError, PixelBudgetError):
        raise
    except Exception as e:  # parsers must not raise; treat a raising one as a failed parse
        return ParseResult.fail(f"parser raised {type(e).__name__}: {e}", raw=text)
    if not isinstance(pr, ParseResult):
        raise TypeError(f"parse must return ParseResult, got {type(pr).__name__}")
    return pr


def score_completions(
    fn: Callable[..., RewardResult],
    parse: ParseFn,
    completions: Sequence[Any],
    *,
    gt_from_row: GtFn = GroundTruth.from_row,
    extras: ExtrasFn | None = None,
    extra_columns: Sequence[str] = (),
    **kwargs: Any,
) -> list[RewardResult]:
    """Score a batch: parse each completion, build its ground truth from the row, call ``fn``.

    ``extra_columns`` are passed from the row to ``fn`` as keyword arguments (e.g. Co-EPG's
    ``grounding``); ``extras(text, parse_result, row)`` may compute further keyword arguments.
    """
    n = len(completions)
    rows = _rows(n, kwargs)
    out: list[RewardResult] = []
    for i, c in enumerate(completions):
        text = completion_text(c)
        row = rows[i]
        pr = _safe_parse(parse, text, row)
        gt = gt_from_row(row)
        kw: dict[str, Any] = {}
        for col in extra_columns:
            if col not in row:
                raise KeyError(f"reward needs column {col!r}; row has {sorted(row)}")
            kw[col] = row[col]
        if extras is not None:
            kw.update(extras(text, pr, row))
        out.append(fn(pr, gt, **kw))
    return out


@dataclass(frozen=True)
class TRLReward:
    """A TRL reward function ``(completions, **kwargs) -> list[float]`` named ``name``.

    When TRL passes ``log_metric``, the batch mean of each component is logged as
    ``"{name}/{component}"`` (shown next to TRL's own metrics); ``log_extra`` adds one completions
    table column per component. A picklable object rather than a closure: TRL, ``datasets`` and
    data-loader workers may send reward functions to other processes. It pickles whenever ``fn``,
    ``parse``, ``gt_from_row`` and ``extras`` do (module-level functions and :class:`FormatParser` do).
    """

    fn: Callable[..., RewardResult]
    parse: ParseFn
    name: str
    gt_from_row: GtFn = GroundTruth.from_row
    extras: ExtrasFn | None = None
    extra_columns: tuple[str, ...] = ()
    log_components: bool = True

    @property
    def __name__(self) -> str:  # TRL logs the reward under ``reward_func.__name__``
        return self.name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        results = score_completions(
            self.fn,
            self.parse,
            completions,
            gt_from_row=self.gt_from_row,
            extras=self.extras,
            extra_columns=self.extra_columns,
            **kwargs,
        )
        if self.log_components and results:
            keys = sorted({k for r in results for k in r.components})
            log_metric = kwargs.get("log_metric")
            log_extra = kwargs.get("log_extra")
            for k in keys:
                vals = [r.components.get(k, float("nan")) for r in results]
                if callable(log_metric):
                    finite = [v for v in vals if v == v]
                    if finite:
                        log_metric(f"{self.name}/{k}", sum(finite) / len(finite))
                if callable(log_extra):
                    log_extra(f"{self.name}/{k}", vals)
        return [r.total for r in results]


@dataclass(frozen=True)
class TRLComponents:
    """Companion of :class:`TRLReward` returning ``{"total": [...], component: [...]}`` per batch
    (for evaluation loops and notebooks; missing components are NaN). Picklable like :class:`TRLReward`."""

    fn: Callable[..., RewardResult]
    parse: ParseFn
    gt_from_row: GtFn = GroundTruth.from_row
    extras: ExtrasFn | None = None
    extra_columns: tuple[str, ...] = ()

    @property
    def __name__(self) -> str:
        return f"{getattr(self.fn, '__name__', type(self.fn).__name__)}_components"

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> dict[str, list[float]]:
        results = score_completions(
            self.fn,
            self.parse,
            completions,
            gt_from_row=self.gt_from_row,
            extras=self.extras,
            extra_columns=self.extra_columns,
            **kwargs,
        )
        keys = sorted({k for r in results for k in r.components})
        out = {"total": [r.total for r in results]}
        for k in keys:
            out[k] = [r.components.get(k, float("nan")) for r in results]
        return out


def as_trl_reward(
    fn: Callable[..., RewardResult],
    parse: ParseFn,
    *,
    name: str,
    gt_from_row: GtFn = GroundTruth.from_row,
    extras: ExtrasFn | None = None,
    extra_columns: Sequence[str] = (),
    log_components: bool = True,
) -> TRLReward:
    """:class:`TRLReward` scoring completions with reward ``fn`` after ``parse``, named ``name``."""
    return TRLReward(fn, parse, name, gt_from_row, extras, tuple(extra_columns), log_components)


def as_trl_components(
    fn: Callable[..., RewardResult],
    parse: ParseFn,
    *,
    gt_from_row: GtFn = GroundTruth.from_row,
    extras: ExtrasFn | None = None,
    extra_columns: Sequence[str] = (),
) -> TRLComponents:
    """:class:`TRLComponents` for reward ``fn`` (per-component lists, for evaluation loops)."""
    return TRLComponents(fn, parse, gt_from_row, extras, tuple(extra_columns))
