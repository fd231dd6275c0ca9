"""guirl.analysis.accounting: image tokens, prompt length, CCPO efficiency numbers, FLOPs, tokens/action."""

from __future__ import annotations

import json

import pytest
import torch

from guirl.actions.types import Action, ActionType
from guirl.analysis.accounting import (
    ModelDims,
    compression_rate,
    count_tokens,
    forward_flops,
    image_tokens,
    lm_matmul_params,
    model_dims,
    prompt_length,
    speedup,
    tokens_per_action,
    train_step_flops,
    vision_matmul_params,
    window_segments,
)
from guirl.imaging import PixelBudgetError, visual_tokens
from guirl.papers import paper_results

#: The paper profiles' budget (configs/profiles/base/paper.yaml): 1080x2400 -> 1092x2408.
PAPER = dict(min_pixels=3136, max_pixels=12845056)
#: The released processor constructor's budget (1280 tokens), the former library default.
PROC = dict(min_pixels=56 * 56, max_pixels=28 * 28 * 1280)


# ----------------------------------------------------------------------------- tokens
@pytest.mark.parametrize(
    "w, h, max_pixels, expected",
    [
        (280, 504, 28 * 28 * 1280, 180),  # already on the grid: 10 x 18
        (1080, 2400, 12845056, 3354),  # phone screen, the paper profiles' budget: 39 x 86 (1092x2408)
        (1080, 2400, 28 * 28 * 1280, 1272),  # phone screen, the processor's 1280 tokens: 24 x 53
        (1080, 2400, 1024 * 28 * 28, 987),  # phone screen, Co-EPG App. B's 1024 tokens: 21 x 47
        (10, 10, 28 * 28 * 1280, 4),  # lifted to min_pixels: 2 x 2
    ],
)
def test_image_tokens(w, h, max_pixels, expected):
    assert image_tokens(w, h, min_pixels=3136, max_pixels=max_pixels) == expected
    assert visual_tokens(h, w, min_pixels=3136, max_pixels=max_pixels) == expected  # (height, width) order there


def test_image_tokens_width_height_order_matters():
    # 300x500 -> 308x504 (11 x 18 = 198 tokens); transposed 500x300 -> 504x308, same count,
    # but 280x1000 vs 1000x280 differ from a wrong swap only through rounding: check both
    assert image_tokens(300, 500, **PROC) == 198
    assert image_tokens(56, 2800, **PROC) == visual_tokens(2800, 56, **PROC) == 2 * 100


def test_the_pixel_budget_is_required():
    # no default budget (CCPO-29): an image without the budget is an error naming the argument
    with pytest.raises(TypeError, match="min_pixels"):
        image_tokens(1080, 2400)  # type: ignore[call-arg]
    with pytest.raises(PixelBudgetError, match="prompt_length: min_pixels is required"):
        prompt_length(10, [(1080, 2400)])
    with pytest.raises(PixelBudgetError, match="forward_flops: max_pixels is required"):
        forward_flops(_toy_config(), 10, [(56, 56)], min_pixels=3136)
    # text only: nothing is resized, so no budget is needed
    assert prompt_length(10, []) == 10


def _table4(row: str, column: str) -> float:
    df = paper_results("CCPO")
    sel = df[(df.table == "Table 4") & (df.row == row) & (df.column == column)]
    assert len(sel) == 1, (row, column)
    return float(sel.number.iloc[0])


