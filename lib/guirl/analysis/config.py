"""The ``analysis:`` config section: profiling repeats, attention layers, a local tokenizer.

Every key has a default, so a profile or experiment yaml may leave the section out. Units: a
*repeat* is one timed forward+backward step (or one timed generation); warm-up runs are not timed.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from guirl.configbase import Section

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
    """

    warmup: int = Field(default=1, ge=0)
    repeats: int = Field(default=5, ge=1)
    attention_layers: list[int] | None = None
    tokenizer_path: str | None = None
    attention_steps: int | None = Field(default=60, ge=1)

    @field_validator("attention_layers")
    @classmethod
    def _layers_not_empty(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and not value:
            raise ValueError("an empty list selects no layer; use null for all layers")
        return value
