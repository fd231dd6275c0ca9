"""The ``ces:`` config section: CES's models, warm-up SFT, staged RL and reward (CES Sec. 5.1,
App. B.1-B.2, Table 4), read by the CES roles (:mod:`guirl.methods.ces.rl`), the loop
(:mod:`guirl.methods.ces.agent`) and notebook 04 (:mod:`guirl.studies.ces_staged_rl`).

Every default is the paper's value, commented with its place; a value the paper does not give
says so (``CES is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``ces: {}`` (these defaults); the tiny profile sets its own sizes (``configs/profiles/tiny.yaml``).

Models. The Coordinator starts from the run's ``model.path`` (paper-7b: Qwen2.5-VL-7B, Sec. 5.1;
tiny: the model 01's agents start from). ``state_tracker_model`` and ``executor_model`` (and the
entries of ``table2_executors``) are local checkpoint folders, ``tiny`` (the State Tracker: the
offline tiny Qwen3, :func:`guirl.models.build_tiny_text_model`), or ``NN_notebook/stage`` (a stage
another notebook trained for this profile, e.g. ``01_sft/sft_low``: 01's Low executor).

Table 4's ``optimizer`` (AdamW: the RL engine's only optimiser) and ``max_prompt_length`` (verl
drops longer prompts; the engine never truncates and no CES prompt comes near 8,192 tokens) are
not keys: nothing would read them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from guirl.configbase import Section
from guirl.methods.ces.reward import CESConfig

__all__ = ["CESRoleRL", "CESSection", "CESWarmup", "ces_section", "is_stage_ref", "STAGE_REF"]

_REWARD = CESConfig()  # the reward's defaults (CES Sec. 5.1, eq. 22, 25) are the one source of these values
#: A model source naming another notebook's stage (``01_sft/sft_low``).
STAGE_REF = re.compile(r"^\d\d_[a-z0-9_]+/[A-Za-z0-9_.-]+$")


def is_stage_ref(source: str) -> bool:
    """True when ``source`` names a stage of another notebook (``NN_notebook/stage``)."""
    return STAGE_REF.fullmatch(source) is not None


class CESRoleRL(Section):
    """GRPO of one trained role (CES Table 4, one column per role). The stage's ``rl`` keys come
    from here: ``learning_rate``, ``train_batch_size`` -> ``rl.prompts_per_step``, ``rollout_n``
    -> ``rl.group_size``, ``clip_ratio`` -> ``rl.eps_low`` / ``eps_high``, ``max_response_length``
    -> ``rl.max_new_tokens`` (also the role's generation budget in the loop), ``beta`` ->
    ``rl.beta`` (``null``: the profile's), and ``epochs`` over the task pool -> ``rl.max_steps``."""

    learning_rate: float = Field(default=1e-6, gt=0)  # CES Table 4: lr (both roles)
    epochs: float = Field(gt=0)  # CES Table 4: 10 (Coordinator) / 5 (State Tracker)
    train_batch_size: int = Field(default=32, ge=1)  # CES Table 4
    clip_ratio: float = Field(default=0.2, ge=0, lt=1)  # CES Table 4
    rollout_n: int = Field(default=4, ge=2)  # CES Table 4: candidates per group
    max_response_length: int = Field(ge=1)  # CES Table 4: 256 (Coordinator) / 512 (State Tracker)
    beta: float | None = Field(default=None, ge=0)  # CES is silent on the KL coefficient of eq. 4


def _coordinator() -> CESRoleRL:
    return CESRoleRL(epochs=10, max_response_length=256)  # CES Table 4, Coordinator column


def _state_tracker() -> CESRoleRL:
    return CESRoleRL(epochs=5, max_response_length=512)  # CES Table 4, State Tracker column


class CESWarmup(Section):
    """Warm-up SFT of both roles (CES Sec. 5.1, App. B.1-B.2), as ``records`` stages: ``epochs``
    and ``learning_rate`` become ``sft.epochs`` / ``sft.learning_rate`` (``sft.max_steps`` cleared),
    ``lora_r`` / ``lora_alpha`` ``lora.r`` / ``lora.alpha`` (LoRA where the profile enables it)."""

    epochs: float = Field(default=1, gt=0)  # CES Sec. 5.1 / App. B.2: one epoch
    learning_rate: float = Field(default=5e-5, gt=0)  # CES Sec. 5.1 / App. B.2
    lora_r: int = Field(default=8, ge=1)  # CES App. B.2: LoRA rank 8
    lora_alpha: float = Field(default=16, gt=0)  # CES App. B.2: LoRA alpha 16
    samples: int = Field(default=1000, ge=1)  # CES App. B.1: 1K GUI-Odyssey steps
    think: Literal["description_intention", "intention"] = (
        "description_intention"  # CES App. B.1: description.intention
    )


class CESSection(Section):
    """CES settings (module doc)."""

    state_tracker_model: str = Field(default="checkpoints/Qwen3-4B", min_length=1)  # CES Sec. 5.1: Qwen3-4B
    executor_model: str = Field(default="checkpoints/GUI-R1-7B", min_length=1)  # CES Sec. 5.1: GUI-R1-7B
    # CES App. C: the Executor's prompt ("step_instruction": a repository model's goal + step-instruction prompt)
    executor_prompt: Literal["ces_executor", "step_instruction"] = "ces_executor"
    # CES eq. 3: the State Tracker reads the Executor's output u^t ("instruction_and_output": l^t as well)
    tracker_input: Literal["executor_output", "instruction_and_output"] = "executor_output"
    table2_executors: list[str] = Field(  # CES Table 2: the other Executors CES is plugged into
        default_factory=lambda: ["checkpoints/UI-R1-3B", "checkpoints/GUI-Owl-7B", "checkpoints/GUI-Owl-32B"]
    )
    weak_executor_steps: int | None = Field(default=None, ge=1)  # not a paper value: a shorter-trained Low executor
    warmup: CESWarmup = Field(default_factory=CESWarmup)
    rl_pool: int = Field(default=3000, ge=1)  # CES App. B.1: 3K GUI-Odyssey steps for RL
    coordinator: CESRoleRL = Field(default_factory=_coordinator)  # stage 1
    state_tracker: CESRoleRL = Field(default_factory=_state_tracker)  # stage 2
    alpha1: float = Field(default=_REWARD.alpha1, ge=0)  # CES Sec. 5.1 / App. B.2: 0.1, format weight (eq. 21)
    alpha2: float = Field(default=_REWARD.alpha2, ge=0)  # CES Sec. 5.1 / App. B.2: 0.9, executor-reward weight
    gamma1: float = Field(default=_REWARD.gamma1, ge=0)  # CES Sec. 5.1 / App. B.2: 0.2, type weight (eq. 23)
    gamma2: float = Field(default=_REWARD.gamma2, ge=0)  # CES Sec. 5.1 / App. B.2: 0.8, parameter weight
    reward_rules: Literal["ces_reward", "ces_reward_code"] = _REWARD.rules  # CES eq. 25 ("_code": released code)
    format_from: Literal["agent", "executor"] = _REWARD.format_from  # CES eq. 22: the trained agent's output
    # Notebook 04's evaluation sizes (not paper values; null: the eval section's):
    eval_steps: int | None = Field(default=None, ge=1)  # test steps per split (null: eval.study_max_test_steps)
    # the MiniGUI task categories of the online long-horizon evaluation (CES evaluates offline only)
    online_categories: list[Literal["long_loop", "cross_app", "compound"]] = Field(
        default_factory=lambda: ["long_loop", "cross_app"], min_length=1
    )
    online_tasks: int | None = Field(default=None, ge=1)  # online tasks per run (null: eval.n_tasks)
    online_max_turns: int | None = Field(default=None, ge=1)  # turn limit (null: eval.max_turns)
    temporal_gaps: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1
    )  # Fig. 2's x axis (no numbers in the text)
    temporal_pairs: int = Field(default=50, ge=1)  # screenshot pairs per gap (Fig. 2; CES is silent)

    @field_validator("temporal_gaps")
    @classmethod
    def _positive_gaps(cls, v: list[int]) -> list[int]:
        if any(g < 1 for g in v):
            raise ValueError("a step gap is at least 1")
        return v

    @field_validator("table2_executors")
    @classmethod
    def _non_empty_sources(cls, v: list[str]) -> list[str]:
        if any(not s.strip() for s in v):
            raise ValueError("an executor source is empty -- give a folder or NN_notebook/stage")
        return v

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


def ces_section(cfg) -> CESSection:
    """``cfg.ces``; the config's own error saying how to add it when the profile leaves it out
    (``Config.method_section``): CES's stages and loop need its models and sizes."""
    return cfg.method_section("ces")
