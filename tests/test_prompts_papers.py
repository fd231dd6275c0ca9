"""Tests for the papers' prompts as data (guirl.prompts.PROMPTS, guirl/assets/prompts/*.txt):
every file loads and renders, every paper prompt lists the action words its paper's format
allows, and that format parses an output with each of those words."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from guirl.actions.formats import FormatContext, get_format
from guirl.config import load_config
from guirl.prompts import (
    DEFAULT_SYSTEM_PROMPT,
    PROMPTS,
    PROMPTS_DIR,
    PromptSpec,
    build_prompt,
    get_prompt,
    prompt_names,
    prompt_spec,
    prompt_text,
    render,
    system_text,
)

# a 1080x2400 screenshot at the paper profiles' pixel budget (CCPO: 12,845,056 px)
CTX = FormatContext(width=1080, height=2400, min_pixels=3136, max_pixels=12845056)
# Co-EPG's planner takes its point from the grounding model
GROUNDED = FormatContext(width=1080, height=2400, min_pixels=3136, max_pixels=12845056, grounded_point=(0.5, 0.5))


def dummy_values(name: str) -> dict[str, str]:
    return {k: f"<{k.upper()}>" for k in get_prompt(name).placeholders}


# ----------------------------------------------------------------------------- files load
def test_every_file_is_registered_and_every_prompt_has_a_file() -> None:
    files = sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))
    assert files == prompt_names()
    assert len(files) == 20


@pytest.mark.parametrize("name", prompt_names())
def test_prompt_loads_and_renders(name: str) -> None:
    info = get_prompt(name)
    raw = prompt_text(name)
    assert raw.strip() and not raw.endswith("\n")
    # the {name} fields of the file are exactly its placeholders and included prompts (and the
    # literal "{json}" of the short ccpo prompt, which is text for the model)
    literal = {"json"} if name == "ccpo_short" else set()
    fields = set(re.findall(r"\{([a-z_]+)\}", raw)) - literal
    assert fields == set(info.placeholders) | set(info.includes)
    text = render(name, **dummy_values(name))
    assert set(re.findall(r"\{([a-z_]+)\}", text)) == literal
    for k in info.placeholders:
        assert f"<{k.upper()}>" in text


@pytest.mark.parametrize("name", prompt_names())
def test_source_is_named(name: str) -> None:
    info = get_prompt(name)
    if info.from_paper:
        # a paper location: "<paper> App. X" or "<paper> Table N"
        assert re.match(rf"{re.escape(info.paper)} (App\. [A-Z](\.\d+)?|Table \d+)", info.where), info.where
    else:
        assert info.where.startswith("not from a paper"), info.where


@pytest.mark.parametrize(
    "name, values, needle",
    [
        ("ces_executor", {}, "missing ['instruction']"),  # a placeholder not given
        ("ccpo", {"instruction": "x"}, "unknown ['instruction']"),  # a value the prompt has no place for
        ("nope", {}, "unknown prompt 'nope'"),  # not registered: the error lists the names
    ],
)
def test_render_rejects_bad_values(name: str, values: dict, needle: str) -> None:
    with pytest.raises((ValueError, KeyError), match=re.escape(needle)):
        render(name, **values)


def test_includes_are_filled_with_the_included_prompts() -> None:
    # Co-EPG Table 12 is Table 10 + goal + history + Table 11
    text = render("coepg_androidcontrol_low", instruction="G", step_instruction="S", history="H")
    assert text.startswith(prompt_text("coepg_androidcontrol_general"))
    assert prompt_text("coepg_androidcontrol_guidelines") in text
    assert "The current next step's low-level goal is: S" in text
    assert "{general_instruction}" in prompt_text("coepg_androidcontrol_high")


def test_agentcpm_schema_is_valid_json() -> None:
    # App. C.2: the schema part of the system prompt is a JSON schema
    schema = json.loads(prompt_text("agentcpm").split("# Schema", 1)[1])
    assert set(schema["properties"]) == {"thought", "POINT", "to", "duration", "PRESS", "TYPE", "STATUS"}


def test_qwen_mobile_use_tool_is_valid_json() -> None:
    # AndroidLong App. F.2: the mobile_use tool between <tools> tags
    text = render("qwen_mobile_use", width=1092, height=2408)
    tool = json.loads(text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0])
    assert "The screen's resolution is 1092x2408." in tool["function"]["description"]


# ----------------------------------------------------------------------------- action words
def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _ccpo_words(t: str) -> list[str]:  # CCPO App. A.9: "- word: ..." lines of the action space
    return re.findall(r"^- (\w+):", _between(t, "following actions:", "The arguments"), re.M)


def _mobile_use_words(t: str) -> list[str]:  # AndroidLong App. F.2: the action enum of the tool
    return json.loads(re.search(r'"enum": (\["key"[^\]]*\])', t).group(1))  # type: ignore[union-attr]


def _agentcpm_words(t: str) -> list[str]:  # AgentCPM-GUI App. C.2: action keys, PRESS and STATUS enums
    props = json.loads(t.split("# Schema", 1)[1])["properties"]
    keys = [k for k in props if k != "thought"]
    return keys + [f"PRESS={v}" for v in props["PRESS"]["enum"]] + [f"STATUS={v}" for v in props["STATUS"]["enum"]]


def _androidlong_words(t: str) -> list[str]:  # AndroidLong App. F.1: the do(action=...) / finish examples
    return re.findall(r'do\(action="([^"]+)"', t) + re.findall(r"^\s*(finish)\(", t, re.M)


def _coepg_words(t: str) -> list[str]:  # Co-EPG Table 10: the options of <action>
    return re.findall(r"\w+", _between(t, "following options:", "You must"))


def _mind2web_words(t: str) -> list[str]:  # Co-EPG Table 9: "Choose one from CLICK, TYPE, or SELECT"
    return re.findall(r"[A-Z]{3,}", _between(t, "Choose one from", "."))


def _ces_words(t: str) -> list[str]:  # CES App. C: the Executor's action enumeration
    return [w.strip() for w in _between(t, "enumerate from [", "]").split(",")]


def _mu(action: str, args: str = "") -> str:
    return '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "' + action + '"' + args + "}}\n</tool_call>"


def _cc(action: str, args: str = "") -> str:
    return '<action>\n{"action": "' + action + '"' + args + "}\n</action>"


def _ep(word: str, element: str = "None", value: str = "None") -> str:
    return f"<plan> ELEMENT: {element} </plan>\n<action> ACTION: {word} </action>\n<value> VALUE: {value} </value>"


def _ces(word: str, point: str = "", text: str = "no input text") -> str:
    return f"<think>t</think> <answer>['action': '{word}', 'point': [{point}], 'input_text': '{text}']</answer>"


_MOBILE_USE_OUT = {  # word -> (output, expected action type, expected key/status/direction or None)
    "key": ("KEYCODE_BACK", "press", "back"),  # adb keyevent syntax (the prompt's volume_up: see below)
    "click": (', "coordinate": [100, 200]', "click", None),
    "long_press": (', "coordinate": [100, 200], "time": 2', "long_press", None),
    "swipe": (', "coordinate": [100, 800], "coordinate2": [100, 200]', "scroll", "up"),  # finger moves up
    "type": (', "text": "hi"', "type", None),
    "answer": (', "text": "42"', "answer", None),
    "system_button": (', "button": "Menu"', "press", "recent"),
    "open": (', "text": "Clock"', "open_app", None),
    "wait": (', "time": 2', "wait", None),
    "terminate": (', "status": "failure"', "terminate", "fail"),
}

#: prompt -> (its words as the paper's text lists them, the format, word -> (output, type, detail))
CASES: dict[str, tuple] = {
    # CCPO App. A.9, the ccpo format (<action>{json}</action>)
    "ccpo": (
        _ccpo_words,
        "ccpo",
        {
            w: (_cc(w, ', "text": "KEYCODE_BACK"') if w == "key" else _cc(w, a), t, d)
            for w, (a, t, d) in _MOBILE_USE_OUT.items()
        },
    ),
    # AndroidLong App. F.2 (the Qwen2.5-VL mobile_use tool), the qwen_mobile_use format
    "qwen_mobile_use": (
        _mobile_use_words,
        "qwen_mobile_use",
        {
            w: (_mu(w, ', "text": "KEYCODE_BACK"') if w == "key" else _mu(w, a), t, d)
            for w, (a, t, d) in _MOBILE_USE_OUT.items()
        },
    ),
    # AgentCPM-GUI App. C.2, the agentcpm compact JSON (0-1000 grid)
    "agentcpm": (
        _agentcpm_words,
        "agentcpm",
        {
            "POINT": ('{"POINT":[500,500]}', "click", None),
            "to": ('{"POINT":[500,500],"to":"up"}', "scroll", "up"),
            "duration": ('{"POINT":[500,500],"duration":1000}', "long_press", None),
            "PRESS": ('{"PRESS":"BACK"}', "press", "back"),
            "TYPE": ('{"TYPE":"hi"}', "type", None),
            "STATUS": ('{"STATUS":"finish"}', "terminate", "success"),
            "PRESS=HOME": ('{"PRESS":"HOME"}', "press", "home"),
            "PRESS=BACK": ('{"PRESS":"BACK"}', "press", "back"),
            "PRESS=ENTER": ('{"PRESS":"ENTER"}', "press", "enter"),
            # continue: the task goes on, with the step's action beside it
            "STATUS=continue": ('{"STATUS":"continue","POINT":[10,20]}', "click", None),
            "STATUS=finish": ('{"STATUS":"finish"}', "terminate", "success"),
            "STATUS=satisfied": ('{"STATUS":"satisfied"}', "terminate", "success"),  # nothing to do: done
            "STATUS=impossible": ('{"STATUS":"impossible"}', "terminate", "fail"),
            "STATUS=interrupt": ('{"STATUS":"interrupt"}', "terminate", "fail"),
            "STATUS=need_feedback": ('{"STATUS":"need_feedback"}', "terminate", "fail"),
        },
    ),
    # AndroidLong App. F.1, the androidlong do(...) format (element boxes in screen pixels)
    "androidlong": (
        _androidlong_words,
        "androidlong",
        {
            "Tap": ('<answer>\ndo(action="Tap", element=[100, 200, 150, 250])\n</answer>', "click", None),
            "Type": ('<answer>\ndo(action="Type", text="Hello World")\n</answer>', "type", None),
            "Swipe": (
                '<answer>do(action="Swipe", direction="up", dist="long", element=[1, 2, 3, 4])</answer>',
                "scroll",
                "up",
            ),
            "Long Press": (
                '<answer>do(action="Long Press", element=[200, 300, 250, 350])</answer>',
                "long_press",
                None,
            ),
            "Launch": ('<answer>do(action="Launch", app="Settings")</answer>', "open_app", None),
            "Back": ('<answer>do(action="Back")</answer>', "press", "back"),
            "finish": ('<answer>finish(message="Task completed.")</answer>', "terminate", "success"),
        },
    ),
    # Co-EPG Table 10 (AndroidControl), the coepg_planner format with the labelled tags
    "coepg_androidcontrol_general": (
        _coepg_words,
        "coepg_planner",
        {
            "terminate": (_ep("terminate"), "terminate", "success"),
            "click": (_ep("click", "the Send button"), "click", None),
            "long_press": (_ep("long_press", "the photo"), "long_press", None),
            "input_text": (_ep("input_text", value="cats"), "type", None),
            "scroll": (_ep("scroll", value="down"), "scroll", "down"),
            "navigate_home": (_ep("navigate_home"), "press", "home"),
            "navigate_back": (_ep("navigate_back"), "press", "back"),
            "open_app": (_ep("open_app", value="Clock"), "open_app", None),
            "wait": (_ep("wait"), "wait", None),
        },
    ),
    # Co-EPG Table 9 (Multimodal-Mind2Web)
    "coepg_mind2web": (
        _mind2web_words,
        "coepg_planner",
        {
            "CLICK": (_ep("CLICK", "the search box"), "click", None),
            "TYPE": (_ep("TYPE", "the search box", "cats"), "type", None),
            "SELECT": (_ep("SELECT", "the size menu", "Large"), "select", None),
        },
    ),
    # CES App. C (Executor), the ces_executor format
    "ces_executor": (
        _ces_words,
        "ces_executor",
        {
            "complete": (_ces("complete"), "terminate", "success"),
            "close": (_ces("close"), "terminate", "fail"),
            "press home": (_ces("press home"), "press", "home"),
            "click": (_ces("click", "100, 200"), "click", None),
            "press back": (_ces("press back"), "press", "back"),
            "type": (_ces("type", text="hi"), "type", None),
            "select": (_ces("select", "100, 200", "Large"), "select", None),
            "scroll": (_ces("scroll", text="down"), "scroll", "down"),
            "enter": (_ces("enter"), "press", "enter"),
        },
    ),
}

WORD_CASES = [(name, word) for name, (_, _, outs) in CASES.items() for word in outs]


def test_every_paper_prompt_with_actions_has_a_case() -> None:
    # a paper prompt that asks for an action (or whose Table includes one that does) is covered here
    covered = set(CASES) | {"coepg_androidcontrol_high", "coepg_androidcontrol_low", "coepg"}
    asks = {n for n, p in PROMPTS.items() if p.from_paper and p.output_format is not None}
    assert asks - {"agentcpm_user", "coepg_verifier_addition"} <= covered


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_lists_exactly_the_words_of_the_case_table(name: str) -> None:
    extract, fmt, outs = CASES[name]
    assert get_prompt(name).output_format == fmt
    words = extract(prompt_text(name))
    assert len(words) == len(set(words)), words
    assert sorted(words) == sorted(outs)


@pytest.mark.parametrize("name, word", WORD_CASES, ids=[f"{n}-{w}" for n, w in WORD_CASES])
def test_format_parses_every_word_the_prompt_lists(name: str, word: str) -> None:
    _, fmt, outs = CASES[name]
    out, typ, detail = outs[word]
    res = get_format(fmt).parse(out, GROUNDED if fmt == "coepg_planner" else CTX)
    assert res.ok, (out, res.reason)
    assert res.action.type.value == typ
    if detail is not None:
        assert detail in (res.action.key, res.action.status, res.action.direction)


@pytest.mark.parametrize(
    "fmt, out",
    [("ccpo", _cc("key", ', "text": "volume_up"')), ("qwen_mobile_use", _mu("key", ', "text": "volume_up"'))],
)
def test_key_outside_the_canonical_keys_fails_with_its_name(fmt: str, out: str) -> None:
    # documented limit: the canonical action has back/home/enter/recent keys only, so the prompt's
    # own examples ("volume_up", ...) do not parse; the reason names the key
    res = get_format(fmt).parse(out, CTX)
    assert not res.ok and "volume_up" in res.reason


# ----------------------------------------------------------------------------- threading
def test_tiny_profile_trains_with_the_unchanged_short_prompt() -> None:
    # the tiny profile's SFT / RL / evaluation system prompt is the one it had before the paper
    # prompts came in, so the tiny SFT and notebook numbers do not move
    cfg = load_config("tiny")
    spec = prompt_spec(cfg, "1AO")
    assert spec.system_prompt_name == "ccpo_short"
    assert system_text(spec).startswith("You are a GUI agent operating a phone. Given the task,")
    # sha256 of the ccpo system prompt of guirl.prompts before the prompt files (commit 5f631b1)
    digest = hashlib.sha256(system_text(spec).encode()).hexdigest()
    assert digest == "0207fda12673b1e9ce369275e4792ecfc9e21aa0a889434373636b769dae7be6"


@pytest.mark.parametrize("fmt", sorted(DEFAULT_SYSTEM_PROMPT))
def test_paper_profile_uses_the_paper_prompt(fmt: str) -> None:
    cfg = load_config("paper-7b", overrides=[f"sft.output_format={fmt}"])
    spec = prompt_spec(cfg, "1AO")
    assert spec.system_prompt_name == DEFAULT_SYSTEM_PROMPT[fmt] == fmt
    assert get_prompt(spec.system_prompt_name).from_paper


def test_mobile_use_prompt_states_the_resized_screen() -> None:
    spec = PromptSpec(output_format="qwen_mobile_use", n_history=0)
    messages, _ = build_prompt("goal", [], "cur", spec, resolution=(1092, 2408))
    assert "The screen's resolution is 1092x2408." in messages[0]["content"][0]["text"]
    with pytest.raises(ValueError, match="resolution"):
        build_prompt("goal", [], "cur", spec)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"system_prompt": "agentcpm_user"}, "is a user prompt"),  # a user turn as system prompt
        ({"system_prompt": "agentcpm"}, "asks for the 'agentcpm' format"),  # another format's prompt
        ({"user_template": "ccpo"}, "is a system prompt"),  # a system prompt as user turn
        ({"user_template": "agentcpm_user", "output_format": "agentcpm", "n_history": 1}, "nA history"),
    ],
)
def test_prompt_spec_rejects_mismatched_prompts(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        PromptSpec(**kwargs)


def test_user_template_lays_out_the_agentcpm_turn() -> None:
    # AgentCPM-GUI App. C.2: "<Question>{query}</Question>\n当前屏幕截图: " then the image
    spec = PromptSpec(output_format="agentcpm", n_history=0, user_template="agentcpm_user")
    messages, images = build_prompt("打开设置", [], "cur", spec)
    assert messages[1]["content"] == [
        {"type": "text", "text": "<Question>打开设置</Question>\n当前屏幕截图: "},
        {"type": "image"},
    ]
    assert images == ["cur"]
    assert messages[0]["content"][0]["text"] == prompt_text("agentcpm")
