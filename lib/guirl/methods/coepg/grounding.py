"""Grounding models at work: a plan -> a point and the confidence of eq. 6 (Co-EPG Sec. 4.1, 4.3).

:class:`Grounder` wraps one grounding model (a transformers Qwen2.5-VL and its processor):
:meth:`Grounder.ground` answers a batch of ``(screenshot, screen size, plan)`` queries greedily
(eq. 2) and returns one :class:`~guirl.methods.coepg.reward.GroundingOutput` per query: the point
(normalised; ``None`` when the answer is no point on the screen) and the log-probabilities of the
tokens that spell the coordinates, taken from a forward pass over prompt + answer
(:func:`coordinate_logprobs`, eq. 6: C-DREM's confidence is their mean).

Coordinate tokens are the answer's tokens whose text holds a decimal digit
(:func:`coordinate_token_mask`): the grounder answers ``(x, y)``, so they are exactly the digits
of x and y (Qwen2.5-VL's tokenizer, and the tiny model's, spell numbers digit by digit).

:func:`ground_all` asks several grounders the same queries side by side (one thread each; the
paper fetches the rewards of its grounding models asynchronously, App. B).

**Served grounders.** Co-EPG's auxiliary grounders are Qwen2.5-VL-72B and -32B (App. B), which do
not fit beside the planner on every GRPO rank. Each runs once behind an OpenAI-compatible endpoint
(``vllm serve``, ``docs/cluster.md``) shared by all ranks: a ``coepg.grounders`` (or
``coepg.verifiers``) entry ``http://host:port/v1`` (``#name`` after it picks a model of several)
becomes a folder holding ``endpoint.json`` (:func:`grounder_source`), which a stage takes as its
``grounderJ`` input like a checkpoint folder, and :func:`load_grounder` returns a
:class:`ServedGrounder` for it: the same queries and outputs as :class:`Grounder`, the point read
from the answer and eq. 6's log-probabilities those the server reports for the answer's tokens
that hold a digit (:class:`guirl.rollout.served.ServedPolicy`: timeouts, retries, concurrent
requests, a clear error when the server is down).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from guirl.actions.formats import get_format
from guirl.methods.coepg.prompts import PlannerPromptSettings, grounder_prompt
from guirl.methods.coepg.reward import GroundingOutput
from guirl.prompts import format_context

__all__ = [
    "GroundingQuery",
    "Grounder",
    "ServedGrounder",
    "ENDPOINT_FILE",
    "coordinate_token_mask",
    "coordinate_logprobs",
    "digit_logprobs",
    "grounder_source",
    "load_grounder",
    "ground_all",
]

#: The file that makes a folder a served grounder (:func:`grounder_source`).
ENDPOINT_FILE = "endpoint.json"
#: Client settings of a served grounder when the source does not give them (seconds, counts).
SERVED_DEFAULTS: dict[str, Any] = {"timeout_s": 120.0, "max_retries": 3, "backoff_s": 1.0, "max_concurrency": 8}

_DIGIT = re.compile(r"[0-9]")

#: ``(screenshot, (width, height), plan)``: one grounding query.
GroundingQuery = tuple[Any, tuple[int, int], str]


def coordinate_token_mask(tokenizer: Any, ids: Sequence[int]) -> list[bool]:
    """For each token id of an answer: whether its text holds a decimal digit (a coordinate token)."""
    return [bool(_DIGIT.search(tokenizer.decode([int(i)]))) for i in ids]


def coordinate_logprobs(model: Any, processor: Any, prompts: Sequence[Any], answers: Sequence[Sequence[int]]):
    """Per answer, the log-probabilities (natural log, temperature 1) of its coordinate tokens under
    ``model`` given its prompt: one forward pass over prompt + answer
    (:func:`guirl.rl.logprobs.completion_logprobs`), the answer's tokens masked by
    :func:`coordinate_token_mask`. Returns a list of tuples of floats (empty: no digit)."""
    import torch

    from guirl.rl.logprobs import completion_logprobs, encode_samples

    keep = [i for i, ids in enumerate(answers) if len(ids)]
    out: list[tuple[float, ...]] = [() for _ in answers]
    if not keep:
        return out
    batch = encode_samples(processor, [prompts[i] for i in keep], [answers[i] for i in keep], device=model.device)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch)
    for row, i in enumerate(keep):
        mask = coordinate_token_mask(processor.tokenizer, answers[i])
        out[i] = tuple(float(v) for v, m in zip(logp[row, : len(mask)].tolist(), mask) if m)
    return out


class Grounder:
    """One grounding model (module doc). ``settings`` gives its prompt; ``min_pixels`` /
    ``max_pixels`` the screen as it sees it; answers are at most ``max_new_tokens`` tokens,
    ``batch_size`` queries per generate / forward call."""

    def __init__(
        self,
        model: Any,
        processor: Any,
        settings: PlannerPromptSettings,
        *,
        min_pixels: int,
        max_pixels: int,
        max_new_tokens: int,
        batch_size: int,
        name: str = "grounder",
    ) -> None:
        from guirl.rollout import HFPolicy

        self.model, self.processor, self.settings = model, processor, settings
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.batch_size = int(batch_size)
        self.name = name
        self.policy = HFPolicy(model, processor, max_new_tokens=max_new_tokens, batch_size=batch_size)

    def ground(self, queries: Sequence[GroundingQuery]) -> list[GroundingOutput]:
        """One output per query (module doc), in order."""
        if not queries:
            return []
        fmt = get_format("coepg_grounder")
        prompts = [grounder_prompt(self.settings, shot, plan) for shot, _, plan in queries]
        completions = [c[0] for c in self.policy.complete(prompts)]
        out: list[GroundingOutput] = []
        for start in range(0, len(prompts), self.batch_size):
            part = slice(start, start + self.batch_size)
            lps = coordinate_logprobs(
                self.model, self.processor, prompts[part], [c.token_ids for c in completions[part]]
            )
            for (_, size, _), comp, lp in zip(queries[part], completions[part], lps, strict=True):
                parsed = fmt.parse(comp.text, format_context(size, self.min_pixels, self.max_pixels))
                point = parsed.action.point if parsed.ok and parsed.action is not None else None
                out.append(GroundingOutput(point=point, token_logprobs=lp))
        return out


def digit_logprobs(tokens: Sequence[str], logprobs: Sequence[float]) -> tuple[float, ...]:
    """The log-probabilities of the tokens whose text holds a decimal digit (eq. 6's coordinate
    tokens, as :func:`coordinate_token_mask` picks them from ids)."""
    return tuple(float(lp) for t, lp in zip(tokens, logprobs, strict=True) if _DIGIT.search(t))


class ServedGrounder:
    """A grounding model behind an OpenAI-compatible endpoint (module doc): ``client`` a
    :class:`~guirl.rollout.served.ServedPolicy` (its pixel budget the grounder's), ``settings``
    the prompts; :meth:`ground` as :meth:`Grounder.ground`."""

    def __init__(
        self, client: Any, settings: PlannerPromptSettings, *, min_pixels: int, max_pixels: int, name: str = "served"
    ) -> None:
        self.client, self.settings = client, settings
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.name = name

    def __repr__(self) -> str:
        return f"ServedGrounder({self.name!r}, {self.client!r})"

    def ground(self, queries: Sequence[GroundingQuery]) -> list[GroundingOutput]:
        """One output per query, in order: greedy answers with their tokens' log-probabilities."""
        if not queries:
            return []
        fmt = get_format("coepg_grounder")
        prompts = [grounder_prompt(self.settings, shot, plan) for shot, _, plan in queries]
        answers = [row[0] for row in self.client.chat(prompts, logprobs=True)]
        out = []
        for (_, size, _), a in zip(queries, answers, strict=True):
            parsed = fmt.parse(a.text, format_context(size, self.min_pixels, self.max_pixels))
            point = parsed.action.point if parsed.ok and parsed.action is not None else None
            out.append(GroundingOutput(point=point, token_logprobs=digit_logprobs(a.tokens, a.logprobs)))
        return out


def grounder_source(source: str | Path, folder: str | Path) -> Path:
    """The folder a stage takes for one grounder ``source``: a local checkpoint folder (relative
    to the repository, resolved), or, for an endpoint ``http(s)://host:port/v1[#model]``,
    ``folder`` with an ``endpoint.json`` (``url``, ``model``, the client settings of
    :data:`SERVED_DEFAULTS`) written into it (module doc)."""
    from guirl.paths import resolve_repo_path

    text = str(source)
    if not text.startswith(("http://", "https://")):
        return resolve_repo_path(text)
    url, _, model = text.partition("#")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"url": url, "model": model or None, **SERVED_DEFAULTS}
    (folder / ENDPOINT_FILE).write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return folder


