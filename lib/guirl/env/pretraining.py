"""Pretraining samples for the tiny base model, generated from MiniGUI and checked against it.

A pretrained VLM arrives at every paper's first stage able to read a screen, point at a named
element, copy text from the screen or from the goal, say where it is, and write structured
output. The tiny model starts from random weights, so the repository teaches it these skills on
MiniGUI first (in the spirit of AgentCPM-GUI Sec. 2.3, Stage I: OCR of a marked region and widget
localisation, mixed with other data). Every sample's answer is derived from the simulator's own
state and from what the renderer drew (:func:`guirl.env.render.render_screen_spans`), and
:func:`verify_sample` re-derives it, so no sample can teach a wrong answer.

Skills (:data:`SKILLS`); points and boxes are normalised, written into questions and answers
in the pixels of the image the model sees when records are built (:mod:`guirl.train.data`):

=================  =========================================================  ==================
skill              question                                                   answer
=================  =========================================================  ==================
``read_point``     the text drawn at a point                                  the drawn string
``read_box``       the text drawn inside an element's box                     its strings, joined
``ground_label``   where the element whose label reads X is                   a click (a format)
``copy_screen``    the value shown for a label (a phone under a name, a       the value
                   field's content, a switch's state)
``copy_goal``      a slot of the goal (screenshot in the prompt)              the slot's text
``copy_text``      a slot of a made-up request built from the world's names,  the slot's text
                   numbers, places and titles (text only: copying practice)
``app_screen``     which app and which screen is open                         ``App, screen``
``goal_step``      the goal plus the screen of an expert ``type`` or          the action
                   ``answer`` step: write that action                         (a format)
``action_syntax``  an action described in words (text only)                   the action
                                                                              (a format)
=================  =========================================================  ==================

The probes (:data:`PROBES`) score four of them on held-out screens and goals
(:func:`score_sample`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from guirl.actions import Action, ActionType
from guirl.actions.formats import FormatContext, get_format
from guirl.env.apps import APP_TITLES, Screen, Widget
from guirl.env.core import MiniGUIEnv
from guirl.env.expert import solve
from guirl.env.render import TextSpan, render_screen_spans
from guirl.env.tasks import Task

SKILLS: tuple[str, ...] = (
    "read_point",
    "read_box",
    "ground_label",
    "copy_screen",
    "copy_goal",
    "copy_text",
    "app_screen",
    "goal_step",
    "action_syntax",
)
#: The capability probes of the base model, each scored exactly (:func:`score_sample`).
PROBES: tuple[str, ...] = ("read_point", "ground_label", "copy_screen", "copy_goal")
#: The action formats the notebooks train (01/02/05/06/08: ccpo; 03: coepg_grounder for points,
#: coepg_planner for the rest; 04: ces_executor; 07: agentcpm, androidlong), with the weight a
#: point / action answer is written in each.
ACTION_FORMATS: dict[str, float] = {
    "ccpo": 0.4,
    "agentcpm": 0.15,
    "androidlong": 0.15,
    "ces_executor": 0.15,
    "coepg_grounder": 0.15,
}
#: Human names of the screens (``Screen.name``) for ``app_screen`` answers.
SCREEN_NAMES: dict[str, str] = {
    "home": "home screen",
    "list": "list",
    "inbox": "inbox",
    "thread": "conversation",
    "compose": "new message",
    "form": "form",
    "detail": "details",
    "main": "main page",
    "recents": "recent apps",
}
#: Goal slots (task parameter keys) and how a question names them.
SLOT_NAMES: dict[str, str] = {
    "name": "contact name",
    "new_name": "new name",
    "phone": "phone number",
    "new_phone": "new phone number",
    "city": "city",
    "new_city": "new city",
    "title": "title",
    "new_title": "new title",
    "day": "day",
    "new_day": "new day",
    "time": "time",
    "new_time": "new time",
    "peer": "contact",
    "body": "message text",
    "text": "text",
    "other": "other contact",
}
_READ_KINDS = frozenset({"label", "value", "placeholder"})
#: Made-up requests for ``copy_text``: each names its slots (keys of :data:`SLOT_NAMES`); none is a
#: task template's instruction, so no sample quotes a real goal.
COPY_CARRIERS: tuple[str, ...] = (
    "Call {name} at {phone} before noon.",
    "Meet {name} in {city} on {day} at {time}.",
    "Tell {peer} '{body}' after lunch.",
    "Put '{title}' on the list for {day}.",
    "Remind me of '{title}' at {time} on {day}.",
    "{name} moved to {city}; the number is now {phone}.",
    "Forward '{body}' from {peer} to {other}.",
    "Check whether {name} still lives in {city}.",
    "On {day}, ask {peer} about '{title}'.",
    "Save {phone} as the number of {name}.",
    "Text {other} that {name} arrives at {time}.",
    "Find the note '{title}' and share it with {peer}.",
)
#: World values a carrier slot draws from.
_SLOT_SOURCES = ("name", "phone", "city", "day", "time", "peer", "body", "title", "other")
_PNG_KW: dict[str, Any] = {"format": "PNG", "optimize": False, "compress_level": 6}
#: Bump when a change of the generator changes the samples (notebook 09 rebuilds its data folder).
DATA_VERSION = 3


class SampleError(ValueError):
    """A sample whose answer does not follow from the screen or the goal it names."""


@dataclass(frozen=True)
class Sample:
    """One pretraining (or probe) sample.

    ``question``: the user text; ``{point}`` / ``{box}`` placeholders are filled with ``point`` /
    ``box`` (normalised) in the pixels of the image the model sees. ``answer``: the expected
    text, or ``None`` when the answer is ``action`` (``Action.to_dict()``) written in ``format``.
    ``target_box``: the normalised box a predicted point must fall in (``ground_label``).
    ``image``: the screenshot path relative to the data folder (``None``: a text-only sample);
    ``screen_key``: the sha256 of the screenshot's pixels (held-out checks); ``goal``: the task
    instruction the question quotes. ``source``: ``{"task_id", "step", "element_id", "slot"}``
    where they apply.
    """

    sample_id: str
    skill: str
    question: str
    answer: str | None = None
    action: dict[str, Any] | None = None
    format: str | None = None
    point: tuple[float, float] | None = None
    box: tuple[float, float, float, float] | None = None
    target_box: tuple[float, float, float, float] | None = None
    image: str | None = None
    screen_key: str | None = None
    goal: str | None = None
    source: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "skill": self.skill,
            "question": self.question,
            "answer": self.answer,
            "action": self.action,
            "format": self.format,
            "point": list(self.point) if self.point is not None else None,
            "box": list(self.box) if self.box is not None else None,
            "target_box": list(self.target_box) if self.target_box is not None else None,
            "image": self.image,
            "screen_key": self.screen_key,
            "goal": self.goal,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        tup = lambda v: tuple(v) if v is not None else None  # noqa: E731
        if d.get("skill") not in SKILLS:
            raise ValueError(f"sample {d.get('sample_id')!r}: unknown skill {d.get('skill')!r}; known: {SKILLS}")
        return cls(
            sample_id=str(d["sample_id"]),
            skill=d["skill"],
            question=str(d["question"]),
            answer=d.get("answer"),
            action=d.get("action"),
            format=d.get("format"),
            point=tup(d.get("point")),  # type: ignore[arg-type]
            box=tup(d.get("box")),  # type: ignore[arg-type]
            target_box=tup(d.get("target_box")),  # type: ignore[arg-type]
            image=d.get("image"),
            screen_key=d.get("screen_key"),
            goal=d.get("goal"),
            source=dict(d.get("source") or {}),
        )


@dataclass
class Visit:
    """One screen an expert trajectory passed through: what is drawn, and the step taken on it.

    ``spans``: :func:`~guirl.env.render.render_screen_spans` of ``screen`` (pixels of an image of
    ``size``); ``action``: the expert's action on it; ``instruction``: its low-level instruction."""

    task: Task
    step: int
    screen: Screen
    image: Image.Image
    spans: list[TextSpan]
    action: Action
    instruction: str
    size: tuple[int, int]

    @property
    def key(self) -> str:
        """sha256 of the screenshot's pixels (and size): equal screens have equal keys."""
        return screen_key(self.image)


