"""What a training stage depends on, and whether its folder may be reused (:mod:`guirl.train.launch`).

A stage's **fingerprint** (:func:`stage_fingerprint`, saved as :data:`FINGERPRINT_FILE` in its
output folder before it trains) holds

* the config keys the stage's entry reads that change what it trains, and their values
  (:func:`declared_keys`: per entry, per SFT stage, plus, for an RL stage, the config sections of
  its role's method and of its reward and the keys that method's roles also read:
  :meth:`guirl.config.BaseConfig.rl_sections`), never the others: an ``eval`` key, another
  method's section or ``coepg.iterations`` leave an SFT stage as it is;
* the **content** of its data folder, its other inputs and its base model (:func:`guirl.contenthash.folder_digest`;
  for a LoRA adapter also the base model it was trained on), never their paths: a data folder
  rebuilt with other records or a base model retrained at the same path trains again;
* the library: the sha256 of all of ``lib/guirl`` before the stage runs, and, once it has run,
  the ``guirl`` modules its process imported with their hashes (:data:`READS_FILE`, written by the
  stage process: :func:`write_reads`), so that an edit of a module the stage never ran leaves it
  as it is.

The stage process also records the config keys it actually read (:mod:`guirl.configbase`'s
:func:`~guirl.configbase.record_reads`) with their values; a later run compares those too, so a key
read but not declared can never be reused stale, and :func:`undeclared_reads` names it (the tests
keep that list empty).

:func:`stale_reasons` compares the saved state with the current one; :func:`discard_stale` deletes
a folder whose fingerprint differs, is missing, or is torn (naming the file), so changed inputs
never reuse stale checkpoints. Every state file is written atomically
(:func:`guirl.contenthash.write_json_atomic`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from guirl.configbase import RunConfig, require_sections
from guirl.contenthash import (
    StateFileError,
    changed_modules,
    folder_digest,
    library_digest,
    module_hashes,
    read_json_state,
    write_json_atomic,
)

__all__ = [
    "FINGERPRINT_FILE",
    "READS_FILE",
    "SFT_ENTRY_NAME",
    "RL_ENTRY_NAME",
    "NOT_TRAINED",
    "ENTRY_READS",
    "declared_keys",
    "mirrored_keys",
    "covered",
    "counts",
    "stage_fingerprint",
    "stale_reasons",
    "discard_stale",
    "write_fingerprint",
    "write_reads",
    "undeclared_reads",
    "NonFiniteError",
    "check_finite_number",
    "check_finite_weights",
    "non_finite_tensors",
]


class Stage(Protocol):
    """What this module reads of a :class:`guirl.train.launch.Stage` (annotated structurally: the
    launcher imports this module, and the layering allows no import circle, type-only included)."""

    name: str
    entry: str
    cfg: RunConfig
    inputs: Mapping[str, Path]
    base_model: Path
    output_dir: Path


#: File in a stage's output folder recording what the stage was trained from.
FINGERPRINT_FILE = "stage_fingerprint.json"
#: File the stage process writes when it has trained: the config keys it read (with their values)
#: and the ``guirl`` modules it ran (with their hashes).
READS_FILE = "stage_reads.json"
#: The entry modules (``guirl.train.launch.SFT_ENTRY``, ``guirl.train.rl.RL_ENTRY``).
SFT_ENTRY_NAME = "guirl.stages.sft"
RL_ENTRY_NAME = "guirl.stages.rl"

#: Keys every stage process reads: the seed, how the model is loaded and how it runs (not
#: ``model.path``: the stage starts from its base model folder, whose content is fingerprinted).
_RUN_KEYS = (
    "seed",
    "model.torch_dtype",
    "model.attn_implementation",
    "model.vision_attention",
    "model.min_pixels",
    "model.max_pixels",
    "runtime.device",
    "runtime.threads",
    "runtime.activation_checkpointing",
    "runtime.compact_lm_head",
    "runtime.accelerate_config",
    "runtime.deepspeed_config",
    "runtime.num_processes",
    "runtime.bf16",
)
#: The keys (dotted prefixes) each entry reads and that change what it trains, by entry and stage
#: name (``None``: any name of that entry). The SFT stages read the format and prompt of ``sft``
#: for their records, grounding its own budget; the RL entry also reads its role's and reward's
#: method sections (:meth:`guirl.config.BaseConfig.rl_sections`).
ENTRY_READS: dict[tuple[str, str | None], tuple[str, ...]] = {
    (SFT_ENTRY_NAME, "grounding"): (
        *_RUN_KEYS,
        "grounding",
        "sft.save_steps",
        "sft.output_format",
        "sft.system_prompt",
    ),
    (SFT_ENTRY_NAME, "sft"): (*_RUN_KEYS, "lora", "sft"),
    # the tiny base model's pretraining: its section and the screen size its samples are drawn at
    (SFT_ENTRY_NAME, "pretrain"): (*_RUN_KEYS, "pretrain", "data.width", "data.height"),
    (SFT_ENTRY_NAME, "records"): (*_RUN_KEYS, "lora", "sft"),
    (RL_ENTRY_NAME, None): (
        *_RUN_KEYS,
        "lora",
        "rl",
        "sft.output_format",
        "sft.system_prompt",
        "sft.use_step_instruction",
    ),
}
#: Keys a stage may read that change nothing it trains: what it keeps on disk
#: (``sft.save_total_limit``), when and how it starts (``runtime.parallel_stages``, ``runtime.stage_launcher``) and the Low executor's
#: own recipe (``sft.executor``: the executor trains with a config of its own that moves those
#: values into the main keys), how 01 groups its agents (``sft.mix_histories``,
#: ``sft.history_recipes``: likewise moved into the main keys of each agent's config).
NOT_TRAINED = (
    "runtime.parallel_stages",
    "runtime.stage_launcher",
    "sft.save_total_limit",
    "sft.executor",
    "sft.mix_histories",
    "sft.history_recipes",
)
#: Left out of the fingerprint of an entry that declares nothing (every other key counts):
#: evaluation settings. Declared entries name the ``eval`` keys they read (a CES Coordinator's
#: frozen executor generates with ``eval.max_new_tokens``: ``Method.reads``).
UNDECLARED_ENTRY_SKIPS = ("eval",)


def covered(key: str, patterns: Iterable[str]) -> bool:
    """Whether dotted ``key`` is one of ``patterns`` or lies under one (``"sft.learning_rate"`` under
    ``"sft"``), or is a section holding one (``"ccpo"``, a section that is ``null``, holds ``"ccpo.x"``)."""
    return any(key == p or key.startswith(p + ".") or p.startswith(key + ".") for p in patterns)


def declared_keys(stage: Stage) -> tuple[str, ...] | None:
    """The keys (dotted prefixes) ``stage`` declares it reads and that change what it trains;
    ``None`` for an entry of its own (every key but :data:`NOT_TRAINED` then counts)."""
    keys = ENTRY_READS.get((stage.entry, stage.name), ENTRY_READS.get((stage.entry, None)))
    if keys is None:
        return None
    if stage.entry == RL_ENTRY_NAME:
        keys = (*keys, *stage.cfg.rl_sections())
    return keys


def _nested(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flat ``{dotted key: value}``; an empty mapping or ``None`` stays a value of its own."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            out.update(_nested(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _value_at(data: Mapping[str, Any], dotted: str) -> Any:
    """The value of ``dotted`` in the nested ``data`` (``KeyError`` when it is not there)."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _under(key: str, patterns: Iterable[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in patterns)


