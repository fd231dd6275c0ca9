"""Action parsers read untrusted model text: their time grows linearly with its length, and an
internal error of a parser surfaces in tests instead of passing for a parse failure.

The rewritten helpers of :mod:`guirl.actions.formats` must capture exactly what the regular
expressions of the original evaluation pipelines capture; the property tests below compare them
with those expressions (kept here as the reference) on short texts made of their special tokens.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.actions import Action, ActionError, ActionType
from guirl.actions.formats import FormatContext, _base, get_format
from guirl.actions.formats._base import ActionFormat, between, strip_fence, tag
from guirl.actions.formats.ces import _guir1_coord, _param_pairs, extract_answer_action
from guirl.actions.formats.osgenesis import action_object
from guirl.actions.types import ParseResult
from guirl.methods.ces.roles import parse_think_answer

CTX = dict(width=1080, height=2400, min_pixels=3136, max_pixels=12845056)
SMALL, BIG = 10_000, 1_000_000


def _text(prefix: str, unit: str, suffix: str, size: int) -> str:
    """``prefix + unit * k + suffix`` of about ``size`` characters."""
    return prefix + unit * max(1, (size - len(prefix) - len(suffix)) // len(unit)) + suffix


def _parser(name: str, pipeline: str | None) -> Callable[[str], object]:
    if name == "think_answer":
        return parse_think_answer
    fmt, ctx = get_format(name), FormatContext(**CTX, strict=pipeline is not None, pipeline=pipeline)
    return lambda text: fmt.parse(text, ctx)


#: (format, strict pipeline or None, prefix, repeated unit, suffix): inputs on which a parser
#: once rescanned the rest of the text from each position (quadratic or worse)
HOSTILE = [
    ("uitars", None, "", "\r\n", ""),  # ^\s*Action: from every line start
    ("uitars", None, "Thought:", "\r\n", ""),  # the thought's look-ahead
    ("uitars", None, "click(start_box='(", " ", "x')"),  # \s*[^()]* in the box check
    ("qwen_mobile_use", None, "", "<tool_call>", ""),  # <tag>(.*?)</tag> from every opening tag
    ("qwen_mobile_use", None, "<tool_call>```json{", " ", "x</tool_call>"),  # \s*```$ from every space
    ("ccpo", None, '<action>{"action": "wait"}</action>', "<think>", ""),
    ("ccpo", "uis1", "", "<action>", ""),
    ("ccpo", "ccpo_aitw", "", "<action>", ""),
    ("agentcpm", None, "```json{", " ", "x"),
    ("seeclick", None, "```json{", " ", "x"),
    ("androidlong", None, "", "<answer>", ""),
    ("ces_executor", "ces", "", "<answer>a(", ""),  # CES extract_answer_action
    ("ces_executor", "ces", "", "<answer>a(", "\n)</answer>"),  # ... with a closing call at the end
    ("ces_executor", None, "<answer>f(", "x", ")</answer>"),  # parse_params: \w+ from every letter
    ("ces_executor", None, "<answer>f(a='", "\\", ")</answer>"),  # parse_params: exponential on backslashes
    ("ces_executor", "guir1", "<answer>", "{", "</answer>"),  # GUI-R1's \{.*\[(\d+),...
    ("osgenesis", None, "", "action:{", ""),  # action:\s*(\{.*\}) from every occurrence
    ("think_answer", None, "", "<answer>", ""),
]


def _best(fn: Callable[[str], object], text: str, repeats: int) -> float:
    """The least CPU time of this process over ``repeats`` calls (other processes on a loaded
    host do not count)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn(text)
        best = min(best, time.process_time() - t0)
    return best


@pytest.mark.slow
@pytest.mark.parametrize(("name", "pipeline", "prefix", "unit", "suffix"), HOSTILE)
def test_parsers_are_linear_in_their_input(name, pipeline, prefix, unit, suffix):
    # 100x the input may take at most 300x the time (linear, with room for caches); a quadratic
    # parser takes about 10,000x. The best of several runs of each size, in CPU time.
    parse = _parser(name, pipeline)
    small = _best(parse, _text(prefix, unit, suffix, SMALL), 9)
    big = _best(parse, _text(prefix, unit, suffix, BIG), 5)
    assert big < 300 * small, (
        f"{name}/{pipeline}: 1 MB took {big:.3f} s, 10 KB {small * 1e3:.3f} ms ({big / small:.0f}x)"
    )


class _Broken(ActionFormat):
    """A parser with a bug: it divides by zero on every text."""

    name = "broken"
    coord_kind = "normalized"
    convention = "finger"
    types = frozenset({ActionType.CLICK})

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        return ParseResult(action=Action(ActionType.CLICK, point=(1 / len(""), 0.0)), raw=text)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        return ""


def test_internal_parser_errors_raise_in_tests():
    # conftest sets RAISE_INTERNAL_ERRORS: a bug in a parser fails the test that meets it
    assert _base.RAISE_INTERNAL_ERRORS
    with pytest.raises(ZeroDivisionError):
        _Broken().parse("click", FormatContext())


