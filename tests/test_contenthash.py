"""guirl.contenthash: content digests of files, folders and library modules (cached by stat), and
atomic JSON state files that name a torn one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from guirl import contenthash as ch


def _tree(root: Path) -> Path:
    for rel, text in {"a.txt": "1", "sub/b.bin": "22", "sub/deep/c": "333"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_folder_digest_follows_content_and_relative_paths_not_location(tmp_path: Path) -> None:
    one = _tree(tmp_path / "one")
    two = tmp_path / "elsewhere" / "two"
    shutil.copytree(one, two)
    assert ch.folder_digest(one) == ch.folder_digest(two)
    (two / "sub" / "b.bin").write_text("23")  # same size, new content
    assert ch.folder_digest(one) != ch.folder_digest(two)
    (two / "sub" / "b.bin").write_text("22")
    (two / "sub" / "b.bin").rename(two / "b.bin")  # same bytes at another relative path
    assert ch.folder_digest(one) != ch.folder_digest(two)
    assert ch.folder_digest(one / "a.txt") == ch.file_sha256(one / "a.txt")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        ch.folder_digest(tmp_path / "missing")


def test_an_unchanged_folder_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path / "f")
    first = ch.folder_digest(root)
    reads: list[Path] = []
    real = ch._sha256_of
    monkeypatch.setattr(ch, "_sha256_of", lambda p: reads.append(p) or real(p))
    assert ch.folder_digest(root) == first and reads == []  # listing unchanged: cached
    (root / "a.txt").write_text("x")
    assert ch.folder_digest(root) != first and reads  # a touched file: read again
    # the cache is a file of its own: a new process finds it
    ch._loaded = None
    reads.clear()
    ch.folder_digest(root)
    assert reads == []


def test_module_hashes_name_what_changed(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "pkg").mkdir(parents=True)
    (lib / "pkg" / "__init__.py").write_text("")
    (lib / "pkg" / "mod.py").write_text("x = 1\n")
    recorded = {"pkg": ch.file_sha256(lib / "pkg" / "__init__.py"), "pkg.mod": ch.file_sha256(lib / "pkg" / "mod.py")}
    assert ch.changed_modules(recorded, lib) == []
    (lib / "pkg" / "other.py").write_text("y = 2\n")  # a module the process never imported
    assert ch.changed_modules(recorded, lib) == []
    (lib / "pkg" / "mod.py").write_text("x = 2\n")
    assert ch.changed_modules(recorded, lib) == ["pkg.mod"]
    (lib / "pkg" / "mod.py").unlink()
    assert ch.changed_modules(recorded, lib) == ["pkg.mod"]
    hashes = ch.module_hashes()
    assert "guirl.contenthash" in hashes and all(name.startswith("guirl") for name in hashes)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "is torn or corrupt (not JSON"),
        (b'{"stage": "sf', "is torn or corrupt (not JSON"),
        (b"[1, 2]", "is corrupt (a JSON list, expected a dict)"),
        (b"\xff\xfe{}", "is corrupt (not UTF-8 text"),
    ],
)
def test_a_torn_state_file_is_named_with_the_fix(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(ch.StateFileError) as err:
        ch.read_json_state(path, "the stage result", "delete it to retrain")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: the stage result {problem}") and text.endswith("retrain")


def test_state_files_are_replaced_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = ch.write_json_atomic(tmp_path / "s" / "state.json", {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    monkeypatch.setattr(ch.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        ch.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}  # the old file, whole
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temporary left behind
