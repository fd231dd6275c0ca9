"""Tests of guirl.papers (the paper-results registry and the list of tables and figures) and of
scripts/check_paper_numbers.py. Expected numbers are read by hand from the paper texts
(docs/papers.md says which file is which paper); the line is given in each comment."""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.papers import (
    ARTEFACTS,
    COLUMNS,
    PAPERS,
    RESULTS_DIR,
    PaperResultsError,
    artefacts,
    get_paper,
    paper_results,
    read_results_csv,
)

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("check_paper_numbers", ROOT / "scripts" / "check_paper_numbers.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHECK = _load_script()


@pytest.fixture(scope="module")
def df():
    return paper_results()


def v(df, paper: str, table: str, row: str, column: str) -> float:
    sel = df[(df.paper == paper) & (df.table == table) & (df.row == row) & (df.column == column)]
    assert len(sel) == 1, f"{paper} {table} [{row} | {column}]: {len(sel)} rows"
    return float(sel.number.iloc[0])


# ----------------------------------------------------------------------------- schema
def test_every_paper_has_a_registry_file_and_rows(df):
    assert list(df.columns) == [*COLUMNS, "number"]
    assert set(df.paper) == set(PAPERS)
    for p in PAPERS.values():
        assert (RESULTS_DIR / f"{p.slug}.csv").is_file()
        assert (df.paper_file[df.paper == p.name] == p.paper_file).all()


def test_one_paper_registry_for_the_methods():
    # guirl.papers.PAPERS is the only place a paper's title, reference and file are written: every
    # method record names its paper by a key of it, and each paper's method folder is its slug
    import guirl.methods as methods

    for m in methods.all_methods():
        assert m.paper in PAPERS, f"{m.name}: paper {m.paper!r} is not a key of guirl.papers.PAPERS"
        assert not {"title", "reference", "paper_file"} & set(vars(m)), m.name
    for p in PAPERS.values():
        assert methods.get(p.slug).paper == p.name
    with pytest.raises(KeyError, match="unknown paper"):
        get_paper("UI-S1 (via CCPO)")


def test_one_paper_by_name_or_slug(df):
    assert len(paper_results("Co-EPG")) == len(paper_results("coepg")) == int((df.paper == "Co-EPG").sum())
    with pytest.raises(KeyError, match="unknown paper 'nope'"):
        paper_results("nope")


def test_keys_are_unique_and_numbers_parse(df):
    assert not df.duplicated(["paper", "table", "row", "column"]).any()
    assert df.number.notna().all()
    assert v(df, "CCPO", "Table 1", "AndroidControl", "Tasks") == 15283  # printed "15,283" (line 181)


@pytest.mark.parametrize(
    "paper, table, row, column, value, line",
    [
        # CCPO Table 4, CCPO-3B 3AO compression rate "54.9%" (line 263)
        ("CCPO", "Table 4", "CCPO-3B 3AO", "Compression rate", "54.9", 263),
        # CCPO Table 4, CCPO-3B 3AO "174 (3.8x)": time and speedup on line 263
        ("CCPO", "Table 4", "CCPO-3B 3AO", "Training speedup", "3.8", 263),
        # CCPO Table 2, CCPO-7B-3AO GUI-Odyssey SR (underlined 82.4, line 215)
        ("CCPO", "Table 2", "CCPO-7B-3AO", "GUI-Odyssey SR", "82.4", 215),
        # CCPO Table 5, "+ CASC" AC-SR delta "(+2.1)" (line 287)
        ("CCPO", "Table 5", "+ CASC", "AC-SR delta", "+2.1", 287),
        # CCPO Table 9 keeps trailing zeros: Qwen2.5-VL-7B 3AO SR "70.60" (line 485)
        ("CCPO", "Table 9", "Qwen2.5-VL-7B 3AO", "AC SR", "70.60", 485),
        # Co-EPG Table 5, priors 1:1:2 Avg SR 58.4 (line 389)
        ("Co-EPG", "Table 5", "priors 1:1:2", "Avg SR", "58.4", 389),
        # Co-EPG Table 4, full C-DREM 58.41 (line 211)
        ("Co-EPG", "Table 4", "Co-EPG-Web-7B-M3", "Avg SR", "58.41", 211),
        # CES Table 1, GUI-R1-7B + CES on GUI-Odyssey SR 53.69 (line 163)
        ("CES", "Table 1", "GUI-R1-7B + CES (Ours) Multi-Agent", "GUI-Odyssey SR", "53.69", 163),
        # CES Table 2, UI-R1-3B CES-P GUI-Odyssey SR delta "(-18.05)" (line 171)
        ("CES", "Table 2", "UI-R1-3B CES-P", "GUI-Odyssey SR delta", "-18.05", 171),
        # AgentCPM-GUI Table 1, Bbox2Text 58.2 (line 118)
        ("AgentCPM-GUI", "Table 1", "AgentCPM-GUI", "Bbox2Text", "58.2", 118),
        # AgentCPM-GUI Table 3, SFT CAGUI EM 91.5 (line 173)
        ("AgentCPM-GUI", "Table 3", "AgentCPM-GUI-SFT", "CAGUI EM", "91.5", 173),
        # AndroidLong Table 6, "+ GRPO (no memory)" "28.4 +- 1.6" (line 53)
        ("AndroidLong", "Table 6", "+ GRPO (no memory)", "Task SR std", "1.6", 53),
        # AndroidLong Table 8, GRPO with memory, Calendar Task SR 0.31 (line 120)
        ("AndroidLong", "Table 8", "AndroidLong (ours) + GRPO (with memory)", "Calendar Task SR", "0.31", 120),
    ],
)
def test_values_read_from_the_papers(df, paper, table, row, column, value, line):
    sel = df[(df.paper == paper) & (df.table == table) & (df.row == row) & (df.column == column)]
    assert len(sel) == 1
    assert sel.value.iloc[0] == value
    assert sel.line.iloc[0] == line


# ----------------------------------------------------------------------------- validation errors
GOOD = ["CCPO", "Table 4", "CCPO-3B 3AO", "Compression rate", "54.9", "%", "000_e57e800ca0795f95.txt", "263", ""]


def _write(tmp_path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path = tmp_path / "ccpo.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.mark.parametrize(
    "header, rows, needle",
    [
        # an unknown column is named, on line 1
        ([*COLUMNS[:-1], "comment"], [GOOD], r"ccpo.csv:1: .*unknown column\(s\) \['comment'\]"),
        # right columns, wrong order
        ([COLUMNS[1], COLUMNS[0], *COLUMNS[2:]], [GOOD], r"ccpo.csv:1: columns in the wrong order"),
        # a short row, on its own line (2)
        (list(COLUMNS), [GOOD[:-1]], r"ccpo.csv:2: 8 fields, expected 9"),
        # a value that is not a number as printed
        (list(COLUMNS), [GOOD[:4] + ["54.9%"] + GOOD[5:]], r"ccpo.csv:2: value '54.9%'"),
        # unknown unit
        (list(COLUMNS), [GOOD[:5] + ["percent"] + GOOD[6:]], r"ccpo.csv:2: unit 'percent'"),
        # line must be a positive integer
        (list(COLUMNS), [GOOD[:7] + ["0"] + GOOD[8:]], r"ccpo.csv:2: line '0'"),
        # a row of another paper in ccpo.csv
        (list(COLUMNS), [["CES", *GOOD[1:]]], r"ccpo.csv:2: paper 'CES'"),
        # paper_file must be the paper's
        (list(COLUMNS), [GOOD[:6] + ["004_cf203a0f45073600.txt"] + GOOD[7:]], r"ccpo.csv:2: paper_file"),
        # table ids are 'Table N' / 'Figure N'
        (list(COLUMNS), [["CCPO", "Tab. 4", *GOOD[2:]]], r"ccpo.csv:2: table 'Tab. 4'"),
        # empty row label
        (list(COLUMNS), [GOOD[:2] + [""] + GOOD[3:]], r"ccpo.csv:2: row ''"),
        # duplicate key reported on the second occurrence (line 3) with the first line
        (list(COLUMNS), [GOOD, GOOD], r"ccpo.csv:3: duplicate .* \(first on line 2\)"),
    ],
)
def test_malformed_registry_names_file_and_line(tmp_path, header, rows, needle):
    _write(tmp_path, header, rows)
    with pytest.raises(PaperResultsError, match=needle):
        paper_results("ccpo", directory=tmp_path)


def test_missing_registry_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="ces.csv"):
        paper_results("CES", directory=tmp_path)


