"""Tests for guirl.studies.tiny_pretraining (notebook 09): held-out data, the rebuild path from
random weights to an installed base with its card, and the probe tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from guirl.config import load_config
from guirl.env.pretraining import PROBES
from guirl.models.tiny_base import CARD_FILE, tiny_base_dir, verify
from guirl.studies import tiny_pretraining as P


def test_goal_skills_never_quote_a_test_goal_of_00_and_use_train_templates_only() -> None:
    from guirl.env.export import plan_splits

    cfg = load_config("tiny", overlays=["smoke"])
    plan = plan_splits(cfg.data.n_train_tasks + cfg.data.n_test_tasks, cfg.seed)
    assert P.held_out_goals(cfg) == {t.instruction for k, ts in plan.items() if k != "train" for t in ts}
    assert {t.template_id for t in plan["train"]} <= P.goal_templates()
    assert not P.goal_templates() & {t.template_id for t in plan["test_unseen_task"] + plan["test_unseen_app"]}


def test_check_held_out_fails_on_an_overlap(tmp_path: Path) -> None:
    data = P.PretrainData(tmp_path, {"probe_screens_in_train": 2, "probe_goals_in_train": 0})
    with pytest.raises(AssertionError, match="probe_screens_in_train = 2"):
        P.check_held_out(data)


def test_paper_profiles_refuse_notebook_09() -> None:
    with pytest.raises(ValueError, match="needs the config section 'pretrain'"):
        P.prepare(load_config("paper-3b"))


def test_probe_tables_pair_the_same_samples() -> None:
    a = pd.DataFrame({"sample_id": list("abcd"), "skill": ["x", "x", "y", "y"], "correct": [0, 0, 1, 0]})
    b = pd.DataFrame({"sample_id": list("abcd"), "skill": ["x", "x", "y", "y"], "correct": [1, 1, 1, 1]})
    t = P.probe_table({"A": a, "B": b}, n_boot=200)
    assert t.set_index(["skill", "model"])["accuracy"].to_dict() == {
        ("x", "A"): 0.0,
        ("y", "A"): 50.0,
        ("x", "B"): 100.0,
        ("y", "B"): 100.0,
    }
    d = P.probe_paired({"A": a, "B": b}, "A", "B", n_boot=200).set_index("skill")
    assert d.loc["x", "diff"] == 100.0 and bool(d.loc["x", "resolved"])
    with pytest.raises(ValueError, match="not on the same samples"):
        P.probe_paired({"A": a, "B": b.iloc[::-1]}, "A", "B")


@pytest.mark.slow
def test_rebuild_trains_from_random_weights_scores_and_installs(tmp_path: Path) -> None:
    cfg = load_config("tiny", overrides=["pretrain.rebuild=true"], overlays=["smoke"])
    data = P.prepare(cfg, progress=False)
    P.check_held_out(data)
    result = P.train(cfg, data)
    assert result is not None and result["global_step"] == cfg.pretrain.max_steps
    models = P.probe_models(cfg, result)
    assert list(models) == ["random init", "tiny-base (this run)"]
    results = {name: P.probe(cfg, path, data) for name, path in models.items()}
    assert all(len(r) == len(PROBES) * cfg.pretrain.probe_per_skill for r in results.values())
    table = P.probe_table(results, n_boot=50)
    meta = P.card_meta(cfg, data, result, table[table["model"] == "tiny-base (this run)"], wall_seconds=1.0)
    assert meta["parameters"] > 1e6 and meta["probes"] and meta["seed"] == cfg.seed
    path = P.write_card_meta(cfg, meta)
    assert json.loads(path.read_text())["recipe"].startswith(f"{cfg.pretrain.max_steps} steps")
    from guirl.models.tiny_base import install_from_run

    dest = install_from_run(path.parent, tmp_path / "tiny_base")
    assert verify(dest)["train_seconds"] == meta["train_seconds"]
    assert "tiny-base (this run)" in (dest / CARD_FILE).read_text()
    assert tiny_base_dir(tmp_path / "cache", source=dest).is_dir()
    assert P.train(load_config("tiny", overlays=["smoke"]), data) is None  # without rebuild nothing trains


def test_probe_budget_fits_the_longest_expected_answer() -> None:
    from transformers import AutoTokenizer

    from guirl.models import build_tiny_model

    tok = AutoTokenizer.from_pretrained(build_tiny_model(seed=0))
    answers = ["ok", '{"action_type": "click", "x": 123, "y": 456}', "a much longer answer " * 8]
    longest = max(len(tok(a, add_special_tokens=False)["input_ids"]) for a in answers)
    assert P.probe_token_budget(tok, answers) == longest + 8 > 32  # past eval.max_new_tokens
    assert P.probe_token_budget(tok, answers[:1], margin=0) == len(tok("ok", add_special_tokens=False)["input_ids"])
