"""Tests for guirl.evaluate: prediction records, step summaries, JSONL output, offline and online evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.config import ConfigError, load_config
from guirl.data.schema import Episode, Step, read_episodes
from guirl.env.expert import solve
from guirl.env.export import build_minigui_dataset
from guirl.env.tasks import generate_tasks
from guirl.evaluate import (
    PREDICTION_FIELDS,
    evaluate_offline,
    generate,
    load_policy,
    play_online,
    prediction_record,
    summarize_online,
    summarize_steps,
    write_predictions,
)
from guirl.models import build_tiny_model
from guirl.prompts import SYSTEM_PROMPTS, PromptSpec, action_text, episode_step_prompt, format_context

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
W, H = 280, 504  # MiniGUI screen (tiny profile)
ONLINE_FIELDS = {
    "task_id",
    "category",
    "success",
    "subgoals_done",
    "subgoals_total",
    "subgoal_rate",
    "turns",
    "n_unparsable",
    "n_invalid",
    "actions",
}


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def minigui12(session_cache: Path) -> Path:
    """A 12-task MiniGUI dataset, built once per session in the shared cache."""
    root = session_cache / "minigui-n12-seed0"
    if not (root / "manifest.json").exists():
        build_minigui_dataset(root, n_tasks=12, seed=0, progress=False)
    return root


@pytest.fixture(scope="session")
def tiny_checkpoint(session_cache: Path) -> Path:
    """The random tiny Qwen2.5-VL, built once in the shared cache (the folder
    ``guirl.workflow.base_model_dir`` resolves for ``model.path=tiny``, so it is not built twice)."""
    return build_tiny_model(session_cache / "models", seed=0)


@pytest.fixture()
def tiny_policy(tiny_checkpoint: Path):
    """``(model, processor)`` on one torch thread: the 1.4 M-parameter model gains nothing from
    more, and two threads on a busy 2-core machine spin-wait (measured 0.25 s vs 12 s for one
    online game). The thread count is restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield load_policy(tiny_checkpoint, None, min_pixels=MIN_PX, max_pixels=MAX_PX)
    finally:
        torch.set_num_threads(before)


def hand_episode() -> Episode:
    box = (0.1, 0.4, 0.9, 0.6)
    steps = (
        Step(0, "s0.png", (W, H), Action("click", point=(0.5, 0.5)), target_box=box, candidate_boxes=(box,)),
        Step(1, "s1.png", (W, H), Action("type", text="hello world")),
        Step(2, "s2.png", (W, H), Action("scroll", direction="down", convention="content")),
        Step(3, "s3.png", (W, H), Action("press", key="back")),
        Step(4, "s4.png", (W, H), Action("long_press", point=(0.2, 0.8))),
        Step(5, "s5.png", (1080, 2400), Action("terminate", status="success")),
    )
    return Episode("ep-eval", "do things", steps, source="test", split="test_in_domain")


def record(ep: Episode, t: int, output: str, fmt: str = "ccpo", protocol: str = "ccpo") -> dict:
    return prediction_record(
        model="m",
        split="test_in_domain",
        history="1AO",
        episode=ep,
        t=t,
        output=output,
        output_format=fmt,
        protocol=protocol,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
    )


def text_of(action: Action, fmt: str = "ccpo", size: tuple[int, int] = (W, H)) -> str:
    return action_text(action, PromptSpec(output_format=fmt), format_context(size, MIN_PX, MAX_PX))


