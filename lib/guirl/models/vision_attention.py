"""Qwen2.5-VL's vision attention in a few batched calls instead of one call per window.

The vision tower attends within segments of its packed patch sequence: the windows of 112 px
(8x8 = 64 patches; edge windows are smaller) in most blocks, each whole image in the
``fullatt_block_indexes`` blocks. ``cu_seqlens`` holds the segment boundaries. Without
flash-attn, transformers 5.23 (``Qwen2_5_VLVisionAttention.forward``) splits the sequence and
calls attention once per segment in a Python loop: about 220 calls per 1080x2400 screen at the
paper pixel budget in every windowed block.

:func:`varlen_sdpa` computes the same attention with one
``torch.nn.functional.scaled_dot_product_attention`` call per *distinct segment length*: the
segments of one length are gathered into a batch ``(n, heads, L, head_dim)`` (no padding, no
mask, so a GPU can use its flash kernel), and the outputs are scattered back to their tokens.
A screen's windows have at most four distinct lengths (full windows, cut right edge, cut bottom
edge, the corner), so a windowed block costs a handful of calls whatever the number of windows.

:func:`set_vision_attention` installs it on a loaded model (``model.vision_attention`` of the run
config; :func:`guirl.models.load_model` does it):

* ``"fused"``: the vision attention modules become :class:`FusedVisionAttention`, which runs
  :func:`varlen_sdpa` when the vision config's attention implementation is ``sdpa``. With
  ``eager`` (FLOP counting, attention extraction: explicit matmuls) or ``flash_attention_2``
  (already one varlen call) it runs transformers' own forward unchanged.
* ``"loop"``: transformers' own forward (one call per segment).

The weights and the state dict are the same in both modes; only the forward changes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VLVisionAttention,
    apply_rotary_pos_emb_vision,
)

__all__ = [
    "VISION_ATTENTION_MODES",
    "FusedVisionAttention",
    "segment_buckets",
    "varlen_sdpa",
    "set_vision_attention",
    "vision_attention_mode",
]

#: ``fused``: :func:`varlen_sdpa` under ``sdpa``; ``loop``: transformers' per-segment loop.
VISION_ATTENTION_MODES: tuple[str, ...] = ("fused", "loop")


def segment_buckets(cu_seqlens: torch.Tensor) -> list[torch.Tensor]:
    """The token indices of the segments ``[cu[i], cu[i+1])``, grouped by segment length.

    ``cu_seqlens``: ``(n_segments + 1,)`` integer boundaries, non-decreasing, starting at 0.
    Returns one ``(n_L, L)`` long tensor per distinct non-zero length ``L`` (ascending), row
    ``j`` holding the ``L`` consecutive token indices of the ``j``-th segment of that length (in
    sequence order). Every token of ``[0, cu[-1])`` appears exactly once over all buckets.
    """
    if cu_seqlens.ndim != 1 or cu_seqlens.numel() < 1:
        raise ValueError(f"cu_seqlens must be a 1-D tensor of boundaries, got shape {tuple(cu_seqlens.shape)}")
    cu = cu_seqlens.long()
    starts, lengths = cu[:-1], cu[1:] - cu[:-1]
    if bool((lengths < 0).any()):
        raise ValueError("cu_seqlens must be non-decreasing (segment lengths >= 0)")
    out = []
    for length in torch.unique(lengths).tolist():  # distinct lengths: a handful, not one per window
        if length == 0:
            continue
        first = starts[lengths == length]
        out.append(first[:, None] + torch.arange(length, device=cu.device)[None, :])
    return out


def varlen_sdpa(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens: torch.Tensor, *, scale: float
) -> torch.Tensor:
    """Attention of each token over the tokens of its own segment, without a per-segment loop.

    ``query`` / ``key`` / ``value``: ``(S, heads, head_dim)``, the segments' tokens back to back;
    ``cu_seqlens``: ``(n_segments + 1,)`` boundaries with ``cu[0] == 0`` and ``cu[-1] == S``;
    ``scale``: the softmax scale (``head_dim ** -0.5`` in Qwen2.5-VL). Returns ``(S, heads,
    head_dim)``, equal (up to float order) to running ``scaled_dot_product_attention`` on each
    segment alone. Differentiable in ``query``, ``key`` and ``value``.
    """
    if query.ndim != 3 or key.shape != query.shape or value.shape[:2] != query.shape[:2]:
        raise ValueError(
            f"varlen_sdpa: query/key/value must be (S, heads, head_dim) of one S and heads, got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    n_tokens, heads = query.shape[0], query.shape[1]
    first, last = cu_seqlens[[0, -1]].tolist()
    if first != 0 or last != n_tokens:
        raise ValueError(f"varlen_sdpa: cu_seqlens must run from 0 to {n_tokens} tokens, got {first}..{last}")
    outs, order = [], []
    for idx in segment_buckets(cu_seqlens):
        n, length = idx.shape
        flat = idx.reshape(-1)

        def batch(t: torch.Tensor, flat: torch.Tensor = flat, n: int = n, length: int = length) -> torch.Tensor:
            return t.index_select(0, flat).view(n, length, heads, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(batch(query), batch(key), batch(value), scale=scale)
        outs.append(out.transpose(1, 2).reshape(n * length, heads, -1))
        order.append(flat)
    if len(outs) == 1:
        return outs[0]  # one bucket covers 0..S in order (a single length: segments back to back)
    cat = torch.cat(outs)
    return torch.empty_like(cat).index_copy(0, torch.cat(order), cat)


class FusedVisionAttention(Qwen2_5_VLVisionAttention):
    """``Qwen2_5_VLVisionAttention`` whose ``sdpa`` path is :func:`varlen_sdpa` (same weights).

    Installed by :func:`set_vision_attention`; under any other attention implementation of the
    vision config (``eager``, ``flash_attention_2``) it is transformers' own forward."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        cu_seqlens: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        max_seqlen: int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        if self.config._attn_implementation != "sdpa" or position_embeddings is None:
            return super().forward(
                hidden_states, cu_seqlens, position_embeddings=position_embeddings, max_seqlen=max_seqlen, **kwargs
            )
        n_tokens = hidden_states.shape[0]
        q, k, v = self.qkv(hidden_states).reshape(n_tokens, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
        out = varlen_sdpa(q, k, v, cu_seqlens, scale=self.scaling)
        return self.proj(out.reshape(n_tokens, -1))


def set_vision_attention(model: torch.nn.Module, mode: str) -> int:
    """Switch every Qwen2.5-VL vision attention module of ``model`` to ``mode`` (one of
    :data:`VISION_ATTENTION_MODES`) in place; returns how many modules it switched (0 for a model
    without a Qwen2.5-VL vision tower). Works on wrapped models (PEFT) too."""
    if mode not in VISION_ATTENTION_MODES:
        raise ValueError(
            f"model.vision_attention: {mode!r} is not one of {', '.join(VISION_ATTENTION_MODES)} "
            "(fused: batched attention per segment length; loop: transformers' per-window loop)"
        )
    cls = FusedVisionAttention if mode == "fused" else Qwen2_5_VLVisionAttention
    n = 0
    for module in model.modules():
        if isinstance(module, Qwen2_5_VLVisionAttention):
            module.__class__ = cls
            n += 1
    return n


def vision_attention_mode(model: torch.nn.Module) -> str | None:
    """``"fused"`` or ``"loop"`` as installed on ``model``'s vision attention modules; ``None``
    when it has none. Raises ``ValueError`` when the modules disagree."""
    modes = {
        "fused" if isinstance(m, FusedVisionAttention) else "loop"
        for m in model.modules()
        if isinstance(m, Qwen2_5_VLVisionAttention)
    }
    if len(modes) > 1:
        raise ValueError("the vision attention modules mix fused and loop; call set_vision_attention(model, mode)")
    return modes.pop() if modes else None
