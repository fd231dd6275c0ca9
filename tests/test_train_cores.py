"""guirl.train.cores: stages side by side take over a shorter sibling's cores at a planned step."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from guirl.train.cores import (
    SCHEDULE_ENV,
    ShareFreedCores,
    callback_from_env,
    format_schedule,
    parse_schedule,
    thread_schedule,
    threads_for,
)


@pytest.mark.parametrize(
    ("cores", "running", "threads"),
    [
        (2, 2, 1),  # the tiny profile: two stages, one core each
        (2, 1, 2),  # the sibling ended: both cores
        (8, 3, 2),  # shares are rounded down
        (2, 3, 1),  # never fewer than one thread
        (2, 0, 2),  # nobody else running: all cores
    ],
)
def test_threads_for(cores, running, threads):
    assert threads_for(cores, running) == threads


@pytest.mark.parametrize(
    ("steps", "cores", "plans"),
    [
        ([560, 280], 2, [[(0, 1), (280, 2)], [(0, 1)]]),  # 01's High agent takes the executor's core at 280
        ([100, 100], 2, [[(0, 1)], [(0, 1)]]),  # equal lengths: nothing to hand over
        ([30, 10, 20], 6, [[(0, 2), (10, 3), (20, 6)], [(0, 2)], [(0, 2), (10, 3)]]),
        ([30, 10, 20], 2, [[(0, 1), (20, 2)], [(0, 1)], [(0, 1)]]),  # 2 // 2 stays 1 until one stage is left
        ([560, None], 2, None),  # a stage without a fixed step count: no plan
    ],
)
def test_thread_schedule_is_planned_from_the_step_counts(steps, cores, plans):
    assert thread_schedule(steps, cores) == plans


def test_schedule_text_round_trips_and_bad_text_is_named():
    assert parse_schedule(format_schedule([(0, 1), (280, 2)])) == [(0, 1), (280, 2)]
    for bad in ["", "0:1,", "5:1", "0:1,0:2", "0:0", "x"]:
        with pytest.raises(ValueError, match=SCHEDULE_ENV):
            parse_schedule(bad)


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_callback_follows_the_plan_not_the_clock(restore_threads):
    torch.set_num_threads(1)
    cb = ShareFreedCores([(0, 1), (5, 2)])
    for step in range(5):
        cb.on_step_begin(None, SimpleNamespace(global_step=step), None)
    assert torch.get_num_threads() == 1 and cb.switches == []
    cb.on_step_begin(None, SimpleNamespace(global_step=5), None)
    assert torch.get_num_threads() == 2 and cb.switches == [(5, 2)]  # the planned step
    cb.on_step_begin(None, SimpleNamespace(global_step=6), None)
    assert cb.switches == [(5, 2)]  # no change, no new record
    resumed = ShareFreedCores([(0, 1), (5, 2)])  # a stage resumed at step 7 follows the same plan
    torch.set_num_threads(1)
    resumed.on_step_begin(None, SimpleNamespace(global_step=7), None)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize(
    ("env", "expect"),
    [
        ({}, None),  # launched alone
        ({SCHEDULE_ENV: "0:1,280:2"}, [(0, 1), (280, 2)]),  # side by side with a shorter sibling
    ],
)
def test_callback_from_env(env, expect):
    cb = callback_from_env(env)
    assert (cb.schedule if cb else None) == expect