# ----------------------------------------------------------------------------- prediction_record
@pytest.mark.parametrize("fmt", sorted(SYSTEM_PROMPTS))
@pytest.mark.parametrize("t", range(6))  # click, type, scroll (content convention), press, long press, terminate
def test_prediction_record_exact_ground_truth(fmt: str, t: int) -> None:
    ep = hand_episode()
    step = ep.steps[t]
    out = text_of(step.action, fmt, step.screen_size)
    r = record(ep, t, out, fmt=fmt)
    assert set(r) == set(PREDICTION_FIELDS)
    assert r["parse_ok"] and r["type_match"] and r["exact"], r["score_reason"]
    assert r["grounding"] is (True if step.action.point is not None else None)  # GR only for coordinate steps
    assert (r["episode_id"], r["step_id"], r["history"], r["split"], r["model"]) == (
        "ep-eval",
        t,
        "1AO",
        "test_in_domain",
        "m",
    )
    assert (r["image_width"], r["image_height"]) == step.screen_size
    assert r["gt_action"] == step.action.to_dict() and r["gt_type"] == step.action.type.value
    assert r["output"] == out and r["pred_type"] == step.action.type.value
    assert json.loads(json.dumps(r)) == r  # plain JSON values only


@pytest.mark.parametrize(
    "output",
    [
        "",  # empty generation
        ">Weekly>Weekly>Weekly",  # what the random tiny model writes
        "<action>{not json}</action>",  # broken JSON inside the tags
        '<action>{"action": "click", "coordinate": [9999, 9999]}</action>',  # outside the screen
        '<action>{"action": "fly"}</action>',  # unknown action name
    ],
)
@pytest.mark.parametrize("t", [0, 1])  # a coordinate step and a text step
def test_prediction_record_garbage_is_complete_and_wrong(output: str, t: int) -> None:
    ep = hand_episode()
    r = record(ep, t, output)
    assert set(r) == set(PREDICTION_FIELDS)
    assert r["parse_ok"] is False and r["parse_reason"]
    assert r["type_match"] is False and r["exact"] is False
    assert r["grounding"] is (False if t == 0 else None)  # unparsable: wrong on coordinate steps
    assert r["pred_action"] is r["pred_type"] is r["pred_point"] is r["pred_text"] is None
    assert r["gt_point"] == ([0.5, 0.5] if t == 0 else None) and r["gt_box"] == (
        [0.1, 0.4, 0.9, 0.6] if t == 0 else None
    )
    assert r["output"] == output
    json.dumps(r)


@pytest.mark.parametrize(
    "point, protocol, grounding",
    [
        ((0.9, 0.95), "ccpo", False),  # far from the target
        ((0.8, 0.55), "ccpo", False),  # inside the target box but 0.30 away: CCPO uses distance 0.1 only
        ((0.8, 0.55), "guiodyssey", True),  # GUI-Odyssey accepts any point inside the gt box
        ((0.8, 0.55), "agentcpm", True),  # AgentCPM-GUI: inside a candidate box containing the gt point
        ((0.55, 0.45), "ccpo", True),  # 0.07 away: within CCPO's 0.1
    ],
)
def test_prediction_record_click_grounding(point, protocol: str, grounding: bool) -> None:
    ep = hand_episode()
    r = record(ep, 0, text_of(Action("click", point=point)), protocol=protocol)
    assert r["parse_ok"] and r["type_match"] is True
    assert r["grounding"] is grounding and r["exact"] is grounding
    assert r["pred_type"] == "click" and np.allclose(r["pred_point"], point, atol=0.005)
    assert r["gt_box"] == [0.1, 0.4, 0.9, 0.6]


def test_prediction_record_wrong_type() -> None:
    r = record(hand_episode(), 0, text_of(Action("press", key="home")))
    assert r["parse_ok"] and (r["type_match"], r["grounding"], r["exact"]) == (False, False, False)
    assert r["pred_type"] == "press" and r["pred_point"] is None


# ----------------------------------------------------------------------------- summarize_steps
def rec(tm: bool, gr: bool | None, sr: bool, ok: bool = True) -> dict:
    return {"type_match": tm, "grounding": gr, "exact": sr, "parse_ok": ok}


HAND = [
    rec(True, True, True),  # correct click
    rec(True, None, False),  # right type, wrong text (no coordinate)
    rec(False, False, False, ok=False),  # unparsable on a click step
    rec(True, False, False),  # click in the wrong place
    rec(False, None, False, ok=False),  # unparsable on a text step
]


