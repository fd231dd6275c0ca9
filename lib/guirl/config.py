"""Typed run configuration: a profile, an optional experiment, overlays, command-line overrides.

``load_config(profile, experiment, overrides, overlays=...)`` merges, in this order (later wins)::

    the methods' recipes (methods/<paper>/config.py, the profile's ``recipe`` kind) + configs/profiles/<profile>.yaml
        <  configs/experiments/<experiment>.yaml  <  configs/overlays/<overlay>.yaml (in the order given)
        <  overrides

and validates the result into a :class:`Config` (pydantic v2, unknown keys forbidden in every
section). Overrides are ``"dotted.key=value"`` strings (or a dict with dotted or nested keys);
values are parsed as YAML scalars, so ``sft.learning_rate=1e-4`` is a float, ``seed=1`` an int,
``runtime.bf16=false`` a bool and ``model.path=tiny`` a string. Any yaml file may start from
another one with ``extends: <path relative to its folder>`` (the paper profiles share
``configs/profiles/base/paper.yaml``); the file that extends wins.

Every problem raises :class:`ConfigError` with a one-line message of the form
``<file>: <dotted.key>: <problem>; <how to fix it>``, where ``<file>`` is the yaml file (or
the override) that supplied the bad value.

Allowed values come from the registries, never from copied lists: a field marked
``Registered(kind)`` (:mod:`guirl.configbase`) accepts every name of that registry
(:func:`registry_names`): ``data.source``, ``eval.protocol`` and ``sft.output_format`` here, and
any such field of a method section. Each method of :mod:`guirl.methods` whose record sets
``config_section`` adds a section ``cfg.<method name>``: its defaults (the paper's values) with its
recipe for the profile's kind on top (``<method>: null`` clears it). A paper's stage sections hold
its values of kernel keys (:mod:`guirl.configbase`); the one precedence rule covers both spellings:
a kernel key set in a later layer than the paper's value replaces it, so an override always wins
and the resolved config shows the value that ran. ``notebook=`` refuses an experiment or override
of a key that notebook sets per stage (``Method.derived``).

A notebook loads its configuration with :func:`load_run_config`: the exact file the runner
resolved and saved (``config_path``), or the same resolution when opened by hand.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model, model_validator

from guirl import configbase as cb
from guirl.analysis.config import AnalysisConfig
from guirl.configbase import (
    HISTORY_PATTERN,
    LR_SCHEDULERS,
    PROFILE,
    RECIPE_KINDS,
    REGISTRY_KINDS,
    Registered,
    Sampling,
    Section,
    derived,
    mirrored_fields,
)
from guirl.paths import configs_dir, repo_root, resolve_repo_path
from guirl.rl.config import RLConfig
from guirl.train.pretrain import PretrainConfig

__all__ = [
    "ConfigError",
    "Config",
    "ExecutorConfig",
    "BaseConfig",
    "ModelConfig",
    "DataConfig",
    "LoraConfig",
    "GroundingConfig",
    "SFTConfig",
    "EvalConfig",
    "RuntimeConfig",
    "RLConfig",
    "AnalysisConfig",
    "DATA_SOURCES",
    "EVAL_PROTOCOLS",
    "OUTPUT_FORMATS",
    "registry_names",
    "registered_fields",
    "resolve_section",
    "config_class",
    "load_config",
    "load_run_config",
    "missing_inputs",
    "overlay_keys_not_applied",
    "known_profiles",
    "known_experiments",
    "known_overlays",
    "parse_scalar",
    "parse_override",
    "format_override",
    "resolve_repo_path",
    "flatten",
]


# --------------------------------------------------------------------------------------------
# Registries: the names a Registered(kind) field accepts.
_REGISTRY_LABELS = {
    "format": "output formats (guirl.actions.formats)",
    "protocol": "evaluation protocols (guirl.metrics.protocols)",
    "data_source": "data sources (minigui and the loaders of guirl.data.loaders)",
    "method": "methods (guirl.methods)",
    "reward": "rewards (guirl.methods.reward_names())",
    "rl_role": "RL roles (guirl.methods.role_names(): grpo and every role of a method's Method.hooks)",
    "prompt": "system prompts (guirl.prompts.system_prompt_names())",
}


def registry_names(kind: str) -> tuple[str, ...]:
    """Every name registered under ``kind`` (one of :data:`guirl.configbase.REGISTRY_KINDS`),
    in registry order: ``format`` -> ``FORMAT_NAMES``, ``protocol`` -> the keys of
    ``guirl.metrics.protocols.PROTOCOLS``, ``data_source`` -> ``minigui`` (generated) and the
    keys of ``guirl.data.loaders.LOADERS``, ``method`` -> ``guirl.methods.names()``, ``reward``
    -> ``guirl.methods.reward_names()``, ``rl_role`` -> ``guirl.methods.role_names()``."""
    if kind == "format":
        from guirl.actions.formats import FORMAT_NAMES

        return tuple(FORMAT_NAMES)
    if kind == "protocol":
        from guirl.metrics.protocols import PROTOCOLS

        return tuple(PROTOCOLS)
    if kind == "data_source":
        from guirl.data.loaders import LOADERS

        return ("minigui", *LOADERS)
    if kind == "method":
        import guirl.methods

        return tuple(guirl.methods.names())
    if kind == "reward":
        import guirl.methods

        return tuple(guirl.methods.reward_names())
    if kind == "rl_role":
        import guirl.methods

        return tuple(guirl.methods.role_names())
    if kind == "prompt":
        from guirl.prompts import system_prompt_names

        return tuple(system_prompt_names())
    raise ValueError(f"unknown registry {kind!r}; known: {', '.join(REGISTRY_KINDS)}")


DATA_SOURCES: tuple[str, ...] = registry_names("data_source")
EVAL_PROTOCOLS: tuple[str, ...] = registry_names("protocol")
OUTPUT_FORMATS: tuple[str, ...] = registry_names("format")


def _registered_mark(info: Any) -> Registered | None:
    marks = [m for m in getattr(info, "metadata", ()) if isinstance(m, Registered)]
    return marks[0] if marks else None


def _allows_none(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
        annotation
    )


def resolve_section(cls: type[Section]) -> type[Section]:
    """``cls`` with every ``Registered(kind)`` field re-typed as ``Literal[<registry names>]``
    (a subclass of the same name; ``cls`` itself when it has no such field). Defaults,
    validators and docs are kept. Raises ``TypeError`` for a marked field that is not a string."""
    fields: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        mark = _registered_mark(info)
        if mark is None:
            continue
        base = info.annotation
        optional = _allows_none(base)
        if optional:
            base = next(a for a in typing.get_args(base) if a is not type(None))
        if base is not str and typing.get_origin(base) is not Literal:
            raise TypeError(f"{cls.__module__}.{cls.__name__}.{name}: Registered({mark.kind!r}) needs a str field")
        lit: Any = Literal[registry_names(mark.kind)]  # type: ignore[valid-type]
        annotation = Annotated[Optional[lit] if optional else lit, mark]  # noqa: UP045 (runtime type)
        default = ... if info.is_required() else info.default
        fields[name] = (annotation, Field(default, description=info.description))
    if not fields:
        return cls
    return create_model(cls.__name__, __base__=cls, __module__=cls.__module__, __doc__=cls.__doc__, **fields)


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
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_Loader)):
            return text  # an alias (*name) is no value of its own: the text, which validation then names
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
    if isinstance(value, str):
        return f"{key}={_yaml_double_quoted(value)}"
    return f"{key}={json.dumps(value)}"


def _yaml_double_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar with every non-ASCII or control character escaped
    (``\\uXXXX``, or ``\\UXXXXXXXX`` beyond the BMP: JSON's surrogate pairs would come back from
    YAML as two lone surrogates)."""
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Kernel sections. A class with a Registered field is re-bound to its resolved form right after
# its definition (``DataConfig = resolve_section(DataConfig)``), so the exported name validates.
_Section = Section


