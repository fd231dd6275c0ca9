"""Write a notebook's tables and figures with the numbers and provenance behind them.

``Report(notebook, cfg)`` writes into ``figures/<profile>/<notebook>/``:

* ``table(name, df)``   -> ``<name>.csv``, ``<name>.md`` (and ``<name>.tex`` with ``latex=True``)
* ``figure(name, fig)`` -> ``<name>.png``, ``<name>.pdf``
* for every output a ``<name>.json`` sidecar: the numbers (table records or the figure's
  ``data``), git SHA and dirty flag, profile, config hash, seed, package versions, wall time
  since the ``Report`` was created and a UTC timestamp;
* ``compare(name, ours, paper_rows)`` -> a ``table`` of "paper | ours | difference" with the
  paper's location, from rows of :func:`guirl.papers.paper_results` (:func:`paper_comparison`);
* once, ``config.yaml``: the resolved configuration.

A table that marks differences (a ``resolved`` column, see :mod:`guirl.metrics.paired`) is
refused unless each mark agrees with its interval: "resolved" means the interval excludes zero.

Tables are written deterministically (same frame -> same bytes of csv/md/tex), so that two
``make reproduce`` runs can be compared file by file; only the sidecars carry times.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl import timing
from guirl.config import Config
from guirl.metrics.paired import check_resolved_claims
from guirl.paths import figures_dir, repo_root

__all__ = [
    "Report",
    "git_state",
    "package_versions",
    "to_markdown",
    "to_latex",
    "jsonable",
    "paper_cells",
    "paper_comparison",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
VERSIONED_PACKAGES = ("torch", "transformers", "trl", "peft", "numpy", "pandas")


def _select_backend() -> None:
    """Agg outside a Jupyter kernel; inside one keep the inline backend (an Agg canvas too)
    so that the executed notebook still shows the figures."""
    import matplotlib

    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")


_select_backend()


def git_state(root: Path | None = None) -> dict[str, Any]:
    """``{"sha": <40 hex> | "unknown", "dirty": bool | None}`` of the repository at ``root``."""
    root = root or repo_root()
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"sha": "unknown", "dirty": None}
    return {"sha": sha or "unknown", "dirty": bool(status.strip())}


def package_versions() -> dict[str, str]:
    """Versions of python and the packages that decide the numbers ("not installed" if absent)."""
    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def jsonable(value: Any) -> Any:
    """``value`` with numpy/pandas scalars and arrays, paths and tuples turned into JSON types;
    NaN and infinities become ``None`` (JSON has no such numbers)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (pd.Series, pd.Index)):
        return jsonable(value.tolist())
    if isinstance(value, pd.DataFrame):
        return jsonable(value.to_dict(orient="records"))
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (_dt.datetime, _dt.date, pd.Timestamp)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