def test_good_minimal_file_loads(tmp_path):
    _write(tmp_path, list(COLUMNS), [GOOD])
    rows = read_results_csv(tmp_path / "ccpo.csv")
    assert rows[0]["line"] == 263 and rows[0]["value"] == "54.9"


# ----------------------------------------------------------------------------- the papers' arithmetic
CCPO_EFFICIENCY = [
    # (SO-RL row, CCPO row) of CCPO Table 4 (lines 260-267)
    ("SO-RL-3B 1AO", "CCPO-3B 1AO"),
    ("SO-RL-3B 3AO", "CCPO-3B 3AO"),
    ("SO-RL-7B 1AO", "CCPO-7B 1AO"),
    ("SO-RL-7B 3AO", "CCPO-7B 3AO"),
]


@pytest.mark.parametrize("so_rl, ccpo", CCPO_EFFICIENCY)
def test_ccpo_table4_compression_and_speedup(df, so_rl, ccpo):
    t = "Table 4"
    rate = 100 * (1 - v(df, "CCPO", t, ccpo, "Token length") / v(df, "CCPO", t, so_rl, "Token length"))
    # within the printing precision (0.1 pp); 3B-1AO is 38.97% printed 38.9 (truncated, not rounded)
    assert abs(rate - v(df, "CCPO", t, ccpo, "Compression rate")) < 0.1
    x = v(df, "CCPO", t, so_rl, "Training time") / v(df, "CCPO", t, ccpo, "Training time")
    assert abs(x - v(df, "CCPO", t, ccpo, "Training speedup")) <= 0.05


