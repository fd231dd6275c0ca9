"""Training stages through the real ``accelerate launch`` subprocess path (CPU, tiny budgets)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from conftest import kill_after, stage_of
from guirl.config import load_config
from guirl.train.launch import FINGERPRINT_FILE, TrainingFailed, prepare_stage, run_stage
from guirl.train.sft import COMPLETE_FILE, RESULT_FILE, training_args

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
    result = run_stage(
        stage_of(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "sft"), echo=False
    )
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
    first = run_stage(stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    mtime = (out / RESULT_FILE).stat().st_mtime
    second = run_stage(stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    assert second == first and (out / RESULT_FILE).stat().st_mtime == mtime


def test_killed_training_resumes_from_last_checkpoint(tiny_model, minigui, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=6", "sft.save_steps=2"])
    out = tmp_path / "g"
    # start the stage the way run_stage does, then kill it midway
    cmd = prepare_stage(stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    kill_after(cmd, out / "checkpoint-2" / COMPLETE_FILE, 300, "first checkpoint")
    assert not (out / RESULT_FILE).exists()  # killed midway: not finished
    result = run_stage(stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    assert result["resumed_from"] is not None
    assert Path(result["resumed_from"]).name in {"checkpoint-2", "checkpoint-4"}
    assert result["global_step"] == 6


def test_torn_checkpoint_is_passed_over_for_the_previous_complete_one(tiny_model, minigui, tmp_path):
    import shutil

    from guirl.train.sft import train

    cfg = load_config("tiny", overrides=["grounding.max_steps=4", "sft.save_steps=2"])
    out = tmp_path / "g"
    train(cfg, "grounding", minigui, tiny_model, out)  # in this process: checkpoints 2 and 4, then the result
    assert all((out / f"checkpoint-{k}" / COMPLETE_FILE).is_file() for k in (2, 4))
    # a run stopped while writing checkpoint-4: a model file cut short, no trainer state, no marker
    (out / RESULT_FILE).unlink()
    shutil.rmtree(out / "final")
    torn = out / "checkpoint-4"
    for name in (COMPLETE_FILE, "trainer_state.json"):
        (torn / name).unlink()
    weights = torn / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    marker = json.loads((out / "checkpoint-2" / COMPLETE_FILE).read_text())
    assert marker["global_step"] == 2 and marker["train_seconds"] > 0
    (out / "checkpoint-2" / COMPLETE_FILE).write_text(json.dumps({**marker, "train_seconds": 1000.0}))
    with pytest.warns(UserWarning, match=r"checkpoint-4: incomplete checkpoint"):
        result = train(cfg, "grounding", minigui, tiny_model, out)
    assert Path(result["resumed_from"]).name == "checkpoint-2" and result["global_step"] == 4
    assert result["train_seconds"] > 1000.0  # steps 1-2 trained 1000 s in the stopped run


def test_changed_config_never_reuses_a_finished_stage(tiny_model, minigui, tmp_path):
    # A finished stage is reused only for the same training config; a changed learning rate
    # (or any other non-eval key) retrains from scratch, while an eval-only change reuses it.
    out = tmp_path / "g"
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    first = run_stage(stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    eval_only = load_config("tiny", overrides=["grounding.max_steps=1", "eval.batch_size=3"])
    assert (
        run_stage(stage_of(eval_only, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
        == first
    )
    changed = load_config("tiny", overrides=["grounding.max_steps=2"])
    second = run_stage(
        stage_of(changed, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False
    )
    assert second["global_step"] == 2 and first["global_step"] == 1
    saved = json.loads((out / FINGERPRINT_FILE).read_text())
    assert saved["config"]["grounding.max_steps"] == 2


def test_failing_stage_raises_with_output_tail(tiny_model, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    with pytest.raises(TrainingFailed, match="grounding_train.jsonl"):
        run_stage(
            stage_of(cfg, "grounding", data_dir=tmp_path / "no-data", base_model=tiny_model, output_dir=tmp_path / "g"),
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
        # two checkpoints kept by default, as before the key existed
        ("sft", [], {"save_total_limit": 2}),
        # AdamW's weight decay: TRL's 0 unless a recipe sets it (Co-EPG App. B 0.05, AgentCPM-GUI Table 4 0.1)
        ("sft", [], {"weight_decay": 0.0}),
        ("sft", ["sft.weight_decay=0.05"], {"weight_decay": 0.05}),
        # null keeps every checkpoint (a learning curve, guirl.sft_study.checkpoint_curve), in both stages
        ("sft", ["sft.save_total_limit=null"], {"save_total_limit": None}),
        ("grounding", ["sft.save_total_limit=5"], {"save_total_limit": 5}),
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
    result = run_stage(
        stage_of(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "sft"), echo=False
    )
    final = Path(result["final"])
    assert result["adapter"] is False
    assert (final / "config.json").is_file() and not (final / "adapter_config.json").exists()


@pytest.mark.parametrize(
    ("threads", "env"),
    [
        (None, {"MKL_DYNAMIC": "FALSE"}),  # unset: the caller's thread count stands; MKL never drops threads
        (1, {"MKL_DYNAMIC": "FALSE", "OMP_NUM_THREADS": "1"}),
        (2, {"MKL_DYNAMIC": "FALSE", "OMP_NUM_THREADS": "2"}),
    ],
)
def test_stage_env_sets_torch_threads(threads, env, tmp_path, monkeypatch):
    from guirl.train import launch

    cfg = load_config("tiny", overrides=[f"runtime.threads={json.dumps(threads)}", "runtime.stage_launcher=subprocess"])
    assert launch.stage_env(cfg) == env
    seen: dict = {}

    class FakePopen:  # what run_stage hands the subprocess; it "trains" by writing result.json
        def __init__(self, cmd, *, env, **kw):
            seen.update(env)
            (tmp_path / "out" / RESULT_FILE).write_text(json.dumps({"global_step": 1}))
            self.stdout = io.StringIO("trained\n")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def wait(self, timeout=None):
            return 0

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setattr(launch, "start_group", lambda cmd, *, env, pass_fds=(): FakePopen(cmd, env=env))
    out = run_stage(
        stage_of(cfg, "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "out"), echo=False
    )
    assert out == {"global_step": 1}
    assert seen["OMP_NUM_THREADS"] == env.get("OMP_NUM_THREADS", "7") and seen["MKL_DYNAMIC"] == "FALSE"


# ----------------------------------------------------------------------------- stages side by side
@pytest.mark.parametrize(
    ("threads", "parallel", "cores", "env"),
    [
        (None, 1, 2, {}),  # one stage: the caller's thread count stands
        (None, 2, 2, {"OMP_NUM_THREADS": "1"}),  # tiny profile on 2 cores: one thread each
        (None, 2, 8, {"OMP_NUM_THREADS": "4"}),  # the cores are shared out
        (None, 3, 2, {"OMP_NUM_THREADS": "1"}),  # never fewer than one thread
        (3, 2, 2, {"OMP_NUM_THREADS": "3"}),  # runtime.threads wins
    ],
)
def test_stage_env_shares_the_cores(threads, parallel, cores, env, monkeypatch):
    from guirl.train import launch

    monkeypatch.setattr(launch, "available_cores", lambda: cores)
    cfg = load_config("tiny", overrides=[f"runtime.threads={json.dumps(threads)}"])
    assert launch.stage_env(cfg, parallel) == {"MKL_DYNAMIC": "FALSE", **env}


def test_fingerprint_ignores_scheduling(tmp_path):
    from guirl.train.launch import stage_fingerprint

    def fp(cfg, **inputs):
        return stage_fingerprint(
            stage_of(cfg, "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "o", entry="e", **inputs)
        )

    one, two = (load_config("tiny", overrides=[f"runtime.parallel_stages={n}"]) for n in (1, 2))
    assert fp(one) == fp(two)
    keep_all = load_config("tiny", overrides=["sft.save_total_limit=null"])  # what is kept on disk: not in it either
    assert fp(keep_all) == fp(one)
    threads = load_config("tiny", overrides=["runtime.threads=1"])  # threads stay in it (float-order perturbations)
    assert fp(threads) != fp(one)
    # every named input is part of what the stage depends on
    (tmp_path / "x").mkdir()
    assert fp(one, executor=tmp_path / "x") != fp(one)
    assert fp(one, executor=tmp_path / "x")["input_paths"]["executor"] == str((tmp_path / "x").resolve())


seen_group: dict[str, object] = {}


def fake_popen(monkeypatch, tmp_path, *, fail: str | None = None, barrier=None):
    """Replace the training subprocess: it waits at ``barrier`` (both stages must be running at
    once), records its thread count and writes a result naming its folder; ``fail``: that folder's
    stage exits 1."""
    import threading

    from guirl.train import launch

    seen: dict[str, str] = {}
    group: dict[str, object] = {}  # each stage's thread schedule (None: no hand-over)
    seen_group.clear()
    lock = threading.Lock()

    class FakePopen:
        def __init__(self, cmd, *, env, **kw):
            out = Path(cmd[cmd.index("--output-dir") + 1])
            with lock:
                group[out.name] = env.get("GUIRL_THREAD_SCHEDULE")
            if barrier is not None:
                barrier.wait(timeout=10)
            with lock:
                seen[out.name] = env.get("OMP_NUM_THREADS", "")
            seen_group.update(group)
            self.rc = 1 if out.name == fail else 0
            if not self.rc:
                (out / RESULT_FILE).write_text(json.dumps({"folder": out.name}))
            self.stdout = io.StringIO(f"trained {out.name}\n")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def wait(self, timeout=None):
            return self.rc

    monkeypatch.setattr(launch, "start_group", lambda cmd, *, env, pass_fds=(): FakePopen(cmd, env=env))
    monkeypatch.setattr(launch, "available_cores", lambda: 2)
    return seen


def jobs_for(tmp_path, names, cfg=None):
    cfg = cfg or load_config("tiny", overrides=["runtime.stage_launcher=subprocess"])  # the fake subprocess
    return [
        stage_of(cfg, "sft", data_dir=tmp_path, base_model=tmp_path / "base", output_dir=tmp_path / n) for n in names
    ]


def test_run_stages_side_by_side(tmp_path, monkeypatch, capsys):
    import threading

    from guirl.train.launch import run_stages

    seen = fake_popen(monkeypatch, tmp_path, barrier=threading.Barrier(2))  # sequential runs would time out here
    out = run_stages(jobs_for(tmp_path, ["sft", "sft_low"]), parallel=2)
    assert out == [{"folder": "sft"}, {"folder": "sft_low"}]  # job order, not finishing order
    assert seen == {"sft": "1", "sft_low": "1"}  # 2 cores, 2 stages: one thread each
    printed = capsys.readouterr().out.splitlines()
    assert sorted(printed) == ["[sft] trained sft", "[sft_low] trained sft_low"]  # echoed lines say whose they are


def test_run_stages_side_by_side_plans_the_hand_over(tmp_path, monkeypatch):
    import threading

    from guirl.train.launch import run_stages

    fake_popen(monkeypatch, tmp_path, barrier=threading.Barrier(2))
    jobs = jobs_for(tmp_path, ["sft", "sft_low"])
    jobs[0] = dataclasses.replace(jobs[0], cfg=load_config("tiny", overrides=["sft.max_steps=560"]))
    jobs[1] = dataclasses.replace(jobs[1], cfg=load_config("tiny", overrides=["sft.max_steps=280"]))
    run_stages(jobs, parallel=2)
    # 2 cores: one thread each, and the longer stage takes the second core from the shorter one's
    # planned last step on, not when it happens to end
    assert seen_group == {"sft": "0:1,280:2", "sft_low": "0:1"}


def test_run_stages_queued_or_open_ended_stages_keep_their_share(tmp_path, monkeypatch):
    from guirl.train.launch import run_stages

    fake_popen(monkeypatch, tmp_path)
    run_stages(jobs_for(tmp_path, ["a", "b", "c"]), parallel=2)  # c starts when a or b ends: no plan
    assert seen_group == {"a": None, "b": None, "c": None}
    epochs = load_config("tiny", overrides=["sft.max_steps=null"])  # the step count is not fixed
    run_stages(jobs_for(tmp_path / "e", ["d", "e"], cfg=epochs), parallel=2)
    assert seen_group["d"] is None and seen_group["e"] is None


def test_run_stages_with_fixed_threads_has_no_group(tmp_path, monkeypatch):
    from guirl.train.launch import run_stages

    seen = fake_popen(monkeypatch, tmp_path)
    run_stages(jobs_for(tmp_path, ["a", "b"], cfg=load_config("tiny", overrides=["runtime.threads=1"])), parallel=2)
    assert seen == {"a": "1", "b": "1"} and seen_group == {"a": None, "b": None}  # runtime.threads wins: no switching


def test_run_stages_one_at_a_time(tmp_path, monkeypatch, capsys):
    from guirl.train.launch import run_stages

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # set by conftest.py under pytest-xdist
    seen = fake_popen(monkeypatch, tmp_path)
    assert run_stages(jobs_for(tmp_path, ["a", "b"]), parallel=1) == [{"folder": "a"}, {"folder": "b"}]
    # no share of the cores is imposed: each gets the count `accelerate launch` gives one process alone
    assert seen["a"] == seen["b"] and int(seen["a"]) >= 1
    assert capsys.readouterr().out.splitlines() == ["trained a", "trained b"]  # no prefix


def test_run_stages_raises_after_every_stage_ended(tmp_path, monkeypatch):
    from guirl.train.launch import run_stages

    seen = fake_popen(monkeypatch, tmp_path, fail="a")
    with pytest.raises(TrainingFailed, match="exited with code 1"):
        run_stages(jobs_for(tmp_path, ["a", "b"]), parallel=2)
    assert set(seen) == {"a", "b"} and (tmp_path / "b" / RESULT_FILE).is_file()  # b still finished


@pytest.mark.parametrize(
    ("names", "base", "match"),
    [
        (["a", "a"], "base", "same output folder"),  # two stages, one folder
        (["a", "b"], "a/final", "reads another stage's output"),  # b would need a's result
    ],
)
def test_run_stages_rejects_jobs_that_collide(tmp_path, names, base, match):
    import dataclasses

    from guirl.train.launch import run_stages

    jobs = jobs_for(tmp_path, names)
    jobs[1] = dataclasses.replace(jobs[1], base_model=tmp_path / base)
    with pytest.raises(ValueError, match=match):
        run_stages(jobs, parallel=2)


def test_run_stages_in_order_may_chain(tmp_path, monkeypatch):
    # one after the other, a later stage may start from an earlier one's output (Co-EPG / CES schedules)
    import dataclasses

    from guirl.train.launch import run_stages

    fake_popen(monkeypatch, tmp_path)
    jobs = jobs_for(tmp_path, ["a", "b"])
    jobs[1] = dataclasses.replace(jobs[1], base_model=tmp_path / "a" / "final")
    assert run_stages(jobs, parallel=1) == [{"folder": "a"}, {"folder": "b"}]


def test_side_by_side_hand_over_is_at_a_fixed_step_and_changes_no_weights(tiny_model, minigui, tmp_path):
    """Torch's thread count changes the trained weights (docs/stack.md), so the hand-over of a
    finished sibling's cores is planned at a step, never timed: a stage trained side by side with a
    shorter one equals the same stage trained alone with the same thread schedule forced, however
    different the timing of the two runs."""
    from guirl.train.launch import available_cores, run_stage, run_stages

    def job(name: str, steps: int, folder: str):
        cfg = load_config("tiny", overrides=[f"sft.max_steps={steps}", "sft.per_device_batch_size=2"])
        return stage_of(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / folder / name)

    side = run_stages([job("x", 2, "group"), job("y", 4, "group")], parallel=2, echo=False)[1]
    cores = available_cores()
    forced = f"0:{max(1, cores // 2)},2:{cores}"  # the plan of y: x's core from x's last step (2) on
    alone = run_stage(job("y", 4, "alone"), echo=False, parallel=2, thread_schedule=forced)
    weights = [(Path(r["final"]) / "model.safetensors").read_bytes() for r in (side, alone)]
    assert weights[0] == weights[1]
    if cores >= 2:
        assert side["thread_switches"] == alone["thread_switches"] == [[2, cores]]


@pytest.mark.parametrize(
    "overlays, ds_file",
    [
        # tiny on CPU: no DeepSpeed file, no flag
        ([], None),
        # the GPU path: the run config's DeepSpeed file, absolute
        (["one_gpu"], "configs/deepspeed/zero2.json"),
    ],
)
def test_launched_stage_reads_the_deepspeed_file_from_any_directory(overlays, ds_file, tmp_path, monkeypatch):
    # accelerate launch runs in the notebook's directory; the DeepSpeed file reaches the stage as an
    # absolute path (a relative one in the accelerate config broke the RL stages on a GPU node)
    import subprocess

    from guirl.paths import repo_root
    from guirl.train.launch import accelerate_command

    (tmp_path / "probe_entry.py").write_text(
        "import json, os\nprint('PROBE', json.dumps(os.environ.get('ACCELERATE_DEEPSPEED_CONFIG_FILE')))\n"
    )
    cfg = load_config("tiny", overlays=overlays)
    stage = stage_of(cfg, "s", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path, entry="probe_entry")
    cmd = accelerate_command(stage, tmp_path / "c.yaml")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{repo_root() / 'lib'}")
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE "))
    seen = json.loads(line.removeprefix("PROBE "))
    if ds_file is None:
        assert seen is None
    else:
        assert Path(seen).is_absolute() and Path(seen) == repo_root() / ds_file


def test_records_stage_trains_on_a_studys_records(tiny_model, minigui, tmp_path):
    # a study writes records (here: the SFT records of two episodes), a records stage trains on them;
    # rewriting the file with other records trains again (the fingerprint reads the file's content)
    from guirl.data.splits import load_splits
    from guirl.prompts import prompt_spec
    from guirl.train.data import sft_records, write_records
    from guirl.train.launch import stage_fingerprint

    cfg = load_config("tiny", overrides=["sft.max_steps=2", "sft.per_device_batch_size=2"])
    train = load_splits(minigui)["train"]
    recs = sft_records(
        train.episodes[:2], [prompt_spec(cfg, "1AO")], image_root="train", min_pixels=3136, max_pixels=141120
    )
    path = write_records(tmp_path / "records.jsonl", recs)
    stage = stage_of(cfg, "records", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "out", records=path)
    result = run_stage(stage, echo=False)
    assert result["global_step"] == 2 and result["n_records"] == len(recs)
    before = stage_fingerprint(stage)
    write_records(path, recs[:1])
    assert stage_fingerprint(stage)["inputs"] != before["inputs"]


def test_an_sft_stage_refuses_inputs_it_does_not_read(tiny_model, minigui, tmp_path):
    cfg = load_config("tiny", overrides=["sft.max_steps=1"])
    (tmp_path / "x.jsonl").write_text("")
    stage = stage_of(
        cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "o", records=tmp_path / "x.jsonl"
    )
    with pytest.raises(TrainingFailed, match="a sft stage reads no such input"):
        run_stage(stage, echo=False)


def test_a_trained_stage_records_the_keys_it_read_and_declares_them(tiny_model, minigui, tmp_path):
    # the real entry records the config keys its process read and the guirl modules it ran; every
    # key it read is declared (or changes nothing it trains), and a key it does not read keeps it
    from guirl.train.stagestate import READS_FILE, undeclared_reads

    out = tmp_path / "g"
    cfg = load_config("tiny", overrides=["grounding.max_steps=1"])
    stage = stage_of(cfg, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out)
    run_stage(stage, echo=False)
    reads = json.loads((out / READS_FILE).read_text())
    assert reads["config"]["grounding.max_steps"] == 1 and "sft.learning_rate" not in reads["config"]
    assert "guirl.train.sft" in reads["modules"] and "guirl.studies.sft" not in reads["modules"]
    assert undeclared_reads(stage) == []
    mtime = (out / RESULT_FILE).stat().st_mtime
    other = load_config("tiny", overrides=["grounding.max_steps=1", "sft.learning_rate=1e-4", "coepg.iterations=2"])
    run_stage(stage_of(other, "grounding", data_dir=minigui, base_model=tiny_model, output_dir=out), echo=False)
    assert (out / RESULT_FILE).stat().st_mtime == mtime  # reused: it reads neither key


def _nan_model(tiny_model: Path, folder: Path) -> Path:
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(tiny_model, folder)
    weights = load_file(str(folder / "model.safetensors"))
    name = next(k for k in weights if "embed_tokens" in k)
    weights[name][0, 0] = float("nan")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_a_stage_with_non_finite_weights_fails_at_once_and_is_never_done(tiny_model, minigui, tmp_path):
    cfg = load_config("tiny", overrides=["grounding.max_steps=3", "sft.save_steps=1"])
    out = tmp_path / "g"
    base = _nan_model(tiny_model, tmp_path / "nan-model")
    stage = stage_of(cfg, "grounding", data_dir=minigui, base_model=base, output_dir=out)
    with pytest.raises(TrainingFailed, match=r"NonFiniteError: stage 'grounding': the weights hold NaN .*nan-model"):
        run_stage(stage, echo=False)
    assert not (out / RESULT_FILE).exists() and not list(out.glob("checkpoint-*"))


def test_a_diverging_learning_rate_stops_the_stage_at_its_first_bad_step(tiny_model, minigui, tmp_path):
    # sft.learning_rate=1e308 (set past validation, as a saved config could hold it): the first update
    # overflows the weights; the stage stops at that step, names the key, and writes no result and no
    # complete checkpoint
    from guirl.train.sft import train
    from guirl.train.stagestate import NonFiniteError

    cfg = load_config("tiny", overrides=["sft.max_steps=4", "sft.save_steps=1", "sft.per_device_batch_size=1"])
    object.__setattr__(cfg.sft, "learning_rate", 1e308)
    out = tmp_path / "s"
    with pytest.raises(
        NonFiniteError, match=r"stage 'sft': .* after step (\d+) .*lower sft\.learning_rate \(now 1e\+308\)"
    ) as err:
        train(cfg, "sft", minigui, tiny_model, out)
    bad_step = int(re.search(r"after step (\d+)", str(err.value)).group(1))
    assert bad_step <= 2  # the warm-up's first step has a learning rate of 0
    assert not (out / RESULT_FILE).exists()
    complete = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if (p / COMPLETE_FILE).exists())
    assert all(k < bad_step for k in complete), complete  # a diverged step is never marked resumable


def test_corrupt_checkpoint_weights_are_named_and_passed_over(tiny_model, minigui, tmp_path):
    from guirl.models import CorruptCheckpointError, load_model
    from guirl.train.sft import train

    cfg = load_config("tiny", overrides=["grounding.max_steps=4", "sft.save_steps=2"])
    out = tmp_path / "g"
    train(cfg, "grounding", minigui, tiny_model, out)
    (out / RESULT_FILE).unlink()
    weights = out / "checkpoint-4" / "model.safetensors"  # complete (marked), then overwritten
    weights.write_bytes(weights.read_bytes()[:4096])
    with pytest.warns(UserWarning, match=r"checkpoint-4/model.safetensors: corrupt checkpoint weights"):
        result = train(cfg, "grounding", minigui, tiny_model, out)
    assert Path(result["resumed_from"]).name == "checkpoint-2" and result["global_step"] == 4
    final = out / "final" / "model.safetensors"
    final.write_bytes(b"\0" * 64)
    with pytest.raises(CorruptCheckpointError, match=rf"{final}: the weights are corrupt .*; delete the folder"):
        load_model(out / "final")


@pytest.mark.parametrize(
    "n, length, processes, expect",
    [
        # a step budget wins over epochs
        (100, {"max_steps": 7, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2}, 1, 7),
        # 10 records in batches of 4: 3 batches an epoch (the last one short, never dropped), 2 epochs
        (
            10,
            {
                "max_steps": -1,
                "num_train_epochs": 2.0,
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 1,
            },
            1,
            6,
        ),
        # 3 batches, accumulated by 2: 2 optimizer steps an epoch (a partial accumulation still steps)
        (
            10,
            {
                "max_steps": -1,
                "num_train_epochs": 1.0,
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 2,
            },
            1,
            2,
        ),
        # 5 batches over 2 processes: 3 each (accelerate evens them), 1.5 epochs -> ceil(4.5)
        (
            20,
            {
                "max_steps": -1,
                "num_train_epochs": 1.5,
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 1,
            },
            2,
            5,
        ),
        # fewer batches than the accumulation: still one step an epoch
        (
            3,
            {
                "max_steps": -1,
                "num_train_epochs": 3.0,
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 8,
            },
            1,
            3,
        ),
        # Co-EPG App. B's SFT shape: 8 processes x 1 x 12 = 96 records a step, 3 epochs of 4,218 records: ceil(528 / 12) x 3
        (
            4218,
            {
                "max_steps": -1,
                "num_train_epochs": 3.0,
                "per_device_train_batch_size": 1,
                "gradient_accumulation_steps": 12,
            },
            8,
            132,
        ),
    ],
)
def test_optimizer_steps_by_budget_or_epochs(n, length, processes, expect):
    from guirl.train.sft import optimizer_steps

    assert optimizer_steps(n, **length, processes=processes) == expect


def test_optimizer_steps_match_accelerates_sharded_loader():
    # the batches each process sees, counted by accelerate's own sampler, then Trainer's step count of them
    import math

    from accelerate.data_loader import BatchSamplerShard
    from hypothesis import given, settings
    from hypothesis import strategies as hs
    from torch.utils.data import BatchSampler, SequentialSampler

    from guirl.train.sft import optimizer_steps

    @settings(max_examples=200, deadline=None)
    @given(
        n=hs.integers(1, 400),
        batch=hs.integers(1, 9),
        accum=hs.integers(1, 6),
        processes=hs.integers(1, 8),
        epochs=hs.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 10.0]),
    )
    def check(n, batch, accum, processes, epochs):
        sampler = BatchSampler(SequentialSampler(range(n)), batch, drop_last=False)
        lengths = {
            sum(1 for _ in BatchSamplerShard(sampler, processes, i, even_batches=True)) for i in range(processes)
        }
        assert len(lengths) == 1  # every process as many batches
        (batches,) = lengths
        per_epoch = max(batches // accum + int(batches % accum > 0), 1)  # transformers' set_initial_training_values
        length = {"max_steps": -1, "num_train_epochs": epochs}
        got = optimizer_steps(
            n, **length, per_device_train_batch_size=batch, gradient_accumulation_steps=accum, processes=processes
        )
        assert got == math.ceil(epochs * per_epoch)

    check()


def test_optimizer_steps_refuse_an_empty_epoch():
    from guirl.train.sft import optimizer_steps

    with pytest.raises(ValueError, match="no records"):
        optimizer_steps(0, max_steps=-1, per_device_train_batch_size=2, gradient_accumulation_steps=1)


def test_an_epoch_stage_trains_the_steps_its_schedule_resolves_before_training(tiny_model, minigui, tmp_path):
    # 5 records in batches of 2 accumulated by 2, 1.5 epochs: the schedule says 3 before training; the trainer trains 3
    from guirl.data.splits import load_splits
    from guirl.prompts import prompt_spec
    from guirl.train.data import sft_records, write_records
    from guirl.train.sft import stage_schedule

    cfg = load_config(
        "tiny",
        overrides=["sft.max_steps=null", "sft.epochs=1.5", "sft.per_device_batch_size=2", "sft.grad_accum=2"],
    )
    train = load_splits(minigui)["train"]
    recs = sft_records(
        train.episodes[:3], [prompt_spec(cfg, "1AO")], image_root="train", min_pixels=3136, max_pixels=141120
    )[:5]
    path = write_records(tmp_path / "records.jsonl", recs)
    plan = stage_schedule(cfg, "records", minigui, {"records": path})
    assert plan == {
        "records": 5,
        "epochs": 1.5,
        "per_device_batch": 2,
        "grad_accum": 2,
        "processes": 1,
        "global_batch": 4,
        "optimizer_steps": 3,
        "from": "epochs",
    }
    stage = stage_of(cfg, "records", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "out", records=path)
    assert run_stage(stage, echo=False)["global_step"] == plan["optimizer_steps"]
