"""CES's stages through ``accelerate launch`` (slow): stage 2 leaves the stage-1 Coordinator's weights
bit-identical, notebook 04's schedule resumes after a kill between stages (finished stages reused,
not retrained), and the paper profile's path (three local checkpoints, LoRA warm-up, both GRPO
stages) passes a CPU dry run with tiny checkpoints swapped in."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import REPO, kill_after, wait_unlocked
from guirl.config import load_config
from guirl.studies.shared.stages import stage_table

pytestmark = pytest.mark.slow

#: Tiny-profile stage sizes: every stage a step or two.
SMALL = [
    "ces.executor_prompt=step_instruction",
    "ces.weak_executor_steps=null",
    "ces.warmup.samples=8",
    "ces.rl_pool=4",
    "ces.coordinator.prompts_per_step=2",
    "ces.coordinator.group_size=2",
    "ces.coordinator.max_new_tokens=6",
    "ces.state_tracker.prompts_per_step=2",
    "ces.state_tracker.group_size=2",
    "ces.state_tracker.max_new_tokens=6",
    "ces.coordinator.epochs=1",  # ceil(1 x 4 / 2) = 2 GRPO steps
    "ces.state_tracker.epochs=1",
    "sft.per_device_batch_size=4",  # 2 warm-up steps of 4 records
    "sft.save_steps=1",
    "rl.save_steps=1",
    "eval.max_new_tokens=6",
    "eval.batch_size=4",
    "grounding.enabled=false",  # the Coordinator starts from the tiny model itself
    "runtime.parallel_stages=1",
]


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def tiny_vl(session_cache: Path) -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model(session_cache / "models")  # the session's cache, never the checkout's


def _cfg(tiny_vl: Path, *extra: str):
    return load_config("tiny", overrides=[*SMALL, f"ces.executor_model={tiny_vl}", *extra])


def test_stage2_leaves_the_coordinator_bit_identical(tiny_vl, minigui, tmp_path):
    from safetensors.torch import load_file

    from guirl.models import build_tiny_text_model
    from guirl.studies.ces_staged_rl import STAGE2, rl_config
    from guirl.train.launch import Stage, run_stage
    from guirl.train.rl import RL_ENTRY

    cfg = _cfg(tiny_vl)
    coordinator = tmp_path / "coordinator"  # the "stage-1" Coordinator: a copy, so its bytes can be checked
    shutil.copytree(tiny_vl, coordinator)
    before = _digest(coordinator)
    tracker = build_tiny_text_model()
    stage = Stage(
        STAGE2,
        RL_ENTRY,
        rl_config(cfg, "state_tracker", 4),
        {"data": minigui, "executor": tiny_vl, "coordinator": coordinator},
        tracker,
        tmp_path / STAGE2,
    )
    result = run_stage(stage, echo=False)
    assert result["role"] == "ces.state_tracker" and result["global_step"] == 2 and result["samples_trained"] > 0
    assert _digest(coordinator) == before  # stage 2 never wrote the frozen Coordinator
    rows = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    assert all("state_match" in r and "reward/format" in r for r in rows)
    # ... while the State Tracker was the model in the optimiser: it moved wherever an advantage
    # was non-zero (two random models can tie every group, and then nothing moves)
    a = load_file(str(Path(result["final"]) / "model.safetensors"))
    b = load_file(str(tracker / "model.safetensors"))
    moved = any(not (a[k] == b[k]).all() for k in a)
    assert moved == any(r["adv_abs"] for r in rows)


SCHEDULE = """
import sys
from pathlib import Path
from guirl.config import load_config
from guirl.studies import ces_staged_rl as cs

