"""Notebook 06 (``06_attention_visualization``): attention of a policy's action tokens on the
screenshots of recorded test steps (CCPO Figs. 4, 10-17), for 01's SFT model and 02's SO-RL and
CCPO models at one history setting.

Notebook flow: :func:`models_to_compare` (which stages, with or without CASC at inference) ->
:func:`probe_steps` -> :func:`attention_by_model` -> :func:`share_summary` / :func:`paired_shares`
-> :func:`plot_shares` / :func:`plot_attention_overlays`. The pieces, each usable alone:

* :func:`attention_steps`: the test steps to look at, each with its prompt as one model sees it
  (the full ground-truth history, or the history rewritten by a hook such as CASC at inference)
  and, for every image of the prompt, what it shows (:class:`ShownImage`: the step it belongs to,
  and the **relevant region** normalised to that image: the annotated target box of the current
  screenshot; the region of interest of a history screenshot, taken from the ROI records of a
  CASC history builder run on the same step).
* :func:`step_attention`: the attention maps of one step's generated action
  (:func:`guirl.analysis.attention.action_attention`) with the shares of :func:`attention_shares`.
* :func:`attention_shares`: the numbers behind the picture, per step (all in [0, 1]):

  - ``image_share``: the share of the action tokens' attention that goes to image tokens at all
    (text tokens take the rest);
  - ``current_share``: the current screenshot's part of the attention on images;
  - ``box_share``: the share of the current screenshot's attention inside the target box
    (:func:`guirl.analysis.attention.mass_inside`; cells partly inside count by area), for
    steps whose annotated action is a click or long press with a target box, ``nan`` otherwise;
    ``box_area``, on the same steps, is the box's share of the screen's area: the ``box_share``
    of attention spread evenly (chance level);
  - ``roi_share``: the share of the history screenshots' attention inside their ROIs (a shown
    history screenshot without an ROI counts entirely outside), for steps that show at least one
    history screenshot with an ROI, ``nan`` otherwise. A CASC crop *is* its ROI, so a model that
    sees only crops scores 1 by construction; compare models that see the same (full) history.

* :func:`overlay_grid` and :func:`plot_attention_overlays`: each map drawn over its screenshot
  at the resolution the model saw (the image resized to the merged grid, 28 px per cell), with
  the relevant region outlined; rows are models, columns the history steps and the current
  screen (the layout of CCPO Figs. 4, 10-17). A history screenshot a model did not see (dropped
  by CASC) is an empty panel.

ROI records are duck-typed (``step``, ``roi_px``, ``view_size``, ``kind``: the fields of
:class:`guirl.methods.ccpo.progressive.ROIRecord`); the CASC builder that writes them is
:func:`guirl.methods.ccpo.history.inference_history`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl import timing
from guirl.analysis.attention import action_attention, mass_inside
from guirl.metrics.bootstrap import mean_with_ci
from guirl.metrics.paired import difference_row, paired_difference
from guirl.prompts import PromptSpec
from guirl.rollout import EpisodeRollout, HFPolicy, recorded_history, step_prompts

__all__ = [
    "BOX_ACTION_TYPES",
    "ShownImage",
    "AttentionStep",
    "StepAttention",
    "attention_steps",
    "attention_shares",
    "step_attention",
    "share_row",
    "attention_over_steps",
    "SHARES",
    "SUMMARY",
    "share_summary",
    "paired_shares",
    "example_step",
    "overlay_grid",
    "plot_attention_overlays",
    "HISTORY",
    "MODELS",
    "models_to_compare",
    "probe_steps",
    "attention_by_model",
    "plot_shares",
]

#: Annotated action types whose target box is where the action lands (the ``box_share`` steps).
BOX_ACTION_TYPES = frozenset({"click", "long_press"})
#: A box covering the whole image (normalised): the ROI of a CASC crop is the crop itself.
WHOLE = (0.0, 0.0, 1.0, 1.0)

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class ShownImage:
    """One image of a prompt: ``role`` (``"history"`` or ``"current"``), the episode ``step``
    index it shows, the ``region`` that matters, normalised to this image (``x1, y1, x2, y2`` in
    [0, 1]; the target box or the history ROI; ``None``: none), and whether it is a ``cropped``
    CASC view (then ``region`` is the whole image)."""

    role: str
    step: int
    region: Box | None
    cropped: bool = False


@dataclass(frozen=True)
class AttentionStep:
    """Step ``t`` of ``episode_id`` in ``split``: its ``prompt`` (``(messages, images)``), the
    annotated ``action_type`` and ``target_box`` (normalised), the history steps the prompt shows
    (``history_steps``, oldest first, whether or not their screenshot is shown) and its
    ``images`` in prompt order (history oldest first, current last)."""

    split: str
    episode_id: str
    t: int
    action_type: str
    target_box: Box | None
    prompt: tuple[list[dict[str, Any]], list[Any]]
    history_steps: tuple[int, ...]
    images: tuple[ShownImage, ...]

    @property
    def key(self) -> tuple[str, str, int]:
        """``(split, episode_id, t)``: the identity used to pair models on the same step."""
        return (self.split, self.episode_id, self.t)


def _roi_box(record: Any) -> Box | None:
    """A ROI record's region normalised to its model view (``None`` when it has none)."""
    if getattr(record, "roi_px", None) is None:
        return None
    x1, y1, x2, y2 = (float(v) for v in record.roi_px)
    w, h = (float(v) for v in record.view_size)
    return (x1 / w, y1 / h, x2 / w, y2 / h)


