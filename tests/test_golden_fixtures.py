"""Schema of the golden files (tests/fixtures/golden): the original evaluators' verdicts.

This module checks that the fixtures are well formed and documented -- every file is named after
a registered protocol, every row has the required fields with the right types, verdicts are booleans, case labels
are unique, and the README lists every fixture with its row count. Whether guirl's protocols
*reproduce* the verdicts is tests/test_golden.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from guirl.metrics.protocols import PROTOCOLS

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
README = GOLDEN / "README.md"

# key -> accepted type(s); every row must carry these
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "protocol": str,
    "case": str,
    "raw_output": str,
    "gt": dict,
    "context": dict,
    "verdict": dict,
}
# key -> accepted type(s) when present
OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "variant": str,
    "variants": dict,
    "gt_source": dict,
    "original": dict,
    "rule": str,
}
# verdict keys every row must have
VERDICT_REQUIRED = ("type_match", "exact")
# protocol -> variant names its rows may use (protocols with one evaluator have none)
VARIANTS = {"ccpo": {"ac", "guio", "mind2web", "aitw"}, "coepg": {"androidcontrol", "mind2web"}}
# protocol -> extra verdict keys its rows must all carry
EXTRA_VERDICT = {
    "agentcpm": ("format_hit",),
    "agentcpm_androidcontrol": ("format_hit",),
    "guiodyssey": ("invalid",),
    "uis1": ("error",),
    "guir1": ("counted_in_step",),
    "aitz": ("format_hit", "error"),
    "mind2web": ("skipped", "element"),
    "ces": ("error",),
}
COEPG_RULES = {"paper-androidcontrol", "paper-mind2web", "assumed-androidcontrol-args"}


def _rows(path: Path) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        assert line.strip(), f"{path.name}:{i}: blank line"
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:  # pragma: no cover - a failing fixture
            pytest.fail(f"{path.name}:{i}: not JSON: {e}")
    return rows


def _readme_counts() -> dict[str, int]:
    """``file -> rows`` from the fixture table of the README."""
    out = {}
    for m in re.finditer(r"^\| `([a-z0-9_]+\.jsonl)` \| (\d+) \|", README.read_text(encoding="utf-8"), re.M):
        out[m.group(1)] = int(m.group(2))
    return out


FILES = sorted(GOLDEN.glob("*.jsonl"))


def test_one_fixture_per_protocol() -> None:
    # every golden file is named after a registered protocol (the as-run protocols that reproduce
    # its rows are checked in tests/test_golden.py)
    assert {p.stem for p in FILES} <= set(PROTOCOLS)


def test_readme_lists_every_fixture_with_its_row_count() -> None:
    counts = _readme_counts()
    assert set(counts) == {p.name for p in FILES}, "README fixture table and files differ"
    for p in FILES:
        assert counts[p.name] == len(_rows(p)), f"README says {counts[p.name]} rows for {p.name}"


def _check_row(protocol: str, r: dict) -> None:
    """Assert that one fixture row has the schema of the README (AssertionError naming the case)."""
    where = f"{protocol} case {r.get('case')!r}"
    for k, t in REQUIRED.items():
        assert k in r, f"{where}: missing {k!r}"
        assert isinstance(r[k], t), f"{where}: {k!r} is {type(r[k]).__name__}"
    for k, t in OPTIONAL.items():
        if k in r:
            assert isinstance(r[k], t), f"{where}: {k!r} is {type(r[k]).__name__}"
    unknown = set(r) - set(REQUIRED) - set(OPTIONAL)
    assert not unknown, f"{where}: unknown keys {sorted(unknown)}"
    assert r["protocol"] == protocol, f"{where}: protocol {r['protocol']!r}"
    assert r["case"].strip(), f"{where}: empty case label"
    v = r["verdict"]
    for k in VERDICT_REQUIRED + EXTRA_VERDICT.get(protocol, ()):
        assert k in v, f"{where}: verdict lacks {k!r}"
    for k, x in v.items():
        assert isinstance(x, bool), f"{where}: verdict {k!r} = {x!r} is not a boolean"
    # only GUI-R1 and SeeClick score a step without requiring the type
    assert not (v["exact"] and not v["type_match"]) or protocol in ("guir1", "mind2web"), (
        f"{where}: exact without type_match"
    )
    for name, vv in r.get("variants", {}).items():
        assert isinstance(vv, dict) and vv, f"{where}: variant {name!r} is not a verdict object"
        assert all(isinstance(x, bool) for x in vv.values()), f"{where}: variant {name!r} has non-booleans"
    if protocol in VARIANTS:
        assert r.get("variant") in VARIANTS[protocol], f"{where}: variant {r.get('variant')!r}"
    else:
        assert "variant" not in r, f"{where}: unexpected variant"
    if protocol == "coepg":
        assert r.get("rule") in COEPG_RULES, f"{where}: rule {r.get('rule')!r}"
    else:
        assert "rule" not in r, f"{where}: 'rule' is only for coepg"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_rows_have_the_schema(path: Path) -> None:
    rows = _rows(path)
    assert len(rows) >= 150, f"{path.name}: only {len(rows)} rows"
    labels = [r.get("case") for r in rows]
    assert len(set(labels)) == len(labels), f"{path.name}: duplicate case labels"
    for r in rows:
        _check_row(path.stem, r)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_fixtures_hold_both_outcomes(path: Path) -> None:
    # a golden file whose verdicts are all equal could not tell a wrong protocol from a right one
    rows = _rows(path)
    assert {r["verdict"]["exact"] for r in rows} == {True, False}
    assert {r["verdict"]["type_match"] for r in rows} == {True, False}


GOOD = {
    "protocol": "agentcpm",
    "case": "x",
    "raw_output": "",
    "gt": {},
    "context": {},
    "verdict": {"type_match": True, "exact": True, "format_hit": True},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # a verdict given as 0/1 instead of a boolean
        ({"verdict": {"type_match": 1, "exact": False, "format_hit": True}}, "not a boolean"),
        # a protocol-specific verdict key missing
        ({"verdict": {"type_match": True, "exact": True}}, "lacks 'format_hit'"),
        # exact without the type (only GUI-R1 / SeeClick allow it)
        ({"verdict": {"type_match": False, "exact": True, "format_hit": True}}, "exact without type_match"),
        # a row of another protocol in this file
        ({"protocol": "uis1"}, "protocol 'uis1'"),
        # a key the README does not document
        ({"note": "x"}, "unknown keys"),
        # the raw output stored as a parsed object instead of the string the original saw
        ({"raw_output": {"POINT": [1, 2]}}, "'raw_output' is dict"),
        # a variant verdict that is not a boolean object
        ({"variants": {"other": {"exact": "yes"}}}, "non-booleans"),
    ],
)
def test_schema_check_rejects_bad_rows(change: dict, message: str) -> None:
    _check_row("agentcpm", dict(GOOD))  # the good row passes
    with pytest.raises(AssertionError, match=message):
        _check_row("agentcpm", {**GOOD, **change})


REAL = Path(__file__).parent / "fixtures" / "real"


@pytest.mark.parametrize("folder", sorted(p for p in REAL.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_real_excerpts_are_documented_and_parse(folder: Path) -> None:
    # every excerpt folder is listed in tests/fixtures/real/README.md and its JSON files parse
    assert f"`{folder.name}/" in (REAL / "README.md").read_text(encoding="utf-8"), f"{folder.name} not in README"
    files = [p for p in folder.rglob("*") if p.suffix in (".json", ".jsonl")]
    assert files, f"{folder.name}: no JSON files"
    for p in files:
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".jsonl":
            assert all(isinstance(json.loads(line), dict) for line in text.splitlines() if line.strip())
        else:
            assert json.loads(text)
