"""The ``androidlong:`` config section: AndroidLong's SFT (App. C.2), GRPO (Table 7) and evaluation
protocol (App. C.1), from the supplementary material (the only AndroidLong text available), the
memory switch (App. C.1, Table 6) and how the section becomes the kernel keys of notebook 07's
AndroidLong stages (:func:`variant_updates`).

Every default is the paper's value, commented with its place; a value the supplement does not
give says so (``not a paper value``) or is not a key: Table 7's "Sampling Temperature" row has no
value in the text (the table is garbled there, ``docs/fidelity/androidlong.md``), so the engine's
``rl.temperature`` (verl's rollout default, 1.0) applies. The turn limit of Table 7 (100) is the
kernel key ``eval.max_turns`` (100 in the paper profiles); the GRPO rollouts use it too.

The stage sections (:mod:`guirl.configbase`): ``model`` (Table 7's pixel budget), ``sft`` (App.
C.2), ``rl`` (Table 7: ``clip_ratio`` is ``eps_low`` / ``eps_high``, ``kl_loss_coef`` ``beta``,
``n`` samples per task ``group_size``, 256 episodes at once = 32 tasks x 8 ``prompts_per_step``),
``eval`` (App. C.1: three sampled runs of the same tasks); a kernel key set in a later layer than
the paper's value wins. :func:`recipe` ``"tiny"`` trains with the tiny profile's own values and
07's CPU sizes; ``memory`` (set per model by 07) and ``memory_tokens`` apply on every profile.

Values with no counterpart in the engines are not keys (nothing would read them); the fidelity
audit lists them: the base model GLM-4.1V-9B-Base (this project runs Qwen2.5-VL), App. C.2's cosine
floor 1e-6 (the SFT stage decays to 0), packing and original-resolution images, Table 7's max
prompt length, max response length (= its max new tokens), FSDP2, one PPO epoch (the engine's only
mode), the entropy coefficient 0.001 (the RL loss has no entropy term), dynamic batch size, and the
start inside the app (MiniGUI tasks start from their initial screen, AL-05).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from guirl import configbase as cb
from guirl.configbase import LR_SCHEDULERS, PROFILE, RunConfig, Sampling, Section, stage_updates

__all__ = [
    "AndroidLongEval",
    "AndroidLongModel",
    "AndroidLongRL",
    "AndroidLongSFT",
    "AndroidLongSection",
    "DERIVED",
    "recipe",
    "section",
    "variant_updates",
]


class AndroidLongModel(Section):
    """The pixel budget (AndroidLong Table 7): stage values of ``model``."""

    mirrors: ClassVar[str] = "model"
    min_pixels: int = Field(default=65_536, gt=0, le=cb.MAX_PIXELS)  # AndroidLong Table 7
    max_pixels: int = Field(default=500_000, gt=0, le=cb.MAX_PIXELS)  # AndroidLong Table 7


class AndroidLongSFT(Section):
    """Cold-start SFT (AndroidLong App. C.2): stage values of ``sft``."""

    mirrors: ClassVar[str] = "sft"
    own: ClassVar[tuple[str, ...]] = ("lora",)
    epochs: float = Field(default=2, gt=0, le=cb.MAX_EPOCHS)  # AndroidLong App. C.2
    learning_rate: float = Field(default=1e-5, gt=0, le=cb.MAX_LR)  # AndroidLong App. C.2: cosine from 1e-5
    lr_scheduler_type: Literal[LR_SCHEDULERS] = "cosine"  # type: ignore[valid-type]  # AndroidLong App. C.2
    max_steps: int | None = Field(
        default=None, ge=1, le=cb.MAX_STEPS
    )  # not a paper value: a step budget (null: epochs)
    # not paper values: App. C.2 gives no batch or warm-up (Swift, packed batches); CCPO Table 7's, made AndroidLong's own
    per_device_batch_size: int = Field(default=1, ge=1, le=cb.MAX_BATCH)
    grad_accum: int = Field(default=8, ge=1, le=cb.MAX_BATCH)
    warmup_ratio: float = Field(default=0.01, ge=0, lt=1)
    lora: cb.StageAdapter = Field(default_factory=cb.StageAdapter)  # AndroidLong App. C.2: all parameters (no adapter)


class AndroidLongRL(Section):
    """GRPO (AndroidLong Table 7): stage values of ``rl`` and whether the task stream is shuffled."""

    mirrors: ClassVar[str] = "rl"
    own: ClassVar[tuple[str, ...]] = ("shuffle",)
    shuffle: bool = True  # AndroidLong Table 7: the task stream is shuffled
    learning_rate: float = Field(default=1e-6, gt=0, le=cb.MAX_LR)  # AndroidLong Table 7
    max_grad_norm: float = Field(default=1.0, gt=0, le=cb.MAX_COEF)  # AndroidLong Table 7: gradient clipping
    eps_low: float = Field(default=0.2, ge=0, lt=1)  # AndroidLong Table 7: clip_ratio
    eps_high: float = Field(default=0.2, ge=0, le=cb.MAX_COEF)  # AndroidLong Table 7: clip_ratio
    beta: float = Field(default=0.001, ge=0, le=cb.MAX_COEF)  # AndroidLong Table 7: kl_loss_coef
    max_new_tokens: int = Field(default=2048, ge=1, le=cb.MAX_TOKENS)  # AndroidLong Table 7
    group_size: int = Field(default=8, ge=2, le=cb.MAX_BATCH)  # AndroidLong Table 7: samples per task (n)
    prompts_per_step: int = Field(default=32, ge=1, le=cb.MAX_BATCH)  # AndroidLong Table 7: 256 episodes at once / 8
    mini_batches: int = Field(default=1, ge=1, le=cb.MAX_BATCH)  # AndroidLong Table 7: one PPO epoch, one update
    # AndroidLong App. C.2 / Table 7: verl's GRPO with no dynamic-sampling filter (not CCPO's DAPO threshold)
    dapo_std_threshold: float | None = Field(default=None, ge=0, le=cb.MAX_COEF)
    max_steps: int = Field(default=100, ge=1, le=cb.MAX_STEPS)  # not a paper value (the paper recipe: rl.max_steps)


class AndroidLongEval(Section):
    """Online evaluation (AndroidLong App. C.1, Table 6): stage values of ``eval``."""

    mirrors: ClassVar[str] = "eval"
    n_seeds: int = Field(default=3, ge=1, le=cb.MAX_RUNS)  # AndroidLong App. C.1: three independent runs
    online_same_tasks: bool = True  # AndroidLong App. C.1: the runs repeat the same tasks
    # AndroidLong App. C.1: pass@1 of three samples (the temperature is not given: 1.0)
    online_sampling: Sampling = Field(default_factory=lambda: Sampling(do_sample=True, temperature=1.0))


class AndroidLongSection(Section):
    """AndroidLong settings (module doc)."""

    memory: bool = False  # AndroidLong App. C.1, Table 6: memory written into the chain of thought
    # not a paper value: new tokens a memory step may write on top of eval.max_new_tokens / rl.max_new_tokens
    memory_tokens: int = Field(default=32, ge=0, le=cb.MAX_TOKENS)
    model: AndroidLongModel = Field(default_factory=AndroidLongModel)
    sft: AndroidLongSFT = Field(default_factory=AndroidLongSFT)
    rl: AndroidLongRL = Field(default_factory=AndroidLongRL)
    eval: AndroidLongEval = Field(default_factory=AndroidLongEval)


def section(cfg: RunConfig) -> AndroidLongSection:
    """``cfg.androidlong``; a :class:`guirl.config.ConfigError` saying how to add it when unset."""
    return cfg.method_section("androidlong")  # type: ignore[return-value]


def variant_updates(cfg: RunConfig, *, memory: bool) -> dict[str, Any]:
    """The ``Config.replace`` updates of one of 07's AndroidLong models (SFT, then GRPO with the role
    ``androidlong``): ``androidlong.memory``, ``rl.role: androidlong``, the section's stage values
    (``model``, ``sft``, ``rl``, ``eval``: module doc) and the memory's token budget
    (``memory_tokens`` more for ``eval.max_new_tokens`` and ``rl.max_new_tokens`` with memory)."""
    sec = section(cfg)
    out: dict[str, Any] = {"androidlong.memory": memory, "rl.role": "androidlong", "rl.reward": None}
    for part in (sec.model, sec.sft, sec.rl, sec.eval):
        out.update(stage_updates(part))
    extra = sec.memory_tokens if memory else 0
    out["eval.max_new_tokens"] = cfg.eval.max_new_tokens + extra
    out["rl.max_new_tokens"] = sec.rl.max_new_tokens + extra
    return out


#: Kernel keys notebook 07 sets per AndroidLong model (``Method.derived``): an experiment or override is refused.
DERIVED: dict[str, str] = {
    "androidlong.memory": "07 trains one model without and one with memory",
    "rl.role": "AndroidLong's GRPO is the androidlong role, AgentCPM-GUI's RFT the generic grpo role",
    "rl.reward": "AndroidLong's GRPO trains with its Subgoal-SR reward, AgentCPM-GUI's RFT with its own",
}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """AndroidLong's values for a recipe kind: ``paper``: the section's defaults (App. C.1-C.2, Table
    7), the GRPO length the profile's ``rl.max_steps`` (the supplement gives none); ``tiny``: the tiny
    profile's own training values and 07's CPU sizes (not paper values)."""
    if kind != "tiny":
        return {"androidlong.rl.max_steps": PROFILE}
    out: dict[str, Any] = {f"androidlong.model.{k}": PROFILE for k in ("min_pixels", "max_pixels")}
    out.update(
        {
            f"androidlong.sft.{k}": PROFILE
            for k in (
                "epochs",
                "learning_rate",
                "lr_scheduler_type",
                "per_device_batch_size",
                "grad_accum",
                "warmup_ratio",
            )
        }
    )
    out["androidlong.sft.lora.enabled"] = PROFILE
    out.update(
        {
            f"androidlong.rl.{k}": PROFILE
            for k in (
                "learning_rate",
                "max_grad_norm",
                "eps_low",
                "eps_high",
                "beta",
                "max_new_tokens",
                "mini_batches",
                "dapo_std_threshold",
            )
        }
    )
    out.update({f"androidlong.eval.{k}": PROFILE for k in ("n_seeds", "online_same_tasks", "online_sampling")})
    out.update(
        {
            "androidlong.sft.max_steps": 100,  # each of the two SFT stages continuing 01's main agent
            "androidlong.rl.max_steps": 4,  # online GRPO steps of each model
            "androidlong.rl.group_size": 4,  # episodes per task (Table 7: 8)
            "androidlong.rl.prompts_per_step": 2,  # 8 episodes at once: 2 long-loop tasks a step (Table 7: 256)
        }
    )
    return out
