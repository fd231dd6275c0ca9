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

The cached rows live in a store: one per wrapper by default, or the process-wide
:func:`shared_store` (``cached_processor(..., shared=True)``), so every policy, evaluation and RL
update of a notebook's kernel encodes a screenshot once. Entries are keyed by the wrapped
processor's configuration as well, so processors with other settings never share rows.

:class:`VisionCache` does the same one step further for generation: the vision tower's output
(the merged image tokens) of each distinct screenshot, computed once while the tower's weights are
unchanged. It relies on a second property, checked by the test suite on the tiny model: the tower
encodes each image on its own (window attention inside an image, row-wise linear layers), so an
image's rows are the same whether it is encoded alone or in a batch.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CachedImageProcessor",
    "FastImageProcessor",
    "ImageStore",
    "VisionCache",
    "cached_processor",
    "fast_processor",
    "image_key",
    "shared_store",
]

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


class ImageStore:
    """A least-recently-used map from keys to ``(value, nbytes)``, bounded by ``max_bytes``; one
    value larger than the bound is never kept."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.entries: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
        self.nbytes = 0

    def get(self, key: tuple[Any, ...]) -> Any | None:
        got = self.entries.get(key)
        if got is None:
            return None
        self.entries.move_to_end(key)
        return got[0]

    def put(self, key: tuple[Any, ...], value: Any, size: int) -> None:
        if size > self.max_bytes or key in self.entries:
            return
        self.entries[key] = (value, size)
        self.nbytes += size
        while self.nbytes > self.max_bytes:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.nbytes -= dropped

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.entries)


_SHARED: ImageStore | None = None


def shared_store() -> ImageStore:
    """The process-wide store of :func:`cached_processor` ``(shared=True)`` (bounded by
    :data:`DEFAULT_CACHE_BYTES`)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ImageStore(DEFAULT_CACHE_BYTES)
    return _SHARED


def _config_key(inner: Any) -> str:
    """What identifies the wrapped processor's outputs: its configuration (JSON), else its type and id."""
    to_json = getattr(inner, "to_json_string", None)
    if callable(to_json):
        try:
            return hashlib.blake2b(to_json().encode("utf-8"), digest_size=16).hexdigest()
        except (TypeError, ValueError):
            pass
    return f"{type(inner).__qualname__}@{id(inner)}"


