"""guirl.efficiency_study: CASC of the annotated history at a chosen pixel budget (notebook 05)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guirl.config import load_config
from guirl.data.splits import load_splits
from guirl.efficiency_study import casc_history
from guirl.prompts import PromptSpec
from guirl.rollout import step_prompts


def test_casc_history_crops_every_coordinate_step_and_respects_compress_none(minigui: Path) -> None:
    split = load_splits(minigui)["train"]
    cfg = load_config("tiny")
    spec = PromptSpec(output_format="ccpo", n_history=2, history_mode="nAO", system_prompt="ccpo_short")
    kw = dict(min_pixels=3136, max_pixels=141120, image_root=split.image_root, max_steps=12)
    full = step_prompts(split.episodes, spec, **kw)
    casc = step_prompts(split.episodes, spec, history_builder=casc_history(cfg, max_pixels=141120), **kw)
    sizes = [[getattr(im, "size", None) for im in p.prompt[1][:-1]] for p in casc]
    # history screenshots become crops (PIL images smaller than the 280x504 screen) or are dropped
    assert any(s for s in sizes) and all(w * h < 280 * 504 for s in sizes for (w, h) in s)
    assert all(len(c.prompt[1]) <= len(f.prompt[1]) for c, f in zip(casc, full))
    none = load_config("tiny", overrides=["ccpo.compress=none"])
    with pytest.raises(ValueError, match="compress is 'none'"):
        casc_history(none, max_pixels=141120)
