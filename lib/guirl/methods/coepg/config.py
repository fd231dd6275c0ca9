"""The ``coepg:`` config section: Co-EPG's training and evaluation settings (Co-EPG Sec. 4-5, App. A-C).

Every default is the paper's value, commented with its place; a value the paper does not give
says so (``Co-EPG is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``coepg: {}`` (these defaults); the tiny profile's values are notebook 03's experiment
(``configs/experiments/03_coepg_iterations.yaml``); a run changes a value with
``--override coepg.grpo.temperature=1.0``.

Where each key goes (:func:`sft_stage_config`, :func:`grpo_stage_config`, the study
``guirl.studies.coepg_iterations``):

* ``sft`` -> the ``sft`` keys of every Co-EPG SFT stage (planner, grounder, pool models, the
  end-to-end baseline): learning rate, epochs (or ``max_steps``), scheduler, warm-up, and the
  global batch as ``sft.grad_accum = batch_size / (sft.per_device_batch_size x
  runtime.num_processes)``;
* ``grpo`` -> the ``rl`` keys of the planner's GRPO stage (role ``coepg.planner``) and the C-DREM
  reward (:meth:`CoEPGSection.reward_config`);
* ``max_pixels`` -> ``model.max_pixels`` of every Co-EPG stage and model (:func:`pixel_budget`);
* the prompts, histories and generation budgets -> :mod:`guirl.methods.coepg.prompts` and
  :mod:`guirl.methods.coepg.agent`; the pools and the data enhancement ->
  :mod:`guirl.methods.coepg.data`.

The pixel budget of Co-EPG's models is 1024 x 28 x 28 = 802,816 px in training and inference
(App. B, ``max_pixels``): a 1080x2400 AndroidControl screen is 588x1316 px (987 image tokens) for
them, against 1092x2408 (3,354) under the paper profiles' ``model.max_pixels``.

What App. B states and no key holds: the GPUs (8 for SFT, 7 for GRPO), DeepSpeed ZeRO-3 and
FlashAttention-2 are the ``runtime`` section's and ``model.attn_implementation``'s business; the
SFT weight decay of 0.05 is not applied (the SFT engine has no weight-decay key; COEPG-18 in
``docs/fidelity/coepg.md``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from guirl.configbase import Registered, Section
from guirl.methods.coepg.reward import PAPER_PRIORS, CoEPGConfig, Weighting

__all__ = [
    "CoEPGGRPO",
    "CoEPGSFT",
    "CoEPGSection",
    "PLANNER_ROLE",
    "coepg_section",
    "pixel_budget",
    "sft_stage_config",
    "grpo_stage_config",
]

#: The RL role of the planner's GRPO (``Method.hooks``; :mod:`guirl.methods.coepg.rl`).
PLANNER_ROLE = "coepg.planner"


class CoEPGSFT(Section):
    """SFT of the planner; the grounder uses the same settings (Co-EPG App. B)."""

    batch_size: int = Field(default=96, ge=1)  # Co-EPG App. B: global batch 96
    learning_rate: float = Field(default=1e-6, gt=0)  # Co-EPG App. B
    lr_scheduler_type: Literal["cosine", "linear", "constant_with_warmup"] = "cosine"  # Co-EPG App. B: warm-up + cosine
    warmup_ratio: float | None = Field(default=None, ge=0, lt=1)  # Co-EPG is silent on the warm-up length (null: sft's)
    epochs: float = Field(default=3, gt=0)  # Co-EPG App. B
    max_steps: int | None = Field(default=None, ge=1)  # not a paper value: a step budget (null: train by epochs)


class CoEPGGRPO(Section):
    """GRPO of the planner with the C-DREM reward (Co-EPG App. B; the grounder is never RL-trained)."""

    epochs: float = Field(default=3, gt=0)  # Co-EPG App. B
    max_steps: int | None = Field(default=None, ge=1)  # not a paper value: a step budget (null: by epochs)
    group_size: int = Field(default=7, ge=2)  # Co-EPG App. B: 7 rollouts per group
    temperature: float = Field(default=0.9, gt=0)  # Co-EPG App. B
    learning_rate: float = Field(default=5e-7, gt=0)  # Co-EPG App. B
    batch_size: int = Field(default=294, ge=1)  # Co-EPG App. B (= 42 groups of 7)
    beta: float = Field(default=0.01, ge=0)  # Co-EPG App. B: KL coefficient
    clip: float = Field(default=0.2, ge=0, lt=1)  # Co-EPG App. B: clip ratio epsilon
    priors: tuple[float, ...] = PAPER_PRIORS  # Co-EPG App. B-C: 72B : 32B : phi_k = 1 : 1 : 2 (Table 5)
    confidence: Literal["logprob", "prob"] = CoEPGConfig().confidence  # Co-EPG eq. 5-6 as printed ("prob": intent)
    weighting: Weighting = "cdrem"  # Co-EPG Sec. 4.3 (C-DREM); Table 4 ablates average, prior, single


class CoEPGSection(Section):
    """Co-EPG settings (module doc)."""

    max_pixels: int = Field(default=1024 * 28 * 28, gt=0)  # Co-EPG App. B: at most 1024 x 28 x 28 px
    sft: CoEPGSFT = Field(default_factory=CoEPGSFT)
    grpo: CoEPGGRPO = Field(default_factory=CoEPGGRPO)
    # ---- prompts (App. F)
    system_prompt: Annotated[str, Registered("prompt")] = "coepg"  # Co-EPG Table 12 (system role)
    user_template: str | None = "coepg_androidcontrol_high"  # Co-EPG Table 12 (null: this project's layout)
    grounder_prompt: Annotated[str, Registered("prompt")] = "coepg_grounder"  # Co-EPG is silent: ours
    history_mode: Literal["nA"] = "nA"  # Co-EPG Sec. 3, Table 12: previous actions as text, no past screenshots
    n_history: int = Field(default=5, ge=0, le=5)  # Table 12 shows the whole history; prompts show at most 5
    planner_max_new_tokens: int = Field(default=256, ge=1)  # Co-EPG is silent (the paper profiles' eval budget)
    grounder_max_new_tokens: int = Field(default=32, ge=1)  # Co-EPG is silent: a point is about 10 tokens
    # ---- the loop and the data enhancement (Sec. 4.2)
    iterations: int = Field(default=3, ge=1)  # Co-EPG Sec. 5.4, Tables 6-7: three iterations
    pool_size: int = Field(default=2, ge=1)  # Co-EPG Sec. 4.2: the latest two planners and grounders
    planners: list[str] = Field(  # Co-EPG Sec. 4.2: open VLMs (which ones is not said); [] trains pool models
        default_factory=lambda: ["checkpoints/Qwen2.5-VL-72B-Instruct", "checkpoints/Qwen2.5-VL-32B-Instruct"]
    )
    verifiers: list[str] = (
        Field(  # Co-EPG Sec. 4.2: open VLMs (which ones is not said; folders or endpoints); [] trains pool models
            default_factory=lambda: ["checkpoints/Qwen2.5-VL-72B-Instruct", "checkpoints/Qwen2.5-VL-32B-Instruct"]
        )
    )
    # Co-EPG App. B: C-DREM's VLMs, in the order of grpo.priors before phi_k; a folder, or an endpoint
    # http://host:port/v1[#model] serving it (vllm serve, docs/cluster.md; methods.coepg.grounding)
    grounders: list[str] = Field(
        default_factory=lambda: ["checkpoints/Qwen2.5-VL-72B-Instruct", "checkpoints/Qwen2.5-VL-32B-Instruct"]
    )
    plans_per_planner: int = Field(default=4, ge=1)  # Co-EPG is silent: sampled plans per pool planner and step
    plan_temperature: float = Field(default=0.9, gt=0)  # Co-EPG is silent: the GRPO rollout temperature (App. B)
    verify: Literal["all", "any"] = "all"  # Co-EPG is silent: a plan is kept when all (any) verifiers hit the box
    max_train_steps: int | None = Field(default=None, ge=1)  # not a paper value: the first N training steps
    # ---- evaluation (App. A, Sec. 5.2)
    eval_steps: int = Field(default=500, ge=1)  # Co-EPG App. A: 500 randomly sampled step-actions (AndroidControl)
    n_runs: int = Field(default=3, ge=1)  # Co-EPG Sec. 5.2: every number is the mean of three runs

    @field_validator("user_template")
    @classmethod
    def _user_prompt(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from guirl.prompts import get_prompt

        try:
            info = get_prompt(v)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        if info.role != "user":
            raise ValueError(f"{v!r} is a {info.role} prompt ({info.where}); the user template is a user prompt")
        return v

    def reward_config(self) -> CoEPGConfig:
        """The C-DREM reward settings of this section (priors, the reading of eq. 5, the weighting)."""
        return CoEPGConfig(
            priors=tuple(self.grpo.priors), confidence=self.grpo.confidence, weighting=self.grpo.weighting
        )


def coepg_section(cfg: Any) -> CoEPGSection:
    """``cfg.coepg``; a ``ConfigError`` saying how to add the section when it is missing."""
    return cfg.method_section("coepg")


def pixel_budget(cfg: Any) -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` of Co-EPG's models: the run's ``model.min_pixels`` (Co-EPG is
    silent on a minimum) and ``coepg.max_pixels`` (App. B); a missing section is a ``ConfigError``
    saying how to add it."""
    section = coepg_section(cfg)
    return int(cfg.model.min_pixels), int(section.max_pixels)


