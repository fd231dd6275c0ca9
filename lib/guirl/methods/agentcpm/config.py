"""The ``agentcpm:`` config section: AgentCPM-GUI's SFT (Table 4) and RFT (Table 5) recipe, the RFT
reward's settings, the evaluation mapping and the trajectory de-duplication (Sec. 2.4), and how
the section becomes the kernel keys of notebook 07's stages (:func:`sft_updates`,
:func:`rft_updates`).

Every default is the paper's value, commented with its table; a value the paper does not give
says so (``not a paper value``). The backbone is MiniCPM-V (Sec. 2.1); this project runs the
recipe on Qwen2.5-VL (ACPM-19 in ``docs/fidelity/agentcpm.md``). The stage sections
(:mod:`guirl.configbase`) are ``grounding`` (Stage I where 07 trains it: stage values of
``grounding``; the paper gives no Stage I recipe, so none is a paper value), ``sft`` (Stage II,
Table 4: stage values of ``sft`` and, in its ``runtime``, of ``runtime``) and ``rft`` (Stage III,
Table 5: stage values of ``rl``); a kernel key
set in a later layer than the paper's value wins. :func:`recipe` ``"tiny"`` trains the random-init
tiny model with the tiny profile's own values (it does not move at Table 4-5's 1e-5 / 1e-6 in a few
hundred steps); the reward, schema and mapping stay the paper's.

Table values with no kernel counterpart are not keys (nothing would read them); the fidelity audit
lists them with what the engines do instead: Table 4's model_max_length 2304 (SFT never truncates),
weight decay 0.1, Adam (0.9, 0.999), no gradient clipping and ZeRO-2 (the SFT stage uses TRL's
defaults and ``runtime.deepspeed_config``); Table 5's max_prompt_length 16384, Adam beta2 0.99 and
the cosine schedule (the RL engine's AdamW keeps beta2 0.999 and a constant rate after warm-up);
Table 7's decoding of the Qwen2.5-VL baselines (top_k 1 is greedy decoding, which every evaluation
here uses).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StringConstraints

from guirl.configbase import (
    HISTORY_PATTERN,
    LR_SCHEDULERS,
    MAX_BATCH,
    MAX_COEF,
    MAX_COUNT,
    MAX_EPOCHS,
    MAX_LR,
    MAX_SIDE,
    MAX_STEPS,
    MAX_TOKENS,
    PROFILE,
    RunConfig,
    Section,
    StageAdapter,
    stage_updates,
)
from guirl.methods.agentcpm.mapping import VARIANTS
from guirl.methods.agentcpm.reward import SCHEMAS, AgentCPMConfig

__all__ = [
    "AgentCPMEval",
    "AgentCPMGrounding",
    "AgentCPMRFT",
    "AgentCPMRFTRuntime",
    "AgentCPMSFT",
    "AgentCPMSFTRuntime",
    "AgentCPMSection",
    "DERIVED",
    "grounding_updates",
    "longest_side_pixels",
    "recipe",
    "rft_updates",
    "section",
    "sft_updates",
    "short_prompt",
]


class AgentCPMSFTRuntime(Section):
    """Stage II's precision and recompute (AgentCPM-GUI Table 4): stage values of ``runtime``."""

    mirrors: ClassVar[str] = "runtime"
    bf16: bool = True  # AgentCPM-GUI Table 4
    activation_checkpointing: bool = False  # AgentCPM-GUI Table 4: gradient_checkpointing False


class AgentCPMRFTRuntime(Section):
    """Stage III's precision (AgentCPM-GUI Table 5): a stage value of ``runtime``."""

    mirrors: ClassVar[str] = "runtime"
    bf16: bool = True  # AgentCPM-GUI Table 5


class AgentCPMGrounding(Section):
    """Stage I grounding pre-training (AgentCPM-GUI Sec. 2.3) where notebook 07 trains it (the
    profiles without ``grounding.enabled``): stage values of ``grounding``. The paper gives no Stage I
    recipe (only its 12M samples, half of them general multimodal data): none of these is a paper value."""

    mirrors: ClassVar[str] = "grounding"
    learning_rate: float = Field(default=1e-5, gt=0, le=MAX_LR)  # not a paper value: Table 4's Stage II rate
    max_steps: int = Field(default=1000, ge=1, le=MAX_STEPS)  # not a paper value: a step budget
    per_device_batch_size: int = Field(default=1, ge=1, le=MAX_BATCH)  # not a paper value: Table 4's Stage II batch


