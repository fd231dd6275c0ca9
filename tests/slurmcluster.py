"""A throwaway single-node SLURM cluster on localhost, for tests.

:class:`LocalSlurm` starts ``munged`` (a fresh key, its own socket), ``slurmctld`` and
``slurmd`` from Debian's ``slurm-wlm`` and ``munge`` packages, with a private ``slurm.conf``
whose state, spool, logs and job-completion file all live in one temporary folder, on free
ports. Clients reach it through ``SLURM_CONF`` (:attr:`LocalSlurm.env`). Accounting goes to a
text file (``JobCompType=jobcomp/filetxt``, no slurmdbd), which ``sacct --completion`` reads.
Completed jobs stay visible to ``squeue --states=all`` for an hour (``MinJobAge``).

:meth:`LocalSlurm.stop` cancels every job, waits for the queue to drain, and stops the three
daemons by their process ids (each in its own process group); it is safe to call twice.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from conftest import stop_group

#: The executables a cluster needs (Debian: ``apt-get install -y slurm-wlm munge``).
REQUIRED = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo")


def missing_programs() -> list[str]:
    """The :data:`REQUIRED` executables that are not on ``PATH`` (``[]``: SLURM is installed)."""
    return [p for p in REQUIRED if shutil.which(p) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_mb() -> int:
    """Physical memory in MB, as slurmd reports it (``RealMemory`` may not exceed it)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


class LocalSlurm:
    """A running single-node cluster in ``root`` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.jobcomp = self.root / "jobcomp.txt"
        self._procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write_conf(self, socket_path: Path) -> None:
        user = os.environ.get("USER") or "root"
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=guirltest",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    f"SlurmUser={user}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={socket_path}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "JobCompType=jobcomp/filetxt",
                    f"JobCompLoc={self.jobcomp}",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "MinJobAge=3600",
                    f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} "
                    f"RealMemory={int(_memory_mb() * 0.9)} State=UNKNOWN",
                    "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
                ]
            )
            + "\n"
        )

    def _start(self, cmd: list[str]) -> None:
        log = (self.root / f"{Path(cmd[0]).name}.out").open("ab")
        self._procs.append(
            subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )

    def start(self, timeout: float = 60.0) -> LocalSlurm:
        """Start munged, slurmctld and slurmd; return when the node is idle (``RuntimeError``
        naming the logs after ``timeout`` seconds)."""
        for sub in ("state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(self.root / sub, 0o700)
        munge = self.root / "munge"
        key, sock = munge / "munge.key", munge / "munge.socket"
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True, capture_output=True)
        os.chmod(key, 0o600)
        self._start(
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={sock}",
                f"--key-file={key}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ]
        )
        self._write_conf(sock)
        deadline = time.monotonic() + timeout
        while not sock.exists():
            self._check_alive(deadline)
            time.sleep(0.1)
        self._start(["slurmctld", "-D", "-f", str(self.conf)])
        self._start(["slurmd", "-D", "-f", str(self.conf), "-N", "localhost"])
        while True:
            self._check_alive(deadline)
            out = self.run(["sinfo", "--noheader", "--format=%t"], check=False).stdout.split()
            if out and out[0] in ("idle", "mix", "alloc"):
                return self
            time.sleep(0.5)

    def _check_alive(self, deadline: float) -> None:
        dead = [p.args[0] for p in self._procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else "the node did not become idle"
            raise RuntimeError(f"local SLURM cluster: {why}; logs in {self.root}")

    def run(self, cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
        """A SLURM client command against this cluster (text output)."""
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def states(self) -> dict[str, tuple[str, str]]:
        """job id -> (state, reason) of every job, finished ones included."""
        out = self.run(["squeue", "--noheader", "--states=all", "--format=%i|%T|%r"]).stdout
        return {i: (s, r) for i, s, r in (line.split("|", 2) for line in out.splitlines() if line.count("|") == 2)}

    def wait(self, job_ids: list[str], timeout: float) -> dict[str, tuple[str, str]]:
        """Wait until none of ``job_ids`` is pending or running; returns their (state, reason)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            got = {i: states.get(i, ("UNKNOWN", "")) for i in job_ids}
            if all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for s, _ in got.values()):
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still queued after {timeout:g} s: {got}")
            time.sleep(1.0)

    def stop(self) -> None:
        """Cancel every job, wait up to 30 s for the queue to drain, stop the daemons."""
        if any(p.poll() is None for p in self._procs):
            self.run(["scancel", "--full", "--me"], check=False)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    live = [s for s, _ in self.states().values() if s in ("PENDING", "RUNNING", "COMPLETING")]
                except (subprocess.SubprocessError, OSError):  # the controller is gone: nothing to wait for
                    break
                if not live:
                    break
                time.sleep(0.5)
        for proc in reversed(self._procs):  # slurmd, slurmctld, munged
            if proc.poll() is None:
                stop_group(proc, timeout=15)
        self._procs.clear()