@pytest.mark.parametrize("size", ["3B", "7B"])
def test_ccpo_table4_implies_about_3354_tokens_per_frame(size):
    # CCPO Table 4 (lines 260-267), token length per AndroidControl training sample. A 1AO
    # prompt shows at most 2 frames (one history screenshot and the current one), a 3AO prompt
    # at most 4 (App. A.1.3); every frame is a 1080x2400 screenshot, not pre-resized (Sec. 4.2).
    so_1ao, so_3ao = _table4(f"SO-RL-{size} 1AO", "Token length"), _table4(f"SO-RL-{size} 3AO", "Token length")
    ccpo_1ao = _table4(f"CCPO-{size} 1AO", "Token length")
    frame = image_tokens(1080, 2400, **PAPER) + 2  # 3,354 pads + vision start/end
    old = image_tokens(1080, 2400, **PROC) + 2  # 1,272 pads + 2: the former silent default
    assert frame == 3356 and old == 1274
    # growth 1AO -> 3AO: 2,890 (3B) / 2,524 (7B) tokens from at most two more frames and two more
    # action strings. At 1,274 tokens a frame two whole frames add 2,548 < 2,890 (3B): the old
    # budget cannot produce the printed growth; at 3,356 a frame it needs 0.86 / 0.75 of a frame
    growth = so_3ao - so_1ao
    assert growth <= 2 * frame
    if size == "3B":
        assert growth > 2 * old
    # SO-RL 1AO: two full frames leave 286 (3B) / 314 (7B) tokens of text, a plausible system
    # prompt + instruction + one action; at 1,274 a frame 4,450 tokens of text would remain
    text = so_1ao - 2 * frame
    assert 0 < text < 400
    # CCPO keeps the current frame full (Fig. 2): a CCPO 1AO prompt holds at least one frame
    assert frame < ccpo_1ao < 2 * frame


@pytest.mark.parametrize("size", ["3B", "7B"])
def test_table4_3ao_samples_show_fewer_than_two_history_screenshots(size):
    # docs/rl.md, "Prompt length": Table 4's token lengths are means over trained samples. With the
    # frame at 3,356 tokens and any prompt text from 0 to 1,200 tokens, a 3AO sample shows 1.5-1.9
    # history screenshots on average (a full window shows 3) and a 1AO sample at most one
    frame = image_tokens(1080, 2400, **PAPER) + 2
    so_1ao, so_3ao = _table4(f"SO-RL-{size} 1AO", "Token length"), _table4(f"SO-RL-{size} 3AO", "Token length")
    for text in (0, 300, 600, 1200):
        h1 = (so_1ao - text) / frame - 1
        h3 = (so_3ao - (text + 40)) / frame - 1  # two more action strings at 3AO
        assert h1 <= 1.1 and 1.4 < h3 < 2.0, (text, h1, h3)
    # the full-window 3AO prompt: four frames, 13,424 tokens of images before any text
    assert prompt_length(0, [(1080, 2400)] * 4, **PAPER) == 4 * frame == 13424


@pytest.mark.parametrize(
    "n_text, sizes, expected",
    [
        (100, [], 100),  # text only
        (100, [(280, 504)], 100 + 180 + 2),  # one screenshot + <|vision_start|>/<|vision_end|>
        (50, [(280, 504), (56, 56), (84, 56)], 50 + (180 + 2) + (4 + 2) + (6 + 2)),  # history crops
    ],
)
def test_prompt_length(n_text, sizes, expected):
    assert prompt_length(n_text, sizes, **PROC) == expected


def test_prompt_length_rejects_negative_text():
    with pytest.raises(ValueError):
        prompt_length(-1, [])


# ----------------------------------------------------------------------------- CCPO numbers
# CCPO Table 4 (lines 260-267 of its text; docs/papers.md): token length per sample and training
# time (s/step) on Android Control for Semi-online RL (SO-RL) and CCPO at 1AO and 3AO, with the
# printed compression rate (0.1%) and speedup (0.1x). tests/test_papers.py checks the same rows of
# the registry (guirl.papers.paper_results) and Table 15.
# (model, history, SO-RL tokens, SO-RL s/step, CCPO tokens, CCPO s/step, printed rate %, printed x)
CCPO_EFFICIENCY = [
    ("3B", "1AO", 6998, 515, 4271, 154, 38.9, 3.3),
    ("3B", "3AO", 9888, 660, 4460, 174, 54.9, 3.8),
    ("7B", "1AO", 7026, 569, 4262, 186, 39.3, 3.1),
    ("7B", "3AO", 9550, 717, 4473, 204, 53.2, 3.5),
]