@pytest.mark.parametrize(
    "records, expected",
    [
        (HAND, {"n": 5, "n_unparsable": 2, "TM": 60.0, "GR": 100 / 3, "SR": 20.0}),  # mixed
        (HAND[:1], {"n": 1, "n_unparsable": 0, "TM": 100.0, "GR": 100.0, "SR": 100.0}),  # one perfect step
        (
            [rec(True, None, True)] * 3,
            {"n": 3, "n_unparsable": 0, "TM": 100.0, "GR": math.nan, "SR": 100.0},
        ),  # no coords
        ([], {"n": 0, "n_unparsable": 0, "TM": math.nan, "GR": math.nan, "SR": math.nan}),  # nothing scored
    ],
)
def test_summarize_steps_rates(records, expected: dict) -> None:
    s = summarize_steps(records, n_boot=200, seed=0)
    assert s["n"] == expected["n"] and s["n_unparsable"] == expected["n_unparsable"]
    for k in ("TM", "GR", "SR"):
        if math.isnan(expected[k]):
            assert math.isnan(s[k]) and math.isnan(s[f"{k}_lo"]) and math.isnan(s[f"{k}_hi"])
        else:
            assert s[k] == pytest.approx(expected[k])
            assert 0.0 <= s[f"{k}_lo"] <= s[k] <= s[f"{k}_hi"] <= 100.0


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_summarize_steps_interval_is_a_real_interval(seed: int) -> None:
    recs = [rec(bool(i % 3), bool(i % 5) if i % 4 else None, bool(i % 2)) for i in range(30)]
    s = summarize_steps(recs, n_boot=500, seed=seed)
    assert s["TM"] == pytest.approx(100 * 20 / 30) and s["TM_lo"] < s["TM"] < s["TM_hi"]  # non-degenerate
    assert s["SR"] == pytest.approx(50.0) and s["SR_lo"] < 50.0 < s["SR_hi"]
    gr = [bool(i % 5) for i in range(30) if i % 4]  # GR over the 22 coordinate steps only
    assert s["GR"] == pytest.approx(100 * sum(gr) / len(gr)) and s["GR_lo"] <= s["GR"] <= s["GR_hi"]
    assert summarize_steps(recs, n_boot=500, seed=seed) == s  # deterministic in the seed


def test_summarize_steps_accepts_every_config_valid_bootstrap_count() -> None:
    """``eval.bootstrap_samples`` is passed as ``n_boot`` (notebook 01_sft); any value the config
    accepts must work (or the config must reject it)."""
    try:
        cfg = load_config("tiny", overrides=["eval.bootstrap_samples=0"])
    except ConfigError:
        return  # the config rejects it: nothing can reach summarize_steps
    s = summarize_steps(HAND, n_boot=cfg.eval.bootstrap_samples, seed=0)
    assert s["TM"] == pytest.approx(60.0) and s["SR"] == pytest.approx(20.0)


# ----------------------------------------------------------------------------- write_predictions
def test_write_predictions_sorted_and_roundtrips(tmp_path: Path) -> None:
    ep = hand_episode()
    recs = [record(ep, t, text_of(ep.steps[t].action, size=ep.steps[t].screen_size)) for t in range(6)]
    recs.append(record(ep, 1, "garbage ünïcode"))  # non-ASCII output kept as is
    path = write_predictions(recs, tmp_path / "deep" / "pred.jsonl")  # parents created
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(recs)
    assert [json.loads(line) for line in lines] == recs
    assert all(list(json.loads(line)) == sorted(json.loads(line)) for line in lines)
    assert "ünïcode" in lines[-1]
    # the same predictions with keys in another order give the same bytes
    again = write_predictions([dict(reversed(list(r.items()))) for r in recs], tmp_path / "again.jsonl")
    assert again.read_bytes() == path.read_bytes()


# ----------------------------------------------------------------------------- summarize_online
def run(*pairs: tuple[bool, float]) -> list[dict]:
    return [{"success": s, "subgoal_rate": g} for s, g in pairs]


