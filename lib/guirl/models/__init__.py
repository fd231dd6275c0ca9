"""Qwen2.5-VL models for guirl (and a text-only Qwen3 for CES's State Tracker): tiny offline builds,
local loading, LoRA and parameter counts.

Typical use (CPU, no network)::

    from guirl.models import build_tiny_model, load_model, load_processor, apply_lora
    path = build_tiny_model()            # <repo>/.cache/models/tiny-qwen2.5-vl-seed0-<hash>
    processor = load_processor(path)     # same call works on a real Qwen2.5-VL-3B/7B folder
    model = apply_lora(load_model(path)) # LoRA r=8, alpha=16, dropout=0.1 on the LM (CCPO Table 7)
"""

from guirl.models.loading import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    ImageOnlyQwen2_5_VLProcessor,
    TextProcessor,
    adapter_base,
    check_weight_files,
    corrupt_weight_files,
    is_text_model,
    load_folder,
    load_model,
    load_policy,
    load_processor,
    load_trained,
    resolve_checkpoint,
    torchvision_available,
)
from guirl.models.lora import (
    CCPO_LORA_ALPHA,
    CCPO_LORA_DROPOUT,
    CCPO_LORA_R,
    LM_LORA_TARGET_REGEX,
    TEXT_LM_LORA_TARGET_REGEX,
    apply_lora,
    is_lm_lora_target,
    lora_config,
    lora_target_regex,
)
from guirl.models.summary import meta_parameter_count, model_summary
from guirl.models.tiny import (
    QWEN2_5_VL_ADDED_TOKENS,
    TinySpec,
    build_tiny_model,
    default_cache_dir,
    is_complete_build,
    qwen2_5_vl_chat_template,
    tiny_model_dirname,
    tiny_model_key,
)
from guirl.models.tiny_text import TinyTextSpec, build_tiny_text_model, tiny_text_model_key

__all__ = [
    "CCPO_LORA_ALPHA",
    "CCPO_LORA_DROPOUT",
    "CCPO_LORA_R",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "check_weight_files",
    "corrupt_weight_files",
    "ImageOnlyQwen2_5_VLProcessor",
    "LM_LORA_TARGET_REGEX",
    "TEXT_LM_LORA_TARGET_REGEX",
    "TextProcessor",
    "TinyTextSpec",
    "adapter_base",
    "build_tiny_text_model",
    "is_text_model",
    "load_folder",
    "lora_target_regex",
    "tiny_text_model_key",
    "QWEN2_5_VL_ADDED_TOKENS",
    "TinySpec",
    "apply_lora",
    "build_tiny_model",
    "default_cache_dir",
    "is_complete_build",
    "is_lm_lora_target",
    "load_model",
    "load_policy",
    "load_processor",
    "load_trained",
    "lora_config",
    "meta_parameter_count",
    "model_summary",
    "qwen2_5_vl_chat_template",
    "resolve_checkpoint",
    "tiny_model_dirname",
    "tiny_model_key",
    "torchvision_available",
]
