"""Where the repository keeps its inputs and outputs.

Every path the notebooks and the runner write to comes from here, so that tests (and users
with a scratch disk) can redirect all outputs with environment variables:

=================  ===========================  =========================================
variable           default                      used by
=================  ===========================  =========================================
``GUIRL_RUNS``     ``<repo>/runs``              executed notebooks, checkpoints, logs
``GUIRL_FIGURES``  ``<repo>/figures``           tables and figures (:mod:`guirl.report`)
``GUIRL_DATA``     ``<repo>/data``              generated and downloaded data sets
``GUIRL_CACHE``    ``<repo>/.cache``            rebuildable caches (tiny model, ...)
=================  ===========================  =========================================

Outputs are per profile: ``runs_dir("tiny") == <runs>/tiny``. The functions only compute
paths; nothing here creates a folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "repo_root",
    "resolve_repo_path",
    "configs_dir",
    "notebooks_dir",
    "runs_dir",
    "figures_dir",
    "data_dir",
    "cache_dir",
    "restore_environ",
]

_PROFILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def repo_root(start: Path | str | None = None) -> Path:
    """The repository root: the first folder, walking up from ``start``, with a ``pyproject.toml``.

    ``start`` defaults to this file's folder, which inside an editable install is the
    checkout's ``lib/guirl``. Raises ``FileNotFoundError`` when no ancestor has one.
    """
    here = Path(start if start is not None else __file__).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError(
        f"no pyproject.toml above {here}; guirl must run from a checkout of the repository "
        "(install it with `make setup`, which runs `pip install -e .`)"
    )


def resolve_repo_path(path: str | Path) -> Path:
    """An absolute path: ``path`` itself if absolute, else relative to the repository root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else repo_root() / p


def _env_dir(var: str, default: Path) -> Path:
    value = os.environ.get(var, "").strip()
    return Path(value).expanduser().resolve() if value else default


def _check_profile(profile: str) -> str:
    if not isinstance(profile, str) or not _PROFILE_RE.match(profile):
        raise ValueError(f"profile {profile!r} is not a valid folder name; use letters, digits, '-', '_' or '.'")
    return profile


def configs_dir() -> Path:
    """``<repo>/configs``: profiles, experiments, accelerate and DeepSpeed files."""
    return repo_root() / "configs"


def notebooks_dir() -> Path:
    """``<repo>/notebooks``: the committed, output-free notebooks."""
    return repo_root() / "notebooks"


def runs_dir(profile: str) -> Path:
    """Executed notebooks and training outputs of one profile: ``$GUIRL_RUNS/<profile>``."""
    return _env_dir("GUIRL_RUNS", repo_root() / "runs") / _check_profile(profile)


def figures_dir(profile: str) -> Path:
    """Tables and figures of one profile: ``$GUIRL_FIGURES/<profile>``."""
    return _env_dir("GUIRL_FIGURES", repo_root() / "figures") / _check_profile(profile)


def data_dir(profile: str) -> Path:
    """Data sets of one profile: ``$GUIRL_DATA/<profile>``."""
    return _env_dir("GUIRL_DATA", repo_root() / "data") / _check_profile(profile)


def cache_dir() -> Path:
    """Rebuildable caches shared by all profiles: ``$GUIRL_CACHE`` (default ``<repo>/.cache``)."""
    return _env_dir("GUIRL_CACHE", repo_root() / ".cache")


def restore_environ(saved: dict[str, str | None]) -> None:
    """Put environment variables back as ``saved`` recorded them (``{name: value}``; ``None``: the
    variable was unset, so it is removed)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
