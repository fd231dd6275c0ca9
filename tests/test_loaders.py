"""Loaders of the public GUI datasets (guirl.data.loaders) against tiny fixtures written in the
documented formats (tests/fixtures/make_fixtures.py). Screens are 100 x 200 px unless stated, so
a pixel (x, y) is expected at (x / 100, y / 200)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

from guirl.actions import Action, ActionType
from guirl.data.loaders import LOADERS, DatasetFormatError, load_dataset
from guirl.data.loaders._common import finger_direction
from guirl.data.loaders.aitz import TAP_DISTANCE_THRESHOLD
from guirl.data.loaders.androidcontrol import decode_fields, parse_a11y_forest
from guirl.data.schema import read_episodes, write_episodes

_spec = importlib.util.spec_from_file_location("make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)  # type: ignore[union-attr]

C, LP, S, T, P = ActionType.CLICK, ActionType.LONG_PRESS, ActionType.SCROLL, ActionType.TYPE, ActionType.PRESS


def _load(name: str, root: Path, bad: bool = False, **kw):
    path = mf.MAKERS[name](root, bad=bad)
    extra = {"image_dir": root / "out"} if name in ("androidcontrol", "mind2web", "guir1") else {}
    if name == "guir1":
        extra["scroll_convention"] = "content"
    return load_dataset(name, path, **extra, **kw)


# ----------------------------------------------------------------------------- expected actions
# (dataset, episode index, step index, expected Action, expected target_box or None)
CASES = [
    # AndroidControl: pixels / (100, 200); target = smallest a11y node containing the point
    ("androidcontrol", 0, 0, Action(C, point=(0.5, 0.5)), (0.4, 0.45, 0.6, 0.55)),
    # long press at (10, 20) px: inside root and the 30x30 "Menu" node -> the smaller one
    ("androidcontrol", 0, 1, Action(LP, point=(0.1, 0.1)), (0.0, 0.0, 0.3, 0.15)),
    # scroll "down" is the CONTENT direction in AndroidControl: kept as content
    ("androidcontrol", 0, 2, Action(S, direction="down", convention="content"), None),
    ("androidcontrol", 0, 3, Action(ActionType.OPEN_APP, text="Clock"), None),
    ("androidcontrol", 0, 4, Action(T, text="hi"), None),
    ("androidcontrol", 0, 5, Action(P, key="home"), None),
    ("androidcontrol", 0, 6, Action(P, key="back"), None),
    ("androidcontrol", 0, 7, Action(ActionType.WAIT), None),
    # one-action episode (one-element feature lists must not collapse to scalars)
    ("androidcontrol", 1, 0, Action(C, point=(0.45, 0.475)), (0.4, 0.45, 0.6, 0.55)),
    # GUI-Odyssey: [0, 1000] / 1000; sam2_bbox / 1000
    ("guiodyssey", 0, 0, Action(C, point=(0.5, 0.25)), (0.4, 0.2, 0.6, 0.3)),
    ("guiodyssey", 0, 1, Action(LP, point=(0.1, 0.9)), None),
    ("guiodyssey", 0, 2, Action(P, key="home"), None),  # KEY_HOME
    ("guiodyssey", 0, 3, Action(P, key="back"), None),  # KEY_BACK
    ("guiodyssey", 0, 4, Action(P, key="recent"), None),  # KEY_APPSELECT
    # finger moves from y=0.8 to y=0.2: finger "up"
    ("guiodyssey", 0, 5, Action(S, point=(0.5, 0.8), point2=(0.5, 0.2), direction="up", convention="finger"), None),
    # dominant x motion 0.2 -> 0.9 (y drifts 0.02): finger "right"
    ("guiodyssey", 0, 6, Action(S, point=(0.2, 0.5), point2=(0.9, 0.52), direction="right", convention="finger"), None),
    ("guiodyssey", 0, 7, Action(T, text="hello"), None),
    ("guiodyssey", 0, 8, Action(ActionType.TERMINATE, status="success"), None),  # COMPLETE
    ("guiodyssey", 1, 0, Action(ActionType.TERMINATE, status="fail"), None),  # INCOMPLETE
    # AITZ: touch/lift are normalised [y, x]; ui_positions [y, x, h, w] px
    ("aitz", 0, 0, Action(T, text="wifi"), None),  # 3 type
    ("aitz", 0, 1, Action(C, point=(0.5, 0.5)), (0.4, 0.45, 0.6, 0.55)),  # 4, distance 0.01: tap
    ("aitz", 0, 2, Action(S, point=(0.5, 0.8), point2=(0.5, 0.2), direction="up", convention="finger"), None),
    ("aitz", 0, 3, Action(S, point=(0.9, 0.5), point2=(0.2, 0.5), direction="left", convention="finger"), None),
    ("aitz", 0, 4, Action(P, key="back"), None),  # 5
    ("aitz", 0, 5, Action(P, key="home"), None),  # 6
    ("aitz", 0, 6, Action(P, key="enter"), None),  # 7
    ("aitz", 0, 7, Action(ActionType.TERMINATE, status="success"), None),  # 10 complete
    ("aitz", 1, 0, Action(ActionType.TERMINATE, status="fail"), None),  # 11 impossible
    # AMEX: pixels / image size; target = smallest clickable element containing the touch
    ("amex", 0, 0, Action(C, point=(0.5, 0.5)), (0.4, 0.45, 0.6, 0.55)),
    ("amex", 0, 1, Action(S, point=(0.5, 0.75), point2=(0.5, 0.25), direction="up", convention="finger"), None),
    ("amex", 0, 2, Action(S, point=(0.1, 0.5), point2=(0.9, 0.55), direction="right", convention="finger"), None),
    ("amex", 0, 3, Action(T, text="coffee"), None),
    ("amex", 0, 4, Action(P, key="back"), None),
    ("amex", 0, 5, Action(P, key="home"), None),
    ("amex", 0, 6, Action(P, key="enter"), None),
    ("amex", 0, 7, Action(ActionType.TERMINATE, status="success"), None),
    ("amex", 1, 0, Action(ActionType.TERMINATE, status="fail"), None),  # TASK_IMPOSSIBLE
    # Mind2Web: 200x100 screenshot; rect "20,10,40,20" -> (0.1, 0.1, 0.3, 0.3), point at its centre;
    # rows were stored out of order: steps follow target_action_index
    ("mind2web", 0, 0, Action(C, point=(0.2, 0.2)), (0.1, 0.1, 0.3, 0.3)),
    ("mind2web", 0, 1, Action(T, point=(0.2, 0.2), text="hello"), (0.1, 0.1, 0.3, 0.3)),
    ("mind2web", 0, 2, Action(ActionType.SELECT, point=(0.2, 0.2), text="Large"), (0.1, 0.1, 0.3, 0.3)),
    ("mind2web", 1, 0, Action(ActionType.HOVER, point=(0.5, 0.5)), (0.0, 0.0, 1.0, 1.0)),  # original_op HOVER
    ("mind2web", 1, 1, Action(P, key="enter", point=(0.2, 0.2)), (0.1, 0.1, 0.3, 0.3)),  # original_op ENTER
    # UI-S1 std: mobile_use vocabulary, pixels; time seconds -> ms
    ("uis1", 0, 0, Action(C, point=(0.5, 0.5)), (0.4, 0.45, 0.6, 0.55)),
    ("uis1", 0, 1, Action(LP, point=(0.1, 0.1), duration_ms=1500), None),
    # a finger up 150 -> 50 px: UI-S1's file stores the finger motion; the direction is AndroidControl's
    # content "down"
    ("uis1", 0, 2, Action(S, point=(0.5, 0.75), point2=(0.5, 0.25), direction="down", convention="content"), None),
    ("uis1", 0, 3, Action(T, text="hi"), None),
    ("uis1", 0, 4, Action(P, key="back"), None),
    ("uis1", 0, 5, Action(P, key="home"), None),
    ("uis1", 0, 6, Action(P, key="enter"), None),
    ("uis1", 0, 7, Action(ActionType.OPEN_APP, text="Clock"), None),
    ("uis1", 0, 8, Action(ActionType.WAIT, duration_ms=2000), None),
    ("uis1", 0, 9, Action(ActionType.TERMINATE, status="success"), None),
    ("uis1", 1, 0, Action(ActionType.TERMINATE, status="fail"), None),  # status "failure"
    # CCPO AndroidControl: the candidate box reaches 4 px past the 100-px screen (clipped); the swipe
    # 50 -> 150 px is drawn in the content direction: content "down" (check_options.direction), the
    # stored points kept
    ("ccpo_androidcontrol", 0, 0, Action(C, point=(0.5, 0.5)), (0.4, 0.45, 1.0, 0.55)),
    (
        "ccpo_androidcontrol",
        0,
        1,
        Action(S, point=(0.5, 0.25), point2=(0.5, 0.75), direction="down", convention="content"),
        None,
    ),
    ("ccpo_androidcontrol", 0, 2, Action(ActionType.WAIT, duration_ms=2000), None),
    # CCPO GUI-Odyssey: [0, 1000] / 1000; a finger moving right is content "left"
    ("ccpo_guiodyssey", 0, 0, Action(C, point=(0.5, 0.25)), (0.4, 0.2, 0.6, 0.3)),
    (
        "ccpo_guiodyssey",
        0,
        1,
        Action(S, point=(0.3, 0.5), point2=(0.7, 0.51), direction="left", convention="content"),
        None,
    ),
    ("ccpo_guiodyssey", 0, 2, Action(T, text="hi"), None),
    ("ccpo_guiodyssey", 0, 3, Action(P, key="home"), None),
    ("ccpo_guiodyssey", 0, 4, Action(ActionType.TERMINATE, status="success"), None),
    # CCPO Mind2Web: img_size [h, w] = [100, 200]: (30, 20) px -> (0.15, 0.2)
    ("ccpo_mind2web", 0, 0, Action(C, point=(0.15, 0.2)), (0.1, 0.1, 0.2, 0.3)),
    ("ccpo_mind2web", 0, 1, Action(ActionType.HOVER, point=(0.5, 0.5)), (0.45, 0.4, 0.55, 0.6)),
    ("ccpo_mind2web", 0, 2, Action(T, point=(0.15, 0.2), text="hello"), (0.1, 0.1, 0.2, 0.3)),
    ("ccpo_mind2web", 0, 3, Action(ActionType.SELECT, point=(0.15, 0.2), text="Large"), (0.1, 0.1, 0.2, 0.3)),
    # GUI-R1: gt_bbox already normalised; 4 numbers = box (point at centre), 2 = point
    ("guir1", 0, 0, Action(C, point=(0.2, 0.3)), (0.1, 0.2, 0.3, 0.4)),
    ("guir1", 1, 0, Action(C, point=(0.5, 0.25)), None),
    ("guir1", 2, 0, Action(T, text="hello"), None),
    ("guir1", 3, 0, Action(P, key="back"), None),
    ("guir1", 4, 0, Action(ActionType.TERMINATE, status="success"), None),
    # scroll convention is not documented for GUI-R1: the test passes scroll_convention="content";
    # the direction word is also kept as the step's text (GUI-R1 scores scrolls by it)
    ("guir1", 5, 0, Action(S, direction="down", convention="content", text="down"), None),
]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    return {name: _load(name, root) for name in LOADERS}, root


def _close(a, b, tol=1e-9):
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


@pytest.mark.parametrize(
    "name,ep,step,expected,target", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3].type.value}" for c in CASES]
)
def test_action_and_target(loaded, name, ep, step, expected, target):
    s = loaded[0][name].episodes[ep].steps[step]
    got = s.action
    assert got.type is expected.type
    assert (got.direction, got.convention, got.text, got.key, got.status, got.duration_ms) == (
        expected.direction,
        expected.convention,
        expected.text,
        expected.key,
        expected.status,
        expected.duration_ms,
    )
    assert _close(got.point, expected.point) and _close(got.point2, expected.point2)
    assert _close(s.target_box, target)


# (dataset, n episodes, steps per episode, first episode id, screen size, success flags)
SHAPES = [
    ("androidcontrol", [8, 1], "7", (100, 200), [None, None]),  # no terminate action in AndroidControl
    ("guiodyssey", [9, 1], "ody1", (1080, 2400), [True, False]),  # size from device_info
    ("aitz", [8, 1], "GENERAL-1", (100, 200), [True, False]),
    ("amex", [8, 1], "amex1", (100, 200), [True, False]),
    ("mind2web", [3, 2], "a1", (200, 100), [None, None]),
    ("uis1", [10, 1], "std_test-1", (100, 200), [True, False]),  # id = file stem + line number
    ("ccpo_androidcontrol", [3], "7", (100, 200), [True]),  # the line's episode_id
    ("ccpo_guiodyssey", [5], "guio_test-1", (100, 200), [True]),
    ("ccpo_mind2web", [4], "mind2web_test-1", (200, 100), [True]),  # img_size is [height, width]
    ("guir1", [1] * 6, "train-00000-0", (100, 200), [None] * 6),
]


@pytest.mark.parametrize("name,lengths,first_id,size,success", SHAPES, ids=[s[0] for s in SHAPES])
def test_episode_shape(loaded, name, lengths, first_id, size, success):
    res, root = loaded
    eps = res[name].episodes
    assert [len(e.steps) for e in eps] == lengths
    assert eps[0].episode_id == first_id
    assert all(e.source == name for e in eps)
    assert [e.success for e in eps] == success
    assert all(s.screen_size == size for e in eps for s in e.steps)
    assert res[name].skipped == []


def test_screenshots_resolve(loaded):
    """Embedded-image formats write PNGs under image_dir; file formats point into the dataset folder."""
    from PIL import Image

    res, root = loaded
    for name in ("androidcontrol", "mind2web", "guir1"):
        for e in res[name].episodes:
            for s in e.steps:
                with Image.open(root / "out" / s.screenshot) as im:
                    assert im.size == s.screen_size
    for name in ("aitz", "amex", "uis1"):
        base = root / name
        for e in res[name].episodes:
            for s in e.steps:
                assert (base / s.screenshot).is_file(), s.screenshot
    assert res["guiodyssey"].episodes[0].steps[3].screenshot == "screenshots/ody1_3.png"


def test_annotations_mapped(loaded):
    res, _ = loaded
    ody = res["guiodyssey"].episodes[0]
    s = ody.steps[2]
    assert (s.screen_description, s.intention, s.progress_summary, s.low_level_instruction) == (
        "screen 2",
        "intend 2",
        "so far 2",
        "do 2",
    )
    assert ody.apps == ("Chrome", "Notes") and ody.category == "Multi_Apps" and ody.instruction == "copy a note"
    az = res["aitz"].episodes[0].steps[1]
    assert (az.screen_description, az.intention, az.low_level_instruction, az.extra["action_result"]) == (
        "desc 1",
        "think 1",
        "act 1",
        "result 1",
    )
    assert len(az.elements) == 2 and az.elements[0].label == "OK"
    ac = res["androidcontrol"].episodes[0].steps[0]
    assert ac.low_level_instruction == "step 0"
    # node 3 extends off screen (-10..50 x 190..260 px): clamped to (0, 0.95, 0.5, 1)
    assert _close(ac.elements[3].box, (0.0, 0.95, 0.5, 1.0))
    assert ac.elements[1].role == "Button" and ac.elements[1].clickable and ac.elements[0].scrollable
    m = res["mind2web"].episodes[0]
    assert m.split == "test_task" and m.app == "example.com" and m.category == "Shopping"
    # pos + neg candidates; the 0x0 negative is dropped, the off-screen one clamped
    assert [tuple(round(v, 6) for v in b) for b in m.steps[0].candidate_boxes] == [
        (0.1, 0.1, 0.3, 0.3),
        (0.75, 0.5, 1.0, 1.0),
    ]
    # the referring elements a model is shown: every candidate the row lists (1 positive, 2 negatives), ids and
    # positions left out, in an order seeded by the action_uid
    shown = m.steps[0].extra["referring_elements"]
    assert sorted(shown) == ["<button>"] * 3
    am = res["amex"].episodes[0]
    assert am.steps[0].elements[0].label == "Confirm" and am.steps[1].extra == {"element_anno": "missing"}
    g = res["guir1"].episodes
    assert g[1].steps[0].low_level_instruction == "do click" and g[0].steps[0].low_level_instruction == ""


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_bad_record_raises_naming_file_and_record(tmp_path, name):
    fname, record = mf.BAD_RECORD[name]
    with pytest.raises(DatasetFormatError) as ei:
        _load(name, tmp_path, bad=True)
    msg = str(ei.value)
    assert fname in msg and record in msg, msg
    assert "key" in msg


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_missing_data_path_names_it(tmp_path, name):
    missing = tmp_path / "not_downloaded"
    with pytest.raises(FileNotFoundError, match=f"not_downloaded: no such file or folder for data set '{name}'"):
        load_dataset(name, missing, skip_bad=True)


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_skip_bad_counts_and_warns(tmp_path, name):
    fname, record = mf.BAD_RECORD[name]
    good = len(_load(name, tmp_path / "good").episodes)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = _load(name, tmp_path / "bad", bad=True, skip_bad=True)
    assert len(res.episodes) == good
    assert len(res.skipped) == 1
    f, rec, reason = res.skipped[0]
    assert f.endswith(fname) and record in rec and reason
    assert any("skipped 1 bad record" in str(x.message) for x in w)


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_roundtrip_and_hf_datasets(loaded, tmp_path, name):
    import datasets

    eps = loaded[0][name].episodes
    path = tmp_path / "episodes.jsonl"
    assert write_episodes(eps, path) == len(eps)
    assert list(read_episodes(path)) == eps
    ds = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
    assert len(ds) == len(eps)
    assert ds[0]["episode_id"] == eps[0].episode_id
    assert len(ds[0]["steps"]) == len(eps[0].steps)


# ----------------------------------------------------------------------------- corruptions
def _mutate_json(path: Path, fn) -> None:
    import json

    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


# (dataset, mutation of the good fixture, key named in the error)
CORRUPT = [
    # wrong type: GUI-Odyssey CLICK info must be [[x, y]]
    (
        "guiodyssey",
        lambda r: _mutate_json(r / "annotations/ody1.json", lambda d: d["steps"][0].update(info=[500, 250])),
        "info",
    ),
    # point outside [0, 1000]
    (
        "guiodyssey",
        lambda r: _mutate_json(r / "annotations/ody1.json", lambda d: d["steps"][0].update(info=[[1500, 2]])),
        "info",
    ),
    # step_length disagrees with the steps
    (
        "guiodyssey",
        lambda r: _mutate_json(r / "annotations/ody2.json", lambda d: d.update(step_length=3)),
        "step_length",
    ),
    # missing device_info
    ("guiodyssey", lambda r: _mutate_json(r / "annotations/ody2.json", lambda d: d.pop("device_info")), "device_info"),
    # AITZ touch not a [y, x] pair
    (
        "aitz",
        lambda r: _mutate_json(
            r / "train/general/GENERAL-1/GENERAL-1.json", lambda d: d[1].update(result_touch_yx="[0.5]")
        ),
        "result_touch_yx",
    ),
    # AITZ missing CoAT field
    (
        "aitz",
        lambda r: _mutate_json(r / "test/general/GENERAL-2/GENERAL-2.json", lambda d: d[0].pop("coat_action_desc")),
        "coat_action_desc",
    ),
    # AMEX tap outside the 100x200 screen
    (
        "amex",
        lambda r: _mutate_json(
            r / "instruction_anno/amex1.json", lambda d: d["steps"][0].update(touch_coord=[150, 10])
        ),
        "touch_coord",
    ),
    # AMEX screenshot missing: screen size unknown
    ("amex", lambda r: (r / "screenshot/amex2_0.png").unlink(), "image_path"),
    # std: system button without a canonical key
    (
        "uis1",
        lambda r: (r / "std_test.jsonl").write_text((r / "std_test.jsonl").read_text().replace('"Home"', '"Power"')),
        "button",
    ),
    # std: is_successful of the wrong type
    (
        "uis1",
        lambda r: (r / "std_test.jsonl").write_text(
            (r / "std_test.jsonl").read_text().replace('"is_successful": false', '"is_successful": "no"')
        ),
        "is_successful",
    ),
]


@pytest.mark.parametrize("name,mutate,key", CORRUPT, ids=[f"{c[0]}-{c[2]}" for c in CORRUPT])
def test_corruptions_name_the_key(tmp_path, name, mutate, key):
    root = mf.MAKERS[name](tmp_path)
    mutate(root)
    with pytest.raises(DatasetFormatError) as ei:
        load_dataset(name, root)
    assert ei.value.key == key, str(ei.value)
    assert str(root) in ei.value.file


STD_FILES = {
    "uis1": "std_test.jsonl",
    "ccpo_androidcontrol": "android_control_test.jsonl",
    "ccpo_guiodyssey": "guio_test.jsonl",
    "ccpo_mind2web": "mind2web_test.jsonl",
}


@pytest.mark.parametrize("name", sorted(STD_FILES))
def test_bad_bytes_cost_one_record_named_by_file_and_line(tmp_path, name):
    root = mf.MAKERS[name](tmp_path)
    path = root / STD_FILES[name]
    good = path.read_bytes().splitlines()[0]
    bad = good.replace(b'"is_successful"', b'"note": "caf\xe9", "is_successful"', 1)  # a Latin-1 byte
    assert bad != good
    path.write_bytes(b"\n".join([good, bad, good]) + b"\n")
    with pytest.raises(DatasetFormatError) as ei:
        load_dataset(name, root)
    assert ei.value.file == str(path) and ei.value.record == "line 2" and "not UTF-8" in str(ei.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = load_dataset(name, root, skip_bad=True)
    assert res.counts()["loaded"] == 2 and res.counts()["rejected"] == 1  # only the bad line is lost
    assert res.skipped[0][1] == "line 2" and "byte 0xe9" in res.skipped[0][2]


def test_impossible_screen_size_is_rejected_with_a_reason(tmp_path):
    root = mf.make_guiodyssey(tmp_path)
    _mutate_json(root / "annotations/ody2.json", lambda d: d["device_info"].update(w=-1080, h=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = load_dataset("guiodyssey", root, skip_bad=True)
    assert [e.episode_id for e in res.episodes] == ["ody1"]
    (f, record, why) = res.skipped[0]
    assert f.endswith("ody2.json") and "device_info" in why and "-1080 x 0 is impossible" in why, why


@pytest.mark.parametrize("name", ["guiodyssey", "uis1"])
def test_empty_episode_is_rejected_with_a_reason(tmp_path, name):
    root = mf.MAKERS[name](tmp_path)
    if name == "guiodyssey":
        _mutate_json(root / "annotations/ody2.json", lambda d: d.update(steps=[], step_length=0))
    else:
        lines = (root / "std_test.jsonl").read_text().splitlines()
        (root / "std_test.jsonl").write_text(
            "\n".join([*lines, '{"goal": "g", "is_successful": true, "steps": []}']) + "\n"
        )
    with pytest.raises(DatasetFormatError, match="the episode has no steps") as ei:
        load_dataset(name, root)
    assert ei.value.key == "steps"


def test_missing_screenshot_is_named_when_the_size_comes_from_the_record(tmp_path):
    root = mf.make_ccpo_mind2web(tmp_path)
    (root / "pages/m_2.png").unlink()  # img_size gives the size: the file itself is never opened
    with pytest.raises(DatasetFormatError, match="m_2.png does not exist") as ei:
        load_dataset("ccpo_mind2web", root)
    assert ei.value.key == "screenshot" and ei.value.record == "line 1 step 2"


def test_guir1_scroll_needs_a_convention(tmp_path):
    path = mf.make_guir1(tmp_path)
    with pytest.raises(DatasetFormatError, match="scroll_convention"):
        load_dataset("guir1", path, image_dir=tmp_path / "out")


def test_embedded_formats_need_image_dir(tmp_path):
    with pytest.raises(ValueError, match="image_dir"):
        load_dataset("androidcontrol", mf.make_androidcontrol(tmp_path))


def test_androidcontrol_truncated_file(tmp_path):
    """A TFRecord cut mid-record: error names the file and record; skip mode keeps the records before."""
    import gzip

    path = mf.make_androidcontrol(tmp_path)
    f = path / "android_control-00000-of-00001"
    raw = gzip.decompress(f.read_bytes())
    f.write_bytes(gzip.compress(raw[: len(raw) - 100]))
    with pytest.raises(DatasetFormatError, match="#1"):
        load_dataset("androidcontrol", path, image_dir=tmp_path / "o")
    with pytest.warns(UserWarning, match="skipped 1"):
        res = load_dataset("androidcontrol", path, image_dir=tmp_path / "o", skip_bad=True)
    assert [e.episode_id for e in res.episodes] == ["7"]


# boxes (normalised), clickable flags: a root, a clickable row, a label in it, a clickable button in it
_ROOT, _ROW, _LABEL, _BUTTON = (0, 0, 1, 1), (0, 0.2, 1, 0.4), (0.1, 0.25, 0.5, 0.3), (0.8, 0.25, 0.9, 0.35)
_TREE = ([_ROOT, _ROW, _LABEL, _BUTTON], [False, True, False, True])


@pytest.mark.parametrize(
    "point, mode, candidates, target",
    [
        # the converted files' boxes: clickable nodes containing the point, smallest first; never the root
        ((0.85, 0.3), "containing", (_BUTTON, _ROW), _BUTTON),
        ((0.3, 0.27), "containing", (_ROW,), _ROW),  # on the label: the clickable row is the acted element
        ((0.5, 0.9), "containing", (_ROOT,), _ROOT),  # no clickable node contains it: the smallest that does
        (None, "containing", (), None),  # type, scroll, ...: no candidates
        # every node, the target the smallest node containing the point
        ((0.3, 0.27), "all", tuple(_TREE[0]), _LABEL),
        (None, "all", tuple(_TREE[0]), None),
    ],
)
def test_androidcontrol_candidates(point, mode, candidates, target):
    from guirl.data.loaders.androidcontrol import candidates_and_target

    assert candidates_and_target(point, *_TREE, mode) == (candidates, target)


def test_androidcontrol_candidates_option(tmp_path):
    path = mf.make_androidcontrol(tmp_path)
    res = {m: load_dataset("androidcontrol", path, image_dir=tmp_path / m, candidates=m) for m in ("containing", "all")}
    click = {m: r.episodes[0].steps[0] for m, r in res.items()}  # the OK button at (50, 100)
    assert click["containing"].candidate_boxes == ((0.4, 0.45, 0.6, 0.55),)
    assert len(click["all"].candidate_boxes) == 4 and click["all"].target_box == click["containing"].target_box
    assert res["containing"].episodes[0].steps[3].candidate_boxes == ()  # open_app has no point
    with pytest.raises(ValueError, match="candidates='every'"):
        load_dataset("androidcontrol", path, image_dir=tmp_path / "x", candidates="every")


def test_androidcontrol_bad_a11y_tree_is_named(tmp_path):
    import gzip

    from tfrecord.writer import TFRecordWriter

    ex = mf._ac_example(5, "g", [{"action_type": "wait"}])
    ex["accessibility_trees"] = ([b"\x0a\xff\x01", b""], "byte")  # length runs past the end
    raw = tmp_path / "r.raw"
    w = TFRecordWriter(str(raw))
    w.write(ex)
    w.close()
    (tmp_path / "x.tfrecord.gz").write_bytes(gzip.compress(raw.read_bytes()))
    with pytest.raises(DatasetFormatError) as ei:
        load_dataset("androidcontrol", tmp_path / "x.tfrecord.gz", image_dir=tmp_path / "o", split="train")
    assert ei.value.key == "accessibility_trees" and "step 0" in ei.value.record


# ----------------------------------------------------------------------------- helpers
@pytest.mark.parametrize(
    "start,end,direction",
    [
        ((0.5, 0.8), (0.5, 0.2), "up"),  # finger moves up the screen (y decreases)
        ((0.5, 0.2), (0.5, 0.8), "down"),
        ((0.9, 0.5), (0.1, 0.5), "left"),
        ((0.1, 0.5), (0.9, 0.6), "right"),  # dominant axis x
        ((0.1, 0.1), (0.3, 0.3), "down"),  # tie goes to the vertical axis
    ],
)
def test_finger_direction(start, end, direction):
    assert finger_direction(start, end) == direction


def test_aitw_tap_threshold_boundary(tmp_path):
    """0.04 normalised (AITW): 0.035 apart is a tap, 0.045 a swipe."""
    assert TAP_DISTANCE_THRESHOLD == 0.04
    root = mf.make_aitz(tmp_path)
    f = root / "train/general/GENERAL-1/GENERAL-1.json"
    _mutate_json(
        f,
        lambda d: (
            d[1].update(result_touch_yx="[0.5, 0.5]", result_lift_yx="[0.535, 0.5]"),
            d[2].update(result_touch_yx="[0.5, 0.5]", result_lift_yx="[0.545, 0.5]"),
        ),
    )
    steps = load_dataset("aitz", root).episodes[0].steps
    assert steps[1].action.type is C
    assert steps[2].action.type is S and steps[2].action.direction == "down"


def test_a11y_forest_roundtrip():
    nodes = parse_a11y_forest(mf.a11y_forest(mf.AC_NODES))
    assert [n["bounds"] for n in nodes] == [n["bounds"] for n in mf.AC_NODES]  # negative int32 kept
    assert nodes[1]["text"] == "OK" and nodes[2]["content_description"] == "Menu"
    assert decode_fields(b"") == {}


@pytest.mark.parametrize("name", ["aitz", "guir1"])  # a file-based format and an embedded-image one
def test_convert_dataset_writes_episodes_and_manifest(tmp_path, name):
    import json

    from guirl.data.loaders import convert_dataset

    src = mf.MAKERS[name](tmp_path / "src", bad=True)
    kw = {"scroll_convention": "finger"} if name == "guir1" else {}
    with pytest.warns(UserWarning, match="skipped 1"):
        paths, res = convert_dataset(name, src, tmp_path / "out", skip_bad=True, **kw)
    eps = list(read_episodes(paths["episodes"]))
    assert eps == res.episodes and len(eps) > 0
    man = json.loads(paths["manifest"].read_text())
    assert man["n_episodes"] == len(eps) and len(man["skipped"]) == 1
    root = Path(man["image_root"])
    assert all((root / s.screenshot).is_file() for e in eps for s in e.steps)


# ----------------------------------------------------------------------------- real public files
# Excerpts of the published files (tests/fixtures/real/README.md: source, commit, licence). Each
# loads strictly or with every adjustment counted; nothing is dropped silently. The screenshots
# are not part of the excerpts: placeholder PNGs of the screen size stand in for them under an
# image_root, as a user's local copy of the images would.
REAL = Path(__file__).parent / "fixtures" / "real"


def _placeholders(src: Path, out: Path, size_of) -> Path:
    import json

    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    for line in src.read_text(encoding="utf-8").splitlines():
        for s in json.loads(line)["steps"]:
            p = out / Path(s["screenshot"]).name
            if not p.exists():
                Image.new("RGB", size_of(s)).save(p)
    return out


def _phone(s):
    return (1080, 2400)


def _page(s):  # CCPO's Mind2Web file: img_size is [height, width]
    return (s["img_size"][1], s["img_size"][0])


# (loader, excerpt, placeholder size, expected counts with image_root, kinds of adjustment)
REAL_STD = [
    # 5 episodes, 30 steps: 30 screenshots remapped, 7 candidate boxes 1-4 px past the 1080 x 2400
    # screen clipped (episodes 8197, 54, 62 and others)
    (
        "uis1",
        "uis1/android_control_evaluation_std.jsonl",
        _phone,
        {"loaded": 5, "adjusted": 5, "adjustments": 37, "rejected": 0},
    ),
    # 2 episodes, 6 steps: 6 remaps, 1 clipped box (x2 = 1084)
    (
        "ccpo_androidcontrol",
        "ccpo_androidcontrol/android_control_test.jsonl",
        _phone,
        {"loaded": 2, "adjusted": 2, "adjustments": 7, "rejected": 0},
    ),
    # 1 episode, 10 steps on GUI-Odyssey's [0, 1000] grid: 10 remaps
    (
        "ccpo_guiodyssey",
        "ccpo_guiodyssey/guio_test.jsonl",
        _phone,
        {"loaded": 1, "adjusted": 1, "adjustments": 10, "rejected": 0},
    ),
    # 3 episodes, 24 steps (click, hover, a type with its text in `value`): 24 remaps; the page
    # size comes from img_size
    (
        "ccpo_mind2web",
        "ccpo_mind2web/mind2web_test.jsonl",
        _page,
        {"loaded": 3, "adjusted": 3, "adjustments": 24, "rejected": 0},
    ),
]


@pytest.mark.parametrize("name, rel, size_of, counts", REAL_STD, ids=[r[0] for r in REAL_STD])
def test_real_std_file_loads_with_every_adjustment_counted(tmp_path, name, rel, size_of, counts):
    src = REAL / rel
    images = _placeholders(src, tmp_path / "images", size_of)
    res = load_dataset(name, src, image_root=images)  # strict: a bad record would raise
    assert res.counts() == counts
    n_lines = len(src.read_text(encoding="utf-8").splitlines())
    assert len(res.episodes) + len(res.skipped) == n_lines  # nothing dropped silently
    for _, _, what in res.adjusted:
        assert ("remapped" in what and "under image_root" in what) or "clipped to the screen" in what, what
    for e in res.episodes:
        for s in e.steps:
            assert (images / s.screenshot).is_file()  # every screenshot resolves under image_root
            assert all(0.0 <= v <= 1.0 for b in s.candidate_boxes for v in b)
    # the screen size is the record's where it has one (img_size), else the image's
    size = (1280, 720) if name == "ccpo_mind2web" else (1080, 2400)
    assert all(s.screen_size == size for e in res.episodes for s in e.steps)


def test_real_ccpo_mind2web_type_step_reads_value(tmp_path):
    src = REAL / "ccpo_mind2web/mind2web_test.jsonl"
    res = load_dataset("ccpo_mind2web", src, image_root=_placeholders(src, tmp_path / "images", _page))
    typed = [s.action for e in res.episodes for s in e.steps if s.action.type is T]
    assert [a.text for a in typed] == ["New York"]  # line 1 step 1: {"action": "type", "value": "New York"}
    assert _close(typed[0].point, (210 / 1280, 487 / 720))


@pytest.mark.parametrize("name, rel", [(r[0], r[1]) for r in REAL_STD])
def test_real_std_file_without_image_root_names_the_missing_screenshot(name, rel):
    # the published paths are the authors' machines': without image_root each episode is rejected,
    # counted and named, never loaded half-way
    res = load_dataset(name, REAL / rel, skip_bad=True)
    assert res.episodes == [] and len(res.skipped) == len((REAL / rel).read_text().splitlines())
    assert all("does not exist" in why and why.startswith("screenshot") for _, _, why in res.skipped)


def test_real_off_screen_boxes_are_clipped_or_kept_as_annotated(tmp_path):
    src = REAL / "uis1/android_control_evaluation_std.jsonl"
    images = _placeholders(src, tmp_path / "images", _phone)
    keep = load_dataset("uis1", src, image_root=images, off_screen="keep")
    assert keep.counts()["adjustments"] == 30  # only the remaps
    assert any(b[2] > 1.0 for e in keep.episodes for s in e.steps for b in s.candidate_boxes)
    with pytest.raises(DatasetFormatError, match="reaches outside the screen"):
        load_dataset("uis1", src, image_root=images, off_screen="reject")


def test_real_swipe_conventions_follow_their_converters(tmp_path):
    # UI-S1's converter writes AndroidControl's "scroll down" as the finger moving up (1800 -> 600);
    # CCPO's converter draws the same direction as a motion downwards (600 -> 1800). Both load as
    # content "down" with their points as stored; read in the other file's convention, every
    # swipe contradicts its stated direction and is counted.
    ui = REAL / "uis1/android_control_evaluation_std.jsonl"
    cc = REAL / "ccpo_androidcontrol/android_control_test.jsonl"
    images = _placeholders(ui, tmp_path / "images", _phone)
    _placeholders(cc, images, _phone)
    a = load_dataset("uis1", ui, image_root=images)
    b = load_dataset("ccpo_androidcontrol", cc, image_root=images)
    swipes_a = [s.action for e in a.episodes for s in e.steps if s.action.type is S]
    swipes_b = [s.action for e in b.episodes for s in e.steps if s.action.type is S]
    assert len(swipes_a) == 5 and len(swipes_b) == 1
    assert all((x.direction, x.convention) == ("down", "content") for x in swipes_a + swipes_b)
    assert all(x.point[1] > x.point2[1] for x in swipes_a)  # finger up
    assert all(x.point[1] < x.point2[1] for x in swipes_b)  # drawn downwards
    # crossing the conventions: each swipe is reported
    from guirl.data.loaders.uis1 import load_std

    crossed_a = load_std(ui, image_root=images, swipe="content")
    crossed_b = load_std(cc, image_root=images, swipe="finger")
    assert sum("contradict" in w or "shows content direction" in w for _, _, w in crossed_a.adjusted) == 5
    assert sum("shows content direction" in w for _, _, w in crossed_b.adjusted) == 1


def test_real_guiodyssey_file_direction_is_the_content_sense():
    # CCPO's GUI-Odyssey file: SCROLL "LEFT" for a finger moving right (352 -> 654 on [0, 1000])
    from guirl.data.loaders.uis1 import step_from_std

    line = (REAL / "ccpo_guiodyssey/guio_test.jsonl").read_text().splitlines()[0]
    import json

    st = step_from_std(json.loads(line)["steps"][0], screen_size=(1080, 2400), vocabulary="guiodyssey")
    assert (st.action.direction, st.action.convention) == ("left", "content")
    assert st.action.in_convention("finger").direction == "right" and st.action.point == (0.352, 0.55)


def test_real_aitz_example_and_release_layouts(tmp_path):
    import shutil

    ex = load_dataset("aitz", REAL / "aitz_example", split="test")
    assert ex.counts() == {"loaded": 1, "adjusted": 1, "adjustments": 4, "rejected": 0}  # 4 screenshots beside the JSON
    assert all("beside the episode JSON" in w for _, _, w in ex.adjusted)
    ep = "GOOGLE_APPS-523638528775825151"
    shutil.copytree(REAL / "aitz_example" / ep, tmp_path / "test" / "google_apps" / ep)
    rel = load_dataset("aitz", tmp_path / "test")
    assert rel.counts() == {"loaded": 1, "adjusted": 0, "adjustments": 0, "rejected": 0}
    assert [s.action for s in rel.episodes[0].steps] == [s.action for s in ex.episodes[0].steps]
    assert [s.action.type.value for s in rel.episodes[0].steps] == ["press", "scroll", "click", "terminate"]


def test_guir1_pixel_boxes(tmp_path):
    # GUI-R1's published test parquets store gt_bbox in pixels (eval_omni.py subtracts pixels)
    from guirl.data.loaders.guir1 import step_from_row

    st = step_from_row(
        {"gt_action": "click", "gt_bbox": [540, 1200], "gt_input_text": "no input text"}, screen_size=(1080, 2400)
    )
    assert st.action.point == (0.5, 0.5)
    box = step_from_row(
        {"gt_action": "click", "gt_bbox": [108, 240, 216, 480], "gt_input_text": ""}, screen_size=(1080, 2400)
    )
    assert box.target_box == (0.1, 0.1, 0.2, 0.2) and box.action.point == pytest.approx((0.15, 0.15))
    norm = step_from_row({"gt_action": "click", "gt_bbox": [0.5, 0.5], "gt_input_text": ""}, screen_size=(1080, 2400))
    assert norm.action.point == (0.5, 0.5)  # all values in [0, 1]: normalised
    with pytest.raises(DatasetFormatError, match="outside"):
        step_from_row({"gt_action": "click", "gt_bbox": [1500, 10], "gt_input_text": ""}, screen_size=(1080, 2400))


# ----------------------------------------------------------------------------- bounds on a record
def _png_header(w: int, h: int) -> bytes:
    """A PNG that says it is ``w`` x ``h`` (its header only: a decompression bomb as Pillow opens it)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# (what, edit of the first record of UI-S1's std file (a dict) -> it, the key named)
