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
    link = isolated_outputs["GUIRL_DATA"] / "tiny" / "minigui"  # published under $GUIRL_DATA/<profile>
    assert link.resolve() == first and first.parent == link.parent
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
    assert again != folder and again.parent == folder.parent  # a new version, published at the same link
    assert (folder.parent / "minigui").resolve() == again
    assert len(build_calls) == 2
    m = manifest_of(again)
    for key, value in changed.items():
        assert m[key] == value
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp  # the old version this process reads: as it was
    # and the rebuilt folder is now reused for the new settings
    minigui_dir(cfg2, progress=False)
    assert len(build_calls) == 2


def test_minigui_dir_rebuild_regenerates_matching_data(build_calls: list[dict]) -> None:
    """00_data_prep asks for a rebuild (a changed simulator must show); readers reuse its build."""
    cfg = load_config("tiny", overrides=SMALL)
    folder = minigui_dir(cfg, progress=False)
    before = (folder / "train" / "episodes.jsonl").read_bytes()
    again = minigui_dir(cfg, rebuild=True, progress=False)
    assert again != folder and len(build_calls) == 2
    assert (again / "train" / "episodes.jsonl").read_bytes() == before  # deterministic
    minigui_dir(cfg, progress=False)
    assert len(build_calls) == 2


# A reader in another process (a notebook's evaluation, a training stage): loads the MiniGUI data at
# data/tiny/minigui over and over and checks that each load is whole: the episode and step counts of
# the manifest beside the episodes it read, every screenshot there and a PNG.
READER = """
import json, sys
from pathlib import Path
from guirl.data.splits import load_splits
link, bad, n, errors = Path(sys.argv[1]), 0, 0, []
while not Path(sys.argv[0] + ".stop").exists() or n < 3:
    n += 1
    try:
        splits = load_splits(link)
        root = Path(splits["train"].image_root).parent
        m = json.loads((root / "manifest.json").read_text())
        ok = sorted(splits) == sorted(m["counts"])
        for name, split in splits.items():
            eps = split.episodes
            ok = ok and len(eps) == m["counts"][name]["episodes"]
            ok = ok and sum(len(e.steps) for e in eps) == m["counts"][name]["steps"]
            for e in eps:
                for s in e.steps:
                    p = Path(split.image_root) / s.screenshot
                    ok = ok and p.is_file() and p.read_bytes()[:4] == bytes([0x89, 0x50, 0x4E, 0x47])
        bad += not ok
    except Exception as err:  # a load that broke half-way: as bad as a mixed one
        bad += 1
        errors.append(f"{type(err).__name__}: {str(err)[:120]}")
print(json.dumps({"loads": n, "bad": bad, "errors": errors[:3]}))
"""


def test_a_reader_racing_a_rebuild_never_sees_mixed_or_short_data(tmp_path: Path, isolated_outputs) -> None:
    # 00 rebuilds MiniGUI with other sizes (other data) while other processes load it: every load is
    # whole, of one build or another, never a mix or a file cut short
    import subprocess
    import sys

    from conftest import runner_env

    small, large = SMALL, ["data.n_train_tasks=10", "data.n_test_tasks=10"]
    minigui_dir(load_config("tiny", overrides=small), progress=False)
    script = tmp_path / "reader.py"
    script.write_text(READER)
    link = isolated_outputs["GUIRL_DATA"] / "tiny" / "minigui"
    readers = [
        subprocess.Popen([sys.executable, str(script), str(link)], env=runner_env(), stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for sizes in (large, small, large, small, large):
        minigui_dir(load_config("tiny", overrides=sizes), rebuild=True, progress=False)
    (tmp_path / "reader.py.stop").write_text("")
    results = [json.loads(r.communicate(timeout=300)[0]) for r in readers]
    assert all(r["loads"] >= 3 and r["bad"] == 0 for r in results), results


# ----------------------------------------------------------------------------- base_model_dir
def test_base_model_dir_tiny_is_the_cached_build(session_cache: Path) -> None:
    # random weights (model.path: tiny): the session's one tiny build, reused
    built = build_tiny_model(session_cache / "models", seed=0)
    stamp = (built / "config.json").stat().st_mtime_ns
    got = base_model_dir(load_config("tiny", overrides=["model.path=tiny"]))
    assert got.resolve() == built.resolve()
    assert (got / "config.json").stat().st_mtime_ns == stamp  # reused, not rebuilt


def test_base_model_dir_of_the_tiny_profile_is_the_shipped_base(session_cache: Path) -> None:
    from guirl.models.tiny_base import tiny_base_dir

    got = base_model_dir(load_config("tiny"))  # the profile's default: tiny-base
    assert got.resolve() == tiny_base_dir().resolve() and got.name.startswith("tiny-base-")


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
    path.write_text('{"final": "x')  # torn
    with pytest.raises(RuntimeError, match=r"result.json: the sft result of notebook 01_sft is torn .*make nb-01_sft"):
        upstream_result(cfg, "01_sft", "sft")


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


@pytest.mark.parametrize(
    ("path", "size"),
    [
        ("checkpoints/Qwen2.5-VL-7B-Instruct", "7B"),
        ("checkpoints/Qwen2.5-VL-3B-Instruct", "3B"),
        ("/models/qwen2.5-vl-7b", "7B"),
        ("checkpoints/Qwen2.5-VL-72B-Instruct", "3B"),  # not a 7B: the papers' rows are 3B / 7B only
        ("tiny-base", "3B"),
    ],
)
def test_paper_model_size(path: str, size: str) -> None:
    from guirl.studies.shared.inputs import paper_model_size

    assert paper_model_size(load_config("tiny", overrides=[f"model.path={path}"])) == size
