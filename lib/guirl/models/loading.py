"""Load a Qwen2.5-VL or a text-only Qwen3 processor and model from a local folder (tiny build or
real checkpoint).

All loading goes through :func:`load_processor` and :func:`load_model`, which only accept local
folders (``local_files_only=True``): the Hugging Face hub is unreachable on this project's
machines. Where torchvision imports (GPU boxes), the processor is plain
``AutoProcessor.from_pretrained``; without it, transformers 5.x cannot build
``Qwen2_5_VLProcessor`` (its video processor needs torchvision), so
:class:`ImageOnlyQwen2_5_VLProcessor` is used instead: same class behaviour, no video.

A text-only causal LM (``model_type: qwen3``: CES's State Tracker, :mod:`guirl.models.tiny_text`)
loads as ``AutoModelForCausalLM`` with a :class:`TextProcessor`: the tokenizer behind the
processor interface the policies and the RL engine call (``apply_chat_template``, ``__call__``
with ``text=`` and no images, ``batch_decode``, ``tokenizer``, ``save_pretrained``), so
:class:`guirl.rollout.HFPolicy`, :func:`guirl.rl.logprobs.encode_samples` and the training
stages take it unchanged. :func:`load_folder` loads any stage output, merging a LoRA adapter.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2_5_VLProcessor

from guirl.models.vision_attention import VISION_ATTENTION_MODES, set_vision_attention

SUPPORTED_MODEL_TYPES: tuple[str, ...] = ("qwen2_5_vl", "qwen3")
#: The model types that read text only (no image processor; :class:`TextProcessor`).
TEXT_MODEL_TYPES: tuple[str, ...] = ("qwen3",)


class CheckpointNotFoundError(FileNotFoundError):
    """A model/processor folder is missing or incomplete; the message says how to fix it."""


class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    """``Qwen2_5_VLProcessor`` without a video processor, for environments without torchvision.

    The constructor takes only the image processor, tokenizer and chat template; everything
    else (image-token expansion by ``image_grid_thw``, ``mm_token_type_ids``,
    ``apply_chat_template``, decoding) is inherited unchanged. Passing ``videos`` fails.
    """

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(
            image_processor=image_processor,
            tokenizer=tokenizer,
            video_processor=None,
            chat_template=chat_template,
            **kwargs,
        )


@lru_cache(maxsize=1)
def torchvision_available() -> bool:
    """True when ``import torchvision`` succeeds (a CUDA-only wheel on a CPU torch fails here)."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # ImportError, or a broken binary (RuntimeError / OSError)
        return False
    return True


def _missing_message(path: Path, what: str) -> str:
    hint_hub = ""
    if not path.is_absolute() and str(path).count("/") == 1 and not path.exists():
        hint_hub = (
            f" '{path}' looks like a Hugging Face hub id; the hub is unreachable here, "
            "so download the checkpoint elsewhere and copy the folder in."
        )
    return (
        f"{what}: no local checkpoint folder at '{path}'.{hint_hub} Either build the tiny offline "
        'model with `python -c "from guirl.models import build_tiny_model; print(build_tiny_model())"` '
        "and use the folder it prints, or point the profile's model path at a local folder holding "
        "a Qwen2.5-VL checkpoint (config.json, *.safetensors, tokenizer.json, tokenizer_config.json, "
        "preprocessor_config.json) or, for a text-only model, a Qwen3 one (no preprocessor_config.json)."
    )


