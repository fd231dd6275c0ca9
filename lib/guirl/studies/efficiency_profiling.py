"""Notebook 05 (``05_efficiency_profiling``): full vs CASC-cropped history measured side by side
(CCPO Tables 4, 6, 12-15 and 13; AgentCPM-GUI's tokens per action).

The measurements themselves are :mod:`guirl.analysis.profiling`'s and the cost model
:mod:`guirl.analysis.cost`'s (the one notebook 02 fits too); this module builds the inputs (the
same MiniGUI steps with the full history, as SO-RL prompts them, and with the history screenshots
cropped by CASC around the annotated action points, CCPO eq. 10,
:func:`guirl.methods.ccpo.history.inference_history`; on the MiniGUI screens and on the same
screens resized to a phone size such as AndroidControl's 1080x2400), runs the sweeps and turns
the measured rows into CCPO's table layouts.

Notebook flow: :func:`setup` (inputs, threads from ``runtime.threads``) -> :func:`setting_prompts`
-> :func:`tokens_table`; :func:`profile_rows` -> :func:`fit_models` / :func:`side_table` /
:func:`headline_table`; :func:`latency_table`; :func:`paper_layouts`; :func:`rollout_token_table`;
:func:`table13_records` / :func:`table13`; :func:`tokens_per_action`.

Vocabulary
----------
* A *setting* is ``(model, screen, history, side)``: ``side`` is ``"full"`` (every history
  screenshot whole, SO-RL) or ``"CASC"`` (CCPO's cropped history).
* ``compression_pct`` = ``100 (1 - tokens / full tokens)`` at the same model, screen and history
  (CCPO Table 4's compression rate); ``speedup`` = full median step seconds / this median;
  ``ceiling`` = the speedup the token counts alone predict under the cost model fitted to all the
  model's settings (:func:`guirl.analysis.cost.ceiling_speedup`; ``quadratic``: ``c0 + c1 n +
  c2 n^2``, ``linear``: ``c0 + c1 n``, coefficients >= 0); ``measured_over_ceiling`` =
  ``speedup / ceiling``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image

from guirl import timing
from guirl.analysis.accounting import action_token_table
from guirl.analysis.cost import CostFit, ceiling_speedup, fit_cost_models
from guirl.analysis.profiling import analytic_forward_flops
from guirl.config import Config
from guirl.data.splits import primary_test_split
from guirl.rl.logprobs import encode_samples

__all__ = [
    "SIDES",
    "KEYS",
    "DEFAULT_COMPLETION",
    "model_specs",
    "architecture_config",
    "rescale_screens",
    "episodes_for_steps",
    "history_step_prompts",
    "prompt_batch",
    "prompt_inputs",
    "token_table",
    "fit_models",
    "fit_table",
    "side_table",
    "with_deltas",
    "plot_step_time",
    "rollout_token_table",
    "inference_table",
    "action_token_table",
    "Inputs",
    "setup",
    "setting_prompts",
    "tokens_table",
    "model_builders",
    "profile_rows",
    "headline_table",
    "latency_table",
    "paper_layouts",
    "rl_rollout_tokens",
    "table13_records",
    "table13",
    "tokens_per_action",
]

#: The two prompt variants compared: full history screenshots (SO-RL) and CASC crops (CCPO).
SIDES: tuple[str, str] = ("full", "CASC")
#: Columns naming one measured setting.
KEYS: tuple[str, ...] = ("model", "screen", "history", "side")
#: The completion every profiled step trains on (a typical click in the ``ccpo`` output format).
DEFAULT_COMPLETION = '{"action": "click", "coordinate": [140, 252]}'


def model_specs(device: str, models_dir: str | Path) -> dict[str, tuple[Path, torch.dtype]]:
    """The random-weight architectures profiled on ``device``: ``{name: (config folder, dtype)}``.

    ``"cpu"``: the mid-size model (``qwen2.5-vl-mid``, float32); ``"cuda"`` adds the Qwen2.5-VL-3B
    and 7B architectures in bfloat16 (the dtype of CCPO's runs; weights do not change cost).
    ``models_dir``: the repository's ``configs/models``. Raises ``FileNotFoundError`` naming a
    missing ``config.json``.
    """
    kind = torch.device(device).type
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    root = Path(models_dir)
    specs = {"mid": (root / "qwen2.5-vl-mid", torch.float32)}
    if kind == "cuda":
        specs |= {"3B": (root / "qwen2.5-vl-3b", torch.bfloat16), "7B": (root / "qwen2.5-vl-7b", torch.bfloat16)}
    for name, (folder, _) in specs.items():
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"model_specs: no {folder / 'config.json'} for the {name} architecture")
    return specs


def architecture_config(config_path: str | Path, processor: Any) -> Any:
    """The ``Qwen2_5_VLConfig`` of ``config_path`` (a ``config.json`` or its folder) speaking
    ``processor``'s tokenizer: the image-pad id is the tokenizer's, so
    :func:`guirl.analysis.profiling.analytic_forward_flops` reads that architecture's FLOPs off a
    batch the processor built (used for architectures too large to instantiate, e.g. 7B on CPU).
    The vocabulary stays the config's (the LM head costs as in the published model)."""
    from transformers import AutoConfig

    p = Path(config_path)
    cfg_file = p / "config.json" if p.is_dir() else p
    if not cfg_file.is_file():
        raise FileNotFoundError(f"architecture_config: no config file at '{cfg_file}'")
    data = json.loads(cfg_file.read_text())
    data["image_token_id"] = int(processor.tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    return AutoConfig.for_model(data.pop("model_type", "qwen2_5_vl"), **data)


def rescale_screens(
    episodes: Sequence[Any], image_root: str | Path, size: tuple[int, int], out_dir: str | Path
) -> tuple[list[Any], Path]:
    """``(episodes, image_root)`` with every screenshot resized to ``size`` = ``(width, height)``
    px (bicubic), e.g. MiniGUI screens at AndroidControl's 1080x2400.

    The copies are written under ``out_dir`` at the screenshots' relative paths (an existing copy
    of the right size is reused); each step's ``screen_size`` becomes ``size``. Actions and boxes
    are normalised to the screen (:mod:`guirl.actions.types`), so they stay as they are.
    """
    w, h = int(size[0]), int(size[1])
    if w <= 0 or h <= 0:
        raise ValueError(f"size must be positive (width, height) px, got {size}")
    src, dst = Path(image_root), Path(out_dir)
    out = []
    for ep in episodes:
        steps = []
        for step in ep.steps:
            target = dst / step.screenshot
            if not target.is_file() or Image.open(target).size != (w, h):
                target.parent.mkdir(parents=True, exist_ok=True)
                with Image.open(src / step.screenshot) as im:
                    im.convert("RGB").resize((w, h), Image.Resampling.BICUBIC).save(target)
            steps.append(dataclasses.replace(step, screen_size=(w, h)))
        out.append(dataclasses.replace(ep, steps=tuple(steps)))
    return out, dst


def episodes_for_steps(episodes: Sequence[Any], n_steps: int, n_history: int) -> list[Any]:
    """The shortest prefix of ``episodes`` that holds ``n_steps`` steps with at least
    ``n_history`` earlier steps (all of them when there are fewer).

    :func:`history_step_prompts` with ``n_steps`` and any history length up to ``n_history``
    reads only these episodes, so a caller that prepares screens (e.g. :func:`rescale_screens`)
    prepares these and no more."""
    if n_steps < 1 or n_history < 0:
        raise ValueError(f"n_steps must be >= 1 and n_history >= 0, got {n_steps}, {n_history}")
    out, found = [], 0
    for ep in episodes:
        if found >= n_steps:
            break
        out.append(ep)
        found += max(0, len(ep.steps) - n_history)
    return out


def history_step_prompts(
    episodes: Sequence[Any],
    spec: Any,
    *,
    min_pixels: int,
    max_pixels: int,
    image_root: str | Path,
    n_steps: int,
    history_builder: Any = None,
) -> list[Any]:
    """The first ``n_steps`` steps (episode order) that have at least ``spec.n_history`` earlier
    steps, so every prompt shows a full history of that length, as
    :func:`guirl.rollout.step_prompts` prompts them (``history_builder``: e.g. CASC at inference,
    :func:`guirl.methods.ccpo.history.inference_history`). Raises ``ValueError`` when no
    episode is long enough."""
    from guirl.rollout import step_prompts

    n = int(spec.n_history)
    long_enough = [ep for ep in episodes if len(ep.steps) > n]
    prompts = step_prompts(
        long_enough,
        spec,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        image_root=image_root,
        history_builder=history_builder,
    )
    keep = [p for p in prompts if p.t >= n][: int(n_steps)]
    if not keep:
        raise ValueError(f"no step has {n} earlier steps in the {len(episodes)} episodes given")
    return keep


def prompt_batch(
    processor: Any, prompts: Sequence[Any], completion: str = DEFAULT_COMPLETION, *, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """A training batch of ``prompts`` (``(messages, images)`` pairs or
    :class:`guirl.rollout.StepPrompt`) each completed with ``completion`` + ``<|im_end|>``, built
    exactly as the RL engine builds its batches (:func:`guirl.rl.logprobs.encode_samples`)."""
    pairs = [getattr(p, "prompt", p) for p in prompts]
    ids = processor.tokenizer.encode(completion, add_special_tokens=False)
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    return encode_samples(processor, pairs, [[*ids, eos]] * len(pairs), device=device)


def prompt_inputs(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The prompt part of a :func:`prompt_batch` (completion columns removed): the inputs of
    ``generate`` (:func:`guirl.analysis.profiling.generation_latency`)."""
    n_prompt = int(batch["input_ids"].shape[1] - batch["completion_ids"].shape[1])
    out = {k: batch[k][:, :n_prompt] for k in ("input_ids", "attention_mask", "mm_token_type_ids") if k in batch}
    out |= {k: batch[k] for k in ("pixel_values", "image_grid_thw") if k in batch}
    return out


def token_table(processor: Any, prompts: Sequence[Any]) -> pd.DataFrame:
    """Per prompt: ``prompt_tokens`` (text + image blocks), ``visual_tokens`` (``<|image_pad|>``
    tokens) and ``images``, counted through the processor (one prompt at a time, no padding)."""
    pad = int(processor.tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    rows = []
    for p in prompts:
        pair = getattr(p, "prompt", p)
        batch = prompt_batch(processor, [pair])
        rows.append(
            {
                "prompt_tokens": int(batch["prompt_tokens"][0]),
                "visual_tokens": int((batch["input_ids"][0] == pad).sum()),
                "images": len(pair[1]),
            }
        )
    return pd.DataFrame(rows, columns=["prompt_tokens", "visual_tokens", "images"])


def fit_models(rows: pd.DataFrame) -> dict[str, dict[str, CostFit]]:
    """Per ``model`` of ``rows`` (columns ``model``, ``prompt_tokens``, ``median_s``), the linear
    and quadratic cost models (``{"linear", "quadratic"}``, :func:`guirl.analysis.cost.fit_cost_models`)."""
    out = {}
    for m, g in rows.groupby("model", sort=False):
        out[str(m)] = fit_cost_models(g["prompt_tokens"].to_numpy(float), g["median_s"].to_numpy(float))
    return out


def fit_table(fits: Mapping[str, Mapping[str, CostFit]]) -> pd.DataFrame:
    """One row per (model, fit): ``c0`` (s), ``c1`` (s per token), ``c2`` (s per token^2; 0 for
    the linear fit), ``r2``, ``n_points``."""
    rows = []
    for model, by_name in fits.items():
        for name, f in by_name.items():
            coef = [*f.coef, 0.0, 0.0][:3]
            rows.append(
                {
                    "model": model,
                    "fit": name,
                    "c0": coef[0],
                    "c1": coef[1],
                    "c2": coef[2],
                    "r2": f.r2,
                    "n_points": f.n_points,
                }
            )
    return pd.DataFrame(rows)


def side_table(rows: pd.DataFrame, fits: Mapping[str, Mapping[str, CostFit]]) -> pd.DataFrame:
    """The measured settings side by side, one row per setting (:data:`KEYS`).

    ``rows``: :func:`guirl.analysis.profiling.profile_sweep` rows plus the :data:`KEYS` columns
    and ``visual_tokens``. Adds ``compression_pct``, ``speedup``, ``ceiling`` (quadratic fit),
    ``ceiling_linear``, ``measured_over_ceiling`` (``speedup / ceiling``), ``step_tflops``
    (counted forward + backward, 1e12 FLOPs), ``counted_over_analytic`` (forward), ``peak_mb``
    and ``mfu`` (the sweep's model FLOPs utilisation; NaN without a measured peak) (module doc). Every setting needs its ``full`` counterpart (``KeyError``
    otherwise); ``full`` rows have compression 0 and speedup and ceiling 1.
    """
    missing = sorted({*KEYS, "prompt_tokens", "visual_tokens", "median_s"} - set(rows.columns))
    if missing:
        raise KeyError(f"side_table: rows lack {missing}")
    base = {(r["model"], r["screen"], r["history"]): r for r in rows[rows["side"] == "full"].to_dict(orient="records")}
    out = []
    for r in rows.to_dict(orient="records"):
        key = (r["model"], r["screen"], r["history"])
        if key not in base:
            raise KeyError(f"side_table: no 'full' setting for {key}: the CASC rows compare against it")
        full, fit = base[key], fits[r["model"]]
        speed = full["median_s"] / r["median_s"]
        ceil = ceiling_speedup(fit["quadratic"], full["prompt_tokens"], r["prompt_tokens"])
        analytic = r.get("forward_flops_analytic", math.nan)
        counted = r.get("forward_flops_counted", math.nan)
        out.append(
            {
                **{k: r[k] for k in KEYS},
                "prompt_tokens": int(r["prompt_tokens"]),
                "visual_tokens": int(r["visual_tokens"]),
                "compression_pct": 100.0 * (1.0 - r["prompt_tokens"] / full["prompt_tokens"]),
                "step_s": r["median_s"],
                "step_iqr_s": r.get("iqr_s", math.nan),
                "speedup": speed,
                "ceiling": ceil,
                "ceiling_linear": ceiling_speedup(fit["linear"], full["prompt_tokens"], r["prompt_tokens"]),
                "measured_over_ceiling": speed / ceil,
                "step_tflops": r.get("step_flops_counted", math.nan) / 1e12,
                "forward_tflops_analytic": analytic / 1e12,
                "counted_over_analytic": counted / analytic if analytic else math.nan,
                "peak_mb": r.get("peak_bytes", math.nan) / 2**20,
                "mfu": r.get("mfu", math.nan),
            }
        )
    return pd.DataFrame(out)


def with_deltas(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``table`` (one row per setting, :data:`KEYS`) with ``<column>_delta_pct`` = ``100 (x /
    x_full - 1)`` for each of ``columns``, against the ``full`` row of the same model, screen and
    history (CCPO Table 6's deltas: -44% compute load). ``KeyError`` when a ``full`` row is missing."""
    out = table.copy()
    group = ["model", "screen", "history"]
    full = table[table["side"] == "full"].set_index(group)
    if full.index.has_duplicates:
        raise KeyError("with_deltas: several 'full' rows for one model / screen / history")
    idx = pd.MultiIndex.from_frame(table[group])
    missing = [k for k in idx if k not in full.index]
    if missing:
        raise KeyError(f"with_deltas: no 'full' row for {missing[:3]}")
    for c in columns:
        out[f"{c}_delta_pct"] = 100.0 * (table[c].to_numpy(float) / full.loc[idx, c].to_numpy(float) - 1.0)
    return out


def plot_step_time(rows: pd.DataFrame, fits: Mapping[str, Mapping[str, CostFit]]):
    """Median step seconds (IQR as error bars) against prompt tokens, one panel per model, with
    the fitted linear and quadratic cost models. Returns a matplotlib figure."""
    import matplotlib.pyplot as plt

    models = list(fits)
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        g = rows[rows["model"] == model]
        for (screen, side), part in g.groupby(["screen", "side"], sort=False):
            err = [part["median_s"] - part["q1_s"], part["q3_s"] - part["median_s"]] if "q1_s" in part else None
            ax.errorbar(part["prompt_tokens"], part["median_s"], yerr=err, fmt="o", label=f"{screen} {side}")
        n = np.linspace(0, float(g["prompt_tokens"].max()) * 1.05, 100)
        for name, f in fits[model].items():
            ax.plot(n, f.predict(n), lw=1, ls="-" if name == "quadratic" else "--", label=f"{name} (R2 {f.r2:.2f})")
        ax.set_title(f"{model}: forward + backward of one sample")
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel("seconds (median)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def rollout_token_table(logs: Mapping[tuple[str, str], pd.DataFrame], *, skip_first: int = 0) -> pd.DataFrame:
    """Token numbers of real RL rollouts: one row per ``(method, history)`` RL log
    (:func:`guirl.studies.shared.rl_runs.rl_log`), means over its steps after ``skip_first``: ``prompt_tokens``
    (as trained), ``prompt_tokens_full`` (the same prompts with whole history screenshots),
    ``compression_pct`` (``100 (1 - tokens / full)``, the method's own history compression),
    ``image_tokens`` and ``step_seconds``; ``steps`` counts the steps averaged."""
    rows = []
    for (method, history), df in logs.items():
        d = df[df["step"] > skip_first]
        if "skipped" in d:
            d = d[~d["skipped"].astype(bool)]
        if d.empty:
            raise ValueError(f"rollout_token_table: no RL step of {method} {history} after step {skip_first}")
        tokens = float(d["prompt_tokens"].mean())
        full = float(d["prompt_tokens_full"].mean()) if "prompt_tokens_full" in d else math.nan
        rows.append(
            {
                "method": method,
                "history": history,
                "prompt_tokens": tokens,
                "prompt_tokens_full": full,
                "compression_pct": 100.0 * (1.0 - tokens / full) if full == full and full > 0 else math.nan,
                "image_tokens": float(d["image_tokens"].mean()) if "image_tokens" in d else math.nan,
                "step_seconds": float(d["step_seconds"].mean()),
                "steps": int(len(d)),
            }
        )
    return pd.DataFrame(rows)


def inference_table(
    processor: Any, prompts: Mapping[tuple[str, str], Sequence[Any]], configs: Mapping[str, Any]
) -> pd.DataFrame:
    """Inference cost with and without CASC (CCPO Table 13): one row per ``(history, side)`` key
    of ``prompts``: mean ``prompt_tokens``, ``compression_pct`` against the ``full`` side of the
    same history, and per architecture of ``configs`` (``{name: Qwen2_5_VLConfig}`` whose image-pad
    id is ``processor``'s, e.g. :func:`architecture_config`) the mean prefill FLOPs
    ``tflops_<name>`` (one forward over the prompt, logits of the last position only) and
    ``flops_reduction_<name>`` (full / this)."""
    rows = []
    for (history, side), ps in prompts.items():
        toks, flops = [], {n: [] for n in configs}
        for p in ps:
            batch = prompt_inputs(prompt_batch(processor, [p]))
            toks.append(int(batch["attention_mask"].sum()))
            for name, cfg in configs.items():
                flops[name].append(analytic_forward_flops(cfg, batch, n_logits=1))
        rows.append(
            {"history": history, "side": side, "prompts": len(ps), "prompt_tokens": float(np.mean(toks))}
            | {f"tflops_{n}": float(np.mean(v)) / 1e12 for n, v in flops.items()}
        )
    out = pd.DataFrame(rows)
    full = out[out["side"] == "full"].set_index("history")
    missing = sorted(set(out["history"]) - set(full.index))
    if missing:
        raise KeyError(f"inference_table: no 'full' prompts for history {missing}")
    ref = full.loc[out["history"]]
    out["compression_pct"] = 100.0 * (1.0 - out["prompt_tokens"].to_numpy() / ref["prompt_tokens"].to_numpy())
    for n in configs:
        out[f"flops_reduction_{n}"] = ref[f"tflops_{n}"].to_numpy() / out[f"tflops_{n}"].to_numpy()
    return out


# ----------------------------------------------------------------------------- notebook 05's flow
@dataclass
class Inputs:
    """What notebook 05 measures on: the run config, the ``device``, the pixel budget of each
    screen kind (``budgets``: ``MiniGUI`` at ``model.max_pixels``, ``AndroidControl`` at
    ``analysis.large_screen_max_pixels``), notebook 02's RL results of every
    ``(role, history)`` of ``analysis.histories`` (``rl``), the test splits, the episodes of the
    token table on each screen kind (``screens``: ``(episodes, image_root)``) and a processor per
    screen kind (``procs``)."""

    cfg: Config
    device: str
    budgets: dict[str, int]
    rl: dict[tuple[str, str], dict[str, Any]]
    splits: dict[str, Any]
    screens: dict[str, tuple[list[Any], Path]]
    procs: dict[str, Any]


def setup(cfg: Config) -> Inputs:
    """Notebook 05's inputs (:class:`Inputs`). Sets torch's CPU threads to ``runtime.threads``
    when it is set (05's experiment file sets 1: every timing of a shared machine runs on one
    thread; a GPU is unaffected). Needs 02's RL stages (``make nb-02_ccpo_rl``)."""
    from guirl.models import load_processor
    from guirl.paths import cache_dir
    from guirl.prompts import prompt_spec
    from guirl.studies.shared.inputs import eval_splits, upstream_result
    from guirl.studies.shared.rl_runs import RL_METHODS, stage_name

    if cfg.runtime.threads is not None:
        torch.set_num_threads(cfg.runtime.threads)
    a, m = cfg.analysis, cfg.model
    budgets = {"MiniGUI": m.max_pixels, "AndroidControl": a.large_screen_max_pixels or m.max_pixels}
    rl = {(r, h): upstream_result(cfg, "02_ccpo_rl", stage_name(r, h)) for r in RL_METHODS for h in a.histories}
    splits = eval_splits(cfg)
    test = splits[primary_test_split(splits)]
    # only the episodes whose steps the token table reads (the first token_steps steps with a full history)
    episodes = episodes_for_steps(test.episodes, a.token_steps, max(prompt_spec(cfg, h).n_history for h in a.histories))
    large, large_root = rescale_screens(episodes, test.image_root, a.large_screen, cache_dir() / "05_screens")
    screens = {"MiniGUI": (episodes, Path(test.image_root)), "AndroidControl": (large, large_root)}
    procs = {
        s: load_processor(rl[("ccpo", a.histories[0])]["final"], min_pixels=m.min_pixels, max_pixels=b)
        for s, b in budgets.items()
    }
    return Inputs(cfg, cfg.runtime.device, budgets, rl, splits, screens, procs)


def setting_prompts(inp: Inputs) -> dict[tuple[str, str, str], list[Any]]:
    """``{(screen, history, side): prompts}``: the first ``analysis.token_steps`` test steps with a
    full history of each ``analysis.histories`` setting, on each screen kind, with the full
    history and with CASC's (at that screen's pixel budget)."""
    from guirl.methods.ccpo.history import inference_history
    from guirl.prompts import prompt_spec

    cfg, a, m = inp.cfg, inp.cfg.analysis, inp.cfg.model
    return {
        (s, h, side): history_step_prompts(
            eps,
            prompt_spec(cfg, h),
            min_pixels=m.min_pixels,
            max_pixels=inp.budgets[s],
            image_root=root,
            n_steps=a.token_steps,
            history_builder=inference_history(cfg, max_pixels=inp.budgets[s]) if side == "CASC" else None,
        )
        for s, (eps, root) in inp.screens.items()
        for h in a.histories
        for side in SIDES
    }


def tokens_table(inp: Inputs, prompts: Mapping[tuple[str, str, str], Sequence[Any]]) -> pd.DataFrame:
    """Mean prompt / visual tokens and images per prompt of each setting of :func:`setting_prompts`."""
    return pd.DataFrame(
        [
            {
                "screen": s,
                "history": h,
                "side": side,
                "steps": len(ps),
                **token_table(inp.procs[s], ps).mean().to_dict(),
            }
            for (s, h, side), ps in prompts.items()
        ]
    )


def setting_batches(
    inp: Inputs, prompts: Mapping[tuple[str, str, str], Sequence[Any]]
) -> dict[tuple[str, str, str], dict[str, torch.Tensor]]:
    """One training batch per setting (its first prompt, :func:`prompt_batch`) on the device."""
    return {k: prompt_batch(inp.procs[k[0]], ps[:1], device=inp.device) for k, ps in prompts.items()}


def model_builders(inp: Inputs) -> dict[str, Callable[[], Any]]:
    """``{name: build()}`` of the profiled models, smallest first: ``tiny`` (02's CCPO model of the
    first history setting; loaded once) and the random-weight architectures of :func:`model_specs`
    (the mid model on CPU; also 3B and 7B in bf16 on CUDA)."""
    from guirl.analysis.profiling import random_model
    from guirl.models import load_trained
    from guirl.paths import configs_dir

    cfg, m = inp.cfg, inp.cfg.model
    loaded: dict[str, Any] = {}

    def tiny() -> Any:
        if "tiny" not in loaded:
            src = inp.rl[("ccpo", cfg.analysis.histories[0])]
            loaded["tiny"], _ = load_trained(src, min_pixels=m.min_pixels, max_pixels=m.max_pixels, device=inp.device)
        return loaded["tiny"]

    specs = model_specs(inp.device, configs_dir() / "models")
    return {"tiny": tiny} | {
        name: (lambda p=path, d=dtype: random_model(p, inp.procs["MiniGUI"], dtype=d, device=inp.device))
        for name, (path, dtype) in specs.items()
    }


@timing.timed("profiling", "profile_rows")
def profile_rows(
    inp: Inputs,
    batches: Mapping[tuple[str, str, str], Mapping[str, torch.Tensor]],
    models: Mapping[str, Callable[[], Any]],
) -> pd.DataFrame:
    """Forward + backward of one sample per setting and model (:func:`guirl.analysis.profiling.
    profile_sweep`, ``analysis.warmup`` / ``analysis.repeats``, the settings of a model timed
    round-robin); ``tiny`` on every screen kind, the architectures on ``analysis.architecture_screens``.
    One row per (model, setting) with :data:`KEYS`, ``visual_tokens`` and the sweep's columns,
    ``mfu`` among them: analytic training FLOPs / step seconds / the peak FLOP/s measured on the
    device in the model's dtype (:func:`guirl.analysis.profiling.measure_peak_flops`: a 512-wide
    product on CPU, an 8192-wide one on a GPU), once per dtype."""
    from guirl.analysis.profiling import measure_peak_flops, profile_sweep

    a = inp.cfg.analysis
    pad = inp.procs["MiniGUI"].tokenizer.convert_tokens_to_ids("<|image_pad|>")
    peaks: dict[torch.dtype, float] = {}
    rows = []
    for name, build in models.items():
        model = build().train()
        dtype = next(model.parameters()).dtype
        if dtype not in peaks:
            n = 512 if torch.device(inp.device).type == "cpu" else 8192
            peaks[dtype] = measure_peak_flops(inp.device, dtype, n=n)
        mine = {k: b for k, b in batches.items() if name == "tiny" or k[0] in a.architecture_screens}
        swept = profile_sweep(
            model,
            {"/".join(k): b for k, b in mine.items()},
            warmup=a.warmup,
            repeats=a.repeats,
            device=inp.device,
            interleave=True,
            peak_flops=peaks[dtype],
        )
        for (s, h, side), row in zip(mine, swept):
            visual = int((batches[(s, h, side)]["input_ids"] == pad).sum())
            rows.append({"model": name, "screen": s, "history": h, "side": side, "visual_tokens": visual, **row})
    return pd.DataFrame(rows)


HEADLINE_COLUMNS = [
    "history",
    "prompt_tokens",
    "compression_pct",
    "step_s",
    "speedup",
    "ceiling",
    "measured_over_ceiling",
]


def headline_table(sides: pd.DataFrame, model: str) -> pd.DataFrame:
    """The CASC rows of ``model`` on the AndroidControl-size screens (:func:`side_table`'s)."""
    sel = sides[(sides["model"] == model) & (sides["screen"] == "AndroidControl") & (sides["side"] == "CASC")]
    return sel[HEADLINE_COLUMNS]


@timing.timed("profiling", "latency_table")
def latency_table(
    inp: Inputs,
    batches: Mapping[tuple[str, str, str], Mapping[str, torch.Tensor]],
    models: Mapping[str, Callable[[], Any]],
    sides: pd.DataFrame,
) -> pd.DataFrame:
    """CCPO Table 6 layout: greedy generation of ``analysis.latency_tokens`` tokens (first token
    and per-token decode time, :func:`guirl.analysis.profiling.generation_latency`) of every model
    on the longest history setting and the AndroidControl-size screens, beside :func:`side_table`'s
    step cost, with ``_delta_pct`` columns against the full history."""
    from guirl.analysis.profiling import generation_latency

    a = inp.cfg.analysis
    h_max = a.histories[-1]
    rows = []
    for name, build in models.items():
        model = build().eval()
        for side in SIDES:
            lat = generation_latency(
                model,
                prompt_inputs(batches[("AndroidControl", h_max, side)]),
                new_tokens=a.latency_tokens,
                warmup=a.warmup,
                repeats=a.repeats,
                device=inp.device,
            )
            rows.append({"model": name, "screen": "AndroidControl", "history": h_max, "side": side, **lat.summary()})
    merged = sides.merge(pd.DataFrame(rows), on=list(KEYS))
    return with_deltas(merged, ["step_tflops", "per_token_s", "step_s"])


#: CCPO's efficiency tables 05 fills, with their SO-RL and CCPO row patterns (``{h}``: the history).
PAPER_EFFICIENCY_ROWS: dict[str, tuple[str, str]] = {
    "Table 4": ("SO-RL-3B {h}", "CCPO-3B {h}"),
    "Table 14": ("Qwen2.5VL-3B SO-RL {h}", "CCPO-3B {h}"),
    "Table 15": ("Qwen2.5VL-7B SO-RL {h}", "CCPO-7B {h}"),
    "Table 12": ("Qwen2.5VL-7B SO-RL {h}", "CCPO-7B {h}"),
}
_EFFICIENCY_COLUMNS = {
    "Token length": "prompt_tokens",
    "Compression rate": "compression_pct",
    "Training time": "step_s",
    "Training speedup": "speedup",
    "Step time": "step_s",
    "Step speedup": "speedup",
}
_TABLE6_COLUMNS = {
    "Compute load": "step_tflops",
    "Compute load delta": "step_tflops_delta_pct",
    "Token latency": "per_token_s",
    "Token latency delta": "per_token_s_delta_pct",
    "Step latency": "step_s",
    "Step latency delta": "step_s_delta_pct",
}


def paper_layouts(
    inp: Inputs, sides: pd.DataFrame, latency: pd.DataFrame, model: str
) -> list[tuple[str, pd.DataFrame, pd.DataFrame, str]]:
    """``[(name, ours, paper rows, caption)]`` for ``Report.compare``: CCPO Tables 4, 14, 15 and 12
    (training / step time and tokens; ``model``'s rows on the AndroidControl-size screens) and
    Table 6 (compute load and latency, from :func:`latency_table`)."""
    from guirl.papers import paper_results
    from guirl.report import paper_cells

    a = inp.cfg.analysis
    paper = paper_results("ccpo")
    out = []
    for table, (so, cc) in PAPER_EFFICIENCY_ROWS.items():
        rows_map = {
            pat.format(h=h): {"model": model, "screen": "AndroidControl", "history": h, "side": side}
            for h in a.histories
            for pat, side in ((so, "full"), (cc, "CASC"))
        }
        ref = paper[(paper["table"] == table) & paper["row"].isin(rows_map)]
        out.append(
            (
                f"{table.lower().replace(' ', '')}_vs_paper",
                paper_cells(sides, ref, rows=rows_map, columns=_EFFICIENCY_COLUMNS),
                ref,
                f"CCPO {table} vs ours: {model} architecture, AndroidControl screens, one sample's forward + backward",
            )
        )
    t6 = {"SO-RL": {"model": model, "side": "full"}, "CCPO": {"model": model, "side": "CASC"}}
    ref6 = paper[paper["table"] == "Table 6"]
    out.append(
        (
            "table6_vs_paper",
            paper_cells(latency, ref6, rows=t6, columns=_TABLE6_COLUMNS, scale={"Token latency": 1e3}),
            ref6,
            f"CCPO Table 6 vs ours ({model}, {a.histories[-1]}, AndroidControl-size screens; compute load: counted "
            "TFLOPs of one sample's step; token latency in ms)",
        )
    )
    return out


def rl_rollout_tokens(inp: Inputs) -> pd.DataFrame:
    """:func:`rollout_token_table` of notebook 02's RL logs (every role and history of ``inp.rl``)."""
    from guirl.studies.shared.rl_runs import LABELS, rl_log

    return rollout_token_table({(LABELS[r], h): rl_log(res) for (r, h), res in inp.rl.items()})


def _inference_builder(cfg: Config, records: list[Any] | None = None):
    """CASC at inference over the longest evaluated history (the builder of 02's Table 13 runs)."""
    from guirl.methods.ccpo.history import inference_history

    return inference_history(cfg, n_history=max(int(h[0]) for h in cfg.eval.histories), records=records)


def table13_records(inp: Inputs) -> list[dict[str, Any]]:
    """Prediction records of 02's CCPO model of each ``analysis.histories`` setting on the test
    steps (``ccpo.eval.max_test_steps`` per split, 02's budget), once with the full history (``"full
    history"``) and once with the history cropped by CASC at inference (``"CASC"``)."""
    from guirl.studies.shared import evaluation as ev

    cfg = ev.paper_eval_config(inp.cfg, "ccpo")
    records: list[dict[str, Any]] = []
    for h in cfg.analysis.histories:
        policy = ev.eval_policy(cfg, inp.rl[("ccpo", h)])
        records += ev.evaluation_grid(cfg, {"full history": policy}, inp.splits, histories=[h])
        records += ev.evaluation_grid(
            cfg, {"CASC": policy}, inp.splits, histories=[h], history_builder=_inference_builder(cfg)
        )
    return records


def table13(inp: Inputs, records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """CCPO Table 13 layout: per history setting and side, mean prompt tokens, prefill TFLOPs of
    each architecture (tiny, mid, 3B, 7B; :func:`inference_table`) on the evaluated in-domain
    prompts, and the step SR (%, in-domain) of :func:`table13_records`."""
    from guirl.paths import configs_dir
    from guirl.prompts import prompt_spec
    from guirl.studies.shared import evaluation as ev

    cfg, m = inp.cfg, inp.cfg.model
    test = inp.splits[primary_test_split(inp.splits)]
    tiny = model_builders(inp)["tiny"]()
    archs = {"tiny": tiny.config} | {
        n: architecture_config(configs_dir() / "models" / f"qwen2.5-vl-{n.lower()}", inp.procs["MiniGUI"])
        for n in ("mid", "3B", "7B")
    }
    evaluated = {
        (h, side): history_step_prompts(
            test.episodes,
            prompt_spec(cfg, h),
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
            image_root=test.image_root,
            n_steps=cfg.method_section("ccpo").eval.max_test_steps,
            history_builder=_inference_builder(cfg) if side == "CASC" else None,
        )
        for h in cfg.analysis.histories
        for side in SIDES
    }
    t13 = inference_table(inp.procs["MiniGUI"], evaluated, archs)
    sr = ev.step_metrics(cfg, list(records))
    sides = {"full history": "full", "CASC": "CASC"}
    in_domain = sr[sr["split"] == primary_test_split(inp.splits)].assign(side=lambda d: d["model"].map(sides))
    return t13.merge(in_domain[["history", "side", "SR"]], on=["history", "side"])


#: Table 13's rows and the cells 05 fills.
TABLE13_COLUMNS = {
    "Token length": "prompt_tokens",
    "Compression rate": "compression_pct",
    "FLOPs": "tflops_7B",
    "FLOPs reduction": "flops_reduction_7B",
    "AITW": "SR",
}


def table13_vs_paper(inp: Inputs, t13: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(ours, paper rows)`` of CCPO Table 13 (7B, AITW): the SFT rows are our full-history rows,
    the ``*`` rows our CASC rows."""
    from guirl.papers import paper_results
    from guirl.report import paper_cells

    paper = paper_results("ccpo")
    ref13 = paper[paper["table"] == "Table 13"]
    hs = inp.cfg.analysis.histories
    rows13 = {f"SFT-{h}": {"history": h, "side": "full"} for h in hs} | {
        f"CCPO-{h}*": {"history": h, "side": "CASC"} for h in hs
    }
    return paper_cells(t13, ref13, rows=rows13, columns=TABLE13_COLUMNS), ref13


def tokens_per_action(inp: Inputs) -> tuple[pd.DataFrame, int]:
    """``(table, n)``: :func:`action_token_table` of the ``n`` in-domain test actions with the tiny
    tokenizer and, when ``analysis.tokenizer_path`` is set, the Qwen2.5-VL tokenizer there."""
    from transformers import AutoTokenizer

    from guirl.prompts import format_context

    test, m = inp.splits[primary_test_split(inp.splits)], inp.cfg.model
    actions = [s.action for ep in test.episodes for s in ep.steps]
    ctx = format_context(test.episodes[0].steps[0].screen_size, m.min_pixels, m.max_pixels)
    tokenizers = {"tiny tokenizer": inp.procs["MiniGUI"].tokenizer}
    if inp.cfg.analysis.tokenizer_path:
        tokenizers["Qwen2.5-VL tokenizer"] = AutoTokenizer.from_pretrained(inp.cfg.analysis.tokenizer_path)
    return action_token_table(actions, ctx, tokenizers), len(actions)
