"""Each paper's training-setup table beside the values the paper profiles resolve to.

The papers print their training settings (CCPO Tables 7-8, Co-EPG App. B, CES App. B.1-B.2 and
Table 4, AgentCPM-GUI Tables 4-5 and App. C.1, AndroidLong App. C.2 and Table 7). One file per
paper, ``guirl/assets/paper_setups/<slug>.csv``, lists every hyperparameter of those tables with
the notebook that trains with it and the config key (or a product of keys, ``a * b * 8``) that
holds it; :func:`setup_table` resolves each key the way the runner does
(:func:`guirl.runner.plan_run`: profile with the recipes, the notebook's own experiment file or
the row's data set, then ``overrides``) and compares. ``python -m guirl.setups --write`` renders
``docs/fidelity/training-setup.md``; a test checks that the committed file is the rendering, so
the table cannot drift from the code.

Columns of a setup file (:data:`COLUMNS`): ``source`` (``Table 7``, ``App. B``), ``line`` (1-based
line of the paper's text file), ``hyperparameter`` and ``column`` (the paper's names: the data set
or role column, empty for a single value), ``paper_value`` (the paper's text), ``as_key`` (the
same value in the key's vocabulary when the words differ, a YAML scalar or list; empty: the
paper's value read as YAML), ``notebook`` (``NN_name``), ``experiment`` (empty: the notebook's
default, else a ``configs/experiments`` name selecting the data set of the paper's column),
``key``, ``expect`` (:data:`STATUSES`) and ``note``. ``expect`` is what the row must resolve to:
a recipe that stops matching its paper (or starts to) fails ``tests/test_setups.py``; every row
that is not ``same`` says why in ``note``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from guirl.papers import PAPERS, Paper, get_paper

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMNS",
    "DOC",
    "NOT_STATED",
    "PROFILES",
    "SETUPS_DIR",
    "STATUSES",
    "SetupError",
    "SetupRow",
    "compare",
    "main",
    "read_setup_csv",
    "render_markdown",
    "resolve_key",
    "run_setup",
    "setup_rows",
    "setup_table",
]

#: Folder of the setup files, one ``<slug>.csv`` per paper.
SETUPS_DIR = Path(__file__).resolve().parent / "assets" / "paper_setups"
#: The rendered table (repository-relative).
DOC = Path("docs") / "fidelity" / "training-setup.md"
#: Profiles whose resolved values the table shows, one column each.
PROFILES: tuple[str, ...] = ("paper-3b", "paper-7b")
#: Columns of a setup file, in order.
COLUMNS: tuple[str, ...] = (
    "source",
    "line",
    "hyperparameter",
    "column",
    "paper_value",
    "as_key",
    "notebook",
    "experiment",
    "key",
    "expect",
    "note",
)
#: ``same``: the resolved value is the paper's; ``differs``: the key holds another value;
#: ``no key``: nothing in the project reads such a value (``key`` empty); ``not stated``: the
#: paper gives no value (``paper_value`` is :data:`NOT_STATED`) and the key holds the value the
#: run trains with, in the paper's own section (marked "not a paper value" there).
STATUSES: tuple[str, ...] = ("same", "differs", "no key", "not stated")
#: The ``paper_value`` of a row whose paper gives no value.
NOT_STATED = "not stated"

_KEY_RE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")
_SOURCE_RE = re.compile(r"^(Table \d+|App\. [A-Z](\.\d+)*|Sec\. \d+(\.\d+)*)$")


class SetupError(ValueError):
    """A setup file is malformed or names an unknown key; the message starts with ``<file>:<line>:``."""


@dataclass(frozen=True)
class SetupRow:
    """One hyperparameter of a paper's training-setup table (module doc); ``where`` is ``file:line``."""

    paper: str
    source: str
    line: int
    hyperparameter: str
    column: str
    paper_value: str
    as_key: str
    notebook: str
    experiment: str
    key: str
    expect: str
    note: str
    where: str

    @property
    def target(self) -> Any:
        """The paper's value as the key holds it (``as_key``, else ``paper_value``, read as YAML)."""
        return _yaml_value(self.as_key or self.paper_value)