@pytest.mark.parametrize(
    "table, base, rows, ok",
    [
        # CCPO Table 15 (lines 580-587): every CCPO-7B kAO rate equals 1 - tokens/SO-RL tokens
        ("Table 15", "Qwen2.5VL-7B SO-RL {k}AO", "CCPO-7B {k}AO", {1: True, 2: True, 3: True, 4: True}),
        # CCPO Table 12 (lines 535-544): 3AO (46.1 printed, 47.15 computed) and 5AO (49.3 printed,
        # 48.55 computed) do not recompute; a self-inconsistency of the paper, kept as printed
        ("Table 12", "Qwen2.5VL-7B SO-RL {k}AO", "CCPO-7B {k}AO", {1: True, 2: True, 3: False, 4: True, 5: False}),
    ],
)
def test_ccpo_appendix_compression_rates(df, table, base, rows, ok):
    for k, consistent in ok.items():
        rate = 100 * (
            1
            - v(df, "CCPO", table, rows.format(k=k), "Token length")
            / v(df, "CCPO", table, base.format(k=k), "Token length")
        )
        printed = v(df, "CCPO", table, rows.format(k=k), "Compression rate")
        assert (abs(rate - printed) < 0.1) is consistent, (table, k, rate, printed)


def test_ccpo_table5_deltas_are_differences_to_sft(df):
    # CCPO Table 5 (lines 285-288): each "(+d)" is the row minus the SFT row
    for row in ("+ Semi-online", "+ CASC", "+ CASC + CR"):
        for c in ("AC-TM", "AC-GR", "AC-SR"):
            d = v(df, "CCPO", "Table 5", row, c) - v(df, "CCPO", "Table 5", "Qwen2.5VL-7B SFT", c)
            assert d == pytest.approx(v(df, "CCPO", "Table 5", row, f"{c} delta"), abs=0.005)