def _cell(value: Any, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        return format(float(value), floatfmt)
    return str(value)


def _prepare(df: pd.DataFrame) -> pd.DataFrame:
    """Turn a meaningful index into columns; a default RangeIndex is dropped."""
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df.reset_index(drop=True)
    return df.reset_index()


def to_markdown(df: pd.DataFrame, floatfmt: str = ".4f") -> str:
    """A GitHub pipe table (numbers right-aligned); deterministic for a given frame."""
    df = _prepare(df)
    header = [str(c) for c in df.columns]
    rows = [[_cell(v, floatfmt).replace("|", "\\|") for v in row] for row in df.itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    widths = [max([len(h), 3, *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
}


def _tex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(df: pd.DataFrame, caption: str = "", label: str = "", floatfmt: str = ".4f") -> str:
    """A booktabs ``table`` environment; deterministic for a given frame."""
    df = _prepare(df)
    align = "".join(
        "r" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) else "l"
        for c in df.columns
    )
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{_tex(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(_tex(str(c)) for c in df.columns) + r" \\",
        r"\midrule",
    ]
    for row in df.itertuples(index=False):
        lines.append(" & ".join(_tex(_cell(v, floatfmt)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


#: Columns of :func:`paper_comparison`, in order.
COMPARISON_COLUMNS: tuple[str, ...] = ("table", "row", "column", "unit", "paper", "ours", "difference", "location")


def paper_cells(
    table: pd.DataFrame,
    paper_rows: pd.DataFrame,
    *,
    rows: Mapping[str, Mapping[str, Any]],
    columns: Mapping[str, str],
    scale: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Our cells in a paper table's layout for :meth:`guirl.report.Report.compare`.

    ``rows`` maps a paper row name to the filter selecting our one row of ``table`` (e.g.
    ``{"CCPO-3B 3AO": {"model": "mid", "screen": "AndroidControl", "history": "3AO", "side":
    "CASC"}}``); ``columns`` maps a paper column to our column (``{"Token length":
    "prompt_tokens"}``), multiplied by ``scale[paper column]`` when given. Only cells the paper
    prints (present in ``paper_rows``) are returned: columns ``row``, ``column``, ``ours``.
    Raises ``KeyError`` when a filter matches no row or several.
    """
    printed = set(zip(paper_rows["row"].astype(str), paper_rows["column"].astype(str)))
    out = []
    for paper_row, where in rows.items():
        sel = table
        for k, v in where.items():
            sel = sel[sel[k] == v]
        if len(sel) != 1:
            raise KeyError(f"paper_cells: {dict(where)} selects {len(sel)} rows for {paper_row!r}, expected 1")
        rec = sel.iloc[0]
        for paper_col, ours in columns.items():
            if (paper_row, paper_col) in printed:
                value = float(rec[ours]) * (scale or {}).get(paper_col, 1.0)
                out.append({"row": paper_row, "column": paper_col, "ours": value})
    return pd.DataFrame(out, columns=["row", "column", "ours"])


def paper_comparison(ours: pd.DataFrame, paper_rows: pd.DataFrame) -> pd.DataFrame:
    """Our numbers beside the papers': one row per row of ``paper_rows``, in its order.

    Args:
        ours: columns ``row``, ``column``, ``ours`` (a number in the paper row's ``unit``: a
            rate printed in percent is compared in percent), plus ``table`` when ``paper_rows``
            spans several tables. A missing number (NaN) is allowed.
        paper_rows: rows of :func:`guirl.papers.paper_results` (any filter of it).

    Returns:
        :data:`COMPARISON_COLUMNS`: ``paper`` is the value as printed, ``ours`` our number (NaN
        where ``ours`` has none), ``difference`` = ours - paper (NaN without ours), ``location``
        = ``"<paper> <table>, <paper_file> line <line>"``.

    Raises ``ValueError`` naming the missing columns, a duplicated key, or a row of ``ours``
    that no paper row matches (a typo must not vanish from the table).
    """
    need_paper = {"paper", "table", "row", "column", "value", "unit", "paper_file", "line", "number"}
    missing = sorted(need_paper - set(paper_rows.columns))
    if missing:
        raise ValueError(f"paper_rows lacks {missing}: pass rows of guirl.papers.paper_results()")
    key = ["table", "row", "column"] if "table" in ours.columns else ["row", "column"]
    missing = sorted({*key, "ours"} - set(ours.columns))
    if missing:
        raise ValueError(f"ours lacks {missing}; give the columns {key + ['ours']}")
    if key == ["row", "column"] and paper_rows["table"].nunique() > 1:
        tables = sorted(paper_rows["table"].unique())
        raise ValueError(f"paper_rows span {tables}: give ours a 'table' column")
    for what, df in (("paper_rows", paper_rows), ("ours", ours)):
        dup = df[df.duplicated(key, keep=False)]
        if len(dup):
            raise ValueError(f"{what}: {key} repeats for {dup[key].drop_duplicates().values.tolist()}")
    known = set(map(tuple, paper_rows[key].astype(str).values.tolist()))
    unknown = [k for k in map(tuple, ours[key].astype(str).values.tolist()) if k not in known]
    if unknown:
        raise ValueError(f"ours has {key} {unknown} that no paper row has (check the spelling against paper_rows)")
    mine = {tuple(map(str, k)): float(v) for k, v in zip(ours[key].values.tolist(), ours["ours"].tolist())}
    out = []
    for rec in paper_rows.to_dict(orient="records"):
        k = tuple(str(rec[c]) for c in key)
        value = mine.get(k, math.nan)
        out.append(
            {
                "table": rec["table"],
                "row": rec["row"],
                "column": rec["column"],
                "unit": rec["unit"],
                "paper": str(rec["value"]),
                "ours": value,
                "difference": value - float(rec["number"]),
                "location": f"{rec['paper']} {rec['table']}, {rec['paper_file']} line {int(rec['line'])}",
            }
        )
    return pd.DataFrame(out, columns=list(COMPARISON_COLUMNS))


class Report:
    """Outputs of one notebook run under ``figures/<cfg.profile>/<notebook>/``."""

    def __init__(self, notebook: str, cfg: Config) -> None:
        if not _NAME_RE.match(notebook):
            raise ValueError(f"notebook name {notebook!r}: use letters, digits, '_', '-' or '.'")
        self.notebook = notebook
        self.cfg = cfg
        self.out_dir = figures_dir(cfg.profile) / notebook
        self.started = time.perf_counter()
        self.written: list[Path] = []
        self._kinds: dict[str, str] = {}  # output name -> "table" | "figure" written under it
        self._config_saved = False
        self._git = git_state()
        self._versions = package_versions()

    # -- helpers ---------------------------------------------------------------------------
    def _path(self, name: str, suffix: str) -> Path:
        if not _NAME_RE.match(name):
            raise ValueError(f"output name {name!r}: use letters, digits, '_', '-' or '.'")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if not self._config_saved:
            self.written.append(self.cfg.save(self.out_dir / "config.yaml"))
            self._config_saved = True
        return self.out_dir / f"{name}{suffix}"

    def _write_text(self, path: Path, text: str) -> Path:
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        if path not in self.written:  # an output written again (e.g. a table updated as a run goes) is listed once
            self.written.append(path)
        return path

    def sidecar(self, name: str, kind: str, files: list[Path], data: Any, caption: str = "") -> dict[str, Any]:
        """The provenance record written next to an output (also returned)."""
        return {
            "name": name,
            "kind": kind,
            "notebook": self.notebook,
            "caption": caption,
            "files": [p.name for p in files],
            "data": jsonable(data),
            "git_sha": self._git["sha"],
            "git_dirty": self._git["dirty"],
            "profile": self.cfg.profile,
            "config_hash": self.cfg.hash(),
            "seed": self.cfg.seed,
            "versions": self._versions,
            "wall_time_s": round(time.perf_counter() - self.started, 3),
            "timestamp_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def _claim(self, name: str, kind: str) -> None:
        """Reserve ``name`` for one kind of output: a table and a figure of the same name would
        share (and overwrite) one ``<name>.json`` sidecar."""
        previous = self._kinds.setdefault(name, kind)
        if previous != kind:
            raise ValueError(
                f"{self.notebook}: output name {name!r} is already used by a {previous} of this report; "
                f"give the {kind} its own name (e.g. {name}_{'chart' if kind == 'figure' else 'table'})"
            )

    def _write_sidecar(self, name: str, record: dict[str, Any]) -> Path:
        text = json.dumps(record, indent=2, sort_keys=False, allow_nan=False) + "\n"
        return self._write_text(self._path(name, ".json"), text)

    # -- outputs ---------------------------------------------------------------------------
    def table(
        self, name: str, df: pd.DataFrame, caption: str = "", latex: bool = False, floatfmt: str = ".4f"
    ) -> dict[str, Path]:
        """Write ``<name>.csv``, ``<name>.md`` (``floatfmt`` digits), optionally ``<name>.tex``,
        and the sidecar with the full-precision records. Returns the paths by suffix."""
        with timing.phase("io", "report"):
            return self._table(name, df, caption, latex, floatfmt)

    def _table(self, name: str, df: pd.DataFrame, caption: str, latex: bool, floatfmt: str) -> dict[str, Path]:
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"table {name!r}: expected a pandas DataFrame, got {type(df).__name__}")
        check_resolved_claims(df, table=f"{self.notebook}/{name}")  # "resolved" only where the interval excludes 0
        self._claim(name, "table")
        frame = _prepare(df)
        paths: dict[str, Path] = {}
        csv = frame.to_csv(index=False, lineterminator="\n")
        paths["csv"] = self._write_text(self._path(name, ".csv"), csv)
        md = (f"{caption}\n\n" if caption else "") + to_markdown(frame, floatfmt)
        paths["md"] = self._write_text(self._path(name, ".md"), md)
        if latex:
            tex = to_latex(frame, caption=caption, label=f"tab:{self.notebook}:{name}", floatfmt=floatfmt)
            paths["tex"] = self._write_text(self._path(name, ".tex"), tex)
        record = self.sidecar(name, "table", list(paths.values()), frame.to_dict(orient="records"), caption)
        paths["json"] = self._write_sidecar(name, record)
        return paths

    def figure(
        self, name: str, fig: Any, data: Mapping[str, Any] | None = None, caption: str = "", dpi: int = 150
    ) -> dict[str, Path]:
        """Save a matplotlib figure as ``<name>.png`` and ``<name>.pdf`` with the numbers it
        plots (``data``) in the sidecar. The figure stays open (a notebook can display it)."""
        with timing.phase("io", "report"):
            return self._figure(name, fig, data, caption, dpi)

    def _figure(self, name: str, fig: Any, data: Mapping[str, Any] | None, caption: str, dpi: int) -> dict[str, Path]:
        _select_backend()
        if not hasattr(fig, "savefig"):
            raise TypeError(f"figure {name!r}: expected a matplotlib Figure, got {type(fig).__name__}")
        self._claim(name, "figure")
        paths: dict[str, Path] = {}
        paths["png"] = self._path(name, ".png")
        fig.savefig(paths["png"], dpi=dpi, bbox_inches="tight", metadata={"Software": None})
        paths["pdf"] = self._path(name, ".pdf")
        fig.savefig(
            paths["pdf"], bbox_inches="tight", metadata={"Creator": None, "Producer": None, "CreationDate": None}
        )
        self.written += [paths["png"], paths["pdf"]]
        record = self.sidecar(name, "figure", list(paths.values()), dict(data or {}), caption)
        paths["json"] = self._write_sidecar(name, record)
        return paths

    def compare(
        self, name: str, ours: pd.DataFrame, paper_rows: pd.DataFrame, caption: str = "", floatfmt: str = ".2f"
    ) -> dict[str, Path]:
        """Write the "paper | ours | difference" table ``name`` (:func:`paper_comparison`: the
        rows of ``paper_rows``, our number beside each, and the paper location) as :meth:`table`
        does; the caption says which profile our numbers come from."""
        df = paper_comparison(ours, paper_rows)
        head = f"Paper vs ours (profile {self.cfg.profile}; difference = ours - paper)"
        return self.table(name, df, caption=f"{caption} {head}".strip() if caption else head, floatfmt=floatfmt)
