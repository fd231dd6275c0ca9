"""CES: Coordinator - frozen Executor - State Tracker (Deng et al., arXiv 2511.22235).

An RL-trained high-level Coordinator and State Tracker schedule a frozen low-level Executor on
long-horizon tasks; the reward scores the Executor's action (execution feedback,
:mod:`guirl.methods.ces.reward`); training is staged.

* :mod:`~guirl.methods.ces.roles`: the three roles' prompts (App. C) and the text parsers;
* :mod:`~guirl.methods.ces.agent`: the loop as a :class:`guirl.rollout.Agent` (``CESAgent``);
* :mod:`~guirl.methods.ces.data`: task states and the warm-up SFT records (App. B.1);
* :mod:`~guirl.methods.ces.rl`: the RL roles ``ces.coordinator`` (stage 1) and ``ces.state_tracker``
  (stage 2);
* :mod:`~guirl.methods.ces.analysis`: the failure taxonomy (Fig. 5) and temporal judgement (Fig. 2);
* :mod:`~guirl.methods.ces.config`: the ``ces`` config section.

The step tables are scored with the paper's rule, protocol ``ces_paper`` (Sec. 5.1: the point inside
the box, the scroll direction, text F1 > 0.5); ``ces`` (CES's released evaluator as run) is the
option (``eval.protocol: ces``)."""

from __future__ import annotations

from guirl.methods.ces.config import DERIVED, CESSection, recipe
from guirl.methods.ces.reward import CESConfig, ces_reward
from guirl.methods.ces.rl import HOOKS
from guirl.methods.registry import Method
from guirl.rewards.base import RewardSpec

METHOD = Method(
    name="ces",
    paper="CES",
    output_format="ces_executor",
    system_prompt=None,
    eval_protocol="ces_paper",  # CES Sec. 5.1 (CES-28/29); "ces": the released evaluator as run
    reward=RewardSpec(
        "ces",
        ces_reward,
        CESConfig,
        0.0,
        CESConfig().high,
        "CES eq. 21-25 (execution-feedback reward)",
        extras=("agent_output",),  # CES eq. 22: the format term reads the trained agent's own text
    ),
    reward_rules="ces_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=CESSection,
    recipe=recipe,
    derived=DERIVED,
    hooks=HOOKS,  # ces.coordinator (stage 1), ces.state_tracker (stage 2)
    notebooks=("04_ces_staged_rl",),
    reads=("eval.max_new_tokens", "eval.batch_size"),  # the frozen executor generates with them
    summary="coordinator / state tracker trained with execution feedback from a frozen executor",
)

__all__ = ["METHOD"]