def test_ccpo_table6_relative_changes(df):
    # CCPO Table 6 (lines 305-306): compute load -44% and step latency -35% recompute; token
    # latency 0.064 -> 0.057 is -10.9%, printed -10
    for c, tol in (("Compute load", 0.5), ("Step latency", 0.5), ("Token latency", 1.0)):
        rel = 100 * (v(df, "CCPO", "Table 6", "CCPO", c) / v(df, "CCPO", "Table 6", "SO-RL", c) - 1)
        assert abs(rel - v(df, "CCPO", "Table 6", "CCPO", f"{c} delta")) < tol


def test_ccpo_table3_rounds_the_appendix_tables(df):
    # CCPO Table 3 (lines 251-255) prints one decimal of Tables 17 (AITW) and 18 (Mind2Web Step SR)
    pairs = [("CCPO-3B 3AO", "CCPO-3B 3AO", "CCPO-3B 3AO"), ("CCPO-7B-3AO", "CCPO-7B-3AO", "CCPO-7B 3AO")]
    for r3, r17, r18 in pairs:
        assert v(df, "CCPO", "Table 3", r3, "AITW Overall") == pytest.approx(
            v(df, "CCPO", "Table 17", r17, "AITW Overall"), abs=0.051
        )
        for split in ("Cross-Task", "Cross-Website", "Cross-Domain"):
            assert v(df, "CCPO", "Table 3", r3, f"M2W {split}") == pytest.approx(
                v(df, "CCPO", "Table 18", r18, f"{split} Step SR"), abs=0.051
            )


@pytest.mark.parametrize(
    "table, truncated",
    [
        ("Table 1", set()),
        ("Table 5", set()),
        # two rows print the mean truncated, not rounded: 46.67 -> 46.6 and 54.57 -> 54.5 (lines 402,
        # 410), while e.g. Table 5 prints 57.87 as 57.9
        ("Table 6", {"Co-EPG-Web-3B Iteration 1 (M1)", "Co-EPG-Web-7B Iteration 2 w/o GRPO"}),
    ],
)
def test_coepg_avg_sr_is_the_mean_of_the_three_step_srs(df, table, truncated):
    # Co-EPG Tables 1, 5, 6: Avg SR = mean of the Cross-Task/Website/Domain Step SR (1 decimal)
    sub = df[(df.paper == "Co-EPG") & (df.table == table)]
    off = set()
    for row in sub.row.unique():
        cols = [f"{s} Step SR" for s in ("Cross-Task", "Cross-Website", "Cross-Domain")]
        have = set(sub[sub.row == row].column)
        if not set(cols) <= have or "Avg SR" not in have:
            continue
        mean = sum(v(df, "Co-EPG", table, row, c) for c in cols) / 3
        printed = v(df, "Co-EPG", table, row, "Avg SR")
        assert abs(mean - printed) < 0.1, row  # within one unit of the printed digit
        if abs(mean - printed) > 0.05:
            off.add(row)
    assert off == truncated


@pytest.mark.parametrize("table", ["Table 2", "Table 7"])
def test_coepg_avg_acc_is_the_mean_of_high_and_low(df, table):
    sub = df[(df.paper == "Co-EPG") & (df.table == table)]
    for row in sub.row.unique():
        hi = v(df, "Co-EPG", table, row, "AC High Step Acc")
        lo = v(df, "Co-EPG", table, row, "AC Low Step Acc")
        assert (hi + lo) / 2 == pytest.approx(v(df, "Co-EPG", table, row, "Avg Acc"), abs=0.051), row


def test_coepg_table4_gains_stated_in_the_text(df):
    # Co-EPG Sec. 5.4 (line 223): +0.51 (average weighting), +0.66 more (priors), +1.91 in total
    t = "Table 4"
    base = v(df, "Co-EPG", t, "w/o C-DREM", "Avg SR")
    avg = v(df, "Co-EPG", t, "w/o Confidence & Prior Weights", "Avg SR")
    prior = v(df, "Co-EPG", t, "w/o Confidence Weights", "Avg SR")
    full = v(df, "Co-EPG", t, "Co-EPG-Web-7B-M3", "Avg SR")
    assert (round(avg - base, 2), round(prior - avg, 2), round(full - base, 2)) == (0.51, 0.66, 1.91)


