#!/usr/bin/env python
"""Steps per second of parse + score + reward on ONE CPU core (issue "Tested kernels", item 6).

For each (output format, metric protocol, reward) triple of a paper, the script builds a seeded
pool of steps -- a ground-truth action with its target box and a model output string (the
ground truth formatted with a perturbed point, a wrong type, or unparsable text) -- and times
the per-step pipeline

    parse:  guirl.actions.formats.get_format(fmt).parse(text, ctx)
    score:  guirl.metrics.score_step(parsed, gt, protocol, gt_box=...)
    reward: guirl.methods.get_reward(name).fn(parsed, GroundTruth(...))

Torch is limited to one thread (the kernels are pure Python, so this only keeps a stray
torch op from using more cores); ``taskset -c 0`` pins the process too if you want.

Usage::

    python scripts/bench_kernels.py              # all triples, 20k steps each, JSON lines
    python scripts/bench_kernels.py --triples ccpo --steps 50000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from guirl.actions.formats import FormatContext, get_format  # noqa: E402
from guirl.actions.types import Action, ActionError, ActionType  # noqa: E402
from guirl.methods import get_reward  # noqa: E402
from guirl.metrics import get_protocol, score_step  # noqa: E402
from guirl.rewards import GroundTruth  # noqa: E402

#: name -> (output format, metric protocol, reward) as each paper pairs them.
TRIPLES: dict[str, tuple[str, str, str]] = {
    "ccpo": ("ccpo", "ccpo", "ccpo"),
    "agentcpm": ("agentcpm", "agentcpm", "agentcpm"),
    "ces": ("ces_executor", "ces", "ces"),
    "uis1": ("qwen_mobile_use", "uis1", "semi_online"),
    "guir1": ("qwen_mobile_use", "guir1", "guir1"),
}

GARBAGE = ("", "I think I should click the button", '{"action": "click", "coordinate": [', "<action>nope</action>")


def _random_action(rng: random.Random) -> tuple[Action, tuple[float, float, float, float] | None]:
    kind = rng.choices(["click", "type", "scroll", "press", "terminate", "long_press"], [50, 15, 15, 8, 7, 5])[0]
    if kind in ("click", "long_press"):
        x, y = rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95)
        bw, bh = rng.uniform(0.02, 0.2), rng.uniform(0.02, 0.08)
        box = (max(0.0, x - bw / 2), max(0.0, y - bh / 2), min(1.0, x + bw / 2), min(1.0, y + bh / 2))
        return Action(ActionType(kind), point=(x, y)), box
    if kind == "type":
        return Action(ActionType.TYPE, text=rng.choice(["hello world", "milk", "Paris hotels", "42"])), None
    if kind == "scroll":
        return Action(
            ActionType.SCROLL, direction=rng.choice(["up", "down", "left", "right"]), convention="finger"
        ), None
    if kind == "press":
        return Action(ActionType.PRESS, key=rng.choice(["back", "home"])), None
    return Action(ActionType.TERMINATE, status="success"), None


def _prediction(gt: Action, rng: random.Random) -> Action:
    r = rng.random()
    if gt.point is not None and r < 0.5:  # near or far click
        dx, dy = rng.gauss(0, 0.08), rng.gauss(0, 0.08)
        p = (min(1.0, max(0.0, gt.point[0] + dx)), min(1.0, max(0.0, gt.point[1] + dy)))
        return Action(gt.type, point=p)
    if r < 0.7:
        return gt
    return Action(ActionType.CLICK, point=(rng.random(), rng.random()))  # wrong type / place


def build_pool(fmt_name: str, n: int, seed: int, ctx: FormatContext) -> list[tuple[str, Action, object]]:
    """``n`` (model text, gt action, gt box) steps; ~5% unparsable texts."""
    rng = random.Random(seed)
    fmt = get_format(fmt_name)
    pool: list[tuple[str, Action, object]] = []
    while len(pool) < n:
        gt, box = _random_action(rng)
        if rng.random() < 0.05:
            pool.append((rng.choice(GARBAGE), gt, box))
            continue
        try:
            text = fmt.format(_prediction(gt, rng), ctx)
        except ActionError:
            continue  # the format cannot express this action
        pool.append((text, gt, box))
    return pool


def bench(triple: str, n: int, seed: int, repeat: int) -> dict[str, object]:
    fmt_name, proto_name, reward_name = TRIPLES[triple]
    ctx = FormatContext(width=1080, height=2400, min_pixels=3136, max_pixels=12845056)  # paper profiles
    fmt, proto, reward = get_format(fmt_name), get_protocol(proto_name), get_reward(reward_name).fn
    pool = build_pool(fmt_name, n, seed, ctx)
    gts = [GroundTruth(gt, box=box) for _, gt, box in pool]
    best = float("inf")
    checksum = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        acc = 0.0
        for (text, gt, box), g in zip(pool, gts):
            parsed = fmt.parse(text, ctx)
            s = score_step(parsed, gt, proto, gt_box=box)
            acc += reward(parsed, g).total + s.exact
        best = min(best, time.perf_counter() - t0)
        checksum = acc
    # parse alone, to see where the time goes
    t0 = time.perf_counter()
    for text, _, _ in pool:
        fmt.parse(text, ctx)
    parse_s = time.perf_counter() - t0
    return {
        "triple": triple,
        "format": fmt_name,
        "protocol": proto_name,
        "reward": reward_name,
        "steps": n,
        "steps_per_s": round(n / best, 1),
        "us_per_step": round(1e6 * best / n, 2),
        "parse_us_per_step": round(1e6 * parse_s / n, 2),
        "checksum": round(checksum, 6),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", nargs="*", default=list(TRIPLES), choices=list(TRIPLES))
    ap.add_argument("--steps", type=int, default=20000, help="steps per triple")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes; the fastest is reported")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for t in args.triples:
        r = bench(t, args.steps, args.seed, args.repeat)
        print(json.dumps(r), flush=True)
        results.append(r)
    return results


if __name__ == "__main__":
    main()
