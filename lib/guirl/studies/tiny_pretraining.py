"""Notebook 09: the tiny base model, its pretraining data, and the capability probes.

The tiny profile's notebooks start from ``model.path: tiny-base``, the tiny Qwen2.5-VL pretrained
on MiniGUI and shipped with the repository (:mod:`guirl.models.tiny_base`). This study

* writes the pretraining data and the held-out probes (:func:`prepare`;
  :func:`guirl.train.pretrain.write_pretraining_data`): goals of notebook 00's test splits and of
  its unseen templates never appear in training samples; probe screens and goals never appear in
  training samples either (the manifest counts both overlaps, and :func:`check_held_out` asserts 0);
* with ``pretrain.rebuild`` trains a new base from random weights (:func:`pretrain_stage`, one
  ``pretrain`` :class:`~guirl.train.launch.Stage`); ``make tiny-base`` then installs it
  (:func:`install_trained`);
* scores the probes of the base against the same architecture with random weights, on the same
  probe samples (:func:`probe`, :func:`probe_table`, :func:`probe_paired`).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.metrics.bootstrap import rate_with_ci
from guirl.metrics.paired import difference_row, paired_difference
from guirl.paths import data_dir, runs_dir
from guirl.train.launch import SFT_ENTRY, Stage, run_stage

__all__ = [
    "NOTEBOOK",
    "PRETRAIN_DIR",
    "PretrainData",
    "held_out_goals",
    "goal_templates",
    "prepare",
    "check_held_out",
    "data_table",
    "pretrain_stage",
    "train",
    "probe_models",
    "probe",
    "probe_token_budget",
    "probe_table",
    "probe_paired",
    "plot_probes",
    "plot_loss",
    "card_meta",
    "probe_examples",
    "write_card_meta",
    "CARD_META_FILE",
]

NOTEBOOK = "09_tiny_pretraining"
#: The stage folder under ``runs/<profile>/09_tiny_pretraining``.
PRETRAIN_DIR = "pretrain"
RANDOM_INIT = "random init"
SHIPPED = "tiny-base (shipped)"
TRAINED = "tiny-base (this run)"


@dataclass(frozen=True)
class PretrainData:
    """The data folder (:mod:`guirl.train.pretrain` layout) and its manifest."""

    path: Path
    manifest: dict[str, Any]


def _section(cfg: Config):
    if cfg.pretrain is None:
        raise ValueError(
            "notebook 09 needs the config section 'pretrain' (configs/profiles/tiny.yaml has one); "
            "the paper profiles start from published checkpoints and have none"
        )
    if not cfg.model.is_tiny:
        raise ValueError(f"notebook 09 pretrains the tiny model; model.path is {cfg.model.path!r}")
    return cfg.pretrain


def held_out_goals(cfg: Config) -> set[str]:
    """The goals of notebook 00's test splits for this config (``data.*`` sizes and ``seed``):
    no pretraining sample quotes one."""
    from guirl.env.export import plan_splits

    plan = plan_splits(cfg.data.n_train_tasks + cfg.data.n_test_tasks, cfg.seed)
    return {t.instruction for name, tasks in plan.items() if name != "train" for t in tasks}


def goal_templates() -> set[str]:
    """The templates of notebook 00's training split (no held-out app, no unseen template): the
    only ones goal skills draw from."""
    from guirl.env.tasks import DEFAULT_HELDOUT_APP, DEFAULT_UNSEEN_TEMPLATES, templates_for

    return set(templates_for(exclude_apps=[DEFAULT_HELDOUT_APP], exclude_templates=DEFAULT_UNSEEN_TEMPLATES))


def prepare(cfg: Config, *, progress: bool = True) -> PretrainData:
    """Write (or reuse) ``data/<profile>/pretraining`` for ``cfg`` and return it."""
    from guirl.train.pretrain import write_pretraining_data

    p = _section(cfg)
    out = data_dir(cfg.profile) / "pretraining"
    manifest = write_pretraining_data(
        out,
        p,
        seed=cfg.seed,
        width=cfg.data.width,
        height=cfg.data.height,
        exclude_goals=held_out_goals(cfg),
        goal_templates=goal_templates(),
        progress=progress,
    )
    return PretrainData(out, manifest)


def check_held_out(data: PretrainData) -> None:
    """Raise ``AssertionError`` naming the count when a probe screen or goal is also a training one."""
    m = data.manifest
    for key in ("probe_screens_in_train", "probe_goals_in_train"):
        if m.get(key):
            raise AssertionError(f"{data.path / 'manifest.json'}: {key} = {m[key]}; the probes must be held out")


def data_table(data: PretrainData) -> pd.DataFrame:
    """Samples per skill in training and in the probes."""
    m = data.manifest
    skills = sorted(set(m["train"]) | set(m["probes"]))
    return pd.DataFrame(
        [{"skill": s, "train": int(m["train"].get(s, 0)), "probes": int(m["probes"].get(s, 0))} for s in skills]
    )


def pretrain_stage(cfg: Config, data: PretrainData) -> Stage:
    """The ``pretrain`` stage: random weights of the tiny architecture (``seed``) to a base model."""
    from guirl.models import build_tiny_model

    _section(cfg)
    return Stage(
        name="pretrain",
        entry=SFT_ENTRY,
        cfg=cfg,
        inputs={"data": data.path},
        base_model=build_tiny_model(seed=cfg.seed),
        output_dir=runs_dir(cfg.profile) / NOTEBOOK / PRETRAIN_DIR,
    )


def train(cfg: Config, data: PretrainData) -> dict[str, Any] | None:
    """Train the base when ``pretrain.rebuild`` is set (resuming an interrupted run); ``None`` otherwise."""
    if not _section(cfg).rebuild:
        return None
    return run_stage(pretrain_stage(cfg, data))


def probe_models(cfg: Config, result: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """The models the probes compare: random weights (``seed``) and the base: the shipped one, or
    the one this run trained (``result``)."""
    from guirl.models import build_tiny_model
    from guirl.models.tiny_base import tiny_base_dir

    base = {TRAINED: Path(result["final"])} if result is not None else {SHIPPED: tiny_base_dir()}
    return {RANDOM_INIT: build_tiny_model(seed=cfg.seed), **base}


def probe_token_budget(tokenizer: Any, expected: Sequence[str], *, margin: int = 8) -> int:
    """Generation budget of the probes (tokens): the longest expected answer plus ``margin``, so a
    long action format is never cut short (notebooks' ``eval.max_new_tokens`` is sized for theirs)."""
    return max(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in expected) + margin


def probe(cfg: Config, model_dir: Path, data: PretrainData, *, progress: bool = False) -> pd.DataFrame:
    """Greedy answers of ``model_dir`` to every probe sample, one row each: ``sample_id``,
    ``skill``, ``correct`` (:func:`guirl.env.pretraining.score_sample`), ``output``, ``expected``."""
    from guirl.actions.formats import FormatContext
    from guirl.env.pretraining import read_samples, score_sample
    from guirl.models import load_policy
    from guirl.rollout.policy import HFPolicy
    from guirl.train.data import pretraining_records

    m = cfg.model
    samples = read_samples(data.path / "probes.jsonl")
    size = (cfg.data.width, cfg.data.height)
    records = pretraining_records(
        samples, image_root=data.path, screen_size=size, min_pixels=m.min_pixels, max_pixels=m.max_pixels
    )
    model, processor = load_policy(model_dir, min_pixels=m.min_pixels, max_pixels=m.max_pixels, dtype=m.torch_dtype)
    expected = [r["completion"][0]["content"][0]["text"] for r in records]
    policy = HFPolicy(
        model,
        processor,
        max_new_tokens=probe_token_budget(processor.tokenizer, expected),
        batch_size=cfg.eval.batch_size,
        progress=progress,
        desc=f"probes {Path(model_dir).name}",
    )
    outputs = policy.complete([(r["prompt"], r["images"]) for r in records])
    ctx = FormatContext(width=size[0], height=size[1], min_pixels=m.min_pixels, max_pixels=m.max_pixels)
    return pd.DataFrame(
        [
            {
                "sample_id": s.sample_id,
                "skill": s.skill,
                "correct": bool(score_sample(s, out[0].text, ctx)),
                "output": out[0].text,
                "expected": r["completion"][0]["content"][0]["text"],
            }
            for s, r, out in zip(samples, records, outputs)
        ]
    )


def probe_table(results: Mapping[str, pd.DataFrame], *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Accuracy in % per probe skill and model, with a 95% bootstrap interval over the probe samples."""
    rows = []
    for model, df in results.items():
        for skill, g in df.groupby("skill", sort=False):
            rate, lo, hi = rate_with_ci(g["correct"].to_numpy(dtype=float), n_boot=n_boot, seed=seed)
            rows.append(
                {"skill": skill, "model": model, "accuracy": 100 * rate, "lo": 100 * lo, "hi": 100 * hi, "n": len(g)}
            )
    return pd.DataFrame(rows, columns=["skill", "model", "accuracy", "lo", "hi", "n"])


def probe_paired(
    results: Mapping[str, pd.DataFrame], a: str, b: str, *, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """``b`` minus ``a`` in points per skill, paired over the same probe samples (95% bootstrap)."""
    left, right = results[a].set_index("sample_id"), results[b].set_index("sample_id")
    if list(left.index) != list(right.index):
        raise ValueError(f"probe results of {a!r} and {b!r} are not on the same samples")
    rows = []
    for skill in dict.fromkeys(left["skill"]):
        mask = (left["skill"] == skill).to_numpy()
        x = left["correct"].to_numpy(dtype=float)[mask]
        y = right["correct"].to_numpy(dtype=float)[mask]
        d = paired_difference(x, y, n_boot=n_boot, seed=seed)
        rows.append(
            {"skill": skill, "A": a, "B": b, "A_acc": 100 * x.mean(), "B_acc": 100 * y.mean(), **difference_row(d)}
        )
    return pd.DataFrame(rows)


def plot_probes(table: pd.DataFrame):
    """Bar chart of :func:`probe_table`: accuracy per skill, one bar per model, 95% intervals."""
    import matplotlib.pyplot as plt
    import numpy as np

    skills = list(dict.fromkeys(table["skill"]))
    models = list(dict.fromkeys(table["model"]))
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(skills))
    for i, model in enumerate(models):
        t = table[table["model"] == model].set_index("skill").reindex(skills)
        err = np.vstack([t["accuracy"] - t["lo"], t["hi"] - t["accuracy"]])
        ax.bar(x + i * width, t["accuracy"], width, yerr=err, capsize=3, label=model)
    ax.set_xticks(x + width * (len(models) - 1) / 2, skills)
    ax.set_ylabel("exact accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def plot_loss(result: Mapping[str, Any]):
    """The pretraining loss against the step (the stage's ``log_history``)."""
    import matplotlib.pyplot as plt

    hist = [h for h in result.get("log_history", []) if "loss" in h]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([h["step"] for h in hist], [h["loss"] for h in hist])
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    fig.tight_layout()
    return fig


def card_meta(
    cfg: Config, data: PretrainData, result: Mapping[str, Any], table: pd.DataFrame, *, wall_seconds: float
) -> dict[str, Any]:
    """What ``tiny_base.json`` records beside the weights (:func:`guirl.models.tiny_base.install`)."""
    import dataclasses
    import json
    import os

    from safetensors import safe_open

    from guirl.models import TinySpec

    p = _section(cfg)
    final = Path(result["final"])
    with safe_open(str(final / "model.safetensors"), "pt") as f:
        n_params = sum(_prod(f.get_slice(k).get_shape()) for k in f.keys())
    vocab = json.loads((final / "config.json").read_text())["text_config"]["vocab_size"]
    train = data.manifest["train"]
    return {
        "spec": dataclasses.asdict(TinySpec()),
        "seed": cfg.seed,
        "parameters": n_params,
        "vocab_size": vocab,
        "data": (
            f"{sum(train.values())} samples ({', '.join(f'{k} {v}' for k, v in train.items())}) from the expert "
            f"trajectories of {p.n_tasks} MiniGUI tasks ({data.manifest['train_screens']} distinct screens, "
            f"{cfg.data.width}x{cfg.data.height} px), {p.turns} turns per conversation (guirl.env.pretraining)"
        ),
        "recipe": (
            f"{result.get('global_step')} steps of {p.per_device_batch_size} conversations, peak lr {p.learning_rate} "
            f"({p.lr_scheduler_type}, warm-up {p.warmup_ratio}), all parameters, loss on every answer (TRL "
            "SFTTrainer, assistant_only_loss); configs/profiles/tiny.yaml, section pretrain"
        ),
        "hardware": f"{platform.machine()} CPU, {os.cpu_count()} cores ({platform.platform(terse=True)})",
        "train_seconds": round(float(result.get("train_seconds", 0.0)), 1),
        "wall_seconds": round(wall_seconds, 1),
        "probes": [
            {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}
            for row in table.to_dict(orient="records")
        ],
    }


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def probe_examples(df: pd.DataFrame, per_skill: int = 3) -> pd.DataFrame:
    """The first ``per_skill`` probe answers of each skill: expected, output, correct."""
    cols = ["skill", "expected", "output", "correct"]
    return df.groupby("skill", sort=False).head(per_skill)[cols].reset_index(drop=True)


#: The file beside the pretrain stage with what ``make tiny-base`` writes into ``tiny_base.json``.
CARD_META_FILE = "card_meta.json"


def write_card_meta(cfg: Config, meta: Mapping[str, Any]) -> Path:
    """Write :func:`card_meta` beside the stage (``runs/<profile>/09_tiny_pretraining/pretrain``)."""
    import json

    path = runs_dir(cfg.profile) / NOTEBOOK / PRETRAIN_DIR / CARD_META_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(meta), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
