"""Notebook 02's grid and tables (guirl.studies.ccpo_rl, guirl.studies.shared.rl_runs): which RL runs it trains, the reward-rise
check, paired gains and their wording, the Table 5 / 10 / 11 layouts and the paper cells."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from guirl.config import ConfigError, load_config
from guirl.studies import ccpo_rl as cs
from guirl.studies.shared import rl_runs as R


def cfg_with(**ccpo):
    return load_config("tiny", overrides=[f"ccpo.{k}={json.dumps(v)}" for k, v in ccpo.items()])


# ----------------------------------------------------------------------------- the grid
def test_main_runs_pair_so_rl_and_ccpo_per_history() -> None:
    cfg = load_config("tiny")
    runs = cs.main_runs(cfg)
    assert [(r.role, r.history, r.label) for r in runs] == [
        (m, h, R.LABELS[m]) for h in cfg.eval.histories for m in ("semi_online", "ccpo")
    ]
    assert [r.name for r in runs][:2] == [f"semi_online_{cfg.eval.histories[0]}", f"ccpo_{cfg.eval.histories[0]}"]


@pytest.mark.parametrize(
    ("ccpo", "tags"),
    [
        ({"ablation_history": None}, []),  # null: no ablation runs
        ({"ablation_history": "1AO", "ablation_group_sizes": [2]}, ["casc", "min", "g2"]),  # Table 5, 10, 11
        ({"ablation_history": "3AO", "ablation_group_sizes": [2, 4, 8]}, ["casc", "min", "g2", "g8"]),  # 4 = main run
    ],
)
def test_ablation_runs(ccpo: dict, tags: list[str]) -> None:
    cfg = cfg_with(**ccpo)
    assert cfg.rl.group_size == 4
    runs = cs.ablation_runs(cfg)
    assert [r.tag for r in runs] == tags
    assert all(r.role == "ccpo" and r.history == ccpo["ablation_history"] for r in runs)
    assert len({r.label for r in runs}) == len(runs)  # labels are model names in the tables
    by_tag = {r.tag: dict(r.overrides) for r in runs}
    if tags:
        # Table 5 "+ CASC": CCPO's loop with SO-RL's reward (and SO-RL's patch rule, the default),
        # so that against SO-RL only CASC changes
        assert by_tag["casc"] == {"rl.reward": "semi_online"} and by_tag["min"] == {"ccpo.compress": "min"}
        stage = R.rl_stage_config(cfg, "ccpo", "1AO", by_tag["casc"])
        assert stage.rl.reward == "semi_online" and stage.rl.role == "ccpo"
        assert stage.ccpo.match_rule == "semi_online" and stage.ccpo.compress == "max"


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("ablation_history", "3", "not a history tag"),  # a tag needs the AO suffix
        ("ablation_history", "0AO", "not a history tag"),  # at least one step of history
        ("ablation_group_sizes", [1, 4], "at least 2 rollouts"),  # a group of one has no advantage
    ],
)
def test_ablation_keys_are_validated(key: str, value, words: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=words):
        cfg_with(**{key: value})


# ----------------------------------------------------------------------------- paired gains
def rec(model: str, step: int, exact: bool) -> dict:
    return {
        "model": model,
        "split": "test_in_domain",
        "history": "1AO",
        "episode_id": f"e{step // 5}",
        "step_id": step % 5,
        "exact": exact,
        "counted": True,
    }


def test_paired_gains_stack_pairs_and_conclusions_follow_the_marks() -> None:
    cfg = load_config("tiny")
    recs = [rec("SFT", i, False) for i in range(60)]
    recs += [rec("SO-RL", i, i % 2 == 0) for i in range(60)]  # +50 points: resolved
    recs += [rec("CCPO", i, i % 2 == 0 if i != 1 else True) for i in range(60)]  # one step more than SO-RL
    g = cs.paired_gains(cfg, recs, [("SFT", "SO-RL"), ("SO-RL", "CCPO")])
    assert g[["baseline", "model"]].values.tolist() == [["SFT", "SO-RL"], ["SO-RL", "CCPO"]]
    assert g["baseline SR"].tolist()[0] == 0.0 and g["model SR"].tolist()[0] == pytest.approx(50.0)
    assert g["resolved"].tolist() == [True, False]
    text = cs.conclusions(g).splitlines()
    assert text[0].startswith("SO-RL has a higher step SR than SFT on test_in_domain 1AO")
    assert "not resolved" in text[1] and "higher" not in text[1]


# ----------------------------------------------------------------------------- Tables 5, 10, 11
def steps_frame() -> pd.DataFrame:
    rows = []
    for model, sr in [("SFT", 40.0), ("SO-RL", 45.0), ("CCPO w/o CR", 47.0), ("CCPO", 50.0), ("CCPO 2 rollouts", 44.0)]:
        for split, n in [("test_in_domain", 100), ("test_unseen_app", 300)]:
            rows.append(
                {
                    "model": model,
                    "history": "1AO",
                    "split": split,
                    "TM": sr + 30,
                    "GR": sr - 10,
                    "SR": sr + (split == "test_unseen_app"),
                    "n": n,
                    "n_counted": n,
                }
            )
    return pd.DataFrame(rows)


def test_ablation_table_deltas_are_against_the_row_above() -> None:
    rows = [("SFT", "SFT"), ("+ Semi-online", "SO-RL"), ("+ CASC", "CCPO w/o CR"), ("+ CASC + CR", "CCPO")]
    t = cs.ablation_table(steps_frame(), rows, history="1AO", split="test_in_domain")
    assert t["SR"].tolist() == [40.0, 45.0, 47.0, 50.0]
    assert pd.isna(t["SR delta"].iloc[0]) and t["SR delta"].tolist()[1:] == [5.0, 2.0, 3.0]
    with pytest.raises(KeyError, match="no step metrics for model 'RL'"):
        cs.ablation_table(steps_frame(), [("x", "RL")], history="1AO", split="test_in_domain")


def test_rollouts_table_weights_overall_by_counted_steps() -> None:
    t = cs.rollouts_table(
        steps_frame(), {4: "CCPO", 2: "CCPO 2 rollouts"}, history="1AO", splits=["test_in_domain", "test_unseen_app"]
    )
    assert t["rollouts"].tolist() == [2, 4]  # sorted by rollout count
    ccpo = t.iloc[1]
    assert ccpo["test_in_domain"] == 50.0 and ccpo["test_unseen_app"] == 51.0
    assert ccpo["overall"] == pytest.approx((100 * 50.0 + 300 * 51.0) / 400)


def test_table10_joins_accuracy_and_efficiency() -> None:
    t4 = pd.DataFrame(
        [
            {"Model": "SO-RL", "History Length": "1AO", "Compression Rate (%)": 0.0, "s/step": 10.0, "Speedup": 1.0},
            {"Model": "CCPO", "History Length": "1AO", "Compression Rate (%)": 40.0, "s/step": 5.0, "Speedup": 2.0},
        ]
    )
    t = cs.table10(steps_frame(), t4, history="1AO", split="test_in_domain", models={"SO-RL": "SO-RL", "CCPO": "CCPO"})
    assert t[["row", "SR", "Speedup"]].values.tolist() == [["SO-RL", 45.0, 1.0], ["CCPO", 50.0, 2.0]]
    with pytest.raises(KeyError, match="no single Table 4 row for 'CCPO MIN'"):
        cs.table10(steps_frame(), t4, history="1AO", split="test_in_domain", models={"CCPO MIN": "CCPO"})
