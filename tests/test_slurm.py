"""guirl.slurm and the runner's --slurm: job resources, scripts, what is submitted and in which
order, the records; then the smoke chain 00 -> 01 through a real single-node SLURM cluster
(Debian's slurm-wlm and munge, started per module in a temporary folder: tests/slurmcluster.py),
with a failed job's effect on its reader.

The fast tests stand a recording script in for ``sbatch`` / ``squeue`` on ``PATH``. The cluster
tests need the packages (``.ci/run`` installs them on CI) and root (slurmd launches the jobs);
elsewhere they skip and say why. They are ``slow``: the smoke chain takes minutes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, make_dry_run, make_notebook, runner_env
from guirl import dag
from guirl.config import ConfigError, load_config, parse_scalar
from guirl.runner import _parser, main, plan_run, run_dag, stale_notebooks
from guirl.slurm import (
    SlurmConfig,
    job_command,
    load_slurm_config,
    parse_job_id,
    plan_jobs,
    read_records,
    sbatch_command,
)

PARAMS = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\nlabel = 'default'\n"
LOAD = "from guirl.config import load_run_config\ncfg = load_run_config(profile, experiment, overrides, config_path)"
# 00 -> 01 -> 02 (02 also reads 00) and 03 reading nothing, as in tests/test_dag.py.
CHAIN = {"00_a": [], "01_b": ["00_a"], "02_c": ["01_b", "00_a"], "03_d": []}
LOCAL = REPO / "configs" / "slurm" / "local.yaml"
SHIPPED_NOTEBOOKS = [p.stem for p in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


@pytest.fixture()
def chain(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "nbs"
    folder.mkdir()
    return {
        stem: make_notebook(folder / f"{stem}.ipynb", PARAMS, [LOAD, f"x = '{stem}'"], reads)
        for stem, reads in CHAIN.items()
    }


def _engine(plan, *, kernel_name: str, log_output: bool) -> None:
    plan.output.write_text("{}")  # stands in for papermill


def _plans(chain: dict[str, Path], overrides=()) -> list:
    return [plan_run(p, "tiny", overrides=list(overrides)) for p in chain.values()]


# ---------------------------------------------------------------------------------- config
def test_shipped_configs_load_and_name_real_notebooks() -> None:
    gpu = load_slurm_config("gpu", SHIPPED_NOTEBOOKS)
    assert gpu.gpus == 8 and gpu.for_notebook("00_data_prep").gpus == 0
    assert gpu.for_notebook("01_sft").gpus == 8 and gpu.for_notebook("01_sft").time == "2-00:00:00"
    local = load_slurm_config("local", SHIPPED_NOTEBOOKS)
    assert local.gpus == 0 and local.cpus_per_task == 2


@pytest.mark.parametrize(
    "yaml_text, key, message",
    [
        ("gpus: 1\ncpus_per_task: 2\nmem_gb: 4\ntime: '1:00:00'\ngpu: 2\n", "gpu", "did you mean 'gpus'"),
        ("gpus: 1\ncpus_per_task: 2\nmem_gb: 4\ntime: 'two hours'\n", "time", "not a SLURM time"),
        ("gpus: -1\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\n", "gpus", "below the minimum 0"),
        ("cpus_per_task: 2\nmem_gb: 4\ntime: '60'\n", "gpus", "missing required key; add `gpus: VALUE` to"),
        ("gpus: 0\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\nsbatch_args: ['exclusive']\n", "sbatch_args", "one sbatch"),
        ("gpus: 0\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\nsbatch_args: ['--output=x']\n", "sbatch_args", "set by"),
        (
            "gpus: 0\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\nnotebooks: {01_sfx: {gpus: 1}}\n",
            "notebooks.01_sfx",
            "01_sft",
        ),
        (
            "gpus: 0\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\nnotebooks: {01_sft: {time: soon}}\n",
            "notebooks",
            "SLURM time",
        ),
        ("- a list\n", "--slurm-config", "top level is a list"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key(tmp_path: Path, yaml_text: str, key: str, message: str) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        load_slurm_config(path, SHIPPED_NOTEBOOKS)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}") and message in text, text


def test_missing_config_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"configs/slurm/nope.yaml: --slurm-config: file not found; known SLURM"):
        load_slurm_config("nope")


@pytest.mark.parametrize(
    "resources, expected, absent",
    [
        ({"gpus": 0, "mem_gb": None}, ["--cpus-per-task=4", "--time=01:00:00", "--nodes=1"], ["--gres", "--mem"]),
        ({"gpus": 8, "gpu_type": "h100"}, ["--gres=gpu:h100:8", "--mem=16G"], ["--partition"]),
        ({"gpus": 2, "partition": "gpu", "account": "lab"}, ["--gres=gpu:2", "--partition=gpu", "--account=lab"], []),
        ({"gpus": 0, "sbatch_args": ["--exclusive"], "qos": "high"}, ["--exclusive", "--qos=high"], ["--gres"]),
    ],
)
def test_resources_become_sbatch_options(resources: dict, expected: list[str], absent: list[str]) -> None:
    base = {"cpus_per_task": 4, "mem_gb": 16, "time": "01:00:00"}
    opts = SlurmConfig(**{**base, **resources}).sbatch_options()
    assert all(e in opts for e in expected), opts
    assert not any(o.startswith(a) for o in opts for a in absent), opts


# ---------------------------------------------------------------------------------- jobs
@pytest.mark.parametrize("label", ["plain", "1e-4", "a: b", 3, [1, 2], None, 'it\'s "quoted"'])
def test_job_command_reproduces_the_plan(chain: dict[str, Path], label) -> None:
    plan = plan_run(chain["01_b"], "tiny", overrides=["seed=3"], overlays=["smoke"], parameters={"label": label})
    cmd = job_command(plan, python="python")
    assert cmd[:3] == ["python", "-m", "guirl.runner"] and "--log-output" in cmd
    args = _parser().parse_args(cmd[3:])
    again = plan_run(
        args.notebook,
        args.profile,
        experiment=args.experiment,
        overrides=args.override,
        overlays=args.overlay,
        parameters={k: parse_scalar(v) for k, v in args.parameter},
        output_path=args.output,
    )
    assert again.config.hash() == plan.config.hash() and again.parameters == plan.parameters
    assert again.output == plan.output and again.stamp_path == plan.stamp_path


def test_plan_jobs_submits_the_stale_notebooks_after_their_upstream(chain: dict[str, Path]) -> None:
    cfg = load_slurm_config(LOCAL)
    jobs, skipped = plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain)))
    assert [(j.stem, j.after) for j in jobs] == [
        ("00_a", ()),
        ("01_b", ("00_a",)),
        ("02_c", ("01_b", "00_a")),
        ("03_d", ()),
    ]
    assert skipped == []
    run_dag(_plans(chain), engine=_engine, quiet=True, log=lambda line: None)  # every notebook has a stamp now
    assert plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain))) == (
        [],
        list(CHAIN),
    )  # a finished notebook is not submitted
    src = chain["01_b"].read_text().replace("x = '01_b'", "x = 'edited'")
    chain["01_b"].write_text(src)
    jobs, skipped = plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain)))
    assert [(j.stem, j.after) for j in jobs] == [("01_b", ()), ("02_c", ("01_b",))]  # 00_a is up to date
    assert jobs[0].reasons == ("source changed",) and jobs[1].reasons == ("input 01_b would rerun",)
    assert skipped == ["00_a", "03_d"]
    # 01_b still queued from an earlier submission: not submitted again, 02_c waits for it
    jobs, skipped = plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain)), queued={"01_b": "77"})
    assert [(j.stem, j.after) for j in jobs] == [("02_c", ("01_b",))] and "01_b" in skipped
    jobs, _ = plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain), force=["03_d"]))
    assert [j.stem for j in jobs] == ["01_b", "02_c", "03_d"] and jobs[-1].reasons == ("forced",)


def test_job_script_asks_for_the_resources_and_runs_the_runner(chain: dict[str, Path]) -> None:
    cfg = SlurmConfig(
        gpus=8,
        cpus_per_task=16,
        mem_gb=64,
        time="1-00:00:00",
        setup=["module load cuda"],
        notebooks={"00_a": {"gpus": 0}},
    )
    jobs, _ = plan_jobs(_plans(chain), cfg, stale=stale_notebooks(_plans(chain)))
    first, second = jobs[0].script.splitlines(), jobs[1].script.splitlines()
    assert first[0] == "#!/bin/bash" and "#SBATCH --job-name=guirl-tiny-00_a" in first
    assert not any("--gres" in line for line in first) and "#SBATCH --gres=gpu:8" in second
    assert f"#SBATCH --output={jobs[1].log_pattern}" in second and str(jobs[1].log_pattern).endswith("01_b-%j.log")
    assert "module load cuda" in second and second[-1].startswith("exec ") and "guirl.runner" in second[-1]
    runs = os.environ["GUIRL_RUNS"]
    assert (
        f"export GUIRL_RUNS={runs}" in second and jobs[1].script_path == Path(runs).resolve() / "tiny/slurm/01_b.sbatch"
    )


@pytest.mark.parametrize(
    "after, expected",
    [
        ((), ["sbatch", "--parsable", "s.sh"]),
        (("11",), ["sbatch", "--parsable", "--dependency=afterok:11", "--kill-on-invalid-dep=yes", "s.sh"]),
        (("11", "12"), ["sbatch", "--parsable", "--dependency=afterok:11:12", "--kill-on-invalid-dep=yes", "s.sh"]),
    ],
)
def test_sbatch_command_chains_with_afterok(after, expected) -> None:
    assert sbatch_command(Path("s.sh"), after) == expected


@pytest.mark.parametrize("out, job_id", [("123\n", "123"), ("45;cluster\n", "45"), ("bad", None), ("", None)])
def test_parse_job_id(out: str, job_id: str | None) -> None:
    if job_id is None:
        with pytest.raises(RuntimeError, match="no job id"):
            parse_job_id(out)
    else:
        assert parse_job_id(out) == job_id


# ---------------------------------------------------------------------------------- the CLI
FAKE_SBATCH = """#!/bin/sh
dir=$(dirname "$0")
n=$(cat "$dir/next" 2>/dev/null || echo 100)
echo "$@" >> "$dir/sbatch.calls"
if [ -f "$dir/refuse" ]; then echo "sbatch: error: Invalid account" >&2; exit 1; fi
echo $((n+1)) > "$dir/next"
echo "$n;testcluster"
"""
FAKE_SQUEUE = """#!/bin/sh
cat "$(dirname "$0")/squeue.out" 2>/dev/null
"""


@pytest.fixture()
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: dict[str, Path]) -> Path:
    """A ``bin/`` with recording ``sbatch`` / ``squeue`` first on PATH; the runner sees ``chain``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("guirl.runner.notebooks_dir", lambda: next(iter(chain.values())).parent)
    return bin_dir