class ModelConfig(_Section):
    """The policy model. ``path: tiny-base`` is the tiny Qwen2.5-VL pretrained on MiniGUI and
    shipped with the repository (``guirl.models.tiny_base``); ``path: tiny`` is the same
    architecture with random weights (``guirl.models.build_tiny_model``); anything else is a local
    folder with a real checkpoint (the hub is unreachable here; never a hub id). Pixel budgets are in pixels (Qwen2.5-VL
    processor ``min_pixels`` / ``max_pixels``; one image token covers 28x28 pixels)."""

    path: str = Field(min_length=1)
    torch_dtype: Literal["float32", "bfloat16", "float16", "auto"]
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2"]
    #: The vision tower's window and full attention under ``sdpa``: ``fused`` (a few batched
    #: calls, :mod:`guirl.models.vision_attention`) or ``loop`` (transformers' call per window).
    vision_attention: Literal["fused", "loop"] = "fused"
    min_pixels: int = Field(gt=0, le=cb.MAX_PIXELS)
    max_pixels: int = Field(gt=0, le=cb.MAX_PIXELS)

    @model_validator(mode="after")
    def _pixels_ordered(self) -> ModelConfig:
        if self.min_pixels > self.max_pixels:
            raise ValueError(
                f"min_pixels: {self.min_pixels} exceeds max_pixels ({self.max_pixels}) -- make min_pixels <= max_pixels"
            )
        return self

    @property
    def is_tiny(self) -> bool:
        """True for the offline tiny model, pretrained (``tiny-base``) or random (``tiny``)."""
        return self.path in ("tiny", "tiny-base")

    @property
    def is_tiny_base(self) -> bool:
        """True for the shipped pretrained tiny model (``path == "tiny-base"``)."""
        return self.path == "tiny-base"

    def local_dir(self) -> Path:
        """The checkpoint folder of a real model (relative paths are relative to the repo)."""
        if self.is_tiny:
            raise ValueError(
                f"model.path is {self.path!r}: load it with guirl.studies.shared.inputs.base_model_dir "
                "(guirl.models.tiny_base.tiny_base_dir / build_tiny_model)"
            )
        return resolve_repo_path(self.path)


class DataConfig(_Section):
    """Which data set. ``path`` is a local folder (relative to the repo) and may be left out
    for MiniGUI, which is generated. The MiniGUI sizes are numbers of tasks and the screen size
    in pixels."""

    source: Annotated[str, Registered("data_source")]
    path: str | None = None
    n_train_tasks: int = Field(ge=1, le=cb.MAX_COUNT)
    n_test_tasks: int = Field(ge=1, le=cb.MAX_COUNT)
    width: int = Field(ge=28, le=cb.MAX_SIDE)
    height: int = Field(ge=28, le=cb.MAX_SIDE)

    @model_validator(mode="after")
    def _path_given(self) -> DataConfig:
        if self.source != "minigui" and not self.path:
            raise ValueError(
                f"path: source {self.source!r} needs a data folder"
                " -- set data.path to the local folder with the data set"
            )
        return self


DataConfig = resolve_section(DataConfig)


class LoraConfig(_Section):
    """LoRA adapter on the language model (PEFT ``LoraConfig``: ``r``, ``lora_alpha``,
    ``lora_dropout``). ``enabled: false`` trains all parameters instead: the tiny profile's
    model starts from random weights, where a low-rank update of a pretrained model (LoRA's
    premise) does not apply."""

    enabled: bool
    r: int = Field(ge=1, le=cb.MAX_RANK)
    alpha: float = Field(gt=0, le=cb.MAX_COEF)
    dropout: float = Field(ge=0.0, lt=1.0)


class GroundingConfig(_Section):
    """Grounding pre-training (the AgentCPM-GUI Stage I analogue) before SFT: full-parameter
    training on text-to-point / function-to-point / box-to-text samples of MiniGUI screens.
    The tiny profile needs it (its model starts from random weights); paper profiles start
    from a pretrained checkpoint and set ``enabled: false``."""

    enabled: bool
    learning_rate: float = Field(gt=0, le=cb.MAX_LR)
    max_steps: int = Field(ge=1, le=cb.MAX_STEPS)
    per_device_batch_size: int = Field(ge=1, le=cb.MAX_BATCH)


class ExecutorConfig(_Section):
    """The Low-level executor that notebook 01 trains beside the main agent (goal + the step's
    low-level instruction: CES's frozen executor, AgentCPM-GUI's AC-Low setting), and its own
    recipe: each key that is set replaces the main agent's ``sft`` key of the same name for the
    executor (``null``: the main agent's value). ``sft.executor: {}`` trains it with the main
    agent's recipe; ``sft.executor: null`` trains no executor."""

    max_steps: int | None = Field(default=None, ge=1, le=cb.MAX_STEPS)
    per_device_batch_size: int | None = Field(default=None, ge=1, le=cb.MAX_BATCH)
    lr_scheduler_type: Literal[LR_SCHEDULERS] | None = None  # type: ignore[valid-type]
    learning_rate: float | None = Field(default=None, gt=0, le=cb.MAX_LR)

    def updates(self) -> dict[str, Any]:
        """``{"sft.<key>": value}`` for every key that is set: what the executor's config replaces."""
        return {f"sft.{k}": v for k, v in self.model_dump().items() if v is not None}


