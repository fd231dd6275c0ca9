"""Dataset statistics (guirl.data.stats): hand-made episodes with known counts, plus properties."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from guirl.actions import Action, ActionType
from guirl.data import stats
from guirl.data.schema import Episode, Step

A = ActionType


def _step(i: int, action: Action, box=None) -> Step:
    return Step(step_id=i, screenshot=f"s{i}.png", screen_size=(100, 200), action=action, target_box=box)


def _ep(
    eid: str, actions: list[Action], category: str = "", app: str = "", apps=(), subgoals=(), split="train", boxes=None
):
    boxes = boxes or [None] * len(actions)
    return Episode(
        episode_id=eid,
        instruction="x",
        steps=tuple(_step(i, a, b) for i, (a, b) in enumerate(zip(actions, boxes))),
        source="test",
        split=split,
        app=app,
        apps=tuple(apps),
        category=category,
        subgoals=tuple(subgoals),
    )


CLICK = Action(A.CLICK, point=(0.5, 0.5))
BACK = Action(A.PRESS, key="back")
UP = Action(A.SCROLL, direction="up", convention="finger")
DONE = Action(A.TERMINATE, status="success")
EPS = [
    _ep(
        "e1",
        [CLICK, CLICK, BACK, DONE],
        "item_creation",
        "Notes",
        subgoals=("open", "write"),
        boxes=[(0.4, 0.4, 0.6, 0.6), None, None, None],
    ),
    _ep("e2", [CLICK, UP], "cross_app", "Notes", apps=("Notes", "Messages"), split="test"),
    _ep("e3", [DONE], "", ""),
]


@pytest.mark.parametrize(
    "detail,expected",
    [
        # 3 clicks, 2 terminates, 1 press, 1 scroll over 7 steps; ties broken by name
        (False, [("click", 3), ("terminate", 2), ("press", 1), ("scroll", 1)]),
        # detail names the key, direction+convention and status
        (True, [("click", 3), ("terminate_success", 2), ("press_back", 1), ("scroll_up_finger", 1)]),
    ],
)
def test_action_type_distribution(detail, expected):
    df = stats.action_type_distribution(EPS, detail=detail)
    assert list(df.columns) == ["action_type", "n_steps", "share"]
    assert list(zip(df["action_type"], df["n_steps"])) == expected
    assert df["share"].tolist() == pytest.approx([n / 7 for _, n in expected])


def test_category_and_app_distribution():
    cats = stats.category_distribution(EPS)
    # empty category reported as "(none)"; equal counts sorted by name
    assert list(zip(cats["category"], cats["n_tasks"])) == [("(none)", 1), ("cross_app", 1), ("item_creation", 1)]
    apps = stats.app_distribution(EPS)
    # e2 counts for Notes and Messages (apps wins over app); e3 has no app
    assert list(zip(apps["app"], apps["n_tasks"])) == [("Notes", 2), ("(none)", 1), ("Messages", 1)]
    assert apps["share"].sum() == pytest.approx(1.0)


def test_episode_lengths_and_summary():
    lens = stats.episode_lengths(EPS)
    assert lens[["episode_id", "n_steps", "n_subgoals", "n_apps"]].values.tolist() == [
        ["e1", 4, 2, 1],
        ["e2", 2, 0, 2],
        ["e3", 1, 0, 0],
    ]
    summ = stats.length_summary(lens, by="split")
    assert summ["split"].tolist() == ["test", "train", "(all)"]
    allrow = summ.iloc[-1]
    assert (allrow["n_tasks"], allrow["steps_mean"], allrow["steps_median"], allrow["steps_max"]) == (3, 7 / 3, 2.0, 4)
    assert allrow["subgoals_mean"] == pytest.approx(2 / 3)
    assert stats.length_summary(stats.episode_lengths([])).empty


def test_split_summary():
    df = stats.split_summary(EPS)
    train = df.set_index("split").loc["train"]
    # train: e1 + e3 = 2 tasks, 5 steps; 2 clicks of which 1 has a box
    assert (train["n_tasks"], train["n_steps"], train["steps_per_task"], train["target_box_share"]) == (2, 5, 2.5, 0.5)
    test = df.set_index("split").loc["test"]
    assert test["target_box_share"] == 0.0


def test_sample_steps_deterministic_and_bounded():
    a = stats.sample_steps(EPS, 5, seed=1)
    assert len(a) == 1 and a[0][1].target_box is not None  # only one step has a box
    many = [_ep(f"m{i}", [CLICK] * 3, boxes=[(0, 0, 1, 1)] * 3) for i in range(5)]
    s1 = stats.sample_steps(many, 4, seed=3)
    assert [(e.episode_id, s.step_id) for e, s in s1] == [
        (e.episode_id, s.step_id) for e, s in stats.sample_steps(many, 4, seed=3)
    ]
    assert len({(e.episode_id, s.step_id) for e, s in s1}) == 4


def test_draw_step_marks_box_and_point():
    im = Image.new("RGB", (100, 200), (255, 255, 255))
    out = stats.draw_step(im, _step(0, Action(A.CLICK, point=(0.5, 0.5)), (0.1, 0.1, 0.3, 0.2)))
    assert im.getpixel((10, 20)) == (255, 255, 255)  # input untouched
    assert out.getpixel((10, 20)) != (255, 255, 255)  # box corner at (0.1*100, 0.1*200)
    assert out.getpixel((50, 98)) != (255, 255, 255)  # ring of radius 2 px around the point
    assert out.getpixel((80, 180)) == (255, 255, 255)  # far away: untouched


ACTIONS = st.sampled_from([CLICK, BACK, UP, DONE, Action(A.TYPE, text="a")])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(ACTIONS, min_size=1, max_size=6), min_size=1, max_size=6),
    st.lists(st.sampled_from(["a", "b", ""]), min_size=6, max_size=6),
)
def test_distributions_sum_to_totals(action_lists, cats):
    eps = [_ep(f"e{i}", acts, category=cats[i]) for i, acts in enumerate(action_lists)]
    n_steps = sum(len(a) for a in action_lists)
    for detail in (False, True):
        df = stats.action_type_distribution(eps, detail)
        assert df["n_steps"].sum() == n_steps and math.isclose(df["share"].sum(), 1.0)
        assert df["n_steps"].is_monotonic_decreasing
    c = stats.category_distribution(eps)
    assert c["n_tasks"].sum() == len(eps)
    lens = stats.episode_lengths(eps)
    assert lens["n_steps"].sum() == n_steps
    assert stats.length_summary(lens).iloc[-1]["n_tasks"] == len(eps)
    assert isinstance(stats.split_summary(eps), pd.DataFrame)


# ----------------------------------------------------------------------------- CCPO Table 1
@pytest.mark.parametrize(
    "source, row",
    [
        ("androidcontrol", "AndroidControl"),  # the converted public set fills its own row
        ("ccpo_guiodyssey", "GUI-Odyssey"),  # CCPO's own converted file, same row
        ("minigui", None),  # the tiny profile's data: no row in the paper
    ],
)
def test_table1_for_paper(source: str, row: str | None) -> None:
    from guirl.papers import paper_results
    from guirl.report import paper_comparison

    click = Action("click", point=(0.5, 0.5))
    eps = [_ep("a", [click] * 3), _ep("b", [click] * 6)]
    ours = stats.table1_for_paper(eps, source)
    paper = paper_results("ccpo")
    cmp = paper_comparison(ours, paper[paper["table"] == "Table 1"])
    filled = cmp[cmp["ours"].notna()]
    if row is None:
        assert filled.empty and len(cmp) == 8
    else:
        got = dict(zip(filled["column"], filled["ours"]))
        assert set(filled["row"]) == {row} and got == {"Tasks": 2.0, "Avg steps": 4.5}


# ----------------------------------------------------------------------------- split sizes vs the papers
def test_split_sizes_beside_the_papers():
    click = Action("click", point=(0.5, 0.5))
    eps = [_ep("a", [click] * 2), _ep("b", [click] * 4), _ep("c", [click] * 3, split="test")]
    eps.append(_ep("d", [click] * 5, split="validation"))
    df = stats.split_sizes_vs_paper(eps, "androidcontrol")
    assert list(df.columns) == ["split", "quantity", "ours", "paper", "location"]
    rows = {(r.split, r.quantity, r.location): (r.ours, r.paper) for r in df.itertuples()}
    assert rows[("train", "episodes", "CCPO App. A.2 (official split)")] == (2.0, 13604.0)
    assert rows[("test", "episodes", "CCPO App. A.2 (official split)")] == (1.0, 2855.0)
    assert rows[("test", "steps", "Co-EPG App. A (randomly sampled step-actions)")] == (3.0, 500.0)
    assert rows[("(all)", "steps per episode", "CCPO Table 1, App. A.2")] == (14 / 4, 5.5)
    ours_only = df[df["location"] == ""]
    assert set(ours_only["split"]) == {"train", "test", "validation", "(all)"}  # quantities the papers do not give
    assert ours_only["paper"].isna().all()
    assert df["split"].tolist()[0] == "train" and "test (all)" not in set(df["split"])  # one test split: no total


def test_split_sizes_of_a_source_without_paper_numbers_and_of_mind2web():
    click = Action("click", point=(0.5, 0.5))
    eps = [_ep("a", [click], split="train")] + [_ep(s, [click] * 2, split=s) for s in ("test_task", "test_domain")]
    mini = stats.split_sizes_vs_paper(eps, "minigui")
    assert mini["paper"].isna().all() and len(mini) == 5 * 3  # 3 splits, test (all), (all)
    m2w = stats.split_sizes_vs_paper(eps, "mind2web")
    got = {(r.split, r.quantity): (r.ours, r.paper) for r in m2w.itertuples() if r.location.startswith("Co-EPG")}
    assert got == {("train", "episodes"): (1.0, 1009.0), ("test (all)", "episodes"): (2.0, 1013.0)}
    # a paper number for a split we do not have is still listed, with no number of ours
    ac = stats.split_sizes_vs_paper([_ep("a", [click])], "androidcontrol")
    missing = ac[ac["split"] == "test"]
    assert len(missing) == 2 and missing["ours"].isna().all()
