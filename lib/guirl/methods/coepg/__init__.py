"""Co-EPG: co-evolution of a planning and a grounding model (Zhao et al., AAAI 2026, arXiv 2511.10705).

GRPO for the planner with a confidence-weighted ensemble of grounding models as the reward
(C-DREM, :mod:`guirl.methods.coepg.reward`) and data enhancement for the grounder between
iterations (data purity / diversity, :mod:`guirl.methods.coepg.data_quality`)."""

from __future__ import annotations

from guirl.methods.coepg.config import CoEPGSection
from guirl.methods.coepg.reward import CoEPGConfig, coepg_reward
from guirl.methods.registry import Method
from guirl.rewards.base import RewardSpec

METHOD = Method(
    name="coepg",
    paper="Co-EPG",
    title="Co-EPG: A Framework for Co-Evolution of Planning and Grounding in Autonomous GUI Agents",
    reference="AAAI 2026, arXiv 2511.10705",
    paper_file="001_f0ca38cf3ec0c5b8.txt",
    output_format="coepg_planner",
    system_prompt="coepg",  # Co-EPG Table 12 (system role); the user turn is Table 12 too
    eval_protocol="coepg",
    reward=RewardSpec("coepg", coepg_reward, CoEPGConfig, 0.0, 1.0, "Co-EPG Sec. 4.3 (C-DREM)", extras=("grounding",)),
    reward_rules="coepg_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=CoEPGSection,
    notebooks=("03_coepg_iterations",),
    summary="planner GRPO with the C-DREM grounding-ensemble reward; planner and grounder co-evolve",
)

__all__ = ["METHOD"]
