"""Tests for guirl.studies.shared.evaluation: policies from a config, the offline evaluation grid, the Table 2 /
gain / action-type tables and online evaluation over runs.

The refactoring promise (same model -> same predictions and scores) is checked against a frozen
copy of the code this module replaced (``guirl.evaluate`` and notebook 01's table cells at
commit c7e8c23), kept verbatim below in ``Frozen``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from guirl.actions.formats import get_format
from guirl.config import load_config
from guirl.configbase import Sampling
from guirl.data.splits import Split, load_splits
from guirl.env.expert import solve
from guirl.env.export import build_minigui_dataset
from guirl.metrics.records import PREDICTION_FIELDS, prediction_record
from guirl.metrics.summary import summarize_online, summarize_steps
from guirl.models import build_tiny_model, load_policy
from guirl.prompts import PromptSpec, build_prompt, episode_step_prompt, format_context, prompt_spec
from guirl.rollout import ONLINE_FIELDS, FunctionPolicy, HFPolicy, derive_seed, play_online
from guirl.studies.shared import evaluation as ev

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
W, H = 280, 504  # MiniGUI screen (tiny profile)


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
    """The random tiny Qwen2.5-VL, built once in the shared cache."""
    return build_tiny_model(session_cache / "models", seed=0)


@pytest.fixture()
def one_thread():
    """One torch thread for the tiny model (two on a busy 2-core machine spin-wait); restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture()
def tiny_model(tiny_checkpoint: Path, one_thread):
    return load_policy(tiny_checkpoint, None, min_pixels=MIN_PX, max_pixels=MAX_PX)


def tiny_cfg(**eval_overrides: Any):
    """The tiny profile with eval budgets small enough for a test."""
    over = {"eval.max_test_steps": 3, "eval.n_tasks": 2, "eval.max_turns": 3, "eval.n_seeds": 2}
    over.update({f"eval.{k}": v for k, v in eval_overrides.items()})
    return load_config("tiny", overrides=[f"{k}={json.dumps(v)}" for k, v in over.items()])


