"""The notebooks as a DAG: what each one reads, and whether its last successful run is current.

A notebook declares the notebooks whose outputs it reads in its metadata::

    {"metadata": {"guirl": {"reads": ["00_data_prep"]}, ...}}

(an empty list for a notebook that reads none). A successful run leaves a **stamp**,
``runs/<profile>/<notebook>.stamp.json``, holding the run's **fingerprint**:

* ``source``: sha256 of the notebook's code cells (markdown, outputs and metadata do not count);
* ``config``: the config it ran with, restricted to the sections it declares it reads
  (``metadata.guirl.config``, e.g. ``["seed", "model", "data", "sft", "eval", "runtime"]``: a
  change of ``coepg.iterations`` leaves 01 up to date), one short hash per section
  (:func:`config_digest`); a notebook that declares none has the hash of the whole config
  (:meth:`guirl.config.Config.hash`). The runner makes the notebook's config refuse the other
  sections (:func:`guirl.config.load_run_config`), so a declaration that misses one fails loudly;
* ``library``: sha256 of the library, ``lib/guirl/**/*.py`` and ``lib/guirl/assets/**``;
* ``inputs``: for every notebook it reads, the sha256 of that notebook's stamp file (so any
  new run of an upstream notebook, which writes a new stamp, makes its readers stale).

The stamp also lists the run's **outputs**: the files it wrote under
``figures/<profile>/<notebook>/`` (paths relative to ``figures/<profile>``), and its
**run outputs**: the files it left under ``runs/<profile>/<notebook>/`` (stage results and final
models; not the intermediate ``checkpoint-*`` folders), which later notebooks read. A stamp whose
fields have the wrong types is named and its notebook rerun (:func:`stamp_problems`).

A notebook is up to date when its stamp's fingerprint equals the current one and every output and
run output it lists is still there; otherwise :func:`stale_reasons` and :func:`missing_outputs` say what changed. ``make reproduce`` (``python -m guirl.runner --all``)
runs only stale notebooks, in number order; a run that fails or is interrupted leaves no stamp,
so the next run resumes there. The runner (:mod:`guirl.runner`) does the running; this module
only reads notebooks and stamps and decides.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from guirl import contenthash
from guirl.paths import repo_root

#: Injected by the runner into every notebook's ``parameters`` cell.
RESERVED_PARAMETERS = ("profile", "experiment", "overrides", "config_path")

__all__ = [
    "DagError",
    "META_KEY",
    "STAMP_SUFFIX",
    "load_notebook",
    "notebook_reads",
    "notebook_config",
    "config_digest",
    "notebook_profiles",
    "notebook_data_sources",
    "source_digest",
    "library_digest",
    "check_reads",
    "with_upstream",
    "stamp_digest",
    "read_stamp",
    "write_stamp",
    "fingerprint",
    "stale_reasons",
    "missing_outputs",
    "run_outputs",
    "stamp_problems",
    "written_since",
]

META_KEY = "guirl"
STAMP_SUFFIX = ".stamp.json"


class DagError(ValueError):
    """A notebook whose ``reads`` metadata is missing or names an unknown or later notebook."""


def load_notebook(path: str | Path) -> dict[str, Any]:
    """The notebook's JSON (nbformat 4) as a dict."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DagError(f"{path}: cannot read the notebook ({err})") from None


