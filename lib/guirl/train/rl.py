"""The RL engine of the repository: rollout -> reward -> advantage -> clipped policy loss with a k3
KL to a frozen reference -> optimizer step, for every RL role of every method (``docs/rl.md``).

Why not TRL's ``GRPOTrainer``: it expresses plain single-turn GRPO, but not the step-level
semi-online rollouts of UI-S1 nor CCPO's N rollouts sharing one cropped, coordinate-augmented
history, nor DAPO's accumulate-until-full sampling (``docs/rl.md`` lists the API facts). One
engine therefore runs all of them, and its loss equals TRL's GRPO loss for the matching
``loss_type`` on a fixed batch (``tests/test_train_rl.py``).

A role supplies :class:`guirl.rl.hooks.RLHooks` (built by its ``Method.hooks`` entry):

* ``tasks``: the data source / step sampler (a :class:`~guirl.rl.samples.TaskStream` or anything
  with ``next(n)``, ``state_dict()``, ``load_state_dict()``); one task becomes one group;
* ``rollout(policy, tasks, args) -> [Sample]``: builds the prompts (history builder) and asks the
  :class:`guirl.rollout.Policy` for ``args.group_size`` completions per task; multi-turn methods
  run their episode loop here (:func:`guirl.rl.hooks.single_turn_rollout` is the single-turn case);
* ``reward(samples) -> [RewardResult]``: scalar reward plus components per sample;
* ``advantage(samples) -> (N,) tensor``: e.g. :func:`guirl.rl.samples.group_advantage_hook`;
* ``keep(samples) -> [bool]`` (optional): the data filter; with it, the engine draws more tasks
  (at most ``rl.max_draws`` draws) until ``rl.prompts_per_step`` groups are kept, then keeps the
  first ``prompts_per_step`` (DAPO dynamic sampling, CCPO Algorithm 1 lines 6-29);
* ``select(samples, n_groups) -> [Sample]`` (optional): which ``n_groups`` of the accumulated
  groups are kept when a draw overfills the batch (default: the first in draw order,
  :func:`~guirl.rl.samples.take_groups`; CCPO Algorithm 1 line 26 keeps the "top-B by DAPO");
  a per-draw ``keep`` filter cannot rank groups across draws, hence a hook of its own;
* ``metrics(infos, row) -> {name: value}`` (optional): extra log fields computed from the
  ``info`` dicts of every trained sample (all ranks) and the step's log row, e.g. image tokens and
  the compression rate of CCPO's cropped histories (Table 4, Figure 9); the built-in fields
  cannot know a method's per-sample facts, hence a hook of its own.

One step (CCPO Algorithm 1 lines 3-45, with ``num_iterations = 1``): draw tasks, roll out with
the current policy (eval mode, seeded by ``(seed, step, draw, rank)``), score, filter, compute
advantages on the kept samples; shuffle them into ``rl.mini_batches`` mini-batches; before the
first update compute the reference log-probs (``beta > 0``: a frozen copy of the initial weights
when all parameters train, the default and CCPO Table 8's setup; the LoRA adapter disabled with
``rl.lora``) and, with more than one mini-batch,
the old log-probs; for each mini-batch accumulate micro-batch gradients of
:func:`guirl.rl.losses.policy_loss` normalised by the mini-batch's *global* token (or sequence)
count across micro-batches and data-parallel ranks, clip the gradient norm and step AdamW.

Files under ``output_dir``: ``checkpoint-<step>/`` (``accelerate`` state: model, optimizer,
scheduler, RNG of every rank; ``engine.json``: step, task-stream cursor, counters, training seconds
so far and the learning-rate schedule, as plain JSON), written to a temporary name and renamed, so a
killed run resumes from the last complete one; ``rl_log.jsonl`` (one JSON object per step,
:data:`LOG_FIELDS`; rows after the resumed step, and a last line cut short by a kill, are dropped
on resume); ``final/`` (the full model, or the LoRA adapter with ``rl.lora``) with the processor;
``result.json`` last (its presence means done; ``guirl.models.load_trained`` reads it; it records
the trained and total parameter counts, the learning rate used and torch's thread count).

A resume unpickles nothing but tensors and plain data: the files of a checkpoint are read with
``torch.load(weights_only=True)`` (accelerate's loader; the RNG states are checked first, since
accelerate would skip a refused one silently), and no object is registered with accelerate's
``custom_checkpoint_*.pkl`` (which it loads with ``weights_only=False``). A checkpoint folder copied
from elsewhere cannot run code on resume.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from guirl import timing
from guirl.configbase import RunConfig
from guirl.rl.hooks import RLHooks
from guirl.rl.losses import agg_norm, policy_loss
from guirl.rl.samples import RolloutArgs, Sample, renumber_groups, take_groups
from guirl.rollout.policy import derive_seed

if TYPE_CHECKING:  # the resolved run config (top layer); kernels only read its attributes
    from guirl.rl.config import RLConfig

__all__ = [
    "train_rl",
    "RL_ENTRY",
    "RESULT_FILE",
    "FINAL_DIR",
    "LOG_FILE",
    "LOG_FIELDS",
    "read_log",
    "last_checkpoint",
    "deepspeed_values",
    "fill_deepspeed_config",
    "checkpoint_weights",
]

#: The entry module of RL stages (``Stage(entry=RL_ENTRY, ...)``, :mod:`guirl.train.launch`).
RL_ENTRY = "guirl.stages.rl"
RESULT_FILE = "result.json"
FINAL_DIR = "final"
LOG_FILE = "rl_log.jsonl"
ENGINE_FILE = "engine.json"

#: The per-step log (``rl_log.jsonl``): one row per step with these keys, plus
#: ``reward/<component>`` (mean over generated samples) for every reward component. A value that
#: is not defined (no finite reward; the update statistics of a skipped step) is ``null``.
LOG_FIELDS: dict[str, str] = {
    "step": "RL step, 1-based",
    "epoch": "tasks drawn so far / number of tasks",
    "reward": "mean reward of every sample generated this step (before the filter)",
    "reward_std": "std of those rewards",
    "reward_kept": "mean reward of the samples trained on",
    "adv_abs": "mean |advantage| of the samples trained on",
    "loss": "policy loss + beta * KL (global, averaged over mini-batches)",
    "pg_loss": "clipped surrogate part of the loss",
    "kl": "k3 KL to the reference, mean over trained tokens (0 when beta = 0)",
    "entropy": "policy entropy in nats, mean over trained tokens",
    "clip_frac": "share of trained tokens whose ratio was clipped",
    "grad_norm": "gradient norm before clipping (mean over mini-batches)",
    "lr": "learning rate of the last update",
    "prompt_tokens": "mean prompt tokens (text + image tokens) per trained sample",
    "completion_tokens": "mean generated tokens per trained sample",
    "n_generated": "samples generated this step (all draws, all ranks)",
    "n_kept": "samples trained on",
    "groups_kept": "groups trained on",
    "draws": "task draws this step (more than 1 only with a data filter)",
    "processes": "data-parallel processes (ranks)",
    "skipped": "true when no sample was kept (no update)",
    "gen_seconds": "rollout time (generation + prompt building)",
    "reward_seconds": "reward time",
    "update_seconds": "reference / old log-probs + forward/backward + optimizer",
    "logprob_ref_seconds": "of update_seconds: reference log-probs (a forward of the frozen model / adapter off)",
    "logprob_old_seconds": "of update_seconds: old log-probs (with more than one mini-batch)",
    "grad_seconds": "of update_seconds: forward + backward passes and optimizer steps of the mini-batches",
    "step_seconds": "whole step, wall clock",
}


# --------------------------------------------------------------------------------------------
# checkpoints and logs
def last_checkpoint(output_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step (its ``engine.json`` holds the engine state
    and the learning-rate schedule), or ``None``."""
    best: tuple[int, Path] | None = None
    if not output_dir.is_dir():
        return None
    for p in output_dir.glob("checkpoint-*"):
        tail = p.name.removeprefix("checkpoint-")
        if tail.isdigit() and _resumable(p) and (best is None or int(tail) > best[0]):
            best = (int(tail), p)
    return None if best is None else best[1]


