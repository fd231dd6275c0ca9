"""The ``pretrain:`` config section and the data of the tiny base model's pretraining stage.

The tiny profile's base model (:mod:`guirl.models.tiny_base`) is pretrained on MiniGUI samples
(:mod:`guirl.env.pretraining`) by the ``pretrain`` stage of :mod:`guirl.train.sft`: TRL's
``SFTTrainer`` on multi-turn conversations about one screenshot, the loss on every assistant turn
(``assistant_only_loss``), all parameters trained. Notebook ``09_tiny_pretraining`` writes the
data folder (:func:`write_pretraining_data`), runs the stage when ``pretrain.rebuild`` is set, and
scores the probes; ``make tiny-base`` installs the result as the shipped checkpoint.

None of these values comes from a paper: the section sizes a from-scratch pretraining of a
1-4 M-parameter model for a 2-core CPU. Its closest paper analogue is AgentCPM-GUI's Stage I
(Sec. 2.3: OCR of a marked region and widget localisation, mixed with other data).

Data folder layout (:func:`write_pretraining_data`)::

    <dir>/manifest.json        sizes, seeds, counts per skill, held-out checks (written last)
    <dir>/train.jsonl          pretraining samples (guirl.env.pretraining.Sample)
    <dir>/probes.jsonl         held-out probe samples (screens and goals absent from train.jsonl)
    <dir>/images/<key>.png     one file per distinct screenshot
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from guirl.configbase import Section

__all__ = [
    "PretrainConfig",
    "PRETRAIN_TASK_PREFIX",
    "PROBE_TASK_PREFIX",
    "pretraining_data_key",
    "write_pretraining_data",
    "read_manifest",
]

#: World / task-id prefixes of the pretraining and the probe tasks (:func:`guirl.env.tasks.generate_tasks`),
#: distinct from notebook 00's (``mg``, ``mg-ut``, ``mg-ua``): other worlds, other goals.
PRETRAIN_TASK_PREFIX = "pt"
PROBE_TASK_PREFIX = "probe"


def _default_mix() -> dict[str, float]:
    from guirl.env.pretraining import TINY_MIX

    return dict(TINY_MIX)


class PretrainConfig(Section):
    """Pretraining of the tiny base model (module docstring; notebook 09).

    Data: ``n_tasks`` MiniGUI tasks (their expert trajectories' screens) give the training samples,
    ``mix[skill]`` samples of each skill per screen on average where the screen allows them; goal skills (``copy_goal``,
    ``goal_step``) use only the templates of 00's training split, and never a goal of 00's test
    splits. ``probe_tasks`` other tasks give the probes, of which the first ``probe_per_skill`` per
    probe skill are scored (screens and goals seen in training are dropped first). ``turns``:
    question-answer turns per training conversation (one screenshot each).
    Training: ``max_steps`` optimizer steps of ``per_device_batch_size`` conversations at peak
    ``learning_rate`` (``lr_scheduler_type`` after ``warmup_ratio`` of the steps), all parameters.
    ``rebuild``: ``false`` scores the shipped base model (``model.path: tiny-base``); ``true``
    trains a new one from random weights (``make tiny-base`` then installs it).
    """

    # Every default is the tiny profile's recipe (configs/profiles/tiny.yaml has `pretrain: {}`), chosen by
    # measurement on a 2-core CPU (docs/tiny-agents.md, "The base model"); none is a paper value.
    n_tasks: int = Field(default=1500, ge=1, le=100_000)  # about 12k distinct screens, 70k samples
    probe_tasks: int = Field(default=400, ge=1, le=100_000)
    probe_per_skill: int = Field(default=200, ge=1, le=100_000)  # a 95% interval of +-7 points at worst
    # samples per screen and skill (an integer part always, one more with the probability of the fraction)
    mix: dict[str, float] = Field(default_factory=lambda: _default_mix(), min_length=1)
    turns: int = Field(default=6, ge=1, le=64)  # answers per screenshot encoding (3.4x the answers per second of 1)
    learning_rate: float = Field(default=2e-3, gt=0, le=1.0)
    max_steps: int = Field(default=2500, ge=1, le=10_000_000)
    per_device_batch_size: int = Field(default=8, ge=1, le=4096)
    warmup_ratio: float = Field(default=0.05, ge=0, lt=1)
    lr_scheduler_type: Literal["cosine", "linear", "constant_with_warmup"] = "cosine"
    save_steps: int = Field(default=250, ge=1, le=10_000_000)  # checkpoints to resume an interrupted rebuild from
    rebuild: bool = False

    @field_validator("mix")
    @classmethod
    def _known_skills(cls, v: dict[str, float]) -> dict[str, float]:
        from guirl.env.pretraining import SKILLS

        bad = [s for s in v if s not in SKILLS]
        if bad:
            raise ValueError(f"unknown skills {bad}; known: {list(SKILLS)}")
        wrong = {k: r for k, r in v.items() if not 0 <= r <= 100}
        if wrong:
            raise ValueError(f"samples per screen must lie in [0, 100]; got {wrong}")
        return v


def pretraining_data_key(p: PretrainConfig, *, seed: int, width: int, height: int, test_goals: int) -> dict[str, Any]:
    """What the data folder depends on (its manifest's ``key``): a folder with another key is rebuilt."""
    from guirl.env.pretraining import DATA_VERSION

    return {
        "version": DATA_VERSION,
        "seed": seed,
        "n_tasks": p.n_tasks,
        "probe_tasks": p.probe_tasks,
        "probe_per_skill": p.probe_per_skill,
        "mix": dict(p.mix),
        "width": width,
        "height": height,
        "test_goals": test_goals,
    }


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's ``manifest.json`` (``None`` when missing or unreadable: the folder is rebuilt)."""
    try:
        return json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_pretraining_data(
    out_dir: Path,
    p: PretrainConfig,
    *,
    seed: int,
    width: int,
    height: int,
    exclude_goals: set[str],
    goal_templates: set[str],
    progress: bool = True,
) -> dict[str, Any]:
    """Build the pretraining and probe samples into ``out_dir`` (layout in the module docstring)
    and return the manifest; an existing folder whose manifest has the same key is kept.

    ``exclude_goals``: goals no sample may quote (notebook 00's test goals); ``goal_templates``:
    the templates goal skills draw from (00's training templates). Built in a temporary sibling
    and renamed into place, so a reader never sees a half-written folder. Probes: the probe
    tasks' samples of :data:`~guirl.env.pretraining.PROBES` whose screen and goal appear in no
    training sample, ``probe_per_skill`` per skill drawn with ``seed``.
    """
    from guirl.env.pretraining import PROBES, generate_samples, write_samples
    from guirl.env.tasks import generate_tasks

    out_dir = Path(out_dir)
    key = pretraining_data_key(p, seed=seed, width=width, height=height, test_goals=len(exclude_goals))
    old = read_manifest(out_dir)
    if old is not None and old.get("key") == key:
        return old
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        train = generate_samples(
            generate_tasks(p.n_tasks, seed, prefix=PRETRAIN_TASK_PREFIX),
            image_dir=tmp / "images",
            seed=seed,
            width=width,
            height=height,
            mix=p.mix,
            exclude_goals=frozenset(exclude_goals),
            goal_templates=goal_templates,
            progress=progress,
        )
        seen_screens = {s.screen_key for s in train if s.screen_key}
        seen_goals = {s.goal for s in train if s.goal}
        pool = generate_samples(
            generate_tasks(p.probe_tasks, seed, prefix=PROBE_TASK_PREFIX),
            image_dir=tmp / "images",
            seed=seed + 1,
            width=width,
            height=height,
            mix=dict.fromkeys(PROBES, 1.0),
            exclude_screens=frozenset(seen_screens),
            exclude_goals=frozenset(seen_goals | exclude_goals),
            progress=progress,
        )
        rng = random.Random(f"probes-{seed}")
        probes = []
        for skill in PROBES:
            cands = [s for s in pool if s.skill == skill]
            rng.shuffle(cands)
            probes += cands[: p.probe_per_skill]
        write_samples(tmp / "train.jsonl", train)
        write_samples(tmp / "probes.jsonl", probes)
        used = {s.image for s in [*train, *probes] if s.image}
        for f in (tmp / "images").iterdir():  # screens only the dropped probe candidates showed
            if f"images/{f.name}" not in used:
                f.unlink()
        manifest = {
            "key": key,
            "train": dict(sorted(Counter(s.skill for s in train).items())),
            "probes": dict(sorted(Counter(s.skill for s in probes).items())),
            "train_screens": len(seen_screens),
            "probe_screens": len({s.screen_key for s in probes if s.screen_key}),
            "probe_screens_in_train": len({s.screen_key for s in probes} & seen_screens),
            "probe_goals_in_train": len({s.goal for s in probes if s.goal} & seen_goals),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest
