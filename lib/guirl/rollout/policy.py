"""The policy interface: prompts in, completions out (docs/architecture.md, "Policies and rollouts").

A **prompt** is ``(messages, images)``: chat messages with ``{"type": "image"}`` placeholders and
the images in placeholder order (:func:`guirl.prompts.build_prompt`); an image is a PIL image or
a path to one. A :class:`Policy` turns a list of prompts into ``n`` :class:`Completion` per
prompt. Episode loops (:mod:`guirl.rollout.online`, :mod:`guirl.rollout.offline`) take a
``Policy``, so a test double that returns scripted completions drives them without a model.

:class:`HFPolicy` implements the interface for a transformers vision-language model and its
processor: batched, left-padded ``model.generate``; greedy or sampled decoding; ``n``
completions per prompt; a seed that makes sampling reproducible for the same batches. A frozen
co-model (an executor or grounder that is not trained) is the same class around a model that
is never updated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from guirl import timing

#: ``(messages, images)``: chat messages with image placeholders and the images in their order.
Prompt = tuple[list[dict[str, Any]], list[Any]]

__all__ = [
    "Completion",
    "FunctionPolicy",
    "HFPolicy",
    "Policy",
    "Prompt",
    "derive_seed",
    "open_image",
    "trim_generated",
    "end_at_placeholder",
]


@dataclass(frozen=True)
class Completion:
    """One generated answer to one prompt.

    ``text``: decoded, special tokens removed. ``token_ids``: the generated ids only (no prompt
    ids, no padding), EOS included when it was generated (a completion cut by ``max_new_tokens``
    has none).
    """

    text: str
    token_ids: tuple[int, ...] = ()


@runtime_checkable
class Policy(Protocol):
    """Anything that answers prompts: ``complete(prompts, n=...)`` returns, per prompt and in input
    order, a list of ``n`` completions. ``do_sample=False`` is greedy decoding (the ``n``
    completions are then identical); ``temperature`` and ``top_p`` apply to sampling only;
    ``seed`` makes sampling reproducible (``None``: the global random state)."""

    def complete(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]: ...


def derive_seed(seed: int | None, *keys: int) -> int | None:
    """A seed for one part of a run (a turn, a round) from the run's ``seed`` and integer ``keys``.

    Independent streams for different keys (``numpy.random.SeedSequence``), so run ``s`` turn
    ``t + 1`` does not reuse run ``s + 1`` turn ``t``'s draws, as ``seed + t`` would. ``None``
    stays ``None`` (the global random state). Returns an int in ``[0, 2**31)``.
    """
    if seed is None:
        return None
    if seed < 0 or any(k < 0 for k in keys):
        raise ValueError(f"seed and keys must be >= 0, got seed={seed}, keys={keys}")
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1, dtype=np.uint32)[0] >> 1)


def open_image(image: Any) -> Any:
    """A PIL RGB image for a path (str or ``Path``); any other object is returned unchanged."""
    from PIL import Image

    if isinstance(image, (str, Path)):
        with Image.open(image) as im:
            return im.convert("RGB")
    return image


def _check_sampling(n: int, temperature: float, top_p: float) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1 completions per prompt, got {n}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def _eos_ids(model: Any) -> set[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        return set()
    return {int(eos)} if isinstance(eos, int) else {int(e) for e in eos}


def trim_generated(ids: Sequence[int], eos_ids: set[int]) -> tuple[int, ...]:
    """Generated ids up to and including the first EOS (what follows it is padding); all of
    them when no EOS was generated."""
    out = []
    for i in ids:
        out.append(int(i))
        if int(i) in eos_ids:
            break
    return tuple(out)


def _placeholder_ids(model: Any) -> set[int]:
    """The image / video placeholder ids of a vision-language model (``config.image_token_id``,
    ``video_token_id``); empty for a model without them."""
    cfg = getattr(model, "config", None)
    return {int(v) for k in ("image_token_id", "video_token_id") if (v := getattr(cfg, k, None)) is not None}


def end_at_placeholder(ids: Sequence[int], placeholders: set[int], eos_id: int | None) -> tuple[int, ...]:
    """``ids`` ending at the first image / video placeholder, which becomes ``eos_id`` (the
    action ends there; no EOS id: the placeholder is dropped). An undertrained model can emit
    ``<|image_pad|>``; a completion holding one cannot be scored by a forward pass (the image
    features would not match the placeholders), and its text is no action anyway. Unchanged when
    there is none."""
    out = []
    for i in ids:
        if int(i) in placeholders:
            if eos_id is not None:
                out.append(int(eos_id))
            break
        out.append(int(i))
    return tuple(out)


@contextlib.contextmanager
def _inference(model: Any, seed: int | None) -> Iterator[None]:
    """Eval mode (dropout off), no gradients and, with a seed, a forked torch random state; the
    model's training flag and the global random state are restored afterwards."""
    import torch

    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=_cuda_devices(model), enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            yield
    finally:
        if was_training:
            model.train()


