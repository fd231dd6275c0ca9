"""Grounding pre-training samples from a converted data set's UI elements (AgentCPM-GUI Stage I).

AgentCPM-GUI Sec. 2.3 builds its grounding pre-training set from open Android corpora (AITZ among
them): every screenshot becomes either an OCR task (write the text shown in a marked region) or a
widget-localization task (locate a referenced UI element). :func:`grounding_samples` draws both
from the ``Step.elements`` the AndroidControl, AITZ, AMEX and Mind2Web loaders fill, as rows of
the schema of MiniGUI's ``grounding_train.jsonl`` (:func:`guirl.env.export.grounding_samples`):
``id``, ``image``, ``width``, ``height``, ``type``, ``question``, ``answer``, ``point``, ``box``,
``element_id``, ``episode_id``, ``step_id``, which :func:`guirl.train.data.grounding_records`
turns into training records. Two of CAGUI's three task types exist here (Sec. 3.1, Table 1):

* ``text_to_point`` (Text2Point, the widget-localization task): an element's text -> its box
  centre, a normalised point;
* ``box_to_text`` (Bbox2Text, the OCR task): an element's normalised box -> its text.

There is no ``function_to_point`` (Fun2Point): the public data sets carry no description of what
each element does (CAGUI's function descriptions were written by a 72B vision-language model).

Only elements whose text is non-empty and unique on their screen are asked about (a text shown
twice is a reference with no single answer), whose normalised box has an area, and at most
``per_screen`` per screen; which ones and which task each gets depend only on ``seed`` and the
screen's episode and step ids.
"""

from __future__ import annotations

import json
import posixpath
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from guirl.data.schema import Episode, Step, UIElement

__all__ = [
    "GROUNDING_FILE",
    "GROUNDING_TYPES",
    "grounding_samples",
    "referable_elements",
    "screen_samples",
    "write_grounding_rows",
]

#: The file a data folder holds its grounding rows in (MiniGUI's and a converted data set's).
GROUNDING_FILE = "grounding_train.jsonl"
#: Task types drawn from a public data set's elements (AgentCPM-GUI Table 1: Text2Point, Bbox2Text).
GROUNDING_TYPES: tuple[str, ...] = ("text_to_point", "box_to_text")
#: Decimals of a row's normalised box; its centre is written with one more (exact for the rounded box).
BOX_DECIMALS = 3
_QUESTIONS = ("Where is '{}'?", "Point to '{}' on the screen.", "Find the element '{}'.")


def _text_key(text: str) -> str:
    """The form two texts are compared in: whitespace collapsed, case folded."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def _rounded_box(box: Sequence[float]) -> list[float] | None:
    """``box`` (normalised ``x1, y1, x2, y2``) at :data:`BOX_DECIMALS` decimals, ``None`` when the
    rounded box has no area (nothing to mark or point into)."""
    b = [round(float(v), BOX_DECIMALS) for v in box]
    return b if b[2] > b[0] and b[3] > b[1] else None


def referable_elements(elements: Iterable[UIElement]) -> list[UIElement]:
    """The elements of one screen a grounding sample can ask about, in screen order: a non-empty
    ``text`` that no other element of the screen shows (compared whitespace-collapsed and
    case-folded) and a box with an area at :data:`BOX_DECIMALS` decimals."""
    els = list(elements)
    counts: dict[str, int] = {}
    for e in els:
        key = _text_key(e.text)
        if key:
            counts[key] = counts.get(key, 0) + 1
    return [e for e in els if counts.get(_text_key(e.text)) == 1 and _rounded_box(e.box) is not None]


def screen_samples(
    step: Step, episode_id: str, image: str, rng: random.Random, per_screen: int
) -> list[dict[str, Any]]:
    """Up to ``per_screen`` grounding rows of one screen (``image``: its path as the row stores it):
    that many of :func:`referable_elements` drawn by ``rng``, the task types alternating from a
    type ``rng`` picks. Points and boxes are normalised to the screenshot; ``width`` / ``height``
    are its pixels (``Step.screen_size``)."""
    pool = referable_elements(step.elements)
    chosen = rng.sample(pool, min(per_screen, len(pool)))
    first = rng.randrange(len(GROUNDING_TYPES))
    w, h = step.screen_size
    rows: list[dict[str, Any]] = []
    for k, e in enumerate(chosen):
        kind = GROUNDING_TYPES[(first + k) % len(GROUNDING_TYPES)]
        box = _rounded_box(e.box)
        assert box is not None  # referable_elements kept only boxes with an area
        text = re.sub(r"\s+", " ", e.text).strip()
        if kind == "text_to_point":
            point = [round((box[0] + box[2]) / 2, BOX_DECIMALS + 1), round((box[1] + box[3]) / 2, BOX_DECIMALS + 1)]
            question, answer = rng.choice(_QUESTIONS).format(text), json.dumps(point)
        else:
            point = None
            question, answer = f"What does the element at {json.dumps(box)} say?", text
        rows.append(
            {
                "id": f"{episode_id}-{step.step_id:02d}-{k}",
                "image": image,
                "width": int(w),
                "height": int(h),
                "type": kind,
                "question": question,
                "answer": answer,
                "point": point,
                "box": box,
                "element_id": e.element_id,
                "episode_id": episode_id,
                "step_id": step.step_id,
            }
        )
    return rows


def grounding_samples(
    episodes: Iterable[Episode], *, image_prefix: str = "", seed: int = 0, per_screen: int = 3
) -> list[dict[str, Any]]:
    """AgentCPM-GUI Stage I grounding rows (Sec. 2.3; module doc) of every step of ``episodes``, in
    episode and step order, at most ``per_screen`` per screen (MiniGUI's default: 3).

    ``image_prefix``: the folder the screenshots' paths are relative to, as a path relative to the
    data folder that will hold the rows (``""``: that folder itself; an absolute screenshot path is
    kept as it is). The rows of one screen depend only on ``seed`` and its episode and step ids,
    so the same episodes give the same rows in any order. Raises ``ValueError`` naming the
    episode and step when ``per_screen`` is below 1 or two screens share an episode and step id
    (row ids would repeat)."""
    if per_screen < 1:
        raise ValueError(f"grounding_samples: per_screen must be at least 1, got {per_screen}")
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for ep in episodes:
        for step in ep.steps:
            key = (ep.episode_id, step.step_id)
            if key in seen:
                raise ValueError(
                    f"grounding_samples: episode {ep.episode_id!r} step {step.step_id} appears twice (row ids would repeat)"
                )
            seen.add(key)
            shot = step.screenshot
            image = shot if posixpath.isabs(shot) else posixpath.normpath(posixpath.join(image_prefix, shot))
            rng = random.Random(f"grounding-{seed}-{ep.episode_id}-{step.step_id}")
            rows.extend(screen_samples(step, ep.episode_id, image, rng, per_screen))
    return rows


def write_grounding_rows(folder: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write ``rows`` as ``folder/grounding_train.jsonl`` (:data:`GROUNDING_FILE`), one JSON object a
    line with sorted keys (the same rows give the same bytes); MiniGUI's export and a converted data
    set write their rows through it. Returns the file's path."""
    path = Path(folder) / GROUNDING_FILE
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    return path
