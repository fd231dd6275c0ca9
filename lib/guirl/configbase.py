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

**Stage sections.** A paper trains its stages with its own values of kernel keys (Co-EPG's SFT
learning rate, CES's Coordinator batch). A section that holds such values declares the kernel
section it mirrors (``mirrors = "sft"``); each of its fields named like a field of that kernel
section is the paper's value of that kernel key (``coepg.sft.learning_rate`` is Co-EPG's
``sft.learning_rate``), every other field is the paper's own and is listed in ``own``::

    class CoEPGSFT(Section):
        mirrors: ClassVar[str] = "sft"
        own: ClassVar[tuple[str, ...]] = ()
        learning_rate: float = Field(default=1e-6, gt=0, le=MAX_LR)  # Co-EPG App. B

:func:`stage_updates` turns such a section into the ``Config.replace`` updates of a stage, and
:func:`guirl.config.load_config` resolves the two spellings with the one precedence rule of every
notebook (profile < experiment < overlay < override): a kernel key set in a later layer than
the paper's value wins and is written into the stage section, so the saved config shows the
value that ran.

**Recipes.** A method's ``recipe(kind, data_source)`` (``methods/<paper>/config.py``) gives its
values per recipe kind (:data:`RECIPE_KINDS`; a profile names its kind with ``recipe:``) as dotted
keys; :data:`PROFILE` as a value means "the profile's own value of the mirrored kernel key".

**Bounds.** Every numeric value has an upper bound where a larger one cannot be meant (the
``MAX_*`` constants below, far above any paper's value); a value beyond one is refused in one
line naming the key and the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Section",
    "Registered",
    "REGISTRY_KINDS",
    "RECIPE_KINDS",
    "PROFILE",
    "RunConfig",
    "Sampling",
    "StageAdapter",
    "stage_updates",
    "mirrored_fields",
    "MAX_STEPS",
    "MAX_COUNT",
    "MAX_BATCH",
    "MAX_TOKENS",
    "MAX_PIXELS",
    "MAX_SIDE",
    "MAX_LR",
    "MAX_EPOCHS",
    "MAX_SEED",
    "MAX_THREADS",
    "MAX_PROCESSES",
    "MAX_RUNS",
    "MAX_TEMPERATURE",
    "MAX_COEF",
    "MAX_RANK",
    "MAX_TURNS",
    "LR_SCHEDULERS",
    "HISTORY_PATTERN",
    "ConfigReads",
    "record_reads",
    "derived",
    "UndeclaredSectionError",
    "guard_sections",
    "require_sections",
]

#: The learning-rate schedules of the SFT engine (``sft.lr_scheduler_type``, transformers' names).
LR_SCHEDULERS: tuple[str, ...] = ("cosine", "linear", "constant_with_warmup")
#: A history setting: ``n`` previous actions (0..5) as text (``nA``) or with screenshots (``nAO``), CCPO Table 2.
HISTORY_PATTERN = r"^[0-5](A|AO)$"

# Upper bounds of numeric config values: a larger value cannot be meant (a typo, a unit slip, a
# missing decimal point); each is far above every paper's value, and a value beyond one is refused
# with one line naming the key and the limit.
MAX_STEPS = 10_000_000  # optimizer, RL, evaluation or data steps (CCPO's RL: about 1,300)
MAX_COUNT = 10_000_000  # tasks, samples, records, bootstrap resamples
MAX_BATCH = 65_536  # batch sizes, groups, generations, accumulation, concurrency
MAX_TOKENS = 1_048_576  # tokens generated per answer (AndroidLong: 2,048)
MAX_PIXELS = 16_384 * 16_384  # an image's pixel budget (the paper profiles: 12,845,056)
MAX_SIDE = 16_384  # a screen side in px (AndroidControl: 2,400)
MAX_LR = 1.0  # learning rates (the papers: 1e-6 to 3e-4)
MAX_EPOCHS = 10_000  # passes over a data set (the papers: 1 to 10)
MAX_SEED = 2**31 - 1  # seeds: numpy's legacy seeding (transformers.set_seed) takes < 2**32, and studies add offsets
MAX_THREADS = 4_096  # torch CPU threads
MAX_PROCESSES = 65_536  # training processes (GPUs) of one stage
MAX_RUNS = 1_000  # seeds, runs, repeats, iterations, pool members
MAX_TEMPERATURE = 100.0  # sampling temperature
MAX_COEF = 1_000_000.0  # loss and reward coefficients, gradient-norm limits, LoRA alpha
MAX_RANK = 65_536  # LoRA rank, pixel margins
MAX_TURNS = 100_000  # turns of one online episode (AndroidLong: 100)

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

    #: The kernel section this one holds a paper's stage values of (``"sft"``, ``"rl"``, ``"lora"``,
    #: ``"model"``, ``"eval"``, ``"runtime"``); ``None``: a plain section (module doc).
    mirrors: ClassVar[str | None] = None
    #: With ``mirrors``: the fields that are the paper's own (no kernel key of that name).
    own: ClassVar[tuple[str, ...]] = ()


