"""Memory kept in the reasoning (AndroidLong App. C.1, Table 6): the model writes, in the chain of
thought of every step, a short memory of the items it has already processed, and the next step reads
it back from the history; one call per step, no second model.

**Format.** The step's output is the run's output format with its reasoning block holding the memory:
``<think>Memory: Ann; Bob</think>`` then the action (``ccpo``: ``<action>{...}</action>``), ``Memory:
none`` when nothing is processed yet. :func:`write_step` writes it, :func:`read_step` parses the
action (the format's parser) and the memory (:func:`parse_memory`), so that
``read_step(write_step(a, m)) == (project(a), m)`` for any action the format expresses and any items
without ``;`` or line breaks (``tests/test_androidlong.py``).

**Memory from the expert's trajectories** (:func:`memory_items`): MiniGUI's scripted expert states
its intention at every step; an intention that names an item (the last parenthesised part: "Check
the city of contact 2 of 4 (Bob)" -> ``Bob``, "Mark every unfinished note as done ('Milk')" ->
``Milk``) works on that item, and an item is processed once the intention has moved past it. The
memory of step ``t`` is the processed items in order; the most recent ``MAX_ITEMS`` are kept (a short
memory). Steps whose intentions name no item (every category but the long loops) carry an empty
memory.

**SFT records** (:func:`memory_records`): every training step of the expert, its completion the
action written with the memory (or without, ``memory=False``: the paired no-memory data), the
history entries the earlier steps' outputs written the same way, so the model learns to read its
last memory and write the next one.

**Agent** (:class:`MemoryAgent`): a policy that plays with its memory as per-episode state: the
history it shows is the one the loop gives, each entry preceded by the memory the agent wrote at that
step, i.e. its own earlier outputs (online: :func:`guirl.rollout.play_online` re-writes parsed
actions without their reasoning, the agent puts its memory back; offline: the ground-truth actions
with the agent's memories). Its ``info`` records the memory of every step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action, ParseResult
from guirl.data.schema import Episode
from guirl.prompts import PromptSpec, build_prompt, format_context
from guirl.rollout.agents import AgentStep, PolicyAgent, Turn
from guirl.rollout.policy import Policy

__all__ = [
    "MAX_ITEMS",
    "MEMORY_PREFIX",
    "MemoryAgent",
    "memory_items",
    "memory_records",
    "memory_thought",
    "parse_memory",
    "read_step",
    "step_item",
    "write_step",
]

#: How a memory starts inside the reasoning block.
MEMORY_PREFIX = "Memory:"
#: The memory keeps the most recent processed items (a short memory).
MAX_ITEMS = 4
_EMPTY = "none"
_SEP = "; "
_ITEM = re.compile(r"\(([^()]*)\)\s*$")


def _clean(item: str) -> str:
    item = str(item).strip()
    if not item or ";" in item or "\n" in item or item == _EMPTY:
        raise ValueError(f"memory item {item!r}: items are non-empty, without ';' or line breaks, and not {_EMPTY!r}")
    return item


def memory_thought(items: Sequence[str]) -> str:
    """The reasoning text of a memory: ``"Memory: a; b"`` (``"Memory: none"`` when empty)."""
    return f"{MEMORY_PREFIX} {_SEP.join(_clean(i) for i in items) if items else _EMPTY}"


def parse_memory(thought: str | None) -> tuple[str, ...] | None:
    """The items of a reasoning text written by :func:`memory_thought` (``()`` for ``none``), or
    ``None`` when it holds no memory."""
    if thought is None:
        return None
    text = thought.strip()
    if not text.startswith(MEMORY_PREFIX):
        return None
    body = text[len(MEMORY_PREFIX) :].strip()
    if body == _EMPTY or not body:
        return ()
    return tuple(p.strip() for p in body.split(";") if p.strip())


def write_step(action: Action, memory: Sequence[str] | None, output_format: str, ctx: FormatContext) -> str:
    """``action`` in ``output_format`` with the memory as its reasoning (``None``: no reasoning, the
    no-memory model's output)."""
    fmt = get_format(output_format)
    if memory is not None and not fmt.has_thought:
        raise ValueError(f"format {output_format!r} has no reasoning block to hold a memory")
    return fmt.format(action, ctx, thought=None if memory is None else memory_thought(memory))


def read_step(text: str, output_format: str, ctx: FormatContext) -> tuple[ParseResult, tuple[str, ...] | None]:
    """The parsed action of a step's output and its memory (``None`` when it wrote none)."""
    parsed = get_format(output_format).parse(text, ctx)
    thought = parsed.thought
    if thought is None:  # a failed parse keeps no thought: look for the block in the raw text
        m = re.search(r"<think(?:ing)?>(.*?)</think(?:ing)?>", text, re.DOTALL)
        thought = m.group(1) if m else None
    return parsed, parse_memory(thought)


def step_item(intention: str) -> str | None:
    """The item an expert intention works on: its last parenthesised part, quotes stripped."""
    m = _ITEM.search(intention or "")
    if not m:
        return None
    item = m.group(1).strip().strip("'\"").strip()
    if not item or ";" in item or "\n" in item or item == _EMPTY:
        return None
    return item


def memory_items(episode: Episode, max_items: int = MAX_ITEMS) -> list[tuple[str, ...]]:
    """The memory of every step of an expert episode (module doc): at step ``t``, the items already
    processed, in order, the last ``max_items``. The item an intention names (:func:`step_item`)
    stays the current one through the steps whose intentions name none; it is processed when a step
    names another item (that step's memory has it) or when the episode stops (the terminate step's
    memory has every item)."""
    from guirl.actions.types import ActionType

    out: list[tuple[str, ...]] = []
    done: list[str] = []
    current: str | None = None
    for step in episode.steps:
        item = step_item(step.intention)
        if item is not None and item != current:
            if current is not None and current not in done:
                done.append(current)
            current = item
        if step.action.type is ActionType.TERMINATE and current is not None:
            if current not in done:
                done.append(current)
            current = None
        out.append(tuple(done[-max_items:]))
    return out


def memory_records(
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    memory: bool,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """SFT records of every step of ``episodes`` (:mod:`guirl.train.data` layout; module doc): the
    completion and the history entries written with the memory (``memory``) or without it, the
    prompt otherwise as :func:`guirl.prompts.episode_step_prompt` builds it. Metadata: ``episode_id``,
    ``step_id``, ``history``, ``action_type``, ``memory`` (the completion's items)."""
    from guirl.actions.coords import resized_size

    root = str(image_root).rstrip("/")

    def path(rel: str) -> str:
        return f"{root}/{rel}" if root else rel

    out: list[dict[str, Any]] = []
    for ep in episodes:
        mems = memory_items(ep)
        texts = [
            write_step(
                s.action,
                mems[k] if memory else None,
                spec.output_format,
                format_context(s.screen_size, min_pixels, max_pixels),
            )
            for k, s in enumerate(ep.steps)
        ]
        for t, step in enumerate(ep.steps):
            history = [(texts[k], path(ep.steps[k].screenshot)) for k in range(t)]
            resolution = resized_size(*step.screen_size, min_pixels=min_pixels, max_pixels=max_pixels)
            messages, images = build_prompt(
                ep.instruction,
                history,
                path(step.screenshot),
                spec,
                step.low_level_instruction or None,
                resolution=resolution,
            )
            out.append(
                {
                    "prompt": messages,
                    "completion": [{"role": "assistant", "content": [{"type": "text", "text": texts[t]}]}],
                    "images": images,
                    "episode_id": ep.episode_id,
                    "step_id": step.step_id,
                    "history": spec.tag,
                    "action_type": step.action.type.value,
                    "memory": list(mems[t]) if memory else [],
                }
            )
    return out


class MemoryAgent(PolicyAgent):
    """A :class:`~guirl.rollout.Policy` that carries its memory in its reasoning (module doc); an
    :class:`~guirl.rollout.Agent` of ``spec.output_format``. ``max_items``: the memory kept."""

    def __init__(
        self, policy: Policy, spec: PromptSpec, *, min_pixels: int, max_pixels: int, max_items: int = MAX_ITEMS
    ) -> None:
        super().__init__(policy, spec, min_pixels=min_pixels, max_pixels=max_pixels)
        self.max_items = int(max_items)
        self.memories: dict[str, list[tuple[str, ...]]] = {}

    def reset(self, keys: Sequence[str]) -> None:
        for k in keys:
            self.memories[k] = []

    def history(self, turn: Turn) -> list[tuple[str, Any]]:
        """The loop's history with the agent's memories in the reasoning of its past steps (module doc)."""
        mems = self.memories.get(turn.key, [])
        out = []
        for k, (text, image) in enumerate(turn.history):
            if k < len(mems) and "<think" not in text:
                text = f"<think>{memory_thought(mems[k])}</think>\n{text}"
            out.append((text, image))
        return out

    def step(self, turn: Turn, text: str) -> AgentStep:
        """The answer with the memory it wrote (kept for the episode's next steps)."""
        ctx = format_context(turn.screen_size, self.min_pixels, self.max_pixels)
        _, mem = read_step(text, self.output_format, ctx)
        items = tuple(m for m in (mem or ()) if "\n" not in m and m != _EMPTY)[-self.max_items :]
        self.memories.setdefault(turn.key, []).append(items)
        return AgentStep(text, {"memory": list(items), "wrote_memory": mem is not None})