def test_cli_submits_records_and_does_not_resubmit_queued_jobs(fake_slurm: Path, capsys, isolated_outputs) -> None:
    assert main(["--all", "--slurm", "--slurm-config", str(LOCAL)]) == 0
    out = capsys.readouterr().out
    calls = (fake_slurm / "sbatch.calls").read_text().splitlines()
    assert len(calls) == 4 and calls[0].startswith("--parsable ") and "--dependency" not in calls[0]
    assert "--dependency=afterok:100 --kill-on-invalid-dep=yes" in calls[1]  # 01_b after 00_a's job 100
    folder = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny" / "slurm"
    records = read_records(folder / "jobs.jsonl")
    ids = {r["notebook"]: r["job_id"] for r in records}
    assert ids == {"00_a": "100", "01_b": "101", "02_c": "102", "03_d": "103"}
    assert [r["after"] for r in records] == [[], ["100"], ["101", "100"], []]
    assert all(Path(r["script"]).is_file() and r["log"].endswith(f"-{r['job_id']}.log") for r in records)
    assert "[guirl.slurm] 01_b: job 101 after 00_a (100)" in out and "4 submitted" in out
    # The same call while 00_a and 01_b are still queued (02_c failed, 03_d done): those two are
    # not submitted again; 02_c waits for 01_b's queued job; 03_d has no stamp (the fake ran
    # nothing), so it is submitted again.
    (fake_slurm / "squeue.out").write_text("100|RUNNING\n101|PENDING\n102|FAILED\n103|COMPLETED\n")
    assert main(["--all", "--slurm", "--slurm-config", str(LOCAL)]) == 0
    out = capsys.readouterr().out
    assert "00_a: still queued as job 100" in out and "01_b: still queued as job 101" in out
    new = (fake_slurm / "sbatch.calls").read_text().splitlines()[4:]
    assert len(new) == 2 and "--dependency=afterok:101:100 " in new[0] and "--dependency" not in new[1]


