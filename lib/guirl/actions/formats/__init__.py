"""Parsers and formatters of every action output format of the five papers, by name.

Usage::

    from guirl.actions.formats import FormatContext, get_format
    fmt = get_format("ccpo")
    ctx = FormatContext(width=1080, height=2400,           # + the resized image size, or the
                        min_pixels=3136, max_pixels=12845056)  # model's pixel budget (no default)
    res = fmt.parse(model_text, ctx)                        # ParseResult, never raises
    text = fmt.format(action, ctx, thought="...")           # raises ActionError if inexpressible

Registry names (:data:`FORMAT_NAMES`): ccpo, qwen_mobile_use, agentcpm, uitars, osatlas, aguvis,
odyssey, osgenesis, coepg_planner, coepg_grounder, ces_executor, androidlong, coat, seeclick.

``FormatContext(strict=True, pipeline=...)`` reads an output exactly as an original evaluation
pipeline does (each format's docstring lists its pipelines); the evaluator protocols choose them
(:meth:`guirl.metrics.protocols.Protocol.parse`). The CES
Coordinator / State Tracker return text, not an action: their parsers are CES's own
(:mod:`guirl.methods.ces.roles`).
"""

from __future__ import annotations

from guirl.actions.formats._base import OUTSIDE, ActionFormat, FormatContext, direction_from_points
from guirl.actions.formats.agentcpm import AgentCPMFormat
from guirl.actions.formats.aguvis import AguvisFormat
from guirl.actions.formats.androidlong import AndroidLongFormat
from guirl.actions.formats.ces import CESExecutorFormat
from guirl.actions.formats.coat import CoATFormat
from guirl.actions.formats.coepg import CoEPGGrounderFormat, CoEPGPlannerFormat
from guirl.actions.formats.mobile_use import CCPOFormat, QwenMobileUseFormat
from guirl.actions.formats.odyssey import OdysseyFormat
from guirl.actions.formats.osatlas import OSAtlasFormat
from guirl.actions.formats.osgenesis import OSGenesisFormat
from guirl.actions.formats.seeclick import SeeClickFormat
from guirl.actions.formats.uitars import UITarsFormat

_REGISTRY: dict[str, ActionFormat] = {
    f.name: f
    for f in (
        CCPOFormat(),
        QwenMobileUseFormat(),
        AgentCPMFormat(),
        UITarsFormat(),
        OSAtlasFormat(),
        AguvisFormat(),
        OdysseyFormat(),
        OSGenesisFormat(),
        CoEPGPlannerFormat(),
        CoEPGGrounderFormat(),
        CESExecutorFormat(),
        AndroidLongFormat(),
        CoATFormat(),
        SeeClickFormat(),
    )
}

#: Every registered format name.
FORMAT_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get_format(name: str) -> ActionFormat:
    """The :class:`ActionFormat` registered under ``name``; ``KeyError`` naming the choices."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown action format {name!r}; registered: {list(FORMAT_NAMES)}") from None


__all__ = [
    "ActionFormat",
    "FormatContext",
    "FORMAT_NAMES",
    "OUTSIDE",
    "direction_from_points",
    "get_format",
]