def test_ces_table2_deltas_are_differences_to_the_baseline(df):
    # CES Table 2 (lines 170-178): "(+d)" after CES-P and CES values = value - Baseline
    sub = df[(df.paper == "CES") & (df.table == "Table 2")]
    for r in sub[sub.column.str.endswith(" delta")].itertuples():
        model = r.row.rsplit(" ", 1)[0]
        c = r.column.removesuffix(" delta")
        d = v(df, "CES", "Table 2", r.row, c) - v(df, "CES", "Table 2", f"{model} Baseline", c)
        assert d == pytest.approx(r.number, abs=0.006), (r.row, c)


def test_agentcpm_table1_average_and_table3_rft_row(df):
    # AgentCPM-GUI Table 1 Average = mean of the three tasks; Table 3's RFT row is Table 2's model row
    for row in df[(df.paper == "AgentCPM-GUI") & (df.table == "Table 1")].row.unique():
        m = sum(v(df, "AgentCPM-GUI", "Table 1", row, c) for c in ("Fun2Point", "Text2Point", "Bbox2Text")) / 3
        assert m == pytest.approx(v(df, "AgentCPM-GUI", "Table 1", row, "Average"), abs=0.051), row
    t3 = df[(df.paper == "AgentCPM-GUI") & (df.table == "Table 3") & (df.row == "AgentCPM-GUI-RFT")]
    for r in t3.itertuples():
        assert r.number == v(df, "AgentCPM-GUI", "Table 2", "AgentCPM-GUI", r.column)


# ----------------------------------------------------------------------------- artefact list
def test_artefacts_cover_the_registry(df):
    listed = {(a.paper, a.id) for a in ARTEFACTS if a.in_registry}
    in_registry = set(zip(df.paper, df.table))
    assert listed == in_registry


@pytest.mark.parametrize(
    "paper, n_tables, n_figures, first_figure",
    [
        ("CCPO", 18, 17, 1),  # CCPO: Tables 1-18, Figures 1-17
        ("Co-EPG", 13, 9, 1),  # Co-EPG: Tables 1-13, Figures 1-9
        ("CES", 4, 12, 1),  # CES: Tables 1-4, Figures 1-12
        ("AgentCPM-GUI", 12, 2, 1),  # AgentCPM-GUI: Tables 1-12, Figures 1-2
        ("AndroidLong", 4, 16, 4),  # AndroidLong supplement: Tables 6-9, Figures 4-19
    ],
)
def test_every_table_and_figure_is_listed_once(paper, n_tables, n_figures, first_figure):
    a = artefacts(paper)
    figs = sorted(int(i.split()[1]) for i in a.id if i.startswith("Figure"))
    tabs = sorted(int(i.split()[1]) for i in a.id if i.startswith("Table"))
    assert figs == list(range(first_figure, first_figure + n_figures))
    assert len(tabs) == n_tables and tabs == list(range(tabs[0], tabs[0] + n_tables))
    assert not a.duplicated("id").any()


def test_index_markdown_counts_results():
    from guirl.papers import index_markdown

    md = index_markdown()
    results = [a for a in ARTEFACTS if a.kind == "result"]
    partial = sum(a.status == "partial" for a in results)
    assert f"Result tables and figures: {len(results)};" in md
    assert f"partial {partial}," in md
    # one table row per artefact, under its paper's heading
    assert sum(line.startswith("| Table ") or line.startswith("| Figure ") for line in md.splitlines()) == len(
        ARTEFACTS
    )
    assert md.index("## CCPO") < md.index("| Table 18 | result |") < md.index("## Co-EPG")


def test_artefact_notebooks_exist():
    for a in ARTEFACTS:
        if a.status in ("regenerated", "partial"):
            nb = a.regenerated_by.split(":")[0]
            assert (ROOT / nb).is_file(), f"{a.paper} {a.id}: {nb} does not exist"


