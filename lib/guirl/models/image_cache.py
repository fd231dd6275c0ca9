"""A memoising wrapper around a Qwen2-VL-family image processor.

Step-level evaluation and multi-turn rollouts show the model the same screenshot many times: with
a history of ``k`` screenshots, step ``t``'s current screen is again in the prompts of steps
``t+1 .. t+k``, and notebook 01 evaluates four models on the same steps. The Qwen2-VL image
processor (PIL backend, the only one without torchvision; ``docs/stack.md``) takes about 7 ms per
280x504 MiniGUI screen on one CPU core, about a fifth of a tiny model's evaluation step.

:class:`CachedImageProcessor` processes each distinct image once and reuses its rows. It relies on
one property of the Qwen2-VL image processors, which the test suite checks against the real
processor: a batch's outputs are the per-image outputs concatenated along dimension 0
(``pixel_values``: ``(sum_i patches_i, C * T * P * P)``; ``image_grid_thw``: ``(n_images, 3)``).
Anything it cannot key (an input that is not a list of PIL images, or ``return_tensors`` other than
``"pt"``) goes to the wrapped processor unchanged.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

__all__ = ["DEFAULT_CACHE_BYTES", "CachedImageProcessor", "cached_processor", "image_key"]

#: Default memory bound of one cache: 1 GiB, about 300 tiny-profile screens (3.4 MB of float32
#: patches each) -- enough for 60 online episodes with a one-screenshot history.
DEFAULT_CACHE_BYTES = 1 << 30


def image_key(image: Any) -> tuple[Any, ...] | None:
    """A content key of a PIL image: ``(mode, size, blake2b of the pixel bytes)``; ``None`` for
    anything that is not a PIL image (it is then not cached)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        return None
    digest = hashlib.blake2b(image.tobytes(), digest_size=16).hexdigest()
    return (image.mode, image.size, digest)


def _flat(images: Any) -> list[Any] | None:
    """``images`` (one image, a list, or a list of lists per prompt) as a flat list; ``None`` when
    the nesting is anything else."""
    if not isinstance(images, (list, tuple)):
        return [images]
    out: list[Any] = []
    for item in images:
        if isinstance(item, (list, tuple)):
            if any(isinstance(x, (list, tuple)) for x in item):
                return None
            out.extend(item)
        else:
            out.append(item)
    return out


def _nbytes(features: Any) -> int:
    return int(sum(v.numel() * v.element_size() for v in features.values() if hasattr(v, "numel")))


class CachedImageProcessor:
    """``inner`` with a least-recently-used cache of its per-image outputs, bounded in bytes.

    Calling it returns what ``inner(images, **kwargs)`` returns (a ``BatchFeature`` of torch
    tensors): every image is looked up by :func:`image_key` and the keyword arguments, processed
    alone on a miss, and the per-image tensors are concatenated along dimension 0 in input order.
    Every other attribute (``merge_size``, ``patch_size``, ...) is the wrapped processor's.

    Args:
        inner: a Qwen2-VL-family image processor (per-image rows concatenated along dim 0).
        max_bytes: memory bound of the cached tensors, in bytes; the least recently used are
            dropped first. One image larger than the bound is processed but not kept.

    Attributes:
        hits / misses: images served from the cache / processed, since construction.
    """

    def __init__(self, inner: Any, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.inner = inner
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
        self._bytes = 0

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not found on the wrapper itself
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return (
            f"CachedImageProcessor({type(self.inner).__name__}, {len(self._entries)} images, "
            f"{self._bytes / 2**20:.1f} MiB of {self.max_bytes / 2**20:.0f}, hits={self.hits}, misses={self.misses})"
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tensors."""
        return self._bytes

    def clear(self) -> None:
        """Drop every cached image."""
        self._entries.clear()
        self._bytes = 0

    def _one(self, image: Any, key: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        got = self._entries.get(key)
        if got is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return got[0]
        self.misses += 1
        features = self.inner([image], **kwargs)
        size = _nbytes(features)
        if size <= self.max_bytes:
            self._entries[key] = (features, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
        return features

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        import torch
        from transformers import BatchFeature

        flat = _flat(images)
        keys = [image_key(x) for x in flat] if flat is not None else [None]
        if flat is None or not flat or any(k is None for k in keys) or kwargs.get("return_tensors") != "pt":
            return self.inner(images, **kwargs)
        options = repr(sorted(kwargs.items()))
        parts = [self._one(image, (*key, options), kwargs) for image, key in zip(flat, keys)]
        names = list(parts[0].keys())
        return BatchFeature(data={n: torch.cat([p[n] for p in parts], dim=0) for n in names}, tensor_type="pt")


def cached_processor(processor: Any, max_bytes: int = DEFAULT_CACHE_BYTES) -> Any:
    """A shallow copy of ``processor`` whose ``image_processor`` is a :class:`CachedImageProcessor`
    (the tokenizer and everything else shared); ``processor`` itself is left unchanged. A processor
    without an image processor, or one already cached, is returned as it is."""
    import copy

    inner = getattr(processor, "image_processor", None)
    if inner is None or isinstance(inner, CachedImageProcessor):
        return processor
    out = copy.copy(processor)
    out.image_processor = CachedImageProcessor(inner, max_bytes)
    return out
