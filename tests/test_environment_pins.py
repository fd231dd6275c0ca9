"""The environment files agree: requirements/cpu.txt, environment.yml, constraints, gpu.txt (all ten
design-card packages pinned, the installed closure pinned), the Makefile's install order, `make lab`
(offline, also as root), and the accelerate/DeepSpeed configs parse (tests/test_deepspeed.py runs them)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO, stop_group

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
    # docs/stack.md: torchvision (CUDA build only) breaks transformers' PIL image processor on CPU.
    text = (REPO / path).read_text().lower()
    assert not re.search(r"^\s*-?\s*(torchvision|torchaudio|qwen-vl-utils)\b", text, re.M)


def test_gpu_requirements() -> None:
    lines = (REPO / "requirements" / "gpu.txt").read_text().splitlines()
    assert "-r cpu.txt" in [ln.strip() for ln in lines]
    pins = pins_of_lines(lines, "requirements/gpu.txt")
    assert pins["torchvision"] == "0.28.0"  # the torchvision release built for torch 2.13.0
    assert "torch" not in pins  # comes from cpu.txt / constraints (2.13.0)
    # one source of truth: what cpu.txt pins (deepspeed included) is not pinned again
    assert set(pins) & set(read_pins(REPO / "requirements" / "cpu.txt")) == set()
    # deepspeed is a source distribution: the install line must skip compiling its ops
    assert any("DS_BUILD_OPS=0 pip install -r requirements/gpu.txt" in ln for ln in lines)


# The packages of the design card, with the versions that installed together and worked offline
# on CPU (docs/stack.md).
DESIGN_CARD = {
    "torch": "2.13.0",
    "transformers": "5.23.0",
    "peft": "0.21.2",
    "trl": "1.16.0",
    "deepspeed": "0.19.8",
    "papermill": "2.7.0",
    "jupyterlab": "4.6.6",
    "matplotlib": "3.11.2",
    "seaborn": "0.13.2",
    "pandas": "3.1.1",
}


@pytest.mark.parametrize(
    "source, read",
    [
        ("environment.yml", lambda: conda_pip_pins()),  # conda users
        ("requirements/cpu.txt", lambda: read_pins(REPO / "requirements" / "cpu.txt")),  # make setup
        ("requirements/constraints.txt", lambda: read_pins(REPO / "requirements" / "constraints.txt")),
    ],
)
def test_design_card_packages_are_pinned(source: str, read) -> None:
    pins = read()
    assert {name: pins.get(name) for name in DESIGN_CARD} == DESIGN_CARD, source


def _closure(roots: list[str]) -> dict[str, str]:
    """Installed version of every distribution that ``roots`` require, transitively (markers
    evaluated for this interpreter, extras not followed)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = norm(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist.version.split("+", 1)[0]  # torch 2.13.0+cpu is the pinned 2.13.0
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_constraints_pin_every_installed_dependency() -> None:
    # The venv the tests run in was installed from cpu.txt with constraints.txt; every package in
    # the dependency closure of cpu.txt must be pinned there at the version installed, or a fresh
    # `make setup` could resolve to a different set.
    constraints = read_pins(REPO / "requirements" / "constraints.txt")
    installed = _closure(list(read_pins(REPO / "requirements" / "cpu.txt")))
    assert {n: v for n, v in installed.items() if constraints.get(n) != v} == {}


def test_makefile_installs_torch_first_then_pins_then_package_then_kernel() -> None:
    out = subprocess.run(
        ["make", "-n", "-B", "setup"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    steps = [
        '-m pip install --quiet "torch==2.13.0"',
        # deepspeed is a source distribution: install it without compiling its ops (docs/stack.md)
        "DS_BUILD_OPS=0 .venv/bin/python -m pip install --quiet -r requirements/cpu.txt -c requirements/constraints.txt",
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


@pytest.mark.parametrize(
    "uid, allow_root",
    [
        ("0", True),  # root, as in GPU-node containers: Jupyter refuses to start without --allow-root
        ("1000", False),  # an ordinary user: no --allow-root
    ],
)
def test_make_lab_installs_nothing_and_allows_root_only_as_root(tmp_path: Path, uid: str, allow_root: bool) -> None:
    fake_id = tmp_path / "id"  # `make lab` asks `id -u` who runs it
    fake_id.write_text(f"#!/bin/sh\necho {uid}\n")
    fake_id.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["make", "-n", "-o", ".stamps/setup", "lab"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert ".venv/bin/jupyter lab --notebook-dir=notebooks" in out
    assert "pip install" not in out  # jupyterlab comes with `make setup`: nothing to fetch, works offline
    assert ("--allow-root" in out) is allow_root


@pytest.mark.slow
def test_make_lab_serves_the_project_kernel_offline(tmp_path: Path) -> None:
    # `make lab` as whoever runs the tests (root on this project's machines), with every proxy
    # variable pointing at a closed port, so that any attempt to reach the network fails.
    port, token = _free_port(), "guirl-test"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),  # no user configuration, nothing written to ~
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env[var] = "http://127.0.0.1:9"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    args = f"--no-browser --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={token}"
    proc = subprocess.Popen(
        ["make", "-o", ".stamps/setup", "lab", f"LAB_ARGS={args}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        specs = _poll_json(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}", proc, timeout=240)
        assert "guirl" in specs["kernelspecs"]  # the venv's kernel, registered by `make setup`
        status = _poll_json(f"http://127.0.0.1:{port}/api/status?token={token}", proc, timeout=30)
        assert "started" in status
    finally:
        stop_group(proc, timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _poll_json(url: str, proc: subprocess.Popen, timeout: float) -> dict:
    """GET ``url`` until it answers (the server is starting) or ``proc`` exits."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost, never a proxy
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"`make lab` exited with {proc.returncode}:\n{proc.stdout.read()[-3000:]}")
        try:
            with opener.open(url, timeout=5) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    raise AssertionError(f"no answer from {url} within {timeout} s")
