"""guirl.methods.coepg.data_quality: Co-EPG's data purity and diversity (Co-EPG Sec. 5.7, line 248:
purity = the share of plans the grounding models execute successfully; diversity = the average
number of generated plans per task)."""

from __future__ import annotations

import math

import pytest

from guirl.methods.coepg.data_quality import DataSample, diversity, plans_per_task, purity


def _s(task: str, plan: str, verified: bool = True) -> DataSample:
    return DataSample(template="t", action_type="click", target="e", verified=verified, task=task, plan=plan)


@pytest.mark.parametrize(
    "samples, distinct, expected",
    [
        # two tasks: task a has 3 generated plans, task b 1 -> (3 + 1) / 2 = 2 plans per task
        ([_s("a", "p1"), _s("a", "p2"), _s("a", "p3"), _s("b", "q1")], False, 2.0),
        # a repeated plan counts once per generation (the paper counts generated plans) ...
        ([_s("a", "p1"), _s("a", "p1"), _s("b", "q1")], False, 1.5),
        # ... and once with distinct=True: (1 + 1) / 2
        ([_s("a", "p1"), _s("a", "p1"), _s("b", "q1")], True, 1.0),
        # (task, plan) pairs work too: 3 tasks, 4 plans
        ([("a", "x"), ("b", "y"), ("c", "z"), ("c", "w")], False, 4 / 3),
    ],
)
def test_plans_per_task(samples, distinct, expected):
    assert plans_per_task(samples, distinct=distinct) == pytest.approx(expected)


def test_diversity_reports_the_papers_metric_first():
    s = [_s("a", "p1"), _s("a", "p2", verified=False), _s("b", "q1")]
    d = diversity(s)
    assert list(d)[0] == "plans_per_task" and d["plans_per_task"] == pytest.approx(1.5)
    assert purity(s) == pytest.approx(2 / 3)  # 2 of the 3 plans verified
    # without a task id the template stands for the task
    assert plans_per_task([DataSample("t1", "click", "e", True), DataSample("t2", "type", "", True)]) == 1.0
    assert math.isnan(plans_per_task([]))