class SFTConfig(_Section):
    """Supervised fine-tuning (TRL ``SFTTrainer`` + PEFT LoRA). ``max_steps`` (when set) wins
    over ``epochs``, as in ``transformers.TrainingArguments``. ``histories``: the history settings
    trained (one record per step and setting), e.g. ``["1AO", "3AO"]``: ``n``
    previous actions (0..5), as text only (``nA``) or with their screenshots (``nAO``), CCPO
    Table 2. ``use_step_instruction``: add the step's low-level instruction to the prompt (the
    AndroidControl "Low" setting; online play never has it): it sets the level of the agent that
    notebook 01 trains in ``runs/<profile>/01_sft/sft`` and later notebooks start from.
    ``executor``: 01 also trains a second agent, with the step instruction, in ``01_sft/sft_low``
    (:class:`ExecutorConfig`, its own recipe; ``null``: none); it needs
    ``use_step_instruction: false``. ``mix_histories``: ``false`` (default) trains one main-agent
    model per setting of ``histories`` (CCPO Table 2 reports CCPO-3B-1AO and -3AO as separate
    models, each RL setting continuing from its own SFT model, App. A.1.2): the first setting in
    ``01_sft/sft``, each other one in ``01_sft/sft_<setting>``; ``true`` trains one model on the
    records of every setting (an option). ``history_recipes``: per setting, keys that replace the
    main recipe for that setting's model (:class:`ExecutorConfig` keys; e.g. a shorter 3AO run on a
    CPU).
    ``system_prompt``: a registered prompt of :mod:`guirl.prompts` that SFT, RL and evaluation use
    (``null``: the output format's paper prompt, ``guirl.prompts.DEFAULT_SYSTEM_PROMPT``). ``save_total_limit``: how many
    of the ``save_steps`` checkpoints a grounding or SFT stage keeps (``null``: all of them, for a
    learning curve, :func:`guirl.studies.sft.checkpoint_curve`); it changes no trained weight, so it
    is not in a stage's fingerprint, and a finished stage is not retrained to keep more."""

    learning_rate: float = Field(gt=0, le=cb.MAX_LR)
    epochs: float = Field(gt=0, le=cb.MAX_EPOCHS)
    max_steps: int | None = Field(default=None, ge=1, le=cb.MAX_STEPS)
    per_device_batch_size: int = Field(ge=1, le=cb.MAX_BATCH)
    grad_accum: int = Field(ge=1, le=cb.MAX_BATCH)
    warmup_ratio: float = Field(ge=0.0, lt=1.0)
    weight_decay: float = Field(default=0.0, ge=0.0, le=cb.MAX_COEF)  # AdamW's; TRL's default 0 (CCPO Table 7: none)
    save_steps: int = Field(ge=1, le=cb.MAX_STEPS)
    save_total_limit: int | None = Field(
        default=2, ge=1, le=cb.MAX_STEPS
    )  # checkpoints kept on disk; null keeps every one
    histories: list[Annotated[str, StringConstraints(pattern=HISTORY_PATTERN)]] = Field(min_length=1)
    use_step_instruction: bool
    executor: ExecutorConfig | None = None  # null: 01 trains no Low-level executor
    mix_histories: bool = False  # CCPO Table 2 / A.1.2: one SFT model per history setting; true: one on all of them
    history_recipes: dict[str, ExecutorConfig] | None = None  # per setting: its own recipe keys; null: none
    lr_scheduler_type: Literal[LR_SCHEDULERS]  # type: ignore[valid-type]
    output_format: Annotated[str, Registered("format")]
    system_prompt: Annotated[str | None, Registered("prompt")] = None  # null: the format's paper prompt

    @model_validator(mode="after")
    def _prompt_fits_format(self) -> SFTConfig:
        unknown = sorted(set(self.history_recipes or {}) - set(self.histories))
        if unknown:
            raise ValueError(
                f"history_recipes: {unknown} not in histories {self.histories} -- a recipe is for a trained setting"
            )
        if self.mix_histories and self.history_recipes:
            raise ValueError("history_recipes: with mix_histories: true one model trains on every setting; set null")
        if self.executor is not None and self.use_step_instruction:
            raise ValueError(
                "executor: the main agent already has the step instruction (use_step_instruction: true) "
                "-- set use_step_instruction: false (goal-only main agent) or executor: null"
            )
        if self.system_prompt is not None:
            from guirl.prompts import get_prompt

            wants = get_prompt(self.system_prompt).output_format
            if wants != self.output_format:
                raise ValueError(
                    f"system_prompt: {self.system_prompt!r} asks for the {wants!r} format but output_format is "
                    f"{self.output_format!r} -- set system_prompt to null (the format's paper prompt) or to a "
                    f"prompt of the {self.output_format!r} format"
                )
        return self


SFTConfig = resolve_section(SFTConfig)
RLConfig = resolve_section(RLConfig)  # the rl: section of the RL engine (guirl.rl.config)


class EvalConfig(_Section):
    """Evaluation. ``protocol`` names the matching conventions (a registered protocol,
    :data:`EVAL_PROTOCOLS`);
    ``n_tasks`` and ``max_turns`` are for online MiniGUI episodes; results are reported over
    ``n_seeds`` seeds with ``bootstrap_samples`` bootstrap resamples for the intervals;
    ``n_train_seeds`` models are trained per agent where a notebook studies the training seed
    (08; its evaluation does not change a trained model, hence the ``eval`` section).
    Online runs follow AndroidLong's protocol by default (App., Table 6: Task SR as the mean and
    std of three independent runs, "pass@1 under three samples"): ``online_same_tasks`` reruns
    the same tasks in every run, decoded as ``online_sampling`` says (:class:`guirl.configbase.Sampling`:
    sampled at temperature 1 by default); ``online_same_tasks: false`` with ``online_sampling:
    {do_sample: false}`` gives the older reading (a new task set per run, greedy decoding)."""

    protocol: Annotated[str, Registered("protocol")]
    batch_size: int = Field(ge=1, le=cb.MAX_BATCH)
    max_new_tokens: int = Field(ge=1, le=cb.MAX_TOKENS)
    n_tasks: int = Field(ge=1, le=cb.MAX_COUNT)
    max_turns: int = Field(ge=1, le=cb.MAX_TURNS)
    n_seeds: int = Field(default=3, ge=1, le=cb.MAX_RUNS)
    n_train_seeds: int = Field(
        default=1, ge=1, le=cb.MAX_RUNS
    )  # training seeds of notebook 08's seed study (seed, seed + 1, ...)
    # what a training seed of 08 re-draws: "all": grounding and SFT (and the initial weights of the random-weight tiny
    # model, model.path: tiny; tiny-base is one set of weights for every seed); "sft": SFT only,
    # every seed starting from the run's own base / grounding model, as every seed of a paper profile starts from one
    # pretrained checkpoint (guirl.studies.seed_study.seed_start). The same for paper profiles (no grounding, a fixed base)
    train_seed_scope: Literal["all", "sft"] = "all"
    bootstrap_samples: int = Field(ge=1, le=cb.MAX_COUNT)
    # the test-step budget: the first max_test_steps steps of each test split (null: all); a paper's notebook that
    # evaluates many models sets its own (ccpo.eval, coepg.eval, ces.eval: stage values of this key)
    max_test_steps: int | None = Field(default=None, ge=1, le=cb.MAX_STEPS)
    online_same_tasks: bool = True  # AndroidLong App. (Table 6): three independent runs of the same tasks
    # AndroidLong App.: "pass@1 under three samples" -- sampled decoding (the temperature is not from the paper)
    online_sampling: Sampling = Field(default_factory=Sampling)
    histories: list[Annotated[str, StringConstraints(pattern=HISTORY_PATTERN)]] = Field(min_length=1)


EvalConfig = resolve_section(EvalConfig)


