"""guirl.runner: validation before running, the config resolved once and loaded by the notebook,
output locations, parameter injection, stamps, CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, make_notebook, runner_env, written_outputs
from guirl.config import ConfigError, load_config
from guirl.runner import (
    RunnerError,
    default_experiment,
    list_notebooks,
    main,
    notebook_parameters,
    plan_run,
    run_notebook,
)

# The contract's parameters, plus one of the notebook's own (`label`, not a config key).
PARAMS = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\nlabel = 'default'\n"
# The body a real notebook starts with, plus a report table so the whole chain is exercised.
BODY = [
    "from guirl.config import load_run_config\n"
    "from guirl.report import Report\n"
    "import pandas as pd\n"
    "cfg = load_run_config(profile, experiment, overrides, config_path)",
    "rep = Report('01_probe', cfg)\n"
    "rep.table('summary', pd.DataFrame({'seed': [cfg.seed], 'lr': [cfg.sft.learning_rate], "
    "'steps': [cfg.sft.max_steps], 'label': [label]}))",
]


@pytest.fixture()
def probe(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    return make_notebook(tmp_path / "src" / "01_probe.ipynb", PARAMS, BODY)


def injected_source(executed: Path) -> str:
    nb = json.loads(executed.read_text())
    cells = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(cells) == 1
    return "".join(cells[0]["source"])


# ---------------------------------------------------------------------------------- planning
def test_plan_writes_nothing_and_targets_runs_dir(probe: Path, isolated_outputs: dict[str, Path]) -> None:
    plan = plan_run(probe, "tiny", overrides=["seed=3"], overlays=["smoke"], parameters={"label": "x"})
    runs = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny"
    assert plan.output == runs / "01_probe.ipynb"
    assert plan.config_path == runs / "01_probe.config.yaml" and plan.stamp_path == runs / "01_probe.stamp.json"
    assert plan.parameters == {
        "profile": "tiny",
        "experiment": None,
        "overrides": ["seed=3"],
        "config_path": str(runs / "01_probe.config.yaml"),
        "label": "x",
    }
    assert plan.config == load_config("tiny", overrides=["seed=3"], overlays=["smoke"]) and plan.reads == ()
    assert written_outputs(isolated_outputs) == []


def test_refuses_to_write_over_the_source(probe: Path) -> None:
    before = probe.read_bytes()
    with pytest.raises(RunnerError, match="over its source"):
        run_notebook(probe, "tiny", output_path=probe)
    assert probe.read_bytes() == before


def test_refuses_to_write_into_notebooks_folder(probe: Path) -> None:
    with pytest.raises(RunnerError, match="notebooks/"):
        plan_run(probe, "tiny", output_path=REPO / "notebooks" / "99_copy.ipynb")


def test_missing_notebook(tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match="not found"):
        plan_run(tmp_path / "00_nothing.ipynb")


def test_notebook_without_reads_metadata_is_refused(probe: Path) -> None:
    nb = json.loads(probe.read_text())
    del nb["metadata"]["guirl"]
    probe.write_text(json.dumps(nb))
    with pytest.raises(RunnerError, match="metadata.guirl.reads: missing"):
        plan_run(probe)


def test_bad_config_raises_before_anything_is_written(probe: Path, isolated_outputs: dict[str, Path]) -> None:
    with pytest.raises(ConfigError):
        run_notebook(probe, "tiny", overrides=["sft.learning_rat=1"])
    assert written_outputs(isolated_outputs) == []


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("profile", "x", "set by the runner; use --profile"),  # the contract's parameters are injected
        ("experiment", "x", "set by the runner; use --experiment"),
        ("overrides", "x", "set by the runner; use --override"),
        ("config_path", "x", "set by the runner"),
        ("seed", 9, "is a config key; set it with --override seed=9"),  # a top-level config key
        ("source", "aitz", "--override data.source=aitz"),  # a section key by its last part
        ("data.source", "aitz", "--override data.source=aitz"),  # a dotted config key
        ("sft", 1, "is a config key"),  # a whole section
        ("smoke", True, "not a parameter of"),  # not one of the notebook's parameters (use --smoke)
    ],
)
def test_parameters_never_shadow_the_config(probe: Path, name: str, value: object, message: str) -> None:
    with pytest.raises(RunnerError, match=message.replace(".", r"\.")):
        plan_run(probe, parameters={name: value})


def test_notebook_parameters_are_read_from_the_tagged_cell(probe: Path) -> None:
    assert notebook_parameters(json.loads(probe.read_text())) == [
        "profile",
        "experiment",
        "overrides",
        "config_path",
        "label",
    ]


def test_default_experiment_is_the_notebook_stem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "configs"
    (root / "experiments").mkdir(parents=True)
    (root / "experiments" / "05_x.yaml").write_text("seed: 2\n")
    monkeypatch.setattr("guirl.runner.configs_dir", lambda: root)
    assert default_experiment(Path("notebooks/05_x.ipynb")) == "05_x"
    assert default_experiment(Path("notebooks/06_y.ipynb")) is None
    # a file for one profile wins on that profile only
    (root / "experiments" / "05_x.tiny.yaml").write_text("seed: 3\n")
    (root / "experiments" / "06_y.tiny.yaml").write_text("seed: 3\n")
    assert default_experiment(Path("notebooks/05_x.ipynb"), "tiny") == "05_x.tiny"
    assert default_experiment(Path("notebooks/05_x.ipynb"), "paper-3b") == "05_x"
    assert default_experiment(Path("notebooks/06_y.ipynb"), "tiny") == "06_y.tiny"
    assert default_experiment(Path("notebooks/06_y.ipynb"), "paper-7b") is None


def test_04_trains_on_gui_odyssey_on_the_paper_profiles_and_refuses_a_data_set_without_task_states() -> None:
    """CES needs the task-state annotation (GUI-Odyssey's context, MiniGUI's progress): on a paper
    profile 04 takes GUI-Odyssey (CES App. B.1) by default; AndroidControl stops in one line."""
    from guirl.runner import DataSourceError

    for profile in ("paper-3b", "paper-7b"):
        plan = plan_run("notebooks/04_ces_staged_rl.ipynb", profile)
        assert (plan.experiment, plan.config.data.source) == (f"04_ces_staged_rl.{profile}", "guiodyssey")
    assert plan_run("notebooks/04_ces_staged_rl.ipynb", "tiny").config.data.source == "minigui"
    with pytest.raises(DataSourceError, match=r"not 'androidcontrol'; pass --experiment guiodyssey$"):
        plan_run("notebooks/04_ces_staged_rl.ipynb", "paper-7b", experiment="androidcontrol")


def test_07s_cpu_sizes_apply_on_the_tiny_profile_only() -> None:
    """07's online sizes (12 tasks, 15 turns) are tiny-profile values: a paper profile keeps
    AndroidLong Table 7's 100 turns."""
    tiny = plan_run("notebooks/07_agentcpm_androidlong.ipynb", "tiny")
    paper = plan_run("notebooks/07_agentcpm_androidlong.ipynb", "paper-7b")
    assert (tiny.experiment, tiny.config.eval.n_tasks, tiny.config.eval.max_turns) == (
        "07_agentcpm_androidlong.tiny",
        12,
        15,
    )
    assert (paper.experiment, paper.config.eval.max_turns) == (None, 100)


