"""The notebooks: committed clean, one flat ``parameters`` cell, the Makefile runs the same list,
and each one runs end to end on the tiny profile with ``smoke=True``.

The smoke runs share one set of output folders for the session and run in file order, so a
later notebook finds what an earlier one generated (as in ``make reproduce``).
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, make_notebook
from guirl.runner import list_notebooks, run_notebook

NOTEBOOKS = list_notebooks(REPO / "notebooks")
ALL_IPYNB = sorted((REPO / "notebooks").glob("*.ipynb"))
REQUIRED_PARAMETERS = {"profile", "experiment", "seed", "overrides", "smoke"}


def _is_flat_literal(node: ast.AST) -> bool:
    """A constant, or a list/tuple of constants (no names, calls or nested containers)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    return False


def notebook_problems(nb: dict[str, Any]) -> list[str]:
    """What is wrong with a committed notebook (empty list: nothing)."""
    problems = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for i, cell in enumerate(code):
        if cell.get("outputs"):
            problems.append(f"code cell {i} has outputs")
        if cell.get("execution_count") is not None:
            problems.append(f"code cell {i} has an execution count")
    tagged = [c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        return problems + [f"{len(tagged)} cells tagged 'parameters' (need exactly 1)"]
    if tagged[0].get("cell_type") != "code":
        return problems + ["the 'parameters' cell is not a code cell"]
    source = "".join(tagged[0]["source"]) if isinstance(tagged[0]["source"], list) else tagged[0]["source"]
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return problems + [f"parameters cell does not parse: {err.msg}"]
    names = set()
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            problems.append(f"parameters cell line {stmt.lineno}: only `name = literal` assignments")
            continue
        if not _is_flat_literal(stmt.value):
            problems.append(f"parameters cell line {stmt.lineno}: `{stmt.targets[0].id}` is not a flat literal")
        names.add(stmt.targets[0].id)
    missing = REQUIRED_PARAMETERS - names
    if missing:
        problems.append(f"parameters cell does not define {sorted(missing)}")
    return problems


# The checker itself must catch each problem (so the real check can fail).
GOOD = "profile = 'tiny'\nexperiment = None\nseed = 0\noverrides = []\nsmoke = False\n"


@pytest.mark.parametrize(
    "params, body_outputs, expected",
    [
        (GOOD, False, []),  # a clean notebook
        (GOOD, True, ["code cell 1 has outputs", "code cell 1 has an execution count"]),
        (GOOD + "lr = 10 ** -3\n", False, ["not a flat literal"]),  # an expression
        (GOOD + "d = {'a': 1}\n", False, ["not a flat literal"]),  # a nested container
        (GOOD + "import os\n", False, ["only `name = literal`"]),  # a statement
        ("profile = 'tiny'\nseed = 0\n", False, ["does not define"]),  # required names missing
        (None, False, ["0 cells tagged"]),  # no parameters cell
    ],
)
def test_notebook_checker(tmp_path: Path, params: str | None, body_outputs: bool, expected: list[str]) -> None:
    path = make_notebook(tmp_path / "n.ipynb", params or "x = 1", ["y = 2"])
    nb = json.loads(path.read_text())
    if params is None:
        nb["cells"][0]["metadata"]["tags"] = []
    if body_outputs:
        nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "2"}]
        nb["cells"][1]["execution_count"] = 1
    problems = notebook_problems(nb)
    assert len(problems) == len(expected)
    for got, want in zip(problems, expected):
        assert want in got


def test_committed_notebooks_are_clean() -> None:
    # Every notebook in notebooks/ (numbered or not); an empty folder passes trivially.
    problems = {p.name: notebook_problems(json.loads(p.read_text())) for p in ALL_IPYNB}
    assert {k: v for k, v in problems.items() if v} == {}


def test_makefile_runs_the_same_notebooks_in_the_same_order() -> None:
    out = subprocess.run(
        ["make", "-s", "list-notebooks"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == [str(p.relative_to(REPO)) for p in NOTEBOOKS]


def test_notebook_names_are_unique_by_number() -> None:
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert len(numbers) == len(set(numbers)), numbers


@pytest.fixture(scope="session")
def smoke_roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("notebook-smoke")
    return {
        var: base / var.removeprefix("GUIRL_").lower()
        for var in ("GUIRL_RUNS", "GUIRL_FIGURES", "GUIRL_DATA", "GUIRL_CACHE")
    }


# Defined only when notebooks exist, so an empty notebooks/ folder gives no skipped test.
if NOTEBOOKS:

    @pytest.mark.notebook
    @pytest.mark.slow
    @pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
    def test_notebook_smoke(notebook: Path, smoke_roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
        for var, folder in smoke_roots.items():
            folder.mkdir(parents=True, exist_ok=True)
            monkeypatch.setenv(var, str(folder))
        result = run_notebook(notebook, "tiny", parameters={"smoke": True}, quiet=True)
        assert result.output == (smoke_roots["GUIRL_RUNS"] / "tiny" / notebook.name).resolve()
        executed = json.loads(result.output.read_text())
        errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert errors == []