def test_cli_dry_run_prints_scripts_and_submits_nothing(fake_slurm: Path, capsys, isolated_outputs) -> None:
    assert main(["--all", "--slurm", "--slurm-config", str(LOCAL), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("#!/bin/bash") == 4 and "--dependency=afterok:$JOB_01_b:$JOB_00_a" in out
    assert not (fake_slurm / "sbatch.calls").exists()
    assert [p for p in isolated_outputs["GUIRL_RUNS"].rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    "argv, setup, status, message",
    [
        (["--slurm-config", "local"], None, 2, "--slurm-config needs --slurm"),
        (["--slurm", "--slurm-config", "nope"], None, 2, "configs/slurm/nope.yaml: --slurm-config: file not found"),
        (["--slurm", "--slurm-config", str(LOCAL)], "refuse", 1, "00_a: sbatch refused the job (sbatch: error"),
        (["--slurm", "--slurm-config", str(LOCAL)], "no-sbatch", 2, "sbatch not found on PATH"),
    ],
)
def test_cli_errors(
    fake_slurm: Path, capsys, monkeypatch, argv: list[str], setup: str | None, status: int, message: str
) -> None:
    if setup == "refuse":
        (fake_slurm / "refuse").write_text("")
    if setup == "no-sbatch":
        (fake_slurm / "sbatch").unlink()
        monkeypatch.setenv("PATH", str(fake_slurm))  # no sbatch anywhere
    assert main(["--all", *argv]) == status
    assert message in capsys.readouterr().err


def test_stamp_records_the_slurm_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fp = dag.fingerprint(source="s", config="c", library="l", inputs={})
    assert "slurm_job_id" not in dag.read_stamp(dag.write_stamp(tmp_path / "a.json", fp, notebook="a", wall_time_s=1))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert (
        dag.read_stamp(dag.write_stamp(tmp_path / "b.json", fp, notebook="b", wall_time_s=1))["slurm_job_id"] == "4242"
    )


@pytest.mark.parametrize(
    "args, expected, deferred_index",
    [
        (["reproduce", "SLURM=1"], "--all --profile tiny --slurm\n", True),
        (["reproduce", "SLURM=local", "SMOKE=1"], "--all --profile tiny --smoke --slurm --slurm-config local", True),
        (["nb-01_sft", "SLURM=yes"], "notebooks/01_sft.ipynb --dag --profile tiny --slurm", False),
        (["reproduce", "SLURM=0"], "--all --profile tiny\n", False),
    ],
)
def test_make_passes_slurm_to_the_runner(args: list[str], expected: str, deferred_index: bool) -> None:
    out = make_dry_run(*args)
    assert expected in out, out
    # with SLURM the jobs have not run yet when make returns: the index is left for later
    assert ("when the jobs have finished" in out) == deferred_index


# ---------------------------------------------------------------------------------- a real cluster
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A single-node SLURM cluster for this module; always stopped at teardown. Its ports are fixed, so
    the module runs on one test process (`make test`: --dist loadscope)."""
    from slurmcluster import LocalSlurm, missing_programs

    missing = missing_programs()
    if missing:
        reason = f"SLURM is not installed ({', '.join(missing)} missing): apt-get install -y slurm-wlm munge"
        if os.environ.get("CI"):
            pytest.fail(reason + "; .ci/run installs them on CI")
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("slurmd must run as root to launch jobs (CI runs as root)")
    root = tmp_path_factory.mktemp("slurm")
    os.chmod(root, 0o700)
    local = LocalSlurm(root)
    try:
        yield local.start()
    finally:
        local.stop()


def _submit(cluster, *args: str) -> subprocess.CompletedProcess:
    env = {**runner_env(), "SLURM_CONF": cluster.env["SLURM_CONF"]}
    cmd = [PYTHON, "-m", "guirl.runner", "notebooks/01_sft.ipynb", "--dag", "--smoke", "--slurm"]
    return subprocess.run(
        [*cmd, "--slurm-config", "local", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def _report(cluster, ids: list[str], *, sacct: bool = True) -> str:
    """The ``squeue`` (and ``sacct``) lines of ``ids`` (printed by the test for the record)."""
    fmt = "--format=%.6i %.26j %.10T %.25r %E"
    sq = cluster.run(["squeue", "--states=all", f"--jobs={','.join(ids)}", fmt]).stdout
    if not sacct:
        return sq
    sa = cluster.run(
        ["sacct", "--completion", f"--jobs={','.join(ids)}", "--format=JobID,JobName%26,State,ExitCode,Start,End"]
    ).stdout
    return sq + sa


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the smoke chain takes 4-8 minutes on a loaded 2-core machine
def test_smoke_chain_runs_through_slurm(cluster, isolated_outputs, capsys) -> None:
    from guirl.runner import RunResult
    from test_notebooks import Outputs, check_00_data_prep, check_01_sft

    runs = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny"
    start = time.perf_counter()
    proc = _submit(cluster)
    assert proc.returncode == 0, proc.stderr
    records = read_records(runs / "slurm" / "jobs.jsonl")
    ids = {r["notebook"]: r["job_id"] for r in records}
    assert list(ids) == ["00_data_prep", "01_sft"] and records[1]["after"] == [ids["00_data_prep"]]
    assert f"01_sft: job {ids['01_sft']} after 00_data_prep ({ids['00_data_prep']})" in proc.stdout
    queued = _report(cluster, list(ids.values()), sacct=False)  # 01 pending with reason Dependency
    assert f"afterok:{ids['00_data_prep']}" in queued or "COMPLETED" in queued, queued
    states = cluster.wait(list(ids.values()), timeout=1700)
    chain_s = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nafter submission:\n{queued}smoke chain 00 -> 01 through SLURM: {chain_s:.0f} s")
        print(_report(cluster, list(ids.values())))
    assert {s for s, _ in states.values()} == {"COMPLETED"}, (states, Path(records[-1]["log"]).read_text()[-3000:])
    # 01 started after 00 ended (afterok), each stamp names its job, the outputs are the notebooks'
    times = {}
    for line in cluster.run(
        ["sacct", "--completion", "--parsable2", "--noheader", "--format=JobID,Start,End"]
    ).stdout.split():
        job, begin, end = line.split("|")
        times[job] = (begin, end)
    assert times[ids["01_sft"]][0] >= times[ids["00_data_prep"]][1]
    state: dict = {}
    for stem, check in (("00_data_prep", check_00_data_prep), ("01_sft", check_01_sft)):
        stamp = dag.read_stamp(runs / f"{stem}.stamp.json")
        assert stamp is not None and stamp["slurm_job_id"] == ids[stem]
        assert f"job {ids[stem]} on" in (runs / "slurm" / f"{stem}-{ids[stem]}.log").read_text()
        config_path = runs / f"{stem}.config.yaml"
        result = RunResult(REPO / f"notebooks/{stem}.ipynb", runs / f"{stem}.ipynb", config_path,
                           load_config(config_path).hash(), "tiny", stamp["wall_time_s"])  # fmt: skip
        check(Outputs(result, isolated_outputs["GUIRL_FIGURES"].resolve()), state)
    # Submitting again: both are up to date, nothing is submitted.
    again = _submit(cluster)
    assert again.returncode == 0 and "0 submitted" in again.stdout and "01_sft: up to date" in again.stdout
    assert len(read_records(runs / "slurm" / "jobs.jsonl")) == 2


@pytest.mark.slow
def test_a_failed_job_leaves_no_stamp_and_its_reader_never_runs(cluster, isolated_outputs, capsys) -> None:
    # Stamps of earlier runs (stale: not this config's); a data folder without the AITZ layout
    # (it exists: a missing one is refused before anything is submitted) makes 00 fail in its job,
    # after the runner removed 00's old stamp; 01 is cancelled without starting.
    runs = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny"
    runs.mkdir(parents=True)
    for stem in ("00_data_prep", "01_sft"):
        (runs / f"{stem}.stamp.json").write_text(json.dumps({"notebook": stem, "fingerprint": {}}) + "\n")
    stamp_01 = (runs / "01_sft.stamp.json").read_bytes()
    not_aitz = runs.parent / "not_aitz"
    not_aitz.mkdir()
    bad = _submit(cluster, "--override", "data.source=aitz", "--override", f"data.path={not_aitz}")
    assert bad.returncode == 0, bad.stderr
    failed = {r["notebook"]: r["job_id"] for r in read_records(runs / "slurm" / "jobs.jsonl")}
    assert list(failed) == ["00_data_prep", "01_sft"]
    states = cluster.wait(list(failed.values()), timeout=600)
    with capsys.disabled():
        print(f"\nfailed chain:\n{_report(cluster, list(failed.values()))}")
    assert states[failed["00_data_prep"]][0] == "FAILED"
    assert states[failed["01_sft"]] == ("CANCELLED", "DependencyNeverSatisfied")
    assert "SplitFileError" in (runs / "slurm" / f"00_data_prep-{failed['00_data_prep']}.log").read_text()
    assert not (runs / "slurm" / f"01_sft-{failed['01_sft']}.log").exists()  # never started
    assert not (runs / "00_data_prep.stamp.json").exists()
    assert (runs / "01_sft.stamp.json").read_bytes() == stamp_01
    # The next submission submits both again (00 has no successful run, 01 reads it).
    plans = [
        plan_run(
            REPO / f"notebooks/{s}.ipynb", "tiny", overlays=["smoke"], overrides=["data.source=aitz", "data.path=/x"]
        )
        for s in ("00_data_prep", "01_sft")
    ]
    steps = run_dag(plans, dry_run=True, log=lambda line: None)
    assert [(s.stem, s.action) for s in steps] == [("00_data_prep", "would run"), ("01_sft", "would run")]
    assert steps[0].reasons == ("no successful run yet",)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_cli_checks_the_paths_a_run_reads_before_submitting(
    fake_slurm: Path, capsys, isolated_outputs, dry_run
) -> None:
    # paper-3b reads a model and a data folder a fresh clone does not have: nothing is submitted
    assert main(["--all", "--slurm", "--slurm-config", str(LOCAL), "--profile", "paper-3b", *dry_run]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.path: " in err and "data.path: " in err, err
    assert not (fake_slurm / "sbatch.calls").exists()
    assert [p for p in isolated_outputs["GUIRL_RUNS"].rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    "line, key",
    [
        ("partition: 'gpu\\n#SBATCH --wrap=\"rm -rf x\"'", "partition"),
        ('account: "lab\\rx"', "account"),
        ('qos: "a\\tb"', "qos"),
        ('constraint: "h100\\u0000"', "constraint"),
        ('gpu_type: "a100 x"', "gpu_type"),
        ('notebooks: {01_sft: {partition: "a\\nb"}}', "notebooks"),
        ('setup: ["module load cuda\\nrm -rf /"]', "setup"),
        ('sbatch_args: ["--comment=a\\u0007"]', "sbatch_args"),
    ],
)
def test_slurm_fields_refuse_control_characters(tmp_path: Path, line: str, key: str) -> None:
    # a newline in a field would add a line to the job script (an #SBATCH option or a command)
    path = tmp_path / "lab.yaml"
    path.write_text(f"gpus: 0\ncpus_per_task: 2\nmem_gb: 4\ntime: '60'\n{line}\n")
    with pytest.raises(ConfigError) as err:
        load_slurm_config(path, SHIPPED_NOTEBOOKS)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}"), text
    assert "control character" in text or "white space" in text, text
