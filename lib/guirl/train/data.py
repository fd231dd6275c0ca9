"""Training records in TRL's vision prompt-completion format.

A record is ``{"prompt": [messages], "completion": [messages], "images": [paths]}`` (what
TRL 1.16's ``SFTTrainer`` and ``DataCollatorForVisionLanguageModeling`` take for a VLM; the
``images`` column is cast to ``datasets.Image`` so the collator receives PIL images), plus
plain metadata columns the trainer ignores.

* :func:`sft_records`: one record per (episode step, history setting), history from the
  ground-truth trajectory (CCPO Table 2 "nA"/"nAO" settings).
* :func:`grounding_records`: AgentCPM-GUI Stage-I style grounding pre-training (text to point,
  function to point, box to text) on MiniGUI screens. Point answers are written as a click in
  the run's output format, so grounding teaches the very coordinate tokens SFT uses.
* :func:`pretraining_records`: the tiny base model's pretraining samples
  (:mod:`guirl.env.pretraining`), points and boxes written in the pixels of the image the model
  sees, actions in each sample's format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from guirl.actions import Action
from guirl.actions.coords import resized_size
from guirl.data.schema import Episode
from guirl.env.pretraining import Sample
from guirl.prompts import PromptSpec, action_text, episode_step_prompt, format_context, system_text


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def sft_records(
    episodes: Iterable[Episode],
    specs: Sequence[PromptSpec],
    *,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """One record per step and per prompt spec (e.g. 1AO and 3AO), in episode order.

    Metadata columns: ``episode_id``, ``step_id``, ``history`` (the spec tag), ``action_type``.
    """
    root = str(image_root)
    out: list[dict[str, Any]] = []
    for ep in episodes:
        for t, step in enumerate(ep.steps):
            for spec in specs:
                messages, images, completion = episode_step_prompt(
                    ep, t, spec, min_pixels=min_pixels, max_pixels=max_pixels, image_root=root
                )
                out.append(
                    {
                        "prompt": messages,
                        "completion": _assistant(completion),
                        "images": images,
                        "episode_id": ep.episode_id,
                        "step_id": step.step_id,
                        "history": spec.tag,
                        "action_type": step.action.type.value,
                    }
                )
    return out


def grounding_records(
    rows: Iterable[dict[str, Any]],
    output_format: str,
    *,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Grounding pre-training records from the ``grounding_train.jsonl`` rows of MiniGUI
    (:func:`guirl.env.export.grounding_samples`) or of a converted data set
    (:func:`guirl.data.grounding.grounding_samples`). A row's ``image`` is relative to
    ``image_root`` (an absolute path is kept as it is).

    ``text_to_point`` / ``function_to_point`` rows (answer: a normalised point) become a click
    on that point written in ``output_format``; ``box_to_text`` rows keep their text answer.
    Raises ``ValueError`` naming the row id when a row lacks a field it needs. ``system_prompt``:
    a registered prompt (``None``: the format's paper prompt, as :class:`~guirl.prompts.PromptSpec`).
    """
    root = str(image_root).rstrip("/")
    # first: ValueError naming a bad format
    spec = PromptSpec(output_format=output_format, n_history=0, system_prompt=system_prompt)
    out: list[dict[str, Any]] = []
    for row in rows:
        rid = row.get("id", "?")
        try:
            kind, question, image = row["type"], row["question"], row["image"]
            size = (int(row["width"]), int(row["height"]))
            system = system_text(spec, resized_size(*size, min_pixels=min_pixels, max_pixels=max_pixels))
            if kind in ("text_to_point", "function_to_point"):
                action = Action("click", point=tuple(row["point"]))  # type: ignore[arg-type]
                answer = action_text(action, spec, format_context(size, min_pixels, max_pixels))
            elif kind == "box_to_text":
                answer = str(row["answer"])
            else:
                raise ValueError(f"unknown grounding type {kind!r}")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"grounding row {rid}: {e}") from e
        prompt = [
            {"role": "system", "content": [{"type": "text", "text": system}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]},
        ]
        out.append(
            {
                "prompt": prompt,
                "completion": _assistant(answer),
                "images": [image if not root or image.startswith("/") else f"{root}/{image}"],
                "episode_id": str(row.get("episode_id", "")),
                "step_id": int(row.get("step_id", 0)),
                "history": "grounding",
                "action_type": kind,
            }
        )
    return out


