"""``accelerate launch -m guirl.stages.rl``: one RL stage of a run (``docs/rl.md``).

    accelerate launch --config_file configs/accelerate/cpu.yaml -m guirl.stages.rl \\
        --config runs/tiny/02_ccpo_rl/config.yaml --stage grpo --data-dir data/tiny/minigui \\
        --base-model <folder> --output-dir runs/tiny/02_ccpo_rl/grpo

Started by ``guirl.train.launch.run_stage(cfg, stage, ..., entry="guirl.stages.rl")``. Loads the
resolved config, builds the hooks of ``rl.method`` and runs the engine
(:func:`guirl.train.rl.train_rl`), which resumes from the last checkpoint under
``--output-dir``. ``--base-model`` is a full-weight folder or a LoRA adapter folder (an SFT
result; merged into its base first).

Methods (``rl.method``):

* ``grpo``: single-turn GRPO on the recorded steps of the ``train`` split, each prompt with the
  ground-truth history of every ``rl.histories`` setting, ``rl.group_size`` sampled completions
  per prompt, the reward ``rl.reward`` (:func:`guirl.methods.get_reward`; ``null``: CCPO's) on
  the action parsed with ``sft.output_format``, ``rl.advantage`` group advantages, and DAPO
  dynamic sampling when ``rl.dapo_std_threshold`` is set.
* any method of :mod:`guirl.methods` whose record sets ``rl_hooks`` (:func:`hooks_for`):
  ``semi_online`` (the SO-RL baseline, :mod:`guirl.methods.semi_online.rl`) and ``ccpo``
  (:mod:`guirl.methods.ccpo.rl`), through the same engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from guirl.config import load_config

if TYPE_CHECKING:
    from guirl.config import Config
    from guirl.train.rl import RLHooks


def grpo_hooks(cfg: Config, data_dir: Path) -> RLHooks:
    """The hooks of the generic single-turn GRPO method (module doc)."""
    import guirl.methods as methods
    from guirl.data.splits import load_splits
    from guirl.rl.samples import TaskStream, dapo_keep_hook, group_advantage_hook
    from guirl.train.rl import RLHooks, format_reward_hook, single_turn_rollout, step_tasks
    from guirl.train.sft import prompt_spec

    rl, m = cfg.rl, cfg.model
    spec = methods.get_reward(rl.reward or "ccpo")  # a registered name: the config schema checked it
    splits = load_splits(data_dir)
    if "train" not in splits:
        raise ValueError(f"{data_dir}: no 'train' split (found {sorted(splits)})")
    train = splits["train"]
    specs = [prompt_spec(cfg, tag) for tag in rl.histories]
    tasks = step_tasks(
        train.episodes, specs, image_root=train.image_root, min_pixels=m.min_pixels, max_pixels=m.max_pixels
    )
    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed),
        rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
        reward=format_reward_hook(spec.fn, cfg.sft.output_format, min_pixels=m.min_pixels, max_pixels=m.max_pixels),
        advantage=group_advantage_hook(rl.advantage, eps=rl.adv_eps),
        keep=None if rl.dapo_std_threshold is None else dapo_keep_hook(rl.dapo_std_threshold),
    )


def hooks_for(cfg: Config, data_dir: Path) -> RLHooks:
    """The hooks of ``cfg.rl.method``: :func:`grpo_hooks`, or the method record's ``rl_hooks``."""
    import guirl.methods as methods

    name = cfg.rl.method
    if name == "grpo":
        return grpo_hooks(cfg, data_dir)
    method = methods.get(name)
    if method.rl_hooks is None:  # the config schema only accepts methods with hooks
        raise ValueError(f"rl.method={name!r}: guirl/methods/{name}/__init__.py sets no rl_hooks")
    reward = None if cfg.rl.reward is None else methods.get_reward(cfg.rl.reward)
    return method.rl_hooks(cfg, data_dir, reward)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, load the resolved config, build the hooks and train; exit status 0."""
    from guirl.rollout import HFPolicy
    from guirl.train.rl import train_rl

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="resolved config yaml (written by run_stage)")
    p.add_argument("--stage", required=True, help="stage label (e.g. grpo, so_rl_3AO)")
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--base-model", required=True, type=Path)
    p.add_argument("--output-dir", required=True, type=Path)
    a = p.parse_args(argv)
    cfg = load_config(a.config)
    hooks = hooks_for(cfg, a.data_dir)
    rl = cfg.rl

    def make_policy(model, processor):
        return HFPolicy(model, processor, max_new_tokens=rl.max_new_tokens, batch_size=rl.rollout_batch_size)

    train_rl(cfg, hooks, base_model=a.base_model, output_dir=a.output_dir, make_policy=make_policy, stage=a.stage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
