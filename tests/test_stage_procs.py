"""Training stages never outlive the run that started them, and one folder trains one run at a time
(guirl.train.procs, guirl.train.launch, guirl.runner).

A stand-in stage replaces ``accelerate launch``: a "launcher" process that starts a "trainer"
child and waits for it, as accelerate does; the trainer writes its pid and sleeps. A launcher
process (``run_stage`` in a process of its own) or the runner is then killed, and no process of
the stage may be left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTHON, make_notebook, runner_env, stage_of
from guirl.train.procs import FileLock, LockedError, group_members

# the stand-in stage: a launcher that starts a sleeping trainer (its pid in <output_dir>/trainer.pid)
STAGE = textwrap.dedent(
    """
    import subprocess, sys
    out = sys.argv[1]
    trainer = "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(600)" % (out + "/trainer.pid",)
    sys.exit(subprocess.Popen([sys.executable, "-c", trainer]).wait())
    """
)

# run_stage in a process of its own, with the stand-in stage instead of accelerate launch (the
# launcher "accelerate") or instead of the process accelerate launch would start ("subprocess":
# the direct start of a single-process CPU stage)
LAUNCHER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from guirl.config import load_config
    from guirl.train import launch

    stage, launcher = sys.argv[1], sys.argv[3]
    launch.accelerate_command = lambda st, c: [sys.executable, "-c", open(stage).read(), str(st.output_dir)]
    launch.simple_launch = lambda cmd, env: (list(cmd), dict(env))
    out = Path(sys.argv[2])
    cfg = load_config("tiny", overrides=[f"runtime.stage_launcher={launcher}"])
    st = launch.Stage("sft", launch.SFT_ENTRY, cfg, {"data": out.parent}, out.parent, out)
    assert launch.launch_mode(st) == {"accelerate": launch.ACCELERATE, "subprocess": launch.DIRECT}[launcher]
    launch.run_stage(st, echo=False)
    """
)


def _wait_for(path: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.is_file() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:g} s"
        time.sleep(0.1)
    return path.read_text()