def counts(key: str, keys: tuple[str, ...] | None) -> bool:
    """Whether config key ``key`` enters the fingerprint of a stage declaring ``keys``
    (:func:`declared_keys`): it is declared (every key when ``None``, less
    :data:`UNDECLARED_ENTRY_SKIPS`) and not :data:`NOT_TRAINED`."""
    if keys is None:
        return not _under(key, (*NOT_TRAINED, *UNDECLARED_ENTRY_SKIPS))
    return covered(key, keys) and not _under(key, NOT_TRAINED)


def mirrored_keys(cfg: RunConfig) -> tuple[str, ...]:
    """The dotted keys of a paper section's stage values (``ces.warmup.learning_rate``,
    ``agentcpm.eval.n_tasks``: fields of a section with ``mirrors``, :mod:`guirl.configbase`). A
    stage that uses them runs with them moved into the kernel keys (``stage_updates``), which its
    fingerprint covers; as they stand in the section they are other stages' values (and, derived
    from the kernel keys by the recipes' precedence rule, would follow every kernel key). Read from
    the config's schema, so no section's values are read."""
    import typing

    from pydantic import BaseModel

    from guirl.configbase import Section, mirrored_fields

    def section_types(annotation: Any) -> list[type[BaseModel]]:
        if isinstance(annotation, type):
            return [annotation] if issubclass(annotation, BaseModel) else []
        return [t for arg in typing.get_args(annotation) for t in section_types(arg)]

    out: list[str] = []

    def walk(cls: type[BaseModel], prefix: str, top: bool) -> None:
        if not top and issubclass(cls, Section) and cls.mirrors is not None:
            out.extend(f"{prefix}{name}" for name in mirrored_fields(cls))
        for name, info in cls.model_fields.items():
            for sub in section_types(info.annotation):
                walk(sub, f"{prefix}{name}.", False)

    for name, info in type(cfg).model_fields.items():  # type: ignore[attr-defined]
        for sub in section_types(info.annotation):
            walk(sub, f"{name}.", True)
    return tuple(dict.fromkeys(out))


