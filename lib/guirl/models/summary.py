"""Parameter counts: of a config on the meta device (no memory), and of a live model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn


def _is_vision(name: str) -> bool:
    return ".visual." in f".{name}"


def meta_parameter_count(config_path: str | os.PathLike[str]) -> int:
    """Number of parameters of the model a ``config.json`` describes, built on the meta device.

    ``config_path`` is a ``config.json`` file or a folder holding one. Tied input/output
    embeddings (``tie_word_embeddings``) count once. No weights are allocated, so the published
    Qwen2.5-VL-3B / 7B configs (``configs/models/qwen2.5-vl-{3b,7b}/config.json``) count in about
    a second: 3.755e9 and 8.292e9.
    """
    from transformers import AutoConfig, AutoModelForImageTextToText

    p = Path(config_path)
    cfg_file = p / "config.json" if p.is_dir() else p
    if not cfg_file.is_file():
        raise FileNotFoundError(
            f"meta_parameter_count: no config file at '{cfg_file}'. Pass a config.json "
            "path or a folder holding one (e.g. configs/models/qwen2.5-vl-3b)."
        )
    try:
        data = json.loads(cfg_file.read_text())
        model_type = data.pop("model_type")
    except (ValueError, KeyError) as err:
        raise ValueError(f"meta_parameter_count: '{cfg_file}' is not a config.json with 'model_type' ({err})") from err
    config = AutoConfig.for_model(model_type, **data)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    return sum(param.numel() for param in model.parameters())


def model_summary(model: nn.Module) -> dict[str, float | int]:
    """Parameter counts of ``model`` (a Qwen2.5-VL, plain or PEFT-wrapped); shared tensors count once.

    Returns a dict with ``total``, ``trainable``, ``trainable_fraction`` (trainable / total),
    ``vision_total`` / ``vision_trainable`` (``visual`` tower incl. merger),
    ``lm_total`` / ``lm_trainable`` (everything else: embeddings, decoder, ``lm_head``, LoRA
    adapters of the decoder) and ``lora`` (parameters whose name contains ``lora_``).
    """
    out = {
        "total": 0,
        "trainable": 0,
        "vision_total": 0,
        "vision_trainable": 0,
        "lm_total": 0,
        "lm_trainable": 0,
        "lora": 0,
    }
    seen: set[int] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            continue
        seen.add(id(param))
        n = param.numel()
        part = "vision" if _is_vision(name) else "lm"
        out["total"] += n
        out[f"{part}_total"] += n
        if "lora_" in name:
            out["lora"] += n
        if param.requires_grad:
            out["trainable"] += n
            out[f"{part}_trainable"] += n
    result: dict[str, float | int] = dict(out)
    result["trainable_fraction"] = out["trainable"] / out["total"] if out["total"] else 0.0
    return result