class AgentCPMSFT(Section):
    """Stage II supervised fine-tuning (AgentCPM-GUI Table 4): stage values of ``sft``; ``max_line_res``
    caps the longest image side (:func:`longest_side_pixels`, into ``model.max_pixels``)."""

    mirrors: ClassVar[str] = "sft"
    own: ClassVar[tuple[str, ...]] = ("max_line_res", "runtime", "lora")
    max_line_res: int = Field(default=1120, ge=28, le=MAX_SIDE)  # AgentCPM-GUI Table 4: longest image side (px)
    per_device_batch_size: int = Field(default=1, ge=1, le=MAX_BATCH)  # AgentCPM-GUI Table 4
    grad_accum: int = Field(default=1, ge=1, le=MAX_BATCH)  # AgentCPM-GUI Table 4
    epochs: float = Field(default=3, gt=0, le=MAX_EPOCHS)  # AgentCPM-GUI Table 4
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a step budget (null: epochs)
    learning_rate: float = Field(default=1e-5, gt=0, le=MAX_LR)  # AgentCPM-GUI Table 4
    lr_scheduler_type: Literal[LR_SCHEDULERS] = "cosine"  # type: ignore[valid-type]  # AgentCPM-GUI Table 4
    warmup_ratio: float = Field(default=0.05, ge=0, lt=1)  # AgentCPM-GUI Table 4: linear warm-up
    weight_decay: float = Field(default=0.1, ge=0, le=MAX_COEF)  # AgentCPM-GUI Table 4
    # AgentCPM-GUI Sec. 2.4: multi-turn samples keep the last 3 turns (each with its screenshot)
    histories: list[Annotated[str, StringConstraints(pattern=HISTORY_PATTERN)]] = Field(
        default_factory=lambda: ["3AO"], min_length=1
    )
    runtime: AgentCPMSFTRuntime = Field(default_factory=AgentCPMSFTRuntime)
    lora: StageAdapter = Field(default_factory=StageAdapter)  # AgentCPM-GUI Table 4: all parameters (no adapter)


class AgentCPMRFT(Section):
    """Stage III reinforcement fine-tuning, GRPO (AgentCPM-GUI Table 5): stage values of ``rl``
    (Table 5's ``max_completion_length`` is ``max_new_tokens``, ``num_generations`` ``group_size``,
    ``per_device_train_batch_size`` ``micro_batch_size``; one update per step over 1 x 32 x 8 GPUs
    = 256 completions, i.e. 32 prompts of 8), the length in ``epochs`` over the training steps
    (``max_steps`` when set), the image cap and the reward's settings (Sec. 2.5.1)."""

    mirrors: ClassVar[str] = "rl"
    own: ClassVar[tuple[str, ...]] = ("epochs", "max_line_res", "runtime", "reward_rules", "reward_schema")
    max_new_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS)  # AgentCPM-GUI Table 5: max_completion_length
    max_line_res: int = Field(default=1120, ge=28, le=MAX_SIDE)  # AgentCPM-GUI Table 5: longest image side (px)
    group_size: int = Field(default=8, ge=2, le=MAX_BATCH)  # AgentCPM-GUI Table 5: num_generations
    micro_batch_size: int = Field(default=1, ge=1, le=MAX_BATCH)  # AgentCPM-GUI Table 5: per_device_train_batch_size
    prompts_per_step: int = Field(default=32, ge=1, le=MAX_BATCH)  # Table 5: 1 x 32 accumulation x 8 GPUs / 8
    mini_batches: int = Field(default=1, ge=1, le=MAX_BATCH)  # one update per step (gradient_accumulation_steps 32)
    learning_rate: float = Field(default=1e-6, gt=0, le=MAX_LR)  # AgentCPM-GUI Table 5
    epochs: float = Field(default=3, gt=0, le=MAX_EPOCHS)  # AgentCPM-GUI Table 5
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # not a paper value: a step budget (null: epochs)
    weight_decay: float = Field(default=0.1, ge=0, le=MAX_COEF)  # AgentCPM-GUI Table 5
    max_grad_norm: float = Field(default=1.0, gt=0, le=MAX_COEF)  # AgentCPM-GUI Table 5
    beta: float = Field(default=0.04, ge=0, le=MAX_COEF)  # AgentCPM-GUI Table 5: KL coefficient
    dapo_std_threshold: float | None = Field(default=None, ge=0, le=MAX_COEF)  # Sec. 2.5 states no dynamic sampling
    runtime: AgentCPMRFTRuntime = Field(default_factory=AgentCPMRFTRuntime)
    reward_rules: Literal["agentcpm_reward", "agentcpm_reward_code"] = AgentCPMConfig().rules  # Sec. 2.5.1
    # Sec. 2.5.1 format check: "paper" = the App. C.2 schema read as AgentCPM-GUI's pipeline reads it
    # (ACPM-02/05/06); "released": the released schema (APPSELECT, start); "tolerant": this project's parser
    reward_schema: Literal[SCHEMAS] = AgentCPMConfig().schema  # type: ignore[valid-type]


