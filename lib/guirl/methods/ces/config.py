"""The ``ces:`` config section: CES's models, warm-up SFT, staged RL and reward (CES Sec. 5.1,
App. B.1-B.2, Table 4), read by the CES roles (:mod:`guirl.methods.ces.rl`), the loop
(:mod:`guirl.methods.ces.agent`) and notebook 04 (:mod:`guirl.studies.ces_staged_rl`).

Every default is the paper's value, commented with its place; a value the paper does not give
says so (``CES is silent``) or is not a key (the kernel's value applies: the KL coefficient, the
micro-batches). The tiny profile's sizes are :func:`recipe` ``"tiny"``. The stage sections
(:mod:`guirl.configbase`): ``warmup`` (``sft``) with its ``lora``, ``coordinator`` and
``state_tracker`` (``rl``, one column of Table 4 each), ``eval`` (04's test steps and online
sizes); a kernel key set in a later layer than the paper's value wins (``--override
rl.learning_rate=...`` trains both roles at that rate).

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
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from guirl.configbase import (
    LR_SCHEDULERS,
    MAX_BATCH,
    MAX_COEF,
    MAX_COUNT,
    MAX_EPOCHS,
    MAX_LR,
    MAX_RANK,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_TURNS,
    PROFILE,
    Registered,
    RunConfig,
    Section,
)
from guirl.methods.ces.reward import CESConfig

__all__ = [
    "CESCoordinatorRL",
    "CESEval",
    "CESLora",
    "CESRoleRL",
    "CESSection",
    "CESStateTrackerRL",
    "CESWarmup",
    "DERIVED",
    "STAGE_REF",
    "ces_section",
    "is_stage_ref",
    "recipe",
]

_REWARD = CESConfig()  # the reward's defaults (CES Sec. 5.1, eq. 22, 25) are the one source of these values
#: A model source naming another notebook's stage (``01_sft/sft_low``).
STAGE_REF = re.compile(r"^\d\d_[a-z0-9_]+/[A-Za-z0-9_.-]+$")


def is_stage_ref(source: str) -> bool:
    """True when ``source`` names a stage of another notebook (``NN_notebook/stage``)."""
    return STAGE_REF.fullmatch(source) is not None


class CESRoleRL(Section):
    """GRPO of one trained role (CES Table 4, one column per role): stage values of ``rl``
    (Table 4's ``train_batch_size`` is ``prompts_per_step``, ``rollout_n`` ``group_size``,
    ``clip_ratio`` ``eps_low`` / ``eps_high``, ``max_response_length`` ``max_new_tokens``, also the
    role's generation budget in the loop) and ``epochs`` over the task pool, which give
    ``rl.max_steps`` unless ``max_steps`` is set."""

    mirrors: ClassVar[str] = "rl"
    own: ClassVar[tuple[str, ...]] = ("epochs",)
    learning_rate: float = Field(default=1e-6, gt=0, le=MAX_LR)  # CES Table 4: lr (both roles)
    epochs: float = Field(default=10, gt=0, le=MAX_EPOCHS)  # CES Table 4: 10 (Coordinator) / 5 (State Tracker)
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a step budget (null: epochs)
    prompts_per_step: int = Field(default=32, ge=1, le=MAX_BATCH)  # CES Table 4: train_batch_size
    group_size: int = Field(default=4, ge=2, le=MAX_BATCH)  # CES Table 4: rollout_n, candidates per group
    eps_low: float = Field(default=0.2, ge=0, lt=1)  # CES Table 4: clip_ratio
    eps_high: float = Field(default=0.2, ge=0, le=MAX_COEF)  # CES Table 4: clip_ratio
    max_new_tokens: int = Field(default=256, ge=1, le=MAX_TOKENS)  # CES Table 4: max_response_length
    dapo_std_threshold: float | None = Field(default=None, ge=0, le=MAX_COEF)  # CES eqs. 12 / 19: plain GRPO
    # not paper values: CES Table 4 gives no KL coefficient and no mini-batch split (CCPO Table 8's, made CES's own)
    beta: float = Field(default=1e-4, ge=0, le=MAX_COEF)
    mini_batches: int = Field(default=4, ge=1, le=MAX_BATCH)


class CESCoordinatorRL(CESRoleRL):
    """Stage 1: the Coordinator (CES Table 4, Coordinator column)."""

    epochs: float = Field(default=10, gt=0, le=MAX_EPOCHS)  # CES Table 4
    max_new_tokens: int = Field(default=256, ge=1, le=MAX_TOKENS)  # CES Table 4: max_response_length


class CESStateTrackerRL(CESRoleRL):
    """Stage 2: the State Tracker (CES Table 4, State Tracker column)."""

    epochs: float = Field(default=5, gt=0, le=MAX_EPOCHS)  # CES Table 4
    max_new_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS)  # CES Table 4: max_response_length


class CESLora(Section):
    """The warm-up's adapter (CES App. B.2): stage values of ``lora``."""

    mirrors: ClassVar[str] = "lora"
    enabled: bool = True  # CES App. B.2: "We used LoRA for fine-tuning"
    r: int = Field(default=8, ge=1, le=MAX_RANK)  # CES App. B.2: LoRA rank 8
    alpha: float = Field(default=16, gt=0, le=MAX_COEF)  # CES App. B.2: LoRA alpha 16
    dropout: float = Field(default=0.1, ge=0, lt=1)  # not a paper value: CES gives none (CCPO Table 7's 0.1)


class CESWarmup(Section):
    """Warm-up SFT of both roles (CES Sec. 5.1, App. B.1-B.2), as ``records`` stages: stage values
    of ``sft`` (trained by epochs), its ``lora``, and the data: ``samples`` training steps, the
    Coordinator's ``think``."""

    mirrors: ClassVar[str] = "sft"
    own: ClassVar[tuple[str, ...]] = ("lora", "samples", "think")
    epochs: float = Field(default=1, gt=0, le=MAX_EPOCHS)  # CES Sec. 5.1 / App. B.2: one epoch
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # trained by epochs
    learning_rate: float = Field(default=5e-5, gt=0, le=MAX_LR)  # CES Sec. 5.1 / App. B.2
    # not paper values: CES gives no warm-up batch or schedule (CCPO Table 7's AndroidControl values, made CES's own:
    # 1 x 8 x 8 GPUs = 64 a step, constant after a 0.01 warm-up)
    per_device_batch_size: int = Field(default=1, ge=1, le=MAX_BATCH)
    grad_accum: int = Field(default=8, ge=1, le=MAX_BATCH)
    warmup_ratio: float = Field(default=0.01, ge=0, lt=1)
    lr_scheduler_type: Literal[LR_SCHEDULERS] = "constant_with_warmup"  # type: ignore[valid-type]
    lora: CESLora = Field(default_factory=CESLora)
    samples: int = Field(default=1000, ge=1, le=MAX_COUNT)  # CES App. B.1: 1K GUI-Odyssey steps
    think: Literal["description_intention", "intention"] = (
        "description_intention"  # CES App. B.1: description.intention
    )


class CESEval(Section):
    """04's evaluation: the scoring rule and the sizes (stage values of ``eval``). ``protocol``:
    CES's own rule on every data set and experiment (a click is right inside the acted element's
    box, CES Sec. 5.1; ``ces``: the released evaluator as run); an ``--override eval.protocol=...``
    still wins. The sizes: CES is silent on them (its tables score whole test sets and it evaluates
    offline only), so the paper recipe takes the profile's values."""

    mirrors: ClassVar[str] = "eval"
    protocol: Annotated[str, Registered("protocol")] = "ces_paper"  # CES Sec. 5.1 (CES-28/29)
    max_test_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # test steps per split (null: all)
    n_tasks: int = Field(default=100, ge=1, le=MAX_COUNT)  # online long-horizon tasks per run
    max_turns: int = Field(default=100, ge=1, le=MAX_TURNS)  # turn limit of an online episode


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
    weak_executor_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a shorter executor
    warmup: CESWarmup = Field(default_factory=CESWarmup)
    rl_pool: int = Field(default=3000, ge=1, le=MAX_COUNT)  # CES App. B.1: 3K GUI-Odyssey steps for RL
    coordinator: CESCoordinatorRL = Field(default_factory=CESCoordinatorRL)  # stage 1
    state_tracker: CESStateTrackerRL = Field(default_factory=CESStateTrackerRL)  # stage 2
    alpha1: float = Field(default=_REWARD.alpha1, ge=0, le=MAX_COEF)  # CES Sec. 5.1 / App. B.2: 0.1, format weight
    alpha2: float = Field(default=_REWARD.alpha2, ge=0, le=MAX_COEF)  # CES Sec. 5.1 / App. B.2: 0.9, executor reward
    gamma1: float = Field(default=_REWARD.gamma1, ge=0, le=MAX_COEF)  # CES Sec. 5.1 / App. B.2: 0.2, type weight
    gamma2: float = Field(default=_REWARD.gamma2, ge=0, le=MAX_COEF)  # CES Sec. 5.1 / App. B.2: 0.8, parameter weight
    reward_rules: Literal["ces_reward", "ces_reward_code"] = _REWARD.rules  # CES eq. 25 ("_code": released code)
    format_from: Literal["agent", "executor"] = _REWARD.format_from  # CES eq. 22: the trained agent's output
    eval: CESEval = Field(default_factory=CESEval)  # 04's evaluation sizes
    # the MiniGUI task categories of the online long-horizon evaluation (CES evaluates offline only)
    online_categories: list[Literal["long_loop", "cross_app", "compound"]] = Field(
        default_factory=lambda: ["long_loop", "cross_app"], min_length=1
    )
    temporal_gaps: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1
    )  # Fig. 2's x axis (no numbers in the text)
    temporal_pairs: int = Field(default=50, ge=1, le=MAX_COUNT)  # screenshot pairs per gap (Fig. 2; CES is silent)

    @field_validator("temporal_gaps")
    @classmethod
    def _positive_gaps(cls, v: list[int]) -> list[int]:
        if any(g < 1 or g > MAX_STEPS for g in v):
            raise ValueError(f"a step gap is at least 1 and at most {MAX_STEPS}")
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


