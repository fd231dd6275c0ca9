"""The five papers as data: their files, their headline numbers, and every table and figure they print.

* :data:`PAPERS` -- one :class:`Paper` per paper (short name used in citations such as
  ``CCPO eq. 11``, title, first author, reference, the plain-text file the project reads,
  ``docs/papers.md`` describes them).
* :func:`paper_results` -- the registry of the papers' result tables
  (``guirl/assets/paper_results/<slug>.csv``) as one validated :class:`pandas.DataFrame`. Every
  row is one printed number: ``paper, table, row, column, value, unit, paper_file, line, note``
  where ``value`` is the number exactly as printed (trailing zeros kept, thousands separators
  kept, no ``%`` sign, no markup) and ``line`` is the 1-based line of the paper's text file the
  number is printed on. ``scripts/check_paper_numbers.py`` checks every row against the texts.
* :data:`ARTEFACTS` / :func:`artefacts` -- every table and figure of the five papers, with a
  one-line summary, its kind (a *result* a notebook can regenerate, or a hyper-parameter table,
  a prompt, a mapping, a diagram, a qualitative example) and what in this repository regenerates
  it (``notebooks/NN_name.ipynb: <artefact>``) with its status ``regenerated`` / ``partial`` /
  ``not yet`` (``n/a`` for kinds that are not results). ``make reproduce`` writes this list as
  ``figures/<profile>/INDEX.md``.

Units of ``unit``: ``%`` (a rate printed in percent), ``pp`` (a difference in percentage
points), ``fraction`` (a rate printed in ``[0, 1]``), ``x`` (a speed-up factor), ``tokens``,
``s/step``, ``s``, ``ms``, ``TFLOPS``, ``TFLOPs``, ``steps``, ``count``, ``plans per task``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

__all__ = [
    "ARTEFACTS",
    "ARTEFACT_KINDS",
    "ARTEFACT_STATUSES",
    "Artefact",
    "COLUMNS",
    "PAPERS",
    "Paper",
    "PaperResultsError",
    "RESULTS_DIR",
    "UNITS",
    "artefacts",
    "get_paper",
    "index_markdown",
    "main",
    "paper_results",
    "read_results_csv",
    "write_index",
]

#: Folder of the registry files, one ``<slug>.csv`` per paper.
RESULTS_DIR = Path(__file__).resolve().parent / "assets" / "paper_results"

#: Columns of a registry file, in order.
COLUMNS: tuple[str, ...] = ("paper", "table", "row", "column", "value", "unit", "paper_file", "line", "note")

#: Allowed ``unit`` values (module docstring).
UNITS: frozenset[str] = frozenset(
    {"%", "pp", "fraction", "x", "tokens", "s/step", "s", "ms", "TFLOPS", "TFLOPs", "steps", "count", "plans per task"}
)

#: A number as the papers print it: optional sign, digits with optional thousands commas,
#: optional decimals (``2,939``, ``70.60``, ``-44``, ``+0.33``).
_VALUE_RE = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})*(?:\.\d+)?$|^[+-]?\d+(?:\.\d+)?$")
_ID_RE = re.compile(r"^(Table|Figure) \d+$")


class PaperResultsError(ValueError):
    """A registry file is malformed; the message starts with ``<file>:<line>:``."""


@dataclass(frozen=True)
class Paper:
    """One of the five papers.

    ``name`` is the short name used in citations (``CCPO eq. 11``, ``Co-EPG Table 5``); ``slug``
    names the registry file and the method folder; ``paper_file`` is the plain-text extraction
    the project works from (``docs/papers.md``).
    """

    slug: str
    name: str
    title: str
    first_author: str
    reference: str
    paper_file: str


PAPERS: dict[str, Paper] = {
    p.name: p
    for p in (
        Paper(
            "ccpo",
            "CCPO",
            "Compress to Focus: Efficient Coordinate Compression for Policy Optimization in Multi-Turn GUI Agents",
            "Yurun Song",
            "arXiv 2601.11631",
            "000_e57e800ca0795f95.txt",
        ),
        Paper(
            "coepg",
            "Co-EPG",
            "Co-EPG: A Framework for Co-Evolution of Planning and Grounding in Autonomous GUI Agents",
            "Yuan Zhao",
            "AAAI 2026, arXiv 2511.10705",
            "001_f0ca38cf3ec0c5b8.txt",
        ),
        Paper(
            "androidlong",
            "AndroidLong",
            "AndroidLong: LLM-based Android Agents Struggle with Long Looping Tasks (supplementary material)",
            "unknown (the supplement names no authors)",
            "no public identifier known",
            "002_f09264aa1c1e4be8.txt",
        ),
        Paper(
            "agentcpm",
            "AgentCPM-GUI",
            "AgentCPM-GUI: Building Mobile-Use Agents with Reinforcement Fine-Tuning",
            "Zhong Zhang",
            "arXiv 2506.01391",
            "003_d6ee8cb488e45d09.txt",
        ),
        Paper(
            "ces",
            "CES",
            "Training High-Level Schedulers with Execution-Feedback Reinforcement Learning for Long-Horizon "
            "GUI Automation",
            "Zehao Deng",
            "arXiv 2511.22235",
            "004_cf203a0f45073600.txt",
        ),
    )
}


def get_paper(name: str) -> Paper:
    """The :class:`Paper` called ``name`` (short name such as ``"Co-EPG"`` or slug such as ``"coepg"``)."""
    for p in PAPERS.values():
        if name in (p.name, p.slug):
            return p
    known = ", ".join(f"{p.name} ({p.slug})" for p in PAPERS.values())
    raise KeyError(f"unknown paper {name!r}; known: {known}")


# ----------------------------------------------------------------------------- registry
def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(RESULTS_DIR.parents[2]))
    except ValueError:
        return str(path)


def read_results_csv(path: Path | str, paper: Paper | None = None) -> list[dict[str, object]]:
    """Read and validate one registry file; rows as dicts with ``line`` an ``int``.

    Checks: the header is exactly :data:`COLUMNS`; every row has 9 fields; ``paper`` and
    ``paper_file`` are the file's paper (``paper`` given, or the paper whose slug is the file
    name); ``table`` is ``Table N`` or ``Figure N``; ``row`` and ``column`` are non-empty;
    ``value`` is a number as printed; ``unit`` is one of :data:`UNITS`; ``line`` is a positive
    integer; ``(table, row, column)`` is unique. The first problem raises
    :class:`PaperResultsError` naming the file and line.
    """
    path = Path(path)
    where = _rel(path)
    if paper is None:
        paper = get_paper(path.stem)
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise PaperResultsError(f"{where}:1: empty file; expected the header {','.join(COLUMNS)}") from None
        if tuple(header) != COLUMNS:
            unknown = [c for c in header if c not in COLUMNS]
            missing = [c for c in COLUMNS if c not in header]
            raise PaperResultsError(
                f"{where}:1: header must be {','.join(COLUMNS)}; unknown column(s) {unknown}, missing {missing}"
                if unknown or missing
                else f"{where}:1: columns in the wrong order; expected {','.join(COLUMNS)}"
            )
        rows: list[dict[str, object]] = []
        seen: dict[tuple[str, str, str], int] = {}
        for fields in reader:
            n = reader.line_num
            if not fields or all(not x.strip() for x in fields):
                raise PaperResultsError(f"{where}:{n}: empty row")
            if len(fields) != len(COLUMNS):
                raise PaperResultsError(
                    f"{where}:{n}: {len(fields)} fields, expected {len(COLUMNS)} ({','.join(COLUMNS)})"
                )
            rec = dict(zip(COLUMNS, fields))
            if rec["paper"] != paper.name:
                raise PaperResultsError(f"{where}:{n}: paper {rec['paper']!r}, this file holds {paper.name!r}")
            if rec["paper_file"] != paper.paper_file:
                raise PaperResultsError(
                    f"{where}:{n}: paper_file {rec['paper_file']!r}, {paper.name} is {paper.paper_file!r}"
                )
            if not _ID_RE.match(rec["table"]):
                raise PaperResultsError(f"{where}:{n}: table {rec['table']!r} must look like 'Table 4' or 'Figure 3'")
            for k in ("row", "column"):
                if not rec[k].strip() or rec[k] != rec[k].strip():
                    raise PaperResultsError(f"{where}:{n}: {k} {rec[k]!r} must be non-empty without outer spaces")
            if not _VALUE_RE.match(rec["value"]):
                raise PaperResultsError(
                    f"{where}:{n}: value {rec['value']!r} is not a number as printed (e.g. 54.9, 2,939, -44, +0.33)"
                )
            if rec["unit"] not in UNITS:
                raise PaperResultsError(f"{where}:{n}: unit {rec['unit']!r} not in {sorted(UNITS)}")
            if not rec["line"].isdigit() or int(rec["line"]) < 1:
                raise PaperResultsError(f"{where}:{n}: line {rec['line']!r} must be a positive integer")
            key = (rec["table"], rec["row"], rec["column"])
            if key in seen:
                raise PaperResultsError(f"{where}:{n}: duplicate {key} (first on line {seen[key]})")
            seen[key] = n
            out: dict[str, object] = dict(rec)
            out["line"] = int(rec["line"])
            rows.append(out)
    return rows


def _number(value: str) -> float:
    return float(value.replace(",", ""))


def paper_results(paper: str | None = None, *, directory: Path | str | None = None) -> pd.DataFrame:
    """The registry as one DataFrame: the :data:`COLUMNS` plus ``number`` (``value`` as a float).

    ``paper``: a short name or slug to load one paper (default: all five, in :data:`PAPERS`
    order). ``directory``: where the ``<slug>.csv`` files are (default :data:`RESULTS_DIR`).
    Raises :class:`PaperResultsError` (file and line) for a malformed file and
    ``FileNotFoundError`` naming a missing one.
    """
    folder = Path(directory) if directory is not None else RESULTS_DIR
    chosen: Sequence[Paper] = [get_paper(paper)] if paper is not None else list(PAPERS.values())
    rows: list[dict[str, object]] = []
    for p in chosen:
        path = folder / f"{p.slug}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{_rel(path)}: registry file of {p.name} not found")
        rows.extend(read_results_csv(path, p))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["line"] = df["line"].astype("int64")
    df["number"] = [_number(str(v)) for v in df["value"]]
    return df


# ----------------------------------------------------------------------------- artefacts
ArtefactKind = Literal["result", "hyperparameters", "prompt", "mapping", "diagram", "qualitative"]
ArtefactStatus = Literal["regenerated", "partial", "not yet", "n/a"]
ARTEFACT_KINDS: tuple[str, ...] = ("result", "hyperparameters", "prompt", "mapping", "diagram", "qualitative")
ARTEFACT_STATUSES: tuple[str, ...] = ("regenerated", "partial", "not yet", "n/a")


@dataclass(frozen=True)
class Artefact:
    """One table or figure of a paper and what in this repository regenerates it.

    ``regenerated_by``: ``notebooks/<nb>.ipynb: <report name>`` (what the notebook writes under
    ``figures/<profile>/<nb>/``), a config or module for non-result kinds, or ``"not yet"``.
    ``status``: ``regenerated`` (same quantity on the paper's data set), ``partial`` (same
    quantity on MiniGUI only, or only some rows), ``not yet``; ``n/a`` for kinds other than
    ``result``. ``in_registry``: its numbers are in :func:`paper_results`.
    """

    paper: str
    id: str
    kind: ArtefactKind
    summary: str
    regenerated_by: str = "not yet"
    status: ArtefactStatus = "not yet"
    in_registry: bool = False
    note: str = ""

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"artefact {self.id}: unknown paper {self.paper!r}")
        if not _ID_RE.match(self.id):
            raise ValueError(f"artefact {self.paper} {self.id!r}: id must look like 'Table 4' or 'Figure 3'")
        if self.kind not in ARTEFACT_KINDS:
            raise ValueError(f"artefact {self.paper} {self.id}: kind {self.kind!r} not in {ARTEFACT_KINDS}")
        if self.status not in ARTEFACT_STATUSES:
            raise ValueError(f"artefact {self.paper} {self.id}: status {self.status!r} not in {ARTEFACT_STATUSES}")
        if (self.kind == "result") == (self.status == "n/a"):
            raise ValueError(f"artefact {self.paper} {self.id}: status 'n/a' is for non-result kinds only")
        if self.status in ("regenerated", "partial") and not self.regenerated_by.startswith("notebooks/"):
            raise ValueError(f"artefact {self.paper} {self.id}: a {self.status} result must name its notebook")


_NB0 = "notebooks/00_data_prep.ipynb"
_NB1 = "notebooks/01_sft.ipynb"
_NB2 = "notebooks/02_ccpo_rl.ipynb"
_NB3 = "notebooks/03_coepg_iterations.ipynb"
_COEPG_TINY = (
    "MiniGUI and the tiny model (pool models trained on the step annotations stand in for the open VLMs); "
    "a few SFT / GRPO steps per model, one training seed (coepg.n_runs) in the tiny profile"
)
_NB5 = "notebooks/05_efficiency_profiling.ipynb"
_NB4 = "notebooks/04_ces_staged_rl.ipynb"
_NB6 = "notebooks/06_attention_visualization.ipynb"
_CES_TINY = (
    "MiniGUI's test splits (ours beside the paper's GUI-Odyssey columns), 01's Low executor and tiny Coordinator / "
    "State Tracker, one training seed, ces.eval.max_test_steps steps per split in the tiny profile"
)
_NB7 = "notebooks/07_agentcpm_androidlong.ipynb"
_TINY7 = "MiniGUI and the tiny model in the tiny profile (Qwen2.5-VL, not the paper's backbone); one training seed"
_RL_TINY = "MiniGUI, the tiny model and rl.max_steps RL steps in the tiny profile; one training seed"
_COST = "ratios compare, absolute times do not (CPU, tiny or mid-size model; one sample's step in 05)"
_MINI = "MiniGUI in the tiny profile; the paper's data set with a paper profile and experiment"


def _a(paper: str, id_: str, kind: ArtefactKind, summary: str, **kw: object) -> Artefact:
    status = kw.pop("status", "not yet" if kind == "result" else "n/a")
    by = kw.pop("by", "not yet" if kind == "result" else "")
    return Artefact(paper, id_, kind, summary, regenerated_by=str(by), status=status, **kw)  # type: ignore[arg-type]


#: Every table and figure of the five papers (the AndroidLong file is the supplement only: its
#: main-paper Tables 1-5 and Figures 1-3 are not in the text and not listed).
ARTEFACTS: tuple[Artefact, ...] = (
    # ------------------------------------------------------------------ CCPO
    _a("CCPO", "Figure 1", "diagram", "truncated visual history vs CCPO's kept key history"),
    _a("CCPO", "Figure 2", "diagram", "CCPO framework: multi-turn rollouts, distance-based advantage, CASC"),
    _a(
        "CCPO",
        "Figure 3",
        "result",
        "AITW accuracy against history length 1AO-5AO, SFT and CCPO-7B (data: Table 16)",
        in_registry=True,
    ),
    _a(
        "CCPO",
        "Figure 4",
        "qualitative",
        "attention maps of SFT and CCPO on one screenshot",
        by=f"{_NB6}: attention_overlay",
    ),
    _a(
        "CCPO",
        "Figure 5",
        "result",
        "action-type distributions of Android Control, GUI-Odyssey and AITW",
        by=f"{_NB0}: action_types",
        status="partial",
        in_registry=True,
        note=_MINI,
    ),
    _a(
        "CCPO",
        "Figure 6",
        "diagram",
        "shape of the coordinate-aware reward against distance (eq. 12-13)",
        by=f"{_NB2}: figure6_reward_vs_distance",
    ),
    _a("CCPO", "Figure 7", "result", "Android Control TM/GR/SR against history length 1AO-4AO (data: Table 9)"),
    _a(
        "CCPO",
        "Figure 8",
        "result",
        "GUI-Odyssey SFT accuracy for A and AO histories of length 2, 4, 8, 12",
        note="no numbers in the text",
    ),
    _a(
        "CCPO",
        "Figure 9",
        "result",
        "prompt length during training, Semi-online RL vs CCPO",
        by=f"{_NB2}: figure9_prompt_tokens",
        status="partial",
        note="no numbers in the text; " + _RL_TINY,
    ),
    _a(
        "CCPO",
        "Figure 10",
        "qualitative",
        "attention over current and three history images, CCPO vs SFT (use case)",
        by=f"{_NB6}: attention_overlay",
    ),
    _a(
        "CCPO",
        "Figure 11",
        "qualitative",
        "attention over current and three history images, CCPO vs SFT (use case)",
        by=f"{_NB6}: attention_overlay",
    ),
    _a(
        "CCPO",
        "Figure 12",
        "qualitative",
        "attention over current and three history images, CCPO vs SFT (use case)",
        by=f"{_NB6}: attention_overlay",
    ),
    _a(
        "CCPO",
        "Figure 13",
        "qualitative",
        "attention over current and three history images, CCPO vs SFT (use case)",
        by=f"{_NB6}: attention_overlay",
    ),
    _a("CCPO", "Figure 14", "qualitative", "full-trajectory example, CCPO vs SFT"),
    _a("CCPO", "Figure 15", "qualitative", "target-centric attention, CCPO vs SFT", by=f"{_NB6}: attention_shares"),
    _a("CCPO", "Figure 16", "qualitative", "failure case: attention over current and history images"),
    _a("CCPO", "Figure 17", "qualitative", "failure case: attention over current and history images"),
    _a(
        "CCPO",
        "Table 1",
        "result",
        "data set statistics: domain, tasks, average steps",
        by=f"{_NB0}: splits, table1_vs_paper",
        status="partial",
        in_registry=True,
        note=_MINI,
    ),
    _a(
        "CCPO",
        "Table 2",
        "result",
        "Android Control-High and GUI-Odyssey TM/GR/SR of baselines, SFT, SO-RL, CCPO",
        by=f"{_NB2}: table2_step_metrics, rl_gains, table2_vs_paper",
        status="partial",
        in_registry=True,
        note="SFT, SO-RL and CCPO rows (zero-shot: notebooks/01_sft.ipynb); AC-High columns only; " + _RL_TINY,
    ),
    _a("CCPO", "Table 3", "result", "Mind2Web Step SR per split and AITW Overall/ClickAvg", in_registry=True),
    _a(
        "CCPO",
        "Table 4",
        "result",
        "training efficiency on Android Control: tokens, compression, s/step, speedup",
        by=f"{_NB2}: table4_efficiency, table4_vs_paper",
        status="partial",
        in_registry=True,
        note="RL steps measured side by side; " + _COST + "; 05 repeats it per sample on the mid model",
    ),
    _a(
        "CCPO",
        "Table 5",
        "result",
        "component ablation on Android Control (SO-RL, +CASC, +CR)",
        by=f"{_NB2}: table5_ablation, table5_paired, table5_vs_paper",
        status="partial",
        in_registry=True,
        note=_RL_TINY,
    ),
    _a(
        "CCPO",
        "Table 6",
        "result",
        "compute load, token latency and step latency, SO-RL vs CCPO",
        by=f"{_NB5}: latency, table6_vs_paper",
        status="partial",
        in_registry=True,
        note=_COST,
    ),
    _a(
        "CCPO",
        "Table 7",
        "hyperparameters",
        "SFT hyper-parameters per data set (AC, GUI-Odyssey, AITW, M2W)",
        by="lib/guirl/methods/ccpo/config.py (CCPO's recipe: LoRA and each data set's column)",
    ),
    _a(
        "CCPO",
        "Table 8",
        "hyperparameters",
        "policy-optimisation hyper-parameters per data set",
        by="lib/guirl/methods/ccpo/config.py and methods/semi_online/config.py (each data set's column)",
    ),
    _a("CCPO", "Table 9", "result", "Android Control TM/GR/SR for 1AO-4AO, SFT and CCPO-7B", in_registry=True),
    _a(
        "CCPO",
        "Table 10",
        "result",
        "MAX vs MIN compression variants on Android Control",
        by=f"{_NB2}: table10_min_max",
        status="partial",
        in_registry=True,
        note="at ccpo.ablation_history only; " + _RL_TINY,
    ),
    _a(
        "CCPO",
        "Table 11",
        "result",
        "AITW accuracy against the number of rollouts (2-16)",
        by=f"{_NB2}: table11_rollouts",
        status="partial",
        in_registry=True,
        note="ccpo.ablation_group_sizes on MiniGUI's test splits, not AITW; " + _RL_TINY,
    ),
    _a(
        "CCPO",
        "Table 12",
        "result",
        "AITW accuracy and efficiency for 1AO-5AO, SO-RL vs CCPO-7B",
        by=f"{_NB5}: table12_vs_paper",
        status="partial",
        in_registry=True,
        note="efficiency columns only, on phone-size screens (no AITW-size screens); " + _COST,
    ),
    _a(
        "CCPO",
        "Table 13",
        "result",
        "optimized inference (CASC at inference) on Mind2Web and AITW",
        by=f"{_NB5}: table13_inference, table13_sr_gain, table13_vs_paper",
        status="partial",
        in_registry=True,
        note="tokens and FLOPs; step SR with and without CASC on MiniGUI with 02's CCPO model",
    ),
    _a(
        "CCPO",
        "Table 14",
        "result",
        "3B accuracy and efficiency on Android Control, SO-RL vs CCPO",
        by=f"{_NB5}: table14_vs_paper",
        status="partial",
        in_registry=True,
        note="efficiency columns only; " + _COST,
    ),
    _a(
        "CCPO",
        "Table 15",
        "result",
        "7B accuracy and efficiency on Android Control for 1AO-4AO",
        by=f"{_NB5}: table15_vs_paper",
        status="partial",
        in_registry=True,
        note="efficiency columns only; " + _COST,
    ),
    _a("CCPO", "Table 16", "result", "AITW per-subset accuracy for 1AO-5AO, SFT vs CCPO-7B", in_registry=True),
    _a("CCPO", "Table 17", "result", "AITW per-subset accuracy and ClickAvg of all models", in_registry=True),
    _a("CCPO", "Table 18", "result", "Mind2Web Ele.Acc/Op.F1/Step SR per split of all models", in_registry=True),
    # ------------------------------------------------------------------ Co-EPG
    _a("Co-EPG", "Figure 1", "diagram", "the Co-EPG loop: iterative training with C-DREM and data enhancement"),
    _a(
        "Co-EPG",
        "Figure 2",
        "result",
        "Mind2Web Avg SR over three iterations, with and without GRPO (data: Table 6)",
        by=f"{_NB3}: figure2",
        status="partial",
        note="Avg SR over MiniGUI's three test splits; " + _COEPG_TINY,
    ),
    _a("Co-EPG", "Figure 3", "qualitative", "one example evolving over iterations M1-M3"),
    _a("Co-EPG", "Figure 4", "result", "Mind2Web Avg SR against the amount of labelled step data", in_registry=True),
    _a(
        "Co-EPG",
        "Figure 5",
        "result",
        "Step SR during GRPO with C-DREM vs a single grounding reward",
        by=f"{_NB3}: figure5",
        status="partial",
        note="no numbers in the text; reward per GRPO step and Avg SR at the checkpoints, iteration 1; " + _COEPG_TINY,
    ),
    _a(
        "Co-EPG",
        "Figure 6",
        "result",
        "data purity and diversity over iterations",
        by=f"{_NB3}: figure6_data_quality",
        status="partial",
        in_registry=True,
        note="diversity = distinct plans per step with a target; " + _COEPG_TINY,
    ),
    _a("Co-EPG", "Figure 7", "result", "per-split Mind2Web Step SR over iterations, 3B and 7B (data: Table 6)"),
    _a("Co-EPG", "Figure 8", "qualitative", "Mind2Web evaluation examples for M1-M3"),
    _a("Co-EPG", "Figure 9", "qualitative", "AndroidControl evaluation examples for M1-M3 (caption not in the text)"),
    _a(
        "Co-EPG",
        "Table 1",
        "result",
        "Multimodal-Mind2Web Ele.Acc/Op.F1/Step SR per split and Avg SR",
        in_registry=True,
    ),
    _a("Co-EPG", "Table 2", "result", "AndroidControl high/low step accuracy and their mean", in_registry=True),
    _a(
        "Co-EPG",
        "Table 3",
        "result",
        "decoupled planner-grounder vs end-to-end model (Avg SR)",
        by=f"{_NB3}: table3_dual_vs_e2e",
        status="partial",
        in_registry=True,
        note=_COEPG_TINY,
    ),
    _a(
        "Co-EPG",
        "Table 4",
        "result",
        "C-DREM ablation (Avg SR)",
        by=f"{_NB3}: table4_cdrem_ablation",
        status="partial",
        in_registry=True,
        note="short GRPO runs from pi_1 (the paper: M3); " + _COEPG_TINY,
    ),
    _a(
        "Co-EPG",
        "Table 5",
        "result",
        "effect of the C-DREM prior weights (1:1:1 to 1:1:3)",
        by=f"{_NB3}: table5_priors",
        status="partial",
        in_registry=True,
        note="Avg SR only, both readings of eq. 5; short GRPO runs from pi_1; " + _COEPG_TINY,
    ),
    _a(
        "Co-EPG",
        "Table 6",
        "result",
        "Mind2Web results per iteration, with and without GRPO",
        by=f"{_NB3}: table6_iterations",
        status="partial",
        in_registry=True,
        note="TM / SR per MiniGUI test split and Avg SR (no Ele.Acc / Op.F1); " + _COEPG_TINY,
    ),
    _a(
        "Co-EPG",
        "Table 7",
        "result",
        "AndroidControl results per iteration, with and without GRPO",
        by=f"{_NB3}: table6_iterations",
        status="partial",
        in_registry=True,
        note="the High column only (MiniGUI in-domain, goal only): table7_vs_paper; " + _COEPG_TINY,
    ),
    _a("Co-EPG", "Table 8", "result", "OmniACT action score", in_registry=True),
    _a("Co-EPG", "Table 9", "prompt", "planner prompt for Multimodal-Mind2Web"),
    _a("Co-EPG", "Table 10", "prompt", "planner general-instruction prompt for AndroidControl"),
    _a("Co-EPG", "Table 11", "prompt", "useful-guidelines prompt for AndroidControl"),
    _a(
        "Co-EPG",
        "Table 12",
        "prompt",
        "high-level and low-level prompt layouts for AndroidControl",
        by="guirl.methods.coepg.prompts.planner_prompt (coepg.user_template)",
    ),
    _a(
        "Co-EPG",
        "Table 13",
        "prompt",
        "extra prompt used during data enhancement",
        by="guirl.methods.coepg.prompts.enhancement_text",
    ),
    # ------------------------------------------------------------------ CES
    _a("CES", "Figure 1", "diagram", "simple vs long-horizon tasks; single agent vs CES"),
    _a(
        "CES",
        "Figure 2",
        "result",
        "temporal-order judgement accuracy against step interval",
        by=f"{_NB4}: figure2_temporal, figure2_chart",
        status="partial",
        note="the repository's models (forced choice by likelihood) and the annotated task state, on MiniGUI; "
        "no numbers in the paper's text",
    ),
    _a("CES", "Figure 3", "diagram", "the Coordinator-Executor-State Tracker loop"),
    _a("CES", "Figure 4", "diagram", "staged execution-feedback RL (stage 1 Coordinator, stage 2 State Tracker)"),
    _a(
        "CES",
        "Figure 5",
        "result",
        "failure-case categories, baseline vs CES",
        by=f"{_NB4}: figure5_failures, figure5_paired, figure5_chart, figure5_vs_paper",
        status="partial",
        in_registry=True,
        note="a written rule from MiniGUI's ground truth (guirl.methods.ces.analysis.classify_failure), not the "
        "paper's reading of cases; " + _CES_TINY,
    ),
    _a(
        "CES",
        "Figure 6",
        "result",
        "training curves of Coordinator and State Tracker",
        by=f"{_NB4}: figure6_training_curves",
        status="partial",
        note="no numbers in the text; tiny-profile GRPO steps (ces.coordinator / ces.state_tracker sizes)",
    ),
    _a(
        "CES",
        "Figure 7",
        "result",
        "model-size scaling of Coordinator and State Tracker",
        note="no numbers in the text",
    ),
    _a("CES", "Figure 8", "qualitative", "long-horizon example, part 1 of 5"),
    _a("CES", "Figure 9", "qualitative", "long-horizon example, part 2 of 5"),
    _a("CES", "Figure 10", "qualitative", "long-horizon example, part 3 of 5"),
    _a("CES", "Figure 11", "qualitative", "long-horizon example, part 4 of 5"),
    _a("CES", "Figure 12", "qualitative", "long-horizon example, part 5 of 5 (caption not in the text)"),
    _a(
        "CES",
        "Table 1",
        "result",
        "Type/GR/SR on AITZ, AMEX and GUI-Odyssey",
        by=f"{_NB4}: table1, table1_paired, table1_vs_paper",
        status="partial",
        in_registry=True,
        note="the Executor alone / + warm-up Coordinator / + CES rows; " + _CES_TINY,
    ),
    _a(
        "CES",
        "Table 2",
        "result",
        "baseline vs CES-P vs CES for three executors on AMEX and GUI-Odyssey",
        by=f"{_NB4}: table2, table2_paired, table2_vs_paper",
        status="partial",
        in_registry=True,
        note="two executors (01's Low executor and one trained for ces.weak_executor_steps); CES-P is the warm-up "
        "Coordinator and State Tracker (a tiny model cannot be prompted into a role); " + _CES_TINY,
    ),
    _a(
        "CES",
        "Table 3",
        "result",
        "component and training-stage ablation",
        by=f"{_NB4}: table3, table3_paired, table3_vs_paper",
        status="partial",
        in_registry=True,
        note=_CES_TINY,
    ),
    _a("CES", "Table 4", "hyperparameters", "staged RL hyper-parameters of Coordinator and State Tracker"),
    # ------------------------------------------------------------------ AgentCPM-GUI
    _a("AgentCPM-GUI", "Figure 1", "diagram", "three-stage training framework"),
    _a("AgentCPM-GUI", "Figure 2", "qualitative", "demo episode on a real phone"),
    _a(
        "AgentCPM-GUI",
        "Table 1",
        "result",
        "CAGUI grounding: Fun2Point, Text2Point, Bbox2Text",
        by=f"{_NB7}: table1_grounding, table1_vs_paper",
        status="partial",
        in_registry=True,
        note="the three tasks on MiniGUI test screens (not CAGUI); Stage I and our SFT / RFT models; " + _TINY7,
    ),
    _a(
        "AgentCPM-GUI",
        "Table 2",
        "result",
        "TM/EM on AC-Low, AC-High, GUI-Odyssey, AITZ and CAGUI",
        by=f"{_NB7}: table2_tm_em, table2_ci, mapping_identity, table2_3_vs_paper",
        status="partial",
        in_registry=True,
        note="MiniGUI's three test splits instead of the five benchmarks, under the agentcpm protocol; 01's models "
        "re-scored through the unified mapping instead of the other families' baselines; " + _TINY7,
    ),
    _a(
        "AgentCPM-GUI",
        "Table 3",
        "result",
        "before vs after reinforcement fine-tuning",
        by=f"{_NB7}: table3_paired, table2_3_vs_paper",
        status="partial",
        in_registry=True,
        note="SFT vs RFT paired, TM and EM per MiniGUI test split (High level); " + _TINY7,
    ),
    _a("AgentCPM-GUI", "Table 4", "hyperparameters", "SFT hyper-parameters"),
    _a("AgentCPM-GUI", "Table 5", "hyperparameters", "RFT hyper-parameters"),
    _a(
        "AgentCPM-GUI",
        "Table 6",
        "mapping",
        "Qwen2.5-VL action mapping to the compact JSON",
        by="guirl.methods.agentcpm.mapping",
    ),
    _a("AgentCPM-GUI", "Table 7", "hyperparameters", "Qwen2.5-VL inference settings"),
    _a("AgentCPM-GUI", "Table 8", "mapping", "UI-TARS action mapping", by="guirl.methods.agentcpm.mapping"),
    _a("AgentCPM-GUI", "Table 9", "mapping", "OS-Atlas action mapping", by="guirl.methods.agentcpm.mapping"),
    _a("AgentCPM-GUI", "Table 10", "mapping", "OS-Genesis action mapping", by="guirl.methods.agentcpm.mapping"),
    _a("AgentCPM-GUI", "Table 11", "mapping", "OdysseyAgent action mapping", by="guirl.methods.agentcpm.mapping"),
    _a("AgentCPM-GUI", "Table 12", "mapping", "Aguvis action mapping", by="guirl.methods.agentcpm.mapping"),
    # ------------------------------------------------------------------ AndroidLong (supplement)
    _a(
        "AndroidLong",
        "Figure 4",
        "result",
        "task categories of the test set",
        by=f"{_NB0}: categories_apps",
        status="partial",
        note=_MINI,
    ),
    _a(
        "AndroidLong",
        "Figure 5",
        "result",
        "applications of the test set",
        by=f"{_NB0}: categories_apps",
        status="partial",
        note=_MINI,
    ),
    _a(
        "AndroidLong",
        "Figure 6",
        "result",
        "histogram of subgoals per task",
        by=f"{_NB0}: lengths",
        status="partial",
        note=_MINI,
    ),
    _a(
        "AndroidLong",
        "Figure 7",
        "result",
        "distribution of Subgoal SR over task-model pairs",
        by=f"{_NB7}: figure7_subgoal_sr",
        status="partial",
        note="our four models on MiniGUI's online tasks of both task sets (long loops, the other categories); "
        "no numbers in the paper's text; " + _TINY7,
    ),
    _a(
        "AndroidLong",
        "Figure 8",
        "result",
        "Task SR per model and task category",
        by=f"{_NB7}: figures8_9_category, by_category",
        status="partial",
        note="MiniGUI's six categories; no numbers in the paper's text; " + _TINY7,
    ),
    _a(
        "AndroidLong",
        "Figure 9",
        "result",
        "Subgoal SR per model and task category",
        by=f"{_NB7}: figures8_9_category, by_category",
        status="partial",
        note="MiniGUI's six categories; no numbers in the paper's text; " + _TINY7,
    ),
    _a(
        "AndroidLong",
        "Figure 10",
        "result",
        "Task SR per model and application",
        by=f"{_NB7}: figures10_11_app, by_app",
        status="partial",
        note="MiniGUI's apps; no numbers in the paper's text; " + _TINY7,
    ),
    _a(
        "AndroidLong",
        "Figure 11",
        "result",
        "Subgoal SR per model and application",
        by=f"{_NB7}: figures10_11_app, by_app",
        status="partial",
        note="MiniGUI's apps; no numbers in the paper's text; " + _TINY7,
    ),
    _a("AndroidLong", "Figure 12", "qualitative", "error case: insufficient exploration"),
    _a("AndroidLong", "Figure 13", "qualitative", "error case: turn limit exceeded"),
    _a("AndroidLong", "Figure 14", "qualitative", "error case: insufficient reflection"),
    _a("AndroidLong", "Figure 15", "qualitative", "error case: inconsistency"),
    _a("AndroidLong", "Figure 16", "qualitative", "trajectory of SFT without memory"),
    _a("AndroidLong", "Figure 17", "qualitative", "trajectory of SFT + GRPO without memory"),
    _a("AndroidLong", "Figure 18", "qualitative", "trajectory of SFT with memory"),
    _a("AndroidLong", "Figure 19", "qualitative", "trajectory of SFT + GRPO with memory"),
    _a(
        "AndroidLong",
        "Table 6",
        "result",
        "Task SR mean and std over three runs of the trained models",
        by=f"{_NB7}: table6_online, table6_paired, table6_vs_paper, table6_other_categories, table6_other_paired",
        status="partial",
        in_registry=True,
        note="the four rows (SFT / + GRPO, without / with memory) on MiniGUI's long-loop tasks (AL-14), sampled runs "
        "of the same tasks (AL-01), paired differences; the same table on MiniGUI's other five categories; no 'w/o "
        "auto-entering app' row (AL-05); " + _TINY7,
    ),
    _a("AndroidLong", "Table 7", "hyperparameters", "RL hyper-parameters"),
    _a(
        "AndroidLong",
        "Table 8",
        "result",
        "Subgoal and Task SR per model: Bluecoins, Calendar, Clock",
        by=f"{_NB7}: by_app, tables8_9_vs_paper",
        status="partial",
        in_registry=True,
        note="per MiniGUI app (Calendar shared with the paper); our four models only; " + _TINY7,
    ),
    _a(
        "AndroidLong",
        "Table 9",
        "result",
        "Subgoal and Task SR per model: Contacts, Map, Pimusic",
        by=f"{_NB7}: by_app, tables8_9_vs_paper",
        status="partial",
        in_registry=True,
        note="per MiniGUI app (Contacts shared with the paper); our four models only; " + _TINY7,
    ),
)


def artefacts(paper: str | None = None) -> pd.DataFrame:
    """:data:`ARTEFACTS` as a DataFrame (one paper when ``paper`` is a short name or slug)."""
    items = ARTEFACTS if paper is None else tuple(a for a in ARTEFACTS if a.paper == get_paper(paper).name)
    return pd.DataFrame([asdict(a) for a in items])


def _check_artefacts() -> None:
    seen: set[tuple[str, str]] = set()
    for a in ARTEFACTS:
        k = (a.paper, a.id)
        if k in seen:
            raise ValueError(f"ARTEFACTS lists {a.paper} {a.id} twice")
        seen.add(k)


_check_artefacts()


def index_markdown() -> str:
    """Markdown listing of :data:`ARTEFACTS` for ``figures/<profile>/INDEX.md``.

    First line after the title: the count of result artefacts regenerated / partial / not yet;
    then one table per paper (id, kind, summary, regenerated by, status, note).
    """
    results = [a for a in ARTEFACTS if a.kind == "result"]
    n = {s: sum(a.status == s for a in results) for s in ("regenerated", "partial", "not yet")}
    lines = [
        "# Tables and figures of the five papers",
        "",
        f"Result tables and figures: {len(results)}; regenerated {n['regenerated']}, partial {n['partial']}, "
        f"not yet {n['not yet']}. Other kinds (hyper-parameters, prompts, mappings, diagrams, qualitative "
        "examples) are listed with status n/a.",
    ]
    for p in PAPERS.values():
        lines += [
            "",
            f"## {p.name}",
            "",
            "| id | kind | summary | regenerated by | status | note |",
            "|---|---|---|---|---|---|",
        ]
        for a in ARTEFACTS:
            if a.paper == p.name:
                cells = (a.id, a.kind, a.summary, a.regenerated_by or "-", a.status, a.note)
                lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_index(profile: str, out: Path | str | None = None) -> Path:
    """Write :func:`index_markdown` to ``out`` (default ``figures/<profile>/INDEX.md``,
    :func:`guirl.paths.figures_dir`); the folder is created. Returns the path."""
    from guirl.paths import figures_dir

    path = Path(out) if out is not None else figures_dir(profile) / "INDEX.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(index_markdown())
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m guirl.papers index [--profile P] [--out PATH]``: write the INDEX.md of the
    papers' tables and figures (``make reproduce`` calls it last) and print its count line."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m guirl.papers", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="write figures/<profile>/INDEX.md")
    index.add_argument("--profile", default="tiny", help="profile whose figures folder gets the file (default tiny)")
    index.add_argument("--out", default=None, help="path of the file (default figures/<profile>/INDEX.md)")
    args = parser.parse_args(argv)
    path = write_index(args.profile, args.out)
    counts = next(line for line in index_markdown().splitlines() if line.startswith("Result tables and figures:"))
    print(f"{path}: {counts.split('. Other kinds')[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
