"""Tests for guirl.models: tiny offline Qwen2.5-VL build, loading, LoRA, parameter counts."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import time
from pathlib import Path

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from guirl.models import (
    LM_LORA_TARGET_REGEX,
    QWEN2_5_VL_ADDED_TOKENS,
    CheckpointNotFoundError,
    TinySpec,
    apply_lora,
    build_tiny_model,
    is_complete_build,
    is_lm_lora_target,
    load_model,
    load_processor,
    meta_parameter_count,
    model_summary,
    qwen2_5_vl_chat_template,
    tiny_model_dirname,
)
from guirl.models import tiny as tiny_mod
from guirl.paths import repo_root

REPO = Path(__file__).resolve().parents[1]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json")


class NetworkBlocked(RuntimeError):
    """Raised by the socket guard: the code under test tried to open a network connection."""


@contextlib.contextmanager
def no_network():
    """Make every outgoing socket connection raise, and set HF offline flags as belt and braces."""

    def refuse(*args, **kwargs):
        raise NetworkBlocked(f"network access attempted: {args!r}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket.socket, "connect_ex", refuse)
        mp.setattr(socket, "create_connection", refuse)
        mp.setattr(socket, "getaddrinfo", refuse)
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory):
    """Build the tiny model once per session with the network blocked; record build and load times."""
    root = tmp_path_factory.mktemp("tiny_a")
    with no_network():
        t0 = time.perf_counter()
        path = build_tiny_model(root)
        build_s = time.perf_counter() - t0
        processor = load_processor(path)
        model = load_model(path)
    return {"path": path, "build_s": build_s, "processor": processor, "model": model, "root": root}


@pytest.fixture(scope="session")
def tiny_path(tiny_build) -> Path:
    return tiny_build["path"]


def _chat_inputs(processor, size=(504, 280), text="Open Settings and tap Wi-Fi."):
    img = Image.new("RGB", size, (30, 120, 200))
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    return processor(text=[prompt], images=[img], return_tensors="pt")


# ---------------------------------------------------------------- build: speed, network, determinism


def test_network_guard_really_blocks():
    # The guard must refuse connections, else the no-network test below proves nothing.
    with no_network(), pytest.raises(NetworkBlocked):
        socket.create_connection(("127.0.0.1", 9), timeout=0.1)
    with no_network(), pytest.raises(NetworkBlocked):
        socket.socket().connect(("127.0.0.1", 9))


def test_build_is_fast_and_offline(tiny_build):
    # Built and loaded inside no_network(): reaching here means no connection was attempted.
    assert tiny_build["build_s"] < 10.0, f"tiny build took {tiny_build['build_s']:.1f} s"
    assert is_complete_build(tiny_build["path"])
    assert tiny_build["path"].parent == tiny_build["root"]


def test_second_build_is_bit_identical(tiny_path, tmp_path):
    # A fresh build into another folder gives the same weights and tokenizer files, byte for byte.
    torch.manual_seed(12345)  # move the global RNG: the build must not depend on its state
    torch.rand(17)
    with no_network():
        other = build_tiny_model(tmp_path / "a")
    assert other != tiny_path and other.name == tiny_path.name
    for name in ("model.safetensors", "config.json", "generation_config.json", *TOKENIZER_FILES):
        assert (other / name).read_bytes() == (tiny_path / name).read_bytes(), name


def test_seed_changes_weights_not_tokenizer(tiny_path, tmp_path):
    # seed=1: other random weights, same tokenizer files.
    other = build_tiny_model(tmp_path / "b", seed=1)
    assert (other / "model.safetensors").read_bytes() != (tiny_path / "model.safetensors").read_bytes()
    for name in TOKENIZER_FILES:
        assert (other / name).read_bytes() == (tiny_path / name).read_bytes(), name


def test_reload_state_dict_is_bit_identical(tiny_path, tiny_build, tmp_path):
    # Load -> save gives the same safetensors tensors under the same (published) key names,
    # and a second load gives a state_dict equal tensor for tensor to the first.
    first = tiny_build["model"]
    first.save_pretrained(tmp_path)
    on_disk, resaved = load_file(str(tiny_path / "model.safetensors")), load_file(str(tmp_path / "model.safetensors"))
    assert set(on_disk) == set(resaved)
    assert any(k.startswith("visual.") for k in on_disk) and any(k.startswith("model.layers.") for k in on_disk)
    for key, tensor in on_disk.items():
        assert tensor.dtype == resaved[key].dtype and torch.equal(tensor, resaved[key]), key
    with no_network():
        second = load_model(tiny_path).state_dict()
    first_sd = first.state_dict()
    assert set(first_sd) == set(second)
    for key in first_sd:
        assert torch.equal(first_sd[key], second[key]), key


def test_existing_complete_build_is_reused(tiny_path):
    # Same spec and seed into the same cache: returned as is, nothing rewritten.
    stamp = (tiny_path / "model.safetensors").stat().st_mtime_ns
    t0 = time.perf_counter()
    again = build_tiny_model(tiny_path.parent)
    assert again == tiny_path
    assert (tiny_path / "model.safetensors").stat().st_mtime_ns == stamp
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize(
    "changed",
    [
        {"text_layers": 2},  # a different size
        {"max_pixels": 128 * 28 * 28},  # a different processor setting
        {"tie_word_embeddings": False},  # a different head
    ],
)
def test_changed_spec_gets_new_folder(changed):
    base = tiny_model_dirname(TinySpec(), 0)
    assert tiny_model_dirname(TinySpec(**changed), 0) != base
    assert tiny_model_dirname(TinySpec(), 1) != base  # the seed is part of the name too
    assert tiny_model_dirname(TinySpec(), 0) == base  # and the name is stable


def test_interrupted_build_leaves_no_folder(tmp_path, monkeypatch):
    # A build killed half-way (here: an exception after writing one file) leaves nothing behind.
    def half_write(folder, spec, seed, key):
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(tiny_mod, "_write_build", half_write)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        build_tiny_model(cache)
    assert list(cache.iterdir()) == []


def test_folder_without_marker_is_rebuilt(tmp_path):
    # A leftover folder under the build's own name but without the marker is replaced.
    stale = tmp_path / tiny_model_dirname()
    stale.mkdir()
    (stale / "config.json").write_text("{}")
    out = build_tiny_model(tmp_path)
    assert out == stale and is_complete_build(out)
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2_5_vl"


def test_default_cache_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GUIRL_CACHE", str(tmp_path))
    assert tiny_mod.default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("GUIRL_CACHE")
    assert tiny_mod.default_cache_dir() == REPO / ".cache" / "models"
    assert repo_root() == REPO


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (torch.float32, torch.float32),  # a torch dtype
        ("bfloat16", torch.bfloat16),  # a profile YAML string
        ("auto", torch.float32),  # the checkpoint's own dtype (tiny is saved in float32)
    ],
)
def test_load_model_dtype(tiny_path, dtype, expected):
    model = load_model(tiny_path, dtype=dtype)
    assert {p.dtype for p in model.parameters()} == {expected}
    assert not model.training


def test_load_model_bad_dtype(tiny_path):
    with pytest.raises(ValueError, match="float64"):
        load_model(tiny_path, dtype="float64")


@pytest.mark.parametrize(
    "bad",
    [
        {"mrope_section": (4, 6, 4)},  # sums to 14, head_dim/2 is 16
        {"text_hidden_size": 130},  # not divisible by 4 heads
        {"text_kv_heads": 3},  # 4 heads not divisible by 3 kv heads
        {"vision_fullatt_block_indexes": (2,)},  # only blocks 0 and 1 exist
        {"min_pixels": 300 * 28 * 28},  # above max_pixels
        {"window_size": 100},  # not a multiple of 28
    ],
)
def test_tinyspec_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="TinySpec"):
        TinySpec(**bad)


# ---------------------------------------------------------------- tokenizer and chat template


def test_added_tokens_in_published_order(tiny_build):
    tok = tiny_build["processor"].tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t, _ in QWEN2_5_VL_ADDED_TOKENS]
    assert ids == list(range(ids[0], ids[0] + len(QWEN2_5_VL_ADDED_TOKENS)))
    assert ids[-1] == len(tok) - 1  # added tokens come after the whole BPE vocabulary
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    cfg = json.loads((tiny_build["path"] / "config.json").read_text())
    assert cfg["image_token_id"] == tok.convert_tokens_to_ids("<|image_pad|>")
    assert cfg["vision_start_token_id"] == tok.convert_tokens_to_ids("<|vision_start|>")
    assert cfg["text_config"]["vocab_size"] >= len(tok)


@pytest.mark.parametrize(
    "text",
    [
        '<action>{"action": "click", "coordinate": [123, 456]}</action>',  # CCPO-style action
        '{"POINT":[512,300]}',  # AgentCPM-GUI style
        '<tool_call>\n{"name": "mobile_use"}\n</tool_call>',  # Qwen2.5-VL tool call
        'do(action="Tap", element=[10,20,30,40])',  # AndroidLong / AutoGLM style
        "<think>tap Wi-Fi</think><answer>click(1, 2)</answer>",
        "Ünïcödé 日本語 emoji 🙂",  # bytes outside the corpus still round-trip (byte-level BPE)
    ],
)
def test_tokenizer_roundtrip_and_digit_split(tiny_build, text):
    tok = tiny_build["processor"].tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    pieces = [tok.convert_ids_to_tokens(i) for i in ids]
    for piece in pieces:
        digits = re.sub(r"\D", "", piece)
        assert len(digits) <= 1, f"digits must be one per token (Qwen2 regex), got {piece!r}"


def test_tool_call_tags_are_single_tokens(tiny_build):
    tok = tiny_build["processor"].tokenizer
    ids = tok("<tool_call>x</tool_call>", add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<tool_call>")
    assert ids[-1] == tok.convert_tokens_to_ids("</tool_call>")


def test_chat_template_is_official(tiny_build):
    proc = tiny_build["processor"]
    assert proc.chat_template == qwen2_5_vl_chat_template()
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


# ---------------------------------------------------------------- processor + model forward


@pytest.mark.parametrize(
    "size, grid",
    [
        ((504, 280), (1, 20, 36)),  # W x H = 504 x 280: multiples of 28, under max_pixels -> 180 tokens
        ((56, 56), (1, 4, 4)),  # exactly min_pixels -> 4 tokens
        ((30, 30), (1, 4, 4)),  # below min_pixels: upscaled to 56 x 56
        ((2000, 1000), (1, 22, 44)),  # above max_pixels: shrunk to 616 x 308 px = 242 tokens <= 256
    ],
)
def test_image_pad_count_matches_grid(tiny_build, size, grid):
    inputs = _chat_inputs(tiny_build["processor"], size=size)
    image_pad = tiny_build["processor"].tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert tuple(inputs["image_grid_thw"][0].tolist()) == grid
    n_tokens = grid[0] * grid[1] * grid[2] // 4  # merge 2x2 patches per LM token
    assert int((inputs["input_ids"] == image_pad).sum()) == n_tokens
    assert inputs["pixel_values"].shape == (grid[0] * grid[1] * grid[2], 3 * 2 * 14 * 14)
    if "mm_token_type_ids" in inputs:
        assert int((inputs["mm_token_type_ids"] == 1).sum()) == n_tokens


def test_forward_and_generate(tiny_build):
    model, proc = tiny_build["model"], tiny_build["processor"]
    inputs = _chat_inputs(proc)
    assert "mm_token_type_ids" in inputs and "image_grid_thw" in inputs
    with torch.no_grad():
        out = model(**inputs)
    vocab = model.config.text_config.vocab_size
    assert out.logits.shape == (1, inputs["input_ids"].shape[1], vocab)
    assert torch.isfinite(out.logits).all()
    gen = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    new = gen[0, inputs["input_ids"].shape[1] :]
    assert 1 <= new.numel() <= 6 and int(new.max()) < vocab
    assert isinstance(proc.batch_decode(new[None], skip_special_tokens=True)[0], str)


def test_processor_pixel_overrides(tiny_path):
    # A real 3B/7B processor can be capped for CPU; here: at most 64 image tokens.
    proc = load_processor(tiny_path, max_pixels=64 * 28 * 28)
    inputs = _chat_inputs(proc, size=(504, 280))
    assert int(inputs["image_grid_thw"][0].prod()) // 4 <= 64
    with pytest.raises(ValueError, match="min_pixels"):
        load_processor(tiny_path, min_pixels=10**6, max_pixels=10**5)


def test_processor_loads_published_file_layout(tiny_path, tmp_path):
    # Real Qwen2.5-VL folders keep the template in chat_template.json and the resize bounds as
    # min_pixels/max_pixels in preprocessor_config.json; load_processor must read both.
    folder = tmp_path / "published_layout"
    shutil.copytree(tiny_path, folder)
    template = (folder / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").unlink()
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "min_pixels": 3136,
                "max_pixels": 12845056,
                "patch_size": 14,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711],
                "image_processor_type": "Qwen2VLImageProcessor",
                "processor_class": "Qwen2_5_VLProcessor",
            }
        )
    )
    with no_network():
        proc = load_processor(folder)
        capped = load_processor(folder, max_pixels=256 * 28 * 28)
    assert proc.chat_template == template
    phone = (1080, 2400)  # a full-resolution phone screenshot
    assert tuple(_chat_inputs(proc, size=phone)["image_grid_thw"][0].tolist()) == (1, 172, 78)  # uncapped
    assert int(_chat_inputs(capped, size=phone)["image_grid_thw"][0].prod()) // 4 <= 256


# ---------------------------------------------------------------- LoRA


@pytest.mark.parametrize(
    "name, expected",
    [
        ("model.language_model.layers.0.self_attn.q_proj", True),  # LM attention
        ("model.language_model.layers.35.self_attn.o_proj", True),  # any layer index
        ("model.language_model.layers.3.mlp.gate_proj", True),  # LM MLP
        ("model.language_model.layers.3.mlp.down_proj", True),
        ("base_model.model.model.language_model.layers.1.mlp.up_proj", True),  # PEFT-prefixed name
        ("model.visual.blocks.0.mlp.gate_proj", False),  # vision MLP shares the name: excluded
        ("model.visual.blocks.0.attn.qkv", False),  # vision attention
        ("model.visual.merger.mlp.0", False),  # merger
        ("lm_head", False),  # output head
        ("model.language_model.embed_tokens", False),  # embeddings
        ("model.language_model.layers.0.self_attn.q_proj.lora_A", False),  # not a sub-module
        ("model.language_model.layers.0.input_layernorm", False),  # norms
    ],
)
def test_lora_regex_table(name, expected):
    assert is_lm_lora_target(name) is expected
    assert (re.fullmatch(LM_LORA_TARGET_REGEX, name) is not None) is expected


def test_apply_lora_trains_only_lm_adapters(tiny_path):
    base = load_model(tiny_path)
    lm_linear = [n for n, m in base.named_modules() if isinstance(m, torch.nn.Linear) and is_lm_lora_target(n)]
    assert len(lm_linear) == 7 * base.config.text_config.num_hidden_layers
    proc = load_processor(tiny_path)
    inputs = _chat_inputs(proc)
    with torch.no_grad():
        ref = base(**inputs).logits.clone()
    peft_model = apply_lora(base)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert not any(".visual." in n for n in trainable)
    assert len(trainable) == 2 * len(lm_linear)  # lora_A and lora_B per adapted layer
    cfg = peft_model.peft_config["default"]
    assert (cfg.r, cfg.lora_alpha, cfg.lora_dropout) == (8, 16, 0.1)  # CCPO Table 7
    peft_model.eval()
    with torch.no_grad():
        assert torch.equal(peft_model(**inputs).logits, ref)  # B = 0 at init: same function
    summary = model_summary(peft_model)
    assert summary["vision_trainable"] == 0 and summary["trainable"] == summary["lora"] > 0
    peft_model.train()
    peft_model(**inputs, labels=inputs["input_ids"]).loss.backward()
    with_grad = {n for n, p in peft_model.named_parameters() if p.grad is not None}
    assert with_grad and with_grad <= set(trainable)


def test_apply_lora_rejects_vision_or_empty_targets(tiny_path):
    model = load_model(tiny_path)
    with pytest.raises(ValueError, match="vision"):
        apply_lora(model, target_modules=r".*\.(gate_proj|up_proj|down_proj)")
    with pytest.raises(ValueError, match="matches no"):
        apply_lora(model, target_modules=r".*no_such_module")


def test_model_summary_split(tiny_build):
    s = model_summary(tiny_build["model"])
    vision = sum(p.numel() for n, p in tiny_build["model"].named_parameters() if n.startswith("model.visual."))
    assert s["vision_total"] == vision > 0
    assert s["total"] == s["vision_total"] + s["lm_total"] == sum(p.numel() for p in tiny_build["model"].parameters())
    assert s["trainable"] == s["total"] and s["lora"] == 0


# ---------------------------------------------------------------- meta counts of published configs


@pytest.mark.parametrize(
    "name, expected",
    [
        ("qwen2.5-vl-3b", 3.755e9),  # tied embeddings, vocab 151936 (docs/stack.md: 3.755 B)
        ("qwen2.5-vl-7b", 8.292e9),  # untied, vocab 152064 (docs/stack.md: 8.292 B)
    ],
)
def test_meta_parameter_count_published(name, expected):
    folder = REPO / "configs" / "models" / name
    n = meta_parameter_count(folder / "config.json")
    assert abs(n - expected) / expected < 0.005, n
    assert meta_parameter_count(folder) == n  # folder or file


def test_meta_parameter_count_matches_tiny(tiny_build):
    # On the tiny config the meta count equals the real model's count.
    assert meta_parameter_count(tiny_build["path"]) == model_summary(tiny_build["model"])["total"]


# ---------------------------------------------------------------- clear errors


@pytest.mark.parametrize("loader", [load_model, load_processor])
@pytest.mark.parametrize(
    "path, needle",
    [
        ("/nonexistent/qwen-ckpt", "build_tiny_model"),  # missing folder: says how to build tiny
        ("Qwen/Qwen2.5-VL-3B-Instruct", "hub id"),  # hub id: says the hub is unreachable
    ],
)
def test_missing_path_clear_error(loader, path, needle):
    with pytest.raises(CheckpointNotFoundError) as info:
        loader(path)
    msg = str(info.value)
    assert needle in msg and "local" in msg and path in msg


def test_folder_without_config_or_wrong_type(tmp_path):
    tmp_path = tmp_path / "ckpt"
    tmp_path.mkdir()
    with pytest.raises(CheckpointNotFoundError, match="config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="llama"):
        load_processor(tmp_path)
    assert os.listdir(tmp_path) == ["config.json"]
