"""guirl.dag and the runner's DAG walk: declared reads, fingerprints, stamps, what reruns.

The walk is tested on cheap fake notebooks with a stand-in engine (no kernel): the runner's own
code decides, saves configs and writes stamps; only the notebook execution is replaced. One slow
test runs the same chain through papermill and the command line.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, make_dry_run, make_notebook, runner_env
from guirl import dag
from guirl.runner import DagStopped, main, plan_run, run_dag

PARAMS = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\n"
LOAD = "from guirl.config import load_run_config\ncfg = load_run_config(profile, experiment, overrides, config_path)"

# A chain 00 -> 01 -> 02 and a notebook 03 that reads nothing; 02 also reads 00 directly.
CHAIN = {"00_a": [], "01_b": ["00_a"], "02_c": ["01_b", "00_a"], "03_d": []}


@pytest.fixture()
def chain(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "nbs"
    folder.mkdir()
    return {
        stem: make_notebook(folder / f"{stem}.ipynb", PARAMS, [LOAD, f"x = '{stem}'"], reads, markdown=f"# {stem}")
        for stem, reads in CHAIN.items()
    }


class Engine:
    """Stands in for papermill: records what ran; raises for the stems in ``fail``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.fail: dict[str, BaseException] = {}

    def __call__(self, plan, *, kernel_name: str, log_output: bool) -> None:
        if plan.stem in self.fail:
            raise self.fail[plan.stem]
        self.ran.append(plan.stem)
        plan.output.write_text("{}")


def walk(chain: dict[str, Path], engine: Engine, overrides=(), **kw) -> list[tuple[str, str]]:
    plans = [plan_run(p, "tiny", overrides=list(overrides)) for p in chain.values()]
    engine.ran.clear()
    steps = run_dag(plans, engine=engine, quiet=True, log=lambda line: None, **kw)
    return [(s.stem, s.action) for s in steps]


def edit_code(path: Path, old: str, new: str, cell_type: str = "code") -> None:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == cell_type and old in src:
            cell["source"] = src.replace(old, new)
            path.write_text(json.dumps(nb))
            return
    raise AssertionError(f"{old!r} not in a {cell_type} cell of {path}")


# ---------------------------------------------------------------------------------- the walk
def test_second_run_skips_everything(chain: dict[str, Path]) -> None:
    engine = Engine()
    assert walk(chain, engine) == [(s, "ran") for s in CHAIN]
    assert walk(chain, engine) == [(s, "skipped") for s in CHAIN] and engine.ran == []


# Each case: what changes, and which notebooks rerun (the changed one and every reader of it).
@pytest.mark.parametrize(
    "change, rerun",
    [
        (lambda c: edit_code(c["01_b"], "x = '01_b'", "x = '01_b' * 2"), ["01_b", "02_c"]),  # 01's source
        (lambda c: edit_code(c["00_a"], "x = '00_a'", "x = 0"), ["00_a", "01_b", "02_c"]),  # 00 feeds 01, 02
        (lambda c: edit_code(c["03_d"], "x = '03_d'", "x = 3"), ["03_d"]),  # nobody reads 03
        (lambda c: edit_code(c["01_b"], "# 01_b", "# 01_b, retitled", "markdown"), []),  # markdown only
        (lambda c: None, []),  # nothing at all
    ],
)
def test_a_change_reruns_the_notebook_and_its_readers(chain: dict[str, Path], change, rerun: list[str]) -> None:
    engine = Engine()
    walk(chain, engine)
    change(chain)
    steps = walk(chain, engine)
    assert engine.ran == rerun
    assert [s for s, action in steps if action == "ran"] == rerun


def test_config_and_library_changes_rerun_everything(chain: dict[str, Path], monkeypatch) -> None:
    engine = Engine()
    walk(chain, engine)
    walk(chain, engine, overrides=["sft.max_steps=3"])  # another resolved config
    assert engine.ran == list(CHAIN)
    walk(chain, engine, overrides=["sft.max_steps=3"])
    assert engine.ran == []
    monkeypatch.setattr(dag, "library_digest", lambda root=None: "0" * 64)  # the library changed
    walk(chain, engine, overrides=["sft.max_steps=3"])
    assert engine.ran == list(CHAIN)