# ----------------------------------------------------------------------------- the replaced code, frozen
class Frozen:
    """``guirl.evaluate.generate`` / ``evaluate_offline`` / ``play_online`` and 01's table cells as
    they were before the refactoring (commit c7e8c23), unchanged except for being methods here."""

    @staticmethod
    def generate(model, processor, prompts, *, max_new_tokens: int, batch_size: int) -> list[str]:
        import torch
        from PIL import Image

        def _open(img):
            if isinstance(img, (str, Path)):
                with Image.open(img) as im:
                    return im.convert("RGB")
            return img

        outs: list[str] = []
        for i in range(0, len(prompts), batch_size):
            batch = prompts[i : i + batch_size]
            texts = [processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in batch]
            images = [[_open(x) for x in ims] for _, ims in batch]
            enc = processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="left")
            enc = enc.to(model.device)
            with torch.no_grad():
                ids = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
            outs.extend(processor.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))
        return outs

    @staticmethod
    def evaluate_offline(
        model,
        processor,
        episodes,
        spec,
        *,
        protocol,
        image_root,
        max_new_tokens,
        batch_size,
        model_name,
        split,
        max_steps,
    ) -> list[dict[str, Any]]:
        items = [(ep, t) for ep in episodes for t in range(len(ep.steps))]
        if max_steps is not None:
            items = items[:max_steps]
        prompts = []
        for ep, t in items:
            messages, images, _ = episode_step_prompt(
                ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=str(image_root)
            )
            prompts.append((messages, images))
        outputs = Frozen.generate(model, processor, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
        return [
            prediction_record(
                model=model_name,
                split=split,
                history=spec.tag,
                episode=ep,
                t=t,
                output=o,
                output_format=spec.output_format,
                protocol=protocol,
                min_pixels=MIN_PX,
                max_pixels=MAX_PX,
            )
            for (ep, t), o in zip(items, outputs)
        ]

    @staticmethod
    def play_online(model, processor, tasks, spec, *, max_turns, max_new_tokens, batch_size) -> list[dict[str, Any]]:
        from guirl.env import MiniGUIEnv
        from guirl.prompts import action_text

        fmt = get_format(spec.output_format)
        ctx = format_context((W, H), MIN_PX, MAX_PX)
        envs, obs, hist, recs = [], [], [], []
        for task in tasks:
            env = MiniGUIEnv(width=W, height=H, render=True, max_steps=max_turns)
            o, _ = env.reset(options={"task": task})
            envs.append(env)
            obs.append(o)
            hist.append([])
            recs.append(
                {
                    "task_id": task.task_id,
                    "category": task.category,
                    "turns": 0,
                    "n_unparsable": 0,
                    "n_invalid": 0,
                    "actions": [],
                    "done": False,
                }
            )
        for _ in range(max_turns):
            live = [i for i, r in enumerate(recs) if not r["done"]]
            if not live:
                break
            prompts = [build_prompt(tasks[i].instruction, hist[i], obs[i]["screenshot"], spec, None) for i in live]
            outputs = Frozen.generate(model, processor, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
            for i, text in zip(live, outputs):
                r = recs[i]
                r["turns"] += 1
                parsed = fmt.parse(text, ctx)
                if not parsed.ok:
                    r["n_unparsable"] += 1
                    hist[i].append((text.strip()[:200], obs[i]["screenshot"]))
                    continue
                a = parsed.action
                r["actions"].append(a.to_dict())
                hist[i].append((action_text(a, spec, ctx) if fmt.can_format(a) else text, obs[i]["screenshot"]))
                o, _, terminated, truncated, info = envs[i].step(a)
                obs[i] = o
                if info.get("invalid"):
                    r["n_invalid"] += 1
                if terminated or truncated:
                    r["done"] = True
        out = []
        for task, env, r in zip(tasks, envs, recs):
            status = task.subgoal_status(env.state)
            done = sum(bool(s) for s in status)
            out.append(
                {
                    **{k: v for k, v in r.items() if k != "done"},
                    "success": bool(task.check(env.state)),
                    "subgoals_done": done,
                    "subgoals_total": len(status),
                    "subgoal_rate": done / len(status) if status else float(bool(task.check(env.state))),
                }
            )
        return out

    @staticmethod
    def tables(records, test_splits, n_boot: int, seed: int):
        """01's cells: step metrics, Table 2 pivot, SFT gain, accuracy by action type."""
        rows = []
        groups = pd.DataFrame(records).groupby(["model", "history", "split"], sort=False)
        for (name, tag, split), df in groups:
            s = summarize_steps(df.to_dict(orient="records"), n_boot=n_boot, seed=seed)
            rows.append({"model": name, "history": tag, "split": split, **s})
        steps = pd.DataFrame(rows)
        table2 = steps.pivot_table(index=["model", "history"], columns="split", values=["TM", "GR", "SR"], sort=False)
        table2 = table2.swaplevel(0, 1, axis=1)[[(s, k) for s in test_splits for k in ("TM", "GR", "SR")]]
        table2.columns = [f"{s} {k}" for s, k in table2.columns]
        table2 = table2.reset_index()
        gain = steps.pivot_table(index=["split", "history"], columns="model", values="SR", sort=False)
        gain["SFT - zero-shot (SR points)"] = gain["SFT"] - gain["zero-shot"]
        gain = gain.reset_index()
        by_type = (
            pd.DataFrame(records)
            .groupby(["model", "gt_type"], sort=True)
            .agg(n=("exact", "size"), type_match=("type_match", "mean"), exact=("exact", "mean"))
            .reset_index()
        )
        by_type[["type_match", "exact"]] *= 100
        return steps, table2, gain, by_type


# ----------------------------------------------------------------------------- scripted policies
def oracle_and_garbage(splits: dict[str, Split], cfg) -> tuple[FunctionPolicy, FunctionPolicy]:
    """An oracle that answers every step with its annotated action (found by the current
    screenshot's path) and a policy that answers nonsense."""
    answer = {}
    for split in splits.values():
        for ep in split.episodes:
            for t, step in enumerate(ep.steps):
                path = f"{str(split.image_root).rstrip('/')}/{step.screenshot}"
                answer[path] = episode_step_prompt(
                    ep, t, prompt_spec(cfg, "1AO"), min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels
                )[2]
    return FunctionPolicy(lambda p: answer[p[1][-1]]), FunctionPolicy(lambda p: "I do not know")


def hand_records() -> list[dict[str, Any]]:
    """Records of two models x two histories x two splits with known rates; SFT gets every
    third step of split b wrong, zero-shot every other step."""
    out = []
    for model in ("zero-shot", "SFT"):
        for tag in ("1AO", "3AO"):
            for split in ("b_split", "a_split"):  # not alphabetical: order of appearance must win
                for i in range(6):
                    wrong = (i % 2 == 0) if model == "zero-shot" else (split == "b_split" and i % 3 == 0)
                    gt_type = ("click", "type", "press")[i % 3]
                    out.append(
                        {
                            "model": model,
                            "history": tag,
                            "split": split,
                            "gt_type": gt_type,
                            "parse_ok": i != 4,
                            "type_match": not wrong or i == 2,
                            "grounding": (not wrong) if gt_type == "click" else None,
                            "exact": not wrong,
                        }
                    )
    return out


# ----------------------------------------------------------------------------- same predictions as before
@pytest.mark.parametrize(
    "batch_size, max_steps, n_history",
    [
        (3, 7, 2),  # batches of 3, 3, 1 (padding inside a batch); a cut inside an episode
        (1, 4, 1),  # no padding at all
        (16, None, 3),  # every step of the split in one or two batches
    ],
)
def test_evaluate_offline_equals_the_replaced_code(tiny_model, minigui12, batch_size, max_steps, n_history) -> None:
    model, processor = tiny_model
    split = load_splits(minigui12)["test_in_domain"]
    spec = PromptSpec(n_history=n_history, history_mode="nAO", use_step_instruction=True)
    kw = dict(protocol="ccpo", image_root=split.image_root, model_name="m", split="test_in_domain")
    new = ev.evaluate_offline(
        HFPolicy(model, processor, max_new_tokens=8, batch_size=batch_size),
        split.episodes,
        spec,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        max_steps=max_steps,
        **kw,
    )
    old = Frozen.evaluate_offline(
        model, processor, split.episodes, spec, max_new_tokens=8, batch_size=batch_size, max_steps=max_steps, **kw
    )
    assert new == old
    assert len(new) == (max_steps or sum(len(ep.steps) for ep in split.episodes))


def test_play_online_equals_the_replaced_code(tiny_model) -> None:
    from guirl.env.tasks import generate_tasks

    model, processor = tiny_model
    tasks = generate_tasks(3, seed=1000, prefix="online")
    spec = PromptSpec(n_history=1, history_mode="nAO")
    new = play_online(
        HFPolicy(model, processor, max_new_tokens=16, batch_size=2),
        tasks,
        spec,
        width=W,
        height=H,
        max_turns=3,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        progress=False,
    )
    old = Frozen.play_online(model, processor, tasks, spec, max_turns=3, max_new_tokens=16, batch_size=2)
    # the fields added since (`stopped`, `trace`) are the only difference
    assert all(len(r["trace"]) == r["turns"] for r in new)
    assert [{k: v for k, v in r.items() if k not in ("stopped", "trace")} for r in new] == old


@pytest.mark.parametrize(
    "order",
    [
        lambda rs: rs,  # the grid's order: model, history, split
        lambda rs: rs[::-1],  # reversed: every first appearance moves
        lambda rs: sorted(rs, key=lambda r: (r["split"], r["history"] == "1AO")),  # split-major, 3AO first
    ],
)
def test_tables_equal_the_replaced_notebook_cells(order) -> None:
    records = order(hand_records())
    splits = ["b_split", "a_split"]
    steps_old, table2_old, gain_old, by_type_old = Frozen.tables(records, splits, n_boot=100, seed=3)
    cfg = tiny_cfg(bootstrap_samples=100)
    cfg.seed = 3
    steps = ev.step_metrics(cfg, records)
    pd.testing.assert_frame_equal(steps, steps_old)
    # the CSV bytes the notebook writes are the same
    for new, old in [
        (ev.table2(steps, splits), table2_old),
        (ev.gain_table(steps, "zero-shot", "SFT"), gain_old),
        (ev.accuracy_by_action_type(records), by_type_old),
    ]:
        assert new.to_csv(index=False) == old.to_csv(index=False)
        pd.testing.assert_frame_equal(new, old, check_names=False, check_column_type=False)


# ----------------------------------------------------------------------------- evaluation grid
def test_evaluation_grid_with_scripted_policies(minigui12: Path) -> None:
    cfg = tiny_cfg(max_test_steps=4)
    splits = {k: v for k, v in load_splits(minigui12).items() if k != "train"}
    oracle, garbage = oracle_and_garbage(splits, cfg)
    built = []

    def build_garbage():
        built.append("garbage")
        return garbage

    records = ev.evaluation_grid(
        cfg, {"oracle": oracle, "garbage": build_garbage}, splits, histories=["1AO", "3A"], progress=False
    )
    assert built == ["garbage"]  # a factory is called once, when its turn comes
    assert len(records) == 2 * len(splits) * 2 * 4
    cells = list(dict.fromkeys((r["model"], r["split"], r["history"]) for r in records))
    assert cells == [(m, s, h) for m in ("oracle", "garbage") for s in splits for h in ("1AO", "3A")]
    assert all(set(r) == set(PREDICTION_FIELDS) for r in records)
    for r in records:
        if r["model"] == "oracle":
            assert r["exact"] and r["type_match"], r["score_reason"]
        else:
            assert not r["parse_ok"] and not r["exact"]
    # the 3A prompts show no history images; the oracle saw one prompt per step and history
    assert all(len(imgs) == 1 for call in oracle.calls[1::2] for _, imgs in call[0])
    assert [len(call[0]) for call in oracle.calls] == [4] * (2 * len(splits))
    steps = ev.step_metrics(cfg, records)
    assert (steps[steps.model == "oracle"][["TM", "GR", "SR"]] == 100.0).all().all()
    assert (steps[steps.model == "garbage"]["n_unparsable"] == 4).all()


def test_evaluation_grid_defaults_to_config_histories_and_checks_protocol(minigui12: Path) -> None:
    cfg = tiny_cfg(max_test_steps=2, histories=["2AO"])
    splits = {"test_in_domain": load_splits(minigui12)["test_in_domain"]}
    records = ev.evaluation_grid(cfg, {"x": FunctionPolicy(lambda p: "")}, splits, progress=False)
    assert {r["history"] for r in records} == {"2AO"} and len(records) == 2
    with pytest.raises(KeyError, match="no_such_protocol"):  # before any policy is built or asked
        ev.evaluate_offline(
            FunctionPolicy(lambda p: pytest.fail("generated")),
            splits["test_in_domain"].episodes,
            PromptSpec(),
            protocol="no_such_protocol",
            image_root=minigui12,
            min_pixels=MIN_PX,
            max_pixels=MAX_PX,
            model_name="x",
            split="test_in_domain",
        )


# ----------------------------------------------------------------------------- tables
def test_step_metrics_rows_follow_order_of_appearance() -> None:
    cfg = tiny_cfg(bootstrap_samples=50)
    steps = ev.step_metrics(cfg, hand_records())
    assert list(zip(steps.model, steps.history, steps.split))[:3] == [
        ("zero-shot", "1AO", "b_split"),
        ("zero-shot", "1AO", "a_split"),
        ("zero-shot", "3AO", "b_split"),
    ]
    row = steps[(steps.model == "SFT") & (steps.split == "b_split")].iloc[0]
    assert (row.n, row.n_unparsable) == (6, 1)
    assert row.SR == pytest.approx(100 * 4 / 6)  # steps 0 and 3 wrong
    assert row.GR == 0.0 and row.TM == pytest.approx(100 * 4 / 6)  # both wrong steps are the split's clicks
    assert 0 <= row.SR_lo <= row.SR <= row.SR_hi <= 100


def test_table2_layout_and_missing_cells() -> None:
    steps = pd.DataFrame(
        [
            {"model": "A", "history": "1AO", "split": "s1", "TM": 50.0, "GR": 40.0, "SR": 30.0},
            {"model": "A", "history": "1AO", "split": "s2", "TM": 60.0, "GR": math.nan, "SR": 20.0},
            {"model": "B", "history": "3AO", "split": "s2", "TM": 70.0, "GR": 10.0, "SR": 5.0},
        ]
    )
    t = ev.table2(steps, ["s1", "s2"])
    assert list(t.columns) == ["model", "history"] + [f"{s} {k}" for s in ("s1", "s2") for k in ("TM", "GR", "SR")]
    assert t.iloc[0].tolist()[:5] == ["A", "1AO", 50.0, 40.0, 30.0]
    assert math.isnan(t.iloc[0]["s2 GR"])  # no coordinate step in the split
    assert all(math.isnan(t.iloc[1][f"s1 {k}"]) for k in ("TM", "GR", "SR"))  # B was not evaluated on s1
    assert t.iloc[1]["s2 SR"] == 5.0


def test_gain_table_columns_and_unknown_model() -> None:
    steps = pd.DataFrame(
        [
            {"model": "base", "history": "1AO", "split": "s", "SR": 10.0},
            {"model": "rl", "history": "1AO", "split": "s", "SR": 25.0},
        ]
    )
    g = ev.gain_table(steps, "base", "rl")
    assert list(g.columns) == ["split", "history", "base", "rl", "rl - base (SR points)"]
    assert g.iloc[0]["rl - base (SR points)"] == 15.0
    with pytest.raises(KeyError, match="'SFT' is not in the step metrics"):
        ev.gain_table(steps, "base", "SFT")


def test_accuracy_by_action_type_and_plot() -> None:
    by_type = ev.accuracy_by_action_type(hand_records())
    assert list(by_type.columns) == ["model", "gt_type", "n", "type_match", "exact"]
    assert list(zip(by_type.model, by_type.gt_type))[:3] == [("SFT", "click"), ("SFT", "press"), ("SFT", "type")]
    sft_click = by_type[(by_type.model == "SFT") & (by_type.gt_type == "click")].iloc[0]
    assert sft_click.n == 8 and sft_click.exact == pytest.approx(50.0)  # split b's clicks (i=0, 3) are wrong
    fig = ev.plot_accuracy_by_action_type(by_type)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["click", "press", "type"]


# ----------------------------------------------------------------------------- online
def expert_policy(cfg) -> FunctionPolicy:
    """Plays every online task with the scripted expert's actions (looked up by instruction)."""
    from guirl.env.tasks import generate_tasks

    fmt = get_format(cfg.sft.output_format)
    ctx = format_context((cfg.data.width, cfg.data.height), cfg.model.min_pixels, cfg.model.max_pixels)
    plan: dict[str, list[str]] = {}
    for k in range(4):
        for task in generate_tasks(cfg.eval.n_tasks, seed=cfg.seed + ev.ONLINE_TASK_SEED_OFFSET + k, prefix="online"):
            plan[task.instruction] = [fmt.format(s.action, ctx) for s in solve(task, seed=0, render=False).steps]

    def answer(prompt) -> str:
        user = prompt[0][1]["content"]
        instruction = user[0]["text"].removeprefix("Task: ").rstrip("\n")
        labels = [c["text"] for c in user if c["type"] == "text" and c["text"].startswith("Step ")]
        done = int(labels[-1].removeprefix("Step ").rstrip(": ")) if labels else 0  # turns taken so far
        return plan[instruction][done]

    return FunctionPolicy(answer)


def test_evaluate_online_expert_over_runs() -> None:
    # 5 actions of history: turns are counted; the older reading: a new task set per run, greedy
    cfg = tiny_cfg(
        n_tasks=3,
        max_turns=12,
        n_seeds=2,
        histories=["5AO"],
        online_same_tasks=False,
        **{"online_sampling.do_sample": False},
    )
    pol = expert_policy(cfg)
    res = ev.evaluate_online(cfg, pol, progress=False)
    assert res.history == "5AO" and len(res.runs) == 2
    assert res.summary == {
        "task_sr": 100.0,
        "task_sr_std": 0.0,
        "subgoal_sr": 100.0,
        "subgoal_sr_std": 0.0,
        "n_runs": 2,
    }
    ids = [[r["task_id"] for r in run] for run in res.runs]
    assert ids[0] != ids[1]  # a new task set per run
    assert [e["run"] for e in res.episodes] == [0, 0, 0, 1, 1, 1]
    assert all(set(e) == {"run", *ev.ONLINE_EPISODE_COLUMNS} for e in res.episodes)
    assert all(set(r) == set(ONLINE_FIELDS) for run in res.runs for r in run)
    # the episode rows keep the actions played, one per parsed turn, ending with the expert's terminate
    assert all(len(e["actions"]) == e["turns"] - e["n_unparsable"] for e in res.episodes)
    assert all(e["actions"][-1]["type"] == "terminate" for e in res.episodes)
    assert all(o["seed"] is None and not o["do_sample"] for _, o in pol.calls)  # greedy as configured
    table = ev.online_table({"expert": res})
    assert table.iloc[0]["model"] == "expert" and table.iloc[0]["history"] == "5AO"
    assert table.iloc[0]["task_sr"] == 100.0


def test_evaluate_online_same_tasks_with_sampling() -> None:
    cfg = tiny_cfg(n_tasks=2, max_turns=2)
    pol = FunctionPolicy(lambda p: "nonsense")
    res = ev.evaluate_online(
        cfg, pol, n_runs=3, same_tasks=True, sampling=Sampling(do_sample=True, temperature=0.5), progress=False
    )
    ids = [[r["task_id"] for r in run] for run in res.runs]
    assert ids[0] == ids[1] == ids[2]  # the same tasks in every run
    assert res.summary["task_sr"] == 0.0 and res.summary["n_runs"] == 3
    seeds = [o["seed"] for _, o in pol.calls]
    # run k, turn t: derive_seed(derive_seed(cfg.seed, k), t); two turns per run
    assert seeds == [derive_seed(derive_seed(cfg.seed, k), t) for k in range(3) for t in range(2)]
    assert all(o["temperature"] == 0.5 and o["do_sample"] for _, o in pol.calls)


@pytest.mark.parametrize(
    "overrides, same, sampled, temperature",
    [
        ({}, True, True, 1.0),  # AndroidLong's protocol by default: same tasks, sampled
        ({"online_sampling.temperature": 0.3}, True, True, 0.3),  # the temperature comes from the config
        ({"online_same_tasks": False, "online_sampling.do_sample": False}, False, False, None),  # older reading
    ],
)
def test_evaluate_online_protocol_comes_from_the_config(overrides, same, sampled, temperature) -> None:
    cfg = tiny_cfg(n_tasks=2, max_turns=1, n_seeds=3, **overrides)
    pol = FunctionPolicy(lambda p: "nonsense")
    res = ev.evaluate_online(cfg, pol, progress=False)
    ids = [tuple(r["task_id"] for r in run) for run in res.runs]
    assert (len(set(ids)) == 1) is same and len(ids) == 3
    assert all(o["do_sample"] is sampled for _, o in pol.calls)
    if sampled:
        assert all(o["temperature"] == temperature for _, o in pol.calls)
        assert [o["seed"] for _, o in pol.calls] == [derive_seed(derive_seed(cfg.seed, k), 0) for k in range(3)]


def test_evaluate_online_matches_summarize_online() -> None:
    cfg = tiny_cfg(n_tasks=2, max_turns=2, n_seeds=2)
    res = ev.evaluate_online(cfg, FunctionPolicy(lambda p: "x"), progress=False)
    assert res.summary == summarize_online(res.runs)


# ----------------------------------------------------------------------------- policies from the config
def test_eval_policy_from_folder_and_stage_result(tiny_checkpoint: Path, minigui12: Path, one_thread) -> None:
    cfg = tiny_cfg(max_new_tokens=5, batch_size=3)
    a = ev.eval_policy(cfg, tiny_checkpoint)
    b = ev.eval_policy(cfg, {"adapter": False, "final": str(tiny_checkpoint), "base_model": "unused"})
    assert isinstance(a, HFPolicy) and (a.max_new_tokens, a.batch_size) == (5, 3)
    assert not a.model.training
    split = load_splits(minigui12)["test_in_domain"]
    prompts = [
        episode_step_prompt(
            ep, 0, PromptSpec(), min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=str(split.image_root)
        )[:2]
        for ep in split.episodes[:2]
    ]
    assert a.complete(prompts) == b.complete(prompts)  # same weights either way
    with pytest.raises(KeyError, match="'final'"):
        ev.eval_policy(cfg, {"adapter": False})


def test_evaluation_grid_labels_and_grouping(minigui12: Path) -> None:
    """Labels (e.g. a training seed) go into every record and can split the step metrics."""
    cfg = tiny_cfg(max_test_steps=3, histories=["1AO"])
    splits = {"test_in_domain": load_splits(minigui12)["test_in_domain"]}
    records = []
    for seed in (0, 1):
        records += ev.evaluation_grid(
            cfg, {"x": FunctionPolicy(lambda p: "")}, splits, labels={"train_seed": seed}, progress=False
        )
    assert [r["train_seed"] for r in records] == [0, 0, 0, 1, 1, 1]
    steps = ev.step_metrics(cfg, records, by=("model", "train_seed", "split"))
    assert list(steps.columns[:3]) == ["model", "train_seed", "split"] and list(steps.n) == [3, 3]
    with pytest.raises(ValueError, match="overwrite prediction fields"):
        ev.evaluation_grid(cfg, {"x": FunctionPolicy(lambda p: "")}, splits, labels={"exact": 1}, progress=False)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({}, ["3 runs of the same 2 tasks", "sampled at temperature 1"]),  # AndroidLong's protocol
        ({"online_same_tasks": False, "online_sampling.do_sample": False}, ["2 new tasks each", "(greedy)"]),  # older
    ],
)
def test_online_caption_says_what_the_std_is_over(overrides, words) -> None:
    caption = ev.online_caption(tiny_cfg(n_tasks=2, n_seeds=3, **overrides))
    assert all(w in caption for w in words), caption