def _px_point(p: Sequence[float], size: tuple[int, int]) -> str:
    return f"({round(p[0] * size[0])}, {round(p[1] * size[1])})"


def _px_box(b: Sequence[float], size: tuple[int, int]) -> str:
    w, h = size
    return f"[{round(b[0] * w)}, {round(b[1] * h)}, {round(b[2] * w)}, {round(b[3] * h)}]"


def sample_prompt(
    sample: Sample, *, screen_size: tuple[int, int], min_pixels: int, max_pixels: int
) -> tuple[str, str | None]:
    """``(question, answer)`` of a pretraining sample as the model reads and writes them: points
    ``(x, y)`` and boxes ``[x1, y1, x2, y2]`` in pixels of the resized image (Qwen2.5-VL's
    absolute coordinates, as the ``ccpo`` format writes them), an action answer in the sample's
    format with a note naming it. ``answer`` is ``None`` for an action the format cannot write."""
    ctx = format_context(screen_size, min_pixels, max_pixels)
    seen = resized_size(*screen_size, min_pixels=min_pixels, max_pixels=max_pixels)
    q = sample.question
    if "{point}" in q:
        if sample.point is None:
            raise ValueError(f"sample {sample.sample_id}: the question has {{point}} but the sample has no point")
        q = q.replace("{point}", _px_point(sample.point, seen))
    if "{box}" in q:
        if sample.box is None:
            raise ValueError(f"sample {sample.sample_id}: the question has {{box}} but the sample has no box")
        q = q.replace("{box}", _px_box(sample.box, seen))
    if sample.action is None:
        return q, sample.answer
    from guirl.actions.formats import get_format

    answer = get_format(str(sample.format)).format(Action.from_dict(sample.action), ctx)
    return f"{q} Use the {sample.format} action format.", answer


