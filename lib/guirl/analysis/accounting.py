"""Token and FLOP accounting for Qwen2.5-VL GUI agents (tokens/image, prompt length, FLOPs).

Used to recompute CCPO's efficiency claims (compression rate, speedup; CCPO Table 4 / the
project page's training-efficiency table) and the tokens-per-action of each action format
(AgentCPM-GUI reports 9.7 tokens per action for its compact JSON).

Conventions
-----------
* Image sizes are ``(width, height)`` in pixels of the *original* screenshot; the Qwen2.5-VL
  processor resizes them with :func:`guirl.imaging.smart_resize` (note: that function takes
  ``(height, width)``).
* The pixel budget (``min_pixels`` / ``max_pixels``) is the model's and has no default
  (:mod:`guirl.imaging`): every function that sizes an image takes it as required keywords
  (``cfg.model.min_pixels`` / ``cfg.model.max_pixels``). At the paper profiles' 12,845,056 px a
  1080x2400 AndroidControl frame is 1092x2408 px = 39 x 86 = 3,354 tokens, the resolution the
  Qwen2.5-VL prompt of AgentCPM-GUI App. B.1.1 states; at Co-EPG's 802,816 px (App. B) it is
  588x1316 px = 987 tokens.
* A FLOP is one multiply or one add: a matmul ``(m x k) @ (k x n)`` costs ``2 m k n``.

FLOP model (forward pass, :func:`forward_flops`)
-----------------------------------------------
Only matmuls and convolutions are counted (norms, activations, rotary, softmax, biases and
residual adds are < 1% at real sizes and are left out). With ``h`` hidden sizes, ``i`` MLP
sizes, ``N`` tokens:

Vision tower, per image with ``P = (H'/14) (W'/14)`` patches and ``M = P / 4`` merged tokens:

* patch embedding (Conv3d, kernel 2x14x14 over 3 channels): ``2 P (3*2*14*14) h_v``;
* each of ``depth`` blocks: ``2 P (3 h_v^2 + h_v^2 + 3 h_v i_v)`` (qkv, proj, SwiGLU MLP)
  plus attention ``4 h_v * sum_s s^2`` (``QK^T`` and ``AV``, ``2 s^2 h_v`` each) where ``s``
  runs over the attention segments: the whole image (``P`` patches) in the
  ``fullatt_block_indexes`` blocks, else the windows of ``window_size = 112`` px (4x4 merged
  tokens = 64 patches; edge windows are smaller), exactly as ``get_vision_window_index``;
* patch merger: ``2 M ((4 h_v)^2 + 4 h_v h_out)``.

Language model over ``N`` positions (text + image tokens), per layer with ``q = n_heads *
head_dim`` and ``kv = n_kv_heads * head_dim`` (grouped-query attention):

* projections ``2 N (h q + 2 h kv + q h)``, MLP ``2 N (3 h i)``;
* attention ``4 N^2 q`` (the full ``N x N`` score matrix, the usual convention of
  Kaplan et al. 2020 / Chinchilla; pass ``causal=True`` to count only the lower triangle,
  ``4 q N (N + 1) / 2``);
* ``lm_head``: ``2 N_logits h V`` with ``N_logits = N`` by default (a training forward
  computes logits everywhere).

So per token the forward is ``2 x (matmul parameters touched by that token)`` plus the
quadratic attention terms. A training step is about ``3 x`` forward (the backward pass
costs two matmuls per forward matmul: grads w.r.t. activations and w.r.t. weights);
:func:`train_step_flops` uses that factor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from guirl.imaging import FACTOR, check_budget, smart_resize

#: ``<|vision_start|>`` and ``<|vision_end|>`` wrap each image's ``<|image_pad|>`` run.
SPECIAL_TOKENS_PER_IMAGE = 2
#: Backward ~ 2x forward, so a training step ~ 3x forward (Kaplan et al. 2020, sec. 2.1).
TRAIN_FLOPS_MULTIPLIER = 3.0


# --------------------------------------------------------------------------- tokens
def image_tokens(width: int, height: int, *, min_pixels: int, max_pixels: int) -> int:
    """``<|image_pad|>`` tokens of one ``width x height`` px image under Qwen2.5-VL resizing
    with the model's pixel budget (required keywords).

    Equals ``image_grid_thw.prod() // 4`` of the released image processor: the resized
    image has ``(H'/14) x (W'/14)`` patches and the 2x2 merger makes one token of four.
    """
    h, w = smart_resize(int(height), int(width), min_pixels=min_pixels, max_pixels=max_pixels)
    return (h // FACTOR) * (w // FACTOR)


def prompt_length(
    n_text_tokens: int,
    image_sizes: Sequence[tuple[int, int]],
    *,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> int:
    """Tokens of a multi-image prompt: text + per image (image tokens + vision start/end).

    ``n_text_tokens`` counts every token that is not part of an image block (system prompt,
    instruction, chat-template markers, history actions). ``image_sizes`` are ``(width,
    height)`` px of the images as passed to the processor (e.g. CASC crops). ``min_pixels`` /
    ``max_pixels``: the model's budget, required as soon as there is an image (a
    :class:`guirl.imaging.PixelBudgetError` naming the argument otherwise; no default budget).
    """
    if n_text_tokens < 0:
        raise ValueError(f"n_text_tokens must be >= 0, got {n_text_tokens}")
    if not image_sizes:
        return int(n_text_tokens)
    lo, hi = check_budget(min_pixels, max_pixels, "prompt_length")
    return int(n_text_tokens) + sum(
        image_tokens(w, h, min_pixels=lo, max_pixels=hi) + SPECIAL_TOKENS_PER_IMAGE for w, h in image_sizes
    )


def compression_rate(compressed_tokens: float, uncompressed_tokens: float) -> float:
    """``1 - compressed / uncompressed`` (CCPO's "compression ratio"; 0.549 = 54.9%)."""
    if uncompressed_tokens <= 0:
        raise ValueError(f"uncompressed_tokens must be > 0, got {uncompressed_tokens}")
    return 1.0 - float(compressed_tokens) / float(uncompressed_tokens)


def speedup(time_uncompressed: float, time_compressed: float) -> float:
    """``t_uncompressed / t_compressed`` (CCPO reports e.g. 660 s / 174 s = 3.8x)."""
    if time_compressed <= 0:
        raise ValueError(f"time_compressed must be > 0, got {time_compressed}")
    return float(time_uncompressed) / float(time_compressed)


# --------------------------------------------------------------------------- model dims
@dataclass(frozen=True)
class ModelDims:
    """The sizes of a Qwen2.5-VL model that FLOPs depend on (read by :func:`model_dims`)."""

    # language model
    hidden: int
    intermediate: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    # vision tower
    v_hidden: int
    v_intermediate: int
    v_depth: int
    v_heads: int
    v_out_hidden: int
    patch_size: int = 14
    temporal_patch_size: int = 2
    in_channels: int = 3
    spatial_merge_size: int = 2
    window_size: int = 112
    fullatt_block_indexes: tuple[int, ...] = ()


def _as_dict(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, Mapping):
        return dict(cfg)
    if hasattr(cfg, "to_dict"):
        return cfg.to_dict()
    raise TypeError(f"expected a Qwen2_5_VLConfig or its dict, got {type(cfg).__name__}")


def model_dims(config: Any) -> ModelDims:
    """Read :class:`ModelDims` from a ``Qwen2_5_VLConfig`` or its dict (``config.json``).

    Accepts the nested layout of transformers 5 (``text_config`` / ``vision_config``) and
    the flat layout of the published checkpoints (text keys at the top level).
    """
    d = _as_dict(config)
    text = _as_dict(d["text_config"]) if d.get("text_config") else d
    vis = d.get("vision_config")
    if vis is None:
        raise KeyError("config has no 'vision_config'; pass a Qwen2.5-VL config (config.json)")
    vis = _as_dict(vis)
    try:
        n_heads = int(text["num_attention_heads"])
        hidden = int(text["hidden_size"])
        head_dim = int(text.get("head_dim") or hidden // n_heads)
        return ModelDims(
            hidden=hidden,
            intermediate=int(text["intermediate_size"]),
            n_layers=int(text["num_hidden_layers"]),
            n_heads=n_heads,
            n_kv_heads=int(text.get("num_key_value_heads") or n_heads),
            head_dim=head_dim,
            vocab=int(text.get("vocab_size") or d["vocab_size"]),
            v_hidden=int(vis["hidden_size"]),
            v_intermediate=int(vis["intermediate_size"]),
            v_depth=int(vis["depth"]),
            v_heads=int(vis["num_heads"]),
            v_out_hidden=int(vis.get("out_hidden_size") or hidden),
            patch_size=int(vis.get("patch_size", 14)),
            temporal_patch_size=int(vis.get("temporal_patch_size", 2)),
            in_channels=int(vis.get("in_channels", 3)),
            spatial_merge_size=int(vis.get("spatial_merge_size", 2)),
            window_size=int(vis.get("window_size", 112)),
            fullatt_block_indexes=tuple(int(i) for i in vis.get("fullatt_block_indexes") or ()),
        )
    except KeyError as e:
        raise KeyError(f"Qwen2.5-VL config lacks key {e}; expected text and vision_config fields") from e


def lm_matmul_params(dims: ModelDims) -> int:
    """Weights of the language model's matmuls per token (all layers + ``lm_head``)."""
    q = dims.n_heads * dims.head_dim
    kv = dims.n_kv_heads * dims.head_dim
    per_layer = dims.hidden * q + 2 * dims.hidden * kv + q * dims.hidden + 3 * dims.hidden * dims.intermediate
    return dims.n_layers * per_layer + dims.hidden * dims.vocab


def vision_matmul_params(dims: ModelDims) -> tuple[int, int]:
    """``(per-patch, per-merged-token)`` matmul weights of the vision tower and merger."""
    hv = dims.v_hidden
    embed = dims.in_channels * dims.temporal_patch_size * dims.patch_size**2 * hv
    block = 3 * hv * hv + hv * hv + 3 * hv * dims.v_intermediate
    m = hv * dims.spatial_merge_size**2
    merger = m * m + m * dims.v_out_hidden
    return embed + dims.v_depth * block, merger


def window_segments(grid_h: int, grid_w: int, dims: ModelDims) -> list[int]:
    """Patch counts of the window-attention segments of one image (``get_vision_window_index``).

    ``grid_h x grid_w`` is the patch grid (resized px / 14). Windows are
    ``window_size / merge / patch`` merged tokens per side (112/2/14 = 4); edge windows are cut.
    """
    ms = dims.spatial_merge_size
    ws = dims.window_size // ms // dims.patch_size
    lh, lw = grid_h // ms, grid_w // ms
    hs = [min(ws, lh - i) for i in range(0, lh, ws)]
    wss = [min(ws, lw - j) for j in range(0, lw, ws)]
    return [a * b * ms * ms for a in hs for b in wss]


@dataclass(frozen=True)
class FlopBreakdown:
    """Forward FLOPs by component; ``total`` is their sum."""

    vision_linear: float
    vision_attention: float
    merger: float
    lm_linear: float
    lm_attention: float
    lm_head: float

    @property
    def vision(self) -> float:
        return self.vision_linear + self.vision_attention + self.merger

    @property
    def lm(self) -> float:
        return self.lm_linear + self.lm_attention + self.lm_head

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))


