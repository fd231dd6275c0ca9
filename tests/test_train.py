"""Training stages through the real ``accelerate launch`` subprocess path (CPU, tiny budgets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import kill_after
from guirl.config import load_config
from guirl.train.launch import FINGERPRINT_FILE, TrainingFailed, prepare_stage, run_stage
from guirl.train.sft import RESULT_FILE, training_args

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models"))


# A paper profile with only what a CPU box cannot do swapped out: the checkpoint (tiny instead of
# the 3B folder), dtype/precision, the accelerate config (one CPU process instead of 8 GPUs with
# ZeRO-2), and the step budget. Everything else (LoRA, histories, prompt format, batch shape,
# learning rate) is the paper profile's.
CPU_DRY_RUN = [
    "model.torch_dtype=float32",
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",
    "sft.max_steps=2",
    "sft.grad_accum=1",
]


def test_paper_profile_dry_run_goes_through_accelerate_launch(tiny_model, minigui, tmp_path):
    cfg = load_config("paper-3b", overrides=[f"model.path={tiny_model}", *CPU_DRY_RUN])
    assert not cfg.grounding.enabled  # paper profiles skip grounding pre-training
    result = run_stage(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "sft", echo=False)
    assert result["global_step"] == 2
    assert result["adapter"] is True
    final = Path(result["final"])
    assert (final / "adapter_config.json").is_file()  # a PEFT LoRA adapter, not a full model
    adapter_cfg = json.loads((final / "adapter_config.json").read_text())
    assert adapter_cfg["r"] == cfg.lora.r and adapter_cfg["lora_alpha"] == cfg.lora.alpha
    # the subprocess trained with the notebook's exact configuration
    saved = load_config(tmp_path / "sft" / "config.yaml")
    assert saved.hash() == cfg.hash()
    # one record per step and history setting (1AO and 3AO)
    n_steps = sum(len(json.loads(line)["steps"]) for line in (minigui / "train" / "episodes.jsonl").open())
    assert result["n_records"] == n_steps * len(cfg.sft.histories)


def test_finished_stage_is_not_run_again(tiny_model, minigui, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    out = tmp_path / "g"
    first = run_stage(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    mtime = (out / RESULT_FILE).stat().st_mtime
    second = run_stage(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    assert second == first and (out / RESULT_FILE).stat().st_mtime == mtime


def test_killed_training_resumes_from_last_checkpoint(tiny_model, minigui, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=6", "sft.save_steps=2"])
    out = tmp_path / "g"
    # start the stage the way run_stage does, then kill it midway
    cmd = prepare_stage(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    kill_after(cmd, out / "checkpoint-2" / "trainer_state.json", 300, "first checkpoint")
    assert not (out / RESULT_FILE).exists()  # killed midway: not finished
    result = run_stage(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    assert result["resumed_from"] is not None
    assert Path(result["resumed_from"]).name in {"checkpoint-2", "checkpoint-4"}
    assert result["global_step"] == 6


def test_changed_config_never_reuses_a_finished_stage(tiny_model, minigui, tmp_path):
    # A finished stage is reused only for the same training config; a changed learning rate
    # (or any other non-eval key) retrains from scratch, while an eval-only change reuses it.
    out = tmp_path / "g"
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    first = run_stage(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    eval_only = load_config("tiny", overrides=["grounding.max_steps=1", "eval.batch_size=3"])
    assert (
        run_stage(eval_only, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False) == first
    )
    changed = load_config("tiny", overrides=["grounding.max_steps=2"])
    second = run_stage(changed, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out, echo=False)
    assert second["global_step"] == 2 and first["global_step"] == 1
    saved = json.loads((out / FINGERPRINT_FILE).read_text())
    assert saved["config"]["grounding"]["max_steps"] == 2


def test_failing_stage_raises_with_output_tail(tiny_model, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    with pytest.raises(TrainingFailed, match="grounding_train.jsonl"):
        run_stage(
            cfg,
            "grounding",
            data_dir=tmp_path / "no-data",
            base_model=tiny_model,
            output_dir=tmp_path / "g",
            echo=False,
        )


@pytest.mark.parametrize(
    "stage, overrides, expect",
    [
        # grounding: full-parameter run sized by the grounding section
        (
            "grounding",
            ["grounding.max_steps=30", "grounding.learning_rate=0.01"],
            {"max_steps": 30, "learning_rate": 0.01},
        ),
        # sft: max_steps wins over epochs; loss on completions only
        ("sft", ["sft.max_steps=7", "sft.learning_rate=0.002"], {"max_steps": 7, "learning_rate": 0.002}),
        # sft without max_steps trains by epochs (-1 = no step cap in transformers)
        ("sft", ["sft.max_steps=null", "sft.epochs=2"], {"max_steps": -1, "num_train_epochs": 2.0}),
        # tiny profile: no activation recompute on CPU (TRL's default is on)
        ("sft", [], {"activation_checkpointing": False}),
        # the runtime key reaches both stages
        ("grounding", ["runtime.activation_checkpointing=true"], {"activation_checkpointing": True}),
    ],
)
def test_training_args_come_from_the_config(stage, overrides, expect, tmp_path):
    args = training_args(load_config("tiny", overrides=overrides), stage, tmp_path)
    for key, value in expect.items():
        assert getattr(args, key) == value
    assert args.completion_only_loss is True and args.max_length is None and args.use_cpu is True


def test_tiny_profile_sft_trains_all_parameters(tiny_model, minigui, tmp_path):
    # lora.enabled: false (tiny profile): the saved result is a full model, not an adapter
    cfg = load_config("tiny", overrides=["sft.max_steps=1", "sft.per_device_batch_size=2"])
    assert not cfg.lora.enabled
    result = run_stage(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "sft", echo=False)
    final = Path(result["final"])
    assert result["adapter"] is False
    assert (final / "config.json").is_file() and not (final / "adapter_config.json").exists()


@pytest.mark.parametrize(
    ("threads", "env"),
    [
        (None, {}),  # unset: the caller's environment stands
        (1, {"OMP_NUM_THREADS": "1"}),  # the host-perturbation runs of issue 10
        (2, {"OMP_NUM_THREADS": "2"}),
    ],
)
def test_stage_env_sets_torch_threads(threads, env, tmp_path, monkeypatch):
    from guirl.train import launch

    cfg = load_config("tiny", overrides=[f"runtime.threads={json.dumps(threads)}"])
    assert launch.stage_env(cfg) == env
    seen: dict = {}

    class FakePopen:  # what run_stage hands the subprocess; it "trains" by writing result.json
        def __init__(self, cmd, *, env, **kw):
            seen.update(env)
            (tmp_path / "out" / RESULT_FILE).write_text(json.dumps({"global_step": 1}))
            self.stdout = iter(["trained\n"])

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def wait(self, timeout=None):
            return 0

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setattr(launch.subprocess, "Popen", FakePopen)
    out = run_stage(cfg, "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "out", echo=False)
    assert out == {"global_step": 1}
    assert seen["OMP_NUM_THREADS"] == env.get("OMP_NUM_THREADS", "7")
