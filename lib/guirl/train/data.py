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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from guirl.actions import Action
from guirl.actions.coords import resized_size
from guirl.data.schema import Episode
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
    """Grounding pre-training records from MiniGUI's ``grounding_train.jsonl`` rows.

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
                "images": [f"{root}/{image}" if root else image],
                "episode_id": str(row.get("episode_id", "")),
                "step_id": int(row.get("step_id", 0)),
                "history": "grounding",
                "action_type": kind,
            }
        )
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
    hold no image at all (a text-only model's) lose the column, so TRL trains them as text."""
    from datasets import Dataset, Image, List

    if not records:
        raise ValueError("no training records: the data folder is empty or the filters removed everything")
    if not any(r.get("images") for r in records):
        return Dataset.from_list([{k: v for k, v in r.items() if k != "images"} for r in records])
    return Dataset.from_list(records).cast_column("images", List(Image()))