# ----------------------------------------------------------------------------- paired gains, paper table
def gain_rec(model: str, step: int, exact: bool, split: str = "test_in_domain", counted: bool = True) -> dict:
    return {
        "model": model,
        "split": split,
        "history": "1AO",
        "episode_id": f"e{step // 5}",
        "step_id": step % 5,
        "exact": exact,
        "counted": counted,
    }


def test_paired_gain_table_marks_a_clear_gain_resolved_and_a_tie_not() -> None:
    cfg = tiny_cfg()
    recs = [gain_rec("zero-shot", i, False) for i in range(100)]
    recs += [gain_rec("SFT", i, i % 2 == 0) for i in range(100)]  # SFT right on half the steps
    recs += [gain_rec("zero-shot", i, i % 2 == 0, split="test_unseen_app") for i in range(40)]
    recs += [gain_rec("SFT", i, i % 2 == 0, split="test_unseen_app") for i in range(40)]  # a tie
    t = ev.paired_gain_table(cfg, recs, baseline="zero-shot", model="SFT")
    assert t["split"].tolist() == ["test_in_domain", "test_unseen_app"]
    gain, tie = t.iloc[0], t.iloc[1]
    assert gain["diff"] == pytest.approx(50.0) and gain["lo"] > 0 and bool(gain["resolved"])
    assert gain["verdict"] == "B > A" and gain["n_steps"] == 100 and gain["n_seeds"] == 1
    assert tie["diff"] == 0.0 and not bool(tie["resolved"]) and tie["verdict"] == "unresolved"
    assert (gain["zero-shot"], gain["SFT"]) == (0.0, 50.0)


