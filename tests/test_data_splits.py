"""Split resolution over the two prepared-dataset layouts (MiniGUI folders, converted JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guirl.actions import Action
from guirl.data.schema import Episode, SchemaError, Step, write_episodes
from guirl.data.splits import Split, load_splits, swap_goals


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
