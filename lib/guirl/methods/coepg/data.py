"""Co-EPG's data: the planner and verifier pools, data enhancement, and the training records of
every Co-EPG SFT stage (Co-EPG Sec. 4.2, App. F Table 13, Sec. 5.7).

**Data enhancement** (Sec. 4.2). A planner pool ``Pi`` proposes plans for the training steps and
a verifier pool ``Phi`` checks them; ``(o_t, h_t, p_t, a_t)`` with a verified plan goes into
``D_k``. Each planner sees its usual prompt plus the Table 13 addition: the correct action, value
and the target's box ("to increase the likelihood of successful model verification",
App. F), and samples ``plans_per_planner`` plans (:func:`propose_plans`). Each verifier grounds
each plan (:class:`guirl.methods.coepg.grounding.Grounder`); a plan is verified when all
(``verify="all"``) or any verifier puts its point inside the target box (:func:`plan_hits`,
:func:`is_verified`; the hit test of eq. 3). Steps whose action has no target (type, scroll,
navigate, terminate, ...) need no plan: they enter ``D_k`` once with the plan "None" (Table
10: "Otherwise, write None"), unverified by construction and outside purity.

**Pools** (:class:`Pool`): ``Pi_0`` and ``Phi_0`` are open VLMs (local checkpoints named in the
config; on the tiny profile, pool models trained on MiniGUI's step annotations with other seeds
and data halves). After iteration ``k`` the pools take ``pi'_k`` and ``phi_k`` and keep only the
latest ``size`` (two) members.

**Quality** (Sec. 5.7, Figure 6): purity = verified plans / generated plans of the steps with a
target; diversity = distinct verified plans per such step (``plans_per_task`` with
``distinct=True``; a "task" is one step here: :func:`quality`).

**Records** (:mod:`guirl.train.data` layout, for ``records`` stages): :func:`planner_records`
(prompt of eq. 1 -> ``<plan>..</plan><action>..</action><value>..</value>``), :func:`grounder_records`
(screenshot + plan -> ``(x, y)`` of the annotated point, eq. 2) and :func:`e2e_records` (the
same steps, one model answering the full action in the run's format: the end-to-end baseline of
Table 3). Image paths are written relative to the data folder the stage reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.configbase import Sampling
from guirl.data.schema import Episode, Step
from guirl.methods.coepg.data_quality import DataSample, plans_per_task, purity
from guirl.methods.coepg.prompts import (
    PlannerPromptSettings,
    enhancement_text,
    grounder_prompt,
    planner_prompt,
    planner_text,
)
from guirl.methods.coepg.reward import grounded_gt
from guirl.prompts import format_context

__all__ = [
    "Pool",
    "StepRef",
    "PlanRow",
    "training_steps",
    "needs_plan",
    "history_texts",
    "referring_elements",
    "propose_plans",
    "plan_hits",
    "is_verified",
    "enhance",
    "annotation_rows",
    "quality",
    "planner_records",
    "grounder_records",
    "e2e_records",
    "write_rows",
    "read_rows",
]


@dataclass(frozen=True)
class Pool:
    """A model pool: ``members`` (model folders, oldest first) of at most ``size``;
    :meth:`add` appends one and drops the oldest beyond ``size`` (Sec. 4.2: the latest two)."""

    members: tuple[str, ...]
    size: int = 2

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"a pool keeps at least one model, got size {self.size}")
        object.__setattr__(self, "members", tuple(str(m) for m in self.members)[-self.size :])

    def add(self, member: str | os.PathLike[str]) -> Pool:
        """This pool with ``member`` added as the newest (the oldest beyond ``size`` dropped)."""
        return Pool((*self.members, str(member)), self.size)


@dataclass(frozen=True)
class StepRef:
    """Step ``t`` of ``episode``, its screenshots under ``image_root``."""

    episode: Episode
    t: int
    image_root: str

    @property
    def step(self) -> Any:
        return self.episode.steps[self.t]

    @property
    def key(self) -> tuple[str, int]:
        return (self.episode.episode_id, self.t)

    def screenshot(self, t: int | None = None) -> str:
        rel = self.episode.steps[self.t if t is None else t].screenshot
        return f"{self.image_root.rstrip('/')}/{rel}" if self.image_root else rel


def training_steps(episodes: Sequence[Episode], image_root: str | Path, max_steps: int | None = None) -> list[StepRef]:
    """The first ``max_steps`` steps (all: ``None``) of ``episodes`` in episode order."""
    out = [StepRef(ep, t, str(image_root)) for ep in episodes for t in range(len(ep.steps))]
    return out if max_steps is None else out[:max_steps]


def needs_plan(action: Action) -> bool:
    """Whether the annotated action has a target element the grounder must find (click, long press,
    select, hover, and a typing step with a point: Mind2Web's TYPE acts on an element, Table 9;
    :func:`guirl.methods.coepg.reward.grounded_gt`)."""
    return grounded_gt(action)


def referring_elements(step: Step) -> tuple[str, ...]:
    """The referring elements of a recorded step for Co-EPG Table 9's prompt (Multimodal-Mind2Web:
    ``extra["referring_elements"]``, :mod:`guirl.data.loaders.mind2web`; none elsewhere)."""
    return tuple(step.extra.get("referring_elements") or ())


def history_texts(ref: StepRef, history_format: str, *, min_pixels: int, max_pixels: int) -> list[str]:
    """The annotated actions before ``ref`` written in ``history_format`` (the ground-truth ``h_t``,
    as :func:`guirl.rollout.agent_steps` shows it)."""
    fmt = get_format(history_format)
    return [
        fmt.format(s.action, format_context(s.screen_size, min_pixels, max_pixels)) for s in ref.episode.steps[: ref.t]
    ]


@dataclass(frozen=True)
class PlanRow:
    """One plan of ``D_k`` or one that failed verification: its step, which ``planner`` proposed it
    (a pool member's name, or ``annotation``), the ``plan`` (``None``: the step needs none, or the
    planner wrote none), each verifier's ``hits`` and ``verified``; ``coordinate``: the step
    needs a plan."""

    episode_id: str
    t: int
    planner: str
    plan: str | None
    coordinate: bool
    hits: tuple[bool, ...] = ()
    verified: bool = False
    keep: bool = field(default=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hits"] = list(self.hits)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlanRow:
        return cls(**{**d, "hits": tuple(bool(h) for h in d.get("hits", ()))})


def propose_plans(
    planner: Any,
    steps: Sequence[StepRef],
    settings: PlannerPromptSettings,
    *,
    history_format: str,
    min_pixels: int,
    max_pixels: int,
    n: int,
    sampling: Sampling,
    seed: int | None,
) -> list[list[str | None]]:
    """``n`` plans of ``planner`` (a :class:`~guirl.rollout.Policy`) per step, decoded as ``sampling``
    says: its prompt with the Table 13 addition (the annotated action, value and target box);
    ``None`` where the answer holds no plan."""
    from guirl.methods.coepg.agent import read_planner

    prompts = []
    for ref in steps:
        step = ref.step
        space = format_context(step.screen_size, min_pixels, max_pixels).space("resized")
        extra = enhancement_text(step.action, step.target_box, space)
        hist = history_texts(ref, history_format, min_pixels=min_pixels, max_pixels=max_pixels)
        prompts.append(
            planner_prompt(
                settings,
                ref.episode.instruction,
                hist,
                ref.screenshot(),
                enhancement=extra,
                elements=referring_elements(step),
            )
        )
    outs = planner.complete(prompts, n=n, seed=seed, **sampling.kwargs())
    return [[read_planner(c.text).plan for c in comps] for comps in outs]


def plan_hits(
    points: Sequence[tuple[float, float] | None], action: Action, box: Any, rules: str = "coepg_reward"
) -> list[bool]:
    """Eq. 3 for each grounded point: inside the target ``box`` (the hit test of the C-DREM rule set
    ``rules``; without a box, near the annotated point as that rule set says)."""
    from guirl.matching import click_match, get_rules, gt_point

    rule = get_rules(rules).click
    b = None if box is None else tuple(float(v) for v in box)
    target = gt_point(action, b)
    return [click_match(p, target, rule, gt_box=b) for p in points]


def is_verified(hits: Sequence[bool], rule: Literal["all", "any"] = "all") -> bool:
    """A plan is verified when all (``"all"``) or any (``"any"``) verifier hit the target; never
    with no verifier."""
    if not hits:
        return False
    return all(hits) if rule == "all" else any(hits)


def enhance(
    steps: Sequence[StepRef],
    planners: Sequence[tuple[str, Callable[[], Any]]],
    verifiers: Sequence[Callable[[], Any]],
    settings: PlannerPromptSettings,
    *,
    history_format: str,
    min_pixels: int,
    max_pixels: int,
    n: int,
    sampling: Sampling,
    seed: int,
    verify: Literal["all", "any"] = "all",
    progress: bool = False,
) -> list[PlanRow]:
    """Data enhancement over ``steps`` (module doc). ``planners``: ``(name, load)`` pairs whose
    ``load()`` returns a Policy; ``verifiers``: ``load()`` functions returning a
    :class:`~guirl.methods.coepg.grounding.Grounder`; one model is loaded at a time. Planner ``j``
    samples with seed ``seed + j``. Returns one row per step without a target and one per
    distinct (step, plan) proposed, in step order; ``keep`` marks what goes into ``D_k``."""
    from tqdm.auto import tqdm

    coord = [ref for ref in steps if needs_plan(ref.step.action)]
    proposed: dict[tuple[str, int], dict[str, str]] = {ref.key: {} for ref in coord}
    failed: dict[tuple[str, int], list[str]] = {ref.key: [] for ref in coord}
    for j, (name, load) in enumerate(tqdm(planners, desc="planner pool", disable=not progress)):
        policy = load()
        plans = propose_plans(
            policy,
            coord,
            settings,
            history_format=history_format,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            n=n,
            sampling=sampling,
            seed=seed + j,
        )
        del policy
        for ref, ps in zip(coord, plans, strict=True):
            for p in ps:
                if p is None:
                    failed[ref.key].append(name)
                else:
                    proposed[ref.key].setdefault(p, name)  # a repeated plan counts once, with its first proposer
    queries = [(ref, plan) for ref in coord for plan in proposed[ref.key]]
    hits: list[list[bool]] = [[] for _ in queries]
    for load in tqdm(verifiers, desc="verifier pool", disable=not progress):
        grounder = load()
        outs = grounder.ground([(ref.screenshot(), tuple(ref.step.screen_size), plan) for ref, plan in queries])
        del grounder
        for i, ((ref, _), o) in enumerate(zip(queries, outs, strict=True)):
            hits[i].append(plan_hits([o.point], ref.step.action, ref.step.target_box)[0])
    by_step: dict[tuple[str, int], list[PlanRow]] = {}
    for (ref, plan), h in zip(queries, hits, strict=True):
        ok = is_verified(h, verify)
        row = PlanRow(ref.episode.episode_id, ref.t, proposed[ref.key][plan], plan, True, tuple(h), ok, ok)
        by_step.setdefault(ref.key, []).append(row)
    out: list[PlanRow] = []
    for ref in steps:
        if not needs_plan(ref.step.action):
            out.append(PlanRow(ref.episode.episode_id, ref.t, "annotation", None, False, (), False, True))
            continue
        out += by_step.get(ref.key, [])
        out += [PlanRow(ref.episode.episode_id, ref.t, name, None, True) for name in failed[ref.key]]
    return out


def annotation_rows(steps: Sequence[StepRef], *, coordinate_only: bool = False) -> list[PlanRow]:
    """Rows whose plan is the step's annotated low-level instruction (the tiny profile's pool
    models learn plans from them); ``coordinate_only``: only steps with a target."""
    out = []
    for ref in steps:
        coord = needs_plan(ref.step.action)
        if coordinate_only and not coord:
            continue
        plan = (ref.step.low_level_instruction or None) if coord else None
        keep = plan is not None or not coord
        out.append(PlanRow(ref.episode.episode_id, ref.t, "annotation", plan, coord, (), False, keep))
    return out


def quality(rows: Iterable[PlanRow]) -> dict[str, float | int]:
    """Sec. 5.7 over the rows of one data set (steps with a target only): ``purity`` (verified /
    generated plans, :func:`~guirl.methods.coepg.data_quality.purity`), ``diversity`` (distinct
    plans generated per step, :func:`~guirl.methods.coepg.data_quality.plans_per_task` with
    ``distinct=True``, a step being the task), ``verified_per_step`` (distinct verified plans per
    step with a target), ``plans_generated``, ``plans_verified``, ``unparsable`` (samples with no
    plan), ``steps`` (with a target), ``steps_kept`` (with a verified plan) and ``records``
    (rows kept for training, steps without a target included)."""
    rows = list(rows)
    coord = [r for r in rows if r.coordinate]
    generated = [r for r in coord if r.plan is not None]
    samples = [
        DataSample("", "", "", verified=r.verified, task=f"{r.episode_id}/{r.t}", plan=r.plan or "") for r in generated
    ]
    steps = {(r.episode_id, r.t) for r in coord}
    verified = [s for s in samples if s.verified]
    return {
        "purity": purity(samples),
        "diversity": plans_per_task(samples, distinct=True),
        "verified_per_step": len(verified) / len(steps) if steps else float("nan"),
        "plans_generated": len(generated),
        "plans_verified": len(verified),
        "unparsable": len(coord) - len(generated),
        "steps": len(steps),
        "steps_kept": len({s.task for s in verified}),
        "records": sum(r.keep for r in rows),
    }


def _rel(path: str, data_dir: str | Path) -> str:
    try:
        return os.path.relpath(path, data_dir)
    except ValueError:  # another drive (Windows)
        return path


def _refs(rows: Iterable[PlanRow], steps: Mapping[tuple[str, int], StepRef]) -> list[tuple[PlanRow, StepRef]]:
    out = []
    for r in rows:
        if not r.keep:
            continue
        if (r.episode_id, r.t) not in steps:
            raise KeyError(f"plan row of step {r.episode_id}/{r.t}: the step is not in the training steps")
        out.append((r, steps[(r.episode_id, r.t)]))
    return out


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def _meta(r: PlanRow, ref: StepRef, kind: str) -> dict[str, Any]:
    return {
        "episode_id": r.episode_id,
        "step_id": ref.step.step_id,
        "history": kind,
        "action_type": ref.step.action.type.value,
    }


def planner_records(
    rows: Iterable[PlanRow],
    steps: Mapping[tuple[str, int], StepRef],
    settings: PlannerPromptSettings,
    *,
    data_dir: str | Path,
    history_format: str,
    min_pixels: int,
    max_pixels: int,
    enhancement: bool = False,
) -> list[dict[str, Any]]:
    """One planner record per kept row: the planner's prompt (with the Table 13 addition when
    ``enhancement``: the pool planners of the tiny profile learn to answer it) and the annotated
    action with the row's plan, in the ``coepg_planner`` format."""
    out = []
    for r, ref in _refs(rows, steps):
        step = ref.step
        extra = None
        if enhancement:
            space = format_context(step.screen_size, min_pixels, max_pixels).space("resized")
            extra = enhancement_text(step.action, step.target_box, space)
        hist = history_texts(ref, history_format, min_pixels=min_pixels, max_pixels=max_pixels)
        messages, images = planner_prompt(
            settings,
            ref.episode.instruction,
            hist,
            _rel(ref.screenshot(), data_dir),
            enhancement=extra,
            elements=referring_elements(step),
        )
        out.append(
            {
                "prompt": messages,
                "completion": _assistant(planner_text(step.action, r.plan)),
                "images": images,
                **_meta(r, ref, "planner"),
            }
        )
    return out