def test_paired_gain_table_uses_counted_steps_and_refuses_unpaired_records() -> None:
    cfg = tiny_cfg()
    recs = [gain_rec("zero-shot", i, False) for i in range(10)] + [gain_rec("SFT", i, True) for i in range(10)]
    recs += [gain_rec("zero-shot", 10, True, counted=False), gain_rec("SFT", 10, False, counted=False)]  # left out
    t = ev.paired_gain_table(cfg, recs, baseline="zero-shot", model="SFT")
    assert t.iloc[0]["n_steps"] == 10 and t.iloc[0]["diff"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="not scored on the same seeds and steps"):
        ev.paired_gain_table(cfg, recs[:-3], baseline="zero-shot", model="SFT")  # SFT lacks step 9
    with pytest.raises(KeyError, match="'RL' has no records"):
        ev.paired_gain_table(cfg, recs, baseline="zero-shot", model="RL")


def test_table2_for_paper_feeds_the_paper_comparison() -> None:
    from guirl.papers import paper_results
    from guirl.report import paper_comparison

    steps = pd.DataFrame(
        [
            {"model": "zero-shot", "split": "test_in_domain", "history": "1AO", "TM": 10.0, "GR": 5.0, "SR": 2.0},
            {"model": "SFT", "split": "test_in_domain", "history": "1AO", "TM": 80.0, "GR": 30.0, "SR": 45.0},
        ]
    )
    rows = {"zero-shot": "Qwen2.5VL-3B 0-shot", "SFT": "Qwen2.5VL-3B w/ SFT"}
    ours = ev.table2_for_paper(steps, split="test_in_domain", history="1AO", rows=rows, column_prefix="AC-High")
    paper = paper_results("ccpo")
    paper = paper[(paper["table"] == "Table 2") & paper["row"].isin(list(rows.values()))]
    cmp = paper_comparison(ours, paper)
    sr = cmp[(cmp["row"] == "Qwen2.5VL-3B w/ SFT") & (cmp["column"] == "AC-High SR")].iloc[0]
    assert sr["ours"] == 45.0 and sr["difference"] == pytest.approx(45.0 - float(sr["paper"]))
    assert cmp[cmp["column"].str.startswith("GUI-Odyssey")]["ours"].isna().all()  # no GUI-Odyssey numbers of ours
    with pytest.raises(KeyError, match="no single row"):
        ev.table2_for_paper(steps, split="test_unseen_app", history="1AO", rows=rows, column_prefix="AC-High")


