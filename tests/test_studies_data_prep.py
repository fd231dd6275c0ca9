"""Notebook 00's study (guirl.studies.data_prep): every public data set's small copy in its release
layout (tests/fixtures/make_fixtures.py, PUBLIC) converts through ``prepare`` as 00 converts it,
each episode in its official split, and the readers of 00's output see the test splits only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from guirl.config import load_config

_spec = importlib.util.spec_from_file_location("make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(mf.PUBLIC))
def test_prepare_converts_each_public_copy_into_its_splits(tmp_path, monkeypatch, name):
    from guirl.data import stats
    from guirl.studies import data_prep
    from guirl.studies.shared.inputs import eval_splits

    monkeypatch.setenv("GUIRL_DATA", str(tmp_path / "data"))
    src = mf.PUBLIC[name](tmp_path / "src")
    cfg = load_config("paper-3b", name, overrides=[f"data.path={src}"])
    prepared = data_prep.prepare(cfg)
    assert prepared.skipped == 0
    counts: dict[str, int] = {}
    for e in prepared.episodes:
        counts[e.split] = counts.get(e.split, 0) + 1
    assert counts == mf.PUBLIC_SPLITS[name]
    tests = eval_splits(cfg)  # what the notebooks evaluate: never train, never validation
    assert set(tests) == {k for k in mf.PUBLIC_SPLITS[name] if k not in ("train", "validation")}
    sizes = stats.split_sizes_vs_paper(prepared.episodes, name)
    assert (sizes["paper"].notna() & sizes["location"].ne("")).any()  # every public set has a paper number
    assert sizes.loc[(sizes["split"] == "(all)") & (sizes["quantity"] == "episodes"), "ours"].iloc[0] == sum(
        mf.PUBLIC_SPLITS[name].values()
    )
