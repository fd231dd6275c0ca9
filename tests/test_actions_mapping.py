"""guirl.methods.agentcpm.mapping: AgentCPM-GUI's unified action mapping, one row per rule.

``test_paper_mapping_tables`` goes through AgentCPM-GUI App. B's mapping tables row by row: each
case is a family's own output text (parsed by that family's format), mapped with
:func:`to_unified`, written in AgentCPM-GUI's compact JSON and compared with the JSON the table
prints. The line numbers are those of the paper's text file (docs/papers.md)."""

import json

import pytest

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action, ActionError
from guirl.methods.agentcpm.mapping import FAMILIES, IgnoredInEvaluation, to_unified, try_to_unified

S = dict  # expected fields
#: Qwen2.5-VL writes pixels of the image it saw: 1080x2400 screens at the paper budget are
#: 1092x2408 (the resolution AgentCPM-GUI's B.1.1 prompt states).
CTX = FormatContext(width=1080, height=2400, min_pixels=3136, max_pixels=12845056)


def _qwen(args: dict) -> str:
    return '<tool_call>{"name": "mobile_use", "arguments": ' + json.dumps(args) + "}</tool_call>"


def _unified_json(family: str, text: str, **kw) -> dict:
    parsed = get_format(family).parse(text, CTX)
    assert parsed.ok, parsed.reason
    u = to_unified(parsed.action, family, **kw)
    return json.loads(get_format("agentcpm").format(u, CTX))


