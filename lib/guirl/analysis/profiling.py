"""Measured cost of a Qwen2.5-VL step: wall time, peak memory, counted FLOPs.

Used to check CCPO's efficiency claims (CCPO Tables 4, 6, 12-15: fewer tokens, fewer TFLOPs,
faster training steps) by measurement, beside the analytic estimate of
:mod:`guirl.analysis.accounting`.

Units and conventions
---------------------
* Times are seconds of wall clock (:func:`time.perf_counter`). A measurement runs ``warmup``
  untimed calls, then ``repeats`` timed calls; :class:`Timing` keeps every repeat and reports the
  median, the quartiles (IQR), min and max. On CUDA each call is followed by
  ``torch.cuda.synchronize`` so the time covers the kernels, not only their launch.
* Memory is bytes. On CPU two views are reported: the ``tracemalloc`` peak (Python's own heap;
  it does **not** see torch's CPU allocator) and the peak resident-set-size growth over the call
  (``/proc/self/statm`` sampled every millisecond by a thread, plus ``ru_maxrss`` growth), which
  does. On CUDA: ``torch.cuda.max_memory_allocated`` above the allocation before the call.
* FLOPs follow :mod:`guirl.analysis.accounting` (a multiply-add is 2 FLOPs) and are counted with
  ``torch.utils.flop_counter.FlopCounterMode``, which counts matmuls, convolutions and
  attention kernels, exactly the operations of the analytic model.
* A *step* is one forward + backward of the RL loss on a batch of prompts (images + text) plus
  completions, built through the processor (:func:`build_batch`): the completion tokens'
  negative mean log-probability (:func:`guirl.rl.logprobs.completion_logprobs`, the logits of the
  last ``C + 1`` positions only, as the RL engine computes them). No optimizer update.

The measured steps feed the one cost model of the repository (:mod:`guirl.analysis.cost`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import resource
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guirl.analysis.accounting import SPECIAL_TOKENS_PER_IMAGE, FlopBreakdown, forward_flops, model_dims
from guirl.models.vision_attention import set_vision_attention
from guirl.rl.logprobs import FORWARD_KEYS, completion_logprobs, encode_samples

__all__ = [
    "Timing",
    "time_callable",
    "MemoryPeak",
    "measure_memory",
    "FlopCount",
    "count_flops",
    "eager_attention",
    "build_batch",
    "batch_prompt_tokens",
    "train_step",
    "StepProfile",
    "profile_step",
    "analytic_forward_flops",
    "analytic_forward_breakdown",
    "backward_multipliers",
    "analytic_train_flops",
    "mfu",
    "measure_peak_flops",
    "CheckpointChoice",
    "is_out_of_memory",
    "choose_activation_checkpointing",
    "set_activation_checkpointing",
    "row_image_grids",
    "profile_sweep",
    "time_interleaved",
    "GenerationLatency",
    "generation_latency",
    "random_model",
]


# --------------------------------------------------------------------------- device helpers
def _device_kind(device: str | torch.device) -> str:
    kind = torch.device(device).type
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda' (optionally 'cuda:N'), got {device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but torch.cuda.is_available() is False; use device='cpu'")
    return kind


def _sync(device: str | torch.device) -> Callable[[], None]:
    if _device_kind(device) == "cuda":
        dev = torch.device(device)
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


# --------------------------------------------------------------------------- timing
@dataclass(frozen=True)
class Timing:
    """Timed repeats of one call, in seconds (``seconds[i]`` is repeat ``i``; warm-up not included)."""

    seconds: tuple[float, ...]
    warmup: int

    def __post_init__(self) -> None:
        if not self.seconds:
            raise ValueError("Timing needs at least one timed repeat")

    @property
    def repeats(self) -> int:
        return len(self.seconds)

    @property
    def median(self) -> float:
        return float(np.median(self.seconds))

    @property
    def q1(self) -> float:
        return float(np.percentile(self.seconds, 25))

    @property
    def q3(self) -> float:
        return float(np.percentile(self.seconds, 75))

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def min(self) -> float:
        return float(min(self.seconds))

    @property
    def max(self) -> float:
        return float(max(self.seconds))

    def summary(self) -> dict[str, float | int]:
        """``{"median_s", "q1_s", "q3_s", "iqr_s", "min_s", "max_s", "repeats", "warmup"}``."""
        return {
            "median_s": self.median,
            "q1_s": self.q1,
            "q3_s": self.q3,
            "iqr_s": self.iqr,
            "min_s": self.min,
            "max_s": self.max,
            "repeats": self.repeats,
            "warmup": self.warmup,
        }


def time_callable(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    repeats: int = 5,
    device: str | torch.device = "cpu",
) -> Timing:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeats`` times timed (seconds each).

    ``device``: ``"cuda"`` synchronises the device after every call (so a repeat covers the
    kernels it launched); ``"cpu"`` does nothing extra. ``fn`` is called ``warmup + repeats``
    times in all.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    sync = _sync(device)
    for _ in range(warmup):
        fn()
        sync()
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return Timing(tuple(out), warmup)


# --------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class MemoryPeak:
    """Peak memory of one call, bytes above the state before it (module doc for the views).

    ``device`` ``"cpu"``: ``tracemalloc_bytes`` (Python heap peak) and ``rss_bytes`` (peak
    resident-set growth; torch tensors show here); ``cuda_bytes`` is ``None``. ``"cuda"``:
    ``cuda_bytes`` = ``max_memory_allocated`` minus the allocation before the call;
    the CPU views are ``None``. :attr:`peak_bytes` is the one to report for the device.
    """

    device: str
    tracemalloc_bytes: int | None = None
    rss_bytes: int | None = None
    cuda_bytes: int | None = None

    @property
    def peak_bytes(self) -> int:
        if self.device == "cuda":
            return int(self.cuda_bytes or 0)
        return int(max(self.rss_bytes or 0, self.tracemalloc_bytes or 0))


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux: fall back to the (monotone) high-water mark
        return _maxrss_bytes()


def _maxrss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def _release_free_heap() -> None:
    """Hand memory that glibc ``malloc`` keeps cached back to the OS (``malloc_trim(0)``), so a
    call's resident-set growth shows its allocations even when an earlier call made them once
    already. No-op where there is no glibc."""
    with contextlib.suppress(OSError, AttributeError):  # no glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class _RssSampler(threading.Thread):
    def __init__(self, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.interval_s = interval_s
        self.peak = _rss_bytes()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, _rss_bytes())
            self._stop_event.wait(self.interval_s)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        self.peak = max(self.peak, _rss_bytes())
        return self.peak


def measure_memory(
    fn: Callable[[], Any], *, device: str | torch.device = "cpu", interval_s: float = 0.001
) -> tuple[Any, MemoryPeak]:
    """``(fn(), MemoryPeak)``: run ``fn`` once and measure its peak memory on ``device``.

    CPU: ``tracemalloc`` runs during the call (it slows Python-heavy code; time separately) and a
    thread samples the resident set every ``interval_s`` seconds; ``rss_bytes`` is the larger
    of the sampled peak growth and the growth of ``ru_maxrss``. Memory ``malloc`` cached from
    earlier calls is handed back first (``malloc_trim``), so a repeated measurement of the same
    call gives about the same number. CUDA: the peak statistics are
    reset before the call.
    """
    kind = _device_kind(device)
    if kind == "cuda":
        dev = torch.device(device)
        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        result = fn()
        torch.cuda.synchronize(dev)
        return result, MemoryPeak("cuda", cuda_bytes=int(torch.cuda.max_memory_allocated(dev) - base))
    gc.collect()
    _release_free_heap()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    traced_base = tracemalloc.get_traced_memory()[0]
    rss_base, maxrss_base = _rss_bytes(), _maxrss_bytes()
    sampler = _RssSampler(interval_s)
    sampler.start()
    try:
        result = fn()
    finally:
        rss_peak = sampler.stop()
        traced_peak = tracemalloc.get_traced_memory()[1]
        if not was_tracing:
            tracemalloc.stop()
    rss_growth = max(rss_peak - rss_base, _maxrss_bytes() - maxrss_base, 0)
    return result, MemoryPeak("cpu", tracemalloc_bytes=max(traced_peak - traced_base, 0), rss_bytes=int(rss_growth))


# --------------------------------------------------------------------------- FLOPs
@dataclass(frozen=True)
class FlopCount:
    """FLOPs counted by ``FlopCounterMode`` over one call: ``total`` and per aten op."""

    total: int
    by_op: dict[str, int] = field(default_factory=dict)


def count_flops(fn: Callable[[], Any]) -> tuple[Any, FlopCount]:
    """``(fn(), FlopCount)``: FLOPs of every matmul / convolution / attention kernel ``fn`` runs
    (forward and, if ``fn`` calls ``backward``, backward)."""
    from torch.utils.flop_counter import FlopCounterMode

    mode = FlopCounterMode(display=False)
    with mode:
        result = fn()
    by_op = {str(op): int(n) for op, n in mode.flop_counts["Global"].items()}
    return result, FlopCount(int(mode.get_total_flops()), by_op)


@contextmanager
def eager_attention(model: Any) -> Iterator[None]:
    """Run ``model`` with eager attention inside the block (its own implementation is restored).

    Eager attention is plain matmuls, so ``FlopCounterMode`` counts it; the CPU kernel of
    ``scaled_dot_product_attention`` (``_scaled_dot_product_flash_attention_for_cpu``) has no
    FLOP formula and is silently left out (measured on the mid model: 1.2% of the forward missing
    at 62 tokens, more on longer prompts). :func:`profile_step` counts under this context.
    """
    before = getattr(model.config, "_attn_implementation", None)
    if before == "eager":
        yield
        return
    if not hasattr(model, "set_attn_implementation"):
        raise RuntimeError(
            f"{type(model).__name__} cannot switch to eager attention; load it with attn_implementation='eager'"
        )
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(before)


# --------------------------------------------------------------------------- batches and steps
def build_batch(
    processor: Any,
    samples: Sequence[tuple[Sequence[Any], str]],
    completion: str = '{"action": "click", "point": [0.5, 0.5]}',
    *,
    device: str | torch.device = "cpu",
) -> dict[str, torch.Tensor]:
    """A training batch from ``samples`` of ``(images, text)`` through the processor.

    Each sample becomes one user message holding its images (paths or PIL images, in order) then
    ``text``; the chat template and the processor run exactly as in the RL engine
    (:func:`guirl.rl.logprobs.encode_samples`: left-padded prompts, right-padded completions,
    ``pixel_values`` / ``image_grid_thw`` / ``mm_token_type_ids``). ``completion`` is the text
    every sample completes with (a typical action; its token count is the ``C`` of the step).
    """
    if not samples:
        raise ValueError("build_batch needs at least one (images, text) sample")
    prompts = []
    for images, text in samples:
        content = [{"type": "image"} for _ in images] + [{"type": "text", "text": text}]
        prompts.append(([{"role": "user", "content": content}], list(images)))
    ids = processor.tokenizer.encode(completion, add_special_tokens=False)
    if not ids:
        raise ValueError("build_batch: completion encodes to no token")
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    return encode_samples(processor, prompts, [[*ids, eos]] * len(prompts), device=device)


def batch_prompt_tokens(batch: Mapping[str, torch.Tensor]) -> int:
    """Prompt tokens of a :func:`build_batch` batch, summed over its rows (image tokens included)."""
    return int(batch["prompt_tokens"].sum())


def train_step(model: Any, batch: Mapping[str, torch.Tensor]) -> Callable[[], float]:
    """A closure running one forward + backward of the completion NLL; returns the loss value.

    Gradients are reset before each call (``zero_grad(set_to_none=True)``), so repeats are
    independent; the model's train/eval mode and ``requires_grad`` flags are left as they are.
    """

    def step() -> float:
        model.zero_grad(set_to_none=True)
        logp, _ = completion_logprobs(model, batch, forward_keys=[k for k in FORWARD_KEYS if k in batch])
        mask = batch["completion_mask"].to(logp.dtype)
        loss = -(logp * mask).sum() / mask.sum()
        loss.backward()
        return float(loss.detach())

    return step


def row_image_grids(batch: Mapping[str, torch.Tensor], *, image_token_id: int, merge: int) -> list[torch.Tensor]:
    """Per row of ``batch``, the rows of ``image_grid_thw`` (``(n_i, 3)`` patches) of its images.

    The processor lists the images of all rows in batch order; a row's images are the next ones
    whose merged tokens (``t h w / merge^2``) add up to its ``<|image_pad|>`` count. Raises
    ``ValueError`` when they do not.
    """
    n_rows = int(batch["input_ids"].shape[0])
    grids = batch.get("image_grid_thw")
    if grids is None:
        return [torch.zeros((0, 3), dtype=torch.long) for _ in range(n_rows)]
    per_image = (grids[:, 0] * grids[:, 1] * grids[:, 2] // merge**2).tolist()
    out: list[torch.Tensor] = []
    k = 0
    for i, row in enumerate(batch["input_ids"]):
        n_pad, first = int((row == image_token_id).sum()), k
        while n_pad > 0 and k < len(per_image):
            n_pad -= per_image[k]
            k += 1
        if n_pad != 0:
            raise ValueError(f"row {i}: image_grid_thw does not match its <|image_pad|> tokens (merge {merge})")
        out.append(grids[first:k])
    if k != len(per_image):
        raise ValueError(f"image_grid_thw lists {len(per_image)} images but the rows' pad tokens use {k}")
    return out


def analytic_forward_breakdown(
    model_config: Any, batch: Mapping[str, torch.Tensor], *, n_logits: int | None = None, causal: bool = False
) -> FlopBreakdown:
    """Analytic forward FLOPs (:func:`guirl.analysis.accounting.forward_flops`) of ``batch`` by
    component (vision tower, merger, LM), summed over its rows.

    Every row counts at the padded length ``L`` of the batch (the model computes the padding
    too): its text tokens are ``L`` minus its image blocks; its images are the resized sizes of
    ``image_grid_thw`` (so the pixel budget is the one the processor applied). ``n_logits``:
    positions per row projected through the LM head (default all ``L``; a :func:`train_step`
    projects ``C + 1``).
    """
    dims = model_dims(model_config)
    image_token_id = int(model_config.image_token_id)
    length = int(batch["input_ids"].shape[1])
    token_px = dims.patch_size * dims.spatial_merge_size
    parts = [f.name for f in fields(FlopBreakdown)]
    total = dict.fromkeys(parts, 0.0)
    for grids in row_image_grids(batch, image_token_id=image_token_id, merge=dims.spatial_merge_size):
        sizes = [(int(w) * dims.patch_size, int(h) * dims.patch_size) for _, h, w in grids.tolist()]
        areas = [w * h for w, h in sizes]
        budget = {"min_pixels": min(areas), "max_pixels": max(areas)} if areas else {}
        n_image_block = sum(a // token_px**2 + SPECIAL_TOKENS_PER_IMAGE for a in areas)
        row = forward_flops(dims, length - n_image_block, sizes, causal=causal, n_logits=n_logits, **budget)
        for name in parts:
            total[name] += getattr(row, name)
    return FlopBreakdown(**total)


def analytic_forward_flops(
    model_config: Any, batch: Mapping[str, torch.Tensor], *, n_logits: int | None = None, causal: bool = False
) -> float:
    """Analytic forward FLOPs of ``batch``: :func:`analytic_forward_breakdown`'s total."""
    return analytic_forward_breakdown(model_config, batch, n_logits=n_logits, causal=causal).total


