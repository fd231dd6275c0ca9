"""What a stage's fingerprint covers and when its folder is reused (guirl.train.stagestate, through
guirl.train.launch): the config keys its entry reads, the content of its inputs and base model,
the library modules it ran; and state files that are torn or corrupt.

No model trains here: stages are fingerprinted, or run with a stand-in subprocess
(``launch.start_group`` replaced); tests/test_train.py trains real ones.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from conftest import stage_of
from guirl.config import load_config
from guirl.train import launch, stagestate
from guirl.train.launch import FINGERPRINT_FILE, SFT_ENTRY, prepare_stage, run_stage, stage_fingerprint
from guirl.train.sft import RESULT_FILE

RL = "guirl.stages.rl"


def _folder(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


def _fp(cfg, name: str, tmp_path: Path, entry: str = SFT_ENTRY, **kw) -> str:
    data = kw.pop("data_dir", None) or _folder(tmp_path / "data", {"episodes.jsonl": "{}\n"})
    base = kw.pop("base_model", None) or _folder(tmp_path / "base", {"config.json": "{}"})
    stage = stage_of(cfg, name, data_dir=data, base_model=base, output_dir=tmp_path / "out", entry=entry, **kw)
    fp = stage_fingerprint(stage)
    return json.dumps({k: fp[k] for k in ("stage", "entry", "config", "inputs", "base_model")}, sort_keys=True)


# (stage name, entry, base overrides, the change, whether the stage reads it)
KEY_CASES = [
    # 01's SFT stages read their own recipe, the model settings, LoRA and the seed ...
    ("sft", SFT_ENTRY, [], "sft.learning_rate=1e-4", True),
    ("sft", SFT_ENTRY, [], "lora.r=4", True),
    ("sft", SFT_ENTRY, [], "seed=1", True),
    ("sft", SFT_ENTRY, [], "model.max_pixels=200704", True),
    ("sft", SFT_ENTRY, [], "runtime.threads=1", True),  # thread count changes float order (docs/stack.md)
    # ... never another notebook's method section, the RL engine or evaluation
    ("sft", SFT_ENTRY, [], "coepg.iterations=2", False),
    ("sft", SFT_ENTRY, [], "ces.rl_pool=50", False),
    ("sft", SFT_ENTRY, [], "rl.learning_rate=2e-5", False),
    ("sft", SFT_ENTRY, [], "eval.batch_size=3", False),
    ("sft", SFT_ENTRY, [], "data.n_test_tasks=5", False),  # the data folder's content counts, not its recipe
    ("sft", SFT_ENTRY, [], "runtime.parallel_stages=1", False),  # tiny runs 2 side by side
    ("sft", SFT_ENTRY, [], "sft.save_total_limit=null", False),
    ("sft", SFT_ENTRY, [], "model.path=/elsewhere/same-weights", False),  # the base model's content counts
    # grounding reads its own budget and the output format of sft, not sft's optimiser
    ("grounding", SFT_ENTRY, [], "grounding.learning_rate=1e-4", True),
    ("grounding", SFT_ENTRY, [], "sft.system_prompt=null", True),
    ("grounding", SFT_ENTRY, [], "sft.learning_rate=1e-4", False),
    ("grounding", SFT_ENTRY, [], "lora.r=4", False),
    # an RL stage reads the engine, its role's method section and what that method reads
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "rl.learning_rate=2e-5", True),
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "ccpo.tau_min=0.5", True),
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "semi_online.patch_threshold=2", True),
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "ces.rl_pool=50", False),
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "coepg.iterations=2", False),
    ("ccpo_1AO", RL, ["rl.role=ccpo"], "sft.learning_rate=1e-4", False),
    ("coordinator", RL, ["rl.role=ces.coordinator", "ces={}"], "ces.rl_pool=50", True),
    ("coordinator", RL, ["rl.role=ces.coordinator", "ces={}"], "coepg.iterations=2", False),
    ("coordinator", RL, ["rl.role=ces.coordinator", "ces={}"], "eval.max_new_tokens=9", True),  # its executor's
    ("coordinator", RL, ["rl.role=ces.coordinator", "ces={}"], "eval.n_tasks=9", False),
    ("androidlong", RL, ["rl.role=androidlong", "androidlong={}"], "data.width=308", True),  # online rollouts
    ("androidlong", RL, ["rl.role=androidlong", "androidlong={}"], "eval.max_turns=9", True),
    ("androidlong", RL, ["rl.role=androidlong", "androidlong={}"], "data.n_train_tasks=9", False),
    ("ccpo_1AO", RL, ["rl.role=ccpo", "sft.executor=null"], "sft.use_step_instruction=true", True),  # the prompt
    # the generic role reads the section of its reward's method (CCPO's when rl.reward is null)
    ("grpo", RL, ["rl.role=grpo", "rl.reward=null"], "ccpo.tau_min=0.5", True),
    ("rft", RL, ["rl.role=grpo", "rl.reward=agentcpm"], "rl.beta=0.5", True),
    # a paper section's stage values reach a stage through the kernel keys it runs with (below)
    ("rft", RL, ["rl.role=grpo", "rl.reward=agentcpm"], "agentcpm.rft.beta=0.5", False),
    ("rft", RL, ["rl.role=grpo", "rl.reward=agentcpm"], "ccpo.tau_min=0.5", False),
]


@pytest.mark.parametrize("name, entry, base, change, reads", KEY_CASES)
def test_a_stage_reruns_only_for_a_config_key_it_reads(tmp_path, name, entry, base, change, reads):
    assert load_config("tiny", overrides=base) != load_config("tiny", overrides=[*base, change])  # a real change
    before = _fp(load_config("tiny", overrides=base), name, tmp_path, entry)
    after = _fp(load_config("tiny", overrides=[*base, change]), name, tmp_path, entry)
    assert (before != after) is reads, f"{change}: {'should' if reads else 'should not'} change {name}"


def test_stage_values_count_once_moved_into_the_kernel_keys(tmp_path):
    # 07's RFT stage runs with agentcpm.rft moved into rl.* (rft_updates): a change of the stage
    # value changes the stage; the section's copy alone (derived from sft.* / rl.* by the recipes'
    # precedence rule) does not
    from guirl.methods.agentcpm.config import rft_updates

    def run_cfg(*overrides):
        cfg = load_config("tiny", overrides=list(overrides))
        return cfg.replace(rft_updates(cfg, n_train_steps=10))

    assert "agentcpm.rft.beta" in stagestate.mirrored_keys(run_cfg())
    before = _fp(run_cfg(), "rft", tmp_path, RL)
    assert _fp(run_cfg("agentcpm.rft.beta=0.5"), "rft", tmp_path, RL) != before
    assert _fp(run_cfg("sft.save_steps=7"), "rft", tmp_path, RL) == before


def test_the_fingerprint_covers_input_content_not_paths(tmp_path):
    cfg = load_config("tiny")
    data = _folder(tmp_path / "d1", {"train/episodes.jsonl": "a\n", "train/images/x.png": "px"})
    moved = tmp_path / "elsewhere" / "d1"
    shutil.copytree(data, moved)
    base = _folder(tmp_path / "b1", {"config.json": "{}", "model.safetensors": "w1"})
    first = _fp(cfg, "sft", tmp_path, data_dir=data, base_model=base)
    assert _fp(cfg, "sft", tmp_path, data_dir=moved, base_model=base) == first  # same records elsewhere
    (data / "train" / "episodes.jsonl").write_text("a\nb\n")  # rebuilt in place with other records
    assert _fp(cfg, "sft", tmp_path, data_dir=data, base_model=base) != first
    (base / "model.safetensors").write_text("w2")  # a base model retrained at the same path
    assert _fp(cfg, "sft", tmp_path, data_dir=moved, base_model=base) != first
    (base / "model.safetensors").write_text("w1")
    assert _fp(cfg, "sft", tmp_path, data_dir=moved, base_model=base) == first
    other = _folder(tmp_path / "ex", {"a": "1"})
    assert _fp(cfg, "sft", tmp_path, data_dir=moved, base_model=base, executor=other) != first
    (other / "a").write_text("2")
    assert _fp(cfg, "sft", tmp_path, data_dir=moved, base_model=base, executor=other) != _fp(
        cfg, "sft", tmp_path, data_dir=moved, base_model=base, executor=_folder(tmp_path / "ex2", {"a": "1"})
    )


def test_an_adapter_base_model_covers_the_model_it_was_trained_on(tmp_path):
    cfg = load_config("tiny")
    parent = _folder(tmp_path / "parent", {"config.json": "{}", "model.safetensors": "p1"})
    adapter = _folder(
        tmp_path / "adapter", {"adapter_config.json": json.dumps({"base_model_name_or_path": str(parent)})}
    )
    first = _fp(cfg, "ccpo", tmp_path, RL, base_model=adapter)
    (parent / "model.safetensors").write_text("p2")
    assert _fp(cfg, "ccpo", tmp_path, RL, base_model=adapter) != first


# ---------------------------------------------------------------------------------- reuse
def _fake_stage(monkeypatch, runs: list[str], reads: dict | None = None) -> None:
    """Replace the training subprocess: it writes a result (and, like the real entries, the keys it
    read with the modules it ran: ``reads``), and records that it ran."""

    class FakePopen:
        def __init__(self, cmd, *, env, **kw):
            out = Path(cmd[cmd.index("--output-dir") + 1])
            runs.append(out.name)
            if reads is not None:
                (out / "stage_reads.json").write_text(json.dumps(reads))
            (out / RESULT_FILE).write_text(json.dumps({"folder": out.name}))
            self.stdout = io.StringIO("trained\n")

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(launch, "start_group", lambda cmd, *, env, pass_fds=(): FakePopen(cmd, env=env))


def _stage(tmp_path: Path, overrides=()):
    data, base = tmp_path / "data", tmp_path / "base"
    if not data.is_dir():
        _folder(data, {"episodes.jsonl": "{}\n"})
        _folder(base, {"config.json": "{}"})
    # started as a subprocess (replaced by _fake_stage), never in this process
    cfg = load_config("tiny", overrides=["runtime.stage_launcher=subprocess", *overrides])
    return stage_of(cfg, "sft", data_dir=data, base_model=base, output_dir=tmp_path / "runs" / "sft")


def test_a_finished_stage_is_reused_across_configs_it_does_not_read(tmp_path, monkeypatch):
    runs: list[str] = []
    _fake_stage(monkeypatch, runs)
    run_stage(_stage(tmp_path), echo=False)
    run_stage(_stage(tmp_path, ["coepg.iterations=2", "rl.learning_rate=1e-4", "ces.rl_pool=50"]), echo=False)
    assert runs == ["sft"]
    run_stage(_stage(tmp_path, ["sft.learning_rate=1e-4"]), echo=False)
    assert runs == ["sft", "sft"]
    (tmp_path / "data" / "episodes.jsonl").write_text("{}\n{}\n")  # the data rebuilt in place
    run_stage(_stage(tmp_path, ["sft.learning_rate=1e-4"]), echo=False)
    assert runs == ["sft", "sft", "sft"]


def test_a_stage_reruns_when_a_module_it_ran_changed_and_not_for_another(tmp_path, monkeypatch):
    from guirl.contenthash import module_hashes

    ran = module_hashes()  # this process's guirl modules, with their hashes
    assert "guirl.train.sft" in ran
    runs: list[str] = []
    _fake_stage(monkeypatch, runs, {"config": {"sft.learning_rate": 0.003}, "modules": ran})
    run_stage(_stage(tmp_path), echo=False)
    fp = tmp_path / "runs" / "sft" / FINGERPRINT_FILE
    # another part of the library changed since (the whole-library digest differs): still reused
    saved = json.loads(fp.read_text())
    fp.write_text(json.dumps({**saved, "library": "0" * 64}))
    run_stage(_stage(tmp_path), echo=False)
    assert runs == ["sft"]
    # a module the stage ran changed since: trained again
    reads = tmp_path / "runs" / "sft" / "stage_reads.json"
    recorded = json.loads(reads.read_text())
    recorded["modules"]["guirl.train.sft"] = "0" * 64
    reads.write_text(json.dumps(recorded))
    run_stage(_stage(tmp_path), echo=False)
    assert runs == ["sft", "sft"]


def test_a_key_the_stage_read_but_does_not_declare_is_compared_too(tmp_path, monkeypatch):
    runs: list[str] = []
    _fake_stage(monkeypatch, runs, {"config": {"eval.n_tasks": 4}, "modules": {}})
    with pytest.warns(UserWarning, match=r"read config keys it does not declare: eval\.n_tasks"):
        run_stage(_stage(tmp_path, ["eval.n_tasks=4"]), echo=False)
    run_stage(_stage(tmp_path, ["eval.n_tasks=4", "eval.batch_size=3"]), echo=False)  # a key it did not read
    assert runs == ["sft"]
    run_stage(_stage(tmp_path, ["eval.n_tasks=5"]), echo=False)  # a key it read, declared or not
    assert runs == ["sft", "sft"]


def test_undeclared_reads_are_named(tmp_path, monkeypatch):
    runs: list[str] = []
    _fake_stage(monkeypatch, runs, {"config": {"eval.n_tasks": 4, "coepg.iterations": 3}, "modules": {}})
    with pytest.warns(UserWarning, match=r"read config keys it does not declare: coepg\.iterations"):
        run_stage(_stage(tmp_path), echo=False)


# ---------------------------------------------------------------------------------- state files
@pytest.mark.parametrize("content", ["", '{"stage": "sf', "[1, 2]", "\xff\xfe"])
def test_a_torn_fingerprint_is_named_and_the_folder_retrained(tmp_path, monkeypatch, capsys, content):
    runs: list[str] = []
    _fake_stage(monkeypatch, runs)
    run_stage(_stage(tmp_path), echo=False)
    fp = tmp_path / "runs" / "sft" / FINGERPRINT_FILE
    fp.write_bytes(content.encode("latin-1"))
    result = run_stage(_stage(tmp_path), echo=True)
    assert result == {"folder": "sft"} and runs == ["sft", "sft"]
    out = capsys.readouterr().out
    assert f"{fp}: the stage fingerprint is" in out and "training from scratch" in out
    assert json.loads(fp.read_text())["stage"] == "sft"  # rewritten whole


@pytest.mark.parametrize("content", ["", '{"final": "x', '"a string"'])
def test_a_torn_result_is_named_and_the_stage_resumed(tmp_path, monkeypatch, capsys, content):
    runs: list[str] = []
    _fake_stage(monkeypatch, runs)
    run_stage(_stage(tmp_path), echo=False)
    done = tmp_path / "runs" / "sft" / RESULT_FILE
    done.write_text(content)
    assert run_stage(_stage(tmp_path), echo=True) == {"folder": "sft"}
    assert runs == ["sft", "sft"]  # resumed in the same folder (its checkpoints kept), not deleted
    out = capsys.readouterr().out
    assert f"{done}: the stage result is torn or corrupt" in out or f"{done}: the stage result is corrupt" in out
    assert (done.parent / "result.json.corrupt").read_text() == content


def test_state_files_are_written_atomically(tmp_path, monkeypatch):
    # the fingerprint goes through a temporary file and a rename: a crash while writing it leaves no
    # torn file (here: the write fails half-way)
    import guirl.contenthash as ch

    real = ch.os.replace
    calls: list[tuple[str, str]] = []

    def spy(src, dst):
        calls.append((str(src), str(dst)))
        return real(src, dst)

    monkeypatch.setattr(ch.os, "replace", spy)
    prepare_stage(_stage(tmp_path), echo=False)
    fp = tmp_path / "runs" / "sft" / FINGERPRINT_FILE
    assert any(dst == str(fp) and src != str(fp) for src, dst in calls)
