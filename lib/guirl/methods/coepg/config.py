"""The ``coepg:`` config section: Co-EPG's training and evaluation settings (Co-EPG Sec. 4-5, App. A-C),
and its recipe per profile (:func:`recipe`).

Every default is the paper's value, commented with its place; a value the paper does not give but
a stage trains with is a field marked "not a paper value" (the SFT warm-up ratio, the GRPO
mini-batches), so that no other paper's recipe reaches Co-EPG's stages; the RL micro-batch split
(memory only: the same gradient) is the kernel's. The tiny profile's sizes are :func:`recipe` ``"tiny"``; a run
changes a value with ``--override coepg.grpo.temperature=1.0`` (or ``rl.temperature=1.0``: a kernel
key set in a later layer than the paper's value wins, :func:`guirl.config.load_config`).

The stage sections (:mod:`guirl.configbase`) and where they go (:func:`sft_stage_config`,
:func:`grpo_stage_config`, the study ``guirl.studies.coepg_iterations``):

* ``model`` -> ``model.max_pixels`` of every Co-EPG stage and model (:func:`pixel_budget`);
* ``sft`` -> the ``sft`` keys of every Co-EPG SFT stage (planner, grounder, pool models, the
  end-to-end baseline): learning rate, epochs (or ``max_steps``), scheduler, and the global batch
  96 as ``per_device_batch_size x grad_accum x`` the 8 GPUs of the paper profiles;
* ``grpo`` -> the ``rl`` keys of the planner's GRPO stage (role ``coepg.planner``), its length in
  epochs over the training steps (``max_steps`` when set), and the C-DREM reward
  (:meth:`CoEPGSection.reward_config`);
* ``eval`` -> the test steps per split of 03's evaluation (taken in a seeded random order);
* the prompts, histories and generation budgets -> :mod:`guirl.methods.coepg.prompts` and
  :mod:`guirl.methods.coepg.agent`; the pools and the data enhancement ->
  :mod:`guirl.methods.coepg.data`.

The pixel budget of Co-EPG's models is 1024 x 28 x 28 = 802,816 px in training and inference
(App. B, ``max_pixels``): a 1080x2400 AndroidControl screen is 588x1316 px (987 image tokens) for
them, against 1092x2408 (3,354) under the paper profiles' ``model.max_pixels``.

What App. B states and no key of this section holds: the GPUs (8 for SFT, 7 for GRPO), DeepSpeed
ZeRO-3 and FlashAttention-2 are the ``runtime`` section's and ``model.attn_implementation``'s
business (``docs/fidelity/training-setup.md``).

The planner's user prompt follows the data set on the paper recipe: Table 12's AndroidControl
prompt, Table 9's on Multimodal-Mind2Web (:data:`MIND2WEB_SOURCES`, with the step's referring
elements, :func:`guirl.methods.coepg.prompts.elements_text`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from guirl.configbase import (
    MAX_BATCH,
    MAX_COEF,
    MAX_EPOCHS,
    MAX_LR,
    MAX_PIXELS,
    MAX_RUNS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    PROFILE,
    Registered,
    RunConfig,
    Sampling,
    Section,
    StageAdapter,
    stage_updates,
)
from guirl.methods.coepg.reward import PAPER_PRIORS, CoEPGConfig, Weighting

#: Data sources in Multimodal-Mind2Web's format: Table 9's prompt, scored with ``coepg_mind2web``.
MIND2WEB_SOURCES = frozenset({"mind2web", "ccpo_mind2web"})

__all__ = [
    "CoEPGEval",
    "CoEPGGRPO",
    "CoEPGModel",
    "CoEPGSFT",
    "CoEPGSection",
    "DERIVED",
    "PLANNER_ROLE",
    "coepg_section",
    "grpo_stage_config",
    "pixel_budget",
    "recipe",
    "MIND2WEB_SOURCES",
    "sft_stage_config",
]

#: The RL role of the planner's GRPO (``Method.hooks``; :mod:`guirl.methods.coepg.rl`).
PLANNER_ROLE = "coepg.planner"


class CoEPGModel(Section):
    """The pixel budget of Co-EPG's models (stage values of ``model``)."""

    mirrors: ClassVar[str] = "model"
    max_pixels: int = Field(default=1024 * 28 * 28, gt=0, le=MAX_PIXELS)  # Co-EPG App. B: at most 1024 x 28 x 28 px


