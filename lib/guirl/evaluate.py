"""Evaluation harness: batched greedy generation, offline step scoring, online MiniGUI play.

* Offline, step level (:func:`evaluate_offline`): every step of a test split with its
  ground-truth history, greedy decoding, parsed with the run's output format and scored with a
  named metric protocol (:mod:`guirl.metrics`). An output that cannot be parsed counts as wrong
  in every metric and is counted (``n_unparsable``), never raised.
* Online, task level (:func:`play_online`): the agent plays MiniGUI tasks from their first
  screen with its own history up to a turn limit; Task SR, Subgoal SR and goal progress come
  from the environment's state checks (the AndroidLong protocol: mean and std over seeds).
* Every prediction is a flat record (:data:`PREDICTION_FIELDS`) written as JSONL, so another
  evaluator can rescore it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.data.schema import Episode
from guirl.metrics import get_protocol, score_step
from guirl.metrics.bootstrap import rate_with_ci
from guirl.prompts import PromptSpec, action_text, build_prompt, episode_step_prompt, format_context

#: Fields of one prediction record (what public scorers read).
PREDICTION_FIELDS = (
    "model",
    "split",
    "history",
    "episode_id",
    "step_id",
    "image_width",
    "image_height",
    "gt_action",
    "gt_type",
    "gt_point",
    "gt_text",
    "gt_box",
    "output",
    "parse_ok",
    "parse_reason",
    "pred_action",
    "pred_type",
    "pred_point",
    "pred_text",
    "type_match",
    "grounding",
    "exact",
    "score_reason",
)


def load_policy(
    base_model: str | Path,
    adapter: str | Path | None = None,
    *,
    min_pixels: int,
    max_pixels: int,
    dtype: str = "float32",
    device: str = "cpu",
):
    """``(model, processor)`` for evaluation: a checkpoint, optionally with a LoRA adapter merged in."""
    from guirl.models import load_model, load_processor

    processor = load_processor(base_model, min_pixels=min_pixels, max_pixels=max_pixels)
    model = load_model(base_model, dtype=dtype, device=device)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    model.eval()
    return model, processor


def load_trained(
    result: dict[str, Any], *, min_pixels: int, max_pixels: int, dtype: str = "float32", device: str = "cpu"
):
    """``(model, processor)`` of a finished training stage (its ``result.json``): the base model
    with the LoRA adapter merged when the stage trained one, else the saved full model."""
    if result["adapter"]:
        return load_policy(
            result["base_model"],
            result["final"],
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            dtype=dtype,
            device=device,
        )
    return load_policy(result["final"], None, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device)


def _open(img: Any):
    from PIL import Image

    if isinstance(img, (str, Path)):
        with Image.open(img) as im:
            return im.convert("RGB")
    return img


def generate(
    model,
    processor,
    prompts: Sequence[tuple[list[dict[str, Any]], list[Any]]],
    *,
    max_new_tokens: int,
    batch_size: int,
    progress: bool = False,
    desc: str = "generate",
) -> list[str]:
    """Greedy completions for ``(messages, images)`` prompts, batched with left padding.

    Returns one decoded string per prompt (special tokens removed), in input order.
    """
    import torch
    from tqdm.auto import tqdm

    outs: list[str] = []
    starts = range(0, len(prompts), batch_size)
    for i in tqdm(starts, desc=desc, disable=not progress):
        batch = prompts[i : i + batch_size]
        texts = [processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in batch]
        images = [[_open(x) for x in ims] for _, ims in batch]
        enc = processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="left")
        enc = enc.to(model.device)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
        outs.extend(processor.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    return outs


def _point(a: Action | None) -> list[float] | None:
    return list(a.point) if a is not None and a.point is not None else None


def prediction_record(
    *,
    model: str,
    split: str,
    history: str,
    episode: Episode,
    t: int,
    output: str,
    output_format: str,
    protocol: str,
    min_pixels: int,
    max_pixels: int,
) -> dict[str, Any]:
    """Parse and score one model output for step ``t`` of ``episode`` (never raises on bad output)."""
    step = episode.steps[t]
    ctx = format_context(step.screen_size, min_pixels, max_pixels)
    parsed = get_format(output_format).parse(output, ctx)
    score = score_step(
        parsed,
        step.action,
        protocol,
        gt_box=step.target_box,
        candidate_boxes=step.candidate_boxes,
        screen_size=step.screen_size,
    )
    pred = parsed.action
    return {
        "model": model,
        "split": split,
        "history": history,
        "episode_id": episode.episode_id,
        "step_id": step.step_id,
        "image_width": step.screen_size[0],
        "image_height": step.screen_size[1],
        "gt_action": step.action.to_dict(),
        "gt_type": step.action.type.value,
        "gt_point": _point(step.action),
        "gt_text": step.action.text,
        "gt_box": list(step.target_box) if step.target_box else None,
        "output": output,
        "parse_ok": parsed.ok,
        "parse_reason": parsed.reason,
        "pred_action": pred.to_dict() if pred else None,
        "pred_type": pred.type.value if pred else None,
        "pred_point": _point(pred),
        "pred_text": pred.text if pred else None,
        "type_match": score.type_match,
        "grounding": score.grounding,
        "exact": score.exact,
        "score_reason": score.reason,
    }


def evaluate_offline(
    model,
    processor,
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    protocol: str,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
    max_new_tokens: int,
    batch_size: int,
    model_name: str,
    split: str,
    max_steps: int | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Step-level evaluation of one split under one history setting; returns prediction records.

    ``max_steps`` keeps the first steps in episode order (whole episodes first) for CPU budgets.
    """
    get_protocol(protocol)  # fail early on an unknown protocol name
    items = [(ep, t) for ep in episodes for t in range(len(ep.steps))]
    if max_steps is not None:
        items = items[:max_steps]
    prompts = []
    for ep, t in items:
        messages, images, _ = episode_step_prompt(
            ep, t, spec, min_pixels=min_pixels, max_pixels=max_pixels, image_root=str(image_root)
        )
        prompts.append((messages, images))
    outputs = generate(
        model,
        processor,
        prompts,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        progress=progress,
        desc=f"{model_name} {split} {spec.tag}",
    )
    return [
        prediction_record(
            model=model_name,
            split=split,
            history=spec.tag,
            episode=ep,
            t=t,
            output=o,
            output_format=spec.output_format,
            protocol=protocol,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        )
        for (ep, t), o in zip(items, outputs)
    ]