def ces_section(cfg: RunConfig) -> CESSection:
    """``cfg.ces``; the config's own error saying how to add it when the profile leaves it out
    (``Config.method_section``): CES's stages and loop need its models and sizes."""
    return cfg.method_section("ces")


#: Kernel keys notebook 04 sets per stage (``Method.derived``): an experiment or override of one is refused.
DERIVED: dict[str, str] = {
    "rl.role": "stage 1 trains ces.coordinator, stage 2 ces.state_tracker",
    "rl.reward": "each role trains with CES's execution-feedback reward (the ces section's weights)",
    "rl.histories": "the roles train at the Executor's history setting, the first of eval.histories",
}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """CES's values for a recipe kind. ``paper``: the section's defaults, with 04's evaluation sizes
    the profile's (CES is silent on them). ``tiny``: 04 sized for 2 CPU cores (750 s; README:
    notebook times); not paper values."""
    if kind != "tiny":
        return {"ces.eval.max_test_steps": PROFILE, "ces.eval.n_tasks": PROFILE, "ces.eval.max_turns": PROFILE}
    return {
        "ces.state_tracker_model": "tiny",  # the offline tiny Qwen3 (guirl.models.build_tiny_text_model); CES: Qwen3-4B
        "ces.executor_model": "01_sft/sft_low",  # 01's Low executor (goal + step instruction); CES Sec. 5.1: GUI-R1-7B
        "ces.executor_prompt": "step_instruction",  # the Coordinator's instruction fills the step-instruction slot
        "ces.tracker_input": "instruction_and_output",  # the tiny Executor writes no thought (CES's restates it)
        "ces.table2_executors": [],  # CES Table 2's checkpoints are not here; the second executor is trained in 04:
        "ces.weak_executor_steps": 70,  # 01's Low-executor recipe for 70 of its 280 steps (Table 2's weaker executor)
        "ces.warmup.learning_rate": 2e-3,  # full-parameter SFT of the tiny models (as sft.executor); CES: 5e-5, LoRA
        "ces.warmup.lora.enabled": PROFILE,  # the tiny profile trains every parameter (random-init models)
        **{
            f"ces.warmup.{k}": PROFILE
            for k in ("per_device_batch_size", "grad_accum", "warmup_ratio", "lr_scheduler_type")
        },
        "ces.warmup.lora.dropout": PROFILE,
        **{f"ces.{role}.{k}": PROFILE for role in ("coordinator", "state_tracker") for k in ("beta", "mini_batches")},
        "ces.warmup.samples": 480,  # training steps (60 SFT steps of 8); CES App. B.1: 1K
        "ces.warmup.think": "intention",  # the intention only (half the tokens); CES: description.intention
        "ces.rl_pool": 64,  # RL tasks; CES App. B.1: 3K
        "ces.coordinator.learning_rate": PROFILE,  # the tiny profile's rl.learning_rate (CES Table 4: 1e-6)
        "ces.coordinator.epochs": 0.5,  # stage 1: 0.5 x 64 / 4 = 8 GRPO steps of 4 tasks x 4 instructions
        "ces.coordinator.prompts_per_step": 4,
        "ces.coordinator.max_new_tokens": 40,  # instruction + intention (95th percentile 42 tiny-BPE tokens, tags)
        "ces.state_tracker.learning_rate": PROFILE,
        "ces.state_tracker.epochs": 0.5,  # stage 2: 8 GRPO steps of 4 tasks x 4 states
        "ces.state_tracker.prompts_per_step": 4,
        "ces.state_tracker.max_new_tokens": 48,  # a MiniGUI task state in tags (95th percentile 52 tokens)
        "ces.eval.max_test_steps": 30,  # test steps per split for the 8 evaluated systems
        "ces.eval.n_tasks": 6,  # long-horizon tasks (long_loop, cross_app taking turns), the same in each run
        "ces.eval.max_turns": 16,
        "ces.temporal_pairs": 20,  # screenshot pairs per gap (Figure 2)
    }
