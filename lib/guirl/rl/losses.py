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

Data-parallel invariance (verl ``core_algos.agg_loss`` with a global batch size / token count and
``dp_size``; TRL ``loss_type="dapo"`` with ``num_items_in_batch``). Every mode is
``sum over rows of a row term / normaliser``; :func:`agg_norm` gives a part's share of the
normaliser (valid tokens, non-empty sequences, sequences, or sequences x ``norm_len``). When one
optimizer step's batch is split over ``dp_size`` ranks and over micro-batches, pass the *global*
normaliser (the sum of :func:`agg_norm` over every part, e.g. an all-reduce) as ``global_norm``:
each part's loss is then ``its row sum / global_norm * dp_size``, so that summing over
micro-batches and averaging over ranks (what DDP / ZeRO do with the gradients) gives exactly the
loss of the whole batch on one rank, whatever the split. Without ``global_norm`` each part is
normalised by its own count (the local, split-dependent value).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "LOSS_AGG_MODES",
    "agg_loss",
    "agg_norm",
    "kl_k3",
    "clipped_surrogate",
    "policy_loss",
]


def _check_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"loss matrix and mask must both be (B, T), got {tuple(x.shape)} and {tuple(mask.shape)}")
    return mask.to(x.dtype)


def _norm_len(x: torch.Tensor, norm_len: int | None) -> int:
    n = x.shape[-1] if norm_len is None else int(norm_len)
    if n <= 0:
        raise ValueError(f"norm_len must be > 0, got {n}")
    return n


# Each mode: (row sum, local normaliser). The loss is row_sum / normaliser.
def _token_mean(x: torch.Tensor, m: torch.Tensor, norm_len: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    return (x * m).sum(), m.sum()


def _seq_mean_token_mean(x: torch.Tensor, m: torch.Tensor, norm_len: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    per_seq = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    has = (m.sum(-1) > 0).to(x.dtype)
    return (per_seq * has).sum(), has.sum()


def _seq_mean_token_sum(x: torch.Tensor, m: torch.Tensor, norm_len: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    return (x * m).sum(), torch.tensor(float(x.shape[0]), dtype=x.dtype, device=x.device)


def _seq_mean_token_sum_norm(
    x: torch.Tensor, m: torch.Tensor, norm_len: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    n = _norm_len(x, norm_len)
    return (x * m).sum(), torch.tensor(float(x.shape[0] * n), dtype=x.dtype, device=x.device)


#: Aggregation mode -> ``fn(loss_mat, mask, norm_len) -> (row sum, local normaliser)``; the loss is
#: their ratio (:func:`agg_loss`).
LOSS_AGG_MODES: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def _parts(mode: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    try:
        return LOSS_AGG_MODES[mode]
    except KeyError:
        raise KeyError(f"unknown loss aggregation {mode!r}; known: {sorted(LOSS_AGG_MODES)}") from None


def agg_norm(mask: torch.Tensor, mode: str = "token-mean", *, norm_len: int | None = None) -> torch.Tensor:
    """This part's share of the normaliser of ``mode`` (a float scalar): valid tokens
    (``token-mean``), non-empty sequences (``seq-mean-token-mean``), sequences
    (``seq-mean-token-sum``) or sequences x ``norm_len`` (``seq-mean-token-sum-norm``). Sum it
    over micro-batches and ranks to get ``global_norm`` for :func:`agg_loss`."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be (B, T), got {tuple(mask.shape)}")
    m = mask.to(torch.float32)
    return _parts(mode)(torch.zeros_like(m), m, norm_len)[1].detach()


def agg_loss(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    *,
    norm_len: int | None = None,
    global_norm: float | torch.Tensor | None = None,
    dp_size: int = 1,
) -> torch.Tensor:
    """Aggregate a ``(B, T)`` per-token loss into a scalar with ``mask`` (module doc for modes).

    ``global_norm`` (module doc, "Data-parallel invariance"): the normaliser of the whole
    optimizer step (sum of :func:`agg_norm` over all micro-batches and ranks); ``dp_size``: the
    number of data-parallel ranks whose gradients are averaged. A normaliser below 1 counts as 1
    (an all-padding batch gives 0, not NaN).
    """
    fn = _parts(mode)
    if dp_size < 1:
        raise ValueError(f"dp_size must be >= 1, got {dp_size}")
    m = _check_mask(loss_mat, mask)
    num, local = fn(loss_mat, m, norm_len)
    if global_norm is None:
        if dp_size != 1:
            raise ValueError("dp_size > 1 needs global_norm (the normaliser summed over all ranks)")
        denom = local
    else:
        denom = torch.as_tensor(global_norm, dtype=loss_mat.dtype, device=loss_mat.device)
    return num / denom.clamp(min=1.0) * dp_size


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
    global_norm: float | torch.Tensor | None = None,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO/GRPO clipped surrogate loss (to minimise).

    Args:
        logp, old_logp, mask: ``(B, T)``.
        advantages: ``(B,)`` or ``(B, T)``.
        eps_low, eps_high: clip range ``[1 - eps_low, 1 + eps_high]`` (DAPO clip-higher: 0.2, 0.28).
        agg: aggregation mode (:data:`LOSS_AGG_MODES`); ``norm_len``, ``global_norm``,
            ``dp_size``: see :func:`agg_loss`.

    Returns:
        ``(loss, stats)`` with scalar ``loss`` and ``stats`` holding the ``(B, T)`` per-token loss
        ``"pg_losses"``, the ``"ratio"``, the ``(B, T)`` bool ``"clipped"`` (the clipped branch
        was taken: ratio above ``1 + eps_high`` with ``A > 0`` or below ``1 - eps_low`` with
        ``A < 0``, TRL's ``clip_ratio/region``) and the scalar ``"clipfrac"`` (its share of the
        valid tokens of this part).
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
    took_clip = (clipped > unclipped) & (m > 0)
    clipfrac = took_clip.to(pg.dtype).sum() / m.sum().clamp(min=1.0)
    loss = agg_loss(pg, mask, agg, norm_len=norm_len, global_norm=global_norm, dp_size=dp_size)
    return loss, {"pg_losses": pg, "ratio": ratio, "clipped": took_clip, "clipfrac": clipfrac}


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
    global_norm: float | torch.Tensor | None = None,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO objective: clipped surrogate ``+ beta * k3 KL`` aggregated with the same mode and
    normaliser (GRPO Eq. 3 with the KL of Eq. 4; aggregation is linear, so this equals TRL's
    per-token ``loss + beta * kl`` aggregated once).

    Returns ``(loss, stats)``; stats add ``"pg_loss"`` and, when ``beta > 0``, the scalar
    aggregated ``"kl"`` and the ``(B, T)`` ``"per_token_kl"``.
    """
    pg_loss, stats = clipped_surrogate(
        logp,
        old_logp,
        advantages,
        mask,
        eps_low=eps_low,
        eps_high=eps_high,
        agg=agg,
        norm_len=norm_len,
        global_norm=global_norm,
        dp_size=dp_size,
    )
    out = dict(stats)
    out["pg_loss"] = pg_loss
    loss = pg_loss
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp")
        per_token_kl = kl_k3(logp, ref_logp)
        kl = agg_loss(per_token_kl, mask, agg, norm_len=norm_len, global_norm=global_norm, dp_size=dp_size)
        out["kl"] = kl
        out["per_token_kl"] = per_token_kl
        loss = loss + beta * kl
    return loss, out
