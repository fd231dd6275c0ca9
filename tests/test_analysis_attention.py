"""guirl.analysis.attention: image-token layout, maps on the merged grid, forced attention, box shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from guirl.analysis import attention as A
from guirl.analysis import profiling as P
from guirl.models import build_tiny_model, load_model, load_processor

PAD = 99  # a stand-in <|image_pad|> id for hand-built sequences


@pytest.fixture(scope="module")
def tiny(session_cache: Path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = build_tiny_model(session_cache / "models", seed=0)
    yield load_processor(path), load_model(path)  # sdpa: attention_maps must switch to eager itself
    torch.set_num_threads(threads)


def _prompt(processor, images, text="Open settings"):
    content = [{"type": "image"} for _ in images] + [{"type": "text", "text": text}]
    messages = [{"role": "user", "content": content}]
    chat = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor(text=[chat], images=[images], return_tensors="pt")


# ------------------------------------------------------------------------------ the mapping, by hand
def _sequence() -> tuple[torch.Tensor, torch.Tensor]:
    """text(3) [image 0: 2x3 merged cells] text(2) [image 1: 2x2 merged cells] text(1)."""
    ids = [1, 2, 3] + [PAD] * 6 + [4, 5] + [PAD] * 4 + [6]
    grids = torch.tensor([[1, 4, 6], [1, 4, 4]])  # patches; merge 2 -> (2, 3) and (2, 2)
    return torch.tensor(ids), grids


@pytest.mark.parametrize(
    "key, image, cell",
    [
        (3, 0, (0, 0)),  # first pad token of image 0: top-left cell
        (5, 0, (0, 2)),  # third pad token: end of the first row (3 columns)
        (6, 0, (1, 0)),  # fourth pad token wraps to the second row (row-major)
        (8, 0, (1, 2)),  # last pad token of image 0: bottom-right
        (11, 1, (0, 0)),  # after two text tokens, image 1 starts again at the top-left
        (14, 1, (1, 1)),  # last pad token of image 1
    ],
)
def test_one_hot_attention_lands_on_its_cell(key: int, image: int, cell: tuple[int, int]) -> None:
    ids, grids = _sequence()
    layout = A.image_token_layout(ids, grids, image_token_id=PAD, merge=2)
    assert layout.grids == ((1, 2, 3), (1, 2, 2))
    weights = torch.zeros(len(ids))
    weights[key] = 1.0
    maps = A.maps_from_weights(weights, layout)
    assert [m.shape for m in maps] == [(2, 3), (2, 2)]
    expected = [np.zeros((2, 3)), np.zeros((2, 2))]
    expected[image][cell] = 1.0
    for got, want in zip(maps, expected):
        np.testing.assert_array_equal(got, want)


def test_text_attention_is_not_on_any_image_and_leading_axes_are_averaged() -> None:
    ids, grids = _sequence()
    layout = A.image_token_layout(ids, grids, image_token_id=PAD)
    w = torch.zeros(2, 4, len(ids))  # (heads, queries, keys)
    w[0, :, 0] = 1.0  # head 0 looks at a text token
    w[1, :, 7] = 1.0  # head 1 looks at image 0's fifth pad token -> cell (1, 1)
    maps = A.maps_from_weights(w, layout)
    assert maps[0][1, 1] == pytest.approx(0.5) and maps[0].sum() == pytest.approx(0.5)
    assert maps[1].sum() == 0.0


@pytest.mark.parametrize(
    "ids, grids, error",
    [
        ([PAD] * 5, [[1, 4, 6]], "has 5 image tokens"),  # one pad token short of the 2x3 grid
        ([PAD] * 6, [[1, 4, 5]], "not divisible by the spatial merge"),  # odd patch grid
    ],
)
def test_layout_rejects_mismatched_grids(ids, grids, error) -> None:
    with pytest.raises(ValueError, match=error):
        A.image_token_layout(ids, grids, image_token_id=PAD)


def test_processor_orders_image_tokens_row_major_over_the_merged_grid(tiny) -> None:
    """The layout assumption, checked on the real processor: a white 28 px square in merged cell
    (row 2, col 1) of a 2-column image shows up in exactly the 4 patches of token 2 * 2 + 1."""
    processor, _ = tiny
    img = Image.new("RGB", (56, 84), (0, 0, 0))
    img.paste((255, 255, 255), (28, 56, 56, 84))
    enc = _prompt(processor, [img])
    assert enc["image_grid_thw"].tolist() == [[1, 6, 4]]
    pv = enc["pixel_values"]
    changed = torch.nonzero((pv - pv[0]).abs().amax(1) > 0.5).reshape(-1).tolist()
    assert changed == [20, 21, 22, 23]  # merged token 5 = 4 consecutive patches (PatchMerger)
    layout = A.image_token_layout(enc["input_ids"][0], enc["image_grid_thw"], image_token_id=_pad_id(processor))
    weights = torch.zeros(enc["input_ids"].shape[1])
    weights[layout.positions[0][5]] = 1.0
    assert A.maps_from_weights(weights, layout)[0][2, 1] == 1.0


def _pad_id(processor) -> int:
    return processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")


# ------------------------------------------------------------------------------ the model
def test_forced_attention_through_the_model_lands_on_the_forced_cell(tiny, monkeypatch) -> None:
    """Every decoder layer is made to attend only to one chosen image token (the hooks read the
    weights the attention function returns); the map must put all the mass on its cell."""
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qm

    processor, model = tiny
    enc = _prompt(processor, [Image.new("RGB", (140, 252), (9, 9, 9)), Image.new("RGB", (112, 112), (200, 9, 9))])
    layout = A.image_token_layout(enc["input_ids"][0], enc["image_grid_thw"], image_token_id=_pad_id(processor))
    assert layout.grids == ((1, 9, 5), (1, 4, 4))
    target = int(layout.positions[1][6])  # image 1, merged cell (1, 2)
    original = qm.eager_attention_forward

    def forced(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        out, weights = original(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
        if isinstance(module, qm.Qwen2_5_VLAttention):
            weights = torch.zeros_like(weights)
            weights[..., target] = 1.0
        return out, weights

    monkeypatch.setattr(qm, "eager_attention_forward", forced)
    length = enc["input_ids"].shape[1]
    maps = A.attention_maps(model, enc, [length - 2, length - 1], layers=[0, -1])
    assert maps[0].sum() == 0.0
    expected = np.zeros((4, 4))
    expected[1, 2] = 1.0
    np.testing.assert_allclose(maps[1], expected)
    assert A.mass_inside(maps[1], (0.5, 0.25, 0.75, 0.5)) == pytest.approx(1.0)  # the cell's box
    assert model.config._attn_implementation == "sdpa"  # eager only inside the call


def test_action_attention_on_the_tiny_model(tiny) -> None:
    processor, model = tiny
    enc = _prompt(processor, [Image.new("RGB", (140, 252), (9, 90, 9)), Image.new("RGB", (280, 504), (1, 2, 3))])
    result = A.action_attention(model, processor, enc, max_new_tokens=5, layers=[-1])
    assert [m.shape for m in result.maps] == [(9, 5), (18, 10)]
    assert len(result.query_positions) == max(len(result.token_ids), 1)
    assert result.query_positions[0] == enc["input_ids"].shape[1]
    total = sum(float(m.sum()) for m in result.maps)
    assert 0.0 < total <= 1.0 + 1e-6 and all((m >= 0).all() for m in result.maps)


@pytest.mark.parametrize(
    "layers, error",
    [
        ([4], "out of range for 4 layers"),  # the tiny model has layers 0..3
        ([-5], "out of range for 4 layers"),  # negative indices count from the end
        ([], "selects no layer"),  # an empty selection
    ],
)
def test_attention_maps_reject_bad_layers(tiny, layers, error) -> None:
    processor, model = tiny
    enc = _prompt(processor, [Image.new("RGB", (56, 56))])
    with pytest.raises(ValueError, match=error):
        A.attention_maps(model, enc, [0], layers=layers)


def test_attention_maps_reject_queries_outside_the_sequence(tiny) -> None:
    processor, model = tiny
    enc = _prompt(processor, [Image.new("RGB", (56, 56))])
    with pytest.raises(ValueError, match="query positions must lie in"):
        A.attention_maps(model, enc, [enc["input_ids"].shape[1]])


# ------------------------------------------------------------------------------ mass_inside
UNIFORM = np.ones((4, 4))


@pytest.mark.parametrize(
    "attention_map, box, share",
    [
        (UNIFORM, (0.0, 0.0, 1.0, 1.0), 1.0),  # the whole image
        (UNIFORM, (0.0, 0.0, 0.5, 1.0), 0.5),  # the left half
        (UNIFORM, (0.125, 0.125, 0.375, 0.375), 1 / 16),  # one cell's area, spread over four cells
        (np.eye(4), (0.0, 0.0, 0.25, 0.25), 0.25),  # the diagonal's top-left cell
        (np.eye(4), (0.75, 0.0, 1.0, 0.25), 0.0),  # a corner the diagonal misses
        (np.array([[0.0, 3.0], [1.0, 0.0]]), (0.5, 0.0, 1.0, 0.5), 0.75),  # a non-square mass
    ],
)
def test_mass_inside(attention_map, box, share) -> None:
    assert A.mass_inside(attention_map, box) == pytest.approx(share)


@pytest.mark.parametrize(
    "box",
    [
        (0.5, 0.0, 0.5, 1.0),  # empty width
        (0.0, 0.0, 1.2, 1.0),  # beyond the image
        (0.6, 0.0, 0.4, 1.0),  # x1 > x2
    ],
)
def test_mass_inside_rejects_bad_boxes(box) -> None:
    with pytest.raises(ValueError, match="box must be"):
        A.mass_inside(UNIFORM, box)


def test_mass_inside_of_an_empty_map_is_nan() -> None:
    assert np.isnan(A.mass_inside(np.zeros((2, 2)), (0.0, 0.0, 1.0, 1.0)))


def test_profiling_and_attention_agree_on_the_eager_switch(tiny) -> None:
    _, model = tiny
    with P.eager_attention(model):
        assert model.config._attn_implementation == "eager"
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize(
    "tail, n_queries",
    [
        ([7, 8, "pad", 9], 2),  # a generated <|image_pad|> ends the action: two queries before it
        (["pad", 7], 1),  # nothing before it: the prompt's last position is the query
    ],
)
def test_action_attention_stops_at_a_generated_image_placeholder(tiny, monkeypatch, tail, n_queries) -> None:
    # An undertrained model may generate <|image_pad|>; a forward pass with it fails ("image features and
    # image tokens do not match"), so the action must end before it.
    processor, model = tiny
    enc = _prompt(processor, [Image.new("RGB", (56, 56), (9, 90, 9))])
    pad = _pad_id(processor)
    ids = torch.tensor([[pad if t == "pad" else t for t in tail]])
    monkeypatch.setattr(model, "generate", lambda **kw: torch.cat([kw["input_ids"], ids], dim=1))
    result = A.action_attention(model, processor, enc, max_new_tokens=4)
    p_len = enc["input_ids"].shape[1]
    assert len(result.query_positions) == n_queries and pad not in result.token_ids
    assert result.query_positions == (list(range(p_len, p_len + 2)) if n_queries == 2 else [p_len - 1])
    assert result.maps[0].shape == (2, 2) and 0.0 < float(result.maps[0].sum()) <= 1.0 + 1e-6
