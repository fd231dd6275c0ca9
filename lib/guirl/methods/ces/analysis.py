"""CES's two analyses, as written rules: the failure taxonomy of Fig. 5 and the temporal judgement of
Fig. 2 (CES Sec. 3 and 5.3).

**Failure taxonomy** (:func:`classify_failure`). CES sorts failed steps into State Loss, Planning
Error, Perception Error and Generalization Failure (Fig. 5) by reading cases; the paper gives no
rule. Here a failed step (not right under the evaluation protocol) of a recorded MiniGUI episode
gets the first category whose test holds, from the ground truth alone:

1. ``state_loss``: the predicted action is right (under the same protocol) for *another* step of
   the same episode taken on the same screen (same app and screen name): the agent acts as if it
   were at another point of the task, repeating done work or skipping ahead (CES Sec. 3: repeated
   screens confuse the progress);
2. ``generalisation_failure``: the step's screen (app, screen name) never occurs in the training
   episodes: an out-of-distribution interface (Sec. 3, [36]);
3. ``planning_error``: no parsable action, or an action of the wrong type: the wrong decision of
   what to do next;
4. ``perception_error``: the right type with wrong arguments (a point outside the target, wrong
   text or direction): the right decision, misgrounded.

**Temporal judgement** (:func:`temporal_pairs`, :func:`judge_pairs`): two screenshots of one
trajectory, ``gap`` steps apart, shown in a random order with the goal; the model "answers" the one
it finds more likely of ``A`` / ``B`` (log-probability of each one-token answer under the model: a
forced choice that needs no generation and works for any of the repository's VLMs). Accuracy
against the gap is Fig. 2's curve. :func:`state_judge` is the same question answered from the
annotated task states (the subgoal count of the progress summaries; a tie is a coin flip, scored
0.5): what an explicit state representation carries that the screenshots may not.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guirl.actions.types import Action
from guirl.data.schema import Episode

__all__ = [
    "FAILURE_KINDS",
    "screen_of",
    "seen_screens",
    "classify_failure",
    "failure_counts",
    "TemporalPair",
    "temporal_pairs",
    "temporal_prompt",
    "judge_pairs",
    "state_judge",
]

#: CES Fig. 5's categories, in the order the rule tests them.
FAILURE_KINDS = ("state_loss", "generalisation_failure", "planning_error", "perception_error")


def screen_of(step: Any) -> tuple[str, str]:
    """``(app, screen)`` of a recorded MiniGUI step (``Step.extra``); ``("", "")`` when unknown."""
    return (str(step.extra.get("app", "")), str(step.extra.get("screen", "")))


def seen_screens(episodes: Iterable[Episode]) -> set[tuple[str, str]]:
    """Every ``(app, screen)`` the given (training) episodes show."""
    return {screen_of(s) for ep in episodes for s in ep.steps}


def classify_failure(
    pred: Action | None, episode: Episode, t: int, *, protocol: str, seen: set[tuple[str, str]]
) -> str | None:
    """The category of step ``t``'s failure (module doc), or ``None`` when ``pred`` is right there
    (not a failure). ``pred``: the parsed prediction (``None``: unparsable); ``protocol``: the
    evaluation protocol that decides "right"; ``seen``: :func:`seen_screens` of the training data."""
    from guirl.metrics.step import score_step

    def right(at: int) -> bool:
        s = episode.steps[at]
        return score_step(
            pred, s.action, protocol, gt_box=s.target_box, candidate_boxes=s.candidate_boxes, screen_size=s.screen_size
        ).exact

    step = episode.steps[t]
    if pred is not None and right(t):
        return None
    here = screen_of(step)
    if pred is not None and any(
        k != t and screen_of(episode.steps[k]) == here and right(k) for k in range(len(episode.steps))
    ):
        return "state_loss"
    if here not in seen:
        return "generalisation_failure"
    if pred is None or pred.type is not step.action.type:
        return "planning_error"
    return "perception_error"


def failure_counts(
    records: Sequence[Mapping[str, Any]],
    episodes: Mapping[str, Episode],
    *,
    protocol: str,
    seen: set[tuple[str, str]],
) -> list[dict[str, Any]]:
    """One row per prediction record that failed (counted and not exact): ``model``, ``split``,
    ``episode_id``, ``step_id`` and its ``kind`` (:func:`classify_failure`); ``episodes`` by id."""
    out = []
    for r in records:
        if not r.get("counted", True) or r["exact"]:
            continue
        ep = episodes[r["episode_id"]]
        t = next(i for i, s in enumerate(ep.steps) if s.step_id == r["step_id"])
        pred = Action.from_dict(r["pred_action"]) if r.get("pred_action") else None
        kind = classify_failure(pred, ep, t, protocol=protocol, seen=seen)
        if kind is None:  # the record's protocol disagrees with ours: not a failure under ``protocol``
            continue
        out.append(
            {
                "model": r["model"],
                "split": r["split"],
                "episode_id": r["episode_id"],
                "step_id": r["step_id"],
                "kind": kind,
            }
        )
    return out


# ----------------------------------------------------------------------------- temporal judgement
@dataclass(frozen=True)
class TemporalPair:
    """Two steps ``i < j`` of one episode (``gap = j - i``); ``first_shown``: which of them is shown
    as ``A`` (``"earlier"`` or ``"later"``), so the right answer is ``A`` when it is the earlier."""

    episode: Episode
    i: int
    j: int
    first_shown: str

    @property
    def gap(self) -> int:
        return self.j - self.i

    @property
    def answer(self) -> str:
        return "A" if self.first_shown == "earlier" else "B"

    @property
    def shown(self) -> tuple[int, int]:
        return (self.i, self.j) if self.first_shown == "earlier" else (self.j, self.i)


def temporal_pairs(episodes: Sequence[Episode], gaps: Sequence[int], per_gap: int, *, seed: int) -> list[TemporalPair]:
    """Up to ``per_gap`` distinct pairs for each gap (from distinct episodes while they last, steps
    drawn uniformly), the shown order a fair coin; deterministic in ``seed``."""
    rng = random.Random(seed)
    out = []
    for gap in gaps:
        cands = [(ep, i) for ep in episodes for i in range(len(ep.steps) - gap)]
        rng.shuffle(cands)
        seen: set[str] = set()
        first, rest = [], []
        for ep, i in cands:  # one pair per episode first, then more from the same episodes
            (rest if ep.episode_id in seen else first).append((ep, i))
            seen.add(ep.episode_id)
        picked = (first + rest)[:per_gap]
        for ep, i in picked:
            out.append(TemporalPair(ep, i, i + gap, "earlier" if rng.random() < 0.5 else "later"))
    return out


def temporal_prompt(pair: TemporalPair, image_root: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The question of a pair: the goal, screenshot A and screenshot B, "which came first?"."""
    a, b = pair.shown
    root = Path(image_root)
    text = f"Task: {pair.episode.instruction}\nBoth screenshots come from one attempt at this task. Screenshot A:"
    content = [
        {"type": "text", "text": text},
        {"type": "image"},
        {"type": "text", "text": "\nScreenshot B:"},
        {"type": "image"},
        {"type": "text", "text": "\nWhich screenshot was taken first? Answer A or B."},
    ]
    images = [str(root / pair.episode.steps[a].screenshot), str(root / pair.episode.steps[b].screenshot)]
    return [{"role": "user", "content": content}], images