def test_online_for_paper_fills_androidlong_table6() -> None:
    from guirl.papers import paper_results
    from guirl.report import paper_comparison

    summary = {"task_sr": 12.5, "task_sr_std": 2.0, "subgoal_sr": 40.0, "subgoal_sr_std": 1.0, "n_runs": 3}
    paper = paper_results("androidlong")
    cmp = paper_comparison(ev.online_for_paper(summary, "SFT (no memory)"), paper[paper["table"] == "Table 6"])
    sft = cmp[cmp["row"] == "SFT (no memory)"].set_index("column")
    assert sft.loc["Task SR", "ours"] == 12.5 and sft.loc["Task SR", "difference"] == pytest.approx(12.5 - 10.1)
    assert sft.loc["Task SR std", "ours"] == 2.0 and cmp["ours"].notna().sum() == 2
    with pytest.raises(ValueError, match="no paper row"):
        paper_comparison(ev.online_for_paper(summary, "SFT"), paper[paper["table"] == "Table 6"])  # a typo


def test_paired_gain_table_compares_only_the_cells_both_models_have() -> None:
    cfg = tiny_cfg()
    recs = [gain_rec("zero-shot", i, False) for i in range(20)]  # zero-shot at 1AO only
    recs += [gain_rec("SFT", i, True) for i in range(20)]
    recs += [{**gain_rec("SFT", i, True), "history": "3AO"} for i in range(20)]  # SFT also at 3AO
    t = ev.paired_gain_table(cfg, recs, baseline="zero-shot", model="SFT")
    assert t["history"].tolist() == ["1AO"] and t.iloc[0]["diff"] == pytest.approx(100.0)
    only_3ao = [r for r in recs if r["model"] == "zero-shot"] + [r for r in recs if r["history"] == "3AO"]
    with pytest.raises(ValueError, match="share no"):
        ev.paired_gain_table(cfg, only_3ao, baseline="zero-shot", model="SFT")