def test_list_notebooks_is_sorted_and_numbered(tmp_path: Path) -> None:
    for name in ["10_b.ipynb", "02_a.ipynb", "x_no_number.ipynb", "3_short.ipynb"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in list_notebooks(tmp_path)] == ["02_a.ipynb", "10_b.ipynb"]


# ---------------------------------------------------------------------------------- running
@pytest.mark.slow
def test_the_kernel_runs_with_mkls_dynamic_threading_off(
    tmp_path: Path, isolated_outputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel (and so every stage it starts) has MKL_DYNAMIC=FALSE whatever the caller's
    environment (guirl.train.launch.FIXED_THREADS_ENV); the caller's is restored afterwards."""
    monkeypatch.setenv("MKL_DYNAMIC", "TRUE")
    body = [
        BODY[0] + "\nimport os",
        "Report('01_envprobe', cfg).table('env', pd.DataFrame({'mkl': [os.environ.get('MKL_DYNAMIC')]}))",
    ]
    (tmp_path / "src").mkdir()
    nb = make_notebook(tmp_path / "src" / "01_envprobe.ipynb", PARAMS, body)
    run_notebook(nb, "tiny", overlays=["smoke"])
    out = isolated_outputs["GUIRL_FIGURES"] / "tiny" / "01_envprobe" / "env.csv"
    assert out.read_text() == "mkl\nFALSE\n" and os.environ["MKL_DYNAMIC"] == "TRUE"


@pytest.mark.slow
def test_run_notebook_end_to_end(probe: Path, isolated_outputs: dict[str, Path], capsys) -> None:
    overrides = ["sft.learning_rate=1e-4", "seed=2"]
    result = run_notebook(probe, "tiny", overrides=overrides, overlays=["smoke"], parameters={"label": "x"})
    runs = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny"
    assert result.output == runs / "01_probe.ipynb" and result.output.is_file()
    # The runner resolved the config once and saved it; it says how it was resolved.
    expected = load_config("tiny", overrides=overrides, overlays=["smoke"])
    assert load_config(result.config_path) == expected and result.config_hash == expected.hash()
    header = result.config_path.read_text().splitlines()[:2]
    assert "01_probe.ipynb" in header[0] and "overlays smoke" in header[1] and "seed=2" in header[1]
    injected = injected_source(result.output)
    assert f'config_path = "{result.config_path}"' in injected and 'label = "x"' in injected
    # The notebook used exactly the saved config: its table and its own saved copy agree.
    out = isolated_outputs["GUIRL_FIGURES"] / "tiny" / "01_probe"
    assert (out / "summary.csv").read_text() == "seed,lr,steps,label\n2,0.0001,2,x\n"
    assert load_config(out / "config.yaml") == expected
    assert json.loads((out / "summary.json").read_text())["config_hash"] == result.config_hash
    stamp = json.loads((runs / "01_probe.stamp.json").read_text())
    assert stamp["notebook"] == "01_probe" and stamp["fingerprint"]["config"] == result.config_hash
    assert result.wall_time_s > 0 and "s\n" in capsys.readouterr().out
    # The source notebook is untouched (no outputs, no injected cell).
    src = json.loads(probe.read_text())
    assert all(not c.get("outputs") for c in src["cells"]) and len(src["cells"]) == 3


@pytest.mark.slow
def test_failing_notebook_exits_1_keeps_the_executed_copy_and_no_stamp(
    tmp_path: Path, isolated_outputs: dict[str, Path]
) -> None:
    nb = make_notebook(tmp_path / "02_fail.ipynb", PARAMS, ["raise ValueError('boom')"])
    runs = isolated_outputs["GUIRL_RUNS"] / "tiny"
    runs.mkdir(parents=True)
    (runs / "02_fail.stamp.json").write_text("{}")  # a stamp from an earlier run is removed
    assert main([str(nb), "--profile", "tiny"]) == 1
    assert (runs / "02_fail.ipynb").is_file() and not (runs / "02_fail.stamp.json").exists()


def test_cli_dry_run_prints_config_and_writes_nothing(probe: Path, isolated_outputs: dict[str, Path]) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "guirl.runner", str(probe), "--dry-run", "--override", "seed=5", "--smoke", "-p", "label", "y"],
        capture_output=True,
        text=True,
        env=runner_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "seed: 5" in proc.stdout and "'label': 'y'" in proc.stdout and "max_steps: 2" in proc.stdout
    assert written_outputs(isolated_outputs) == []


