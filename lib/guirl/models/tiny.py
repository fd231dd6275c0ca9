"""A tiny Qwen2.5-VL built offline: tokenizer, image processor, config and random weights.

The folder written by :func:`build_tiny_model` has the layout of a published Qwen2.5-VL
checkpoint (``config.json``, ``generation_config.json``, ``model.safetensors`` under the
published key names, ``tokenizer.json``/``tokenizer_config.json``, ``preprocessor_config.json``,
``chat_template.jinja``), so every loader and trainer that works on the tiny model works
unchanged on ``Qwen/Qwen2.5-VL-3B-Instruct`` / ``-7B-Instruct`` folders.

Nothing here touches the network: the tokenizer is a byte-level BPE trained with ``tokenizers``
on :func:`guirl.models.corpus.tokenizer_corpus`, and the weights come from the model's own
initialiser under ``torch.manual_seed(seed)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from guirl import paths
from guirl.models.corpus import corpus_sha256, tokenizer_corpus

# Bump when the folder layout or the build recipe changes, so old caches are not reused.
BUILD_FORMAT_VERSION = 1
MARKER_NAME = "guirl_build.json"

# Qwen2.5-VL added tokens in their published order (ids 151643..151664 in the real vocabulary);
# the flag says whether the published tokenizer marks them ``special``.
QWEN2_5_VL_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
CHAT_TEMPLATE_ASSET = "qwen2_5_vl_chat_template.jinja"


def qwen2_5_vl_chat_template() -> str:
    """The official Qwen2.5-VL processor chat template (``chat_template.json`` of the Instruct models).

    Shipped as ``guirl/assets/qwen2_5_vl_chat_template.jinja``. Images render as
    ``<|vision_start|><|image_pad|><|vision_end|>``; a default system prompt is added when the
    first message is not a system message.
    """
    return resources.files("guirl.assets").joinpath(CHAT_TEMPLATE_ASSET).read_text(encoding="utf-8")


@dataclass(frozen=True)
class TinySpec:
    """Sizes of the tiny Qwen2.5-VL. Frozen: its hash names the cache folder.

    Text model: ``text_hidden_size`` with ``text_heads`` heads gives head_dim
    ``text_hidden_size // text_heads``; ``mrope_section`` (temporal, height, width rotary
    frequency counts) must sum to head_dim / 2. Vision tower: ``vision_depth`` blocks of width
    ``vision_hidden_size``; blocks in ``vision_fullatt_block_indexes`` use full attention, the
    others window attention over ``window_size`` pixels. The merger maps to the text width.
    Images are resized so that ``min_pixels <= H*W <= max_pixels`` (pixels of the resized
    image; one LM image token per 28x28 pixels with patch 14 and merge 2).
    """

    bpe_vocab_size: int = 2048  # at most this many BPE tokens (fewer if the corpus runs out of
    # merges; 1957 by default), then the 22 Qwen2.5-VL added tokens
    vocab_multiple: int = 64  # model vocab = len(tokenizer) rounded up to this
    corpus_lines: int = 6000
    text_hidden_size: int = 128
    text_intermediate_size: int = 256
    text_layers: int = 4
    text_heads: int = 4
    text_kv_heads: int = 2
    mrope_section: tuple[int, int, int] = (4, 6, 6)
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = True
    vision_depth: int = 2
    vision_hidden_size: int = 64
    vision_intermediate_size: int = 128
    vision_heads: int = 4
    vision_fullatt_block_indexes: tuple[int, ...] = (1,)
    window_size: int = 112
    patch_size: int = 14
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 4 * 28 * 28
    max_pixels: int = 256 * 28 * 28  # at most 256 image tokens per image: cheap on CPU

    def __post_init__(self) -> None:
        def bad(msg: str) -> ValueError:
            return ValueError(f"TinySpec: {msg} (got {self!r})")

        if self.text_hidden_size % self.text_heads:
            raise bad("text_hidden_size must be divisible by text_heads")
        if self.text_heads % self.text_kv_heads:
            raise bad("text_heads must be divisible by text_kv_heads")
        head_dim = self.text_hidden_size // self.text_heads
        if len(self.mrope_section) != 3 or 2 * sum(self.mrope_section) != head_dim:
            raise bad(f"mrope_section must be 3 ints summing to head_dim/2 = {head_dim // 2}")
        if self.vision_hidden_size % self.vision_heads:
            raise bad("vision_hidden_size must be divisible by vision_heads")
        if any(not 0 <= i < self.vision_depth for i in self.vision_fullatt_block_indexes):
            raise bad("vision_fullatt_block_indexes must lie in [0, vision_depth)")
        factor = self.patch_size * self.spatial_merge_size
        if self.window_size % factor:
            raise bad(f"window_size must be a multiple of patch_size*spatial_merge_size = {factor}")
        if not factor * factor <= self.min_pixels <= self.max_pixels:
            raise bad(f"need {factor * factor} <= min_pixels <= max_pixels")
        if self.bpe_vocab_size < 512:
            raise bad("bpe_vocab_size must be >= 512 (256 byte symbols plus merges)")


def default_cache_dir() -> Path:
    """Where tiny models are cached: ``<cache>/models`` with ``<cache>`` = ``$GUIRL_CACHE`` if set,
    else ``<repo>/.cache`` (:func:`guirl.paths.cache_dir`)."""
    try:
        return paths.cache_dir() / "models"
    except FileNotFoundError:  # not inside a checkout
        env = os.environ.get("GUIRL_CACHE", "").strip()
        return (Path(env).expanduser().resolve() if env else Path.cwd() / ".cache") / "models"


def _library_versions() -> dict[str, str]:
    import tokenizers
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def tiny_model_key(spec: TinySpec = TinySpec(), seed: int = 0) -> str:
    """Hex SHA-256 identifying a build: spec, seed, corpus, chat template, recipe and library versions."""
    payload = {
        "format": BUILD_FORMAT_VERSION,
        "spec": dataclasses.asdict(spec),
        "seed": seed,
        "corpus": corpus_sha256(tokenizer_corpus(spec.corpus_lines)),
        "chat_template": hashlib.sha256(qwen2_5_vl_chat_template().encode()).hexdigest(),
        "versions": _library_versions(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def tiny_model_dirname(spec: TinySpec = TinySpec(), seed: int = 0) -> str:
    """Folder name of a tiny build, e.g. ``tiny-qwen2.5-vl-seed0-1a2b3c4d5e6f``."""
    return _dirname(seed, tiny_model_key(spec, seed))


def _dirname(seed: int, key: str) -> str:
    return f"tiny-qwen2.5-vl-seed{seed}-{key[:12]}"


def is_complete_build(path: str | os.PathLike[str], key: str | None = None) -> bool:
    """True when ``path`` holds a finished build (marker present and, if given, for ``key``)."""
    marker = Path(path) / MARKER_NAME
    if not marker.is_file():
        return False
    if key is None:
        return True
    try:
        return json.loads(marker.read_text())["key"] == key
    except (ValueError, KeyError):
        return False


def _train_tokenizer(spec: TinySpec):
    """Train the byte-level BPE and wrap it as a ``Qwen2Tokenizer`` with the Qwen2.5-VL added tokens.

    Reads ``spec.bpe_vocab_size``, ``corpus_lines`` and ``max_position_embeddings`` only (the tiny
    Qwen3 of :mod:`guirl.models.tiny_text` passes its own spec with those fields)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX  # Qwen2's split regex

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            # Qwen2 regex: one token per digit, letters runs, punctuation runs, whitespace.
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.bpe_vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(tokenizer_corpus(spec.corpus_lines), trainer=trainer)
    model_json = json.loads(bpe.to_str())["model"]
    vocab: dict[str, int] = dict(model_json["vocab"])
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model_json["merges"]]
    n_bpe = len(vocab)
    # Added tokens follow the BPE vocabulary, in the published order, as in the real checkpoints.
    for i, (tok, _) in enumerate(QWEN2_5_VL_ADDED_TOKENS):
        vocab[tok] = n_bpe + i
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        errors="replace",
        model_max_length=spec.max_position_embeddings,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    tokenizer.add_tokens(
        [
            AddedToken(tok, special=special, normalized=False, lstrip=False, rstrip=False, single_word=False)
            for tok, special in QWEN2_5_VL_ADDED_TOKENS
        ]
    )
    for i, (tok, _) in enumerate(QWEN2_5_VL_ADDED_TOKENS):
        got = tokenizer.convert_tokens_to_ids(tok)
        if got != n_bpe + i:
            raise RuntimeError(f"tiny tokenizer: {tok} got id {got}, expected {n_bpe + i}")
    tokenizer.chat_template = qwen2_5_vl_chat_template()
    return tokenizer


