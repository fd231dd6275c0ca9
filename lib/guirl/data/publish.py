"""Shared data folders published whole: a reader never sees a folder half-built or mixed.

A data folder that one notebook builds and others read (MiniGUI's ``data/<profile>/minigui``, a
converted public data set ``data/<profile>/<source>``) is a symbolic link to a **version**, a
sibling folder ``.<name>.v<time>-<pid>`` that is never changed once published:

* a build (:func:`build_lock`, then :func:`publish`) writes a new version folder, which no reader
  can see, and only when it is complete points the link at it (a new link renamed over the old
  one: atomic); a build that stops half-way leaves an unlinked folder, removed by the next build;
* a reader resolves the link once (:func:`use_published`) and reads that version for as long as
  it runs (the process holds a shared ``flock`` on ``.<version>.lock``), so a rebuild meanwhile
  changes nothing it reads: it never sees mixed or short data;
* a build removes the old versions that no process holds any more.

Two builds of the same folder take turns (``<name>.build.lock``, an exclusive ``flock``; the
second waits, then sees the first one's result).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["PublishError", "build_lock", "publish", "use_published", "versions"]

#: Seconds a build waits for another build of the same folder before giving up.
BUILD_WAIT_S = 3600.0
_held: dict[Path, IO[str]] = {}  # version -> the open lock file holding its shared flock


class PublishError(RuntimeError):
    """A data folder that cannot be published or read (one line naming it and what to do)."""


def _version_lock(version: Path) -> Path:
    return version.with_name(version.name + ".lock")


def versions(link: str | Path) -> list[Path]:
    """The version folders of ``link`` (published or not), oldest first."""
    link = Path(link)
    return sorted(
        (p for p in link.parent.glob(f".{link.name}.v*") if p.is_dir() and not p.name.endswith(".lock")),
        key=lambda p: p.name,
    )


def use_published(link: str | Path) -> Path | None:
    """The version folder ``link`` points to, held for reading by this process until it exits
    (a shared ``flock``: a later build leaves it in place); ``None`` when nothing is published.
    A folder ``link`` that is a plain folder (written before folders were published) is
    returned as it is."""
    link = Path(link)
    for _ in range(100):
        if not link.exists():
            return None
        if not link.is_symlink():
            return link
        version = link.resolve()
        if version in _held:
            if version.is_dir():
                return version
            _held.pop(version).close()
        lock = open(_version_lock(version), "a+", encoding="utf-8")  # noqa: SIM115 - held while the process reads
        fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
        if version.is_dir():  # not removed between resolving the link and locking it
            _held[version] = lock
            return version
        lock.close()
    raise PublishError(f"{link}: the folder it points to keeps changing; retry once the build is done")


@contextlib.contextmanager
def build_lock(link: str | Path, wait: float = BUILD_WAIT_S) -> Iterator[None]:
    """Hold the right to build ``link`` (an exclusive ``flock`` on ``<link>.build.lock``); wait
    up to ``wait`` seconds for another build, then raise :class:`PublishError` naming it."""
    link = Path(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    path = link.with_name(link.name + ".build.lock")
    with open(path, "a+", encoding="utf-8") as f:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    f.seek(0)
                    raise PublishError(
                        f"{link}: another process ({f.read().strip() or 'unknown'}) has been building it for more than "
                        f"{wait:g} s ({path}); wait for it or stop it"
                    ) from None
                time.sleep(0.2)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def publish(link: str | Path, build: Callable[[Path], Any]) -> Path:
    """Build a new version of ``link`` with ``build(folder)`` and point ``link`` at it atomically;
    returns the version (held for reading: :func:`use_published`). Call it under
    :func:`build_lock`. Versions nobody holds any more, and folders of builds that stopped, are
    removed; a plain folder at ``link`` becomes the first old version."""
    link = Path(link)
    version = link.with_name(f".{link.name}.v{time.time_ns():020d}-{os.getpid()}")
    version.mkdir(parents=True)
    try:
        build(version)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    if link.exists() and not link.is_symlink():  # a plain folder from before: kept aside as a version
        os.replace(link, link.with_name(f".{link.name}.v{0:020d}-plain-{os.getpid()}"))
    tmp = link.with_name(f".{link.name}.link-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(version.name, tmp)
    os.replace(tmp, link)  # readers see the old version or the new one, never neither
    held = use_published(link)
    _remove_unused(link, keep=version)
    return held if held is not None else version


def _remove_unused(link: Path, keep: Path) -> None:
    """Remove the versions of ``link`` other than ``keep`` that no process holds."""
    for old in versions(link):
        if old.resolve() == keep.resolve() or old.resolve() in _held:
            continue
        lock_path = _version_lock(old)
        with open(lock_path, "a+", encoding="utf-8") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a reader still reads it: removed by a later build
                continue
            shutil.rmtree(old, ignore_errors=True)
            lock_path.unlink(missing_ok=True)
