"""Intra-query trajectory de-duplication by image-feature cosine similarity (AgentCPM-GUI Sec. 2.4).

The paper embeds each trajectory as the mean ResNet-50 feature of its screenshots, groups
trajectories by their query and, within a group, drops a trajectory whose cosine similarity to any
trajectory already kept exceeds a fixed threshold (about 40% of AITW kept). ResNet-50 weights cannot
be downloaded here, so the feature is a fixed pixel embedding (:func:`pixel_embedding`): the
screenshot as a grayscale thumbnail of ``size`` pixels (default 10 x 18, the 28-px patch grid of a
280 x 504 MiniGUI screen), values in [0, 1]. :func:`trajectory_embeddings` averages a trajectory's
thumbnails and subtracts the mean over every trajectory given (phone screens share most of their
pixels; the centred vectors compare what differs), and :func:`deduplicate` is the paper's greedy
rule on any embeddings. The threshold is not given by the paper (``agentcpm.dedup_threshold``).

Conventions: trajectories are visited in the order given, so of two duplicates the first is kept;
the cosine similarity of two zero vectors is 1 (identical after centring) and of a zero and a
non-zero vector 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["THUMBNAIL", "cosine", "deduplicate", "pixel_embedding", "trajectory_embeddings"]

#: Default thumbnail (width, height) of :func:`pixel_embedding`.
THUMBNAIL: tuple[int, int] = (10, 18)


def pixel_embedding(image: Any, size: tuple[int, int] = THUMBNAIL) -> np.ndarray:
    """A screenshot (a PIL image or a path) as a flat float32 vector: grayscale, resized to ``size``
    (width, height) with a box filter, scaled to [0, 1]."""
    from PIL import Image

    im = Image.open(image) if isinstance(image, (str, Path)) else image
    with im.convert("L") as gray:
        small = gray.resize(size, Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32).reshape(-1) / 255.0


def trajectory_embeddings(
    trajectories: Sequence[Sequence[Any]], size: tuple[int, int] = THUMBNAIL, *, center: bool = True
) -> np.ndarray:
    """``(n, d)`` embeddings: per trajectory the mean :func:`pixel_embedding` of its screenshots
    (``trajectories[i]``: the images or paths, at least one), minus the mean over the ``n``
    trajectories when ``center``."""
    if not trajectories:
        return np.zeros((0, size[0] * size[1]), dtype=np.float32)
    rows = []
    for i, shots in enumerate(trajectories):
        if not shots:
            raise ValueError(f"trajectory {i} has no screenshot")
        rows.append(np.mean([pixel_embedding(s, size) for s in shots], axis=0))
    emb = np.stack(rows).astype(np.float64)
    return emb - emb.mean(axis=0, keepdims=True) if center else emb


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity; 1 for two zero vectors, 0 for a zero and a non-zero one (module doc)."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def deduplicate(queries: Sequence[str], embeddings: np.ndarray, threshold: float) -> list[bool]:
    """Which trajectories to keep (AgentCPM-GUI Sec. 2.4): visited in order, a trajectory is dropped
    when its cosine similarity to a kept trajectory of the same query is above ``threshold``.
    ``queries[i]`` / ``embeddings[i]``: trajectory ``i``'s query and embedding."""
    emb = np.asarray(embeddings, dtype=np.float64)
    if emb.ndim != 2 or len(emb) != len(queries):
        raise ValueError(f"deduplicate: {len(queries)} queries for embeddings of shape {emb.shape}")
    kept_by_query: dict[str, list[int]] = {}
    keep = []
    for i, q in enumerate(queries):
        kept = kept_by_query.setdefault(q, [])
        dup = any(cosine(emb[i], emb[j]) > threshold for j in kept)
        keep.append(not dup)
        if not dup:
            kept.append(i)
    return keep