class CoEPGSFT(Section):
    """SFT of the planner; the grounder uses the same settings (Co-EPG App. B). Stage values of ``sft``."""

    mirrors: ClassVar[str] = "sft"
    own: ClassVar[tuple[str, ...]] = ("lora",)
    learning_rate: float = Field(default=1e-6, gt=0, le=MAX_LR)  # Co-EPG App. B
    lr_scheduler_type: Literal["cosine", "linear", "constant_with_warmup"] = "cosine"  # Co-EPG App. B: warm-up + cosine
    epochs: float = Field(default=3, gt=0, le=MAX_EPOCHS)  # Co-EPG App. B
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a step budget (null: epochs)
    per_device_batch_size: int = Field(
        default=1, ge=1, le=MAX_BATCH
    )  # Co-EPG App. B: global batch 96 = 1 x 12 x 8 GPUs;
    grad_accum: int = Field(default=12, ge=1, le=MAX_BATCH)  # the split of the 96 is not given (8 GPUs, App. B)
    weight_decay: float = Field(default=0.05, ge=0, le=MAX_COEF)  # Co-EPG App. B
    warmup_ratio: float = Field(default=0.01, ge=0, lt=1)  # not a paper value: App. B names a warm-up, not its ratio
    lora: StageAdapter = Field(default_factory=StageAdapter)  # Co-EPG App. B: all parameters (ZeRO-3, no adapter)


class CoEPGGRPO(Section):
    """GRPO of the planner with the C-DREM reward (Co-EPG App. B; the grounder is never RL-trained).
    Stage values of ``rl``; ``epochs`` (over the training steps, when ``max_steps`` is null) and the
    reward's settings are Co-EPG's own."""

    mirrors: ClassVar[str] = "rl"
    own: ClassVar[tuple[str, ...]] = ("epochs", "priors", "confidence", "weighting")
    epochs: float = Field(default=3, gt=0, le=MAX_EPOCHS)  # Co-EPG App. B
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a step budget (null: epochs)
    group_size: int = Field(default=7, ge=2, le=MAX_BATCH)  # Co-EPG App. B: 7 rollouts per group
    prompts_per_step: int = Field(default=42, ge=1, le=MAX_BATCH)  # Co-EPG App. B: batch 294 = 42 groups of 7
    temperature: float = Field(default=0.9, gt=0, le=MAX_TEMPERATURE)  # Co-EPG App. B
    learning_rate: float = Field(default=5e-7, gt=0, le=MAX_LR)  # Co-EPG App. B
    beta: float = Field(default=0.01, ge=0, le=MAX_COEF)  # Co-EPG App. B: KL coefficient
    eps_low: float = Field(default=0.2, ge=0, lt=1)  # Co-EPG App. B: clip ratio epsilon
    eps_high: float = Field(default=0.2, ge=0, le=MAX_COEF)  # Co-EPG App. B: clip ratio epsilon
    dapo_std_threshold: float | None = Field(default=None, ge=0, le=MAX_COEF)  # Co-EPG App. B: plain GRPO, no filter
    mini_batches: int = Field(default=4, ge=1, le=MAX_BATCH)  # not a paper value: App. B gives no mini-batch split
    priors: tuple[Annotated[float, Field(ge=0, le=MAX_COEF)], ...] = (
        PAPER_PRIORS  # Co-EPG App. B-C: 1 : 1 : 2 (Table 5)
    )
    confidence: Literal["logprob", "prob"] = CoEPGConfig().confidence  # Co-EPG eq. 5-6 as printed ("prob": intent)
    weighting: Weighting = "cdrem"  # Co-EPG Sec. 4.3 (C-DREM); Table 4 ablates average, prior, single


class CoEPGEval(Section):
    """03's evaluation (stage values of ``eval``)."""

    mirrors: ClassVar[str] = "eval"
    max_test_steps: int | None = Field(default=500, ge=1, le=MAX_STEPS)  # Co-EPG App. A: 500 sampled step-actions