def forward_flops(
    config: Any,
    n_text_tokens: int,
    image_sizes: Sequence[tuple[int, int]] = (),
    *,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    causal: bool = False,
    n_logits: int | None = None,
) -> FlopBreakdown:
    """Analytic forward FLOPs of Qwen2.5-VL on one sequence (formula in the module docstring).

    ``config``: ``Qwen2_5_VLConfig``, its dict, or :class:`ModelDims`. ``n_text_tokens``: as
    in :func:`prompt_length` (the LM length is ``prompt_length(n_text_tokens, image_sizes)``
    plus any completion tokens you add to ``n_text_tokens``). ``image_sizes``: ``(width,
    height)`` px before resizing. ``min_pixels`` / ``max_pixels``: the model's pixel budget
    (required as soon as ``image_sizes`` is not empty; no default budget). ``n_logits``: positions whose logits are
    computed (default: all).
    """
    dims = config if isinstance(config, ModelDims) else model_dims(config)
    per_patch, per_merged = vision_matmul_params(dims)
    full = set(dims.fullatt_block_indexes)
    v_lin = v_att = merger = 0.0
    if image_sizes:
        min_pixels, max_pixels = check_budget(min_pixels, max_pixels, "forward_flops")
    for w, h in image_sizes:
        rh, rw = smart_resize(int(h), int(w), min_pixels=min_pixels, max_pixels=max_pixels)  # type: ignore[arg-type]
        gh, gw = rh // dims.patch_size, rw // dims.patch_size
        p = gh * gw
        m = p // dims.spatial_merge_size**2
        v_lin += 2.0 * p * per_patch
        merger += 2.0 * m * per_merged
        win_sq = sum(s * s for s in window_segments(gh, gw, dims))
        for b in range(dims.v_depth):
            v_att += 4.0 * dims.v_hidden * (p * p if b in full else win_sq)
    n = prompt_length(n_text_tokens, image_sizes, min_pixels=min_pixels, max_pixels=max_pixels)
    q = dims.n_heads * dims.head_dim
    lm_head_params = dims.hidden * dims.vocab
    lm_lin = 2.0 * n * (lm_matmul_params(dims) - lm_head_params)
    pairs = n * (n + 1) / 2.0 if causal else float(n * n)
    lm_att = dims.n_layers * 4.0 * q * pairs
    head = 2.0 * (n if n_logits is None else n_logits) * lm_head_params
    return FlopBreakdown(v_lin, v_att, merger, lm_lin, lm_att, head)


