"""guirl.models.vision_attention: the vision tower's window and full attention as a few batched
sdpa calls, equal to transformers' per-window loop (forward and gradients, float32 and bfloat16),
on the tiny model and the mid architecture, with several images of different sizes in a batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from guirl.analysis.profiling import build_batch, random_model, train_step
from guirl.config import ConfigError, load_config
from guirl.models import build_tiny_model, load_model, load_processor
from guirl.models.vision_attention import (
    FusedVisionAttention,
    segment_buckets,
    set_vision_attention,
    varlen_sdpa,
    vision_attention_mode,
)

REPO = Path(__file__).resolve().parents[1]
MID = REPO / "configs" / "models" / "qwen2.5-vl-mid"
#: Three screens of different sizes; their patch grids are not multiples of the 8x8-patch window,
#: so every image has cut edge windows (several window lengths per block).
SIZES = ((280, 504), (392, 196), (238, 322))
#: float32: the fused path runs the same CPU kernel on the same numbers (measured max abs
#: difference 0 for outputs and gradients); the bound leaves room for another kernel's order.
FP32_ATOL = 1e-5
#: bfloat16 has an 8-bit mantissa (relative step 2^-8 = 0.0039); outputs and gradients may differ
#: by a few steps after the attention's reductions: the bound is on the norm-relative difference.
#: Measured: 0 against sdpa's loop (same kernel); against the eager loop at most 0.0057 (output)
#: and 0.0096 (gradients) on the mid architecture.
BF16_RTOL = 2e-2


@pytest.fixture(scope="module")
def processor(session_cache: Path):
    return load_processor(build_tiny_model(session_cache / "models", seed=0))


@pytest.fixture(scope="module")
def tiny_path(session_cache: Path) -> Path:
    return build_tiny_model(session_cache / "models", seed=0)


def _screens() -> list[Image.Image]:
    g = torch.Generator().manual_seed(0)
    return [Image.fromarray(torch.randint(0, 255, (h, w, 3), generator=g, dtype=torch.uint8).numpy()) for w, h in SIZES]


# ------------------------------------------------------------------------------ the kernel
@pytest.mark.parametrize(
    "cu, expected",
    [
        ([0, 4], {4: [[0, 1, 2, 3]]}),  # one segment
        ([0, 3, 5, 8, 8, 12], {2: [[3, 4]], 3: [[0, 1, 2], [5, 6, 7]], 4: [[8, 9, 10, 11]]}),  # an empty one skipped
        ([0, 2, 4, 6], {2: [[0, 1], [2, 3], [4, 5]]}),  # equal windows: one bucket, in order
        ([0], {}),  # no segment
    ],
)
def test_segment_buckets_group_segments_by_length(cu: list[int], expected: dict[int, list[list[int]]]) -> None:
    got = {int(b.shape[1]): b.tolist() for b in segment_buckets(torch.tensor(cu, dtype=torch.int32))}
    assert got == expected


@pytest.mark.parametrize(
    "cu, error",
    [
        ([[0, 2]], "1-D tensor"),  # not 1-D
        ([0, 3, 2], "non-decreasing"),  # a negative length
    ],
)
def test_segment_buckets_reject_bad_boundaries(cu, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        segment_buckets(torch.tensor(cu))


def _per_segment(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: list[int], scale: float) -> torch.Tensor:
    outs = []
    for a, b in zip(cu[:-1], cu[1:]):
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, scale=scale).transpose(0, 1))
    return torch.cat(outs)


@pytest.mark.parametrize("cu", [[0, 5, 7, 16, 20, 25], [0, 64, 128, 160], [0, 30]])
def test_varlen_sdpa_equals_attention_per_segment_with_gradients(cu: list[int]) -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(cu[-1], 3, 8, generator=g, requires_grad=True) for _ in range(3))
    fused = varlen_sdpa(q, k, v, torch.tensor(cu), scale=8**-0.5)
    ref = _per_segment(q, k, v, cu, 8**-0.5)
    assert (fused - ref).abs().max() <= FP32_ATOL
    weights = torch.randn(ref.shape, generator=g)
    grads_fused = torch.autograd.grad((fused * weights).sum(), (q, k, v))
    grads_ref = torch.autograd.grad((ref * weights).sum(), (q, k, v))
    for a, b in zip(grads_fused, grads_ref):
        assert (a - b).abs().max() <= FP32_ATOL


@pytest.mark.parametrize(
    "shape, cu, error",
    [
        ((10, 2, 4), [0, 4, 9], "from 0 to 10"),  # boundaries stop short of the sequence
        ((10, 2, 4), [1, 10], "from 0 to 10"),  # boundaries do not start at 0
        ((10, 8), [0, 10], r"\(S, heads, head_dim\)"),  # heads not split
    ],
)
def test_varlen_sdpa_rejects_inconsistent_inputs(shape, cu, error: str) -> None:
    x = torch.zeros(shape)
    with pytest.raises(ValueError, match=error):
        varlen_sdpa(x, x, x, torch.tensor(cu), scale=1.0)


# ------------------------------------------------------------------------------ installing
def test_load_model_installs_fused_by_default_and_loop_on_request(tiny_path: Path) -> None:
    model = load_model(tiny_path)
    n_blocks = model.config.vision_config.depth
    assert vision_attention_mode(model) == "fused"
    assert sum(isinstance(m, FusedVisionAttention) for m in model.modules()) == n_blocks
    assert vision_attention_mode(load_model(tiny_path, vision_attention="loop")) == "loop"
    assert set_vision_attention(model, "loop") == n_blocks and vision_attention_mode(model) == "loop"
    with pytest.raises(ValueError, match="vision_attention 'flash' is not one of fused, loop"):
        load_model(tiny_path, vision_attention="flash")
    with pytest.raises(ValueError, match=r"model.vision_attention: 'windowed' is not one of fused, loop"):
        set_vision_attention(model, "windowed")
    assert (
        set_vision_attention(torch.nn.Linear(2, 2), "fused") == 0
        and vision_attention_mode(torch.nn.Linear(2, 2)) is None
    )


def test_config_key_is_validated() -> None:
    assert load_config("tiny").model.vision_attention == "fused"
    assert load_config("tiny", overrides=["model.vision_attention=loop"]).model.vision_attention == "loop"
    with pytest.raises(ConfigError, match="vision_attention"):
        load_config("tiny", overrides=["model.vision_attention=flex"])


def _count_sdpa(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    sdpa = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    return calls


def test_fused_path_makes_one_call_per_window_length_not_per_window(
    processor, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_model(tiny_path)
    batch = build_batch(processor, [(_screens(), "tap")])
    grid = batch["image_grid_thw"]
    calls = _count_sdpa(monkeypatch)
    visual = model.model.visual
    with torch.no_grad():
        visual(batch["pixel_values"], grid_thw=grid)
    fused_calls = len(calls)
    set_vision_attention(model, "loop")
    calls.clear()
    with torch.no_grad():
        visual(batch["pixel_values"], grid_thw=grid)
    # loop: one call per window in windowed blocks and per image in full blocks
    from transformers.vision_utils import get_vision_window_index

    vc = visual.config
    _, cu_win = get_vision_window_index(
        grid, spatial_merge_size=vc.spatial_merge_size, window_size=vc.window_size, patch_size=vc.patch_size
    )
    n_windows, n_images = len(cu_win) - 1, len(SIZES)
    depth, full = visual.config.depth, len(visual.config.fullatt_block_indexes)
    assert len(calls) == (depth - full) * n_windows + full * n_images
    lengths = (cu_win[1:] - cu_win[:-1]).unique().numel()
    image_lengths = (grid.prod(1)).unique().numel()
    assert fused_calls == (depth - full) * lengths + full * image_lengths
    assert fused_calls < len(calls) / 3


# ------------------------------------------------------------------------------ equality
#: Patch grids (t, h, w) of three images of different sizes in one batch; none is a multiple of
#: the 8x8-patch window, so each has cut edge windows (several window lengths per block). Small,
#: because bfloat16 matmuls are slow on this project's CPUs (no bf16 units: about 140 ms for a
#: 540x320 @ 320x856 product on the mid architecture).
GRIDS = ((1, 10, 12), (1, 6, 10), (1, 4, 6))
REFERENCES = ("loop", "eager")


def _vision_outputs(model, pixels: torch.Tensor, grid: torch.Tensor, weights: torch.Tensor):
    """The vision tower's merged tokens and the gradients of ``(out * weights).sum()`` w.r.t. its
    trainable parameters (float32 copies)."""
    visual = model.model.visual
    visual.zero_grad(set_to_none=True)
    out = visual(pixels, grid_thw=grid).pooler_output
    (out.float() * weights).sum().backward()
    grads = {n: p.grad.float().clone() for n, p in visual.named_parameters() if p.grad is not None}
    visual.zero_grad(set_to_none=True)
    return out.detach().float(), grads


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def vision_diffs(model, *, seed: int = 0) -> dict[str, dict[str, float]]:
    """The fused path against each of :data:`REFERENCES` (``loop``: transformers' loop under sdpa;
    ``eager``: its loop with explicit matmuls) on :data:`GRIDS`. Per reference: max abs difference
    and max abs reference value of the output (``forward``, ``forward_max``) and of the vision
    parameters' gradients (``grad``, ``grad_max``), and the norm-relative differences
    ``forward_rel`` and ``grad_rel`` (the largest over the parameters). The patch embedding is
    frozen: its Conv3d backward takes 16 s in bfloat16 on CPU, and attention does not reach its
    gradient except through the upstream gradient, which the other parameters' gradients cover."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.tensor(GRIDS)
    dtype = next(model.parameters()).dtype
    vc = model.config.vision_config
    model.model.visual.patch_embed.requires_grad_(False)
    width = vc.in_channels * vc.temporal_patch_size * vc.patch_size**2
    pixels = torch.randn(int(grid.prod(1).sum()), width, generator=g).to(dtype)
    weights = torch.randn(int(grid.prod(1).sum()) // vc.spatial_merge_size**2, vc.out_hidden_size, generator=g)
    set_vision_attention(model, "fused")
    out_f, grad_f = _vision_outputs(model, pixels, grid, weights)
    out = {}
    for reference in REFERENCES:
        if reference == "eager":
            model.set_attn_implementation("eager")
        else:
            set_vision_attention(model, "loop")
        try:
            out_r, grad_r = _vision_outputs(model, pixels, grid, weights)
        finally:
            model.set_attn_implementation("sdpa")
            set_vision_attention(model, "fused")
        assert grad_f.keys() == grad_r.keys() and len(grad_f) > 0
        out[reference] = {
            "forward": float((out_f - out_r).abs().max()),
            "forward_max": float(out_r.abs().max()),
            "forward_rel": _rel(out_f, out_r),
            "grad": max(float((grad_f[n] - grad_r[n]).abs().max()) for n in grad_f),
            "grad_max": max(float(grad_r[n].abs().max()) for n in grad_r),
            "grad_rel": max(_rel(grad_f[n], grad_r[n]) for n in grad_f),
        }
    return out


@pytest.fixture(scope="module")
def models(processor, tiny_path: Path):
    """``(arch, dtype) -> model``, built once per module (the mid architecture with random weights)."""
    cache: dict[tuple[str, torch.dtype], torch.nn.Module] = {}

    def get(arch: str, dtype: torch.dtype) -> torch.nn.Module:
        if (arch, dtype) not in cache:
            if arch == "tiny":
                cache[arch, dtype] = load_model(tiny_path, dtype=dtype, attn_implementation="sdpa")
            else:
                cache[arch, dtype] = random_model(MID, processor, dtype=dtype, attn_implementation="sdpa")
        return cache[arch, dtype]

    return get


@pytest.mark.parametrize(
    "arch, dtype",
    [
        ("tiny", torch.float32),
        ("mid", torch.float32),
        ("tiny", torch.bfloat16),
        pytest.param("mid", torch.bfloat16, marks=pytest.mark.slow),  # about 15 s: bf16 matmuls on CPU
    ],
    ids=["tiny-fp32", "mid-fp32", "tiny-bf16", "mid-bf16"],
)
def test_fused_equals_the_reference_forward_and_gradients(models, arch: str, dtype) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        diffs = vision_diffs(models(arch, dtype))
    finally:
        torch.set_num_threads(threads)
    for reference, d in diffs.items():
        print(f"{arch} {dtype} vs {reference}: " + ", ".join(f"{k} {v:.3g}" for k, v in d.items()))
        if dtype == torch.float32:
            assert d["forward"] <= FP32_ATOL * max(1.0, d["forward_max"]), (reference, d)
            assert d["grad"] <= FP32_ATOL * max(1.0, d["grad_max"]), (reference, d)
        else:
            assert d["forward_rel"] <= BF16_RTOL and d["grad_rel"] <= BF16_RTOL, (reference, d)


@pytest.mark.slow  # about 7 s
def test_a_training_step_of_the_whole_model_is_unchanged(processor, models) -> None:
    # Tiny model, float32, two rows with three screens of different sizes through the processor:
    # the loss and every parameter's gradient (vision tower and LM) of the fused and loop paths.
    model = models("tiny", torch.float32)
    batch = build_batch(processor, [(_screens()[:2], "open the app"), (_screens()[2:], "tap")])
    results = {}
    for mode in ("loop", "fused"):
        set_vision_attention(model, mode)
        loss = train_step(model, batch)()
        results[mode] = loss, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
    (loss_l, grads_l), (loss_f, grads_f) = results["loop"], results["fused"]
    assert abs(loss_f - loss_l) <= FP32_ATOL and grads_f.keys() == grads_l.keys()
    assert any("visual" in n for n in grads_f)
    assert max(float((grads_f[n] - grads_l[n]).abs().max()) for n in grads_f) <= FP32_ATOL