def attention_steps(
    episodes: Sequence[Any],
    spec: PromptSpec,
    *,
    split: str,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
    roi_builder: Callable[[EpisodeRollout, int], Sequence[tuple[str, Any]]],
    roi_records: list[Any],
    crop_history: bool,
    max_steps: int | None = None,
) -> list[AttentionStep]:
    """The first ``max_steps`` steps of ``episodes`` (episode order) with their prompts.

    ``roi_builder`` is a history hook of :func:`guirl.rollout.step_prompts` that appends one ROI
    record per history screenshot it rewrites to ``roi_records`` (CASC at inference,
    :func:`guirl.methods.ccpo.progressive.casc_inference_history`); it runs on every step, so
    every model gets the same ROIs. ``crop_history=True``: the prompt shows the builder's
    history (CCPO as at inference); ``False``: the full ground-truth history
    (:func:`guirl.rollout.recorded_history`, the prompt SFT and SO-RL models are evaluated with).
    Images: ``spec.n_history`` last history steps, those whose screenshot is shown, then the
    current screenshot.
    """
    if spec.user_template is not None:
        raise ValueError(f"prompt spec {spec.tag}: a user_template prompt shows no history screenshots")
    seen: dict[tuple[str, int], tuple[list[Any], list[tuple[str, Any]]]] = {}

    def hook(rollout: EpisodeRollout, t: int) -> list[tuple[str, Any]]:
        n0 = len(roi_records)
        cropped = list(roi_builder(rollout, t))
        history = cropped if crop_history else recorded_history(rollout, t)
        seen[(rollout.episode.episode_id, t)] = (list(roi_records[n0:]), history)
        return history

    items = step_prompts(
        episodes,
        spec,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        image_root=image_root,
        max_steps=max_steps,
        history_builder=hook,
    )
    out = []
    for it in items:
        records, history = seen[(it.episode.episode_id, it.t)]
        by_step = {int(r.step): r for r in records}
        n = spec.n_history if spec.n_history else 0
        shown = list(range(len(history)))[-n:] if n else []
        images: list[ShownImage] = []
        if spec.history_mode == "nAO":
            for k in shown:
                if history[k][1] is None:
                    continue
                rec = by_step.get(k)
                is_crop = bool(crop_history and rec is not None and rec.kind == "crop")
                images.append(ShownImage("history", k, WHOLE if is_crop else _roi_box(rec), is_crop))
        step = it.episode.steps[it.t]
        box = tuple(float(v) for v in step.target_box) if step.target_box is not None else None
        images.append(ShownImage("current", it.t, box))
        if len(images) != len(it.prompt[1]):
            raise RuntimeError(
                f"{split} episode {it.episode.episode_id} step {it.t}: the prompt has {len(it.prompt[1])} images "
                f"but {len(images)} were accounted for"
            )
        out.append(
            AttentionStep(
                split=split,
                episode_id=it.episode.episode_id,
                t=it.t,
                action_type=str(getattr(step.action.type, "value", step.action.type)),
                target_box=box,  # type: ignore[arg-type]
                prompt=it.prompt,
                history_steps=tuple(shown),
                images=tuple(images),
            )
        )
    return out


