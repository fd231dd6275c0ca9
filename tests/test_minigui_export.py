"""MiniGUI dataset export: byte-identical rebuilds, splits, grounding samples, datasets loading."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from guirl.data.schema import read_episodes
from guirl.env.export import GROUNDING_TYPES, MINIGUI_SPLITS, build_minigui_dataset, plan_splits
from guirl.env.tasks import DEFAULT_HELDOUT_APP, DEFAULT_UNSEEN_TEMPLATES


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("mg_a")
    return root, build_minigui_dataset(root, n_tasks=30, seed=5, progress=False)


def test_same_seed_gives_byte_identical_dataset(built, tmp_path):
    """Done-when (b)."""
    root_a, _ = built
    build_minigui_dataset(tmp_path / "b", n_tasks=30, seed=5, progress=False)
    a, b = _all_bytes(root_a), _all_bytes(tmp_path / "b")
    assert a.keys() == b.keys() and len(a) > 50
    assert [k for k in a if a[k] != b[k]] == []


def test_different_seed_differs(built, tmp_path):
    root_a, _ = built
    build_minigui_dataset(tmp_path / "c", n_tasks=30, seed=6, progress=False)
    assert (root_a / "train/episodes.jsonl").read_bytes() != (tmp_path / "c/train/episodes.jsonl").read_bytes()


def test_splits_hold_out_templates_and_app(built):
    root, paths = built
    eps = {s: list(read_episodes(paths[s])) for s in MINIGUI_SPLITS}
    assert all(eps[s] for s in MINIGUI_SPLITS)
    train_t = {e.extra["template_id"] for e in eps["train"]}
    assert not train_t & set(DEFAULT_UNSEEN_TEMPLATES)
    assert all(
        DEFAULT_HELDOUT_APP not in e.apps for s in ("train", "test_in_domain", "test_unseen_task") for e in eps[s]
    )
    assert all(DEFAULT_HELDOUT_APP in e.apps for e in eps["test_unseen_app"])
    assert {e.extra["template_id"] for e in eps["test_unseen_task"]} <= set(DEFAULT_UNSEEN_TEMPLATES)
    ids = [e.episode_id for s in MINIGUI_SPLITS for e in eps[s]]
    assert len(ids) == len(set(ids)) == 30
    for s in MINIGUI_SPLITS:
        for e in eps[s]:
            assert e.success and e.split == s
            for st in e.steps:
                assert (paths[s].parent / st.screenshot).is_file()
    manifest = json.loads(paths["manifest"].read_text())
    assert sum(v["episodes"] for v in manifest["counts"].values()) == 30


def test_grounding_samples(built):
    root, paths = built
    rows = [json.loads(x) for x in paths["grounding"].read_text().splitlines()]
    assert {r["type"] for r in rows} == set(GROUNDING_TYPES)
    for r in rows:
        assert (root / r["image"]).is_file() and r["image"].startswith("train/")
        x1, y1, x2, y2 = r["box"]
        if r["type"] == "box_to_text":
            assert r["point"] is None and r["answer"]
        else:
            x, y = r["point"]
            assert json.loads(r["answer"]) == [x, y]
            assert x1 <= x <= x2 and y1 <= y <= y2
    assert any(r["question"].startswith("Which element turns") for r in rows) or any(
        r["question"].startswith("Which element opens") for r in rows
    )


def test_loadable_with_datasets(built, tmp_path):
    root, paths = built
    files = {s: str(paths[s]) for s in MINIGUI_SPLITS}
    ds = datasets.load_dataset("json", data_files=files, cache_dir=str(tmp_path / "hf"))
    assert set(ds) == set(MINIGUI_SPLITS) and ds["train"].num_rows > 0
    assert "steps" in ds["train"].column_names
    g = datasets.load_dataset("json", data_files=str(paths["grounding"]), cache_dir=str(tmp_path / "hf"))["train"]
    assert {"image", "question", "answer", "point", "box", "type"} <= set(g.column_names)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            {"n_tasks": 10, "test_fraction": 0.5, "unseen_task_fraction": 0.5},
            "leaves no training task",
        ),  # no train left
        ({"n_tasks": 20, "unseen_templates": ["nope"]}, "unknown"),  # typo in a template id
        ({"n_tasks": 20, "unseen_templates": ["notes.add"]}, "held-out app"),  # overlaps the held-out app
    ],
)
def test_plan_splits_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan_splits(seed=0, **kwargs)