def mirrored_fields(section: type[Section] | Section) -> list[str]:
    """The fields of a stage section that mirror a kernel key: every field not in ``own`` (a stage
    section nested in another, such as ``ces.warmup.lora``, is listed in its parent's ``own``);
    ``[]`` for a plain section."""
    cls = section if isinstance(section, type) else type(section)
    if cls.mirrors is None:
        return []
    return [name for name in cls.model_fields if name not in cls.own]


def stage_updates(section: Section) -> dict[str, Any]:
    """The ``Config.replace`` updates of a stage section: ``{"<mirrors>.<field>": value}`` for every
    mirrored field, and the same for each stage section nested in it (``ces.warmup.lora`` ->
    ``lora.*``). A plain section gives ``{}``."""
    out: dict[str, Any] = {}
    cls = type(section)
    if cls.mirrors is None:
        return out
    for name in cls.model_fields:
        value = getattr(section, name)
        if isinstance(value, Section) and value.mirrors is not None:
            out.update(stage_updates(value))
        elif name not in cls.own:
            out[f"{cls.mirrors}.{name}"] = value.model_dump() if isinstance(value, BaseModel) else value
    return out


class StageAdapter(Section):
    """Whether a paper's fine-tuning stage trains a LoRA adapter: the stage value of the kernel key
    ``lora.enabled`` (the adapter's shape stays ``lora.r`` / ``alpha`` / ``dropout``). A paper that
    names no adapter trains all parameters (``enabled: false``), whatever the profile's ``lora``
    (the paper profiles' ``lora`` is CCPO Table 7's, notebook 01's)."""

    mirrors: ClassVar[str] = "lora"
    enabled: bool = False


class Sampling(Section):
    """How a policy decodes: greedy (``do_sample: false``) or sampled at ``temperature`` with
    nucleus ``top_p`` (the arguments of ``Policy.complete``: :meth:`kwargs`)."""

    do_sample: bool = True
    temperature: float = Field(default=1.0, gt=0, le=MAX_TEMPERATURE)
    top_p: float = Field(default=1.0, gt=0, le=1)

    def kwargs(self) -> dict[str, Any]:
        """``{"do_sample": ..., "temperature": ..., "top_p": ...}`` for ``Policy.complete``."""
        return {"do_sample": self.do_sample, "temperature": self.temperature, "top_p": self.top_p}


#: The recipe kinds a profile can name (``recipe:``): ``paper`` (the papers' values, the GPU
#: profiles) and ``tiny`` (the CPU sizes of the tiny profile).
RECIPE_KINDS: tuple[str, ...] = ("paper", "tiny")


class _Profile:
    """The value :data:`PROFILE` (a singleton)."""

    def __repr__(self) -> str:
        return "PROFILE"

    def __copy__(self) -> _Profile:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Profile:
        return self

    def __reduce__(self) -> str:
        return "PROFILE"


#: A recipe value meaning "the profile's own value of the kernel key this stage field mirrors"
#: (a tiny recipe says so where the tiny profile's sizes apply to the paper's stages too).
PROFILE: Any = _Profile()


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
