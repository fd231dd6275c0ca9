#!/usr/bin/env python
"""One training step of the Qwen2.5-VL-3B and 7B architectures on a GPU: full vs CASC history.

``make bench-gpu`` runs it. For each architecture (random weights from
``configs/models/qwen2.5-vl-<arch>``, bf16, LoRA on the language model as the RL engine sets up the
paper profiles, the published vocabulary so the LM head costs what it costs) and each history
setting (1AO and 3AO, full screenshots vs CASC crops as CCPO's inference builds them), on MiniGUI
screens rescaled to 1080x2400 at the paper pixel budget (12,845,056 px), it measures one sample's
forward + backward (``guirl.analysis.profiling.train_step``):

* activation checkpointing: chosen per setting by a measured probe (one step without it; on an
  out-of-memory error, with every 2nd layer checkpointed, then every layer:
  ``choose_activation_checkpointing``);
* step seconds: median of ``--repeats`` steps timed round-robin over the settings;
* prompt tokens, visual tokens, peak memory (GiB above the weights) of the probe's step;
* vision share: the vision tower's forward alone (median) over the step time;
* model TFLOPs of the step (``analytic_train_flops``: LoRA, so the LM's backward is activations
  only and the frozen vision tower has none) and MFU against a measured peak (a large bf16 matmul).

Each architecture's rows are written as soon as it finishes: ``<out>/<arch>.json`` and a line
per setting appended to ``<out>/bench.csv`` (``<out>`` default ``runs/bench-gpu``). On a machine
without CUDA it runs on the CPU (``--archs mid`` and small screens: the test in
``tests/test_bench_gpu.py``). ``--budget-s`` stops before an architecture once that many seconds
have passed.

Usage::

    python scripts/bench_gpu.py                          # cuda: 3b and 7b
    python scripts/bench_gpu.py --device cpu --archs mid --screen 280x504 --max-pixels 50176 --repeats 1
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from guirl.analysis import profiling as P
from guirl.config import load_config
from guirl.data.splits import load_splits
from guirl.env.export import build_minigui_dataset
from guirl.methods.ccpo.history import inference_history
from guirl.models import apply_lora, build_tiny_model, load_processor
from guirl.paths import cache_dir, configs_dir, runs_dir
from guirl.prompts import prompt_spec
from guirl.studies import efficiency_profiling as E

HISTORIES = ("1AO", "3AO")
#: Activation-checkpointing settings the probe tries, least recomputation first: off, every 2nd
#: layer (half the activations kept, half the recomputation), every layer.
CHECKPOINT_LADDER: tuple[int | None, ...] = (None, 2, 1)
GIB = 2**30
COLUMNS = (
    "arch",
    "history",
    "side",
    "prompt_tokens",
    "visual_tokens",
    "images",
    "step_s",
    "step_iqr_s",
    "speedup",
    "vision_s",
    "vision_share",
    "peak_gib",
    "checkpointing",
    "train_tflops",
    "mfu",
    "device",
)


def parse_size(text: str) -> tuple[int, int]:
    """``"1080x2400"`` -> ``(1080, 2400)`` (width, height in px)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write WIDTHxHEIGHT in px, e.g. 1080x2400") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return w, h


def build_batches(
    cfg: Any, processor: Any, *, screen: tuple[int, int], max_pixels: int, device: str
) -> dict[tuple[str, str], dict[str, torch.Tensor]]:
    """``{(history, side): batch}``: one MiniGUI test step with a full 3-step history, its screens
    rescaled to ``screen`` px, prompted as ``cfg`` prompts (full screenshots, or CASC crops as at
    inference), at the pixel budget ``max_pixels``."""
    root = cache_dir() / "bench-gpu"
    data = root / "minigui"
    if not (data / "test_in_domain").exists():
        build_minigui_dataset(data, n_tasks=6, seed=0, progress=False)
    test = load_splits(data)["test_in_domain"]
    episodes = E.episodes_for_steps(test.episodes, 1, 3)
    large, image_root = E.rescale_screens(episodes, test.image_root, screen, root / f"screens-{screen[0]}x{screen[1]}")
    out = {}
    for history in HISTORIES:
        for side in E.SIDES:
            prompts = E.history_step_prompts(
                large,
                prompt_spec(cfg, history),
                min_pixels=cfg.model.min_pixels,
                max_pixels=max_pixels,
                image_root=image_root,
                n_steps=1,
                history_builder=inference_history(cfg, max_pixels=max_pixels) if side == "CASC" else None,
            )
            out[(history, side)] = E.prompt_batch(processor, prompts[:1], device=device)
    return out


