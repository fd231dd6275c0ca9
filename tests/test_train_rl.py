"""The RL engine (guirl.train.rl): loss equal to TRL's GRPO loss, learning signal on a toy task,
DAPO accumulation, LoRA and full-parameter paths, the accelerate entry, resume after a kill."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import kill_after, stage_of
from guirl.config import load_config
from guirl.methods import get_reward
from guirl.rewards.base import RewardResult
from guirl.rl.hooks import RLHooks, StepTask, single_turn_rollout, step_tasks
from guirl.rl.samples import TaskStream, dapo_keep_hook, group_advantage_hook
from guirl.rollout import FunctionPolicy, HFPolicy
from guirl.train.rl import (
    FINAL_DIR,
    LOG_FIELDS,
    LOG_FILE,
    RESULT_FILE,
    RL_ENTRY,
    last_checkpoint,
    read_log,
    train_rl,
)

SMALL_PIXELS = ["model.min_pixels=3136", "model.max_pixels=3136"]  # 56x56 px: 4 image tokens


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model()


def _image(color: str, size=(56, 56)):
    from PIL import Image

    return Image.new("RGB", size, color)


# --------------------------------------------------------------------------------------------
# Our loss == TRL 1.16 GRPOTrainer._compute_loss on one fixed batch (real tiny VLM, images).
# (loss_type, our aggregation). TRL's KL bias correction (default True in 1.16: per-token KL times
# the importance ratio, DeepSeek-V3.2) is turned off: our KL is GRPO's / verl's k3 (docs/rl.md).
TRL_CASES = [
    ("grpo", "seq-mean-token-mean"),  # mean over sequences of each sequence's token mean
    ("dr_grpo", "seq-mean-token-sum-norm"),  # token sum / (B * max_completion_length)
    ("dapo", "token-mean"),  # token sum / tokens of the (global) batch
]
LOSS_ATOL = 1e-6  # float32: observed differences <= 2e-8 (loss) and <= 1e-7 (gradients)


@pytest.fixture(scope="module")
def fixed_batch(tiny_model):
    from guirl.models import load_processor
    from guirl.prompts import PromptSpec, build_prompt
    from guirl.rl.logprobs import encode_samples

    proc = load_processor(tiny_model, min_pixels=3136, max_pixels=3136 * 4)
    spec = PromptSpec(output_format="ccpo", n_history=1)
    prompts = [
        build_prompt("open notes", [], _image("red", (112, 112)), spec),
        build_prompt("type milk", [("click", _image("green", (56, 112)))], _image("red", (112, 112)), spec),
    ] * 2
    g = torch.Generator().manual_seed(0)
    completions = [torch.randint(0, 1900, (n,), generator=g).tolist() for n in (5, 3, 7, 2)]  # ragged
    batch = encode_samples(proc, prompts, completions)
    shape = batch["completion_ids"].shape
    return {
        "processor": proc,
        "prompts": prompts,
        "batch": batch,
        "advantages": torch.tensor([1.0, -0.5, 0.3, -1.2]),
        # old / ref log-probs away from the policy's, so that clipping (both sides) and KL act
        "old_noise": 0.3 * torch.randn(shape, generator=g),
        "ref_noise": 0.2 * torch.randn(shape, generator=g),
    }


@pytest.mark.parametrize("loss_type, agg", TRL_CASES)
def test_loss_equals_trl_grpo_loss(tiny_model, fixed_batch, loss_type, agg, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from guirl.models import load_model
    from guirl.rl.logprobs import completion_logprobs
    from guirl.rl.losses import policy_loss

    fb = fixed_batch
    batch, proc = fb["batch"], fb["processor"]
    beta, eps_low, eps_high, max_len = 0.04, 0.2, 0.28, 16
    with torch.no_grad():
        current, _ = completion_logprobs(load_model(tiny_model), batch)
    old, ref = current + fb["old_noise"], current + fb["ref_noise"]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        loss_type=loss_type,
        beta=beta,
        epsilon=eps_low,
        epsilon_high=eps_high,
        max_completion_length=max_len,
        use_bias_correction_kl=False,
        per_device_train_batch_size=4,
        num_generations=4,
        use_cpu=True,
        bf16=False,
        report_to="none",
    )
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "x"}]}] * 4)
    trainer = GRPOTrainer(
        model=load_model(tiny_model),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=data,
        processing_class=proc,
    )
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; one micro-batch here
    trainer.model.train()
    c = batch["completion_ids"].shape[1]
    inputs = {
        "prompt_ids": batch["input_ids"][:, :-c],
        "prompt_mask": batch["attention_mask"][:, :-c],
        "completion_ids": batch["completion_ids"],
        "completion_mask": batch["completion_mask"],
        "advantages": fb["advantages"],
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": batch["completion_mask"].sum(),
        "pixel_values": batch["pixel_values"],
        "image_grid_thw": batch["image_grid_thw"],
        "mm_token_type_ids": batch["mm_token_type_ids"],
        "num_images": [len(p[1]) for p in fb["prompts"]],
    }
    trl_loss = trainer._compute_loss(trainer.model, inputs)  # TRL's own log-probs (fused LM head) and loss
    trl_loss.backward()

    ours_model = load_model(tiny_model).train()
    logp, _ = completion_logprobs(ours_model, batch)
    mask = batch["completion_mask"].float()
    ours, stats = policy_loss(
        logp,
        old,
        fb["advantages"],
        mask,
        ref_logp=ref,
        beta=beta,
        eps_low=eps_low,
        eps_high=eps_high,
        agg=agg,
        norm_len=max_len,
    )
    ours.backward()
    assert ours.item() == pytest.approx(trl_loss.item(), abs=LOSS_ATOL)
    grads = zip(trainer.model.named_parameters(), ours_model.named_parameters(), strict=True)
    diffs = [float((a.grad - b.grad).abs().max()) for (_, a), (_, b) in grads if a.grad is not None]
    assert diffs and max(diffs) < LOSS_ATOL
    # same clipped share and KL as TRL logs them
    assert float(stats["clipped"].sum() / mask.sum()) == pytest.approx(
        trainer._metrics["train"]["clip_ratio/region_mean"][-1], abs=1e-6
    )
    kl = float((stats["per_token_kl"] * mask).sum() / mask.sum())
    assert kl == pytest.approx(trainer._metrics["train"]["kl"][-1], rel=1e-5)
    assert 0 < float(stats["clipped"].sum()) < float(mask.sum())  # the batch exercises clipping


# --------------------------------------------------------------------------------------------
# helpers for engine runs
def _toy_hooks(sign: float = 1.0) -> RLHooks:
    """Two prompts; an even first token earns 1, an odd one 0 (a two-action bandit over the
    vocabulary). ``sign = -1`` flips the advantages."""
    from guirl.prompts import PromptSpec, build_prompt

    spec = PromptSpec(output_format="ccpo", n_history=0)
    tasks = [StepTask(build_prompt(f"pick {c}", [], _image(c), spec), {"color": c}) for c in ("red", "blue")]
    grpo = group_advantage_hook("grpo")

    def reward(samples):
        return [
            RewardResult(float(s.completion_ids[0] % 2 == 0), {"even": float(s.completion_ids[0] % 2 == 0)})
            for s in samples
        ]

    return RLHooks(
        tasks=TaskStream(tasks, seed=0),
        rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
        reward=reward,
        advantage=lambda samples: sign * grpo(samples),
    )


def _p_even(model_dir: Path, hooks: RLHooks) -> float:
    from guirl.models import load_model, load_processor
    from guirl.rl.logprobs import FORWARD_KEYS, encode_samples

    model = load_model(model_dir)
    proc = load_processor(model_dir, min_pixels=3136, max_pixels=3136)
    prompts = [t.prompt for t in hooks.tasks.items]
    batch = encode_samples(proc, prompts, [(0,)] * len(prompts))
    with torch.no_grad():
        logits = model(**{k: batch[k] for k in FORWARD_KEYS}, logits_to_keep=2).logits[:, 0].float()
    return float(torch.softmax(logits, -1)[:, 0::2].sum(-1).mean())


def _policy(max_new_tokens: int):
    return lambda model, processor: HFPolicy(model, processor, max_new_tokens=max_new_tokens, batch_size=8)


TOY = [
    "rl.max_new_tokens=1",
    "rl.group_size=8",
    "rl.prompts_per_step=2",
    "rl.learning_rate=0.03",
    "rl.beta=0",
    "rl.micro_batch_size=16",
    "rl.save_steps=1000",
    *SMALL_PIXELS,
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "sign, direction",
    [
        (1.0, +1),  # the rewarded action (an even token) must become more likely
        (-1.0, -1),  # control: flipped advantages make it less likely, so the first case can fail
    ],
)
def test_rewarded_action_probability_rises(tiny_model, tmp_path, sign, direction):
    hooks = _toy_hooks(sign)
    cfg = load_config("tiny", overrides=[*TOY, "rl.max_steps=4"])
    before = _p_even(tiny_model, hooks)
    result = train_rl(cfg, hooks, base_model=tiny_model, output_dir=tmp_path, make_policy=_policy(1), progress=False)
    after = _p_even(Path(result["final"]), hooks)
    assert abs(before - 0.5) < 0.01  # random init: even and odd ids about equally likely
    assert direction * (after - before) > 0.2  # measured: 0.50 -> 0.91 (and 0.05 flipped)
    rows = read_log(tmp_path / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and all(r["n_generated"] == 16 for r in rows)


def _payload(marker: str) -> None:
    """What a crafted checkpoint file would run on unpickling (here: leave a marker file)."""
    Path(marker).write_text("ran")


class _Crafted:
    """Unpickles into a call of :func:`_payload`: a pickle that runs code when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (_payload, (self.marker,))


