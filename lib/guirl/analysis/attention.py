"""Where a Qwen2.5-VL policy looks: attention from action tokens to every image token, per image grid.

Used to check CCPO's qualitative claim that coordinate-aware compression concentrates attention on
task-relevant regions (CCPO Figs. 4, 10-17), and to put a number behind the picture: the share of
attention mass inside the target box (current screenshot) and inside the history ROIs.

Layout of image tokens (Qwen2.5-VL)
-----------------------------------
Image ``i`` of a sequence has ``image_grid_thw[i] = (t, h, w)`` patches of 14 px; the 2x2
spatial merge turns them into ``t * (h / 2) * (w / 2)`` ``<|image_pad|>`` tokens, in row-major
order over the merged grid (the processor orders the patches that way). So the ``k``-th pad token
of image ``i`` is merged cell ``(row, col) = divmod(k mod (h/2 * w/2), w/2)`` and covers the
28 x 28 px square at ``(28 col, 28 row)`` of the resized image. Images follow each other in the
sequence in the order of their rows of ``image_grid_thw``.

Maps
----
:func:`attention_maps` averages the attention weights over the chosen layers, all heads and the
query positions, then scatters each image token's weight onto its cell: one ``(h/2, w/2)`` array
per image (``t > 1`` frames are summed), holding the **share of the queries' attention** that
went to that cell (the text tokens take the rest, so the maps of a sequence sum to at most 1).
Attention weights come from eager attention (``attn_implementation="eager"``), the only
implementation that materialises them; they are captured by forward hooks on the decoder's
attention modules, keeping only the query rows asked for.

:func:`mass_inside` is the share of a map's mass inside a box given in coordinates normalised to
the image (``x`` right, ``y`` down, in [0, 1]); cells partly inside count by the covered fraction
of their area.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from guirl.analysis.profiling import eager_attention, row_image_grids
from guirl.rl.logprobs import FORWARD_KEYS

__all__ = [
    "ImageTokenLayout",
    "image_token_layout",
    "maps_from_weights",
    "attention_maps",
    "action_attention",
    "AttentionResult",
    "mass_inside",
    "decoder_attention_modules",
]


@dataclass(frozen=True)
class ImageTokenLayout:
    """Positions of one sequence's image tokens: ``positions[i]`` are the sequence indices of
    image ``i``'s pad tokens (in order), ``grids[i]`` its merged ``(t, h/merge, w/merge)``."""

    positions: tuple[np.ndarray, ...]
    grids: tuple[tuple[int, int, int], ...]


