"""The ``androidlong:`` config section: AndroidLong's SFT (App. C.2), GRPO (Table 7) and evaluation
protocol (App. C.1), from the supplementary material (the only AndroidLong text available).

Every default is the paper's value, commented with its place; a value the supplement does not
give says so (``AndroidLong is silent``). ``configs/profiles/base/paper.yaml`` adds the section with
``androidlong: {}`` (these defaults). Table 7's "Sampling Temperature" row has no value in the
text (the table is garbled there, ``docs/fidelity/androidlong.md``), so ``rl.temperature`` is
``null``: a run must set it. The online turn limit of Table 7 (100) is the kernel key
``eval.max_turns`` (100 in the paper profiles), not repeated here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from guirl.configbase import Section

__all__ = ["AndroidLongEval", "AndroidLongRL", "AndroidLongSFT", "AndroidLongSection"]


class AndroidLongSFT(Section):
    """Cold-start SFT (AndroidLong App. C.2)."""

    epochs: float = Field(default=2, gt=0)  # AndroidLong App. C.2
    learning_rate: float = Field(default=1e-5, gt=0)  # AndroidLong App. C.2: cosine from 1e-5 ...
    min_learning_rate: float = Field(default=1e-6, gt=0)  # AndroidLong App. C.2: ... to 1e-6
    lr_scheduler_type: Literal["cosine"] = "cosine"  # AndroidLong App. C.2
    packing: bool = True  # AndroidLong App. C.2
    original_resolution: bool = True  # AndroidLong App. C.2: images at their original resolution


class AndroidLongRL(Section):
    """GRPO (AndroidLong Table 7)."""

    max_prompt_length: int = Field(default=16384, ge=1)  # AndroidLong Table 7
    max_response_length: int = Field(default=2048, ge=1)  # AndroidLong Table 7
    shuffle: bool = True  # AndroidLong Table 7
    concurrency: int = Field(default=256, ge=1)  # AndroidLong Table 7
    strategy: Literal["fsdp2"] = "fsdp2"  # AndroidLong Table 7
    learning_rate: float = Field(default=1e-6, gt=0)  # AndroidLong Table 7
    max_grad_norm: float = Field(default=1.0, gt=0)  # AndroidLong Table 7: gradient clipping
    clip_ratio: float = Field(default=0.2, ge=0)  # AndroidLong Table 7
    ppo_epochs: int = Field(default=1, ge=1)  # AndroidLong Table 7
    entropy_coef: float = Field(default=0.001, ge=0)  # AndroidLong Table 7
    kl_loss_coef: float = Field(default=0.001, ge=0)  # AndroidLong Table 7
    dynamic_batch_size: bool = True  # AndroidLong Table 7
    temperature: float | None = Field(default=None, gt=0)  # AndroidLong Table 7 names it; its value is missing
    max_new_tokens: int = Field(default=2048, ge=1)  # AndroidLong Table 7
    n_samples: int = Field(default=8, ge=2)  # AndroidLong Table 7: samples per task (n)
    max_pixels: int = Field(default=500_000, gt=0)  # AndroidLong Table 7
    min_pixels: int = Field(default=65_536, gt=0)  # AndroidLong Table 7


class AndroidLongEval(Section):
    """Online evaluation (AndroidLong App. C.1, Table 6)."""

    n_runs: int = Field(default=3, ge=1)  # AndroidLong App. C.1: three independent runs
    same_tasks: bool = True  # AndroidLong App. C.1: the runs repeat the same tasks
    do_sample: bool = True  # AndroidLong App. C.1: pass@1 of three samples
    start_in_app: bool = True  # AndroidLong App. C.1: tasks start inside the app (AndroidLab setting)


class AndroidLongSection(Section):
    """AndroidLong settings (module doc)."""

    base_model: str = "GLM-4.1V-9B-Base"  # AndroidLong App. C.1 (this project runs Qwen2.5-VL)
    memory: bool = False  # AndroidLong App. C.1, Table 6: memory written into the chain of thought
    sft: AndroidLongSFT = Field(default_factory=AndroidLongSFT)
    rl: AndroidLongRL = Field(default_factory=AndroidLongRL)
    eval: AndroidLongEval = Field(default_factory=AndroidLongEval)