def test_an_upstream_rerun_makes_readers_stale(chain: dict[str, Path], isolated_outputs) -> None:
    engine = Engine()
    walk(chain, engine)
    # 00 ran again on its own (python -m guirl.runner notebooks/00_a.ipynb): a new stamp.
    time.sleep(0.01)
    walk({"00_a": chain["00_a"]}, engine, force=["00_a"])
    walk(chain, engine)
    assert engine.ran == ["01_b", "02_c"]


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_an_interrupted_run_resumes_at_the_failed_notebook(
    chain: dict[str, Path], error: BaseException, isolated_outputs
) -> None:
    engine = Engine()
    engine.fail = {"01_b": error}
    with pytest.raises(DagStopped) as stop:
        walk(chain, engine)
    assert [(s.stem, s.action) for s in stop.value.steps] == [
        ("00_a", "ran"),
        ("01_b", "failed"),
        ("02_c", "not reached"),
        ("03_d", "not reached"),
    ]
    assert stop.value.plan.stem == "01_b" and stop.value.error is error
    runs = isolated_outputs["GUIRL_RUNS"] / "tiny"
    assert (runs / "00_a.stamp.json").is_file() and not (runs / "01_b.stamp.json").exists()
    engine.fail = {}
    assert walk(chain, engine) == [("00_a", "skipped"), ("01_b", "ran"), ("02_c", "ran"), ("03_d", "ran")]


class FigureEngine(Engine):
    """An engine whose notebooks each write a table under figures/<profile>/<notebook>/."""

    def __call__(self, plan, *, kernel_name: str, log_output: bool) -> None:
        super().__call__(plan, kernel_name=kernel_name, log_output=log_output)
        out = isolated_figures() / plan.stem
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.csv").write_text(plan.stem)


def isolated_figures() -> Path:
    from guirl.paths import figures_dir

    return figures_dir("tiny")


def test_a_notebook_whose_outputs_are_missing_reruns(chain: dict[str, Path]) -> None:
    engine = FigureEngine()
    walk(chain, engine)
    stamp = json.loads((plan_run(chain["01_b"], "tiny").stamp_path).read_text())
    assert stamp["outputs"] == ["01_b/table.csv"]  # what the run wrote under figures/tiny/01_b/
    assert walk(chain, engine) == [(s, "skipped") for s in CHAIN]
    (isolated_figures() / "01_b" / "table.csv").unlink()  # a deleted output
    plans = [plan_run(p, "tiny") for p in chain.values()]
    steps = run_dag(plans, dry_run=True, log=lambda line: None)
    assert [(s.stem, s.action) for s in steps if s.action != "skipped"] == [
        ("01_b", "would run"),
        ("02_c", "would run"),
    ]
    assert "output 01_b/table.csv missing" in steps[1].reasons
    walk(chain, engine)
    assert engine.ran == ["01_b", "02_c"]  # regenerated, and its reader after it
    assert (isolated_figures() / "01_b" / "table.csv").is_file()


def test_force_reruns_the_named_notebooks(chain: dict[str, Path]) -> None:
    engine = Engine()
    walk(chain, engine)
    walk(chain, engine, force=list(CHAIN))
    assert engine.ran == list(CHAIN)
    walk(chain, engine, force=["03_d"])
    assert engine.ran == ["03_d"]