def config_part(cfg: RunConfig, keys: tuple[str, ...] | None) -> dict[str, Any]:
    """``{dotted key: value}`` of the config's keys that enter the fingerprint (:func:`counts`),
    less a paper section's stage values (:func:`mirrored_keys`)."""
    flat = _nested(cfg.to_dict())
    staged = mirrored_keys(cfg)
    return {k: v for k, v in sorted(flat.items()) if counts(k, keys) and not _under(k, staged)}


def _content(path: Path) -> str | None:
    """The content digest of an input folder or file; ``None`` when it is missing (the stage
    itself then fails naming it)."""
    try:
        return folder_digest(path)
    except FileNotFoundError:
        return None


def _base_model(path: Path) -> dict[str, Any]:
    """The base model's content; a LoRA adapter also names its base model's content (the weights
    it is merged into)."""
    out: dict[str, Any] = {"sha256": _content(path)}
    adapter = path / "adapter_config.json"
    if adapter.is_file():
        try:
            parent = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
        except (OSError, ValueError, AttributeError):
            parent = None
        if isinstance(parent, str) and parent:
            out["adapter_base_sha256"] = _content(Path(parent))
    return out


def stage_fingerprint(stage: Stage, *, library: str | None = None) -> dict[str, Any]:
    """What a stage's checkpoints depend on (module docstring): stage name, entry, the declared
    config keys with their values (``config``; ``config_sha256`` their hash), the content of the
    data folder, the other inputs and the base model, and the library digest. Two runs with
    equal fingerprints may share checkpoints and results. ``library``: the library digest when
    the caller has it."""
    from hashlib import sha256

    keys = declared_keys(stage)
    if keys is not None:  # a notebook's stamp must cover what its stages read
        require_sections(stage.cfg, {k.split(".", 1)[0] for k in keys}, f"stage {stage.name!r} ({stage.entry})")
    config = config_part(stage.cfg, keys)
    inputs = {k: _content(v) for k, v in sorted(stage.inputs.items())}
    return {
        "stage": stage.name,
        "entry": stage.entry,
        "declared": list(keys) if keys is not None else None,
        "config": config,
        "config_sha256": sha256(json.dumps(config, sort_keys=True).encode("utf-8")).hexdigest(),
        "inputs": inputs,
        "input_paths": {k: str(v.resolve()) for k, v in sorted(stage.inputs.items())},
        "base_model": _base_model(stage.base_model),
        "base_model_path": str(stage.base_model.resolve()),
        "library": library if library is not None else library_digest(),
    }


