"""The shipped tiny base model: pretrained weights of the tiny Qwen2.5-VL, checked and installed.

No small pretrained VLM is available offline, so the repository pretrains its tiny Qwen2.5-VL on
MiniGUI (notebook ``09_tiny_pretraining``, :mod:`guirl.env.pretraining`) and ships the weights in
``guirl/assets/tiny_base/``:

* ``model.safetensors``: the weights, float32, under the published Qwen2.5-VL key names (at most
  :data:`MAX_BYTES`);
* ``tiny_base.json``: what :func:`tiny_base_dir` checks (the weights' sha256, the
  :class:`~guirl.models.tiny.TinySpec`, the build seed, the tokenizer's sha256) and what the card
  says (the recipe, data, hardware, wall time, probe results, the rebuild command);
* ``MODEL_CARD.md``: the card, written from ``tiny_base.json`` by :func:`write_card`.

``model.path: tiny-base`` (the tiny profile's default) loads it; ``model.path: tiny`` is the same
architecture with random weights (:func:`guirl.models.tiny.build_tiny_model`).
:func:`tiny_base_dir` turns the one shipped file into a checkpoint folder: the tokenizer, image
processor, chat template and config of :func:`~guirl.models.tiny.build_tiny_model` for the recorded
spec, with the shipped weights, after checking the sha256 of the weights and of the tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from guirl.models.tiny import MARKER_NAME, TinySpec, build_once, build_tiny_model, default_cache_dir

WEIGHTS_FILE = "model.safetensors"
META_FILE = "tiny_base.json"
CARD_FILE = "MODEL_CARD.md"
#: The most a shipped checkpoint may weigh, in bytes (25 MB).
MAX_BYTES = 25 * 1000 * 1000
#: The command that rebuilds the shipped checkpoint from the repository.
REBUILD_COMMAND = "make tiny-base"
#: The ``model.path`` values of the tiny profile: pretrained (shipped) or random weights.
TINY_BASE_PATH = "tiny-base"
TINY_RANDOM_PATH = "tiny"


class TinyBaseError(RuntimeError):
    """The shipped base model is missing, corrupt or does not fit this library."""


def shipped_dir() -> Path:
    """``guirl/assets/tiny_base`` (a folder inside the installed package)."""
    return Path(str(resources.files("guirl.assets").joinpath("tiny_base")))


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tokenizer_sha256(folder: str | os.PathLike[str]) -> str:
    """sha256 of the vocabulary, merges and added tokens in a checkpoint folder's ``tokenizer.json``
    (what the weights' rows mean; the file's other settings and its layout, which a processor's
    ``save_pretrained`` rewrites, do not count)."""
    tok = json.loads((Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))
    model = tok.get("model", {})
    payload = {
        "vocab": model.get("vocab"),
        "merges": [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])],
        "added": sorted((t["id"], t["content"]) for t in tok.get("added_tokens", [])),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def read_meta(folder: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``tiny_base.json`` of ``folder`` (default :func:`shipped_dir`); :class:`TinyBaseError` naming
    the file and the fix when it is missing or not valid."""
    path = Path(folder or shipped_dir()) / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TinyBaseError(f"{path}: missing; rebuild the tiny base model with `{REBUILD_COMMAND}`") from None
    except (OSError, ValueError) as e:
        raise TinyBaseError(f"{path}: not valid JSON ({e}); restore it from git or run `{REBUILD_COMMAND}`") from None
    missing = [k for k in ("sha256", "spec", "seed", "tokenizer_sha256") if k not in meta]
    if missing:
        raise TinyBaseError(f"{path}: lacks {missing}; restore it from git or run `{REBUILD_COMMAND}`")
    return meta