def checkpoint_label(every_n_layers: int | None) -> str:
    """``None`` -> ``"off"``, 1 -> ``"every layer"``, n -> ``"1 in n layers"``."""
    if every_n_layers is None:
        return "off"
    return "every layer" if every_n_layers == 1 else f"1 in {every_n_layers} layers"


def _vision_tower(model: torch.nn.Module) -> torch.nn.Module:
    return next(m for m in model.modules() if type(m).__name__ == "Qwen2_5_VisionTransformerPretrainedModel")


def bench_architecture(
    model: torch.nn.Module,
    batches: Mapping[tuple[str, str], Mapping[str, torch.Tensor]],
    *,
    device: str,
    repeats: int,
    peak_flops: float,
    image_token_id: int,
) -> list[dict[str, Any]]:
    """One row per setting of ``batches`` (:data:`COLUMNS` less ``arch`` and ``device``)."""
    steps = {key: P.train_step(model, batch) for key, batch in batches.items()}
    choices = {}
    for key, step in steps.items():  # the probe's step is also each setting's warm-up
        choices[key] = P.choose_activation_checkpointing(model, step, device=device, ladder=CHECKPOINT_LADDER)
    fns = {}
    for key, step in steps.items():

        def timed(step=step, every=choices[key].every_n_layers) -> None:
            P.set_activation_checkpointing(model, every)
            step()

        fns[key] = timed
    timings = P.time_interleaved(fns, warmup=0, repeats=repeats, device=device)
    visual = _vision_tower(model)
    rows = []
    for key, batch in batches.items():
        history, side = key

        def vision(batch=batch) -> None:
            with torch.no_grad():
                visual(batch["pixel_values"], grid_thw=batch["image_grid_thw"])

        vision_s = P.time_callable(vision, warmup=1, repeats=repeats, device=device).median
        step_s = timings[key].median
        n_logits = int(batch["completion_ids"].shape[1]) + 1
        train = P.analytic_train_flops(model, batch, n_logits=n_logits)
        rows.append(
            {
                "history": history,
                "side": side,
                "prompt_tokens": P.batch_prompt_tokens(batch),
                "visual_tokens": int((batch["input_ids"] == image_token_id).sum()),
                "images": int(batch["image_grid_thw"].shape[0]),
                "step_s": step_s,
                "step_iqr_s": timings[key].iqr,
                "vision_s": vision_s,
                "vision_share": vision_s / step_s,
                "peak_gib": choices[key].peak.peak_bytes / GIB,
                "checkpointing": checkpoint_label(choices[key].every_n_layers),
                "train_tflops": train / 1e12,
                "mfu": P.mfu(train, step_s, peak_flops),
            }
        )
    full = {r["history"]: r["step_s"] for r in rows if r["side"] == "full"}
    for r in rows:
        r["speedup"] = full[r["history"]] / r["step_s"] if r["history"] in full else math.nan
    return rows


