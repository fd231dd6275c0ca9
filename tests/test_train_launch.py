"""How a single-process CPU stage starts (guirl.train.launch.launch_mode): inside the caller, as the
subprocess ``accelerate launch`` would start, or through ``accelerate launch``; all three train the
same bytes, and the in-process path leaves the caller's threads, random states and environment as
they were."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import stage_of
from guirl.config import load_config
from guirl.train import launch
from guirl.train.launch import ACCELERATE, DIRECT, IN_PROCESS, launch_mode, run_stage, simple_launch
from guirl.train.rl import LOG_FILE, RL_ENTRY, read_log

LAUNCHERS = {"auto": IN_PROCESS, "subprocess": DIRECT, "accelerate": ACCELERATE}
# the RL stage of tests/test_train_rl.py, cut to 2 steps
RL = [
    "rl.reward=agentcpm",
    "rl.histories=[1AO]",
    "rl.prompts_per_step=2",
    "rl.group_size=2",
    "rl.max_new_tokens=8",
    "rl.micro_batch_size=4",
    "rl.rollout_batch_size=4",
    "rl.max_steps=2",
    "rl.save_steps=2",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models"))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "overrides, parallel, mode",
    [
        ([], 1, IN_PROCESS),
        ([], 2, DIRECT),  # beside another stage: a subprocess with its own threads
        (["runtime.stage_launcher=subprocess"], 1, DIRECT),
        (["runtime.stage_launcher=accelerate"], 1, ACCELERATE),
        (["runtime.num_processes=2"], 1, ACCELERATE),
        (  # DeepSpeed (with the launch config it takes effect under)
            [
                "runtime.deepspeed_config=configs/deepspeed/zero2.json",
                "runtime.accelerate_config=configs/accelerate/multi_gpu_zero2.yaml",
            ],
            1,
            ACCELERATE,
        ),
    ],
)
def test_launch_mode(overrides, parallel, mode, tmp_path):
    stage = stage_of(
        load_config("tiny", overrides=overrides), "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path
    )
    assert launch_mode(stage, parallel) == mode


@pytest.mark.parametrize("omp, threads", [(None, None), ("1", "1"), ("3", "3")])
def test_simple_launch_is_what_accelerate_launch_starts(omp, threads, tmp_path, monkeypatch):
    """The child command is ``python -m <entry> ARGS``; the environment is accelerate's: threads
    from OMP_NUM_THREADS or the physical cores, CPU, no mixed precision."""
    import psutil

    stage = stage_of(load_config("tiny"), "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "o")
    cmd = launch.prepare_stage(stage, echo=False)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | (
        {} if omp is None else {"OMP_NUM_THREADS": omp}
    )
    before = dict(os.environ)
    child, child_env = simple_launch(cmd, env)
    assert dict(os.environ) == before  # the caller's environment is untouched
    at = cmd.index("-m", cmd.index("accelerate.commands.launch"))
    assert child == [sys.executable, *cmd[at:]]
    expected = threads or str(max(1, psutil.cpu_count(logical=False)))
    assert child_env["OMP_NUM_THREADS"] == expected
    assert child_env["ACCELERATE_USE_CPU"] == "True" and child_env["ACCELERATE_MIXED_PRECISION"] == "no"


@pytest.mark.slow
def test_every_launcher_trains_the_same_bytes(tiny_model, minigui, tmp_path, monkeypatch):
    """An SFT (grounding) and an RL stage trained in the caller, as a direct subprocess and through
    ``accelerate launch`` give byte-identical weights and identical logs. The caller runs with one
    torch thread and no OMP_NUM_THREADS, so accelerate's rule (the physical cores) must be applied
    in process too: each result records the threads it trained with (on some hosts the thread
    count also changes the bytes, docs/stack.md)."""
    import psutil

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(1)
    got: dict[str, dict[str, object]] = {}
    for launcher, mode in LAUNCHERS.items():
        extra = [f"runtime.stage_launcher={launcher}"]
        sft = stage_of(
            load_config("tiny", overrides=[*extra, "grounding.max_steps=3"]),
            "grounding",
            data_dir=minigui,
            base_model=tiny_model,
            output_dir=tmp_path / launcher / "grounding",
        )
        rl = stage_of(
            load_config("tiny", overrides=[*extra, *RL]),
            "grpo",
            data_dir=minigui,
            base_model=tiny_model,
            output_dir=tmp_path / launcher / "grpo",
            entry=RL_ENTRY,
        )
        assert launch_mode(sft) == launch_mode(rl) == mode
        torch.manual_seed(123)
        random.seed(5)
        np.random.seed(6)
        sft_result = run_stage(sft, echo=False)
        rl_result = run_stage(rl, echo=False)
        # the caller's threads and random states are as they were (a stage seeds its own)
        assert torch.get_num_threads() == 1
        torch.manual_seed(123)
        expect_torch = torch.rand(3)
        random.seed(5)
        np.random.seed(6)
        expect = (random.random(), float(np.random.rand()))
        torch.manual_seed(123)
        random.seed(5)
        np.random.seed(6)
        run_stage(sft, echo=False)  # finished: read back, nothing runs
        assert torch.equal(torch.rand(3), expect_torch) and (random.random(), float(np.random.rand())) == expect
        rows = read_log(Path(rl_result["log"]).parent / LOG_FILE)
        timings = {k for k in rows[0] if k.endswith("_seconds")}
        got[launcher] = {
            "threads": (sft_result["threads"], rl_result["threads"]),
            "sft": sha(Path(sft_result["final"]) / "model.safetensors"),
            "sft_losses": [(h.get("step"), h.get("loss")) for h in sft_result["log_history"]],
            "rl": sha(Path(rl_result["final"]) / "model.safetensors"),
            "rl_log": [{k: v for k, v in r.items() if k not in timings} for r in rows],
        }
    assert got["auto"] == got["subprocess"] == got["accelerate"], json.dumps(got, indent=1, default=str)[:3000]
    cores = str(max(1, psutil.cpu_count(logical=False)))  # accelerate's rule without OMP_NUM_THREADS
    assert got["auto"]["threads"] == (int(cores), int(cores))
    assert os.environ.get("ACCELERATE_USE_CPU") is None  # the in-process stage's variables are gone again


@pytest.mark.slow
def test_a_failing_in_process_stage_raises_training_failed_and_frees_its_folder(tiny_model, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    stage = stage_of(cfg, "grounding", data_dir=tmp_path / "no-data", base_model=tiny_model, output_dir=tmp_path / "g")
    assert launch_mode(stage) == IN_PROCESS
    threads = torch.get_num_threads()
    with pytest.raises(launch.TrainingFailed, match="in process.*grounding_train.jsonl"):
        run_stage(stage, echo=False)
    assert torch.get_num_threads() == threads
    with launch.stage_lock(stage.output_dir):  # free again
        pass