def test_dry_run_reports_without_running(chain: dict[str, Path], isolated_outputs) -> None:
    engine = Engine()
    walk(chain, engine)
    edit_code(chain["00_a"], "x = '00_a'", "x = 1")
    runs = isolated_outputs["GUIRL_RUNS"] / "tiny"
    stamps = {s: (runs / f"{s}.stamp.json").read_bytes() for s in CHAIN}
    plans = [plan_run(p, "tiny") for p in chain.values()]
    lines: list[str] = []
    engine.ran.clear()
    steps = run_dag(plans, dry_run=True, engine=engine, log=lines.append)
    assert [(s.stem, s.action) for s in steps] == [
        ("00_a", "would run"),
        ("01_b", "would run"),
        ("02_c", "would run"),
        ("03_d", "skipped"),
    ]
    assert steps[0].reasons == ("source changed",) and steps[1].reasons == ("input 00_a would rerun",)
    assert engine.ran == [] and {s: (runs / f"{s}.stamp.json").read_bytes() for s in CHAIN} == stamps
    assert lines[0] == "[guirl.runner] 00_a: would run (source changed)"


# ---------------------------------------------------------------------------------- guirl.dag
@pytest.mark.parametrize(
    "metadata, message",
    [
        ({}, "metadata.guirl.reads: missing"),  # not declared
        ({"guirl": {}}, "metadata.guirl.reads: missing"),  # declared without reads
        ({"guirl": {"reads": "00_a"}}, "must be a list"),  # a string, not a list
        ({"guirl": {"reads": [""]}}, "must be a list of notebook stems"),  # an empty name
    ],
)
def test_notebook_reads_errors(metadata: dict, message: str) -> None:
    with pytest.raises(dag.DagError, match=message):
        dag.notebook_reads("notebooks/x.ipynb", {"metadata": metadata, "cells": []})


@pytest.mark.parametrize(
    "reads, message",
    [
        ({"00_a": ["00_b"]}, "unknown notebook '00_b'"),  # not a notebook
        ({"00_a": ["01_b"], "01_b": []}, "'01_b' runs after '00_a'"),  # reads a later notebook
        ({"00_a": ["00_a"]}, "cannot read itself"),  # itself
    ],
)
def test_check_reads_errors(reads: dict, message: str) -> None:
    with pytest.raises(dag.DagError, match=message):
        dag.check_reads(reads)


def test_with_upstream_closes_over_reads_in_order() -> None:
    assert dag.with_upstream(["02_c"], CHAIN) == ["00_a", "01_b", "02_c"]
    assert dag.with_upstream(["03_d"], CHAIN) == ["03_d"]
    assert dag.with_upstream(["01_b", "03_d"], CHAIN) == ["00_a", "01_b", "03_d"]


def test_source_digest_counts_code_cells_only() -> None:
    def nb(code: str, md: str = "m", outputs: list | None = None) -> dict:
        return {
            "cells": [
                {"cell_type": "markdown", "source": md},
                {"cell_type": "code", "source": code.splitlines(keepends=True), "outputs": outputs or []},
            ]
        }

    base = dag.source_digest(nb("a = 1\nb = 2"))
    assert dag.source_digest(nb("a = 1\nb = 2", md="other")) == base  # markdown
    assert dag.source_digest(nb("a = 1\nb = 2", outputs=[{"text": "x"}])) == base  # outputs
    assert dag.source_digest(nb("a = 1\nb = 3")) != base  # code


def test_library_digest_follows_py_files_and_assets(tmp_path: Path) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "m.py").write_text("x = 1\n")
    (tmp_path / "assets" / "t.jinja").write_text("{{ x }}")
    first = dag.library_digest(tmp_path)
    (tmp_path / "notes.txt").write_text("not library code")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.cpython-311.py").write_text("compiled")
    assert dag.library_digest(tmp_path) == first
    (tmp_path / "assets" / "t.jinja").write_text("{{ y }}")
    assert dag.library_digest(tmp_path) != first
    assert len(dag.library_digest()) == 64  # the repository's lib/guirl