def test_artefact_validation():
    from guirl.papers import Artefact

    with pytest.raises(ValueError, match="must name its notebook"):
        Artefact("CCPO", "Table 2", "result", "x", regenerated_by="somewhere", status="partial")
    with pytest.raises(ValueError, match="'n/a' is for non-result kinds"):
        Artefact("CCPO", "Table 2", "result", "x", status="n/a")
    with pytest.raises(ValueError, match="unknown paper"):
        Artefact("UI-S1", "Table 2", "result", "x")


def test_get_paper():
    assert get_paper("ccpo") is get_paper("CCPO")
    assert get_paper("Co-EPG").paper_file == "001_f0ca38cf3ec0c5b8.txt"


# ----------------------------------------------------------------------------- check script
@pytest.mark.parametrize(
    "value, line, found",
    [
        ("58.4", "Co-EPG\t<b>58.4</b>", True),  # markup around the number
        ("58.4", "w/o\t58.41", False),  # not inside a longer number
        ("2", "only 2.42% of", False),  # not the integer part of a decimal
        ("4", "increasing by nearly 4.", True),  # sentence full stop is not a decimal point
        ("-44", "5.4 (-44%)", True),  # signed delta
        ("2,939", "AITW\tMobile & Web\t2,939\t8.1", True),  # thousands separator
        ("0.2", "33.1 ± 0.2", True),  # after a plus-minus sign
        ("3.8", "174 (3.8 \\times)", True),  # LaTeX times
        ("8.1", "18.1", False),  # not the tail of a longer number
    ],
)
def test_value_on_line(value, line, found):
    assert CHECK.value_on_line(value, line) is found


@given(
    st.decimals(min_value=0, max_value=10000, places=2, allow_nan=False, allow_infinity=False),
    st.sampled_from(["\t", " ", "(", " | "]),
)
def test_value_on_line_finds_a_printed_number_and_not_its_extension(num, sep):
    s = f"{num:f}"
    assert CHECK.value_on_line(s, f"row{sep}{s}{sep}x")
    assert not CHECK.value_on_line(s, f"row{sep}{s}7{sep}x")


def _mini_registry(tmp_path: Path, value: str, line: int) -> tuple[Path, Path]:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "000_e57e800ca0795f95.txt").write_text("title\nModel\tTokens\nCCPO-3B\t3AO\t4460\t54.9%\n", "utf-8")
    reg = tmp_path / "reg"
    reg.mkdir()
    row = ["CCPO", "Table 4", "CCPO-3B 3AO", "Compression rate", value, "%", "000_e57e800ca0795f95.txt", str(line), ""]
    _write(reg, list(COLUMNS), [row])
    return papers, reg


@pytest.mark.parametrize(
    "value, line, rc, needle",
    [
        ("54.9", 3, 0, "total: 1 rows, 1 ok, 0 failed"),  # on its line
        ("54.8", 3, 1, "value 54.8 not on the line"),  # a wrong value fails
        ("54.9", 2, 1, "000_e57e800ca0795f95.txt:2:"),  # the right value on a wrong line fails
        ("54.9", 9, 1, "file has only 4 lines"),  # a line past the end of the file
    ],
)
def test_check_script(tmp_path, capsys, value, line, rc, needle):
    papers, reg = _mini_registry(tmp_path, value, line)
    assert CHECK.main([str(papers), "--registry", str(reg), "--paper", "CCPO"]) == rc
    assert needle in capsys.readouterr().out


def test_check_script_missing_paper_file(tmp_path, capsys):
    papers, reg = _mini_registry(tmp_path, "54.9", 3)
    (papers / "000_e57e800ca0795f95.txt").unlink()
    assert CHECK.main([str(papers), "--registry", str(reg), "--paper", "CCPO"]) == 2
    assert "paper text of CCPO not found" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the audit files
AUDIT = ROOT / "docs" / "fidelity"
STATUSES = ("paper", "deviation", "not implemented")