def write_rows(out: Path, arch: str, rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> None:
    """``out/<arch>.json`` (rows and run facts) and the rows appended to ``out/bench.csv``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{arch}.json").write_text(json.dumps({"arch": arch, **meta, "rows": list(rows)}, indent=1) + "\n")
    csv_path = out / "bench.csv"
    new = not csv_path.exists()
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _print_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    print(
        f"{'arch':>5} {'hist':>4} {'side':>5} {'tokens':>7} {'step s':>7} {'speedup':>7} {'vision':>6} "
        f"{'peak GiB':>8} {'ckpt':>15} {'TFLOPs':>7} {'MFU':>6}"
    )
    for r in rows:
        print(
            f"{r['arch']:>5} {r['history']:>4} {r['side']:>5} {r['prompt_tokens']:>7} {r['step_s']:>7.3f} "
            f"{r['speedup']:>7.2f} {r['vision_share']:>6.1%} {r['peak_gib']:>8.2f} {r['checkpointing']:>15} "
            f"{r['train_tflops']:>7.2f} {r['mfu']:>6.1%}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--archs", default=None, help="comma-separated configs/models/qwen2.5-vl-<arch> (cuda: 3b,7b)")
    ap.add_argument("--screen", type=parse_size, default=(1080, 2400), help="screen size WxH px (AndroidControl)")
    ap.add_argument("--max-pixels", type=int, default=None, help="pixel budget (default: the profile's, 12,845,056)")
    ap.add_argument("--profile", default="paper-3b", help="prompts and CASC settings of this profile")
    ap.add_argument("--repeats", type=int, default=3, help="timed steps per setting (round-robin)")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default: runs/bench-gpu)")
    ap.add_argument("--budget-s", type=float, default=360.0, help="start no architecture after this many seconds")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no GPU; pass --device cpu", file=sys.stderr)
        return 2
    archs = (args.archs or ("3b,7b" if device == "cuda" else "mid")).split(",")
    configs = {a: configs_dir() / "models" / f"qwen2.5-vl-{a}" for a in archs}
    missing = [str(p) for p in configs.values() if not (p / "config.json").is_file()]
    if missing:
        print(f"error: no config.json in {', '.join(missing)} (known: 3b, 7b, mid)", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    cfg = load_config(args.profile)
    max_pixels = args.max_pixels or cfg.model.max_pixels
    out = args.out or runs_dir("bench-gpu")
    processor = load_processor(build_tiny_model(), min_pixels=cfg.model.min_pixels, max_pixels=max_pixels)
    batches = build_batches(cfg, processor, screen=args.screen, max_pixels=max_pixels, device=device)
    peak = P.measure_peak_flops(device, dtype, n=8192 if device == "cuda" else 512)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    print(f"[bench-gpu] {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), {dtype}, "
          f"measured peak {peak / 1e12:.3g} TFLOP/s, screens {args.screen[0]}x{args.screen[1]} at {max_pixels:,} px")  # fmt: skip
    for arch in archs:
        if time.perf_counter() - start > args.budget_s:
            print(f"[bench-gpu] {arch}: skipped, {args.budget_s:g} s budget spent", flush=True)
            continue
        t0 = time.perf_counter()
        vocab = json.loads((configs[arch] / "config.json").read_text())["vocab_size"]
        model = P.random_model(configs[arch], processor, dtype=dtype, device=device, vocab_size=vocab)
        model = apply_lora(model).train()
        rows = bench_architecture(
            model, batches, device=device, repeats=args.repeats, peak_flops=peak, image_token_id=pad
        )
        rows = [{"arch": arch, **r, "device": device} for r in rows]
        meta = {
            "device": device,
            "dtype": str(dtype),
            "peak_tflops": peak / 1e12,
            "screen": list(args.screen),
            "max_pixels": max_pixels,
            "repeats": args.repeats,
            "seconds": time.perf_counter() - t0,
        }
        write_rows(out, arch, rows, meta)
        _print_rows(rows)
        print(f"[bench-gpu] {arch}: {meta['seconds']:.0f} s -> {out / (arch + '.json')}", flush=True)
        del model
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    print(f"[bench-gpu] {time.perf_counter() - start:.0f} s in all; {out / 'bench.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