def screen_key(image: Image.Image) -> str:
    """sha256 over the image size and RGB bytes (PNG encoding does not enter)."""
    h = hashlib.sha256(f"{image.size[0]}x{image.size[1]}:".encode())
    h.update(image.convert("RGB").tobytes())
    return h.hexdigest()


def visits(tasks: Iterable[Task], width: int = 280, height: int = 504, expert_seed: int = 0) -> Iterator[Visit]:
    """Every screen of every task's expert trajectory, in order, with its drawn text."""
    env = MiniGUIEnv(width=width, height=height, render=False)
    for task in tasks:
        traj = solve(task, render=False, seed=expert_seed, width=width, height=height)
        env.reset(options={"task": task})
        for i, s in enumerate(traj.steps):
            image, spans = render_screen_spans(env.screen(), width, height)
            yield Visit(task, i, env.screen(), image, spans, s.action, s.low_level_instruction, (width, height))
            env.step(s.action)


# ----------------------------------------------------------------------------------- helpers
def _norm_box(box: Sequence[int], size: tuple[int, int]) -> tuple[float, float, float, float]:
    w, h = size
    return (round(box[0] / w, 4), round(box[1] / h, 4), round(box[2] / w, 4), round(box[3] / h, 4))


def _center(box: Sequence[float]) -> tuple[float, float]:
    return (round((box[0] + box[2]) / 2, 4), round((box[1] + box[3]) / 2, 4))


