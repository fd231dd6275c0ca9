"""Typed run configuration: one profile yaml, one optional experiment yaml, command-line overrides.

``load_config(profile, experiment, overrides)`` merges, in this order (later wins)::

    configs/profiles/<profile>.yaml  <  configs/experiments/<experiment>.yaml  <  overrides

and validates the result into a :class:`Config` (pydantic v2, unknown keys forbidden in every
section). Overrides are ``"dotted.key=value"`` strings (or a dict with dotted or nested keys);
values are parsed as YAML scalars, so ``sft.learning_rate=1e-4`` is a float, ``seed=1`` an int,
``runtime.bf16=false`` a bool and ``model.path=tiny`` a string.

Every problem raises :class:`ConfigError` with a one-line message of the form
``<file>: <dotted.key>: <problem>; <how to fix it>``, where ``<file>`` is the yaml file (or
the override) that supplied the bad value.

Sections are kept flat so that a notebook's papermill parameters can name any field as
``section.field``. Later work adds sections (``ccpo``, ``coepg``, ``ces``) as new fields of
:class:`Config` with their own section models.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from guirl.configbase import Section
from guirl.paths import configs_dir, repo_root, resolve_repo_path

__all__ = [
    "ConfigError",
    "Config",
    "ModelConfig",
    "DataConfig",
    "LoraConfig",
    "SFTConfig",
    "EvalConfig",
    "RuntimeConfig",
    "DATA_SOURCES",
    "EVAL_PROTOCOLS",
    "load_config",
    "known_profiles",
    "known_experiments",
    "parse_scalar",
    "parse_override",
    "format_override",
    "resolve_repo_path",
    "flatten",
]

DATA_SOURCES = (
    "minigui",
    "androidcontrol",
    "guiodyssey",
    "aitz",
    "amex",
    "mind2web",
    "uis1",
    "guir1",
)
# Click/type/scroll matching conventions of the public evaluators (see
# /work/shared/notes/stack-facts.md, "Metric conventions"): the metrics module implements one
# protocol per name.
EVAL_PROTOCOLS = ("ccpo", "agentcpm", "guiodyssey", "uis1", "guir1", "ces")


class ConfigError(ValueError):
    """A bad configuration. ``str(err)`` is one line: ``FILE: KEY: problem; fix``."""

    def __init__(self, file: str | Path, key: str, problem: str, fix: str) -> None:
        self.file = str(file)
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(f"{self.file}: {key}: {problem}; {fix}")


# --------------------------------------------------------------------------------------------
# YAML: PyYAML follows YAML 1.1, where `1e-4` (no dot) is a *string*. Configs are full of such
# learning rates, so the loader used here also resolves that form as a float.
class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-4``-style numbers as floats."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_scalar(text: str) -> Any:
    """Parse one override value as YAML: ``"1e-4"`` -> 1e-4, ``"3"`` -> 3, ``"false"`` -> False,
    ``"null"`` -> None, ``"[1, 2]"`` -> [1, 2], anything else -> the string itself."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return text


