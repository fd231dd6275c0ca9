"""Tests for guirl.models.image_cache: the memoised image processor gives the real processor's tensors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from guirl.models import build_tiny_model, load_processor
from guirl.models.image_cache import CachedImageProcessor, ImageStore, cached_processor, image_key, shared_store

MIN_PX, MAX_PX = 3136, 141120  # tiny profile pixel budget


@pytest.fixture(scope="module")
def processor(session_cache: Path) -> Any:
    """The tiny Qwen2.5-VL processor (PIL image backend), built once in the shared cache."""
    return load_processor(build_tiny_model(session_cache / "models", seed=0), min_pixels=MIN_PX, max_pixels=MAX_PX)


def screen(seed: int, size: tuple[int, int] = (280, 504)) -> Image.Image:
    """A random RGB image of ``size`` (width, height) px."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def assert_same(a: Any, b: Any) -> None:
    assert list(a.keys()) == list(b.keys())
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert torch.equal(a[k], b[k]), k


CASES = [
    # one screen
    [[screen(0)]],
    # a 1AO-like batch: step t's screen is step t+1's history screen
    [[screen(0), screen(1)], [screen(1), screen(2)], [screen(2), screen(3)]],
    # sizes that the processor resizes (not multiples of 28, one above max_pixels) beside a MiniGUI screen
    [[screen(4, (100, 60))], [screen(5, (600, 900)), screen(0)]],
    # the same image object three times in one prompt
    [[screen(6)] * 3],
]


@pytest.mark.parametrize("images", CASES)
def test_cached_equals_processor(processor: Any, images: list[list[Image.Image]]) -> None:
    cached = CachedImageProcessor(processor.image_processor)
    for _ in range(2):  # cold, then warm: both equal the real processor's output
        assert_same(cached(images, return_tensors="pt"), processor.image_processor(images, return_tensors="pt"))
    assert cached.misses == len({image_key(x) for ims in images for x in ims})


def test_whole_processor_call_is_unchanged(processor: Any) -> None:
    """Text expansion (image pad tokens per image) and padding see the same grids."""
    text = "<|vision_start|><|image_pad|><|vision_end|> where?"
    texts = [text, text + " and " + text]
    images = [[screen(1)], [screen(1, (560, 280)), screen(2)]]
    kw = dict(return_tensors="pt", padding=True, padding_side="left")
    fast = cached_processor(processor)
    assert_same(fast(text=texts, images=images, **kw), processor(text=texts, images=images, **kw))
    assert_same(fast(text=texts, images=images, **kw), processor(text=texts, images=images, **kw))
    assert fast.image_processor.hits == 3 and fast.image_processor.misses == 3


def test_processor_copy_leaves_original_alone(processor: Any) -> None:
    inner = processor.image_processor
    fast = cached_processor(processor)
    assert processor.image_processor is inner  # the caller's processor is not modified
    assert fast.tokenizer is processor.tokenizer  # a shallow copy: the tokenizer is shared
    assert cached_processor(fast) is fast  # already cached: returned as it is
    assert fast.image_processor.merge_size == inner.merge_size  # attributes are the wrapped processor's


@pytest.mark.parametrize(
    "sequence, hits, misses",
    [
        ([0, 0, 1], 1, 2),  # a repeat is a hit
        ([0, 1, 2], 0, 3),  # all distinct
        ([3, 3, 3, 3], 3, 1),  # one image, four times
    ],
)
def test_hit_and_miss_counts(processor: Any, sequence: list[int], hits: int, misses: int) -> None:
    cached = CachedImageProcessor(processor.image_processor)
    for seed in sequence:
        cached([screen(seed)], return_tensors="pt")
    assert (cached.hits, cached.misses) == (hits, misses)


def test_content_key_not_identity() -> None:
    a, b = screen(0), screen(0)
    assert a is not b and image_key(a) == image_key(b)  # equal pixels: one entry
    assert image_key(screen(0)) != image_key(screen(1))  # same size, other pixels
    assert image_key(screen(0).convert("L")) != image_key(screen(0))  # mode is part of the key
    assert image_key(np.zeros((4, 4, 3))) is None  # not a PIL image: not keyed


def test_memory_bound_evicts_least_recently_used(processor: Any) -> None:
    one = processor.image_processor([screen(0)], return_tensors="pt")
    size = sum(v.numel() * v.element_size() for v in one.values())
    cached = CachedImageProcessor(processor.image_processor, max_bytes=2 * size)
    for seed in (0, 1, 0, 2):  # 0 was used after 1, so 1 is dropped when 2 arrives
        cached([screen(seed)], return_tensors="pt")
    assert cached.nbytes <= 2 * size
    cached([screen(0)], return_tensors="pt")
    assert cached.hits == 2  # the repeat of 0, then 0 again
    cached([screen(1)], return_tensors="pt")
    assert cached.misses == 4  # 0, 1, 2 and 1 again
    too_small = CachedImageProcessor(processor.image_processor, max_bytes=size - 1)
    assert_same(too_small([screen(0)], return_tensors="pt"), one)  # processed, not kept
    assert too_small.nbytes == 0


