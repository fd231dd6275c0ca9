"""Content hashes of files, folders and library modules (base layer), and atomic JSON writes.

What a training stage or a notebook depends on is recorded by *content*, never by path: a data
folder rebuilt in place with other records, or a model folder retrained at the same path, has
another digest. Hashing a model folder of several GB, or a data set of 100,000 screenshots, takes
minutes, so digests are cached in ``$GUIRL_CACHE/content_hashes.json``: a folder's by its listing
(every file's relative path, size, mtime_ns and inode), a file's (of :data:`CACHE_MIN_BYTES` and
more) by the same of its own. A file that was rewritten has a new mtime (or size, or inode) and is
hashed again; an unchanged folder costs a ``stat`` per file.

* :func:`file_sha256`: one file; :func:`folder_digest`: a folder (every file under it, by relative
  path and content; symbolic links followed), or a file's sha256 when given a file;
* :func:`module_hashes`: the ``guirl`` modules a process imported (``sys.modules``), each with the
  sha256 of its source file, so that a stage is rerun only when code it ran changed
  (:func:`changed_modules`);
* :func:`write_json_atomic`: a JSON state file written to a temporary file beside it, flushed and
  renamed over it, so a crash leaves the old file or the new one, never a torn one;
  :func:`read_json_state` reads one back and names a torn or corrupt file with the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_FILE",
    "StateFileError",
    "file_sha256",
    "folder_digest",
    "module_hashes",
    "changed_modules",
    "library_digest",
    "write_json_atomic",
    "read_json_state",
]

#: The cache of file hashes, under ``$GUIRL_CACHE``.
CACHE_FILE = "content_hashes.json"
#: Files smaller than this are hashed every time (reading them costs about what a cache entry does).
CACHE_MIN_BYTES = 1 << 20
_lock = threading.Lock()
_memo: dict[str, list[Any]] = {}
_loaded: Path | None = None
_dirty = False


class StateFileError(RuntimeError):
    """A state file (fingerprint, result, stamp) that cannot be read: one line naming it and the fix."""


def _cache_path() -> Path:
    from guirl.paths import cache_dir

    return cache_dir() / CACHE_FILE


def _load_cache() -> None:
    global _loaded
    path = _cache_path()
    if _loaded == path:
        return
    _memo.clear()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if isinstance(data, dict):
        # entries of files and folders that are gone (a deleted checkpoint) are dropped
        _memo.update(
            {
                k: v
                for k, v in data.items()
                if isinstance(v, list) and len(v) == 2 and os.path.exists(k.removeprefix("dir:"))
            }
        )
    _loaded = path


def _save_cache() -> None:
    global _dirty
    if not _dirty or _loaded is None:
        return
    try:
        write_json_atomic(_loaded, _memo, indent=None)
    except OSError:  # a read-only cache folder: hashes are recomputed next time
        return
    _dirty = False


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cached_sha256(path: Path) -> str:
    global _dirty
    path = path.resolve()
    st = path.stat()
    if st.st_size < CACHE_MIN_BYTES:  # cheaper to read than to keep
        return _sha256_of(path)
    key = _stat_key(st)
    hit = _memo.get(str(path))
    if hit is not None and hit[0] == key:
        return str(hit[1])
    digest = _sha256_of(path)
    _memo[str(path)] = [key, digest]
    _dirty = True
    return digest


def file_sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, cached by path, size, mtime and inode."""
    with _lock:
        _load_cache()
        digest = _cached_sha256(Path(path))
        _save_cache()
    return digest


def folder_digest(path: str | Path) -> str:
    """sha256 (hex) over every file under ``path`` (sorted relative paths and file contents; links
    followed): equal for two folders with the same files, whatever their location. A file gives
    its :func:`file_sha256`; a missing path raises ``FileNotFoundError`` naming it.

    Cached by the folder's listing (every file's relative path, size, mtime and inode): a folder
    whose files were not touched costs one ``stat`` per file, none is read again."""
    global _dirty
    root = Path(path)
    if root.is_file():
        return file_sha256(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such file or folder (a stage input or base model)")
    listing = []
    for p in root.rglob("*"):
        try:
            if p.is_file():
                listing.append((p.relative_to(root).as_posix(), p, _stat_key(p.stat())))
        except FileNotFoundError:  # removed while listing (a temporary file renamed): not part of it
            continue
    listing.sort(key=lambda item: item[0].encode("utf-8"))
    signature = hashlib.sha256("\n".join(f"{rel}\0{key}" for rel, _, key in listing).encode("utf-8")).hexdigest()
    with _lock:
        _load_cache()
        key = "dir:" + str(root.resolve())
        hit = _memo.get(key)
        if hit is not None and hit[0] == signature:
            return str(hit[1])
        h = hashlib.sha256()
        for rel, p, _ in listing:
            try:
                digest = _cached_sha256(p)
            except FileNotFoundError:
                continue
            h.update(rel.encode("utf-8") + b"\0")
            h.update(digest.encode("ascii") + b"\0")
        _memo[key] = [signature, h.hexdigest()]
        _dirty = True
        _save_cache()
    return h.hexdigest()


def _module_file(module: Any) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


def module_hashes(package: str = "guirl", modules: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``{module name: sha256 of its source file}`` of every imported module of ``package``
    (``sys.modules`` by default): the library code a process ran."""
    modules = sys.modules if modules is None else modules
    out: dict[str, str] = {}
    for name, module in sorted(modules.items()):
        if name != package and not name.startswith(package + "."):
            continue
        file = _module_file(module)
        if file is not None and file.is_file():
            out[name] = file_sha256(file)
    return out


def changed_modules(recorded: Mapping[str, str], root: str | Path | None = None) -> list[str]:
    """The modules of ``recorded`` (:func:`module_hashes`) whose source now differs or is gone.
    ``root``: the folder holding the ``guirl`` package (default: this checkout's ``lib``)."""
    base = Path(root) if root is not None else Path(__file__).resolve().parent.parent
    changed = []
    for name, digest in sorted(recorded.items()):
        rel = Path(*name.split("."))
        candidates = [base / rel.with_suffix(".py"), base / rel / "__init__.py"]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None or file_sha256(found) != digest:
            changed.append(name)
    return changed


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 1) -> Path:
    """Write ``data`` as JSON to ``path`` atomically: a temporary file in the same folder,
    flushed to disk, then renamed over ``path`` (readers see the old file or the new one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=indent, sort_keys=True, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_json_state(path: str | Path, what: str, fix: str, *, expect: type = dict) -> Any:
    """A JSON state file's content, of type ``expect``; a torn, corrupt or mistyped file raises
    :class:`StateFileError` naming it, ``what`` it is and the ``fix``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise StateFileError(f"{path}: {what} is corrupt (not UTF-8 text: {err.reason}); {fix}") from None
    except ValueError as err:
        raise StateFileError(f"{path}: {what} is torn or corrupt (not JSON: {err}); {fix}") from None
    if not isinstance(data, expect):
        raise StateFileError(
            f"{path}: {what} is corrupt (a JSON {type(data).__name__}, expected a {expect.__name__}); {fix}"
        )
    return data


def _library_files(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    files += [p for p in (root / "assets").rglob("*") if p.is_file()] if (root / "assets").is_dir() else []
    return sorted(set(files), key=lambda p: p.relative_to(root).as_posix())


def library_digest(root: str | Path | None = None) -> str:
    """sha256 (hex) of the library source: every ``*.py`` under ``root`` (default this
    checkout's ``lib/guirl``) and its ``assets/``, by relative path and content."""
    root = Path(root) if root is not None else Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in _library_files(root):
        h.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()
