"""guirl.studies.efficiency_profiling: inputs full vs CASC, side-by-side table, ceilings, paper cells."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from guirl.analysis.accounting import model_dims
from guirl.analysis.cost import fit_cost_models
from guirl.data.splits import load_splits
from guirl.methods.ccpo.history import inference_history
from guirl.models import build_tiny_model, load_processor
from guirl.prompts import PromptSpec
from guirl.studies import efficiency_profiling as E

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "configs" / "models"
BUDGET = {"min_pixels": 3136, "max_pixels": 141120}


@pytest.fixture(scope="module")
def processor(session_cache: Path):
    return load_processor(build_tiny_model(session_cache / "models", seed=0), **BUDGET)


@pytest.fixture(scope="module")
def split(minigui: Path):
    return load_splits(minigui)["train"]


def _spec(n: int) -> PromptSpec:
    return PromptSpec(output_format="ccpo", n_history=n, history_mode="nAO", system_prompt="ccpo_short")


# ------------------------------------------------------------------------------- models
def test_model_specs_cpu_is_mid_and_cuda_adds_3b_7b_in_bf16() -> None:
    cpu = E.model_specs("cpu", MODELS)
    assert list(cpu) == ["mid"] and cpu["mid"] == (MODELS / "qwen2.5-vl-mid", torch.float32)
    # the GPU path's list is built without a GPU (the same code runs on CPU in this test)
    cuda = E.model_specs("cuda", MODELS)
    assert list(cuda) == ["mid", "3B", "7B"] and cuda["7B"] == (MODELS / "qwen2.5-vl-7b", torch.bfloat16)
    with pytest.raises(ValueError, match="device"):
        E.model_specs("mps", MODELS)
    with pytest.raises(FileNotFoundError, match="mid"):
        E.model_specs("cpu", REPO / "configs")  # no qwen2.5-vl-mid folder there


def test_architecture_config_speaks_the_processor_and_keeps_the_vocabulary(processor) -> None:
    cfg = E.architecture_config(MODELS / "qwen2.5-vl-7b", processor)
    assert cfg.image_token_id == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    dims = model_dims(cfg)
    assert (dims.hidden, dims.n_layers, dims.vocab) == (3584, 28, 152064)  # Qwen2.5-VL-7B's config.json


# ------------------------------------------------------------------------------- inputs
def test_rescale_screens_resizes_copies_and_keeps_normalised_actions(split, tmp_path: Path) -> None:
    eps = split.episodes[:2]
    out, root = E.rescale_screens(eps, split.image_root, (1080, 2400), tmp_path / "big")
    assert root == tmp_path / "big"
    for a, b in zip(eps, out):
        for s, t in zip(a.steps, b.steps):
            assert t.screen_size == (1080, 2400) and t.action == s.action and t.target_box == s.target_box
            assert Image.open(root / t.screenshot).size == (1080, 2400)
    first = root / out[0].steps[0].screenshot
    stamp = first.stat().st_mtime_ns
    E.rescale_screens(eps, split.image_root, (1080, 2400), root)  # a copy of the right size is reused
    assert first.stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="positive"):
        E.rescale_screens(eps, split.image_root, (0, 10), root)


@pytest.mark.parametrize(
    ("n_steps", "n_history"),
    [
        (1, 0),  # the first episode alone
        (3, 2),  # a few steps with a 2-step history
        (8, 3),  # notebook 05's tiny setting (token_steps 8, longest history 3AO)
        (10_000, 1),  # more steps than the split has: every episode
    ],
)
def test_episodes_for_steps_is_all_history_step_prompts_reads(split, n_steps, n_history) -> None:
    part = E.episodes_for_steps(split.episodes, n_steps, n_history)
    assert part == list(split.episodes[: len(part)])
    for n in range(n_history + 1):  # every history length up to n_history gives the same prompts
        full = E.history_step_prompts(split.episodes, _spec(n), image_root=split.image_root, n_steps=n_steps, **BUDGET)
        cut = E.history_step_prompts(part, _spec(n), image_root=split.image_root, n_steps=n_steps, **BUDGET)
        assert [(p.episode.episode_id, p.t, p.prompt) for p in cut] == [
            (p.episode.episode_id, p.t, p.prompt) for p in full
        ]
    if len(part) < len(split.episodes):  # the prefix is the shortest one
        shorter = part[:-1]
        assert sum(max(0, len(e.steps) - n_history) for e in shorter) < n_steps
    with pytest.raises(ValueError, match="n_steps"):
        E.episodes_for_steps(split.episodes, 0, n_history)


def test_history_step_prompts_keep_steps_with_a_full_history(split) -> None:
    ps = E.history_step_prompts(split.episodes, _spec(2), image_root=split.image_root, n_steps=3, **BUDGET)
    assert len(ps) == 3 and all(p.t >= 2 for p in ps)
    assert all(len(p.prompt[1]) == 3 for p in ps)  # two history screenshots + the current one
    with pytest.raises(ValueError, match="no step has 1 earlier steps in the 0 episodes"):
        E.history_step_prompts([], _spec(1), image_root=split.image_root, n_steps=1, **BUDGET)


def test_casc_history_has_fewer_visual_tokens_than_the_full_history(split, processor) -> None:
    from guirl.config import load_config

    cfg = load_config("tiny")
    kw = dict(image_root=split.image_root, n_steps=4, **BUDGET)
    full = E.history_step_prompts(split.episodes, _spec(3), **kw)
    casc = E.history_step_prompts(
        split.episodes, _spec(3), history_builder=inference_history(cfg, max_pixels=BUDGET["max_pixels"]), **kw
    )
    assert [(p.episode.episode_id, p.t) for p in full] == [(p.episode.episode_id, p.t) for p in casc]  # same steps
    tf, tc = E.token_table(processor, full), E.token_table(processor, casc)
    assert (tf["visual_tokens"] == 4 * 180).all()  # 4 MiniGUI screens of 180 tokens each at this budget
    assert (tc["visual_tokens"] < tf["visual_tokens"]).all() and (tc["prompt_tokens"] < tf["prompt_tokens"]).all()
    batch = E.prompt_batch(processor, full[:2])
    inputs = E.prompt_inputs(batch)
    n_prompt = batch["input_ids"].shape[1] - batch["completion_ids"].shape[1]
    assert inputs["input_ids"].shape == (2, n_prompt) and inputs["mm_token_type_ids"].shape == (2, n_prompt)
    assert torch.equal(inputs["pixel_values"], batch["pixel_values"]) and "completion_ids" not in inputs


def test_inference_table_compression_and_flop_reduction(split, processor) -> None:
    from guirl.config import load_config

    cfg = load_config("tiny")
    kw = dict(image_root=split.image_root, n_steps=2, **BUDGET)
    prompts = {
        ("1AO", "full"): E.history_step_prompts(split.episodes, _spec(1), **kw),
        ("1AO", "CASC"): E.history_step_prompts(
            split.episodes, _spec(1), history_builder=inference_history(cfg, max_pixels=BUDGET["max_pixels"]), **kw
        ),
    }
    arch = {"7B": E.architecture_config(MODELS / "qwen2.5-vl-7b", processor)}
    t = E.inference_table(processor, prompts, arch).set_index("side")
    assert t.loc["full", "compression_pct"] == 0.0 and t.loc["full", "flops_reduction_7B"] == 1.0
    ratio = t.loc["CASC", "prompt_tokens"] / t.loc["full", "prompt_tokens"]
    assert math.isclose(t.loc["CASC", "compression_pct"], 100 * (1 - ratio))
    assert t.loc["CASC", "flops_reduction_7B"] > 1.0 and 0 < t.loc["CASC", "tflops_7B"] < t.loc["full", "tflops_7B"]
    with pytest.raises(KeyError, match="full"):
        E.inference_table(processor, {("1AO", "CASC"): prompts[("1AO", "CASC")]}, arch)


# ------------------------------------------------------------------------------- tables
def _rows(times: dict[tuple[str, str], tuple[int, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": "m",
                "screen": "S",
                "history": h,
                "side": side,
                "prompt_tokens": n,
                "visual_tokens": n // 2,
                "median_s": t,
                "iqr_s": 0.1,
                "q1_s": t - 0.05,
                "q3_s": t + 0.05,
                "forward_flops_counted": 2e12,
                "forward_flops_analytic": 2e12,
                "step_flops_counted": 6e12,
                "peak_bytes": 2**20,
                "mfu": 0.25,
            }
            for (h, side), (n, t) in times.items()
        ]
    )


def test_side_table_speedup_ceiling_and_their_ratio() -> None:
    # step seconds exactly linear in tokens (t = 0.5 + 0.01 n): the quadratic fit recovers it, so the
    # ceiling equals the measured speedup and measured / ceiling is 1
    rows = _rows(
        {
            (h, s): (n, 0.5 + 0.01 * n)
            for (h, s), n in {
                ("1AO", "full"): 400,
                ("1AO", "CASC"): 250,
                ("3AO", "full"): 800,
                ("3AO", "CASC"): 300,
            }.items()
        }
    )
    fits = E.fit_models(rows)
    t = E.side_table(rows, fits).set_index(["history", "side"])
    assert t.loc[("3AO", "CASC"), "compression_pct"] == pytest.approx(100 * (1 - 300 / 800))
    assert t.loc[("3AO", "CASC"), "speedup"] == pytest.approx(8.5 / 3.5)
    assert t.loc[("3AO", "CASC"), "ceiling"] == pytest.approx(8.5 / 3.5, rel=1e-6)
    assert np.allclose(t["measured_over_ceiling"], t["speedup"] / t["ceiling"])
    assert np.allclose(t["measured_over_ceiling"], 1.0, rtol=1e-6)
    full = t.xs("full", level="side")
    assert (full["speedup"] == 1.0).all() and np.allclose(full["ceiling"], 1.0) and (full["compression_pct"] == 0).all()
    assert np.allclose(t["counted_over_analytic"], 1.0) and np.allclose(t["step_tflops"], 6.0)
    assert np.allclose(t["mfu"], 0.25)  # the sweep's MFU is carried into the side-by-side table
    assert E.fit_table(fits)["fit"].tolist() == ["linear", "quadratic"]
    with pytest.raises(KeyError, match="no 'full' setting"):
        E.side_table(rows[rows["side"] == "CASC"], fits)


def test_side_table_measured_below_ceiling_when_a_step_is_slower_than_its_tokens() -> None:
    # the 3AO CASC step takes 1 s longer than the linear cost of its tokens: measured / ceiling < 1
    times = {
        ("1AO", "full"): (400, 4.5),
        ("1AO", "CASC"): (250, 3.0),
        ("2AO", "full"): (600, 6.5),
        ("3AO", "full"): (800, 8.5),
        ("3AO", "CASC"): (300, 4.5),
    }
    rows = _rows(times)
    fits = {"m": fit_cost_models(rows["prompt_tokens"], rows["median_s"])}
    t = E.side_table(rows, fits).set_index(["history", "side"])
    assert t.loc[("3AO", "CASC"), "measured_over_ceiling"] < 1.0


def test_with_deltas() -> None:
    rows = _rows({("1AO", "full"): (400, 4.0), ("1AO", "CASC"): (200, 3.0)})
    d = E.with_deltas(rows, ["median_s"]).set_index("side")
    assert d.loc["full", "median_s_delta_pct"] == 0.0 and d.loc["CASC", "median_s_delta_pct"] == pytest.approx(-25.0)
    with pytest.raises(KeyError, match="full"):
        E.with_deltas(rows[rows["side"] == "CASC"], ["median_s"])


def test_rollout_token_table() -> None:
    log = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "skipped": [False, False, True],
            "prompt_tokens": [300.0, 500.0, 9.0],
            "prompt_tokens_full": [800.0, 800.0, 9.0],
            "image_tokens": [100.0, 200.0, 0.0],
            "step_seconds": [2.0, 4.0, 1.0],
        }
    )
    t = E.rollout_token_table({("CCPO", "3AO"): log}).iloc[0]
    assert (t["prompt_tokens"], t["prompt_tokens_full"], t["steps"]) == (400.0, 800.0, 2)  # the skipped step is out
    assert t["compression_pct"] == pytest.approx(50.0) and t["step_seconds"] == 3.0
    with pytest.raises(ValueError, match="no RL step"):
        E.rollout_token_table({("CCPO", "3AO"): log}, skip_first=3)


def test_action_token_table_counts_expressible_actions(split, processor) -> None:
    from guirl.prompts import format_context

    actions = [s.action for ep in split.episodes for s in ep.steps]
    ctx = format_context(split.episodes[0].steps[0].screen_size, **BUDGET)
    t = E.action_token_table(actions, ctx, {"tiny": processor.tokenizer}, formats=["ccpo", "agentcpm"])
    assert t["format"].tolist() == ["ccpo", "agentcpm"]
    assert (t["actions"] <= len(actions)).all() and (t["actions"] > 0).all() and (t["tiny"] > 1).all()
