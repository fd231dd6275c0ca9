"""CCPO's history builders, both from the ``ccpo`` config section: one place turns the section and
the model's pixel budget into CASC's settings (compression policy, margin, smallest side, scroll
rule), for training and for inference.

* :func:`training_history`: the progressive rollouts' builder (CCPO eq. 9-10, Algorithm 1): the
  ROI of a shared history screenshot aggregates the annotated point, every rollout's point and
  the acted element's box (:class:`guirl.methods.ccpo.progressive.ProgressiveCASC`).
* :func:`inference_history`: CASC at test time (CCPO App. A.6.1, Table 13, "aligning inference
  with our training-time CASC"): each history screenshot is cropped around the point of the
  action it shows and the recorded element's box when that action acts inside it, with the
  training builder's margin, size and grid
  (:func:`guirl.methods.ccpo.progressive.casc_inference_history`); notebooks 02, 05 and 06 use it.
"""

from __future__ import annotations

from typing import Any

from guirl.configbase import RunConfig
from guirl.methods.ccpo.config import CCPOSection
from guirl.methods.ccpo.progressive import ProgressiveCASC, ROIRecord, casc_inference_history

__all__ = ["ccpo_section", "casc_settings", "training_history", "inference_history"]


def ccpo_section(cfg: RunConfig) -> CCPOSection:
    """``cfg.ccpo``, or the section's defaults when the config leaves it out."""
    section = getattr(cfg, "ccpo", None)
    return section if section is not None else CCPOSection()


def casc_settings(section: CCPOSection) -> dict[str, Any]:
    """The CASC keyword arguments shared by both builders: ``policy`` (MAX / MIN-COMPRESS),
    ``margin`` and ``min_size`` (model-view pixels), ``scroll_is_coordinate``."""
    return {
        "policy": section.compress,
        "margin": section.margin_px,
        "min_size": section.min_size_px,
        "scroll_is_coordinate": section.scroll_is_coordinate,
    }


def training_history(cfg: RunConfig, *, keep_records: bool = False) -> ProgressiveCASC | None:
    """The training history builder of ``cfg`` (``None`` for ``ccpo.compress: none``) at the
    model's pixel budget; ``keep_records`` keeps an :class:`ROIRecord` per cropped screenshot."""
    sec = ccpo_section(cfg)
    if sec.compress == "none":
        return None
    return ProgressiveCASC(
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels,
        include_candidates=sec.include_candidates,
        coordinate_steps=sec.coordinate_steps,
        keep_records=keep_records,
        **casc_settings(sec),
    )


def inference_history(
    cfg: RunConfig,
    *,
    max_pixels: int | None = None,
    n_history: int | None = None,
    records: list[ROIRecord] | None = None,
):
    """CASC at inference (CCPO App. A.6.1, Table 13) with the ``ccpo`` section of ``cfg``: a
    :data:`guirl.rollout.HistoryBuilder` for ``step_prompts`` / ``evaluate_offline``.

    ``max_pixels``: the pixel budget of the screens it crops (default ``model.max_pixels``; notebook
    05 also profiles phone-size screens at another budget); ``n_history``: crop only the last ``n``
    history pairs (the ones a prompt shows; ``None``: all of them); ``records``: a list that
    receives one :class:`ROIRecord` per cropped screenshot. ``ccpo.compress: none`` has no crops:
    a ``ValueError``."""
    sec = ccpo_section(cfg)
    if sec.compress == "none":
        raise ValueError("ccpo.compress is 'none': CASC at inference needs 'max' or 'min'")
    return casc_inference_history(
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels if max_pixels is None else int(max_pixels),
        n_history=n_history,
        records=records,
        **casc_settings(sec),
    )