def test_cli_dry_run_names_every_missing_input_and_exits_2(probe: Path, capsys) -> None:
    # paper-3b reads a model folder and a data folder that a fresh clone does not have
    assert main([str(probe), "--profile", "paper-3b", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "model.path: " in err and "Qwen2.5-VL-3B-Instruct" in err and "data.path: " in err, err


def test_cli_dry_run_passes_when_every_input_exists(probe: Path, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "data").mkdir()
    args = ["--override", f"model.path={tmp_path / 'model'}", "--override", f"data.path={tmp_path / 'data'}"]
    assert main([str(probe), "--profile", "paper-3b", "--dry-run", *args]) == 0


def test_cli_unreadable_notebook_exits_2(tmp_path: Path, capsys) -> None:
    nb = tmp_path / "01_latin1.ipynb"
    nb.write_bytes(b'{"cells": [], "metadata": {"note": "caf\xe9"}}')
    assert main([str(nb), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cannot read the notebook" in err, err


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give one NOTEBOOK or --all"),  # neither a notebook nor --all
        (["a.ipynb", "--all"], "give one NOTEBOOK or --all"),  # both
        (["missing/00_x.ipynb"], "not found"),  # no such notebook
        (["notebooks/00_data_prep.ipynb", "--force"], "--force needs --all or --dag"),  # force a plain run
        (["--all", "--dag"], "need a single NOTEBOOK"),  # --dag names one notebook
        (["notebooks/00_data_prep.ipynb", "-p", "source", "aitz"], "--override data.source=aitz"),  # old usage
        (
            ["notebooks/00_data_prep.ipynb", "--overlay", "smok"],
            "known overlays: one_gpu, paper_smoke, smoke",
        ),  # unknown overlay
    ],
)
def test_cli_usage_errors_exit_2(args: list[str], message: str, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err


def test_cli_all_with_no_notebooks_is_a_no_op(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr("guirl.runner.notebooks_dir", lambda: tmp_path)
    assert main(["--all"]) == 0
    assert "nothing to run" in capsys.readouterr().out


def test_the_saved_config_header_names_overlay_keys_a_notebook_sets_per_stage() -> None:
    # the smoke overlay's rl.save_steps does not reach 03's GRPO stages (three checkpoints each, Figure 5):
    # the header of the config the runner saves says so; a notebook without such keys gets no such line
    from guirl.runner import _header, plan_run

    plan = plan_run("notebooks/03_coepg_iterations.ipynb", "tiny", overlays=["smoke"])
    per_stage = [line for line in _header(plan) if line.startswith("set per stage by this notebook")]
    assert len(per_stage) == 1 and "rl.save_steps" in per_stage[0]
    assert not any(
        line.startswith("set per stage")
        for line in _header(plan_run("notebooks/01_sft.ipynb", "tiny", overlays=["smoke"]))
    )


def test_cli_plain_run_checks_the_paths_it_reads_before_starting(probe: Path, isolated_outputs, capsys) -> None:
    # a plain run of paper-3b without its model and data folders stops before the notebook starts
    assert main([str(probe), "--profile", "paper-3b"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.path: " in err and "data.path: " in err, err
    assert written_outputs(isolated_outputs) == []
    with pytest.raises(RunnerError, match="model.path: .*data.path: "):
        run_notebook(probe, "paper-3b")


def test_a_notebook_parameter_named_like_a_deeper_config_key_is_its_own(tmp_path: Path) -> None:
    # 00_data_prep's n_samples is not androidlong.rl.n_samples (a key of the paper profiles)
    for profile in ("tiny", "paper-3b"):
        plan = plan_run(REPO / "notebooks" / "00_data_prep.ipynb", profile, parameters={"n_samples": 3})
        assert plan.parameters["n_samples"] == 3
    assert main([str(REPO / "notebooks" / "00_data_prep.ipynb"), "--dry-run", "-p", "n_samples", "3"]) == 0
    # a name the notebook does not have is still refused, with the config key it ends when there is one
    with pytest.raises(RunnerError, match=r"not a parameter of notebooks/01_sft\.ipynb"):
        plan_run(REPO / "notebooks" / "01_sft.ipynb", "tiny", parameters={"n_samples": 3})
    with pytest.raises(RunnerError, match=r"--override ccpo\.tau_min=3"):
        plan_run(REPO / "notebooks" / "01_sft.ipynb", "tiny", parameters={"tau_min": 3})
