"""The ``agentcpm:`` config section: AgentCPM-GUI's SFT (Table 4), RFT (Table 5), baseline inference
(Table 7) and evaluation mapping settings.

Every default is the paper's value, commented with its table; a value the paper does not give
says so (``AgentCPM-GUI is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``agentcpm: {}`` (these defaults). The backbone is MiniCPM-V (Sec. 2.1); this project runs the
recipe on Qwen2.5-VL (ACPM-19 in ``docs/fidelity/agentcpm.md``), so ``max_line_res`` (a longest
image side, ACPM-24) is recorded here but the Qwen2.5-VL processor resizes by pixel count
(``model.max_pixels``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from guirl.configbase import Section
from guirl.methods.agentcpm.mapping import VARIANTS
from guirl.methods.agentcpm.reward import AgentCPMConfig

__all__ = ["AgentCPMInference", "AgentCPMRFT", "AgentCPMSFT", "AgentCPMSection"]


class AgentCPMSFT(Section):
    """Stage II supervised fine-tuning (AgentCPM-GUI Table 4)."""

    model_max_length: int = Field(default=2304, ge=1)  # AgentCPM-GUI Table 4
    max_line_res: int = Field(default=1120, ge=28)  # AgentCPM-GUI Table 4: longest image side (px)
    per_device_batch_size: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 4
    grad_accum: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 4
    epochs: float = Field(default=3, gt=0)  # AgentCPM-GUI Table 4
    learning_rate: float = Field(default=1e-5, gt=0)  # AgentCPM-GUI Table 4
    weight_decay: float = Field(default=0.1, ge=0)  # AgentCPM-GUI Table 4
    adam_beta1: float = Field(default=0.9, gt=0, lt=1)  # AgentCPM-GUI Table 4
    adam_beta2: float = Field(default=0.999, gt=0, lt=1)  # AgentCPM-GUI Table 4
    max_grad_norm: float | None = Field(default=None, gt=0)  # AgentCPM-GUI Table 4: N/A, clipping disabled
    lr_scheduler_type: Literal["cosine"] = "cosine"  # AgentCPM-GUI Table 4
    warmup_ratio: float = Field(default=0.05, ge=0, lt=1)  # AgentCPM-GUI Table 4: linear warm-up
    bf16: bool = True  # AgentCPM-GUI Table 4
    gradient_checkpointing: bool = False  # AgentCPM-GUI Table 4
    zero_stage: Literal[2, 3] = 2  # AgentCPM-GUI Table 4: DeepSpeed ZeRO-2
    history_turns: int = Field(default=3, ge=0)  # AgentCPM-GUI Sec. 2.4: multi-turn samples keep the last 3 turns


class AgentCPMRFT(Section):
    """Stage III reinforcement fine-tuning, GRPO (AgentCPM-GUI Table 5)."""

    max_prompt_length: int = Field(default=16384, ge=1)  # AgentCPM-GUI Table 5
    max_completion_length: int = Field(default=512, ge=1)  # AgentCPM-GUI Table 5
    max_line_res: int = Field(default=1120, ge=28)  # AgentCPM-GUI Table 5: longest image side (px)
    num_generations: int = Field(default=8, ge=2)  # AgentCPM-GUI Table 5
    per_device_batch_size: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 5
    grad_accum: int = Field(default=32, ge=1)  # AgentCPM-GUI Table 5
    learning_rate: float = Field(default=1e-6, gt=0)  # AgentCPM-GUI Table 5
    epochs: float = Field(default=3, gt=0)  # AgentCPM-GUI Table 5
    weight_decay: float = Field(default=0.1, ge=0)  # AgentCPM-GUI Table 5
    adam_beta2: float = Field(default=0.99, gt=0, lt=1)  # AgentCPM-GUI Table 5
    max_grad_norm: float = Field(default=1.0, gt=0)  # AgentCPM-GUI Table 5
    lr_scheduler_type: Literal["cosine"] = "cosine"  # AgentCPM-GUI Table 5
    beta: float = Field(default=0.04, ge=0)  # AgentCPM-GUI Table 5: KL coefficient
    bf16: bool = True  # AgentCPM-GUI Table 5
    reward_rules: Literal["agentcpm_reward", "agentcpm_reward_code"] = AgentCPMConfig().rules  # Sec. 2.5.1


class AgentCPMInference(Section):
    """Inference of the Qwen2.5-VL baselines (AgentCPM-GUI Table 7, B.1.3). ``top_k`` 1 makes the
    sampling greedy, so greedy decoding (``HFPolicy`` default) reproduces it."""

    do_sample: bool = True  # AgentCPM-GUI Table 7
    top_p: float = Field(default=0.01, gt=0, le=1)  # AgentCPM-GUI Table 7
    top_k: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 7
    temperature: float = Field(default=0.01, gt=0)  # AgentCPM-GUI Table 7
    repetition_penalty: float = Field(default=1.0, gt=0)  # AgentCPM-GUI Table 7
    max_new_tokens: int = Field(default=2048, ge=1)  # AgentCPM-GUI Table 7 (ACPM-28)


class AgentCPMSection(Section):
    """AgentCPM-GUI settings (module doc)."""

    sft: AgentCPMSFT = Field(default_factory=AgentCPMSFT)
    rft: AgentCPMRFT = Field(default_factory=AgentCPMRFT)
    baseline_inference: AgentCPMInference = Field(default_factory=AgentCPMInference)
    mapping_variant: Literal[VARIANTS] = "paper"  # type: ignore[valid-type]  # App. B tables ("released": code)

    def reward_config(self) -> AgentCPMConfig:
        """The RFT reward settings of this section."""
        return AgentCPMConfig(rules=self.rft.reward_rules)