def _audit_rows(name: str) -> list[list[str]]:
    rows = []
    for line in (AUDIT / f"{name}.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 7 and cells[0].split("-")[-1].isdigit() and "-" in cells[0]:
            rows.append(cells)
    return rows


@pytest.mark.parametrize("name", ["ccpo", "coepg", "ces", "agentcpm", "androidlong"])
def test_audit_rows_have_valid_ids_statuses_and_tests(name):
    rows = _audit_rows(name)
    assert rows, name
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), f"docs/fidelity/{name}.md: duplicate row ids"
    for r in rows:
        assert r[5] in STATUSES, f"docs/fidelity/{name}.md {r[0]}: status {r[5]!r}"
        if r[5] == "deviation":
            assert r[6], f"docs/fidelity/{name}.md {r[0]}: a deviation needs the proposed fix"
        path = ""
        for cited, names in re.findall(r"`(tests/[\w/]+\.py)?(?:::([\w:]+))?`", r[4]):
            if not cited and not names:
                continue
            path = cited or path  # "`::name`" refers to the file cited before it
            assert path, f"docs/fidelity/{name}.md {r[0]}: '::{names}' without a test file before it"
            src = ROOT / path
            assert src.is_file(), f"docs/fidelity/{name}.md {r[0]} cites {path}, which does not exist"
            text = src.read_text(encoding="utf-8")
            for n in filter(None, names.split("::")):
                assert re.search(rf"^\s*(?:def|class) {n}\b", text, re.M), (
                    f"docs/fidelity/{name}.md {r[0]} cites {path}::{names}; {n} does not exist, update the row"
                )


def test_audit_summary_counts_match_the_files():
    table = (AUDIT / "README.md").read_text(encoding="utf-8")
    total = [0, 0, 0, 0]
    for name, label in (
        ("ccpo", "CCPO"),
        ("coepg", "Co-EPG"),
        ("ces", "CES"),
        ("agentcpm", "AgentCPM-GUI"),
        ("androidlong", "AndroidLong"),
    ):
        rows = _audit_rows(name)
        counts = [len(rows), *(sum(r[5] == s for r in rows) for s in STATUSES)]
        total = [a + b for a, b in zip(total, counts)]
        m = re.search(rf"^\| {re.escape(label)}[^|]* \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", table, re.M)
        assert m, label
        assert [int(g) for g in m.groups()] == counts, label
    m = re.search(
        r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$", table, re.M
    )
    assert m and [int(g) for g in m.groups()] == total


@pytest.mark.parametrize("out", [None, "sub/INDEX.md"])  # default place, or a given path (folders made)
def test_index_cli_writes_index_markdown(out, tmp_path, monkeypatch, capsys):
    from guirl.papers import index_markdown, main

    monkeypatch.setenv("GUIRL_FIGURES", str(tmp_path / "figs"))
    args = ["index", "--profile", "tiny"] + (["--out", str(tmp_path / out)] if out else [])
    assert main(args) == 0
    path = tmp_path / out if out else tmp_path / "figs" / "tiny" / "INDEX.md"
    assert path.read_text(encoding="utf-8") == index_markdown()
    results = [a for a in ARTEFACTS if a.kind == "result"]
    n = {s: sum(a.status == s for a in results) for s in ("regenerated", "partial", "not yet")}
    line = capsys.readouterr().out
    assert f"regenerated {n['regenerated']}, partial {n['partial']}, not yet {n['not yet']}" in line


def test_make_reproduce_writes_the_index():
    # the reproduce target ends by writing figures/<profile>/INDEX.md
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = make.split("\nreproduce:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    # without SLURM=1 (the ifeq branch whose condition is empty) the index is written right after the runner
    run = next(i for i, line in enumerate(body) if "guirl.runner --all" in line)
    local = body[run + 1 :]
    assert local[0].startswith("ifeq ($(call _on,$(SLURM)),)")
    assert local[1].strip() == "$(PY) -m guirl.papers index --profile $(PROFILE)"
    assert local[2].strip() == "else"
