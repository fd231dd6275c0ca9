"""The :class:`Method` record: what binds one paper to the shared kernels.

A method folder (``guirl/methods/<name>/``) holds only what that paper uses (its reward, its
algorithms such as CCPO's CASC or Co-EPG's C-DREM, its config section) and exports one
``METHOD`` record. The record names, as data, which shared pieces the paper trains and evaluates
with: the output format (:mod:`guirl.actions.formats`), the system prompt (:mod:`guirl.prompts`),
the evaluation protocol (:mod:`guirl.metrics.protocols`) and the reward. Kernels never import a
method; methods never import each other (``tests/test_layout.py``); notebooks, the runner and the
config schema read the registry in :mod:`guirl.methods`.

This module is imported by every method, so it imports nothing from ``guirl.methods``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guirl.rewards.base import RewardSpec

if TYPE_CHECKING:  # the run config (top layer) and the engine's hook record, for annotations only
    from guirl.config import Config
    from guirl.train.rl import RLHooks

__all__ = ["Method"]


@dataclass(frozen=True)
class Method:
    """One paper's binding to the shared kernels.

    Attributes:
        name: registry key and the name of the method's config section (``cfg.<name>``).
        paper: short paper name used in citations (``"CCPO"``, ``"Co-EPG"``, ...).
        title: the paper's title.
        reference: arXiv id or venue (``"arXiv 2601.11631"``).
        paper_file: file name of the paper's full text (the plain-text extraction the project
            works from; ``docs/papers.md`` says which file is which paper).
        output_format: the :mod:`guirl.actions.formats` name the policy writes.
        system_prompt: the registered system prompt (:data:`guirl.prompts.PROMPTS`) trained and
            evaluated with (``None``: the paper gives none; CES's role prompts are user turns,
            ``ces_coordinator`` / ``ces_executor`` / ``ces_state_tracker``).
        eval_protocol: the :mod:`guirl.metrics.protocols` name the paper's step tables are scored with
            (``None`` for a paper that scores whole episodes online, like AndroidLong).
        reward: the RL reward (``None`` for a method without RL).
        reward_rules: the matching rule set (:mod:`guirl.matching`) the reward trains with, when
            it differs from the evaluation protocol's (``None``: same as ``eval_protocol``).
        config_section: the pydantic model of ``cfg.<name>`` (``None``: no section yet).
        rl_hooks: ``rl_hooks(cfg, data_dir, reward) -> RLHooks``: the hooks of the RL engine
            (:mod:`guirl.train.rl`) for this method on the ``train`` split under ``data_dir``;
            ``reward`` is the registry entry of ``rl.reward`` (``None``: the method's own).
            ``rl.method: <name>`` selects it in ``guirl.stages.rl`` (``None``: the method has no
            RL stage of its own). Called inside the stage process.
        notebooks: the notebooks that run the method.
        summary: one line for listings.
    """

    name: str
    paper: str
    title: str
    reference: str
    paper_file: str
    output_format: str
    system_prompt: str | None
    eval_protocol: str | None
    reward: RewardSpec | None = None
    reward_rules: str | None = None
    config_section: type | None = None
    rl_hooks: Callable[[Config, Path, RewardSpec | None], RLHooks] | None = None
    notebooks: tuple[str, ...] = ()
    summary: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