def _yaml_value(text: str) -> Any:
    """``text`` read as YAML; a string that is a number in exponent form (``1e-6``, which YAML 1.1
    reads as text) becomes a float."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(SETUPS_DIR.parents[3]))
    except ValueError:
        return str(path)


def _check_key(expr: str) -> None:
    """``expr`` is ``key``, ``key * key * 8`` (dotted config keys and positive integers) or
    ``epochs_key | steps_key`` (two keys)."""
    if "|" in expr:
        parts = [p.strip() for p in expr.split("|")]
        if len(parts) != 2 or not all(_KEY_RE.match(p) for p in parts):
            raise ValueError(f"{expr!r}: write 'a.epochs | a.max_steps' (two dotted config keys)")
        return
    for term in expr.split("*"):
        term = term.strip()
        if not (term.isdigit() or _KEY_RE.match(term)):
            raise ValueError(f"{term!r} is neither a dotted config key nor an integer (write 'a.b * c.d * 8')")


def read_setup_csv(path: Path | str, paper: Paper | None = None) -> list[SetupRow]:
    """Read and validate one setup file (module doc). The first problem raises
    :class:`SetupError` naming the file and line: the header, the field count, ``source``,
    ``line``, ``expect``, a key expression, a ``no key`` row with a key (or a keyed row without
    one), a ``not stated`` row whose paper value is not :data:`NOT_STATED` (or the reverse), a row
    that is not ``same`` without a note, a notebook that is not ``NN_name``."""
    path = Path(path)
    where = _rel(path)
    paper = paper or get_paper(path.stem)
    rows: list[SetupRow] = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise SetupError(f"{where}:1: header must be {','.join(COLUMNS)}")
        for fields in reader:
            n = reader.line_num
            if len(fields) != len(COLUMNS):
                raise SetupError(f"{where}:{n}: {len(fields)} fields, expected {len(COLUMNS)} ({','.join(COLUMNS)})")
            rec = dict(zip(COLUMNS, (x.strip() for x in fields)))
            if not _SOURCE_RE.match(rec["source"]):
                raise SetupError(
                    f"{where}:{n}: source {rec['source']!r} must look like 'Table 7', 'App. B.2' or 'Sec. 5.1'"
                )
            if not rec["line"].isdigit() or int(rec["line"]) < 1:
                raise SetupError(f"{where}:{n}: line {rec['line']!r} must be a positive integer")
            if not rec["hyperparameter"] or not rec["paper_value"]:
                raise SetupError(f"{where}:{n}: hyperparameter and paper_value must be non-empty")
            if rec["expect"] not in STATUSES:
                raise SetupError(f"{where}:{n}: expect {rec['expect']!r} must be one of {', '.join(STATUSES)}")
            if not re.match(r"^\d\d_[a-z0-9_]+$", rec["notebook"]):
                raise SetupError(
                    f"{where}:{n}: notebook {rec['notebook']!r} must be a notebook stem such as 02_ccpo_rl"
                )
            if (rec["expect"] == NOT_STATED) != (rec["paper_value"] == NOT_STATED):
                raise SetupError(
                    f"{where}:{n}: a row whose paper gives no value has paper_value and expect {NOT_STATED!r}, "
                    "and only such a row"
                )
            if (rec["expect"] == "no key") != (rec["key"] == ""):
                raise SetupError(f"{where}:{n}: a 'no key' row has an empty key, every other row names one")
            if rec["key"]:
                try:
                    _check_key(rec["key"])
                except ValueError as err:
                    raise SetupError(f"{where}:{n}: key: {err}") from None
            if rec["expect"] != "same" and not rec["note"]:
                raise SetupError(f"{where}:{n}: a row expected to be {rec['expect']!r} says why in its note")
            rows.append(
                SetupRow(
                    paper=paper.name,
                    **{k: v for k, v in rec.items() if k != "line"},
                    line=int(rec["line"]),
                    where=f"{where}:{n}",
                )
            )
    return rows


def setup_rows(paper: str | None = None, *, directory: Path | str | None = None) -> list[SetupRow]:
    """Every row of the setup files (one paper's with ``paper``: short name or slug)."""
    folder = Path(directory) if directory is not None else SETUPS_DIR
    papers = [get_paper(paper)] if paper is not None else list(PAPERS.values())
    out: list[SetupRow] = []
    for p in papers:
        path = folder / f"{p.slug}.csv"
        if not path.is_file():
            raise SetupError(f"{_rel(path)}:1: no setup file for {p.name}")
        out.extend(read_setup_csv(path, p))
    return out


@functools.lru_cache(maxsize=64)
def _flat_config(notebook: str, profile: str, experiment: str | None, overrides: tuple[str, ...]) -> dict[str, Any]:
    from guirl.paths import repo_root
    from guirl.runner import plan_run

    plan = plan_run(
        repo_root() / "notebooks" / f"{notebook}.ipynb", profile, experiment=experiment, overrides=overrides
    )
    return plan.config.to_flat()


def resolve_key(expr: str, flat: dict[str, Any], where: str = "") -> Any:
    """The value of ``expr`` in a flat config: one key's value, the product of the terms of
    ``a * b * 8``, or for ``epochs | max_steps`` the epochs unless the step budget is set (then
    ``"<N> steps"``: the run trains N optimizer steps, not the paper's epochs). Raises
    :class:`SetupError` naming ``where`` for a key the config lacks."""
    _check_key(expr)
    if "|" in expr:
        epochs, steps = (resolve_key(p.strip(), flat, where) for p in expr.split("|"))
        return epochs if steps is None else f"{steps} steps"
    values = []
    for term in (t.strip() for t in expr.split("*")):
        if term.isdigit():
            values.append(int(term))
        elif term in flat:
            values.append(flat[term])
        else:
            raise SetupError(f"{where}: key {term!r} is not a config key (check the spelling in the schema)")
    if len(values) == 1:
        return values[0]
    return math.prod(values)


def compare(target: Any, value: Any) -> bool:
    """Whether a resolved ``value`` is the paper's ``target``: numbers within a relative 1e-9
    (``True`` / ``False`` only equal booleans), lists element-wise, anything else as text."""
    if isinstance(target, bool) or isinstance(value, bool):
        return isinstance(target, bool) and isinstance(value, bool) and target == value
    if isinstance(target, (int, float)) and isinstance(value, (int, float)):
        return math.isclose(float(target), float(value), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(target, (list, tuple)) and isinstance(value, (list, tuple)):
        return len(target) == len(value) and all(compare(a, b) for a, b in zip(target, value))
    return str(target) == str(value)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _status(row: SetupRow, value: Any) -> str:
    """The status of a keyed row whose key resolved to ``value`` (:data:`STATUSES`)."""
    if row.expect == NOT_STATED:
        return NOT_STATED
    return "same" if compare(row.target, value) else "differs"


def setup_table(
    paper: str | None = None,
    *,
    profiles: Sequence[str] = PROFILES,
    overrides: Sequence[str] = (),
    directory: Path | str | None = None,
) -> list[dict[str, Any]]:
    """One dict per setup row: the row's fields, ``resolved`` (``{profile: value}``, ``None`` for
    a ``no key`` row) and ``status`` (``{profile: same | differs | no key | not stated}``), each config
    resolved as :func:`guirl.runner.plan_run` resolves the row's notebook on that profile, with
    ``overrides`` (``["rl.learning_rate=1e-6"]``) applied last."""
    out = []
    for row in setup_rows(paper, directory=directory):
        resolved: dict[str, Any] = {}
        status: dict[str, str] = {}
        for profile in profiles:
            if not row.key:
                resolved[profile], status[profile] = None, "no key"
                continue
            flat = _flat_config(row.notebook, profile, row.experiment or None, tuple(overrides))
            value = resolve_key(row.key, flat, row.where)
            resolved[profile] = value
            status[profile] = _status(row, value)
        out.append({"row": row, "resolved": resolved, "status": status})
    return out


def run_setup(cfg: Any, notebook: str) -> pd.DataFrame:
    """The training-setup rows of ``notebook`` (``NN_name``) beside the values of the run ``cfg``
    (a resolved config, any profile): one row per hyperparameter, the paper's data-set column that
    matches ``cfg.data.source`` (the default column, AndroidControl's for CCPO, otherwise), with
    ``paper``, ``key``, ``this run`` (``None`` for a ``no key`` row) and ``status`` (``same`` /
    ``differs`` / ``no key`` / ``not stated``). Notebooks print it so a run says which of its paper's values it
    trains with; on the tiny profile most differ by design (CPU sizes)."""
    import pandas as pd

    flat = cfg.to_flat()
    rows = [r for r in setup_rows() if r.notebook == notebook]
    groups: dict[tuple[str, int, str], list[SetupRow]] = {}
    for r in rows:
        groups.setdefault((r.source, r.line, r.hyperparameter), []).append(r)
    out = []
    for r in rows:
        siblings = groups[(r.source, r.line, r.hyperparameter)]
        by_source = {s.experiment: s for s in siblings}
        if len(by_source) > 1 and by_source.get(cfg.data.source, by_source.get("")) is not r:
            continue  # another data set's column of the same hyperparameter
        value = resolve_key(r.key, flat, r.where) if r.key else None
        status = "no key" if not r.key else _status(r, value)
        shown = None if not r.key else "null" if value is None else _show(value)
        out.append(
            {
                "paper": r.paper,
                "where": f"{r.source} ({r.line})",
                "hyperparameter": r.hyperparameter,
                "column": r.column,
                "paper value": r.paper_value,
                "key": r.key,
                "this run": shown,
                "status": status,
            }
        )
    return pd.DataFrame(
        out, columns=["paper", "where", "hyperparameter", "column", "paper value", "key", "this run", "status"]
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(profiles: Sequence[str] = PROFILES) -> str:
    """``docs/fidelity/training-setup.md``: per paper, one table of its training-setup rows with
    the value each paper profile resolves to, then the counts."""
    lines = [
        "# Training setups: each paper's values beside the paper profiles'",
        "",
        "Generated by `python -m guirl.setups --write` from `lib/guirl/assets/paper_setups/<paper>.csv`",
        "(`guirl.setups`); `tests/test_setups.py` fails when this file is not the rendering of the current",
        "code or when a row stops resolving as its file expects. Each value is what the runner resolves",
        "for the row's notebook on the profile: the profile with each paper's recipe",
        "(`lib/guirl/methods/<paper>/config.py`), the notebook's own experiment file, or the experiment",
        "named in the row for a data-set column. Products (`a * b * 8`) are global batches: per-device",
        "batch x accumulation x processes. `same`: the paper's value; `differs` and `no key` rows say why;",
        "`not stated`: the paper gives no value, and the row shows the one its recipe holds (not a paper value).",
        "AITW's columns of CCPO Tables 7-8 have no rows (no AITW loader). Line numbers are 1-based lines of",
        "the paper's text file (`docs/papers.md`).",
        "",
    ]
    table = setup_table(profiles=profiles)
    counts: dict[str, dict[str, int]] = {}
    for paper in PAPERS.values():
        rows = [r for r in table if r["row"].paper == paper.name]
        if not rows:
            continue
        lines += [f"## {paper.name}", "", f"Text: `{paper.paper_file}`.", ""]
        head = ["where (line)", "hyperparameter", "column", "paper", "notebook", "key"]
        head += [f"{p}" for p in profiles] + ["status", "why"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for item in rows:
            row: SetupRow = item["row"]
            shown = {
                p: "" if not row.key else "null" if item["resolved"][p] is None else _show(item["resolved"][p])
                for p in profiles
            }
            statuses = sorted(set(item["status"].values()))
            status = statuses[0] if len(statuses) == 1 else " / ".join(item["status"][p] for p in profiles)
            counts.setdefault(paper.name, {k: 0 for k in STATUSES})
            counts[paper.name][item["status"][profiles[-1]]] += 1
            paper_text = row.paper_value + (f" (`{row.as_key}`)" if row.as_key else "")
            nb = row.notebook + (f" `--experiment {row.experiment}`" if row.experiment else "")
            cells = [
                f"{row.source} ({row.line})",
                row.hyperparameter,
                row.column,
                paper_text,
                nb,
                f"`{row.key}`" if row.key else "",
                *(f"`{shown[p]}`" if shown[p] else "" for p in profiles),
                status,
                row.note,
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    lines += ["## Counts", "", f"On {profiles[-1]}.", "", "| paper | rows | " + " | ".join(STATUSES) + " |"]
    lines.append("|---|---:|" + "---:|" * len(STATUSES))
    total = {k: 0 for k in STATUSES}
    for name, c in counts.items():
        lines.append(f"| {name} | {sum(c.values())} | " + " | ".join(str(c[k]) for k in STATUSES) + " |")
        for k in STATUSES:
            total[k] += c[k]
    lines.append(f"| **total** | **{sum(total.values())}** | " + " | ".join(f"**{total[k]}**" for k in STATUSES) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m guirl.setups [--write | --check]``: print the rendered table, write it to
    ``docs/fidelity/training-setup.md``, or exit 1 when that file is not the rendering."""
    from guirl.paths import repo_root

    parser = argparse.ArgumentParser(prog="python -m guirl.setups", description=main.__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {DOC}")
    group.add_argument("--check", action="store_true", help=f"exit 1 when {DOC} is stale")
    args = parser.parse_args(argv)
    text = render_markdown()
    path = repo_root() / DOC
    if args.write:
        path.write_text(text, encoding="utf-8")
        print(f"{DOC} written ({len(setup_rows())} rows)")
    elif args.check:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python -m guirl.setups --write")
            return 1
        print(f"{DOC} is current")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
