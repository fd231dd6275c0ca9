"""The ``androidlong:`` config section: AndroidLong's SFT (App. C.2), GRPO (Table 7) and evaluation
protocol (App. C.1), from the supplementary material (the only AndroidLong text available), the
memory switch (App. C.1, Table 6) and how the section becomes the kernel keys of notebook 07's
AndroidLong stages (:func:`variant_updates`).

Every default is the paper's value, commented with its place; a value the supplement does not
give says so (``not a paper value``). ``configs/profiles/base/paper.yaml`` adds the section with
``androidlong: {}`` (these defaults). Table 7's "Sampling Temperature" row has no value in the
text (the table is garbled there, ``docs/fidelity/androidlong.md``), so ``rl.temperature`` is
``null``: the engine's ``rl.temperature`` (verl's rollout default, 1.0) stands unless a run sets
it. The turn limit of Table 7 (100) is the kernel key ``eval.max_turns`` (100 in the paper
profiles); the GRPO rollouts use it too.

``paper_recipe`` (not a paper value): whether App. C.2 and Table 7 replace the kernel keys of 07's
AndroidLong stages (the paper profiles) or the profile's own keys train them (the tiny profile's
07 experiment sets ``false``). ``memory``, ``memory_tokens``, the shape of the GRPO rollouts
(``rl.n_samples`` episodes per task, ``rl.concurrency`` episodes at once) and the stage lengths
(``sft.max_steps``, ``rl.max_steps``) apply either way.

Values with no counterpart in the engines are not keys (nothing would read them); the fidelity
audit lists them: the base model GLM-4.1V-9B-Base (this project runs Qwen2.5-VL), App. C.2's cosine
floor 1e-6 (the SFT stage decays to 0), packing and original-resolution images, Table 7's max
prompt length, max response length (= its max new tokens), FSDP2, one PPO epoch (the engine's only
mode), the entropy coefficient 0.001 (the RL loss has no entropy term), dynamic batch size, and the
start inside the app (MiniGUI tasks start from their initial screen, AL-05).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from guirl.configbase import RunConfig, Section

__all__ = ["AndroidLongEval", "AndroidLongRL", "AndroidLongSFT", "AndroidLongSection", "section", "variant_updates"]


class AndroidLongSFT(Section):
    """Cold-start SFT (AndroidLong App. C.2)."""

    epochs: float = Field(default=2, gt=0)  # AndroidLong App. C.2
    learning_rate: float = Field(default=1e-5, gt=0)  # AndroidLong App. C.2: cosine from 1e-5
    lr_scheduler_type: Literal["cosine"] = "cosine"  # AndroidLong App. C.2
    # not a paper value: optimizer steps of each 07 SFT stage; null: App. C.2's epochs (paper recipe) or sft.max_steps
    max_steps: int | None = Field(default=None, ge=1)


class AndroidLongRL(Section):
    """GRPO (AndroidLong Table 7)."""

    shuffle: bool = True  # AndroidLong Table 7: the task stream is shuffled
    concurrency: int = Field(default=256, ge=1)  # AndroidLong Table 7: episodes rolled out at once
    learning_rate: float = Field(default=1e-6, gt=0)  # AndroidLong Table 7
    max_grad_norm: float = Field(default=1.0, gt=0)  # AndroidLong Table 7: gradient clipping
    clip_ratio: float = Field(default=0.2, ge=0, lt=1)  # AndroidLong Table 7
    kl_loss_coef: float = Field(default=0.001, ge=0)  # AndroidLong Table 7
    temperature: float | None = Field(default=None, gt=0)  # AndroidLong Table 7 names it; its value is missing
    max_new_tokens: int = Field(default=2048, ge=1)  # AndroidLong Table 7
    n_samples: int = Field(default=8, ge=2)  # AndroidLong Table 7: samples per task (n)
    max_pixels: int = Field(default=500_000, gt=0)  # AndroidLong Table 7
    min_pixels: int = Field(default=65_536, gt=0)  # AndroidLong Table 7
    # not a paper value: RL steps of each 07 GRPO stage; null: rl.max_steps
    max_steps: int | None = Field(default=None, ge=1)


class AndroidLongEval(Section):
    """Online evaluation (AndroidLong App. C.1, Table 6)."""

    n_runs: int = Field(default=3, ge=1)  # AndroidLong App. C.1: three independent runs
    same_tasks: bool = True  # AndroidLong App. C.1: the runs repeat the same tasks
    do_sample: bool = True  # AndroidLong App. C.1: pass@1 of three samples


class AndroidLongSection(Section):
    """AndroidLong settings (module doc)."""

    # not a paper value: App. C.2 / Table 7 replace the kernel keys of 07's stages (false: the profile's keys)
    paper_recipe: bool = True
    memory: bool = False  # AndroidLong App. C.1, Table 6: memory written into the chain of thought
    # not a paper value: new tokens a memory step may write on top of eval.max_new_tokens / rl.max_new_tokens
    memory_tokens: int = Field(default=32, ge=0)
    sft: AndroidLongSFT = Field(default_factory=AndroidLongSFT)
    rl: AndroidLongRL = Field(default_factory=AndroidLongRL)
    eval: AndroidLongEval = Field(default_factory=AndroidLongEval)


def section(cfg: RunConfig) -> AndroidLongSection:
    """``cfg.androidlong``; a :class:`guirl.config.ConfigError` saying how to add it when unset."""
    return cfg.method_section("androidlong")  # type: ignore[return-value]


def variant_updates(cfg: RunConfig, *, memory: bool) -> dict[str, Any]:
    """The ``Config.replace`` updates of one of 07's AndroidLong models (SFT, then GRPO with the role
    ``androidlong``): ``androidlong.memory``, ``rl.role: androidlong``, the memory's token budget
    (``memory_tokens`` more for ``eval.max_new_tokens`` and ``rl.max_new_tokens`` with memory), the
    rollout shape (``rl.group_size`` = ``n_samples``, ``rl.prompts_per_step`` = ``concurrency /
    n_samples``: 256 episodes at once = 32 tasks x 8) and with ``paper_recipe``: App. C.2
    (``sft.epochs``, ``sft.learning_rate``, ``sft.lr_scheduler_type``, ``sft.max_steps`` null),
    Table 7 (``rl.learning_rate``, ``rl.max_grad_norm``, ``rl.eps_low`` = ``rl.eps_high`` =
    ``clip_ratio``, ``rl.beta`` = ``kl_loss_coef``, ``rl.temperature`` when given,
    ``rl.max_new_tokens``, ``model.min_pixels`` / ``max_pixels``, one update per step) and App. C.1
    (``eval.n_seeds`` = ``n_runs``, ``eval.online_same_tasks``, ``eval.online_do_sample``). The
    section's ``sft.max_steps`` / ``rl.max_steps``, when set, give the stage lengths."""
    sec = section(cfg)
    out: dict[str, Any] = {"androidlong.memory": memory, "rl.role": "androidlong", "rl.reward": None}
    eval_tokens, rl_tokens = cfg.eval.max_new_tokens, cfg.rl.max_new_tokens
    if sec.paper_recipe:
        s, r, e = sec.sft, sec.rl, sec.eval
        rl_tokens = r.max_new_tokens
        out.update(
            {
                "sft.epochs": s.epochs,
                "sft.learning_rate": s.learning_rate,
                "sft.lr_scheduler_type": s.lr_scheduler_type,
                "sft.max_steps": None,
                "rl.learning_rate": r.learning_rate,
                "rl.max_grad_norm": r.max_grad_norm,
                "rl.eps_low": r.clip_ratio,
                "rl.eps_high": r.clip_ratio,
                "rl.beta": r.kl_loss_coef,
                "rl.mini_batches": 1,
                "model.min_pixels": r.min_pixels,
                "model.max_pixels": r.max_pixels,
                "eval.n_seeds": e.n_runs,
                "eval.online_same_tasks": e.same_tasks,
                "eval.online_do_sample": e.do_sample,
            }
        )
        if r.temperature is not None:
            out["rl.temperature"] = r.temperature
    out["rl.group_size"] = sec.rl.n_samples
    out["rl.prompts_per_step"] = max(1, sec.rl.concurrency // sec.rl.n_samples)
    extra = sec.memory_tokens if memory else 0
    out["eval.max_new_tokens"] = eval_tokens + extra
    out["rl.max_new_tokens"] = rl_tokens + extra
    if sec.sft.max_steps is not None:
        out["sft.max_steps"] = sec.sft.max_steps
    if sec.rl.max_steps is not None:
        out["rl.max_steps"] = sec.rl.max_steps
    return out
