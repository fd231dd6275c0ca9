"""Side-by-side efficiency of full vs CASC-cropped history (notebook 05; CCPO Tables 4, 6, 12-15).

The measurements themselves are :mod:`guirl.analysis.profiling`'s; this module builds the inputs
(the same MiniGUI steps with the full history, as SO-RL prompts them, and with the history
screenshots cropped by CASC around the annotated action points, CCPO eq. 10; on the MiniGUI
screens and on the same screens resized to a phone size such as AndroidControl's 1080x2400) and
turns the measured rows into CCPO's table layouts.

Vocabulary
----------
The CASC history builder itself is a method's (:func:`guirl.efficiency_study.casc_history`, built
on :mod:`guirl.methods.ccpo`); the functions here take any history builder.

* A *setting* is ``(model, screen, history, side)``: ``side`` is ``"full"`` (every history
  screenshot whole, SO-RL) or ``"CASC"`` (CCPO's cropped history).
* ``compression_pct`` = ``100 (1 - tokens / full tokens)`` at the same model, screen and history
  (CCPO Table 4's compression rate); ``speedup`` = full median step seconds / this median;
  ``ceiling`` = the speedup the token counts alone predict under a cost model fitted to all the
  model's settings (:func:`guirl.analysis.profiling.ceiling_speedup`; ``quadratic``: ``c0 + c1 n
  + c2 n^2``, ``linear``: ``c0 + c1 n``, coefficients >= 0); ``measured_over_ceiling`` =
  ``speedup / ceiling``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image

from guirl.analysis.profiling import CostFit, analytic_forward_flops, ceiling_speedup
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
    "fit_cost_nonnegative",
    "fit_models",
    "fit_table",
    "side_table",
    "with_deltas",
    "plot_step_time",
    "rollout_token_table",
    "inference_table",
    "action_token_table",
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
    :func:`guirl.efficiency_study.casc_history`). Raises ``ValueError`` when no
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


def fit_cost_nonnegative(tokens: Sequence[float], seconds: Sequence[float], degree: int) -> CostFit:
    """Least squares ``t(n) = sum_k c_k n^k`` with every ``c_k >= 0`` (a step cannot get cheaper
    with more tokens; plain least squares on a few noisy points can bend the quadratic below zero).

    Exact non-negative least squares by enumerating the supports (``2^(degree+1)`` small OLS
    problems; the optimum is the OLS fit on its own support). Needs ``degree + 1`` distinct token
    counts; ``r2`` as :class:`guirl.analysis.profiling.CostFit`.
    """
    import itertools

    n = np.asarray(tokens, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape or n.ndim != 1:
        raise ValueError(f"tokens and seconds must be 1-D of equal length, got {n.shape} and {t.shape}")
    if degree < 1 or len(np.unique(n)) < degree + 1:
        raise ValueError(
            f"a degree-{degree} fit needs at least {degree + 1} distinct token counts, got {len(np.unique(n))}"
        )
    scale = float(np.max(np.abs(n))) or 1.0
    design = np.vander(n / scale, degree + 1, increasing=True)
    best, best_sse = np.zeros(degree + 1), float(np.sum(t**2))
    for k in range(1, degree + 2):
        for support in itertools.combinations(range(degree + 1), k):
            sol, *_ = np.linalg.lstsq(design[:, support], t, rcond=None)
            if np.any(sol < 0):
                continue
            coef = np.zeros(degree + 1)
            coef[list(support)] = sol
            sse = float(np.sum((t - design @ coef) ** 2))
            if sse < best_sse - 1e-15:
                best, best_sse = coef, sse
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - best_sse / ss_tot if ss_tot > 0 else 1.0
    return CostFit(degree, tuple(float(c) / scale**k for k, c in enumerate(best)), r2, len(n))


def fit_models(rows: pd.DataFrame) -> dict[str, dict[str, CostFit]]:
    """Per ``model`` of ``rows`` (columns ``model``, ``prompt_tokens``, ``median_s``), the linear
    and quadratic cost models (``{"linear", "quadratic"}``) with non-negative coefficients
    (:func:`fit_cost_nonnegative`)."""
    out = {}
    for m, g in rows.groupby("model", sort=False):
        n, t = g["prompt_tokens"].to_numpy(float), g["median_s"].to_numpy(float)
        out[str(m)] = {"linear": fit_cost_nonnegative(n, t, 1), "quadratic": fit_cost_nonnegative(n, t, 2)}
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
    (counted forward + backward, 1e12 FLOPs), ``counted_over_analytic`` (forward) and
    ``peak_mb`` (module doc). Every setting needs its ``full`` counterpart (``KeyError``
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
    (:func:`guirl.ccpo_study.rl_log`), means over its steps after ``skip_first``: ``prompt_tokens``
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


def action_token_table(
    actions: Sequence[Any], ctx: Any, tokenizers: Mapping[str, Any], formats: Sequence[str] | None = None
) -> pd.DataFrame:
    """Tokens per action of every output format (AgentCPM-GUI's compactness claim): one row per
    format, ``actions`` (how many of ``actions`` it can express) and one column of mean tokens per
    tokenizer of ``tokenizers`` (:func:`guirl.analysis.accounting.tokens_per_action`). ``ctx``: the
    :class:`guirl.actions.FormatContext` (screen size and pixel budget)."""
    from guirl.actions import FORMAT_NAMES, get_format
    from guirl.actions.types import ActionError
    from guirl.analysis.accounting import tokens_per_action

    rows = []
    for name in formats or FORMAT_NAMES:
        fmt = get_format(name)
        ok = []
        for a in actions:
            try:
                fmt.format(a, ctx)
            except ActionError:
                continue
            ok.append(a)
        row: dict[str, Any] = {"format": name, "actions": len(ok)}
        for tok_name, tok in tokenizers.items():
            row[tok_name] = tokens_per_action(ok, name, tok, ctx=ctx) if ok else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
