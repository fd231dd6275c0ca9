"""Tests for guirl.workflow: the MiniGUI data folder (built once, reused) and the base model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import guirl.env.export as minigui
from guirl.config import EXECUTOR_KEYS, load_config
from guirl.models import CheckpointNotFoundError, build_tiny_model
from guirl.workflow import base_model_dir, minigui_dir, sft_agents, upstream_result

SMALL = ["data.n_train_tasks=6", "data.n_test_tasks=6"]  # 12 MiniGUI tasks: about half a second to build


@pytest.fixture()
def build_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Record every call of ``build_minigui_dataset`` (the real builder still runs)."""
    calls: list[dict] = []
    real = minigui.build_minigui_dataset

    def spy(out_dir, **kw):
        calls.append({"out_dir": Path(out_dir), **kw})
        return real(out_dir, **kw)

    monkeypatch.setattr(minigui, "build_minigui_dataset", spy)
    return calls


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


# ----------------------------------------------------------------------------- minigui_dir
def test_minigui_dir_builds_once_then_reuses(isolated_outputs: dict[str, Path], build_calls: list[dict]) -> None:
    cfg = load_config("tiny", overrides=SMALL)
    first = minigui_dir(cfg, progress=False)
    assert first == isolated_outputs["GUIRL_DATA"] / "tiny" / "minigui"  # under $GUIRL_DATA/<profile>
    m = manifest_of(first)
    assert (m["n_tasks"], m["seed"], m["width"], m["height"]) == (12, 0, 280, 504)
    assert (first / "train" / "episodes.jsonl").is_file() and (first / "grounding_train.jsonl").is_file()
    stamp = (first / "manifest.json").stat().st_mtime_ns
    episodes_stamp = (first / "train" / "episodes.jsonl").stat().st_mtime_ns
    assert len(build_calls) == 1

    again = minigui_dir(cfg, progress=False)  # same settings: reused
    assert again == first
    assert len(build_calls) == 1
    assert (first / "manifest.json").stat().st_mtime_ns == stamp
    assert (first / "train" / "episodes.jsonl").stat().st_mtime_ns == episodes_stamp


@pytest.mark.parametrize(
    "overrides, changed",
    [
        (["data.n_test_tasks=8"], {"n_tasks": 14}),  # a different size from the config
        (["seed=1"], {"seed": 1}),  # another seed is another data set
        (["data.width=308"], {"width": 308}),  # another screen size
    ],
)
def test_minigui_dir_rebuilds_when_settings_change(
    build_calls: list[dict], overrides: list[str], changed: dict
) -> None:
    folder = minigui_dir(load_config("tiny", overrides=SMALL), progress=False)
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    cfg2 = load_config("tiny", overrides=SMALL + overrides)
    again = minigui_dir(cfg2, progress=False)
    assert again == folder  # same folder, rebuilt in place
    assert len(build_calls) == 2
    m = manifest_of(folder)
    for key, value in changed.items():
        assert m[key] == value
    assert (folder / "manifest.json").stat().st_mtime_ns != stamp
    # and the rebuilt folder is now reused for the new settings
    minigui_dir(cfg2, progress=False)
    assert len(build_calls) == 2


def test_minigui_dir_rebuild_regenerates_matching_data(build_calls: list[dict]) -> None:
    """00_data_prep asks for a rebuild (a changed simulator must show); readers reuse its build."""
    cfg = load_config("tiny", overrides=SMALL)
    folder = minigui_dir(cfg, progress=False)
    before = (folder / "train" / "episodes.jsonl").read_bytes()
    assert minigui_dir(cfg, rebuild=True, progress=False) == folder and len(build_calls) == 2
    assert (folder / "train" / "episodes.jsonl").read_bytes() == before  # deterministic
    minigui_dir(cfg, progress=False)
    assert len(build_calls) == 2