def load_grounder(
    folder: str | Path,
    settings: PlannerPromptSettings,
    *,
    min_pixels: int,
    max_pixels: int,
    max_new_tokens: int,
    batch_size: int,
    dtype: str = "float32",
    device: str = "cpu",
) -> Grounder | ServedGrounder:
    """A :class:`Grounder` from a model folder: a full checkpoint, or a LoRA adapter folder (merged
    into the base its ``adapter_config.json`` names); a :class:`ServedGrounder` for a folder with
    an ``endpoint.json`` (:func:`grounder_source`; ``dtype`` and ``device`` are the server's then)."""
    from guirl.models import load_policy

    folder = Path(folder)
    endpoint = folder / ENDPOINT_FILE
    if endpoint.is_file():
        from guirl.rollout.served import ServedPolicy

        spec = json.loads(endpoint.read_text(encoding="utf-8"))
        settings_ = {k: spec.get(k, v) for k, v in SERVED_DEFAULTS.items()}
        client = ServedPolicy(
            spec["url"],
            spec.get("model"),
            max_new_tokens=max_new_tokens,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            **settings_,
        )
        name = spec.get("model") or spec["url"]
        return ServedGrounder(client, settings, min_pixels=min_pixels, max_pixels=max_pixels, name=name)
    cfg_file = folder / "adapter_config.json"
    if cfg_file.is_file():
        base = json.loads(cfg_file.read_text())["base_model_name_or_path"]
        model, processor = load_policy(
            base, folder, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device
        )
    else:
        model, processor = load_policy(folder, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device)
    model.requires_grad_(False)
    return Grounder(
        model,
        processor,
        settings,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        name=folder.name,
    )


def ground_all(
    grounders: Sequence[Grounder | ServedGrounder], queries: Sequence[GroundingQuery]
) -> list[list[GroundingOutput]]:
    """``[grounder][query]`` outputs of every grounder on the same queries, the grounders side by
    side (one thread each)."""
    if len(grounders) <= 1:
        return [g.ground(queries) for g in grounders]
    with ThreadPoolExecutor(max_workers=len(grounders)) as pool:
        return list(pool.map(lambda g: g.ground(queries), grounders))
