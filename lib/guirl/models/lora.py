"""LoRA on the Qwen2.5-VL language model only (vision tower and merger frozen), or on a text-only
causal LM's decoder layers (CES's State Tracker), via PEFT."""

from __future__ import annotations

import re

from torch import nn

# Module names (transformers 5.x, published checkpoint layout):
#   model.language_model.layers.<i>.self_attn.{q,k,v,o}_proj
#   model.language_model.layers.<i>.mlp.{gate,up,down}_proj
# The vision blocks (model.visual.blocks.<i>.mlp.{gate,up,down}_proj) share the MLP names, so a
# plain list of names would also adapt the vision tower; this regex is anchored on
# ``language_model.layers``. PEFT full-matches a string ``target_modules`` against module names.
LM_LORA_TARGET_REGEX = (
    r"^(?:.*\.)?language_model\.layers\.\d+\."
    r"(?:self_attn\.(?:q_proj|k_proj|v_proj|o_proj)|mlp\.(?:gate_proj|up_proj|down_proj))$"
)

# A text-only causal LM (Qwen3ForCausalLM: model.layers.<i>.self_attn / .mlp) has no vision tower;
# its decoder layers sit under ``model.layers``. The preceding dot (or the start) keeps the pattern
# off the VL model's ``language_model.layers`` (an underscore precedes ``model`` there).
TEXT_LM_LORA_TARGET_REGEX = (
    r"^(?:.*\.)?model\.layers\.\d+\."
    r"(?:self_attn\.(?:q_proj|k_proj|v_proj|o_proj)|mlp\.(?:gate_proj|up_proj|down_proj))$"
)

# CCPO, Table 7 (training hyperparameters): LoRA rank 8, alpha 16, dropout 0.1.
CCPO_LORA_R = 8
CCPO_LORA_ALPHA = 16
CCPO_LORA_DROPOUT = 0.1


def is_lm_lora_target(module_name: str, pattern: str = LM_LORA_TARGET_REGEX) -> bool:
    """True when PEFT would put a LoRA adapter on ``module_name`` for ``pattern`` (full match)."""
    return re.fullmatch(pattern, module_name) is not None


def lora_target_regex(model: nn.Module) -> str:
    """The LoRA target pattern of ``model``: :data:`LM_LORA_TARGET_REGEX` for a vision-language
    model (its config has a ``vision_config``), :data:`TEXT_LM_LORA_TARGET_REGEX` for a text-only one."""
    cfg = getattr(model, "config", None)
    return LM_LORA_TARGET_REGEX if getattr(cfg, "vision_config", None) is not None else TEXT_LM_LORA_TARGET_REGEX


def lora_config(
    r: int = CCPO_LORA_R,
    alpha: int = CCPO_LORA_ALPHA,
    dropout: float = CCPO_LORA_DROPOUT,
    target_modules: str = LM_LORA_TARGET_REGEX,
):
    """The ``peft.LoraConfig`` used by :func:`apply_lora` (also usable as TRL's ``peft_config``)."""
    from peft import LoraConfig

    return LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none", task_type="CAUSAL_LM"
    )


def apply_lora(
    model: nn.Module,
    r: int = CCPO_LORA_R,
    alpha: int = CCPO_LORA_ALPHA,
    dropout: float = CCPO_LORA_DROPOUT,
    target_modules: str | None = None,
):
    """Wrap ``model`` with LoRA adapters on the language-model linear layers (PEFT).

    ``target_modules``: a PEFT pattern (``None``: :func:`lora_target_regex` of ``model``).
    Defaults follow CCPO Table 7 (rank 8, alpha 16, dropout 0.1); the adapter update is
    ``W x + (alpha / r) * B A x`` with ``A: r x d_in``, ``B: d_out x r`` (B zero-initialised,
    so the wrapped model initially computes exactly what ``model`` did).

    Returns:
        ``peft.PeftModel`` in which only ``lora_A`` / ``lora_B`` parameters require grad;
        the vision tower (``model.visual``, merger included), embeddings, norms and
        ``lm_head`` are frozen.

    Raises:
        ValueError: the pattern matches no module, or matches one inside the vision tower.
    """
    from peft import get_peft_model

    if target_modules is None:
        target_modules = lora_target_regex(model)
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    hits = [n for n in names if is_lm_lora_target(n, target_modules)]
    if not hits:
        raise ValueError(
            f"apply_lora: target_modules {target_modules!r} matches no Linear module of "
            f"{type(model).__name__} (first names: {names[:5]})"
        )
    vision_hits = [n for n in hits if ".visual." in f".{n}"]
    if vision_hits:
        raise ValueError(
            f"apply_lora: target_modules {target_modules!r} matches vision modules "
            f"{vision_hits[:3]}; the vision tower must stay frozen"
        )
    peft_model = get_peft_model(model, lora_config(r, alpha, dropout, target_modules))
    for name, param in peft_model.named_parameters():
        if param.requires_grad and "lora_" not in name:
            param.requires_grad_(False)
    return peft_model