def _model_config(spec: TinySpec, tokenizer):
    from transformers import Qwen2_5_VLConfig

    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok, _ in QWEN2_5_VL_ADDED_TOKENS}
    vocab_size = -(-len(tokenizer) // spec.vocab_multiple) * spec.vocab_multiple
    text_config = {
        "vocab_size": vocab_size,
        "hidden_size": spec.text_hidden_size,
        "intermediate_size": spec.text_intermediate_size,
        "num_hidden_layers": spec.text_layers,
        "num_attention_heads": spec.text_heads,
        "num_key_value_heads": spec.text_kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "rope_scaling": {"type": "mrope", "mrope_section": list(spec.mrope_section)},
        "rope_theta": spec.rope_theta,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": spec.tie_word_embeddings,
    }
    vision_config = {
        "depth": spec.vision_depth,
        "hidden_size": spec.vision_hidden_size,
        "intermediate_size": spec.vision_intermediate_size,
        "num_heads": spec.vision_heads,
        "hidden_act": "silu",
        "in_channels": 3,
        "out_hidden_size": spec.text_hidden_size,  # merger output = LM width
        "patch_size": spec.patch_size,
        "spatial_merge_size": spec.spatial_merge_size,
        "temporal_patch_size": spec.temporal_patch_size,
        "window_size": spec.window_size,
        "fullatt_block_indexes": list(spec.vision_fullatt_block_indexes),
        "tokens_per_second": 2,
    }
    return Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=spec.tie_word_embeddings,
        architectures=["Qwen2_5_VLForConditionalGeneration"],
    )