def grounder_records(
    rows: Iterable[PlanRow],
    steps: Mapping[tuple[str, int], StepRef],
    settings: PlannerPromptSettings,
    *,
    data_dir: str | Path,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """One grounder record per kept row with a plan: screenshot + plan -> the annotated point
    (format ``coepg_grounder``, pixels of the resized screenshot)."""
    from guirl.matching import gt_point

    fmt = get_format("coepg_grounder")
    out = []
    for r, ref in _refs(rows, steps):
        step = ref.step
        if not r.plan:
            continue
        point = gt_point(step.action, step.target_box)
        if point is None:
            continue
        ctx = format_context(step.screen_size, min_pixels, max_pixels)
        answer = fmt.format(Action("click", point=tuple(point)), ctx)  # type: ignore[arg-type]
        messages, images = grounder_prompt(settings, _rel(ref.screenshot(), data_dir), r.plan)
        out.append(
            {"prompt": messages, "completion": _assistant(answer), "images": images, **_meta(r, ref, "grounder")}
        )
    return out


def e2e_records(
    rows: Iterable[PlanRow],
    steps: Mapping[tuple[str, int], StepRef],
    spec: Any,
    *,
    data_dir: str | Path,
    min_pixels: int,
    max_pixels: int,
) -> list[dict[str, Any]]:
    """The end-to-end baseline's records: one per kept row (the same steps, as often as the planner
    sees them), the run's prompt of ``spec`` (:class:`guirl.prompts.PromptSpec`) and the annotated
    action in ``spec.output_format`` (:func:`guirl.prompts.episode_step_prompt`)."""
    from guirl.prompts import episode_step_prompt

    out = []
    for r, ref in _refs(rows, steps):
        messages, images, completion = episode_step_prompt(
            ref.episode, ref.t, spec, min_pixels=min_pixels, max_pixels=max_pixels, image_root=ref.image_root
        )
        images = [_rel(p, data_dir) for p in images]
        out.append({"prompt": messages, "completion": _assistant(completion), "images": images, **_meta(r, ref, "e2e")})
    return out


def write_rows(path: str | Path, rows: Iterable[PlanRow], meta: Mapping[str, Any]) -> Path:
    """The rows of one data set as JSONL, the first line ``{"meta": ...}`` (what built it);
    written to a temporary name and renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"meta": dict(meta)}, sort_keys=True)] + [json.dumps(r.to_dict(), sort_keys=True) for r in rows]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_rows(path: str | Path) -> tuple[dict[str, Any], list[PlanRow]]:
    """``(meta, rows)`` of a :func:`write_rows` file."""
    lines = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]
    if not lines or "meta" not in lines[0]:
        raise ValueError(f"{path}: not a Co-EPG data file (no meta line)")
    return lines[0]["meta"], [PlanRow.from_dict(d) for d in lines[1:]]
