"""A tiny text-only causal LM of the Qwen3 architecture, built offline with the repository's tokenizer.

CES's State Tracker is a language model that never sees a screen (CES Sec. 4.2.3, eq. 3; the paper
uses Qwen3-4B, Sec. 5.1). On the tiny profile it is this model: ``Qwen3ForCausalLM`` with tiny
sizes (:class:`TinyTextSpec`), random weights from ``torch.manual_seed(seed)``, and the tokenizer
of the tiny Qwen2.5-VL (:func:`guirl.models.tiny.build_tiny_model`: the same byte-level BPE and
added tokens, so both models read the same token ids) with the Qwen2.5 chat template (text
messages render as in Qwen2.5). The folder has the layout of a published Qwen3 checkpoint
(``config.json`` with ``model_type: qwen3``, ``model.safetensors``, ``generation_config.json``,
``tokenizer.json`` / ``tokenizer_config.json``), so :func:`guirl.models.load_model` /
:func:`guirl.models.load_processor` load it and a real ``Qwen/Qwen3-4B`` folder the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from guirl.models.corpus import corpus_sha256, tokenizer_corpus
from guirl.models.tiny import (
    MARKER_NAME,
    QWEN2_5_VL_ADDED_TOKENS,
    _library_versions,
    _train_tokenizer,
    build_once,
    default_cache_dir,
    qwen2_5_vl_chat_template,
)

__all__ = ["TinyTextSpec", "build_tiny_text_model", "tiny_text_model_key"]

#: Bump when the folder layout or the build recipe changes, so old caches are not reused.
TEXT_BUILD_FORMAT_VERSION = 1


@dataclass(frozen=True)
class TinyTextSpec:
    """Sizes of the tiny Qwen3 (frozen: its hash names the cache folder). The tokenizer fields are
    :class:`guirl.models.tiny.TinySpec`'s, so the BPE is the tiny Qwen2.5-VL's own."""

    bpe_vocab_size: int = 2048
    vocab_multiple: int = 64
    corpus_lines: int = 6000
    hidden_size: int = 128
    intermediate_size: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.hidden_size % self.heads:
            raise ValueError(f"TinyTextSpec: hidden_size must be divisible by heads (got {self!r})")
        if self.heads % self.kv_heads:
            raise ValueError(f"TinyTextSpec: heads must be divisible by kv_heads (got {self!r})")
        if self.bpe_vocab_size < 512:
            raise ValueError(f"TinyTextSpec: bpe_vocab_size must be >= 512 (got {self!r})")


def tiny_text_model_key(spec: TinyTextSpec = TinyTextSpec(), seed: int = 0) -> str:
    """Hex SHA-256 of a build: spec, seed, corpus, chat template, recipe and library versions."""
    payload = {
        "format": TEXT_BUILD_FORMAT_VERSION,
        "arch": "qwen3",
        "spec": dataclasses.asdict(spec),
        "seed": seed,
        "corpus": corpus_sha256(tokenizer_corpus(spec.corpus_lines)),
        "chat_template": hashlib.sha256(qwen2_5_vl_chat_template().encode()).hexdigest(),
        "versions": _library_versions(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _dirname(seed: int, key: str) -> str:
    return f"tiny-qwen3-seed{seed}-{key[:12]}"


def _write_build(folder: Path, spec: TinyTextSpec, seed: int, key: str) -> None:
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = _train_tokenizer(spec)  # the tiny Qwen2.5-VL's BPE and added tokens (duck-typed spec)
    tokenizer.save_pretrained(folder)
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok, _ in QWEN2_5_VL_ADDED_TOKENS}
    config = Qwen3Config(
        vocab_size=-(-len(tokenizer) // spec.vocab_multiple) * spec.vocab_multiple,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.hidden_size // spec.heads,
        hidden_act="silu",
        max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=1e-6,
        rope_theta=spec.rope_theta,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        architectures=["Qwen3ForCausalLM"],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        pad_token_id=config.pad_token_id,
        eos_token_id=[config.eos_token_id, config.bos_token_id],
        do_sample=False,
    )
    model.save_pretrained(folder)
    marker = {
        "key": key,
        "seed": seed,
        "arch": "qwen3",
        "spec": dataclasses.asdict(spec),
        "versions": _library_versions(),
        "format": TEXT_BUILD_FORMAT_VERSION,
    }
    (folder / MARKER_NAME).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")


def build_tiny_text_model(
    out_dir: str | os.PathLike[str] | None = None, *, seed: int = 0, spec: TinyTextSpec = TinyTextSpec()
) -> Path:
    """Build (or reuse) the tiny offline Qwen3 and return its checkpoint folder (under
    :func:`guirl.models.default_cache_dir` unless ``out_dir``); same caching, atomic rename and
    determinism as :func:`guirl.models.build_tiny_model`."""
    parent = Path(out_dir) if out_dir is not None else default_cache_dir()
    key = tiny_text_model_key(spec, seed)
    return build_once(parent / _dirname(seed, key), key, lambda tmp: _write_build(tmp, spec, seed, key))