def test_table2_for_paper_renames_metrics_for_agentcpm_tables() -> None:
    steps = pd.DataFrame(
        [{"model": "SFT (Low)", "split": "test_in_domain", "history": "1AO", "TM": 90.0, "GR": 50.0, "SR": 70.0}]
    )
    ours = ev.table2_for_paper(
        steps,
        split="test_in_domain",
        history="1AO",
        rows={"SFT (Low)": "AgentCPM-GUI-SFT"},
        column_prefix="AC-Low",
        metrics={"TM": "TM", "SR": "EM"},
    )
    assert ours.to_dict(orient="records") == [
        {"row": "AgentCPM-GUI-SFT", "column": "AC-Low TM", "ours": 90.0},
        {"row": "AgentCPM-GUI-SFT", "column": "AC-Low EM", "ours": 70.0},
    ]


def online_result(success: dict[str, list[bool]], category: dict[str, str]) -> ev.OnlineEvaluation:
    """An online result with ``success[task][run]`` outcomes (subgoal rate = success)."""
    out = ev.OnlineEvaluation(history="1AO")
    n_runs = len(next(iter(success.values())))
    for k in range(n_runs):
        out.episodes += [
            {
                "run": k,
                "task_id": t,
                "category": category[t],
                "success": runs[k],
                "subgoal_rate": float(runs[k]),
                "turns": 3,
                "n_unparsable": 0,
                "n_invalid": 0,
            }
            for t, runs in success.items()
        ]
    return out


