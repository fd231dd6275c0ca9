"""Group-normalised advantages and the DAPO dynamic-sampling filter (verl ``core_algos.py`` style).

Shapes: ``N`` = number of completions (prompts x generations, flattened), ``T`` = response length.

Estimators (registry :data:`ADVANTAGE_ESTIMATORS`):

* ``"grpo"`` -- GRPO (Shao et al. 2024, DeepSeekMath Eq. 3 outcome supervision):
  ``A_i = (r_i - mean_g) / (std_g + eps)`` over the completions of the same group ``g``;
  ``std`` is the unbiased (n-1) sample std, as in TRL and verl.
* ``"dr_grpo"`` -- Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", Sec. 3.1):
  ``A_i = r_i - mean_g`` (no std division); pair it with the length-normalisation-free loss
  aggregation ``"seq-mean-token-sum-norm"`` of :mod:`guirl.rl.losses`.

Documented conventions (tested):

* a group with a single valid reward gets advantage 0 (no baseline to compare with; verl instead
  uses mean 0 / std 1 for singletons in some estimators, which would pass the raw reward through);
* with std scaling, a group whose rewards are all equal (std == 0) gets advantage 0 instead of
  ``0 / eps`` noise (exactly what ``(r - mean)`` gives too, made explicit);
* rewards that are NaN (TRL's "reward not applicable" ``None``) are excluded from the group
  statistics and get advantage 0, so they contribute no policy gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

__all__ = [
    "group_advantages",
    "group_advantages_loop",
    "grpo_advantages",
    "dr_grpo_advantages",
    "ADVANTAGE_ESTIMATORS",
    "get_advantage_estimator",
    "dapo_keep_groups",
    "dapo_keep_mask",
    "broadcast_to_tokens",
]

Scale = Literal["std", "none"]


def _check(rewards: torch.Tensor, group_ids: torch.Tensor) -> None:
    if rewards.dim() != 1 or group_ids.dim() != 1 or rewards.shape != group_ids.shape:
        raise ValueError(
            f"rewards and group_ids must both be 1-D of the same length, got {tuple(rewards.shape)} and "
            f"{tuple(group_ids.shape)}"
        )
    if group_ids.dtype.is_floating_point:
        raise ValueError("group_ids must be an integer tensor (one id per prompt group)")


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    scale: Scale = "std",
    eps: float = 1e-6,
) -> torch.Tensor:
    """Vectorised group-normalised advantages.

    Args:
        rewards: ``(N,)`` float, NaN = missing.
        group_ids: ``(N,)`` integer group (prompt) id of each completion; any values, any order.
        scale: ``"std"`` (GRPO) or ``"none"`` (Dr. GRPO, mean only).
        eps: added to the std.

    Returns:
        ``(N,)`` float advantages (module doc for singleton / zero-std / NaN groups).
    """
    _check(rewards, group_ids)
    r = rewards.to(torch.float64)
    valid = ~torch.isnan(r)
    _, inv = torch.unique(group_ids, return_inverse=True)
    g = int(inv.max().item()) + 1 if inv.numel() else 0
    rv = torch.where(valid, r, torch.zeros_like(r))
    cnt = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, valid.to(torch.float64))
    s = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, rv)
    mean = s / cnt.clamp(min=1)
    dev = torch.where(valid, r - mean[inv], torch.zeros_like(r))
    ss = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, dev * dev)
    std = torch.sqrt(ss / (cnt - 1).clamp(min=1))
    # "zero std" is decided exactly (all valid rewards equal), not by a float std that rounding
    # can leave at 1e-17 for e.g. [0.1, 0.1, 0.1]
    big = torch.finfo(torch.float64).max
    gmax = torch.full((g,), -big, dtype=torch.float64).scatter_reduce(
        0, inv, torch.where(valid, r, torch.full_like(r, -big)), reduce="amax"
    )
    gmin = torch.full((g,), big, dtype=torch.float64).scatter_reduce(
        0, inv, torch.where(valid, r, torch.full_like(r, big)), reduce="amin"
    )
    constant = gmax <= gmin
    dev = torch.where(constant[inv], torch.zeros_like(dev), dev)
    adv = dev
    if scale == "std":
        # std can underflow to 0 for subnormal spreads: treat like a constant group
        adv = torch.where(std[inv] > 0, dev / (std[inv] + eps), torch.zeros_like(dev))
    elif scale != "none":
        raise ValueError(f"scale must be 'std' or 'none', got {scale!r}")
    adv = torch.where(valid & (cnt[inv] > 1), adv, torch.zeros_like(adv))
    return adv.to(rewards.dtype if rewards.dtype.is_floating_point else torch.float32)


def group_advantages_loop(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    scale: Scale = "std",
    eps: float = 1e-6,
) -> torch.Tensor:
    """Per-group Python loop reference for :func:`group_advantages` (same conventions)."""
    _check(rewards, group_ids)
    out = torch.zeros(rewards.shape[0], dtype=torch.float64)
    for gid in torch.unique(group_ids).tolist():
        idx = [i for i in range(rewards.shape[0]) if int(group_ids[i]) == gid and not torch.isnan(rewards[i])]
        if len(idx) < 2:
            continue
        vals = torch.tensor([float(rewards[i]) for i in idx], dtype=torch.float64)
        if bool((vals == vals[0]).all()):
            continue
        m = vals.mean()
        sd = vals.std(unbiased=True)
        for j, i in enumerate(idx):
            d = vals[j] - m
            if scale == "std":
                out[i] = d / (sd + eps) if sd > 0 else 0.0
            else:
                out[i] = d
    return out.to(rewards.dtype if rewards.dtype.is_floating_point else torch.float32)


def grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO: ``(r - mean_g) / (std_g + eps)``; ``(N,) -> (N,)``."""
    return group_advantages(rewards, group_ids, scale="std", eps=eps)


