"""guirl.analysis.profiling: timer, memory, counted vs analytic FLOPs, cost-model fit, random models."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from guirl.analysis import profiling as P
from guirl.models import build_tiny_model, load_model, load_processor
from guirl.rl.logprobs import FORWARD_KEYS

REPO = Path(__file__).resolve().parents[1]
MID = REPO / "configs" / "models" / "qwen2.5-vl-mid"
#: Counted (FlopCounterMode) / analytic (accounting.forward_flops) forward FLOPs on the tiny model.
#: Measured: 1.000000 (identical: both count exactly the matmuls and convolutions); the tolerance
#: only absorbs float rounding of the analytic sum.
FLOP_RTOL = 1e-9


@pytest.fixture(scope="module")
def tiny(session_cache: Path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the test machine is shared; one thread keeps step times stable
    path = build_tiny_model(session_cache / "models", seed=0)
    yield load_processor(path), load_model(path, attn_implementation="eager")
    torch.set_num_threads(threads)


def _img(w: int, h: int, colour=(120, 30, 200)) -> Image.Image:
    return Image.new("RGB", (w, h), colour)


# ------------------------------------------------------------------------------------ timing
def test_timer_runs_warmup_then_repeats_and_times_only_the_repeats() -> None:
    calls: list[float] = []

    def fn() -> None:
        calls.append(time.perf_counter())
        if len(calls) <= 2:  # the two warm-up calls are slow; they must not be timed
            time.sleep(0.05)

    t = P.time_callable(fn, warmup=2, repeats=4)
    assert len(calls) == 6 and t.repeats == 4 and t.warmup == 2
    assert t.max < 0.04  # no warm-up call's 50 ms leaked into a repeat


@pytest.mark.parametrize(
    "seconds, median, q1, q3, lo, hi",
    [
        ((1.0,), 1.0, 1.0, 1.0, 1.0, 1.0),  # one repeat: every statistic is that repeat
        ((3.0, 1.0, 2.0), 2.0, 1.5, 2.5, 1.0, 3.0),  # odd count, unsorted input
        ((1.0, 2.0, 3.0, 10.0), 2.5, 1.75, 4.75, 1.0, 10.0),  # an outlier moves max, not the median
    ],
)
def test_timing_statistics(seconds, median, q1, q3, lo, hi) -> None:
    t = P.Timing(seconds, warmup=1)
    s = t.summary()
    assert (s["median_s"], s["q1_s"], s["q3_s"], s["min_s"], s["max_s"]) == pytest.approx((median, q1, q3, lo, hi))
    assert s["iqr_s"] == pytest.approx(q3 - q1) and s["repeats"] == len(seconds)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"warmup": -1}, "warmup must be >= 0"),  # negative warm-up
        ({"repeats": 0}, "repeats must be >= 1"),  # nothing timed
        ({"device": "mps"}, "device must be 'cpu' or 'cuda'"),  # unsupported device kind
    ],
)
def test_timer_rejects_bad_arguments(kwargs, error) -> None:
    with pytest.raises(ValueError, match=error):
        P.time_callable(lambda: None, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when no GPU is present")
def test_cuda_path_without_a_gpu_says_so() -> None:
    with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
        P.measure_memory(lambda: None, device="cuda")


class _FakeCuda:
    """Stands in for torch.cuda on a machine without a GPU, so the CUDA branches run on CPU."""

    def __init__(self) -> None:
        self.syncs = 0
        self.allocated = 1_000  # bytes held before the measured call
        self.peak = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "synchronize", self.synchronize)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: self.allocated)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", self.reset)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: self.peak)

    def synchronize(self, device=None) -> None:
        assert torch.device(device).type == "cuda"
        self.syncs += 1

    def reset(self, device=None) -> None:
        self.peak = self.allocated


def test_cuda_branch_synchronises_and_subtracts_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = _FakeCuda()
    cuda.install(monkeypatch)
    t = P.time_callable(lambda: None, warmup=2, repeats=3, device="cuda")
    assert t.repeats == 3 and cuda.syncs == 2 + 2 * 3  # after each warm-up; before and after each repeat

    def kernel() -> str:
        cuda.peak = cuda.allocated + 4096  # the call's own peak above what was already held
        return "ok"

    result, mem = P.measure_memory(kernel, device="cuda:0")
    assert result == "ok" and mem.device == "cuda" and mem.cuda_bytes == 4096 and mem.peak_bytes == 4096
    assert mem.tracemalloc_bytes is None and mem.rss_bytes is None


# ------------------------------------------------------------------------------------ memory
def test_memory_sees_torch_and_python_allocations() -> None:
    def alloc() -> int:
        a = torch.ones(25_000_000)  # 100 MB through torch's allocator: RSS sees it
        b = bytearray(20_000_000)  # 20 MB on the Python heap: tracemalloc sees it
        time.sleep(0.02)
        return int(a[0]) + len(b)

    result, mem = P.measure_memory(alloc)
    assert result == 20_000_001
    assert mem.device == "cpu" and mem.cuda_bytes is None
    assert mem.rss_bytes >= 90_000_000, mem
    assert 20_000_000 <= mem.tracemalloc_bytes < 25_000_000, mem
    assert mem.peak_bytes >= mem.rss_bytes
    _, idle = P.measure_memory(lambda: None)
    assert idle.tracemalloc_bytes < 1_000_000  # and nothing is reported when nothing is allocated


# ------------------------------------------------------------------------------------ model steps
@pytest.mark.parametrize(
    "samples",
    [
        [([(280, 504)], "Open the settings app")],  # one image (180 image tokens)
        [([(280, 504), (140, 252)], "Turn on wifi")],  # two images of different sizes
        [([(280, 504)], "a"), ([(140, 252)] * 2, "a much longer instruction for the second row")],  # padding
    ],
)
def test_counted_flops_equal_the_analytic_estimate(tiny, samples) -> None:
    processor, model = tiny
    batch = P.build_batch(processor, [([_img(*s) for s in sizes], text) for sizes, text in samples])

    def forward() -> None:
        with torch.no_grad():
            model(**{k: batch[k] for k in FORWARD_KEYS})

    counted = P.count_flops(forward)[1]
    analytic = P.analytic_forward_flops(model.config, batch)
    assert counted.total == pytest.approx(analytic, rel=FLOP_RTOL)
    assert set(counted.by_op) <= {"aten.convolution", "aten.addmm", "aten.mm", "aten.bmm"}, counted.by_op


def test_profile_step_reports_time_memory_and_flops(tiny) -> None:
    processor, model = tiny
    batch = P.build_batch(processor, [([_img(280, 504)], "Open the settings app")])
    calls = {"n": 0}
    original = model.forward

    def counting_forward(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    model.forward = counting_forward
    try:
        prof = P.profile_step(model, batch, warmup=1, repeats=3)
    finally:
        del model.forward
    # 1 warm-up + 3 timed + 1 memory + 1 counted forward + 1 counted step
    assert calls["n"] == 7
    assert prof.timing.repeats == 3 and prof.timing.warmup == 1 and prof.timing.min > 0
    assert prof.prompt_tokens == int(batch["prompt_tokens"][0]) and prof.prompt_tokens > 180
    assert prof.memory.peak_bytes > 0
    assert prof.forward_flops_counted == pytest.approx(prof.forward_flops_analytic, rel=FLOP_RTOL)
    # backward costs about two forwards (less: no gradient flows into the pixels or token ids)
    assert 2.5 < prof.step_flops_counted / prof.forward_flops_counted < 3.0
    assert math.isfinite(prof.loss) and prof.loss > 0
    assert all(p.grad is None for p in model.parameters())  # the profiler leaves no gradients


def test_step_time_grows_with_tokens(tiny) -> None:
    processor, model = tiny
    small = P.build_batch(processor, [([_img(140, 252)], "go")])
    large = P.build_batch(processor, [([_img(280, 504)] * 3, "go")])
    t_small = P.time_callable(P.train_step(model, small), warmup=1, repeats=3).min
    t_large = P.time_callable(P.train_step(model, large), warmup=1, repeats=3).min
    assert P.batch_prompt_tokens(large) > 6 * P.batch_prompt_tokens(small)
    assert t_large > 3 * t_small  # 7x the tokens; measured 8.2-8.8x the time (one thread)


def test_generation_latency_produces_exactly_the_tokens_asked(tiny) -> None:
    processor, model = tiny
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Open settings"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[[_img(140, 252)]], return_tensors="pt")
    lat = P.generation_latency(model, inputs, new_tokens=6, warmup=1, repeats=2)
    assert lat.first.repeats == 2 and lat.full.repeats == 2 and lat.new_tokens == 6
    assert lat.full.median > 0 and math.isfinite(lat.per_token_s)
    assert set(lat.summary()) == {"first_token_s", "full_s", "per_token_s", "new_tokens"}


def test_interleaved_timer_runs_warmups_then_round_robin_repeats() -> None:
    calls: list[str] = []
    fns = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    timings = P.time_interleaved(fns, warmup=1, repeats=2)
    # warm-ups first (each call once), then two rounds a, b, c: no call's repeats run back to back
    assert calls == ["a", "b", "c", "a", "b", "c", "a", "b", "c"]
    assert all(t.repeats == 2 and t.warmup == 1 for t in timings.values()) and list(timings) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="repeats"):
        P.time_interleaved(fns, repeats=0)


def test_interleaved_timing_spreads_a_slow_phase_over_every_setting() -> None:
    # a burst of load during the first 4 timed calls: sequential timing puts it all on "a",
    # round-robin timing gives both settings one slow repeat, so their medians stay equal
    n = {"calls": 0}

    def call() -> None:
        n["calls"] += 1
        time.sleep(0.03 if n["calls"] <= 4 else 0.005)

    seq = {k: P.time_callable(call, warmup=0, repeats=3) for k in ("a", "b")}
    assert seq["a"].median > 3 * seq["b"].median
    n["calls"] = 2
    inter = P.time_interleaved({"a": call, "b": call}, warmup=0, repeats=3)
    assert max(inter["a"].median, inter["b"].median) < 0.5 * seq["a"].median


def test_interleaved_sweep_reports_the_round_robin_timing(tiny) -> None:
    processor, model = tiny
    batches = {
        "one": P.build_batch(processor, [([_img(56, 56)], "go")]),
        "two": P.build_batch(processor, [([_img(56, 56)] * 2, "go")]),
    }
    rows = P.profile_sweep(model, batches, warmup=0, repeats=2, count=False, progress=False, interleave=True)
    assert [r["setting"] for r in rows] == ["one", "two"] and all(r["repeats"] == 2 and r["median_s"] > 0 for r in rows)


def test_sweep_profiles_every_setting_and_rows_map_their_images(tiny) -> None:
    processor, model = tiny
    batches = {
        "one": P.build_batch(processor, [([_img(140, 252)], "go")]),
        "two rows": P.build_batch(processor, [([_img(140, 252)] * 2, "go"), ([_img(56, 56)], "go back")]),
    }
    rows = P.profile_sweep(model, batches, warmup=0, repeats=1, count=False, progress=False)
    assert [r["setting"] for r in rows] == ["one", "two rows"] and all(r["repeats"] == 1 for r in rows)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    grids = P.row_image_grids(batches["two rows"], image_token_id=pad, merge=2)
    assert [g.tolist() for g in grids] == [[[1, 18, 10], [1, 18, 10]], [[1, 4, 4]]]
    bad = dict(batches["one"], image_grid_thw=torch.tensor([[1, 18, 12]]))  # one cell too many per row
    with pytest.raises(ValueError, match="row 0: image_grid_thw does not match"):
        P.row_image_grids(bad, image_token_id=pad, merge=2)


def test_build_batch_rejects_an_empty_batch(tiny) -> None:
    with pytest.raises(ValueError, match="at least one"):
        P.build_batch(tiny[0], [])


# ------------------------------------------------------------------------------------ random models
#: configs/models/qwen2.5-vl-mid with the tiny tokenizer's vocabulary (1,984 rows), measured.
MID_PARAMETERS = 52_644_800


def test_mid_model_is_built_from_its_config_and_speaks_the_processor(tiny) -> None:
    from guirl.models import model_summary

    processor, _ = tiny
    model = P.random_model(MID, processor, seed=0)
    summary = model_summary(model)
    assert summary["total"] == MID_PARAMETERS
    assert model.config.image_token_id == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    again = P.random_model(MID, processor, seed=0)
    first = next(iter(model.state_dict().values()))
    assert torch.equal(first, next(iter(again.state_dict().values())))  # deterministic in the seed
    batch = P.build_batch(processor, [([_img(56, 56)], "go")])

    def forward() -> None:
        with torch.no_grad():
            model(**{k: batch[k] for k in FORWARD_KEYS})

    analytic = P.analytic_forward_flops(model.config, batch)
    assert model.config._attn_implementation == "sdpa"
    with P.eager_attention(model):
        counted = P.count_flops(forward)[1].total
    assert counted == pytest.approx(analytic, rel=FLOP_RTOL)
    assert model.config._attn_implementation == "sdpa"  # restored
    # the pitfall eager_attention avoids: the CPU sdpa kernel is not counted (attention missing)
    assert P.count_flops(forward)[1].total < analytic * (1 - 1e-3)


@pytest.mark.parametrize(
    "dtype",
    [
        # the CPU architectures (mid): the same weights as constructing the class in float32
        torch.float32,
        # the GPU architectures (3B / 7B): created in bfloat16 directly, no float32 copy
        torch.bfloat16,
    ],
)
def test_random_model_is_created_in_its_dtype(tiny, dtype) -> None:
    from transformers import Qwen2_5_VLForConditionalGeneration

    processor, _ = tiny
    model = P.random_model(MID, processor, seed=0, dtype=dtype)
    assert {p.dtype for p in model.parameters()} == {dtype}
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert not model.training
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        plain = Qwen2_5_VLForConditionalGeneration(model.config).to(dtype)
    # float32: identical; bfloat16: the float32 draw rounded, or a bfloat16 draw of the same law
    for (name, a), b in zip(model.state_dict().items(), plain.state_dict().values(), strict=True):
        if dtype == torch.float32:
            assert torch.equal(a, b), name
        else:
            assert a.shape == b.shape and torch.isfinite(a.float()).all(), name
            assert float(a.float().std()) == pytest.approx(float(b.float().std()), rel=0.1, abs=1e-3), name


def test_random_model_names_a_missing_config(tiny) -> None:
    with pytest.raises(FileNotFoundError, match="no config file at"):
        P.random_model(REPO / "configs" / "models" / "nope", tiny[0])


# ------------------------------------------------------------------------------------ MFU
@pytest.mark.parametrize(
    "flops, seconds, peak, expected",
    [
        (3e14, 1.0, 1e15, 0.3),  # 300 TFLOPs a second on a 1 PFLOP/s device
        (0.0, 2.0, 1e12, 0.0),  # nothing computed
        (1e12, 0.5, 4e12, 0.5),
    ],
)
def test_mfu_is_flops_over_time_over_peak(flops: float, seconds: float, peak: float, expected: float) -> None:
    assert P.mfu(flops, seconds, peak) == pytest.approx(expected)


@pytest.mark.parametrize("args", [(1e12, 0.0, 1e12), (1e12, 1.0, 0.0), (-1.0, 1.0, 1e12), (math.nan, 1.0, 1e12)])
def test_mfu_rejects_impossible_inputs(args) -> None:
    with pytest.raises(ValueError, match="mfu needs"):
        P.mfu(*args)


def test_measured_peak_is_a_matmul_rate() -> None:
    peak = P.measure_peak_flops("cpu", torch.float32, n=128, warmup=1, repeats=3)
    assert math.isfinite(peak) and 1e6 < peak < 1e14  # a CPU core: MFLOP/s to a few hundred GFLOP/s
    with pytest.raises(ValueError, match="n must be >= 1"):
        P.measure_peak_flops("cpu", n=0)


def _freeze(model, *, vision: bool, lm: bool) -> None:
    for name, param in model.named_parameters():
        param.requires_grad_(not (vision if ".visual." in f".{name}" else lm))


@pytest.mark.parametrize(
    "vision_frozen, lm_frozen, lora, expected",
    [
        (False, False, False, (2.0, 2.0)),  # full-parameter training
        (True, False, False, (0.0, 2.0)),  # frozen vision tower: no gradient reaches it
        (False, True, False, (2.0, 1.0)),  # frozen LM in front of a trained tower: activation gradients
        (True, True, True, (0.0, 1.0)),  # LoRA on the LM (the paper profiles' RL engine)
        (True, True, False, (0.0, 0.0)),  # nothing trains
    ],
)
def test_backward_multipliers_follow_what_trains(session_cache: Path, vision_frozen, lm_frozen, lora, expected) -> None:
    from guirl.models import apply_lora

    model = load_model(build_tiny_model(session_cache / "models", seed=0))
    _freeze(model, vision=vision_frozen, lm=lm_frozen)
    if lora:
        model = apply_lora(model)
    assert P.backward_multipliers(model) == expected


#: Counted (FlopCounterMode, forward + backward) / analytic training FLOPs of a tiny-model step,
#: measured: 0.955 (full-parameter; the patch embedding computes no input gradient, which the
#: analytic 3x counts) and 1.000 (frozen vision tower: the LM's backward is exactly 2x its forward).
TRAIN_FLOP_RATIO = {"full": (0.94, 0.97), "frozen vision": (0.999, 1.001)}


@pytest.mark.parametrize("setting", list(TRAIN_FLOP_RATIO))
def test_analytic_train_flops_match_the_counted_step(tiny, session_cache: Path, setting: str) -> None:
    processor, _ = tiny
    model = load_model(build_tiny_model(session_cache / "models", seed=0), attn_implementation="eager")
    if setting == "frozen vision":
        _freeze(model, vision=True, lm=False)
    batch = P.build_batch(processor, [([_img(280, 504), _img(140, 252)], "Turn on wifi")])
    n_logits = int(batch["completion_ids"].shape[1]) + 1
    counted = P.count_flops(P.train_step(model, batch))[1].total
    ratio = counted / P.analytic_train_flops(model, batch, n_logits=n_logits)
    low, high = TRAIN_FLOP_RATIO[setting]
    assert low <= ratio <= high, ratio


def test_sweep_rows_carry_mfu_when_given_a_peak(tiny) -> None:
    processor, model = tiny
    batches = {"one": P.build_batch(processor, [([_img(56, 56)], "go")])}
    with_peak = P.profile_sweep(model, batches, warmup=0, repeats=1, count=False, progress=False, peak_flops=1e12)
    row = with_peak[0]
    assert row["train_flops_analytic"] > 2.9 * row["forward_flops_analytic"]  # full parameters: about 3x
    assert row["mfu"] == pytest.approx(row["train_flops_analytic"] / row["median_s"] / 1e12)
    without = P.profile_sweep(model, batches, warmup=0, repeats=1, count=False, progress=False)
    assert math.isnan(without[0]["mfu"])


# ------------------------------------------------------------------------------------ checkpointing probe
def _oom_unless_checkpointing(model, step):
    """``step`` that runs out of memory (as CUDA reports it) while activation checkpointing is off."""
    tried: list[bool] = []

    def probe() -> float:
        tried.append(model.is_activation_checkpointing)
        if not model.is_activation_checkpointing:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (fake)")
        return step()

    return probe, tried


def test_probe_keeps_checkpointing_off_when_the_step_fits(tiny, session_cache: Path) -> None:
    processor, _ = tiny
    model = load_model(build_tiny_model(session_cache / "models", seed=0)).train()
    batch = P.build_batch(processor, [([_img(140, 252)], "go")])
    choice = P.choose_activation_checkpointing(model, P.train_step(model, batch), device="cpu")
    assert choice.every_n_layers is None and not choice.checkpointing and choice.refused == ()
    assert choice.peak.peak_bytes > 0 and not model.is_activation_checkpointing


def test_probe_turns_checkpointing_on_after_an_out_of_memory(tiny, session_cache: Path) -> None:
    processor, _ = tiny
    model = load_model(build_tiny_model(session_cache / "models", seed=0)).train()
    batch = P.build_batch(processor, [([_img(140, 252)], "go")])
    step = P.train_step(model, batch)
    expected_loss = step()
    probe, tried = _oom_unless_checkpointing(model, step)
    choice = P.choose_activation_checkpointing(model, probe, device="cpu")
    assert tried == [False, True] and choice.every_n_layers == 1 and choice.checkpointing
    assert choice.refused == ((None, "CUDA out of memory. Tried to allocate 2.00 GiB (fake)"),)
    assert model.is_activation_checkpointing  # left with the chosen setting
    assert step() == pytest.approx(expected_loss, rel=1e-6)  # checkpointing recomputes, it changes no number
    # a ladder whose every setting runs out of memory raises the last error; other errors propagate
    with pytest.raises(torch.OutOfMemoryError):
        P.choose_activation_checkpointing(model, probe, device="cpu", ladder=(None,))

    def broken() -> None:
        raise ValueError("a shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        P.choose_activation_checkpointing(model, broken, device="cpu")
    with pytest.raises(ValueError, match="at least one setting"):
        P.choose_activation_checkpointing(model, step, device="cpu", ladder=())
    with pytest.raises(ValueError, match=r"call model.train\(\) first"):
        P.choose_activation_checkpointing(model.eval(), step, device="cpu")


@pytest.mark.parametrize(
    "err, expected",
    [
        (torch.OutOfMemoryError("CUDA out of memory"), True),
        (RuntimeError("CUDA error: out of memory"), True),  # older allocator message
        (RuntimeError("expected scalar type Float"), False),
        (MemoryError(), False),  # host memory: no checkpointing setting helps the device
    ],
)
def test_out_of_memory_errors_are_recognised(err: BaseException, expected: bool) -> None:
    assert P.is_out_of_memory(err) is expected


def test_probe_walks_the_ladder_until_the_step_fits(tiny, session_cache: Path) -> None:
    # the step fits only with every layer checkpointed: off and 1-in-2 are refused, in that order
    processor, _ = tiny
    model = load_model(build_tiny_model(session_cache / "models", seed=0)).train()
    step = P.train_step(model, P.build_batch(processor, [([_img(56, 56)], "go")]))
    layers = [m for m in model.modules() if hasattr(m, "gradient_checkpointing") and "Layer" in type(m).__name__]
    seen: list[int] = []

    def probe() -> float:
        seen.append(sum(bool(m.gradient_checkpointing) for m in layers))
        if seen[-1] < len(layers):
            raise torch.OutOfMemoryError("CUDA out of memory (fake)")
        return step()

    choice = P.choose_activation_checkpointing(model, probe, device="cpu", ladder=(None, 2, 1))
    assert choice.every_n_layers == 1 and [s for s, _ in choice.refused] == [None, 2]
    assert seen[0] == 0 < seen[1] < seen[2] == len(layers)
