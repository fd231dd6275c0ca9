"""guirl.timing (phases by category, per process files, one notebook's breakdown), the runner's
``<notebook>.timing.json`` and ``python -m guirl.breakdown`` (``make profile``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_notebook
from guirl import breakdown, timing
from guirl.runner import plan_run, run_dag, timing_path

PARAMS = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\n"


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A hand-moved phase clock; ``clock[0]`` is the time in seconds. Timing state starts empty."""
    now = [0.0]
    monkeypatch.setattr(timing, "_clock", lambda: now[0])
    monkeypatch.delenv(timing.DIR_ENV, raising=False)
    timing.reset()
    yield now
    timing.reset()


def seconds(snap: dict) -> dict[tuple[str, str], float]:
    return {(it["category"], it["label"]): it["seconds"] for it in snap["items"]}


def test_a_nested_phase_is_charged_to_itself_only(clock: list[float]) -> None:
    with timing.phase("training", "sft"):
        clock[0] += 2.0
        with timing.phase("images", "batch"):
            clock[0] += 0.5
        clock[0] += 1.0
        with timing.phase("images", "batch"):
            clock[0] += 0.25
    clock[0] += 10.0  # outside any phase: not recorded
    snap = timing.snapshot()
    assert seconds(snap) == {("training", "sft"): 3.0, ("images", "batch"): 0.75}
    assert snap["accounted_s"] == 3.75
    assert {(it["category"], it["count"]) for it in snap["items"]} == {("training", 1), ("images", 2)}


def test_a_failing_block_is_still_charged(clock: list[float]) -> None:
    with pytest.raises(RuntimeError), timing.phase("generation", "eval"):
        clock[0] += 1.5
        raise RuntimeError("boom")
    assert seconds(timing.snapshot()) == {("generation", "eval"): 1.5}


def test_timed_decorator_and_unknown_category(clock: list[float]) -> None:
    @timing.timed("profiling", "sweep")
    def work() -> int:
        clock[0] += 4.0
        return 7

    assert work() == 7 and seconds(timing.snapshot()) == {("profiling", "sweep"): 4.0}
    with pytest.raises(ValueError, match="unknown category 'trainig'"), timing.phase("trainig"):
        pass


def test_launched_charges_the_time_since_launch_to_startup(clock: list[float], monkeypatch) -> None:
    import time

    monkeypatch.setenv(timing.LAUNCHED_ENV, repr(time.time() - 3.0))
    got = timing.launched()
    assert 3.0 <= got < 30.0 and seconds(timing.snapshot())[("startup", "launch")] == pytest.approx(got, abs=1e-3)
    monkeypatch.delenv(timing.LAUNCHED_ENV)
    assert timing.launched() == 0.0


def test_flush_writes_one_file_per_process_and_read_folder_skips_junk(
    clock: list[float], tmp_path: Path, monkeypatch
) -> None:
    assert timing.flush() is None  # no folder named: nothing written
    monkeypatch.setenv(timing.DIR_ENV, str(tmp_path / "t"))
    with timing.phase("io", "load model"):
        clock[0] += 1.0
    (tmp_path / "t" / "broken-1.json").write_text("{not json")
    files = timing.read_folder(tmp_path / "t")
    assert len(files) == 1 and seconds(files[0]) == {("io", "load model"): 1.0}


def test_breakdown_sums_processes_leaves_out_waits_and_counts_the_rest_as_other() -> None:
    kernel = {
        "label": "kernel",
        "pid": 1,
        "wall_s": 50.0,
        "accounted_s": 40.0,  # 30 s waiting for stages + 10 s generating
        "items": [
            {"category": "wait", "label": "sft", "seconds": 30.0, "count": 1},
            {"category": "generation", "label": "eval", "seconds": 10.0, "count": 3},
        ],
    }
    stages = [
        {
            "label": f"stage-{name}",
            "pid": pid,
            "wall_s": 30.0,
            "accounted_s": 30.0,
            "items": [
                {"category": "startup", "label": "launch", "seconds": 5.0, "count": 1},
                {"category": "training", "label": "sft sft", "seconds": 25.0, "count": 1},
            ],
        }
        for name, pid in (("a", 2), ("b", 3))  # two stages side by side during the 30 s wait
    ]
    b = timing.breakdown([kernel, *stages], wall_s=60.0)
    assert b["categories"] == {"startup": 10.0, "training": 50.0, "generation": 10.0, "other": 20.0}
    assert b["sum_s"] == 90.0 and b["wall_s"] == 60.0
    assert [(it["category"], it["seconds"]) for it in b["items"]] == [
        ("training", 50.0),
        ("generation", 10.0),
        ("startup", 10.0),
    ]
    assert [p["label"] for p in b["processes"]] == ["kernel", "stage-a", "stage-b"]


def test_the_runner_writes_the_breakdown_of_the_kernel_and_its_subprocesses(tmp_path: Path, isolated_outputs) -> None:
    nb = make_notebook(tmp_path / "01_probe.ipynb", PARAMS, ["x = 1"])
    code = "import time\nfrom guirl import timing\nwith timing.phase('training', 'probe'):\n    time.sleep(0.3)\n"

    def engine(plan, *, kernel_name: str, log_output: bool) -> None:
        # stands in for the kernel: a process that inherits the runner's environment
        subprocess.run([sys.executable, "-c", code], check=True)
        plan.output.write_text("{}")

    plan = plan_run(nb, "tiny")
    run_dag([plan], engine=engine, quiet=True, log=lambda line: None)
    report = json.loads(timing_path(plan).read_text())
    assert report["notebook"] == "01_probe" and report["wall_s"] >= 0.3
    assert report["categories"]["training"] >= 0.3 and report["processes"][0]["label"] == "kernel"
    assert not plan.output.with_suffix(".timing.d").exists()  # the process files were summed and removed
    assert timing.DIR_ENV not in __import__("os").environ  # the runner's own environment is restored

    def failing(plan, *, kernel_name: str, log_output: bool) -> None:
        subprocess.run([sys.executable, "-c", code], check=True)
        raise RuntimeError("cell failed")

    timing_path(plan).unlink()
    with pytest.raises(Exception, match="cell failed"):
        run_dag([plan], engine=failing, force=[plan.stem], quiet=True, log=lambda line: None)
    assert json.loads(timing_path(plan).read_text())["categories"]["training"] >= 0.3  # written after a failure too


def test_breakdown_report_lists_notebooks_and_top_items(tmp_path: Path, capsys, monkeypatch) -> None:
    runs = tmp_path / "runs"
    (runs / "tiny").mkdir(parents=True)
    for nb, train, other in (("00_a", 1.0, 4.0), ("01_b", 30.0, 5.0)):
        (runs / "tiny" / f"{nb}.timing.json").write_text(
            json.dumps(
                {
                    "notebook": nb,
                    "wall_s": train + other,
                    "categories": {"training": train, "other": other},
                    "items": [{"category": "training", "label": "sft sft", "seconds": train, "count": 1}],
                }
            )
        )
    monkeypatch.setenv("GUIRL_RUNS", str(runs))
    assert breakdown.main(["--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "all" in out and "40" in out  # the whole run's wall time
    top = out.split("top 2 items")[1].splitlines()[3:]
    assert top[0].split()[:4] == ["01_b", "training", "sft", "sft"] and top[1].split()[:2] == ["01_b", "other"]
    assert len(top) == 2
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path / "empty"))
    assert breakdown.main([]) == 1 and "make reproduce" in capsys.readouterr().err
