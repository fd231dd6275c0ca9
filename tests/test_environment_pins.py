"""The environment files agree: requirements/cpu.txt, environment.yml, constraints, gpu.txt,
the Makefile's install order, and the accelerate/DeepSpeed configs parse."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO

PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def norm(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_of_lines(lines: list[str], source: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = PIN_RE.match(line)
        assert match, f"{source}: {raw!r} is not an exact pin NAME==VERSION"
        name = norm(match.group(1))
        assert name not in pins, f"{source}: {name} pinned twice"
        pins[name] = match.group(2)
    return pins


def read_pins(path: Path) -> dict[str, str]:
    return pins_of_lines(path.read_text().splitlines(), str(path.relative_to(REPO)))


def conda_pip_pins() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip section"
    return pins_of_lines(pip_sections[0], "environment.yml")


def test_pins_parser_rejects_loose_requirements() -> None:
    with pytest.raises(AssertionError):
        pins_of_lines(["numpy>=2"], "x")
    with pytest.raises(AssertionError):
        pins_of_lines(["numpy==2.4.6", "NumPy==2.4.6"], "x")


def test_environment_yml_matches_cpu_requirements() -> None:
    assert conda_pip_pins() == read_pins(REPO / "requirements" / "cpu.txt")


def test_environment_yml_is_python_311() -> None:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]


def test_constraints_pin_torch_2_13_0() -> None:
    assert read_pins(REPO / "requirements" / "constraints.txt")["torch"] == "2.13.0"


def test_constraints_agree_with_cpu_requirements() -> None:
    constraints = read_pins(REPO / "requirements" / "constraints.txt")
    cpu = read_pins(REPO / "requirements" / "cpu.txt")
    disagree = {n: (v, constraints[n]) for n, v in cpu.items() if n in constraints and constraints[n] != v}
    assert disagree == {}
    assert set(cpu) <= set(constraints), sorted(set(cpu) - set(constraints))


@pytest.mark.parametrize("path", ["requirements/cpu.txt", "requirements/constraints.txt", "environment.yml"])
def test_cpu_environment_has_no_torchvision(path: str) -> None:
    # stack-facts: torchvision (CUDA build only) breaks transformers' PIL image processor on CPU.
    text = (REPO / path).read_text().lower()
    assert not re.search(r"^\s*-?\s*(torchvision|torchaudio|qwen-vl-utils)\b", text, re.M)


def test_gpu_requirements() -> None:
    lines = (REPO / "requirements" / "gpu.txt").read_text().splitlines()
    assert "-r cpu.txt" in [ln.strip() for ln in lines]
    pins = pins_of_lines(lines, "requirements/gpu.txt")
    assert pins["deepspeed"] == "0.19.8"
    assert pins["torchvision"] == "0.28.0"  # the torchvision release built for torch 2.13.0
    assert "torch" not in pins  # comes from cpu.txt / constraints (2.13.0)


def test_makefile_installs_torch_first_then_pins_then_package_then_kernel() -> None:
    out = subprocess.run(
        ["make", "-n", "-B", "setup"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    steps = [
        '-m pip install --quiet "torch==2.13.0"',
        "-m pip install --quiet -r requirements/cpu.txt -c requirements/constraints.txt",
        "-m pip install --quiet -e . --no-deps",
        "-m ipykernel install --prefix .venv --name guirl",
    ]
    positions = [out.find(s) for s in steps]
    assert -1 not in positions, out
    assert positions == sorted(positions), out
    assert "python3.11 -m venv .venv" in out


def test_makefile_setup_stamp_depends_on_requirements() -> None:
    out = subprocess.run(["make", "-p", "-n", "help"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    deps = re.search(r"^\.stamps/setup: (.*)$", out, re.M)
    assert deps, "no .stamps/setup rule"
    assert set(deps.group(1).split()) >= {"requirements/cpu.txt", "requirements/constraints.txt", "pyproject.toml"}


def test_make_help_lists_targets() -> None:
    out = subprocess.run(["make", "help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout
    for target in ("setup", "test", "test-fast", "reproduce", "lab", "clean", "distclean"):
        assert re.search(rf"^\s+{re.escape(target)}\s+\S", out, re.M), target


def test_accelerate_configs_load() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    cpu = load_config_from_file(str(REPO / "configs" / "accelerate" / "cpu.yaml"))
    assert cpu.use_cpu and cpu.num_processes == 1 and str(cpu.distributed_type).endswith("NO")
    gpu = load_config_from_file(str(REPO / "configs" / "accelerate" / "multi_gpu_zero2.yaml"))
    assert str(gpu.distributed_type).endswith("DEEPSPEED")
    ds_file = gpu.deepspeed_config["deepspeed_config_file"]
    assert (REPO / ds_file).is_file()


def test_deepspeed_zero2_json() -> None:
    ds = json.loads((REPO / "configs" / "deepspeed" / "zero2.json").read_text())
    assert ds["zero_optimization"]["stage"] == 2
    # "auto" lets transformers' Trainer fill these from TrainingArguments.
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"):
        assert ds[key] == "auto"
    assert ds["bf16"]["enabled"] == "auto"
