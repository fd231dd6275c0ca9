"""AndroidLong: long looping Android tasks (supplementary material only).

Online evaluation of long tasks with state-checked subgoals (Task SR, Subgoal SR, mean and
standard deviation over three runs of the same tasks, :mod:`guirl.metrics.androidlong`), memory
carried in the model's reasoning (:mod:`guirl.methods.androidlong.memory`), online GRPO on long-loop
tasks with a Subgoal-SR reward (role ``androidlong``, :mod:`guirl.methods.androidlong.rl`) and the
error taxonomy of App. D.1 (:mod:`guirl.methods.androidlong.errors`). The paper scores whole
episodes, not steps, so the method has no step protocol."""

from __future__ import annotations

from guirl.methods.androidlong.config import DERIVED, AndroidLongSection, recipe
from guirl.methods.androidlong.rl import androidlong_rl_hooks
from guirl.methods.registry import Method

METHOD = Method(
    name="androidlong",
    paper="AndroidLong",
    output_format="androidlong",
    system_prompt="androidlong",  # AndroidLong App. F.1
    eval_protocol=None,
    reward=None,
    config_section=AndroidLongSection,
    recipe=recipe,
    derived=DERIVED,
    hooks={"androidlong": androidlong_rl_hooks},
    notebooks=("07_agentcpm_androidlong",),
    reads=("data.width", "data.height", "eval.max_turns"),  # its online rollouts play MiniGUI episodes
    summary="long looping tasks scored by Task SR / Subgoal SR over three runs; memory in the reasoning; online GRPO",
)

__all__ = ["METHOD"]