def _inside(p: Sequence[float], box: Sequence[float]) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


def _widget(v: Visit, element_id: str) -> Widget:
    w = v.screen.find(element_id)
    if w is None:
        raise SampleError(f"{v.task.task_id} step {v.step}: no element {element_id!r} on screen {v.screen.name!r}")
    return w


def _readable(v: Visit) -> list[TextSpan]:
    """Spans a reader can be asked about: whole strings of labels, values and placeholders."""
    return [s for s in v.spans if s.kind in _READ_KINDS and not s.truncated and s.text.strip()]


def _drawn_string(w: Widget, kind: str) -> str:
    """What the widget draws for a span of ``kind`` (the state's side of the check)."""
    if kind == "label":
        return w.label
    if kind == "value":
        return w.text
    if kind == "placeholder":
        return f"Enter {w.label.lower()}"
    raise SampleError(f"no state string for a {kind!r} span")


def pick_format(rng: random.Random, action: Action, formats: dict[str, float] = ACTION_FORMATS) -> str | None:
    """A format (by weight) that can express ``action`` (``coepg_grounder`` writes clicks only;
    non-click steps of Co-EPG are the planner's ``coepg_planner``); ``None`` if none can."""
    names = list(formats)
    weights = [formats[n] for n in names]
    ctx = FormatContext(width=280, height=504, min_pixels=3136, max_pixels=141120)
    for _ in range(8):
        name = rng.choices(names, weights)[0]
        if name == "coepg_grounder" and action.type is not ActionType.CLICK:
            name = "coepg_planner"
        try:
            get_format(name).format(action, ctx)
        except Exception:  # noqa: BLE001 - inexpressible in this format: draw another
            continue
        return name
    return None


def describe(action: Action, point_text: str | None = None) -> str:
    """The action in words (``action_syntax`` questions); ``point_text``: how the point is written."""
    t = action.type
    if t in (ActionType.CLICK, ActionType.LONG_PRESS):
        verb = "tap" if t is ActionType.CLICK else "long-press"
        return f"{verb} at {point_text or '{point}'}"
    if t is ActionType.TYPE:
        return f"type the text '{action.text}'"
    if t is ActionType.ANSWER:
        return f"answer '{action.text}'"
    if t is ActionType.OPEN_APP:
        return f"open the app {action.text}"
    if t is ActionType.PRESS:
        return f"press the {action.key} key"
    if t is ActionType.SCROLL:
        return f"scroll {action.direction} ({action.convention} direction)"
    if t is ActionType.WAIT:
        return "wait"
    if t is ActionType.TERMINATE:
        return f"end the task ({action.status})"
    raise SampleError(f"no description for action type {t.value!r}")


# ----------------------------------------------------------------------------------- skills
# Each maker lists every sample of its skill that the screen allows (in a fixed order); formats of
# action answers are drawn later, for the samples chosen (:func:`visit_samples`).
def _read_point(v: Visit) -> list[Sample]:
    return [
        Sample(
            "",
            "read_point",
            "What text is written at {point}?",
            answer=s.text,
            point=_center(_norm_box(s.box, v.size)),
            source={"element_id": s.element_id, "kind": s.kind},
        )
        for s in _readable(v)
    ]


