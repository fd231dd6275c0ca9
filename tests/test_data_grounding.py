"""AgentCPM-GUI Stage I grounding rows from a data set's UI elements (guirl.data.grounding) and the
converted folder's ``grounding_train.jsonl`` (guirl.data.loaders.convert_dataset)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.actions import Action
from guirl.data.grounding import GROUNDING_TYPES, grounding_samples, referable_elements, screen_samples
from guirl.data.schema import Episode, Step, UIElement

_spec = importlib.util.spec_from_file_location("make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)  # type: ignore[union-attr]

#: MiniGUI's grounding_train.jsonl row keys (guirl.env.export.grounding_samples).
ROW_KEYS = {
    "id",
    "image",
    "width",
    "height",
    "type",
    "question",
    "answer",
    "point",
    "box",
    "element_id",
    "episode_id",
    "step_id",
}


def el(eid: str, text: str, box=(0.1, 0.1, 0.3, 0.2)) -> UIElement:
    return UIElement(element_id=eid, box=box, label=text, text=text)


def step(elements, step_id: int = 0, shot: str = "shots/a.png") -> Step:
    return Step(
        step_id=step_id, screenshot=shot, screen_size=(1080, 2400), action=Action("wait"), elements=tuple(elements)
    )


def episode(eid: str, steps, split: str = "train") -> Episode:
    return Episode(episode_id=eid, instruction="do it", steps=tuple(steps), source="test", split=split)


# ----------------------------------------------------------------------------- which elements
REFERABLE = [
    # (case, elements, ids kept)
    ("empty screen", [], []),
    ("no text", [el("a", ""), el("b", "  ")], []),
    ("unique texts kept in screen order", [el("a", "OK"), el("b", "Cancel")], ["a", "b"]),
    ("a repeated text is ambiguous", [el("a", "OK"), el("b", "OK"), el("c", "Menu")], ["c"]),
    ("repeats compared case-folded, whitespace collapsed", [el("a", "Send  now"), el("b", "send now ")], []),
    ("a box without area", [el("a", "OK", (0.2, 0.2, 0.2, 0.4)), el("b", "Back")], ["b"]),
    ("a box that rounds to no area", [el("a", "OK", (0.2, 0.2, 0.2001, 0.4))], []),
]


@pytest.mark.parametrize(("case", "elements", "kept"), REFERABLE, ids=[c[0] for c in REFERABLE])
def test_referable_elements(case, elements, kept):
    assert [e.element_id for e in referable_elements(elements)] == kept


SCREENS = [
    # (case, elements, per_screen, rows, types)
    ("capped per screen", [el(str(i), f"t{i}") for i in range(6)], 3, 3, None),
    ("fewer elements than the cap", [el("a", "OK")], 3, 1, None),
    ("types alternate", [el(str(i), f"t{i}") for i in range(4)], 4, 4, 2),
    ("nothing referable", [el("a", "OK"), el("b", "ok")], 3, 0, None),
]


@pytest.mark.parametrize(("case", "elements", "per_screen", "n", "per_type"), SCREENS, ids=[c[0] for c in SCREENS])
def test_screen_samples(case, elements, per_screen, n, per_type):
    import random

    rows = screen_samples(step(elements), "ep", "shots/a.png", random.Random(0), per_screen)
    assert len(rows) == n and all(set(r) == ROW_KEYS for r in rows)
    if per_type is not None:
        assert [sum(r["type"] == t for r in rows) for t in GROUNDING_TYPES] == [per_type, per_type]


def test_row_contents():
    rows = grounding_samples(
        [episode("e1", [step([el("ok", " OK ", (0.1, 0.2, 0.3, 0.4))], step_id=4)])], per_screen=1, seed=3
    )
    (row,) = rows
    assert (row["id"], row["episode_id"], row["step_id"], row["element_id"]) == ("e1-04-0", "e1", 4, "ok")
    assert (row["width"], row["height"], row["box"]) == (1080, 2400, [0.1, 0.2, 0.3, 0.4])
    if row["type"] == "text_to_point":
        assert row["point"] == [0.2, 0.3] and json.loads(row["answer"]) == [0.2, 0.3] and "'OK'" in row["question"]
    else:
        assert row["point"] is None and row["answer"] == "OK" and "[0.1, 0.2, 0.3, 0.4]" in row["question"]
    both = {grounding_samples([episode("e1", [step([el("ok", "OK")])])], seed=s)[0]["type"] for s in range(20)}
    assert both == set(GROUNDING_TYPES)  # the seed picks the type: no function_to_point


IMAGES = [
    # (case, prefix, screenshot, image)
    ("embedded: the data folder itself", "", "shots/a.png", "shots/a.png"),
    ("a sibling download", "../public/aitz", "train/x/a.png", "../public/aitz/train/x/a.png"),
    ("absolute kept", "../x", "/abs/a.png", "/abs/a.png"),
]


@pytest.mark.parametrize(("case", "prefix", "shot", "image"), IMAGES, ids=[c[0] for c in IMAGES])
def test_image_paths(case, prefix, shot, image):
    (row,) = grounding_samples([episode("e", [step([el("a", "OK")], shot=shot)])], image_prefix=prefix)
    assert row["image"] == image


BAD = [
    ("per_screen 0", [episode("e", [step([el("a", "OK")])])], 0, "per_screen must be at least 1"),
    (
        "a repeated screen id",
        [episode("e", [step([el("a", "OK")])]), episode("e", [step([el("a", "OK")])])],
        3,
        "'e' step 0 appears twice",
    ),
]


@pytest.mark.parametrize(("case", "eps", "per_screen", "match"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_named(case, eps, per_screen, match):
    with pytest.raises(ValueError, match=match):
        grounding_samples(eps, per_screen=per_screen)


# ----------------------------------------------------------------------------- properties
_coord = st.floats(0, 1, allow_nan=False)


@st.composite
def elements(draw):
    n = draw(st.integers(0, 8))
    out = []
    for i in range(n):
        x1, x2 = sorted((draw(_coord), draw(_coord)))
        y1, y2 = sorted((draw(_coord), draw(_coord)))
        text = draw(st.sampled_from(["", "OK", "ok", "Menu", "Send now", "send  now", "Back", "A", "B", "C"]))
        out.append(UIElement(element_id=f"n{i}", box=(x1, y1, x2, y2), label=text, text=text))
    return out


@st.composite
def episodes(draw):
    n_eps = draw(st.integers(0, 3))
    return [
        episode(f"ep-{e}", [step(draw(elements()), step_id=s) for s in range(draw(st.integers(0, 3)))])
        for e in range(n_eps)
    ]


@settings(max_examples=200, deadline=None)
@given(eps=episodes(), seed=st.integers(0, 5), per_screen=st.integers(1, 4))
def test_grounding_properties(eps, seed, per_screen):
    rows = grounding_samples(eps, seed=seed, per_screen=per_screen)
    assert rows == grounding_samples(eps, seed=seed, per_screen=per_screen)  # same seed, same rows
    by_id = sorted(grounding_samples(eps[::-1], seed=seed, per_screen=per_screen), key=lambda r: r["id"])
    assert by_id == sorted(rows, key=lambda r: r["id"])  # a screen's rows do not depend on the episode order
    assert len({r["id"] for r in rows}) == len(rows)
    screens = {(ep.episode_id, s.step_id): s for ep in eps for s in ep.steps}
    per = {}
    for r in rows:
        assert set(r) == ROW_KEYS and r["type"] in GROUNDING_TYPES
        x1, y1, x2, y2 = r["box"]
        assert x1 < x2 and y1 < y2
        if r["type"] == "text_to_point":
            px, py = r["point"]
            assert x1 <= px <= x2 and y1 <= py <= y2 and json.loads(r["answer"]) == r["point"]
        s = screens[(r["episode_id"], r["step_id"])]
        (e,) = [e for e in s.elements if e.element_id == r["element_id"]]
        key = " ".join(e.text.split()).casefold()
        assert key and sum(" ".join(o.text.split()).casefold() == key for o in s.elements) == 1  # unique on its screen
        per[(r["episode_id"], r["step_id"])] = per.get((r["episode_id"], r["step_id"]), 0) + 1
    assert all(v <= per_screen for v in per.values())
    for k, s in screens.items():  # every screen with a referable element gets its share
        assert per.get(k, 0) == min(per_screen, len(referable_elements(s.elements)))


# ----------------------------------------------------------------------------- converted folders
@pytest.mark.parametrize("name", ["androidcontrol", "aitz", "guiodyssey", "amex"])
def test_convert_writes_train_grounding_rows(tmp_path, name):
    from guirl.data.loaders import convert_dataset
    from guirl.data.splits import load_splits
    from guirl.train.data import grounding_records, read_jsonl

    out = tmp_path / "out"
    paths, _ = convert_dataset(name, mf.PUBLIC[name](tmp_path / "src"), out)
    rows = read_jsonl(paths["grounding"])
    manifest = json.loads(paths["manifest"].read_text())
    assert manifest["grounding_samples"] == len(rows)
    splits = load_splits(out)
    train_ids = {ep.episode_id for ep in splits["train"].episodes} if "train" in splits else set()
    test_ids = {ep.episode_id for k, sp in splits.items() if k != "train" for ep in sp.episodes}
    assert {r["episode_id"] for r in rows} <= train_ids and not {r["episode_id"] for r in rows} & test_ids
    if name in ("androidcontrol", "aitz"):  # train screens with a text element ("OK")
        assert rows and {r["answer"] for r in rows if r["type"] == "box_to_text"} <= {"OK"}
        recs = grounding_records(rows, "agentcpm", image_root=out, min_pixels=3136, max_pixels=50176)
        assert all(Path(p).is_file() for r in recs for p in r["images"])  # image paths resolve from the folder
    else:  # GUI-Odyssey has no elements, AMEX no train split
        assert rows == [] and paths["grounding"].read_text() == ""
