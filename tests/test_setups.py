"""guirl.setups: each paper's training-setup table beside the paper profiles' resolved values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl import setups
from guirl.papers import PAPERS
from guirl.paths import repo_root
from guirl.setups import COLUMNS, SetupError, compare, read_setup_csv, resolve_key, setup_rows, setup_table

HEADER = ",".join(COLUMNS)
GOOD = "Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,same,"


@pytest.mark.parametrize("paper", [p.slug for p in PAPERS.values()])
def test_every_row_resolves_as_its_file_expects(paper: str) -> None:
    """A recipe that stops giving the paper's value (or a row whose key starts to) fails here,
    naming the row."""
    wrong = [
        f"{item['row'].where}: {item['row'].hyperparameter} {item['row'].column}: expected "
        f"{item['row'].expect}, got {item['status']} ({item['resolved']})"
        for item in setup_table(paper)
        if set(item["status"].values()) != {item["row"].expect}
    ]
    assert not wrong, "\n".join(wrong)


def test_every_paper_has_its_training_tables() -> None:
    sources = {(r.paper, r.source) for r in setup_rows()}
    for needed in [
        ("CCPO", "Table 7"),
        ("CCPO", "Table 8"),
        ("Co-EPG", "App. B"),
        ("CES", "Table 4"),
        ("CES", "App. B.2"),
        ("AgentCPM-GUI", "Table 4"),
        ("AgentCPM-GUI", "Table 5"),
        ("AndroidLong", "App. C.2"),
        ("AndroidLong", "Table 7"),
    ]:
        assert needed in sources


def test_an_override_of_a_recipe_value_turns_its_rows_to_differs() -> None:
    """The checker can fail: the same rows resolve to another value under an override."""
    rows = [
        i for i in setup_table("ccpo", overrides=["sft.learning_rate=0.001"]) if i["row"].key == "sft.learning_rate"
    ]
    assert len(rows) == 3
    assert all(set(i["status"].values()) == {"differs"} for i in rows)
    assert all(i["resolved"]["paper-7b"] == pytest.approx(1e-3) for i in rows)


def test_the_data_set_column_selects_its_experiment() -> None:
    got = {
        i["row"].column: i["resolved"]["paper-7b"]
        for i in setup_table("ccpo")
        if i["row"].hyperparameter == "reward discount (SO RL)"
    }
    assert got == {"AC": 0.5, "GUI O": 0.3, "M2W": 0.3}


def test_the_committed_table_is_the_rendering() -> None:
    path = repo_root() / setups.DOC
    assert path.is_file(), f"{setups.DOC} missing: run python -m guirl.setups --write"
    assert path.read_text(encoding="utf-8") == setups.render_markdown(), (
        f"{setups.DOC} is stale: run python -m guirl.setups --write"
    )


def test_check_exits_1_on_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs" / "fidelity").mkdir(parents=True)
    (tmp_path / setups.DOC).write_text("old\n", encoding="utf-8")
    monkeypatch.setattr("guirl.paths.repo_root", lambda: tmp_path)
    monkeypatch.setattr(setups, "render_markdown", lambda profiles=setups.PROFILES: "new\n")
    assert setups.main(["--check"]) == 1
    assert setups.main(["--write"]) == 0
    assert (tmp_path / setups.DOC).read_text(encoding="utf-8") == "new\n"
    assert setups.main(["--check"]) == 0


@pytest.mark.parametrize(
    ("expr", "flat", "want"),
    [
        ("a.b", {"a.b": 3}, 3),
        ("a.b * c * 8", {"a.b": 1, "c": 12}, 96),
        ("a.b * c", {"a.b": 42, "c": 7}, 294),
        ("x.y", {"x.y": "cosine"}, "cosine"),
    ],
)
def test_resolve_key(expr: str, flat: dict, want: object) -> None:
    assert resolve_key(expr, flat) == want


def test_resolve_key_names_the_row_and_the_missing_key() -> None:
    with pytest.raises(SetupError, match=r"^f.csv:4: key 'sft\.lr' is not a config key"):
        resolve_key("sft.lr", {"sft.learning_rate": 1.0}, "f.csv:4")
    with pytest.raises(ValueError, match="neither a dotted config key nor an integer"):
        resolve_key("sft.lr + 1", {})


@pytest.mark.parametrize(
    ("target", "value", "same"),
    [
        (3e-5, 3e-05, True),
        (3, 3.0, True),
        (True, True, True),
        (True, 1, False),
        (1, True, False),
        ([1, 1, 2], [1.0, 1.0, 2.0], True),
        ([1, 1, 2], [1.0, 2.0, 1.0], False),
        ("cosine", "cosine", True),
        ("cosine", "constant", False),
        (0.2, 0.1, False),
    ],
)
def test_compare(target: object, value: object, same: bool) -> None:
    assert compare(target, value) is same


@given(st.floats(min_value=1e-12, max_value=1e12))
def test_compare_numbers_as_the_yaml_reads_them(x: float) -> None:
    assert compare(setups._yaml_value(repr(x)), x)
    assert not compare(x, x * (1 + 1e-6))


def test_exponent_numbers_are_numbers() -> None:
    """YAML 1.1 reads ``1e-6`` as text; the paper's ``1e-6`` must compare as a number."""
    assert setups._yaml_value("1e-6") == pytest.approx(1e-6)
    assert setups._yaml_value("[1, 1, 2]") == [1, 1, 2]
    assert setups._yaml_value("warm-up + cosine") == "warm-up + cosine"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,same", "10 fields, expected 11"),
        ("Tab 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,same,", "source 'Tab 7' must look like"),
        ("Table 7,0,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,same,", "line '0' must be a positive integer"),
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,equal,", "expect 'equal' must be one of"),
        ("Table 7,390,learning rate,AC,3e-5,,sft,,sft.learning_rate,same,", "notebook 'sft' must be a notebook stem"),
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,no key,why", "a 'no key' row has an empty key"),
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,,same,", "a 'no key' row has an empty key"),
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate,differs,", "says why in its note"),
        ("Table 7,390,learning rate,AC,3e-5,,01_sft,,sft.learning_rate + 1,same,", "key: 'sft.learning_rate + 1'"),
        ("Table 7,390,,AC,3e-5,,01_sft,,sft.learning_rate,same,", "hyperparameter and paper_value must be non-empty"),
        # a value the paper does not give: both columns say so, and only then
        ("Table 7,390,warm-up,AC,not stated,,01_sft,,sft.warmup_ratio,same,", "paper_value and expect 'not stated'"),
        ("Table 7,390,warm-up,AC,0.01,,01_sft,,sft.warmup_ratio,not stated,why", "paper_value and expect 'not stated'"),
        ("Table 7,390,warm-up,AC,not stated,,01_sft,,,not stated,why", "a 'no key' row has an empty key"),
        ("Table 7,390,warm-up,AC,not stated,,01_sft,,sft.warmup_ratio,not stated,", "says why in its note"),
    ],
)
def test_a_bad_row_is_named_with_its_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "ccpo.csv"
    path.write_text(f"{HEADER}\n{GOOD}\n{row}\n", encoding="utf-8")
    with pytest.raises(SetupError) as err:
        read_setup_csv(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert message in str(err.value)


def test_a_wrong_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ces.csv"
    path.write_text("source,line\n", encoding="utf-8")
    with pytest.raises(SetupError, match=r":1: header must be source,line,hyperparameter"):
        read_setup_csv(path)


def test_a_good_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "ccpo.csv"
    path.write_text(f"{HEADER}\n{GOOD}\n", encoding="utf-8")
    (row,) = read_setup_csv(path)
    assert (row.paper, row.line, row.key, row.where) == ("CCPO", 390, "sft.learning_rate", f"{path}:2")
    assert row.target == pytest.approx(3e-5)


def test_run_setup_takes_the_runs_data_set_column_and_values() -> None:
    from guirl.config import load_config
    from guirl.setups import run_setup

    go = run_setup(load_config("paper-7b", "guiodyssey"), "02_ccpo_rl")
    discount = go[go["hyperparameter"] == "reward discount (SO RL)"].to_dict(orient="records")
    assert [(r["column"], r["this run"], r["status"]) for r in discount] == [("GUI O", "0.3", "same")]
    ac = run_setup(load_config("paper-7b"), "02_ccpo_rl")  # the default column on AndroidControl
    assert ac[ac["hyperparameter"] == "total_epochs"][["column", "status"]].values.tolist() == [["AC", "same"]]
    # on a paper profile every row resolves as its file expects
    rows = {(r.hyperparameter, r.column): r.expect for r in setup_rows("coepg")}
    paper = run_setup(load_config("paper-7b"), "03_coepg_iterations")
    assert {(r["hyperparameter"], r["column"]): r["status"] for r in paper.to_dict(orient="records")} == rows
    # the tiny profile trains step budgets, not the paper's epochs, and says so
    tiny = run_setup(load_config("tiny"), "03_coepg_iterations").set_index("hyperparameter")
    assert (tiny.loc["SFT epochs", "this run"], tiny.loc["SFT epochs", "status"]) == ("60 steps", "differs")
    assert (tiny.loc["SFT weight decay", "this run"], tiny.loc["SFT weight decay", "status"]) == ("0", "differs")
    assert tiny.loc["GRPO GPUs", "status"] == "no key" and pd.isna(tiny.loc["GRPO GPUs", "this run"])
    # a value Co-EPG does not give: the row shows the one its recipe holds, on any profile, and compares nothing
    assert (tiny.loc["SFT warm-up ratio", "paper value"], tiny.loc["SFT warm-up ratio", "status"]) == (
        "not stated",
        "not stated",
    )
    assert tiny.loc["SFT warm-up ratio", "this run"] == str(load_config("tiny").sft.warmup_ratio)


@pytest.mark.parametrize(
    ("flat", "want"),
    [({"a.epochs": 3.0, "a.max_steps": None}, 3.0), ({"a.epochs": 3.0, "a.max_steps": 60}, "60 steps")],
)
def test_epochs_unless_a_step_budget(flat: dict, want: object) -> None:
    assert resolve_key("a.epochs | a.max_steps", flat) == want
    with pytest.raises(ValueError, match="two dotted config keys"):
        resolve_key("a.epochs | a.max_steps | b", flat)