def dr_grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Dr. GRPO: ``r - mean_g``; ``(N,) -> (N,)`` (``eps`` unused, kept for a uniform signature)."""
    return group_advantages(rewards, group_ids, scale="none", eps=eps)


ADVANTAGE_ESTIMATORS: dict[str, Callable[..., torch.Tensor]] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
}


def get_advantage_estimator(name: str) -> Callable[..., torch.Tensor]:
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        raise KeyError(f"unknown advantage estimator {name!r}; known: {sorted(ADVANTAGE_ESTIMATORS)}") from None


def dapo_keep_groups(rewards: torch.Tensor, group_ids: torch.Tensor, *, std_threshold: float = 0.0) -> torch.Tensor:
    """DAPO dynamic sampling (Yu et al. 2025, Sec. 3.2): ids of the groups to keep.

    A group is dropped when all its (non-NaN) rewards are equal -- its GRPO advantages are all 0
    and it carries no gradient. ``std_threshold > 0`` drops groups whose sample std is
    ``<= std_threshold`` (the ``filter_groups.std_threshold`` variant used by UI-S1/CCPO scripts).
    Groups with fewer than two valid rewards are dropped.

    Returns:
        sorted ``(G_kept,)`` tensor of kept group ids (same dtype as ``group_ids``).
    """
    _check(rewards, group_ids)
    kept = []
    for gid in torch.unique(group_ids):
        vals = rewards[(group_ids == gid) & ~torch.isnan(rewards)].to(torch.float64)
        if vals.numel() < 2:
            continue
        if std_threshold > 0:
            if float(vals.std(unbiased=True)) > std_threshold:
                kept.append(gid)
        elif bool((vals != vals[0]).any()):
            kept.append(gid)
    if not kept:
        return torch.empty(0, dtype=group_ids.dtype)
    return torch.stack(kept).sort().values


def dapo_keep_mask(rewards: torch.Tensor, group_ids: torch.Tensor, *, std_threshold: float = 0.0) -> torch.Tensor:
    """``(N,)`` bool mask of completions whose group :func:`dapo_keep_groups` keeps."""
    return torch.isin(group_ids, dapo_keep_groups(rewards, group_ids, std_threshold=std_threshold))


def broadcast_to_tokens(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``(N,)`` sequence advantages -> ``(N, T)`` token advantages, zero on padding."""
    if advantages.dim() != 1 or response_mask.dim() != 2 or advantages.shape[0] != response_mask.shape[0]:
        raise ValueError(f"need (N,) and (N, T), got {tuple(advantages.shape)} and {tuple(response_mask.shape)}")
    return advantages.unsqueeze(-1) * response_mask.to(advantages.dtype)