def _stop_after(out: Path, step: int) -> None:
    """Make ``out`` look like a run killed after its step-``step`` checkpoint."""
    import shutil

    for p in [out / RESULT_FILE, out / FINAL_DIR, *out.glob("checkpoint-*")]:
        if p.name.startswith("checkpoint-") and int(p.name.removeprefix("checkpoint-")) <= step:
            continue
        shutil.rmtree(p) if p.is_dir() else p.unlink()


@pytest.mark.slow
def test_resume_refuses_pickles_drops_a_torn_log_line_and_sums_training_time(tiny_model, tmp_path):
    hooks = _toy_hooks()
    cfg = load_config("tiny", overrides=[*TOY, "rl.max_steps=3", "rl.save_steps=1", "rl.save_total_limit=5"])
    out = tmp_path / "rl"
    train_rl(cfg, hooks, base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    _stop_after(out, 2)  # killed after its step-2 checkpoint, in the middle of writing row 4
    with (out / LOG_FILE).open("a") as f:
        f.write('{"step": 3, "reward": 0.5, "rew')
    engine = json.loads((out / "checkpoint-2" / "engine.json").read_text())
    assert set(engine) == {"engine", "tasks", "scheduler"}  # plain JSON, no custom pickle beside it
    assert not list((out / "checkpoint-2").glob("custom_checkpoint_*"))
    engine["engine"]["train_seconds"] = 1000.0  # earlier runs trained 1000 s for steps 1-2
    (out / "checkpoint-2" / "engine.json").write_text(json.dumps(engine))

    # a checkpoint copied from elsewhere with a pickle that runs code: refused, nothing runs
    marker = tmp_path / "pwned"
    rng = out / "checkpoint-2" / "random_states_0.pkl"
    good_rng = rng.read_bytes()
    torch.save({"random_state": _Crafted(marker)}, rng)
    with pytest.raises(RuntimeError, match=r"random_states_0.pkl: holds objects other than tensors and plain data"):
        train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    assert not marker.exists()

    rng.write_bytes(good_rng)  # the genuine RNG state, and a crafted pickle where accelerate keeps its own objects
    torch.save({"x": _Crafted(marker)}, out / "checkpoint-2" / "custom_checkpoint_0.pkl")
    with pytest.raises(RuntimeError, match=r"custom_checkpoint_0.pkl: a pickle of objects this engine never writes"):
        train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    assert not marker.exists()

    # without it: resumes at step 3
    (out / "checkpoint-2" / "custom_checkpoint_0.pkl").unlink()
    with pytest.warns(UserWarning, match=rf"{LOG_FILE}: line 4 is cut short"):
        result = train_rl(
            cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False
        )
    assert not marker.exists()
    assert result["first_step"] == 2 and result["global_step"] == 3
    assert [r["step"] for r in read_log(out / LOG_FILE)] == [1, 2, 3]  # the torn line went, step 3 once
    assert result["train_seconds"] > 1000.0  # the training time of steps 1-2 is counted


@pytest.mark.slow
def test_rows_of_a_run_killed_before_its_first_checkpoint_are_not_kept(tiny_model, tmp_path):
    cfg = load_config("tiny", overrides=[*TOY, "rl.max_steps=2"])  # no checkpoint before the end
    out = tmp_path / "rl"
    train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    _stop_after(out, 0)  # killed after logging steps 1-2, before any checkpoint
    result = train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    assert result["first_step"] == 0
    assert [r["step"] for r in read_log(out / LOG_FILE)] == [1, 2]  # not [1, 2, 1, 2]


@pytest.mark.slow
def test_a_diverging_rl_step_stops_the_stage_and_saves_nothing(tiny_model, tmp_path):
    # rl.learning_rate=1e308 (set past validation, as a saved config could hold it): the first update
    # overflows the weights; the stage stops at that step naming the key, with no checkpoint and no result
    from guirl.train.stagestate import NonFiniteError

    cfg = load_config("tiny", overrides=[*TOY, "rl.max_steps=3", "rl.save_steps=1", "rl.warmup_steps=0"])
    object.__setattr__(cfg.rl, "learning_rate", 1e308)
    out = tmp_path / "rl"
    with pytest.raises(NonFiniteError, match=r"stage 'rl': .* after step 1 .*lower rl\.learning_rate \(now 1e\+308\)"):
        train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    assert not (out / RESULT_FILE).exists() and not list(out.glob("checkpoint-*"))


@pytest.mark.slow
def test_a_checkpoint_whose_weights_do_not_load_is_named_and_passed_over(tiny_model, tmp_path):
    from guirl.train.rl import last_checkpoint

    cfg = load_config("tiny", overrides=[*TOY, "rl.max_steps=2", "rl.save_steps=1", "rl.save_total_limit=5"])
    out = tmp_path / "rl"
    train_rl(cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False)
    _stop_after(out, 2)
    weights = next((out / "checkpoint-2").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:4096])  # complete (engine.json there), then cut short
    with pytest.warns(UserWarning, match=rf"{weights.name}: corrupt checkpoint weights"):
        assert last_checkpoint(out) == out / "checkpoint-1"
    with pytest.warns(UserWarning, match="corrupt checkpoint weights"):
        result = train_rl(
            cfg, _toy_hooks(), base_model=tiny_model, output_dir=out, make_policy=_policy(1), progress=False
        )
    assert result["first_step"] == 1 and result["global_step"] == 2