def _unit(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


def attention_shares(maps: Sequence[np.ndarray], step: AttentionStep) -> dict[str, float]:
    """``image_share``, ``current_share``, ``box_share``, ``box_area``, ``roi_share`` of one step (module doc);
    ``maps[i]`` is image ``i``'s ``(rows, cols)`` map (shares of the queries' attention).
    Undefined shares are ``nan``; ratios are clipped to [0, 1] against rounding (a crop's
    ``roi_share`` would otherwise come out as 1 + 2e-16)."""
    if len(maps) != len(step.images):
        raise ValueError(f"{len(maps)} maps for the {len(step.images)} images of step {step.key}")
    masses = [float(np.asarray(m, dtype=float).sum()) for m in maps]
    total = sum(masses)
    nan = float("nan")
    current = step.images[-1]
    box = area = nan
    if step.action_type in BOX_ACTION_TYPES and current.region is not None:
        box = mass_inside(maps[-1], current.region)
        area = mass_inside(np.ones_like(np.asarray(maps[-1], dtype=float)), current.region)
    hist = [(m, s, im) for m, s, im in zip(maps[:-1], masses[:-1], step.images[:-1])]
    roi = nan
    if any(im.region is not None for _, _, im in hist):
        hist_mass = sum(s for _, s, _ in hist)
        inside = sum(mass_inside(m, im.region) * s for m, s, im in hist if im.region is not None and s > 0)
        roi = _unit(inside / hist_mass) if hist_mass > 0 else nan
    return {
        "image_share": total,
        "current_share": _unit(masses[-1] / total) if total > 0 else nan,
        "box_share": box,
        "box_area": area,
        "roi_share": roi,
    }


@dataclass(frozen=True)
class StepAttention:
    """One model's attention on one step: ``maps`` (one ``(rows, cols)`` array per image of the
    prompt), the generated ``text`` and the :func:`attention_shares` ``shares``."""

    step: AttentionStep
    maps: list[np.ndarray]
    text: str
    shares: dict[str, float] = field(default_factory=dict)


def step_attention(
    model: Any,
    processor: Any,
    step: AttentionStep,
    *,
    max_new_tokens: int,
    layers: Sequence[int] | None = None,
) -> StepAttention:
    """Generate the step's action greedily and map the attention of its tokens onto the images
    (:func:`guirl.analysis.attention.action_attention`; ``layers`` averaged, all heads); the
    prompt is encoded as :class:`guirl.rollout.HFPolicy` encodes it for evaluation."""
    # one prompt per policy: a screen cache could never hit here
    policy = HFPolicy(model, processor, max_new_tokens=max_new_tokens, batch_size=1, image_cache_bytes=0)
    enc = policy.encode([step.prompt])
    res = action_attention(model, processor, enc, max_new_tokens=max_new_tokens, layers=layers)
    if len(res.maps) != len(step.images):
        raise RuntimeError(f"step {step.key}: {len(res.maps)} attention maps for {len(step.images)} images")
    return StepAttention(step, res.maps, res.text, attention_shares(res.maps, step))


def attention_over_steps(
    model: Any,
    processor: Any,
    steps: Sequence[AttentionStep],
    *,
    max_new_tokens: int,
    layers: Sequence[int] | None = None,
    desc: str = "attention",
    progress: bool = True,
) -> list[StepAttention]:
    """:func:`step_attention` of every step, in order, with a tqdm bar labelled ``desc``."""
    from tqdm.auto import tqdm

    return [
        step_attention(model, processor, s, max_new_tokens=max_new_tokens, layers=layers)
        for s in tqdm(steps, desc=desc, disable=not progress)
    ]


def share_row(model: str, att: StepAttention) -> dict[str, Any]:
    """One table row: ``model``, the step's identity and type, its image count, the shares and
    the generated text."""
    s = att.step
    return {
        "model": model,
        "split": s.split,
        "episode_id": s.episode_id,
        "step": s.t,
        "action_type": s.action_type,
        "n_images": len(s.images),
        "n_cropped": sum(im.cropped for im in s.images),
        **att.shares,
        "output": att.text,
    }


#: The per-step shares of :func:`attention_shares` that depend on the model, in table order.
SHARES = ("box_share", "roi_share", "current_share", "image_share")
#: :func:`share_summary`'s default: the shares and the chance level of ``box_share``.
SUMMARY = ("box_share", "box_area", "roi_share", "current_share", "image_share")


def share_summary(
    rows: pd.DataFrame, *, shares: Sequence[str] = SUMMARY, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Per model (order of first appearance) and share: the number of steps where it is defined
    (``n``), its ``mean`` and 95% percentile bootstrap interval ``lo`` / ``hi`` over those steps
    (:func:`guirl.metrics.bootstrap.mean_with_ci`; shares in [0, 1]). ``rows``: one
    :func:`share_row` per model and step."""
    out = []
    for model, df in rows.groupby("model", sort=False):
        for name in shares:
            v = df[name].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            mean, lo, hi = mean_with_ci(v, n_boot=n_boot, seed=seed)
            out.append({"model": model, "share": name, "n": int(v.size), "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(out, columns=["model", "share", "n", "mean", "lo", "hi"])


def paired_shares(
    rows: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    *,
    shares: Sequence[str] = SHARES,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired differences ``B - A`` for each ``(A, B)`` of ``pairs`` and each share, in points
    (x100), over the steps where both models' share is defined, with the paired bootstrap
    interval over steps and the resolved mark of :func:`guirl.metrics.paired.difference_row`
    (resolved only when the interval excludes 0). A pair with no common step is left out."""
    key = ["split", "episode_id", "step"]
    by_model = {m: df.set_index(key) for m, df in rows.groupby("model", sort=False)}
    for a, b in pairs:
        for m in (a, b):
            if m not in by_model:
                raise KeyError(f"paired_shares: no rows for model {m!r} (models: {list(by_model)})")
    out = []
    for a, b in pairs:
        common = by_model[a].index.intersection(by_model[b].index)
        for name in shares:
            va = by_model[a].loc[common, name].to_numpy(dtype=float)
            vb = by_model[b].loc[common, name].to_numpy(dtype=float)
            ok = np.isfinite(va) & np.isfinite(vb)
            if not ok.any():
                continue
            d = paired_difference(va[ok], vb[ok], n_boot=n_boot, seed=seed)
            out.append({"A": a, "B": b, "share": name, **difference_row(d, scale=100.0)})
    return pd.DataFrame(out)


def example_step(steps: Sequence[AttentionStep]) -> AttentionStep:
    """The step drawn in the overlay figure: among the click / long-press steps with a target box
    (all steps when there is none), the one that shows the most history screenshots with an ROI
    (ties: the earliest)."""
    if not steps:
        raise ValueError("no steps to choose an example from")
    boxed = [s for s in steps if s.action_type in BOX_ACTION_TYPES and s.target_box is not None]
    pool = boxed or list(steps)
    return max(pool, key=lambda s: sum(im.role == "history" and im.region is not None for im in s.images))


# ----------------------------------------------------------------------------- overlays
def overlay_grid(image: Any, attention_map: np.ndarray, *, cell_px: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """``(pixels, heat)``: ``image`` (a path or PIL image) resized to the map's grid, ``(rows *
    cell_px, cols * cell_px, 3)`` uint8 (the processor's resize for an image of that grid), and the
    map repeated to the same ``(H, W)`` pixels (each cell's value over its ``cell_px`` square)."""
    from PIL import Image

    m = np.asarray(attention_map, dtype=float)
    if m.ndim != 2 or 0 in m.shape:
        raise ValueError(f"attention_map must be a non-empty 2-D (rows, cols) array, got shape {m.shape}")
    rows, cols = m.shape
    if isinstance(image, (str, Path)):
        with Image.open(image) as im:
            img = im.convert("RGB")
    else:
        img = image.convert("RGB")
    pixels = np.asarray(img.resize((cols * cell_px, rows * cell_px), Image.BICUBIC))
    heat = np.kron(m, np.ones((cell_px, cell_px)))
    return pixels, heat


def plot_attention_overlays(
    rows: Mapping[str, StepAttention],
    *,
    cell_px: int = 28,
    alpha: float = 0.55,
    cmap: str = "jet",
):
    """The CCPO Figs. 4, 10-17 layout for one step: a row per model (``rows``: model name ->
    its :class:`StepAttention` on the same step), a column per history step shown and one for the
    current screen. Each map is normalised to its own maximum; the target box (current) and the
    ROIs (history) are outlined; panel titles give the shares. Returns ``(figure, data)`` with
    ``data`` the plotted numbers (maps, regions, shares) for the report sidecar."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if not rows:
        raise ValueError("no model rows to draw")
    keys = {att.step.key for att in rows.values()}
    if len(keys) != 1:
        raise ValueError(f"every row must show the same step, got {sorted(keys)}")
    first = next(iter(rows.values())).step
    columns = [*first.history_steps, first.t]
    fig, axes = plt.subplots(len(rows), len(columns), figsize=(2.0 * len(columns), 3.4 * len(rows)), squeeze=False)
    data: dict[str, Any] = {"step": list(first.key), "columns": columns, "models": {}}
    for r, (name, att) in enumerate(rows.items()):
        placed = {im.step if im.role == "history" else -1: i for i, im in enumerate(att.step.images)}
        panels = []
        for c, k in enumerate(columns):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            i = placed.get(-1 if c == len(columns) - 1 else k)
            label = "current" if c == len(columns) - 1 else f"step {k + 1}"
            if i is None:
                ax.set_title(f"{name}\n{label}: not shown", fontsize=7)
                ax.set_facecolor("0.9")
                panels.append(None)
                continue
            im = att.step.images[i]
            m = att.maps[i]
            pixels, heat = overlay_grid(att.step.prompt[1][i], m, cell_px=cell_px)
            ax.imshow(pixels)
            peak = float(heat.max())
            ax.imshow(heat / peak if peak > 0 else heat, cmap=cmap, alpha=alpha, vmin=0.0, vmax=1.0)
            if im.region is not None and not im.cropped:
                h, w = pixels.shape[:2]
                x1, y1, x2, y2 = im.region
                ax.add_patch(Rectangle((x1 * w, y1 * h), (x2 - x1) * w, (y2 - y1) * h, fill=False, lw=1.5, ec="white"))
            share = mass_inside(m, im.region) if im.region is not None and m.sum() > 0 else math.nan
            what = "crop" if im.cropped else ("in box" if im.role == "current" else "in ROI")
            ax.set_title(f"{name}\n{label}: {m.sum():.3f} ({what} {share:.2f})", fontsize=7)
            panels.append({"image": i, "map": m.tolist(), "region": im.region, "cropped": im.cropped})
        data["models"][name] = {"panels": panels, "shares": att.shares, "output": att.text}
    fig.tight_layout()
    return fig, data


# ----------------------------------------------------------------------------- notebook 06's flow
#: The history setting of CCPO Figs. 4, 10-17 (three history screenshots).
HISTORY = "3AO"
#: Model name -> (stage, whether its history is cropped by CASC as at inference).
MODELS: dict[str, tuple[str, bool]] = {
    "SFT": ("SFT", False),
    "SO-RL": ("SO-RL", False),
    "CCPO": ("CCPO", True),
    "CCPO (full history)": ("CCPO", False),
}


def models_to_compare(cfg: Any, history: str = HISTORY) -> dict[str, dict[str, Any]]:
    """``{stage: result.json}`` of the stages :data:`MODELS` reads: 01's SFT model of ``history``
    (the one 02's RL at that setting started from) and 02's SO-RL and CCPO models at ``history``
    (clear errors naming ``make nb-01_sft`` / ``make nb-02_ccpo_rl`` when they have not run)."""
    from guirl.studies.shared.agents import sft_result
    from guirl.studies.shared.inputs import upstream_result
    from guirl.studies.shared.rl_runs import stage_name

    return {
        "SFT": sft_result(cfg, history),
        "SO-RL": upstream_result(cfg, "02_ccpo_rl", stage_name("semi_online", history)),
        "CCPO": upstream_result(cfg, "02_ccpo_rl", stage_name("ccpo", history)),
    }


def probe_steps(cfg: Any, *, crop_history: bool, history: str = HISTORY) -> list[AttentionStep]:
    """The first ``analysis.attention_steps`` steps of each test split at ``history`` (full history,
    or cropped by CASC at inference), each image with its relevant region (:func:`attention_steps`;
    the ROIs of the history screenshots come from the same CASC builder's records)."""
    from guirl.methods.ccpo.history import inference_history
    from guirl.prompts import prompt_spec
    from guirl.studies.shared.inputs import eval_splits

    spec = prompt_spec(cfg, history)
    out: list[AttentionStep] = []
    n_history = max(int(h[0]) for h in cfg.eval.histories)
    for split, sp in eval_splits(cfg).items():
        records: list[Any] = []
        builder = inference_history(cfg, n_history=n_history, records=records)
        out += attention_steps(
            sp.episodes,
            spec,
            split=split,
            image_root=sp.image_root,
            min_pixels=cfg.model.min_pixels,
            max_pixels=cfg.model.max_pixels,
            roi_builder=builder,
            roi_records=records,
            crop_history=crop_history,
            max_steps=cfg.analysis.attention_steps,
        )
    return out


@timing.timed("profiling", "attention_by_model")
def attention_by_model(
    cfg: Any,
    results: Mapping[str, Mapping[str, Any]],
    steps: Mapping[bool, Sequence[AttentionStep]],
    models: Mapping[str, tuple[str, bool]] = MODELS,
) -> dict[str, list[StepAttention]]:
    """Every model of ``models`` (one in memory at a time) on its steps (``steps[crop]``):
    :func:`attention_over_steps` with ``eval.max_new_tokens`` and ``analysis.attention_layers``."""
    from guirl.models import load_trained

    out = {}
    for name, (stage, crop) in models.items():
        net, processor = load_trained(
            dict(results[stage]),
            min_pixels=cfg.model.min_pixels,
            max_pixels=cfg.model.max_pixels,
            dtype=cfg.model.torch_dtype,
            device=cfg.runtime.device,
        )
        out[name] = attention_over_steps(
            net,
            processor,
            steps[crop],
            max_new_tokens=cfg.eval.max_new_tokens,
            layers=cfg.analysis.attention_layers,
            desc=name,
        )
        del net
    return out


def plot_shares(summary: pd.DataFrame, shares: Sequence[str] = ("box_share", "roi_share")):
    """Bars of each share of :func:`share_summary` per model with its 95% interval; ``box_share``
    with the box's share of the screen (chance) as a dashed line. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, len(shares), figsize=(5 * len(shares), 3.2), squeeze=False)
    for ax, share in zip(axes[0], shares):
        df = summary[summary["share"] == share]
        sns.barplot(data=df, x="model", y="mean", color=sns.color_palette()[0], ax=ax)
        ax.errorbar(
            range(len(df)),
            df["mean"],
            yerr=[df["mean"] - df["lo"], df["hi"] - df["mean"]],
            fmt="none",
            c="k",
            capsize=4,
        )
        if share == "box_share":  # chance: the box's share of the screen's area
            chance = summary[summary["share"] == "box_area"]["mean"].iloc[0]
            ax.axhline(chance, ls="--", c="k", lw=1, label="box area (chance)")
            ax.legend(fontsize=8)
        ax.set_title(share)
        ax.set_ylim(0, 1)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    return fig