def judge_pairs(
    model: Any, processor: Any, pairs: Sequence[TemporalPair], image_root: str | Path, *, batch: int = 8
) -> list[float]:
    """1.0 where ``model`` gives the right answer a higher log-probability than the wrong one, 0.0
    where lower, 0.5 on a tie (module doc); one forward pass per (pair, answer), batched."""
    import torch

    from guirl.rl.logprobs import completion_logprobs, encode_samples

    tok = processor.tokenizer
    ids = {k: tuple(tok(k, add_special_tokens=False)["input_ids"]) for k in ("A", "B")}
    scores: list[float] = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        prompts = [temporal_prompt(p, image_root) for p in chunk]
        both = [q for q in prompts for _ in (0, 1)]
        comps = [ids[k] for _ in prompts for k in ("A", "B")]
        with torch.no_grad():
            enc = encode_samples(processor, both, comps, device=getattr(model, "device", None))
            lp, _ = completion_logprobs(model, enc)
        total = (lp * enc["completion_mask"]).sum(-1).view(len(chunk), 2)
        for p, (la, lb) in zip(chunk, total.tolist()):
            right, wrong = (la, lb) if p.answer == "A" else (lb, la)
            scores.append(1.0 if right > wrong else 0.0 if right < wrong else 0.5)
    return scores


_DONE = re.compile(r"(\d+)\s*/\s*(\d+)\s+subgoals done")


def state_judge(pairs: Sequence[TemporalPair]) -> list[float]:
    """The pairs judged from the annotated task states (module doc): the step with more subgoals
    met is the later one; a tie (or no annotation) is a coin flip, scored 0.5."""
    out = []
    for p in pairs:
        got = []
        for k in (p.i, p.j):
            m = _DONE.search(p.episode.steps[k].progress_summary or "")
            got.append(int(m.group(1)) if m else None)
        out.append(0.5 if None in got or got[0] == got[1] else float(got[0] < got[1]))  # type: ignore[operator]
    return out