def _read_box(v: Visit) -> list[Sample]:
    by_el: dict[str, list[TextSpan]] = {}
    for s in v.spans:
        if s.kind in _READ_KINDS:
            by_el.setdefault(s.element_id, []).append(s)
    return [
        Sample(
            "",
            "read_box",
            "What text is inside the box {box}?",
            answer=" ".join(s.text for s in spans),
            box=tuple(round(x, 4) for x in _widget(v, e).box),  # type: ignore[arg-type]
            source={"element_id": e},
        )
        for e, spans in by_el.items()
        if not any(s.truncated for s in spans)
    ]


def _counts(v: Visit) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in v.spans:
        counts[s.text] = counts.get(s.text, 0) + 1
    return counts


def _ground_label(v: Visit) -> list[Sample]:
    counts = _counts(v)
    out = []
    for s in _readable(v):
        w = _widget(v, s.element_id)
        if s.kind == "label" and counts[s.text] == 1 and w.clickable:
            out.append(
                Sample(
                    "",
                    "ground_label",
                    f"Where is the element labelled '{s.text}'? Tap it.",
                    action=Action("click", point=_center(w.box)).to_dict(),
                    target_box=tuple(round(x, 4) for x in w.box),  # type: ignore[arg-type]
                    source={"element_id": w.element_id, "label": s.text},
                )
            )
    return out


def _copy_screen(v: Visit) -> list[Sample]:
    counts = _counts(v)
    values = {s.element_id: s for s in _readable(v) if s.kind == "value"}
    labels = {s.element_id: s for s in _readable(v) if s.kind == "label"}
    pairs = [(labels[e], values[e]) for e in values if e in labels and counts[labels[e].text] == 1]
    toggles = [w for w in v.screen.widgets if w.role == "toggle" and w.element_id in labels and counts[w.label] == 1]
    return [
        Sample(
            "",
            "copy_screen",
            f"What is shown for '{lab.text}'?",
            answer=val.text,
            source={"element_id": lab.element_id},
        )
        for lab, val in pairs
    ] + [
        Sample(
            "",
            "copy_screen",
            f"Is '{w.label}' on or off?",
            answer="on" if w.style.get("on") else "off",
            source={"element_id": w.element_id},
        )
        for w in toggles
    ]


def goal_slots(task: Task) -> list[tuple[str, str]]:
    """``(slot key, value)`` of the task's parameters that the instruction quotes verbatim."""
    return [
        (k, str(val))
        for k, val in sorted(task.params.items())
        if k in SLOT_NAMES and isinstance(val, str) and val and val in task.instruction
    ]


def _copy_goal(v: Visit) -> list[Sample]:
    return [
        Sample(
            "",
            "copy_goal",
            f"Goal: {v.task.instruction}\nWhat is the {SLOT_NAMES[k]} in the goal?",
            answer=val,
            goal=v.task.instruction,
            source={"slot": k},
        )
        for k, val in goal_slots(v.task)
    ]


def copy_text_values(v: Visit) -> dict[str, str]:
    """The values the ``copy_text`` requests of a visit use: drawn from its task's world (names,
    phones and cities of contacts, note and event titles, message bodies, days and times), with a
    random state of its own per (task, step), so they are the same however the samples are mixed."""
    from guirl.env.state import PhoneState
    from guirl.env.tasks import DAY_NAMES, TIMES

    w = PhoneState.from_dict(v.task.initial_state)
    rng = random.Random(f"copy-text-{v.task.task_id}-{v.step}")
    a, b = rng.sample(w.contacts, 2) if len(w.contacts) >= 2 else (w.contacts[0], w.contacts[0])
    titles = [n.title for n in w.notes] + [e.title for e in w.events]
    bodies = [m.body for m in w.messages]
    return {
        "name": a.name,
        "phone": a.phone,
        "city": a.city,
        "day": rng.choice(DAY_NAMES),
        "time": rng.choice(TIMES),
        "peer": b.name,
        "other": rng.choice([c.name for c in w.contacts if c.name not in (a.name, b.name)] or [b.name]),
        "body": rng.choice(bodies) if bodies else "See you",
        "title": rng.choice(titles) if titles else "Plan trip",
    }


