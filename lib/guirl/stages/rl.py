"""``accelerate launch -m guirl.stages.rl``: one RL stage of a run (``docs/rl.md``).

    accelerate launch --config_file configs/accelerate/cpu.yaml -m guirl.stages.rl \\
        --config runs/tiny/02_ccpo_rl/ccpo_1AO/config.yaml --stage ccpo_1AO --data-dir data/tiny/minigui \\
        --base-model <folder> --output-dir runs/tiny/02_ccpo_rl/ccpo_1AO [--input executor=<folder> ...]

Started by :func:`guirl.train.launch.run_stage` for a :class:`~guirl.train.launch.Stage` whose
entry is :data:`guirl.train.rl.RL_ENTRY`. Loads the resolved config, builds the hooks of the RL
role ``rl.role`` (:func:`guirl.methods.get_role`: ``grpo``, or a role of a method's
``Method.hooks`` such as ``semi_online`` or ``ccpo``) from the data folder, the reward
``rl.reward`` and the stage's other named inputs, and runs the engine
(:func:`guirl.train.rl.train_rl`), which resumes from the last checkpoint under
``--output-dir``. ``--base-model`` is a full-weight folder or a LoRA adapter folder (an SFT
result; merged into its base first). After training, the config keys the stage read and the
``guirl`` modules it ran are saved beside the result (:func:`guirl.train.stagestate.write_reads`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from guirl import timing
from guirl.config import load_config

if TYPE_CHECKING:
    from guirl.config import Config
    from guirl.rl.hooks import RLHooks


def parse_inputs(items: list[str] | None) -> dict[str, Path]:
    """``["executor=/a/b", ...]`` -> ``{"executor": Path("/a/b")}``; a malformed item raises
    ``SystemExit`` with a one-line message naming it."""
    out: dict[str, Path] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(
                f"--input {item!r}: write NAME=FOLDER, e.g. --input executor=runs/tiny/01_sft/sft_low/final"
            )
        out[name] = Path(path)
    return out


def hooks_for(cfg: Config, data_dir: Path, inputs: dict[str, Path] | None = None) -> RLHooks:
    """The hooks of ``cfg.rl.role`` (the registry's builder) on ``data_dir`` with ``inputs``."""
    import guirl.methods as methods
    from guirl.rl.hooks import HookInputs

    reward = None if cfg.rl.reward is None else methods.get_reward(cfg.rl.reward)
    builder = methods.get_role(cfg.rl.role)  # a registered role: the config schema checked it
    return builder(cfg, HookInputs(data_dir=Path(data_dir), reward=reward, inputs=dict(inputs or {})))


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, load the resolved config, build the hooks and train; exit status 0."""
    timing.launched()
    with timing.phase("startup", "imports"):
        from guirl.configbase import record_reads
        from guirl.rollout import HFPolicy
        from guirl.train.rl import train_rl
        from guirl.train.stagestate import write_reads

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="resolved config yaml (written by run_stage)")
    p.add_argument("--stage", required=True, help="stage label (e.g. grpo, ccpo_3AO)")
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--base-model", required=True, type=Path)
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--input", action="append", default=[], help="another named input folder, NAME=FOLDER")
    a = p.parse_args(argv)
    cfg = load_config(a.config)
    reads = record_reads(cfg)  # the keys the stage reads: its fingerprint is checked against them
    with timing.phase("data", "rl hooks"):
        hooks = hooks_for(cfg, a.data_dir, parse_inputs(a.input))
    rl = cfg.rl

    def make_policy(model, processor):
        return HFPolicy(model, processor, max_new_tokens=rl.max_new_tokens, batch_size=rl.rollout_batch_size)

    train_rl(cfg, hooks, base_model=a.base_model, output_dir=a.output_dir, make_policy=make_policy, stage=a.stage)
    write_reads(a.output_dir, cfg, reads.stop())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
