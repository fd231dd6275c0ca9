"""guirl.train.cores: side-by-side stages take over the cores of a stage that ended."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from guirl.train.cores import CORES_ENV, PEER_DIR_ENV, ShareFreedCores, callback_from_env, running_stages, threads_for


@pytest.mark.parametrize(
    ("cores", "running", "threads"),
    [
        (2, 2, 1),  # the tiny profile: two stages, one core each
        (2, 1, 2),  # the sibling ended: both cores
        (8, 3, 2),  # shares are rounded down
        (2, 3, 1),  # never fewer than one thread
        (2, 0, 2),  # no marker left (the group folder is being removed): all cores
    ],
)
def test_threads_for(cores, running, threads):
    assert threads_for(cores, running) == threads


def test_running_stages_counts_markers(tmp_path):
    tmp_path = tmp_path / "group"
    tmp_path.mkdir()
    assert running_stages(tmp_path) == 0
    (tmp_path / "stage-0").touch()
    (tmp_path / "stage-1").touch()
    assert running_stages(tmp_path) == 2
    assert running_stages(tmp_path / "gone") == 0  # a removed folder reads as nobody running


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_callback_follows_the_markers(tmp_path, restore_threads):
    tmp_path = tmp_path / "group"
    tmp_path.mkdir()
    for name in ("stage-0", "stage-1"):
        (tmp_path / name).touch()
    torch.set_num_threads(1)
    cb = ShareFreedCores(tmp_path, cores=2)
    cb.on_step_begin(None, SimpleNamespace(global_step=0), None)
    assert torch.get_num_threads() == 1 and cb.switches == []  # both running: keep one thread
    (tmp_path / "stage-1").unlink()
    cb.on_step_begin(None, SimpleNamespace(global_step=5), None)
    assert torch.get_num_threads() == 2 and cb.switches == [(5, 2)]  # the sibling ended at step 5
    cb.on_step_begin(None, SimpleNamespace(global_step=6), None)
    assert cb.switches == [(5, 2)]  # no change, no new record


@pytest.mark.parametrize(
    ("env", "expect"),
    [
        ({}, None),  # launched alone
        ({PEER_DIR_ENV: "/tmp/x"}, None),  # incomplete: no core count
        ({PEER_DIR_ENV: "/tmp/x", CORES_ENV: "4"}, 4),  # a side-by-side group of 4 cores
    ],
)
def test_callback_from_env(env, expect):
    cb = callback_from_env(env)
    assert (cb.cores if cb else None) == expect