class Recorder:
    """A stand-in image processor that records its calls."""

    merge_size = 2

    def __init__(self) -> None:
        self.calls: list[tuple[Any, dict[str, Any]]] = []

    def __call__(self, images: Any, **kwargs: Any) -> str:
        self.calls.append((images, kwargs))
        return "inner"


@pytest.mark.parametrize(
    "images, kwargs",
    [
        ([np.zeros((8, 8, 3), dtype=np.uint8)], {"return_tensors": "pt"}),  # arrays are not keyed
        ([screen(0)], {"return_tensors": "np"}),  # only torch outputs are concatenated here
        ([screen(0)], {}),  # no return_tensors: the processor's lists
        ([[[screen(0)]]], {"return_tensors": "pt"}),  # deeper nesting than prompts x images
        ([], {"return_tensors": "pt"}),  # nothing to process
    ],
)
def test_anything_else_goes_to_the_processor(images: Any, kwargs: dict[str, Any]) -> None:
    rec = Recorder()
    assert CachedImageProcessor(rec)(images, **kwargs) == "inner"
    assert rec.calls == [(images, kwargs)]


def test_rejects_negative_bound() -> None:
    with pytest.raises(ValueError, match="max_bytes must be >= 0"):
        CachedImageProcessor(Recorder(), max_bytes=-1)


def test_shared_store_serves_every_wrapper_of_the_same_settings(processor: Any, session_cache: Path) -> None:
    """Two policies' processors (shared=True) encode a screen once between them; a processor with
    other settings never reads those rows."""
    a = cached_processor(processor, shared=True).image_processor
    b = cached_processor(processor, shared=True).image_processor
    assert a is not b and a._store is b._store is shared_store()
    im = screen(41)
    a([im], return_tensors="pt")
    assert_same(b([im], return_tensors="pt"), processor.image_processor([im], return_tensors="pt"))
    assert (a.misses, b.hits, b.misses) == (1, 1, 0)
    other = load_processor(
        build_tiny_model(session_cache / "models", seed=0), min_pixels=MIN_PX, max_pixels=MAX_PX // 4
    )
    c = cached_processor(other, shared=True).image_processor
    assert_same(c([im], return_tensors="pt"), other.image_processor([im], return_tensors="pt"))
    assert c.misses == 1  # another pixel budget: its own rows
    assert b.last_keys == [image_key(im)]


def test_image_store_bound_and_order() -> None:
    store = ImageStore(max_bytes=10)
    store.put(("a",), "A", 4)
    store.put(("b",), "B", 4)
    assert store.get(("a",)) == "A"  # a is now the most recent
    store.put(("c",), "C", 4)  # 12 > 10: the least recent (b) goes
    assert store.get(("b",)) is None and store.get(("a",)) == "A" and len(store) == 2
    store.put(("d",), "D", 11)  # larger than the bound: not kept
    assert store.get(("d",)) is None and store.nbytes == 8


@pytest.mark.parametrize("seed", range(6))
def test_fast_processor_gives_the_processors_bytes(processor: Any, seed: int, session_cache: Path) -> None:
    """MiniGUI-size screens (no resize) through the lookup table: the processor's exact tensors;
    anything else (a size the processor resizes, another mode) is the processor's own call."""
    from guirl.models.image_cache import FastImageProcessor, fast_processor

    fast = FastImageProcessor(processor.image_processor)
    rng = np.random.default_rng(seed)
    screens = [screen(int(s)) for s in rng.integers(0, 1000, size=3)]
    for images in ([screens[0]], [screens[:2], screens[2:]], [[screen(7, (280, 504))], [screens[1]]]):
        assert_same(fast(images, return_tensors="pt"), processor.image_processor(images, return_tensors="pt"))
    for other in ([screen(4, (100, 60))], [screen(5).convert("L")], [screen(6, (600, 900))]):
        assert_same(fast(other, return_tensors="pt"), processor.image_processor(other, return_tensors="pt"))
    assert fast._enabled
    full = fast_processor(processor)
    text = ["<|vision_start|><|image_pad|><|vision_end|> a", "<|vision_start|><|image_pad|><|vision_end|> b"]
    kw = dict(return_tensors="pt", padding=True, padding_side="right")
    assert_same(
        full(text=text, images=[[screens[0]], [screens[1]]], **kw),
        processor(text=text, images=[[screens[0]], [screens[1]]], **kw),
    )
    assert processor.image_processor is not full.image_processor and fast_processor(full) is full


def test_fast_processor_turns_itself_off_when_it_would_differ(processor: Any) -> None:
    from guirl.models.image_cache import FastImageProcessor

    fast = FastImageProcessor(processor.image_processor)
    fast._table()
    fast._lut[0, 10] += 1e-3  # a wrong table: the first check against the processor catches it
    im = screen(8)
    arr = np.asarray(im).copy()
    arr[0, 0, 0] = 10
    im = Image.fromarray(arr)
    with pytest.warns(UserWarning, match="differs from Qwen2VLImageProcessorPil"):
        got = fast([im], return_tensors="pt")
    assert_same(got, processor.image_processor([im], return_tensors="pt")) and not fast._enabled