def _write_build(folder: Path, spec: TinySpec, seed: int, key: str) -> None:
    """Write every file of the tiny checkpoint into ``folder`` (marker last)."""
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer = _train_tokenizer(spec)
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=spec.min_pixels,
        max_pixels=spec.max_pixels,
        patch_size=spec.patch_size,
        temporal_patch_size=spec.temporal_patch_size,
        merge_size=spec.spatial_merge_size,
    )
    # Name the real processor class (as the published tokenizer_config.json does), so that
    # AutoProcessor resolves Qwen2_5_VLProcessor where torchvision is installed.
    tokenizer._set_processor_class("Qwen2_5_VLProcessor")
    tokenizer.save_pretrained(folder)
    image_processor.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(qwen2_5_vl_chat_template(), encoding="utf-8")

    config = _model_config(spec, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        pad_token_id=config.text_config.pad_token_id,
        eos_token_id=[config.text_config.eos_token_id, config.text_config.bos_token_id],
        do_sample=False,
    )
    model.save_pretrained(folder)
    marker = {
        "key": key,
        "seed": seed,
        "spec": dataclasses.asdict(spec),
        "versions": _library_versions(),
        "format": BUILD_FORMAT_VERSION,
    }
    (folder / MARKER_NAME).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")


def build_tiny_model(
    out_dir: str | os.PathLike[str] | None = None, *, seed: int = 0, spec: TinySpec = TinySpec()
) -> Path:
    """Build (or reuse) the tiny offline Qwen2.5-VL and return its checkpoint folder.

    Args:
        out_dir: cache folder under which the model folder ``tiny_model_dirname(spec, seed)`` is
            created; default :func:`default_cache_dir` (``$GUIRL_CACHE/models`` or
            ``<repo>/.cache/models``).
        seed: torch seed for the random weights (the tokenizer does not depend on it).
        spec: sizes; a changed spec (or seed, corpus, template, library versions) gives a new
            folder name, so a stale build is never reused.

    Returns:
        The folder, loadable with :func:`guirl.models.load_model` / :func:`load_processor`.

    A folder holding the completion marker is returned as is. Otherwise the build goes to a
    temporary sibling folder that is renamed into place only when complete, so an interrupted
    build never leaves a half-written model; concurrent builders of the same folder are safe.
    Deterministic: the same arguments give bit-identical weights and tokenizer files.
    """
    parent = Path(out_dir) if out_dir is not None else default_cache_dir()
    key = tiny_model_key(spec, seed)
    return build_once(parent / _dirname(seed, key), key, lambda tmp: _write_build(tmp, spec, seed, key))


def build_once(final: Path, key: str, write: Callable[[Path], None]) -> Path:
    """``final`` when it holds a complete build of ``key``; else ``write`` fills a temporary sibling
    folder, renamed to ``final`` only when complete (an interrupted build leaves nothing half
    written; concurrent builders of the same folder are safe). The tiny models' shared cache step."""
    if is_complete_build(final, key):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not is_complete_build(final, key):
        shutil.rmtree(final)  # our own hashed name without the marker: a broken leftover
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        write(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        try:
            os.rename(tmp, final)
        except OSError:
            if not is_complete_build(final, key):  # lost a race to a broken folder: not expected
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