#: Parts of a fingerprint that must be equal for a folder to be reused (paths are only a record).
_COMPARED = ("stage", "entry", "inputs", "base_model")


def _differs(old: Any, new: Any) -> bool:
    return json.dumps(old, sort_keys=True) != json.dumps(new, sort_keys=True)


def stale_reasons(
    old: Mapping[str, Any], new: Mapping[str, Any], reads: Mapping[str, Any] | None, cfg: RunConfig
) -> list[str]:
    """Why a folder saved with fingerprint ``old`` (and, once trained, ``reads``: the
    :data:`READS_FILE` content) cannot be reused for the stage of fingerprint ``new`` (``[]``:
    it can). ``cfg``: the stage's config (the keys the stage read are looked up in it)."""
    reasons: list[str] = []
    for part in _COMPARED:
        if _differs(old.get(part), new.get(part)):
            what = {"inputs": "input content", "base_model": "base model content"}.get(part, part)
            if isinstance(old.get(part), Mapping) and isinstance(new.get(part), Mapping):
                names = sorted(k for k in old[part].keys() | new[part].keys() if old[part].get(k) != new[part].get(k))
                what += f" ({', '.join(names)})"
            reasons.append(f"{what} changed")
    old_config = old.get("config") if isinstance(old.get("config"), Mapping) else {}
    changed = sorted(k for k in old_config.keys() | new["config"].keys() if old_config.get(k) != new["config"].get(k))
    current = cfg.to_dict()
    read_config = reads.get("config") if reads is not None and isinstance(reads.get("config"), Mapping) else {}
    for key, value in sorted(read_config.items()):
        try:
            now = _value_at(current, key)
        except KeyError:
            now = None
        if _differs(now, value) and key not in changed:
            changed.append(key)
    if changed:
        reasons.append(f"config {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''} changed")
    modules = reads.get("modules") if reads is not None and isinstance(reads.get("modules"), Mapping) else None
    if modules:
        edited = changed_modules(modules)
        if edited:
            reasons.append(f"library module {', '.join(edited[:5])}{' ...' if len(edited) > 5 else ''} changed")
    elif old.get("library") != new.get("library"):
        reasons.append("library changed (the stage had not finished: the modules it runs are not known yet)")
    return reasons


def _read_reads(output_dir: Path) -> dict[str, Any] | None:
    path = output_dir / READS_FILE
    if not path.is_file():
        return None
    return read_json_state(path, "the stage's record of what it read", "it is rewritten when the stage trains")


def discard_stale(output_dir: Path, stage: Stage, fingerprint: dict[str, Any], echo: bool) -> bool:
    """Delete ``output_dir`` when it holds checkpoints or a result of a *different* fingerprint
    (another config key the stage reads, other input content, other library code it ran), of no
    fingerprint, or of a torn or corrupt one (named); returns whether it was deleted."""
    saved = output_dir / FINGERPRINT_FILE
    if not output_dir.exists() or not any(output_dir.iterdir()):
        return False
    why: list[str]
    try:
        old = read_json_state(saved, "the stage fingerprint", "the folder is retrained") if saved.is_file() else None
        reads = _read_reads(output_dir) if old is not None else None
    except StateFileError as err:
        old, reads, why = None, None, [str(err)]
    else:
        why = ["no fingerprint (written by an older version)"] if old is None else []
    if old is not None:
        why = stale_reasons(old, fingerprint, reads, stage.cfg)
        if not why:
            return False
    if echo:
        print(f"[run_stage] {output_dir}: stale outputs ({'; '.join(why)}); training from scratch", flush=True)
    shutil.rmtree(output_dir)
    return True


def write_fingerprint(output_dir: Path, fingerprint: Mapping[str, Any]) -> None:
    """Save the fingerprint (atomically) unless the folder already has one: a kept folder keeps
    the fingerprint it was trained with."""
    path = output_dir / FINGERPRINT_FILE
    if not path.is_file():
        write_json_atomic(path, dict(fingerprint))


