"""DeepSpeed on CPU: ``configs/deepspeed/zero2.json`` (the GPU nodes' ZeRO-2 config) loads through
accelerate's ``DeepSpeedPlugin``, the paper profiles' training arguments fill its ``"auto"`` values,
and one process runs real ZeRO-2 optimizer steps of a tiny model on DeepSpeed's CPU accelerator
that match plain PyTorch steps.

The ZeRO-2 run happens in a subprocess (this file run as a script): it initialises a
``torch.distributed`` process group (gloo, world size 1, from MASTER_ADDR / MASTER_PORT / RANK /
LOCAL_RANK / WORLD_SIZE), which must not leak into the other tests. Its first run on a machine
compiles DeepSpeed's small shared-memory communication op (cached under
``~/.cache/torch_extensions``), hence ``slow``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ZERO2 = REPO / "configs" / "deepspeed" / "zero2.json"
AUTO_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu", "bf16.enabled", "fp16.enabled"}
STEPS = 3  # AdamW's first update is about lr * sign(grad); later ones depend on gradient magnitudes
LR = 1e-2
CLIP = 1.0
BATCH = 4


def auto_keys(config: dict, prefix: str = "") -> set[str]:
    """Dotted keys of ``config`` whose value is ``"auto"``."""
    keys: set[str] = set()
    for k, v in config.items():
        if isinstance(v, dict):
            keys |= auto_keys(v, f"{prefix}{k}.")
        elif v == "auto":
            keys.add(f"{prefix}{k}")
    return keys


def test_auto_keys() -> None:
    assert auto_keys({"a": "auto", "b": {"c": "auto", "d": 1}, "e": 2}) == {"a", "b.c"}


def test_zero2_json_loads_through_the_accelerate_plugin() -> None:
    from accelerate.utils import DeepSpeedPlugin

    plugin = DeepSpeedPlugin(hf_ds_config=str(ZERO2), gradient_accumulation_steps=2, gradient_clipping=CLIP)
    assert plugin.zero_stage == 2
    assert plugin.hf_ds_config.is_zero2() and not plugin.hf_ds_config.is_zero3()
    assert not plugin.hf_ds_config.is_offload()  # ZeRO-2 without CPU offload, as on the GPU nodes
    # the plugin fills what it knows; the rest waits for the data loader and the precision
    assert plugin.deepspeed_config["gradient_accumulation_steps"] == 2
    assert plugin.deepspeed_config["gradient_clipping"] == CLIP
    assert auto_keys(plugin.deepspeed_config) == AUTO_KEYS
    # what Accelerator.prepare fills from the data loader and mixed precision
    plugin.deepspeed_config_process(
        must_match=True,
        train_micro_batch_size_per_gpu=BATCH,
        train_batch_size=BATCH * 2,
        **{"bf16.enabled": False, "fp16.enabled": False},
    )
    assert auto_keys(plugin.deepspeed_config) == set()
    assert plugin.deepspeed_config["train_batch_size"] == BATCH * 2


@pytest.mark.parametrize(
    "file_value, expect",
    [
        # "auto" in the file: the run config's value goes in
        ("auto", 4),
        # the key left out of the file: the same
        (None, 4),
        # the file already says the same number: kept
        (4, 4),
        # the file says another number: refused, naming the file and the key
        (8, "zero2.json: train_micro_batch_size_per_gpu is 8 but the RL engine needs 4"),
    ],
)
def test_fill_deepspeed_config(file_value, expect) -> None:
    from guirl.train.rl import fill_deepspeed_config

    ds = {"zero_optimization": {"stage": 2}}
    if file_value is not None:
        ds["train_micro_batch_size_per_gpu"] = file_value
    values = {"train_micro_batch_size_per_gpu": 4}
    if isinstance(expect, str):
        with pytest.raises(ValueError, match=expect):
            fill_deepspeed_config(ds, values, source="zero2.json")
        assert ds["train_micro_batch_size_per_gpu"] == file_value  # nothing overwritten
    else:
        assert fill_deepspeed_config(ds, values, source="zero2.json") is ds
        assert ds == {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": expect}


def test_deepspeed_values_come_from_the_rl_config() -> None:
    from guirl.config import load_config
    from guirl.train.rl import deepspeed_values

    rl = load_config("paper-3b").rl
    assert deepspeed_values(rl) == {
        "train_micro_batch_size_per_gpu": rl.micro_batch_size,
        "gradient_accumulation_steps": 1,  # the engine sets the accumulation boundary itself
        "gradient_clipping": rl.max_grad_norm,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_script(tmp_path_factory: pytest.TempPathFactory, mode: str) -> dict:
    """Run this file as a script (``mode``: what it runs) in one fresh process; return its report."""
    out = tmp_path_factory.mktemp(mode) / "result.json"
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "OMP_NUM_THREADS": "1",
        "GUIRL_TEST_CKPT": str(out.parent / "checkpoint"),
    }
    proc = subprocess.run(
        [sys.executable, __file__, str(out), mode], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def zero2_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _run_script(tmp_path_factory, "zero2")


@pytest.fixture(scope="module")
def rl_engine_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _run_script(tmp_path_factory, "rl")


@pytest.mark.slow
def test_zero2_optimizer_steps_run_on_cpu(zero2_run: dict) -> None:
    ds = zero2_run["deepspeed"]
    assert ds["distributed_type"] == "DEEPSPEED" and ds["device"] == "cpu"
    assert ds["accelerator"] == "cpu"  # DeepSpeed's CPU accelerator
    assert ds["engine"] == "DeepSpeedEngine" and ds["zero_stage"] == 2
    assert ds["zero_optimizer"] == "DeepSpeedZeroOptimizer"  # ZeRO stage 1/2 partitioned optimizer
    assert ds["global_steps"] == STEPS
    config = ds["config"]
    assert auto_keys(config) == set()
    assert config["train_micro_batch_size_per_gpu"] == BATCH and config["train_batch_size"] == BATCH
    assert config["gradient_clipping"] == CLIP and config["zero_optimization"]["stage"] == 2


@pytest.mark.slow
def test_zero2_steps_equal_plain_pytorch_steps(zero2_run: dict) -> None:
    ds, ref = zero2_run["deepspeed"], zero2_run["reference"]
    assert ds["losses"] == pytest.approx(ref["losses"], abs=1e-6)
    assert ds["params"] != pytest.approx(ref["initial_params"], abs=1e-4)  # the steps moved the weights
    assert ds["params"] == pytest.approx(ref["params"], abs=1e-6)


@pytest.mark.slow
def test_paper_profile_training_args_fill_zero2_autos(zero2_run: dict) -> None:
    # guirl.train.sft.training_args for paper-3b (CPU device): the Trainer's DeepSpeed config
    # takes batch size, accumulation, clipping and precision from the run config.
    hf = zero2_run["paper_3b_trainer_config"]
    assert auto_keys(hf["config"]) == set()
    assert hf["config"]["train_micro_batch_size_per_gpu"] == hf["per_device_batch_size"]
    assert hf["config"]["gradient_accumulation_steps"] == hf["grad_accum"]
    assert hf["config"]["train_batch_size"] == hf["per_device_batch_size"] * hf["grad_accum"]
    assert hf["config"]["zero_optimization"]["stage"] == 2
    assert hf["config"]["bf16"]["enabled"] is False


@pytest.mark.slow
def test_rl_engine_prepares_zero2_without_a_dataloader(rl_engine_run: dict) -> None:
    # guirl.train.rl prepares (model, optimizer) only: accelerate refuses the file's "auto" micro-batch
    # size unless the engine fills it from the run config first (fill_deepspeed_config)
    assert rl_engine_run["without_fill"].startswith("ValueError")
    config = rl_engine_run["config"]
    assert auto_keys(config) == set()
    assert config["train_micro_batch_size_per_gpu"] == BATCH // 2
    assert config["gradient_accumulation_steps"] == 1 and config["gradient_clipping"] == CLIP


@pytest.mark.slow
@pytest.mark.slow
def test_an_rl_checkpoint_saved_under_zero2_reads_back_as_the_trained_weights(rl_engine_run: dict) -> None:
    # accelerate's save_state under DeepSpeed writes ZeRO states, no model.safetensors: checkpoint_weights
    # (Co-EPG's Figure 5 loads GRPO checkpoints through it) reassembles the trained float32 weights
    assert (
        "model.safetensors" not in rl_engine_run["checkpoint_files"]
        and "pytorch_model" in rl_engine_run["checkpoint_files"]
    )
    assert rl_engine_run["checkpoint_params"] == pytest.approx(rl_engine_run["module_params"], abs=0)


def test_checkpoint_weights_names_a_folder_without_weights(tmp_path: Path) -> None:
    from guirl.train.rl import checkpoint_weights

    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        checkpoint_weights(tmp_path)


def test_rl_engine_accumulation_protocol_under_zero2(rl_engine_run: dict, zero2_run: dict) -> None:
    # two micro-batches per update, the boundary set on the last one only (as _Engine.update does):
    # DeepSpeed steps once per update, and the weights equal plain PyTorch's full-batch steps
    assert rl_engine_run["global_steps"] == STEPS
    ref = zero2_run["reference"]
    assert rl_engine_run["losses"] == pytest.approx(ref["losses"], abs=1e-6)
    assert rl_engine_run["params"] == pytest.approx(ref["params"], abs=1e-6)


# ----------------------------------------------------------------------------- the subprocess
def _batches():
    import torch

    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 4, generator=g), torch.randn(BATCH, 1, generator=g)) for _ in range(STEPS)]


def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _flat(model) -> list[float]:
    return [float(v) for p in model.parameters() for v in p.detach().reshape(-1)]


def _reference() -> dict:
    """The same steps in plain PyTorch: AdamW, gradient norm clipped to ``CLIP``."""
    import torch

    model = _model()
    initial = _flat(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for x, y in _batches():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return {"losses": losses, "params": _flat(model), "initial_params": initial}


def _zero2() -> dict:
    """``STEPS`` ZeRO-2 steps through accelerate + DeepSpeed on CPU."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin
    from deepspeed.accelerator import get_accelerator

    plugin = DeepSpeedPlugin(hf_ds_config=str(ZERO2), gradient_accumulation_steps=1, gradient_clipping=CLIP)
    acc = Accelerator(deepspeed_plugin=plugin)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    x_all = torch.cat([x for x, _ in _batches()])
    y_all = torch.cat([y for _, y in _batches()])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_all, y_all), batch_size=BATCH)
    engine, opt, loader = acc.prepare(model, opt, loader)
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(engine(x), y)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return {
        "distributed_type": str(acc.state.distributed_type).split(".")[-1],
        "device": str(acc.device),
        "accelerator": get_accelerator().device_name(),
        "engine": type(engine).__name__,
        "zero_stage": engine.zero_optimization_stage(),
        "zero_optimizer": type(engine.optimizer).__name__,
        "global_steps": engine.global_steps,
        "config": json.loads(json.dumps(engine.config, default=str)),
        "losses": losses,
        "params": _flat(engine.module),
    }