def _cuda_devices(model: Any) -> list[int]:
    device = getattr(model, "device", None)
    if device is not None and getattr(device, "type", None) == "cuda":
        return [device.index or 0]
    return []


class HFPolicy:
    """Batched generation with a transformers vision-language model (Qwen2.5-VL).

    Prompts are rendered with the processor's chat template (generation prompt added), batched
    ``batch_size`` at a time with left padding, and decoded with special tokens removed. Greedy
    decoding (``do_sample=False``) generates once per prompt and repeats the result ``n`` times;
    sampling passes ``num_return_sequences=n``, ``temperature``, ``top_p`` and ``top_k=0``
    (disabled, so that a checkpoint's ``generation_config`` top-k cannot turn sampling greedy).
    Every other decoding setting comes from the model's ``generation_config``, overridden by
    ``generation_kwargs``.

    Images are encoded through :func:`guirl.models.image_cache.cached_processor` (a copy of
    ``processor`` that processes each distinct screenshot once, in the process-wide store shared by
    every policy and RL update; the tensors are identical to the processor's own), since
    evaluation and rollouts show the same screen in several steps' histories, and several models
    are evaluated on the same steps. For the same reason the vision tower's output of each distinct
    screenshot is computed once while the model's vision weights are unchanged
    (:class:`guirl.models.image_cache.VisionCache`, passed to ``generate`` as its
    ``mm_encoder_outputs``; the completions are identical, ``tests/test_rollout.py``).

    Generation runs in eval mode under ``torch.no_grad()``; the model's training flag is
    restored afterwards, so the same object serves a policy being trained and a frozen
    co-model. With ``seed``, sampling starts from ``torch.manual_seed(seed)`` inside a forked
    random state (the global state is untouched): the same prompts, batches and seed give the
    same completions.

    Args:
        model: a ``*ForConditionalGeneration`` model (its ``device`` receives the inputs).
        processor: its processor (chat template, tokenizer, image processor).
        max_new_tokens: generation budget per completion, in tokens.
        batch_size: prompts per ``generate`` call (``n`` sequences each when sampling).
        progress: show a tqdm bar over batches, labelled ``desc``.
        generation_kwargs: extra ``generate`` keywords (e.g. ``repetition_penalty``).
        image_cache_bytes: 0: no image processor cache and no vision cache; ``None`` (default):
            both (the processor's rows in the shared store, bounded by
            :data:`guirl.models.image_cache.DEFAULT_CACHE_BYTES`); another number: the bound in
            bytes of a processor cache of this policy's own, and the vision cache.
        vision_cache: false: no vision cache (the tower encodes every batch's pixels).
        generation_cache: keep greedy batches' generated ids on disk and reuse them for the same
            call (:mod:`guirl.rollout.generation_cache`); ``None`` (default): when the environment
            names a folder (the runner does, for notebooks), ``False``: never.
    """

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        max_new_tokens: int,
        batch_size: int,
        progress: bool = False,
        desc: str = "generate",
        generation_kwargs: Mapping[str, Any] | None = None,
        image_cache_bytes: int | None = None,
        vision_cache: bool = True,
        generation_cache: bool | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.processor = processor
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.progress = progress
        self.desc = desc
        self.generation_kwargs = dict(generation_kwargs or {})
        from guirl.models.image_cache import DEFAULT_CACHE_BYTES, VisionCache, cached_processor

        if image_cache_bytes is None:
            self._encoder = cached_processor(processor, DEFAULT_CACHE_BYTES, shared=True)
        elif image_cache_bytes > 0:
            self._encoder = cached_processor(processor, image_cache_bytes)
        else:
            self._encoder = processor
        cached = self._encoder is not processor and hasattr(self._encoder, "image_processor")
        self._vision = VisionCache(model) if vision_cache and cached and VisionCache.supports(model) else None
        from guirl.rollout.generation_cache import from_env

        self._generations = from_env(model) if generation_cache is not False else None

    def __repr__(self) -> str:
        return (
            f"HFPolicy({type(self.model).__name__}, max_new_tokens={self.max_new_tokens}, batch_size={self.batch_size})"
        )

    def _image_keys(self) -> list[tuple[Any, ...]] | None:
        """The content keys of the last :meth:`encode` batch's images, with the image processor's
        settings (``None`` without the processor cache)."""
        inner = getattr(self._encoder, "image_processor", None)
        keys = getattr(inner, "last_keys", None)
        return None if keys is None else [(inner._config, *key) for key in keys]

    def generate_inputs(self, enc: Any) -> dict[str, Any]:
        """``generate``'s keyword arguments for an :meth:`encode` batch: the batch itself, or, with
        the vision cache, the batch less ``pixel_values`` plus the images' ``mm_encoder_outputs``
        (the same tokens the model would compute from the pixels)."""
        keys = self._image_keys()
        if self._vision is None or "pixel_values" not in enc or keys is None:
            return dict(enc)
        inputs = {k: v for k, v in enc.items() if k != "pixel_values"}
        image = self._vision.encoder_outputs(enc["pixel_values"], enc["image_grid_thw"], keys)
        return {**inputs, "mm_encoder_outputs": {"image": image}}

    def _generate(self, enc: Any, kwargs: dict[str, Any]) -> Any:
        """The generated ids of one batch (``(B, new)``, after the prompt), from the generation
        cache when this greedy call was made before."""
        import torch

        cache = self._generations if not kwargs.get("do_sample") else None
        key = cache.key(enc, self._image_keys(), kwargs) if cache is not None else None
        if key is not None:
            got = cache.get(key)
            if got is not None:
                return torch.tensor(got, dtype=enc["input_ids"].dtype)
        ids = self.model.generate(**self.generate_inputs(enc), **kwargs)
        gen = ids[:, enc["input_ids"].shape[1] :]
        if key is not None:
            cache.put(key, gen.tolist())
        return gen

    def encode(self, prompts: Sequence[Prompt]) -> Any:
        """The processor's left-padded batch (``input_ids``, ``attention_mask``, ``pixel_values``,
        ``image_grid_thw``, ...) for ``prompts``, on the model's device."""
        with timing.phase("images", "prompts"):
            texts = [
                self.processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in prompts
            ]
            images = [[open_image(x) for x in ims] for _, ims in prompts]
            enc = self._encoder(text=texts, images=images, return_tensors="pt", padding=True, padding_side="left")
            return enc.to(self.model.device)

    def _completion(self, text: str, ids: tuple[int, ...], placeholders: set[int], eos_id: int | None) -> Completion:
        """A completion ending at a generated placeholder (:func:`end_at_placeholder`), its text
        decoded again from the ids kept; unchanged without one."""
        cut = end_at_placeholder(ids, placeholders, eos_id)
        if cut == ids:
            return Completion(text, ids)
        return Completion(self.processor.batch_decode([list(cut)], skip_special_tokens=True)[0], cut)

    def complete(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in input order (see the class docstring); a generated
        image / video placeholder ends a completion (:func:`end_at_placeholder`)."""
        from tqdm.auto import tqdm

        _check_sampling(n, temperature, top_p)
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, **self.generation_kwargs}
        if do_sample:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0, num_return_sequences=n)
        else:
            kwargs.update(do_sample=False)
        per_prompt = n if do_sample else 1
        eos = _eos_ids(self.model)
        eos_cfg = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        first_eos = eos_cfg[0] if isinstance(eos_cfg, (list, tuple)) and eos_cfg else eos_cfg
        placeholders = _placeholder_ids(self.model)
        out: list[list[Completion]] = []
        starts = range(0, len(prompts), self.batch_size)
        with _inference(self.model, seed), timing.phase("generation", self.desc):
            for i in tqdm(starts, desc=self.desc, disable=not self.progress):
                enc = self.encode(prompts[i : i + self.batch_size])
                gen = self._generate(enc, kwargs)
                texts = self.processor.batch_decode(gen, skip_special_tokens=True)
                rows = [
                    self._completion(t, trim_generated(g.tolist(), eos), placeholders, first_eos)
                    for t, g in zip(texts, gen)
                ]
                for j in range(0, len(rows), per_prompt):
                    group = rows[j : j + per_prompt]
                    out.append(group if do_sample else group * n)
        return out


class FunctionPolicy:
    """A policy whose answers come from a Python function of the prompt: a scripted expert, a
    rule-based baseline, or a test double for the episode loops.

    ``fn(prompt)`` returns one text (repeated ``n`` times) or a sequence of exactly ``n`` texts.
    Completions carry no token ids (there is no tokenizer). Every call is appended to ``calls``
    as ``(prompts, options)`` so a test can check what the loop asked.
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls: list[tuple[list[Prompt], dict[str, Any]]] = []

    def complete(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        _check_sampling(n, temperature, top_p)
        options = {"n": n, "do_sample": do_sample, "temperature": temperature, "top_p": top_p, "seed": seed}
        self.calls.append((list(prompts), options))
        out = []
        for prompt in prompts:
            got = self.fn(prompt)
            texts = [got] * n if isinstance(got, str) else list(got)
            if len(texts) != n:
                raise ValueError(f"FunctionPolicy: the function returned {len(texts)} texts for n={n}")
            out.append([Completion(t) for t in texts])
        return out
