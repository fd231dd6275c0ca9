"""guirl.methods.agentcpm.mapping: AgentCPM-GUI's unified action mapping, one row per rule."""

import pytest

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action, ActionError
from guirl.methods.agentcpm.mapping import FAMILIES, to_unified, try_to_unified

S = dict  # expected fields


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
        # scroll: OS-Atlas' intended low-instruction reversal never fires in AgentCPM's code
        ("osatlas", Action("scroll", direction="down", convention="content"), S(type="scroll", direction="down")),
        # scroll: OS-Genesis keeps the word in the high setting ...
        ("osgenesis", Action("scroll", direction="down", convention="content"), S(type="scroll", direction="down")),
        # scroll: an action given in the other convention is first expressed in the family's words
        ("uitars", Action("scroll", direction="up", convention="finger"), S(type="scroll", direction="up")),
        # press: Odyssey PRESS_RECENT -> APPSELECT (recent)
        ("odyssey", Action("press", key="recent"), S(type="press", key="recent")),
        ("agentcpm", Action("press", key="recent"), S(type="press", key="recent")),
        # status: Qwen terminate(failure) still becomes STATUS finish
        ("qwen_mobile_use", Action("terminate", status="fail"), S(type="terminate", status="success")),
        # status: Odyssey IMPOSSIBLE -> impossible (fail); Aguvis failure -> interrupt (fail)
        ("odyssey", Action("terminate", status="fail"), S(type="terminate", status="fail")),
        ("aguvis", Action("terminate", status="fail"), S(type="terminate", status="fail")),
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
    fmt, ctx = get_format("agentcpm"), FormatContext()
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
