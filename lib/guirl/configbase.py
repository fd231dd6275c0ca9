"""The base class of every config section (base layer: kernels and methods may import it).

:mod:`guirl.config` assembles the run config from kernel sections and the methods' own sections
(``Method.config_section``); every section forbids unknown keys and validates on assignment, so
that a typo in a yaml file is an error naming the key, never a silently ignored value.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Section"]


class Section(BaseModel):
    """A config section: unknown keys are errors; assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
