"""Tests for guirl.train.data: SFT and grounding records in TRL's vision format, JSONL reading, datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from guirl.actions import Action
from guirl.actions.coords import resized_size
from guirl.actions.formats import get_format
from guirl.data.schema import Episode, Step, read_episodes
from guirl.env.export import build_minigui_dataset
from guirl.prompts import SYSTEM_PROMPTS, PromptSpec, episode_step_prompt, format_context, system_text
from guirl.train.data import grounding_records, read_jsonl, sft_records, to_dataset

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
RECORD_KEYS = {"prompt", "completion", "images", "episode_id", "step_id", "history", "action_type"}


@pytest.fixture(scope="session")
def minigui12(session_cache: Path) -> Path:
    """A 12-task MiniGUI dataset, built once per session in the shared cache."""
    root = session_cache / "minigui-n12-seed0"
    if not (root / "manifest.json").exists():
        build_minigui_dataset(root, n_tasks=12, seed=0, progress=False)
    return root


def episode(eid: str, actions: list[Action], ids: list[int] | None = None) -> Episode:
    ids = ids if ids is not None else list(range(len(actions)))
    steps = tuple(Step(i, f"images/{eid}_{i}.png", (280, 504), a, f"instr {i}") for i, a in zip(ids, actions))
    return Episode(eid, f"goal of {eid}", steps, source="test")


EP_A = episode(
    "ep-a", [Action("click", point=(0.25, 0.5)), Action("type", text="hi"), Action("terminate", status="success")]
)
EP_B = episode("ep-b", [Action("press", key="home"), Action("wait")], ids=[7, 8])  # non-zero step ids
SPECS = [PromptSpec(n_history=1, history_mode="nAO"), PromptSpec(n_history=3, history_mode="nA")]


# ----------------------------------------------------------------------------- sft_records
@pytest.mark.parametrize(
    "episodes, specs, n",
    [
        ([EP_A, EP_B], SPECS, 10),  # 5 steps x 2 settings
        ([EP_A], SPECS[:1], 3),  # one setting
        ([EP_B, EP_A], SPECS * 2, 20),  # duplicated settings are not merged
        ([], SPECS, 0),  # no episodes
    ],
)
def test_sft_records_count(episodes, specs, n: int) -> None:
    recs = sft_records(episodes, specs, image_root="/root", min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert len(recs) == n == sum(len(e.steps) for e in episodes) * len(specs)


def test_sft_records_content_and_order() -> None:
    recs = sft_records([EP_A, EP_B], SPECS, image_root=Path("/data/mg"), min_pixels=MIN_PX, max_pixels=MAX_PX)
    expected_keys = [
        (ep.episode_id, s.step_id, spec.tag, s.action.type.value)
        for ep in (EP_A, EP_B)
        for s in ep.steps
        for spec in SPECS
    ]
    assert [(r["episode_id"], r["step_id"], r["history"], r["action_type"]) for r in recs] == expected_keys
    i = 0
    for ep in (EP_A, EP_B):
        for t in range(len(ep.steps)):
            for spec in SPECS:
                r = recs[i]
                i += 1
                assert set(r) == RECORD_KEYS
                messages, images, completion = episode_step_prompt(
                    ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root="/data/mg"
                )
                assert r["prompt"] == messages
                assert r["images"] == images and all(p.startswith("/data/mg/images/") for p in images)
                assert r["completion"] == [{"role": "assistant", "content": [{"type": "text", "text": completion}]}]
                n_ph = sum(c["type"] == "image" for m in r["prompt"] for c in m["content"])
                assert n_ph == len(r["images"])  # TRL pairs placeholders and images by position


def test_sft_records_inexpressible_action_names_the_episode() -> None:
    """agentcpm (an allowed ``sft.output_format``) cannot write MiniGUI's ``answer`` / ``open_app`` steps;
    the error must say which episode and step, so a user can find the record."""
    ep = episode("ep-answer", [Action("click", point=(0.5, 0.5)), Action("answer", text="555-1234")])
    spec = PromptSpec(output_format="agentcpm", n_history=1)
    with pytest.raises(ValueError, match=r"ep-answer.*step 1|step 1.*ep-answer"):
        sft_records([ep], [spec], image_root="", min_pixels=MIN_PX, max_pixels=MAX_PX)


# ----------------------------------------------------------------------------- grounding_records
def g_row(**kw) -> dict:
    row = {
        "id": "g-1",
        "type": "text_to_point",
        "question": "Find 'Send'.",
        "image": "train/images/x.png",
        "width": 280,
        "height": 504,
        "point": [0.3, 0.7],
        "answer": "[0.3, 0.7]",
        "episode_id": "mg-0-1",
        "step_id": 2,
    }
    row.update(kw)
    return row


@pytest.mark.parametrize("fmt", sorted(SYSTEM_PROMPTS))
@pytest.mark.parametrize(
    "row",
    [
        g_row(),  # text to point
        g_row(type="function_to_point", point=[0.0, 1.0]),  # corner point on the screen edge
        g_row(point=[0.123, 0.987], width=1080, height=2400),  # another screen size
        g_row(point=(0.5, 0.5)),  # a tuple point (rows built in memory)
    ],
)
def test_grounding_point_rows_become_clicks(fmt: str, row: dict) -> None:
    (rec,) = grounding_records([row], fmt, image_root="/data/mg/", min_pixels=MIN_PX, max_pixels=MAX_PX)
    fm = get_format(fmt)
    ctx = format_context((row["width"], row["height"]), MIN_PX, MAX_PX)
    res = fm.parse(rec["completion"][0]["content"][0]["text"], ctx)
    assert res.ok and res.action.type.value == "click", res.reason
    tol = fm.tolerance(ctx)
    assert abs(res.action.point[0] - row["point"][0]) <= tol + 1e-12
    assert abs(res.action.point[1] - row["point"][1]) <= tol + 1e-12
    assert rec["images"] == ["/data/mg/train/images/x.png"]
    # the format's paper prompt, stating the resized screen where it does (Qwen2.5-VL mobile_use)
    res = resized_size(row["width"], row["height"], min_pixels=MIN_PX, max_pixels=MAX_PX)
    system = system_text(PromptSpec(output_format=fmt, n_history=0), res)
    assert rec["prompt"][0] == {"role": "system", "content": [{"type": "text", "text": system}]}
    assert ("{width}" in system) is False
    assert rec["prompt"][1]["content"] == [{"type": "image"}, {"type": "text", "text": row["question"]}]
    assert (rec["episode_id"], rec["step_id"], rec["history"], rec["action_type"]) == (
        "mg-0-1",
        2,
        "grounding",
        row["type"],
    )


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("Calendar", "Calendar"),  # element text kept verbatim
        (42, "42"),  # non-string answers become text
        ("", ""),  # an empty label stays empty
    ],
)
def test_grounding_box_to_text_keeps_answer(answer, expected: str) -> None:
    row = g_row(type="box_to_text", point=None, answer=answer)
    (rec,) = grounding_records([row], "ccpo", image_root="", min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert rec["completion"] == [{"role": "assistant", "content": [{"type": "text", "text": expected}]}]
    assert rec["images"] == ["train/images/x.png"]  # no root: relative path unchanged


def _without(key: str) -> dict:
    row = g_row(id="g-missing-" + key)
    del row[key]
    return row


@pytest.mark.parametrize(
    "row",
    [
        _without("question"),  # no question
        _without("image"),  # no screenshot
        _without("width"),  # no screen size
        _without("point"),  # point row without a point
        g_row(id="g-none", point=None),  # point explicitly null
        g_row(id="g-outside", point=[1.2, 0.5]),  # not normalised
        g_row(id="g-3d", point=[0.1, 0.2, 0.3]),  # wrong length
        g_row(id="g-kind", type="point_to_text"),  # unknown grounding type
        g_row(id="g-width", width="wide"),  # size not a number
        g_row(id="g-zero", width=0),  # degenerate screen
    ],
)
def test_grounding_bad_row_names_row_id(row: dict) -> None:
    with pytest.raises(ValueError, match=f"grounding row {row['id']}"):
        grounding_records([g_row(id="g-ok"), row], "ccpo", image_root="", min_pixels=MIN_PX, max_pixels=MAX_PX)


def test_grounding_unknown_format_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="'uitars'"):
        grounding_records([g_row()], "uitars", image_root="", min_pixels=MIN_PX, max_pixels=MAX_PX)


def test_grounding_records_on_minigui(minigui12: Path) -> None:
    rows = read_jsonl(minigui12 / "grounding_train.jsonl")
    recs = grounding_records(rows, "qwen_mobile_use", image_root=minigui12, min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert len(recs) == len(rows) > 0
    assert {r["action_type"] for r in recs} == {"text_to_point", "function_to_point", "box_to_text"}
    assert all(Path(r["images"][0]).is_file() for r in recs)
    for row, rec in zip(rows, recs):
        if row["type"] == "box_to_text":
            assert rec["completion"][0]["content"][0]["text"] == row["answer"]


# ----------------------------------------------------------------------------- read_jsonl
def test_read_jsonl_skips_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "rows.jsonl"
    p.write_text('{"a": 1}\n\n  \n{"a": 2, "b": [1, 2]}\n', encoding="utf-8")
    assert read_jsonl(p) == [{"a": 1}, {"a": 2, "b": [1, 2]}]


@pytest.mark.parametrize(
    "text, line",
    [
        ('{"a": 1}\n{"a": 2\n', 2),  # truncated record
        ('{"a": 1}\n\n{"a": 1}\nnot json\n', 4),  # blank lines still count
        ("{'a': 1}\n", 1),  # Python dict, not JSON
    ],
)
def test_read_jsonl_error_names_file_and_line(tmp_path: Path, text: str, line: int) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"bad.jsonl:{line}: not valid JSON"):
        read_jsonl(p)


# ----------------------------------------------------------------------------- to_dataset
def drop_none(x):
    if isinstance(x, dict):
        return {k: drop_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [drop_none(v) for v in x]
    return x


def test_to_dataset_decodes_images(minigui12: Path) -> None:
    eps = list(read_episodes(minigui12 / "test_in_domain" / "episodes.jsonl"))[:1]
    recs = sft_records(
        eps,
        [PromptSpec(n_history=2, history_mode="nAO")],
        image_root=minigui12 / "test_in_domain",
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
    )
    ds = to_dataset(recs)
    assert len(ds) == len(recs) == len(eps[0].steps)
    for i in (0, len(ds) - 1):
        row = ds[i]
        assert len(row["images"]) == len(recs[i]["images"])
        assert all(isinstance(im, Image.Image) and im.size == (280, 504) for im in row["images"])
        # Arrow unifies the content structs: image items gain "text": None (TRL and the chat template ignore it)
        assert drop_none(row["prompt"]) == recs[i]["prompt"] and row["completion"] == recs[i]["completion"]
        assert (row["episode_id"], row["step_id"], row["history"]) == (recs[i]["episode_id"], recs[i]["step_id"], "2AO")
    assert len(ds[-1]["images"]) == 3  # 2 history screens + current once the episode is long enough


def test_to_dataset_empty_raises() -> None:
    with pytest.raises(ValueError, match="no training records"):
        to_dataset([])


# ----------------------------------------------------------------------------- records files
def _rec(images: list[str], placeholders: int | None = None) -> dict:
    n = len(images) if placeholders is None else placeholders
    user = {"role": "user", "content": [{"type": "image"}] * n + [{"type": "text", "text": "q"}]}
    return {
        "prompt": [user],
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": "a"}]}],
        "images": images,
        "kind": "plan",
    }


def test_records_round_trip_and_join_relative_images(tmp_path: Path) -> None:
    from guirl.train.data import read_records, write_records

    recs = [_rec(["train/a.png"]), _rec([]), _rec(["/abs/b.png", "train/c.png"])]  # text-only records are fine
    path = write_records(tmp_path / "r" / "records.jsonl", recs)
    back = read_records(path, image_root=tmp_path / "data")
    assert [r["images"] for r in back] == [
        [str(tmp_path / "data" / "train/a.png")],
        [],
        ["/abs/b.png", str(tmp_path / "data" / "train/c.png")],
    ]
    assert [r["kind"] for r in back] == ["plan"] * 3  # metadata columns survive
    assert read_records(path)[0]["images"] == ["train/a.png"]  # no root: as written


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"prompt": [], "completion": []}, r"record 0: record lacks \['images'\]"),
        (_rec(["a.png"], placeholders=2), "record 0: 2 image placeholders but 1 images"),
        ({"prompt": "text", "completion": [], "images": []}, "lists of chat messages"),
    ],
)
def test_write_records_refuses_bad_records_before_writing(tmp_path: Path, bad: dict, match: str) -> None:
    from guirl.train.data import write_records

    with pytest.raises(ValueError, match=match):
        write_records(tmp_path / "r.jsonl", [bad])
    assert not (tmp_path / "r.jsonl").exists()


def test_read_records_names_the_file_and_line(tmp_path: Path) -> None:
    from guirl.train.data import read_records

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_rec([])) + "\n" + json.dumps({"prompt": []}) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: record lacks"):
        read_records(path)
