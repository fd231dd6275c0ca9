"""Tests for guirl.conclusions: the resolved marks of a run's tables and the comparison of two runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from guirl import conclusions as C
from guirl.config import load_config
from guirl.report import Report


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [
        (0.5, 2.0, "+"),  # interval above zero
        (-2.0, -0.1, "-"),  # below zero
        (-1.0, 1.0, "0"),  # contains zero: unresolved
        (0.0, 0.0, "0"),  # a zero-width interval at zero
    ],
)
def test_verdict(lo: float, hi: float, want: str) -> None:
    assert C.verdict(lo, hi) == want


def write_run(root: Path, gains: dict[str, tuple[float, float]], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A figures folder with one gain table (split -> interval) and one table without marks."""
    monkeypatch.setenv("GUIRL_FIGURES", str(root))
    report = Report("01_sft", load_config("tiny"))
    rows = [
        {
            "split": s,
            "history": "1AO",
            "diff": (lo + hi) / 2,
            "lo": lo,
            "hi": hi,
            "resolved": lo > 0 or hi < 0,
            "n_steps": 9,
        }
        for s, (lo, hi) in gains.items()
    ]
    report.table("sft_gain", pd.DataFrame(rows))
    report.table("plain", pd.DataFrame([{"model": "SFT", "SR": 40.0}]))
    return root / "tiny"


def test_resolved_claims_reads_every_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_run(tmp_path / "a", {"test_in_domain": (1.0, 3.0), "test_unseen_app": (-1.0, 2.0)}, monkeypatch)
    claims = C.resolved_claims(run)
    assert list(claims.columns) == list(C.CLAIM_COLUMNS)
    assert claims["verdict"].tolist() == ["+", "0"] and set(claims["table"]) == {"sft_gain"}
    assert '"split": "test_in_domain"' in claims["key"].iloc[0] and "n_steps" not in claims["key"].iloc[0]


def test_compare_runs_and_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    a = write_run(tmp_path / "a", {"test_in_domain": (1.0, 3.0), "test_unseen_app": (-1.0, 2.0)}, monkeypatch)
    same = write_run(tmp_path / "b", {"test_in_domain": (0.2, 5.0), "test_unseen_app": (-3.0, 0.5)}, monkeypatch)
    other = write_run(tmp_path / "c", {"test_in_domain": (-0.5, 5.0), "test_unseen_app": (-3.0, 0.5)}, monkeypatch)
    assert C.compare_runs(a, same)["same"].all()  # other numbers, the same conclusions
    cmp = C.compare_runs(a, other)
    assert cmp["same"].tolist() == [False, True]  # in-domain: resolved in a, not in c
    assert C.main([str(a), str(same)]) == 0
    assert C.main([str(a), str(other)]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 claims agree" in out and "resolved in either run: 1, of which 0 agree" in out
    assert C.main([str(a), str(tmp_path / "empty")]) == 2


def test_a_claim_only_one_run_has_does_not_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = write_run(tmp_path / "a", {"test_in_domain": (1.0, 3.0)}, monkeypatch)
    b = write_run(tmp_path / "b", {"test_in_domain": (1.0, 3.0), "test_unseen_task": (1.0, 2.0)}, monkeypatch)
    cmp = C.compare_runs(a, b)
    assert cmp["same"].tolist() == [True, False] and cmp["verdict_a"].tolist() == ["+", None]


def test_cli_counts_a_claim_missing_from_one_run_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # b has one more claim, unresolved: it is not counted as resolved, and the count line says it is in one run only
    a = write_run(tmp_path / "a", {"test_in_domain": (1.0, 3.0)}, monkeypatch)
    b = write_run(tmp_path / "b", {"test_in_domain": (1.0, 3.0), "test_unseen_task": (-1.0, 2.0)}, monkeypatch)
    assert C.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 claims agree; resolved in either run: 1, of which 1 agree; in one run only: 1" in out