# (family, the family's output, keyword arguments of to_unified, the AgentCPM-GUI JSON of the table)
PAPER_TABLES = [
    # ---------------- Table 6 (lines 390-398): Qwen2.5-VL-7B, pixels of the 1092x2408 image
    # click (x, y) -> POINT [int(x/width*1000), int(y/height*1000)]: 100/1092 -> 91, 100/2408 -> 41
    ("qwen_mobile_use", _qwen({"action": "click", "coordinate": [100, 100]}), {}, {"POINT": [91, 41]}),
    # long_press (x, y), time -> POINT, duration = time * 1000
    (
        "qwen_mobile_use",
        _qwen({"action": "long_press", "coordinate": [546, 1204], "time": 2}),
        {},
        {"POINT": [500, 500], "duration": 2000},
    ),
    # swipe (x1, y1) -> (x2, y2) -> start POINT and the direction (finger up: 1806 -> 602)
    (
        "qwen_mobile_use",
        _qwen({"action": "swipe", "coordinate": [546, 1806], "coordinate2": [546, 602]}),
        {},
        {"POINT": [500, 750], "to": "up"},
    ),
    # type text -> TYPE
    ("qwen_mobile_use", _qwen({"action": "type", "text": "hello"}), {}, {"TYPE": "hello"}),
    # system_button Back / Home / Enter -> PRESS BACK / HOME / ENTER
    ("qwen_mobile_use", _qwen({"action": "system_button", "button": "Back"}), {}, {"PRESS": "BACK"}),
    ("qwen_mobile_use", _qwen({"action": "system_button", "button": "Home"}), {}, {"PRESS": "HOME"}),
    ("qwen_mobile_use", _qwen({"action": "system_button", "button": "Enter"}), {}, {"PRESS": "ENTER"}),
    # terminate -> STATUS finish (a failure too: the table maps every terminate to finish)
    ("qwen_mobile_use", _qwen({"action": "terminate", "status": "failure"}), {}, {"STATUS": "finish"}),
    # wait time -> duration = time * 1000
    ("qwen_mobile_use", _qwen({"action": "wait", "time": 3}), {}, {"duration": 3000}),
    # ---------------- Table 8 (lines 453-462): UI-TARS, [0, 1000] coordinates
    ("uitars", "Action: click(start_box='(500,300)')", {}, {"POINT": [500, 300]}),  # click -> POINT
    # long_press with time -> duration time; without -> 1000
    ("uitars", "Action: long_press(start_box='(500,300)', time='1500')", {}, {"POINT": [500, 300], "duration": 1500}),
    ("uitars", "Action: long_press(start_box='(500,300)')", {}, {"POINT": [500, 300], "duration": 1000}),
    ("uitars", "Action: type(content='hello')", {}, {"TYPE": "hello"}),  # type -> TYPE
    # scroll -> POINT [500, 500] with the direction reversed (up -> down)
    ("uitars", "Action: scroll(direction='up')", {}, {"POINT": [500, 500], "to": "down"}),
    ("uitars", "Action: press_back()", {}, {"PRESS": "BACK"}),  # press_back -> BACK
    ("uitars", "Action: press_home()", {}, {"PRESS": "HOME"}),  # press_home -> HOME
    ("uitars", "Action: wait()", {}, {"duration": 200}),  # wait -> duration 200
    ("uitars", "Action: finished()", {}, {"STATUS": "finish"}),  # finished -> finish
    # ---------------- Table 9 (lines 594-605): OS-Atlas, [0, 1000] coordinates
    ("osatlas", "Actions: CLICK <point>[[500,300]]</point>", {}, {"POINT": [500, 300]}),
    ("osatlas", "Actions: LONG_PRESS <point>[[500,300]]</point>", {}, {"POINT": [500, 300], "duration": 1000}),
    ("osatlas", "Actions: TYPE [hello]", {}, {"TYPE": "hello"}),
    # SCROLL -> POINT [500, 500] + direction; reversed with the low-level instruction (ACPM-30)
    ("osatlas", "Actions: SCROLL [UP]", {}, {"POINT": [500, 500], "to": "up"}),
    ("osatlas", "Actions: SCROLL [UP]", {"low_instruction": True}, {"POINT": [500, 500], "to": "down"}),
    ("osatlas", "Actions: SCROLL [LEFT]", {"low_instruction": True}, {"POINT": [500, 500], "to": "right"}),
    ("osatlas", "Actions: PRESS_BACK", {}, {"PRESS": "BACK"}),
    ("osatlas", "Actions: PRESS_HOME", {}, {"PRESS": "HOME"}),
    ("osatlas", "Actions: WAIT", {}, {"duration": 200}),
    ("osatlas", "Actions: COMPLETE", {}, {"STATUS": "finish"}),
    # ---------------- Table 10 (lines 619-630): OS-Genesis, [0, 1000] coordinates
    ("osgenesis", 'action: {"action_type": "type", "text": "hello"}', {}, {"TYPE": "hello"}),
    ("osgenesis", 'action: {"action_type": "click", "x": 500, "y": 300}', {}, {"POINT": [500, 300]}),
    (
        "osgenesis",
        'action: {"action_type": "long_press", "x": 500, "y": 300}',
        {},
        {"POINT": [500, 300], "duration": 1000},
    ),
    # dismiss and get_text -> POINT at (x, y) (ACPM-32)
    ("osgenesis", 'action: {"action_type": "dismiss", "x": 500, "y": 300}', {}, {"POINT": [500, 300]}),
    ("osgenesis", 'action: {"action_type": "get_text", "x": 500, "y": 300}', {}, {"POINT": [500, 300]}),
    ("osgenesis", 'action: {"action_type": "navigate_home"}', {}, {"PRESS": "HOME"}),
    ("osgenesis", 'action: {"action_type": "navigate_back"}', {}, {"PRESS": "BACK"}),
    # scroll -> POINT [500, 500] + direction; reversed with the low-level instruction
    ("osgenesis", 'action: {"action_type": "scroll", "direction": "up"}', {}, {"POINT": [500, 500], "to": "up"}),
    (
        "osgenesis",
        'action: {"action_type": "scroll", "direction": "up"}',
        {"low_instruction": True},
        {"POINT": [500, 500], "to": "down"},
    ),
    ("osgenesis", 'action: {"action_type": "wait"}', {}, {"duration": 200}),
    # ---------------- Table 11 (lines 653-662): OdysseyAgent, [0, 1000] coordinates
    ("odyssey", "CLICK: (500, 300)", {}, {"POINT": [500, 300]}),
    ("odyssey", "LONG_PRESS: (500, 300)", {}, {"POINT": [500, 300], "duration": 1000}),
    ("odyssey", "SCROLL: UP", {}, {"POINT": [500, 500], "to": "up"}),  # same direction
    ("odyssey", "TYPE: hello", {}, {"TYPE": "hello"}),
    ("odyssey", "PRESS_HOME", {}, {"PRESS": "HOME"}),
    ("odyssey", "PRESS_BACK", {}, {"PRESS": "BACK"}),
    ("odyssey", "COMPLETE", {}, {"STATUS": "finish"}),
    ("odyssey", "IMPOSSIBLE", {}, {"STATUS": "impossible"}),
    # ---------------- Table 12 (lines 683-693): Aguvis, [0, 1] coordinates x 1000
    ("aguvis", "pyautogui.click(x=0.5, y=0.3)", {}, {"POINT": [500, 300]}),
    ("aguvis", "mobile.long_press(x=0.5, y=0.3)", {}, {"POINT": [500, 300], "duration": 1000}),
    # scroll (vertical) / hscroll (horizontal) -> POINT [500, 500] + direction
    ("aguvis", "pyautogui.scroll(page=1)", {}, {"POINT": [500, 500], "to": "up"}),
    ("aguvis", "pyautogui.hscroll(page=-1)", {}, {"POINT": [500, 500], "to": "left"}),
    ("aguvis", "pyautogui.write(message='hello')", {}, {"TYPE": "hello"}),
    ("aguvis", "mobile.home()", {}, {"PRESS": "HOME"}),
    ("aguvis", "mobile.back()", {}, {"PRESS": "BACK"}),
    # mobile.terminate -> finish, whatever its status (ACPM-34)
    ("aguvis", "mobile.terminate(status='success')", {}, {"STATUS": "finish"}),
    ("aguvis", "mobile.terminate(status='failure')", {}, {"STATUS": "finish"}),
    ("aguvis", "mobile.wait(seconds=1)", {}, {"duration": 3000}),  # wait -> duration 3000
]