# ----------------------------------------------------------------------------- base_model_dir
def test_base_model_dir_tiny_is_the_cached_build(session_cache: Path) -> None:
    built = build_tiny_model(session_cache / "models", seed=0)  # the session's one tiny build
    stamp = (built / "config.json").stat().st_mtime_ns
    got = base_model_dir(load_config("tiny"))
    assert got.resolve() == built.resolve()
    assert (got / "config.json").stat().st_mtime_ns == stamp  # reused, not rebuilt


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda tmp: tmp / "no-such-checkpoint", "no-such-checkpoint"),  # folder missing
        (lambda tmp: (tmp / "empty-ckpt").mkdir() or tmp / "empty-ckpt", "config.json"),  # folder without config
    ],
)
def test_base_model_dir_missing_local_folder(tmp_path: Path, make, needle: str) -> None:
    path = make(tmp_path)
    cfg = load_config("tiny", overrides=[f"model.path={path}"])
    with pytest.raises(CheckpointNotFoundError, match=needle):
        base_model_dir(cfg)


def test_base_model_dir_relative_path_names_the_repo_folder() -> None:
    cfg = load_config("tiny", overrides=["model.path=checkpoints/not-downloaded-7b"])
    with pytest.raises(CheckpointNotFoundError, match="checkpoints/not-downloaded-7b"):
        base_model_dir(cfg)


def test_dataset_dir_of_unconverted_public_source_says_what_to_run():
    from guirl.config import load_config
    from guirl.workflow import dataset_dir

    cfg = load_config("tiny", overrides=["data.source=aitz", "data.path=data/aitz"])
    with pytest.raises(FileNotFoundError, match="nb-00_data_prep PROFILE=tiny ARGS='--experiment aitz'"):
        dataset_dir(cfg)


# ----------------------------------------------------------------------------- sft_agents
#: clears the tiny profile's executor recipe (280 steps, its own lr): a profile with no executor key
NO_EXECUTOR_KEYS = [f"sft.{key}=null" for key in EXECUTOR_KEYS]
#: the tiny profile's recipe before the cosine High agent: both agents 280 steps at a constant lr
OLD_TINY = [
    "sft.max_steps=280",
    "sft.learning_rate=3e-3",
    "sft.lr_scheduler_type=constant_with_warmup",
    "grounding.max_steps=100",
    *NO_EXECUTOR_KEYS,
]


def recipe(cfg) -> tuple:
    """An SFT agent's (steps, batch, schedule, peak lr)."""
    return (cfg.sft.max_steps, cfg.sft.per_device_batch_size, cfg.sft.lr_scheduler_type, cfg.sft.learning_rate)


@pytest.mark.parametrize(
    ("overrides", "agents"),
    [
        # tiny: the goal-only main agent in 01_sft/sft and the Low executor in 01_sft/sft_low
        ([], [("SFT (High)", "High", "sft", False), ("SFT (Low)", "Low", "sft_low", True)]),
        # no executor: the main agent only (tiny's executor recipe keys cleared with it)
        (["sft.low_level_executor=false", *NO_EXECUTOR_KEYS], [("SFT (High)", "High", "sft", False)]),
        # a Low main agent (the tiny profile before issue 10) keeps the main folder
        (
            ["sft.low_level_executor=false", *NO_EXECUTOR_KEYS, "sft.use_step_instruction=true"],
            [("SFT (Low)", "Low", "sft", True)],
        ),
    ],
)
def test_sft_agents(overrides: list[str], agents: list[tuple]) -> None:
    cfg = load_config("tiny", overrides=overrides)
    got = sft_agents(cfg)
    assert [(a.name, a.level, a.stage_dir, a.cfg.sft.use_step_instruction) for a in got] == agents
    assert got[0].cfg is cfg  # the main agent trains with the run config itself
    for a in got[1:]:  # an executor's config differs in the instruction level (and its own recipe keys) only
        diff = {k for k, v in a.cfg.to_flat().items() if cfg.to_flat()[k] != v}
        own = {
            k
            for key, main_key in EXECUTOR_KEYS.items()
            if getattr(cfg.sft, key) is not None
            for k in (f"sft.{key}", f"sft.{main_key}")
            if cfg.to_flat()[k] != a.cfg.to_flat()[k]
        }
        assert diff == {"sft.use_step_instruction", "sft.low_level_executor"} | own


