"""Notebook 05's glue between the CCPO method and :mod:`guirl.analysis.efficiency` (the kernels
may not import a method): the CASC history builder at a chosen pixel budget.
"""

from __future__ import annotations

from typing import Any

from guirl.config import Config

__all__ = ["casc_history"]


def casc_history(cfg: Config, *, max_pixels: int) -> Any:
    """CASC of the annotated history (CCPO eq. 10 with the points of the actions each history
    screenshot shows, as at inference: :func:`guirl.methods.ccpo.progressive.casc_inference_history`)
    with the ``ccpo`` section of ``cfg`` (policy, margin, smallest side, scroll rule), ``cfg.model.min_pixels``
    and the pixel budget ``max_pixels`` of the screens it crops."""
    from guirl.methods.ccpo.progressive import casc_inference_history
    from guirl.methods.ccpo.rl import ccpo_section

    sec = ccpo_section(cfg)
    if sec.compress == "none":
        raise ValueError("ccpo.compress is 'none': there is no CASC history to profile")
    return casc_inference_history(
        min_pixels=cfg.model.min_pixels,
        max_pixels=max_pixels,
        policy=sec.compress,
        margin=sec.margin_px,
        min_size=sec.min_size_px,
        scroll_is_coordinate=sec.scroll_is_coordinate,
    )