@pytest.mark.parametrize(
    ("solved", "resolved"),
    [
        (0, False),  # no task ever solved: Task SR 0, interval [0, 0], not above zero
        (1, False),  # one task of 12 solved in every run: the task resample often drops it, so lo = 0
        (8, True),  # 8 of 12 tasks solved in every run: clearly above zero
    ],
)
def test_online_by_category_interval_over_runs_and_tasks(solved: int, resolved: bool) -> None:
    cfg = tiny_cfg()
    tasks = [f"t{i}" for i in range(12)]
    success = {t: [i < solved] * 3 for i, t in enumerate(tasks)}
    category = {t: "information_query" if i % 2 else "compound" for i, t in enumerate(tasks)}
    table = ev.online_by_category(cfg, online_result(success, category), "SFT (High)")
    assert table["category"].tolist() == ["compound", "information_query", "(all)"]
    every = table.iloc[-1]
    assert every["n_tasks"] == 12 and every["n_runs"] == 3 and every["task_sr"] == pytest.approx(100 * solved / 12)
    assert every["task_sr_std"] == 0.0  # the same outcome in every run
    assert bool(every["resolved"]) == resolved and every["lo"] <= every["task_sr"] <= every["hi"]
    assert table["n_tasks"].iloc[:-1].sum() == 12
    summary = summarize_online(
        [[e for e in online_result(success, category).episodes if e["run"] == k] for k in range(3)]
    )
    assert every["task_sr"] == pytest.approx(summary["task_sr"])  # the same tasks in every run: the same mean


def test_online_by_category_std_over_runs_and_unpaired_runs() -> None:
    cfg = tiny_cfg()
    success = {"a": [True, False], "b": [True, False]}  # run 0 solves both, run 1 none
    table = ev.online_by_category(cfg, online_result(success, {"a": "compound", "b": "compound"}), "m")
    assert table.iloc[0]["task_sr"] == 50.0 and table.iloc[0]["task_sr_std"] == 50.0
    other = online_result(success, {"a": "compound", "b": "compound"})
    other.episodes[-1] = {**other.episodes[-1], "task_id": "c"}  # run 1 played another task
    with pytest.raises(ValueError, match="has no record for step"):
        ev.online_by_category(cfg, other, "m")
    with pytest.raises(ValueError, match="no online episodes"):
        ev.online_by_category(cfg, ev.OnlineEvaluation(history="1AO"), "m")


def test_online_by_category_says_what_the_tasks_allow() -> None:
    cfg = tiny_cfg()  # eval.max_turns = 3
    success = {"a": [False, False], "b": [False, False], "c": [True, True]}
    category = {"a": "compound", "b": "compound", "c": "information_query"}
    facts = {  # b needs more steps than the turn limit; half of a's subgoals hold on its first screen; c answers
        "a": {"expert_steps": 2, "subgoal_rate_at_reset": 0.5, "needs_text": 0.0},
        "b": {"expert_steps": 7, "subgoal_rate_at_reset": 0.0, "needs_text": 0.0},
        "c": {"expert_steps": 3, "subgoal_rate_at_reset": 0.0, "needs_text": 1.0},
    }
    table = ev.online_by_category(cfg, online_result(success, category), "m", task_facts=facts)
    rows = {r["category"]: r for r in table.to_dict("records")}
    assert (rows["compound"]["expert_steps"], rows["compound"]["n_within_turns"]) == (4.5, 1)
    assert rows["compound"]["subgoal_sr_at_reset"] == 25.0 and rows["information_query"]["subgoal_sr_at_reset"] == 0.0
    assert (rows["information_query"]["expert_steps"], rows["information_query"]["n_within_turns"]) == (3.0, 1)
    assert rows["(all)"]["n_within_turns"] == 2 and rows["(all)"]["expert_steps"] == pytest.approx(4.0)
    assert [rows[c]["n_text_free"] for c in ("compound", "information_query", "(all)")] == [2, 0, 2]
    # a row's claim (guirl.conclusions) is named by model and category only, not by the counts beside them
    from guirl.conclusions import _key

    assert json.loads(_key(rows["compound"])) == {"model": "m", "category": "compound"}
    assert "expert_steps" not in ev.online_by_category(cfg, online_result(success, category), "m").columns
    with pytest.raises(ValueError, match="no entry for task 'c'"):
        ev.online_by_category(cfg, online_result(success, category), "m", task_facts={k: facts[k] for k in "ab"})
    stale = {**facts, "b": {"expert_steps": 7, "subgoal_rate_at_reset": 0.0}}  # facts written before needs_text
    with pytest.raises(ValueError, match=r"task_facts\['b'\] has no \['needs_text'\]"):
        ev.online_by_category(cfg, online_result(success, category), "m", task_facts=stale)