def _copy_text(v: Visit) -> list[Sample]:
    values = copy_text_values(v)
    out = []
    for i, carrier in enumerate(COPY_CARRIERS):
        text = carrier.format(**values)
        text = text[0].upper() + text[1:]
        for key in dict.fromkeys(k for k in _SLOT_SOURCES if "{" + k + "}" in carrier):
            if text.count(values[key]) != 1:  # the slot must be one unambiguous span of the request
                continue
            out.append(
                Sample(
                    "",
                    "copy_text",
                    f"Request: {text}\nWhat is the {SLOT_NAMES[key]} in the request?",
                    answer=values[key],
                    source={"slot": key, "carrier": i},
                )
            )
    return out


def _app_screen(v: Visit) -> list[Sample]:
    app = APP_TITLES.get(v.screen.app, v.screen.app.title())
    return [
        Sample(
            "",
            "app_screen",
            "Which app is open, and which screen?",
            answer=f"{app}, {SCREEN_NAMES.get(v.screen.name, v.screen.name)}",
        )
    ]


def _goal_step(v: Visit) -> list[Sample]:
    if v.action.type not in (ActionType.TYPE, ActionType.ANSWER):
        return []
    return [
        Sample(
            "",
            "goal_step",
            f"Goal: {v.task.instruction}\nWrite the next action.",
            action=v.action.to_dict(),
            goal=v.task.instruction,
            source={"step": v.step},
        )
    ]


def _action_syntax(v: Visit) -> list[Sample]:
    a = v.action
    point = a.point if a.type in (ActionType.CLICK, ActionType.LONG_PRESS) else None
    return [
        Sample(
            "",
            "action_syntax",
            f"Write this action: {describe(a)}.",
            action=a.to_dict(),
            point=point,
            source={"step": v.step},
        )
    ]


_MAKERS = {
    "read_point": _read_point,
    "read_box": _read_box,
    "ground_label": _ground_label,
    "copy_screen": _copy_screen,
    "copy_goal": _copy_goal,
    "copy_text": _copy_text,
    "app_screen": _app_screen,
    "goal_step": _goal_step,
    "action_syntax": _action_syntax,
}
#: Skills that show no screenshot.
TEXT_ONLY: frozenset[str] = frozenset({"action_syntax", "copy_text"})
#: One sample of every skill per screen (where the screen allows one).
EVEN_MIX: dict[str, float] = dict.fromkeys(SKILLS, 1.0)
#: The tiny recipe's mix: reading, grounding and the copy skills (with text-only copies) weighted up,
#: naming the screen and the action syntax (learnt quickly on an even mix) weighted down.
TINY_MIX: dict[str, float] = {
    "read_point": 3.0,
    "read_box": 0.5,
    "ground_label": 2.0,
    "copy_screen": 2.0,
    "copy_goal": 2.0,
    "copy_text": 2.0,
    "app_screen": 0.25,
    "goal_step": 1.0,
    "action_syntax": 0.5,
}


def candidates(v: Visit, skill: str) -> list[Sample]:
    """Every sample of ``skill`` the screen allows, unchecked and without ids or formats."""
    if skill not in _MAKERS:
        raise ValueError(f"unknown skill {skill!r}; known: {SKILLS}")
    return _MAKERS[skill](v)


def visit_samples(v: Visit, rng: random.Random, mix: Mapping[str, float] = EVEN_MIX) -> list[Sample]:
    """Samples of one screen: ``mix[skill]`` per skill on average (its integer part always, one
    more with the probability of its fraction), drawn without repetition from :func:`candidates`
    (fewer where the screen allows fewer); an action answer gets a format that can write it
    (:func:`pick_format`). Each sample is checked with :func:`verify_sample`; ``sample_id`` is
    ``<task>-<step>-<skill>-<j>``."""
    out = []
    for skill, rate in mix.items():
        if rate < 0:
            raise ValueError(f"mix[{skill!r}] = {rate}: a number of samples per screen is >= 0")
        k = int(rate) + (1 if rng.random() < rate - int(rate) else 0)
        pool = candidates(v, skill)
        for j, s in enumerate(rng.sample(pool, min(k, len(pool)))):
            fmt = None
            if s.action is not None:
                fmt = pick_format(rng, Action.from_dict(s.action))
                if fmt is None:
                    continue
            s = dataclasses.replace(
                s,
                sample_id=f"{v.task.task_id}-{v.step:02d}-{skill}-{j}",
                format=fmt,
                source={"task_id": v.task.task_id, "step": v.step, **s.source},
            )
            verify_sample(s, v)
            out.append(s)
    return out