@pytest.mark.parametrize("family, text, kw, expected", PAPER_TABLES, ids=lambda x: str(x)[:40])
def test_paper_mapping_tables(family, text, kw, expected):
    assert _unified_json(family, text, **kw) == expected


@pytest.mark.parametrize(
    "family, text, match",
    [
        # Table 11 / B.5.2 (lines 649, 653-662): OdysseyAgent RECENT is not in the action space and
        # is ignored in evaluation (ACPM-33)
        ("odyssey", "PRESS_RECENT", "RECENT is not in the action space"),
        # Table 12 / B.6.2 (lines 692, 699): Aguvis open_app maps to nothing and is ignored
        ("aguvis", "mobile.open_app(app_name='Maps')", "open_app is not in the action space"),
    ],
)
def test_ignored_in_evaluation(family, text, match):
    a = get_format(family).parse(text, CTX).action
    with pytest.raises(IgnoredInEvaluation, match=match):
        to_unified(a, family)
    assert isinstance(IgnoredInEvaluation("x"), ActionError)  # callers that skip ActionError skip these too


@pytest.mark.parametrize(
    "family, action, kw, paper, released",
    [
        # ACPM-30: OS-Atlas low-instruction scroll, reversed in Table 9, kept by the released converter
        ("osatlas", Action("scroll", direction="up", convention="content"), {"low_instruction": True}, "down", "up"),
        # ACPM-33: Odyssey RECENT, ignored in B.5.2, APPSELECT in the released converter
        ("odyssey", Action("press", key="recent"), {}, IgnoredInEvaluation, "recent"),
        # ACPM-34: Aguvis failed terminate, finish in Table 12, a failed stop in the released converter
        ("aguvis", Action("terminate", status="fail"), {}, "success", "fail"),
    ],
)
def test_paper_and_released_variants(family, action, kw, paper, released):
    def field(u):
        return u.direction or u.key or u.status

    if isinstance(paper, type):
        with pytest.raises(paper):
            to_unified(action, family, **kw)
    else:
        assert field(to_unified(action, family, **kw)) == paper
    assert field(to_unified(action, family, variant="released", **kw)) == released
    with pytest.raises(ValueError, match="unknown mapping variant"):
        to_unified(action, family, variant="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "family, action, expected",
    [
        # units: Qwen2.5-VL coordinates are truncated onto the [0,1000] grid (int() in qwen2_5_2_minicpm)
        ("qwen_mobile_use", Action("click", point=(0.12345, 0.99999)), S(type="click", point=(0.123, 0.999))),
        # units: Aguvis rounds (round(x*1000))
        ("aguvis", Action("click", point=(0.12351, 0.5)), S(type="click", point=(0.124, 0.5))),
        # durations: Qwen long_press time converted to ms and kept when > 200
        (
            "qwen_mobile_use",
            Action("long_press", point=(0.5, 0.5), duration_ms=1500),
            S(type="long_press", duration_ms=1500),
        ),
        # durations: a long press of <= 200 ms is a click in AgentCPM's evaluator
        ("uitars", Action("long_press", point=(0.5, 0.5), duration_ms=150), S(type="click")),
        # durations: families without a long-press time get 1000 ms
        ("osatlas", Action("long_press", point=(0.5, 0.5)), S(type="long_press", duration_ms=1000)),
        ("odyssey", Action("long_press", point=(0.5, 0.5)), S(type="long_press", duration_ms=1000)),
        # scroll: UI-TARS content direction is reversed into AgentCPM's finger direction, POINT = centre
        (
            "uitars",
            Action("scroll", direction="down", convention="content"),
            S(type="scroll", direction="up", convention="finger", point=(0.5, 0.5)),
        ),
        # scroll: Qwen swipe keeps its finger direction and start point
        (
            "qwen_mobile_use",
            Action("scroll", point=(0.3, 0.8), point2=(0.3, 0.2), direction="up", convention="finger"),
            S(type="scroll", direction="up", point=(0.3, 0.8), point2=None),
        ),
        # scroll: Odyssey's word is already a finger direction
        ("odyssey", Action("scroll", direction="left", convention="finger"), S(type="scroll", direction="left")),
        # scroll: Aguvis scroll(page>0) ("up" in wheel/content terms) becomes finger "up" without reversal
        (
            "aguvis",
            Action("scroll", direction="up", convention="content"),
            S(type="scroll", direction="up", convention="finger"),
        ),
        # scroll: OS-Atlas without the low-level instruction keeps its word (Table 9)
        ("osatlas", Action("scroll", direction="down", convention="content"), S(type="scroll", direction="down")),
        # scroll: OS-Genesis keeps the word in the high setting ...
        ("osgenesis", Action("scroll", direction="down", convention="content"), S(type="scroll", direction="down")),
        # scroll: an action given in the other convention is first expressed in the family's words
        ("uitars", Action("scroll", direction="up", convention="finger"), S(type="scroll", direction="up")),
        # press: AgentCPM-GUI's own APPSELECT (recent) key passes through
        ("agentcpm", Action("press", key="recent"), S(type="press", key="recent")),
        # status: Qwen terminate(failure) still becomes STATUS finish
        ("qwen_mobile_use", Action("terminate", status="fail"), S(type="terminate", status="success")),
        # status: Odyssey IMPOSSIBLE -> impossible (fail); Aguvis failure -> finish (Table 12)
        ("odyssey", Action("terminate", status="fail"), S(type="terminate", status="fail")),
        ("aguvis", Action("terminate", status="fail"), S(type="terminate", status="success")),
        # wait: UI-TARS wait() -> 200 ms, Aguvis mobile.wait -> 3000 ms, Qwen keeps its time
        ("uitars", Action("wait"), S(type="wait", duration_ms=200)),
        ("aguvis", Action("wait", duration_ms=500), S(type="wait", duration_ms=3000)),
        ("qwen_mobile_use", Action("wait", duration_ms=2000), S(type="wait", duration_ms=2000)),
        # type: text unchanged
        ("osgenesis", Action("type", text="Hello"), S(type="type", text="Hello")),
    ],
)
def test_to_unified(family, action, expected):
    u = to_unified(action, family)
    for k, v in expected.items():
        got = getattr(u, k)
        if k == "type":
            assert got.value == v
        elif k in ("point", "point2") and v is not None:
            assert got == pytest.approx(v)
        else:
            assert got == v, (k, got)


