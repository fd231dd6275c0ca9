"""guirl.runner: validation before running, output locations, parameter injection, CLI."""

from __future__ import annotations

import json
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
    plan_run,
    run_notebook,
)

PARAMS = "profile = 'tiny'\nexperiment = None\nseed = 0\noverrides = []\nsmoke = False\n"
# The body a real notebook starts with, plus a report table so the whole chain is exercised.
BODY = [
    "from guirl.config import load_config\n"
    "from guirl.report import Report\n"
    "import pandas as pd\n"
    "cfg = load_config(profile, experiment, overrides)",
    "rep = Report('01_probe', cfg)\n"
    "rep.table('summary', pd.DataFrame({'seed': [cfg.seed], 'lr': [cfg.sft.learning_rate], "
    "'smoke': [smoke]}))",
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
    plan = plan_run(probe, "tiny", overrides=["seed=3"], parameters={"smoke": True})
    assert plan.output == isolated_outputs["GUIRL_RUNS"].resolve() / "tiny" / "01_probe.ipynb"
    assert plan.config_path.name == "01_probe.config.yaml"
    assert plan.parameters == {"profile": "tiny", "experiment": None, "seed": 3, "overrides": ["seed=3"], "smoke": True}
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


def test_bad_config_raises_before_anything_is_written(probe: Path, isolated_outputs: dict[str, Path]) -> None:
    with pytest.raises(ConfigError):
        run_notebook(probe, "tiny", overrides=["sft.learning_rat=1"])
    assert written_outputs(isolated_outputs) == []


@pytest.mark.parametrize("key", ["profile", "overrides", "experiment"])
def test_reserved_parameters(probe: Path, key: str) -> None:
    with pytest.raises(RunnerError, match="reserved"):
        plan_run(probe, parameters={key: "x"})


def test_seed_parameter_becomes_an_override(probe: Path) -> None:
    plan = plan_run(probe, parameters={"seed": 9})
    assert plan.config.seed == 9 and plan.parameters["overrides"] == ["seed=9"]


def test_default_experiment_is_the_notebook_stem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "configs"
    (root / "experiments").mkdir(parents=True)
    (root / "experiments" / "05_x.yaml").write_text("seed: 2\n")
    monkeypatch.setattr("guirl.runner.configs_dir", lambda: root)
    assert default_experiment(Path("notebooks/05_x.ipynb")) == "05_x"
    assert default_experiment(Path("notebooks/06_y.ipynb")) is None


def test_list_notebooks_is_sorted_and_numbered(tmp_path: Path) -> None:
    for name in ["10_b.ipynb", "02_a.ipynb", "x_no_number.ipynb", "3_short.ipynb"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in list_notebooks(tmp_path)] == ["02_a.ipynb", "10_b.ipynb"]


# ---------------------------------------------------------------------------------- running
@pytest.mark.slow
def test_run_notebook_end_to_end(probe: Path, isolated_outputs: dict[str, Path], capsys) -> None:
    result = run_notebook(probe, "tiny", overrides=["sft.learning_rate=1e-4", "seed=2"], parameters={"smoke": True})
    runs = isolated_outputs["GUIRL_RUNS"].resolve() / "tiny"
    assert result.output == runs / "01_probe.ipynb" and result.output.is_file()
    assert load_config(result.config_path) == load_config("tiny", overrides=["sft.learning_rate=1e-4", "seed=2"])
    injected = injected_source(result.output)
    assert "smoke = True" in injected and "seed = 2" in injected and "sft.learning_rate=1e-4" in injected
    # The notebook saw the same config as the runner: the report table carries its values.
    table = isolated_outputs["GUIRL_FIGURES"] / "tiny" / "01_probe" / "summary.csv"
    assert table.read_text() == "seed,lr,smoke\n2,0.0001,True\n"
    side = json.loads(table.with_suffix(".json").read_text())
    assert side["config_hash"] == result.config_hash
    assert result.wall_time_s > 0 and "s\n" in capsys.readouterr().out
    # The source notebook is untouched (no outputs, no injected cell).
    src = json.loads(probe.read_text())
    assert all(not c.get("outputs") for c in src["cells"]) and len(src["cells"]) == 3


@pytest.mark.slow
def test_failing_notebook_exits_1_and_keeps_the_executed_copy(
    tmp_path: Path, isolated_outputs: dict[str, Path]
) -> None:
    nb = make_notebook(tmp_path / "02_fail.ipynb", PARAMS, ["raise ValueError('boom')"])
    assert main([str(nb), "--profile", "tiny"]) == 1
    assert (isolated_outputs["GUIRL_RUNS"] / "tiny" / "02_fail.ipynb").is_file()


def test_cli_dry_run_prints_config_and_writes_nothing(probe: Path, isolated_outputs: dict[str, Path]) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "guirl.runner", str(probe), "--dry-run", "--override", "seed=5", "-p", "smoke", "true"],
        capture_output=True,
        text=True,
        env=runner_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "seed: 5" in proc.stdout and "'smoke': True" in proc.stdout
    assert written_outputs(isolated_outputs) == []


@pytest.mark.parametrize(
    "args",
    [
        [],  # neither a notebook nor --all
        ["a.ipynb", "--all"],  # both
        ["missing/00_x.ipynb"],  # no such notebook
    ],
)
def test_cli_usage_errors_exit_2(args: list[str], capsys) -> None:
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_cli_all_with_no_notebooks_is_a_no_op(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr("guirl.runner.notebooks_dir", lambda: tmp_path)
    assert main(["--all"]) == 0
    assert "nothing to run" in capsys.readouterr().out
