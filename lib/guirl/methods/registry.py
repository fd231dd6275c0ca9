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

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from guirl.rewards.base import RewardSpec
from guirl.rl.hooks import HookBuilder

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
        hooks: the method's RL **roles**: ``{role: builder}`` with ``builder(cfg, inputs) ->
            RLHooks`` (:data:`guirl.rl.hooks.HookBuilder`; ``inputs`` is a
            :class:`guirl.rl.hooks.HookInputs`: the data folder, the registry entry of
            ``rl.reward``, other stage inputs). A role is named after its method, alone
            (``"ccpo"``) or with a part (``"ces.coordinator"``, ``"ces.state_tracker"``); ``rl.role``
            selects one in ``guirl.stages.rl``, inside the stage process. Empty: the method trains
            nothing with RL of its own.
        notebooks: the notebooks that run the method.
        reads: the config keys (dotted prefixes) outside its own section that this method's
            roles and reward read (``ccpo`` reads ``semi_online``; CES's frozen executor
            generates with ``eval.max_new_tokens``): they enter the fingerprint of its RL stages
            (:meth:`guirl.config.BaseConfig.rl_sections`); a stage's process records what it
            read, and the tests check that every such key is declared.
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
    hooks: Mapping[str, HookBuilder] = field(default_factory=dict)
    notebooks: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    summary: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"guirl/methods/{self.name}/__init__.py"
        for role, builder in self.hooks.items():
            if role != self.name and not role.startswith(self.name + "."):
                raise ValueError(
                    f"{where}: role {role!r} must be named {self.name!r} or {self.name + '.<part>'!r} "
                    "(roles are unique across methods because each starts with its method's name)"
                )
            if not callable(builder):
                raise TypeError(f"{where}: the hook builder of role {role!r} is not callable: {builder!r}")
        object.__setattr__(self, "hooks", MappingProxyType(dict(self.hooks)))