def accelerate_distributed_type(path: str) -> str:
    """The ``distributed_type`` of the accelerate launch config at ``path`` (relative to the repository;
    ``"NO"`` when the file does not set it, accelerate's default)."""
    data = yaml.safe_load(resolve_repo_path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: an accelerate config is a YAML mapping (got {type(data).__name__})")
    return str(data.get("distributed_type", "NO"))


class RuntimeConfig(_Section):
    """Where and how to run. ``accelerate_config`` / ``deepspeed_config`` are files in the
    repository (relative paths are relative to the repo root) and must exist."""

    device: Literal["cpu", "cuda"]
    # torch CPU threads of training subprocesses and evaluation (OMP_NUM_THREADS); null: torch's default
    threads: int | None = Field(default=None, ge=1, le=cb.MAX_THREADS)
    # recompute activations in backward in the grounding / SFT stages (TRL's SFTConfig default) and in the RL
    # update (docs/rl.md, memory): GPU memory for time. Off on CPU: same loss, SFT 3-12% faster on the tiny model
    activation_checkpointing: bool = True
    # TRL's fused LM head projects only the labelled positions on every device (it does so on CUDA already; on CPU
    # it projects all of them): same loss, a tiny-model SFT step 27% faster on CPU (guirl.train.lm_head, docs/stack.md)
    compact_lm_head: bool = True
    # independent training stages (01's High agent and Low executor) run at once as separate subprocesses, each
    # with runtime.threads threads (null: this machine's cores / parallel_stages, a longer stage taking over a shorter
    # one's cores at its planned last step); the thread count changes float order, hence the weights (docs/stack.md)
    parallel_stages: int = Field(default=1, ge=1, le=cb.MAX_THREADS)
    # how a training stage of one CPU process without DeepSpeed starts (guirl.train.launch; each gives the same weights
    # byte for byte, tests/test_train_launch.py). auto: alone, inside the calling process (a notebook's kernel: no
    # interpreter start-up and imports per stage), side by side, as the subprocess `accelerate launch` would start;
    # subprocess: always that subprocess; accelerate: through `accelerate launch` (as every multi-process or DeepSpeed stage)
    stage_launcher: Literal["auto", "subprocess", "accelerate"] = "auto"
    accelerate_config: str
    deepspeed_config: str | None = None
    num_processes: int = Field(ge=1, le=cb.MAX_PROCESSES)
    bf16: bool

    @model_validator(mode="after")
    def _files_exist(self) -> RuntimeConfig:
        for key in ("accelerate_config", "deepspeed_config"):
            value = getattr(self, key)
            if value is not None and not resolve_repo_path(value).is_file():
                raise ValueError(
                    f"{key}: file not found: {value} -- give a path relative to the repository root (see configs/)"
                )
        if self.deepspeed_config is not None:
            kind = accelerate_distributed_type(self.accelerate_config)
            if kind != "DEEPSPEED":
                # transformers' Trainer and the RL engine take DeepSpeed from accelerate's state, which only
                # a DEEPSPEED launch config sets: under another one the file would be ignored without a word
                raise ValueError(
                    f"deepspeed_config: {self.deepspeed_config} takes effect only under an accelerate config with "
                    f"distributed_type DEEPSPEED, and {self.accelerate_config} has {kind!r} -- set "
                    "runtime.accelerate_config=configs/accelerate/multi_gpu_zero2.yaml, or runtime.deepspeed_config=null"
                )
        if self.parallel_stages > 1 and self.device != "cpu":
            # side-by-side `accelerate launch` processes would share the GPUs and the rendezvous port
            raise ValueError(
                f"parallel_stages: {self.parallel_stages} runs training stages side by side on CPU cores; "
                f"with device {self.device!r} set runtime.parallel_stages=1"
            )
        return self


class BaseConfig(BaseModel):
    """The kernel part of a run configuration; :class:`Config` adds one optional section per
    method (see :func:`config_class` and the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    profile: str = Field(min_length=1)
    # which recipe of each method the profile takes (guirl.configbase.RECIPE_KINDS): paper values or CPU sizes
    recipe: Literal[RECIPE_KINDS]  # type: ignore[valid-type]
    seed: int = Field(ge=0, le=cb.MAX_SEED)  # numpy's legacy seeding takes < 2**32; studies add small offsets
    model: ModelConfig
    data: DataConfig
    lora: LoraConfig
    grounding: GroundingConfig
    sft: SFTConfig
    eval: EvalConfig
    runtime: RuntimeConfig
    rl: RLConfig = Field(default_factory=RLConfig)  # defaults: CCPO Table 8 (guirl.rl.config)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)  # profiling / attention (guirl.analysis.config)
    pretrain: PretrainConfig | None = None  # the tiny base model's pretraining (guirl.train.pretrain; notebook 09)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible nested dict (sections in declaration order)."""
        return self.model_dump(mode="json")

    def replace(self, updates: Mapping[str, Any]) -> Self:
        """A copy with the dotted keys of ``updates`` replaced (``{"rl.role": "ccpo", "seed": 1}``),
        validated like a yaml file: the only way studies derive a stage's or a seed's config.

        A key of a method section that is not set creates the section (its other keys take their
        defaults); ``None`` clears an optional section (``{"sft.executor": None}``) and a mapping
        merges into one, as an override does.
        A bad key or value raises :class:`ConfigError` naming ``replace KEY=VALUE`` and the fix;
        the config itself never changes."""
        if isinstance(updates, str) or not isinstance(updates, Mapping):
            raise TypeError(f"Config.replace takes a mapping of dotted keys to values, got {type(updates).__name__}")
        data = self.to_dict()
        provenance = {key: "the config being replaced" for key in flatten(data)}
        for key, value in updates.items():
            if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
                raise ConfigError("replace", str(key), "not a dotted key", "write it as e.g. sft.learning_rate")
            if key == "profile":
                raise ConfigError("replace", key, "the profile cannot be replaced", "load another profile instead")
            _merge(data, _nest(key, value), f"replace {format_override(key, value)}", provenance)
        try:
            new = type(self).model_validate(data)
        except ValidationError as err:
            raise _to_config_error(err, provenance, "replace", type(self)) from None
        derived(self, new)  # a recorded config's reads include its derived configs'
        return new

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

    def save(self, path: str | Path, header: Sequence[str] = ()) -> Path:
        """Write :meth:`to_yaml` to ``path`` (parents created), after ``header`` lines written as
        ``# `` comments (for instance how the runner resolved it); returns the path. The file
        loads back with ``load_config(path)`` to an equal config."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        comments = "".join(f"# {line}\n" for text in header for line in str(text).splitlines())
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # atomic: a reader sees the old file or the new
        tmp.write_text(comments + self.to_yaml(), encoding="utf-8")
        os.replace(tmp, path)
        return path

    def rl_sections(self) -> tuple[str, ...]:
        """The config keys (dotted prefixes) an RL stage of this config reads besides the RL
        engine's: the section of ``rl.role``'s method and of the reward it trains with
        (``rl.reward``, or the generic role's default, :data:`guirl.methods.DEFAULT_REWARD`), and
        the keys those methods' records say they also read (``Method.reads``): what an RL stage's
        fingerprint covers besides the engine's keys (:mod:`guirl.train.stagestate`)."""
        import guirl.methods

        role = self.rl.role.split(".", 1)[0]
        reward = self.rl.reward or (guirl.methods.DEFAULT_REWARD if role in guirl.methods.GENERIC_ROLES else None)
        out: list[str] = []
        for name in (role, *([reward] if reward else [])):
            if name not in guirl.methods.names():
                continue
            for key in (name, *guirl.methods.get(name).reads):
                section = key.split(".", 1)[0]
                if section in type(self).model_fields and key not in out:
                    out.append(key)
        return tuple(out)

    def method_section(self, name: str) -> Section:
        """``cfg.<name>``, the section of method ``name``; a :class:`ConfigError` saying how to
        add it when the profile, experiment and overrides left it out (or the method has none)."""
        if name not in type(self).model_fields or name in BaseConfig.model_fields:
            have = [f for f in type(self).model_fields if f not in BaseConfig.model_fields]
            raise ConfigError(
                "config",
                name,
                f"no config section for method {name!r}",
                "methods with a section: " + (", ".join(have) or "(none)"),
            )
        section = getattr(self, name)
        if section is None:
            raise ConfigError(
                "config",
                name,
                "section not set",
                f"add `{name}: {{}}` (its defaults) or the keys you need to the profile or experiment yaml, "
                f"or pass --override {name}.KEY=VALUE",
            )
        return section


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model class of a (possibly optional) section annotation, else ``None``."""
    if _allows_none(annotation):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def config_class(methods: Iterable[Any]) -> type[BaseConfig]:
    """The config schema for ``methods`` (``guirl.methods.Method`` records): :class:`BaseConfig`
    plus, for every method whose ``config_section`` is set, an optional field named after the
    method whose model is that section (registered names resolved, :func:`resolve_section`).

    Raises ``TypeError`` naming the method's file when a section is not a
    :class:`guirl.configbase.Section` or a method name clashes with a kernel key."""
    fields: dict[str, Any] = {}
    for method in methods:
        section = method.config_section
        if section is None:
            continue
        where = f"guirl/methods/{method.name}/__init__.py"
        if not (isinstance(section, type) and issubclass(section, Section)):
            raise TypeError(
                f"{where}: METHOD.config_section must be a subclass of guirl.configbase.Section, got {section!r}"
            )
        if method.name in BaseConfig.model_fields:
            raise TypeError(f"{where}: method name {method.name!r} clashes with the config key {method.name!r}")
        _check_stage_sections(section, method.name, where)
        resolved = resolve_section(section)
        if resolved is not section:
            # A stable import path, so that configs holding the section pickle.
            resolved.__module__, resolved.__qualname__ = __name__, f"_{method.name}_{section.__name__}"
            setattr(sys.modules[__name__], resolved.__qualname__, resolved)
        fields[method.name] = (Optional[resolved], None)  # noqa: UP045 (runtime type)
    schema = create_model("Config", __base__=BaseConfig, __module__=__name__, __doc__=_CONFIG_DOC, **fields)
    _SCHEMA_METHODS[schema] = tuple(methods)
    return schema


#: The methods each schema of :func:`config_class` was built from (their recipes and derived keys).
_SCHEMA_METHODS: dict[type, tuple[Any, ...]] = {}


def _check_stage_sections(section: type[Section], method: str, where: str) -> None:
    """Every stage section inside ``section`` (``mirrors`` set) names a kernel section, and each of
    its fields is a field of that kernel section or listed in ``own``; every stage section builds
    with no argument (its defaults are the paper's values). Raises ``TypeError`` naming the file."""
    for path, cls in _stage_classes(section, method):
        kernel = BaseConfig.model_fields.get(cls.mirrors or "")
        kernel_cls = _section_model(kernel.annotation) if kernel is not None else None
        if kernel_cls is None:
            raise TypeError(f"{where}: {path} mirrors {cls.mirrors!r}, which is not a kernel section")
        bad = [f for f in mirrored_fields(cls) if f not in kernel_cls.model_fields]
        if bad:
            raise TypeError(
                f"{where}: {path}: {bad} are not keys of the {cls.mirrors!r} section; name a field after the "
                f"kernel key it sets, or list a paper-only field in {cls.__name__}.own"
            )
        try:
            cls()
        except ValidationError as err:
            raise TypeError(f"{where}: {path} ({cls.__name__}) needs a default for every field: {err}") from None


def _stage_classes(model: type[BaseModel], prefix: str) -> list[tuple[str, type[Section]]]:
    """``[(dotted path, class)]`` of every stage section (``mirrors`` set) nested in ``model``."""
    out: list[tuple[str, type[Section]]] = []
    for name, info in model.model_fields.items():
        sub = _section_model(info.annotation)
        if sub is None or not issubclass(sub, Section):
            continue
        path = f"{prefix}.{name}"
        if sub.mirrors is not None:
            out.append((path, sub))
        out += _stage_classes(sub, path)
    return out


_CONFIG_DOC = """A whole, validated run configuration: the kernel sections of :class:`BaseConfig`
and one optional section per method with a ``config_section`` (see the module docstring)."""


def _registered_methods() -> list[Any]:
    import guirl.methods

    return guirl.methods.all_methods()


Config = config_class(_registered_methods())


def registered_fields(schema: type[BaseModel] | None = None) -> dict[str, str]:
    """``{"data.source": "data_source", "eval.protocol": "protocol", ...}``: every field of the
    schema (default :class:`Config`, method sections included) marked ``Registered(kind)``."""
    out: dict[str, str] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            mark = _registered_mark(info)
            if mark is not None:
                out[prefix + name] = mark.kind
            sub = _section_model(info.annotation)
            if sub is not None:
                walk(sub, f"{prefix}{name}.")

    walk(schema or Config, "")
    return out


# --------------------------------------------------------------------------------------------
# Loading
def _names_in(folder: str) -> list[str]:
    return sorted(p.stem for p in (configs_dir() / folder).glob("*.yaml"))


def known_profiles() -> list[str]:
    """Profile names: the stems of ``configs/profiles/*.yaml``, sorted (``configs/profiles/base/``
    holds files that profiles extend, not profiles)."""
    return _names_in("profiles")


def known_experiments() -> list[str]:
    """Experiment names: the stems of ``configs/experiments/*.yaml``, sorted."""
    return _names_in("experiments")


def known_overlays() -> list[str]:
    """Overlay names: the stems of ``configs/overlays/*.yaml``, sorted (``smoke``: the seconds-
    sized budgets the tests run with)."""
    return _names_in("overlays")


def _looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def _no_aliases(text: str, shown: str, key: str) -> None:
    """Refuse YAML aliases (``*name``): a config is written out, and an alias is how a file
    refers to itself (``a: &x [*x]``, endless) or grows exponentially (a "billion laughs" chain).
    Reads the event stream only (linear in the text); a :class:`ConfigError` names the line."""
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark is not None else "?"
            raise ConfigError(
                shown,
                key,
                f"YAML alias *{event.anchor} at line {line}",
                "write the value out (configs use no anchors or aliases)",
            )


def _read_yaml(path: Path, key: str, missing_fix: str) -> dict[str, Any]:
    shown = _display(path)
    if not path.is_file():
        raise ConfigError(shown, key, "file not found", missing_fix)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            shown, key, f"not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start})", "save it as UTF-8"
        ) from None
    except OSError as err:
        raise ConfigError(
            shown, key, f"cannot read the file ({err.strerror})", "check the path and its permissions"
        ) from None
    try:
        _no_aliases(text, shown, key)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(shown, key, f"not valid YAML{where}", "fix the syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(shown, key, f"top level is a {type(data).__name__}", "write a mapping of sections")
    return _stringify_keys(data)


def _read_layers(path: Path, key: str, missing_fix: str, chain: tuple[Path, ...] = ()) -> list[tuple[str, dict]]:
    """``[(file shown in messages, data), ...]`` of ``path`` and the files it extends, base first.

    ``extends: <path>`` (relative to the folder of the file that says it) is removed from the
    data; a base file may extend another one; loops and missing files are errors naming the
    file with the ``extends`` line."""
    shown = _display(path)
    data = _read_yaml(path, key, missing_fix)
    if "extends" not in data:
        return [(shown, data)]
    target = data.pop("extends")
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(
            shown, "extends", f"must be a path to a yaml file (got {target!r})", "write e.g. extends: base/paper.yaml"
        )
    base = Path(target).expanduser()
    base = base if base.is_absolute() else path.parent / base
    here = path.resolve()
    if base.resolve() in (*chain, here):
        loop = " -> ".join(_display(p) for p in (*chain, here, base.resolve()))
        raise ConfigError(shown, "extends", f"files extend each other in a loop ({loop})", "remove one extends")
    if not base.is_file():
        raise ConfigError(
            shown, "extends", f"file not found: {target}", f"give a path relative to {_display(path.parent)}/"
        )
    layers = _read_layers(base, "extends", "", (*chain, here))
    for src, layer in layers:
        if "profile" in layer:
            raise ConfigError(
                src, "profile", "a file that others extend cannot set the profile", "remove the key from this file"
            )
    return [*layers, (shown, data)]


def _layer_path(kind: str, name: str | Path) -> Path:
    name = str(name)
    return Path(name).expanduser() if _looks_like_path(name) else configs_dir() / kind / f"{name}.yaml"


def _stringify_keys(data: Any) -> Any:
    if isinstance(data, dict):
        return {str(k): _stringify_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_stringify_keys(v) for v in data]
    return data


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (mappings only; lists and empty mappings stay values)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
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


def _field_at(schema: type[BaseModel], loc: Sequence[str]) -> tuple[type[BaseModel] | None, str | None]:
    """The model class that owns the last element of ``loc`` and that element's name."""
    model: type[BaseModel] | None = schema
    for part in loc[:-1]:
        if model is None or part not in model.model_fields:
            return None, None
        model = _section_model(model.model_fields[part].annotation)
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


def _to_config_error(
    err: ValidationError, provenance: Mapping[str, str], default: str, schema: type[BaseModel]
) -> ConfigError:
    errors = err.errors(include_url=False)
    # A typo in a key also makes the intended key missing: report the typo (its fix is the one).
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    # A Literal inside an optional section is reported under its union member; drop that part.
    loc = [p for p in loc if not (p.startswith("_") or p.endswith("]"))]
    dotted = ".".join(loc) if loc else "<top>"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    owner, name = _field_at(schema, loc)
    kind = first["type"]
    info = owner.model_fields.get(name or "") if owner is not None else None
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
    mark = _registered_mark(info)
    if kind == "literal_error" and mark is not None:
        names = registry_names(mark.kind)
        value = first.get("input")
        close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return ConfigError(
            _source_of(dotted, provenance, default),
            dotted,
            f"{value!r} is not registered{more}",
            f"{hint}registered {_REGISTRY_LABELS[mark.kind]}: {', '.join(repr(n) for n in names)}",
        )
    expected = _describe_type(info.annotation) if info is not None else ""
    limit = next(
        (getattr(m, "le", None) for m in getattr(info, "metadata", ()) if getattr(m, "le", None) is not None), None
    )
    if kind == "int_parsing_size" and limit is not None:  # a float too large for an integer, e.g. 1e26 steps
        kind, first = "less_than_equal", {**first, "ctx": {"le": limit}}
    bound = _BOUNDS.get(kind)
    if bound is not None:
        limit = (first.get("ctx") or {}).get(bound[0])
        return ConfigError(
            _source_of(dotted, provenance, default),
            dotted,
            f"{first.get('input')!r} is {bound[1]} {limit}{more}",
            f"set {dotted} to {bound[2]} {limit}"
            + (" (a larger value cannot be meant)" if bound[0] in ("le", "lt") else ""),
        )
    if kind == "finite_number":
        return ConfigError(
            _source_of(dotted, provenance, default),
            dotted,
            f"{first.get('input')!r} is not a finite number{more}",
            f"set {dotted} to a finite number (.inf and .nan are YAML for infinity and not-a-number)",
        )
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


#: pydantic's bound errors: (context key, the problem, the fix's words).
_BOUNDS = {
    "less_than_equal": ("le", "above the limit", "at most"),
    "less_than": ("lt", "not below the limit", "less than"),
    "greater_than_equal": ("ge", "below the minimum", "at least"),
    "greater_than": ("gt", "not above the minimum", "more than"),
}


def _no_profile_key(layers: list[tuple[str, dict]], what: str) -> None:
    for src, layer in layers:
        if "profile" in layer:
            raise ConfigError(
                src, "profile", f"{what} cannot set the profile", "remove the key and pass --profile instead"
            )


#: Layer ranks of the one precedence rule (later wins): the recipes and the profile, the experiment,
#: the overlays (in the order given), the overrides.
_PROFILE_RANK, _EXPERIMENT_RANK, _OVERLAY_RANK, _OVERRIDE_RANK = 0, 1, 2, 1_000_000
_MISSING: Any = object()


def load_config(
    profile: str | Path,
    experiment: str | Path | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    overlays: Sequence[str | Path] = (),
    schema: type[BaseConfig] | None = None,
    notebook: str | None = None,
) -> Config:
    """Merge the profile (with the methods' recipes) < ``experiment`` < ``overlays`` < ``overrides``
    and validate.

    ``profile`` is a name from ``configs/profiles`` (``"tiny"``, ``"paper-3b"``, ...) or a path
    to a yaml file (for instance a saved, resolved ``config.yaml``). ``experiment`` is ``None``,
    a name from ``configs/experiments`` or a path. ``overlays``: names from ``configs/overlays``
    (``"smoke"``) or paths, applied in order. ``overrides``: ``["sft.learning_rate=1e-4",
    "seed=1"]`` or ``{"sft.learning_rate": 1e-4}`` / ``{"sft": {"learning_rate": 1e-4}}``.
    ``schema``: the config class to validate with (default :class:`Config`; see
    :func:`config_class`). ``notebook`` (``NN_name``, the runner passes it): refuse an
    experiment or override that sets a key the notebook sets per stage (``Method.derived``).

    The profile level is each method's recipe for the profile's ``recipe`` kind and data source
    (``methods/<paper>/config.py``), then the profile's files. A paper's stage value of a kernel
    key (a field of a stage section, :mod:`guirl.configbase`) and the kernel key follow the same
    rule: when the kernel key is set in a later layer, its value becomes the stage value (an
    override always wins; on a tie the paper's value stands). Raises :class:`ConfigError` (one
    line naming the file and the dotted key).
    """
    schema = schema or Config
    is_path = isinstance(profile, Path) or _looks_like_path(str(profile))
    profile = str(profile)
    if is_path:
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
    layers = _read_layers(profile_path, "profile", missing_fix)
    data = layers[-1][1]
    if "profile" in data and not is_path and data["profile"] != profile_name:
        raise ConfigError(
            source,
            "profile",
            f"says {data['profile']!r} but the file is {profile_name!r}",
            "remove the profile key; the file name is the profile name",
        )

    user: list[tuple[str, Mapping[str, Any], int]] = []  # (source, data, rank) above the profile
    if experiment is not None:
        exp_layers = _read_layers(
            _layer_path("experiments", experiment),
            "experiment",
            "known experiments: " + (", ".join(known_experiments()) or "(none)") + "; or pass a path to a yaml file",
        )
        _no_profile_key(exp_layers, "an experiment")
        user += [(src, layer, _EXPERIMENT_RANK) for src, layer in exp_layers]
    for i, overlay in enumerate(overlays):
        ov_layers = _read_layers(
            _layer_path("overlays", overlay),
            "overlay",
            "known overlays: " + (", ".join(known_overlays()) or "(none)") + "; or pass a path to a yaml file",
        )
        _no_profile_key(ov_layers, "an overlay")
        user += [(src, layer, _OVERLAY_RANK + i) for src, layer in ov_layers]
    for key, value, written in _overrides_to_items(overrides):
        if key == "profile":
            raise ConfigError(
                f"override {written}", "profile", "the profile cannot be overridden", "pass --profile NAME instead"
            )
        user.append((f"override {written}", _nest(key, value), _OVERRIDE_RANK))

    probe: dict[str, Any] = {}
    for src, layer in layers:
        _merge(probe, layer, src, {})
    for src, layer, _ in user:
        _merge(probe, layer, src, {})
    provenance: dict[str, str] = {}
    ranks: dict[str, int] = {}
    base: dict[str, Any] = {}
    for src, layer in [*_recipe_layers(schema, probe), *layers]:
        _merge(base, layer, src, provenance)
        ranks[src] = _PROFILE_RANK
    base.setdefault("profile", profile_name)
    provenance.setdefault("profile", source)
    for src, layer, rank in user:
        _merge(base, layer, src, provenance)
        ranks[src] = rank
    _resolve_stage_values(base, provenance, ranks, schema)
    _no_profile_left(base, provenance)
    if notebook is not None:
        _refuse_derived(schema, notebook, provenance, ranks)
    try:
        return schema.model_validate(base)
    except ValidationError as err:
        raise _to_config_error(err, provenance, source, schema) from None


def _recipe_layers(schema: type[BaseModel], merged: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One layer per method of ``schema`` with a section: ``{<method>: {}}`` plus its recipe for the
    ``recipe`` kind and ``data.source`` of ``merged`` (no layer when the kind is not a known one:
    validation names it). A recipe key outside the method's own section and the kernel sections,
    or a kernel key two recipes set to different values, is a :class:`ConfigError` naming the files."""
    kind = merged.get("recipe")
    if not isinstance(kind, str) or kind not in RECIPE_KINDS:
        return []
    data = merged.get("data")
    source = str(data.get("source", "")) if isinstance(data, Mapping) else ""
    methods = [m for m in _SCHEMA_METHODS.get(schema, ()) if m.config_section is not None]
    names = {m.name for m in methods}
    owner: dict[str, tuple[str, Any]] = {}
    out: list[tuple[str, dict[str, Any]]] = []
    for m in methods:
        src = f"lib/guirl/methods/{m.name}/config.py (recipe {kind!r})"
        layer: dict[str, Any] = {m.name: {}}
        for key, value in (dict(m.recipe(kind, source)) if m.recipe is not None else {}).items():
            top = key.split(".")[0]
            if top != m.name and (top in names or top not in BaseConfig.model_fields):
                raise ConfigError(
                    src, key, "a recipe sets keys of its own section or kernel keys", f"move it to {top}'s recipe"
                )
            if top != m.name:
                if key in owner and owner[key][1] != value:
                    raise ConfigError(
                        src,
                        key,
                        f"the recipe of {owner[key][0]!r} sets it to {owner[key][1]!r}",
                        "one paper's recipe holds a kernel key; keep it in one of them",
                    )
                owner[key] = (m.name, value)
            _merge(layer, _nest(key, value), src, {})
        out.append((src, layer))
    return out


def _lookup(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _kernel_default(dotted: str) -> Any:
    """The schema default of kernel key ``dotted`` (``_MISSING`` when it has none)."""
    model: type[BaseModel] | None = BaseConfig
    parts = dotted.split(".")
    for part in parts[:-1]:
        info = model.model_fields.get(part) if model is not None else None
        model = _section_model(info.annotation) if info is not None else None
    info = model.model_fields.get(parts[-1]) if model is not None else None
    if info is None or info.is_required():
        return _MISSING
    return info.get_default(call_default_factory=True)


def _leaf_suffixes(annotation: Any) -> list[str]:
    """``[""]`` for a value field; ``[".a", ".b.c", ...]`` for a section-valued one (its leaves)."""
    sub = _section_model(annotation)
    if sub is None:
        return [""]
    return [f".{name}{rest}" for name, info in sub.model_fields.items() for rest in _leaf_suffixes(info.annotation)]


def _resolve_stage_values(
    data: dict[str, Any], provenance: dict[str, str], ranks: Mapping[str, int], schema: type[BaseModel]
) -> None:
    """The one precedence rule across the two spellings of a stage value (``load_config``): for each
    mirrored field of each stage section, the kernel key's value replaces the paper's when it was
    set in a later layer (a paper value from the recipe or the section's defaults is a profile-level
    value), and a recipe's :data:`~guirl.configbase.PROFILE` takes the kernel key's value."""
    for name, info in schema.model_fields.items():
        if name in BaseConfig.model_fields or not isinstance(data.get(name, {}), dict):
            continue
        section = _section_model(info.annotation)
        if section is None:
            continue
        for path, cls in _stage_classes(section, name):
            node: Any = data
            for part in path.split("."):
                if not isinstance(node, dict):
                    break
                node = node.setdefault(part, {})
            if not isinstance(node, dict):
                continue
            for field in mirrored_fields(cls):
                whole = _lookup(data, f"{path}.{field}") is PROFILE
                for suffix in [""] if whole else _leaf_suffixes(cls.model_fields[field].annotation):
                    pkey, kkey = f"{path}.{field}{suffix}", f"{cls.mirrors}.{field}{suffix}"
                    rp = -2 if whole else ranks.get(provenance.get(pkey, ""), _PROFILE_RANK)
                    rk = max(
                        (ranks.get(src, _PROFILE_RANK) for k, src in provenance.items() if _under(k, kkey)), default=-1
                    )
                    if rk <= rp:
                        continue
                    value = _lookup(data, kkey)
                    if value is _MISSING:
                        value = _kernel_default(kkey)
                    if value is _MISSING:
                        raise ConfigError(
                            provenance.get(pkey, "config"),
                            pkey,
                            f"takes the profile's value of {kkey}, which is not set",
                            f"set {kkey} in the profile",
                        )
                    target: dict[str, Any] = data
                    parts = pkey.split(".")
                    for part in parts[:-1]:
                        target = target.setdefault(part, {})
                    target[parts[-1]] = copy.deepcopy(value)
                    provenance[pkey] = provenance.get(kkey, f"the default of {kkey}")


def _no_profile_left(data: Any, provenance: Mapping[str, str], prefix: str = "") -> None:
    """A :class:`ConfigError` for a :data:`~guirl.configbase.PROFILE` value on a key that mirrors no
    kernel key (a recipe may say so only of a stage value)."""
    if isinstance(data, dict):
        for key, value in data.items():
            _no_profile_left(value, provenance, f"{prefix}{key}.")
    elif data is PROFILE:
        key = prefix[:-1]
        raise ConfigError(
            _source_of(key, provenance, "config"),
            key,
            "PROFILE (the profile's value) on a key that mirrors no kernel key",
            "give the value itself; PROFILE is for a field of a stage section",
        )


def _under(key: str, prefix: str) -> bool:
    """``key`` is ``prefix`` or a key inside it (``eval.online_sampling.temperature`` under ``eval.online_sampling``)."""
    return key == prefix or key.startswith(prefix + ".")


def _derived_keys(schema: type[BaseModel], notebook: str) -> dict[str, str]:
    """``{key: what sets it}`` that ``notebook`` sets per stage (``Method.derived`` of its methods)."""
    out: dict[str, str] = {}
    for m in _SCHEMA_METHODS.get(schema, ()):
        if notebook in m.notebooks:
            out.update(m.derived)
    return out


def _refuse_derived(
    schema: type[BaseModel], notebook: str, provenance: Mapping[str, str], ranks: Mapping[str, int]
) -> None:
    """A :class:`ConfigError` for an experiment or override that sets a key ``notebook`` sets per
    stage (an overlay, a budget file shared by every notebook, may: :func:`overlay_keys_not_applied`)."""
    derived = _derived_keys(schema, notebook)
    for key, src in provenance.items():
        rank = ranks.get(src, _PROFILE_RANK)
        if rank != _EXPERIMENT_RANK and rank < _OVERRIDE_RANK:
            continue
        hit = next((d for d in derived if key == d or key.startswith(d + ".")), None)
        if hit is not None:
            raise ConfigError(
                src,
                hit,
                f"notebook {notebook} sets it per stage: {derived[hit]}",
                "remove this setting (it would not reach a stage)",
            )


def overlay_keys_not_applied(
    notebook: str, overlays: Sequence[str | Path], schema: type[BaseConfig] | None = None
) -> list[str]:
    """The keys ``overlays`` set that ``notebook`` sets per stage (``Method.derived``), so their
    values do not reach its stages: ``["rl.save_steps (configs/overlays/smoke.yaml)", ...]``
    (the runner writes them into the saved config's header)."""
    derived = _derived_keys(schema or Config, notebook)
    out: list[str] = []
    for overlay in overlays:
        for src, layer in _read_layers(_layer_path("overlays", overlay), "overlay", ""):
            for key in flatten(layer):
                hit = next((d for d in derived if key == d or key.startswith(d + ".")), None)
                if hit is not None:
                    out.append(f"{key} ({src}: {derived[hit]})")
    return out


def missing_inputs(cfg: BaseConfig) -> list[str]:
    """The files and folders a run of ``cfg`` reads that are not there, one ``"key: path (what)"``
    each: the model folder (``model.path``, unless the offline tiny model), the data folder
    (``data.path``, unless MiniGUI, which is generated), the accelerate and DeepSpeed files."""
    wanted: list[tuple[str, Path, bool, str]] = []  # (key, path, is a folder, what)
    if not cfg.model.is_tiny:
        wanted.append(("model.path", cfg.model.local_dir(), True, "the model checkpoint folder"))
    if cfg.data.source != "minigui" and cfg.data.path:
        wanted.append(("data.path", resolve_repo_path(cfg.data.path), True, f"the {cfg.data.source} data folder"))
    wanted.append(("runtime.accelerate_config", resolve_repo_path(cfg.runtime.accelerate_config), False, "file"))
    if cfg.runtime.deepspeed_config:
        wanted.append(("runtime.deepspeed_config", resolve_repo_path(cfg.runtime.deepspeed_config), False, "file"))
    return [
        f"{key}: {path} (no such {'folder' if folder else 'file'}: {what})"
        for key, path, folder, what in wanted
        if not (path.is_dir() if folder else path.is_file())
    ]


def load_run_config(
    profile: str = "tiny",
    experiment: str | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = (),
    config_path: str | Path | None = None,
    *,
    overlays: Sequence[str | Path] = (),
    notebook: str | None = None,
) -> Config:
    """The configuration a notebook runs with (the notebook contract, ``docs/architecture.md``).

    ``config_path`` given (the runner injects it): exactly that resolved file, which the runner
    validated and saved before the notebook started; ``profile``, ``experiment`` and
    ``overrides`` are then only a record of how it was resolved. When the runner recorded in
    that file the config sections the notebook declares it reads (:func:`sections_header`), the
    config refuses to give any other section (:func:`guirl.configbase.guard_sections`): the
    notebook's stamp covers only those. ``config_path`` ``None`` (a notebook opened by hand): the
    same resolution as :func:`load_config`.
    """
    if config_path is not None:
        cfg = load_config(Path(config_path))
        declared = _declared_sections(Path(config_path))
        if declared is not None:
            from guirl.configbase import guard_sections

            guard_sections(cfg, declared[1], f"notebook {declared[0]}")
        return cfg
    return load_config(profile, experiment, overrides, overlays=overlays, notebook=notebook)


#: The header line the runner writes into a notebook's saved config when the notebook declares
#: the config sections it reads (``metadata.guirl.config``; :mod:`guirl.dag`).
SECTIONS_HEADER = re.compile(r"^# notebook (\S+) reads config sections: (.*)$")


def sections_header(notebook: str, sections: Sequence[str]) -> str:
    """The header line (without ``# ``) recording that ``notebook`` reads only ``sections``."""
    return f"notebook {notebook} reads config sections: {', '.join(sections)}"


def _declared_sections(path: Path) -> tuple[str, list[str]] | None:
    """``(notebook, sections)`` from a saved config's header (:func:`sections_header`), or ``None``."""
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.startswith("#"):
                    return None
                m = SECTIONS_HEADER.match(line.rstrip("\n"))
                if m:
                    return m.group(1), [x.strip() for x in m.group(2).split(",") if x.strip()]
    except (OSError, UnicodeDecodeError):
        return None
    return None
