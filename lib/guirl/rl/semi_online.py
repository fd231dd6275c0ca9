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
``omega = step_advantage_w = 1.0`` (CCPO Table 8 "Advantage weight"); ``mode`` ``"mean_std_norm"``
(GRPO, the released training script) or ``"mean_norm"`` (mean only, the code's default).
Singleton groups get 0 (see :mod:`guirl.rl.advantages`; the code passes the raw score through
for episode-level singletons). Two readings of the episode-level return
(:func:`semi_online_advantages`): ``"trajectory"`` (default) normalises each trajectory's return
(the sum of its step rewards) over the task's N trajectories, one value per trajectory;
``"step_reward"`` is the released code (``episode_norm_reward`` with
``compute_mean_std_cross_all_data=True``): each step's own reward normalised over every step of
every trajectory of the task.

DAPO dynamic sampling as the released trainer applies it to trajectories (``dapo_ray_trainer.py``,
``filter_groups.metric = seq_future_reward``): a task's group is kept when the population std
(``np.std``) of its trajectories' step-0 returns ``G_0`` exceeds the threshold (CCPO Table 8
"DAPO threshold"), or when it has a single trajectory (:func:`trajectory_dapo_keep`). When more
groups than the batch holds were accumulated, CCPO Algorithm 1 (line 26) keeps the "top-B by
DAPO": :func:`select_top_groups` ranks by that std (the released code keeps the first B in draw
order, a TODO in it says the highest-std ones were meant).

:class:`SemiOnlineConfig` is the ``semi_online`` config section (CCPO Table 8; shared by every
method trained with semi-online rollouts: SO-RL and CCPO).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import Field, field_validator

from guirl.configbase import MAX_COEF, MAX_STEPS, Section
from guirl.rl.advantages import group_advantages

__all__ = [
    "SemiOnlineConfig",
    "semi_online_advantages",
    "trajectory_dapo_keep",
    "trajectory_dapo_std",
    "select_top_groups",
    "PatchDecision",
    "patch_step",
    "simulate_patched_rollout",
    "discounted_step_returns",
    "discounted_step_returns_batch",
    "episode_returns",
    "uis1_advantages",
]


class SemiOnlineConfig(Section):
    """The ``semi_online`` config section: semi-online RL as CCPO runs it (CCPO Table 8, App. A.1.2;
    UI-S1 released scripts where the paper is silent). Defaults are the AndroidControl column; the
    per-data-set values are the semi_online recipe (``guirl/methods/semi_online/config.py``). The DAPO threshold is
    ``rl.dapo_std_threshold`` and the number of rollouts ``rl.group_size`` (one source each).

    ``gamma``: reward discount of the step returns. ``patch_threshold``: patches allowed per
    trajectory before a mismatch stops it (``-1``: unlimited). ``advantage_weight``: ``omega``
    of ``A_episode + omega * A_step``. ``advantage_mode``: ``mean_std_norm`` or ``mean_norm``.
    ``episode_return``: ``trajectory`` or ``step_reward`` (module doc). ``dapo_select``:
    ``top_std`` (Algorithm 1: keep the top-B groups by the DAPO std) or ``first`` (the released
    code: the first B in draw order). ``match_rules``: the matching rule set
    (:data:`guirl.matching.RULES`) of the patch module's "matched" decision (keep / patch / stop
    and the cut of the step returns): UI-S1's ``extract_match`` (rule set ``uis1_reward``: inside a
    1.2x candidate box or within 0.04 of the point, :func:`guirl.rl.multiturn.rules_matcher`).
    SO-RL decides with it, and so does CCPO unless ``ccpo.match_rule`` names CCPO's own rule: CCPO
    follows SO-RL's semi-online procedure (App. A.1.2) and states no patch rule of its own.
    """

    gamma: float = Field(default=0.5, ge=0, le=1)  # CCPO Table 8 reward discount (SO RL): AC 0.5; GUI-O, AITW, M2W 0.3
    patch_threshold: int = Field(default=1, ge=-1, le=MAX_STEPS)  # CCPO Table 8 patch threshold (SO RL)
    advantage_weight: float = Field(
        default=1.0, ge=0, le=MAX_COEF
    )  # CCPO Table 8 "Advantage weight" (UI-S1 step_advantage_w)
    advantage_mode: Literal["mean_std_norm", "mean_norm"] = "mean_std_norm"  # UI-S1 train_example.sh (not in CCPO)
    episode_return: Literal["trajectory", "step_reward"] = "trajectory"  # module doc; "step_reward": UI-S1 code
    dapo_select: Literal["top_std", "first"] = "top_std"  # CCPO Algorithm 1 line 26; "first": UI-S1 code
    match_rules: str = "uis1_reward"  # UI-S1 extract_match (CCPO A.1.2 follows SO-RL); a guirl.matching rule set

    @field_validator("match_rules")
    @classmethod
    def _known_rules(cls, value: str) -> str:
        from guirl.matching import get_rules

        try:
            get_rules(value)
        except KeyError as e:  # pydantic reports ValueErrors as one-line config errors
            raise ValueError(str(e).strip("'\"")) from None
        return value


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


def _trajectory_index(
    group_ids: Sequence[Hashable], traj_ids: Sequence[Hashable]
) -> tuple[list[tuple[Hashable, Hashable]], list[int]]:
    """Unique ``(group, trajectory)`` keys in order of first appearance and each row's index."""
    keys: dict[tuple[Hashable, Hashable], int] = {}
    idx = []
    for g, k in zip(group_ids, traj_ids, strict=True):
        idx.append(keys.setdefault((g, k), len(keys)))
    return list(keys), idx