def backward_multipliers(model: torch.nn.Module) -> tuple[float, float]:
    """``(vision, lm)``: backward FLOPs per forward FLOP of the vision tower (with the merger) and
    of the language model, from which parameters train (``requires_grad``).

    A part whose own weights train costs 2 (gradients for its activations and its weights); a
    part whose weights are frozen but that gradients must cross (the LM under LoRA, or in front
    of a trained vision tower) costs 1 (activations only; a LoRA adapter's own matmuls are left
    out, under 1% at rank 8); a part no gradient reaches costs 0 (a frozen vision tower: its
    input, the pixels, needs no gradient)."""
    vision_trains = lm_base_trains = lm_adapter_trains = False
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if ".visual." in f".{name}":
            vision_trains = True
        elif "lora_" in name:
            lm_adapter_trains = True
        else:
            lm_base_trains = True
    lm = 2.0 if lm_base_trains else (1.0 if lm_adapter_trains or vision_trains else 0.0)
    return (2.0 if vision_trains else 0.0), lm


def analytic_train_flops(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], *, n_logits: int | None) -> float:
    """Model FLOPs of one :func:`train_step` (forward + backward) on ``batch``, analytic:
    each part's forward FLOPs times ``1 + `` its :func:`backward_multipliers` factor. The
    recomputation of activation checkpointing is not counted (model FLOPs, as MFU is defined in
    PaLM, Chowdhery et al. 2022, App. B)."""
    fwd = analytic_forward_breakdown(model.config, batch, n_logits=n_logits)
    vision, lm = backward_multipliers(model)
    return fwd.vision * (1.0 + vision) + fwd.lm * (1.0 + lm)


