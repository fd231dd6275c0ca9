"""Offline episodes: a policy acts on recorded trajectories (the screens are the recorded ones).

Two loops:

* :func:`step_prompts`: every step of recorded episodes with its **ground-truth** history (the
  annotated earlier actions), the prompts of step-level evaluation and SFT. The steps are
  independent, so one batched :meth:`Policy.complete` call answers all of them.
* :func:`rollout_recorded`: a multi-turn rollout over recorded episodes where the history is
  built from what the policy did. At step ``t`` of every running episode the policy answers one
  prompt with ``n`` completions (they share the prompt, hence the history); two hooks then
  decide what later prompts see:

  - ``decide(rollout, t, completions, parsed) -> Decision``: the history entry this step adds
    (the policy's own action, the annotated action instead, or nothing) and whether the episode
    stops after this step. Patching a mismatch with the annotated action up to a budget, then
    stopping, is a ``decide`` hook; :func:`keep_policy_action` (the default) keeps the first
    completion's action and never stops; :func:`follow_annotation` always shows the annotated
    action (the ground-truth history of :func:`step_prompts`).
  - ``history_builder(rollout, t) -> [(text, image), ...]``: the history pairs shown at step
    ``t`` (oldest first; :func:`guirl.prompts.build_prompt` keeps the last ``spec.n_history``).
    The default shows every entry as recorded; a hook can rewrite texts or replace the images
    (e.g. crops around coordinates that earlier steps' completions agree on, computed from
    ``rollout.steps[k].parsed``).

  All episodes advance in lockstep: round ``t`` is one ``complete`` call over the episodes
  still running, with seed ``derive_seed(seed, t)``. To sample ``N`` independent trajectories
  of one episode, pass it ``N`` times with ``n=1``; to let ``N`` completions share one history,
  pass it once with ``n=N``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionError
from guirl.actions.formats import get_format
from guirl.actions.types import ParseResult
from guirl.data.schema import Episode
from guirl.prompts import PromptSpec, action_text, build_prompt, episode_step_prompt, format_context
from guirl.rollout.online import UNPARSABLE_HISTORY_CHARS
from guirl.rollout.policy import Completion, Policy, Prompt, derive_seed

__all__ = [
    "Decision",
    "EpisodeRollout",
    "HistoryBuilder",
    "HistoryEntry",
    "Decide",
    "StepOutcome",
    "StepPrompt",
    "annotated_entry",
    "follow_annotation",
    "keep_policy_action",
    "policy_entry",
    "recorded_history",
    "rollout_recorded",
    "step_prompts",
]


# ----------------------------------------------------------------------------- ground-truth history
@dataclass(frozen=True)
class StepPrompt:
    """Step ``t`` of ``episode`` with its ground-truth-history ``prompt`` and the annotated
    action written in the output format (``target``, the SFT completion)."""

    episode: Episode
    t: int
    prompt: Prompt
    target: str


# ----------------------------------------------------------------------------- own-history rollouts
@dataclass(frozen=True)
class HistoryEntry:
    """One earlier step as later prompts show it: ``text`` (the action in the output format, or
    raw output), ``image`` (the screenshot it was taken on: a path or an image), ``action`` (the
    action, ``None`` for an unparsable output) and ``source`` (``"policy"`` or ``"annotation"``)."""

    text: str
    image: Any
    action: Action | None = None
    source: str = "policy"


@dataclass(frozen=True)
class Decision:
    """What one step of a rollout leaves behind: the history ``entry`` (``None``: later prompts
    do not show this step), whether the episode ``stop``\\ s after it, and a ``kind`` label kept
    with the step (e.g. ``"keep"``, ``"patch"``, ``"stop"``)."""

    entry: HistoryEntry | None
    stop: bool = False
    kind: str = "keep"


@dataclass(frozen=True)
class StepOutcome:
    """Step ``t`` of a rollout: the ``prompt`` shown, the ``n`` ``completions`` (token ids
    included), each one ``parsed`` with the output format, and the hook's ``decision``."""

    t: int
    prompt: Prompt
    completions: tuple[Completion, ...]
    parsed: tuple[ParseResult, ...]
    decision: Decision