def test_dapo_accumulates_groups_until_the_batch_is_full():
    """The engine's collect loop with a scripted policy: groups whose rewards are all equal are
    dropped and more tasks are drawn until ``prompts_per_step`` groups are kept (DAPO)."""
    from accelerate import Accelerator

    from guirl.train.rl import _Engine

    # tasks 0..9; a task's group is constant (dropped) unless it is task 0, 3 or 6
    tasks = list(range(10))

    def rollout(policy, batch, args):
        from guirl.rl.samples import Sample

        out = policy.complete([([], [])] * len(batch), n=args.group_size, do_sample=True, seed=args.seed)
        return [
            Sample(prompt=([], []), completion_ids=(1,), text=c.text, group=g, row={"task": t, "k": k})
            for g, (t, comps) in enumerate(zip(batch, out, strict=True))
            for k, c in enumerate(comps)
        ]

    def reward(samples):
        return [RewardResult(float(s.row["k"] == 0) if s.row["task"] in (0, 3, 6) else 0.5) for s in samples]

    hooks = RLHooks(
        tasks=TaskStream(tasks, shuffle=False),
        rollout=rollout,
        reward=reward,
        advantage=group_advantage_hook(),
        keep=dapo_keep_hook(0.0),
    )
    cfg = load_config("tiny", overrides=["rl.prompts_per_step=2", "rl.group_size=2", "rl.max_draws=3"])

    class Dummy:
        def eval(self):
            return self

    engine = _Engine(cfg, hooks, None, Dummy(), None, Accelerator(cpu=True))
    policy = FunctionPolicy(lambda prompt: "x")
    kept, generated, info = engine.collect(policy, step=1)
    # draw 1: tasks 0, 1 -> group of task 0 kept; draw 2: tasks 2, 3 -> task 3 kept: full after 2 draws
    assert info["draws"] == 2 and info["n_generated"] == 8 and len(generated) == 8
    assert sorted({s.row["task"] for s in kept}) == [0, 3] and len(kept) == 4
    assert len({s.group for s in kept}) == 2  # group ids unique across draws
    assert info["reward"] == pytest.approx((0.5 + 0.5 + 1.0 + 0.0) * 2 / 8)  # before the filter
    # seeds differ per draw (a resumed step regenerates the same completions)
    assert len({opts["seed"] for _, opts in policy.calls}) == 2
    # max_draws caps the search: tasks 4..9 hold one varying group (task 6) in 3 draws of 2
    kept, _, info = engine.collect(policy, step=2)
    assert info["draws"] == 3 and sorted({s.row["task"] for s in kept}) == [6]