def test_internal_parser_errors_are_logged_with_their_type_for_users(monkeypatch, caplog):
    monkeypatch.setattr(_base, "RAISE_INTERNAL_ERRORS", False)
    with caplog.at_level(logging.WARNING, logger="guirl.actions.formats"):
        res = _Broken().parse("click", FormatContext())
    assert not res.ok and "ZeroDivisionError" in res.reason
    assert any("internal parser error ZeroDivisionError" in r.getMessage() for r in caplog.records)


def test_reading_failures_are_not_internal_errors():
    # numbers that a [-+0-9.eE]+ class matches but float() does not read, numbers too long for int()
    for name, text in [
        ("odyssey", "CLICK(0-, 5)"),
        ("uitars", "long_press(start_box='(5,5)', time='soon')"),
        ("ccpo", '<action>{"action": "click", "coordinate": [' + "9" * 5000 + ", 1]}</action>"),
    ]:
        assert not get_format(name).parse(text, FormatContext(**CTX)).ok


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2.5, True, "5"])
def test_duration_ms_is_a_whole_number_of_milliseconds(value):
    with pytest.raises(ActionError, match="whole number of milliseconds"):
        Action(ActionType.WAIT, duration_ms=value)


def test_duration_ms_keeps_whole_numbers():
    assert Action(ActionType.WAIT, duration_ms=2000.0).duration_ms == 2000
    assert isinstance(Action(ActionType.WAIT, duration_ms=2000.0).duration_ms, int)


# ----------------------------------------------------------------------------- same captures
def _texts(tokens: list[str], max_size: int = 14):
    return st.lists(st.sampled_from(tokens), max_size=max_size).map("".join)


@given(_texts(["<b>", "</b>", "x", " ", "\n", "<", ">"]))
def test_tag_captures_what_the_regex_captures(text):
    m = re.search(r"<b>(.*?)</b>", text, re.DOTALL)
    assert tag(text, "b") == (m.group(1).strip() if m else None)
    assert between(text, "<b>", "</b>") == (m.group(1) if m else None)


@given(_texts(["json", "python", " ", "\n", "`", "```", "x", "{"], 8))
def test_strip_fence_removes_what_the_regex_removes(body):
    text = ("```" + body).rstrip("\n")  # callers strip the text first
    want = re.sub(r"^```(?:json|python)?\s*|\s*```$", "", text)
    assert strip_fence(text, ("json", "python")) == want


@given(_texts(["<answer>", "</answer>", "a", "_", "(", ")", " ", "\n", "x", "Z", "\t"]))
def test_extract_answer_action_captures_what_ces_captures(text):
    m = re.match(r"^[\s\S]*?<answer>\s*(?P<name>[a-z_]+)\((?P<params>.*?)\)\s*</answer>\s*$", text, re.MULTILINE)
    assert extract_answer_action(text) == ((m.group("name"), m.group("params").strip()) if m else (None, None))


@given(_texts(["a", "b_", "=", " ", "'", "\\", "\n", "(", "1", "é", ",", "\\'"]))
def test_param_pairs_are_what_ces_finds(text):
    assert _param_pairs(text) == re.findall(r"(\w+)\s*=\s*('(?:\\.|[^'])*')", text)


@given(_texts(["{", "}", "[", "]", "1", "23", ",", " ", "\n", "x", ", "]))
def test_guir1_coordinate_is_what_guir1_finds(text):
    m = re.search(r"\{.*\[(\d+),\s*(\d+)]\s*.*\}", text)
    assert _guir1_coord(text) == ((m.group(1), m.group(2)) if m else None)


@given(_texts(["action:", "ACTION:", " ", "\n", "{", "}", "x", "Action: {"], 10))
def test_osgenesis_reads_the_object_the_regex_reads(text):
    found = list(re.finditer(r"action:\s*(\{.*\})", text, re.IGNORECASE | re.DOTALL))
    assert action_object(text) == ((found[-1].start(), found[-1].group(1)) if found else None)


@given(_texts(["Thought:", "Action:", "Reflection:", "\n", " ", "\r", "x", "\t", "Action_Summary:"], 12))
def test_uitars_line_bounded_white_space_reads_the_same(text):
    m1 = re.search(r"Thought:(.*?)(?=\n\s*(?:Action|Reflection|Action_Summary):|\Z)", text, re.DOTALL)
    m2 = re.search(r"Thought:(.*?)(?=\n[^\S\n]*(?:Action|Reflection|Action_Summary):|\Z)", text, re.DOTALL)
    assert (m1 and m1.group(1).strip()) == (m2 and m2.group(1).strip())
    a1, a2 = re.search(r"^\s*Action:", text, re.MULTILINE), re.search(r"^[^\S\n]*Action:", text, re.MULTILINE)
    assert (a1 and a1.end()) == (a2 and a2.end())
