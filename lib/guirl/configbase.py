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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Section",
    "Registered",
    "REGISTRY_KINDS",
    "ConfigReads",
    "record_reads",
    "derived",
    "UndeclaredSectionError",
    "guard_sections",
    "require_sections",
]

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


# --------------------------------------------------------------------------------------------
# Which config keys a process reads (a training stage records its own: guirl.train.launch).
class ConfigReads:
    """The dotted config keys read from a recorded config (:func:`record_reads`) and from the
    configs derived from it with ``Config.replace``: a value read (``"sft.learning_rate"``), or a
    section read as a whole (``"sft.history_recipes"``, an optional section that is ``None``).
    Walking into a section (``cfg.sft``) is not a read of its own."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self._objects: list[BaseModel] = []  # kept alive: their ids stay theirs while recorded

    def add(self, obj: BaseModel, prefix: str) -> None:
        self._objects.append(obj)
        _RECORDED[id(obj)] = (self, prefix, obj)

    def stop(self) -> set[str]:
        """Stop recording; returns the keys read."""
        for obj in self._objects:
            entry = _RECORDED.get(id(obj))
            if entry is not None and entry[2] is obj:
                del _RECORDED[id(obj)]
        self._objects.clear()
        return set(self.keys)


_RECORDED: dict[int, tuple[ConfigReads, str, BaseModel]] = {}
_GUARDED: dict[int, tuple[frozenset[str], str, BaseModel]] = {}


class UndeclaredSectionError(RuntimeError):
    """Code read a config section that the notebook running it does not declare it reads
    (``metadata.guirl.config``): one line naming the section, the notebook and the fix."""


def _recording_getattribute(self: BaseModel, name: str) -> Any:
    if _GUARDED and name[:1] != "_":
        guard = _GUARDED.get(id(self))
        if guard is not None and guard[2] is self and name in type(self).__pydantic_fields__ and name not in guard[0]:
            raise UndeclaredSectionError(
                f"{guard[1]} reads config section {name!r} but does not declare it; add {name!r} to its "
                f'metadata {{"guirl": {{"config": [...]}}}} (the sections whose changes rerun it)'
            )
    value = object.__getattribute__(self, name)
    if _RECORDED and name[:1] != "_":
        entry = _RECORDED.get(id(self))
        if entry is not None and entry[2] is self and name in type(self).__pydantic_fields__:
            log, prefix, _ = entry
            if isinstance(value, BaseModel):
                if id(value) not in _RECORDED:
                    log.add(value, f"{prefix}{name}.")
            else:
                log.keys.add(prefix + name)
    return value


def _install(cls: type) -> None:
    for c in (Section, cls):
        if c.__dict__.get("__getattribute__") is not _recording_getattribute:
            c.__getattribute__ = _recording_getattribute  # type: ignore[method-assign]


def guard_sections(cfg: BaseModel, sections: Iterable[str], where: str) -> BaseModel:
    """Make ``cfg`` (and the configs derived from it: :func:`derived`) refuse to give a top-level
    key outside ``sections`` (and ``profile``): :class:`UndeclaredSectionError` naming ``where``
    (the notebook). A notebook's stamp covers only the sections it declares, so reading another
    one is an error, never a stale reuse. Returns ``cfg``."""
    _install(type(cfg))
    _GUARDED[id(cfg)] = (frozenset({"profile", *sections}), where, cfg)
    return cfg


def require_sections(cfg: BaseModel, sections: Iterable[str], what: str) -> None:
    """When ``cfg`` is guarded (:func:`guard_sections`), raise :class:`UndeclaredSectionError` for
    a section of ``sections`` its notebook does not declare: ``what`` (a training stage the
    notebook starts) reads it in a process of its own, where the guard cannot see it."""
    guard = _GUARDED.get(id(cfg))
    if guard is None or guard[2] is not cfg:
        return
    missing = sorted(set(sections) - guard[0])
    if missing:
        raise UndeclaredSectionError(
            f"{guard[1]} starts {what}, which reads config section(s) {', '.join(map(repr, missing))} that the "
            f'notebook does not declare; add them to its metadata {{"guirl": {{"config": [...]}}}}'
        )


def record_reads(cfg: BaseModel) -> ConfigReads:
    """Start recording the keys read from ``cfg`` (and from its sections and the configs derived
    from it: :func:`derived`); :meth:`ConfigReads.stop` ends it and returns them. Several configs
    may be recorded at once, each into its own log."""
    _install(type(cfg))
    log = ConfigReads()
    log.add(cfg, "")
    return log


def derived(source: BaseModel, new: BaseModel) -> None:
    """``new`` was derived from ``source`` (``Config.replace``): when ``source`` is recorded, the
    keys read from ``new`` go to the same log."""
    entry = _RECORDED.get(id(source))
    if entry is not None and entry[2] is source and entry[1] == "":
        entry[0].add(new, "")
    guard = _GUARDED.get(id(source))
    if guard is not None and guard[2] is source:
        _GUARDED[id(new)] = (guard[0], guard[1], new)
