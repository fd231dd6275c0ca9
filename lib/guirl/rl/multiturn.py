"""Semi-online multi-turn rollouts over recorded episodes, as hooks of the RL engine.

Semi-online RL (UI-S1, the SO-RL baseline of CCPO Sec. 4.2 and App. A.1.2) and CCPO share this
machinery; they differ in the reward, in what counts as a "matched" step, and in how history
images are shown (CCPO crops them, :mod:`guirl.methods.ccpo.progressive`). Pure bookkeeping on
top of :func:`guirl.rollout.rollout_recorded` and the math of :mod:`guirl.rl.semi_online`.

* A **task** (:class:`EpisodeTask`) is one recorded episode with one history setting (a
  :class:`~guirl.prompts.PromptSpec`, e.g. 3AO). The engine draws ``rl.prompts_per_step`` tasks
  a step; each becomes one **group** of ``rl.group_size`` = N trajectories.
* :func:`semi_online_rollout`: the N trajectories of a task are independent copies of the
  episode (the released UI-S1 generator repeats each trajectory N times and rolls each with
  ``n = 1``): at step ``t`` each copy sees its *own* earlier actions as history (nAO window of the
  recorded screenshots), samples one action, and :func:`patch_decide` keeps it when it matches
  the annotation, replaces it with the annotated action while the trajectory has patches left
  (``semi_online.patch_threshold``), and otherwise stops the trajectory after this step. Every
  generated step is one training :class:`~guirl.rl.samples.Sample` (the stopping step too).
* A **group history builder** ``history(rollout, t, group)`` may replace the history pairs; it
  sees the :class:`GroupRecord` of the task: what every trajectory of the group answered at
  each earlier step (the coordinate-augmented history of CCPO eq. 3 is built from it).
* :func:`semi_online_hooks` binds a run config to the engine: tasks from the ``train`` split,
  the rollout above, a reward, UI-S1 advantages over discounted step returns, and DAPO dynamic
  sampling over trajectories (:mod:`guirl.rl.semi_online`).

Sample ``info`` keys: ``rollout`` (trajectory index within the group), ``step``, ``matched``,
``decision`` (``keep`` / ``patch`` / ``stop``), ``history`` (tag), ``n_history``,
``history_pairs`` (earlier steps shown: ``min(step, n)``), ``images`` / ``image_tokens`` (images
in the prompt and their visual tokens under the model's pixel budget) and ``images_full`` /
``image_tokens_full`` (the same prompt with every shown history screenshot uncompressed), which
:func:`semi_online_metrics` turns into the compression rate of CCPO Table 4.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guirl.actions.types import Action, ParseResult
from guirl.configbase import RunConfig
from guirl.data.schema import Episode
from guirl.imaging import visual_tokens
from guirl.prompts import PromptSpec
from guirl.rewards.base import GroundTruth, RewardResult
from guirl.rl.hooks import RLHooks, format_reward_hook
from guirl.rl.samples import Sample
from guirl.rl.semi_online import (
    SemiOnlineConfig,
    patch_step,
    select_top_groups,
    semi_online_advantages,
    trajectory_dapo_keep,
    trajectory_dapo_std,
)
from guirl.rollout.offline import Decide, Decision, EpisodeRollout, annotated_entry, policy_entry, rollout_recorded
from guirl.rollout.policy import Completion, derive_seed

if TYPE_CHECKING:
    import torch

__all__ = [
    "EpisodeTask",
    "GroupRecord",
    "GroupHistoryBuilder",
    "Matcher",
    "rules_matcher",
    "episode_tasks",
    "step_row",
    "step_ground_truth",
    "patch_decide",
    "prompt_image_tokens",
    "full_history_image_tokens",
    "semi_online_rollout",
    "semi_online_metrics",
    "semi_online_advantage_hook",
    "trajectory_dapo_hooks",
    "semi_online_hooks",
    "IMAGE_SPECIAL_TOKENS",
]

#: Tokens each image adds around its visual tokens (``<|vision_start|>``, ``<|vision_end|>``).
IMAGE_SPECIAL_TOKENS = 2

#: ``matcher(parsed, gt)``: whether a step's output matches the annotation (the patch module and
#: the cut of the step returns; UI-S1's ``extract_match``).
Matcher = Callable[[ParseResult, GroundTruth], bool]


def rules_matcher(rules: str) -> Matcher:
    """The patch module's "matched" under a matching rule set: the output parsed and its type and
    arguments match the annotation (:func:`guirl.rewards.base.match_gt` ``.exact``). With
    ``semi_online.match_rules`` (``uis1_reward``) it is UI-S1's ``extract_match``, the rule SO-RL
    and, by default, CCPO decide with."""
    from guirl.matching import get_rules
    from guirl.rewards.base import match_gt

    rule_set = get_rules(rules)  # an unknown name fails here, not at the first step

    def matched(parsed: ParseResult, gt: GroundTruth) -> bool:
        return bool(parsed.ok and parsed.action is not None and match_gt(parsed.action, gt, rule_set).exact)

    return matched


@dataclass(frozen=True)
class EpisodeTask:
    """One recorded episode rolled out with one history setting; ``image_root`` is the folder its
    screenshot paths are relative to."""

    episode: Episode
    spec: PromptSpec
    image_root: str = ""


@dataclass
class GroupRecord:
    """What the N trajectories of one task (``group``: its index in the rollout call) answered so
    far: ``parsed[t]`` holds the parsed output of every trajectory that took step ``t``, in
    trajectory order; ``extra`` is state a history builder keeps for the group (e.g. CCPO's
    cropped screenshots)."""

    task: EpisodeTask
    group: int
    parsed: dict[int, list[ParseResult]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, t: int, result: ParseResult) -> None:
        self.parsed.setdefault(t, []).append(result)

    def actions(self, t: int) -> tuple[Action | None, ...]:
        """The actions the group took at step ``t`` (``None`` for an unparsable output)."""
        return tuple(p.action for p in self.parsed.get(t, ()))


#: ``history(rollout, t, group)``: the ``(text, image)`` history pairs shown at step ``t`` (an
#: image may be ``None``: that step is shown as text only).
GroupHistoryBuilder = Callable[[EpisodeRollout, int, GroupRecord], Sequence[tuple[str, Any]]]


def episode_tasks(
    episodes: Sequence[Episode], specs: Sequence[PromptSpec], *, image_root: str | Path
) -> list[EpisodeTask]:
    """One task per (episode, history setting), in episode order and spec order per episode;
    episodes without steps are skipped."""
    return [EpisodeTask(ep, spec, str(image_root)) for ep in episodes if ep.steps for spec in specs]


def step_row(episode: Episode, t: int) -> dict[str, Any]:
    """The reward columns of step ``t`` (the keys of :func:`guirl.rl.hooks.step_tasks` rows)."""
    import json

    step = episode.steps[t]
    return {
        "gt_action": json.dumps(step.action.to_dict()),
        "gt_box": list(step.target_box) if step.target_box else None,
        "candidate_boxes": [list(b) for b in step.candidate_boxes],
        "screen_size": list(step.screen_size),
        "episode_id": episode.episode_id,
        "step_id": step.step_id,
    }


def step_ground_truth(episode: Episode, t: int) -> GroundTruth:
    """The :class:`~guirl.rewards.base.GroundTruth` of step ``t``."""
    step = episode.steps[t]
    return GroundTruth(step.action, step.target_box, tuple(step.candidate_boxes))


def _patches_used(rollout: EpisodeRollout) -> int:
    return sum(1 for s in rollout.steps if s.decision.kind == "patch")


def patch_decide(spec: PromptSpec, matcher: Matcher, *, threshold: int, min_pixels: int, max_pixels: int) -> Decide:
    """Decision hook of the patch module (:func:`guirl.rl.semi_online.patch_step`): the first
    completion's action goes into the history when ``matcher`` accepts it (``"keep"``); else the
    annotated action does while the trajectory has patches left (``"patch"``); else nothing and
    the trajectory stops after this step (``"stop"``)."""
    from guirl.prompts import format_context

    def decide(rollout: EpisodeRollout, t: int, completions: Sequence[Completion], parsed: Sequence[ParseResult]):
        ep = rollout.episode
        ctx = format_context(ep.steps[t].screen_size, min_pixels, max_pixels)
        matched = bool(matcher(parsed[0], step_ground_truth(ep, t)))
        d = patch_step(matched, _patches_used(rollout), threshold)
        if d.kind == "keep":
            return Decision(policy_entry(rollout, t, completions[0], parsed[0], spec, ctx), stop=False, kind="keep")
        if d.kind == "patch":
            return Decision(annotated_entry(rollout, t, spec, ctx), stop=False, kind="patch")
        return Decision(None, stop=True, kind="stop")

    return decide


def _image_size(image: Any) -> tuple[int, int]:
    """``(width, height)`` px of a PIL image or of the image file at a path (header only)."""
    if hasattr(image, "size") and not isinstance(image, (str, Path)):
        w, h = image.size
        return int(w), int(h)
    from PIL import Image

    with Image.open(image) as im:
        return int(im.width), int(im.height)


def prompt_image_tokens(images: Sequence[Any], *, min_pixels: int, max_pixels: int) -> int:
    """Visual tokens of a prompt's images (PIL images or paths) under the model's pixel budget
    (:func:`guirl.imaging.visual_tokens`; the special tokens around each image not included)."""
    total = 0
    for im in images:
        w, h = _image_size(im)
        total += visual_tokens(h, w, min_pixels=min_pixels, max_pixels=max_pixels)
    return total


def full_history_image_tokens(
    episode: Episode, t: int, spec: PromptSpec, *, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """``(images, visual tokens)`` of step ``t``'s prompt with every shown history screenshot
    full size (the uncompressed prompt; nA shows none): the last ``min(t, n)`` steps' screenshots
    (``Step.screen_size``) and the current one."""
    shown = min(t, spec.n_history) if spec.history_mode == "nAO" else 0
    sizes = [episode.steps[k].screen_size for k in range(t - shown, t)] + [episode.steps[t].screen_size]
    return len(sizes), sum(visual_tokens(h, w, min_pixels=min_pixels, max_pixels=max_pixels) for w, h in sizes)


def semi_online_rollout(
    matcher: Matcher,
    *,
    patch_threshold: int,
    min_pixels: int,
    max_pixels: int,
    history: GroupHistoryBuilder | None = None,
    progress: bool = False,
) -> Callable[[Any, Sequence[EpisodeTask], Any], list[Sample]]:
    """Rollout hook: ``args.group_size`` independent semi-online trajectories per task (module
    doc). Tasks with the same history setting and image folder advance in lockstep through one
    :func:`guirl.rollout.rollout_recorded` call (seed ``derive_seed(args.seed, j)`` for the
    ``j``-th such call, then per step); ``history`` (a group history builder) replaces the
    recorded history pairs. Returns one sample per generated step, group = the task's index."""

    def rollout(policy: Any, tasks: Sequence[EpisodeTask], args: Any) -> list[Sample]:
        n = int(args.group_size)
        buckets: dict[tuple[PromptSpec, str], list[int]] = {}
        for g, task in enumerate(tasks):
            buckets.setdefault((task.spec, task.image_root), []).append(g)
        samples: list[Sample] = []
        for j, ((spec, root), idxs) in enumerate(buckets.items()):
            episodes: list[Episode] = []
            groups: dict[int, GroupRecord] = {}
            for g in idxs:
                ep = dataclasses.replace(tasks[g].episode)  # a distinct object: the group's key
                groups[id(ep)] = GroupRecord(tasks[g], g)
                episodes.extend([ep] * n)
            base = patch_decide(spec, matcher, threshold=patch_threshold, min_pixels=min_pixels, max_pixels=max_pixels)

            def decide(r, t, comps, parsed, _groups=groups, _base=base):
                _groups[id(r.episode)].add(t, parsed[0])
                return _base(r, t, comps, parsed)

            builder = None
            if history is not None:

                def builder(r, t, _groups=groups):
                    return history(r, t, _groups[id(r.episode)])

            rolls = rollout_recorded(
                policy,
                episodes,
                spec,
                min_pixels=min_pixels,
                max_pixels=max_pixels,
                image_root=root,
                n=1,
                do_sample=True,
                temperature=args.temperature,
                top_p=args.top_p,
                seed=derive_seed(args.seed, j),
                decide=decide,
                history_builder=builder,
                progress=progress,
            )
            for i, r in enumerate(rolls):
                g = idxs[i // n]
                for s in r.steps:
                    c = s.completions[0]
                    images = s.prompt[1]
                    full_imgs, full_toks = full_history_image_tokens(
                        r.episode, s.t, spec, min_pixels=min_pixels, max_pixels=max_pixels
                    )
                    info = {
                        "rollout": i % n,
                        "step": s.t,
                        "matched": s.decision.kind == "keep",
                        "decision": s.decision.kind,
                        "history": spec.tag,
                        "n_history": spec.n_history,
                        "history_pairs": min(s.t, spec.n_history),
                        "images": len(images),
                        "image_tokens": prompt_image_tokens(images, min_pixels=min_pixels, max_pixels=max_pixels),
                        "images_full": full_imgs,
                        "image_tokens_full": full_toks,
                    }
                    samples.append(
                        Sample(
                            prompt=s.prompt,
                            completion_ids=tuple(c.token_ids),
                            text=c.text,
                            group=g,
                            row=step_row(r.episode, s.t),
                            info=info,
                        )
                    )
        return samples

    return rollout


def _mean(values: Sequence[float]) -> float:
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else math.nan


def semi_online_metrics(infos: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> dict[str, Any]:
    """Log fields of a semi-online step from the trained samples' ``info`` (module doc) and the
    engine's ``prompt_tokens`` (mean prompt tokens per trained sample, from the processor):

    ``image_tokens`` / ``images`` (means per sample), ``image_tokens_full`` / ``images_full``
    (the same prompts uncompressed), ``prompt_tokens_full`` = ``prompt_tokens`` minus the images'
    tokens plus the uncompressed ones (each image also carries :data:`IMAGE_SPECIAL_TOKENS`),
    ``compression_rate`` = ``1 - prompt_tokens / prompt_tokens_full`` (CCPO Table 4: ratio of the
    mean lengths), ``history_pairs`` (mean), ``history_full_share`` (share of samples showing
    ``n`` earlier steps: 3AO "the majority", CCPO App. A.1.3), ``matched_share``,
    ``patch_share``, ``stop_share``. Undefined values (no trained sample) are ``None``.
    """
    keys = ("image_tokens", "images", "image_tokens_full", "images_full", "history_pairs")
    out: dict[str, Any] = {k: _mean([i.get(k) for i in infos]) for k in keys}
    n = len(infos)
    out["history_full_share"] = (
        sum(1 for i in infos if i.get("history_pairs") == i.get("n_history")) / n if n else math.nan
    )
    for kind, name in (("keep", "matched_share"), ("patch", "patch_share"), ("stop", "stop_share")):
        out[name] = sum(1 for i in infos if i.get("decision") == kind) / n if n else math.nan
    pt = row.get("prompt_tokens")
    if pt is None or not n or not math.isfinite(float(pt)):
        out["prompt_tokens_full"] = math.nan
        out["compression_rate"] = math.nan
    else:
        full = (
            float(pt)
            - out["image_tokens"]
            - IMAGE_SPECIAL_TOKENS * out["images"]
            + out["image_tokens_full"]
            + IMAGE_SPECIAL_TOKENS * out["images_full"]
        )
        out["prompt_tokens_full"] = full
        out["compression_rate"] = 1.0 - float(pt) / full if full > 0 else math.nan
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def _columns(samples: Sequence[Sample]) -> tuple[list[float], list[int], list[int], list[int], list[bool]]:
    return (
        [s.reward for s in samples],
        [s.group for s in samples],
        [int(s.info["rollout"]) for s in samples],
        [int(s.info["step"]) for s in samples],
        [bool(s.info["matched"]) for s in samples],
    )


def semi_online_advantage_hook(
    settings: SemiOnlineConfig, *, eps: float = 1e-6
) -> Callable[[Sequence[Sample]], torch.Tensor]:
    """Advantage hook: :func:`guirl.rl.semi_online.semi_online_advantages` over the samples'
    groups, trajectories (``info["rollout"]``), steps and matches, with the section's ``gamma``,
    ``advantage_weight``, ``advantage_mode`` and ``episode_return``."""
    import torch

    def advantage(samples: Sequence[Sample]) -> torch.Tensor:
        if not samples:
            return torch.zeros(0, dtype=torch.float64)
        return semi_online_advantages(
            *_columns(samples),
            gamma=settings.gamma,
            omega=settings.advantage_weight,
            mode=settings.advantage_mode,
            episode_return=settings.episode_return,
            eps=eps,
        )

    return advantage


def trajectory_dapo_hooks(
    settings: SemiOnlineConfig, std_threshold: float
) -> tuple[Callable[[Sequence[Sample]], list[bool]], Callable[[Sequence[Sample], int], list[Sample]] | None]:
    """``(keep, select)`` hooks of DAPO over trajectories (:mod:`guirl.rl.semi_online`): keep the
    groups whose step-0 returns vary by more than ``std_threshold``; ``select`` keeps the top
    groups by that std when a draw overfills the batch (``settings.dapo_select == "top_std"``;
    ``None``: the engine's first-in-draw-order)."""

    def keep(samples: Sequence[Sample]) -> list[bool]:
        if not samples:
            return []
        return trajectory_dapo_keep(*_columns(samples), gamma=settings.gamma, std_threshold=std_threshold)

    if settings.dapo_select != "top_std":
        return keep, None

    def select(samples: Sequence[Sample], n_groups: int) -> list[Sample]:
        stats = trajectory_dapo_std(*_columns(samples), gamma=settings.gamma)
        scores = {g: sd for g, (sd, _) in stats.items()}
        chosen = set(select_top_groups([s.group for s in samples], scores, n_groups))
        return [s for s in samples if s.group in chosen]

    return keep, select


def semi_online_hooks(
    cfg: RunConfig,
    data_dir: str | Path,
    *,
    reward: Callable[..., RewardResult],
    matcher: Matcher,
    history: GroupHistoryBuilder | None = None,
    settings: SemiOnlineConfig | None = None,
) -> RLHooks:
    """Engine hooks of a semi-online method on the ``train`` split of ``data_dir`` (module doc).

    ``reward(parsed, gt) -> RewardResult`` scores each step (the output parsed with
    ``cfg.sft.output_format`` in the model's coordinate space); ``matcher`` decides patching and
    cuts the step returns; ``history`` (optional) shows other history pairs. ``settings``: the
    ``semi_online`` section (default ``cfg.semi_online``, else :class:`SemiOnlineConfig`'s
    defaults). DAPO: ``rl.dapo_std_threshold`` (``None``: every group is trained on).
    """
    from guirl.data.splits import train_split
    from guirl.prompts import prompt_spec
    from guirl.rl.samples import TaskStream

    rl, m = cfg.rl, cfg.model
    so = settings or getattr(cfg, "semi_online", None) or SemiOnlineConfig()
    train = train_split(data_dir)
    specs = [prompt_spec(cfg, tag) for tag in rl.histories]
    tasks = episode_tasks(train.episodes, specs, image_root=train.image_root)

    keep = select = None
    if rl.dapo_std_threshold is not None:
        keep, select = trajectory_dapo_hooks(so, float(rl.dapo_std_threshold))

    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed),
        rollout=semi_online_rollout(
            matcher,
            patch_threshold=so.patch_threshold,
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
            history=history,
        ),
        reward=format_reward_hook(reward, cfg.sft.output_format, min_pixels=m.min_pixels, max_pixels=m.max_pixels),
        advantage=semi_online_advantage_hook(so, eps=rl.adv_eps),
        keep=keep,
        select=select,
        metrics=semi_online_metrics,
    )