BOUNDS = [
    ("30000x30000 png", lambda d, root: _bomb_shot(d, root), "screenshot"),
    ("json nested 100 000 deep", lambda d, root: {**d, "extra": "@DEEP100000@"}, "<line>"),
    ("json nested 100 deep", lambda d, root: {**d, "extra": "@DEEP100@"}, "<line>"),
    ("time 1e308", lambda d, root: _edit_step(d, 1, {"time": 1e308}), "time"),
    ("coordinate 1e308", lambda d, root: _edit_step(d, 0, {"coordinate": [1e308, 5]}), "coordinate"),
    ("5000-character path", lambda d, root: _set_shot(d, "images/" + "a" * 5000 + ".png"), "screenshot"),
    ("300-byte path part", lambda d, root: _set_shot(d, "images/" + "b" * 300 + ".png"), "screenshot"),
    ("../ out of the data folder", lambda d, root: _outside_shot(d, root), "screenshot"),
]


def _edit_step(d: dict, i: int, change: dict) -> dict:
    d["steps"][i]["action_content"].update(change)
    return d


def _set_shot(d: dict, shot: str) -> dict:
    d["steps"][0]["screenshot"] = shot
    return d


def _bomb_shot(d: dict, root: Path) -> dict:
    (root / "images" / "bomb.png").write_bytes(_png_header(30000, 30000))
    return _set_shot(d, "images/bomb.png")