def _paper_trainer_config(out_dir: Path) -> dict:
    from guirl.config import load_config
    from guirl.train.sft import training_args

    cfg = load_config("paper-3b", overrides=["runtime.device=cpu", "runtime.bf16=false", "model.torch_dtype=float32"])
    assert cfg.runtime.deepspeed_config == "configs/deepspeed/zero2.json"
    args = training_args(cfg, "sft", out_dir)
    return {
        "config": args.hf_deepspeed_config.config,
        "per_device_batch_size": cfg.sft.per_device_batch_size,
        "grad_accum": cfg.sft.grad_accum,
    }


def _rl_engine() -> dict:
    """The RL engine's DeepSpeed protocol (guirl.train.rl): accelerate launched with the ZeRO-2 file,
    ``prepare(model, optimizer)`` after :func:`guirl.train.rl.fill_deepspeed_config`, then per update
    two micro-batches whose losses sum to the full batch's mean, the accumulation boundary set on the
    last one only, then ``optimizer.step()``."""
    from types import SimpleNamespace

    import torch
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin

    from guirl.train.rl import deepspeed_values, fill_deepspeed_config

    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=str(ZERO2)), mixed_precision="no")
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    try:
        acc.prepare(model, opt)
        without_fill = "prepared"
    except ValueError as e:  # the "auto" micro-batch size
        without_fill = f"ValueError: {e}"
    values = deepspeed_values(SimpleNamespace(micro_batch_size=BATCH // 2, max_grad_norm=CLIP))
    fill_deepspeed_config(acc.state.deepspeed_plugin.deepspeed_config, values, source=str(ZERO2))
    engine, opt = acc.prepare(model, opt)
    losses = []
    for x, y in _batches():
        total = 0.0
        for i, (xm, ym) in enumerate(zip(x.split(BATCH // 2), y.split(BATCH // 2), strict=True)):
            acc.gradient_state._set_sync_gradients(i == 1)
            loss = torch.nn.functional.mse_loss(engine(xm), ym, reduction="sum") / BATCH
            acc.backward(loss)
            total += float(loss)
        acc.clip_grad_norm_(engine.parameters(), CLIP)
        opt.step()
        opt.zero_grad()
        losses.append(total)
    # the engine's checkpoint (accelerate's save_state under DeepSpeed: ZeRO states only), read back as weights
    from safetensors.torch import load_file

    from guirl.train.rl import checkpoint_weights

    ckpt = Path(os.environ["GUIRL_TEST_CKPT"])
    acc.save_state(str(ckpt))
    saved_files = sorted(p.name for p in ckpt.iterdir())
    weights = load_file(str(checkpoint_weights(ckpt)))
    return {
        "without_fill": without_fill,
        "config": json.loads(json.dumps(engine.config, default=str)),
        "global_steps": engine.global_steps,
        "losses": losses,
        "params": _flat(engine.module),
        "checkpoint_files": saved_files,
        "checkpoint_params": [float(v) for k in sorted(weights) for v in weights[k].flatten()],
        "module_params": [float(v) for k, t in sorted(engine.module.state_dict().items()) for v in t.flatten()],
    }


def main(out: Path, mode: str) -> None:
    if mode == "rl":
        result = _rl_engine()
    else:
        result = {
            "reference": _reference(),
            "deepspeed": _zero2(),
            "paper_3b_trainer_config": _paper_trainer_config(out.parent),
        }
    out.write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
