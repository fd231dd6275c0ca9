"""The ``analysis:`` config section: profiling repeats, attention layers, a local tokenizer.

Every key has a default, so a profile or experiment yaml may leave the section out. Units: a
*repeat* is one timed forward+backward step (or one timed generation); warm-up runs are not timed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from guirl.configbase import MAX_PIXELS, MAX_RUNS, MAX_SIDE, MAX_STEPS, MAX_TOKENS, Section

__all__ = ["AnalysisConfig"]


class AnalysisConfig(Section):
    """Settings of :mod:`guirl.analysis.profiling` and :mod:`guirl.analysis.attention`.

    ``warmup`` / ``repeats``: untimed and timed runs per measured setting (the median and the
    spread of the ``repeats`` are reported). ``attention_layers``: language-model layers whose
    attention is averaged (``null``: all layers; negative indices count from the last layer).
    ``tokenizer_path``: a local folder holding a Qwen2.5-VL-compatible tokenizer
    (``tokenizer.json`` / ``tokenizer_config.json``, e.g. a Qwen2.5-VL-3B-Instruct checkpoint
    folder; relative to the repository root) used beside the repository's own tokenizer to count
    tokens per action; ``null`` skips that column (nothing is ever downloaded).
    ``attention_steps``: attention maps are taken on the first ``attention_steps`` steps of each
    test split (episode order; ``null``: every step), the same steps for every model compared
    (notebook 06; one greedy generation plus one eager forward per step and model).

    Notebook 05 (efficiency profiling): ``histories`` are the history settings profiled (and
    evaluated with and without CASC at inference, CCPO Table 13; each needs notebook 02's RL runs);
    ``large_screen`` is the phone-size screen the MiniGUI screenshots are resized to (``(width,
    height)`` px; AndroidControl's 1080x2400, the data of CCPO Tables 4, 14, 15);
    ``large_screen_max_pixels`` its pixel budget (``null``: ``model.max_pixels``, the profile's;
    a CPU profile sets a smaller one that fits its time budget and the notebook states it);
    ``token_steps``: test steps whose prompt tokens are averaged per setting (the first one is
    the one timed); ``latency_tokens``: tokens generated per timed generation (token latency);
    ``architecture_screens``: the screens the random-weight architectures (mid, 3B, 7B) are
    profiled on (the trained tiny model is profiled on both; a CPU profile may keep only the
    AndroidControl-size screens to fit its time budget).
    """

    warmup: int = Field(default=1, ge=0, le=MAX_RUNS)
    repeats: int = Field(default=5, ge=1, le=MAX_RUNS)
    attention_layers: list[int] | None = None
    tokenizer_path: str | None = None
    attention_steps: int | None = Field(default=60, ge=1, le=MAX_STEPS)
    histories: list[str] = Field(default_factory=lambda: ["1AO", "3AO"])
    large_screen: tuple[int, int] = (1080, 2400)  # AndroidControl screenshots (px, width x height)
    large_screen_max_pixels: int | None = Field(default=None, ge=3136, le=MAX_PIXELS)
    token_steps: int = Field(default=8, ge=1, le=MAX_STEPS)
    latency_tokens: int = Field(default=32, ge=2, le=MAX_TOKENS)
    architecture_screens: list[Literal["MiniGUI", "AndroidControl"]] = Field(
        default_factory=lambda: ["MiniGUI", "AndroidControl"]
    )

    @field_validator("histories")
    @classmethod
    def _history_tags(cls, value: list[str]) -> list[str]:
        bad = [h for h in value if not (len(h) == 3 and h[0].isdigit() and h[0] != "0" and h[1:] == "AO")]
        if not value or bad:
            raise ValueError(f"give history tags such as 1AO..5AO (at least one), got {value}")
        return value

    @field_validator("large_screen")
    @classmethod
    def _positive_screen(cls, value: tuple[int, int]) -> tuple[int, int]:
        if min(value) <= 0 or max(value) > MAX_SIDE:
            raise ValueError(f"large_screen is (width, height) px, each in 1..{MAX_SIDE}, got {value}")
        return value

    @field_validator("attention_layers")
    @classmethod
    def _layers_not_empty(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and not value:
            raise ValueError("an empty list selects no layer; use null for all layers")
        if value is not None and any(abs(v) > MAX_RUNS for v in value):
            raise ValueError(f"a layer index is within +-{MAX_RUNS}, got {value}")
        return value
