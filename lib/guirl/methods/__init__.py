"""Methods by paper: one folder per paper, one :class:`~guirl.methods.registry.Method` record each.

>>> import guirl.methods as m
>>> m.names()
['agentcpm', 'androidlong', 'ccpo', 'ces', 'coepg', 'semi_online']

Shared kernels (``actions``, ``matching``, ``metrics``, ``rewards``, ``rl``, ``rollout``,
``train``, ``env``, ``data``, ``models``, ``analysis``, ``prompts``) never import this package;
a method never imports another method. The config schema, the runner and the notebooks read the
registry here. ``docs/architecture.md`` describes the layers.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from guirl.methods.registry import Method
from guirl.rewards import KERNEL_REWARDS
from guirl.rewards.base import RewardSpec
from guirl.rl.hooks import HookBuilder, HookInputs, RLHooks, single_turn_hooks

__all__ = [
    "Method",
    "METHODS",
    "REWARDS",
    "GENERIC_ROLES",
    "DEFAULT_REWARD",
    "get",
    "names",
    "all_methods",
    "get_reward",
    "reward_fn",
    "reward_names",
    "roles",
    "role_names",
    "get_role",
]

#: The method folders. Each is imported on first use of the registry (never at ``import
#: guirl.methods``), so that importing one method loads no other.
_MODULES: tuple[str, ...] = ("agentcpm", "androidlong", "ccpo", "ces", "coepg", "semi_online")


@cache
def _methods() -> dict[str, Method]:
    out: dict[str, Method] = {}
    for name in _MODULES:
        method = importlib.import_module(f"guirl.methods.{name}").METHOD
        if method.name != name:
            raise RuntimeError(f"guirl/methods/{name}/__init__.py: METHOD.name is {method.name!r}, expected {name!r}")
        out[name] = method
    return out


@cache
def _rewards() -> dict[str, RewardSpec]:
    return {**{m.name: m.reward for m in _methods().values() if m.reward is not None}, **KERNEL_REWARDS}


def __getattr__(name: str) -> Any:
    """``METHODS`` (name -> :class:`Method`) and ``REWARDS`` (every selectable reward: the methods'
    rewards keyed by method name, plus the kernel baselines of :data:`guirl.rewards.KERNEL_REWARDS`)."""
    if name == "METHODS":
        return dict(_methods())
    if name == "REWARDS":
        return dict(_rewards())
    raise AttributeError(f"module 'guirl.methods' has no attribute {name!r}")


def names() -> list[str]:
    """The registered method names, sorted."""
    return sorted(_MODULES)


def all_methods() -> list[Method]:
    """The registered methods, sorted by name."""
    return [_methods()[n] for n in names()]


def get(name: str) -> Method:
    """The method called ``name``; a ``KeyError`` naming the known ones otherwise."""
    try:
        return _methods()[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known methods: {', '.join(names())}") from None


def reward_names() -> list[str]:
    """Every selectable reward name, sorted."""
    return sorted(_rewards())


def get_reward(name: str) -> RewardSpec:
    """The reward called ``name`` (a method's or a kernel baseline's)."""
    try:
        return _rewards()[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; known rewards: {', '.join(reward_names())}") from None


def reward_fn(cfg: Any, spec: RewardSpec) -> Any:
    """The function of reward ``spec`` bound to the run config: a method's reward takes the settings
    of its method's section when the run sets that section and the section builds them
    (``reward_config()``, e.g. ``agentcpm.rft.reward_rules`` / ``reward_schema``); otherwise the
    reward's own defaults."""
    from functools import partial

    section = getattr(cfg, spec.name, None)
    if spec.name in _MODULES and section is not None and hasattr(section, "reward_config"):
        return partial(spec.fn, cfg=section.reward_config())
    return spec.fn


#: The reward of the generic role ``grpo`` when ``rl.reward`` is ``null``.
DEFAULT_REWARD = "ccpo"


def _grpo_hooks(cfg: Any, inputs: HookInputs) -> RLHooks:
    """Role ``grpo``: single-turn GRPO (:func:`guirl.rl.hooks.single_turn_hooks`) with the reward
    of ``rl.reward`` (``null``: CCPO's reward), bound to its method's section (:func:`reward_fn`)."""
    spec = inputs.reward or get_reward(DEFAULT_REWARD)
    return single_turn_hooks(cfg, inputs, reward_fn(cfg, spec))


#: Roles that belong to no paper: ``grpo`` is single-turn GRPO on recorded steps with any
#: registered reward (``rl.reward``), e.g. AgentCPM-GUI's RFT with ``rl.reward: agentcpm``.
GENERIC_ROLES: dict[str, HookBuilder] = {"grpo": _grpo_hooks}


@cache
def _roles() -> dict[str, HookBuilder]:
    out = dict(GENERIC_ROLES)
    for method in _methods().values():
        out.update(method.hooks)  # Method checks that each role starts with its own name: no clash
    return out


def roles() -> dict[str, HookBuilder]:
    """Every RL role: the generic ones (:data:`GENERIC_ROLES`) and each method's ``Method.hooks``."""
    return dict(_roles())


def role_names() -> list[str]:
    """Every RL role name (``rl.role`` accepts these), generic roles first, then sorted."""
    return [*GENERIC_ROLES, *sorted(r for r in _roles() if r not in GENERIC_ROLES)]


def get_role(name: str) -> HookBuilder:
    """The hook builder of RL role ``name``; a ``KeyError`` naming the known roles otherwise."""
    try:
        return _roles()[name]
    except KeyError:
        raise KeyError(f"unknown RL role {name!r}; known roles: {', '.join(role_names())}") from None