def resolve_checkpoint(path: str | os.PathLike[str], what: str = "load") -> Path:
    """Check that ``path`` is a local checkpoint folder of a supported model type
    (:data:`SUPPORTED_MODEL_TYPES`: Qwen2.5-VL, or the text-only Qwen3) and return it as a ``Path``.

    Raises:
        CheckpointNotFoundError: the folder or its ``config.json`` is missing (message says how
            to build the tiny model or where to point the profile).
        ValueError: ``config.json`` is unreadable or names another model type.
    """
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CheckpointNotFoundError(_missing_message(p, what))
    cfg = p / "config.json"
    if not cfg.is_file():
        raise CheckpointNotFoundError(
            f"{what}: folder '{p}' has no config.json, so it is not a model checkpoint. "
            + _missing_message(p, what).split(".", 1)[1].strip()
        )
    try:
        model_type = json.loads(cfg.read_text())["model_type"]
    except (ValueError, KeyError) as err:
        raise ValueError(f"{what}: '{cfg}' is not a valid config.json with a 'model_type' key ({err}).") from err
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{what}: '{cfg}' has model_type '{model_type}'; guirl.models loads "
            f"{SUPPORTED_MODEL_TYPES} checkpoints only."
        )
    return p


class CorruptCheckpointError(ValueError):
    """A weight file of a checkpoint folder is torn or corrupt (one line naming it and the fix)."""


def corrupt_weight_files(path: str | os.PathLike[str]) -> list[tuple[Path, str]]:
    """``[(file, why), ...]`` for the ``*.safetensors`` files under ``path`` whose header does not
    load (a file cut short by a stopped run, or overwritten); ``[]`` when every one loads. Reads
    the headers only."""
    from safetensors import SafetensorError, safe_open

    bad = []
    for file in sorted(Path(path).glob("*.safetensors")):
        try:
            with safe_open(str(file), "pt") as f:
                f.keys()
        except (SafetensorError, OSError) as err:
            bad.append((file, str(err).splitlines()[0] if str(err) else type(err).__name__))
    return bad


def check_weight_files(path: str | os.PathLike[str], fix: str | None = None) -> None:
    """Raise :class:`CorruptCheckpointError` naming the first corrupt weight file under ``path``
    (:func:`corrupt_weight_files`) and ``fix`` (default: delete the stage folder that wrote it and
    run it again)."""
    bad = corrupt_weight_files(path)
    if bad:
        file, why = bad[0]
        fix = fix or (
            f"delete the folder of the stage that wrote it ({Path(path).parent if Path(path).name == 'final' else path}) "
            "and run that stage again"
        )
        raise CorruptCheckpointError(f"{file}: the weights are corrupt ({why}); {fix}")


def model_type(path: str | os.PathLike[str]) -> str:
    """The ``model_type`` of a checkpoint folder (checked by :func:`resolve_checkpoint`)."""
    p = resolve_checkpoint(path, "model_type")
    return str(json.loads((p / "config.json").read_text())["model_type"])


def is_text_model(path: str | os.PathLike[str]) -> bool:
    """True for a text-only checkpoint (:data:`TEXT_MODEL_TYPES`)."""
    return model_type(path) in TEXT_MODEL_TYPES