@pytest.mark.parametrize(
    ("overrides", "main", "executor"),
    [
        # unset: the executor trains with the main agent's steps, batch, schedule and lr
        (
            ["sft.max_steps=280"],
            (280, 8, "constant_with_warmup", 3e-3),
            (280, 8, "constant_with_warmup", 3e-3),
        ),
        # set: only the executor's step count changes
        (
            ["sft.max_steps=280", "sft.low_level_max_steps=120"],
            (280, 8, "constant_with_warmup", 3e-3),
            (120, 8, "constant_with_warmup", 3e-3),
        ),
        # longer than the main agent is allowed too
        (
            ["sft.max_steps=50", "sft.low_level_max_steps=70"],
            (50, 8, "constant_with_warmup", 3e-3),
            (70, 8, "constant_with_warmup", 3e-3),
        ),
        # its own batch and schedule: a main agent at batch 4 with a cosine decay, the executor as before
        (
            [
                "sft.max_steps=560",
                "sft.per_device_batch_size=4",
                "sft.lr_scheduler_type=cosine",
                "sft.low_level_max_steps=280",
                "sft.low_level_batch_size=8",
                "sft.low_level_lr_scheduler_type=constant_with_warmup",
            ],
            (560, 4, "cosine", 3e-3),
            (280, 8, "constant_with_warmup", 3e-3),
        ),
        # its own peak lr only: everything else is the main agent's
        (
            ["sft.low_level_learning_rate=1.5e-3"],
            (280, 8, "constant_with_warmup", 3e-3),
            (280, 8, "constant_with_warmup", 1.5e-3),
        ),
    ],
)
def test_executor_recipe(overrides: list[str], main: tuple, executor: tuple) -> None:
    agents = sft_agents(load_config("tiny", overrides=[*OLD_TINY, *overrides]))  # batch 8, constant lr, no executor key
    got = [recipe(a.cfg) for a in agents]
    assert got == [main, executor]
    for key in EXECUTOR_KEYS:  # the executor's own config has no second agent
        assert getattr(agents[1].cfg.sft, key) is None


def test_tiny_profile_recipes() -> None:
    # docs/tiny-agents.md: the High agent 560 steps decaying to 0 from 3e-3, the Low executor 280 from 2e-3,
    # both after 300 grounding steps
    cfg = load_config("tiny")
    assert cfg.grounding.max_steps == 300
    assert [recipe(a.cfg) for a in sft_agents(cfg)] == [(560, 8, "cosine", 3e-3), (280, 8, "cosine", 2e-3)]


def test_an_executor_config_saves_and_loads_back(tmp_path: Path) -> None:
    executor = sft_agents(load_config("tiny"))[1].cfg
    assert load_config(executor.save(tmp_path / "low.yaml")) == executor  # what run_stage hands the subprocess


def test_paper_profiles_train_one_high_agent() -> None:
    assert [(a.name, a.stage_dir) for a in sft_agents(load_config("paper-3b"))] == [("SFT (High)", "sft")]


def test_upstream_result_names_the_missing_file_and_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    cfg = load_config("tiny")
    with pytest.raises(FileNotFoundError, match=r"01_sft/sft/result.json.*make nb-01_sft"):
        upstream_result(cfg, "01_sft", "sft")
    path = tmp_path / "tiny" / "01_sft" / "sft" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"final": "x"}))
    assert upstream_result(cfg, "01_sft", "sft") == {"final": "x"}


# ----------------------------------------------------------------------------- reward rise


def test_an_executor_recipe_that_restates_the_old_one_keeps_its_trained_stage(tmp_path: Path) -> None:
    from guirl.train.launch import stage_fingerprint

    def fingerprints(overrides: list[str]) -> list[str]:
        return [
            stage_fingerprint(a.cfg, "sft", "e", tmp_path, tmp_path)["config_sha256"]
            for a in sft_agents(load_config("tiny", overrides=overrides))
        ]

    before = fingerprints(OLD_TINY)
    # the main agent 560 steps with a decay, the executor pinned to the constant-lr recipe both agents had before
    after = fingerprints(
        [
            "sft.low_level_lr_scheduler_type=constant_with_warmup",
            "sft.low_level_learning_rate=null",
            "grounding.max_steps=100",
        ]
    )
    assert after[1] == before[1]  # the executor's finished stage is reused
    assert after[0] != before[0]  # the main agent trains again
    assert fingerprints([])[1] != before[1]  # the tiny profile now: the executor decays to 0 too, so it trains again
    # its own lr alone is a new executor (and only that: the main agent keeps its stage)
    lower = fingerprints(["sft.low_level_learning_rate=1e-3"])
    assert lower[1] != fingerprints([])[1] and lower[0] == fingerprints([])[0]
