"""guirl.report: files written, sidecar fields, determinism of tables."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from guirl.config import load_config  # noqa: E402
from guirl.metrics.paired import ResolvedClaimError  # noqa: E402
from guirl.papers import paper_results  # noqa: E402
from guirl.report import Report, jsonable, paper_cells, paper_comparison, to_latex, to_markdown  # noqa: E402

SIDECAR_KEYS = {
    "name",
    "kind",
    "notebook",
    "caption",
    "files",
    "data",
    "git_sha",
    "git_dirty",
    "profile",
    "config_hash",
    "seed",
    "versions",
    "wall_time_s",
    "timestamp_utc",
}
VERSION_KEYS = {"python", "torch", "transformers", "trl", "peft", "numpy", "pandas"}


def sample_df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": ["SFT", "GRPO", "CCPO"],
            "step_acc": [0.61234567, 0.7, np.nan],
            "n": np.array([100, 100, 100], dtype=np.int64),
            "ok": [True, False, True],
        }
    )


@pytest.fixture()
def report(isolated_outputs: dict[str, Path]) -> Report:
    return Report("99_probe", load_config("tiny", overrides=["seed=4"]))


def test_a_table_written_again_holds_the_last_rows_and_is_listed_once(report: Report) -> None:
    first = report.table("plan", sample_df().head(1))
    second = report.table("plan", sample_df())
    assert first == second and len(json.loads(second["json"].read_text())["data"]) == 3
    assert sorted(p.name for p in report.written if p.stem == "plan") == ["plan.csv", "plan.json", "plan.md"]


def test_table_writes_csv_md_tex_json_and_config(report: Report, isolated_outputs: dict[str, Path]) -> None:
    paths = report.table("main", sample_df(), caption="Step accuracy", latex=True)
    folder = isolated_outputs["GUIRL_FIGURES"] / "tiny" / "99_probe"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["config.yaml", "main.csv", "main.md", "main.tex", "main.json"]
    )
    assert set(paths) == {"csv", "md", "tex", "json"}
    csv = pd.read_csv(folder / "main.csv")
    assert list(csv.columns) == ["method", "step_acc", "n", "ok"]
    assert csv["step_acc"][0] == pytest.approx(0.61234567)  # csv keeps full precision
    md = (folder / "main.md").read_text()
    assert md.startswith("Step accuracy\n\n| method") and "0.6123" in md and "CCPO" in md
    tex = (folder / "main.tex").read_text()
    assert r"\toprule" in tex and r"\caption{Step accuracy}" in tex and "0.6123" in tex
    assert load_config(folder / "config.yaml") == report.cfg


def test_table_without_latex_writes_no_tex(report: Report) -> None:
    paths = report.table("t", sample_df())
    assert set(paths) == {"csv", "md", "json"}
    assert not (report.out_dir / "t.tex").exists()


def test_sidecar_fields(report: Report) -> None:
    paths = report.table("main", sample_df(), caption="c")
    side = json.loads(paths["json"].read_text())
    assert set(side) == SIDECAR_KEYS
    assert set(side["versions"]) == VERSION_KEYS
    assert side["profile"] == "tiny" and side["seed"] == 4
    assert side["config_hash"] == report.cfg.hash()
    assert side["kind"] == "table" and side["notebook"] == "99_probe"
    assert side["data"][0] == {"method": "SFT", "step_acc": 0.61234567, "n": 100, "ok": True}
    assert side["data"][2]["step_acc"] is None  # NaN -> null (valid JSON)
    assert side["git_sha"] == "unknown" or len(side["git_sha"]) == 40
    assert side["git_dirty"] in (True, False, None)
    assert side["wall_time_s"] >= 0 and side["timestamp_utc"].endswith("Z")


def test_figure_writes_png_pdf_and_data(report: Report) -> None:
    fig, ax = plt.subplots(figsize=(3, 2))
    xs, ys = np.arange(4), np.array([0.1, 0.4, 0.35, 0.8])
    ax.plot(xs, ys)
    paths = report.figure("curve", fig, data={"step": xs, "reward": ys}, caption="reward")
    plt.close(fig)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
    side = json.loads(paths["json"].read_text())
    assert side["kind"] == "figure" and side["data"] == {"step": [0, 1, 2, 3], "reward": [0.1, 0.4, 0.35, 0.8]}
    assert set(side) == SIDECAR_KEYS


def test_same_table_twice_gives_identical_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two separate "runs" (fresh output roots, fresh Report objects) write byte-identical tables.
    contents = []
    for run in ("a", "b"):
        monkeypatch.setenv("GUIRL_FIGURES", str(tmp_path / run))
        rep = Report("99_probe", load_config("tiny"))
        paths = rep.table("main", sample_df(), caption="x", latex=True)
        contents.append({k: paths[k].read_bytes() for k in ("csv", "md", "tex")})
        contents[-1]["config"] = (rep.out_dir / "config.yaml").read_bytes()
    assert contents[0] == contents[1]


def test_different_numbers_give_different_tables(report: Report) -> None:
    a = report.table("a", sample_df())["csv"].read_bytes()
    df = sample_df()
    df.loc[0, "step_acc"] = 0.5
    b = report.table("b", df)["csv"].read_bytes()
    assert a != b


def test_named_index_becomes_a_column(report: Report) -> None:
    df = sample_df().set_index("method")
    paths = report.table("indexed", df)
    assert paths["csv"].read_text().splitlines()[0] == "method,step_acc,n,ok"


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "with space"])
def test_bad_output_names_are_rejected(report: Report, name: str) -> None:
    with pytest.raises(ValueError):
        report.table(name, sample_df())


def test_table_rejects_non_frames(report: Report) -> None:
    with pytest.raises(TypeError):
        report.table("x", [[1, 2]])  # type: ignore[arg-type]


def test_markdown_alignment_and_escaping() -> None:
    df = pd.DataFrame({"name": ["a|b"], "value": [1.23456]})
    md = to_markdown(df, floatfmt=".2f").splitlines()
    assert md[0] == "| name | value |"
    assert md[1] == "|------|------:|"  # text left, numbers right
    assert md[2] == "| a\\|b |  1.23 |"


def test_latex_escapes_specials() -> None:
    tex = to_latex(pd.DataFrame({"a_b": ["50%"]}))
    assert r"a\_b" in tex and r"50\%" in tex


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.float32(0.5), 0.5),  # numpy scalar
        (np.array([[1, 2]]), [[1, 2]]),  # nested array
        (float("inf"), None),  # JSON has no infinity
        ((1, "a"), [1, "a"]),  # tuples become lists
        ({1: np.int64(3)}, {"1": 3}),  # keys become strings
        (Path("/x/y"), "/x/y"),
    ],
)
def test_jsonable(value: object, expected: object) -> None:
    out = jsonable(value)
    assert out == expected
    json.dumps(out, allow_nan=False)


def test_nan_is_null_in_jsonable() -> None:
    assert jsonable([math.nan]) == [None]


def test_a_name_holds_one_kind_of_output(tmp_path, monkeypatch):
    # A table and a figure under one name would share one sidecar: the second is refused.
    import matplotlib.pyplot as plt

    monkeypatch.setenv("GUIRL_FIGURES", str(tmp_path))
    from guirl.config import load_config
    from guirl.report import Report

    report = Report("nb", load_config("tiny"))
    report.table("x", pd.DataFrame({"a": [1]}))
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="already used by a table"):
        report.figure("x", fig)
    report.figure("x_chart", fig)
    report.table("x", pd.DataFrame({"a": [2]}))  # rewriting the same kind is fine
    plt.close(fig)


def test_table_claiming_resolved_across_zero_is_refused_and_writes_nothing(report: Report) -> None:
    # CCPO - SO-RL step SR of +1.2 points with an interval [-0.8, 3.1]: "resolved" would be a false claim
    bad = pd.DataFrame({"comparison": ["CCPO - SO-RL"], "diff": [1.2], "lo": [-0.8], "hi": [3.1], "resolved": [True]})
    with pytest.raises(ResolvedClaimError, match="99_probe/ccpo_vs_sorl: row 0 says resolved=True"):
        report.table("ccpo_vs_sorl", bad)
    assert not list(report.out_dir.glob("ccpo_vs_sorl*"))
    report.table("ccpo_vs_sorl", bad.assign(resolved=False))  # the honest mark is written
    assert (report.out_dir / "ccpo_vs_sorl.csv").exists()


# ----------------------------------------------------------------------------- paper | ours | difference
def ccpo_table2_rows() -> pd.DataFrame:
    from guirl.papers import paper_results

    df = paper_results("CCPO")
    return df[(df.table == "Table 2") & (df.row == "OS-Atlas-4B ZS") & df.column.str.startswith("AC-High")]


@pytest.mark.parametrize(
    "ours, expected",
    [
        # all three numbers given: difference = ours - paper (CCPO Table 2 prints 49.0, 49.5, 22.8)
        (
            {"AC-High TM": 50.0, "AC-High GR": 49.5, "AC-High SR": 20.3},
            {"AC-High TM": 1.0, "AC-High GR": 0.0, "AC-High SR": -2.5},
        ),
        # one number only: the other paper rows stay, without ours and without a difference
        ({"AC-High SR": 22.8}, {"AC-High TM": math.nan, "AC-High GR": math.nan, "AC-High SR": 0.0}),
    ],
)
def test_paper_comparison_differences(ours: dict, expected: dict) -> None:
    from guirl.report import COMPARISON_COLUMNS, paper_comparison

    mine = pd.DataFrame({"row": "OS-Atlas-4B ZS", "column": list(ours), "ours": list(ours.values())})
    df = paper_comparison(mine, ccpo_table2_rows())
    assert tuple(df.columns) == COMPARISON_COLUMNS
    assert df.column.tolist() == ["AC-High TM", "AC-High GR", "AC-High SR"]  # the paper's order
    assert df.paper.tolist() == ["49.0", "49.5", "22.8"]  # as printed
    got = dict(zip(df.column, df.difference))
    for k, v in expected.items():
        assert (math.isnan(got[k]) and math.isnan(v)) or got[k] == pytest.approx(v), k
    assert df.location.iloc[0] == "CCPO Table 2, 000_e57e800ca0795f95.txt line 192"


@pytest.mark.parametrize(
    "ours, needle",
    [
        ({"row": ["OS-Atlas-4B ZS"], "column": ["AC-High XX"], "ours": [1.0]}, "no paper row has"),  # a typo
        ({"row": ["OS-Atlas-4B ZS"], "column": ["AC-High TM"]}, "ours lacks ['ours']"),  # no numbers
        ({"row": ["OS-Atlas-4B ZS"] * 2, "column": ["AC-High TM"] * 2, "ours": [1.0, 2.0]}, "ours: "),  # twice
    ],
)
def test_paper_comparison_rejects_bad_ours(ours: dict, needle: str) -> None:
    from guirl.report import paper_comparison

    with pytest.raises(ValueError, match=re.escape(needle)):
        paper_comparison(pd.DataFrame(ours), ccpo_table2_rows())


def test_paper_comparison_needs_a_table_column_across_tables() -> None:
    from guirl.papers import paper_results
    from guirl.report import paper_comparison

    rows = paper_results("CCPO")
    rows = rows[rows.table.isin(["Table 1", "Table 2"])]
    with pytest.raises(ValueError, match="give ours a 'table' column"):
        paper_comparison(pd.DataFrame({"row": ["AITW"], "column": ["Tasks"], "ours": [1.0]}), rows)
    mine = pd.DataFrame({"table": ["Table 1"], "row": ["AITW"], "column": ["Tasks"], "ours": [2939.0]})
    df = paper_comparison(mine, rows)
    assert df.loc[(df.table == "Table 1") & (df.row == "AITW") & (df.column == "Tasks"), "difference"].item() == 0.0


def test_compare_writes_the_table(report: Report, isolated_outputs: dict[str, Path]) -> None:
    mine = pd.DataFrame({"row": "OS-Atlas-4B ZS", "column": ["AC-High SR"], "ours": [20.3]})
    paths = report.compare("ccpo_table2", mine, ccpo_table2_rows())
    md = paths["md"].read_text(encoding="utf-8")
    assert md.startswith("Paper vs ours (profile tiny; difference = ours - paper)")
    header = [c.strip() for c in md.splitlines()[2].strip("|").split("|")]
    assert header == ["table", "row", "column", "unit", "paper", "ours", "difference", "location"]
    assert "-2.50" in md and "22.8" in md
    rec = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert rec["data"][2]["difference"] == pytest.approx(-2.5)


# ----------------------------------------------------------------------------- paper cells
def test_paper_cells_keep_only_printed_cells_and_scale() -> None:
    paper = paper_results("ccpo")
    ref = paper[(paper["table"] == "Table 4") & paper["row"].isin(["SO-RL-3B 3AO", "CCPO-3B 3AO"])]
    table = pd.DataFrame(
        [
            {"history": "3AO", "side": "full", "tok": 1000.0, "speed": 1.0},
            {"history": "3AO", "side": "CASC", "tok": 500.0, "speed": 2.0},
        ]
    )
    rows = {"SO-RL-3B 3AO": {"side": "full"}, "CCPO-3B 3AO": {"side": "CASC"}}
    cells = paper_cells(
        table, ref, rows=rows, columns={"Token length": "tok", "Training speedup": "speed"}, scale={"Token length": 2.0}
    )
    # SO-RL has no printed speedup: its 1.0 is left out
    assert cells.to_dict(orient="records") == [
        {"row": "SO-RL-3B 3AO", "column": "Token length", "ours": 2000.0},
        {"row": "CCPO-3B 3AO", "column": "Token length", "ours": 1000.0},
        {"row": "CCPO-3B 3AO", "column": "Training speedup", "ours": 2.0},
    ]
    with pytest.raises(KeyError, match="selects 2 rows"):
        paper_cells(table, ref, rows={"CCPO-3B 3AO": {"history": "3AO"}}, columns={"Token length": "tok"})


def test_paper_cells_feed_the_paper_comparison() -> None:
    t4 = pd.DataFrame([{"Model": "CCPO", "History Length": "1AO", "Compression Rate (%)": 40.0, "other": 1}])
    paper = paper_results("ccpo")
    ref = paper[(paper["table"] == "Table 4") & (paper["row"] == "CCPO-3B 1AO")]
    rows = {"CCPO-3B 1AO": {"Model": "CCPO", "History Length": "1AO"}}
    ours = paper_cells(t4, ref, rows=rows, columns={"Compression rate": "Compression Rate (%)"})
    assert ours.to_dict(orient="records") == [{"row": "CCPO-3B 1AO", "column": "Compression rate", "ours": 40.0}]
    cmp = paper_comparison(ours, ref)
    cell = cmp[cmp["column"] == "Compression rate"].iloc[0]
    assert cell["difference"] == pytest.approx(40.0 - 38.9)  # CCPO Table 4: 38.9% at 1AO (3B)
    with pytest.raises(KeyError, match="selects 0 rows"):
        paper_cells(t4, ref, rows={"SO-RL-3B 1AO": {"Model": "SO-RL"}}, columns={})