@pytest.mark.parametrize(
    "stamp, current, reasons",
    [
        (None, {}, ["no successful run yet"]),  # never ran
        ({"x": 1}, {}, ["stamp unreadable"]),  # a stamp without a fingerprint
        ("same", "same", []),  # up to date
        ("same", {"source": "s2"}, ["source changed"]),
        ("same", {"config": "c2", "library": "l2"}, ["config changed", "library changed"]),
        ("same", {"inputs": {"00_a": "d2"}}, ["input 00_a reran"]),
        ("same", {"inputs": {"00_a": None}}, ["input 00_a has no successful run"]),
        ("same", {"inputs": {}}, ["reads changed"]),  # it no longer reads 00_a
    ],
)
def test_stale_reasons(stamp, current, reasons: list[str]) -> None:
    fp = dag.fingerprint(source="s", config="c", library="l", inputs={"00_a": "d"})
    if stamp == "same":
        stamp = {"fingerprint": fp}
    if current == "same":
        current = fp
    elif current:
        current = {**fp, **current}
    assert dag.stale_reasons(stamp, current or fp) == reasons


def test_stamp_round_trip_and_digest(tmp_path: Path) -> None:
    fp = dag.fingerprint(source="s", config="c", library="l", inputs={})
    path = dag.write_stamp(tmp_path / "r" / "00_a.stamp.json", fp, notebook="00_a", wall_time_s=1.23456)
    assert dag.read_stamp(path)["fingerprint"] == fp and dag.read_stamp(path)["wall_time_s"] == 1.235
    assert dag.stamp_digest(path) is not None and dag.stamp_digest(tmp_path / "none.json") is None
    path.write_text("{not json")
    assert dag.read_stamp(path) is None
    assert not list(path.parent.glob("*.tmp"))  # written atomically, no leftovers


def test_shipped_notebooks_declare_valid_reads() -> None:
    from guirl.runner import list_notebooks

    reads = {p.stem: dag.notebook_reads(p) for p in list_notebooks(REPO / "notebooks")}
    dag.check_reads(reads)
    assert reads.get("01_sft") == ("00_data_prep",)


# ---------------------------------------------------------------------------------- make
@pytest.mark.parametrize(
    "args, expected",
    [
        (["reproduce"], "-m guirl.runner --all --profile tiny"),  # runs the stale notebooks
        (["reproduce", "FORCE=1"], "--all --profile tiny --force"),  # FORCE=1 reruns all
        (["reproduce", "SMOKE=1", "PROFILE=paper-3b"], "--all --profile paper-3b --smoke"),
        (["nb-01_sft"], "notebooks/01_sft.ipynb --dag --profile tiny"),  # upstream first
        (["nb-01_sft", "FORCE=1", "ARGS=--override seed=1"], "--dag --profile tiny --force --override seed=1"),
    ],
)
def test_make_targets_call_the_runner(args: list[str], expected: str) -> None:
    out = make_dry_run(*args)
    assert expected in out, out


# ---------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_cli_all_twice_then_touch(chain: dict[str, Path], monkeypatch, isolated_outputs, capsys) -> None:
    """The real thing on the fake chain: papermill runs, the second --all skips all of them."""
    folder = next(iter(chain.values())).parent
    monkeypatch.setattr("guirl.runner.notebooks_dir", lambda: folder)
    assert main(["--all"]) == 0
    first = capsys.readouterr().out
    assert "4 ran (00_a, 01_b, 02_c, 03_d)" in first
    # The second run in a fresh interpreter, as `make reproduce` starts it: no kernel starts.
    code = (
        "import sys, guirl.runner as r; from pathlib import Path; "
        f"r.notebooks_dir = lambda: Path({str(folder)!r}); sys.exit(r.main(['--all']))"
    )
    start = time.perf_counter()
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=runner_env(), timeout=300)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0 and "0 ran (none), 4 up to date" in proc.stdout, proc.stderr
    assert elapsed < 30, elapsed
    edit_code(chain["01_b"], "x = '01_b'", "x = 'touched'")
    assert main(["--all"]) == 0
    out = capsys.readouterr().out
    assert "2 ran (01_b, 02_c)" in out and "01_b: runs (source changed)" in out
    assert "02_c: runs (input 01_b reran)" in out
    # --dag on 02 with everything current: nothing to do; with --force only 02 reruns.
    assert main([str(chain["02_c"]), "--dag"]) == 0 and "0 ran" in capsys.readouterr().out
    assert main([str(chain["02_c"]), "--dag", "--force"]) == 0 and "1 ran (02_c)" in capsys.readouterr().out


