"""UI-S1 semi-online RL pieces as pure functions (Lu et al., "UI-S1: Advancing GUI Automation via
Semi-online Reinforcement Learning", arXiv 2509.11543, Sec. 3; released code ``uis1/core_uis1.py``
and ``verl/utils/dataset/universal_multiround.py``).

Semi-online rollout. The policy acts on an offline expert trajectory, conditioning on its *own*
earlier outputs. When its action does not match the expert's (UI-S1's ``extract_match`` is
false) the **patch module** replaces it with the expert action so the rollout can continue --
but only while the number of patches used so far in this trajectory is below the threshold
``epsilon`` (code: ``patch_threshold > error_num or patch_threshold == -1``); otherwise the
trajectory stops at that step. ``epsilon = 0`` is pure "stop at the first error", ``-1`` patches
without limit. The released scripts use ``PATCH_THRESHOLD=1`` (CCPO's UI-S1 fork).

Step returns (paper Eq. for the discounted future return; code ``compute_step_discounted_returns``):
``G_t = r_t + gamma * G_{t+1}`` computed backwards, except that a step whose action did not match
*cuts* the chain: ``G_t = r_t`` and the running return is reset to 0, so earlier steps see
neither that step's reward nor anything after it (``G_{t-1} = r_{t-1}`` if step t-1 matched). UI-S1's
example script uses ``gamma = 0.5``; CCPO's uses 0.3.

Advantages (code ``compute_uis1_outcome_advantage``): ``A = A_episode + omega * A_step`` where
``A_step`` normalises ``G_t`` within the group of rollouts of the same task at the same step
index, and ``A_episode`` normalises the episode-level return within the task's group;
``omega = step_advantage_w = 1.0``; ``mode`` ``"mean_std_norm"`` (GRPO) or ``"mean_norm"``
(mean only, the code's default). Singleton groups get 0 (see :mod:`guirl.rl.advantages`; the
code passes the raw score through for episode-level singletons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from guirl.rl.advantages import group_advantages

__all__ = [
    "PatchDecision",
    "patch_step",
    "simulate_patched_rollout",
    "discounted_step_returns",
    "discounted_step_returns_batch",
    "episode_returns",
    "uis1_advantages",
]


@dataclass(frozen=True)
class PatchDecision:
    """Outcome of one rollout step under the patch module.

    ``kind``: ``"keep"`` (the policy's action matched and is kept), ``"patch"`` (mismatch, replaced
    by the expert action; rollout continues) or ``"stop"`` (mismatch, patch budget spent; the
    trajectory ends after this step). ``patches_used``: patches spent in the trajectory so far,
    including this step.
    """

    kind: Literal["keep", "patch", "stop"]
    patches_used: int


def patch_step(matched: bool, patches_used: int, threshold: int) -> PatchDecision:
    """Patch-module decision for one step (``threshold = -1``: unlimited patches)."""
    if threshold < -1:
        raise ValueError(f"patch threshold must be >= -1, got {threshold}")
    if patches_used < 0:
        raise ValueError(f"patches_used must be >= 0, got {patches_used}")
    if matched:
        return PatchDecision("keep", patches_used)
    if threshold == -1 or patches_used < threshold:
        return PatchDecision("patch", patches_used + 1)
    return PatchDecision("stop", patches_used)


def simulate_patched_rollout(matches: Sequence[bool], threshold: int) -> list[PatchDecision]:
    """Decisions along a trajectory whose per-step match outcomes are ``matches``.

    The returned list is as long as the steps actually generated: it ends at the first ``"stop"``
    (inclusive) or at the end of the expert trajectory.
    """
    out: list[PatchDecision] = []
    used = 0
    for m in matches:
        d = patch_step(bool(m), used, threshold)
        out.append(d)
        used = d.patches_used
        if d.kind == "stop":
            break
    return out


def discounted_step_returns(
    rewards: Sequence[float], gamma: float, matches: Sequence[bool] | None = None
) -> list[float]:
    """UI-S1 step returns for one trajectory, in step order (module doc).

    ``matches[t] = False`` cuts the chain at ``t`` (``G_t = r_t``); ``matches=None`` is the plain
    discounted return.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if matches is not None and len(matches) != len(rewards):
        raise ValueError(f"{len(matches)} match flags for {len(rewards)} rewards")
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        if matches is None or matches[t]:
            running = float(rewards[t]) + gamma * running
            out[t] = running
        else:
            running = 0.0
            out[t] = float(rewards[t])
    return out