@pytest.mark.parametrize("model, hist, full_tok, full_t, comp_tok, comp_t, rate_pct, x", CCPO_EFFICIENCY)
def test_ccpo_efficiency_table_recomputes(model, hist, full_tok, full_t, comp_tok, comp_t, rate_pct, x):
    rate = 100 * compression_rate(comp_tok, full_tok)
    # within one unit of the printed precision (0.1 percentage point) ...
    assert abs(rate - rate_pct) < 0.1
    # ... and equal after rounding, except the 3B-1AO cell: 1 - 4271/6998 = 38.97%, printed
    # 38.9% (truncated, while 54.89% is printed 54.9%: the table mixes rounding/truncation)
    if (model, hist) == ("3B", "1AO"):
        assert round(rate, 1) == 39.0 and int(rate * 10) / 10 == rate_pct
    else:
        assert round(rate, 1) == rate_pct
    assert round(speedup(full_t, comp_t), 1) == x


def test_ccpo_history_growth_claim():
    # CCPO Sec. 5.3 (line 279): from 1AO to 3AO the SO-RL token length grows by 41% while CCPO
    # grows about 4% (3B rows of the table above).
    assert round(100 * (9888 / 6998 - 1)) == 41
    assert round(100 * (4460 / 4271 - 1)) == 4


@pytest.mark.parametrize(
    "full, comp, printed_pct",
    [
        # CCPO Table 6 (lines 304-306; compute load and latency, SO-RL vs CCPO): compute load
        # 9.6 -> 5.4 TFLOPS printed -44%; step latency 297.1 -> 194.5 s printed -35%.
        # (The token-latency column, 0.064 -> 0.057 ms printed -10%, recomputes to -10.9%
        # and is therefore not in this table.)
        (9.6, 5.4, 44),
        (297.1, 194.5, 35),
    ],
)
def test_ccpo_cost_table_recomputes(full, comp, printed_pct):
    assert round(100 * compression_rate(comp, full)) == printed_pct


@pytest.mark.parametrize("bad", [dict(compressed_tokens=1, uncompressed_tokens=0)])
def test_compression_rate_rejects_zero(bad):
    with pytest.raises(ValueError):
        compression_rate(**bad)


def test_speedup_rejects_zero():
    with pytest.raises(ValueError):
        speedup(1.0, 0.0)


# ----------------------------------------------------------------------------- FLOPs
def _toy_config():
    from transformers import Qwen2_5_VLConfig

    cfg = Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=300,
            max_position_embeddings=4096,
            bos_token_id=None,
            eos_token_id=None,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
        ),
        vision_config=dict(
            hidden_size=32, intermediate_size=48, depth=3, num_heads=2, out_hidden_size=64, fullatt_block_indexes=[1]
        ),
        image_token_id=290,
        video_token_id=291,
        vision_start_token_id=292,
        vision_end_token_id=293,
    )
    return cfg


def test_model_dims_nested_and_flat_layouts_agree():
    cfg = _toy_config()
    nested = model_dims(cfg)
    assert nested == model_dims(cfg.to_dict())
    d = json.loads(cfg.to_json_string())
    flat = {**d.pop("text_config"), "vision_config": d["vision_config"]}  # published config.json layout
    assert model_dims(flat) == nested
    assert (nested.hidden, nested.n_kv_heads, nested.head_dim, nested.v_depth) == (64, 2, 16, 3)
    assert nested.fullatt_block_indexes == (1,)


def test_model_dims_names_missing_keys():
    with pytest.raises(KeyError, match="vision_config"):
        model_dims({"hidden_size": 8})


