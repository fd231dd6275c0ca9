"""Split resolution over the two prepared-dataset layouts (MiniGUI folders, converted JSONL)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from guirl.actions import Action
from guirl.data.schema import Episode, SchemaError, Step, write_episodes
from guirl.data.splits import Split, load_splits, primary_test_split, subsplits, swap_goals


def _episode(eid: str, split: str) -> Episode:
    step = Step(step_id=0, screenshot=f"img/{eid}.png", screen_size=(10, 20), action=Action("wait"))
    return Episode(episode_id=eid, instruction="do it", steps=(step,), source="fixture", split=split)


def test_minigui_layout_one_folder_per_split(tmp_path):
    # MiniGUI: <root>/<split>/episodes.jsonl, images relative to the split folder
    for split, ids in {"train": ["a", "b"], "test_in_domain": ["c"], "test_unseen_app": ["d"]}.items():
        write_episodes([_episode(i, split) for i in ids], tmp_path / split / "episodes.jsonl")
    splits = load_splits(tmp_path)
    assert list(splits) == ["train", "test_in_domain", "test_unseen_app"]  # train first, rest sorted
    assert [e.episode_id for e in splits["train"].episodes] == ["a", "b"]
    assert splits["test_in_domain"].image_root == tmp_path / "test_in_domain"


def test_converted_layout_groups_by_episode_split(tmp_path):
    # converted public data: one episodes.jsonl, image_root from manifest.json
    write_episodes([_episode("x", "test"), _episode("y", "train"), _episode("z", "test")], tmp_path / "episodes.jsonl")
    (tmp_path / "manifest.json").write_text(json.dumps({"image_root": "/data/shots"}))
    splits = load_splits(tmp_path)
    assert list(splits) == ["train", "test"]
    assert [e.episode_id for e in splits["test"].episodes] == ["x", "z"]
    assert splits["train"].image_root == Path("/data/shots")


def test_converted_layout_without_manifest_uses_root(tmp_path):
    # no manifest: screenshot paths are taken relative to the folder itself
    write_episodes([_episode("y", "train")], tmp_path / "episodes.jsonl")
    assert load_splits(tmp_path)["train"].image_root == tmp_path


def test_empty_folder_says_how_to_prepare(tmp_path):
    with pytest.raises(SchemaError, match="00_data_prep"):
        load_splits(tmp_path)


def _goal_split(goals: list[str]) -> Split:
    eps = tuple(
        Episode(
            episode_id=f"e{i}",
            instruction=g,
            steps=(Step(step_id=0, screenshot=f"img/{i}.png", screen_size=(10, 20), action=Action("wait")),),
            source="fixture",
            split="test",
        )
        for i, g in enumerate(goals)
    )
    return Split("test", eps, Path("/data"))


@pytest.mark.parametrize(
    "goals",
    [
        ["a", "b"],  # two episodes: they trade goals
        ["a", "b", "c", "d", "e"],  # all different: a derangement
        ["a", "a", "b", "c"],  # a repeated goal is never handed to its twin
        ["a", "a", "a", "b"],  # three of one goal and one other: every episode still gets a different text
    ],
)
def test_swap_goals_keeps_steps_and_moves_goals(goals):
    split = _goal_split(goals)
    swapped = swap_goals(split, seed=3)
    assert [e.episode_id for e in swapped.episodes] == [e.episode_id for e in split.episodes]  # same order
    assert [e.steps for e in swapped.episodes] == [e.steps for e in split.episodes]  # same ground truth
    assert swapped.name == split.name and swapped.image_root == split.image_root
    new = [e.instruction for e in swapped.episodes]
    assert all(a != b for a, b in zip(goals, new))  # every episode gets a goal text other than its own
    assert set(new) <= set(goals)  # taken from the split
    assert split.episodes[0].instruction == goals[0]  # the input is not modified


def test_swap_goals_all_changed_where_possible_and_seeded():
    split = _goal_split([f"goal {i}" for i in range(12)])
    a, b, c = swap_goals(split, seed=0), swap_goals(split, seed=0), swap_goals(split, seed=1)
    assert [e.instruction for e in a.episodes] == [e.instruction for e in b.episodes]  # same seed, same swap
    assert [e.instruction for e in a.episodes] != [e.instruction for e in c.episodes]  # another seed, another swap
    assert all(x.instruction != y.instruction for x, y in zip(a.episodes, split.episodes))
    assert sorted(e.instruction for e in a.episodes) == sorted(e.instruction for e in split.episodes)  # a permutation


def test_swap_goals_single_goal_text_is_kept():
    # nothing to swap with: every episode keeps its goal
    assert [e.instruction for e in swap_goals(_goal_split(["same", "same"]), seed=0).episodes] == ["same", "same"]


def _cut_last_line(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1]), encoding="utf-8")


def test_minigui_file_cut_at_a_line_boundary_is_an_error(tmp_path):
    # a MiniGUI export whose train file lost its last episode (a copy stopped at a line end)
    from guirl.env.export import build_minigui_dataset

    build_minigui_dataset(tmp_path, n_tasks=8, seed=0, progress=False)
    assert len(load_splits(tmp_path)["train"].episodes) == 5  # as written: the manifest's counts agree
    _cut_last_line(tmp_path / "train" / "episodes.jsonl")
    with pytest.raises(SchemaError, match=r"train/episodes.jsonl: 4 episodes, but manifest.json says 5 were written"):
        load_splits(tmp_path)


def test_converted_file_cut_at_a_line_boundary_is_an_error(tmp_path):
    episodes = [_episode("x", "test"), _episode("y", "train"), _episode("z", "test")]
    write_episodes(episodes, tmp_path / "episodes.jsonl")
    manifest = {"image_root": str(tmp_path), "n_episodes": 3, "n_steps": 3}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert sum(len(s.episodes) for s in load_splits(tmp_path).values()) == 3
    _cut_last_line(tmp_path / "episodes.jsonl")
    with pytest.raises(SchemaError, match="2 episodes, but manifest.json says 3 were written"):
        load_splits(tmp_path)


def test_grounding_rows_are_checked_against_the_manifest(tmp_path):
    from guirl.config import load_config
    from guirl.env.export import build_minigui_dataset
    from guirl.train.sft import build_records

    build_minigui_dataset(tmp_path, n_tasks=8, seed=0, progress=False)
    _cut_last_line(tmp_path / "grounding_train.jsonl")
    with pytest.raises(SchemaError, match=r"grounding_train.jsonl: \d+ rows, but manifest.json says \d+ were written"):
        build_records(load_config("tiny"), "grounding", tmp_path)


def test_stopped_minigui_build_leaves_no_manifest(tmp_path, monkeypatch):
    # the manifest is written last: a build that stops half-way leaves none, so readers rebuild
    # instead of trusting an earlier build's manifest beside half-written files
    from guirl.env import export

    export.build_minigui_dataset(tmp_path, n_tasks=8, seed=0, progress=False)
    assert (tmp_path / "manifest.json").is_file()

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "_export_split", stop)
    with pytest.raises(KeyboardInterrupt):
        export.build_minigui_dataset(tmp_path, n_tasks=8, seed=0, progress=False)
    assert not (tmp_path / "manifest.json").exists()


# ----------------------------------------------------------------------------- official splits
# The public data sets' small copies in their release layouts (tests/fixtures/make_fixtures.py,
# PUBLIC), converted as notebook 00 converts them: each episode lands in its official split (or the
# papers' rule), and no test episode is ever in the training split.
_spec = importlib.util.spec_from_file_location("make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)  # type: ignore[union-attr]


def _convert(name: str, tmp_path: Path) -> Path:
    from guirl.data.loaders import convert_dataset

    src = mf.PUBLIC[name](tmp_path / "src")
    out = tmp_path / "out" / name
    convert_dataset(name, src, out)  # strict: a bad record would raise
    return out


@pytest.mark.parametrize("name", sorted(mf.PUBLIC))
def test_public_copies_land_in_their_official_splits_and_test_never_trains(tmp_path, name):
    from guirl.data.splits import is_test_split

    out = _convert(name, tmp_path)
    splits = load_splits(out)
    assert {k: len(v.episodes) for k, v in splits.items()} == mf.PUBLIC_SPLITS[name]
    train = {e.episode_id for e in splits.get("train", Split("train", (), out)).episodes}
    tests = {e.episode_id for k, v in splits.items() if is_test_split(k) for e in v.episodes}
    assert tests and not (train & tests)
    assert all((v.image_root / s.screenshot).is_file() for v in splits.values() for e in v.episodes for s in e.steps)
    manifest = json.loads((out / "manifest.json").read_text())
    assert {k: v["episodes"] for k, v in manifest["splits"].items()} == mf.PUBLIC_SPLITS[name]


def test_androidcontrol_split_files_decide_each_episode(tmp_path):
    out = _convert("androidcontrol", tmp_path)
    splits = load_splits(out)
    assert [e.episode_id for e in splits["train"].episodes] == ["101", "102", "103", "104"]
    assert [e.episode_id for e in splits["validation"].episodes] == ["105"]
    test = splits["test"]
    assert {e.episode_id: e.extra["test_subsplits"] for e in test.episodes} == {
        "106": ["IDD"],
        "107": ["app_unseen", "category_unseen"],  # the release's subsplits overlap
        "108": ["task_unseen"],
    }
    views = subsplits(test)
    assert list(views) == ["test/IDD", "test/app_unseen", "test/category_unseen", "test/task_unseen"]
    assert [e.episode_id for e in views["test/app_unseen"].episodes] == ["107"]


def test_evaluation_never_reads_train_or_validation(tmp_path):
    from guirl.data.splits import is_test_split

    assert [n for n in ("train", "validation", "test", "test_task", "test_in_domain") if is_test_split(n)] == [
        "test",
        "test_task",
        "test_in_domain",
    ]


def test_training_records_come_from_train_only(tmp_path):
    # the SFT stage's records of a converted copy: the steps of the train split, nothing else
    from guirl.config import load_config
    from guirl.train.sft import build_records

    out = _convert("androidcontrol", tmp_path)
    cfg = load_config("tiny")
    records = build_records(cfg, "sft", out)
    train_steps = sum(len(e.steps) for e in load_splits(out)["train"].episodes)
    assert len(records) == train_steps * len(cfg.sft.histories)
    shots = {str(img) for r in records for img in r["images"]}
    assert shots and all(
        "/androidcontrol/10" in s and not any(f"/{i}/" in s for i in (105, 106, 107, 108)) for s in shots
    )


def test_an_episode_in_train_and_test_is_refused(tmp_path):
    # the check can fail: a hand-made file with one episode in both splits
    write_episodes([_episode("a", "train"), _episode("b", "test"), _episode("a", "test")], tmp_path / "episodes.jsonl")
    with pytest.raises(SchemaError, match=r"\['a'\] are in 'train' and in 'test'"):
        load_splits(tmp_path)


def test_a_missing_split_file_stops_the_conversion(tmp_path):
    from guirl.data.loaders import SplitFileError, load_dataset

    src = mf.PUBLIC["androidcontrol"](tmp_path / "src")
    (src / "splits.json").unlink()
    with pytest.raises(SplitFileError, match=r"splits.json: no AndroidControl split file.*split=NAME"):
        load_dataset("androidcontrol", src, image_dir=tmp_path / "o")
    ody = mf.PUBLIC["guiodyssey"](tmp_path / "src")
    (ody / "splits" / "random_split.json").unlink()
    with pytest.raises(SplitFileError, match="random_split.json: no GUI-Odyssey split file"):
        load_dataset("guiodyssey", ody)
    assert {e.split for e in load_dataset("guiodyssey", ody, split_file="task").episodes} == {"train", "test"}


@pytest.mark.parametrize(
    "content, match",
    [
        ({"train": [1], "validation": [], "test": [1]}, "episode 1 is in 'train' and in 'test'"),
        ({"train": [1], "test": [2]}, "key 'validation' must be a list"),
        ({"train": ["1"], "validation": [], "test": []}, "not an integer episode id"),
    ],
)
def test_malformed_androidcontrol_split_files_are_named(tmp_path, content, match):
    from guirl.data.loaders._splits import SplitFileError, read_androidcontrol_splits

    (tmp_path / "splits.json").write_text(json.dumps(content))
    with pytest.raises(SplitFileError, match=match):
        read_androidcontrol_splits(tmp_path / "splits.json")


def test_an_episode_the_split_file_does_not_list_is_a_bad_record(tmp_path):
    from guirl.data.loaders import SplitFileError, load_dataset

    src = mf.PUBLIC["androidcontrol"](tmp_path / "src")
    mf.write_ac_splits(src, train=[101, 102, 103, 104], validation=[105], test=[106, 107])  # 108 is in none
    with pytest.raises(SplitFileError, match="episode 108 of 'task_unseen' is 'in no split'"):  # the subsplits name it
        load_dataset("androidcontrol", src, image_dir=tmp_path / "o")
    (src / "test_subsplits.json").unlink()
    with pytest.warns(UserWarning, match="skipped 1"):
        res = load_dataset("androidcontrol", src, image_dir=tmp_path / "o", skip_bad=True)
    assert "episode 108 is in none of the splits" in res.skipped[0][2]
    assert "108" not in {e.episode_id for e in res.episodes}


@pytest.mark.parametrize(
    "name, want",
    [
        ("android_control_evaluation_std.jsonl", "test"),
        ("guio_test.jsonl", "test"),
        ("androidcontrol_high_test.parquet", "test"),
        ("train-00000.parquet", "train"),
        ("std.jsonl", None),
        ("train_test.jsonl", None),
    ],
)
def test_split_from_file_name(name, want):
    from guirl.data.loaders._splits import SplitFileError, split_from_file_name

    if want is None:
        with pytest.raises(SplitFileError, match="pass split=NAME"):
            split_from_file_name(name)
    else:
        assert split_from_file_name(name) == want


def test_aitz_and_amex_splits(tmp_path):
    from guirl.data.loaders import SplitFileError, load_dataset

    aitz = mf.PUBLIC["aitz"](tmp_path / "src")
    assert {e.split for e in load_dataset("aitz", aitz / "test").episodes} == {"test"}  # a split folder
    assert all(
        s.screenshot.startswith(("train/", "test/")) for e in load_dataset("aitz", aitz).episodes for s in e.steps
    )
    with pytest.raises(SplitFileError, match="no train/ or test/ folder"):
        load_dataset("aitz", aitz / "train" / "general")
    amex = mf.PUBLIC["amex"](tmp_path / "src")
    assert {e.split for e in load_dataset("amex", amex).episodes} == {"test"}  # CES evaluates on all of AMEX
    assert {e.split for e in load_dataset("amex", amex, split="train").episodes} == {"train"}


@pytest.mark.parametrize(
    ("names", "want"),
    [
        (["train", "test_in_domain", "test_unseen_app", "test_unseen_task"], "test_in_domain"),  # MiniGUI
        (["train", "validation", "test"], "test"),  # AndroidControl, GUI-Odyssey, AITZ
        (["test"], "test"),  # AMEX (test only)
        (["train", "test_website", "test_task", "test_domain"], "test_task"),  # Mind2Web: cross-task
        (["train", "validation", "test_b", "test_a"], "test_b"),  # else the first test split
    ],
)
def test_primary_test_split(names, want):
    assert primary_test_split(names) == want


def test_primary_test_split_needs_a_test_split():
    with pytest.raises(ValueError, match="no test split"):
        primary_test_split(["train", "validation"])