class AgentCPMEval(Section):
    """07's evaluation of the compact JSON models (stage values of ``eval``)."""

    mirrors: ClassVar[str] = "eval"
    max_test_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # AgentCPM-GUI scores whole test sets


class AgentCPMSection(Section):
    """AgentCPM-GUI settings (module doc)."""

    grounding: AgentCPMGrounding = Field(default_factory=AgentCPMGrounding)
    sft: AgentCPMSFT = Field(default_factory=AgentCPMSFT)
    rft: AgentCPMRFT = Field(default_factory=AgentCPMRFT)
    eval: AgentCPMEval = Field(default_factory=AgentCPMEval)
    mapping_variant: Literal[VARIANTS] = "paper"  # type: ignore[valid-type]  # App. B tables ("released": code)
    # Sec. 2.4 drops a trajectory whose cosine similarity to a kept one of the same query exceeds "a fixed
    # threshold" it does not give: not a paper value
    dedup_threshold: float = Field(default=0.98, gt=-1, le=1)
    grounding_samples: int = Field(default=1500, ge=1, le=MAX_COUNT)  # AgentCPM-GUI App. C.1: 1,500 per task

    def reward_config(self) -> AgentCPMConfig:
        """The RFT reward settings of this section."""
        return AgentCPMConfig(rules=self.rft.reward_rules, schema=self.rft.reward_schema)


def section(cfg: RunConfig) -> AgentCPMSection:
    """``cfg.agentcpm``; a :class:`guirl.config.ConfigError` saying how to add it when unset."""
    return cfg.method_section("agentcpm")  # type: ignore[return-value]


def longest_side_pixels(width: int, height: int, max_line_res: int) -> int:
    """The pixel count of a ``width`` x ``height`` screen scaled so that its longest side is at most
    ``max_line_res`` (AgentCPM-GUI Tables 4-5 cap the longest side; Qwen2.5-VL's processor caps the
    pixel count, so the cap becomes ``model.max_pixels``): ``width * height`` when the screen already
    fits, else ``floor(max_line_res^2 * short / long)`` (1080 x 2400 at 1120: 504 x 1120 = 564,480)."""
    long, short = max(width, height), min(width, height)
    if long <= max_line_res:
        return int(width * height)
    return int(math.floor(max_line_res * max_line_res * short / long))


def short_prompt(cfg: RunConfig) -> str | None:
    """The system prompt of the compact JSON stages: ``agentcpm_short`` (this project's paraphrase) where
    the run uses a short paraphrase (``sft.system_prompt`` of this project, the tiny profile's
    ``ccpo_short``), else ``None``: AgentCPM-GUI's own prompt (App. C.2), as the paper profiles."""
    from guirl.prompts import get_prompt

    name = cfg.sft.system_prompt
    return "agentcpm_short" if name is not None and not get_prompt(name).from_paper else None


def _pixels(cfg: RunConfig, max_line_res: int) -> dict[str, Any]:
    cap = longest_side_pixels(cfg.data.width, cfg.data.height, max_line_res)
    return {"model.max_pixels": max(cfg.model.min_pixels, min(cfg.model.max_pixels, cap))}


def eval_protocol(data_source: str) -> str:
    """The evaluator rule AgentCPM-GUI scores a data set with: its AndroidControl mode on
    AndroidControl (``agentcpm_androidcontrol``: the released evaluator's ``eval_android_control``,
    long presses as taps, open-app steps dropped), the general rule (``agentcpm``) elsewhere."""
    return "agentcpm_androidcontrol" if data_source == "androidcontrol" else "agentcpm"


def sft_updates(cfg: RunConfig) -> dict[str, Any]:
    """The ``Config.replace`` updates of 07's compact JSON SFT stage (Stage II): the ``agentcpm``
    output format and protocol, its system prompt (:func:`short_prompt`), the ``agentcpm.sft`` stage
    values (Table 4) and ``model.max_pixels`` from ``max_line_res`` (:func:`longest_side_pixels` of
    the data's screens, never above ``model.max_pixels``)."""
    s = section(cfg).sft
    return {
        "sft.output_format": "agentcpm",
        "sft.system_prompt": short_prompt(cfg),
        "sft.executor": None,
        "eval.protocol": eval_protocol(cfg.data.source),
        **stage_updates(s),
        **_pixels(cfg, s.max_line_res),
    }


