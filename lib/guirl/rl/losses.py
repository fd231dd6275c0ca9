"""Policy-gradient losses: clipped surrogate, k3 KL, and masked aggregation (verl ``core_algos.py`` style).

Shapes: ``B`` sequences, ``T`` response tokens. ``logp``, ``old_logp``, ``ref_logp`` and
``mask`` are ``(B, T)``; ``mask`` is 1 on response tokens and 0 on padding; ``advantages`` is
``(B,)`` (one per sequence, broadcast over tokens) or ``(B, T)``.

* ratio ``rho = exp(logp - old_logp)``; PPO (Schulman et al. 2017, Eq. 7) per-token loss
  ``-min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)``; ``eps_high > eps_low`` is DAPO's
  clip-higher (Yu et al. 2025, Sec. 3.1; they use eps_low = 0.2, eps_high = 0.28).
* k3 KL estimator (Schulman 2020, "Approximating KL Divergence"; GRPO Eq. 4):
  ``exp(ref - logp) - (ref - logp) - 1 >= 0``.
* aggregation modes (registry :data:`LOSS_AGG_MODES`):
  ``"token-mean"`` sum over all valid tokens / number of valid tokens (DAPO, TRL ``loss_type="dapo"``);
  ``"seq-mean-token-mean"`` mean over sequences of each sequence's token mean (original GRPO);
  ``"seq-mean-token-sum"`` mean over sequences of each sequence's token sum;
  ``"seq-mean-token-sum-norm"`` total token sum / (B * ``norm_len``), Dr. GRPO's
  length-normalisation-free aggregation (``norm_len`` = max response length, a constant).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "LOSS_AGG_MODES",
    "agg_loss",
    "kl_k3",
    "clipped_surrogate",
    "policy_loss",
]


def _check_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"loss matrix and mask must both be (B, T), got {tuple(x.shape)} and {tuple(mask.shape)}")
    return mask.to(x.dtype)


def _token_mean(x: torch.Tensor, mask: torch.Tensor, norm_len: int | None = None) -> torch.Tensor:
    m = _check_mask(x, mask)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def _seq_mean_token_mean(x: torch.Tensor, mask: torch.Tensor, norm_len: int | None = None) -> torch.Tensor:
    m = _check_mask(x, mask)
    per_seq = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    has = (m.sum(-1) > 0).to(x.dtype)
    return (per_seq * has).sum() / has.sum().clamp(min=1.0)


def _seq_mean_token_sum(x: torch.Tensor, mask: torch.Tensor, norm_len: int | None = None) -> torch.Tensor:
    m = _check_mask(x, mask)
    return (x * m).sum(-1).mean()


def _seq_mean_token_sum_norm(x: torch.Tensor, mask: torch.Tensor, norm_len: int | None = None) -> torch.Tensor:
    m = _check_mask(x, mask)
    n = x.shape[-1] if norm_len is None else int(norm_len)
    if n <= 0:
        raise ValueError(f"norm_len must be > 0, got {n}")
    return (x * m).sum() / (x.shape[0] * n)


LOSS_AGG_MODES: dict[str, Callable[..., torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def agg_loss(
    loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean", *, norm_len: int | None = None
) -> torch.Tensor:
    """Aggregate a ``(B, T)`` per-token loss into a scalar with ``mask`` (module doc for modes)."""
    try:
        fn = LOSS_AGG_MODES[mode]
    except KeyError:
        raise KeyError(f"unknown loss aggregation {mode!r}; known: {sorted(LOSS_AGG_MODES)}") from None
    return fn(loss_mat, mask, norm_len)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, *, clamp: float | None = 20.0) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): ``exp(d) - d - 1`` with ``d = ref_logp - logp``.

    ``(B, T) -> (B, T)``, always ``>= 0``. ``d`` is clamped to ``[-clamp, clamp]`` (verl's
    ``low_var_kl`` clamps the result to 10) to keep ``exp`` finite; ``clamp=None`` disables it.
    """
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp and ref_logp shapes differ: {tuple(logp.shape)} vs {tuple(ref_logp.shape)}")
    d = ref_logp - logp
    if clamp is not None:
        d = d.clamp(-clamp, clamp)
    # expm1(d) - d is exp(d) - d - 1 without cancellation for small d; clamp at 0 against rounding
    return (torch.expm1(d) - d).clamp(min=0.0)


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: str = "token-mean",
    norm_len: int | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO/GRPO clipped surrogate loss (to minimise).

    Args:
        logp, old_logp, mask: ``(B, T)``.
        advantages: ``(B,)`` or ``(B, T)``.
        eps_low, eps_high: clip range ``[1 - eps_low, 1 + eps_high]`` (DAPO clip-higher: 0.2, 0.28).
        agg: aggregation mode (:data:`LOSS_AGG_MODES`).

    Returns:
        ``(loss, stats)`` with scalar ``loss`` and ``stats`` holding the ``(B, T)`` per-token loss
        ``"pg_losses"``, the ``"ratio"`` and the scalar ``"clipfrac"`` (share of valid tokens where
        the clipped branch was taken).
    """
    if logp.shape != old_logp.shape:
        raise ValueError(f"logp and old_logp shapes differ: {tuple(logp.shape)} vs {tuple(old_logp.shape)}")
    if advantages.dim() == 1:
        if advantages.shape[0] != logp.shape[0]:
            raise ValueError(f"advantages (B,) has B={advantages.shape[0]}, logp has B={logp.shape[0]}")
        adv = advantages.unsqueeze(-1).expand_as(logp)
    elif advantages.shape == logp.shape:
        adv = advantages
    else:
        raise ValueError(f"advantages must be (B,) or (B, T), got {tuple(advantages.shape)}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError("clip ranges must be >= 0")
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    pg = torch.maximum(unclipped, clipped)
    m = mask.to(pg.dtype)
    clipfrac = ((clipped > unclipped).to(pg.dtype) * m).sum() / m.sum().clamp(min=1.0)
    return agg_loss(pg, mask, agg, norm_len=norm_len), {"pg_losses": pg, "ratio": ratio, "clipfrac": clipfrac}


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: str = "token-mean",
    norm_len: int | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO objective: clipped surrogate ``+ beta * k3 KL`` aggregated with the same mode.

    Returns ``(loss, stats)``; stats add ``"kl"`` (scalar aggregated k3) when ``beta > 0``.
    """
    pg_loss, stats = clipped_surrogate(
        logp, old_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high, agg=agg, norm_len=norm_len
    )
    out = dict(stats)
    out["pg_loss"] = pg_loss
    loss = pg_loss
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp")
        kl = agg_loss(kl_k3(logp, ref_logp), mask, agg, norm_len=norm_len)
        out["kl"] = kl
        loss = loss + beta * kl
    return loss, out
