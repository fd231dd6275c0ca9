"""CCPO's progressive rollouts (Sec. 3.2, Algorithm 1 lines 6-24) and CASC as history hooks.

Training (:class:`ProgressiveCASC`, a group history builder of
:func:`guirl.rl.multiturn.semi_online_rollout`). The N trajectories of one task advance in
lockstep rounds, one round per step ``t``. After round ``k`` the group's coordinate history for
step ``k`` is known: the annotated coordinates of step ``k`` (eq. 8: the gt point, and the acted
element's box "if present", Sec. 3.3 Action Tracking; the candidate boxes' corners too with
``include_candidates``, the released code) together with the coordinates of
every trajectory's step-``k`` action (eq. 7; any action carrying a point, whatever its type).
They are aggregated into one ROI per history step (eq. 9, :func:`aggregate_roi`) and, from
round ``k + 1`` on, every trajectory of the group shows step ``k``'s screenshot cropped to that
ROI (eq. 10; Algorithm 1 lines 9-14, the same boxes for the whole example group): the
coordinate-augmented history ``ch_t`` of eq. 3 is shared across the N rollouts. Each
trajectory keeps its own action texts (its kept or patched actions, as semi-online RL). MAX-
COMPRESS (the paper's CASC) removes the screenshots of non-coordinate steps; MIN-COMPRESS keeps
them full (App. A.4); ``none`` shows every screenshot full (SO-RL's prompt with CCPO's loop).

Crops are taken from the model view (the screenshot resized with the model's pixel budget) and
aligned to the 28 px grid (:mod:`guirl.methods.ccpo.casc`), so a crop passes through the
processor unchanged.

Inference (:func:`casc_inference_history`, CCPO App. A.6.1 "optimized inference", Table 13:
"aligning inference with our training-time CASC"): a :data:`guirl.rollout.HistoryBuilder` for
:func:`guirl.rollout.step_prompts` / :func:`guirl.studies.shared.evaluation.evaluate_offline` /
:func:`guirl.rollout.rollout_recorded`. The ROI of a history screenshot is built as in training
from what is known at test time: the point(s) of the action the history shows for it (the
annotated action with a ground-truth history, the model's own with an own history) and the
recorded step's element box when that action acts inside it (always for the annotated action: the
box is the acted element); there are no rollouts at test time. Non-coordinate steps are dropped
(MAX) or kept (MIN). With a ground-truth history a crop therefore equals the training crop of a
group whose rollouts all agreed with the annotation.

Every ROI a builder makes is recorded (:class:`ROIRecord`) for the sample-screen figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image

from guirl.actions.types import Action
from guirl.methods.ccpo.casc import (
    DEFAULT_GRID_PX,
    DEFAULT_MARGIN_PX,
    DEFAULT_MIN_SIZE_PX,
    CompressedObs,
    Policy,
    StepRecord,
    action_points,
    compress_history,
    to_model_view,
    tracked_points,
)

__all__ = ["ROIRecord", "aggregate_roi", "load_model_view", "ProgressiveCASC", "casc_inference_history"]


@dataclass(frozen=True)
class ROIRecord:
    """One history screenshot as CASC showed it: ``episode_id``, ``step`` index, ``screenshot``
    (path), the model-view size ``view_size`` (px), the ``points`` aggregated (normalised), the
    ``roi_px`` (model-view px; ``None`` when kept full or dropped) and the ``kind``
    (``crop`` / ``full`` / ``dropped`` / ``downscaled``)."""

    episode_id: str
    step: int
    screenshot: str
    view_size: tuple[int, int]
    points: tuple[tuple[float, float], ...]
    roi_px: tuple[int, int, int, int] | None
    kind: str


def load_model_view(path_or_image: Any, *, min_pixels: int, max_pixels: int) -> Image.Image:
    """The screenshot (a path or a PIL image) as the model sees it (RGB, resized with the budget)."""
    if isinstance(path_or_image, Image.Image):
        img = path_or_image.convert("RGB")
    else:
        with Image.open(path_or_image) as im:
            img = im.convert("RGB")
    return to_model_view(img, min_pixels=min_pixels, max_pixels=max_pixels)


def aggregate_roi(
    view: Image.Image,
    gt: Action,
    rollout_actions: Sequence[Action | None],
    *,
    target_box: tuple[float, float, float, float] | None = None,
    candidate_boxes: Sequence[tuple[float, float, float, float]] = (),
    policy: Policy = "max",
    margin: float = DEFAULT_MARGIN_PX,
    min_size: float = DEFAULT_MIN_SIZE_PX,
    grid: int = DEFAULT_GRID_PX,
    include_candidates: bool = False,
    scroll_is_coordinate: bool = True,
    coordinate_steps: Literal["gt", "any"] = "gt",
) -> tuple[CompressedObs, tuple[tuple[float, float], ...]]:
    """One history step under CASC (CCPO eqs. 7-10): the compressed observation of ``view`` (the
    model view of the step's screenshot) and the aggregated normalised points: the annotation
    (``gt`` point, ``target_box`` corners and, with ``include_candidates``, ``candidate_boxes``
    corners, the released code)
    and every rollout action's point(s); ``None`` (unparsable) rollouts add nothing. Points off
    the screen are clamped before the ROI is built (:func:`guirl.methods.ccpo.casc.roi_from_points`)."""
    rec = StepRecord(
        image=view,
        action=gt,
        target_box=target_box,
        candidate_boxes=tuple(candidate_boxes),
        rollout_actions=tuple(rollout_actions),
    )
    pts = tuple(tracked_points(rec, include_candidates=include_candidates))
    (obs,) = compress_history(
        [rec],
        policy,
        margin=margin,
        min_size=min_size,
        grid=grid,
        scroll_is_coordinate=scroll_is_coordinate,
        coordinate_steps=coordinate_steps,
        include_candidates=include_candidates,
    )
    return obs, pts


class ProgressiveCASC:
    """Group history builder of CCPO's progressive rollouts (module doc).

    Call as ``builder(rollout, t, group)`` (:data:`guirl.rl.multiturn.GroupHistoryBuilder`).
    Step ``k``'s compressed screenshot is computed once per group (kept in ``group.extra``), the
    first time a later round needs it, from the group's step-``k`` actions (all trajectories that took step ``k``). Only
    the last ``n_history`` pairs are compressed; earlier ones keep their path (``build_prompt``
    shows the last ``n`` only). ``records`` lists every :class:`ROIRecord` made.
    """

    def __init__(
        self,
        *,
        min_pixels: int,
        max_pixels: int,
        policy: Policy = "max",
        margin: float = DEFAULT_MARGIN_PX,
        min_size: float = DEFAULT_MIN_SIZE_PX,
        grid: int = DEFAULT_GRID_PX,
        include_candidates: bool = False,
        scroll_is_coordinate: bool = True,
        coordinate_steps: Literal["gt", "any"] = "gt",
        keep_records: bool = True,
    ) -> None:
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.kw = dict(
            policy=policy,
            margin=margin,
            min_size=min_size,
            grid=grid,
            include_candidates=include_candidates,
            scroll_is_coordinate=scroll_is_coordinate,
            coordinate_steps=coordinate_steps,
        )
        self.keep_records = keep_records
        self.records: list[ROIRecord] = []

    def _step_obs(self, rollout: Any, k: int, group: Any) -> CompressedObs:
        cache: dict[int, CompressedObs] = group.extra.setdefault("casc", {})
        if k not in cache:
            ep = rollout.episode
            step = ep.steps[k]
            path = rollout.screenshot(k)
            view = load_model_view(path, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
            obs, pts = aggregate_roi(
                view,
                step.action,
                group.actions(k),
                target_box=step.target_box,
                candidate_boxes=step.candidate_boxes,
                **self.kw,
            )
            cache[k] = obs
            if self.keep_records:
                self.records.append(ROIRecord(ep.episode_id, k, path, view.size, pts, obs.roi_px, obs.kind))
        return cache[k]

    def __call__(self, rollout: Any, t: int, group: Any) -> list[tuple[str, Any]]:
        history = rollout.history
        if len(history) != t:
            raise ValueError(
                f"episode {rollout.episode.episode_id} step {t}: {len(history)} history entries; CCPO's progressive "
                "rollouts need one per earlier step (a semi-online decide hook that always adds an entry)"
            )
        n = group.task.spec.n_history if group.task.spec.history_mode == "nAO" else 0
        out: list[tuple[str, Any]] = []
        for k, entry in enumerate(history):
            if k < t - n:
                out.append((entry.text, entry.image))
                continue
            out.append((entry.text, self._step_obs(rollout, k, group).image))
        return out


def _acted_box(action: Action, box: tuple[float, float, float, float] | None):
    """``box`` when every point of ``action`` lies in it (the element the action acts on), else
    ``None``."""
    pts = action_points(action)
    if box is None or not pts:
        return None
    x1, y1, x2, y2 = box
    return box if all(x1 <= x <= x2 and y1 <= y <= y2 for x, y in pts) else None


def casc_inference_history(
    *,
    min_pixels: int,
    max_pixels: int,
    policy: Policy = "max",
    margin: float = DEFAULT_MARGIN_PX,
    min_size: float = DEFAULT_MIN_SIZE_PX,
    grid: int = DEFAULT_GRID_PX,
    scroll_is_coordinate: bool = True,
    element_box: bool = True,
    n_history: int | None = None,
    records: list[ROIRecord] | None = None,
):
    """CASC at inference (CCPO App. A.6.1, Table 13): a :data:`guirl.rollout.HistoryBuilder` that
    crops each history screenshot around the point(s) of the action shown for it and, with
    ``element_box``, the recorded step's element box (``Step.target_box``) when those points lie in
    it, as the training ROI holds the acted element's box; it drops (MAX) or keeps (MIN) the
    screenshots of non-coordinate actions (module doc). ``n_history``: compress only the last ``n``
    pairs (the ones a prompt shows; ``None``: all). ROI records are appended to ``records`` when
    given."""

    def build(rollout: Any, t: int) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        hist = rollout.history
        lo = 0 if n_history is None else max(0, len(hist) - n_history)
        steps = rollout.episode.steps
        for k, entry in enumerate(hist):
            if k < lo:
                out.append((entry.text, entry.image))
                continue
            view = load_model_view(entry.image, min_pixels=min_pixels, max_pixels=max_pixels)
            # an unparsable own output shows no action: treated as a non-coordinate step
            action = entry.action if entry.action is not None else Action("wait")
            box = None
            if element_box and len(hist) == t and k < len(steps):  # one entry per earlier step
                box = _acted_box(action, steps[k].target_box)
            obs, pts = aggregate_roi(
                view,
                action,
                (),
                target_box=box,
                policy=policy,
                margin=margin,
                min_size=min_size,
                grid=grid,
                include_candidates=False,
                scroll_is_coordinate=scroll_is_coordinate,
            )
            if records is not None:
                image = entry.image if isinstance(entry.image, str) else ""
                records.append(ROIRecord(rollout.episode.episode_id, k, image, view.size, pts, obs.roi_px, obs.kind))
            out.append((entry.text, obs.image))
        return out

    return build
