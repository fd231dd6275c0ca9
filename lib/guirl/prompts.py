"""Chat messages for a GUI agent step (instruction, nA / nAO history, current screenshot), and the
papers' prompts as data.

**Prompts.** The prompts the five papers train and evaluate with are files of the repository,
``guirl/assets/prompts/<name>.txt``, registered in :data:`PROMPTS` by name with their paper, place,
role (``system`` or ``user``), the output format whose action words they allow, and their
placeholders (``{instruction}``, ``{history}``, ...; :func:`render` fills them, and a prompt may
include another one under a placeholder, e.g. Co-EPG Table 12 includes Tables 10 and 11). Each
paper's ``Method.system_prompt`` names one of them. :data:`DEFAULT_SYSTEM_PROMPT` gives the paper
prompt of each trainable output format (CCPO App. A.9 for ``ccpo``, the Qwen2.5-VL ``mobile_use``
prompt of AndroidLong F.2 for ``qwen_mobile_use``, AgentCPM-GUI App. C.2 for ``agentcpm``); the
former short paraphrases stay as ``<format>_short`` (the tiny profile trains with
``ccpo_short``: ``sft.system_prompt``); they are this project's, not a paper's
(``PromptInfo.from_paper``). A paper prompt's file keeps the paper's wording, typos included
(Co-EPG Table 11's "VISIBILE", CCPO's "Planing"); what the PDF extraction added (markdown bold
and heading marks, blank lines between lines, line breaks inside a JSON string) is left out, and
the paper's own placeholders are renamed to the ones :func:`render` fills (Co-EPG's ``{task
description}`` / ``{previous actions}`` -> ``{instruction}`` / ``{history}``). Each
``PromptInfo.note`` names any other change.

**Messages.** A prompt is built from plain values (instruction, previous actions with their
screenshots, current screenshot), so the same builder serves offline SFT/evaluation (history from
the ground-truth episode) and online play (history from the agent's own actions).

History modes (CCPO section 4, Table 2): ``nA`` gives the last ``n`` actions as text only;
``nAO`` gives the last ``n`` actions together with the screenshots they were taken on. The
current screenshot is always the last image. Images are referenced by ``{"type": "image"}``
placeholders in the order of the returned image list (the TRL / Qwen2.5-VL convention). The user
turn is this project's layout ("Task: ...", "Previous actions:", "Current screen:"; CCPO gives
none), or a paper's user template (``PromptSpec.user_template``: AgentCPM-GUI's
``<Question>..</Question>`` turn, Co-EPG's Table 12 layouts).

The completion is the ground-truth action written in the configured output format
(:mod:`guirl.actions.formats`), in the coordinate space that format declares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from guirl.actions import Action, ActionError
from guirl.actions.coords import resized_size
from guirl.actions.formats import FormatContext, get_format
from guirl.data.schema import Episode

HistoryMode = Literal["nA", "nAO"]

#: Folder of the prompt files, one ``<name>.txt`` per registered prompt.
PROMPTS_DIR = Path(__file__).resolve().parent / "assets" / "prompts"

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class PromptInfo:
    """One registered prompt (its text is ``PROMPTS_DIR / f"{name}.txt"``).

    ``paper`` / ``where``: its source (``"CCPO"``, ``"CCPO App. A.9"``); ``from_paper``: ``False``
    for this project's own prompts (``where`` then says ``not from a paper`` and what it
    paraphrases); ``role``: ``system`` or ``user``; ``output_format``: the format whose action words it allows (``None`` for prompts
    that ask for no action, e.g. the State Tracker's); ``placeholders``: the ``{name}`` fields
    :func:`render` fills; ``includes``: placeholders filled with another registered prompt.
    """

    name: str
    paper: str
    where: str
    role: Literal["system", "user"]
    output_format: str | None
    placeholders: tuple[str, ...] = ()
    includes: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    from_paper: bool = True

    @property
    def path(self) -> Path:
        return PROMPTS_DIR / f"{self.name}.txt"


#: Every prompt in the repository, by name.
PROMPTS: dict[str, PromptInfo] = {
    p.name: p
    for p in (
        PromptInfo(
            "ccpo",
            "CCPO",
            "CCPO App. A.9",
            "system",
            "ccpo",
            note="the blank lines of the PDF extraction between lines removed",
        ),
        PromptInfo(
            "ccpo_short",
            "CCPO",
            "not from a paper: this project's short paraphrase of CCPO App. A.9 (no key, no examples)",
            "system",
            "ccpo",
            note="the tiny profile's prompt (CPU budget; the prompt of the tiny SFT runs before the paper prompts)",
            from_paper=False,
        ),
        PromptInfo(
            "qwen_mobile_use",
            "AndroidLong",
            "AndroidLong App. F.2 (the Qwen2.5-VL mobile_use prompt; AgentCPM-GUI B.1.1 shows the same tool)",
            "system",
            "qwen_mobile_use",
            placeholders=("width", "height"),
            note=(
                "{width}x{height}: the resized image size the model sees; the tool JSON made valid "
                "(the paper's text lacks the closing quote after `action=system_button` and ends the "
                "function with a stray `]`), its line breaks written as \\n escapes as in App. F.3"
            ),
        ),
        PromptInfo(
            "qwen_mobile_use_short",
            "AndroidLong",
            "not from a paper: this project's short paraphrase of AndroidLong App. F.2",
            "system",
            "qwen_mobile_use",
            from_paper=False,
        ),
        PromptInfo(
            "agentcpm",
            "AgentCPM-GUI",
            "AgentCPM-GUI App. C.2 (system prompt and schema)",
            "system",
            "agentcpm",
            note="the schema's extra closing brace in the paper's text dropped (the schema is valid JSON)",
        ),
        PromptInfo(
            "agentcpm_short",
            "AgentCPM-GUI",
            "not from a paper: this project's short English paraphrase of AgentCPM-GUI App. C.2",
            "system",
            "agentcpm",
            from_paper=False,
        ),
        PromptInfo(
            "agentcpm_user", "AgentCPM-GUI", "AgentCPM-GUI App. C.2 (user turn)", "user", "agentcpm", ("instruction",)
        ),
        PromptInfo("androidlong", "AndroidLong", "AndroidLong App. F.1 (proprietary models)", "system", "androidlong"),
        PromptInfo("coepg", "Co-EPG", "Co-EPG Table 12 (system role)", "system", "coepg_planner"),
        PromptInfo(
            "coepg_short",
            "Co-EPG",
            "not from a paper: this project's short paraphrase of Co-EPG Tables 10 and 12 (the planner's output, "
            "with the action words the coepg_planner writer writes)",
            "system",
            "coepg_planner",
            note="the tiny profile's planner prompt (CPU budget; Tables 10-12 are about 1,000 tokens)",
            from_paper=False,
        ),
        PromptInfo(
            "coepg_grounder",
            "Co-EPG",
            "not from a paper: the grounder's prompt (Co-EPG gives none; Fig. 8 shows its answer 'Coordinate: (x, y)')",
            "system",
            "coepg_grounder",
            note="the user turn is the screenshot and the plan (guirl.methods.coepg.prompts.grounder_prompt)",
            from_paper=False,
        ),
        PromptInfo(
            "coepg_mind2web",
            "Co-EPG",
            "Co-EPG Table 9 (Multimodal-Mind2Web)",
            "user",
            "coepg_planner",
            ("instruction", "history", "elements"),
        ),
        PromptInfo(
            "coepg_androidcontrol_general", "Co-EPG", "Co-EPG Table 10 (AndroidControl)", "user", "coepg_planner"
        ),
        PromptInfo("coepg_androidcontrol_guidelines", "Co-EPG", "Co-EPG Table 11 (AndroidControl)", "user", None),
        PromptInfo(
            "coepg_androidcontrol_high",
            "Co-EPG",
            "Co-EPG Table 12 (high-level prompt)",
            "user",
            "coepg_planner",
            ("instruction", "history"),
            {
                "general_instruction": "coepg_androidcontrol_general",
                "useful_guidelines": "coepg_androidcontrol_guidelines",
            },
        ),
        PromptInfo(
            "coepg_androidcontrol_low",
            "Co-EPG",
            "Co-EPG Table 12 (low-level prompt)",
            "user",
            "coepg_planner",
            ("instruction", "step_instruction", "history"),
            {
                "general_instruction": "coepg_androidcontrol_general",
                "useful_guidelines": "coepg_androidcontrol_guidelines",
            },
        ),
        PromptInfo(
            "coepg_verifier_addition",
            "Co-EPG",
            "Co-EPG Table 13 (data enhancement)",
            "user",
            "coepg_planner",
            ("action", "value", "target_bbox"),
        ),
        PromptInfo(
            "ces_coordinator",
            "CES",
            "CES App. C (Coordinator)",
            "user",
            None,
            ("high_level_instruction", "current_state"),
            note="<image> marks where the screenshot goes; the answer is a free-text instruction",
        ),
        PromptInfo(
            "ces_executor",
            "CES",
            "CES App. C (Executor)",
            "user",
            "ces_executor",
            ("instruction",),
            note="<image> marks where the screenshot goes",
        ),
        PromptInfo(
            "ces_state_tracker",
            "CES",
            "CES App. C (State Tracker)",
            "user",
            None,
            ("high_level_instruction", "executor_output", "current_state"),
        ),
    )
}

#: The paper prompt of each output format ``build_prompt`` can train (the system prompt of a
#: :class:`PromptSpec` that names none).
DEFAULT_SYSTEM_PROMPT: dict[str, str] = {"ccpo": "ccpo", "qwen_mobile_use": "qwen_mobile_use", "agentcpm": "agentcpm"}


def prompt_names() -> list[str]:
    """Every registered prompt name, sorted."""
    return sorted(PROMPTS)


def system_prompt_names() -> list[str]:
    """The registered system prompts (the names ``sft.system_prompt`` accepts), sorted."""
    return sorted(n for n, p in PROMPTS.items() if p.role == "system")


def get_prompt(name: str) -> PromptInfo:
    """The :class:`PromptInfo` called ``name``; ``KeyError`` naming the registered ones."""
    try:
        return PROMPTS[name]
    except KeyError:
        raise KeyError(f"unknown prompt {name!r}; registered prompts: {', '.join(prompt_names())}") from None


@cache
def prompt_text(name: str) -> str:
    """The raw text of prompt ``name`` (placeholders unfilled; the file's final newline removed)."""
    info = get_prompt(name)
    if not info.path.is_file():
        raise FileNotFoundError(f"{info.path}: the file of prompt {name!r} is missing")
    return info.path.read_text(encoding="utf-8").removesuffix("\n")


def render(name: str, **values: Any) -> str:
    """Prompt ``name`` with its included prompts and ``values`` filled in.

    Only the registered placeholders are replaced (a prompt's JSON braces stay as they are);
    a missing or an unknown value is a ``ValueError`` naming the prompt and the placeholder."""
    info = get_prompt(name)
    missing = [k for k in info.placeholders if k not in values]
    unknown = [k for k in values if k not in info.placeholders]
    if missing or unknown:
        raise ValueError(
            f"prompt {name!r} ({info.where}) takes {list(info.placeholders)}; "
            + (f"missing {missing}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"unknown {unknown}" if unknown else "")
        )
    text = prompt_text(name)
    for key, inner in info.includes.items():
        text = text.replace("{" + key + "}", render(inner))
    for key in info.placeholders:
        text = text.replace("{" + key + "}", str(values[key]))
    return text


#: The paper prompt of each trainable output format, as raw text (a prompt with placeholders
#: keeps them here; :func:`system_text` fills them).
SYSTEM_PROMPTS: dict[str, str] = {fmt: prompt_text(name) for fmt, name in DEFAULT_SYSTEM_PROMPT.items()}


@dataclass(frozen=True)
class PromptSpec:
    """How a step is shown to the model.

    ``n_history``: how many previous actions (0..5) are shown. ``history_mode``: ``"nA"`` or
    ``"nAO"``. ``use_step_instruction``: add the step's low-level instruction (the AndroidControl
    "Low" setting); the online evaluator has none and passes ``None``. ``system_prompt``: a
    registered system prompt (``None``: the format's paper prompt, :data:`DEFAULT_SYSTEM_PROMPT`).
    ``user_template``: a registered user prompt that lays out the user turn (``None``: this
    project's layout); it shows the history as text, so it needs an ``nA`` history.
    """

    output_format: str = "ccpo"
    n_history: int = 1
    history_mode: HistoryMode = "nAO"
    use_step_instruction: bool = False
    system_prompt: str | None = None
    user_template: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.n_history <= 5:
            raise ValueError(f"n_history must be in 0..5 (CCPO uses 1..5), got {self.n_history}")
        if self.history_mode not in ("nA", "nAO"):
            raise ValueError(f"history_mode must be 'nA' or 'nAO', got {self.history_mode!r}")
        if self.output_format not in SYSTEM_PROMPTS:
            raise ValueError(
                f"output_format {self.output_format!r} has no system prompt; choose one of {sorted(SYSTEM_PROMPTS)}"
            )
        for key, role in (("system_prompt", "system"), ("user_template", "user")):
            name = getattr(self, key)
            if name is None:
                continue
            info = get_prompt(name)
            if info.role != role:
                raise ValueError(f"{key} {name!r} is a {info.role} prompt ({info.where}); give a {role} prompt")
            if info.output_format not in (None, self.output_format):
                raise ValueError(
                    f"{key} {name!r} asks for the {info.output_format!r} format, not {self.output_format!r}"
                )
        if self.user_template is not None and self.history_mode == "nAO" and self.n_history > 0:
            raise ValueError(
                f"user_template {self.user_template!r} shows the history as text: use an nA history (e.g. 3A)"
            )

    @property
    def system_prompt_name(self) -> str:
        """The registered system prompt this spec uses."""
        return self.system_prompt or DEFAULT_SYSTEM_PROMPT[self.output_format]

    @property
    def tag(self) -> str:
        """Short name such as ``"3AO"`` or ``"1A"`` used in tables."""
        return f"{self.n_history}{'AO' if self.history_mode == 'nAO' else 'A'}"


def prompt_spec(cfg: Any, tag: str) -> PromptSpec:
    """The :class:`PromptSpec` a run config trains and evaluates with at history setting ``tag``
    (``"3AO"``: three previous actions with their screenshots, ``"1A"``: one, as text):
    ``sft.output_format``, ``sft.use_step_instruction`` and ``sft.system_prompt`` of ``cfg``
    (read as attributes; any object with an ``sft`` section of those fields works)."""
    if not re.fullmatch(r"[0-5](A|AO)", tag):
        raise ValueError(f"{tag!r} is not a history setting; use e.g. 1AO, 3AO or 2A")
    return PromptSpec(
        output_format=cfg.sft.output_format,
        n_history=int(tag[0]),
        history_mode="nAO" if tag.endswith("AO") else "nA",
        use_step_instruction=cfg.sft.use_step_instruction,
        system_prompt=cfg.sft.system_prompt,
    )


def system_text(spec: PromptSpec, resolution: tuple[int, int] | None = None) -> str:
    """The system prompt of ``spec``, its placeholders filled: ``resolution`` = ``(width,
    height)`` of the image the model sees (required by prompts that state it, such as the
    Qwen2.5-VL ``mobile_use`` prompt; a ``ValueError`` naming it otherwise)."""
    name = spec.system_prompt_name
    info = get_prompt(name)
    values: dict[str, Any] = {}
    if "width" in info.placeholders or "height" in info.placeholders:
        if resolution is None:
            raise ValueError(
                f"system prompt {name!r} ({info.where}) states the screen resolution: pass resolution=(width, height) "
                "of the resized image (guirl.actions.coords.resized_size with the model's pixel budget)"
            )
        values = {"width": int(resolution[0]), "height": int(resolution[1])}
    return render(name, **values)


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
    *,
    resolution: tuple[int, int] | None = None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Messages and images for one decision.

    Args:
        instruction: the high-level task.
        history: all previous ``(action_text, screenshot)`` pairs, oldest first; only the last
            ``spec.n_history`` are shown, and their screenshots only in ``nAO`` mode (a ``None``
            screenshot is shown as text only, e.g. one CASC removed).
        current_image: the current screenshot (any object the processor accepts, or a path).
        step_instruction: the low-level instruction, shown when ``spec.use_step_instruction``.
        resolution: ``(width, height)`` of the resized current image, for system prompts that
            state it (:func:`system_text`).

    Returns:
        ``(messages, images)``: a system and a user message with structured content, and the
        images in placeholder order (history screenshots oldest first, current last).
    """
    shown = list(history)[-spec.n_history :] if spec.n_history else []
    offset = len(history) - len(shown)
    system = {"role": "system", "content": [{"type": "text", "text": system_text(spec, resolution)}]}
    if spec.user_template is not None:
        text = _user_turn(spec, instruction, shown, offset, step_instruction)
        user = {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]}
        return [system, user], [current_image]
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
    return [system, {"role": "user", "content": content}], images


def _user_turn(
    spec: PromptSpec, instruction: str, shown: Sequence[tuple[str, Any]], offset: int, step_instruction: str | None
) -> str:
    """The user text of ``spec.user_template`` (history as ``Step k: action`` lines)."""
    name = spec.user_template
    assert name is not None
    info = get_prompt(name)
    values: dict[str, Any] = {"instruction": instruction}
    if "history" in info.placeholders:
        values["history"] = "\n".join(f"Step {offset + i + 1}: {text}" for i, (text, _) in enumerate(shown))
    elif shown:
        raise ValueError(f"user_template {name!r} ({info.where}) has no history: use a 0A history")
    wants_step = "step_instruction" in info.placeholders
    if spec.use_step_instruction != wants_step:
        raise ValueError(
            f"user_template {name!r} ({info.where}) "
            + ("needs" if wants_step else "has no place for")
            + " the step instruction: set use_step_instruction accordingly"
        )
    if wants_step:
        if not step_instruction:
            raise ValueError(f"user_template {name!r} needs a step instruction; this step has none")
        values["step_instruction"] = step_instruction
    return render(name, **values)


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
    resolution = resized_size(*step.screen_size, min_pixels=min_pixels, max_pixels=max_pixels)
    messages, images = build_prompt(
        episode.instruction,
        history,
        path(step.screenshot),
        spec,
        step.low_level_instruction or None,
        resolution=resolution,
    )
    return messages, images, written(t)
