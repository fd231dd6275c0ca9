"""Canonical actions, coordinate units and the parsers/formatters of every paper's output format."""

from guirl.actions.coords import CoordSpace
from guirl.actions.formats import FORMAT_NAMES, ActionFormat, FormatContext, get_format
from guirl.actions.types import (
    COORDINATE_TYPES,
    TEXT_TYPES,
    Action,
    ActionError,
    ActionType,
    ParseResult,
)

__all__ = [
    "Action",
    "ActionError",
    "ActionType",
    "ParseResult",
    "COORDINATE_TYPES",
    "TEXT_TYPES",
    "CoordSpace",
    "ActionFormat",
    "FormatContext",
    "FORMAT_NAMES",
    "get_format",
]