class FastImageProcessor:
    """The Qwen2-VL PIL image processor, bit for bit, without its per-pixel float pipeline.

    For an RGB image the processor need not resize (its size is already what ``smart_resize``
    gives), the processor's output depends on each pixel only through ``(channel, byte value)``:
    rescale and normalize are element-wise, patchify is a fixed rearrangement. So the 3 x 256
    possible values are computed once with the processor's own ``rescale`` and ``normalize``
    (a lookup table), and an image's ``pixel_values`` are the table looked up at its bytes and
    rearranged by the processor's own ``patchify``: about a third of the processor's time.

    Any other call (another image mode or size, other keyword arguments, a processor class other
    than ``Qwen2VLImageProcessorPil`` or with rescaling / normalizing switched off) goes to the
    wrapped processor. The first image of each call shape is also checked against the wrapped
    processor, byte for byte; a mismatch turns the fast path off for good (with a warning).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._lut: Any = None
        self._enabled = self.supports(inner)
        self._checked: set[tuple[int, int]] = set()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @staticmethod
    def supports(inner: Any) -> bool:
        """Whether ``inner`` is the processor class and configuration the fast path reproduces."""
        return (
            type(inner).__name__ == "Qwen2VLImageProcessorPil"
            and bool(getattr(inner, "do_rescale", False))
            and bool(getattr(inner, "do_normalize", False))
            and getattr(inner, "do_convert_rgb", True) in (True, None)
        )

    def _table(self) -> Any:
        import numpy as np

        if self._lut is None:
            values = np.broadcast_to(np.arange(256, dtype=np.uint8)[None, None, :], (3, 1, 256)).copy()
            ip = self.inner
            table = ip.normalize(ip.rescale(values, ip.rescale_factor), ip.image_mean, ip.image_std)
            self._lut = np.ascontiguousarray(table[:, 0, :])
        return self._lut

    def _eligible(self, image: Any) -> bool:
        import sys

        from PIL import Image

        if not isinstance(image, Image.Image) or image.mode != "RGB":
            return False
        ip = self.inner
        resize = sys.modules[type(ip).__module__].smart_resize
        w, h = image.size
        factor = ip.patch_size * ip.merge_size
        return resize(h, w, factor=factor, min_pixels=ip.size.shortest_edge, max_pixels=ip.size.longest_edge) == (h, w)

    def _patches(self, image: Any) -> tuple[Any, list[int]]:
        import numpy as np

        lut = self._table()
        arr = np.asarray(image)
        norm = np.empty((3, arr.shape[0], arr.shape[1]), dtype=lut.dtype)
        for c in range(3):
            np.take(lut[c], arr[..., c], out=norm[c])
        ip = self.inner
        patches, gh, gw = ip.patchify(
            norm, patch_size=ip.patch_size, merge_size=ip.merge_size, temporal_patch_size=ip.temporal_patch_size
        )
        return patches, [1, gh, gw]

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        import numpy as np
        from transformers import BatchFeature

        flat = _flat(images)
        if (
            not self._enabled
            or flat is None
            or not flat
            or set(kwargs) != {"return_tensors"}
            or not all(self._eligible(x) for x in flat)
        ):
            return self.inner(images, **kwargs)
        parts = [self._patches(x) for x in flat]
        out = BatchFeature(
            data={
                "pixel_values": np.concatenate([p for p, _ in parts], axis=0),
                "image_grid_thw": np.array([g for _, g in parts], dtype=np.int64),
            },
            tensor_type=kwargs["return_tensors"],
        )
        shape = flat[0].size
        if shape not in self._checked:  # the first image of this size: compare with the processor itself
            self._checked.add(shape)
            want = self.inner([flat[0]], **kwargs)
            got = BatchFeature(
                data={"pixel_values": parts[0][0], "image_grid_thw": np.array([parts[0][1]], dtype=np.int64)},
                tensor_type=kwargs["return_tensors"],
            )
            if not _same(want, got):
                import warnings

                warnings.warn(
                    f"FastImageProcessor: differs from {type(self.inner).__name__} on a {shape} image; "
                    "using the processor itself from now on",
                    stacklevel=2,
                )
                self._enabled = False
                return self.inner(images, **kwargs)
        return out


def _same(a: Any, b: Any) -> bool:
    """Whether two processor outputs hold the same keys, dtypes, shapes and values."""
    import numpy as np

    if list(a.keys()) != list(b.keys()):
        return False
    for k in a:
        x, y = a[k], b[k]
        x = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
        y = y.numpy() if hasattr(y, "numpy") else np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def fast_processor(processor: Any) -> Any:
    """A shallow copy of ``processor`` whose image processor is a :class:`FastImageProcessor`
    (``processor`` itself unchanged); ``processor`` as it is when its image processor is not one the
    fast path reproduces, or is wrapped already."""
    import copy

    inner = getattr(processor, "image_processor", None)
    if inner is None or isinstance(inner, (FastImageProcessor, CachedImageProcessor)):
        return processor
    if not FastImageProcessor.supports(inner):
        return processor
    out = copy.copy(processor)
    out.image_processor = FastImageProcessor(inner)
    return out


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
        store: where the rows are kept (e.g. :func:`shared_store`); default a store of this
            wrapper's own, bounded by ``max_bytes``.

    Attributes:
        hits / misses: images served from the cache / processed by this wrapper, since construction.
        last_keys: the content keys (:func:`image_key`) of the images of the last call, in order
            (``None`` when that call went to the wrapped processor unchanged).
    """

    def __init__(self, inner: Any, max_bytes: int = DEFAULT_CACHE_BYTES, store: ImageStore | None = None) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.inner = inner
        self.hits = 0
        self.misses = 0
        self.last_keys: list[tuple[Any, ...]] | None = None
        self._store = store if store is not None else ImageStore(max_bytes)
        self._config = _config_key(inner)
        self.max_bytes = self._store.max_bytes

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not found on the wrapper itself
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return (
            f"CachedImageProcessor({type(self.inner).__name__}, {len(self._store)} images, "
            f"{self.nbytes / 2**20:.1f} MiB of {self.max_bytes / 2**20:.0f}, hits={self.hits}, misses={self.misses})"
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tensors (of the whole store)."""
        return self._store.nbytes

    def clear(self) -> None:
        """Drop every cached image (of the whole store)."""
        self._store.clear()

    def _one(self, image: Any, key: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        got = self._store.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        features = self.inner([image], **kwargs)
        self._store.put(key, features, _nbytes(features))
        return features

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        import torch
        from transformers import BatchFeature

        flat = _flat(images)
        keys = [image_key(x) for x in flat] if flat is not None else [None]
        if flat is None or not flat or any(k is None for k in keys) or kwargs.get("return_tensors") != "pt":
            self.last_keys = None
            return self.inner(images, **kwargs)
        self.last_keys = list(keys)  # type: ignore[arg-type]
        options = repr(sorted(kwargs.items()))
        parts = [self._one(image, (self._config, *key, options), kwargs) for image, key in zip(flat, keys)]
        names = list(parts[0].keys())
        return BatchFeature(data={n: torch.cat([p[n] for p in parts], dim=0) for n in names}, tensor_type="pt")


def cached_processor(processor: Any, max_bytes: int = DEFAULT_CACHE_BYTES, *, shared: bool = False) -> Any:
    """A shallow copy of ``processor`` whose ``image_processor`` is a :class:`CachedImageProcessor`
    (the tokenizer and everything else shared); ``processor`` itself is left unchanged. A processor
    without an image processor, or one already cached, is returned as it is. ``shared``: keep the
    rows in the process-wide :func:`shared_store` (``max_bytes`` is then its bound, not this
    wrapper's) instead of a store of the copy's own."""
    import copy

    inner = getattr(processor, "image_processor", None)
    if inner is None or isinstance(inner, CachedImageProcessor):
        return processor
    if FastImageProcessor.supports(inner):
        inner = FastImageProcessor(inner)  # the misses: processed through the lookup table
    out = copy.copy(processor)
    out.image_processor = CachedImageProcessor(inner, max_bytes, store=shared_store() if shared else None)
    return out


class VisionCache:
    """A model's vision-tower outputs per distinct image, for ``generate`` (Qwen2.5-VL).

    :meth:`encoder_outputs` takes a batch's ``pixel_values`` (``(sum_i patches_i, C*T*P*P)``),
    ``image_grid_thw`` (``(n_images, 3)``) and one key per image (its content,
    :func:`image_key`, under this cache's processor settings), encodes the images not cached yet in
    one call of the model's ``get_image_features`` and returns what that method returns for the
    whole batch: an output whose ``pooler_output`` holds one ``(tokens_i, hidden)`` tensor per image,
    in order, to pass to ``generate`` as ``mm_encoder_outputs={"image": ...}``. The entries are
    dropped whenever a parameter of the vision tower changed (an optimizer step, a loaded state:
    the parameters' identities and in-place versions are compared on every call), so a policy
    being trained never reads features of older weights.

    Args:
        model: a ``Qwen2_5_VLForConditionalGeneration`` (``model.model.get_image_features``).
        max_bytes: memory bound of the kept features (a MiniGUI screen: 180 tokens x 128 floats of
            the tiny model, 92 KB).

    Attributes:
        hits / misses: images served from the cache / encoded.
    """

    def __init__(self, model: Any, max_bytes: int = DEFAULT_CACHE_BYTES // 4) -> None:
        self.model = model
        self.store = ImageStore(max_bytes)
        self.hits = 0
        self.misses = 0
        self._weights: tuple[tuple[int, int], ...] | None = None

    @staticmethod
    def supports(model: Any) -> bool:
        """Whether ``model`` has the vision tower API this cache calls."""
        base = getattr(model, "model", None)
        return callable(getattr(base, "get_image_features", None)) and hasattr(base, "visual")

    def _check_weights(self) -> None:
        now = tuple((id(p), int(p._version)) for p in self.model.model.visual.parameters())
        if now != self._weights:
            self.store.clear()
            self._weights = now

    def encoder_outputs(self, pixel_values: Any, image_grid_thw: Any, keys: list[tuple[Any, ...]]) -> Any:
        import torch
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        if len(keys) != int(image_grid_thw.shape[0]):
            raise ValueError(f"VisionCache: {len(keys)} keys for {int(image_grid_thw.shape[0])} images")
        self._check_weights()
        sizes = image_grid_thw.prod(-1).tolist()
        rows = torch.split(pixel_values, sizes)
        out: list[Any] = [self.store.get(k) for k in keys]
        missing = [i for i, got in enumerate(out) if got is None]
        first: dict[tuple[Any, ...], int] = {}
        todo = [i for i in missing if first.setdefault(keys[i], i) == i]  # a repeat in the batch is encoded once
        if todo:
            self.misses += len(todo)
            with torch.no_grad():
                enc = self.model.model.get_image_features(
                    torch.cat([rows[i] for i in todo]), image_grid_thw[todo], return_dict=True
                )
            for i, feats in zip(todo, enc.pooler_output, strict=True):
                feats = feats.clone()  # not a view that would keep the whole batch's tensor alive
                self.store.put(keys[i], feats, feats.numel() * feats.element_size())
                out[i] = feats
        for i in missing:
            if out[i] is None:
                out[i] = out[first[keys[i]]]
        self.hits += len(keys) - len(todo)
        return BaseModelOutputWithPooling(pooler_output=tuple(out))
