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

from collections.abc import Callable, Mapping
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
        paper: the short name of the paper it implements, a key of :data:`guirl.papers.PAPERS`
            (``"CCPO"``, ``"Co-EPG"``, ...), the one registry of the papers' titles, authors,
            references and text files (``semi_online``: ``"CCPO"``, whose SO-RL baseline it is).
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
        recipe: ``recipe(kind, data_source) -> {dotted key: value}``: the method's values for a
            recipe kind (``paper``, ``tiny``: :data:`guirl.configbase.RECIPE_KINDS`) and data
            source, from ``methods/<name>/config.py``, each value commented with the paper's table;
            applied with the profile (:func:`guirl.config.load_config`). Keys of its own section,
            and kernel keys only for the paper whose values the kernel sections hold (CCPO: 01's
            SFT and 02's RL). ``None``: the section's defaults on every profile.
        derived: ``{kernel key: what sets it}``: kernel keys the method's notebooks set per stage
            from their design (an RL run's role, its history setting), not from a user setting; the
            runner refuses an experiment file or an ``--override`` that sets one for those notebooks,
            naming what to set instead.
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
    output_format: str
    system_prompt: str | None
    eval_protocol: str | None
    reward: RewardSpec | None = None
    reward_rules: str | None = None
    config_section: type | None = None
    recipe: Callable[[str, str], Mapping[str, Any]] | None = None
    derived: Mapping[str, str] = field(default_factory=dict)
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
        object.__setattr__(self, "derived", MappingProxyType(dict(self.derived)))
