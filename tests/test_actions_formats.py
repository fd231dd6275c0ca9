"""guirl.actions.formats: table-driven parse cases, round trips and never-raise properties."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guirl.actions.formats import FORMAT_NAMES, FormatContext, get_format
from guirl.actions.types import Action, ActionError, ActionType, ParseResult

# Resized model image 500x1000 so that resized pixel (250, 500) is the centre (0.5, 0.5).
CTX = FormatContext(width=1080, height=2400, image_width=500, image_height=1000)
OUT = "point outside the screen"

C = ActionType


def _check(res: ParseResult, expected):
    if isinstance(expected, str):  # failure reason substring
        assert not res.ok, res
        assert expected in res.reason, res.reason
        return
    assert res.ok, res.reason
    a = res.action
    for k, v in expected.items():
        if k == "thought":
            assert res.thought == v
        elif k in ("point", "point2"):
            assert getattr(a, k) == pytest.approx(v)
        elif k == "type":
            assert a.type is ActionType(v)
        else:
            assert getattr(a, k) == v, (k, getattr(a, k))


CASES = [
    # ---------------------------------------------------------------- ccpo (resized pixels)
    (
        "ccpo",
        '<think>tap it</think><action>{"action": "click", "coordinate": [250, 500]}</action>',
        {"type": "click", "point": (0.5, 0.5), "thought": "tap it"},
    ),  # valid click + thought
    ("ccpo", '<action>{"action": "click", "coordinate": [250, 500]</action>', "malformed JSON"),  # malformed JSON
    ("ccpo", '<action>{"action": "click"}</action>', "coordinate"),  # missing field
    ("ccpo", '<action>{"action": "click", "coordinate": [501, 10]}</action>', OUT),  # x > resized width
    (
        "ccpo",
        '  <action>\n {"action":"swipe","coordinate":[250,800],"coordinate2":[250,200]} \n</action>  ',
        {"type": "scroll", "direction": "up", "convention": "finger", "point": (0.5, 0.8)},
    ),  # whitespace; finger up
    (
        "ccpo",
        '<action>{"action": "system_button", "button": "Menu"}</action>',
        {"type": "press", "key": "recent"},
    ),  # Menu = recent
    (
        "ccpo",
        '<action>{"action": "terminate", "status": "failure"}</action>',
        {"type": "terminate", "status": "fail"},
    ),  # failure
    (
        "ccpo",
        '<action>{"action": "long_press", "coordinate": [0, 0], "time": 1.5}</action>',
        {"type": "long_press", "duration_ms": 1500},
    ),  # time seconds -> ms
    ("ccpo", '<action>{"action": "key", "text": "a"}</action>', "no canonical key"),  # a key code guirl has no key for
    ("ccpo", "click(1,2)", "no <action>"),  # no block at all
    # ---------------------------------------------------------------- qwen_mobile_use
    (
        "qwen_mobile_use",
        '<thinking>\nopen it\n</thinking>\n<tool_call>\n{"name": "mobile_use", "arguments": '
        '{"action": "open", "text": "Gmail"}}\n</tool_call>',
        {"type": "open_app", "text": "Gmail", "thought": "open it"},
    ),
    (
        "qwen_mobile_use",
        '<tool_call>{"name": "computer_use", "arguments": {"action": "wait"}}</tool_call>',
        "mobile_use",
    ),  # wrong tool
    ("qwen_mobile_use", '<tool_call>{"name": "mobile_use"}</tool_call>', "arguments"),  # missing arguments
    (
        "qwen_mobile_use",
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [-3, 4]}}</tool_call>',
        OUT,
    ),
    (
        "qwen_mobile_use",
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "wait", "time": 2}}</tool_call>',
        {"type": "wait", "duration_ms": 2000},
    ),
    # ---------------------------------------------------------------- agentcpm ([0,1000])
    ("agentcpm", '{"thought":"go","POINT":[729,69]}', {"type": "click", "point": (0.729, 0.069), "thought": "go"}),
    (
        "agentcpm",
        '{"POINT":[500,500],"to":"up"}',
        {"type": "scroll", "direction": "up", "convention": "finger"},
    ),  # finger
    (
        "agentcpm",
        '{"POINT":[500,800],"to":[500,200]}',
        {"type": "scroll", "direction": "up", "point2": (0.5, 0.2)},
    ),  # to point
    ("agentcpm", '{"POINT":[10,10],"duration":1000}', {"type": "long_press", "duration_ms": 1000}),  # > 200 ms
    ("agentcpm", '{"POINT":[10,10],"duration":200}', {"type": "click"}),  # default duration = click
    ("agentcpm", '{"duration":3000}', {"type": "wait", "duration_ms": 3000}),  # duration alone = wait
    ("agentcpm", '{"PRESS":"APPSELECT"}', {"type": "press", "key": "recent"}),  # APPSELECT = recent
    ("agentcpm", '{"STATUS":"satisfied"}', {"type": "terminate", "status": "success"}),  # satisfied = success
    ("agentcpm", '{"STATUS":"need_feedback"}', {"type": "terminate", "status": "fail"}),  # need_feedback = fail
    ("agentcpm", '{"POINT":[1001,5]}', OUT),  # out of [0,1000]
    ("agentcpm", '{"POINT":[1,2],"OPEN_APP":"x"}', "unknown key"),  # additionalProperties false
    ("agentcpm", '{"thought":"x"}', "no action key"),  # missing action
    ("agentcpm", '{"POINT":[1,2]', "no JSON object"),  # truncated
    ("agentcpm", '  ```json\n{"TYPE":"hi"}\n```  ', {"type": "type", "text": "hi"}),  # fenced + whitespace
    # ---------------------------------------------------------------- uitars ([0,1000], content scroll)
    (
        "uitars",
        "Thought: tap send\nAction: click(start_box='<|box_start|>(500,250)<|box_end|>')",
        {"type": "click", "point": (0.5, 0.25), "thought": "tap send"},
    ),
    ("uitars", "Action: scroll(direction='down')", {"type": "scroll", "direction": "down", "convention": "content"}),
    ("uitars", "Action: long_press(start_box='(10,20)', time='')", {"type": "long_press", "duration_ms": None}),
    ("uitars", "Action: click(start_box='(10,20,30,40)')", {"type": "click", "point": (0.02, 0.03)}),  # box centre
    ("uitars", "Action: click(start_box='(1200,20)')", OUT),
    ("uitars", "Action: type(content='it\\'s')", {"type": "type", "text": "it's"}),  # escaped quote
    ("uitars", "Action: click(start_box='(10,20)'", "not a valid call"),  # malformed
    ("uitars", "Action: click()", "start_box"),  # missing field
    ("uitars", "Action: finished()", {"type": "terminate", "status": "success"}),
    # ---------------------------------------------------------------- osatlas
    (
        "osatlas",
        "Thoughts: search\nActions: CLICK <point>[[101, 872]]</point>",
        {"type": "click", "point": (0.101, 0.872), "thought": "search"},
    ),
    ("osatlas", "Actions:\n  TYPE [Shanghai shopping mall]  ", {"type": "type", "text": "Shanghai shopping mall"}),
    ("osatlas", "Actions: SCROLL [UP]", {"type": "scroll", "direction": "up", "convention": "content"}),
    ("osatlas", "Actions: PRESS_RECENT", {"type": "press", "key": "recent"}),
    ("osatlas", "Actions: CLICK <point>[[101, 2000]]</point>", OUT),
    ("osatlas", "Actions: CLICK [[1, 2]]", "<point>"),  # malformed point
    ("osatlas", "Actions: FLY [UP]", "unknown OS-Atlas action"),
    # ---------------------------------------------------------------- aguvis ([0,1])
    (
        "aguvis",
        "Thought: click it\npyautogui.click(x=0.5, y=0.3)",
        {"type": "click", "point": (0.5, 0.3), "thought": "click it"},
    ),
    ("aguvis", "pyautogui.scroll(page=-1)", {"type": "scroll", "direction": "down", "convention": "content"}),
    ("aguvis", "mobile.terminate(status='success')", {"type": "terminate", "status": "success"}),
    ("aguvis", "mobile.wait(seconds=3)", {"type": "wait", "duration_ms": 3000}),
    ("aguvis", "answer('42 apples')", {"type": "answer", "text": "42 apples"}),
    ("aguvis", "pyautogui.click(x=1.5, y=0.3)", OUT),  # normalised > 1
    ("aguvis", "pyautogui.click(x=0.5)", "missing argument"),
    ("aguvis", "pyautogui.write(message='unterminated)", "not a valid call"),
    # ---------------------------------------------------------------- odyssey
    ("odyssey", "CLICK: (300, 700)", {"type": "click", "point": (0.3, 0.7)}),
    ("odyssey", "LONG_PRESS (5, 6)", {"type": "long_press"}),  # AgentCPM history spelling, no colon
    ("odyssey", "  SCROLL: LEFT \n", {"type": "scroll", "direction": "left", "convention": "finger"}),
    ("odyssey", "PRESS_RECENT", {"type": "press", "key": "recent"}),
    ("odyssey", "IMPOSSIBLE", {"type": "terminate", "status": "fail"}),
    ("odyssey", "CLICK: (300, 1700)", OUT),
    ("odyssey", "CLICK: 300, 700", "(x, y)"),
    ("odyssey", "SCROLL: SIDEWAYS", "direction"),
    # ---------------------------------------------------------------- osgenesis
    (
        "osgenesis",
        'low-level thought: open settings\naction: {"action_type": "click", "x": 500, "y": 100}',
        {"type": "click", "point": (0.5, 0.1), "thought": "open settings"},
    ),
    (
        "osgenesis",
        "action: {'action_type': 'scroll', 'direction': 'down'}",
        {"type": "scroll", "convention": "content"},
    ),  # single quotes
    ("osgenesis", 'action: {"action_type": "navigate_back"}', {"type": "press", "key": "back"}),
    ("osgenesis", 'action: {"action_type": "click", "x": 500}', "'x' and 'y'"),
    ("osgenesis", 'action: {"action_type": "click", "x": 500, "y": 1001}', OUT),
    # AgentCPM-GUI Table 10: dismiss / get_text at (x, y) are clicks there (ACPM-32)
    ("osgenesis", 'action: {"action_type": "dismiss", "x": 500, "y": 250}', {"type": "click", "point": (0.5, 0.25)}),
    ("osgenesis", 'action: {"action_type": "get_text", "x": 500, "y": 250}', {"type": "click", "point": (0.5, 0.25)}),
    ("osgenesis", 'action: {"action_type": "swipe", "x": 1, "y": 1}', "unsupported"),
    ("osgenesis", 'action: {"action_type": "click", "x": 5', "no 'action"),
    # ---------------------------------------------------------------- coepg
    (
        "coepg_planner",
        "<plan>the search box</plan><action>type</action><value>cats</value>",
        {"type": "type", "text": "cats", "thought": "the search box"},
    ),
    (
        "coepg_planner",
        "<plan>the search box</plan><action>click</action><value></value>",
        "grounded_point",
    ),  # needs grounder
    (
        "coepg_planner",
        "<plan>p</plan><action>scroll</action><value>down</value>",
        {"type": "scroll", "convention": "content"},
    ),
    ("coepg_planner", "<plan>p</plan><value>x</value>", "no <action>"),
    ("coepg_grounder", "(250, 500)", {"type": "click", "point": (0.5, 0.5)}),
    ("coepg_grounder", ' {"point_2d": [0, 1000]} ', {"type": "click", "point": (0.0, 1.0)}),
    ("coepg_grounder", "(250, 1500)", OUT),
    ("coepg_grounder", "the button", "expected a point"),
    # ---------------------------------------------------------------- ces_executor (resized pixels)
    (
        "ces_executor",
        "<think>tap</think> <answer>[{'action': 'click', 'point': [250, 500], 'input_text': 'no input text'}]</answer>",
        {"type": "click", "point": (0.5, 0.5), "thought": "tap"},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'scroll', 'point': [-100, -100], 'input_text': 'up'}]</answer>",
        {"type": "scroll", "direction": "up", "convention": "content"},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'type', 'point': [-100, -100], 'input_text': 'no input text'}]</answer>",
        "specific input_text",
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'click', 'point': [-100, -100]}]</answer>",
        OUT,
    ),  # placeholder point on a click
    ("ces_executor", "<answer>[{'point': [1, 2]}]</answer>", "'action'"),
    ("ces_executor", "<answer>[{'action': 'click', </answer>", "Python literal"),
    # ---------------------------------------------------------------- androidlong (screen pixels)
    (
        "androidlong",
        'do(action="Tap", element=[0, 0, 1080, 2400])',
        {"type": "click", "point": (0.5, 0.5)},
    ),  # box centre
    (
        "androidlong",
        '<think>go back</think><answer>do(action="Back")</answer>',
        {"type": "press", "key": "back", "thought": "go back"},
    ),
    (
        "androidlong",
        'do(action="Swipe", direction="up")',
        {"type": "scroll", "direction": "up", "convention": "finger"},
    ),
    ("androidlong", 'do(action="Wait", duration="2 seconds")', {"type": "wait", "duration_ms": 2000}),
    ("androidlong", 'finish(message="done")', {"type": "terminate", "status": "success"}),
    ("androidlong", 'do(action="Tap", element=[0, 0, 1080, 2500])', OUT),
    ("androidlong", 'do(action="Type")', "text"),
    ("androidlong", 'do(action="Fly")', "unsupported"),
]


@pytest.mark.parametrize("name, text, expected", CASES)
def test_parse_cases(name, text, expected):
    _check(get_format(name).parse(text, CTX), expected)


def test_registry():
    assert set(FORMAT_NAMES) == {
        "ccpo",
        "qwen_mobile_use",
        "agentcpm",
        "uitars",
        "osatlas",
        "aguvis",
        "odyssey",
        "osgenesis",
        "coepg_planner",
        "coepg_grounder",
        "ces_executor",
        "androidlong",
        "coat",
        "seeclick",
    }
    with pytest.raises(KeyError, match="registered"):
        get_format("nope")


@pytest.mark.parametrize(
    "name, action, match",
    [
        ("agentcpm", Action("open_app", text="Maps"), "agentcpm.*open_app"),  # no OPEN_APP in the schema
        ("odyssey", Action("wait"), "odyssey.*wait"),  # Odyssey has no wait
        ("uitars", Action("terminate", status="fail"), "uitars.*terminate"),  # finished() only
        ("osatlas", Action("press", key="enter"), "osatlas.*press"),  # no PRESS_ENTER
        ("coepg_grounder", Action("type", text="x"), "coepg_grounder.*type"),  # grounder writes points only
        ("agentcpm", Action("long_press", point=(0.1, 0.1), duration_ms=100), "agentcpm.*long_press"),  # <= 200 ms
        (
            "ccpo",
            Action("scroll", point=(0.5, 0.8), point2=(0.5, 0.2), direction="down", convention="finger"),
            "contradicts",
        ),
    ],
)
def test_format_rejects_inexpressible(name, action, match):
    with pytest.raises(ActionError, match=match):
        get_format(name).format(action, CTX)


def test_agentcpm_output_is_compact():
    s = get_format("agentcpm").format(Action("click", point=(0.729, 0.069)), CTX, thought="x")
    assert s == '{"thought":"x","POINT":[729,69]}'


# ----------------------------------------------------------------------------- properties
SAFE_TEXT = (
    st.text(alphabet=st.sampled_from(list("abcXYZ019 '\"\\[](){},.:;!?-_/@#&*+=%$éü中文")), min_size=1, max_size=16)
    .map(str.strip)
    .filter(bool)
)
THOUGHT = st.none() | st.text(alphabet=st.sampled_from(list("abc xyz.,!?'-")), min_size=1, max_size=20).map(
    str.strip
).filter(bool)
P = st.tuples(st.floats(0, 1, allow_nan=False), st.floats(0, 1, allow_nan=False))
DIR = st.sampled_from(["up", "down", "left", "right"])
CONV = st.sampled_from(["finger", "content"])
STEP = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


@st.composite
def scrolls(draw):
    d, conv = draw(DIR), draw(CONV)
    kind = draw(st.sampled_from(["dir", "start", "two"]))
    if kind == "dir":
        return Action("scroll", direction=d, convention=conv)
    start = (draw(st.floats(0.1, 0.9)), draw(st.floats(0.1, 0.9)))
    if kind == "start":
        return Action("scroll", point=start, direction=d, convention=conv)
    dist = draw(st.floats(0.05, 0.1))
    sx, sy = STEP[d]
    end = (start[0] + sx * dist, start[1] + sy * dist)
    return Action("scroll", point=start, point2=end, direction=d, convention="finger").in_convention(conv)


ACTIONS = st.one_of(
    st.builds(lambda p: Action("click", point=p), P),
    st.builds(lambda p, ms: Action("long_press", point=p, duration_ms=ms), P, st.none() | st.integers(201, 5000)),
    scrolls(),
    st.builds(lambda t: Action("type", text=t), SAFE_TEXT),
    st.builds(lambda t: Action("answer", text=t), SAFE_TEXT),
    st.builds(lambda t: Action("open_app", text=t), SAFE_TEXT),
    st.builds(lambda k: Action("press", key=k), st.sampled_from(["back", "home", "enter", "recent"])),
    st.builds(lambda ms: Action("wait", duration_ms=ms), st.none() | st.integers(0, 10000)),
    st.builds(lambda s: Action("terminate", status=s), st.sampled_from(["success", "fail"])),
    st.builds(lambda p, t: Action("select", point=p, text=t), P, SAFE_TEXT),
)


def _ctx_for(name, a):
    if name == "coepg_planner":
        return FormatContext(width=1080, height=2400, grounded_point=a.point)
    # the paper profiles' pixel budget (the resized formats need one; there is no default)
    return FormatContext(width=1080, height=2400, min_pixels=3136, max_pixels=12845056)


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(a=ACTIONS, thought=THOUGHT)
def test_round_trip(name, a, thought):
    fmt = get_format(name)
    if not fmt.can_format(a):
        with pytest.raises(ActionError, match=name):  # inexpressible: a clear error naming the format
            fmt.format(a, _ctx_for(name, a))
        return
    if name == "coepg_planner" and thought is None:
        thought = "the target"
    ctx = _ctx_for(name, a)
    text = fmt.format(a, ctx, thought=thought)
    res = fmt.parse(text, ctx)
    assert res.ok, (text, res.reason)
    assert res.action == fmt.project(a, ctx), text
    tol = fmt.tolerance(ctx) + 1e-12
    for k in ("point", "point2"):
        got, want = getattr(res.action, k), getattr(a, k)
        if got is not None and want is not None:
            assert abs(got[0] - want[0]) <= tol and abs(got[1] - want[1]) <= tol
    if fmt.has_thought and thought is not None:
        assert res.thought == thought


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_parse_never_raises_on_text(name, text):
    res = get_format(name).parse(text, CTX)
    assert isinstance(res, ParseResult)
    assert res.ok or res.reason


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(a=ACTIONS, seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6))
def test_parse_never_raises_on_mutations(name, a, seed, n):
    fmt = get_format(name)
    if not fmt.can_format(a):
        return
    ctx = _ctx_for(name, a)
    text = fmt.format(a, ctx, thought="t")
    rng = random.Random(seed)
    chars = list(text)
    for _ in range(n):
        op = rng.choice("dir")
        i = rng.randrange(len(chars) + 1)
        if op == "d" and chars:
            del chars[min(i, len(chars) - 1)]
        elif op == "i":
            chars.insert(i, rng.choice("{}[]()<>/'\",:-9xQ \n\\"))
        elif chars:
            chars[min(i, len(chars) - 1)] = rng.choice("0123456789-.e,")
    res = fmt.parse("".join(chars), ctx)
    assert isinstance(res, ParseResult)
    if res.ok:  # whatever parses is a valid canonical action
        assert Action.from_dict(res.action.to_dict()) == res.action
    else:
        assert res.reason.startswith(name)


def test_parse_non_string_input():
    res = get_format("agentcpm").parse(None, CTX)  # type: ignore[arg-type]
    assert not res.ok and "must be str" in res.reason


# ----------------------------------------------------------------------------- vocabularies
# The papers' own words (docs/fidelity rows CES-20/21/22, COEPG-24/25/27, CCPO-25, AL-16/17/21).
VOCAB_CASES = [
    # CES executor prompt: the unbraced list, words with a space, select with its option
    (
        "ces_executor",
        "<answer>['action': 'press home', 'point': [-100, -100], 'input_text': 'no input text']</answer>",
        {"type": "press", "key": "home"},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'press back', 'point': [-100, -100], 'input_text': 'no input text'}]</answer>",
        {"type": "press", "key": "back"},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'select', 'point': [250, 500], 'input_text': 'Large'}]</answer>",
        {"type": "select", "text": "Large", "point": (0.5, 0.5)},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'close', 'point': [-100, -100], 'input_text': 'no input text'}]</answer>",
        {"type": "terminate", "status": "fail"},
    ),
    (
        "ces_executor",
        "<answer>[{'action': 'select', 'point': [250, 500], 'input_text': 'no input text'}]</answer>",
        "option",
    ),
    # CES figures: ACTION: argument
    ("ces_executor", "<answer>CLICK: (250, 500)</answer>", {"type": "click", "point": (0.5, 0.5)}),
    ("ces_executor", "<answer>SCROLL: DOWN</answer>", {"type": "scroll", "direction": "down", "convention": "content"}),
    ("ces_executor", "<answer>PRESS_HOME</answer>", {"type": "press", "key": "home"}),
    ("ces_executor", "<answer>CLICK: 250, 500</answer>", "(x, y)"),
    # CES code: the call syntax (points in screen pixels)
    ("ces_executor", "<answer>click(point='(540, 1200)')</answer>", {"type": "click", "point": (0.5, 0.5)}),
    ("ces_executor", "<answer>scroll()</answer>", {"type": "scroll"}),  # no direction stated
    # Co-EPG Tables 9 / 10: labelled tags, the paper's words, None as no value
    (
        "coepg_planner",
        "<plan> ELEMENT: the search box </plan><action> ACTION: input_text </action><value> VALUE: cats </value>",
        {"type": "type", "text": "cats"},
    ),
    (
        "coepg_planner",
        "<plan>x</plan><action>ACTION: TERMINATE</action><value>VALUE: None</value>",
        {"type": "terminate"},
    ),
    (
        "coepg_planner",
        "<plan>x</plan><action>ACTION: scroll</action><value>VALUE: down</value>",
        {"type": "scroll", "direction": "down", "convention": "content"},
    ),
    (
        "coepg_planner",
        "<plan>x</plan><action>ACTION: navigate_home</action><value>VALUE: None</value>",
        {"type": "press", "key": "home"},
    ),
    # mobile_use key (CCPO App. A.9) and CCPO's other vocabularies
    ("ccpo", '<action>{"action": "key", "text": "KEYCODE_BACK"}</action>', {"type": "press", "key": "back"}),
    ("ccpo", '<action>{"action": "key", "text": "KEYCODE_VOLUME_UP"}</action>', "KEYCODE_VOLUME_UP"),
    ("ccpo", '<action>{"action": "PRESS_HOME"}</action>', {"type": "press", "key": "home"}),
    ("ccpo", '<action>{"action": "COMPLETE"}</action>', {"type": "terminate", "status": "success"}),
    ("ccpo", '<action>{"action": "hover", "coordinate": [250, 500]}</action>', {"type": "hover", "point": (0.5, 0.5)}),
    (
        "ccpo",
        '<action>{"action": "select", "coordinate": [250, 500], "value": "Large"}</action>',
        {"type": "select", "text": "Large"},
    ),
    # AndroidLong F.1: element boxes and the swipe distance
    ("androidlong", 'do(action="Tap", element=[0, 0, 540, 1200])', {"type": "click", "point": (0.25, 0.25)}),
    (
        "androidlong",
        'do(action="Swipe", element=[540, 1200], direction="up", dist="long")',
        {"type": "scroll", "direction": "up"},
    ),
    ("androidlong", 'do(action="Swipe", direction="up", dist="far")', "dist"),
    # UI-TARS-1.5 (AndroidLong F.4): point= and drag
    ("uitars", "Action: click(point='<point>500 500</point>')", {"type": "click", "point": (0.5, 0.5)}),
    ("uitars", "Action: long_press(point='<point>500 250</point>')", {"type": "long_press", "point": (0.5, 0.25)}),
    (
        "uitars",
        "Action: drag(start_point='<point>500 800</point>', end_point='<point>500 200</point>')",
        {"type": "scroll", "direction": "up", "convention": "finger"},
    ),
    (
        "uitars",
        "Action: scroll(point='<point>500 500</point>', direction='down')",
        {"type": "scroll", "direction": "down", "point": (0.5, 0.5)},
    ),
]


@pytest.mark.parametrize("name, text, expected", VOCAB_CASES)
def test_paper_vocabularies(name, text, expected):
    _check(get_format(name).parse(text, CTX), expected)


def test_androidlong_keeps_the_element_box_and_writes_it():
    f = get_format("androidlong")
    a = f.parse('do(action="Tap", element=[108, 240, 216, 480])', CTX).action
    assert a.extra["box"] == pytest.approx((0.1, 0.1, 0.2, 0.2))
    assert "element=[108, 240, 216, 480]" in f.format(a, CTX)  # the box form the prompt asks for
    s = f.parse('do(action="Swipe", element=[540, 1200], direction="up", dist="long")', CTX).action
    assert s.extra["dist"] == "long" and 'dist="long"' in f.format(s, CTX)


def test_coepg_terminate_status_is_undecided():
    a = get_format("coepg_planner").parse("<action>terminate</action>", CTX).action
    assert a.type is ActionType.TERMINATE and a.extra["status_undecided"]


# ----------------------------------------------------------------------------- strict readings
PHONE = {"width": 1080, "height": 2400, "image_width": 1092, "image_height": 2408}
STRICT_CASES = [
    # (format, pipeline, context, text, expected) -- each the original pipeline's reading
    # AgentCPM-GUI: json.loads + the extraction schema + action_map
    ("agentcpm", "agentcpm", PHONE, '{"POINT":[500,450]}', {"type": "click", "point": (0.5, 0.45)}),
    ("agentcpm", "agentcpm", PHONE, '```json\n{"POINT":[500,450]}\n```', "json.loads"),  # fenced
    ("agentcpm", "agentcpm", PHONE, 'Sure: {"POINT":[500,450]}', "json.loads"),  # prose
    ("agentcpm", "agentcpm", PHONE, '{"POINT":[500.5,450]}', "integers"),  # a fraction
    ("agentcpm", "agentcpm", PHONE, '{"POINT":[500.0,450]}', {"type": "click"}),  # jsonschema: 500.0 is an integer
    ("agentcpm", "agentcpm", PHONE, '{"PRESS":"home"}', "PRESS"),  # lower case
    ("agentcpm", "agentcpm", PHONE, '{"point":[500,450]}', "unknown key"),  # lower-case key
    ("agentcpm", "agentcpm", PHONE, '{"DEEP_LINK":null}', {"type": "wait"}),  # a stop
    ("agentcpm", "agentcpm", PHONE, '{"POINT":[500,450],"duration":100}', {"type": "wait"}),  # a stop too
    ("agentcpm", "agentcpm", PHONE, '{"PRESS":"APPSELECT"}', {"type": "press", "key": "recent"}),
    ("agentcpm", "agentcpm_paper", PHONE, '{"PRESS":"APPSELECT"}', "PRESS"),  # not the paper's key
    ("agentcpm", "agentcpm_paper", PHONE, '{"STATUS":"start","POINT":[1,2]}', "STATUS"),
    (
        "agentcpm",
        "agentcpm",
        PHONE,
        '{"POINT":[300,300],"to":[500,500]}',
        {"type": "scroll", "direction": "down"},
    ),  # tie: vertical
    # GUI-Odyssey: simple_decode
    ("odyssey", "guiodyssey", PHONE, "CLICK: (500.5, 450)", {"type": "click", "point": (0.5005, 0.45)}),
    ("odyssey", "guiodyssey", PHONE, "CLICK: [500, 450]", {"type": "click"}),
    ("odyssey", "guiodyssey", PHONE, "CLICK (500, 450)", "action_fail"),  # no colon
    ("odyssey", "guiodyssey", PHONE, "TYPE: 10:30", {"type": "type", "text": "10"}),
    ("odyssey", "guiodyssey", PHONE, "click: (500, 450)", "action_fail"),  # case-sensitive
    # UI-S1: parse_tags + json.loads, the words as the evaluator compares them
    (
        "ccpo",
        "uis1",
        PHONE,
        '<action>{"action": "click", "coordinate": [546, 1084]}</action>',
        {"type": "click", "point": (0.5, 0.45016611295681064)},
    ),
    (
        "ccpo",
        "uis1",
        PHONE,
        '<action>{"action": "Click", "coordinate": [546, 1084]}</action>',
        "no ground-truth action",
    ),
    ("ccpo", "uis1", PHONE, '<action>```json\n{"action": "wait"}\n```</action>', "json.loads"),
    ("ccpo", "uis1", PHONE, '<action>{"action": "swipe"}</action>', {"type": "scroll"}),  # any swipe
    # CCPO AndroidControl: resized -> original pixels, rounded; whole-dict words
    (
        "ccpo",
        "ccpo_androidcontrol",
        PHONE,
        '<action>{"action": "click", "coordinate": [546, 1084]}</action>',
        {"type": "click", "point": (540 / 1080, 1080 / 2400)},
    ),
    (
        "ccpo",
        "ccpo_androidcontrol",
        PHONE,
        '<action>{"action": "system_button", "button": "back"}</action>',
        "spelling",
    ),
    ("ccpo", "ccpo_androidcontrol", PHONE, '<action>{"action": "wait", "time": 2, "x": 1}</action>', "whole dict"),
    ("ccpo", "ccpo_androidcontrol", PHONE, '<action>{"action": "click"}</action>', "(-100, -100)"),
    # CCPO GUI-Odyssey: [0, 1000] as is, larger values converted; a missing point is (0, 0)
    (
        "ccpo",
        "ccpo_guiodyssey",
        PHONE,
        '<action>{"action": "click", "coordinate": [500, 450]}</action>',
        {"type": "click", "point": (0.5, 0.45)},
    ),
    ("ccpo", "ccpo_guiodyssey", PHONE, '<action>{"action": "CLICK"}</action>', {"type": "click", "point": (0.0, 0.0)}),
    (
        "ccpo",
        "ccpo_guiodyssey",
        PHONE,
        '<action>{"action": "SWIPE", "coordinate": [1, 2], "coordinate2": [3, 4]}</action>',
        "SWIPE",
    ),
    # CCPO Mind2Web: unknown words are clicks, an empty answer a click at (0, 0)
    (
        "ccpo",
        "ccpo_mind2web",
        PHONE,
        '<action>{"action": "tap", "coordinate": [546, 1084]}</action>',
        {"type": "click"},
    ),
    ("ccpo", "ccpo_mind2web", PHONE, "", {"type": "click", "point": (0.0, 0.0)}),
    # CCPO AITW: a Python-literal answer; a finger moving up is AITW's "scroll down"
    (
        "ccpo",
        "ccpo_aitw",
        PHONE,
        "<action>{'action': 'swipe', 'coordinate': [500, 2000], 'coordinate2': [500, 500]}</action>",
        {"type": "scroll", "direction": "up", "convention": "finger"},
    ),
    ("ccpo", "ccpo_aitw", PHONE, '<action>{"action": "long_press", "coordinate": [1, 2]}</action>', "wrong format"),
    # CES: extract_answer_action + parse_params
    (
        "ces_executor",
        "ces",
        PHONE,
        "<think>r</think><answer>click(point='(540, 1200)')</answer>",
        {"type": "click", "point": (0.5, 0.5)},
    ),
    ("ces_executor", "ces", PHONE, "<answer>Click(point='(540, 1200)')</answer>", "extract_answer_action"),
    (
        "ces_executor",
        "ces",
        PHONE,
        "<answer>[{'action': 'click', 'point': [540, 1200]}]</answer>",
        "extract_answer_action",
    ),
    # GUI-R1: the regular expressions
    (
        "ces_executor",
        "guir1",
        PHONE,
        "<answer>[{'action': 'click', 'point': [546, 1084], 'input_text': 'no input text'}]</answer>",
        {"type": "click"},
    ),
    (
        "ces_executor",
        "guir1",
        PHONE,
        "<answer>[{'action': 'click', 'point': [546.0, 1084.0]}]</answer>",
        {"type": "click", "point": (0.0, 0.0)},
    ),
    ("ces_executor", "guir1", PHONE, "no answer", {"type": "answer", "point": (0.0, 0.0), "text": "no input text"}),
    # CoAT: json_parser with a closing brace appended; ACTION and ARGS kept
    ("coat", "coat", PHONE, '{"ACTION": "stop", "ARGS": {}', {"type": "terminate"}),
    ("coat", "coat", PHONE, '{"ACTION": "stop"}', "ARGS"),
    ("coat", "coat", PHONE, '{"ACTION": "input_text", "ARGS": {"text": "a"}}', "format miss"),
    ("coat", "coat", PHONE, '{"ACTION": "scroll", "ARGS": {"direction": "Up"}}', "annotation word"),
    # SeeClick: ast.literal_eval
    (
        "seeclick",
        "seeclick",
        PHONE,
        '{"action_type": 4, "click_point": (0.3, 0.3)}',
        {"type": "click", "point": (0.3, 0.3)},
    ),
    ("seeclick", "seeclick", PHONE, '{"action_type": "4", "click_point": (0.3, 0.3)}', {"type": "click"}),
    ("seeclick", "seeclick", PHONE, '{"action_type": 4, "click_point": (0.3, 0.3), "x": true}', "literal_eval"),
]


@pytest.mark.parametrize("name, pipeline, ctx, text, expected", STRICT_CASES)
def test_strict_readings(name, pipeline, ctx, text, expected):
    _check(get_format(name).parse(text, FormatContext(**ctx, strict=True, pipeline=pipeline)), expected)


def test_unknown_pipeline_is_named():
    res = get_format("ccpo").parse("<action>{}</action>", FormatContext(strict=True, pipeline="nope"))
    assert not res.ok and "nope" in res.reason and "ccpo_aitw" in res.reason


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=ACTIONS)
def test_strict_reading_of_what_the_format_writes(a):
    # AgentCPM-GUI and SeeClick write what their own pipelines accept: the strict reading of a
    # formatted action is the tolerant one
    for name in ("agentcpm", "seeclick"):
        f = get_format(name)
        if not f.can_format(a):
            continue
        text = f.format(a, CTX)
        strict = f.parse(text, FormatContext(**{**CTX.__dict__, "strict": True}))
        assert strict.ok, (name, text, strict.reason)
        assert strict.action == f.parse(text, CTX).action, (name, text)