def train_step_flops(
    config: Any,
    n_text_tokens: int,
    image_sizes: Sequence[tuple[int, int]] = (),
    multiplier: float = TRAIN_FLOPS_MULTIPLIER,
    **kwargs: Any,
) -> float:
    """FLOPs of one training step on one sequence: ``multiplier x forward`` (default 3).
    ``kwargs`` go to :func:`forward_flops` (the pixel budget among them)."""
    return multiplier * forward_flops(config, n_text_tokens, image_sizes, **kwargs).total


# --------------------------------------------------------------------------- actions
def count_tokens(text: str, tokenizer: Any) -> int:
    """Tokens of ``text`` under any tokenizer, without BOS/EOS.

    Works with a Hugging Face tokenizer (``encode(text, add_special_tokens=False)``), a
    ``tokenizers.Tokenizer`` (``encode(...).ids``), tiktoken-style ``encode(text)`` returning a
    list, or a callable returning a list or a mapping with ``input_ids``.
    """
    if hasattr(tokenizer, "encode"):
        try:
            enc = tokenizer.encode(text, add_special_tokens=False)
        except TypeError:
            enc = tokenizer.encode(text)
        ids = getattr(enc, "ids", enc)
        return len(ids)
    if callable(tokenizer):
        enc = tokenizer(text)
        if isinstance(enc, Mapping) or hasattr(enc, "keys"):
            enc = enc["input_ids"]
        return len(enc)
    raise TypeError(f"tokenizer {type(tokenizer).__name__} has neither encode() nor __call__")


