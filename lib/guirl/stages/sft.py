"""``accelerate launch -m guirl.stages.sft``: grounding pre-training or SFT of one run.

    accelerate launch --config_file configs/accelerate/cpu.yaml -m guirl.stages.sft \\
        --config runs/tiny/01_sft/config.yaml --stage sft --data-dir data/tiny/minigui \\
        --base-model <folder> --output-dir runs/tiny/01_sft/sft

See :mod:`guirl.train.sft` for what each stage trains and what it writes. After training, the
config keys the stage read and the ``guirl`` modules it ran are saved beside the result
(:func:`guirl.train.stagestate.write_reads`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from guirl import timing
from guirl.config import load_config
from guirl.configbase import record_reads
from guirl.stages.rl import parse_inputs
from guirl.train.sft import RECORDS_INPUT, SFT_STAGES, train
from guirl.train.stagestate import write_reads


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, load the resolved config and train the stage; exit status 0."""
    timing.launched()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="resolved config yaml (written by run_stage)")
    p.add_argument("--stage", required=True, choices=list(SFT_STAGES))
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--base-model", required=True, type=Path)
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--input", action="append", default=[], help="NAME=FOLDER_OR_FILE (records: the records JSONL)")
    a = p.parse_args(argv)
    inputs = parse_inputs(a.input)
    extra = sorted(set(inputs) - ({RECORDS_INPUT} if a.stage == "records" else set()))
    if extra:
        p.error(f"--input {extra[0]}: a {a.stage} stage reads no such input (records stages read {RECORDS_INPUT!r})")
    cfg = load_config(a.config)
    reads = record_reads(cfg)  # the keys the stage reads: its fingerprint is checked against them
    train(cfg, a.stage, a.data_dir, a.base_model, a.output_dir, inputs)
    write_reads(a.output_dir, cfg, reads.stop())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