@dataclass
class EpisodeRollout:
    """A rollout over one recorded ``episode``: the ``history`` so far (what ``decide`` added),
    the ``steps`` taken, and ``stopped`` (a ``decide`` hook said stop; no later step is taken).
    ``image_root`` is the folder the episode's screenshot paths are relative to."""

    episode: Episode
    image_root: str = ""
    history: list[HistoryEntry] = field(default_factory=list)
    steps: list[StepOutcome] = field(default_factory=list)
    stopped: bool = False

    @property
    def done(self) -> bool:
        """Stopped, or every recorded step taken."""
        return self.stopped or len(self.steps) >= len(self.episode.steps)

    def screenshot(self, t: int) -> str:
        """Path of recorded step ``t``'s screenshot (joined to ``image_root``)."""
        rel = self.episode.steps[t].screenshot
        return f"{self.image_root.rstrip('/')}/{rel}" if self.image_root else rel


#: ``history_builder(rollout, t)``: the ``(text, image)`` history pairs shown at step ``t``.
HistoryBuilder = Callable[[EpisodeRollout, int], Sequence[tuple[str, Any]]]
#: ``decide(rollout, t, completions, parsed)``: the :class:`Decision` of step ``t``.
Decide = Callable[[EpisodeRollout, int, Sequence[Completion], Sequence[ParseResult]], Decision]


def recorded_history(rollout: EpisodeRollout, t: int) -> list[tuple[str, Any]]:
    """Default history builder: every history entry as ``(text, image)``, oldest first."""
    return [(e.text, e.image) for e in rollout.history]


def _context(rollout: EpisodeRollout, t: int, min_pixels: int, max_pixels: int):
    return format_context(rollout.episode.steps[t].screen_size, min_pixels, max_pixels)


