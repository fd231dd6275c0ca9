"""The ``rl:`` config section: hyperparameters of the RL engine (:mod:`guirl.train.rl`).

Defaults are the paper profiles' values: CCPO Table 8 (AndroidControl column) where the paper
gives one, otherwise the default of the public code the paper builds on (verl / UI-S1, or TRL
1.16 ``GRPOConfig``), each commented. The tiny profile overrides the sizes for a CPU.

Units: a *step* is one RL step (one generation batch, ``mini_batches`` optimizer updates); a
*group* is the ``group_size`` rollouts of one prompt (task), compared with each other for the
advantage; ``prompts_per_step`` groups make one step's batch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from guirl.configbase import (
    MAX_BATCH,
    MAX_COEF,
    MAX_LR,
    MAX_RUNS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    Registered,
    Section,
)

__all__ = ["RLConfig", "LOSS_AGGS"]
#: :data:`guirl.rl.losses.LOSS_AGG_MODES`, repeated here so the section imports no torch.
LOSS_AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


class RLConfig(Section):
    """RL engine hyperparameters (module doc for units).

    ``role``: the RL role whose hooks the stage builds (``guirl.stages.rl``): ``grpo``
    (single-turn GRPO on recorded steps with the ground-truth history, any reward) or a role of a
    method's ``Method.hooks`` (``semi_online``: the SO-RL baseline; ``ccpo``: CCPO; a method with
    several trained parts names them ``<method>.<part>``). ``reward``: a reward name of
    :func:`guirl.methods.get_reward`; ``null`` is the role's own reward (``Method.reward``; for
    ``grpo`` the CCPO reward). ``histories``: history settings of the prompts (as
    ``sft.histories``). ``advantage``: ``grpo`` (group mean/std) or ``dr_grpo`` (group mean only).
    ``loss_agg``: :data:`guirl.rl.losses.LOSS_AGG_MODES` (``seq-mean-token-sum-norm`` is
    normalised by ``max_new_tokens``, Dr. GRPO). ``dapo_std_threshold``: ``null`` keeps every
    group; a number turns DAPO dynamic sampling on (groups whose reward std is at most the
    threshold are dropped, 0 drops only constant groups, and more prompts are drawn, at most
    ``max_draws`` times per step, until ``prompts_per_step`` groups are kept). ``lora``: ``false``
    trains every parameter (CCPO Table 8 is a full-parameter verl setup and lists no LoRA; the
    reference is a frozen copy of the starting weights); ``true`` trains a fresh LoRA adapter
    (rank, alpha, dropout of the ``lora`` section) at its own ``lora_learning_rate`` (an adapter
    started at zero barely moves at the full-parameter 5e-7), the reference being the adapter
    switched off. The ``lora`` section's ``enabled`` is the SFT stages' setting (CCPO Table 7).
    """

    role: Annotated[str, Registered("rl_role")] = "grpo"
    reward: Annotated[str | None, Registered("reward")] = None  # None: the role's own (grpo: ccpo)
    histories: list[Annotated[str, StringConstraints(pattern=r"^[0-5](A|AO)$")]] = Field(
        default_factory=lambda: ["1AO", "3AO"], min_length=1
    )  # CCPO A.1.3: 1-3AO histories
    max_steps: int = Field(
        default=100, ge=1, le=MAX_STEPS
    )  # not a paper value: 02's runs take ccpo.rl (Table 8's epochs on the paper profiles); other roles set theirs
    prompts_per_step: int = Field(default=32, ge=1, le=MAX_BATCH)  # CCPO Table 8 train_batch_size (AC)
    group_size: int = Field(
        default=8, ge=1, le=MAX_BATCH
    )  # rollouts per prompt (task): CCPO App. A.5 (Table 11 ablates 2-16)
    max_new_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)  # CCPO Table 8 max_response_length
    temperature: float = Field(default=1.0, gt=0, le=MAX_TEMPERATURE)  # verl rollout default
    top_p: float = Field(default=1.0, gt=0, le=1)  # verl rollout default
    learning_rate: float = Field(default=5e-7, gt=0, le=MAX_LR)  # CCPO Table 8 (all parameters)
    lora: bool = False  # CCPO Table 8 lists no LoRA (verl actor: all parameters); true: an option
    lora_learning_rate: float = Field(
        default=1e-5, gt=0, le=MAX_LR
    )  # not a paper value: lr of rl.lora (adapter from zero)
    warmup_steps: int = Field(default=0, ge=0, le=MAX_STEPS)  # verl actor default (no warm-up)
    weight_decay: float = Field(default=0.01, ge=0, le=MAX_COEF)  # verl actor optimiser default
    max_grad_norm: float = Field(default=1.0, gt=0, le=MAX_COEF)  # verl actor grad_clip default
    beta: float = Field(default=1e-4, ge=0, le=MAX_COEF)  # CCPO Table 8 kl_loss_coef (k3 KL in the loss)
    eps_low: float = Field(default=0.2, ge=0, le=MAX_COEF)  # verl clip_ratio_low default
    eps_high: float = Field(default=0.2, ge=0, le=MAX_COEF)  # verl clip_ratio_high default (DAPO uses 0.28)
    advantage: Literal["grpo", "dr_grpo"] = "grpo"
    adv_eps: float = Field(default=1e-6, gt=0, le=1)  # verl GRPO epsilon (TRL uses 1e-4)
    loss_agg: Literal[LOSS_AGGS] = "token-mean"  # type: ignore[valid-type]  # verl default
    dapo_std_threshold: float | None = Field(default=0.2, ge=0, le=MAX_COEF)  # CCPO Table 8 DAPO threshold (AC)
    max_draws: int = Field(
        default=4, ge=1, le=MAX_RUNS
    )  # not from the paper: CCPO is silent on a cap of DAPO re-draws per step
    rollout_batch_size: int = Field(default=8, ge=1, le=MAX_BATCH)  # prompts per generate call (n sequences each)
    mini_batches: int = Field(default=4, ge=1, le=MAX_BATCH)  # CCPO Table 8 fixed_num_mini_batches
    micro_batch_size: int = Field(default=1, ge=1, le=MAX_BATCH)  # CCPO Table 8 ppo_micro_batch_size_per_gpu
    save_steps: int = Field(
        default=50, ge=1, le=MAX_STEPS
    )  # not from the paper: CCPO is silent on checkpoint intervals
    save_total_limit: int = Field(default=2, ge=1, le=MAX_STEPS)  # checkpoints kept on disk

    @model_validator(mode="after")
    def _clip_range(self) -> RLConfig:
        if self.eps_low >= 1:
            raise ValueError(f"eps_low: {self.eps_low} leaves no ratio range -- use a value below 1 (e.g. 0.2)")
        return self
