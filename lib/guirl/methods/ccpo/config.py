"""The ``ccpo`` config section: CASC and the distance-based reward (CCPO Secs. 3.2-3.4, App. A.2.1,
A.4), and CCPO's recipe (:func:`recipe`). The semi-online settings CCPO shares with SO-RL (discount,
patch threshold, advantage weight, Table 8) are the ``semi_online`` section
(:class:`guirl.rl.semi_online.SemiOnlineConfig`), the number of rollouts N is ``rl.group_size``
(8, CCPO App. A.5) and the DAPO threshold ``rl.dapo_std_threshold``: one source for each value.

CCPO's SFT (Table 7) and RL (Table 8) settings are the kernel ``lora``, ``sft`` and ``rl`` keys of
the paper profiles: notebook 01 trains CCPO's SFT baselines (CCPO Table 2) and 02 its RL from
them, so :func:`recipe` is the one recipe that sets kernel keys; every other paper trains its
stages with its own section's values (``methods/<paper>/config.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from guirl.configbase import MAX_EPOCHS, MAX_RANK, MAX_RUNS, MAX_STEPS, PROFILE, Section
from guirl.methods.ccpo.casc import DEFAULT_MARGIN_PX, DEFAULT_MIN_SIZE_PX
from guirl.methods.ccpo.reward import CCPOConfig

__all__ = ["CCPOEval", "CCPORL", "CCPOSection", "DERIVED", "recipe", "reward_config", "rl_steps"]


class CCPOEval(Section):
    """How notebooks 02 and 05 evaluate the many models they compare (stage values of ``eval``)."""

    mirrors: ClassVar[str] = "eval"
    max_test_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # CCPO scores whole test sets


class CCPORL(Section):
    """The length of notebook 02's RL runs (SO-RL, CCPO and the ablations; CCPO Table 8): stage value
    of ``rl.max_steps``, and ``epochs``, CCPO's own unit. ``max_steps`` null: ``epochs`` passes over
    the training trajectories, ``ceil(epochs x tasks / rl.prompts_per_step)`` steps
    (:func:`rl_steps`); an ``--override rl.max_steps=N`` sets ``max_steps`` and wins."""

    mirrors: ClassVar[str] = "rl"
    own: ClassVar[tuple[str, ...]] = ("epochs",)
    epochs: float = Field(default=3, gt=0, le=MAX_EPOCHS)  # CCPO Table 8 total_epochs (AC, GUI O: 3; AITW, M2W: 8)
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # null: epochs (not a paper value)


def rl_steps(section: CCPORL, n_tasks: int, prompts_per_step: int) -> int:
    """The RL steps of a 02 run: ``section.max_steps``, else ``ceil(epochs x n_tasks /
    prompts_per_step)`` (``n_tasks``: training trajectories, each one task of ``prompts_per_step``
    a step; CCPO Table 8 ``total_epochs`` over ``train_batch_size``), at least 1."""
    if section.max_steps is not None:
        return section.max_steps
    return max(1, math.ceil(section.epochs * n_tasks / prompts_per_step))


class CCPOSection(Section):
    """CCPO's own settings (module doc).

    ``compress``: ``max`` (MAX-COMPRESS, the main results), ``min`` (MIN-COMPRESS, App. A.4) or
    ``none`` (full history screenshots: CCPO's loop without CASC). ``reward_variant``: ``paper``
    (eqs. 11-13) or ``code`` (the released reward, :meth:`CCPOConfig.code`). ``tau_min``: the
    full-credit radius (``null``: the variant's, 0.04 for the paper, App. A.2.1; 0.1 is the
    alternative the paper tried on AC and AITW). ``distance_credit``: ``false`` is "w/o CR"
    (Tables 5 and 17). ``margin_px`` / ``min_size_px``: ROI padding and smallest side in
    model-view pixels (not in the paper). The ROI of a history step aggregates the annotated
    point, every rollout's point and the acted element's box (``target_box``) when the record has
    one (eq. 9 and Sec. 3.3 Action Tracking, "coordinate bounding boxes if present");
    ``include_candidates: true`` adds the corners of every candidate box as the released code does
    (on AndroidControl the clickable nodes containing the point, the converted files' boxes:
    :mod:`guirl.data.loaders.androidcontrol`). ``coordinate_steps``: which history steps are
    cropped: ``gt`` (the annotated action is a coordinate action, the paper) or ``any`` (any
    source has a point, the released code). ``scroll_is_coordinate``: scroll is a coordinate
    action (Sec. 3.3) for CASC and the reward. ``match_rule``: what "matched" means for the
    semi-online patch module and the cut of the step returns: ``semi_online`` (the rule SO-RL
    decides with, ``semi_online.match_rules``: CCPO follows SO-RL's procedure, App. A.1.2) or
    ``ccpo_reward`` (type right and full accuracy credit of CCPO's reward, within ``tau_min``: an
    option, not in the paper). ``ablation_history`` / ``ablation_group_sizes``:
    the setting and the rollout counts of notebook 02's ablations (Tables 5, 10, 11), and
    ``ablation_max_steps`` their RL steps (``null``: ``rl.max_steps``, the main runs'); they do not
    change the main runs.
    """

    compress: Literal["max", "min", "none"] = "max"  # CCPO App. A.4: MAX-COMPRESS in the main paper
    reward_variant: Literal["paper", "code"] = "paper"  # CCPO eqs. 11-13; "code": released reward
    tau_min: float | None = Field(default=None, ge=0, le=1)  # None: the variant's (paper: 0.04, CCPO App. A.2.1)
    distance_credit: bool = True  # CCPO Sec. 3.4 Coordinate-Aware Reward; false: "w/o CR" (Tables 5, 17)
    margin_px: int = Field(
        default=DEFAULT_MARGIN_PX, ge=0, le=MAX_RANK
    )  # not in the paper: released code coords_to_bbox
    min_size_px: int = Field(
        default=DEFAULT_MIN_SIZE_PX, ge=28, le=MAX_RANK
    )  # not in the paper: 2 visual tokens per side
    include_candidates: bool = False  # CCPO eq. 9 + Sec. 3.3: the acted element's box only; true: released code
    coordinate_steps: Literal["gt", "any"] = "gt"  # CCPO Sec. 3.3 / App. A.4; "any": released code
    scroll_is_coordinate: bool = True  # CCPO Sec. 3.3: "we treat scroll as a coordinate action"
    match_rule: Literal["semi_online", "ccpo_reward"] = "semi_online"  # CCPO A.1.2: SO-RL's procedure
    # Notebook 02's ablation grid (guirl.studies.ccpo_rl.ablation_runs), all at one history setting:
    # Table 5 (+CASC without the distance reward), Table 10 (MIN-COMPRESS) and Table 11 (rollouts).
    ablation_history: str | None = "3AO"  # CCPO Table 11 rows are 3AO (Table 5 does not say); null: none
    ablation_group_sizes: list[Annotated[int, Field(le=MAX_RUNS)]] = Field(
        default_factory=lambda: [2, 4, 8, 12, 16]
    )  # CCPO Table 11
    ablation_max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # null: rl.max_steps (not a paper value)
    eval: CCPOEval = Field(default_factory=CCPOEval)  # 02's and 05's evaluation of many models
    rl: CCPORL = Field(default_factory=CCPORL)  # 02's RL length (CCPO Table 8)

    @field_validator("ablation_history")
    @classmethod
    def _history_tag(cls, value: str | None) -> str | None:
        if value is not None and not (value[:-2].isdigit() and value.endswith("AO") and int(value[:-2]) >= 1):
            raise ValueError(f"{value!r} is not a history tag; use e.g. 1AO or 3AO, or null for no ablations")
        return value

    @field_validator("ablation_group_sizes")
    @classmethod
    def _group_sizes(cls, value: list[int]) -> list[int]:
        if any(g < 2 for g in value):
            raise ValueError(f"{value}: a GRPO group needs at least 2 rollouts")
        return value


def reward_config(section: CCPOSection) -> CCPOConfig:
    """The :class:`CCPOConfig` of a ``ccpo`` section (variant, then ``tau_min``, ``distance_credit``
    and ``scroll_is_coordinate`` on top)."""
    from dataclasses import replace

    base = CCPOConfig.variant(section.reward_variant)
    tau_min = base.tau_min if section.tau_min is None else float(section.tau_min)
    scroll = section.scroll_is_coordinate if section.reward_variant == "paper" else base.scroll_is_coordinate
    return replace(base, tau_min=tau_min, distance_credit=section.distance_credit, scroll_is_coordinate=scroll)


#: Kernel keys notebook 02 sets per RL run (``Method.derived``): an experiment or override of one is refused.
DERIVED: dict[str, str] = {
    "rl.role": "its grid trains the roles semi_online and ccpo (ccpo.ablation_* for the ablations)",
    "rl.reward": "each run trains with its role's own reward (the '+ CASC' ablation with semi_online's)",
    "rl.histories": "one run per eval.histories setting, the ablations at ccpo.ablation_history",
}


@dataclass(frozen=True)
class _Column:
    """One data set's column of CCPO Tables 7 (SFT) and 8 (RL)."""

    sft_learning_rate: float
    grad_accum: int  # global batch / (1 per device x 8 GPUs); CCPO gives only the global batch
    prompts_per_step: int  # Table 8 train_batch_size (trajectories per step)
    dapo_std_threshold: float
    rl_epochs: float  # Table 8 total_epochs


#: CCPO Tables 7-8 by data source; AITZ, AMEX (CES's data sets) and MiniGUI take the AC column.
_COLUMNS = {
    "androidcontrol": _Column(
        3e-5, 8, 32, 0.2, 3
    ),  # CCPO Table 7 AC: lr 3e-5, global batch 64; Table 8 AC: 32, DAPO 0.2
    "guiodyssey": _Column(3e-4, 8, 8, 0.1, 3),  # CCPO Table 7 GUI O: lr 3e-4, global batch 64; Table 8: 8, DAPO 0.1
    "mind2web": _Column(3e-4, 2, 16, 0.1, 8),  # CCPO Table 7 M2W: lr 3e-4, global batch 16; Table 8: 16, DAPO 0.1
}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """CCPO's values for a recipe kind and data source (:mod:`guirl.configbase`, recipes).

    ``paper``: CCPO Table 7 (LoRA and SFT; AITW's column has no data source here) and Table 8 (RL)
    in the data set's column, as the kernel ``lora`` / ``sft`` / ``rl`` keys (module doc), and the
    ``ccpo`` section's defaults. ``tiny``: notebook 02's ablation grid and evaluation budget for 2
    CPU cores (not paper values); the tiny profile's kernel keys are its own."""
    if kind == "tiny":
        return {
            "ccpo.ablation_history": "1AO",  # 02's Tables 5 / 10 / 11 runs at 1AO (CPU budget; CCPO Table 11 is 3AO)
            "ccpo.ablation_group_sizes": [2, 8],  # CCPO Table 11 ablates 2 / 4 / 8 / 12 / 16; 4 is the main run here
            "ccpo.eval.max_test_steps": 60,  # 02 and 05 evaluate many trained models: first 60 steps per split
            "ccpo.rl.max_steps": PROFILE,  # the tiny profile's rl.max_steps (CPU budget), not epochs
        }
    col = _COLUMNS.get(data_source, _COLUMNS["androidcontrol"])
    return {
        "lora.enabled": True,
        "lora.r": 8,  # CCPO Table 7 (LoRA rank)
        "lora.alpha": 16,  # CCPO Table 7 (LoRA alpha)
        "lora.dropout": 0.1,  # CCPO Table 7 (LoRA dropout)
        "sft.learning_rate": col.sft_learning_rate,  # CCPO Table 7 (the data set's column)
        "sft.epochs": 3,  # CCPO Table 7 (AC, GUI O, M2W; AITW: 10)
        "sft.max_steps": None,  # train by epochs
        "sft.per_device_batch_size": 1,  # x grad_accum x 8 GPUs = Table 7's global batch; CCPO is silent on the split
        "sft.grad_accum": col.grad_accum,
        "sft.warmup_ratio": 0.01,  # CCPO Table 7 (warm up 0.01)
        "sft.lr_scheduler_type": "constant_with_warmup",  # CCPO Table 7: constant schedule after the warm-up
        "rl.learning_rate": 5e-7,  # CCPO Table 8 (all parameters)
        "rl.prompts_per_step": col.prompts_per_step,  # CCPO Table 8 train_batch_size
        "rl.group_size": 8,  # CCPO App. A.5: 8 rollouts per task (Table 11 ablates 2-16)
        "rl.max_new_tokens": 128,  # CCPO Table 8 max_response_length
        "rl.beta": 1e-4,  # CCPO Table 8 kl_loss_coef
        "rl.dapo_std_threshold": col.dapo_std_threshold,  # CCPO Table 8 DAPO threshold
        "rl.mini_batches": 4,  # CCPO Table 8 fixed_num_mini_batches
        "rl.micro_batch_size": 1,  # CCPO Table 8 ppo_micro_batch_size_per_gpu
        "ccpo.rl.epochs": col.rl_epochs,  # CCPO Table 8 total_epochs (the data set's column)
    }