def _resolution(rollout: EpisodeRollout, t: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """``(width, height)`` of step ``t``'s screenshot as the model sees it (system prompts state it)."""
    sp = _context(rollout, t, min_pixels, max_pixels).space("resized")
    return (sp.width, sp.height)


def policy_entry(
    rollout: EpisodeRollout, t: int, completion: Completion, parsed: ParseResult, spec: PromptSpec, ctx: Any
) -> HistoryEntry:
    """The history entry of the policy's own output at step ``t``: the parsed action re-written
    in the output format (the raw text when the format cannot write it), or the raw output's
    first characters when it did not parse (as online play shows it)."""
    image = rollout.screenshot(t)
    if not parsed.ok:
        return HistoryEntry(completion.text.strip()[:UNPARSABLE_HISTORY_CHARS], image, None, "policy")
    fmt = get_format(spec.output_format)
    text = action_text(parsed.action, spec, ctx) if fmt.can_format(parsed.action) else completion.text
    return HistoryEntry(text, image, parsed.action, "policy")


def annotated_entry(rollout: EpisodeRollout, t: int, spec: PromptSpec, ctx: Any) -> HistoryEntry:
    """The history entry of the annotated action of step ``t`` (what a patch puts in)."""
    ep = rollout.episode
    action = ep.steps[t].action
    try:
        text = action_text(action, spec, ctx)
    except ActionError as e:
        raise ValueError(f"episode {ep.episode_id} step {t}: {e}; pick an output format that can express it") from e
    return HistoryEntry(text, rollout.screenshot(t), action, "annotation")


def step_prompts(
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    min_pixels: int,
    max_pixels: int,
    image_root: str | Path = "",
    max_steps: int | None = None,
    history_builder: HistoryBuilder | None = None,
) -> list[StepPrompt]:
    """Every step of ``episodes`` in episode order, prompted with its ground-truth history.

    ``max_steps`` keeps the first steps in that order (whole episodes first), for CPU budgets.
    Images are paths joined to ``image_root`` (the split's folder). ``history_builder`` (the
    hook of :func:`rollout_recorded`) may rewrite the history, e.g. crop its images: it gets an
    :class:`EpisodeRollout` whose ``history`` holds the annotated steps before ``t`` (and no
    ``steps``); without it the prompts are :func:`guirl.prompts.episode_step_prompt`'s.
    """
    items = [(ep, t) for ep in episodes for t in range(len(ep.steps))]
    if max_steps is not None:
        items = items[:max_steps]
    out = []
    for ep, t in items:
        if history_builder is None:
            messages, images, target = episode_step_prompt(
                ep, t, spec, min_pixels=min_pixels, max_pixels=max_pixels, image_root=str(image_root)
            )
            out.append(StepPrompt(ep, t, (messages, images), target))
            continue
        roll = EpisodeRollout(ep, str(image_root))
        roll.history = [annotated_entry(roll, k, spec, _context(roll, k, min_pixels, max_pixels)) for k in range(t)]
        history = list(history_builder(roll, t))
        step = ep.steps[t]
        res = _resolution(roll, t, min_pixels, max_pixels)
        prompt = build_prompt(
            ep.instruction, history, roll.screenshot(t), spec, step.low_level_instruction or None, resolution=res
        )
        target = annotated_entry(roll, t, spec, _context(roll, t, min_pixels, max_pixels)).text
        out.append(StepPrompt(ep, t, prompt, target))
    return out


def keep_policy_action(spec: PromptSpec, *, min_pixels: int, max_pixels: int) -> Decide:
    """Decision hook: the first completion's output goes into the history; never stops."""

    def decide(rollout: EpisodeRollout, t: int, completions: Sequence[Completion], parsed: Sequence[ParseResult]):
        ctx = _context(rollout, t, min_pixels, max_pixels)
        return Decision(policy_entry(rollout, t, completions[0], parsed[0], spec, ctx), stop=False, kind="keep")

    return decide


def follow_annotation(spec: PromptSpec, *, min_pixels: int, max_pixels: int) -> Decide:
    """Decision hook: the annotated action goes into the history whatever the policy did (the
    ground-truth history of :func:`step_prompts`); never stops."""

    def decide(rollout: EpisodeRollout, t: int, completions: Sequence[Completion], parsed: Sequence[ParseResult]):
        ctx = _context(rollout, t, min_pixels, max_pixels)
        return Decision(annotated_entry(rollout, t, spec, ctx), stop=False, kind="annotation")

    return decide


def rollout_recorded(
    policy: Policy,
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    min_pixels: int,
    max_pixels: int,
    image_root: str | Path = "",
    n: int = 1,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    decide: Decide | None = None,
    history_builder: HistoryBuilder | None = None,
    max_steps: int | None = None,
    progress: bool = False,
) -> list[EpisodeRollout]:
    """Multi-turn rollouts of ``policy`` over recorded ``episodes`` (module docstring).

    Args:
        policy: answers ``n`` completions per running episode and step.
        episodes: recorded episodes (the same one may appear several times).
        spec: output format and history setting; the step instruction is shown when
            ``spec.use_step_instruction``.
        min_pixels, max_pixels: the processor's resize bounds (coordinates the model sees).
        image_root: folder the screenshot paths are relative to.
        n, do_sample, temperature, top_p: decoding; step ``t`` uses ``derive_seed(seed, t)``.
        decide: the step decision hook (default :func:`keep_policy_action`).
        history_builder: the history hook (default :func:`recorded_history`).
        max_steps: at most this many steps per episode (``None``: all recorded steps).

    Returns:
        One :class:`EpisodeRollout` per input episode, in input order.
    """
    from tqdm.auto import tqdm

    decide = decide or keep_policy_action(spec, min_pixels=min_pixels, max_pixels=max_pixels)
    history_builder = history_builder or recorded_history
    fmt = get_format(spec.output_format)
    rollouts = [EpisodeRollout(ep, str(image_root)) for ep in episodes]
    horizon = max((len(ep.steps) for ep in episodes), default=0)
    if max_steps is not None:
        horizon = min(horizon, max_steps)
    for t in tqdm(range(horizon), desc="rollout", disable=not progress):
        live = [r for r in rollouts if not r.done]
        if not live:
            break
        prompts = []
        for r in live:
            step = r.episode.steps[t]
            history = list(history_builder(r, t))
            res = _resolution(r, t, min_pixels, max_pixels)
            prompts.append(
                build_prompt(
                    r.episode.instruction,
                    history,
                    r.screenshot(t),
                    spec,
                    step.low_level_instruction or None,
                    resolution=res,
                )
            )
        answers = policy.complete(
            prompts, n=n, do_sample=do_sample, temperature=temperature, top_p=top_p, seed=derive_seed(seed, t)
        )
        if len(answers) != len(prompts) or any(len(a) != n for a in answers):
            raise ValueError(
                f"policy {policy!r} returned {[len(a) for a in answers]} completions for {len(prompts)} prompts x n={n}"
            )
        for r, prompt, comps in zip(live, prompts, answers):
            ctx = _context(r, t, min_pixels, max_pixels)
            parsed = tuple(fmt.parse(c.text, ctx) for c in comps)
            decision = decide(r, t, comps, parsed)
            r.steps.append(StepOutcome(t, prompt, tuple(comps), parsed, decision))
            if decision.entry is not None:
                r.history.append(decision.entry)
            if decision.stop:
                r.stopped = True
    return rollouts