def _outside_shot(d: dict, root: Path) -> dict:
    import shutil

    shutil.copy(root / "images" / "s1_0.png", root.parent / "outside.png")  # a real image, outside uis1/
    return _set_shot(d, "../outside.png")


@pytest.mark.parametrize("what, edit, key", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_a_record_past_a_bound_is_named_and_skipped_and_the_rest_loads(tmp_path, what, edit, key):
    import json
    import time

    root = mf.MAKERS["uis1"](tmp_path)
    path = root / "std_test.jsonl"
    lines = path.read_text().splitlines()
    bad = json.dumps(edit(json.loads(lines[0]), root))
    bad = bad.replace('"@DEEP100000@"', _deep(100_000)).replace('"@DEEP100@"', _deep(100))
    path.write_text("\n".join([lines[0], bad, *lines[1:]]) + "\n")
    start = time.perf_counter()
    with pytest.raises(DatasetFormatError) as ei:
        load_dataset("uis1", root)
    assert ei.value.record.startswith("line 2") and ei.value.key in (key, "?"), str(ei.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = load_dataset("uis1", root, skip_bad=True)
    assert res.counts()["loaded"] == len(lines) and res.counts()["rejected"] == 1
    f, record, why = res.skipped[0]
    assert f == str(path) and record.startswith("line 2") and why.startswith(f"{key}: "), res.skipped
    assert time.perf_counter() - start < 30


def test_image_bytes_past_the_pixel_bound_are_named(tmp_path):
    from guirl.data.loaders._common import Ctx, save_png

    with pytest.raises(DatasetFormatError, match=r"key .image.: image bytes are larger than 89478485 pixels"):
        save_png(Ctx("f.parquet", "row 3"), "image", _png_header(30000, 30000), tmp_path, "x.png")
    assert not (tmp_path / "x.png").exists()


def test_a_prepared_episode_whose_screenshot_leaves_the_data_folder_is_named(tmp_path):
    from guirl.data.schema import SchemaError

    root = mf.MAKERS["uis1"](tmp_path)
    eps = load_dataset("uis1", root).episodes
    path = tmp_path / "episodes.jsonl"
    write_episodes(eps, path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"screenshot": "images/', '"screenshot": "../../images/', 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        SchemaError, match=r"episodes.jsonl:2: bad episode record: screenshot: '\.\./\.\./images/.*' leads outside"
    ):
        list(read_episodes(path))


@pytest.mark.parametrize(
    ("cand", "line"),
    [
        ({"tag": "button", "backend_node_id": "7", "bounding_box_rect": "1,2,3,4"}, "<button>"),
        (
            {"tag": "input", "type": "text", "aria_label": "Search  flights", "value": ""},
            '<input> type="text" aria_label="Search flights"',
        ),
        ({"tag": "", "class": "x"}, '<element> class="x"'),
        ({"tag": "a", "title": "t" * 200}, '<a> title="' + "t" * 200),
    ],
)
def test_mind2web_element_text(cand, line):
    from guirl.data.loaders.mind2web import ELEMENT_TEXT_CHARS, element_text

    text = element_text(cand)
    assert text == line[:ELEMENT_TEXT_CHARS] and len(text) <= ELEMENT_TEXT_CHARS


def test_mind2web_referring_elements_keep_every_positive_and_fifty_in_all():
    from guirl.data.loaders.mind2web import REFERRING_ELEMENTS, referring_elements

    pos = [{"tag": "button", "id": f"pos{i}"} for i in range(3)]
    neg = [{"tag": "div", "id": f"neg{i}"} for i in range(200)]
    shown = referring_elements(pos, neg, "uid1")
    assert len(shown) == REFERRING_ELEMENTS == 50 and len(set(shown)) == 50
    assert {f'<button> id="pos{i}"' for i in range(3)} <= set(shown)
    assert shown == referring_elements(pos, neg, "uid1")  # seeded: the same step shows the same list
    assert shown != referring_elements(pos, neg, "uid2")
    assert shown[:3] != [f'<button> id="pos{i}"' for i in range(3)]  # the positives are not put first
    few = referring_elements(pos, neg[:5], "uid1")
    assert sorted(few) == sorted([f'<button> id="pos{i}"' for i in range(3)] + [f'<div> id="neg{i}"' for i in range(5)])