# ---------------------------------------------------------------------------------- what a notebook reads
def _declare(path: Path, sections: list[str]) -> None:
    nb = json.loads(path.read_text())
    nb["metadata"]["guirl"]["config"] = sections
    path.write_text(json.dumps(nb))


@pytest.mark.parametrize(
    "change, rerun",
    [
        ("coepg.iterations=2", []),  # read by no notebook of the chain
        ("rl.learning_rate=2e-5", ["02_c"]),  # read by 02_c only
        ("sft.learning_rate=1e-4", ["01_b", "02_c"]),  # read by 01_b; 02_c reads 01_b
        ("seed=3", ["00_a", "01_b", "02_c", "03_d"]),  # read by every notebook
    ],
)
def test_a_config_change_reruns_only_the_notebooks_that_read_it(chain: dict[str, Path], change, rerun) -> None:
    declared = {"00_a": ["seed", "data"], "01_b": ["seed", "sft"], "02_c": ["seed", "rl"], "03_d": ["seed"]}
    for stem, sections in declared.items():
        _declare(chain[stem], sections)
    engine = Engine()
    walk(chain, engine)
    walk(chain, engine, overrides=[change])
    assert engine.ran == rerun


def test_reading_an_undeclared_section_fails_naming_it(chain: dict[str, Path]) -> None:
    from guirl.config import load_run_config
    from guirl.configbase import UndeclaredSectionError

    _declare(chain["03_d"], ["seed", "sft"])
    plan = plan_run(chain["03_d"], "tiny", overrides=["coepg.iterations=2"])
    seen: dict[str, object] = {}

    def engine(plan, *, kernel_name: str, log_output: bool) -> None:  # what the notebook's cells do
        cfg = load_run_config(config_path=plan.config_path)
        seen["lr"] = cfg.sft.learning_rate
        seen["derived"] = cfg.replace({"seed": 4}).seed  # a derived config keeps the declaration
        cfg.replace({"seed": 4}).coepg  # noqa: B018 - the read under test

    with pytest.raises(DagStopped) as stopped:
        run_dag([plan], engine=engine, quiet=True, log=lambda line: None)
    assert isinstance(stopped.value.error, UndeclaredSectionError)
    assert "notebook 03_d reads config section 'coepg' but does not declare it" in str(stopped.value.error)
    assert seen == {"lr": plan.config.sft.learning_rate, "derived": 4}
    assert not plan.stamp_path.exists()
    _declare(chain["03_d"], ["seed", "sfft"])
    with pytest.raises(Exception, match=r"'sfft' is not a config section; did you mean 'sft'"):
        plan_run(chain["03_d"], "tiny")


def test_shipped_notebooks_declare_the_config_sections_they_read() -> None:
    from guirl.config import load_config
    from guirl.runner import list_notebooks

    sections = set(type(load_config("tiny")).model_fields)
    for nb in list_notebooks(REPO / "notebooks"):
        declared = dag.notebook_config(nb)
        assert declared is not None, f"{nb.name}: no metadata.guirl.config"
        assert set(declared) <= sections, (nb.name, set(declared) - sections)


# ---------------------------------------------------------------------------------- stamps and outputs
class RunsEngine(Engine):
    """An engine whose notebooks each leave a stage under runs/<profile>/<notebook>/ (a result, a
    final model, an intermediate checkpoint and a lock file)."""

    def __call__(self, plan, *, kernel_name: str, log_output: bool) -> None:
        super().__call__(plan, kernel_name=kernel_name, log_output=log_output)
        from guirl.paths import runs_dir

        stage = runs_dir("tiny") / plan.stem / "sft"
        for rel in ("result.json", "final/model.safetensors", "checkpoint-2/model.safetensors"):
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_text(plan.stem)
        (stage.parent / "sft.lock").write_text("{}")


