"""Chat messages for a GUI agent step: instruction, nA / nAO history, current screenshot.

A prompt is built from plain values (instruction, previous actions with their screenshots,
current screenshot), so the same builder serves offline SFT/evaluation (history from the
ground-truth episode) and online play (history from the agent's own actions).

History modes (CCPO section 4, Table 2): ``nA`` gives the last ``n`` actions as text only;
``nAO`` gives the last ``n`` actions together with the screenshots they were taken on. The
current screenshot is always the last image. Images are referenced by ``{"type": "image"}``
placeholders in the order of the returned image list (the TRL / Qwen2.5-VL convention).

The completion is the ground-truth action written in the configured output format
(:mod:`guirl.actions.formats`), in the coordinate space that format declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guirl.actions import Action, ActionError
from guirl.actions.formats import FormatContext, get_format
from guirl.data.schema import Episode

HistoryMode = Literal["nA", "nAO"]

#: One system prompt per output format. They describe the action space in the words of the
#: paper that uses the format (CCPO appendix A.9 for ``ccpo``; the Qwen2.5-VL ``mobile_use``
#: tool for ``qwen_mobile_use``; AgentCPM-GUI's compact JSON schema for ``agentcpm``).
SYSTEM_PROMPTS: dict[str, str] = {
    "ccpo": (
        "You are a GUI agent operating a phone. Given the task, the previous actions and the "
        "current screenshot, output the next action as <action>{json}</action>. Actions: "
        'click {"coordinate":[x,y]}, long_press {"coordinate":[x,y]}, swipe '
        '{"coordinate":[x,y],"coordinate2":[x,y]}, type {"text":...}, system_button '
        '{"button":"Back|Home|Enter|Menu"}, open {"text":app}, wait, answer {"text":...}, '
        'terminate {"status":"success|failure"}. Coordinates are pixels of the image you see.'
    ),
    "qwen_mobile_use": (
        "You are a helpful assistant. You may call the mobile_use function to interact with a "
        "phone screen: key, click, long_press, swipe, type, system_button, open, wait, answer, "
        'terminate. Reply with <tool_call>{"name": "mobile_use", "arguments": {...}}</tool_call>.'
    ),
    "agentcpm": (
        'You are a phone agent. Output one compact JSON object: {"POINT":[x,y]} to tap '
        '(x,y in 0-1000), add "duration" (ms) to long press, {"POINT":[x,y],"to":dir} to '
        'swipe, {"TYPE":text}, {"PRESS":"BACK|HOME|ENTER|APPSELECT"}, {"duration":ms} to '
        'wait, {"STATUS":"finish|impossible"} to stop.'
    ),
}


@dataclass(frozen=True)
class PromptSpec:
    """How a step is shown to the model.

    ``n_history``: how many previous actions (0..5) are shown. ``history_mode``: ``"nA"`` or
    ``"nAO"``. ``use_step_instruction``: add the step's low-level instruction (the AndroidControl
    "Low" setting); the online evaluator has none and passes ``None``.
    """

    output_format: str = "ccpo"
    n_history: int = 1
    history_mode: HistoryMode = "nAO"
    use_step_instruction: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.n_history <= 5:
            raise ValueError(f"n_history must be in 0..5 (CCPO uses 1..5), got {self.n_history}")
        if self.history_mode not in ("nA", "nAO"):
            raise ValueError(f"history_mode must be 'nA' or 'nAO', got {self.history_mode!r}")
        if self.output_format not in SYSTEM_PROMPTS:
            raise ValueError(
                f"output_format {self.output_format!r} has no system prompt; choose one of {sorted(SYSTEM_PROMPTS)}"
            )

    @property
    def tag(self) -> str:
        """Short name such as ``"3AO"`` or ``"1A"`` used in tables."""
        return f"{self.n_history}{'AO' if self.history_mode == 'nAO' else 'A'}"


def format_context(screen_size: tuple[int, int], min_pixels: int, max_pixels: int) -> FormatContext:
    """Coordinate context of a screenshot of ``(width, height)`` px as the model sees it."""
    return FormatContext(width=screen_size[0], height=screen_size[1], min_pixels=min_pixels, max_pixels=max_pixels)


def action_text(action: Action, spec: PromptSpec, ctx: FormatContext) -> str:
    """The action written in ``spec.output_format`` (the SFT completion / history entry)."""
    return get_format(spec.output_format).format(action, ctx)


def build_prompt(
    instruction: str,
    history: Sequence[tuple[str, Any]],
    current_image: Any,
    spec: PromptSpec,
    step_instruction: str | None = None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Messages and images for one decision.

    Args:
        instruction: the high-level task.
        history: all previous ``(action_text, screenshot)`` pairs, oldest first; only the last
            ``spec.n_history`` are shown, and their screenshots only in ``nAO`` mode (a ``None``
            screenshot is shown as text only, e.g. one CASC removed).
        current_image: the current screenshot (any object the processor accepts, or a path).
        step_instruction: the low-level instruction, shown when ``spec.use_step_instruction``.

    Returns:
        ``(messages, images)``: a system and a user message with structured content, and the
        images in placeholder order (history screenshots oldest first, current last).
    """
    shown = list(history)[-spec.n_history :] if spec.n_history else []
    offset = len(history) - len(shown)
    content: list[dict[str, Any]] = [{"type": "text", "text": f"Task: {instruction}\n"}]
    images: list[Any] = []
    if shown:
        content.append({"type": "text", "text": "Previous actions:\n"})
    for i, (text, image) in enumerate(shown):
        content.append({"type": "text", "text": f"Step {offset + i + 1}: "})
        if spec.history_mode == "nAO" and image is not None:
            content.append({"type": "image"})
            images.append(image)
        content.append({"type": "text", "text": f"{text}\n"})
    content.append({"type": "text", "text": "Current screen:"})
    content.append({"type": "image"})
    images.append(current_image)
    if spec.use_step_instruction and step_instruction:
        # last, right before the answer: the shortest path from instruction to action
        content.append({"type": "text", "text": f"\nInstruction for this step: {step_instruction}"})
    messages = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPTS[spec.output_format]}]},
        {"role": "user", "content": content},
    ]
    return messages, images


def episode_step_prompt(
    episode: Episode,
    t: int,
    spec: PromptSpec,
    *,
    min_pixels: int,
    max_pixels: int,
    image_root: str = "",
) -> tuple[list[dict[str, Any]], list[str], str]:
    """Prompt for step ``t`` of a recorded episode, with its ground-truth history.

    Returns ``(messages, image_paths, completion_text)``; image paths are joined to
    ``image_root`` (the dataset folder), and the completion is step ``t``'s action.
    """
    if not 0 <= t < len(episode.steps):
        raise IndexError(f"episode {episode.episode_id} has {len(episode.steps)} steps, asked for step {t}")

    def path(rel: str) -> str:
        return f"{image_root.rstrip('/')}/{rel}" if image_root else rel

    def written(i: int) -> str:
        s = episode.steps[i]
        try:
            return action_text(s.action, spec, format_context(s.screen_size, min_pixels, max_pixels))
        except ActionError as e:
            raise ValueError(
                f"episode {episode.episode_id} step {i}: {e}; pick an sft.output_format that can express it "
                "(ccpo and qwen_mobile_use cover every MiniGUI action)"
            ) from e

    history = [(written(i), path(episode.steps[i].screenshot)) for i in range(t)]
    step = episode.steps[t]
    messages, images = build_prompt(
        episode.instruction, history, path(step.screenshot), spec, step.low_level_instruction or None
    )
    return messages, images, written(t)