def verify(folder: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Check the shipped weights against ``tiny_base.json`` (present, at most :data:`MAX_BYTES`,
    the recorded sha256) and return the metadata; :class:`TinyBaseError` naming the file otherwise."""
    root = Path(folder or shipped_dir())
    meta = read_meta(root)
    weights = root / WEIGHTS_FILE
    if not weights.is_file():
        raise TinyBaseError(f"{weights}: missing; restore it from git or run `{REBUILD_COMMAND}`")
    size = weights.stat().st_size
    if size > MAX_BYTES:
        raise TinyBaseError(f"{weights}: {size} bytes, over the {MAX_BYTES}-byte limit of a shipped checkpoint")
    got = file_sha256(weights)
    if got != meta["sha256"]:
        raise TinyBaseError(
            f"{weights}: sha256 {got[:16]}... differs from {META_FILE}'s {str(meta['sha256'])[:16]}... "
            f"(a corrupt or replaced file); restore it from git (git lfs / a full clone) or run `{REBUILD_COMMAND}`"
        )
    return meta


def spec_of(meta: dict[str, Any]) -> TinySpec:
    """The :class:`TinySpec` recorded in ``tiny_base.json`` (lists back to tuples)."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["spec"].items()}
    try:
        return TinySpec(**fields)
    except TypeError as e:
        raise TinyBaseError(f"{META_FILE}: its spec does not fit this library's TinySpec ({e})") from None


def tiny_base_dir(
    cache_dir: str | os.PathLike[str] | None = None, *, source: str | os.PathLike[str] | None = None
) -> Path:
    """A checkpoint folder of the shipped base model, built once into the model cache.

    ``source``: the folder holding the three files (default :func:`shipped_dir`). The folder is
    ``<cache>/tiny-base-<sha256[:12]>``: the files of :func:`build_tiny_model` for the recorded spec
    and seed, with the shipped weights. Raises :class:`TinyBaseError` when the weights fail
    :func:`verify` or the tokenizer this library builds differs from the one they were trained with.
    """
    src = Path(source or shipped_dir())
    meta = verify(src)
    spec = spec_of(meta)
    parent = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    skeleton = build_tiny_model(parent, seed=int(meta["seed"]), spec=spec)
    tok = tokenizer_sha256(skeleton)
    if tok != meta["tokenizer_sha256"]:
        raise TinyBaseError(
            f"{src / META_FILE}: the base was trained with tokenizer {str(meta['tokenizer_sha256'])[:16]}..., this "
            f"library builds {tok[:16]}... (other tokenizers / transformers versions than "
            f"requirements/constraints.txt, or a changed corpus); install the pinned versions or run `{REBUILD_COMMAND}`"
        )
    key = str(meta["sha256"])

    def write(tmp: Path) -> None:
        for f in skeleton.iterdir():
            if f.name not in (WEIGHTS_FILE, MARKER_NAME) and f.is_file():
                shutil.copy2(f, tmp / f.name)
        shutil.copyfile(src / WEIGHTS_FILE, tmp / WEIGHTS_FILE)
        marker = {"key": key, "source": str(src), "spec": meta["spec"], "seed": meta["seed"], "kind": "tiny-base"}
        (tmp / MARKER_NAME).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")

    return build_once(parent / f"tiny-base-{key[:12]}", key, write)


def install(
    trained: str | os.PathLike[str],
    meta: dict[str, Any],
    dest: str | os.PathLike[str] | None = None,
) -> Path:
    """Copy a trained checkpoint folder's weights into ``dest`` (default :func:`shipped_dir`) as the
    shipped base, with ``tiny_base.json`` (``meta`` plus the sha256 and size of the weights and the
    tokenizer's sha256) and ``MODEL_CARD.md``. ``meta`` must hold ``spec`` and ``seed``.
    Returns ``dest``."""
    src = Path(trained)
    weights = src / WEIGHTS_FILE
    if not weights.is_file():
        raise TinyBaseError(f"{src}: no {WEIGHTS_FILE} (a sharded or adapter-only checkpoint cannot be shipped)")
    size = weights.stat().st_size
    if size > MAX_BYTES:
        raise TinyBaseError(f"{weights}: {size} bytes, over the {MAX_BYTES}-byte limit of a shipped checkpoint")
    out = Path(dest or shipped_dir())
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{WEIGHTS_FILE}.tmp"
    shutil.copyfile(weights, tmp)
    full = {
        **meta,
        "sha256": file_sha256(tmp),
        "bytes": size,
        "tokenizer_sha256": tokenizer_sha256(src),
        "rebuild": REBUILD_COMMAND,
    }
    tmp.replace(out / WEIGHTS_FILE)
    (out / META_FILE).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_card(out)
    return out


def install_from_run(stage_dir: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None) -> Path:
    """Install the base a ``pretrain`` stage trained: ``stage_dir`` holds its ``result.json`` (the
    trained folder in ``final``) and ``card_meta.json`` (what notebook 09 measured). Returns ``dest``."""
    root = Path(stage_dir)
    try:
        result = json.loads((root / "result.json").read_text(encoding="utf-8"))
        meta = json.loads((root / "card_meta.json").read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise TinyBaseError(
            f"{e.filename}: missing; run notebook 09 with pretrain.rebuild=true first (`{REBUILD_COMMAND}` does both)"
        ) from None
    except ValueError as e:
        raise TinyBaseError(f"{root}: a torn result.json or card_meta.json ({e}); rerun `{REBUILD_COMMAND}`") from None
    return install(Path(result["final"]), meta, dest)


def _table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["(none recorded)"]
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return out


def write_card(folder: str | os.PathLike[str] | None = None) -> Path:
    """Write ``MODEL_CARD.md`` from ``tiny_base.json`` (every number on the card comes from it)."""
    root = Path(folder or shipped_dir())
    m = read_meta(root)
    spec = m["spec"]
    lines = [
        "# tiny-base: the pretrained tiny Qwen2.5-VL of the tiny profile",
        "",
        "Written by `guirl.models.tiny_base.write_card` from `tiny_base.json`; do not edit by hand.",
        "",
        "## What it is",
        "",
        f"* Architecture: Qwen2.5-VL, {m.get('parameters', '?')} parameters: text {spec['text_layers']} layers x "
        f"{spec['text_hidden_size']} wide ({spec['text_heads']} heads, {spec['text_kv_heads']} KV heads), vision "
        f"{spec['vision_depth']} blocks x {spec['vision_hidden_size']} wide (full attention in blocks "
        f"{spec['vision_fullatt_block_indexes']}, windows of {spec['window_size']} px), vocabulary "
        f"{m.get('vocab_size', '?')} (byte-level BPE of `guirl.models.corpus`).",
        f"* Weights: `{WEIGHTS_FILE}`, float32, {m.get('bytes', '?')} bytes, sha256 `{m['sha256']}`; tokenizer "
        f"sha256 `{m['tokenizer_sha256']}`; initial weights from seed {m['seed']}.",
        "* Loaded by `model.path: tiny-base` (the tiny profile's default); `model.path: tiny` is the same "
        "architecture with random weights.",
        "",
        "## How it was trained",
        "",
        f"* Data: {m.get('data', '?')}",
        f"* Recipe: {m.get('recipe', '?')}",
        f"* Hardware: {m.get('hardware', '?')}; wall time {m.get('train_seconds', '?')} s of training "
        f"({m.get('wall_seconds', '?')} s for the whole rebuild).",
        f"* Rebuild: `{m.get('rebuild', REBUILD_COMMAND)}` (notebook `09_tiny_pretraining` with "
        "`pretrain.rebuild=true`, then installs the weights and this card).",
        "",
        "## Probes (held-out MiniGUI screens and goals, never seen in pretraining)",
        "",
        *_table(list(m.get("probes", []))),
        "",
        "Exact-match accuracy in % with a 95% bootstrap interval over probe samples; `ground_label` counts a "
        "click inside the labelled element's box. Regenerated by `make nb-09_tiny_pretraining` "
        "(`figures/tiny/09_tiny_pretraining/probes.md`).",
        "",
    ]
    path = root / CARD_FILE
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


__all__ = [
    "CARD_FILE",
    "MAX_BYTES",
    "META_FILE",
    "REBUILD_COMMAND",
    "TINY_BASE_PATH",
    "TINY_RANDOM_PATH",
    "TinyBaseError",
    "WEIGHTS_FILE",
    "file_sha256",
    "install",
    "install_from_run",
    "main",
    "read_meta",
    "shipped_dir",
    "spec_of",
    "tiny_base_dir",
    "tokenizer_sha256",
    "verify",
    "write_card",
]


def main(argv: list[str] | None = None) -> int:
    """``python -m guirl.models.tiny_base install STAGE_DIR [--dest DIR]`` / ``verify [DIR]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m guirl.models.tiny_base", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help="install a pretrain stage's weights as the shipped base, with its card")
    i.add_argument("stage_dir", help="runs/tiny/09_tiny_pretraining/pretrain")
    i.add_argument("--dest", default=None, help="default: the package's assets/tiny_base")
    v = sub.add_parser("verify", help="check the shipped weights against tiny_base.json")
    v.add_argument("folder", nargs="?", default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "install":
            out = install_from_run(args.stage_dir, args.dest)
            meta = read_meta(out)
            print(f"installed {out / WEIGHTS_FILE} ({meta['bytes']} bytes, sha256 {meta['sha256']})")
        else:
            meta = verify(args.folder)
            print(f"ok: sha256 {meta['sha256']}")
    except TinyBaseError as e:
        print(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