def test_a_deleted_run_output_reruns_its_notebook(chain: dict[str, Path]) -> None:
    import shutil

    from guirl.paths import runs_dir

    engine = RunsEngine()
    walk(chain, engine)
    stamp = json.loads(plan_run(chain["01_b"], "tiny").stamp_path.read_text())
    assert stamp["run_outputs"] == ["01_b/sft/final/model.safetensors", "01_b/sft/result.json"]
    shutil.rmtree(runs_dir("tiny") / "01_b" / "sft" / "checkpoint-2")  # intermediate: nobody reads it
    assert walk(chain, engine) == [(s, "skipped") for s in CHAIN]
    shutil.rmtree(runs_dir("tiny") / "01_b" / "sft")  # the trained stage deleted
    steps = run_dag([plan_run(p, "tiny") for p in chain.values()], dry_run=True, log=lambda line: None)
    assert "output 01_b/sft/final/model.safetensors missing" in steps[1].reasons
    walk(chain, engine)
    assert engine.ran == ["01_b", "02_c"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("fingerprint.inputs", ["00_a"]),
        ("fingerprint.config", 3),
        ("fingerprint.source", None),
        ("fingerprint", "abc"),
        ("outputs", "01_b/table.csv"),
        ("run_outputs", [1, 2]),
    ],
)
def test_a_stamp_with_wrong_field_types_is_named_and_rerun(chain: dict[str, Path], field, value) -> None:
    engine = Engine()
    walk(chain, engine)
    path = plan_run(chain["01_b"], "tiny").stamp_path
    stamp = json.loads(path.read_text())
    head, _, tail = field.partition(".")
    if tail:
        stamp[head][tail] = value
    else:
        stamp[head] = value
    path.write_text(json.dumps(stamp))
    steps = run_dag([plan_run(p, "tiny") for p in chain.values()], dry_run=True, log=lambda line: None)
    assert [(s.stem, s.action) for s in steps] == [
        ("00_a", "skipped"),
        ("01_b", "would run"),
        ("02_c", "would run"),
        ("03_d", "skipped"),
    ]
    assert steps[1].reasons[0].startswith(("stamp malformed (", "stamp unreadable")), steps[1].reasons
    walk(chain, engine)
    assert engine.ran == ["01_b", "02_c"]


def test_a_stage_reading_an_undeclared_section_is_refused_before_it_starts(chain: dict[str, Path]) -> None:
    # the stages a notebook starts read in processes of their own: their sections must be declared too
    from conftest import stage_of
    from guirl.config import load_run_config
    from guirl.configbase import UndeclaredSectionError
    from guirl.train.launch import SFT_ENTRY, stage_fingerprint

    _declare(chain["03_d"], ["seed", "sft", "model", "runtime"])
    plan = plan_run(chain["03_d"], "tiny")
    plan.config.save(
        plan.config_path, header=[f"notebook 03_d reads config sections: {', '.join(plan.config_sections)}"]
    )
    cfg = load_run_config(config_path=plan.config_path)
    folder = chain["03_d"].parent
    stage = stage_of(cfg.replace({"seed": 2}), "sft", data_dir=folder, base_model=folder, output_dir=folder / "o")
    with pytest.raises(UndeclaredSectionError, match=r"notebook 03_d starts stage 'sft' .* section\(s\) 'lora' that"):
        stage_fingerprint(stage)
    grounding = stage_of(cfg, "grounding", data_dir=folder, base_model=folder, output_dir=folder / "g")
    with pytest.raises(UndeclaredSectionError, match=r"'grounding'"):
        stage_fingerprint(grounding)
    assert SFT_ENTRY == "guirl.stages.sft"


# ---------------------------------------------------------------------------------- profiles
@pytest.mark.parametrize(
    "meta, want",
    [
        ({"reads": []}, None),  # every profile
        ({"reads": [], "profiles": ["tiny"]}, ("tiny",)),
        ({"reads": [], "profiles": ["tiny", "paper-3b"]}, ("tiny", "paper-3b")),
    ],
)
def test_notebook_profiles(meta: dict, want) -> None:
    assert dag.notebook_profiles("nb.ipynb", {"metadata": {"guirl": meta}, "cells": []}) == want


