"""scripts/bench_gpu.py (``make bench-gpu``) on the CPU: the mid architecture, small screens, the
tiny profile's prompts; every setting's row is written, with consistent tokens, speedups and MFU."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import pytest

from conftest import REPO, make_dry_run

SCRIPT = REPO / "scripts" / "bench_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CPU_ARGS = ["--device", "cpu", "--archs", "mid", "--profile", "tiny", "--screen", "140x252", "--repeats", "1"]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 6-12 minutes on this project's 2-core machines under other jobs' load (8 steps)
def test_cpu_run_writes_every_setting(bench, tmp_path: Path, capsys) -> None:
    assert bench.main([*CPU_ARGS, "--max-pixels", "50176", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + printed)
    rows = json.loads((tmp_path / "mid.json").read_text())["rows"]
    assert [(r["history"], r["side"]) for r in rows] == [
        ("1AO", "full"),
        ("1AO", "CASC"),
        ("3AO", "full"),
        ("3AO", "CASC"),
    ]
    with (tmp_path / "bench.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 4 and set(table[0]) == set(bench.COLUMNS)
    by = {(r["history"], r["side"]): r for r in rows}
    assert by[("3AO", "full")]["images"] == 4 and by[("1AO", "full")]["images"] == 2
    assert by[("3AO", "full")]["prompt_tokens"] > by[("1AO", "full")]["prompt_tokens"]
    for r in rows:
        assert r["arch"] == "mid" and r["device"] == "cpu" and r["checkpointing"] == "off"
        assert r["prompt_tokens"] > r["visual_tokens"] > 0 and r["step_s"] > 0 and r["peak_gib"] > 0
        assert 0 < r["vision_share"] < 1 and r["train_tflops"] > 0 and math.isfinite(r["mfu"]) and r["mfu"] > 0
        assert r["speedup"] == (1.0 if r["side"] == "full" else by[(r["history"], "full")]["step_s"] / r["step_s"])
        if r["side"] == "CASC":  # crops never add tokens
            assert r["prompt_tokens"] <= by[(r["history"], "full")]["prompt_tokens"]
    assert "mid  3AO  full" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--archs", "9b"], "no config.json in"),  # an architecture without a config
        (["--device", "cuda"], "torch sees no GPU"),  # this machine has none
    ],
)
def test_bad_arguments_are_refused(bench, argv: list[str], message: str, capsys) -> None:
    import torch

    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert bench.main(["--device", "cpu", *argv] if "--device" not in argv else argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("every, label", [(None, "off"), (1, "every layer"), (2, "1 in 2 layers")])
def test_checkpoint_labels(bench, every, label: str) -> None:
    assert bench.checkpoint_label(every) == label


@pytest.mark.parametrize("text, size", [("1080x2400", (1080, 2400)), ("140X252", (140, 252))])
def test_screen_sizes_parse(bench, text: str, size: tuple[int, int]) -> None:
    assert bench.parse_size(text) == size


@pytest.mark.parametrize("text", ["1080", "0x10", "axb"])
def test_bad_screen_sizes_are_refused(bench, text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="WIDTHxHEIGHT|positive"):
        bench.parse_size(text)


def test_make_target_runs_the_script() -> None:
    out = make_dry_run("bench-gpu", "BENCH_ARGS=--archs 3b")
    assert "scripts/bench_gpu.py --archs 3b" in out
