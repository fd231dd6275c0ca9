"""Metrics of the public GUI-agent evaluators under named protocols.

Step level (:mod:`.step`), episode level (:mod:`.episode`), AndroidLong online
(:mod:`.androidlong`), Mind2Web (:mod:`.mind2web`), Co-EPG data quality
(:mod:`.coepg_data`) and bootstrap confidence intervals (:mod:`.bootstrap`).
See ``docs/metrics.md`` for which paper reports with which protocol.
"""

from guirl.metrics.bootstrap import bootstrap_means, mean_with_ci, rate_with_ci
from guirl.metrics.episode import aggregate_episodes, episode_success, goal_progress
from guirl.metrics.protocols import PROTOCOLS, Protocol, get_protocol
from guirl.metrics.records import scoring_boxes
from guirl.metrics.step import (
    StepScore,
    aggregate_steps,
    breakdown_by_type,
    score_step,
)

__all__ = [
    "PROTOCOLS",
    "Protocol",
    "get_protocol",
    "scoring_boxes",
    "StepScore",
    "score_step",
    "aggregate_steps",
    "breakdown_by_type",
    "episode_success",
    "goal_progress",
    "aggregate_episodes",
    "rate_with_ci",
    "mean_with_ci",
    "bootstrap_means",
]
