"""The ``agentcpm:`` config section: AgentCPM-GUI's SFT (Table 4) and RFT (Table 5) recipe, the RFT
reward's settings, the evaluation mapping and the trajectory de-duplication (Sec. 2.4), and how
the section becomes the kernel keys of notebook 07's stages (:func:`sft_updates`,
:func:`rft_updates`).

Every default is the paper's value, commented with its table; a value the paper does not give
says so (``not a paper value``). ``configs/profiles/base/paper.yaml`` adds the section with
``agentcpm: {}`` (these defaults). The backbone is MiniCPM-V (Sec. 2.1); this project runs the
recipe on Qwen2.5-VL (ACPM-19 in ``docs/fidelity/agentcpm.md``).

``paper_recipe`` (not a paper value) decides whether the Table 4 / Table 5 values replace the
kernel keys of 07's AgentCPM-GUI stages (the paper profiles) or the profile's own kernel keys train
them (the tiny profile, whose random-init model does not move at lr 1e-6: its 07 experiment sets
``paper_recipe: false``). The keys that are not a training recipe (the reward's rules and schema,
the mapping variant, the de-duplication threshold, the grounding benchmark's size, the stage lengths
``sft.max_steps`` / ``rft.max_steps``) apply either way.

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
from typing import Any, Literal

from pydantic import Field

from guirl.configbase import RunConfig, Section
from guirl.methods.agentcpm.mapping import VARIANTS
from guirl.methods.agentcpm.reward import SCHEMAS, AgentCPMConfig

__all__ = [
    "AgentCPMRFT",
    "AgentCPMSFT",
    "AgentCPMSection",
    "longest_side_pixels",
    "rft_updates",
    "section",
    "sft_updates",
    "short_prompt",
]


class AgentCPMSFT(Section):
    """Stage II supervised fine-tuning (AgentCPM-GUI Table 4)."""

    max_line_res: int = Field(default=1120, ge=28)  # AgentCPM-GUI Table 4: longest image side (px)
    per_device_batch_size: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 4
    grad_accum: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 4
    epochs: float = Field(default=3, gt=0)  # AgentCPM-GUI Table 4
    learning_rate: float = Field(default=1e-5, gt=0)  # AgentCPM-GUI Table 4
    lr_scheduler_type: Literal["cosine"] = "cosine"  # AgentCPM-GUI Table 4
    warmup_ratio: float = Field(default=0.05, ge=0, lt=1)  # AgentCPM-GUI Table 4: linear warm-up
    bf16: bool = True  # AgentCPM-GUI Table 4
    gradient_checkpointing: bool = False  # AgentCPM-GUI Table 4
    history_turns: int = Field(default=3, ge=0, le=5)  # AgentCPM-GUI Sec. 2.4: multi-turn samples keep the last 3 turns
    # not a paper value: optimizer steps of 07's SFT stage; null: Table 4's epochs (paper recipe) or sft.max_steps
    max_steps: int | None = Field(default=None, ge=1)


class AgentCPMRFT(Section):
    """Stage III reinforcement fine-tuning, GRPO (AgentCPM-GUI Table 5), and its reward (Sec. 2.5.1)."""

    max_completion_length: int = Field(default=512, ge=1)  # AgentCPM-GUI Table 5
    max_line_res: int = Field(default=1120, ge=28)  # AgentCPM-GUI Table 5: longest image side (px)
    num_generations: int = Field(default=8, ge=2)  # AgentCPM-GUI Table 5
    per_device_batch_size: int = Field(default=1, ge=1)  # AgentCPM-GUI Table 5
    grad_accum: int = Field(default=32, ge=1)  # AgentCPM-GUI Table 5
    learning_rate: float = Field(default=1e-6, gt=0)  # AgentCPM-GUI Table 5
    epochs: float = Field(default=3, gt=0)  # AgentCPM-GUI Table 5
    weight_decay: float = Field(default=0.1, ge=0)  # AgentCPM-GUI Table 5
    max_grad_norm: float = Field(default=1.0, gt=0)  # AgentCPM-GUI Table 5
    beta: float = Field(default=0.04, ge=0)  # AgentCPM-GUI Table 5: KL coefficient
    bf16: bool = True  # AgentCPM-GUI Table 5
    reward_rules: Literal["agentcpm_reward", "agentcpm_reward_code"] = AgentCPMConfig().rules  # Sec. 2.5.1
    # Sec. 2.5.1 format check: "paper" = the App. C.2 schema read as AgentCPM-GUI's pipeline reads it
    # (ACPM-02/05/06); "released": the released schema (APPSELECT, start); "tolerant": this project's parser
    reward_schema: Literal[SCHEMAS] = AgentCPMConfig().schema  # type: ignore[valid-type]
    # not a paper value: RL steps of 07's RFT stage; null: Table 5's epochs over the training steps (paper
    # recipe) or rl.max_steps
    max_steps: int | None = Field(default=None, ge=1)


class AgentCPMSection(Section):
    """AgentCPM-GUI settings (module doc)."""

    # not a paper value: Tables 4-5 replace the kernel keys of 07's stages (false: the profile's kernel keys)
    paper_recipe: bool = True
    sft: AgentCPMSFT = Field(default_factory=AgentCPMSFT)
    rft: AgentCPMRFT = Field(default_factory=AgentCPMRFT)
    mapping_variant: Literal[VARIANTS] = "paper"  # type: ignore[valid-type]  # App. B tables ("released": code)
    # Sec. 2.4 drops a trajectory whose cosine similarity to a kept one of the same query exceeds "a fixed
    # threshold" it does not give: not a paper value
    dedup_threshold: float = Field(default=0.98, gt=-1, le=1)
    grounding_samples: int = Field(default=1500, ge=1)  # AgentCPM-GUI App. C.1: 1,500 samples per grounding task

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


def sft_updates(cfg: RunConfig) -> dict[str, Any]:
    """The ``Config.replace`` updates of 07's compact JSON SFT stage (Stage II): the ``agentcpm``
    output format and protocol, its system prompt (:func:`short_prompt`), and with ``paper_recipe``
    Table 4: ``sft.learning_rate`` / ``epochs`` / ``per_device_batch_size`` / ``grad_accum`` /
    ``warmup_ratio`` / ``lr_scheduler_type``, ``sft.histories`` = ``[<history_turns>AO]``,
    ``runtime.bf16``, ``runtime.activation_checkpointing`` = ``gradient_checkpointing`` and
    ``model.max_pixels`` from ``max_line_res`` (:func:`longest_side_pixels` of the data's screens,
    never above the profile's budget). ``sft.max_steps``: the section's when set, else null under the
    paper recipe (train Table 4's epochs), else the profile's."""
    sec = section(cfg)
    s = sec.sft
    out: dict[str, Any] = {
        "sft.output_format": "agentcpm",
        "sft.system_prompt": short_prompt(cfg),
        "sft.executor": None,
        "eval.protocol": "agentcpm",
    }
    if sec.paper_recipe:
        out.update(
            {
                "sft.learning_rate": s.learning_rate,
                "sft.epochs": s.epochs,
                "sft.max_steps": None,
                "sft.per_device_batch_size": s.per_device_batch_size,
                "sft.grad_accum": s.grad_accum,
                "sft.warmup_ratio": s.warmup_ratio,
                "sft.lr_scheduler_type": s.lr_scheduler_type,
                "sft.histories": [f"{s.history_turns}AO"],
                "runtime.bf16": s.bf16,
                "runtime.activation_checkpointing": s.gradient_checkpointing,
                **_pixels(cfg, s.max_line_res),
            }
        )
    if s.max_steps is not None:
        out["sft.max_steps"] = s.max_steps
    return out


def rft_updates(cfg: RunConfig, *, n_train_steps: int) -> dict[str, Any]:
    """The ``Config.replace`` updates of 07's RFT stage (Stage III) on top of :func:`sft_updates`: the
    generic single-turn GRPO role with AgentCPM-GUI's reward (``rl.role: grpo``, ``rl.reward:
    agentcpm``; the role binds the section's rules and schema), no dynamic sampling (Sec. 2.5 states
    none), ``rl.histories`` = the SFT stage's, and with ``paper_recipe`` Table 5:
    ``rl.max_new_tokens`` = ``max_completion_length``, ``rl.group_size`` = ``num_generations``,
    ``rl.micro_batch_size`` = ``per_device_batch_size``, one update per step over
    ``per_device_batch_size x grad_accum x runtime.num_processes`` completions, i.e.
    ``rl.prompts_per_step`` = that / ``num_generations`` (1 x 32 x 8 / 8 = 32 prompts),
    ``rl.mini_batches`` 1, ``rl.learning_rate``, ``rl.weight_decay``, ``rl.max_grad_norm``,
    ``rl.beta``, ``runtime.bf16``, ``model.max_pixels`` from ``max_line_res`` and ``rl.max_steps`` =
    ``ceil(epochs x n_train_steps / prompts_per_step)`` (``n_train_steps``: the recorded training
    steps, one RFT task each per history setting). ``rft.max_steps``, when set, gives the length."""
    sec = section(cfg)
    r = sec.rft
    out = sft_updates(cfg)
    histories = out.get("sft.histories", list(cfg.sft.histories))
    out.update({"rl.role": "grpo", "rl.reward": "agentcpm", "rl.dapo_std_threshold": None, "rl.histories": histories})
    if sec.paper_recipe:
        per_update = r.per_device_batch_size * r.grad_accum * cfg.runtime.num_processes
        prompts = max(1, per_update // r.num_generations)
        out.update(
            {
                "rl.max_new_tokens": r.max_completion_length,
                "rl.group_size": r.num_generations,
                "rl.micro_batch_size": r.per_device_batch_size,
                "rl.prompts_per_step": prompts,
                "rl.mini_batches": 1,
                "rl.learning_rate": r.learning_rate,
                "rl.weight_decay": r.weight_decay,
                "rl.max_grad_norm": r.max_grad_norm,
                "rl.beta": r.beta,
                "runtime.bf16": r.bf16,
                "rl.max_steps": max(1, math.ceil(r.epochs * n_train_steps * len(histories) / prompts)),
                **_pixels(cfg, r.max_line_res),
            }
        )
    if r.max_steps is not None:
        out["rl.max_steps"] = r.max_steps
    return out