@pytest.mark.parametrize(
    "runs, expected",
    [
        # two seeds: task SR 50 and 0, subgoal SR 75 and 25 (std over seeds, numpy's population std)
        ([run((True, 1.0), (False, 0.5)), run((False, 0.0), (False, 0.5))], (25.0, 25.0, 50.0, 25.0, 2)),
        ([run((True, 1.0), (True, 1.0))], (100.0, 0.0, 100.0, 0.0, 1)),  # one perfect seed
        (
            [run((False, 0.25)), run((False, 0.25)), run((True, 1.0))],
            (100 / 3, float(np.std([0, 0, 100])), 50.0, float(np.std([25, 25, 100])), 3),
        ),
        ([run((True, 1.0)), []], (100.0, 0.0, 100.0, 0.0, 1)),  # an empty run is not a seed
    ],
)
def test_summarize_online(runs, expected) -> None:
    s = summarize_online(runs)
    got = (s["task_sr"], s["task_sr_std"], s["subgoal_sr"], s["subgoal_sr_std"], s["n_runs"])
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("runs", [[], [[]], [[], []]])  # no runs, or only empty ones
def test_summarize_online_empty_is_nan(runs) -> None:
    s = summarize_online(runs)
    assert all(math.isnan(s[k]) for k in ("task_sr", "task_sr_std", "subgoal_sr", "subgoal_sr_std"))
    assert s["n_runs"] == 0


# ----------------------------------------------------------------------------- tiny model, end to end
def test_generate_returns_one_string_per_prompt_in_order(tiny_policy, minigui12: Path) -> None:
    model, processor = tiny_policy
    ep = next(read_episodes(minigui12 / "test_in_domain" / "episodes.jsonl"))
    spec = PromptSpec(n_history=1, history_mode="nAO")
    prompts = [
        episode_step_prompt(
            ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=str(minigui12 / "test_in_domain")
        )[:2]
        for t in range(2)
    ]
    outs = generate(model, processor, prompts, max_new_tokens=4, batch_size=1)
    assert len(outs) == 2 and all(isinstance(o, str) for o in outs)
    # batch size 1 has no padding, so reversing the prompts reverses the outputs exactly
    assert generate(model, processor, prompts[::-1], max_new_tokens=4, batch_size=1) == outs[::-1]


def test_evaluate_offline_on_tiny_model(tiny_policy, minigui12: Path) -> None:
    model, processor = tiny_policy
    split = "test_in_domain"
    episodes = list(read_episodes(minigui12 / split / "episodes.jsonl"))
    spec = PromptSpec(n_history=2, history_mode="nAO", use_step_instruction=True)
    recs = evaluate_offline(
        model,
        processor,
        episodes,
        spec,
        protocol="ccpo",
        image_root=minigui12 / split,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        max_new_tokens=8,
        batch_size=3,
        model_name="random",
        split=split,
        max_steps=5,
        progress=False,
    )
    items = [(ep.episode_id, s.step_id) for ep in episodes for s in ep.steps][:5]  # batches of 3 and 2
    assert [(r["episode_id"], r["step_id"]) for r in recs] == items  # one record per step, episode order
    for r in recs:
        assert set(r) == set(PREDICTION_FIELDS)
        assert (r["model"], r["split"], r["history"]) == ("random", split, "2AO")
        assert isinstance(r["output"], str)
        if not r["parse_ok"]:
            assert not r["type_match"] and not r["exact"] and r["parse_reason"]
    s = summarize_steps(recs, n_boot=50)
    assert s["n"] == 5
    assert s["n_unparsable"] == sum(not r["parse_ok"] for r in recs)


def test_evaluate_offline_unknown_protocol_fails_before_generating(minigui12: Path) -> None:
    episodes = list(read_episodes(minigui12 / "test_in_domain" / "episodes.jsonl"))
    with pytest.raises(KeyError, match="no_such_protocol"):  # model=None: generating would fail differently
        evaluate_offline(
            None,
            None,
            episodes,
            PromptSpec(),
            protocol="no_such_protocol",
            image_root=minigui12,
            min_pixels=MIN_PX,
            max_pixels=MAX_PX,
            max_new_tokens=8,
            batch_size=1,
            model_name="x",
            split="test_in_domain",
            progress=False,
        )


