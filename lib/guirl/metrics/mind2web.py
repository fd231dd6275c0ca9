"""Mind2Web metrics: Ele.Acc, Op.F1, Step SR, macro-averaged over tasks.

Mind2Web (Deng et al., NeurIPS 2023, Sec. 4 "Evaluation metrics"):

* **Element accuracy** – the chosen element is one of the ground-truth elements
  (MindAct: the predicted candidate id is in the positive ids; visual agents such as
  SeeClick and Co-EPG: the predicted click point lies inside the target element's box).
* **Operation F1** – token-level F1 between the predicted and the ground-truth
  operation strings ``"CLICK"``, ``"TYPE <value>"``, ``"SELECT <value>"`` (HOVER and
  ENTER count as CLICK, as in the dataset's three-operation space).
* **Step success** – element correct **and** operation correct (Op.F1 == 1).
* **Task success** – every step of the task successful.

Reported numbers are **macro** averages: each metric is averaged over the steps of a
task, then over tasks (``macro=False`` averages over all steps instead).

Tokenisation of :func:`op_f1` is :func:`guirl.textmatch.token_f1` (lower-cased ``\\w+``
tokens, bag of words). The visual agents' evaluation code differs: SeeClick (and CCPO, Co-EPG)
take the F1 of white-space token *sets* of ``"<code> <value lower-cased>"``, with the action type
as a number (4 click, 3 type, 2 select), and round the element box to 3 decimals.
:func:`score_m2w_protocol_step` scores a step exactly as a Mind2Web protocol of
:mod:`guirl.metrics.protocols` does (``mind2web`` = SeeClick as run, ``ccpo_mind2web``,
``coepg_mind2web``), with the Op.F1 value of that protocol's operation strings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from guirl.actions.types import Action, ActionType, ParseResult
from guirl.geometry import point_in_box
from guirl.matching import op_string
from guirl.matching.text import normalize, set_f1
from guirl.metrics.protocols import Protocol, get_protocol
from guirl.metrics.step import score_step
from guirl.textmatch import token_f1

OPS: tuple[str, ...] = ("CLICK", "TYPE", "SELECT")
_OP_ALIASES = {"HOVER": "CLICK", "ENTER": "CLICK"}


def operation_string(op: str, value: str | None = None) -> str:
    """``"CLICK"`` or ``"TYPE value"`` / ``"SELECT value"`` (the value is dropped for CLICK)."""
    o = _OP_ALIASES.get(op.strip().upper(), op.strip().upper())
    if o not in OPS:
        raise ValueError(f"unknown Mind2Web operation {op!r}; expected one of {OPS} (HOVER/ENTER map to CLICK)")
    if o == "CLICK":
        return "CLICK"
    return f"{o} {value or ''}".strip()


def op_f1(pred_op: str, pred_value: str | None, gt_op: str, gt_value: str | None) -> float:
    """Token F1 of the two operation strings, in ``[0, 1]``."""
    return token_f1(operation_string(pred_op, pred_value), operation_string(gt_op, gt_value))


def action_to_op(action: Action) -> tuple[str, str]:
    """Canonical action -> Mind2Web ``(op, value)``; raises for types with no web meaning."""
    t = action.type
    if t in (ActionType.CLICK, ActionType.LONG_PRESS, ActionType.HOVER):
        return "CLICK", ""
    if t is ActionType.TYPE:
        return "TYPE", action.text or ""
    if t is ActionType.SELECT:
        return "SELECT", action.text or ""
    raise ValueError(f"action type {t.value!r} has no Mind2Web operation (CLICK/TYPE/SELECT)")


@dataclass(frozen=True)
class Mind2WebStep:
    """One step: the predicted element/operation and the ground truth.

    ``pred_element`` is ``None`` when the model chose nothing (or its output did not parse).
    """

    task_id: str
    pred_element: str | None
    gt_elements: frozenset[str]
    pred_op: str | None
    pred_value: str | None
    gt_op: str
    gt_value: str | None = None


@dataclass(frozen=True)
class Mind2WebStepScore:
    task_id: str
    element_correct: bool
    op_f1: float
    step_success: bool


def score_m2w_step(step: Mind2WebStep) -> Mind2WebStepScore:
    """Element, Op.F1 and step success of one :class:`Mind2WebStep`."""
    ele = step.pred_element is not None and step.pred_element in step.gt_elements
    f1 = 0.0 if step.pred_op is None else op_f1(step.pred_op, step.pred_value, step.gt_op, step.gt_value)
    return Mind2WebStepScore(step.task_id, ele, f1, ele and f1 == 1.0)


def score_m2w_visual_step(
    task_id: str,
    pred: Action | ParseResult | None,
    gt: Action,
    gt_box: tuple[float, float, float, float],
) -> Mind2WebStepScore:
    """Visual variant: the element is correct when the predicted point lies in ``gt_box``
    (normalised ``(x1, y1, x2, y2)``); an unparsable or point-less prediction is wrong."""
    action = pred.action if isinstance(pred, ParseResult) else pred
    gt_op, gt_val = action_to_op(gt)
    if action is None:
        return Mind2WebStepScore(task_id, False, 0.0, False)
    try:
        p_op, p_val = action_to_op(action)
        f1 = op_f1(p_op, p_val, gt_op, gt_val)
    except ValueError:
        f1 = 0.0
    ele = action.point is not None and point_in_box(action.point, gt_box)
    return Mind2WebStepScore(task_id, ele, f1, ele and f1 == 1.0)


def score_m2w_protocol_step(
    task_id: str,
    pred: Action | ParseResult | None,
    gt: Action,
    gt_box: tuple[float, float, float, float],
    protocol: str | Protocol = "mind2web",
) -> Mind2WebStepScore:
    """One step under a Mind2Web protocol (``mind2web``, ``ccpo_mind2web``, ``coepg_mind2web``):
    element = the protocol's grounding, Op.F1 = the F1 of its operation strings (white-space token
    sets), step success = its ``exact`` (:func:`guirl.metrics.score_step`). ``gt_box`` is the
    target element's normalised box."""
    p = get_protocol(protocol)
    a = p.rules.args
    if not a.op_codes:
        raise ValueError(
            f"protocol {p.name!r} has no Mind2Web operation codes; use mind2web, ccpo_mind2web or coepg_mind2web"
        )
    s = score_step(pred, gt, p, gt_box=gt_box)
    action = pred.action if isinstance(pred, ParseResult) else pred
    f1 = 0.0
    if action is not None:
        how = p.rules.text.normalize
        f1 = set_f1(normalize(op_string(action, a), how), normalize(op_string(gt, a), how))
    return Mind2WebStepScore(task_id, bool(s.grounding), f1, s.exact)