def grounding_updates(cfg: RunConfig) -> dict[str, Any]:
    """The ``Config.replace`` updates of 07's Stage I (grounding pre-training, Sec. 2.3, trained
    where the profile has no ``grounding.enabled`` model): :func:`sft_updates` (the compact JSON
    format and AgentCPM-GUI's prompt, so a point answer is ``{"POINT":[x,y]}`` on the 0-1000 grid,
    Stage II's image cap and precision) and the ``agentcpm.grounding`` stage values (the ``grounding``
    stage's rate, step budget and batch)."""
    return {**sft_updates(cfg), **stage_updates(section(cfg).grounding)}


def rft_updates(cfg: RunConfig, *, n_train_steps: int) -> dict[str, Any]:
    """The ``Config.replace`` updates of 07's RFT stage (Stage III) on top of :func:`sft_updates`: the
    generic single-turn GRPO role with AgentCPM-GUI's reward (``rl.role: grpo``, ``rl.reward:
    agentcpm``; the role binds the section's rules and schema), ``rl.histories`` = the SFT stage's,
    the ``agentcpm.rft`` stage values (Table 5), ``model.max_pixels`` from its ``max_line_res`` and
    ``rl.max_steps`` = ``rft.max_steps`` or ``ceil(epochs x n_train_steps x settings /
    prompts_per_step)`` (``n_train_steps``: the recorded training steps, one RFT task each per
    history setting)."""
    r = section(cfg).rft
    out = sft_updates(cfg)
    histories = out["sft.histories"]
    out.update({"rl.role": "grpo", "rl.reward": "agentcpm", "rl.histories": histories})
    out.update(stage_updates(r))
    out.update(_pixels(cfg, r.max_line_res))
    out["rl.max_steps"] = r.max_steps or max(
        1, math.ceil(r.epochs * n_train_steps * len(histories) / r.prompts_per_step)
    )
    return out


#: Kernel keys notebook 07 sets per AgentCPM-GUI stage (``Method.derived``): an experiment or override is refused.
DERIVED: dict[str, str] = {
    "sft.output_format": "Stages II and III write AgentCPM-GUI's compact JSON actions",
    "sft.system_prompt": "Stages II and III use AgentCPM-GUI's prompt (agentcpm_short with a short-prompt profile)",
    "eval.protocol": "the compact JSON models are scored with the agentcpm protocol",
    "rl.role": "Stage III is the generic grpo role, AndroidLong's GRPO the androidlong role",
    "rl.reward": "Stage III trains with AgentCPM-GUI's reward, AndroidLong's GRPO with its own",
    "rl.histories": "Stage III trains at agentcpm.sft.histories",
}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """AgentCPM-GUI's values for a recipe kind: ``paper``: the section's defaults (Tables 4-5);
    ``tiny``: the tiny profile's own training values (the random-init model does not move at the
    paper's rates in a few hundred steps) and 07's CPU sizes; not paper values."""
    if kind != "tiny":
        return {}
    out: dict[str, Any] = {
        f"agentcpm.sft.{k}": PROFILE
        for k in ("learning_rate", "epochs", "per_device_batch_size", "grad_accum", "warmup_ratio", "weight_decay")
    }
    out.update({f"agentcpm.sft.{k}": PROFILE for k in ("lr_scheduler_type", "histories")})
    out.update({"agentcpm.sft.runtime.bf16": PROFILE, "agentcpm.sft.runtime.activation_checkpointing": PROFILE})
    out["agentcpm.sft.lora.enabled"] = PROFILE
    out.update(
        {
            f"agentcpm.rft.{k}": PROFILE
            for k in (
                "max_new_tokens",
                "group_size",
                "micro_batch_size",
                "prompts_per_step",
                "mini_batches",
                "learning_rate",
                "weight_decay",
                "max_grad_norm",
                "beta",
            )
        }
    )
    out["agentcpm.rft.runtime.bf16"] = PROFILE
    # Stage I is 01's grounding model on the tiny profile; a run that trains 07's own takes the profile's values
    out.update({f"agentcpm.grounding.{k}": PROFILE for k in ("learning_rate", "max_steps", "per_device_batch_size")})
    out.update(
        {
            "agentcpm.sft.max_steps": 200,  # Stage II from 01's grounding model: the compact JSON syntax and grid are new
            "agentcpm.rft.max_steps": 8,  # Stage III, 4 prompts x 4 completions a step
            "agentcpm.grounding_samples": 40,  # per CAGUI task type (App. C.1: 1,500): 95% interval within +-16 points
            "agentcpm.eval.max_test_steps": 60,  # first 60 steps per test split (CPU budget)
        }
    )
    return out