def discounted_step_returns_batch(
    rewards: torch.Tensor,
    traj_ids: torch.Tensor,
    step_ids: torch.Tensor,
    gamma: float,
    matches: torch.Tensor | None = None,
) -> torch.Tensor:
    """Batched :func:`discounted_step_returns` over flattened steps.

    Args:
        rewards: ``(N,)`` step rewards; traj_ids: ``(N,)`` trajectory id; step_ids: ``(N,)`` step
            index within the trajectory (rows may come in any order); matches: ``(N,)`` bool.
    Returns:
        ``(N,)`` returns aligned with the input rows.
    """
    if not (rewards.shape == traj_ids.shape == step_ids.shape) or rewards.dim() != 1:
        raise ValueError("rewards, traj_ids and step_ids must be 1-D of equal length")
    out = torch.zeros_like(rewards, dtype=torch.float64)
    for tid in torch.unique(traj_ids):
        rows = (traj_ids == tid).nonzero(as_tuple=True)[0]
        order = rows[torch.argsort(step_ids[rows])]
        if torch.unique(step_ids[order]).numel() != order.numel():
            raise ValueError(f"trajectory {int(tid)} has repeated step ids")
        m = None if matches is None else [bool(v) for v in matches[order]]
        g = discounted_step_returns([float(v) for v in rewards[order]], gamma, m)
        out[order] = torch.tensor(g, dtype=torch.float64)
    return out.to(rewards.dtype if rewards.dtype.is_floating_point else torch.float32)


def episode_returns(rewards: torch.Tensor, traj_ids: torch.Tensor) -> torch.Tensor:
    """``(N,)`` -> ``(N,)``: each step gets the undiscounted sum of its trajectory's step rewards."""
    _, inv = torch.unique(traj_ids, return_inverse=True)
    sums = torch.zeros(int(inv.max()) + 1 if inv.numel() else 0, dtype=torch.float64).index_add_(
        0, inv, rewards.to(torch.float64)
    )
    return sums[inv].to(rewards.dtype)


def uis1_advantages(
    episode_return: torch.Tensor,
    step_return: torch.Tensor,
    group_ids: torch.Tensor,
    step_ids: torch.Tensor,
    *,
    omega: float = 1.0,
    mode: Literal["mean_norm", "mean_std_norm"] = "mean_norm",
    eps: float = 1e-6,
) -> torch.Tensor:
    """UI-S1 step advantage ``A_episode + omega * A_step`` (module doc).

    Args:
        episode_return: ``(N,)`` episode-level return of each step's trajectory.
        step_return: ``(N,)`` discounted step return ``G_t``.
        group_ids: ``(N,)`` task (prompt) id; the rollouts of one task form a group.
        step_ids: ``(N,)`` step index; step-level groups are (task, step).
        omega: step-advantage weight (UI-S1 ``step_advantage_w``, 1.0).
        mode: ``"mean_norm"`` (mean only; UI-S1 code default) or ``"mean_std_norm"``.
    Returns:
        ``(N,)`` advantages.
    """
    scale = "none" if mode == "mean_norm" else "std"
    if mode not in ("mean_norm", "mean_std_norm"):
        raise ValueError(f"mode must be mean_norm or mean_std_norm, got {mode!r}")
    a_ep = group_advantages(episode_return, group_ids, scale=scale, eps=eps)
    # composite (task, step) key without collisions: rank-encode both ids
    _, gi = torch.unique(group_ids, return_inverse=True)
    _, si = torch.unique(step_ids, return_inverse=True)
    step_group = gi * (int(si.max()) + 1 if si.numel() else 1) + si
    a_st = group_advantages(step_return, step_group, scale=scale, eps=eps)
    return a_ep + omega * a_st
