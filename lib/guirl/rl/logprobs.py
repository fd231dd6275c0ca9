"""Per-token log-probabilities of completions under a vision-language policy, images included.

A training sample is a prompt ``(messages, images)`` (``guirl.prompts.build_prompt``: chat
messages with ``{"type": "image"}`` placeholders, the images in placeholder order) plus the ids a
policy generated for it. :func:`encode_samples` builds the forward inputs the way TRL 1.16's
``GRPOTrainer._generate_and_score_completions`` does: prompts chat-templated and encoded by the
processor with **left** padding (the layout ``generate`` used), completions appended with
**right** padding, and the processor's multimodal fields passed through:

* ``pixel_values`` (patches x (3*2*14*14)) and ``image_grid_thw`` (images x 3);
* ``mm_token_type_ids`` (1 on image-pad tokens), extended with zeros over the completion.
  Leaving it out makes Qwen2.5-VL fall back to 1-D positions instead of its 3-D mrope positions
  for image tokens: the logits change and nothing fails (``tests/test_rl.py`` shows both).

:func:`completion_logprobs` runs the model forward and returns ``(B, C)`` log-probabilities of
the completion tokens (``log softmax(logits / temperature)`` at the position before each token;
only the last ``C + 1`` positions are projected through the LM head, ``logits_to_keep``) and,
optionally, the per-token entropy of the same distribution. The gather and entropy use TRL's
memory-lean ``selective_log_softmax_and_entropy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from guirl.rollout.policy import Prompt, open_image

__all__ = ["prompt_texts", "encode_samples", "completion_logprobs", "FORWARD_KEYS"]

#: Keys of an :func:`encode_samples` batch that go into the model forward.
FORWARD_KEYS = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw", "mm_token_type_ids")


def prompt_texts(processor, prompts: Sequence[Prompt]) -> list[str]:
    """Chat-templated prompt strings with the generation prompt (what ``generate`` is given)."""
    return [processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in prompts]


def encode_samples(
    processor,
    prompts: Sequence[Prompt],
    completion_ids: Sequence[Sequence[int]],
    *,
    device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:
    """Forward inputs for prompts + completions (module doc for the layout).

    Args:
        processor: a Qwen2.5-VL processor (:func:`guirl.models.load_processor`).
        prompts: ``B`` prompts ``(messages, images)``; images are paths or PIL images.
        completion_ids: ``B`` generated id sequences (no prompt ids; EOS included when generated).

    Returns:
        ``input_ids``, ``attention_mask`` ``(B, P + C)``; ``completion_ids``, ``completion_mask``
        ``(B, C)`` (1 on generated tokens); ``prompt_tokens`` ``(B,)`` (unpadded prompt length,
        image tokens included); and, when any prompt has images, ``pixel_values``,
        ``image_grid_thw`` and ``mm_token_type_ids`` ``(B, P + C)``.

    Raises:
        ValueError: mismatched lengths, an empty completion, or a prompt whose number of image
            placeholders differs from its number of images (names the prompt index).
    """
    if len(prompts) != len(completion_ids):
        raise ValueError(f"{len(prompts)} prompts but {len(completion_ids)} completions")
    if not prompts:
        raise ValueError("encode_samples needs at least one sample")
    for i, ((messages, images), ids) in enumerate(zip(prompts, completion_ids, strict=True)):
        n_ph = sum(
            1
            for m in messages
            if isinstance(m.get("content"), list)
            for c in m["content"]
            if isinstance(c, Mapping) and c.get("type") == "image"
        )
        if n_ph != len(images):
            raise ValueError(f"prompt {i}: {n_ph} image placeholders but {len(images)} images")
        if len(ids) == 0:
            raise ValueError(f"sample {i}: empty completion (a policy always returns at least one token)")
    texts = prompt_texts(processor, prompts)
    images = [[open_image(x) for x in ims] for _, ims in prompts]
    kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True, "padding_side": "left"}
    if any(images):
        kwargs["images"] = images
    enc = processor(**kwargs)
    pad_id = processor.tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has no pad token")
    c_len = max(len(ids) for ids in completion_ids)
    b = len(prompts)
    comp = torch.full((b, c_len), int(pad_id), dtype=enc["input_ids"].dtype)
    cmask = torch.zeros((b, c_len), dtype=enc["attention_mask"].dtype)
    for i, ids in enumerate(completion_ids):
        comp[i, : len(ids)] = torch.as_tensor(list(ids), dtype=comp.dtype)
        cmask[i, : len(ids)] = 1
    out: dict[str, torch.Tensor] = {
        "input_ids": torch.cat([enc["input_ids"], comp], dim=1),
        "attention_mask": torch.cat([enc["attention_mask"], cmask], dim=1),
        "completion_ids": comp,
        "completion_mask": cmask,
        "prompt_tokens": enc["attention_mask"].sum(-1),
    }
    if "pixel_values" in enc:
        out["pixel_values"] = enc["pixel_values"]
        out["image_grid_thw"] = enc["image_grid_thw"]
    if "mm_token_type_ids" in enc:
        mm = enc["mm_token_type_ids"]
        out["mm_token_type_ids"] = torch.cat([mm, mm.new_zeros((b, c_len))], dim=1)
    if device is not None:
        out = {k: v.to(device) for k, v in out.items()}
    return out


def completion_logprobs(
    model,
    batch: Mapping[str, torch.Tensor],
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    forward_keys: Sequence[str] = FORWARD_KEYS,
    image_features: Any = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(B, C)`` log-probabilities of ``batch["completion_ids"]`` (and entropies) under ``model``.

    Gradients flow when called outside ``torch.no_grad``. Padding positions hold the values of the
    pad token: mask them with ``batch["completion_mask"]``. ``forward_keys`` selects the batch
    entries passed to the model (the default passes every multimodal field; tests drop
    ``mm_token_type_ids`` to show the mrope pitfall). ``image_features``: the vision tower's
    output for the batch's images, computed beforehand (a frozen model's
    :class:`guirl.models.image_cache.VisionCache`): passed as ``mm_encoder_outputs`` instead of
    ``pixel_values``.
    """
    from trl.trainer.utils import selective_log_softmax_and_entropy

    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    comp = batch["completion_ids"]
    c_len = comp.shape[1]
    inputs = {k: batch[k] for k in forward_keys if k in batch}
    if image_features is not None:
        inputs.pop("pixel_values", None)
        inputs["mm_encoder_outputs"] = {"image": image_features}
    out = model(**inputs, logits_to_keep=c_len + 1, use_cache=False)
    logits = out.logits[:, :-1, :]  # position t predicts token t + 1: the last C positions before the end
    if temperature != 1.0:
        logits = logits / temperature
    logits = logits.float()
    if with_entropy:
        logp, ent = selective_log_softmax_and_entropy(logits, comp, entropy_requires_grad=False)
        return logp, ent
    from trl.trainer.utils import selective_log_softmax

    return selective_log_softmax(logits, comp), None