@pytest.mark.slow
@pytest.mark.parametrize(
    "lora, files",
    [
        (True, "adapter_config.json"),  # rl.lora: a PEFT LoRA adapter; reference = adapter disabled
        (False, "config.json"),  # the default (CCPO Table 8): all parameters; reference = frozen copy of the start
    ],
)
def test_lora_and_full_parameter_paths(tiny_model, tmp_path, lora, files):
    hooks = _toy_hooks()
    overrides = [*TOY, "rl.max_steps=2", "rl.beta=0.04", f"rl.lora={str(lora).lower()}", "rl.learning_rate=0.01"]
    overrides += ["rl.lora_learning_rate=0.02", "lora.enabled=true"]  # lora.enabled is SFT's: RL ignores it
    result = train_rl(
        load_config("tiny", overrides=overrides),
        hooks,
        base_model=tiny_model,
        output_dir=tmp_path,
        make_policy=_policy(1),
        progress=False,
    )
    assert result["adapter"] is lora and (Path(result["final"]) / files).is_file()
    assert result["learning_rate"] == (0.02 if lora else 0.01)  # LoRA RL has its own learning rate
    assert (result["trainable_parameters"] == result["parameters"]) is not lora
    rows = read_log(tmp_path / LOG_FILE)
    assert rows[0]["lr"] == result["learning_rate"]
    assert rows[0]["kl"] < 1e-9  # step 1: the policy is the reference (LoRA B = 0, or the same weights)
    assert rows[1]["kl"] > 0  # after one update they differ
    from guirl.models import load_trained

    model, _ = load_trained(result, min_pixels=3136, max_pixels=3136)  # evaluation reads the result
    assert model is not None