def test_play_online_random_model(tiny_policy) -> None:
    model, processor = tiny_policy
    tasks = generate_tasks(2, seed=5, prefix="online")
    res = play_online(
        model,
        processor,
        tasks,
        PromptSpec(n_history=1, history_mode="nAO"),
        width=W,
        height=H,
        max_turns=2,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        max_new_tokens=8,
        batch_size=2,
        progress=False,
    )
    assert [r["task_id"] for r in res] == [t.task_id for t in tasks]
    for r, task in zip(res, tasks):
        assert set(r) == ONLINE_FIELDS
        assert r["category"] == task.category
        assert 0.0 <= r["subgoal_rate"] <= 1.0 and isinstance(r["success"], bool)
        assert 1 <= r["turns"] <= 2 and 0 <= r["n_unparsable"] <= r["turns"]
        assert len(r["actions"]) == r["turns"] - r["n_unparsable"]
        assert r["subgoals_total"] == len(task.subgoals) and 0 <= r["subgoals_done"] <= r["subgoals_total"]
    json.dumps(res)


def test_play_online_scripted_expert(monkeypatch: pytest.MonkeyPatch) -> None:
    """``generate`` replaced by a script: the expert's actions (plus a garbage turn and an invalid
    action for the first task) must solve both tasks; counters and history follow the script."""
    fmt = get_format("ccpo")
    ctx = format_context((W, H), MIN_PX, MAX_PX)
    tasks = generate_tasks(6, seed=3, prefix="t")[1:3]  # an information query (3 steps), a compound task (4)
    expert = [[fmt.format(s.action, ctx) for s in solve(t, seed=0, render=False).steps] for t in tasks]
    invalid = fmt.format(Action("type", text="zzz"), ctx)  # no focused field on the home screen
    scripts = [["garbage!", invalid, *expert[0]], list(expert[1])]
    by_instruction = {t.instruction: i for i, t in enumerate(tasks)}
    assert len(by_instruction) == 2
    turn = [0, 0]
    seen_history: list[list[str]] = [[], []]

    def fake_generate(model, processor, prompts, *, max_new_tokens, batch_size, **kw):
        outs = []
        for messages, images in prompts:
            user = messages[1]["content"]
            i = by_instruction[user[0]["text"].removeprefix("Task: ").rstrip("\n")]
            labels = [j for j, c in enumerate(user) if c["type"] == "text" and c["text"].startswith("Step ")]
            seen_history[i].append(user[labels[-1] + 2]["text"] if labels else "")  # label, image, action text
            assert len(images) == (2 if turn[i] else 1)  # 1AO: the previous screen, then the current one
            outs.append(scripts[i][turn[i]] + "\n")
            turn[i] += 1
        return outs

    monkeypatch.setattr("guirl.evaluate.generate", fake_generate)
    spec = PromptSpec(n_history=1, history_mode="nAO")
    res = play_online(
        None,
        None,
        tasks,
        spec,
        width=W,
        height=H,
        max_turns=6,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        max_new_tokens=8,
        batch_size=2,
        progress=False,
    )
    a, b = res
    assert (a["success"], a["subgoal_rate"], a["turns"], a["n_unparsable"], a["n_invalid"]) == (True, 1.0, 5, 1, 1)
    assert (b["success"], b["subgoal_rate"], b["turns"], b["n_unparsable"], b["n_invalid"]) == (True, 1.0, 4, 0, 0)
    assert a["subgoals_done"] == a["subgoals_total"] == len(tasks[0].subgoals)
    expected_b = [fmt.parse(x, ctx).action.to_dict() for x in expert[1]]
    assert b["actions"] == expected_b  # the parsed actions, in order
    assert len(a["actions"]) == 4  # the garbage turn is not an action; the invalid one is
    # the history shows the previous output: raw text for garbage, the re-written action otherwise
    assert seen_history[0][:3] == ["", "garbage!\n", invalid + "\n"]
    assert seen_history[1] == [""] + [x + "\n" for x in expert[1][:-1]]
    assert turn == [5, 4]  # a finished task is not prompted again
