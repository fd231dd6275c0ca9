"""Every evaluator protocol reproduces its golden file: the original evaluator's verdicts, row by row.

``tests/fixtures/golden/<file>.jsonl`` holds prediction / ground-truth pairs in each original
evaluator's own representation with the verdicts the original code returned
(``tests/fixtures/golden/README.md``, ``docs/golden.md``). Here each row goes through guirl the way
a user would score such data, with library functions only:

* the model output through the protocol's own reading (:meth:`Protocol.parse`: the output format
  read strictly, as the original pipeline reads it);
* the ground truth through the loader of its data format (a :class:`~guirl.data.schema.Step`:
  canonical action, target box, candidate boxes, screen size), boxes kept as annotated
  (``off_screen="keep"``: what the original computes with);
* :func:`guirl.metrics.score_step` under the protocol.

A row agrees when our ``exact`` equals the original's step verdict (``verdict.exact``, or the
recorded second run ``variants.<name>`` for a variant protocol) and, where the original leaves
steps out of its step-success denominator (GUI-R1's press / wait / complete, SeeClick's
unparsable references), our ``counted`` equals that. A failure lists every disagreeing row with
its label, our verdict and reason, and the original's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import ParseResult
from guirl.data.loaders import aitw, aitz, androidcontrol, ces, guiodyssey, guir1, mind2web, uis1
from guirl.data.schema import Step
from guirl.metrics import PROTOCOLS, score_step
from guirl.metrics.protocols import Protocol, as_run_protocols

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
KEEP = "keep"


def _rows(spec: str) -> list[dict]:
    name, _, variant = spec.partition(":")
    rows = [json.loads(line) for line in (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if not variant or r.get("variant") == variant]


def _size(r: dict) -> tuple[int, int]:
    w, h = r["context"]["screen_size"]
    return int(w), int(h)


def _ctx(r: dict, **kw: Any) -> FormatContext:
    w, h = _size(r)
    rs = r["context"].get("resized_size")
    if rs is not None:
        kw.setdefault("image_width", rs[0])
        kw.setdefault("image_height", rs[1])
    return FormatContext(width=w, height=h, **kw)


# ------------------------------------------------------------------------------ per data format
# (row, protocol) -> (the parsed prediction, the ground-truth step)
Mapper = Callable[[dict, Protocol], tuple[ParseResult, Step]]


def _agentcpm(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    # AgentCPM-GUI's evaluator reads every listed node as a candidate (its AndroidControl mode takes
    # the nearest ones), so all elements are candidates here
    step = aitz.step_from_record(r["gt"], positions="normalised", off_screen=KEEP, candidates="all")
    return p.parse(r["raw_output"], FormatContext(*step.screen_size)), step


def _guiodyssey(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    ann = {**r["gt_source"], "sam2_bbox": r["gt"]["sam2_bbox"]}
    return p.parse(r["raw_output"], FormatContext()), guiodyssey.step_from_annotation(ann, screen_size=(1080, 2400))


def _std(swipe: str, vocabulary: str = "mobile_use") -> Mapper:
    def m(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
        step = uis1.step_from_std(r["gt"], screen_size=_size(r), vocabulary=vocabulary, swipe=swipe, off_screen=KEEP)
        return p.parse(r["raw_output"], _ctx(r)), step

    return m


def _guir1(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    g = r["gt"]
    step = guir1.step_from_row(g, screen_size=tuple(g["image_size"]), bbox_units="pixels", scroll_convention="content")
    return p.parse(r["raw_output"], _ctx(r)), step


def _aitz(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    g = r["gt"]
    step = aitz.step_from_record(g, screen_size=tuple(g["image_size"]), positions="pixels", off_screen=KEEP)
    if r["context"]["screen_mode"] == "tag":  # the same evaluator run on set-of-marks screens
        p = replace(p, pipeline="coat_tag")
    marks = tuple(e.box for e in step.elements)  # set-of-marks index every ui element
    return p.parse(r["raw_output"], FormatContext(*step.screen_size, elements=marks)), step


def _seeclick(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    step = mind2web.step_from_seeclick(r["gt"]["step"], image_size=tuple(r["gt"]["image_size"]), off_screen=KEEP)
    return p.parse(r["raw_output"], _ctx(r)), step


def _ces(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    step = ces.step_from_row(r["gt"]["answer"], r["gt"]["extra_info"], off_screen=KEEP)
    return p.parse(r["raw_output"], FormatContext(*step.screen_size)), step


def _aitw(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    step = aitw.step_from_record(r["gt"]["step"], screen_size=_size(r), off_screen=KEEP)
    return p.parse(r["raw_output"], _ctx(r)), step


def _coepg_androidcontrol(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    step = androidcontrol.step_from_action(
        r["gt"]["action"], screen_size=_size(r), element_boxes=r["gt"]["elements"], off_screen=KEEP
    )
    grounded = None
    if "grounder_output" in r["context"]:  # the grounding model's answer for the plan
        g = get_format("coepg_grounder").parse(r["context"]["grounder_output"], _ctx(r))
        grounded = g.action.point if g.ok else None
    return p.parse(r["raw_output"], _ctx(r, grounded_point=grounded)), step


def _coepg_mind2web(r: dict, p: Protocol) -> tuple[ParseResult, Step]:
    w, h = _size(r)
    step = mind2web.step_from_seeclick(r["gt"], image_size=(w, h), off_screen=KEEP)
    x, y = r["context"]["grounder_point"]
    g = get_format("coepg_grounder").parse(f"({x}, {y})", FormatContext(w, h, image_width=w, image_height=h))
    return p.parse(r["raw_output"], FormatContext(w, h, grounded_point=g.action.point if g.ok else None)), step


#: golden file (and rows' variant) -> how its rows are read
MAPPERS: dict[str, Mapper] = {
    "agentcpm": _agentcpm,
    "agentcpm_androidcontrol": _agentcpm,
    "guiodyssey": _guiodyssey,
    "uis1": _std("finger"),
    "guir1": _guir1,
    "aitz": _aitz,
    "mind2web": _seeclick,
    "ces": _ces,
    "ccpo:ac": _std("content"),  # CCPO's AndroidControl file draws swipes in the content direction
    "ccpo:guio": _std("finger", "guiodyssey"),
    "ccpo:mind2web": _seeclick,
    "ccpo:aitw": _aitw,
    "coepg:androidcontrol": _coepg_androidcontrol,
    "coepg:mind2web": _coepg_mind2web,
}

#: protocols checked here: every protocol that names a golden file
GOLDEN_PROTOCOLS = sorted(n for n, p in PROTOCOLS.items() if p.golden is not None)


def _want(r: dict, verdict: str) -> dict:
    if verdict == "verdict":
        return r["verdict"]
    return r["variants"][verdict.split(".", 1)[1]]


def _counted(r: dict) -> bool | None:
    """Whether the original counts the row in its step-success denominator (``None``: the
    original counts every step, nothing to compare)."""
    v = r["verdict"]
    if "counted_in_step" in v:
        return v["counted_in_step"]
    if "skipped" in v:
        return not v["skipped"]
    return None


def _diff(name: str) -> tuple[int, list[str]]:
    p = PROTOCOLS[name]
    rows = _rows(p.golden)  # type: ignore[arg-type]
    bad = []
    for r in rows:
        pred, step = MAPPERS[p.golden](r, p)  # type: ignore[index]
        s = score_step(
            pred,
            step.action,
            p,
            gt_box=step.target_box,
            candidate_boxes=step.candidate_boxes,
            screen_size=step.screen_size,
        )
        want = _want(r, p.verdict)
        counted = _counted(r)
        if s.exact != want["exact"] or (counted is not None and s.counted != counted):
            bad.append(
                f"  {r['case']!r}: ours exact={s.exact} counted={s.counted} ({s.reason}); "
                f"original exact={want['exact']}" + ("" if counted is None else f" counted={counted}")
            )
    return len(rows), bad


@pytest.mark.parametrize("name", GOLDEN_PROTOCOLS)
def test_protocol_reproduces_every_row_of_its_golden_file(name):
    n, bad = _diff(name)
    assert n >= 40, f"{name}: only {n} golden rows"
    assert not bad, f"{name}: {len(bad)} of {n} rows disagree with the original evaluator:\n" + "\n".join(bad)


def test_every_as_run_protocol_and_every_golden_file_is_checked():
    # an as-run protocol without a golden file could drift unnoticed
    assert all(PROTOCOLS[n].golden for n in as_run_protocols())
    used = {PROTOCOLS[n].golden.split(":")[0] for n in GOLDEN_PROTOCOLS}  # type: ignore[union-attr]
    assert used == {f.stem for f in GOLDEN.glob("*.jsonl")}
    assert set(MAPPERS) >= {PROTOCOLS[n].golden for n in GOLDEN_PROTOCOLS}


def test_a_wrong_protocol_fails_the_check():
    # the check can fail: AgentCPM-GUI's rows scored with the AndroidControl-mode rules disagree
    p = PROTOCOLS["agentcpm"]
    wrong = replace(p, rules=PROTOCOLS["agentcpm_androidcontrol"].rules)
    rows = _rows("agentcpm")
    diffs = 0
    for r in rows:
        pred, step = _agentcpm(r, wrong)
        s = score_step(pred, step.action, wrong, gt_box=step.target_box, candidate_boxes=step.candidate_boxes)
        diffs += s.exact != r["verdict"]["exact"]
    assert diffs > 0
