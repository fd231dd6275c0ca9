"""Greedy generations kept on disk, so one ``generate`` call on exactly the same inputs runs once.

Notebooks evaluate some models on the same steps more than once: 02 scores 01's SFT models again
beside its RL models, 08 scores 01's agents as its training seed 0. Greedy decoding on a CPU is
deterministic, so the generated ids of a batch are a function of everything that enters the call;
:class:`GenerationCache` stores them under a digest of all of it and returns them when the same
call comes again:

* the model's weights (every parameter and buffer, by content) and its ``generation_config``;
* the batch as the processor encoded it (``input_ids``, ``attention_mask``, ``mm_token_type_ids``,
  ``image_grid_thw``) and its images (their content keys under the image processor's settings, or
  the ``pixel_values`` themselves);
* the ``generate`` keywords, torch's thread count and the torch and transformers versions.

Only greedy calls are kept: a sampled batch draws from a random state that earlier batches moved.
The cache is off unless a folder is given (:data:`CACHE_ENV`, which :mod:`guirl.runner` sets to
``runs/<profile>/generation_cache`` while a notebook runs); each entry is one small JSON file written
to a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "VERSION", "GenerationCache", "from_env"]

#: Environment variable naming the cache folder (unset: no cache).
CACHE_ENV = "GUIRL_GENERATION_CACHE"
#: Part of every key: a change of what is stored, or of how it is produced, starts a fresh cache.
VERSION = 1
_BATCH_KEYS = ("input_ids", "attention_mask", "mm_token_type_ids", "image_grid_thw")


def _tensor_digest(h: Any, name: str, t: Any) -> None:
    """Feed a tensor's name, dtype, shape and bytes to the hash ``h``."""
    import torch

    t = t.detach().cpu().contiguous()
    h.update(f"{name}:{t.dtype}:{tuple(t.shape)}:".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


class GenerationCache:
    """Greedy ``generate`` outputs of one model under :attr:`folder` (module doc)."""

    def __init__(self, folder: str | Path, model: Any) -> None:
        self.folder = Path(folder)
        self.model = model
        self.hits = 0
        self.misses = 0
        self._weights: tuple[tuple[int, int], ...] | None = None
        self._model_digest = ""

    def _model_key(self) -> str:
        """A digest of the model's weights and generation config, computed again after any change."""
        import torch

        tensors = [*self.model.named_parameters(), *self.model.named_buffers()]
        now = tuple((id(t), int(t._version)) for _, t in tensors)
        if now != self._weights:
            h = hashlib.blake2b(digest_size=20)
            with torch.no_grad():
                for name, t in tensors:
                    _tensor_digest(h, name, t)
            gen = getattr(self.model, "generation_config", None)
            h.update((gen.to_json_string() if gen is not None else "").encode())
            self._model_digest, self._weights = h.hexdigest(), now
        return self._model_digest

    def key(self, enc: Mapping[str, Any], image_keys: Sequence[Any] | None, kwargs: Mapping[str, Any]) -> str:
        """The digest of one ``generate`` call on the encoded batch ``enc`` with ``kwargs``;
        ``image_keys``: the batch's image content keys (with the image processor's settings), else
        ``None`` and the ``pixel_values`` are hashed."""
        import torch
        import transformers

        h = hashlib.blake2b(digest_size=20)
        h.update(f"v{VERSION}|{torch.__version__}|{transformers.__version__}|{torch.get_num_threads()}".encode())
        h.update(self._model_key().encode())
        h.update(json.dumps({k: repr(v) for k, v in sorted(kwargs.items())}).encode())
        for name in _BATCH_KEYS:
            if name in enc:
                _tensor_digest(h, name, enc[name])
        if "pixel_values" in enc:
            if image_keys is not None:
                h.update(repr(list(image_keys)).encode())
            else:
                _tensor_digest(h, "pixel_values", enc["pixel_values"])
        h.update(repr(sorted(k for k in enc if k not in (*_BATCH_KEYS, "pixel_values"))).encode())
        return h.hexdigest()

    def get(self, key: str) -> list[list[int]] | None:
        """The generated ids (per row, padding included) stored under ``key``, or ``None``."""
        path = self.folder / key[:2] / f"{key}.json"
        try:
            ids = json.loads(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return ids

    def put(self, key: str, ids: list[list[int]]) -> None:
        path = self.folder / key[:2] / f"{key}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(ids))
            tmp.replace(path)
        except OSError:
            pass  # a cache that cannot be written is only slower


def from_env(model: Any) -> GenerationCache | None:
    """A :class:`GenerationCache` in the folder :data:`CACHE_ENV` names, or ``None`` when unset."""
    folder = os.environ.get(CACHE_ENV, "").strip()
    return GenerationCache(folder, model) if folder else None
