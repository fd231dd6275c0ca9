"""Tests for guirl.studies.seed_study: training seeds (which seeds, what a seeded config changes), the
seed table (mean, seed std, two-way interval), per-seed conclusions, what the goal is worth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.config import load_config
from guirl.metrics.paired import paired_difference, seed_spread_test
from guirl.studies import seed_study as ss
from guirl.studies.shared.agents import sft_agents
from guirl.studies.shared.paired import PAIRED_COLUMNS, paired_table


@pytest.mark.parametrize(
    ("overrides", "seeds"),
    [
        ([], [0, 1, 2]),  # tiny: 3 training seeds from the run's seed
        (["seed=5", "eval.n_train_seeds=2"], [5, 6]),  # consecutive from the run's own seed
        (["eval.n_train_seeds=1"], [0]),  # one seed: 01's run alone
    ],
)
def test_train_seeds(overrides: list[str], seeds: list[int]) -> None:
    assert ss.train_seeds(load_config("tiny", overrides=overrides)) == seeds


def test_seeded_changes_the_seed_only() -> None:
    cfg = load_config("tiny")
    other = ss.seeded(cfg, 2)
    assert other.seed == 2 and cfg.seed == 0  # the run config is untouched
    assert {k for k, v in other.to_flat().items() if cfg.to_flat()[k] != v} == {"seed"}


def write_result(folder: Path, **fields) -> None:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(fields))


@pytest.mark.parametrize(
    ("overrides", "seed", "start", "grounding"),
    [
        ([], 1, "tiny-1", True),  # scope all: seed 1 builds its own tiny model and grounds it
        ([], 0, "tiny-0", True),  # the run's own seed: what 01 trains
        (["eval.train_seed_scope=sft"], 2, "01/grounding/final", False),  # SFT only: from 01's grounding model
        (["eval.train_seed_scope=sft"], 0, "tiny-0", True),  # the run's own seed is 01's run in either scope
        (["eval.train_seed_scope=sft", "grounding.enabled=false"], 2, "tiny-0", False),  # no grounding: the run's base
        (["grounding.enabled=false"], 2, "tiny-2", False),  # scope all without grounding: the seed's own base
    ],
)
def test_seed_start(tmp_path: Path, monkeypatch, overrides: list[str], seed: int, start: str, grounding: bool) -> None:
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    monkeypatch.setattr(ss, "base_model_dir", lambda c: Path(f"tiny-{c.seed}"))  # no build: the seed it was asked for
    write_result(tmp_path / "tiny" / "01_sft" / "grounding", final="01/grounding/final")
    got = ss.seed_start(load_config("tiny", overrides=overrides), seed)
    assert got == {"base_model": Path(start), "grounding": grounding}


def test_seed_start_sft_scope_names_01_when_it_has_not_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"01_sft/grounding/result.json.*make nb-01_sft"):
        ss.seed_start(load_config("tiny", overrides=["eval.train_seed_scope=sft"]), 1)


def test_seed_scope_is_validated() -> None:
    with pytest.raises(ValueError, match="train_seed_scope"):
        load_config("tiny", overrides=["eval.train_seed_scope=grounding"])


def recs(matrix: list[list[int]], model: str = "m", split: str = "s") -> list[dict]:
    """Prediction-like records of a (seeds, steps) 0/1 matrix."""
    return [
        {"model": model, "history": "1AO", "split": split, "seed": i, "episode_id": "e", "step_id": j, "exact": bool(v)}
        for i, row in enumerate(matrix)
        for j, v in enumerate(row)
    ]


@pytest.mark.parametrize(
    ("matrix", "sr", "std", "p"),
    [
        ([[1, 1, 0, 0], [1, 1, 0, 0]], 50.0, 0.0, 1.0),  # two seeds, the same outcomes: no seed spread
        # all or nothing: sample std of (100, 0); a column swap makes the same split, so 1 draw in 2 is as wide
        ([[1, 1, 1, 1], [0, 0, 0, 0]], 50.0, math.sqrt(2) * 50.0, None),
        ([[1, 0, 0, 0]], 25.0, math.nan, math.nan),  # one seed: no seed std, nothing to test
    ],
)
def test_seed_table_mean_and_seed_std(matrix: list[list[int]], sr: float, std: float, p: float | None) -> None:
    row = ss.seed_table(recs(matrix), n_boot=200, boot_seed=0).iloc[0]
    assert row["SR"] == pytest.approx(sr) and row["n_seeds"] == len(matrix) and row["n_steps"] == 4
    assert (math.isnan(row["seed_std"]) and math.isnan(std)) or row["seed_std"] == pytest.approx(std)
    spread = seed_spread_test(np.asarray(matrix, dtype=float), n_perm=200, seed=0)  # the same draws as the table
    assert row["seed_std_p"] == pytest.approx(spread.p_value, nan_ok=True)
    assert row["seed_std_null"] == pytest.approx(100 * spread.null_mean, nan_ok=True)
    if p is not None:
        assert row["seed_std_p"] == pytest.approx(p, nan_ok=True)
    else:  # 2 seeds x 4 steps: 2 of the 16 column swaps put every one in one row, so p is about 1/8
        assert 0.05 < row["seed_std_p"] < 0.2
    assert row["SR_lo"] <= row["SR"] <= row["SR_hi"]
    assert row["per_seed"] == ", ".join(f"{i}: {100 * np.mean(r):.1f}" for i, r in enumerate(matrix))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=4))
def test_seed_table_interval_is_the_two_way_bootstrap_of_the_rate(matrix: list[list[bool]]) -> None:
    row = ss.seed_table(recs(matrix), n_boot=100, boot_seed=3).iloc[0]
    m = np.asarray(matrix, dtype=float)
    d = paired_difference(np.zeros_like(m), m, n_boot=100, seed=3)
    assert (row["SR"], row["SR_lo"], row["SR_hi"]) == pytest.approx((100 * m.mean(), 100 * d.lo, 100 * d.hi))
    assert row["half_width"] == pytest.approx(50 * (d.hi - d.lo))


def test_seed_table_groups_and_counted_steps_and_refuses_unpaired_seeds() -> None:
    records = recs([[1, 0], [1, 1]], model="a") + recs([[0, 0], [0, 1]], model="b", split="t")
    records.append({**records[0], "step_id": 9, "exact": False, "counted": False})  # outside the SR denominator
    table = ss.seed_table(records, n_boot=50, boot_seed=0)
    assert table[["model", "split", "n_steps"]].values.tolist() == [["a", "s", 2], ["b", "t", 2]]
    with pytest.raises(ValueError, match="seed 1 has no record"):
        ss.seed_table(recs([[1, 0], [1, 1]])[:-1], n_boot=50, boot_seed=0)  # seed 1 lacks step 1


def pair_recs(seed_rows: dict[str, list[list[int]]]) -> list[dict]:
    return [r for model, matrix in seed_rows.items() for r in recs(matrix, model=model)]


# ----------------------------------------------------------------------------- what the goal is worth
def test_evaluate_other_goal_swaps_goals_keeps_steps_and_labels(monkeypatch) -> None:
    from guirl.actions import Action
    from guirl.data.schema import Episode, Step
    from guirl.data.splits import Split
    from guirl.studies.shared import evaluation as ev

    step = Step(step_id=0, screenshot="s.png", screen_size=(10, 20), action=Action("wait"))
    eps = tuple(Episode(f"e{i}", f"goal {i}", (step,), "fixture", "test_in_domain") for i in range(5))
    splits = {"test_in_domain": Split("test_in_domain", eps, Path("/d"))}
    seen: list[tuple[str, list[str], list[str]]] = []

    def grid(cfg, policies, splits, *, histories, labels, progress):
        ((name, _),) = policies.items()
        for split in splits.values():
            seen.append((name, [e.episode_id for e in split.episodes], [e.instruction for e in split.episodes]))
        return [{"model": name, "split": s, "history": histories[0], **labels} for s in splits]

    monkeypatch.setattr(ev, "evaluation_grid", grid)
    cfg = load_config("tiny")
    names = [a.name for a in sft_agents(cfg)]
    stages = {seed: {n: {} for n in names} for seed in (0, 1)}  # agents only: no zero-shot model is needed
    recs = ss.evaluate_other_goal(cfg, stages, splits, history="1AO", progress=False)
    # every agent of every seed, labelled as the other-goal variant, with its seed
    assert [(r["model"], r["seed"]) for r in recs] == [(ss.other_goal(n), s) for s in (0, 1) for n in names]
    assert all(ids == [e.episode_id for e in eps] for _, ids, _ in seen)  # the same episodes in the same order
    swaps = {tuple(goals) for _, _, goals in seen}
    assert len(swaps) == 1  # the same swap for every agent and training seed (paired)
    (goals,) = swaps
    assert all(g != e.instruction for g, e in zip(goals, eps))  # no episode kept its own goal
    assert splits["test_in_domain"].episodes == eps  # the caller's split is untouched
    assert ss.other_goal("SFT (High)") != "SFT (High)"


def test_paired_table_and_per_seed_conclusions() -> None:
    cfg = load_config("tiny", overrides=["eval.bootstrap_samples=200"])
    # B beats A on every step of seed 0 and ties on seed 1
    records = pair_recs({"A": [[0] * 30, [1] * 30], "B": [[1] * 30, [1] * 30]})
    table = paired_table(cfg, records, [("A", "B")])
    assert list(table.columns) == [*PAIRED_COLUMNS, "n_seeds", "n_steps"]
    row = table.iloc[0]
    assert (row["A_SR"], row["B_SR"], row["diff"]) == pytest.approx((50.0, 100.0, 50.0)) and row["n_seeds"] == 2
    agree = ss.seed_conclusions(cfg, records, [("A", "B")])
    assert agree["seed"].tolist() == [0, 1]
    assert agree["verdict"].tolist() == ["B > A", "unresolved"]  # seed 1 alone sees no difference
    assert agree["verdict_all_seeds"].tolist() == [row["verdict"]] * 2
    assert agree["same_conclusion"].tolist() == [row["verdict"] == "B > A", row["verdict"] == "unresolved"]
    assert paired_table(cfg, records, []).empty  # no executor: no pairs, an empty table
    assert ss.seed_conclusions(cfg, records, []).empty