def test_matmul_params_equal_the_real_modules():
    # count the weights of every nn.Linear / Conv3d of a real (meta-device) Qwen2.5-VL
    from transformers import Qwen2_5_VLForConditionalGeneration

    cfg = _toy_config()
    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(cfg)
    lin = lambda mod: sum(  # noqa: E731
        m.weight.numel() for m in mod.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv3d))
    )
    dims = model_dims(cfg)
    per_patch, per_merged = vision_matmul_params(dims)
    visual = model.model.visual
    assert lin(visual.merger) == per_merged
    assert lin(visual) - lin(visual.merger) == per_patch
    assert lin(model.model.language_model) + model.lm_head.weight.numel() == lm_matmul_params(dims)


@pytest.mark.parametrize(
    "grid_h, grid_w, expected",
    [
        (8, 8, [64]),  # 4x4 merged tokens: exactly one 112 px window of 64 patches
        (8, 10, [64, 16]),  # 4x5 merged: a full window and a 4x1 edge window
        (4, 4, [16]),  # 2x2 merged (a 56x56 crop): one small window
    ],
)
def test_window_segments(grid_h, grid_w, expected):
    assert window_segments(grid_h, grid_w, model_dims(_toy_config())) == expected


def test_window_segments_cover_every_patch():
    dims = model_dims(_toy_config())
    # 36 x 22 patches = 18 x 11 merged tokens: windows of 4 rows (4,4,4,4,2) x cols (4,4,3)
    segs = window_segments(36, 22, dims)
    assert sum(segs) == 36 * 22
    assert sorted(set(segs)) == [2 * 3 * 4, 2 * 4 * 4, 4 * 3 * 4, 4 * 4 * 4]


def test_forward_flops_hand_count():
    # Toy config: LM h=64, i=96, 2 layers, 4 heads x 16, 2 kv heads, V=300;
    # vision h=32, i=48, depth 3 (block 1 full attention), out 64. One 56x56 image
    # (4x4 patches = one window of 16 patches, 4 merged tokens) and 10 text tokens.
    fb = forward_flops(_toy_config(), n_text_tokens=10, image_sizes=[(56, 56)], **PROC)
    P, M = 16, 4
    N = 10 + M + 2  # text + image pads + vision start/end
    conv = 2 * P * (3 * 2 * 14 * 14) * 32
    blocks = 3 * 2 * P * (32 * 96 + 32 * 32 + 3 * 32 * 48)
    assert fb.vision_linear == conv + blocks
    assert fb.vision_attention == 3 * 4 * 32 * P * P  # the single window is the whole image
    assert fb.merger == 2 * M * (128 * 128 + 128 * 64)
    assert fb.lm_linear == 2 * N * 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 96)
    assert fb.lm_attention == 2 * 4 * 64 * N * N
    assert fb.lm_head == 2 * N * 64 * 300
    assert fb.total == conv + blocks + 3 * 4 * 32 * P * P + fb.merger + fb.lm_linear + fb.lm_attention + fb.lm_head
    # causal counting halves the quadratic term (lower triangle incl. diagonal)
    assert (
        forward_flops(_toy_config(), 10, [(56, 56)], causal=True, **PROC).lm_attention == 2 * 4 * 64 * N * (N + 1) / 2
    )
    # a training step is 3x the forward
    assert train_step_flops(_toy_config(), 10, [(56, 56)], **PROC) == 3 * fb.total