# --------------------------------------------------------------------------------------------
# the accelerate entry (python -m guirl.stages.rl) through run_stage, on MiniGUI
STAGE = [
    "rl.reward=agentcpm",  # AgentCPM-GUI's -1 / 0 / 1
    "rl.histories=[1AO]",
    "rl.prompts_per_step=2",
    "rl.group_size=2",
    "rl.max_new_tokens=8",
    "rl.micro_batch_size=4",
    "rl.rollout_batch_size=4",
]


# A paper profile with only what a CPU cannot do swapped out (checkpoint, precision, one CPU
# process instead of 8 GPUs with ZeRO-2) and the sizes cut; all-parameter RL with activation
# checkpointing, reward (CCPO's), histories (1AO + 3AO), DAPO filter, KL and mini-batches stay the
# profile's (CCPO Table 8).
PAPER_CPU_DRY_RUN = [
    "model.torch_dtype=float32",
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",
    "rl.prompts_per_step=2",
    "rl.group_size=2",
    "rl.max_new_tokens=8",
    "rl.max_draws=2",
    "rl.rollout_batch_size=4",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "profile, overrides, adapter",
    [
        # tiny profile: single-turn GRPO with AgentCPM-GUI's -1 / 0 / 1 reward, all parameters
        ("tiny", STAGE, False),
        # paper-3b on CPU with the tiny checkpoint: all parameters, CCPO reward, DAPO filter on
        ("paper-3b", PAPER_CPU_DRY_RUN, False),
        # the LoRA option (rl.lora) at its own learning rate
        ("paper-3b", [*PAPER_CPU_DRY_RUN, "rl.lora=true"], True),
    ],
)
def test_single_turn_grpo_stage_end_to_end(tiny_model, minigui, tmp_path, profile, overrides, adapter):
    from guirl.train.launch import run_stage

    cfg = load_config(profile, overrides=[f"model.path={tiny_model}", *overrides, "rl.max_steps=2", "rl.save_steps=2"])
    out = tmp_path / "grpo"
    result = run_stage(
        stage_of(cfg, "grpo", data_dir=minigui, base_model=tiny_model, output_dir=out, entry=RL_ENTRY), echo=False
    )
    assert result["global_step"] == 2 and result["stage"] == "grpo" and result["role"] == "grpo"
    assert result["adapter"] is adapter
    final = out / FINAL_DIR
    assert (final / ("adapter_config.json" if adapter else "config.json")).is_file()
    if adapter:
        saved = json.loads((final / "adapter_config.json").read_text())
        assert saved["r"] == cfg.lora.r and saved["lora_alpha"] == cfg.lora.alpha
    assert (out / "checkpoint-2" / "engine.json").is_file()
    rows = read_log(out / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2]
    reward = get_reward(cfg.rl.reward or "ccpo")  # null: the grpo stage trains with CCPO's reward (stages/rl.py)
    for r in rows:
        assert set(LOG_FIELDS) <= set(r), set(LOG_FIELDS) - set(r)
        assert any(k.startswith("reward/") for k in r)  # the reward's components
        assert reward.low <= r["reward"] <= reward.high and r["step_seconds"] > 0
        assert r["n_generated"] == 4 * r["draws"] and r["n_kept"] <= 4
        if not r["skipped"]:  # the DAPO filter may leave nothing to train on (no update)
            assert r["prompt_tokens"] > 180 and 0 < r["completion_tokens"] <= 8
    assert load_config(out / "config.yaml").hash() == cfg.hash()  # trained with the notebook's config