def mind2web_metrics(scores: Iterable[Mind2WebStepScore], macro: bool = True) -> dict[str, float | int]:
    """``ele_acc``, ``op_f1``, ``step_sr`` (macro over tasks by default), ``task_sr``,
    ``n_tasks``, ``n_steps``. Empty input gives ``nan`` rates."""
    by_task: dict[str, list[Mind2WebStepScore]] = defaultdict(list)
    for s in scores:
        by_task[s.task_id].append(s)
    n_steps = sum(len(v) for v in by_task.values())
    if n_steps == 0:
        nan = float("nan")
        return {"ele_acc": nan, "op_f1": nan, "step_sr": nan, "task_sr": nan, "n_tasks": 0, "n_steps": 0}

    def avg(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs)

    if macro:
        ele = avg([avg([float(s.element_correct) for s in v]) for v in by_task.values()])
        f1 = avg([avg([s.op_f1 for s in v]) for v in by_task.values()])
        ssr = avg([avg([float(s.step_success) for s in v]) for v in by_task.values()])
    else:
        flat = [s for v in by_task.values() for s in v]
        ele = avg([float(s.element_correct) for s in flat])
        f1 = avg([s.op_f1 for s in flat])
        ssr = avg([float(s.step_success) for s in flat])
    tsr = avg([float(all(s.step_success for s in v)) for v in by_task.values()])
    return {"ele_acc": ele, "op_f1": f1, "step_sr": ssr, "task_sr": tsr, "n_tasks": len(by_task), "n_steps": n_steps}
