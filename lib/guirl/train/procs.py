"""Training subprocesses that never outlive their caller, and locks on what they write.

A stage runs as ``python -m guirl.train.procs --parent PID -- <accelerate launch ...>``: this
module's :func:`main` is the leader of a process group of its own (the caller starts it with
``start_new_session``), runs the command in that group and, when it is told to stop (SIGTERM,
SIGINT, SIGHUP) or its caller dies (``PR_SET_PDEATHSIG`` on Linux, also when the caller is
killed with SIGKILL or a notebook kernel exits with ``os._exit``), stops the whole group: SIGTERM,
then SIGKILL after :data:`GRACE_SECONDS`. The command's own process is SIGKILLed when the leader
dies, and the caller stops what is left of the group when the leader ends however it ends (a
leader killed with SIGKILL included), so a trainer never outlives its leader. :func:`start_group` starts it, :func:`stop_group`
stops a group from the caller's side (on the caller's own failure or interruption), and
:func:`stop_all` stops every group this process started.

:class:`FileLock` is an exclusive ``flock`` on a lock file holding the owner's pid: a second
owner is refused with a one-line :class:`LockedError` naming the holder; a lock whose holder died
is free again (the kernel drops a dead process's ``flock``), so a stale lock file is taken over.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Seconds a process group gets between SIGTERM and SIGKILL.
GRACE_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


class LockedError(RuntimeError):
    """Another live process holds the lock (one line naming it and what to do)."""


class FileLock:
    """An exclusive lock on ``path`` (created with its parents), held from :meth:`acquire` (or
    ``with``) until :meth:`release`. The file holds ``{"pid", "host", "since", "what"}`` of the
    holder. ``what`` names the locked thing in the refusal message."""

    def __init__(self, path: str | Path, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._file: IO[str] | None = None

    def acquire(self) -> FileLock:
        """Take the lock or raise :class:`LockedError` naming its holder (never waits)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open while locked
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _holder(f.read())
            f.close()
            raise LockedError(
                f"{self.what} is in use by pid {holder.get('pid', '?')} on {holder.get('host', '?')} "
                f"since {holder.get('since', '?')} ({self.path}); wait for it to finish or stop it "
                f"(kill {holder.get('pid', 'PID')})"
            ) from None
        f.seek(0)
        f.truncate()
        since = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since, "what": self.what}))
        f.flush()
        self._file = f
        return self

    def fileno(self) -> int:
        """The locked file descriptor (a child given it keeps the lock held while it lives)."""
        if self._file is None:
            raise RuntimeError(f"{self.path}: not locked")
        return self._file.fileno()

    def release(self) -> None:
        """Drop the lock (the file stays; it is free for the next owner)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def start_group(cmd: Sequence[str], *, env: Mapping[str, str], pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start ``cmd`` under :func:`main` in a new process group (session), its output (stdout
    and stderr) a text pipe; registered for :func:`stop_all` until :func:`stop_group` or
    :func:`forget`. ``pass_fds`` (e.g. a :class:`FileLock`'s) stay open in the group."""
    wrapper = [sys.executable, "-m", "guirl.train.procs", "--parent", str(os.getpid()), "--", *cmd]
    proc = subprocess.Popen(
        wrapper,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env),
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    with _running_lock:
        _running.add(proc)
    threading.Thread(target=_reap_when_leader_dies, args=(proc,), name=f"reap-{proc.pid}", daemon=True).start()
    return proc


def _reap_when_leader_dies(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """Wait for the group leader (:func:`main`) to end; then stop whatever is left of its group. The
    leader stops its group itself when told to; this covers the leader being killed outright
    (SIGKILL, the OOM killer), which would leave the trainer running with nobody to stop it."""
    proc.wait()
    pgid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + grace
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)


def forget(proc: subprocess.Popen) -> None:
    """``proc`` ended by itself: no longer one of :func:`stop_all`'s."""
    with _running_lock:
        _running.discard(proc)


def stop_group(proc: subprocess.Popen, grace: float = GRACE_SECONDS) -> None:
    """Stop the process group led by ``proc``: SIGTERM, then SIGKILL to whatever is left after
    ``grace`` seconds; waits for ``proc``."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = None if wait is None else time.monotonic() + wait
        while _group_alive(proc.pid) and (deadline is None or time.monotonic() < deadline):
            proc.poll()
            time.sleep(0.05)
        if not _group_alive(proc.pid):
            break
    with contextlib.suppress(subprocess.TimeoutExpired):  # signalled; not waited for beyond the grace time
        proc.wait(timeout=grace)
    forget(proc)


def stop_all(grace: float = GRACE_SECONDS) -> None:
    """Stop every process group :func:`start_group` started that is still registered."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        stop_group(proc, grace)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is left (zombies of a reaped leader excluded)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(_in_group(pid, pgid) for pid in _pids())


def _pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except FileNotFoundError:  # no /proc (macOS): killpg(0) said the group exists
        return [os.getpid()]


def _in_group(pid: int, pgid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) member of ``pgid`` (``/proc/<pid>/stat``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return pid != os.getpid()  # no /proc: assume alive
    fields = stat[stat.rfind(")") + 2 :].split()  # state, ppid, pgrp, ...
    return fields[0] != "Z" and int(fields[2]) == pgid


def group_members(pgid: int) -> list[int]:
    """Live pids of process group ``pgid`` (Linux ``/proc``)."""
    return [pid for pid in _pids() if _in_group(pid, pgid)]


# -------------------------------------------------------------------------------- the leader
def _die_with(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux); exit now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        raise SystemExit(143)


def _child_dies_with_leader() -> None:
    """In the command's process, before it starts: SIGKILL when this leader dies (Linux)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command after ``--`` in this process group; stop the group when told to stop or
    when ``--parent`` dies; exit with the command's status (128 + signal when it was stopped)."""
    p = argparse.ArgumentParser(prog="python -m guirl.train.procs")
    p.add_argument("--parent", type=int, required=True, help="pid of the caller; its death stops the group")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("give the command after --")
    stopping: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    _die_with(a.parent)
    child = subprocess.Popen(cmd, preexec_fn=_child_dies_with_leader if sys.platform.startswith("linux") else None)
    while child.poll() is None and not stopping:
        time.sleep(0.1)
    if not stopping:
        return child.returncode
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline and [pid for pid in group_members(os.getpgrp()) if pid != os.getpid()]:
        child.poll()
        time.sleep(0.1)
    others = [pid for pid in group_members(os.getpgrp()) if pid != os.getpid()]
    for pid in others:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signal.SIGKILL)
    child.poll()
    return 128 + stopping[0]


if __name__ == "__main__":
    sys.exit(main())
