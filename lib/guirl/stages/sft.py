"""``accelerate launch -m guirl.stages.sft``: grounding pre-training or SFT of one run.

    accelerate launch --config_file configs/accelerate/cpu.yaml -m guirl.stages.sft \\
        --config runs/tiny/01_sft/config.yaml --stage sft --data-dir data/tiny/minigui \\
        --base-model <folder> --output-dir runs/tiny/01_sft/sft

See :mod:`guirl.train.sft` for what each stage trains and what it writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from guirl.config import load_config
from guirl.train.sft import train


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, load the resolved config and train the stage; exit status 0."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="resolved config yaml (written by run_stage)")
    p.add_argument("--stage", required=True, choices=["grounding", "sft"])
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--base-model", required=True, type=Path)
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--input", action="append", default=[], help="other named inputs: none for grounding / SFT")
    a = p.parse_args(argv)
    if a.input:
        p.error(f"--input {a.input[0]!r}: grounding and SFT stages read only --data-dir and --base-model")
    train(load_config(a.config), a.stage, a.data_dir, a.base_model, a.output_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
