"""The text-only Qwen3 (guirl.models.tiny_text; CES's State Tracker): the offline build, loading it
with the repository's loaders (TextProcessor), LoRA on its decoder layers, generation and
completion log-probabilities through the same policy / RL classes as the VLM, and a text-only
``records`` SFT stage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from guirl.models import (
    LM_LORA_TARGET_REGEX,
    TEXT_LM_LORA_TARGET_REGEX,
    TextProcessor,
    TinyTextSpec,
    adapter_base,
    apply_lora,
    build_tiny_model,
    build_tiny_text_model,
    is_text_model,
    load_folder,
    load_model,
    load_processor,
    lora_target_regex,
)

PROMPTS = [
    ([{"role": "user", "content": [{"type": "text", "text": f"state {i}: "}, {"type": "text", "text": "go"}]}], [])
    for i in range(3)
]


@pytest.fixture(scope="module")
def text_path(tmp_path_factory) -> Path:
    return build_tiny_text_model(tmp_path_factory.mktemp("text"))


def test_build_is_offline_deterministic_and_a_qwen3_checkpoint(text_path, tmp_path):
    import json

    cfg = json.loads((text_path / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["architectures"] == ["Qwen3ForCausalLM"]
    assert is_text_model(text_path) and not is_text_model(build_tiny_model())
    again = build_tiny_text_model(tmp_path)
    assert again.name == text_path.name  # the same spec and seed name the same folder
    assert (again / "model.safetensors").read_bytes() == (text_path / "model.safetensors").read_bytes()
    assert build_tiny_text_model(tmp_path, seed=1).name != again.name
    with pytest.raises(ValueError, match="divisible"):
        TinyTextSpec(hidden_size=130)


def test_it_shares_the_tiny_vlms_tokenizer(text_path):
    vl = load_processor(build_tiny_model()).tokenizer
    text = load_processor(text_path)
    assert isinstance(text, TextProcessor)
    s = "<think></think><answer>2/3 subgoals done. Previous: Tap 'Add'.</answer><|im_end|>"
    assert text.tokenizer(s)["input_ids"] == vl(s)["input_ids"]


def test_text_processor_flattens_content_and_refuses_images(text_path):
    proc = load_processor(text_path, min_pixels=1, max_pixels=2)  # pixel bounds do not apply
    a = proc.apply_chat_template(PROMPTS[0][0], add_generation_prompt=True, tokenize=False)
    b = proc.apply_chat_template(
        [{"role": "user", "content": "state 0: go"}], add_generation_prompt=True, tokenize=False
    )
    assert a == b and "state 0: go" in a
    assert proc(text=["x", "yy"], images=[[], []], padding=True, return_tensors="pt")["input_ids"].shape[0] == 2
    with pytest.raises(ValueError, match="takes no images"):
        proc(text=["x"], images=[["img.png"]])
    with pytest.raises(ValueError, match="'image' part"):
        proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}]}], tokenize=False)


def test_generation_and_logprobs_through_the_policy_classes(text_path):
    from guirl.rl.logprobs import completion_logprobs, encode_samples
    from guirl.rollout import HFPolicy

    model, proc = load_model(text_path), load_processor(text_path)
    pol = HFPolicy(model, proc, max_new_tokens=6, batch_size=2)
    outs = pol.complete(PROMPTS, n=2, do_sample=True, seed=3)
    assert [len(o) for o in outs] == [2, 2, 2] and all(1 <= len(c.token_ids) <= 6 for o in outs for c in o)
    assert outs == pol.complete(PROMPTS, n=2, do_sample=True, seed=3)  # seeded
    batch = encode_samples(proc, PROMPTS[:2], [outs[0][0].token_ids, outs[1][1].token_ids])
    lp, ent = completion_logprobs(model, batch, with_entropy=True)
    assert lp.shape == batch["completion_ids"].shape and torch.all(lp <= 0) and "pixel_values" not in batch


def test_lora_targets_the_decoder_layers_of_either_model(text_path):
    names = [
        ("model.layers.0.self_attn.q_proj", True),
        ("base_model.model.model.layers.3.mlp.down_proj", True),
        ("model.language_model.layers.0.self_attn.q_proj", False),  # the VLM's LM: its own pattern
        ("model.layers.0.input_layernorm", False),
        ("lm_head", False),
    ]
    for name, hit in names:
        assert (re.fullmatch(TEXT_LM_LORA_TARGET_REGEX, name) is not None) is hit, name
    text = load_model(text_path)
    assert lora_target_regex(text) == TEXT_LM_LORA_TARGET_REGEX
    assert lora_target_regex(load_model(build_tiny_model())) == LM_LORA_TARGET_REGEX
    peft = apply_lora(text)
    trainable = [n for n, p in peft.named_parameters() if p.requires_grad]
    assert len(trainable) == 2 * 7 * text.config.num_hidden_layers and all("lora_" in n for n in trainable)


def test_load_folder_merges_an_adapter(text_path, tmp_path):
    peft = apply_lora(load_model(text_path))
    for n, p in peft.named_parameters():
        if "lora_B" in n:
            torch.nn.init.constant_(p, 0.01)
    peft.save_pretrained(str(tmp_path / "adapter"))
    assert adapter_base(tmp_path / "adapter") == text_path and adapter_base(text_path) is None
    merged, proc = load_folder(tmp_path / "adapter", min_pixels=1, max_pixels=2)
    base, _ = load_folder(text_path, min_pixels=1, max_pixels=2)
    enc = proc(text=["hello"], return_tensors="pt")
    with torch.no_grad():
        assert not torch.allclose(merged(**enc).logits, base(**enc).logits)  # the adapter changed the function
    assert type(merged).__name__ == "Qwen3ForCausalLM"


@pytest.mark.slow
def test_a_records_stage_trains_the_text_model(text_path, tmp_path):
    """A ``records`` SFT stage on text-only records (no image anywhere) trains the Qwen3 through
    TRL's text path, loss on the completion only."""
    from guirl.config import load_config
    from guirl.train.data import write_records
    from guirl.train.sft import train

    recs = [
        {
            "prompt": [{"role": "user", "content": f"state {i}"}],
            "completion": [{"role": "assistant", "content": "<think></think><answer>next</answer>"}],
            "images": [],
        }
        for i in range(8)
    ]
    path = write_records(tmp_path / "r.jsonl", recs)
    cfg = load_config("tiny", overrides=["sft.max_steps=2", "sft.per_device_batch_size=4", "sft.save_steps=1"])
    out = train(cfg, "records", tmp_path, text_path, tmp_path / "out", {"records": path})
    assert out["global_step"] == 2 and out["n_records"] == 8 and not out["adapter"]
    trained = load_model(out["final"])
    before = load_model(text_path)
    assert any(not torch.equal(a, b) for a, b in zip(trained.state_dict().values(), before.state_dict().values()))
    assert isinstance(load_processor(out["final"]), TextProcessor)