def parse_override(item: str) -> tuple[str, Any]:
    """Split ``"dotted.key=value"`` into the key and the parsed value (see :func:`parse_scalar`)."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(
            "overrides",
            str(item),
            "an override must look like KEY=VALUE",
            "write it as a dotted key and a value, e.g. sft.learning_rate=1e-4",
        )
    key, _, value = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(
            "overrides",
            item,
            "empty key or empty part in a dotted key",
            "write it as a dotted key and a value, e.g. sft.learning_rate=1e-4",
        )
    return key, parse_scalar(value.strip())


def format_override(key: str, value: Any) -> str:
    """The inverse of :func:`parse_override`: ``format_override(*parse_override(s))`` parses back
    to the same key and value (strings that would parse as something else, or that carry
    leading/trailing white space which :func:`parse_override` strips, are JSON-quoted)."""
    if isinstance(value, str) and value.strip() == value and parse_scalar(value) == value and "\n" not in value:
        return f"{key}={value}"
    return f"{key}={json.dumps(value)}"


# --------------------------------------------------------------------------------------------
# Sections
_Section = Section


class ModelConfig(_Section):
    """The policy model. ``path: tiny`` is the offline tiny Qwen2.5-VL built by
    ``guirl.models.build_tiny_model``; anything else is a local folder with a real checkpoint
    (the hub is unreachable here; never a hub id). Pixel budgets are in pixels (Qwen2.5-VL
    processor ``min_pixels`` / ``max_pixels``; one image token covers 28x28 pixels)."""

    path: str = Field(min_length=1)
    torch_dtype: Literal["float32", "bfloat16", "float16", "auto"]
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2"]
    min_pixels: int = Field(gt=0)
    max_pixels: int = Field(gt=0)

    @model_validator(mode="after")
    def _pixels_ordered(self) -> ModelConfig:
        if self.min_pixels > self.max_pixels:
            raise ValueError(
                f"min_pixels: {self.min_pixels} exceeds max_pixels ({self.max_pixels}) -- make min_pixels <= max_pixels"
            )
        return self

    @property
    def is_tiny(self) -> bool:
        """True for the offline tiny model (``path == "tiny"``)."""
        return self.path == "tiny"

    def local_dir(self) -> Path:
        """The checkpoint folder of a real model (relative paths are relative to the repo)."""
        if self.is_tiny:
            raise ValueError("model.path is 'tiny': build it with guirl.models.build_tiny_model")
        return resolve_repo_path(self.path)


class DataConfig(_Section):
    """Which data set. ``path`` is a local folder (relative to the repo) and may be left out
    for MiniGUI, which is generated. The MiniGUI sizes are numbers of tasks and the screen size
    in pixels."""

    source: Literal[DATA_SOURCES]  # type: ignore[valid-type]
    path: str | None = None
    n_train_tasks: int = Field(ge=1)
    n_test_tasks: int = Field(ge=1)
    width: int = Field(ge=28)
    height: int = Field(ge=28)

    @model_validator(mode="after")
    def _path_given(self) -> DataConfig:
        if self.source != "minigui" and not self.path:
            raise ValueError(
                f"path: source {self.source!r} needs a data folder"
                " -- set data.path to the local folder with the data set"
            )
        return self


class LoraConfig(_Section):
    """LoRA adapter on the language model (PEFT ``LoraConfig``: ``r``, ``lora_alpha``,
    ``lora_dropout``). ``enabled: false`` trains all parameters instead: the tiny profile's
    model starts from random weights, where a low-rank update of a pretrained model (LoRA's
    premise) does not apply."""

    enabled: bool
    r: int = Field(ge=1)
    alpha: float = Field(gt=0)
    dropout: float = Field(ge=0.0, lt=1.0)


HISTORY_PATTERN = r"^[0-5](A|AO)$"


class GroundingConfig(_Section):
    """Grounding pre-training (the AgentCPM-GUI Stage I analogue) before SFT: full-parameter
    training on text-to-point / function-to-point / box-to-text samples of MiniGUI screens.
    The tiny profile needs it (its model starts from random weights); paper profiles start
    from a pretrained checkpoint and set ``enabled: false``."""

    enabled: bool
    learning_rate: float = Field(gt=0)
    max_steps: int = Field(ge=1)
    per_device_batch_size: int = Field(ge=1)


class SFTConfig(_Section):
    """Supervised fine-tuning (TRL ``SFTTrainer`` + PEFT LoRA). ``max_steps`` (when set) wins
    over ``epochs``, as in ``transformers.TrainingArguments``. ``histories``: the history settings
    trained (one record per step and setting), e.g. ``["1AO", "3AO"]``: ``n``
    previous actions (0..5), as text only (``nA``) or with their screenshots (``nAO``), CCPO
    Table 2. ``use_step_instruction``: add the step's low-level instruction to the prompt (the
    AndroidControl "Low" setting; online play never has it)."""

    learning_rate: float = Field(gt=0)
    epochs: float = Field(gt=0)
    max_steps: int | None = Field(default=None, ge=1)
    per_device_batch_size: int = Field(ge=1)
    grad_accum: int = Field(ge=1)
    warmup_ratio: float = Field(ge=0.0, lt=1.0)
    save_steps: int = Field(ge=1)
    histories: list[Annotated[str, StringConstraints(pattern=HISTORY_PATTERN)]] = Field(min_length=1)
    use_step_instruction: bool
    lr_scheduler_type: Literal["cosine", "linear", "constant_with_warmup"]
    output_format: Literal["ccpo", "qwen_mobile_use", "agentcpm"]


class EvalConfig(_Section):
    """Evaluation. ``protocol`` names the matching conventions (one of :data:`EVAL_PROTOCOLS`);
    ``n_tasks`` and ``max_turns`` are for online MiniGUI episodes; results are reported over
    ``n_seeds`` seeds with ``bootstrap_samples`` bootstrap resamples for the intervals."""

    protocol: Literal[EVAL_PROTOCOLS]  # type: ignore[valid-type]
    batch_size: int = Field(ge=1)
    max_new_tokens: int = Field(ge=1)
    n_tasks: int = Field(ge=1)
    max_turns: int = Field(ge=1)
    n_seeds: int = Field(default=3, ge=1)
    bootstrap_samples: int = Field(ge=1)
    max_test_steps: int | None = Field(default=None, ge=1)  # cap per split for offline eval (CPU budgets)
    histories: list[Annotated[str, StringConstraints(pattern=HISTORY_PATTERN)]] = Field(min_length=1)


class RuntimeConfig(_Section):
    """Where and how to run. ``accelerate_config`` / ``deepspeed_config`` are files in the
    repository (relative paths are relative to the repo root) and must exist."""

    device: Literal["cpu", "cuda"]
    accelerate_config: str
    deepspeed_config: str | None = None
    num_processes: int = Field(ge=1)
    bf16: bool

    @model_validator(mode="after")
    def _files_exist(self) -> RuntimeConfig:
        for key in ("accelerate_config", "deepspeed_config"):
            value = getattr(self, key)
            if value is not None and not resolve_repo_path(value).is_file():
                raise ValueError(
                    f"{key}: file not found: {value} -- give a path relative to the repository root (see configs/)"
                )
        return self


class Config(BaseModel):
    """A whole, validated run configuration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    profile: str = Field(min_length=1)
    seed: int
    model: ModelConfig
    data: DataConfig
    lora: LoraConfig
    grounding: GroundingConfig
    sft: SFTConfig
    eval: EvalConfig
    runtime: RuntimeConfig

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible nested dict (sections in declaration order)."""
        return self.model_dump(mode="json")

    def to_flat(self) -> dict[str, Any]:
        """``{"seed": 0, "model.path": "tiny", "sft.learning_rate": 0.001, ...}``."""
        return flatten(self.to_dict())

    def hash(self) -> str:
        """First 12 hex digits of the sha256 of the canonical JSON (sorted keys, no spaces)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]

    def to_yaml(self) -> str:
        """The resolved config as YAML, with its hash in a header comment (deterministic)."""
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)
        return f"# resolved guirl config; hash {self.hash()}\n{body}"

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_yaml` to ``path`` (parents created); returns the path. The file loads
        back with ``load_config(path)``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml(), encoding="utf-8")
        return path


# --------------------------------------------------------------------------------------------
# Loading
def known_profiles() -> list[str]:
    """Profile names: the stems of ``configs/profiles/*.yaml``, sorted."""
    return sorted(p.stem for p in (configs_dir() / "profiles").glob("*.yaml"))


def known_experiments() -> list[str]:
    """Experiment names: the stems of ``configs/experiments/*.yaml``, sorted."""
    return sorted(p.stem for p in (configs_dir() / "experiments").glob("*.yaml"))


def _looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def _read_yaml(path: Path, key: str, missing_fix: str) -> dict[str, Any]:
    shown = _display(path)
    if not path.is_file():
        raise ConfigError(shown, key, "file not found", missing_fix)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(shown, key, f"not valid YAML{where}", "fix the syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(shown, key, f"top level is a {type(data).__name__}", "write a mapping of sections")
    return _stringify_keys(data)


def _stringify_keys(data: Any) -> Any:
    if isinstance(data, dict):
        return {str(k): _stringify_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_stringify_keys(v) for v in data]
    return data


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (mappings only; lists stay values)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _merge(
    base: dict[str, Any], new: Mapping[str, Any], source: str, provenance: dict[str, str], prefix: str = ""
) -> None:
    """Deep-merge ``new`` into ``base`` in place, recording which source set each key."""
    for key, value in new.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            provenance.setdefault(dotted, source)
            _merge(base[key], value, source, provenance, dotted + ".")
        else:
            base[key] = copy.deepcopy(value)
            for stale in [k for k in provenance if k == dotted or k.startswith(dotted + ".")]:
                del provenance[stale]
            # Re-inserted keys go last: the dict's order is the order keys were last set.
            provenance[dotted] = source
            if isinstance(value, Mapping):
                for sub in flatten(value, dotted + "."):
                    provenance[sub] = source


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def _overrides_to_items(overrides: Mapping[str, Any] | Sequence[str] | None) -> list[tuple[str, Any, str]]:
    """(dotted key, value, how it was written) for every override."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        overrides = [overrides]
    items: list[tuple[str, Any, str]] = []
    if isinstance(overrides, Mapping):
        for key, value in flatten({str(k): v for k, v in overrides.items()}).items():
            items.append((key, value, format_override(key, value)))
        return items
    for item in overrides:
        key, value = parse_override(item)
        items.append((key, value, item))
    return items


def _describe_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        parts = [_describe_type(a) for a in typing.get_args(annotation)]
        return " or ".join(parts)
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping (section)"
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _field_at(loc: Sequence[str]) -> tuple[type[BaseModel] | None, str | None]:
    """The model class that owns the last element of ``loc`` and that element's name."""
    model: type[BaseModel] | None = Config
    for part in loc[:-1]:
        if model is None or part not in model.model_fields:
            return None, None
        ann = model.model_fields[part].annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return model, (loc[-1] if loc else None)


def _source_of(dotted: str, provenance: Mapping[str, str], default: str) -> str:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in provenance:
            return provenance[key]
    # A whole-section problem: blame the last source that touched that section.
    inside = [src for key, src in provenance.items() if key.startswith(dotted + ".")]
    return inside[-1] if inside else default


def _to_config_error(err: ValidationError, provenance: Mapping[str, str], default: str) -> ConfigError:
    errors = err.errors(include_url=False)
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    dotted = ".".join(loc) if loc else "<top>"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    owner, name = _field_at(loc)
    kind = first["type"]
    if kind == "extra_forbidden" and owner is not None:
        known = list(owner.model_fields)
        section = ".".join(loc[:-1])
        close = difflib.get_close_matches(name or "", known, n=1, cutoff=0.5)
        where = f" in {section}" if section else ""
        fix = (
            f"did you mean '{section + '.' if section else ''}{close[0]}'?"
            if close
            else f"remove it or rename it; known keys{where}: {', '.join(known)}"
        )
        return ConfigError(_source_of(dotted, provenance, default), dotted, "unknown key" + more, fix)
    if kind == "missing":
        return ConfigError(
            default,
            dotted,
            "missing required key" + more,
            f"add {dotted} to the profile yaml (or pass --override {dotted}=VALUE)",
        )
    expected = ""
    if owner is not None and name in owner.model_fields:
        expected = _describe_type(owner.model_fields[name].annotation)
    msg = first["msg"].removeprefix("Value error, ")
    if kind == "value_error":
        # Cross-field checks of a section say "key: problem -- fix"; blame the source that last
        # touched the section (the value that made the combination invalid).
        inside = [src for key, src in provenance.items() if key.startswith(dotted + ".")]
        source = inside[-1] if inside else _source_of(dotted, provenance, default)
        sub, sep, rest = msg.partition(": ")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", sub):
            dotted, msg = f"{dotted}.{sub}", rest
        problem, _, fix = msg.partition(" -- ")
        return ConfigError(source, dotted, problem + more, fix or f"fix {dotted}")
    got = f" (got {first['input']!r})" if "input" in first else ""
    fix = f"set {dotted} to {expected}" if expected else f"fix {dotted}"
    problem = "wrong type or value: " + msg + got + more
    return ConfigError(_source_of(dotted, provenance, default), dotted, problem, fix)


def load_config(
    profile: str | Path,
    experiment: str | Path | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
) -> Config:
    """Merge ``profile`` < ``experiment`` < ``overrides`` and validate.

    ``profile`` is a name from ``configs/profiles`` (``"tiny"``, ``"paper-3b"``, ...) or a path
    to a yaml file (for instance a saved, resolved ``config.yaml``). ``experiment`` is ``None``,
    a name from ``configs/experiments`` or a path. ``overrides``: ``["sft.learning_rate=1e-4",
    "seed=1"]`` or ``{"sft.learning_rate": 1e-4}`` / ``{"sft": {"learning_rate": 1e-4}}``.
    Raises :class:`ConfigError` (one line naming the file and the dotted key).
    """
    profile = str(profile)
    if _looks_like_path(profile):
        profile_path = Path(profile).expanduser()
        profile_name = profile_path.stem
        missing_fix = "check the path, or pass a profile name: " + ", ".join(known_profiles())
    else:
        profile_path = configs_dir() / "profiles" / f"{profile}.yaml"
        profile_name = profile
        if not profile_path.is_file():
            close = difflib.get_close_matches(profile, known_profiles(), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(
                _display(profile_path),
                "profile",
                f"unknown profile {profile!r}",
                f"{hint}known profiles: {', '.join(known_profiles())}",
            )
        missing_fix = "known profiles: " + ", ".join(known_profiles())
    source = _display(profile_path)
    data = _read_yaml(profile_path, "profile", missing_fix)
    provenance: dict[str, str] = {}
    base: dict[str, Any] = {}
    _merge(base, data, source, provenance)
    if "profile" in data and not _looks_like_path(profile) and data["profile"] != profile_name:
        raise ConfigError(
            source,
            "profile",
            f"says {data['profile']!r} but the file is {profile_name!r}",
            "remove the profile key; the file name is the profile name",
        )
    base.setdefault("profile", profile_name)
    provenance.setdefault("profile", source)

    if experiment is not None:
        experiment = str(experiment)
        if _looks_like_path(experiment):
            exp_path = Path(experiment).expanduser()
        else:
            exp_path = configs_dir() / "experiments" / f"{experiment}.yaml"
        exp = _read_yaml(
            exp_path,
            "experiment",
            "known experiments: " + (", ".join(known_experiments()) or "(none)") + "; or pass a path to a yaml file",
        )
        if "profile" in exp:
            raise ConfigError(
                _display(exp_path),
                "profile",
                "an experiment cannot set the profile",
                "remove the key and pass --profile instead",
            )
        _merge(base, exp, _display(exp_path), provenance)

    for key, value, written in _overrides_to_items(overrides):
        if key == "profile":
            raise ConfigError(
                f"override {written}", "profile", "the profile cannot be overridden", "pass --profile NAME instead"
            )
        _merge(base, _nest(key, value), f"override {written}", provenance)

    try:
        return Config.model_validate(base)
    except ValidationError as err:
        raise _to_config_error(err, provenance, source) from None
