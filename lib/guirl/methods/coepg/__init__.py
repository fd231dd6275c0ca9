"""Co-EPG: co-evolution of a planning and a grounding model (Zhao et al., AAAI 2026, arXiv 2511.10705).

* :mod:`.agent`: the P-G dual model as one agent (planner -> plan, type, value; grounder -> point);
* :mod:`.prompts`: the planner's, the grounder's and the data-enhancement prompts;
* :mod:`.grounding`: grounding models with the confidence of eq. 6 from a forward pass;
* :mod:`.reward`: C-DREM (eq. 3-9) and the Table 4 ablations;
* :mod:`.rl`: GRPO of the planner (role ``coepg.planner``) with the C-DREM reward;
* :mod:`.data`: planner / verifier pools, data enhancement, the records of every SFT stage;
* :mod:`.data_quality`: purity and diversity (Sec. 5.7);
* :mod:`.config`: the ``coepg`` section and the stage configs derived from it.

Notebook ``03_coepg_iterations`` (``guirl.studies.coepg_iterations``) runs the iterations."""

from __future__ import annotations

from guirl.methods.coepg.config import DERIVED, PLANNER_ROLE, CoEPGSection, recipe
from guirl.methods.coepg.reward import CoEPGConfig, coepg_reward
from guirl.methods.coepg.rl import planner_rl_hooks
from guirl.methods.registry import Method
from guirl.rewards.base import RewardSpec

METHOD = Method(
    name="coepg",
    paper="Co-EPG",
    output_format="coepg_planner",
    system_prompt="coepg",  # Co-EPG Table 12 (system role); the user turn is Table 12 too
    eval_protocol="coepg",
    reward=RewardSpec("coepg", coepg_reward, CoEPGConfig, 0.0, 1.0, "Co-EPG Sec. 4.3 (C-DREM)", extras=("grounding",)),
    reward_rules="coepg_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=CoEPGSection,
    recipe=recipe,
    derived=DERIVED,
    hooks={PLANNER_ROLE: planner_rl_hooks},
    notebooks=("03_coepg_iterations",),
    summary="planner GRPO with the C-DREM grounding-ensemble reward; planner and grounder co-evolve",
)

__all__ = ["METHOD"]