class CoEPGSection(Section):
    """Co-EPG settings (module doc)."""

    model: CoEPGModel = Field(default_factory=CoEPGModel)
    sft: CoEPGSFT = Field(default_factory=CoEPGSFT)
    grpo: CoEPGGRPO = Field(default_factory=CoEPGGRPO)
    eval: CoEPGEval = Field(default_factory=CoEPGEval)
    # ---- prompts (App. F)
    system_prompt: Annotated[str, Registered("prompt")] = "coepg"  # Co-EPG Table 12 (system role)
    user_template: str | None = "coepg_androidcontrol_high"  # Co-EPG Table 12 (null: this project's layout)
    grounder_prompt: Annotated[str, Registered("prompt")] = "coepg_grounder"  # Co-EPG is silent: ours
    history_mode: Literal["nA"] = "nA"  # Co-EPG Sec. 3, Table 12: previous actions as text, no past screenshots
    n_history: int = Field(default=5, ge=0, le=5)  # Table 12 shows the whole history; prompts show at most 5
    planner_max_new_tokens: int = Field(default=256, ge=1, le=MAX_TOKENS)  # Co-EPG is silent (the eval budget)
    grounder_max_new_tokens: int = Field(default=32, ge=1, le=MAX_TOKENS)  # Co-EPG is silent: a point is ~10 tokens
    # ---- the loop and the data enhancement (Sec. 4.2)
    iterations: int = Field(default=3, ge=1, le=MAX_RUNS)  # Co-EPG Sec. 5.4, Tables 6-7: three iterations
    pool_size: int = Field(default=2, ge=1, le=MAX_RUNS)  # Co-EPG Sec. 4.2: the latest two planners and grounders
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
    plans_per_planner: int = Field(
        default=4, ge=1, le=MAX_BATCH
    )  # Co-EPG is silent: sampled plans per planner and step
    # Co-EPG is silent on how plans are sampled: at the GRPO rollout temperature (App. B)
    plan_sampling: Sampling = Field(default_factory=lambda: Sampling(do_sample=True, temperature=0.9))
    verify: Literal["all", "any"] = "all"  # Co-EPG is silent: a plan is kept when all (any) verifiers hit the box
    max_train_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: the first N steps
    n_runs: int = Field(default=3, ge=1, le=MAX_RUNS)  # Co-EPG Sec. 5.2: every number is the mean of three runs

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


def coepg_section(cfg: RunConfig) -> CoEPGSection:
    """``cfg.coepg``; a ``ConfigError`` saying how to add the section when it is missing."""
    return cfg.method_section("coepg")