def test_osgenesis_low_instruction_reverses():
    # AndroidControl-low: OS-Genesis' scroll word is reversed (USE_LOW_INSTRUCTION branch)
    u = to_unified(Action("scroll", direction="down", convention="content"), "osgenesis", low_instruction=True)
    assert (u.direction, u.convention) == ("up", "finger")


@pytest.mark.parametrize(
    "family, action, match",
    [
        ("uitars", Action("open_app", text="Maps"), "open_app"),  # OPEN_APP not in AgentCPM's schema
        ("qwen_mobile_use", Action("answer", text="42"), "answer"),  # answer not in the schema
        ("qwen_mobile_use", Action("press", key="recent"), "Menu"),  # Menu dropped by qwen2_5_2_minicpm
        ("osatlas", Action("press", key="recent"), "RECENT"),  # 'RECENT' is not in the PRESS enum
        ("aguvis", Action("press", key="enter"), "pyautogui.press"),  # not handled for Aguvis
        ("aguvis", Action("scroll", point=(0.5, 0.8), point2=(0.5, 0.2), direction="up", convention="finger"), "swipe"),
    ],
)
def test_unmappable(family, action, match):
    with pytest.raises(ActionError, match=match):
        to_unified(action, family)
    a, why = try_to_unified(action, family)
    assert a is None and match in why


def test_unknown_family():
    with pytest.raises(KeyError, match="known"):
        to_unified(Action("wait"), "gpt4")


@pytest.mark.parametrize("family", FAMILIES)
def test_unified_actions_are_agentcpm_formattable(family):
    # every mapped action is writable in AgentCPM-GUI's compact format and reads back unchanged
    fmt, ctx = get_format("agentcpm"), CTX
    for a in [
        Action("click", point=(0.2, 0.4)),
        Action("long_press", point=(0.7, 0.1), duration_ms=900),
        Action("scroll", direction="up", convention="finger"),
        Action("type", text="x"),
        Action("press", key="back"),
        Action("wait", duration_ms=1000),
        Action("terminate", status="success"),
    ]:
        u = to_unified(a, family)
        assert fmt.parse(fmt.format(u, ctx), ctx).action == u
