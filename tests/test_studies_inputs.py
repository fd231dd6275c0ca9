"""Tests for guirl.studies.shared.inputs: the MiniGUI data folder (built once, reused) and the base model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import guirl.env.export as minigui
from guirl.config import load_config
from guirl.models import CheckpointNotFoundError, build_tiny_model
from guirl.studies.shared.inputs import base_model_dir, eval_splits, minigui_dir, upstream_result

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
    from guirl.studies.shared.inputs import dataset_dir

    cfg = load_config("tiny", overrides=["data.source=aitz", "data.path=data/aitz"])
    with pytest.raises(FileNotFoundError, match="nb-00_data_prep PROFILE=tiny ARGS='--experiment aitz'"):
        dataset_dir(cfg)


def test_upstream_result_names_the_missing_file_and_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    cfg = load_config("tiny")
    with pytest.raises(FileNotFoundError, match=r"01_sft/sft/result.json.*make nb-01_sft"):
        upstream_result(cfg, "01_sft", "sft")
    path = tmp_path / "tiny" / "01_sft" / "sft" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"final": "x"}))
    assert upstream_result(cfg, "01_sft", "sft") == {"final": "x"}


def test_eval_splits_are_the_test_splits_and_name_a_missing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUIRL_DATA", str(tmp_path))
    cfg = load_config("tiny", overrides=SMALL)
    splits = eval_splits(cfg)
    assert "train" not in splits and set(splits) == {"test_in_domain", "test_unseen_task", "test_unseen_app"}
    assert list(eval_splits(cfg, only=["test_unseen_app"])) == ["test_unseen_app"]
    with pytest.raises(KeyError, match="no test split.*test_nope"):
        eval_splits(cfg, only=["test_nope"])
