"""The base class of every config section (base layer: kernels and methods may import it).

:mod:`guirl.config` assembles the run config from kernel sections and the methods' own sections
(``Method.config_section``); every section forbids unknown keys and validates on assignment, so
that a typo in a yaml file is an error naming the key, never a silently ignored value.

A ``str`` field whose value names something registered (an output format, an evaluation
protocol, a data source, a method, a reward) says so with :class:`Registered` instead of a
hand-copied list of names::

    class MySection(Section):
        reward: Annotated[str, Registered("reward")] = "ccpo"

:mod:`guirl.config` turns it into ``Literal[<every registered name>]`` when it builds the config
schema, so every registered name is selectable and any other value is an error naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["Section", "Registered", "REGISTRY_KINDS", "RunConfig"]

#: The registries a field can draw its names from (resolved by :mod:`guirl.config`):
#: ``format`` (``guirl.actions.formats.FORMAT_NAMES``), ``protocol``
#: (``guirl.metrics.protocols.PROTOCOLS``), ``data_source`` (``minigui`` and the loaders of
#: ``guirl.data.loaders.LOADERS``), ``method`` (``guirl.methods.names()``), ``reward``
#: (``guirl.methods.reward_names()``), ``rl_role`` (``guirl.methods.role_names()``: ``grpo`` and every
#: role of a method's ``Method.hooks``) and ``prompt`` (``guirl.prompts.system_prompt_names()``).
REGISTRY_KINDS: tuple[str, ...] = ("format", "protocol", "data_source", "method", "reward", "rl_role", "prompt")


class Section(BaseModel):
    """A config section: unknown keys are errors; assignments are validated; a float is finite
    (``.inf`` / ``.nan`` make no learning rate, coefficient or budget)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


@dataclass(frozen=True)
class Registered:
    """Field metadata: the value is a name from registry ``kind`` (one of :data:`REGISTRY_KINDS`).

    Use it on a ``str`` (or ``str | None``) field inside ``typing.Annotated``."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in REGISTRY_KINDS:
            raise ValueError(f"Registered({self.kind!r}): unknown registry; use one of {', '.join(REGISTRY_KINDS)}")


class RunConfig(Protocol):
    """What kernels and methods read of a resolved run config (:class:`guirl.config.Config`, top layer):
    its sections as attributes, :meth:`replace`, :meth:`method_section` and :meth:`hash`. Kernels and
    methods annotate with this protocol instead of importing :mod:`guirl.config`, which imports the
    method registry (and so every method and kernel): the layering allows no import circle, type-only
    ones included (``tests/test_layout.py``)."""

    profile: str
    seed: int
    model: Any
    data: Any
    lora: Any
    grounding: Any
    sft: Any
    eval: Any
    runtime: Any
    rl: Any
    analysis: Any

    def replace(self, updates: Mapping[str, Any]) -> Any:
        """A validated copy with the dotted keys of ``updates`` replaced."""
        ...

    def method_section(self, name: str) -> Any:
        """``cfg.<name>``, the section of method ``name`` (an error saying how to add it when unset)."""
        ...

    def hash(self) -> str:
        """A short sha256 of the canonical JSON."""
        ...
