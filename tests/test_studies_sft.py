"""Tests for guirl.studies.sft: the stage overview and loss curves of notebook 01, and training
length as an axis (every kept checkpoint scored on the same test steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guirl.config import load_config
from guirl.studies import sft as S


def test_stage_overview_and_loss_curves() -> None:
    stages = {
        "grounding": {
            "global_step": 3,
            "train_seconds": 1.5,
            "n_records": 9,
            "resumed_from": None,
            "log_history": [{"step": 1, "loss": 2.0}, {"step": 3, "loss": 1.0}, {"train_runtime": 1.5}],
        },
        "SFT (High)": {
            "global_step": 2,
            "train_seconds": 0.5,
            "n_records": 4,
            "resumed_from": "ck-1",
            "log_history": [{"step": 2, "loss": 0.5}],
        },
    }
    overview = S.stage_overview(stages)
    assert overview["stage"].tolist() == ["grounding", "SFT (High)"] and overview["steps"].tolist() == [3, 2]
    curves = S.loss_curves(stages)
    assert curves.values.tolist() == [["grounding", 1, 2.0], ["grounding", 3, 1.0], ["SFT (High)", 2, 0.5]]
    fig = S.plot_loss_curves(curves)
    assert [ax.get_title() for ax in fig.axes] == ["grounding loss", "SFT (High) loss"]


# ----------------------------------------------------------------------------- learning curves
@pytest.mark.parametrize(
    ("folders", "steps"),
    [
        (["checkpoint-140", "checkpoint-20", "checkpoint-700"], [20, 140, 700]),  # numeric order, not text order
        (["checkpoint-50", "final", "checkpoint-x", "README.md"], [50]),  # other names are not checkpoints
        (["checkpoint-5.tmp", "checkpoint-10"], [10]),  # a partial save's name is not a checkpoint
    ],
)
def test_checkpoint_steps(tmp_path: Path, folders: list[str], steps: list[int]) -> None:
    for name in folders:
        (tmp_path / name).mkdir()
    assert S.checkpoint_steps(tmp_path) == steps


def test_checkpoint_steps_names_the_folder_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "checkpoint-3").write_text("a file, not a checkpoint folder")
    with pytest.raises(FileNotFoundError, match=r"no checkpoint-<step> folder.*sft.save_total_limit: null"):
        S.checkpoint_steps(tmp_path)


def test_checkpoint_curve_scores_each_checkpoint_with_its_step(tmp_path: Path, monkeypatch) -> None:
    from guirl.studies.shared import evaluation as ev

    for n in (10, 20, 30):
        (tmp_path / f"checkpoint-{n}").mkdir()
    loaded: list[Path] = []
    monkeypatch.setattr(ev, "eval_policy", lambda cfg, source: loaded.append(Path(source)) or str(source))

    def grid(cfg, policies, splits, *, histories, labels, progress):
        ((name, build),) = policies.items()
        build()  # the grid builds each policy when its turn comes
        return [{"model": name, "history": histories[0], "split": s, **labels} for s in splits]

    monkeypatch.setattr(ev, "evaluation_grid", grid)
    cfg = load_config("tiny")
    recs = S.checkpoint_curve(cfg, tmp_path, {"a": None, "b": None}, history="1AO", steps=[30, 10], progress=False)
    assert [(r["model"], r["step"], r["split"]) for r in recs] == [
        ("step 30", 30, "a"),
        ("step 30", 30, "b"),
        ("step 10", 10, "a"),
        ("step 10", 10, "b"),
    ]
    assert loaded == [tmp_path / "checkpoint-30", tmp_path / "checkpoint-10"]
    with pytest.raises(ValueError, match=r"no checkpoint at step\(s\) \[15\]; it holds \[10, 20, 30\]"):
        S.checkpoint_curve(cfg, tmp_path, {"a": None}, history="1AO", steps=[15], progress=False)
    assert len(S.checkpoint_curve(cfg, tmp_path, {"a": None}, history="1AO", progress=False)) == 3  # all by default


def step_record(step: int, i: int, exact: bool) -> dict:
    """A scored step of checkpoint ``step`` (a click, type matched, grounded when exact)."""
    return {
        "step": step,
        "history": "1AO",
        "split": "test_in_domain",
        "episode_id": "e",
        "step_id": i,
        "parse_ok": True,
        "type_match": True,
        "grounding": exact,
        "exact": exact,
        "counted": True,
    }


def test_curve_table_is_one_row_per_step_in_step_order() -> None:
    cfg = load_config("tiny", overrides=["eval.bootstrap_samples=50"])
    later = [step_record(200, i, i < 3) for i in range(4)]  # 3 of 4 right
    earlier = [step_record(100, i, i < 1) for i in range(4)]  # 1 of 4 right
    table = S.curve_table(cfg, later + earlier)
    assert table["step"].tolist() == [100, 200]
    assert table["SR"].tolist() == pytest.approx([25.0, 75.0])
    assert table["TM"].tolist() == pytest.approx([100.0, 100.0])
    assert (table["SR_lo"] <= table["SR"]).all() and (table["SR"] <= table["SR_hi"]).all()
    fig = S.plot_curve(table)
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "test_in_domain, 1AO"