def _format_fn(format_name: str) -> Callable[[Any, Any], str]:
    try:
        from guirl.actions.formats import get_format  # type: ignore[import-not-found]
    except ImportError as e:  # the registry is optional for this module
        raise ImportError("guirl.actions.formats is not importable; pass format_fn=callable(action, ctx) -> str") from e
    fmt = get_format(format_name)
    return fmt.format


def tokens_per_action(
    actions: Iterable[Any],
    format_name: str | None,
    tokenizer: Any,
    format_fn: Callable[[Any, Any], str] | None = None,
    ctx: Any = None,
) -> float:
    """Mean tokens of the formatted text of ``actions`` under ``tokenizer``.

    Each action is rendered with ``format_fn(action, ctx)`` or, when ``format_fn`` is
    ``None``, with ``guirl.actions.formats.get_format(format_name).format(action, ctx)``.
    ``ctx`` (a ``FormatContext``: the screen size and the model's pixel budget) is required with
    ``format_name``: the digits of a coordinate depend on the image size the model saw. Actions
    a format cannot express raise its ``ActionError``; filter them first.
    ``tokenizer`` is any object with ``encode`` or ``__call__`` (see :func:`count_tokens`).
    AgentCPM-GUI's 9.7 tokens per action (its compact JSON) was measured with its own
    MiniCPM-V tokenizer, which cannot be downloaded here; numbers from other tokenizers
    (the tiny model's BPE, a Qwen2 tokenizer) are comparable across formats, not to 9.7.
    """
    fn = format_fn
    if fn is None:
        if format_name is None:
            raise ValueError("give format_name (a registered format) or format_fn")
        fn = _format_fn(format_name)
        if ctx is None:
            raise ValueError(
                "tokens_per_action: ctx is required with format_name (a FormatContext with the screen size and "
                "the model's pixel budget, e.g. guirl.prompts.format_context(size, min_pixels, max_pixels))"
            )
    counts = [count_tokens(fn(a, ctx), tokenizer) for a in actions]
    if not counts:
        raise ValueError("tokens_per_action needs at least one action")
    return sum(counts) / len(counts)