def summarize_steps(records: Sequence[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """TM / GR / SR in percent with 95% bootstrap intervals, plus counts.

    GR is over steps whose ground truth has a coordinate. Unparsable outputs are wrong everywhere.
    """
    out: dict[str, Any] = {"n": len(records), "n_unparsable": sum(not r["parse_ok"] for r in records)}
    columns = {
        "TM": [r["type_match"] for r in records],
        "GR": [r["grounding"] for r in records if r["grounding"] is not None],
        "SR": [r["exact"] for r in records],
    }
    for name, vals in columns.items():
        mean, lo, hi = rate_with_ci(np.asarray(vals, dtype=float), n_boot=n_boot, seed=seed)
        out[name], out[f"{name}_lo"], out[f"{name}_hi"] = (100 * mean, 100 * lo, 100 * hi)
    return out


def write_predictions(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """JSONL of prediction records (sorted keys: stable bytes for the same predictions)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def play_online(
    model,
    processor,
    tasks: Sequence[Any],
    spec: PromptSpec,
    *,
    width: int,
    height: int,
    max_turns: int,
    min_pixels: int,
    max_pixels: int,
    max_new_tokens: int,
    batch_size: int,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Play MiniGUI tasks with the agent's own history (no step instructions); one record per task.

    All tasks advance in lockstep so each turn is one batched generation. An unparsable output
    is a wasted turn (the screen does not change). Record fields: ``task_id``, ``category``,
    ``success`` (the task's state check at the end), ``subgoals_done`` / ``subgoals_total``,
    ``subgoal_rate``, ``turns``, ``n_unparsable``, ``n_invalid`` (actions the phone rejected),
    ``actions`` (the parsed actions as dicts).
    """
    from tqdm.auto import tqdm

    from guirl.env import MiniGUIEnv

    fmt = get_format(spec.output_format)
    ctx = format_context((width, height), min_pixels, max_pixels)
    envs, obs, hist, recs = [], [], [], []
    for task in tasks:
        env = MiniGUIEnv(width=width, height=height, render=True, max_steps=max_turns)
        o, _ = env.reset(options={"task": task})
        envs.append(env)
        obs.append(o)
        hist.append([])
        recs.append(
            {
                "task_id": task.task_id,
                "category": task.category,
                "turns": 0,
                "n_unparsable": 0,
                "n_invalid": 0,
                "actions": [],
                "done": False,
            }
        )
    for _ in tqdm(range(max_turns), desc="online", disable=not progress):
        live = [i for i, r in enumerate(recs) if not r["done"]]
        if not live:
            break
        prompts = [build_prompt(tasks[i].instruction, hist[i], obs[i]["screenshot"], spec, None) for i in live]
        outputs = generate(model, processor, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
        for i, text in zip(live, outputs):
            r = recs[i]
            r["turns"] += 1
            parsed = fmt.parse(text, ctx)
            if not parsed.ok:
                r["n_unparsable"] += 1
                hist[i].append((text.strip()[:200], obs[i]["screenshot"]))
                continue
            a = parsed.action
            r["actions"].append(a.to_dict())
            hist[i].append((action_text(a, spec, ctx) if fmt.can_format(a) else text, obs[i]["screenshot"]))
            o, _, terminated, truncated, info = envs[i].step(a)
            obs[i] = o
            if info.get("invalid"):
                r["n_invalid"] += 1
            if terminated or truncated:
                r["done"] = True
    out = []
    for task, env, r in zip(tasks, envs, recs):
        status = task.subgoal_status(env.state)
        done = sum(bool(s) for s in status)
        out.append(
            {
                **{k: v for k, v in r.items() if k != "done"},
                "success": bool(task.check(env.state)),
                "subgoals_done": done,
                "subgoals_total": len(status),
                "subgoal_rate": done / len(status) if status else float(bool(task.check(env.state))),
            }
        )
    return out


def summarize_online(runs: Sequence[Sequence[dict[str, Any]]]) -> dict[str, float]:
    """AndroidLong protocol over seeds: Task SR and Subgoal SR (percent), mean and std over runs."""
    task = [100 * float(np.mean([r["success"] for r in run])) for run in runs if run]
    sub = [100 * float(np.mean([r["subgoal_rate"] for r in run])) for run in runs if run]

    def ms(v: list[float]) -> tuple[float, float]:
        return (float(np.mean(v)), float(np.std(v))) if v else (math.nan, math.nan)

    (t_m, t_s), (s_m, s_s) = ms(task), ms(sub)
    return {"task_sr": t_m, "task_sr_std": t_s, "subgoal_sr": s_m, "subgoal_sr_std": s_s, "n_runs": len(task)}