def notebook_reads(path: str | Path, nb: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The stems of the notebooks ``path`` reads (``metadata.guirl.reads``)."""
    nb = nb if nb is not None else load_notebook(path)
    meta = nb.get("metadata", {}).get(META_KEY)
    fix = (
        'add {"guirl": {"reads": [...]}} to the notebook metadata: the stems of the notebooks whose '
        'outputs it reads ([] for none), e.g. {"guirl": {"reads": ["00_data_prep"]}}'
    )
    if not isinstance(meta, Mapping) or "reads" not in meta:
        raise DagError(f"{path}: metadata.{META_KEY}.reads: missing; {fix}")
    reads = meta["reads"]
    if not isinstance(reads, list) or not all(isinstance(r, str) and r for r in reads):
        raise DagError(f"{path}: metadata.{META_KEY}.reads: must be a list of notebook stems (got {reads!r}); {fix}")
    return tuple(reads)


def notebook_config(path: str | Path, nb: Mapping[str, Any] | None = None) -> tuple[str, ...] | None:
    """The config sections (top-level keys) ``path`` declares it reads (``metadata.guirl.config``);
    ``None`` when it declares none (then every section counts)."""
    nb = nb if nb is not None else load_notebook(path)
    meta = nb.get("metadata", {}).get(META_KEY)
    if not isinstance(meta, Mapping) or "config" not in meta:
        return None
    sections = meta["config"]
    if not isinstance(sections, list) or not all(isinstance(s, str) and s for s in sections):
        raise DagError(
            f"{path}: metadata.{META_KEY}.config: must be a list of config sections (got {sections!r}); "
            'e.g. {"guirl": {"config": ["seed", "data"]}}'
        )
    return tuple(sections)


def config_digest(config: Mapping[str, Any], sections: Sequence[str]) -> dict[str, str]:
    """``{section: short sha256 of its canonical JSON}`` for ``profile`` and each of ``sections``
    of the resolved config (``Config.to_dict()``); a section the config does not have is ``"-"``."""
    out = {}
    for name in sorted({"profile", *sections}):
        blob = json.dumps(config.get(name), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        out[name] = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12] if name in config else "-"
    return out


def _name_list(
    path: str | Path, nb: Mapping[str, Any] | None, key: str, what: str, every: str
) -> tuple[str, ...] | None:
    """``metadata.guirl.<key>`` of a notebook as a tuple of non-empty names; ``None`` when the key is
    left out; a :class:`DagError` naming the file and the key for anything else."""
    nb = nb if nb is not None else load_notebook(path)
    meta = nb.get("metadata", {}).get(META_KEY) or {}
    if key not in meta:
        return None
    names = meta[key]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise DagError(
            f"{path}: metadata.{META_KEY}.{key}: must be a non-empty list of {what} (got {names!r}); "
            f"leave it out for a notebook that runs on every {every}"
        )
    return tuple(names)


def notebook_profiles(path: str | Path, nb: Mapping[str, Any] | None = None) -> tuple[str, ...] | None:
    """The profiles ``path`` runs on (``metadata.guirl.profiles``, e.g. ``["tiny"]`` for notebook 09,
    which pretrains the tiny model); ``None`` (the key left out): every profile."""
    return _name_list(path, nb, "profiles", "profile names", "profile")


def notebook_data_sources(path: str | Path, nb: Mapping[str, Any] | None = None) -> tuple[str, ...] | None:
    """The ``data.source`` values ``path`` can run on (``metadata.guirl.data_sources``, e.g.
    ``["minigui", "guiodyssey"]`` for notebook 04, whose stages need the data set's task-state
    annotation); ``None`` (the key left out): every data source."""
    return _name_list(path, nb, "data_sources", "data.source names", "data set")


def source_digest(nb: Mapping[str, Any]) -> str:
    """sha256 (hex) of the code cells' sources, in order (markdown, outputs, metadata ignored)."""
    h = hashlib.sha256()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        h.update(("".join(src) if isinstance(src, list) else str(src)).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def library_digest(root: str | Path | None = None) -> str:
    """sha256 (hex) of the library source: every ``*.py`` under ``root`` (default
    ``lib/guirl``) and its ``assets/``, by relative path and content
    (:func:`guirl.contenthash.library_digest`)."""
    return contenthash.library_digest(Path(root) if root is not None else repo_root() / "lib" / "guirl")


def check_reads(reads: Mapping[str, Sequence[str]]) -> None:
    """Check the declared reads of notebooks given in run order (``{stem: reads}``): every read
    names a notebook that comes earlier. Raises :class:`DagError` naming the notebook."""
    order = list(reads)
    for i, (stem, wanted) in enumerate(reads.items()):
        for up in wanted:
            if up == stem:
                raise DagError(f"notebooks/{stem}.ipynb: metadata.{META_KEY}.reads: a notebook cannot read itself")
            if up not in order:
                raise DagError(
                    f"notebooks/{stem}.ipynb: metadata.{META_KEY}.reads: unknown notebook {up!r}; "
                    f"known: {', '.join(order)}"
                )
            if order.index(up) > i:
                raise DagError(
                    f"notebooks/{stem}.ipynb: metadata.{META_KEY}.reads: {up!r} runs after {stem!r}; a notebook "
                    "reads only notebooks with a lower number (renumber them)"
                )


def with_upstream(targets: Iterable[str], reads: Mapping[str, Sequence[str]]) -> list[str]:
    """``targets`` and every notebook they read, directly or not, in the order of ``reads``."""
    wanted: set[str] = set()
    stack = list(targets)
    while stack:
        stem = stack.pop()
        if stem in wanted:
            continue
        if stem not in reads:
            raise DagError(f"unknown notebook {stem!r}; known: {', '.join(reads)}")
        wanted.add(stem)
        stack.extend(reads[stem])
    return [s for s in reads if s in wanted]


def stamp_digest(path: str | Path) -> str | None:
    """sha256 (hex) of a stamp file's bytes, ``None`` when there is none."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def read_stamp(path: str | Path) -> dict[str, Any] | None:
    """The stamp at ``path``; ``None`` when missing or unreadable (then the notebook is stale)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def fingerprint(
    *, source: str, config: str | Mapping[str, str], library: str, inputs: Mapping[str, str | None]
) -> dict[str, Any]:
    """The fingerprint of a run (see the module docstring); ``inputs`` maps each notebook read
    to its stamp digest (``None``: it has no successful run)."""
    return {"source": source, "config": config, "library": library, "inputs": dict(sorted(inputs.items()))}


def stale_reasons(stamp: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """Why a notebook must run: ``[]`` when its stamp matches ``current`` (up to date), else one
    short reason per part that differs, e.g. ``["source changed", "input 00_data_prep reran"]``."""
    if stamp is None:
        return ["no successful run yet"]
    old = stamp.get("fingerprint")
    if not isinstance(old, Mapping):
        return ["stamp unreadable"]
    problems = stamp_problems(stamp)
    if problems:
        return [f"stamp malformed ({problems[0]}); a new run writes a good one"]
    reasons = []
    for part in ("source", "config", "library"):
        if old.get(part) == current[part]:
            continue
        was, now = old.get(part), current[part]
        if isinstance(was, Mapping) and isinstance(now, Mapping) and set(was) == set(now):
            reasons.append(f"{part} changed ({', '.join(k for k in now if was.get(k) != now[k])})")
        else:
            reasons.append(f"{part} changed")
    old_inputs = old.get("inputs") or {}
    for up, digest in current["inputs"].items():
        if digest is None:
            reasons.append(f"input {up} has no successful run")
        elif old_inputs.get(up) != digest:
            reasons.append(f"input {up} reran")
    if set(old_inputs) - set(current["inputs"]):
        reasons.append("reads changed")
    return reasons


def _problem(value: Any, want: str) -> str | None:
    checks = {
        "str": lambda v: isinstance(v, str),
        "str or mapping of str": lambda v: (
            isinstance(v, str) or (isinstance(v, Mapping) and all(isinstance(x, str) for x in v.values()))
        ),
        "mapping of str or null": lambda v: (
            isinstance(v, Mapping)
            and all(isinstance(k, str) and (x is None or isinstance(x, str)) for k, x in v.items())
        ),
        "list of str": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    }
    return None if checks[want](value) else f"expected {want}, got {type(value).__name__}"


def stamp_problems(stamp: Mapping[str, Any]) -> list[str]:
    """``["fingerprint.inputs: expected mapping of str or null, got list", ...]``: the fields of a
    stamp whose type is wrong (a hand-edited or foreign file); ``[]`` for a well-formed one. A
    malformed stamp makes its notebook stale (:func:`stale_reasons`), never a crash of the walk."""
    out = []
    fp = stamp.get("fingerprint")
    if not isinstance(fp, Mapping):
        return [f"fingerprint: expected a mapping, got {type(fp).__name__}"]
    wanted = {"source": "str", "config": "str or mapping of str", "library": "str", "inputs": "mapping of str or null"}
    for key, want in wanted.items():
        bad = _problem(fp.get(key), want)
        if bad:
            out.append(f"fingerprint.{key}: {bad}")
    for key in ("outputs", "run_outputs"):
        if key in stamp and _problem(stamp[key], "list of str"):
            out.append(f"{key}: {_problem(stamp[key], 'list of str')}")
    return out


def missing_outputs(stamp: Mapping[str, Any] | None, root: str | Path, key: str = "outputs") -> list[str]:
    """``["output <path> missing", ...]`` for the outputs a stamp lists under ``key`` (relative to
    ``root``: ``outputs`` under ``figures/<profile>``, ``run_outputs`` under ``runs/<profile>``)
    that are gone; ``[]`` when all are there (or there is no stamp, or its list is malformed:
    :func:`stale_reasons` says so)."""
    listed = (stamp or {}).get(key) or []
    if _problem(listed, "list of str"):
        return []
    return [f"output {rel} missing" for rel in listed if not (Path(root) / rel).is_file()]


def run_outputs(folder: str | Path, root: str | Path) -> list[str]:
    """The files a notebook's run leaves under its ``runs/<profile>/<notebook>/`` folder (its
    stages' results, final models, records), as sorted paths relative to ``root``
    (``runs/<profile>``): every file but lock files and the intermediate ``checkpoint-*`` folders.
    A later walk reruns the notebook when one of them is gone (:func:`missing_outputs`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        p.relative_to(root).as_posix()
        for p in folder.rglob("*")
        if p.is_file()
        and p.suffix != ".lock"
        and not any(part.startswith("checkpoint-") for part in p.relative_to(folder).parts[:-1])
    )


def written_since(folder: str | Path, since: float, root: str | Path) -> list[str]:
    """Files under ``folder`` modified at or after ``since`` (``time.time()``), as sorted paths
    relative to ``root``: what a run that started at ``since`` wrote there."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file() and p.stat().st_mtime >= since
    )


def write_stamp(
    path: str | Path,
    fp: Mapping[str, Any],
    *,
    notebook: str,
    wall_time_s: float,
    outputs: Sequence[str] = (),
    run_outputs: Sequence[str] = (),
) -> Path:
    """Write the stamp of a successful run atomically (a crash leaves the old file or none);
    ``outputs``: the files it wrote under ``figures/<profile>`` and ``run_outputs`` those it left
    under ``runs/<profile>`` (:func:`missing_outputs`). Inside a SLURM job (``SLURM_JOB_ID`` set)
    the stamp also records ``slurm_job_id``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "notebook": notebook,
        "fingerprint": dict(fp),
        "finished_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "wall_time_s": round(wall_time_s, 3),
        "outputs": list(outputs),
        "run_outputs": list(run_outputs),
    }
    if os.environ.get("SLURM_JOB_ID"):
        record["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
