"""What notebooks show of their stages (``guirl.studies.shared.stages``) and the paired sentences and
online tables (``guirl.studies.shared.paired``): written once, used by 02, 03, 04 and 07."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from guirl.config import load_config
from guirl.studies.shared.evaluation import OnlineEvaluation
from guirl.studies.shared.paired import conclusions, online_paired
from guirl.studies.shared.stages import (
    RL_SCHEDULE_COLUMNS,
    STAGE_COLUMNS,
    reward_rise,
    rl_curves,
    rl_schedule,
    stage_table,
)


def write_log(path: Path, rewards: list[float]) -> dict:
    path.write_text("".join(json.dumps({"step": i + 1, "reward": r}) + "\n" for i, r in enumerate(rewards)))
    return {"log": str(path), "samples_generated": len(rewards)}


@pytest.mark.parametrize(
    ("rewards", "verdict"),
    [
        ([0.1, 0.2, 0.15, 0.5, 0.6, 0.55], "up"),  # last third well above the first
        ([0.6, 0.5, 0.55, 0.1, 0.2, 0.15], "down"),  # a falling reward is resolved too, negative
        ([0.3, 0.3, 0.3, 0.3, 0.3, 0.3], "flat"),  # no change: interval [0, 0] does not exclude 0
        ([0.1, 0.9, 0.5, 0.9, 0.1, 0.5], "flat"),  # noisy, same mean: unresolved
    ],
)
def test_reward_rise(tmp_path: Path, rewards: list[float], verdict: str) -> None:
    t = reward_rise({"s": write_log(tmp_path / "log.jsonl", rewards)}, window=3, n_boot=500)
    r = t.iloc[0]
    assert r["lo"] <= r["diff"] <= r["hi"]
    assert r["diff"] == pytest.approx(sum(rewards[-3:]) / 3 - sum(rewards[:3]) / 3)
    assert bool(r["resolved"]) == (verdict != "flat")
    assert (r["lo"] > 0) == (verdict == "up") and (r["hi"] < 0) == (verdict == "down")


def test_reward_rise_needs_two_windows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="stage s: 3 logged steps, need 4"):
        reward_rise({"s": write_log(tmp_path / "log.jsonl", [0.1, 0.2, 0.3])}, window=2)


def test_reward_rise_defaults_to_halves_and_scales(tmp_path: Path) -> None:
    # 07's reading: half of the steps each side (one step compares with itself), points of a [0, 1] reward
    res = {
        "sft": {"n_records": 10, "global_step": 2},  # not an RL stage: left out
        "rl": write_log(tmp_path / "a.jsonl", [0.0, 0.0, 1.0, 1.0]),
        "one": write_log(tmp_path / "b.jsonl", [0.5]),
    }
    t = reward_rise(res, n_boot=200, scale=100)
    assert list(t["stage"]) == ["rl", "one"] and list(t["window"]) == [2, 1]
    assert t.iloc[0]["diff"] == 100.0 and t.iloc[1]["diff"] == 0.0 and not t.iloc[1]["resolved"]


def test_stage_table_has_one_row_per_stage_of_either_kind() -> None:
    t = stage_table(
        {
            "warmup": {"global_step": 3, "n_records": 24, "train_seconds": 1.5},
            "grpo": {"global_step": 2, "role": "ces.coordinator", "samples_generated": 16, "samples_trained": 12},
            "pool": {"global_step": 0, "skipped": "D0 has no record"},
        }
    )
    assert list(t.columns) == list(STAGE_COLUMNS) and list(t["kind"]) == ["sft", "rl", "sft"]
    assert t.iloc[0]["records"] == 24 and pd.isna(t.iloc[0]["generated"]) and t.iloc[1]["role"] == "ces.coordinator"
    assert t.iloc[1]["generated"] == 16 and pd.isna(t.iloc[1]["records"]) and t.iloc[2]["skipped"] == "D0 has no record"


def test_rl_curves_key_columns(tmp_path: Path) -> None:
    a = write_log(tmp_path / "a.jsonl", [0.1, 0.2])
    one = rl_curves({"s": a}, ("reward", "kl"))
    assert list(one.columns) == ["stage", "step", "reward"]  # a column the log lacks is left out
    two = rl_curves({("CCPO", "1AO"): a}, ("reward",), keys=("method", "history"))
    assert list(two.columns) == ["method", "history", "step", "reward"] and set(two["history"]) == {"1AO"}
    with pytest.raises(ValueError, match="does not match the key columns"):
        rl_curves({"s": a}, keys=("method", "history"))


def online(rows: list[tuple[int, str, bool, float]]) -> OnlineEvaluation:
    return OnlineEvaluation(
        "1AO", episodes=[{"run": r, "task_id": t, "success": ok, "subgoal_rate": sg} for r, t, ok, sg in rows]
    )


def test_online_paired_pairs_runs_and_tasks() -> None:
    cfg = load_config("tiny", overrides=["eval.bootstrap_samples=200"])
    a = online([(0, "t1", False, 0.0), (0, "t2", False, 0.5), (1, "t1", False, 0.0), (1, "t2", True, 1.0)])
    b = online([(0, "t1", True, 1.0), (0, "t2", True, 1.0), (1, "t1", True, 1.0), (1, "t2", True, 1.0)])
    t = online_paired(cfg, {"A": a, "B": b}, [("A", "B")])
    assert list(t["metric"]) == ["Task SR", "Subgoal SR"] and list(t["A"]) == ["A", "A"]
    assert t.iloc[0]["diff"] == 75.0 and t.iloc[0]["A_value"] == 25.0 and t.iloc[0]["B_value"] == 100.0
    with pytest.raises(ValueError, match="same runs and tasks"):
        online_paired(cfg, {"A": a, "C": online([(0, "t1", True, 1.0)])}, [("A", "C")])


@pytest.mark.parametrize(
    "row, sentence",
    [
        # a step table: "step SR" and where
        (
            {
                "A": "SFT",
                "B": "CCPO",
                "split": "in",
                "history": "1AO",
                "diff": 2.0,
                "lo": 0.5,
                "hi": 3.5,
                "verdict": "B > A",
            },
            "CCPO has a higher step SR than SFT on in 1AO (+2.0 points, 95% interval [+0.5, +3.5]).",
        ),
        # a named step metric
        (
            {
                "A": "x",
                "B": "y",
                "split": "in",
                "metric": "Type",
                "diff": -2.0,
                "lo": -3.0,
                "hi": -1.0,
                "verdict": "B < A",
            },
            "y has a lower step Type than x on in (-2.0 points, 95% interval [-3.0, -1.0]).",
        ),
        # an online metric is said as it is; no split
        (
            {"A": "x", "B": "y", "metric": "Task SR", "diff": 1.0, "lo": -1.0, "hi": 3.0, "verdict": "not resolved"},
            "y vs x: not resolved (+1.0 points, 95% interval [-1.0, +3.0]).",
        ),
    ],
)
def test_conclusions_are_worded_from_the_interval(row: dict, sentence: str) -> None:
    assert conclusions(pd.DataFrame([row])) == sentence


def test_conclusions_leave_out_baseline_rows_and_take_column_names() -> None:
    rows = [
        {"vs": "single", "row": "single", "diff": 0.0, "lo": 0.0, "hi": 0.0, "verdict": "baseline"},
        {"vs": "single", "row": "C-DREM", "diff": 1.0, "lo": 0.2, "hi": 2.0, "verdict": "B > A"},
    ]
    out = conclusions(pd.DataFrame(rows), names=("vs", "row"))
    assert out == "C-DREM has a higher step SR than single (+1.0 points, 95% interval [+0.2, +2.0])."


@pytest.mark.parametrize(
    ("rl", "want"),
    [
        ({"max_steps": 10, "prompts_per_step": 4, "group_size": 8, "mini_batches": 1}, (10, 32, 10)),
        ({"max_steps": 3, "prompts_per_step": 2, "group_size": 4, "mini_batches": 4}, (3, 8, 12)),  # CCPO's 4 updates
        ({"max_steps": 1, "prompts_per_step": 1, "group_size": 2, "mini_batches": 2}, (1, 2, 2)),
    ],
)
def test_rl_schedule_reads_each_rl_stages_config_and_leaves_sft_out(tmp_path: Path, rl, want) -> None:
    from guirl.train.launch import SFT_ENTRY, Stage
    from guirl.train.rl import RL_ENTRY

    cfg = load_config("tiny")
    rl_cfg = cfg.replace({f"rl.{k}": v for k, v in {**rl, "role": "grpo"}.items()})
    stages = {
        "warm-up": Stage("sft", SFT_ENTRY, cfg, {"data": tmp_path}, tmp_path, tmp_path / "a"),
        "grpo": Stage("grpo", RL_ENTRY, rl_cfg, {"data": tmp_path}, tmp_path / "a" / "final", tmp_path / "b"),
    }
    (row,) = rl_schedule(stages).to_dict(orient="records")
    assert list(row) == list(RL_SCHEDULE_COLUMNS) and row["stage"] == "grpo" and row["role"] == "grpo"
    assert (row["rl_steps"], row["samples_per_step"], row["optimizer_updates"]) == want
    assert list(rl_schedule({}).columns) == list(RL_SCHEDULE_COLUMNS)  # no RL stage: the columns, no row