@pytest.mark.parametrize("profiles", [[], "tiny", [""], [1]])
def test_notebook_profiles_errors(profiles) -> None:
    with pytest.raises(dag.DagError, match="metadata.guirl.profiles: must be a non-empty list"):
        dag.notebook_profiles("nb.ipynb", {"metadata": {"guirl": {"reads": [], "profiles": profiles}}, "cells": []})


@pytest.mark.parametrize("sources", [[], "minigui", [""], [1]])
def test_notebook_data_sources_errors(sources) -> None:
    with pytest.raises(dag.DagError, match="metadata.guirl.data_sources: must be a non-empty list"):
        dag.notebook_data_sources(
            "nb.ipynb", {"metadata": {"guirl": {"reads": [], "data_sources": sources}}, "cells": []}
        )


def test_a_notebook_for_some_data_sets_stops_in_one_line_alone_and_is_left_out_of_a_dag_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from guirl import runner

    folder = tmp_path / "nbs"
    folder.mkdir()
    a = make_notebook(folder / "00_a.ipynb", PARAMS, [LOAD])
    b = make_notebook(folder / "01_states.ipynb", PARAMS, [LOAD])
    nb = json.loads(b.read_text())
    nb["metadata"]["guirl"]["data_sources"] = ["minigui", "guiodyssey"]
    b.write_text(json.dumps(nb))
    assert dag.notebook_data_sources(b) == ("minigui", "guiodyssey")
    assert plan_run(b, "tiny").config.data.source == "minigui"
    assert plan_run(b, "tiny", experiment="guiodyssey").config.data.source == "guiodyssey"
    with pytest.raises(
        runner.DataSourceError,
        match=r"^.*01_states.ipynb: runs on data.source minigui, guiodyssey only \(metadata.guirl.data_sources\), "
        r"not 'aitz'; pass --experiment guiodyssey$",
    ):
        plan_run(b, "tiny", experiment="aitz")
    monkeypatch.setattr(runner, "list_notebooks", lambda folder=None: [a, b])
    main(["--all", "--profile", "tiny", "--experiment", "aitz", "--dry-run"])
    out = capsys.readouterr().out
    assert "[guirl.runner] 01_states: left out: runs on data.source minigui, guiodyssey only" in out
    assert "01_states.ipynb ->" not in out
    # the notebook alone stops with the one line and starts nothing
    assert main([str(b), "--profile", "tiny", "--experiment", "aitz", "--dry-run"]) == 2
    assert "pass --experiment guiodyssey" in capsys.readouterr().err


def test_a_notebook_for_some_profiles_is_refused_on_others_and_left_out_of_a_dag_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from guirl import runner

    folder = tmp_path / "nbs"
    folder.mkdir()
    a = make_notebook(folder / "00_a.ipynb", PARAMS, [LOAD])
    b = make_notebook(folder / "01_tiny_only.ipynb", PARAMS, [LOAD])
    nb = json.loads(b.read_text())
    nb["metadata"]["guirl"]["profiles"] = ["tiny"]
    b.write_text(json.dumps(nb))
    assert plan_run(b, "tiny").stem == "01_tiny_only"
    with pytest.raises(
        runner.RunnerError, match=r"runs on profile\(s\) tiny only .* not 'paper-3b'; pass --profile tiny"
    ):
        plan_run(b, "paper-3b")
    monkeypatch.setattr(runner, "list_notebooks", lambda folder=None: [a, b])
    code = main(["--all", "--profile", "paper-3b", "--dry-run"])
    out = capsys.readouterr().out
    assert "[guirl.runner] 01_tiny_only: not on profile paper-3b (runs on tiny)" in out
    assert "# " + str(a) in out or "00_a.ipynb" in out
    assert "01_tiny_only.ipynb ->" not in out
    assert code in (0, 2)  # 2 only for the paper profile's missing checkpoint, never for 01_tiny_only