def history_tokens(
    image_sizes: Sequence[tuple[int, int]], *, min_pixels: int | None = None, max_pixels: int | None = None
) -> int:
    """Image-block tokens (pads + start/end) of a list of images, e.g. a CASC history, under the
    model's pixel budget (required as soon as there is an image)."""
    return prompt_length(0, image_sizes, min_pixels=min_pixels, max_pixels=max_pixels)


def action_token_table(
    actions: Sequence[Any], ctx: Any, tokenizers: Mapping[str, Any], formats: Sequence[str] | None = None
) -> Any:
    """Tokens per action of every output format (AgentCPM-GUI's compactness claim, Sec. 2.2: 9.7 per
    action with its own tokenizer): a ``pandas.DataFrame`` with one row per format, ``actions`` (how
    many of ``actions`` it can express) and one column of mean tokens per tokenizer of ``tokenizers``
    (:func:`tokens_per_action`). ``ctx``: the :class:`guirl.actions.FormatContext` (screen size and
    pixel budget). Notebooks 05 and 07 show it."""
    import math

    import pandas as pd

    from guirl.actions import FORMAT_NAMES, get_format
    from guirl.actions.types import ActionError

    rows = []
    for name in formats or FORMAT_NAMES:
        fmt = get_format(name)
        ok = []
        for a in actions:
            try:
                fmt.format(a, ctx)
            except ActionError:
                continue
            ok.append(a)
        row: dict[str, Any] = {"format": name, "actions": len(ok)}
        for tok_name, tok in tokenizers.items():
            row[tok_name] = tokens_per_action(ok, name, tok, ctx=ctx) if ok else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "action_token_table",
    "SPECIAL_TOKENS_PER_IMAGE",
    "TRAIN_FLOPS_MULTIPLIER",
    "image_tokens",
    "prompt_length",
    "history_tokens",
    "compression_rate",
    "speedup",
    "ModelDims",
    "model_dims",
    "lm_matmul_params",
    "vision_matmul_params",
    "window_segments",
    "FlopBreakdown",
    "forward_flops",
    "train_step_flops",
    "count_tokens",
    "tokens_per_action",
]
