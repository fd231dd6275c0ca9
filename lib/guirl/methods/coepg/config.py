"""The ``coepg:`` config section: Co-EPG's training and evaluation settings (Co-EPG App. A-C).

Every default is the paper's value, commented with its place; a value the paper does not give
says so (``Co-EPG is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``coepg: {}`` (these defaults); a run changes a value with ``--override coepg.grpo.temperature=1.0``.

The pixel budget of Co-EPG's models is 1024 x 28 x 28 = 802,816 px in training and inference
(App. B, ``max_pixels``): a 1080x2400 AndroidControl screen is 588x1316 px (987 image tokens) for
them, against 1092x2408 (3,354) under the paper profiles' ``model.max_pixels``.
:func:`pixel_budget` is what Co-EPG code passes to every parser and processor (COEPG-21 in
``docs/fidelity/coepg.md``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from guirl.configbase import Section
from guirl.methods.coepg.reward import PAPER_PRIORS, CoEPGConfig

__all__ = ["CoEPGGRPO", "CoEPGSFT", "CoEPGSection", "pixel_budget"]


class CoEPGSFT(Section):
    """SFT of the planner; the grounder uses the same settings (Co-EPG App. B)."""

    batch_size: int = Field(default=96, ge=1)  # Co-EPG App. B: global batch 96
    learning_rate: float = Field(default=1e-6, gt=0)  # Co-EPG App. B
    weight_decay: float = Field(default=0.05, ge=0)  # Co-EPG App. B
    lr_scheduler_type: Literal["cosine"] = "cosine"  # Co-EPG App. B: warm-up, then cosine decay
    warmup_ratio: float | None = Field(default=None, ge=0, lt=1)  # Co-EPG is silent on the warm-up length
    epochs: float = Field(default=3, gt=0)  # Co-EPG App. B
    num_gpus: int = Field(default=8, ge=1)  # Co-EPG App. B
    zero_stage: Literal[2, 3] = 3  # Co-EPG App. B: DeepSpeed ZeRO-3
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2"] = "flash_attention_2"  # Co-EPG App. B


class CoEPGGRPO(Section):
    """GRPO of the planner with the C-DREM reward (Co-EPG App. B; the grounder is never RL-trained)."""

    epochs: float = Field(default=3, gt=0)  # Co-EPG App. B
    num_gpus: int = Field(default=7, ge=1)  # Co-EPG App. B: 7 GPUs, ZeRO-3 offload
    group_size: int = Field(default=7, ge=2)  # Co-EPG App. B: 7 rollouts per group
    temperature: float = Field(default=0.9, gt=0)  # Co-EPG App. B
    learning_rate: float = Field(default=5e-7, gt=0)  # Co-EPG App. B
    batch_size: int = Field(default=294, ge=1)  # Co-EPG App. B (= 42 groups of 7)
    beta: float = Field(default=0.01, ge=0)  # Co-EPG App. B: KL coefficient
    clip: float = Field(default=0.2, ge=0)  # Co-EPG App. B: clip ratio epsilon
    priors: tuple[float, ...] = PAPER_PRIORS  # Co-EPG App. B-C: 72B : 32B : phi_k = 1 : 1 : 2 (Table 5)
    confidence: Literal["logprob", "prob"] = CoEPGConfig().confidence  # Co-EPG eq. 5-6 as printed ("prob": intent)


class CoEPGSection(Section):
    """Co-EPG settings (module doc)."""

    max_pixels: int = Field(default=1024 * 28 * 28, gt=0)  # Co-EPG App. B: at most 1024 x 28 x 28 px
    sft: CoEPGSFT = Field(default_factory=CoEPGSFT)
    grpo: CoEPGGRPO = Field(default_factory=CoEPGGRPO)
    history_mode: Literal["nA"] = "nA"  # Co-EPG Sec. 3, Table 12: previous actions as text, no past screenshots
    androidcontrol_eval_steps: int = Field(default=500, ge=1)  # Co-EPG App. A: 500 random step-actions
    n_runs: int = Field(default=3, ge=1)  # Co-EPG Sec. 5.2: every number is the mean of three runs

    def reward_config(self) -> CoEPGConfig:
        """The C-DREM reward settings of this section (priors and the reading of eq. 5)."""
        return CoEPGConfig(priors=tuple(self.grpo.priors), confidence=self.grpo.confidence)


def pixel_budget(cfg: Any) -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` of Co-EPG's models: the run's ``model.min_pixels`` (Co-EPG is
    silent on a minimum) and ``coepg.max_pixels`` (App. B); a missing section is a ``ConfigError``
    saying how to add it."""
    section = cfg.method_section("coepg")
    return int(cfg.model.min_pixels), int(section.max_pixels)