# ----------------------------------------------------------------------------------- checks
def verify_sample(s: Sample, v: Visit) -> None:
    """Re-derive ``s``'s answer from the visit's screen state, drawn text and task; raise
    :class:`SampleError` naming the sample when they disagree."""

    def bad(msg: str) -> SampleError:
        return SampleError(f"sample {s.sample_id or s.skill}: {msg}")

    if s.skill == "read_point":
        assert s.point is not None
        hits = [sp for sp in v.spans if _inside(s.point, _norm_box(sp.box, v.size))]
        if len(hits) != 1 or hits[0].text != s.answer:
            raise bad(f"the point {s.point} covers {[h.text for h in hits]}, not exactly {s.answer!r}")
        if _drawn_string(_widget(v, hits[0].element_id), hits[0].kind) != s.answer:
            raise bad(f"{s.answer!r} is not what element {hits[0].element_id!r} holds")
    elif s.skill == "read_box":
        assert s.box is not None
        inside = [sp for sp in v.spans if sp.kind in _READ_KINDS and sp.element_id == s.source.get("element_id")]
        want = " ".join(sp.text for sp in inside)
        w = _widget(v, str(s.source.get("element_id")))
        if want != s.answer or tuple(round(x, 4) for x in w.box) != s.box:
            raise bad(f"the box holds {want!r}, not {s.answer!r}")
        for sp in inside:
            if _drawn_string(w, sp.kind) != sp.text:
                raise bad(f"{sp.text!r} is not what element {w.element_id!r} holds")
    elif s.skill == "ground_label":
        assert s.action is not None and s.target_box is not None
        a = Action.from_dict(s.action)
        w = _widget(v, str(s.source.get("element_id")))
        label = str(s.source.get("label"))
        if (
            f"'{label}'" not in s.question
            or w.label != label
            or a.point is None
            or not _inside(a.point, w.box)
            or not w.clickable
        ):
            raise bad(f"the click {a.point} does not land on the clickable element labelled {label!r}")
        if v.screen.hit(a.point) is not w:
            raise bad(f"the click {a.point} hits another element than {w.element_id!r}")
        if sum(sp.text == label for sp in v.spans) != 1:
            raise bad(f"{label!r} is drawn more than once")
    elif s.skill == "copy_screen":
        w = _widget(v, str(s.source.get("element_id")))
        if s.question.startswith("Is "):
            want = "on" if w.style.get("on") else "off"
            if w.role != "toggle" or want != s.answer or w.text != s.answer:
                raise bad(f"switch {w.label!r} is {want}, not {s.answer!r}")
        else:
            drawn = [sp.text for sp in v.spans if sp.element_id == w.element_id and sp.kind == "value"]
            if drawn != [s.answer] or w.text != s.answer:
                raise bad(f"element {w.element_id!r} shows {drawn}, not {s.answer!r}")
    elif s.skill == "copy_goal":
        k = str(s.source.get("slot"))
        if str(v.task.params.get(k)) != s.answer or not s.answer or s.answer not in v.task.instruction:
            raise bad(f"slot {k!r} of the goal is {v.task.params.get(k)!r}, not {s.answer!r}")
    elif s.skill == "copy_text":
        values = copy_text_values(v)
        key = str(s.source.get("slot"))
        carrier = COPY_CARRIERS[int(s.source.get("carrier", -1))]
        text = carrier.format(**values)
        text = text[0].upper() + text[1:]
        if values.get(key) != s.answer or f"Request: {text}\n" not in s.question or text.count(s.answer or "") != 1:
            raise bad(f"slot {key!r} of the request is {values.get(key)!r}, not {s.answer!r}")
        if text in {v.task.instruction}:
            raise bad("a copy_text request quotes the task's own goal")
    elif s.skill == "app_screen":
        app = APP_TITLES.get(v.screen.app, v.screen.app.title())
        if s.answer != f"{app}, {SCREEN_NAMES.get(v.screen.name, v.screen.name)}":
            raise bad(f"the screen is {app} / {v.screen.name}, not {s.answer!r}")
    elif s.skill in ("goal_step", "action_syntax"):
        if s.action != v.action.to_dict():
            raise bad(f"the expert's action is {v.action.to_dict()}, not {s.action}")
    else:
        raise bad(f"unknown skill {s.skill!r}")