def sft_stage_config(cfg: Any, **updates: Any) -> Any:
    """The config of a Co-EPG SFT stage (a ``records`` stage): ``coepg.sft`` written into the
    ``sft`` keys and ``coepg.max_pixels`` into ``model.max_pixels`` (module doc), then
    ``updates`` (dotted keys with ``__`` for ``.``, e.g. ``seed=1``). A global batch that the
    per-device batch x processes does not divide is a ``ValueError`` naming both."""
    sec = coepg_section(cfg)
    s = sec.sft
    per_step = cfg.sft.per_device_batch_size * cfg.runtime.num_processes
    if s.batch_size % per_step:
        raise ValueError(
            f"coepg.sft.batch_size {s.batch_size} is not a multiple of sft.per_device_batch_size x "
            f"runtime.num_processes = {per_step}; set one so that the global batch divides"
        )
    keys: dict[str, Any] = {
        "model.max_pixels": sec.max_pixels,
        "sft.learning_rate": s.learning_rate,
        "sft.epochs": s.epochs,
        "sft.max_steps": s.max_steps,
        "sft.lr_scheduler_type": s.lr_scheduler_type,
        "sft.grad_accum": s.batch_size // per_step,
        "sft.executor": None,
    }
    if s.warmup_ratio is not None:
        keys["sft.warmup_ratio"] = s.warmup_ratio
    keys.update({k.replace("__", "."): v for k, v in updates.items()})
    return cfg.replace(keys)


