"""The ``ces:`` config section: CES's models, warm-up SFT, staged RL and reward (CES Sec. 5.1,
App. B.1-B.2, Table 4).

Every default is the paper's value, commented with its place; a value the paper does not give
says so (``CES is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``ces: {}`` (these defaults).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from guirl.configbase import Section
from guirl.methods.ces.reward import CESConfig

__all__ = ["CESRoleRL", "CESSection", "CESWarmup"]

_REWARD = CESConfig()  # the reward's defaults (CES Sec. 5.1, eq. 22, 25) are the one source of these values


class CESRoleRL(Section):
    """GRPO of one trained role (CES Table 4, one column per role)."""

    learning_rate: float = Field(default=1e-6, gt=0)  # CES Table 4: lr (both roles)
    epochs: float = Field(gt=0)  # CES Table 4: 10 (Coordinator) / 5 (State Tracker)
    optimizer: Literal["adamw"] = "adamw"  # CES Table 4
    train_batch_size: int = Field(default=32, ge=1)  # CES Table 4
    clip_ratio: float = Field(default=0.2, ge=0)  # CES Table 4
    rollout_n: int = Field(default=4, ge=2)  # CES Table 4: candidates per group
    max_prompt_length: int = Field(default=8192, ge=1)  # CES Table 4
    max_response_length: int = Field(ge=1)  # CES Table 4: 256 (Coordinator) / 512 (State Tracker)
    beta: float | None = Field(default=None, ge=0)  # CES is silent on the KL coefficient of eq. 4


def _coordinator() -> CESRoleRL:
    return CESRoleRL(epochs=10, max_response_length=256)  # CES Table 4, Coordinator column


def _state_tracker() -> CESRoleRL:
    return CESRoleRL(epochs=5, max_response_length=512)  # CES Table 4, State Tracker column


class CESWarmup(Section):
    """Warm-up SFT of both roles (CES Sec. 5.1, App. B.1-B.2)."""

    epochs: float = Field(default=1, gt=0)  # CES Sec. 5.1 / App. B.2: one epoch
    learning_rate: float = Field(default=5e-5, gt=0)  # CES Sec. 5.1 / App. B.2
    lora_r: int = Field(default=8, ge=1)  # CES App. B.2: LoRA rank 8
    lora_alpha: float = Field(default=16, gt=0)  # CES App. B.2: LoRA alpha 16
    samples: int = Field(default=1000, ge=1)  # CES App. B.1: 1K GUI-Odyssey steps
    rl_pool: int = Field(default=3000, ge=1)  # CES App. B.1: 3K GUI-Odyssey steps for RL


class CESSection(Section):
    """CES settings (module doc)."""

    coordinator_model: str = "Qwen2.5-VL-7B"  # CES Sec. 5.1
    state_tracker_model: str = "Qwen3-4B"  # CES Sec. 5.1 (text only)
    executor_model: str = "GUI-R1-7B"  # CES Sec. 5.1: the frozen Executor during training
    warmup: CESWarmup = Field(default_factory=CESWarmup)
    coordinator: CESRoleRL = Field(default_factory=_coordinator)  # stage 1
    state_tracker: CESRoleRL = Field(default_factory=_state_tracker)  # stage 2
    alpha1: float = Field(default=_REWARD.alpha1, ge=0)  # CES Sec. 5.1 / App. B.2: 0.1, format weight (eq. 21)
    alpha2: float = Field(default=_REWARD.alpha2, ge=0)  # CES Sec. 5.1 / App. B.2: 0.9, executor-reward weight
    gamma1: float = Field(default=_REWARD.gamma1, ge=0)  # CES Sec. 5.1 / App. B.2: 0.2, type weight (eq. 23)
    gamma2: float = Field(default=_REWARD.gamma2, ge=0)  # CES Sec. 5.1 / App. B.2: 0.8, parameter weight
    reward_rules: Literal["ces_reward", "ces_reward_code"] = _REWARD.rules  # CES eq. 25 ("_code": released code)
    format_from: Literal["agent", "executor"] = _REWARD.format_from  # CES eq. 22: the trained agent's output
    high_level_only: bool = True  # CES Sec. 5.1: only the data sets' high-level instructions

    def reward_config(self) -> CESConfig:
        """The reward settings of this section (:class:`~guirl.methods.ces.reward.CESConfig`)."""
        return CESConfig(
            alpha1=self.alpha1,
            alpha2=self.alpha2,
            gamma1=self.gamma1,
            gamma2=self.gamma2,
            rules=self.reward_rules,
            format_from=self.format_from,
        )