# ----------------------------------------------------------------------------------- scoring
def score_sample(s: Sample, output: str, ctx: FormatContext) -> bool:
    """Whether a model ``output`` answers ``s`` exactly: the same text after stripping outer
    whitespace (reading and copying skills), a point inside ``target_box`` (``ground_label``,
    parsed in ``s.format``), the same action (``goal_step`` / ``action_syntax``: type and
    arguments equal, a point within the target element)."""
    if s.action is None:
        return output.strip() == (s.answer or "").strip()
    res = get_format(str(s.format)).parse(output, ctx)
    if not res.ok or res.action is None:
        return False
    got, want = res.action, Action.from_dict(s.action)
    if got.type is not want.type:
        return False
    if want.type in (ActionType.CLICK, ActionType.LONG_PRESS):
        if got.point is None:
            return False
        if s.target_box is not None:
            return _inside(got.point, s.target_box)
        assert want.point is not None
        return abs(got.point[0] - want.point[0]) <= 0.02 and abs(got.point[1] - want.point[1]) <= 0.02
    return (got.text or "") == (want.text or "") and got.key == want.key and got.direction == want.direction


# ----------------------------------------------------------------------------------- data sets
def generate_samples(
    tasks: Sequence[Task],
    *,
    image_dir: Path | None,
    seed: int,
    width: int = 280,
    height: int = 504,
    mix: Mapping[str, float] = EVEN_MIX,
    exclude_screens: set[str] | frozenset[str] = frozenset(),
    exclude_goals: set[str] | frozenset[str] = frozenset(),
    goal_templates: set[str] | None = None,
    progress: bool = False,
) -> list[Sample]:
    """Samples of the skills of ``mix`` (samples per screen, :func:`visit_samples`) from the expert
    trajectories of ``tasks``.

    Screenshots are written once per distinct screen to ``image_dir/<key[:16]>.png`` (``None``:
    not written; samples keep ``image=None``, e.g. to count). Screens whose key is in
    ``exclude_screens`` and goals in ``exclude_goals`` are skipped (held-out probes); goal skills
    (``copy_goal``, ``goal_step``) use only tasks whose template is in ``goal_templates`` (``None``:
    all). Deterministic in the arguments.
    """
    from tqdm.auto import tqdm

    rng = random.Random(f"pretraining-{seed}")
    goal_skills = {"copy_goal", "goal_step"}
    out: list[Sample] = []
    written: set[str] = set()
    if image_dir is not None:
        image_dir.mkdir(parents=True, exist_ok=True)
    for v in tqdm(visits(tasks, width, height, expert_seed=seed), desc="pretraining samples", disable=not progress):
        key = v.key
        if key in exclude_screens or v.task.instruction in exclude_goals:
            continue
        chosen = {
            k: r
            for k, r in mix.items()
            if k not in goal_skills or goal_templates is None or v.task.template_id in goal_templates
        }
        for s in visit_samples(v, rng, chosen):
            image = None
            if s.skill not in TEXT_ONLY and image_dir is not None:
                name = f"{key[:16]}.png"
                if key not in written:
                    v.image.save(image_dir / name, **_PNG_KW)
                    written.add(key)
                image = f"{image_dir.name}/{name}"
            out.append(Sample(**{**s.__dict__, "image": image, "screen_key": None if s.skill in TEXT_ONLY else key}))
    return out


def write_samples(path: Path, samples: Iterable[Sample]) -> Path:
    """JSONL of samples, written to a temporary name and renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s.to_dict(), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def read_samples(path: Path) -> list[Sample]:
    """Samples of a :func:`write_samples` file; a bad line raises ``ValueError`` naming file and line."""
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(Sample.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{i}: {e}") from e
    return out


__all__ = [
    "ACTION_FORMATS",
    "PROBES",
    "SKILLS",
    "SLOT_NAMES",
    "Sample",
    "SampleError",
    "TEXT_ONLY",
    "EVEN_MIX",
    "TINY_MIX",
    "candidates",
    "Visit",
    "COPY_CARRIERS",
    "copy_text_values",
    "describe",
    "generate_samples",
    "goal_slots",
    "pick_format",
    "read_samples",
    "score_sample",
    "screen_key",
    "verify_sample",
    "visit_samples",
    "visits",
    "write_samples",
]