def grpo_stage_config(cfg: Any, n_tasks: int, **updates: Any) -> Any:
    """The config of the planner's GRPO stage: ``rl.role = coepg.planner`` (its own C-DREM reward),
    ``coepg.grpo`` written into ``rl`` (``prompts_per_step = batch_size / group_size``, ``eps_low =
    eps_high = clip``, ``max_steps`` from ``grpo.max_steps`` or ``epochs x n_tasks /
    prompts_per_step`` rounded up; plain GRPO, no dynamic sampling), ``rl.max_new_tokens =
    coepg.planner_max_new_tokens``, ``coepg.max_pixels`` into ``model.max_pixels``, then
    ``updates`` (``__`` for ``.``, e.g. ``coepg__grpo__weighting="single"``)."""
    sec = coepg_section(cfg)
    g = sec.grpo
    if g.batch_size % g.group_size:
        raise ValueError(
            f"coepg.grpo.batch_size {g.batch_size} is not a multiple of coepg.grpo.group_size {g.group_size}"
        )
    prompts = g.batch_size // g.group_size
    steps = g.max_steps if g.max_steps is not None else max(1, math.ceil(g.epochs * n_tasks / prompts))
    keys: dict[str, Any] = {
        "model.max_pixels": sec.max_pixels,
        "rl.role": PLANNER_ROLE,
        "rl.reward": None,
        "rl.group_size": g.group_size,
        "rl.prompts_per_step": prompts,
        "rl.max_steps": steps,
        "rl.temperature": g.temperature,
        "rl.learning_rate": g.learning_rate,
        "rl.beta": g.beta,
        "rl.eps_low": g.clip,
        "rl.eps_high": g.clip,
        "rl.max_new_tokens": sec.planner_max_new_tokens,
        "rl.dapo_std_threshold": None,
    }
    keys.update({k.replace("__", "."): v for k, v in updates.items()})
    return cfg.replace(keys)
