"""guirl.methods.ccpo.history: CCPO's training and inference history builders, both from the ccpo section."""

from __future__ import annotations

from pathlib import Path

import pytest

from guirl.config import load_config
from guirl.data.splits import load_splits
from guirl.methods.ccpo.history import ccpo_section, inference_history, training_history
from guirl.prompts import PromptSpec
from guirl.rollout import step_prompts


def test_casc_history_crops_every_coordinate_step_and_respects_compress_none(minigui: Path) -> None:
    split = load_splits(minigui)["train"]
    cfg = load_config("tiny")
    spec = PromptSpec(output_format="ccpo", n_history=2, history_mode="nAO", system_prompt="ccpo_short")
    kw = dict(min_pixels=3136, max_pixels=141120, image_root=split.image_root, max_steps=12)
    full = step_prompts(split.episodes, spec, **kw)
    casc = step_prompts(split.episodes, spec, history_builder=inference_history(cfg, max_pixels=141120), **kw)
    sizes = [[getattr(im, "size", None) for im in p.prompt[1][:-1]] for p in casc]
    # history screenshots become crops (PIL images smaller than the 280x504 screen) or are dropped
    assert any(s for s in sizes) and all(w * h < 280 * 504 for s in sizes for (w, h) in s)
    assert all(len(c.prompt[1]) <= len(f.prompt[1]) for c, f in zip(casc, full))
    none = load_config("tiny", overrides=["ccpo.compress=none"])
    with pytest.raises(ValueError, match="compress is 'none'"):
        inference_history(none, max_pixels=141120)


def test_both_builders_take_the_same_casc_settings_from_the_section() -> None:
    # one place turns the ccpo section into CASC settings: a changed margin reaches both builders
    cfg = load_config("tiny", overrides=["ccpo.margin_px=40", "ccpo.compress=min"])
    train = training_history(cfg)
    assert (train.kw["margin"], train.kw["policy"]) == (40, "min")
    assert ccpo_section(load_config("tiny", overrides=["ccpo.compress=none"])).compress == "none"
    assert training_history(load_config("tiny", overrides=["ccpo.compress=none"])) is None


def test_inference_history_crops_only_the_shown_pairs(minigui: Path) -> None:
    # n_history: only the last n pairs are cropped (and recorded); the others pass through whole
    split = load_splits(minigui)["train"]
    spec = PromptSpec(output_format="ccpo", n_history=1, history_mode="nAO", system_prompt="ccpo_short")
    kw = dict(min_pixels=3136, max_pixels=141120, image_root=split.image_root, max_steps=8)
    cfg = load_config("tiny")
    all_records, last_records = [], []
    step_prompts(split.episodes, spec, history_builder=inference_history(cfg, records=all_records), **kw)
    step_prompts(split.episodes, spec, history_builder=inference_history(cfg, n_history=1, records=last_records), **kw)
    assert 0 < len(last_records) <= len(all_records)
