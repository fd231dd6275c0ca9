"""Supervised training stages (grounding pre-training and SFT) with TRL's ``SFTTrainer``.

The command-line entry that ``accelerate launch`` runs is :mod:`guirl.stages.sft` (it loads the
resolved config and calls :func:`train`), in a subprocess or in the caller (:mod:`guirl.train.launch`).

    accelerate launch --config_file configs/accelerate/cpu.yaml -m guirl.stages.sft \\
        --config runs/tiny/01_sft/config.yaml --stage sft --data-dir data/tiny/minigui \\
        --base-model <folder> --output-dir runs/tiny/01_sft/sft

Stages:
* ``grounding``: full-parameter TRL ``SFTTrainer`` on grounding samples (AgentCPM-GUI Stage I
  analogue: the randomly initialised tiny model's first stage on MiniGUI screens, and notebook
  07's Stage I on a converted data set's UI elements).
* ``sft``: TRL ``SFTTrainer`` with a PEFT LoRA adapter on the language model only (CCPO
  Table 7: r=8, alpha=16, dropout=0.1; all parameters when ``lora.enabled`` is false, as in
  the tiny profile), loss on the completion only, on trajectory steps for every history
  setting of ``sft.histories``.
* ``pretrain``: the tiny base model's pretraining (:mod:`guirl.train.pretrain`): every parameter,
  on multi-turn conversations about one MiniGUI screenshot each, the loss on every assistant
  turn (TRL's ``assistant_only_loss`` with its Qwen2.5-VL training template), recipe from the
  ``pretrain`` section.
* ``records``: the same training as ``sft`` on records a study wrote (:data:`RECORDS_INPUT`, a
  JSONL of :mod:`guirl.train.data` records: a planner's plans, a coordinator's instructions, a
  memory-carrying agent's steps), for what recorded trajectory steps alone do not give. Records
  without images train a text-only model (``model_type: qwen3``, e.g. CES's State Tracker)
  through TRL's text path.

The same script runs one CPU process or a multi-GPU DeepSpeed ZeRO-2 job (the DeepSpeed config
comes from ``runtime.deepspeed_config``). Checkpoints go to ``<output-dir>/checkpoint-*``; a
checkpoint counts once the trainer has written all of it and :data:`COMPLETE_FILE` beside it (with
the training seconds so far): a rerun resumes from the last complete one, passing over (with a
warning naming it) one that a stopped run left half-written or whose weights do not load. A loss
or a weight that is not finite stops the stage at once (:func:`_stop_on_non_finite`): a diverged
stage writes no complete checkpoint and no result. When training ends the result is
saved to ``<output-dir>/final`` and ``<output-dir>/result.json`` is written last (its presence
means done); its ``train_seconds`` sum the runs that trained the stage.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

from guirl import timing
from guirl.configbase import RunConfig
from guirl.paths import resolve_repo_path

RESULT_FILE = "result.json"
FINAL_DIR = "final"
#: The stage input of a ``records`` stage: the JSONL of training records (:func:`guirl.train.data.write_records`).
RECORDS_INPUT = "records"
#: What each stage trains on; ``records`` reads its records from the stage input of that name.
SFT_STAGES = ("grounding", "sft", "records", "pretrain")
#: Written into ``checkpoint-<step>/`` after the trainer saved all of it (``{"global_step",
#: "train_seconds"}``): a checkpoint without it is incomplete and never resumed from.
COMPLETE_FILE = "guirl_complete.json"


def complete_checkpoint(output_dir: Path) -> tuple[Path | None, float]:
    """The complete checkpoint with the highest step and the training seconds up to it (``(None,
    0.0)`` when there is none). A higher, incomplete checkpoint (no :data:`COMPLETE_FILE`: a run
    stopped while writing it) or one whose weight files do not load (torn or overwritten after
    it was marked) is passed over with a warning naming it."""
    folders = [p for p in Path(output_dir).glob("checkpoint-*") if p.name.removeprefix("checkpoint-").isdigit()]
    for folder in sorted(folders, key=lambda p: int(p.name.removeprefix("checkpoint-")), reverse=True):
        try:
            marker = json.loads((folder / COMPLETE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            warnings.warn(
                f"{folder}: incomplete checkpoint (no {COMPLETE_FILE}: a run stopped while writing it); "
                "resuming from the previous complete one",
                stacklevel=2,
            )
            continue
        from guirl.models import corrupt_weight_files

        bad = corrupt_weight_files(folder)
        if bad:
            warnings.warn(
                f"{bad[0][0]}: corrupt checkpoint weights ({bad[0][1]}); resuming from the previous complete "
                "checkpoint (delete the folder to silence this)",
                stacklevel=2,
            )
            continue
        return folder, float(marker.get("train_seconds", 0.0))
    return None, 0.0


def _mark_complete(before: float):
    """A ``TrainerCallback`` writing :data:`COMPLETE_FILE` into each checkpoint once the trainer
    saved it, with ``before`` plus this run's training seconds."""
    from transformers import TrainerCallback

    class MarkComplete(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.t0 = time.perf_counter()

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                tmp = folder / (COMPLETE_FILE + ".tmp")
                seconds = before + time.perf_counter() - self.t0
                tmp.write_text(json.dumps({"global_step": state.global_step, "train_seconds": round(seconds, 3)}))
                tmp.replace(folder / COMPLETE_FILE)

    return MarkComplete()


def _stop_on_non_finite(stage: str, cfg: RunConfig):
    """A ``TrainerCallback`` that stops the stage at once when a logged loss is not finite, or when
    the weights hold a NaN or an infinity after an optimizer step (before the checkpoint of that
    step is saved, so no complete checkpoint and no result of a diverged run is ever written):
    :class:`guirl.train.stagestate.NonFiniteError`, naming the step and the learning rate."""
    from transformers import TrainerCallback

    from guirl.train.stagestate import check_finite_number, check_finite_weights

    section = stage if stage in ("grounding", "pretrain") else "sft"  # the section holding the stage's rate
    key = f"{section}.learning_rate"
    lr = getattr(cfg, section).learning_rate
    hint = f"lower {key} (now {lr:g}) and train again"

    class StopOnNonFinite(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            if model is not None:
                check_finite_weights(model.named_parameters(), stage=stage, step=state.global_step, hint=hint)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            for name in ("loss", "train_loss"):
                check_finite_number(name, (logs or {}).get(name), stage=stage, step=state.global_step, hint=hint)

    return StopOnNonFinite()


def build_records(
    cfg: RunConfig, stage: str, data_dir: Path, inputs: dict[str, Path] | None = None
) -> list[dict[str, Any]]:
    """Training records of ``stage`` from a prepared dataset folder (either layout of
    :mod:`guirl.data.splits`; ``grounding`` reads its ``grounding_train.jsonl``, MiniGUI's or a converted
    data set's), or for ``records`` from
    the JSONL file ``inputs["records"]`` (:func:`guirl.train.data.read_records`)."""
    from guirl.data.grounding import GROUNDING_FILE
    from guirl.data.splits import check_written, read_manifest, train_split
    from guirl.prompts import prompt_spec
    from guirl.train.data import grounding_records, read_jsonl, read_records, sft_records

    m = cfg.model
    if stage not in SFT_STAGES:
        raise ValueError(f"unknown SFT stage {stage!r}; known: {', '.join(SFT_STAGES)}")
    if stage == "pretrain":
        return pretrain_records(cfg, data_dir)
    if stage == "records":
        if not inputs or RECORDS_INPUT not in inputs:
            raise ValueError(f"a records stage needs the input {RECORDS_INPUT!r} (a JSONL of training records)")
        return read_records(inputs[RECORDS_INPUT], image_root=data_dir)
    if stage == "grounding":
        rows = read_jsonl(data_dir / GROUNDING_FILE)
        check_written(data_dir / GROUNDING_FILE, "rows", len(rows), read_manifest(data_dir).get("grounding_samples"))
        return grounding_records(
            rows,
            cfg.sft.output_format,
            image_root=data_dir,
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
            system_prompt=cfg.sft.system_prompt,
        )
    specs = [prompt_spec(cfg, tag) for tag in cfg.sft.histories]
    train = train_split(data_dir)
    return sft_records(
        train.episodes, specs, image_root=train.image_root, min_pixels=m.min_pixels, max_pixels=m.max_pixels
    )


def pretrain_records(cfg: RunConfig, data_dir: Path) -> list[dict[str, Any]]:
    """The ``pretrain`` stage's conversations from a :func:`guirl.train.pretrain.write_pretraining_data`
    folder (``train.jsonl``; the probes are never trained on), ``cfg.pretrain.turns`` turns each."""
    from guirl.env.pretraining import read_samples
    from guirl.train.data import pretraining_conversations
    from guirl.train.pretrain import read_manifest

    if cfg.pretrain is None:
        raise ValueError("a pretrain stage needs the config section 'pretrain' (configs/profiles/tiny.yaml has one)")
    manifest = read_manifest(data_dir)
    if manifest is None:
        raise ValueError(
            f"{data_dir}: no manifest.json; write the folder with guirl.train.pretrain.write_pretraining_data"
        )
    samples = read_samples(data_dir / "train.jsonl")
    if len(samples) != sum(manifest["train"].values()):
        raise ValueError(
            f"{data_dir / 'train.jsonl'}: {len(samples)} samples, the manifest says {sum(manifest['train'].values())}"
            " (a torn folder: delete it and rerun notebook 09)"
        )
    return pretraining_conversations(
        samples,
        image_root=data_dir,
        screen_size=(cfg.data.width, cfg.data.height),
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels,
        turns=cfg.pretrain.turns,
        seed=cfg.seed,
    )


def merged_base(cfg: RunConfig, base_model: Path, output_dir: Path) -> Path:
    """The full-weight folder a stage starts from: ``base_model`` itself, or, when it is a LoRA
    adapter (a LoRA SFT result that a later stage continues), the adapter merged into its base model,
    saved once to ``output_dir/base_merged`` with the base's processor (the main process writes it,
    the others wait)."""
    adapter_cfg = base_model / "adapter_config.json"
    if not adapter_cfg.is_file():
        return base_model
    from accelerate import PartialState

    merged = output_dir / "base_merged"
    with PartialState().main_process_first():
        if not (merged / "config.json").is_file():
            from peft import PeftModel

            from guirl.models import load_model, load_processor

            parent = Path(json.loads(adapter_cfg.read_text())["base_model_name_or_path"])
            model = PeftModel.from_pretrained(load_model(parent, dtype=cfg.model.torch_dtype), str(base_model))
            tmp = output_dir / "base_merged.tmp"
            model.merge_and_unload().save_pretrained(str(tmp))
            m = cfg.model
            load_processor(parent, min_pixels=m.min_pixels, max_pixels=m.max_pixels).save_pretrained(str(tmp))
            tmp.rename(merged)
    return merged


def _timed_collator(collate: Any) -> Any:
    """``collate`` with its calls charged to ``images`` (:mod:`guirl.timing`): a training batch's
    image processing and tokenization."""

    def timed(examples: Any) -> Any:
        with timing.phase("images", "training batches"):
            return collate(examples)

    return timed


def _logging_steps(max_steps: int | None) -> int:
    """Log about 10 points of the loss curve per stage (every step for very short runs)."""
    return 10 if max_steps is None else max(1, min(10, max_steps // 10))


def stage_length(cfg: RunConfig, stage: str) -> dict[str, Any]:
    """How long ``stage`` trains and in what batches, as ``transformers.TrainingArguments`` keys
    (what :func:`training_args` passes and :func:`optimizer_steps` reads): ``max_steps`` (-1: by
    ``num_train_epochs``, the ``sft`` and ``records`` stages without ``sft.max_steps``),
    ``num_train_epochs`` (those two stages only), ``per_device_train_batch_size`` and
    ``gradient_accumulation_steps``. Grounding and pretraining always train a step budget."""
    if stage not in SFT_STAGES:
        raise ValueError(f"unknown SFT stage {stage!r}; known: {', '.join(SFT_STAGES)}")
    if stage == "pretrain":
        p = cfg.pretrain
        if p is None:
            raise ValueError("a pretrain stage needs the config section 'pretrain'")
        return {
            "max_steps": p.max_steps,
            "per_device_train_batch_size": p.per_device_batch_size,
            "gradient_accumulation_steps": 1,
        }
    if stage == "grounding":
        g = cfg.grounding
        return {
            "max_steps": g.max_steps,
            "per_device_train_batch_size": g.per_device_batch_size,
            "gradient_accumulation_steps": 1,
        }
    s = cfg.sft
    return {
        "num_train_epochs": s.epochs,
        "max_steps": s.max_steps if s.max_steps is not None else -1,
        "per_device_train_batch_size": s.per_device_batch_size,
        "gradient_accumulation_steps": s.grad_accum,
    }


def optimizer_steps(
    n_records: int,
    *,
    max_steps: int,
    per_device_train_batch_size: int,
    gradient_accumulation_steps: int,
    processes: int = 1,
    num_train_epochs: float = 3.0,
) -> int:
    """The optimizer steps ``transformers.Trainer`` trains (its ``max_steps``) on ``n_records``
    records: ``max_steps`` when positive, else ``ceil(num_train_epochs x max(ceil(B / A), 1))``
    with ``B = ceil(ceil(n_records / per_device_batch) / processes)`` batches per process and epoch
    (accelerate's sharded loader: no batch dropped, every process as many batches) and ``A`` the
    gradient accumulation steps. The keyword arguments are :func:`stage_length`'s; ``num_train_epochs``
    defaults to ``TrainingArguments``'."""
    if max_steps > 0:
        return max_steps
    if n_records < 1:
        raise ValueError("optimizer_steps: no records to train on (an epoch of 0 batches)")
    batches = math.ceil(math.ceil(n_records / per_device_train_batch_size) / processes)
    per_epoch = max(math.ceil(batches / gradient_accumulation_steps), 1)
    return math.ceil(num_train_epochs * per_epoch)


def stage_schedule(cfg: RunConfig, stage: str, data_dir: Path, inputs: dict[str, Path] | None = None) -> dict[str, Any]:
    """What ``stage`` will train, resolved before it trains: ``records`` (:func:`build_records`),
    ``epochs`` (``None`` where a step budget sets the length), ``per_device_batch``, ``grad_accum``,
    ``processes`` (``runtime.num_processes``), ``global_batch`` (records per optimizer step),
    ``optimizer_steps`` (:func:`optimizer_steps`, the stage's ``global_step`` once trained) and
    ``from`` (``epochs`` or ``max_steps``)."""
    length = stage_length(cfg, stage)
    n = len(build_records(cfg, stage, data_dir, inputs))
    processes = cfg.runtime.num_processes
    by_epochs = length["max_steps"] <= 0
    batch, accum = length["per_device_train_batch_size"], length["gradient_accumulation_steps"]
    return {
        "records": n,
        "epochs": length["num_train_epochs"] if by_epochs else None,
        "per_device_batch": batch,
        "grad_accum": accum,
        "processes": processes,
        "global_batch": batch * accum * processes,
        "optimizer_steps": optimizer_steps(n, **length, processes=processes),
        "from": "epochs" if by_epochs else "max_steps",
    }


def training_args(cfg: RunConfig, stage: str, output_dir: Path):
    """TRL ``SFTConfig`` for a stage; every number comes from the run config."""
    from trl import SFTConfig

    cpu = cfg.runtime.device == "cpu"
    common: dict[str, Any] = dict(
        output_dir=str(output_dir),
        report_to="none",
        use_cpu=cpu,
        bf16=cfg.runtime.bf16,
        seed=cfg.seed,
        data_seed=cfg.seed,
        save_strategy="steps",
        save_total_limit=cfg.sft.save_total_limit,
        completion_only_loss=True,
        dataloader_num_workers=0,
        activation_checkpointing=cfg.runtime.activation_checkpointing,
        max_length=None,  # never truncate: truncation would cut image placeholder tokens
        deepspeed=str(resolve_repo_path(cfg.runtime.deepspeed_config)) if cfg.runtime.deepspeed_config else None,
    )
    length = stage_length(cfg, stage)
    if stage == "pretrain":
        p = cfg.pretrain
        assert p is not None  # stage_length named the missing section
        return SFTConfig(
            **{**common, "completion_only_loss": None},
            **length,
            assistant_only_loss=True,  # every answer of the conversation (TRL's Qwen2.5-VL training template)
            learning_rate=p.learning_rate,
            warmup_steps=p.warmup_ratio,
            lr_scheduler_type=p.lr_scheduler_type,
            weight_decay=0.0,
            save_steps=max(1, min(p.save_steps, p.max_steps)),
            logging_steps=_logging_steps(p.max_steps),
        )
    if stage == "grounding":
        g = cfg.grounding
        return SFTConfig(
            **common,
            **length,
            learning_rate=g.learning_rate,
            warmup_steps=0.05,
            lr_scheduler_type="cosine",
            save_steps=max(1, min(cfg.sft.save_steps, g.max_steps)),
            logging_steps=_logging_steps(g.max_steps),
        )
    s = cfg.sft
    return SFTConfig(
        **common,
        **length,
        learning_rate=s.learning_rate,
        warmup_steps=s.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        lr_scheduler_type=s.lr_scheduler_type,
        weight_decay=s.weight_decay,
        save_steps=s.save_steps,
        logging_steps=_logging_steps(s.max_steps),
    )


def train(
    cfg: RunConfig,
    stage: str,
    data_dir: Path,
    base_model: Path,
    output_dir: Path,
    inputs: dict[str, Path] | None = None,
) -> dict[str, Any]:
    """Run one stage to completion (resuming from the last checkpoint) and return its result;
    ``inputs``: the stage's named inputs besides the data folder (a ``records`` stage's file).
    ``base_model`` may be a LoRA adapter folder (:func:`merged_base`)."""
    with timing.phase("startup", "imports"):
        import torch
        from trl import SFTTrainer

        from guirl.models import TextProcessor, load_model, load_processor, lora_config, lora_target_regex
        from guirl.train.cores import callback_from_env
        from guirl.train.data import to_dataset
        from guirl.train.lm_head import compact_lm_head

    output_dir.mkdir(parents=True, exist_ok=True)
    done = output_dir / RESULT_FILE
    if done.exists():
        return json.loads(done.read_text())
    torch.manual_seed(cfg.seed)
    m = cfg.model
    with timing.phase("io", "load model"):
        base_model = merged_base(cfg, Path(base_model), output_dir)
        processor = load_processor(base_model, min_pixels=m.min_pixels, max_pixels=m.max_pixels)
        model = load_model(
            base_model,
            dtype=m.torch_dtype,
            device="cpu" if cfg.runtime.device == "cpu" else None,
            attn_implementation=m.attn_implementation,
            vision_attention=m.vision_attention,
        )
    model.train()
    from guirl.train.stagestate import check_finite_weights

    check_finite_weights(  # a broken start is named before any step trains on it
        model.named_parameters(), stage=stage, step=None, hint=f"the base model {base_model} holds them: rebuild it"
    )
    with timing.phase("data", f"{stage} records"):
        records = build_records(cfg, stage, data_dir, inputs)
        dataset = to_dataset(records)
    peft = None
    if stage in ("sft", "records") and cfg.lora.enabled:
        peft = lora_config(
            r=cfg.lora.r, alpha=cfg.lora.alpha, dropout=cfg.lora.dropout, target_modules=lora_target_regex(model)
        )
    args = training_args(cfg, stage, output_dir)
    share = callback_from_env()  # side by side: take over the cores of a sibling stage that ended
    resume, before = complete_checkpoint(output_dir)
    with timing.phase("startup", "trainer"):
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            # a text-only model (a CES State Tracker) trains through TRL's text path with its tokenizer
            processing_class=processor.tokenizer if isinstance(processor, TextProcessor) else processor,
            peft_config=peft,
            # the finiteness check runs first: a diverged step's checkpoint is never marked complete
            callbacks=[
                _stop_on_non_finite(stage, cfg),
                _mark_complete(before),
                *([share] if share is not None else []),
            ],
        )
    if hasattr(trainer.data_collator, "processor"):  # the same pixel values, through a lookup table
        from guirl.models.image_cache import fast_processor

        trainer.data_collator.processor = fast_processor(trainer.data_collator.processor)
    trainer.data_collator = _timed_collator(trainer.data_collator)
    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    with timing.phase("training", f"sft {stage}"), compact_lm_head(cfg.runtime.compact_lm_head):
        trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    seconds = before + time.perf_counter() - t0  # the resumed runs' training time included
    final = output_dir / FINAL_DIR
    with timing.phase("io", "save model"):
        trainer.save_model(str(final))
        if trainer.is_world_process_zero():
            processor.save_pretrained(str(final))
    result = {
        "stage": stage,
        "base_model": str(base_model),
        "final": str(final),
        "adapter": peft is not None,
        "resumed_from": str(resume) if resume is not None else None,
        "train_seconds": round(seconds, 2),
        "n_records": len(records),
        "log_history": trainer.state.log_history,
        "global_step": trainer.state.global_step,
        "thread_switches": share.switches if share is not None else [],
        "threads": threads,
    }
    if trainer.is_world_process_zero():
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.rename(done)
    return result