def semi_online_advantages(
    rewards: Sequence[float],
    group_ids: Sequence[int],
    traj_ids: Sequence[Hashable],
    step_ids: Sequence[int],
    matches: Sequence[bool],
    *,
    gamma: float,
    omega: float = 1.0,
    mode: Literal["mean_norm", "mean_std_norm"] = "mean_std_norm",
    episode_return: Literal["trajectory", "step_reward"] = "trajectory",
    eps: float = 1e-6,
) -> torch.Tensor:
    """UI-S1 advantages of flattened semi-online samples (module doc), ``(N,)`` float64.

    Args:
        rewards: ``(N,)`` step rewards. group_ids: ``(N,)`` task group (the N rollouts of one task).
        traj_ids: ``(N,)`` trajectory within its group (e.g. the rollout index). step_ids: ``(N,)``
            step index. matches: ``(N,)`` whether the step's action matched (cuts the returns).
        gamma, omega, mode, episode_return, eps: module doc.
    """
    n = len(rewards)
    if not (len(group_ids) == len(traj_ids) == len(step_ids) == len(matches) == n):
        raise ValueError("rewards, group_ids, traj_ids, step_ids and matches must have one entry per sample")
    if n == 0:
        return torch.zeros(0, dtype=torch.float64)
    if episode_return not in ("trajectory", "step_reward"):
        raise ValueError(f"episode_return must be 'trajectory' or 'step_reward', got {episode_return!r}")
    keys, tix = _trajectory_index(group_ids, traj_ids)
    r = torch.tensor([float(v) for v in rewards], dtype=torch.float64)
    traj = torch.tensor(tix, dtype=torch.long)
    step = torch.tensor([int(v) for v in step_ids], dtype=torch.long)
    g_step = discounted_step_returns_batch(r, traj, step, gamma, torch.tensor([bool(m) for m in matches]))
    scale = "none" if mode == "mean_norm" else "std"
    if mode not in ("mean_norm", "mean_std_norm"):
        raise ValueError(f"mode must be mean_norm or mean_std_norm, got {mode!r}")
    _, gi = torch.unique(torch.tensor([int(g) for g in group_ids]), return_inverse=True)
    if episode_return == "step_reward":
        a_ep = group_advantages(r, gi, scale=scale, eps=eps)
    else:  # one return per trajectory, normalised over the task's trajectories
        ret = torch.zeros(len(keys), dtype=torch.float64).index_add_(0, traj, r)
        tgroup = torch.zeros(len(keys), dtype=torch.long)
        tgroup[traj] = gi
        a_ep = group_advantages(ret, tgroup, scale=scale, eps=eps)[traj]
    si = torch.unique(step, return_inverse=True)[1]
    step_group = gi * (int(si.max()) + 1) + si
    a_st = group_advantages(g_step.to(torch.float64), step_group, scale=scale, eps=eps)
    return a_ep + omega * a_st


def trajectory_dapo_std(
    rewards: Sequence[float],
    group_ids: Sequence[int],
    traj_ids: Sequence[Hashable],
    step_ids: Sequence[int],
    matches: Sequence[bool],
    *,
    gamma: float,
) -> dict[int, tuple[float, int]]:
    """Per task group: ``(std, n_trajectories)`` of its trajectories' step-0 returns ``G_0``
    (population std, ``np.std`` as the released trainer; module doc)."""
    keys, tix = _trajectory_index(group_ids, traj_ids)
    if not keys:
        return {}
    r = torch.tensor([float(v) for v in rewards], dtype=torch.float64)
    g = discounted_step_returns_batch(
        r,
        torch.tensor(tix, dtype=torch.long),
        torch.tensor([int(v) for v in step_ids], dtype=torch.long),
        gamma,
        torch.tensor([bool(m) for m in matches]),
    )
    first: dict[int, tuple[int, float]] = {}  # trajectory -> (lowest step, its return)
    for i, k in enumerate(tix):
        s = int(step_ids[i])
        if k not in first or s < first[k][0]:
            first[k] = (s, float(g[i]))
    per_group: dict[int, list[float]] = {}
    for k, (_, v) in first.items():
        per_group.setdefault(int(keys[k][0]), []).append(v)
    out = {}
    for gid, vals in per_group.items():
        mean = sum(vals) / len(vals)
        out[gid] = (math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)), len(vals))
    return out


def trajectory_dapo_keep(
    rewards: Sequence[float],
    group_ids: Sequence[int],
    traj_ids: Sequence[Hashable],
    step_ids: Sequence[int],
    matches: Sequence[bool],
    *,
    gamma: float,
    std_threshold: float,
) -> list[bool]:
    """``(N,)`` keep flags: every sample of a group whose :func:`trajectory_dapo_std` exceeds
    ``std_threshold``, or that has a single trajectory (the released trainer's rule)."""
    stats = trajectory_dapo_std(rewards, group_ids, traj_ids, step_ids, matches, gamma=gamma)
    keep = {g for g, (sd, n) in stats.items() if sd > std_threshold or n == 1}
    return [int(g) in keep for g in group_ids]


def select_top_groups(group_ids: Sequence[int], scores: dict[int, float], n_groups: int) -> list[int]:
    """The ``n_groups`` group ids with the highest score (ties: earlier first appearance), in
    order of first appearance; CCPO Algorithm 1 line 26 ("keep top-B by DAPO")."""
    if n_groups < 0:
        raise ValueError(f"n_groups must be >= 0, got {n_groups}")
    order = list(dict.fromkeys(int(g) for g in group_ids))
    ranked = sorted(order, key=lambda g: (-scores.get(g, -math.inf), order.index(g)))
    chosen = set(ranked[:n_groups])
    return [g for g in order if g in chosen]
