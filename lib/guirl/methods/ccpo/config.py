"""The ``ccpo`` config section: CASC and the distance-based reward (CCPO Secs. 3.2-3.4, App. A.2.1,
A.4). The semi-online settings CCPO shares with SO-RL (discount, patch threshold, advantage
weight, Table 8) are the ``semi_online`` section (:class:`guirl.rl.semi_online.SemiOnlineConfig`),
the number of rollouts N is ``rl.group_size`` (8, CCPO App. A.5) and the DAPO threshold
``rl.dapo_std_threshold``: one source for each value.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from guirl.configbase import Section
from guirl.methods.ccpo.casc import DEFAULT_MARGIN_PX, DEFAULT_MIN_SIZE_PX
from guirl.methods.ccpo.reward import CCPOConfig

__all__ = ["CCPOSection", "reward_config"]


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
    tau_min: float | None = Field(default=None, ge=0)  # None: the variant's (paper: 0.04, CCPO App. A.2.1)
    distance_credit: bool = True  # CCPO Sec. 3.4 Coordinate-Aware Reward; false: "w/o CR" (Tables 5, 17)
    margin_px: int = Field(default=DEFAULT_MARGIN_PX, ge=0)  # not in the paper: released code coords_to_bbox
    min_size_px: int = Field(default=DEFAULT_MIN_SIZE_PX, ge=28)  # not in the paper: 2 visual tokens per side
    include_candidates: bool = False  # CCPO eq. 9 + Sec. 3.3: the acted element's box only; true: released code
    coordinate_steps: Literal["gt", "any"] = "gt"  # CCPO Sec. 3.3 / App. A.4; "any": released code
    scroll_is_coordinate: bool = True  # CCPO Sec. 3.3: "we treat scroll as a coordinate action"
    match_rule: Literal["semi_online", "ccpo_reward"] = "semi_online"  # CCPO A.1.2: SO-RL's procedure
    # Notebook 02's ablation grid (guirl.studies.ccpo_rl.ablation_runs), all at one history setting:
    # Table 5 (+CASC without the distance reward), Table 10 (MIN-COMPRESS) and Table 11 (rollouts).
    ablation_history: str | None = "3AO"  # CCPO Table 11 rows are 3AO (Table 5 does not say); null: none
    ablation_group_sizes: list[int] = Field(default_factory=lambda: [2, 4, 8, 12, 16])  # CCPO Table 11
    ablation_max_steps: int | None = Field(default=None, ge=1)  # null: rl.max_steps (not a paper value)

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