def mfu(train_flops: float, step_seconds: float, peak_flops: float) -> float:
    """Model FLOPs utilisation, a fraction: ``train_flops / step_seconds / peak_flops``.

    ``train_flops``: model FLOPs of one step (:func:`analytic_train_flops`); ``step_seconds``:
    its wall time; ``peak_flops``: FLOP/s the device reaches (:func:`measure_peak_flops`, or a
    datasheet number: say which)."""
    if not (train_flops >= 0 and step_seconds > 0 and peak_flops > 0):
        raise ValueError(
            f"mfu needs train_flops >= 0, step_seconds > 0 and peak_flops > 0 (got {train_flops}, {step_seconds}, "
            f"{peak_flops})"
        )
    return train_flops / step_seconds / peak_flops


def measure_peak_flops(
    device: str | torch.device = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    *,
    n: int = 8192,
    warmup: int = 3,
    repeats: int = 10,
) -> float:
    """FLOP/s of one ``n x n @ n x n`` matrix product in ``dtype`` on ``device`` (``2 n^3`` FLOPs
    over the median of ``repeats`` timed products): the measured peak that :func:`mfu` divides by.

    On an H100 a bf16 product of n = 8192 is the largest dense rate an ordinary kernel reaches
    (docs/stack.md has the number measured there); on CPU pass a small ``n`` (e.g. 512)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    _device_kind(device)
    gen = torch.Generator(device=torch.device(device)).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    out = torch.empty(n, n, device=device, dtype=dtype)
    timing = time_callable(lambda: torch.matmul(a, b, out=out), warmup=warmup, repeats=repeats, device=device)
    return 2.0 * n**3 / timing.median


@dataclass(frozen=True)
class StepProfile:
    """One measured training step (module doc for units).

    ``prompt_tokens``: summed over rows (images included); ``sequence_tokens``: rows x padded
    length; ``forward_flops_counted`` / ``step_flops_counted``: ``FlopCounterMode`` over a forward
    / a forward + backward; ``forward_flops_analytic``: :func:`analytic_forward_flops` with the
    step's ``n_logits``; ``memory``: peak of one step.
    """

    prompt_tokens: int
    sequence_tokens: int
    timing: Timing
    memory: MemoryPeak
    forward_flops_counted: int
    step_flops_counted: int
    forward_flops_analytic: float
    loss: float
    train_flops_analytic: float = math.nan
    peak_flops: float | None = None

    @property
    def mfu(self) -> float:
        """:func:`mfu` of the median step (NaN without a ``peak_flops``)."""
        if self.peak_flops is None or math.isnan(self.train_flops_analytic):
            return math.nan
        return mfu(self.train_flops_analytic, self.timing.median, self.peak_flops)

    def summary(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "prompt_tokens": self.prompt_tokens,
            "sequence_tokens": self.sequence_tokens,
            **self.timing.summary(),
            "peak_bytes": self.memory.peak_bytes,
            "forward_flops_counted": self.forward_flops_counted,
            "step_flops_counted": self.step_flops_counted,
            "forward_flops_analytic": self.forward_flops_analytic,
            "train_flops_analytic": self.train_flops_analytic,
            "mfu": self.mfu,
            "loss": self.loss,
        }
        return out


def profile_step(
    model: Any,
    batch: Mapping[str, torch.Tensor],
    *,
    warmup: int = 1,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    count: bool = True,
    timing: Timing | None = None,
    peak_flops: float | None = None,
) -> StepProfile:
    """Time, memory and FLOPs of :func:`train_step` on ``batch`` (already on ``device``).

    Order: ``warmup`` untimed steps, ``repeats`` timed steps, one step under
    :func:`measure_memory`, then (``count=True``) one forward and one step under
    :func:`count_flops` under :func:`eager_attention` (``count=False`` leaves the FLOP fields 0;
    counting is slow on big inputs). Timing and memory use the model's own attention.
    ``timing``: a timing of this step measured elsewhere (e.g. interleaved with other settings by
    :func:`profile_sweep`); the warm-up and timed steps are then skipped. ``peak_flops``: the
    device's FLOP/s (:func:`measure_peak_flops`), for the MFU of the summary.
    """
    step = train_step(model, batch)
    if timing is None:
        timing = time_callable(step, warmup=warmup, repeats=repeats, device=device)
    loss, memory = measure_memory(step, device=device)
    fwd = full = 0
    n_logits = int(batch["completion_ids"].shape[1]) + 1
    if count:

        def forward() -> None:
            with torch.no_grad():
                completion_logprobs(model, batch, forward_keys=[k for k in FORWARD_KEYS if k in batch])

        with eager_attention(model):
            fwd = count_flops(forward)[1].total
            full = count_flops(step)[1].total
    model.zero_grad(set_to_none=True)
    return StepProfile(
        prompt_tokens=batch_prompt_tokens(batch),
        sequence_tokens=int(batch["input_ids"].numel()),
        timing=timing,
        memory=memory,
        forward_flops_counted=fwd,
        step_flops_counted=full,
        forward_flops_analytic=analytic_forward_flops(model.config, batch, n_logits=n_logits),
        loss=float(loss),
        train_flops_analytic=analytic_train_flops(model, batch, n_logits=n_logits),
        peak_flops=peak_flops,
    )


def profile_sweep(
    model: Any,
    batches: Mapping[str, Mapping[str, torch.Tensor]],
    *,
    warmup: int = 1,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    count: bool = True,
    progress: bool = True,
    interleave: bool = False,
    peak_flops: float | None = None,
) -> list[dict[str, Any]]:
    """:func:`profile_step` on each named batch (e.g. ``{"1AO full": ..., "1AO CASC": ...}``),
    with a progress bar; one row per batch: ``{"setting": name, **StepProfile.summary()}``. Feed
    ``prompt_tokens`` and ``median_s`` to :func:`guirl.analysis.cost.fit_cost_models`.

    ``interleave=True`` times the batches round-robin (:func:`time_interleaved`: repeat ``r`` of
    every batch before repeat ``r + 1`` of any), so a burst of load from other processes on a
    shared machine slows every setting alike instead of one; memory and FLOPs follow per batch.
    ``peak_flops``: the device's FLOP/s (:func:`measure_peak_flops`); each row then has its
    ``mfu`` (``train_flops_analytic`` over the median step time and the peak; NaN without it)."""
    from tqdm.auto import tqdm

    timings: dict[str, Timing | None] = dict.fromkeys(batches)
    if interleave:
        steps = {name: train_step(model, batch) for name, batch in batches.items()}
        timings = dict(time_interleaved(steps, warmup=warmup, repeats=repeats, device=device, progress=progress))
    rows = []
    for name, batch in tqdm(batches.items(), desc="profile", disable=not progress):
        prof = profile_step(
            model,
            batch,
            warmup=warmup,
            repeats=repeats,
            device=device,
            count=count,
            timing=timings[name],
            peak_flops=peak_flops,
        )
        rows.append({"setting": name, **prof.summary()})
    return rows


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    *,
    warmup: int = 1,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> dict[str, Timing]:
    """:func:`time_callable` of several calls, round-robin: ``warmup`` untimed calls of each, then
    ``repeats`` rounds timing each call once per round (in the order of ``fns``). Slow phases of a
    shared machine then land on every call, so their ratios stay fair."""
    from tqdm.auto import tqdm

    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    sync = _sync(device)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
            sync()
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    for _ in tqdm(range(repeats), desc="timing rounds", disable=not progress):
        for name, fn in fns.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            seconds[name].append(time.perf_counter() - t0)
    return {name: Timing(tuple(s), warmup) for name, s in seconds.items()}


# --------------------------------------------------------------------------- generation latency
@dataclass(frozen=True)
class GenerationLatency:
    """Latency of greedy generation (seconds): ``first`` = prefill + first token
    (``max_new_tokens=1``), ``full`` = ``new_tokens`` tokens; :attr:`per_token_s` = decode
    seconds per token after the first, from the medians."""

    first: Timing
    full: Timing
    new_tokens: int

    @property
    def per_token_s(self) -> float:
        if self.new_tokens <= 1:
            return float("nan")
        return (self.full.median - self.first.median) / (self.new_tokens - 1)

    def summary(self) -> dict[str, float | int]:
        return {
            "first_token_s": self.first.median,
            "full_s": self.full.median,
            "per_token_s": self.per_token_s,
            "new_tokens": self.new_tokens,
        }


def generation_latency(
    model: Any,
    inputs: Mapping[str, torch.Tensor],
    *,
    new_tokens: int = 16,
    warmup: int = 1,
    repeats: int = 3,
    device: str | torch.device = "cpu",
) -> GenerationLatency:
    """Time greedy ``model.generate`` on ``inputs`` (the processor's prompt batch: ``input_ids``,
    ``attention_mask``, ``pixel_values``, ``image_grid_thw``, ``mm_token_type_ids``) producing
    exactly ``new_tokens`` tokens (EOS does not stop it: ``min_new_tokens = max_new_tokens``)."""
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be >= 1, got {new_tokens}")
    keys = [k for k in FORWARD_KEYS if k in inputs]
    kw = {k: inputs[k] for k in keys}

    def gen(n: int) -> Callable[[], Any]:
        def call() -> Any:
            with torch.no_grad():
                out = model.generate(**kw, max_new_tokens=n, min_new_tokens=n, do_sample=False)
            got = out.shape[1] - kw["input_ids"].shape[1]
            if got != n:
                raise RuntimeError(f"generate produced {got} tokens, expected {n}")
            return out

        return call

    first = time_callable(gen(1), warmup=warmup, repeats=repeats, device=device)
    full = time_callable(gen(new_tokens), warmup=warmup, repeats=repeats, device=device)
    return GenerationLatency(first, full, new_tokens)


# --------------------------------------------------------------------------- memory probe
@dataclass(frozen=True)
class CheckpointChoice:
    """What :func:`choose_activation_checkpointing` chose: ``every_n_layers`` (``None``: no
    activation checkpointing; ``n``: every ``n``-th layer recomputes), the step's peak memory
    (bytes, :class:`MemoryPeak`) with that choice, and the out-of-memory message of each setting
    tried before it (first line)."""

    every_n_layers: int | None
    peak: MemoryPeak
    refused: tuple[tuple[int | None, str], ...] = ()

    @property
    def checkpointing(self) -> bool:
        return self.every_n_layers is not None


def is_out_of_memory(err: BaseException) -> bool:
    """True for an allocator's out-of-memory error (``torch.OutOfMemoryError``, which CUDA
    raises, or a ``RuntimeError`` saying "out of memory")."""
    return isinstance(err, torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and "out of memory" in str(err).lower()
    )


def set_activation_checkpointing(model: Any, every_n_layers: int | None) -> None:
    """Install an activation-checkpointing setting on a transformers model (or a PEFT wrapper):
    ``None`` off, ``n`` every ``n``-th layer (non-reentrant ``torch.utils.checkpoint``). It acts
    in training mode only (transformers skips it in eval mode)."""
    if every_n_layers is None:
        if model.is_activation_checkpointing:
            model.activation_checkpointing_disable()
    else:
        model.activation_checkpointing_enable({"use_reentrant": False}, every_n_layers=every_n_layers)


def _free_memory(model: Any, device: str | torch.device) -> None:
    model.zero_grad(set_to_none=True)
    gc.collect()
    if _device_kind(device) == "cuda":
        torch.cuda.empty_cache()


def choose_activation_checkpointing(
    model: Any,
    step: Callable[[], Any],
    *,
    device: str | torch.device = "cuda",
    ladder: Sequence[int | None] = (None, 1),
) -> CheckpointChoice:
    """The first activation-checkpointing setting of ``ladder`` under which one ``step()`` runs,
    measured rather than assumed.

    ``ladder``: settings from least to most memory-saving: ``None`` (off), then ``n`` (every
    ``n``-th layer keeps no activations and recomputes them in the backward; 1: every layer).
    Each setting is installed on ``model`` (``activation_checkpointing_enable`` /
    ``_disable``) and ``step`` runs once under :func:`measure_memory`; an out-of-memory error
    (:func:`is_out_of_memory`) frees the gradients and the allocator's cache and moves to the next
    setting; any other error propagates. The model is left with the chosen setting. When every
    setting runs out of memory, the last error is raised."""
    if not ladder:
        raise ValueError("ladder must name at least one setting (None: no activation checkpointing)")
    if not model.training:
        raise ValueError(
            "choose_activation_checkpointing: call model.train() first (checkpointing acts in training mode)"
        )
    refused: list[tuple[int | None, str]] = []
    for i, setting in enumerate(ladder):
        set_activation_checkpointing(model, setting)
        try:
            _, peak = measure_memory(step, device=device)
        except Exception as err:
            if not is_out_of_memory(err) or i == len(ladder) - 1:
                raise
            refused.append((setting, str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__))
            del err
            _free_memory(model, device)
            continue
        _free_memory(model, device)
        return CheckpointChoice(setting, peak, tuple(refused))
    raise AssertionError("unreachable: the last setting returns or raises")


# --------------------------------------------------------------------------- random models
def random_model(
    config_path: str | os.PathLike[str],
    processor: Any,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    attn_implementation: str | None = None,
    vocab_size: int | None = None,
    vision_attention: str = "fused",
) -> Any:
    """A random-weight ``Qwen2_5_VLForConditionalGeneration`` of the sizes in ``config_path``
    (``configs/models/<name>/config.json`` or its folder), speaking ``processor``'s tokenizer.

    Weights do not change cost, so a config's architecture with random weights measures the
    cost of that architecture. The special token ids (image pad, vision start/end, BOS/EOS/pad)
    are taken from ``processor.tokenizer`` so the processor's batches work unchanged;
    ``vocab_size`` defaults to the tokenizer's length rounded up to 64 (pass the config's
    ``vocab_size`` to keep a published model's LM-head cost). Deterministic in ``seed``.

    The weights are created on ``device`` in ``dtype`` (no float32 copy on the CPU first): on a
    GPU node, initialising the 7B architecture in float32 on the CPU and casting it took minutes.
    ``vision_attention``: ``"fused"`` or ``"loop"``, as :func:`guirl.models.load_model`.
    """
    from transformers import AutoConfig, AutoModelForImageTextToText

    p = Path(config_path)
    cfg_file = p / "config.json" if p.is_dir() else p
    if not cfg_file.is_file():
        raise FileNotFoundError(f"random_model: no config file at '{cfg_file}' (e.g. configs/models/qwen2.5-vl-mid)")
    data = json.loads(cfg_file.read_text())
    tok = processor.tokenizer
    ids = {
        "image_token_id": "<|image_pad|>",
        "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>",
        "vision_end_token_id": "<|vision_end|>",
        "bos_token_id": "<|endoftext|>",
        "eos_token_id": "<|im_end|>",
        "pad_token_id": "<|endoftext|>",
    }
    for key, token in ids.items():
        data[key] = int(tok.convert_tokens_to_ids(token))
    data["vocab_size"] = int(vocab_size) if vocab_size is not None else -(-len(tok) // 64) * 64
    text = data.get("text_config")
    if isinstance(text, dict):
        for key in ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id"):
            text[key] = data[key]
    model_type = data.pop("model_type", "qwen2_5_vl")
    config = AutoConfig.for_model(model_type, **data)
    if attn_implementation is not None:
        config._attn_implementation = attn_implementation
    dev = torch.device(device)
    rng_devices = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices), dev:
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    set_vision_attention(model, vision_attention)
    return model.eval()