def pixel_budget(cfg: RunConfig) -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` of Co-EPG's models: the run's ``model.min_pixels`` (Co-EPG is
    silent on a minimum) and ``coepg.model.max_pixels`` (App. B)."""
    return int(cfg.model.min_pixels), int(coepg_section(cfg).model.max_pixels)


def sft_stage_config(cfg: RunConfig, **updates: Any) -> Any:
    """The config of a Co-EPG SFT stage (a ``records`` stage): the ``coepg.sft`` and ``coepg.model``
    stage values (module doc), no Low executor (a records stage trains one model), then ``updates``
    (dotted keys with ``__`` for ``.``, e.g. ``seed=1``)."""
    sec = coepg_section(cfg)
    keys: dict[str, Any] = {**stage_updates(sec.model), **stage_updates(sec.sft), "sft.executor": None}
    keys.update({k.replace("__", "."): v for k, v in updates.items()})
    return cfg.replace(keys)


def grpo_stage_config(cfg: RunConfig, n_tasks: int, **updates: Any) -> Any:
    """The config of the planner's GRPO stage: ``rl.role = coepg.planner`` (its own C-DREM reward),
    the ``coepg.grpo`` and ``coepg.model`` stage values, ``rl.max_steps`` from ``grpo.max_steps`` or
    ``epochs x n_tasks / prompts_per_step`` rounded up, ``rl.max_new_tokens =
    coepg.planner_max_new_tokens`` (the planner's budget), then ``updates`` (``__`` for ``.``, e.g.
    ``coepg__grpo__weighting="single"``)."""
    sec = coepg_section(cfg)
    g = sec.grpo
    steps = g.max_steps if g.max_steps is not None else max(1, math.ceil(g.epochs * n_tasks / g.prompts_per_step))
    keys: dict[str, Any] = {
        **stage_updates(sec.model),
        **stage_updates(g),
        "rl.max_steps": steps,
        "rl.role": PLANNER_ROLE,
        "rl.reward": None,
        "rl.max_new_tokens": sec.planner_max_new_tokens,
    }
    keys.update({k.replace("__", "."): v for k, v in updates.items()})
    return cfg.replace(keys)


#: Kernel keys notebook 03 sets per stage (``Method.derived``): an experiment or override of one is refused.
DERIVED: dict[str, str] = {
    "rl.role": "its GRPO stages train the planner (role coepg.planner)",
    "rl.reward": "the planner trains with C-DREM (coepg.grpo.weighting, priors, confidence)",
    "rl.max_new_tokens": "the planner generates coepg.planner_max_new_tokens tokens",
    "rl.save_steps": "three checkpoints per GRPO run, Figure 5's curve",
    "rl.save_total_limit": "every checkpoint of Figure 5's curve is kept",
}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """Co-EPG's values for a recipe kind: ``paper``: the section's defaults (the paper's values),
    with Table 9's planner prompt on Multimodal-Mind2Web (:data:`MIND2WEB_SOURCES`; Table 12's
    elsewhere); ``tiny``: 03 sized for 2 CPU cores (``docs/coepg.md`` measures it; not paper
    values unless a comment says so)."""
    if kind != "tiny":
        return {"coepg.user_template": "coepg_mind2web"} if data_source in MIND2WEB_SOURCES else {}
    return {
        "coepg.model.max_pixels": PROFILE,  # = model.max_pixels: one MiniGUI screen (Co-EPG App. B: 802,816)
        "coepg.system_prompt": "coepg_short",  # CPU budget: a short paraphrase of Co-EPG Tables 10-12 (~1,000 tokens)
        "coepg.user_template": None,  # this project's user layout ("Task:", "Previous actions:", "Current screen:")
        "coepg.n_history": 3,  # previous actions shown as text
        "coepg.planner_max_new_tokens": 48,  # the longest MiniGUI plan answer is about 40 tiny-tokenizer tokens
        "coepg.grounder_max_new_tokens": 12,  # "(140, 252)" and the end token
        "coepg.planners": [],  # no open VLM can be loaded: pool models trained on MiniGUI's step annotations
        "coepg.verifiers": [],
        "coepg.grounders": [],  # C-DREM's auxiliary grounders: the verifier pool models
        "coepg.plans_per_planner": 2,
        "coepg.max_train_steps": 300,  # the first 300 training steps (of 4,218)
        "coepg.eval.max_test_steps": 60,  # per test split, from episodes in a seeded random order (App. A: 500)
        "coepg.n_runs": 1,  # one training seed per GRPO stage (Co-EPG Sec. 5.2: three runs)
        "coepg.sft.per_device_batch_size": PROFILE,  # the tiny profile's 8, no accumulation (Co-EPG App. B: 96)
        "coepg.sft.grad_accum": PROFILE,
        "coepg.sft.learning_rate": PROFILE,  # the tiny profile's SFT rate, 3e-3 (Co-EPG App. B: 1e-6)
        "coepg.sft.lora.enabled": PROFILE,
        "coepg.sft.weight_decay": PROFILE,  # the tiny profile's 0 (Co-EPG App. B: 0.05)
        "coepg.sft.warmup_ratio": PROFILE,
        "coepg.grpo.mini_batches": PROFILE,
        "coepg.sft.max_steps": 60,
        "coepg.grpo.max_steps": 6,
        "coepg.grpo.group_size": PROFILE,  # the tiny profile's 4 (Co-EPG App. B: 7)
        "coepg.grpo.prompts_per_step": PROFILE,  # 4 groups of 4 per step (Co-EPG App. B: 42 groups of 7)
        "coepg.grpo.learning_rate": PROFILE,  # the tiny profile's RL rate, 1e-4 (Co-EPG App. B: 5e-7)
    }