def _flat_content(messages: Any) -> Any:
    """Chat messages with structured text content joined into one string per message (a text-only
    chat template, e.g. Qwen3's, renders only string content); an image part raises."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for c in content:
                if isinstance(c, dict) and c.get("type") not in (None, "text"):
                    raise ValueError(f"a text-only model got a {c.get('type')!r} part in a {m.get('role')!r} message")
                parts.append(c.get("text", "") if isinstance(c, dict) else str(c))
            m = {**m, "content": "".join(parts)}
        out.append(m)
    return out


class TextProcessor:
    """The processor interface of a text-only causal LM (module doc): a tokenizer behind the calls
    a Qwen2.5-VL processor answers. ``__call__`` refuses images (an empty image list per prompt is
    what the policies pass for a text prompt and is accepted); ``apply_chat_template`` joins
    structured text content into strings first, so the same messages render under the tiny
    model's Qwen2.5 template and a real Qwen3 template. ``tokenizer`` is the tokenizer itself
    (what TRL's ``SFTTrainer`` takes as ``processing_class`` for a text model)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str]) -> TextProcessor:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path, local_files_only=True))

    def __repr__(self) -> str:
        return f"TextProcessor({type(self.tokenizer).__name__}, {len(self.tokenizer)} tokens)"

    @property
    def chat_template(self) -> str | None:
        return self.tokenizer.chat_template

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        return self.tokenizer.apply_chat_template(_flat_content(messages), **kwargs)

    def __call__(self, text: Any = None, images: Any = None, **kwargs: Any) -> Any:
        if images is not None and any(images if not isinstance(images, list) else [x for x in images if x]):
            raise ValueError("a text-only model takes no images; this prompt has some")
        return self.tokenizer(text, **kwargs)

    def batch_decode(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer.batch_decode(*args, **kwargs)

    def decode(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer.decode(*args, **kwargs)

    def save_pretrained(self, path: str | os.PathLike[str], **kwargs: Any) -> Any:
        return self.tokenizer.save_pretrained(path, **kwargs)


def load_processor(
    path: str | os.PathLike[str], *, min_pixels: int | None = None, max_pixels: int | None = None
) -> Qwen2_5_VLProcessor:
    """Load the processor (tokenizer + image processor + chat template) of a local checkpoint.

    Args:
        path: local checkpoint folder (tiny build or a real Qwen2.5-VL folder).
        min_pixels, max_pixels: optional overrides of the image processor's resize bounds
            (pixels of the resized image, H*W); e.g. cap a real 3B/7B processor for CPU runs.

    Returns:
        ``AutoProcessor`` result when torchvision imports, else :class:`ImageOnlyQwen2_5_VLProcessor`;
        a :class:`TextProcessor` for a text-only model (the pixel bounds do not apply).
        Calling it with ``images=`` and chat-templated text returns ``input_ids``,
        ``attention_mask``, ``pixel_values`` (patches x (3*2*14*14)), ``image_grid_thw``
        (images x 3) and ``mm_token_type_ids``.
    """
    p = resolve_checkpoint(path, "load_processor")
    if is_text_model(p):
        return TextProcessor.from_pretrained(p)  # type: ignore[return-value]  # no pixels to bound
    overrides: dict[str, Any] = {}
    if min_pixels is not None:
        overrides["min_pixels"] = min_pixels
    if max_pixels is not None:
        overrides["max_pixels"] = max_pixels
    if torchvision_available():
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(p, local_files_only=True)
    else:
        processor = ImageOnlyQwen2_5_VLProcessor.from_pretrained(p, local_files_only=True)
    if overrides:
        ip = processor.image_processor
        size = dict(ip.size)
        size["shortest_edge"] = overrides.get("min_pixels", size.get("shortest_edge"))
        size["longest_edge"] = overrides.get("max_pixels", size.get("longest_edge"))
        if size["shortest_edge"] > size["longest_edge"]:
            raise ValueError(
                f"load_processor('{p}'): min_pixels {size['shortest_edge']} > max_pixels {size['longest_edge']}"
            )
        ip.size = type(ip.size)(**size) if not isinstance(ip.size, dict) else size
    return processor


_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_model(
    path: str | os.PathLike[str],
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    attn_implementation: str | None = None,
    vision_attention: str = "fused",
):
    """Load ``Qwen2_5_VLForConditionalGeneration`` (or, for a text-only Qwen3 folder,
    ``AutoModelForCausalLM``) from a local folder, in eval mode.

    Args:
        path: local checkpoint folder.
        dtype: parameter dtype: a ``torch.dtype`` or one of ``"float32"``, ``"bfloat16"``,
            ``"float16"``, ``"auto"`` (the checkpoint's own dtype), as in profile YAML files.
            ``torch.float32`` on CPU; ``torch.bfloat16`` on GPU.
        device: where to put the model (``"cpu"``, ``"cuda"``, ``"cuda:0"``...).
        attn_implementation: ``None`` (transformers default, sdpa), ``"eager"``,
            ``"sdpa"`` or ``"flash_attention_2"``.
        vision_attention: ``"fused"`` (the vision tower's window and full attention as a few
            batched calls under sdpa, :mod:`guirl.models.vision_attention`) or ``"loop"``
            (transformers' one call per window).
    """
    from transformers import AutoModelForCausalLM, Qwen2_5_VLForConditionalGeneration

    p = resolve_checkpoint(path, "load_model")
    if vision_attention not in VISION_ATTENTION_MODES:
        raise ValueError(
            f"load_model('{p}'): vision_attention {vision_attention!r} is not one of {', '.join(VISION_ATTENTION_MODES)}"
        )
    if isinstance(dtype, str) and dtype != "auto":
        if dtype not in _DTYPES:
            raise ValueError(f"load_model('{p}'): dtype {dtype!r} is not one of {sorted(_DTYPES)} or 'auto'")
        dtype = _DTYPES[dtype]
    check_weight_files(p)  # a torn file is named, not a deserialisation traceback
    kwargs: dict[str, Any] = {"dtype": dtype, "local_files_only": True}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if is_text_model(p):
        model = AutoModelForCausalLM.from_pretrained(p, **kwargs)
    else:
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(p, **kwargs)
        set_vision_attention(model, vision_attention)
    return model.to(device).eval()


def load_policy(
    base_model: str | os.PathLike[str],
    adapter: str | os.PathLike[str] | None = None,
    *,
    min_pixels: int,
    max_pixels: int,
    dtype: torch.dtype | str = "float32",
    device: str | torch.device = "cpu",
):
    """``(model, processor)`` for generation: a local checkpoint, optionally with a PEFT LoRA
    ``adapter`` folder merged into it, in eval mode. ``min_pixels`` / ``max_pixels`` set the
    processor's resize bounds; ``dtype`` and ``device`` as in :func:`load_model`."""
    processor = load_processor(base_model, min_pixels=min_pixels, max_pixels=max_pixels)
    model = load_model(base_model, dtype=dtype, device=device)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    model.eval()
    return model, processor


def load_trained(
    result: dict[str, Any],
    *,
    min_pixels: int,
    max_pixels: int,
    dtype: torch.dtype | str = "float32",
    device: str | torch.device = "cpu",
):
    """``(model, processor)`` of a finished training stage, from its ``result.json`` record
    (``adapter``: whether it trained a LoRA adapter, ``final``: the saved folder,
    ``base_model``: the model the adapter applies to): the base model with the adapter merged,
    or the saved full model."""
    for key in ("adapter", "final"):
        if key not in result:
            raise KeyError(f"load_trained: the stage result has no {key!r} key (keys: {sorted(result)})")
    if result["adapter"]:
        if "base_model" not in result:
            raise KeyError("load_trained: a LoRA stage result must name its 'base_model'")
        return load_policy(
            result["base_model"],
            result["final"],
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            dtype=dtype,
            device=device,
        )
    return load_policy(result["final"], None, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device)


def adapter_base(path: str | os.PathLike[str]) -> Path | None:
    """The base model folder of a PEFT LoRA adapter folder (``adapter_config.json``'s
    ``base_model_name_or_path``), or ``None`` when ``path`` holds full weights."""
    cfg = Path(path) / "adapter_config.json"
    if not cfg.is_file():
        return None
    return Path(json.loads(cfg.read_text())["base_model_name_or_path"])


def load_folder(
    path: str | os.PathLike[str],
    *,
    min_pixels: int,
    max_pixels: int,
    dtype: torch.dtype | str = "float32",
    device: str | torch.device = "cpu",
):
    """``(model, processor)`` of any model folder a stage wrote or a profile names: full weights
    (Qwen2.5-VL or text-only), or a LoRA adapter folder merged into the base it names
    (:func:`adapter_base`); in eval mode. The CES loop loads its frozen models with it."""
    base = adapter_base(path)
    if base is None:
        return load_policy(path, None, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device)
    return load_policy(base, path, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device)