def test_forward_flops_match_torch_flop_counter():
    # Measure a real forward of the toy model with torch's FlopCounterMode (eager attention so
    # that attention matmuls are visible to the counter): matmuls/convs must match exactly,
    # including window vs full attention in the vision tower.
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen2_5_VLForConditionalGeneration

    from guirl.imaging import smart_resize

    cfg = _toy_config()
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(cfg).eval()
    sizes = [(300, 500), (150, 120)]  # (width, height) px: 22x36 and 10x8 patch grids
    ids, pix, grids = [1, 2, 3], [], []
    for w, h in sizes:
        rh, rw = smart_resize(h, w, **PROC)
        gh, gw = rh // 14, rw // 14
        grids.append([1, gh, gw])
        pix.append(torch.randn(gh * gw, 3 * 2 * 14 * 14))
        ids += [292] + [290] * (gh * gw // 4) + [293]
    ids += [4, 5, 6, 7]
    input_ids = torch.tensor([ids])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(
            input_ids=input_ids,
            pixel_values=torch.cat(pix),
            image_grid_thw=torch.tensor(grids),
            mm_token_type_ids=(input_ids == 290).long(),
        )
    assert counter.get_total_flops() == forward_flops(cfg, n_text_tokens=7, image_sizes=sizes, **PROC).total


def test_forward_flops_scale_with_compression():
    # a CASC history (crops) costs less than full screenshots, text-only costs the least
    cfg = _toy_config()
    full = forward_flops(cfg, 50, [(1080, 2400)] * 3, **PAPER).total
    crops = forward_flops(cfg, 50, [(56, 56), (112, 84), (1080, 2400)], **PAPER).total
    text = forward_flops(cfg, 50, []).total
    assert text < crops < full
    assert isinstance(model_dims(cfg), ModelDims)


# ----------------------------------------------------------------------------- tokens/action
class _WordTokenizer:
    """HF-like: ``encode(text, add_special_tokens=...)``; adds a BOS when asked to."""

    def encode(self, text, add_special_tokens=True):
        return ([0] if add_special_tokens else []) + [hash(w) % 97 for w in text.split()]


class _CharCallable:
    """Callable returning a mapping with ``input_ids`` (one token per character)."""

    def __call__(self, text):
        return {"input_ids": [ord(c) for c in text]}


class _TiktokenLike:
    """``encode(text)`` without keyword arguments."""

    def encode(self, text):
        return list(text.encode())


@pytest.mark.parametrize(
    "tok, text, expected",
    [
        (_WordTokenizer(), "click at 3 4", 4),  # no BOS counted
        (_CharCallable(), "abc", 3),  # callable -> input_ids
        (_TiktokenLike(), "héllo", 6),  # bytes: é is two
    ],
)
def test_count_tokens_accepts_any_tokenizer(tok, text, expected):
    assert count_tokens(text, tok) == expected


def test_tokens_per_action_with_format_fn():
    acts = [Action(ActionType.CLICK, point=(0.1, 0.2)), Action(ActionType.TYPE, text="hello big world")]

    def fmt(a, ctx):
        return "click 1 2" if a.type is ActionType.CLICK else f"type {a.text}"

    # "click 1 2" = 3 words, "type hello big world" = 4 words
    assert tokens_per_action(acts, None, _WordTokenizer(), format_fn=fmt) == 3.5
    with pytest.raises(ValueError):
        tokens_per_action([], None, _WordTokenizer(), format_fn=fmt)
    with pytest.raises(ValueError):
        tokens_per_action(acts, None, _WordTokenizer())


def _byte_tokenizer():
    return _TiktokenLike()


def test_tokens_per_action_registry_path_matches_format_fn():
    from guirl.actions.formats import FormatContext, get_format

    acts = [
        Action(ActionType.CLICK, point=(0.25, 0.5)),
        Action(ActionType.TYPE, text="hello world"),
        Action(ActionType.PRESS, key="back"),
    ]
    ctx = FormatContext(width=1080, height=2400, **PAPER)
    via_registry = tokens_per_action(acts, "agentcpm", _byte_tokenizer(), ctx=ctx)
    via_fn = tokens_per_action(acts, None, _byte_tokenizer(), format_fn=get_format("agentcpm").format, ctx=ctx)
    assert via_registry == via_fn
    # AgentCPM-GUI's compact JSON ({"POINT":[250,500]}) is shorter than the Qwen2.5-VL
    # mobile_use tool call for the same actions, under any byte-level count
    assert via_registry < tokens_per_action(acts, "qwen_mobile_use", _byte_tokenizer(), ctx=ctx)
    with pytest.raises(KeyError):
        tokens_per_action(acts, "no_such_format", _byte_tokenizer(), ctx=ctx)
    # the screen size and pixel budget are not guessed
    with pytest.raises(ValueError, match="ctx is required"):
        tokens_per_action(acts, "agentcpm", _byte_tokenizer())
