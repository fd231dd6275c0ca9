"""Episode-level metrics from per-step exact matches (offline, teacher-forced evaluation).

* **episode success** – every step of the episode is exact (AgentCPM-GUI / AITZ
  ``compute_episode_metrics``: ``success_rate``).
* **goal progress** – the share of the episode's steps completed before the first
  error, ``k / T`` with ``k`` the number of leading exact steps and ``T`` the episode
  length (same functions: ``goal_progress``).

Inputs are sequences of booleans, one per step in order (``StepScore.exact``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def _check(exacts: Sequence[bool], where: str) -> list[bool]:
    xs = [bool(x) for x in exacts]
    if not xs:
        raise ValueError(f"{where}: an episode needs at least one step (got an empty sequence)")
    return xs


def episode_success(exacts: Sequence[bool]) -> bool:
    """True when every step is exact. Raises ``ValueError`` on an empty episode."""
    return all(_check(exacts, "episode_success"))


def goal_progress(exacts: Sequence[bool]) -> float:
    """Leading exact steps divided by episode length, in ``[0, 1]``."""
    xs = _check(exacts, "goal_progress")
    k = 0
    for x in xs:
        if not x:
            break
        k += 1
    return k / len(xs)


def aggregate_episodes(
    episodes: Mapping[str, Sequence[bool]] | Iterable[Sequence[bool]],
) -> dict[str, float | int]:
    """Mean episode success (``SR``) and mean goal progress (``GP``) over episodes
    (macro: each episode weighs 1), plus ``n_episodes`` and ``n_steps``.
    Empty input gives ``nan`` rates."""
    eps = list(episodes.values()) if isinstance(episodes, Mapping) else list(episodes)
    if not eps:
        return {"SR": float("nan"), "GP": float("nan"), "n_episodes": 0, "n_steps": 0}
    succ = [episode_success(e) for e in eps]
    prog = [goal_progress(e) for e in eps]
    return {
        "SR": sum(succ) / len(eps),
        "GP": sum(prog) / len(eps),
        "n_episodes": len(eps),
        "n_steps": sum(len(e) for e in eps),
    }