def pretraining_records(
    samples: Iterable[Sample],
    *,
    image_root: str | Path,
    screen_size: tuple[int, int],
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """One record per sample (:func:`sample_prompt`), no system message (the chat template's
    default), the screenshot first when the sample has one. Metadata: ``sample_id``, ``skill``."""
    root = str(image_root).rstrip("/")
    out = []
    for s in samples:
        q, a = sample_prompt(s, screen_size=screen_size, min_pixels=min_pixels, max_pixels=max_pixels)
        content: list[dict[str, Any]] = [{"type": "text", "text": q}]
        images: list[str] = []
        if s.image is not None:
            content.insert(0, {"type": "image"})
            images.append(f"{root}/{s.image}" if root else s.image)
        out.append(
            {
                "prompt": [{"role": "user", "content": content}],
                "completion": _assistant(str(a)),
                "images": images,
                "sample_id": s.sample_id,
                "skill": s.skill,
            }
        )
    return out


def pretraining_conversations(
    samples: Iterable[Sample],
    *,
    image_root: str | Path,
    screen_size: tuple[int, int],
    min_pixels: int,
    max_pixels: int,
    turns: int,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Pretraining samples as multi-turn conversations: the samples of one screenshot (and the
    text-only ones among themselves), shuffled, ``turns`` question-answer turns per conversation,
    the screenshot in the first user turn. Records ``{"messages", "images", "skills",
    "sample_ids"}`` for TRL's conversational VLM path with the loss on every assistant turn
    (``SFTConfig(assistant_only_loss=True)``): one image encoding serves ``turns`` answers.
    The first turn of each conversation is exactly :func:`pretraining_records`' prompt."""
    import random

    if turns < 1:
        raise ValueError(f"turns must be >= 1, got {turns}")
    root = str(image_root).rstrip("/")
    groups: dict[str | None, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.image, []).append(s)
    rng = random.Random(f"conversations-{seed}")
    out = []
    for image in sorted(groups, key=lambda k: (k is None, k or "")):
        group = groups[image]
        rng.shuffle(group)
        for i in range(0, len(group), turns):
            chunk = group[i : i + turns]
            messages: list[dict[str, Any]] = []
            for j, s in enumerate(chunk):
                q, a = sample_prompt(s, screen_size=screen_size, min_pixels=min_pixels, max_pixels=max_pixels)
                content: list[dict[str, Any]] = [{"type": "text", "text": q}]
                if j == 0 and image is not None:
                    content.insert(0, {"type": "image"})
                messages += [{"role": "user", "content": content}, *_assistant(str(a))]
            out.append(
                {
                    "messages": messages,
                    "images": [f"{root}/{image}" if root else image] if image is not None else [],
                    "skills": [s.skill for s in chunk],
                    "sample_ids": [s.sample_id for s in chunk],
                }
            )
    rng.shuffle(out)
    return out


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a bad line raises ``ValueError`` naming the file and line."""
    rows = []
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i}: not valid JSON: {e}") from e
    return rows


#: The keys every training record has (:func:`write_records` / :func:`read_records`).
RECORD_KEYS = ("prompt", "completion", "images")


def _check_record(rec: Any, where: str) -> None:
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: a training record is a mapping, got {type(rec).__name__}")
    missing = [k for k in RECORD_KEYS if k not in rec]
    if missing:
        raise ValueError(f"{where}: record lacks {missing}; a record has {list(RECORD_KEYS)} (and metadata)")
    if not isinstance(rec["prompt"], list) or not isinstance(rec["completion"], list):
        raise ValueError(f"{where}: prompt and completion are lists of chat messages")
    n_placeholders = sum(
        1 for m in rec["prompt"] for c in (m.get("content") or []) if isinstance(c, dict) and c.get("type") == "image"
    )
    if not isinstance(rec["images"], list) or n_placeholders != len(rec["images"]):
        raise ValueError(f"{where}: {n_placeholders} image placeholders but {len(rec['images'])} images")


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write training records (:func:`sft_records`' layout: ``prompt`` and ``completion`` chat
    messages, ``images`` paths in placeholder order, plus metadata) as JSONL for a ``records``
    stage (:mod:`guirl.train.sft`); image paths relative to the stage's data folder stay relative.
    Each record is checked first (``ValueError`` naming its index); written to a temporary name
    and renamed, so a reader never sees half a file. Returns the path."""
    path = Path(path)
    rows = []
    for i, rec in enumerate(records):
        _check_record(rec, f"record {i}")
        rows.append(json.dumps({**rec, "images": [str(x) for x in rec["images"]]}, ensure_ascii=False))
    if not rows:
        raise ValueError(f"{path}: no training records to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_records(path: str | Path, *, image_root: str | Path | None = None) -> list[dict[str, Any]]:
    """The records of a :func:`write_records` file; relative image paths are joined to
    ``image_root``. A bad row raises ``ValueError`` naming the file and line."""
    root = None if image_root is None else Path(image_root)
    out = []
    for i, rec in enumerate(read_jsonl(path), start=1):
        _check_record(rec, f"{path}:{i}")
        if root is not None:
            rec["images"] = [str(p) if Path(p).is_absolute() else str(root / p) for p in rec["images"]]
        out.append(rec)
    return out


def to_dataset(records: list[dict[str, Any]]):
    """A ``datasets.Dataset`` whose ``images`` column decodes to PIL images on access; records that
    hold no image at all (a text-only model's) lose the column, so TRL trains them as text.
    Conversation records (:func:`pretraining_conversations`) keep ``messages`` and ``images`` only."""
    from datasets import Dataset, Image, List

    if not records:
        raise ValueError("no training records: the data folder is empty or the filters removed everything")
    if "messages" in records[0]:
        rows = [{"messages": r["messages"], "images": list(r.get("images") or [])} for r in records]
        return Dataset.from_list(rows).cast_column("images", List(Image()))
    if not any(r.get("images") for r in records):
        return Dataset.from_list([{k: v for k, v in r.items() if k != "images"} for r in records])
    return Dataset.from_list(records).cast_column("images", List(Image()))
