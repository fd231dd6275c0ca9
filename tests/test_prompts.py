"""Tests for guirl.prompts: PromptSpec validation, nA / nAO prompt building, recorded-episode prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.config import load_config
from guirl.data.schema import Episode, Step, read_episodes
from guirl.env.export import build_minigui_dataset
from guirl.prompts import (
    SYSTEM_PROMPTS,
    PromptSpec,
    action_text,
    build_prompt,
    episode_step_prompt,
    format_context,
    prompt_spec,
    system_text,
)

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
RES = (252, 560)  # a resized screen (width, height) for prompts that state it (Qwen2.5-VL mobile_use)


# ----------------------------------------------------------------------------- helpers
def user_content(messages: list[dict]) -> list[dict]:
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def texts(messages: list[dict]) -> list[str]:
    return [c["text"] for c in user_content(messages) if c["type"] == "text"]


def joined(messages: list[dict]) -> str:
    return "".join(texts(messages))


def instructions(messages: list[dict]) -> list[str]:
    """The step-instruction text items (stripped); where they sit in the prompt is not pinned."""
    return [t.strip() for t in texts(messages) if "Instruction for this step" in t]


def n_placeholders(messages: list[dict]) -> int:
    return sum(c["type"] == "image" for m in messages for c in m["content"])


def history_of(k: int) -> list[tuple[str, str]]:
    """``k`` previous steps with unique action texts ``A00``, ``A01``... and images ``img00``..."""
    return [(f"A{i:02d}", f"img{i:02d}") for i in range(k)]


def image_owners(messages: list[dict]) -> list[str]:
    """For each image placeholder, the text item just before it (``"Step k: "`` or ``"Current screen:"``)."""
    content = user_content(messages)
    return [content[i - 1]["text"] for i, c in enumerate(content) if c["type"] == "image"]


@pytest.fixture(scope="session")
def minigui12(session_cache: Path) -> Path:
    """A 12-task MiniGUI dataset, built once per session in the shared cache."""
    root = session_cache / "minigui-n12-seed0"
    if not (root / "manifest.json").exists():
        build_minigui_dataset(root, n_tasks=12, seed=0, progress=False)
    return root


def all_episodes(root: Path) -> list[Episode]:
    splits = ("train", "test_in_domain", "test_unseen_task", "test_unseen_app")
    return [ep for s in splits for ep in read_episodes(root / s / "episodes.jsonl")]


def hand_episode() -> Episode:
    """Five steps of mixed types; the last two on a different screen size (per-step coordinate context)."""
    steps = (
        Step(0, "images/s0.png", (280, 504), Action("click", point=(0.5, 0.2)), "Tap Contacts"),
        Step(1, "images/s1.png", (280, 504), Action("type", text="Rosa"), "Type Rosa"),
        Step(2, "images/s2.png", (280, 504), Action("scroll", direction="down", convention="content"), ""),
        Step(3, "images/s3.png", (1080, 2400), Action("press", key="back"), "Go back"),
        Step(4, "images/s4.png", (1080, 2400), Action("terminate", status="success"), "Done"),
    )
    return Episode("ep-hand", "Find Rosa's number", steps, source="test")


# ----------------------------------------------------------------------------- PromptSpec
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"n_history": -1}, "-1"),  # negative history length
        ({"n_history": 6}, "6"),  # above CCPO's maximum of 5
        ({"history_mode": "AO"}, "'AO'"),  # tag suffix instead of the mode name
        ({"history_mode": "nao"}, "'nao'"),  # wrong case
        ({"output_format": "bogus"}, "'bogus'"),  # not a format at all
        ({"output_format": "uitars"}, "'uitars'"),  # a registered parser without a system prompt
    ],
)
def test_prompt_spec_rejects_bad_values_naming_them(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PromptSpec(**kwargs)


@pytest.mark.parametrize(
    "spec, tag",
    [
        (PromptSpec(n_history=0, history_mode="nA"), "0A"),  # no history
        (PromptSpec(n_history=1, history_mode="nAO"), "1AO"),  # default CCPO setting
        (PromptSpec(n_history=5, history_mode="nA", output_format="agentcpm"), "5A"),  # upper bound
        (PromptSpec(n_history=3, history_mode="nAO", output_format="qwen_mobile_use"), "3AO"),
    ],
)
def test_prompt_spec_tag(spec: PromptSpec, tag: str) -> None:
    assert spec.tag == tag


@pytest.mark.parametrize(
    "tag, n, mode",
    [
        ("1AO", 1, "nAO"),  # one action with its screenshot
        ("3A", 3, "nA"),  # three actions, text only
        ("0A", 0, "nA"),  # no history
        ("5AO", 5, "nAO"),  # CCPO's longest history
    ],
)
def test_prompt_spec_from_config_tag(tag: str, n: int, mode: str) -> None:
    overrides = ["sft.output_format=qwen_mobile_use", "sft.system_prompt=null", "sft.use_step_instruction=false"]
    cfg = load_config("tiny", overrides=overrides)
    spec = prompt_spec(cfg, tag)
    assert (spec.n_history, spec.history_mode, spec.output_format, spec.use_step_instruction) == (
        n,
        mode,
        "qwen_mobile_use",
        False,
    )
    assert spec.tag == tag  # the tag round-trips


# ----------------------------------------------------------------------------- build_prompt
@pytest.mark.parametrize(
    "k, n, mode, shown, images, first_step",
    [
        (0, 3, "nAO", [], ["cur"], None),  # first step: nothing to show
        (4, 0, "nAO", [], ["cur"], None),  # n = 0 hides history even when there is some
        (4, 3, "nAO", ["A01", "A02", "A03"], ["img01", "img02", "img03", "cur"], 2),  # last 3 of 4, oldest first
        (4, 3, "nA", ["A01", "A02", "A03"], ["cur"], 2),  # text only: current image alone
        (2, 5, "nAO", ["A00", "A01"], ["img00", "img01", "cur"], 1),  # fewer steps than n: all shown
        (7, 1, "nA", ["A06"], ["cur"], 7),  # only the very last action, numbered 7
    ],
)
def test_build_prompt_shows_last_n(k, n, mode, shown, images, first_step) -> None:
    spec = PromptSpec(n_history=n, history_mode=mode)
    messages, imgs = build_prompt("task", history_of(k), "cur", spec)
    assert imgs == images
    assert n_placeholders(messages) == len(imgs)
    body = joined(messages)
    for i in range(k):
        assert (f"A{i:02d}" in body) == (f"A{i:02d}" in shown)
    steps = [t for t in texts(messages) if t.startswith("Step ")]
    if first_step is None:
        assert steps == [] and "Previous actions" not in body
    else:
        assert steps == [f"Step {first_step + j}: " for j in range(len(shown))]
    assert messages[0]["content"] == [{"type": "text", "text": SYSTEM_PROMPTS[spec.output_format]}]
    assert body.startswith("Task: task\n")


@pytest.mark.parametrize(
    "use, given_instr, shown",
    [
        (True, "Tap Send", True),  # Low setting with an instruction
        (True, None, False),  # online play has none
        (True, "", False),  # empty instruction is not shown
        (False, "Tap Send", False),  # High setting hides it
    ],
)
def test_build_prompt_step_instruction(use: bool, given_instr, shown: bool) -> None:
    spec = PromptSpec(n_history=1, use_step_instruction=use)
    messages, _ = build_prompt("task", history_of(2), "cur", spec, step_instruction=given_instr)
    assert instructions(messages) == (["Instruction for this step: Tap Send"] if shown else [])


@settings(max_examples=150, deadline=None)
@given(
    k=st.integers(0, 8),
    n=st.integers(0, 5),
    mode=st.sampled_from(["nA", "nAO"]),
    fmt=st.sampled_from(sorted(SYSTEM_PROMPTS)),
    use_step=st.booleans(),
    step_instr=st.one_of(st.none(), st.text(alphabet="abc xyz", min_size=1, max_size=8)),
)
def test_build_prompt_property(k, n, mode, fmt, use_step, step_instr) -> None:
    spec = PromptSpec(output_format=fmt, n_history=n, history_mode=mode, use_step_instruction=use_step)
    history = history_of(k)
    messages, images = build_prompt("goal", history, "cur", spec, step_instruction=step_instr, resolution=RES)
    m = min(n, k)
    last = history[k - m :] if m else []
    # images: the shown history screenshots (nAO only), oldest first, then the current screen
    assert images == ([img for _, img in last] if mode == "nAO" else []) + ["cur"]
    assert n_placeholders(messages) == len(images)
    # each placeholder sits right after the label of the step it belongs to
    offset = k - m
    labels = [f"Step {offset + j + 1}: " for j in range(m)] if mode == "nAO" else []
    assert image_owners(messages) == labels + ["Current screen:"]
    # exactly the last m actions are shown, in order, each after its step label
    steps = [t for t in texts(messages) if t.startswith("Step ")]
    assert steps == [f"Step {offset + j + 1}: " for j in range(m)]
    body = joined(messages)
    assert [f"A{i:02d}" in body for i in range(k)] == [i >= offset for i in range(k)]
    assert ("Previous actions:\n" in texts(messages)) == (m > 0)
    shown_instr = [f"Instruction for this step: {step_instr}".strip()] if use_step and step_instr else []
    assert instructions(messages) == shown_instr
    assert messages[0]["content"][0]["text"] == system_text(spec, RES)


# ----------------------------------------------------------------------------- episode_step_prompt
@pytest.mark.parametrize(
    "image_root, expected",
    [
        ("", "images/s3.png"),  # no root: paths stay relative
        ("/data/mg/test", "/data/mg/test/images/s3.png"),  # joined to the dataset folder
        ("/data/mg/test/", "/data/mg/test/images/s3.png"),  # trailing slash does not double
    ],
)
def test_episode_step_prompt_image_paths(image_root: str, expected: str) -> None:
    spec = PromptSpec(n_history=2, history_mode="nAO")
    _, images, _ = episode_step_prompt(
        hand_episode(), 3, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=image_root
    )
    prefix = expected.removesuffix("images/s3.png")
    assert images == [prefix + "images/s1.png", prefix + "images/s2.png", expected]


@pytest.mark.parametrize("fmt", sorted(SYSTEM_PROMPTS))
@pytest.mark.parametrize("t", [0, 1, 2, 3, 4])  # every step of the hand-made episode
def test_episode_step_prompt_completion_and_history(fmt: str, t: int) -> None:
    ep = hand_episode()
    fm = get_format(fmt)
    step = ep.steps[t]
    ctx = format_context(step.screen_size, MIN_PX, MAX_PX)
    assert fm.can_format(step.action)  # every hand-made action is expressible in the three prompt formats
    spec = PromptSpec(output_format=fmt, n_history=3, history_mode="nA", use_step_instruction=True)
    messages, images, completion = episode_step_prompt(ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert completion == fm.format(step.action, ctx)
    assert fm.parse(completion, ctx).action == fm.project(step.action, ctx)
    assert images == [step.screenshot]  # nA: the current screen only
    body = joined(messages)
    assert body.startswith(f"Task: {ep.instruction}\n")
    for s in ep.steps[max(0, t - 3) : t]:  # history entries use each step's own screen size
        prev = action_text(s.action, spec, format_context(s.screen_size, MIN_PX, MAX_PX))
        assert f"Step {s.step_id + 1}: " in texts(messages) and f"{prev}\n" in texts(messages)
    instr = step.low_level_instruction
    assert instructions(messages) == ([f"Instruction for this step: {instr}"] if instr else [])


@pytest.mark.parametrize("fmt", sorted(SYSTEM_PROMPTS))
def test_episode_step_prompt_roundtrip_on_minigui(minigui12: Path, fmt: str) -> None:
    """Every expressible MiniGUI step: the completion parses back to the format's projection."""
    fm = get_format(fmt)
    spec = PromptSpec(output_format=fmt, n_history=0)
    checked = 0
    for ep in all_episodes(minigui12):
        for t, step in enumerate(ep.steps):
            if not fm.can_format(step.action) or any(not fm.can_format(s.action) for s in ep.steps[:t]):
                continue
            ctx = format_context(step.screen_size, MIN_PX, MAX_PX)
            _, images, completion = episode_step_prompt(
                ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=str(minigui12)
            )
            assert completion == fm.format(step.action, ctx)
            res = fm.parse(completion, ctx)
            assert res.ok, (ep.episode_id, t, completion, res.reason)
            assert res.action == fm.project(step.action, ctx)
            assert images == [f"{minigui12}/{step.screenshot}"]
            checked += 1
    assert checked >= 40  # the 12-task set has 100+ steps; most are expressible in every format


@pytest.mark.parametrize("t", [-1, 5, 99])  # negative, one past the end, far past the end
def test_episode_step_prompt_bad_index_names_episode(t: int) -> None:
    with pytest.raises(IndexError, match="ep-hand"):
        episode_step_prompt(hand_episode(), t, PromptSpec(), min_pixels=MIN_PX, max_pixels=MAX_PX)
