"""Tests for guirl.env.pretraining: every sample's answer follows from MiniGUI's state and drawn
text, wrong answers are caught, probes are held out, scoring is exact."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.actions import Action
from guirl.actions.formats import FormatContext, get_format
from guirl.env import tasks as T
from guirl.env.core import MiniGUIEnv
from guirl.env.pretraining import (
    PROBES,
    SKILLS,
    Sample,
    SampleError,
    Visit,
    generate_samples,
    goal_slots,
    pick_format,
    read_samples,
    score_sample,
    verify_sample,
    visit_samples,
    visits,
    write_samples,
)
from guirl.env.render import render_screen, render_screen_spans
from guirl.train.pretrain import PretrainConfig, write_pretraining_data

CTX = FormatContext(width=280, height=504, min_pixels=3136, max_pixels=141120)


@pytest.fixture(scope="module")
def tasks() -> list[T.Task]:
    return T.generate_tasks(24, seed=3, prefix="pt-test")


@pytest.fixture(scope="module")
def all_visits(tasks: list[T.Task]) -> list[Visit]:
    return list(visits(tasks))


def test_spans_leave_the_pixels_unchanged_and_name_what_was_drawn(all_visits: list[Visit]) -> None:
    for v in all_visits[:40]:
        image, spans = render_screen_spans(v.screen)
        assert np.array_equal(np.asarray(image), np.asarray(render_screen(v.screen)))
        for s in spans:
            w = v.screen.find(s.element_id)
            assert w is not None
            if s.kind == "label":
                assert s.text == w.label or (s.truncated and s.text.endswith("..."))
            elif s.kind == "value":
                assert s.text == w.text or (s.truncated and s.text.endswith("..."))
            x1, y1, x2, y2 = s.box
            assert 0 <= x1 < x2 <= 280 and 0 <= y1 < y2 <= 504


def test_every_skill_is_generated_and_every_answer_rederives_from_the_state(all_visits: list[Visit]) -> None:
    rng = random.Random(0)
    seen: set[str] = set()
    env = MiniGUIEnv(render=False)
    for v in all_visits:
        for s in visit_samples(v, rng):
            seen.add(s.skill)
            verify_sample(s, v)  # generation checked it; check again, and independently below
            if s.skill == "ground_label":
                env.reset(options={"state": v.task.initial_state})
                hit = v.screen.hit(Action.from_dict(s.action).point)
                assert hit is not None and hit.label == s.source["label"] and f"'{hit.label}'" in s.question
            if s.skill == "copy_goal":
                assert s.answer in v.task.instruction and s.answer == str(v.task.params[s.source["slot"]])
            if s.skill == "copy_screen" and s.question.startswith("Is "):
                w = v.screen.find(s.source["element_id"])
                assert w.role == "toggle" and s.answer == ("on" if w.style.get("on") else "off")
            if s.skill in ("goal_step", "action_syntax"):
                assert s.action == v.action.to_dict()
    assert seen == set(SKILLS)


def _wrong(s: Sample) -> Sample:
    """The same sample with a wrong answer (or a click outside its element)."""
    if s.action is not None:
        a = Action.from_dict(s.action)
        if a.point is not None:
            bad = Action(a.type, point=(0.5, 0.965))  # the navigation bar, never a labelled element's box
        else:
            bad = Action(a.type, text=(a.text or "") + "x", key=a.key, status=a.status)
        return dataclasses.replace(s, action=bad.to_dict())
    return dataclasses.replace(s, answer=(s.answer or "") + "x")


@pytest.mark.parametrize("skill", SKILLS)
def test_a_wrong_answer_is_refused(skill: str, all_visits: list[Visit]) -> None:
    rng = random.Random(1)
    for v in all_visits:
        for s in visit_samples(v, rng, {skill: 1.0}):
            if skill == "ground_label" and s.target_box[3] > 0.93:
                continue
            with pytest.raises(SampleError, match=s.sample_id):
                verify_sample(_wrong(s), v)
            return
    pytest.fail(f"no {skill} sample in the test visits")


def test_goal_slots_are_quoted_verbatim(tasks: list[T.Task]) -> None:
    n = 0
    for t in tasks:
        for key, value in goal_slots(t):
            assert value in t.instruction and t.params[key] == value
            n += 1
    assert n > 10


def test_generation_is_deterministic_and_images_are_written_once(tmp_path: Path, tasks: list[T.Task]) -> None:
    a = generate_samples(tasks[:6], image_dir=tmp_path / "a" / "images", seed=0)
    b = generate_samples(tasks[:6], image_dir=tmp_path / "b" / "images", seed=0)
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]
    files = sorted((tmp_path / "a" / "images").iterdir())
    assert len(files) == len({s.screen_key for s in a if s.screen_key})
    assert all(s.image is None for s in a if s.skill == "action_syntax")
    write_samples(tmp_path / "s.jsonl", a)
    assert [s.to_dict() for s in read_samples(tmp_path / "s.jsonl")] == [s.to_dict() for s in a]


def test_exclusions_and_goal_templates_are_honoured(tasks: list[T.Task]) -> None:
    full = generate_samples(tasks, image_dir=None, seed=0)
    banned_screen = next(s.screen_key for s in full if s.screen_key)
    banned_goal = next(s.goal for s in full if s.goal)
    only = {tasks[0].template_id}
    out = generate_samples(
        tasks,
        image_dir=None,
        seed=0,
        exclude_screens={banned_screen},
        exclude_goals={banned_goal},
        goal_templates=only,
    )
    assert all(s.screen_key != banned_screen for s in out)
    assert all(banned_goal not in s.question for s in out)
    goal_tasks = {s.source["task_id"] for s in out if s.skill in ("copy_goal", "goal_step")}
    assert goal_tasks <= {t.task_id for t in tasks if t.template_id in only}


def test_read_samples_names_the_file_and_line_of_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"sample_id": "a", "skill": "read_point", "question": "q"}\n{"sample_id": "b", "skill": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*unknown skill 'x'"):
        read_samples(path)


def test_probes_are_held_out_from_training_and_from_00s_test_goals(tmp_path: Path) -> None:
    p = PretrainConfig(n_tasks=12, probe_tasks=12, probe_per_skill=5)
    test_goals = {t.instruction for t in T.generate_tasks(30, seed=0, prefix="mg-ut")}
    m = write_pretraining_data(
        tmp_path / "pt", p, seed=0, width=280, height=504, exclude_goals=test_goals, goal_templates=set(T.TEMPLATES)
    )
    train = read_samples(tmp_path / "pt" / "train.jsonl")
    probes = read_samples(tmp_path / "pt" / "probes.jsonl")
    assert m["probe_screens_in_train"] == 0 and m["probe_goals_in_train"] == 0
    assert not {s.screen_key for s in probes} & {s.screen_key for s in train}
    assert not {s.goal for s in probes if s.goal} & {s.goal for s in train if s.goal}
    assert not {s.goal for s in train if s.goal} & test_goals
    assert {s.skill for s in probes} == set(PROBES)
    assert all((tmp_path / "pt" / s.image).is_file() for s in [*train, *probes] if s.image)
    # the same key reuses the folder; another key rebuilds it
    stamp = (tmp_path / "pt" / "manifest.json").stat().st_mtime_ns
    write_pretraining_data(
        tmp_path / "pt", p, seed=0, width=280, height=504, exclude_goals=test_goals, goal_templates=set(T.TEMPLATES)
    )
    assert (tmp_path / "pt" / "manifest.json").stat().st_mtime_ns == stamp
    write_pretraining_data(
        tmp_path / "pt", p, seed=1, width=280, height=504, exclude_goals=test_goals, goal_templates=set(T.TEMPLATES)
    )
    assert (tmp_path / "pt" / "manifest.json").stat().st_mtime_ns != stamp


# ------------------------------------------------------------------------------------ scoring
BOX = (0.04, 0.1, 0.96, 0.19)


@pytest.mark.parametrize(
    ("sample", "output", "correct"),
    [
        (Sample("r", "read_point", "q", answer="Bob"), "Bob", True),
        (Sample("r", "read_point", "q", answer="Bob"), " Bob\n", True),
        (Sample("r", "read_point", "q", answer="Bob"), "bob", False),
        (Sample("r", "read_point", "q", answer="Bob"), "Bob 555", False),
        (Sample("c", "copy_screen", "q", answer="555-1234"), "555-1234", True),
        (Sample("c", "copy_screen", "q", answer="555-1234"), "555-1243", False),
        (
            Sample(
                "g", "ground_label", "q", action={"type": "click", "point": [0.5, 0.145]}, format="ccpo", target_box=BOX
            ),
            '<action>{"action": "click", "coordinate": [30, 90]}</action>',
            True,
        ),
        (
            Sample(
                "g", "ground_label", "q", action={"type": "click", "point": [0.5, 0.145]}, format="ccpo", target_box=BOX
            ),
            '<action>{"action": "click", "coordinate": [30, 120]}</action>',
            False,
        ),
        (
            Sample(
                "g",
                "ground_label",
                "q",
                action={"type": "click", "point": [0.5, 0.145]},
                format="agentcpm",
                target_box=BOX,
            ),
            '{"POINT":[500,150]}',
            True,
        ),
        (
            Sample(
                "g",
                "ground_label",
                "q",
                action={"type": "click", "point": [0.5, 0.145]},
                format="agentcpm",
                target_box=BOX,
            ),
            '{"POINT":[500,150]',
            False,
        ),
        (
            Sample("s", "goal_step", "q", action={"type": "type", "text": "Lunch"}, format="androidlong"),
            '<answer>do(action="Type", text="Lunch")</answer>',
            True,
        ),
        (
            Sample("s", "goal_step", "q", action={"type": "type", "text": "Lunch"}, format="androidlong"),
            '<answer>do(action="Type", text="Lunc")</answer>',
            False,
        ),
        (
            Sample("s", "action_syntax", "q", action={"type": "press", "key": "back"}, format="ccpo"),
            '<action>{"action": "system_button", "button": "Back"}</action>',
            True,
        ),
    ],
)
def test_score_sample(sample: Sample, output: str, correct: bool) -> None:
    assert score_sample(sample, output, CTX) is correct


@given(st.text(max_size=40))
def test_score_sample_never_raises_on_any_output(output: str) -> None:
    s = Sample("g", "ground_label", "q", action={"type": "click", "point": [0.5, 0.145]}, format="ccpo", target_box=BOX)
    assert score_sample(s, output, CTX) in (True, False)
    t = Sample("r", "read_point", "q", answer="Bob")
    assert score_sample(t, output, CTX) is (output.strip() == "Bob")


@pytest.mark.parametrize("action_type", ["click", "type", "answer", "terminate", "press", "open_app", "wait"])
def test_pick_format_chooses_one_that_can_write_the_action(action_type: str) -> None:
    kwargs = {
        "click": {"point": (0.3, 0.4)},
        "type": {"text": "hi"},
        "answer": {"text": "on"},
        "terminate": {"status": "success"},
        "press": {"key": "back"},
        "open_app": {"text": "Notes"},
        "wait": {},
    }[action_type]
    a = Action(action_type, **kwargs)
    rng = random.Random(0)
    for _ in range(30):
        name = pick_format(rng, a)
        if name is None:
            continue
        get_format(name).format(a, CTX)  # raises if it cannot
        assert name != "coepg_grounder" or action_type == "click"


def test_the_mix_sets_samples_per_screen_without_repeats(all_visits: list[Visit]) -> None:
    rng = random.Random(0)
    v = max(all_visits, key=lambda x: len(x.spans))
    many = visit_samples(v, rng, {"read_point": 4.0, "app_screen": 0.0})
    assert [s.skill for s in many] == ["read_point"] * 4
    assert len({s.point for s in many}) == 4 and len({s.sample_id for s in many}) == 4
    few = visit_samples(v, rng, {"read_point": 1000.0})  # capped by what the screen shows
    assert len(few) == len({(s.point, s.answer) for s in few}) <= len(v.spans)
    counts = [len(visit_samples(v, random.Random(i), {"app_screen": 0.25})) for i in range(400)]
    assert 0.18 < sum(counts) / 400 < 0.32
    with pytest.raises(ValueError, match=r"mix\['read_point'\] = -1"):
        visit_samples(v, rng, {"read_point": -1})