def _resumable(checkpoint: Path) -> bool:
    """Whether ``checkpoint/engine.json`` is readable and holds what a resume restores, and the
    checkpoint's weight files load (a corrupt one is named in a warning)."""
    try:
        saved = json.loads((checkpoint / ENGINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (isinstance(saved, dict) and {"engine", "tasks", "scheduler"} <= saved.keys()):
        return False
    from guirl.models import corrupt_weight_files

    bad = corrupt_weight_files(checkpoint)
    if bad:
        warnings.warn(
            f"{bad[0][0]}: corrupt checkpoint weights ({bad[0][1]}); resuming from the previous complete checkpoint",
            stacklevel=3,
        )
        return False
    return True


def read_log(path: str | Path, *, drop_torn_tail: bool = False) -> list[dict[str, Any]]:
    """Rows of an ``rl_log.jsonl`` (a bad line raises ``ValueError`` naming the file and line).

    ``drop_torn_tail``: a last line that does not parse (a run killed while appending it) is
    dropped with a warning naming the file instead."""
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            if drop_torn_tail and i == last:
                warnings.warn(
                    f"{path}: line {i + 1} is cut short (a run stopped while writing it); dropped", stacklevel=2
                )
                break
            raise ValueError(f"{path}: line {i + 1}: not a JSON row ({e})") from None
    return rows


def _truncate_log(path: Path, last_step: int) -> None:
    """Keep the rows of steps ``<= last_step``: those a killed run wrote after its last checkpoint
    (all of them without one) go, and so does a last line it left cut short (with a warning)."""
    if not path.exists():
        return
    rows = [r for r in read_log(path, drop_torn_tail=True) if int(r["step"]) <= last_step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


class UnsafeCheckpointError(RuntimeError):
    """A checkpoint file holds objects other than tensors and plain data (refused, not loaded)."""


def _load_plain(path: Path) -> Any:
    """``path`` read with ``torch.load(weights_only=True)`` (tensors, numpy arrays and plain
    containers; accelerate's loader); :class:`UnsafeCheckpointError` for anything else."""
    import pickle

    from accelerate.utils import load

    try:
        return load(path, map_location="cpu")
    except pickle.UnpicklingError as e:
        raise UnsafeCheckpointError(
            f"{path}: holds objects other than tensors and plain data ({str(e).splitlines()[0][:160]}); refused. "
            "Delete this checkpoint folder to resume from an earlier one, or the stage folder to train again"
        ) from None


def _load_checkpoint(acc, checkpoint: Path, engine: _Engine, hooks: RLHooks, scheduler: Any) -> None:
    """Restore model, optimizer and RNG (accelerate, ``weights_only``), then the engine state,
    the task stream and the learning-rate schedule (``engine.json``) from ``checkpoint``."""
    foreign = sorted(checkpoint.glob("custom_checkpoint_*"))  # accelerate loads these with weights_only=False
    if foreign:
        raise UnsafeCheckpointError(
            f"{foreign[0]}: a pickle of objects this engine never writes; refused. Delete it (or this checkpoint "
            "folder) to resume"
        )
    _load_plain(checkpoint / f"random_states_{acc.process_index}.pkl")  # refused here, not skipped silently
    acc.load_state(str(checkpoint))
    saved = json.loads((checkpoint / ENGINE_FILE).read_text(encoding="utf-8"))
    engine.state.load_state_dict(saved["engine"])
    hooks.tasks.load_state_dict(saved["tasks"])
    scheduler.load_state_dict(saved["scheduler"])


class _EngineState:
    """Counters restored on resume (``engine.json``); ``train_seconds``: training time of the
    steps up to the checkpoint, summed over the runs that trained them."""

    def __init__(self) -> None:
        self.step = 0
        self.samples_generated = 0
        self.samples_trained = 0
        self.train_seconds = 0.0

    def state_dict(self) -> dict[str, float]:
        return dict(vars(self))

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        for k, v in state.items():
            setattr(self, k, float(v) if k == "train_seconds" else int(v))


# --------------------------------------------------------------------------------------------
# model setup
def deepspeed_values(rl: RLConfig) -> dict[str, Any]:
    """The DeepSpeed keys this engine decides, from the run config (their one source).

    * ``train_micro_batch_size_per_gpu``: ``rl.micro_batch_size`` samples per backward pass;
    * ``gradient_accumulation_steps``: 1, because the engine marks the accumulation boundary itself
      (the last micro-batch of a mini-batch, :meth:`_Engine.update`) and its loss is already divided
      by the mini-batch's token / sequence count; DeepSpeed's own count would divide it again;
    * ``gradient_clipping``: ``rl.max_grad_norm`` (DeepSpeed clips inside ``engine.step``).

    accelerate cannot fill these ``"auto"`` values itself: ``prepare(model, optimizer)`` gets no
    dataloader to read a batch size from, and its clipping default (1.0) is not the config's.
    """
    return {
        "train_micro_batch_size_per_gpu": int(rl.micro_batch_size),
        "gradient_accumulation_steps": 1,
        "gradient_clipping": float(rl.max_grad_norm),
    }


def fill_deepspeed_config(ds_config: dict[str, Any], values: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """Set each of ``values`` in ``ds_config`` (in place; also returned) where it is ``"auto"`` or
    missing. A number the file (``source``, named in the error) sets to something else raises
    ``ValueError``: the run config and the DeepSpeed file would disagree on one value. (accelerate's
    ``DeepSpeedPlugin.deepspeed_config_process`` fills only keys present in the file, and its error
    does not name the file.)"""
    for key, value in values.items():
        current = ds_config.get(key, "auto")
        if current == "auto":
            ds_config[key] = value
        elif current != value:
            raise ValueError(
                f"{source}: {key} is {current!r} but the RL engine needs {value!r} (from the run config's rl "
                f'section); set it to "auto" in the DeepSpeed file'
            )
    return ds_config


def _is_adapter_dir(path: Path) -> bool:
    return (path / "adapter_config.json").is_file()


def _load_policy_model(cfg: RunConfig, base_model: Path, output_dir: Path, is_main: bool) -> tuple[Any, Path]:
    """The model to train and the full-weight folder it starts from. An SFT result that is a LoRA
    adapter is merged into its base first (saved once to ``output_dir/base_merged``), so RL adds
    a fresh adapter on the SFT model, as "continuing semi-online RL from an SFT model" (CCPO A.1.2)."""
    from guirl.models import load_model

    m = cfg.model
    device = "cpu" if cfg.runtime.device == "cpu" else None
    kwargs: dict[str, Any] = {
        "dtype": m.torch_dtype,
        "attn_implementation": m.attn_implementation,
        "vision_attention": m.vision_attention,
    }
    if device is not None:
        kwargs["device"] = device
    if not _is_adapter_dir(base_model):
        return load_model(base_model, **kwargs), base_model
    merged = output_dir / "base_merged"
    if not (merged / "config.json").is_file():
        from peft import PeftModel

        adapter_cfg = json.loads((base_model / "adapter_config.json").read_text())
        parent = Path(adapter_cfg["base_model_name_or_path"])
        model = PeftModel.from_pretrained(load_model(parent, **kwargs), str(base_model)).merge_and_unload()
        if is_main:
            tmp = output_dir / "base_merged.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(str(tmp))
            tmp.rename(merged)
        return model, merged
    return load_model(merged, **kwargs), merged


# --------------------------------------------------------------------------------------------
# the engine
class _Engine:
    def __init__(self, cfg: RunConfig, hooks: RLHooks, processor: Any, model: Any, ref_model: Any, accelerator) -> None:
        self.cfg = cfg
        self.rl = cfg.rl
        self.hooks = hooks
        self.processor = processor
        self.model = model
        self.ref_model = ref_model
        self.acc = accelerator
        self.world = accelerator.num_processes
        self.rank = accelerator.process_index
        self.state = _EngineState()
        from guirl.models.image_cache import VisionCache, cached_processor

        # the screenshots the rollouts encoded are read back from the process-wide store, and the frozen
        # reference model encodes each distinct screenshot once (identical tensors: guirl.models.image_cache)
        self._encoder = cached_processor(processor, shared=True)
        self._ref_vision = (
            VisionCache(ref_model)
            if ref_model is not None and self._encoder is not processor and VisionCache.supports(ref_model)
            else None
        )

    # ---- distributed helpers
    def _sum(self, values: Sequence[float]) -> list[float]:
        t = torch.tensor(list(values), dtype=torch.float64, device=self.acc.device)
        if self.world > 1:
            t = self.acc.reduce(t, reduction="sum")
        return t.tolist()

    def _max(self, value: int) -> int:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.long, device=self.acc.device)
        return int(self.acc.gather(t).max())

    def _gather_floats(self, values: Sequence[float]) -> list[float]:
        if self.world == 1:
            return list(values)
        from accelerate.utils import gather_object

        return [v for part in gather_object([list(values)]) for v in part]

    def _gather_objects(self, values: Sequence[Any]) -> list[Any]:
        if self.world == 1:
            return list(values)
        from accelerate.utils import gather_object

        return [v for part in gather_object([list(values)]) for v in part]

    # ---- one step
    def collect(self, policy: Any, step: int) -> tuple[list[Sample], list[Sample], dict[str, Any]]:
        """Draw, roll out, score and filter until the batch is full (module doc); returns the kept
        samples, every sample generated on this rank, and the step's rollout statistics."""
        rl, hooks = self.rl, self.hooks
        target = rl.prompts_per_step
        quota = target // self.world + (1 if self.rank < target % self.world else 0)
        kept: list[Sample] = []
        generated: list[Sample] = []
        next_group = 0
        draw = 0
        gen_s = reward_s = 0.0
        while True:
            tasks = list(hooks.tasks.next(target))
            mine = tasks[self.rank :: self.world]
            args = RolloutArgs(
                group_size=rl.group_size,
                temperature=rl.temperature,
                top_p=rl.top_p,
                seed=derive_seed(self.cfg.seed, step, draw, self.rank),
                step=step,
                draw=draw,
            )
            t0 = time.perf_counter()
            self.model.eval()
            with timing.phase("generation", "rl rollouts"):
                samples = hooks.rollout(policy, mine, args) if mine else []
            gen_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            with timing.phase("scoring", "rl reward"):
                results = list(hooks.reward(samples)) if samples else []
            reward_s += time.perf_counter() - t0
            if len(results) != len(samples):
                raise ValueError(f"reward hook returned {len(results)} results for {len(samples)} samples")
            for s, r in zip(samples, results, strict=True):
                s.reward, s.components = float(r.total), dict(r.components)
            next_group = renumber_groups(samples, next_group)
            generated.extend(samples)
            if hooks.keep is not None and samples:
                mask = list(hooks.keep(samples))
                if len(mask) != len(samples):
                    raise ValueError(f"keep hook returned {len(mask)} flags for {len(samples)} samples")
                samples = [s for s, k in zip(samples, mask, strict=True) if k]
            kept.extend(samples)
            kept = (hooks.select or take_groups)(kept, quota)
            draw += 1
            n_groups = len({s.group for s in kept})
            total_groups = int(self._sum([n_groups])[0])
            if hooks.keep is None or total_groups >= target or draw >= rl.max_draws:
                break
        rewards = self._gather_floats([s.reward for s in generated])
        finite = [r for r in rewards if math.isfinite(r)]
        comp_keys = sorted({k for s in generated for k in s.components})
        comp = {}
        for k in comp_keys:
            vals = [s.components.get(k, math.nan) for s in generated]
            tot = self._sum([sum(v for v in vals if math.isfinite(v)), sum(1 for v in vals if math.isfinite(v))])
            comp[f"reward/{k}"] = tot[0] / tot[1] if tot[1] else math.nan
        mean = sum(finite) / len(finite) if finite else math.nan
        std = math.sqrt(sum((r - mean) ** 2 for r in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0
        info = {
            "reward": mean,
            "reward_std": std,
            **comp,
            "n_generated": len(rewards),
            "draws": draw,
            "gen_seconds": gen_s,
            "reward_seconds": reward_s,
        }
        return kept, generated, info

    def _micro_batches(self, samples: list[Sample], step: int) -> list[list[list[Sample]]]:
        """Shuffle (seeded by step and rank) and split into mini-batches of micro-batches."""
        order = list(range(len(samples)))
        random.Random(derive_seed(self.cfg.seed, step, 10_007, self.rank)).shuffle(order)
        shuffled = [samples[i] for i in order]
        n_mini = self.rl.mini_batches
        minis = [shuffled[i::n_mini] for i in range(n_mini)]
        mb = self.rl.micro_batch_size
        return [[mini[j : j + mb] for j in range(0, len(mini), mb)] for mini in minis]

    def _encode(self, micro: Sequence[Sample]) -> tuple[dict[str, torch.Tensor], list[Any] | None]:
        """The forward inputs of a micro-batch and its images' content keys (``None`` without the
        processor cache)."""
        from guirl.rl.logprobs import encode_samples

        with timing.phase("images", "rl update batches"):
            batch = encode_samples(
                self._encoder, [s.prompt for s in micro], [s.completion_ids for s in micro], device=self.acc.device
            )
        return batch, getattr(getattr(self._encoder, "image_processor", None), "last_keys", None)

    def _logprobs(
        self, model: Any, batch: Mapping[str, torch.Tensor], *, with_entropy: bool = False, image_features: Any = None
    ):
        from guirl.rl.logprobs import completion_logprobs

        return completion_logprobs(
            model, batch, temperature=self.rl.temperature, with_entropy=with_entropy, image_features=image_features
        )

    def _ref_logprobs(self, batch: Mapping[str, torch.Tensor], keys: list[Any] | None = None) -> torch.Tensor:
        with torch.no_grad():
            if self.ref_model is not None:
                feats = None
                if self._ref_vision is not None and keys is not None and "pixel_values" in batch:
                    feats = self._ref_vision.encoder_outputs(batch["pixel_values"], batch["image_grid_thw"], keys)
                return self._logprobs(self.ref_model, batch, image_features=feats)[0]
            unwrapped = self.acc.unwrap_model(self.model)
            with unwrapped.disable_adapter():
                return self._logprobs(self.model, batch)[0]

    def _norm_len(self) -> int | None:
        return self.rl.max_new_tokens if self.rl.loss_agg == "seq-mean-token-sum-norm" else None

    def update(self, samples: list[Sample], spare: Sample, step: int, optimizer, scheduler) -> dict[str, Any]:
        """Mini-batch updates on the kept samples (module doc); returns the step's loss statistics.
        ``spare`` (any sample of this rank) feeds the weight-0 passes of a rank with fewer
        micro-batches than another."""
        rl = self.rl
        minis = self._micro_batches(samples, step)
        n_micro_per_mini = [self._max(len(m)) for m in minis]
        self.model.train()
        # reference (and, with several updates per batch, old) log-probs before any update
        pre: dict[int, dict[str, torch.Tensor]] = {}
        encoded: dict[int, dict[str, torch.Tensor]] = {}  # each micro-batch is encoded once per step
        need_old = rl.mini_batches > 1
        ref_s = old_s = 0.0
        for mini in minis:
            for micro in mini:
                extra: dict[str, torch.Tensor] = {}
                if rl.beta > 0 or need_old:
                    t0 = time.perf_counter()
                    batch, keys = self._encode(micro)
                    encoded[id(micro)] = batch
                    enc_s = time.perf_counter() - t0
                if rl.beta > 0:
                    t0 = time.perf_counter()
                    with timing.phase("training", "rl reference log-probs"):
                        extra["ref"] = self._ref_logprobs(batch, keys)
                    ref_s += time.perf_counter() - t0 + enc_s
                if need_old:
                    t0 = time.perf_counter()
                    with torch.no_grad(), timing.phase("training", "rl old log-probs"):
                        extra["old"] = self._logprobs(self.model, batch)[0]
                    old_s += time.perf_counter() - t0 + (0.0 if rl.beta > 0 else enc_s)
                pre[id(micro)] = extra
        t_grad = time.perf_counter()
        sums = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "ent": 0.0, "clip": 0.0, "tok": 0.0, "prompt": 0.0}
        grad_norms = []
        norm_len = self._norm_len()
        for mini, n_micro in zip(minis, n_micro_per_mini, strict=True):
            local_norm = sum(float(agg_norm(_length_mask(micro), rl.loss_agg, norm_len=norm_len)) for micro in mini)
            global_norm = self._sum([local_norm])[0]
            # every rank runs the same number of backward passes (DDP / ZeRO all-reduce in the
            # last one); a rank with fewer micro-batches repeats one with weight 0
            for i in range(n_micro):
                dummy = i >= len(mini)
                micro = [spare] if dummy else mini[i]
                batch = encoded.pop(id(micro), None) if not dummy else None
                if batch is None:
                    batch = self._encode(micro)[0]
                logp, ent = self._logprobs(self.model, batch, with_entropy=True)
                last = i == n_micro - 1
                # DeepSpeed reads the accumulation boundary from accelerate's sync flag (what
                # ``accelerator.accumulate`` sets); DDP skips the all-reduce under no_sync
                self.acc.gradient_state._set_sync_gradients(last)
                if dummy:
                    with nullcontext() if last else self.acc.no_sync(self.model):
                        self.acc.backward(logp.sum() * 0.0)
                    continue
                mask = batch["completion_mask"].to(logp.dtype)
                extra = pre[id(micro)]
                old = extra.get("old", logp.detach())
                adv = torch.tensor([s.advantage for s in micro], dtype=logp.dtype, device=logp.device)
                loss, st = policy_loss(
                    logp,
                    old,
                    adv,
                    mask,
                    ref_logp=extra.get("ref"),
                    beta=rl.beta,
                    eps_low=rl.eps_low,
                    eps_high=rl.eps_high,
                    agg=rl.loss_agg,
                    norm_len=norm_len,
                    global_norm=global_norm,
                    dp_size=self.world,
                )
                with nullcontext() if last else self.acc.no_sync(self.model):
                    self.acc.backward(loss)
                sums["loss"] += float(loss.detach()) / rl.mini_batches
                sums["pg_loss"] += float(st["pg_loss"].detach()) / rl.mini_batches
                if "per_token_kl" in st:
                    sums["kl"] += float((st["per_token_kl"].detach() * mask).sum())
                sums["ent"] += float((ent * mask).sum())
                sums["clip"] += float(st["clipped"].sum())
                sums["tok"] += float(mask.sum())
                sums["prompt"] += float(batch["prompt_tokens"].sum())
            grad_norm = self.acc.clip_grad_norm_(self.model.parameters(), rl.max_grad_norm)
            grad_norms.append(float(grad_norm) if grad_norm is not None else math.nan)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        tot = self._sum(
            [sums["loss"], sums["pg_loss"], sums["kl"], sums["ent"], sums["clip"], sums["tok"], sums["prompt"]]
        )
        grad_s = time.perf_counter() - t_grad
        n = self._sum([len(samples), sum(abs(s.advantage) for s in samples)])
        return {
            "logprob_ref_seconds": ref_s,
            "logprob_old_seconds": old_s,
            "grad_seconds": grad_s,
            "loss": tot[0] / self.world,
            "pg_loss": tot[1] / self.world,
            "kl": tot[2] / tot[5] if tot[5] else 0.0,
            "entropy": tot[3] / tot[5] if tot[5] else math.nan,
            "clip_frac": tot[4] / tot[5] if tot[5] else 0.0,
            "grad_norm": sum(grad_norms) / len(grad_norms),
            "lr": float(scheduler.get_last_lr()[0]),
            "prompt_tokens": tot[6] / n[0] if n[0] else math.nan,
            "completion_tokens": tot[5] / n[0] if n[0] else math.nan,
            "adv_abs": n[1] / n[0] if n[0] else math.nan,
        }


#: Log fields that only an update produces (null on a skipped step).
_UPDATE_FIELDS = (
    "logprob_ref_seconds",
    "logprob_old_seconds",
    "grad_seconds",
    "loss",
    "pg_loss",
    "kl",
    "entropy",
    "clip_frac",
    "grad_norm",
    "prompt_tokens",
    "completion_tokens",
    "adv_abs",
)


def _jsonable(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with non-finite floats as ``None`` (strict JSON; pandas reads them as NaN)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def _length_mask(micro: Sequence[Sample]) -> torch.Tensor:
    """``(B, C)`` completion mask from the completion lengths (no encoding needed)."""
    c = max((len(s.completion_ids) for s in micro), default=0)
    m = torch.zeros(len(micro), max(c, 1))
    for i, s in enumerate(micro):
        m[i, : len(s.completion_ids)] = 1
    return m


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def _check_finite(
    row: Mapping[str, Any], trained: Sequence[tuple[str, torch.nn.Parameter]], stage: str, step: int, rl: Any
) -> None:
    """Stop the stage at once when the update's loss, or a trained weight after it, is not finite
    (:class:`guirl.train.stagestate.NonFiniteError`): a diverged run saves no checkpoint and no result."""
    from guirl.train.stagestate import check_finite_number, check_finite_weights

    key, lr = ("rl.lora_learning_rate", rl.lora_learning_rate) if rl.lora else ("rl.learning_rate", rl.learning_rate)
    hint = f"lower {key} (now {lr:g}) and train again"
    check_finite_number("the loss", row.get("loss"), stage=stage, step=step, hint=hint)
    check_finite_weights(trained, stage=stage, step=step, hint=hint)


#: The folder accelerate's ``save_state`` writes a DeepSpeed engine's ZeRO states into (its tag).
DEEPSPEED_TAG = "pytorch_model"


def checkpoint_weights(checkpoint: Path) -> Path:
    """The ``model.safetensors`` of an engine checkpoint folder (``checkpoint-<step>``): the one
    accelerate's ``save_state`` wrote, or, for a checkpoint saved under DeepSpeed (its ZeRO states
    in ``pytorch_model/``), the float32 weights DeepSpeed reassembles from them
    (``get_fp32_state_dict_from_zero_checkpoint``), written next to them once. Raises
    ``FileNotFoundError`` naming the folder when it holds neither (a checkpoint that was not kept)."""
    checkpoint = Path(checkpoint)
    weights = checkpoint / "model.safetensors"
    if weights.is_file():
        return weights
    if not (checkpoint / DEEPSPEED_TAG).is_dir():
        raise FileNotFoundError(f"{checkpoint}: no model.safetensors and no DeepSpeed {DEEPSPEED_TAG}/ (not kept)")
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from safetensors.torch import save_file

    state = get_fp32_state_dict_from_zero_checkpoint(str(checkpoint), tag=DEEPSPEED_TAG)
    tmp = weights.with_name(weights.name + ".tmp")
    # tied parameters come back as one tensor under two names: each name gets its own copy
    save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(tmp), metadata={"format": "pt"})
    tmp.replace(weights)
    return weights


def _save_checkpoint(acc, output_dir: Path, state: _EngineState, hooks: RLHooks, limit: int, scheduler: Any) -> Path:
    final = output_dir / f"checkpoint-{state.step}"
    tmp = output_dir / f"checkpoint-{state.step}.tmp"
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    acc.wait_for_everyone()
    if acc.is_main_process:
        saved = {"engine": state.state_dict(), "tasks": hooks.tasks.state_dict(), "scheduler": scheduler.state_dict()}
        _write_json(tmp / ENGINE_FILE, saved)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        done = sorted(
            (int(p.name.removeprefix("checkpoint-")), p)
            for p in output_dir.glob("checkpoint-*")
            if p.name.removeprefix("checkpoint-").isdigit()
        )
        for _, p in done[:-limit]:
            shutil.rmtree(p, ignore_errors=True)
    acc.wait_for_everyone()
    return final


def train_rl(
    cfg: RunConfig,
    hooks: RLHooks,
    *,
    base_model: Path,
    output_dir: Path,
    make_policy: Callable[[Any, Any], Any],
    stage: str = "rl",
    progress: bool = True,
) -> dict[str, Any]:
    """Train ``cfg.rl.max_steps`` RL steps (resuming from the last checkpoint) and return the result.

    ``make_policy(model, processor)`` wraps the model being trained into a
    :class:`guirl.rollout.Policy` for the rollouts (e.g. ``HFPolicy`` with the generation budget
    ``cfg.rl.max_new_tokens``). Runs as one process or under ``accelerate launch`` (one rank per
    process). Returns the ``result.json`` content (module doc).
    """
    with timing.phase("startup", "imports"):
        from accelerate import Accelerator
        from tqdm.auto import tqdm

        from guirl.models import apply_lora, load_processor

    rl = cfg.rl
    output_dir = Path(output_dir)
    done = output_dir / RESULT_FILE
    if done.exists():
        return json.loads(done.read_text())
    output_dir.mkdir(parents=True, exist_ok=True)
    # bf16 from the run config: the DeepSpeed file's "auto" follows the accelerator's mixed precision. A CPU run
    # with a DeepSpeed file leaves accelerate's device choice alone: cpu=True would turn the DEEPSPEED launch into
    # a plain one, and DeepSpeed's CPU accelerator puts the engine on the CPU (the paper_smoke overlay)
    cpu = cfg.runtime.device == "cpu" and cfg.runtime.deepspeed_config is None
    acc = Accelerator(cpu=cpu, mixed_precision="bf16" if cfg.runtime.bf16 else "no")
    if acc.state.deepspeed_plugin is not None:
        fill_deepspeed_config(
            acc.state.deepspeed_plugin.deepspeed_config,
            deepspeed_values(rl),
            source=str(cfg.runtime.deepspeed_config or "the accelerate config's DeepSpeed file"),
        )
    torch.manual_seed(cfg.seed)
    m = cfg.model
    base_model = Path(base_model)
    proc_dir = _adapter_parent(base_model) if _is_adapter_dir(base_model) else base_model
    with timing.phase("io", "load model"):
        processor = load_processor(proc_dir, min_pixels=m.min_pixels, max_pixels=m.max_pixels)
    if rl.prompts_per_step < acc.num_processes:
        raise ValueError(
            f"rl.prompts_per_step ({rl.prompts_per_step}) is below the number of processes ({acc.num_processes}): "
            "every rank needs at least one task per draw"
        )
    if acc.state.deepspeed_plugin is not None and acc.state.deepspeed_plugin.zero_stage == 3:
        raise ValueError(
            "DeepSpeed ZeRO-3 shards the weights the rollouts generate with, and semi-online ranks run different "
            "numbers of generate calls (no lockstep): use ZeRO-2 (configs/deepspeed/zero2.json; docs/rl.md, memory)"
        )
    with timing.phase("io", "load model"):
        model, start = _load_policy_model(cfg, base_model, output_dir, acc.is_main_process)
    from guirl.train.stagestate import check_finite_weights

    check_finite_weights(  # a broken start is named before any step trains on it
        model.named_parameters(), stage=stage, step=None, hint=f"the base model {base_model} holds them: retrain it"
    )
    acc.wait_for_everyone()
    ref_model = None
    if rl.lora:
        model = apply_lora(model, r=cfg.lora.r, alpha=cfg.lora.alpha, dropout=cfg.lora.dropout)
    else:  # every parameter (a merged SFT adapter comes back frozen from PEFT)
        model.requires_grad_(True)
    if not rl.lora and rl.beta > 0:
        from guirl.models import load_model

        with timing.phase("io", "load model"):
            ref_model = load_model(
                start,
                dtype=m.torch_dtype,
                attn_implementation=m.attn_implementation,
                vision_attention=m.vision_attention,
                **({"device": "cpu"} if cfg.runtime.device == "cpu" else {}),
            ).to(acc.device)
        ref_model.requires_grad_(False).eval()
    if cfg.runtime.activation_checkpointing:  # recompute activations in the update's backward (docs/rl.md, memory)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = [p for p in model.parameters() if p.requires_grad]
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]  # checked after every update
    n_params = (sum(p.numel() for p in params), sum(p.numel() for p in model.parameters()))
    lr = rl.lora_learning_rate if rl.lora else rl.learning_rate
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=rl.weight_decay)
    warm = rl.warmup_steps * rl.mini_batches
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: min(1.0, (k + 1) / warm) if warm else 1.0)
    # the scheduler is stepped once per update by the engine, not prepared: accelerate's wrapper
    # would step it once per process
    model, optimizer = acc.prepare(model, optimizer)
    engine = _Engine(cfg, hooks, processor, model, ref_model, acc)
    log_path = output_dir / LOG_FILE
    resume = last_checkpoint(output_dir)
    if resume is not None:
        with timing.phase("io", "rl checkpoint"):
            _load_checkpoint(acc, resume, engine, hooks, scheduler)
    if acc.is_main_process:
        _truncate_log(log_path, engine.state.step)
    acc.wait_for_everyone()
    policy = make_policy(acc.unwrap_model(model), processor)
    threads = torch.get_num_threads()
    t_train = time.perf_counter()
    first, before = engine.state.step, engine.state.train_seconds
    bar = tqdm(total=rl.max_steps, initial=first, desc="rl", disable=not (progress and acc.is_main_process))
    while engine.state.step < rl.max_steps:
        step = engine.state.step + 1
        t0 = time.perf_counter()
        kept, generated, info = engine.collect(policy, step)
        if kept:
            adv = hooks.advantage(kept)
            if adv.shape != (len(kept),):
                raise ValueError(f"advantage hook returned shape {tuple(adv.shape)} for {len(kept)} samples")
            for s, a in zip(kept, adv.tolist(), strict=True):
                s.advantage = float(a)
        n_kept = int(engine._sum([len(kept)])[0])
        t1 = time.perf_counter()
        row: dict[str, Any] = {"step": step, **info}
        row["n_kept"] = n_kept
        row["processes"] = acc.num_processes
        row["groups_kept"] = int(engine._sum([len({s.group for s in kept})])[0])
        row["skipped"] = n_kept == 0
        finite = [s.reward for s in kept if math.isfinite(s.reward)]
        tot = engine._sum([sum(finite), len(finite)])
        row["reward_kept"] = tot[0] / tot[1] if tot[1] else math.nan
        if n_kept:
            with timing.phase("training", "rl update"):
                row.update(engine.update(kept, (kept or generated)[0], step, optimizer, scheduler))
            _check_finite(row, trained, stage, step, rl)
        else:  # nothing to train on: no update, its statistics are missing (null)
            row.update(dict.fromkeys(_UPDATE_FIELDS), lr=float(scheduler.get_last_lr()[0]))
        row["update_seconds"] = time.perf_counter() - t1
        row["step_seconds"] = time.perf_counter() - t0
        if hooks.metrics is not None:
            infos = engine._gather_objects([dict(s.info) for s in kept])
            row.update(hooks.metrics(infos, row))
        engine.state.step = step
        engine.state.samples_generated += int(info["n_generated"])
        engine.state.samples_trained += n_kept
        row["epoch"] = getattr(hooks.tasks, "epoch", math.nan)
        if acc.is_main_process:
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(_jsonable(row)) + "\n")
        if step % rl.save_steps == 0 or step == rl.max_steps:
            engine.state.train_seconds = before + time.perf_counter() - t_train
            with timing.phase("io", "rl checkpoint"):
                _save_checkpoint(acc, output_dir, engine.state, hooks, rl.save_total_limit, scheduler)
        bar.update(1)
        bar.set_postfix({k: f"{row[k]:.4g}" for k in ("reward", "kl", "n_kept") if row.get(k) is not None})
    bar.close()
    seconds = before + time.perf_counter() - t_train  # the resumed runs' training time included
    final = output_dir / FINAL_DIR
    acc.wait_for_everyone()
    if acc.is_main_process:
        with timing.phase("io", "save model"):
            acc.unwrap_model(model).save_pretrained(str(final))
            processor.save_pretrained(str(final))
    result = {
        "stage": stage,
        "role": rl.role,
        "base_model": str(start),
        "final": str(final),
        "adapter": bool(rl.lora),
        "trainable_parameters": n_params[0],
        "parameters": n_params[1],
        "learning_rate": lr,
        "resumed_from": str(resume) if resume is not None else None,
        "global_step": engine.state.step,
        "first_step": first,
        "train_seconds": round(seconds, 2),
        "samples_generated": engine.state.samples_generated,
        "samples_trained": engine.state.samples_trained,
        "threads": threads,
        "log": str(log_path),
    }
    if acc.is_main_process:
        _write_json(done, result)
    acc.wait_for_everyone()
    return result


def _adapter_parent(adapter_dir: Path) -> Path:
    return Path(json.loads((adapter_dir / "adapter_config.json").read_text())["base_model_name_or_path"])
