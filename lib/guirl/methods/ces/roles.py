"""CES's three roles as prompts and parsers (CES Sec. 4.2, eqs. 1-3; prompts of App. C).

* Coordinator ``pi_c(q, m^{t-1}, s^t) -> l^t``: :func:`coordinator_prompt` (the App. C prompt as
  one user turn, the screenshot where the prompt says ``<image>``); its output is
  ``<think>..</think><answer>instruction</answer>`` (:func:`parse_ces_coordinator`,
  :func:`instruction_of`).
* Executor ``pi_e(l^t, s^t) -> u^t``: frozen; :func:`executor_prompt` is App. C's executor prompt
  (output format ``ces_executor``, registered in :mod:`guirl.actions.formats`); an executor of the
  repository that follows "goal + step instruction" prompts takes ``l^t`` in its step-instruction
  slot instead (:class:`guirl.methods.ces.agent.ExecutorPrompting`).
* State Tracker ``pi_s(q, m^{t-1}, u^t) -> m^t``: a text-only language model;
  :func:`tracker_prompt` (App. C, plain string content: it has no screenshot), its output the new
  task state (:func:`parse_ces_state_tracker`, :func:`state_of`). :func:`executor_report` is the
  ``u^t`` it reads.

The parsers never raise: a failure is a :class:`TextResult` with a reason. The reward's format term
(eq. 22, :func:`guirl.methods.ces.reward.ces_format_ok`) is stricter than these parsers: it needs
the whole text to be the two tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import guirl.actions.formats._base as _base
from guirl.actions.formats._base import tag
from guirl.prompts import render

__all__ = [
    "IMAGE_MARK",
    "TextResult",
    "parse_think_answer",
    "parse_ces_coordinator",
    "parse_ces_state_tracker",
    "format_think_answer",
    "instruction_of",
    "state_of",
    "user_turn",
    "coordinator_prompt",
    "executor_prompt",
    "tracker_prompt",
    "executor_report",
]

#: Where App. C's prompts put the screenshot.
IMAGE_MARK = "<image>"


@dataclass(frozen=True)
class TextResult:
    """Parsed ``<think>..</think><answer>..</answer>`` text output: ``value`` or a ``reason``."""

    value: str | None
    reason: str = ""
    thought: str | None = None
    raw: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


def parse_think_answer(text: Any, role: str = "ces") -> TextResult:
    """Parse a Coordinator / State Tracker output. Never raises.

    Fails (``value=None``) when there is no ``<answer>`` block or the answer is empty.
    """
    try:
        if not isinstance(text, str):
            return TextResult(None, f"{role}: output must be str, got {type(text).__name__}")
        ans = tag(text, "answer")
        thought = tag(text, "think")
        if ans is None:
            return TextResult(None, f"{role}: no <answer>...</answer> block", thought, text)
        if not ans:
            return TextResult(None, f"{role}: empty <answer>", thought, text)
        return TextResult(ans, "", thought, text)
    except Exception as e:  # noqa: BLE001 - the same policy as ActionFormat.parse (guirl.actions.formats._base)
        _base.logger.warning("%s: internal parser error %s: %s", role, type(e).__name__, e)
        if _base.RAISE_INTERNAL_ERRORS:
            raise
        return TextResult(None, f"{role}: unexpected {type(e).__name__}: {e}", None, "")


def parse_ces_coordinator(text: Any) -> TextResult:
    """Coordinator output -> the next atomic instruction for the Executor."""
    return parse_think_answer(text, "ces_coordinator")


def parse_ces_state_tracker(text: Any) -> TextResult:
    """State Tracker output -> the compressed task state."""
    return parse_think_answer(text, "ces_state_tracker")


def format_think_answer(answer: str, thought: str | None = None) -> str:
    """Inverse of :func:`parse_think_answer` (``answer`` must be non-empty after strip)."""
    if not answer.strip():
        raise ValueError("answer must be non-empty")
    head = f"<think>{thought}</think>" if thought is not None else ""
    return f"{head}<answer>{answer}</answer>"


def _loose(text: str, limit: int) -> str:
    """The text without any tag pair or stray tag, whitespace collapsed, at most ``limit`` chars."""
    import re

    body = re.sub(r"<think>.*?</think>", " ", text, flags=re.DOTALL)
    body = re.sub(r"</?(think|answer)>", " ", body)
    return " ".join(body.split())[:limit]


def instruction_of(text: str, limit: int = 300) -> str:
    """The instruction the Executor gets from a Coordinator output: its ``<answer>`` when it
    parses, else the text without tags (first ``limit`` characters; an untrained Coordinator's
    text still reaches the Executor, as a deployed loop would pass it on). May be empty."""
    r = parse_ces_coordinator(text)
    return r.value if r.ok else _loose(text if isinstance(text, str) else "", limit)  # type: ignore[return-value]


def state_of(text: str, previous: str, limit: int = 500) -> str:
    """The task state a State Tracker output carries: its ``<answer>`` when it parses, else the text
    without tags (first ``limit`` characters), else ``previous`` (an empty output keeps the
    memory it had)."""
    r = parse_ces_state_tracker(text)
    if r.ok:
        return r.value  # type: ignore[return-value]
    return _loose(text if isinstance(text, str) else "", limit) or previous


def user_turn(text: str, images: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """One user message from a prompt text whose :data:`IMAGE_MARK` marks are the ``images`` in
    order (as many marks as images): ``(messages, images)``."""
    parts = text.split(IMAGE_MARK)
    if len(parts) != len(images) + 1:
        raise ValueError(f"the prompt has {len(parts) - 1} {IMAGE_MARK} marks for {len(images)} images")
    content: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if part:
            content.append({"type": "text", "text": part})
        if i < len(images):
            content.append({"type": "image"})
    return [{"role": "user", "content": content}], list(images)


def coordinator_prompt(goal: str, state: str, screenshot: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """The Coordinator's turn (CES App. C; eq. 1): high-level task, current state, screenshot."""
    return user_turn(render("ces_coordinator", high_level_instruction=goal, current_state=state), [screenshot])


def executor_prompt(instruction: str, screenshot: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """The Executor's turn (CES App. C; eq. 2): the atomic instruction and the screenshot."""
    return user_turn(render("ces_executor", instruction=instruction), [screenshot])


def tracker_prompt(goal: str, state: str, report: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The State Tracker's turn (CES App. C; eq. 3): high-level instruction, the Executor's latest
    output, the previous state; plain string content and no image (a text-only model)."""
    text = render("ces_state_tracker", high_level_instruction=goal, executor_output=report, current_state=state)
    return [{"role": "user", "content": text}], []


def executor_report(output: str, instruction: str | None, *, with_instruction: bool) -> str:
    """``u^t`` as the State Tracker reads it: the Executor's output text, preceded by the
    instruction it executed when ``with_instruction`` (``ces.tracker_input:
    instruction_and_output``, for an Executor that writes no thought restating it)."""
    out = output.strip()
    if with_instruction:
        return f"Instruction: {instruction or '(none)'}\nAction: {out}"
    return out