@pytest.mark.parametrize(
    ("template", "needs_text"),
    [
        ("settings.toggle", 0.0),  # open Settings, flip a switch: clicks only
        ("contacts.delete", 0.0),  # open the contact, delete it: clicks only
        ("notes.toggle", 0.0),  # tick a note done: clicks only
        ("contacts.add", 1.0),  # the name and the phone number are typed
        ("notes.rename", 1.0),  # the new title is typed
        ("contacts.query_phone", 1.0),  # the number is read off the screen and answered
        ("loop.notes_done", 0.0),  # a long loop of ticks: clicks only
        ("cross.share_phone", 1.0),  # the number is copied into a message
    ],
)
def test_task_facts_say_whether_the_expert_writes_text(template: str, needs_text: float) -> None:
    from guirl.env.tasks import generate_tasks

    task = generate_tasks(1, seed=3, template_ids=[template])[0]
    facts = ev.task_facts(task, width=280, height=504)
    assert facts["needs_text"] == needs_text and facts["expert_steps"] >= 2


def test_task_sets_of_one_run_share_no_task_id_and_keep_their_categories() -> None:
    from guirl.env.tasks import CATEGORIES

    cfg = tiny_cfg(n_tasks=6, n_seeds=1)
    every = ev.online_tasks(cfg, 0)
    loops = ev.online_tasks(cfg, 0, categories=["long_loop"])
    rest = ev.online_tasks(cfg, 0, categories=[c for c in CATEGORIES if c != "long_loop"])
    assert {t.category for t in loops} == {"long_loop"} and "long_loop" not in {t.category for t in rest}
    ids = [{t.task_id for t in ts} for ts in (every, loops, rest)]
    assert all(len(i) == 6 for i in ids) and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert all(t.task_id.startswith("online-long_loop-") for t in loops)
    assert [t.task_id for t in every] == [t.task_id for t in ev.online_tasks(cfg, 0)]  # every category: as before
    assert ev.online_prefix() == "online" and ev.online_prefix(["a", "b"]) == "online-a+b"


def test_online_task_facts_cover_every_online_task() -> None:
    cfg = tiny_cfg(n_tasks=12, n_seeds=2)
    facts = ev.online_task_facts(cfg)
    tasks = {t.task_id for k in range(2) for t in ev.online_tasks(cfg, k, same_tasks=True)}
    assert set(facts) == tasks and len(tasks) == 12  # the same tasks in every run
    assert all(f["expert_steps"] >= 1 and 0.0 <= f["subgoal_rate_at_reset"] < 1.0 for f in facts.values())
    assert {f["needs_text"] for f in facts.values()} == {0.0, 1.0}  # 12 tasks over 6 categories: some of each
    # doing nothing = the Subgoal SR play_online reports for an agent whose every output is unparsable
    from guirl.rollout import FunctionPolicy

    idle = ev.evaluate_online(cfg, FunctionPolicy(lambda prompt: "no action"), n_runs=1, progress=False)
    assert {e["task_id"]: e["subgoal_rate"] for e in idle.episodes} == {
        t: f["subgoal_rate_at_reset"] for t, f in facts.items()
    }
    other = tiny_cfg(n_tasks=6, n_seeds=2, online_same_tasks=False)
    assert len(ev.online_task_facts(other)) == 12  # a new task set per run


def test_an_agent_is_evaluated_like_its_policy(minigui) -> None:
    # one policy as an agent (guirl.rollout.PolicyAgent) gives the very records of the policy itself
    from guirl.data.splits import load_splits
    from guirl.rollout import FunctionPolicy, PolicyAgent

    split = load_splits(minigui)["train"]
    spec = PromptSpec(n_history=2, history_mode="nAO", system_prompt="ccpo_short")
    kw = dict(
        protocol="ccpo",
        image_root=split.image_root,
        min_pixels=3136,
        max_pixels=141120,
        model_name="m",
        split="s",
        max_steps=10,
    )

    def policy():
        return FunctionPolicy(lambda p: json.dumps({"action": "click", "coordinate": [10 * len(p[1]), 100]}))

    plain = ev.evaluate_offline(policy(), split.episodes, spec, **kw)
    agent = ev.evaluate_offline(
        PolicyAgent(policy(), spec, min_pixels=3136, max_pixels=141120), split.episodes, spec, **kw
    )
    assert plain == agent and len(plain) == 10
    with pytest.raises(ValueError, match="an agent builds its own prompts"):
        ev.evaluate_offline(
            PolicyAgent(policy(), spec, min_pixels=3136, max_pixels=141120),
            split.episodes,
            spec,
            history_builder=lambda r, t: [],
            **kw,
        )
