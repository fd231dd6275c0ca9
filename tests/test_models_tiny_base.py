"""Tests for guirl.models.tiny_base: the shipped pretrained tiny model (sha256 checked, clear errors
on a missing or corrupt file) and the random-init option of the tiny profile."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from guirl.config import load_config
from guirl.models import build_tiny_model, load_model
from guirl.models.tiny_base import (
    CARD_FILE,
    MAX_BYTES,
    META_FILE,
    WEIGHTS_FILE,
    TinyBaseError,
    file_sha256,
    install,
    install_from_run,
    main,
    read_meta,
    shipped_dir,
    spec_of,
    tiny_base_dir,
    verify,
)
from guirl.studies.shared.inputs import base_model_dir


@pytest.fixture(scope="module")
def random_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight tiny build (seed 7) standing in for a trained base."""
    return build_tiny_model(tmp_path_factory.mktemp("models"), seed=7)


def _meta(folder: Path) -> dict:
    marker = json.loads((folder / "guirl_build.json").read_text())
    return {"spec": marker["spec"], "seed": marker["seed"], "probes": [{"skill": "read_point", "accuracy": 1.0}]}


@pytest.fixture
def shipped(tmp_path: Path, random_folder: Path) -> Path:
    return install(random_folder, _meta(random_folder), tmp_path / "tiny_base")


# ------------------------------------------------------------------------ the shipped checkpoint
def test_the_shipped_checkpoint_is_one_checked_file_with_a_card() -> None:
    root = shipped_dir()
    meta = verify()  # sha256 of the weights equals tiny_base.json's
    weights = root / WEIGHTS_FILE
    assert weights.stat().st_size <= MAX_BYTES == 25_000_000
    assert [p.name for p in root.iterdir() if p.suffix == ".safetensors"] == [WEIGHTS_FILE]
    card = (root / CARD_FILE).read_text()
    assert meta["sha256"] in card and "make tiny-base" in card
    assert {"read_point", "ground_label", "copy_screen", "copy_goal"} <= {p["skill"] for p in meta["probes"]}


def test_the_tiny_profile_starts_from_the_shipped_base_and_random_init_stays_an_option() -> None:
    cfg = load_config("tiny")
    assert cfg.model.path == "tiny-base" and cfg.model.is_tiny and cfg.model.is_tiny_base
    base = base_model_dir(cfg)
    assert file_sha256(base / WEIGHTS_FILE) == read_meta()["sha256"]
    rnd_cfg = load_config("tiny", overrides=["model.path=tiny"])
    assert rnd_cfg.model.is_tiny and not rnd_cfg.model.is_tiny_base
    rnd = base_model_dir(rnd_cfg)
    a, b = load_file(str(base / WEIGHTS_FILE)), load_file(str(rnd / WEIGHTS_FILE))
    assert a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)  # one architecture
    assert any(not torch.equal(a[k], b[k]) for k in a)  # other weights
    assert json.loads((rnd / "config.json").read_text()) == json.loads((base / "config.json").read_text())


# ------------------------------------------------------------------------ loading and its errors
def test_install_then_load_gives_the_installed_weights(shipped: Path, random_folder: Path, tmp_path: Path) -> None:
    meta = verify(shipped)
    assert meta["sha256"] == file_sha256(random_folder / WEIGHTS_FILE)
    assert spec_of(meta) == spec_of(json.loads((random_folder / "guirl_build.json").read_text()))
    folder = tiny_base_dir(tmp_path / "cache", source=shipped)
    assert folder.name == f"tiny-base-{meta['sha256'][:12]}"
    model = load_model(folder)
    want = load_file(str(random_folder / WEIGHTS_FILE))
    got = model.state_dict()
    assert all(torch.equal(got[k], v) for k, v in want.items() if k in got)
    assert tiny_base_dir(tmp_path / "cache", source=shipped) == folder  # built once, then reused
    assert "read_point" in (shipped / CARD_FILE).read_text()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("corrupt", r"model\.safetensors: sha256 .* differs .* corrupt or replaced"),
        ("missing_weights", r"model\.safetensors: missing; restore it from git or run `make tiny-base`"),
        ("missing_meta", r"tiny_base\.json: missing; rebuild the tiny base model with `make tiny-base`"),
        ("torn_meta", r"tiny_base\.json: not valid JSON"),
        ("meta_without_sha", r"tiny_base\.json: lacks \['sha256'\]"),
        ("too_big", r"over the 25000000-byte limit"),
    ],
)
def test_a_damaged_checkpoint_is_named_with_the_fix(shipped: Path, tmp_path: Path, damage: str, message: str) -> None:
    weights, meta = shipped / WEIGHTS_FILE, shipped / META_FILE
    if damage == "corrupt":
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif damage == "missing_weights":
        weights.unlink()
    elif damage == "missing_meta":
        meta.unlink()
    elif damage == "torn_meta":
        meta.write_text(meta.read_text()[:40])
    elif damage == "meta_without_sha":
        m = json.loads(meta.read_text())
        del m["sha256"]
        meta.write_text(json.dumps(m))
    elif damage == "too_big":
        with weights.open("ab") as f:
            f.truncate(MAX_BYTES + 1)
    with pytest.raises(TinyBaseError, match=message):
        tiny_base_dir(tmp_path / "cache", source=shipped)
    assert main(["verify", str(shipped)]) == 1


def test_a_tokenizer_other_than_the_trained_one_is_refused(shipped: Path, tmp_path: Path) -> None:
    meta = json.loads((shipped / META_FILE).read_text())
    meta["tokenizer_sha256"] = "0" * 64
    (shipped / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(TinyBaseError, match="trained with tokenizer 0000000000000000"):
        tiny_base_dir(tmp_path / "cache", source=shipped)


def test_install_from_run_reads_the_stage_and_notebook_files(random_folder: Path, tmp_path: Path) -> None:
    stage = tmp_path / "pretrain"
    stage.mkdir()
    with pytest.raises(TinyBaseError, match="result.json: missing; run notebook 09"):
        install_from_run(stage, tmp_path / "dest")
    shutil.copytree(random_folder, stage / "final")
    (stage / "result.json").write_text(json.dumps({"final": str(stage / "final")}))
    (stage / "card_meta.json").write_text(json.dumps(_meta(random_folder)))
    out = install_from_run(stage, tmp_path / "dest")
    assert verify(out)["sha256"] == file_sha256(random_folder / WEIGHTS_FILE)
    assert main(["verify", str(out)]) == 0