def _gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``timeout`` seconds for them to end."""
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if _alive(p)]
    return alive


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _start_launcher(tmp_path: Path, launcher: str = "accelerate") -> tuple[subprocess.Popen, Path, list[int]]:
    """A process running ``run_stage`` on ``tmp_path/stage`` (``runtime.stage_launcher``: ``launcher``);
    returns it, the stage folder and every pid of the stage (its process group) once the trainer is up."""
    (tmp_path / "stage.py").write_text(STAGE)
    out = tmp_path / "stage"
    proc = subprocess.Popen(
        [PYTHON, "-c", LAUNCHER, str(tmp_path / "stage.py"), str(out), launcher],
        env=runner_env(),
        start_new_session=True,  # not in the test's process group
        preexec_fn=_interruptible,
    )
    trainer = int(_wait_for(out / "trainer.pid"))
    members = group_members(os.getpgid(trainer))
    assert trainer in members and proc.pid not in members  # the stage runs in a group of its own
    return proc, out, members


def _interruptible() -> None:
    # A test run started in the background of a non-interactive shell inherits SIGINT ignored, and
    # Python keeps it ignored: give the launcher the default, so that it sees KeyboardInterrupt as a
    # user's Ctrl-C delivers it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("launcher", ["accelerate", "subprocess"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_caller_leaves_no_stage_process(tmp_path, sig, launcher):
    proc, _, members = _start_launcher(tmp_path, launcher)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    assert _gone(members) == [], f"left running after {sig.name} to the caller: {members}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_stage_leader_takes_the_trainer_with_it(tmp_path):
    # SIGKILL to the stage's process-group leader (the guirl.train.procs wrapper), not to the caller:
    # the wrapper cannot stop its group, so the caller does, and run_stage fails (nothing marked done)
    proc, out, members = _start_launcher(tmp_path)
    leader = os.getpgid(int((out / "trainer.pid").read_text()))
    os.kill(leader, signal.SIGKILL)
    try:
        assert _gone(members) == [], f"left running after SIGKILL to the stage's leader: {members}"
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        for pid in members:  # on failure: leave nothing behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not (out / "result.json").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_busy_stage_folder_is_refused_naming_its_holder(tmp_path):
    from guirl.config import load_config
    from guirl.train.launch import run_stage

    proc, out, members = _start_launcher(tmp_path)
    try:
        with pytest.raises(LockedError) as err:
            run_stage(
                stage_of(load_config("tiny"), "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=out), echo=False
            )
        message = str(err.value)
        assert "\n" not in message and f"pid {proc.pid}" in message and str(out) in message, message
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert _gone(members) == []
    # the holder is gone: its lock file stays, with its pid, and is taken over
    lock = out.with_name(out.name + ".lock")
    assert json.loads(lock.read_text())["pid"] == proc.pid
    with FileLock(lock, "stage folder"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_a_stale_lock_file_is_taken_over_and_a_live_one_refused(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text(json.dumps({"pid": 999_999_999, "host": "h", "since": "then"}))  # its holder died
    with FileLock(lock, "stage folder x"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(LockedError, match=rf"stage folder x is in use by pid {os.getpid()} on "):
            FileLock(lock, "stage folder x").acquire()
    FileLock(lock, "stage folder x").acquire().release()  # free again once released


def test_a_notebook_running_for_a_profile_is_not_run_twice_at_once(tmp_path):
    import threading

    from guirl.runner import RunnerError, execute, plan_run

    nb = make_notebook(tmp_path / "01_probe.ipynb", "profile = 'tiny'\n", ["x = 1"])
    plan = plan_run(nb, "tiny")
    started, release = threading.Event(), threading.Event()

    def slow_engine(plan, **kw):
        started.set()
        assert release.wait(30)

    first = threading.Thread(target=execute, args=(plan,), kwargs={"engine": slow_engine, "quiet": True})
    first.start()
    try:
        assert started.wait(30)
        with pytest.raises(RunnerError, match=rf"notebook 01_probe \(profile tiny\) is in use by pid {os.getpid()}"):
            execute(plan, engine=lambda plan, **kw: None, quiet=True)
    finally:
        release.set()
        first.join(30)
    execute(plan, engine=lambda plan, **kw: None, quiet=True)  # free once the first run ended


# the notebook: run_stage with the stand-in stage, as 01 and 02 run theirs
NOTEBOOK_BODY = [
    "import sys\n"
    "from pathlib import Path\n"
    "from guirl.config import load_run_config\n"
    "from guirl.train import launch\n"
    "cfg = load_run_config(profile, experiment, overrides, config_path)\n"
    "cfg = cfg.replace({'runtime.stage_launcher': 'accelerate'})  # the stand-in replaces accelerate launch",
    "launch.accelerate_command = lambda st, c: [sys.executable, '-c', open(stage).read(), str(st.output_dir)]\n"
    "st = launch.Stage('sft', launch.SFT_ENTRY, cfg, {'data': Path(out).parent}, Path(out).parent, Path(out))\n"
    "launch.run_stage(st, echo=False)",
]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_runner_leaves_no_kernel_and_no_stage(tmp_path, sig):
    (tmp_path / "stage.py").write_text(STAGE)
    out = tmp_path / "stage"
    params = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\nstage = ''\nout = ''\n"
    nb = make_notebook(tmp_path / "01_stage.ipynb", params, NOTEBOOK_BODY)
    runner = subprocess.Popen(
        [PYTHON, "-m", "guirl.runner", str(nb), "-p", "stage", str(tmp_path / "stage.py"), "-p", "out", str(out)],
        env=runner_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    trainer = int(_wait_for(out / "trainer.pid", timeout=240))
    members = group_members(os.getpgid(trainer))
    kernels = _children(runner.pid)  # the notebook's kernel (a session of its own)
    assert kernels and not set(kernels) & set(members)
    os.kill(runner.pid, sig)
    _, err = runner.communicate(timeout=120)
    if sig == signal.SIGTERM:
        assert runner.returncode == 130 and "interrupted" in err, err
    assert _gone(members, timeout=60) == [], f"stage left running after {sig.name} to the runner"
    assert _gone(kernels, timeout=60) == [], f"kernel left running after {sig.name} to the runner"


def _children(pid: int) -> list[int]:
    """Live pids whose parent is ``pid`` (``/proc/<pid>/stat``)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and _alive(int(p)):
            try:
                stat = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                out.append(int(p))
    return out