@pytest.mark.slow
def test_killed_rl_stage_resumes_at_the_right_step_with_the_same_state(tiny_model, minigui, tmp_path):
    from guirl.train.launch import prepare_stage, run_stage

    cfg = load_config("tiny", overrides=[*STAGE, "rl.max_steps=4", "rl.save_steps=1", "rl.save_total_limit=5"])
    # reference: uninterrupted
    ref = run_stage(
        stage_of(cfg, "grpo", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "ref", entry=RL_ENTRY),
        echo=False,
    )
    # killed after its step-2 checkpoint, then resumed by calling run_stage again
    out = tmp_path / "killed"
    cmd = prepare_stage(
        stage_of(cfg, "grpo", data_dir=minigui, base_model=tiny_model, output_dir=out, entry=RL_ENTRY), echo=False
    )
    kill_after(cmd, out / "checkpoint-2" / "engine.json", 600, "step-2 checkpoint")
    assert not (out / RESULT_FILE).exists()
    killed_at = int(last_checkpoint(out).name.removeprefix("checkpoint-"))
    assert killed_at in (2, 3)
    result = run_stage(
        stage_of(cfg, "grpo", data_dir=minigui, base_model=tiny_model, output_dir=out, entry=RL_ENTRY), echo=False
    )
    assert result["first_step"] == killed_at and result["global_step"] == 4
    assert Path(result["resumed_from"]).name == f"checkpoint-{killed_at}"
    rows, ref_rows = read_log(out / LOG_FILE), read_log(tmp_path / "ref" / LOG_FILE)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # each step logged once
    # same state: the resumed steps draw the same tasks and completions and reach the same loss
    keys = ["reward", "reward_std", "loss", "kl", "entropy", "prompt_tokens", "completion_tokens", "epoch"]
    for r, q in zip(rows, ref_rows, strict=True):
        for k in keys:
            assert r[k] == (None if q[k] is None else pytest.approx(q[k], rel=1e-5, abs=1e-7)), (r["step"], k)
    from safetensors.torch import load_file

    a = load_file(str(Path(result["final"]) / "model.safetensors"))
    b = load_file(str(Path(ref["final"]) / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    engine = json.loads((out / "checkpoint-4" / "engine.json").read_text())
    assert engine["engine"]["step"] == 4 and engine["tasks"]["cursor"] == 4 * 2


def test_step_tasks_rows_feed_the_reward(minigui):
    from guirl.data.splits import load_splits
    from guirl.prompts import PromptSpec
    from guirl.rl.hooks import format_reward_hook
    from guirl.rl.samples import Sample

    train = load_splits(minigui)["train"]
    specs = [PromptSpec("ccpo", 1, "nAO"), PromptSpec("ccpo", 3, "nAO")]
    tasks = step_tasks(train.episodes, specs, image_root=train.image_root, min_pixels=3136, max_pixels=141120)
    n_steps = sum(len(ep.steps) for ep in train.episodes)
    assert len(tasks) == 2 * n_steps
    assert [t.row["history"] for t in tasks[:2]] == ["1AO", "3AO"]  # specs interleaved per step
    first = tasks[0]
    # the annotated action, written in the format, earns AgentCPM-GUI's 1; gibberish earns -1
    from guirl.actions.formats import get_format
    from guirl.actions.types import Action
    from guirl.prompts import format_context

    step = train.episodes[0].steps[0]
    # (the AgentCPM-GUI reward checks the compact JSON schema of the text: the answer is written in it)
    right = get_format("agentcpm").format(
        Action.from_dict(json.loads(first.row["gt_action"])), format_context(step.screen_size, 3136, 141120)
    )
    hook = format_reward_hook(get_reward("agentcpm").fn, "agentcpm", min_pixels=3136, max_pixels=141120)
    samples = [Sample(first.prompt, (1,), text, 0, first.row) for text in (right, "no action here")]
    assert [r.total for r in hook(samples)] == [1.0, -1.0]
    assert hook([]) == []


# --------------------------------------------------------------------------------------------
# Two data-parallel ranks (torchrun, gloo on CPU) and one process train on the same batch: a
# scripted policy makes the samples independent of rank and seed, so one update must give the
# same weights. Rank 0 gets 2 of the 3 tasks: uneven shares, weight-0 passes on rank 1.
DDP_WORKER = """
import sys
from pathlib import Path

from PIL import Image

from guirl.config import load_config
from guirl.models import build_tiny_model
from guirl.prompts import PromptSpec, build_prompt
from guirl.rewards.base import RewardResult
from guirl.rl.samples import TaskStream, group_advantage_hook
from guirl.rollout import Completion
from guirl.rl.hooks import RLHooks, StepTask, single_turn_rollout
from guirl.train.rl import train_rl


class Scripted:
    def complete(self, prompts, *, n=1, do_sample=False, temperature=1.0, top_p=1.0, seed=None):
        out = []
        for p in prompts:
            t = int(p[0][-1]["content"][0]["text"].split()[-1])
            out.append([Completion("x", tuple(100 + (7 * t + 3 * k + j) % 40 for j in range(1 + k % 3))) for k in range(n)])
        return out


spec = PromptSpec(output_format="ccpo", n_history=0)
tasks = [StepTask(build_prompt(f"task {t}", [], Image.new("RGB", (56, 56), c), spec), {}) for t, c in enumerate(["red", "blue", "green"])]
hooks = RLHooks(
    tasks=TaskStream(tasks, shuffle=False),
    rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
    reward=lambda samples: [RewardResult(float(s.completion_ids[0] % 2 == 0)) for s in samples],
    advantage=group_advantage_hook("grpo"),
)
overrides = ["rl.prompts_per_step=3", "rl.group_size=4", "rl.max_steps=1", "rl.micro_batch_size=1", "rl.mini_batches=1",
             "rl.learning_rate=0.01", "rl.beta=0.04", "model.min_pixels=3136", "model.max_pixels=3136"]
train_rl(load_config("tiny", overrides=overrides), hooks, base_model=build_tiny_model(), output_dir=Path(sys.argv[1]),
         make_policy=lambda model, processor: Scripted(), progress=False)
"""


@pytest.mark.slow
def test_two_ranks_train_like_one(tiny_model, tmp_path):
    import sys

    from safetensors.torch import load_file

    worker = tmp_path / "worker.py"
    worker.write_text(DDP_WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517"]
    for cmd in ([sys.executable, str(worker), str(tmp_path / "one")], [*torchrun, str(worker), str(tmp_path / "two")]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    one, two = read_log(tmp_path / "one" / LOG_FILE)[0], read_log(tmp_path / "two" / LOG_FILE)[0]
    assert (one["processes"], two["processes"]) == (1, 2)
    assert one["n_kept"] == two["n_kept"] == 12 and one["adv_abs"] > 0
    # loss and the (all-reduced, pre-clipping) gradient norm: a missing global normaliser or
    # dp_size factor changes both
    keys = (
        "reward",
        "loss",
        "pg_loss",
        "kl",
        "entropy",
        "clip_frac",
        "grad_norm",
        "completion_tokens",
        "prompt_tokens",
    )
    for k in keys:
        assert two[k] == pytest.approx(one[k], rel=1e-5, abs=1e-7), k
    a = load_file(str(tmp_path / "one" / FINAL_DIR / "model.safetensors"))
    b = load_file(str(tmp_path / "two" / FINAL_DIR / "model.safetensors"))
    start = load_file(str(tiny_model / "model.safetensors"))
    moved = max(float((a[k] - start[k]).abs().max()) for k in a)
    assert moved > 1e-3  # the update did something
    # and the same thing on 2 ranks; AdamW's first step is about lr * sign(grad), so entries whose
    # gradient is at rounding level may differ (observed 2e-5 against a 1e-2 step)
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 0.01 * moved