cfg = load_config(sys.argv[1])
records = cs.write_warmup_records(cfg, Path(sys.argv[2]), Path(sys.argv[3]))
cs.train(cs.ces_stages(cfg, data_dir=Path(sys.argv[2]), run_dir=Path(sys.argv[3]), records=records), echo=False)
"""


def test_notebook_04_schedule_resumes_after_a_kill_between_stages(tiny_vl, minigui, tmp_path):
    """The schedule (warm-ups, stage 1, stage 2) killed once stage 1 has finished: the rerun reuses
    the finished stages (their results untouched, nothing retrained) and trains stage 2."""
    from guirl.studies import ces_staged_rl as cs
    from guirl.train.launch import stage_lock

    cfg = _cfg(tiny_vl)
    run = tmp_path / "04"
    cfg_path = cfg.save(tmp_path / "cfg.yaml")
    script = tmp_path / "schedule.py"
    script.write_text(SCHEDULE)
    cmd = [sys.executable, str(script), str(cfg_path), str(minigui), str(run)]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(REPO / "lib") + (os.pathsep + env_path if env_path else "")
    try:
        kill_after(cmd, run / cs.STAGE1 / "result.json", 1800, "stage-1 result")
    finally:
        os.environ["PYTHONPATH"] = env_path
    # stage 1's process (its own group, holding the folder's lock) may still be exiting: a rerun
    # meanwhile is refused (LockedError); wait until it has let go, as a user would
    wait_unlocked(stage_lock(run / cs.STAGE1), 120)
    assert not (run / cs.STAGE2 / "result.json").exists()
    finished = {
        s: (run / s / "result.json").stat().st_mtime_ns for s in (cs.WARMUP_COORDINATOR, cs.WARMUP_TRACKER, cs.STAGE1)
    }
    records = cs.write_warmup_records(cfg, minigui, run)  # rewritten byte for byte: same fingerprints
    results = cs.train(cs.ces_stages(cfg, data_dir=minigui, run_dir=run, records=records), echo=False)
    assert {s: (run / s / "result.json").stat().st_mtime_ns for s in finished} == finished  # reused
    assert results[cs.STAGE2]["global_step"] == 2 and results[cs.STAGE2]["role"] == "ces.state_tracker"
    assert results[cs.STAGE1]["global_step"] == 2
    table = stage_table(results)
    assert list(table["stage"]) == [cs.WARMUP_COORDINATOR, cs.WARMUP_TRACKER, cs.STAGE1, cs.STAGE2]


#: The paper profile on this CPU: the runtime of tests/test_ccpo.py's dry run, float32, small sizes.
PAPER_CPU = [
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",
    "model.torch_dtype=float32",
    "model.max_pixels=141120",
    "ces.table2_executors=[]",
    "ces.warmup.samples=4",
    "ces.rl_pool=2",
    "ces.coordinator.prompts_per_step=1",
    "ces.coordinator.group_size=2",
    "ces.coordinator.max_new_tokens=6",
    "ces.coordinator.epochs=0.5",  # ceil(0.5 x 2 / 1) = 1 GRPO step
    "ces.state_tracker.prompts_per_step=1",
    "ces.state_tracker.group_size=2",
    "ces.state_tracker.max_new_tokens=6",
    "ces.state_tracker.epochs=0.5",
    "sft.per_device_batch_size=2",
    "sft.grad_accum=1",
    "rl.histories=[1AO]",
    "eval.histories=[1AO]",
    "eval.max_new_tokens=6",
    "eval.batch_size=4",
]


def test_paper_profile_dry_run_with_three_tiny_checkpoints(tiny_vl, minigui, tmp_path):
    """paper-7b's CES path: the Coordinator from ``model.path``, the State Tracker and the Executor
    from local folders (``ces.state_tracker_model`` / ``ces.executor_model``; App. C's executor
    prompt), LoRA warm-up (CES App. B.2: rank 8, alpha 16), both GRPO stages through accelerate."""
    from guirl.models import build_tiny_text_model
    from guirl.studies import ces_staged_rl as cs

    executor = tmp_path / "GUI-R1-7B"
    shutil.copytree(tiny_vl, executor)
    cfg = load_config(
        "paper-7b",
        overrides=[
            f"model.path={tiny_vl}",
            f"ces.state_tracker_model={build_tiny_text_model()}",
            f"ces.executor_model={executor}",
            *PAPER_CPU,
        ],
    )
    assert cfg.lora.enabled and cfg.ces.executor_prompt == "ces_executor" and cfg.ces.warmup.lora.r == 8
    run = tmp_path / "04"
    records = cs.write_warmup_records(cfg, minigui, run)
    stages = cs.ces_stages(cfg, data_dir=minigui, run_dir=run, records=records)
    assert list(stages) == [cs.WARMUP_COORDINATOR, cs.WARMUP_TRACKER, cs.STAGE1, cs.STAGE2]
    assert stages[cs.WARMUP_COORDINATOR].base_model == tiny_vl  # model.path: the Coordinator's base
    results = cs.train(stages, echo=False)
    for name in (cs.WARMUP_COORDINATOR, cs.WARMUP_TRACKER):
        saved = json.loads((Path(results[name]["final"]) / "adapter_config.json").read_text())
        assert results[name]["adapter"] and (saved["r"], saved["lora_alpha"]) == (8, 16)  # CES App. B.2
    assert (
        "model\\.layers"
        in json.loads((run / cs.WARMUP_TRACKER / "final" / "adapter_config.json").read_text())["target_modules"]
    )
    for name, role in ((cs.STAGE1, "ces.coordinator"), (cs.STAGE2, "ces.state_tracker")):
        # the RL stages train every parameter (CES Table 4: lr 1e-6; LoRA is App. B.2's SFT warm-up only)
        assert results[name]["role"] == role and results[name]["global_step"] == 1
        assert (
            results[name]["adapter"] is False and results[name]["trainable_parameters"] == results[name]["parameters"]
        )
    # the loop runs on the trained parts: one offline step with App. C's executor prompt
    from guirl.data.splits import load_splits
    from guirl.studies.shared.evaluation import evaluate_offline

    split = load_splits(minigui)["test_in_domain"]
    build = cs.agents(cfg, run, {cs.MAIN: executor}, {cs.MAIN: ["CES"]})["CES"]
    from guirl.prompts import prompt_spec

    recs = evaluate_offline(
        build(),
        split.episodes,
        prompt_spec(cfg, "1AO"),
        protocol="ces_paper",
        image_root=split.image_root,
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels,
        model_name="CES",
        split="s",
        max_steps=2,
    )
    assert len(recs) == 2 and all("instruction" in r["agent_info"] for r in recs)