def image_token_layout(
    input_ids: torch.Tensor | Sequence[int],
    image_grid_thw: torch.Tensor | Sequence[Sequence[int]],
    *,
    image_token_id: int,
    merge: int = 2,
) -> ImageTokenLayout:
    """Split one sequence's ``<|image_pad|>`` positions into its images.

    ``input_ids``: one sequence ``(L,)``; ``image_grid_thw``: that sequence's images ``(n, 3)`` in
    patches, in order. Raises ``ValueError`` when the pad tokens do not add up to the grids.
    """
    ids = torch.as_tensor(input_ids).reshape(-1)
    pos = torch.nonzero(ids == int(image_token_id)).reshape(-1).cpu().numpy()
    grids = [tuple(int(v) for v in g) for g in torch.as_tensor(image_grid_thw).reshape(-1, 3).tolist()]
    out_pos: list[np.ndarray] = []
    out_grid: list[tuple[int, int, int]] = []
    k = 0
    for t, h, w in grids:
        if h % merge or w % merge:
            raise ValueError(f"image grid {(t, h, w)} is not divisible by the spatial merge {merge}")
        n = t * (h // merge) * (w // merge)
        out_pos.append(pos[k : k + n])
        out_grid.append((t, h // merge, w // merge))
        k += n
    if k != len(pos) or any(len(p) != t * hh * ww for p, (t, hh, ww) in zip(out_pos, out_grid)):
        raise ValueError(
            f"the sequence has {len(pos)} image tokens but image_grid_thw {grids} with merge {merge} accounts for {k}"
        )
    return ImageTokenLayout(tuple(out_pos), tuple(out_grid))


def maps_from_weights(weights: torch.Tensor | np.ndarray, layout: ImageTokenLayout) -> list[np.ndarray]:
    """Scatter attention weights onto the image grids.

    ``weights``: ``(L,)`` attention of the (already averaged) queries over the sequence's ``L``
    keys, or any array whose last axis is the keys (leading axes, e.g. layers x heads x queries,
    are averaged first). Returns one ``(h/merge, w/merge)`` float array per image (frames summed).
    """
    w = (
        torch.as_tensor(weights, dtype=torch.float64)
        if not isinstance(weights, np.ndarray)
        else torch.from_numpy(np.asarray(weights, dtype=np.float64))
    )
    w = w.reshape(-1, w.shape[-1]).mean(0).cpu().numpy()
    maps = []
    for pos, (t, hh, ww) in zip(layout.positions, layout.grids):
        if len(pos) and pos.max() >= len(w):
            raise ValueError(f"image token position {int(pos.max())} is beyond the {len(w)} attention keys")
        maps.append(w[pos].reshape(t, hh, ww).sum(0))
    return maps


def decoder_attention_modules(model: Any) -> list[torch.nn.Module]:
    """The language model's self-attention modules, in layer order (``Qwen2_5_VLAttention``)."""
    inner = getattr(model, "model", model)
    lm = getattr(inner, "language_model", None)
    layers = getattr(lm, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__}: no .model.language_model.layers; pass a Qwen2.5-VL model")
    return [layer.self_attn for layer in layers]


def _select_layers(n_layers: int, layers: Sequence[int] | None) -> list[int]:
    if layers is None:
        return list(range(n_layers))
    out = []
    for i in layers:
        j = i + n_layers if i < 0 else i
        if not 0 <= j < n_layers:
            raise ValueError(f"attention layer {i} is out of range for {n_layers} layers")
        out.append(j)
    if not out:
        raise ValueError("layers: an empty list selects no layer; pass None for all layers")
    return sorted(set(out))


def attention_maps(
    model: Any,
    batch: Mapping[str, torch.Tensor],
    query_positions: Sequence[int] | torch.Tensor,
    *,
    row: int = 0,
    layers: Sequence[int] | None = None,
) -> list[np.ndarray]:
    """Attention of ``query_positions`` of sequence ``row`` to each of its images' cells.

    ``batch``: a forward batch (``input_ids``, ``attention_mask``, ``pixel_values``,
    ``image_grid_thw``, ``mm_token_type_ids``; e.g. :func:`guirl.analysis.profiling.build_batch`
    or the processor's output). ``layers``: decoder layers averaged (negative counts from the
    last; ``None``: all). Returns :func:`maps_from_weights` of the attention averaged over those
    layers, all heads and the queries. The model runs once, without gradients, in eager mode.
    """
    q = torch.as_tensor(query_positions, dtype=torch.long).reshape(-1)
    if q.numel() == 0:
        raise ValueError("query_positions is empty")
    length = int(batch["input_ids"].shape[1])
    if int(q.min()) < 0 or int(q.max()) >= length:
        raise ValueError(f"query positions must lie in [0, {length}), got {q.tolist()}")
    modules = decoder_attention_modules(model)
    chosen = _select_layers(len(modules), layers)
    captured: list[torch.Tensor] = []

    def hook(_module, _args, output):
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is None:
            raise RuntimeError("the attention module returned no weights; eager attention is required")
        captured.append(weights[row, :, q.to(weights.device), :].float().mean(0).cpu())  # (Q, L)

    handles = [modules[i].register_forward_hook(hook) for i in chosen]
    try:
        with eager_attention(model), torch.no_grad():
            model(**{k: batch[k] for k in FORWARD_KEYS if k in batch})
    finally:
        for h in handles:
            h.remove()
    if len(captured) != len(chosen):
        raise RuntimeError(f"captured {len(captured)} attention layers, expected {len(chosen)}")
    weights = torch.stack(captured).mean(0)  # (Q, L): layers and heads averaged
    image_token_id = int(model.config.image_token_id)
    merge = int(model.config.vision_config.spatial_merge_size)
    grids = row_image_grids(batch, image_token_id=image_token_id, merge=merge)[row]
    layout = image_token_layout(batch["input_ids"][row], grids, image_token_id=image_token_id, merge=merge)
    return maps_from_weights(weights, layout)


@dataclass(frozen=True)
class AttentionResult:
    """Maps of one generated action: ``maps[i]`` for image ``i`` (:func:`attention_maps`), the
    generated ``text``, its ``token_ids`` and the sequence positions used as queries."""

    maps: list[np.ndarray]
    text: str
    token_ids: list[int]
    query_positions: list[int]


def action_attention(
    model: Any,
    processor: Any,
    inputs: Mapping[str, torch.Tensor],
    *,
    max_new_tokens: int = 32,
    layers: Sequence[int] | None = None,
) -> AttentionResult:
    """Generate an action greedily for a one-row prompt batch (the processor's output) and return
    the attention of the generated tokens to every image cell.

    The generated tokens (up to and excluding EOS; all of them if that leaves none) are the
    queries: prompt and action are run forward once more, and the attention *from* each action
    token position is averaged (:func:`attention_maps`). A generated image / video placeholder
    token (an undertrained model can emit ``<|image_pad|>``) ends the action there: it has no
    image features, so the forward pass could not take it. When nothing is left, the query is
    the prompt's last position (the one that predicted the first action token).
    """
    if int(inputs["input_ids"].shape[0]) != 1:
        raise ValueError("action_attention takes a one-row prompt batch")
    keys = [k for k in FORWARD_KEYS if k in inputs]
    with torch.no_grad():
        out = model.generate(**{k: inputs[k] for k in keys}, max_new_tokens=max_new_tokens, do_sample=False)
    p_len = int(inputs["input_ids"].shape[1])
    gen = out[0, p_len:].tolist()
    placeholders = {getattr(model.config, k, None) for k in ("image_token_id", "video_token_id")} - {None}
    gen = gen[: next((i for i, t in enumerate(gen) if t in placeholders), len(gen))]
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
    keep = next((i for i, t in enumerate(gen) if t in eos_ids), len(gen))
    n_q = keep if keep > 0 else len(gen)
    full = out[:, : p_len + len(gen)]
    batch = {
        "input_ids": full,
        "attention_mask": torch.cat([inputs["attention_mask"], torch.ones_like(full[:, p_len:])], dim=1),
    }
    for k in ("pixel_values", "image_grid_thw"):
        if k in inputs:
            batch[k] = inputs[k]
    if "mm_token_type_ids" in inputs:
        mm = inputs["mm_token_type_ids"]
        batch["mm_token_type_ids"] = torch.cat([mm, mm.new_zeros((1, len(gen)))], dim=1)
    queries = list(range(p_len, p_len + n_q)) if n_q else [p_len - 1]
    maps = attention_maps(model, batch, queries, layers=layers)
    text = processor.tokenizer.decode(gen[:keep], skip_special_tokens=True)
    return AttentionResult(maps, text, gen[:keep], queries)


def mass_inside(attention_map: np.ndarray, box: Sequence[float]) -> float:
    """Share of ``attention_map``'s mass inside ``box = (x1, y1, x2, y2)`` (normalised to the
    image, ``0 <= x1 < x2 <= 1``, ``0 <= y1 < y2 <= 1``); a cell partly inside counts by the
    fraction of its area inside. ``nan`` for a map with no mass.
    """
    m = np.asarray(attention_map, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"attention_map must be 2-D (rows, cols), got shape {m.shape}")
    x1, y1, x2, y2 = (float(v) for v in box)
    if not (0.0 <= x1 < x2 <= 1.0 and 0.0 <= y1 < y2 <= 1.0):
        raise ValueError(f"box must be (x1, y1, x2, y2) with 0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1, got {box}")
    rows, cols = m.shape

    def cover(lo: float, hi: float, n: int) -> np.ndarray:
        edges = np.arange(n + 1) / n
        return np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0.0, None) * n

    weight = np.outer(cover(y1, y2, rows), cover(x1, x2, cols))
    total = m.sum()
    return float((m * weight).sum() / total) if total > 0 else float("nan")