def write_reads(output_dir: Path, cfg: RunConfig, keys: Iterable[str]) -> Path | None:
    """In the stage process, after training: save the config keys it read with their values and
    the ``guirl`` modules it imported with their hashes (:data:`READS_FILE`). Only the main rank
    writes (``RANK`` unset or 0); returns the file it wrote."""
    if os.environ.get("RANK", "0") != "0":
        return None
    data = cfg.to_dict()
    values = {}
    for key in sorted(keys):
        try:
            values[key] = _value_at(data, key)
        except KeyError:
            continue
    return write_json_atomic(Path(output_dir) / READS_FILE, {"config": values, "modules": stage_modules()})


#: ``guirl`` modules no training stage runs (the notebook layer and the run orchestration): a stage
#: trained inside a notebook's kernel (``runtime.stage_launcher: auto``) finds them imported all the
#: same, and an edit of one must not retrain it.
NOT_STAGE_MODULES = (
    "guirl.studies",
    "guirl.runner",
    "guirl.dag",
    "guirl.slurm",
    "guirl.report",
    "guirl.breakdown",
    "guirl.conclusions",
)


def stage_modules() -> dict[str, str]:
    """The ``guirl`` modules of this process a stage may have run, with their hashes
    (:func:`guirl.contenthash.module_hashes` less :data:`NOT_STAGE_MODULES`)."""
    return {k: v for k, v in module_hashes().items() if not _under(k, NOT_STAGE_MODULES)}


def undeclared_reads(stage: Stage) -> list[str]:
    """The config keys the stage's process read (:data:`READS_FILE`) that it does not declare
    (:func:`declared_keys`) and that are not :data:`NOT_TRAINED`: reused correctly all the same
    (their values are compared), but the declaration is incomplete."""
    keys = declared_keys(stage)
    try:
        reads = _read_reads(stage.output_dir)
    except StateFileError:
        return []
    if reads is None or keys is None:
        return []
    read = reads.get("config") or {}
    return sorted(k for k in read if not covered(k, keys) and not _under(k, NOT_TRAINED))


# --------------------------------------------------------------------------------------------
# non-finite training
class NonFiniteError(RuntimeError):
    """A stage's loss, gradient norm or weights are not finite: the stage stops and is never done."""


def check_finite_number(name: str, value: Any, *, stage: str, step: int | None, hint: str) -> None:
    """Raise :class:`NonFiniteError` when ``value`` (a logged loss or gradient norm) is a number that
    is not finite, naming the stage, the step and ``hint`` (the keys to change)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(float(value)):
        at = f" at step {step}" if step is not None else ""
        raise NonFiniteError(f"stage {stage!r}: {name} is {value}{at}: training diverged; {hint}")


def check_finite_weights(named: Iterable[tuple[str, Any]], *, stage: str, step: int | None, hint: str) -> None:
    """Raise :class:`NonFiniteError` when a weight of ``named`` (``model.named_parameters()``)
    holds a NaN or an infinity, naming the first ones. One reduction per tensor, summed: cheap
    enough for every optimizer step."""
    import torch

    named = [(n, p) for n, p in named if p.is_floating_point() and p.numel()]
    if not named:
        return
    device = named[0][1].device
    with torch.no_grad():  # one value per tensor, one transfer in all
        total = torch.stack([p.detach().sum(dtype=torch.float32).to(device) for _, p in named]).sum()
    if bool(torch.isfinite(total)):
        return
    bad = non_finite_tensors(named) or ["(their sum overflows)"]
    at = f" after step {step}" if step is not None else ""
    raise NonFiniteError(
        f"stage {stage!r}: the weights hold NaN or infinite values{at} ({', '.join(bad)}): training diverged; {hint}"
    )


def non_finite_tensors(named: Iterable[tuple[str, Any]], limit: int = 3) -> list[str]:
    """Names of the (first ``limit``) tensors of ``named`` holding a NaN or an infinity."""
    import torch

    bad = []
    for name, tensor in named:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad.append(name)
            if len(bad) >= limit:
                break
    return bad
