"""Notebook 07's study module (``guirl.studies.agentcpm_androidlong``): de-duplication and the
compact JSON data folder on a small MiniGUI build, the grounding benchmark rows, the tables from
hand-made records, and that every key of the ``agentcpm`` and ``androidlong`` sections is read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from guirl.config import ConfigError, load_config
from guirl.data.splits import load_splits
from guirl.methods.agentcpm.config import grounding_updates, rft_updates, sft_updates
from guirl.methods.androidlong.config import variant_updates
from guirl.studies import agentcpm_androidlong as S
from guirl.studies.shared.evaluation import OnlineEvaluation
from guirl.studies.shared.paired import online_paired

EXP = "07_agentcpm_androidlong.tiny"  # 07's own experiment on the tiny profile


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from guirl.env.export import build_minigui_dataset

    out = tmp_path_factory.mktemp("minigui")
    build_minigui_dataset(out, n_tasks=20, seed=0, progress=False)
    return out


@pytest.fixture(scope="module")
def cfg():
    return load_config("tiny", EXP, overlays=["smoke"])


# ----------------------------------------------------------------------------- every section key is read
def leaves(model, prefix=""):
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if hasattr(value, "model_fields"):
            yield from leaves(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def perturbed(value):
    """Other values of a key, in order of preference (the first one the section accepts is used)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [2 * value + 1, value - 1]
    if isinstance(value, float):
        return [value / 2]
    if value is None:
        return [3]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [["1AO"] if value != ["1AO"] else ["2AO"]]
    return [value]


def derived(cfg, data):
    """Everything 07 derives from the two sections."""
    from dataclasses import replace

    from guirl.methods.androidlong.rl import androidlong_rl_hooks
    from guirl.rl.hooks import HookInputs
    from guirl.studies.shared.evaluation import paper_eval_config

    split = load_splits(data)["train"]
    split = replace(split, episodes=split.episodes[:3])
    v = cfg.replace(variant_updates(cfg, memory=cfg.androidlong.memory))
    return {
        "sft": sft_updates(cfg),
        "grounding_stage": grounding_updates(cfg),
        "rft": rft_updates(cfg, n_train_steps=100),
        "reward": cfg.agentcpm.reward_config(),
        "variant": variant_updates(cfg, memory=cfg.androidlong.memory),
        "dedup": S.dedup(cfg, split).threshold,
        "grounding": len(S.grounding_rows(cfg, data)),
        "shuffle": androidlong_rl_hooks(v, HookInputs(data_dir=data)).tasks.shuffle,
        "eval": paper_eval_config(cfg.replace(sft_updates(cfg)), "agentcpm").eval.max_test_steps,
    }


def test_every_agentcpm_and_androidlong_key_is_read(data, monkeypatch):
    # each leaf key of both sections, perturbed, changes something 07 derives from them (a key that
    # nothing reads would change nothing); single-valued keys must appear in what is derived
    base_cfg = load_config("paper-3b", overrides=["agentcpm.grounding_samples=2", "androidlong.rl.max_steps=1"])
    base = derived(base_cfg, data)
    seen_rules = {"mapping_variant"}  # read by S.rescore: test_rescore_reads_the_mapping_variant
    for section in ("agentcpm", "androidlong"):
        for key, info in leaves(getattr(base_cfg, section)):
            if key in seen_rules:
                continue
            value = base_cfg.to_flat().get(f"{section}.{key}")
            args = getattr(info.annotation, "__args__", ())
            if args and all(isinstance(a, str) for a in args):  # a Literal: another allowed value, if any
                others = [a for a in args if a != value]
                if not others:
                    flat = {**base["sft"], **base["rft"], **base["variant"]}
                    assert value in flat.values(), f"{section}.{key}"
                    continue
                candidates = others
            else:
                candidates = perturbed(value)
            c = None
            for new in candidates:
                try:
                    c = base_cfg.replace({f"{section}.{key}": new})
                    break
                except ConfigError:
                    continue
            assert c is not None, f"{section}.{key}: no other value accepted"
            if key == "memory_tokens":
                c = c.replace({"androidlong.memory": True})
                assert derived(c, data) != derived(base_cfg.replace({"androidlong.memory": True}), data), key
                continue
            assert derived(c, data) != base, f"{section}.{key} is read by nothing 07 derives"


def test_rescore_reads_the_mapping_variant(monkeypatch):
    import guirl.methods.agentcpm.data as acpm

    seen = []
    monkeypatch.setattr(acpm, "rescore", lambda rec, step, fmt, **kw: seen.append(kw["variant"]))
    splits = load_splits_stub()
    rec = {"model": "SFT (High)", "split": "s", "episode_id": "e", "step_id": 0, "output": ""}
    for variant in ("paper", "released"):
        c = load_config("tiny", overrides=[f"agentcpm.mapping_variant={variant}"])
        S.rescore(c, [rec], splits, "ccpo")
    assert seen == ["paper", "released"]


def load_splits_stub():
    from guirl.actions.types import Action
    from guirl.data.schema import Episode, Step
    from guirl.data.splits import Split

    st = Step(0, "images/a.png", (280, 504), Action("click", point=(0.5, 0.5)))
    return {"s": Split("s", (Episode("e", "x", (st,), "minigui"),), Path("/x"))}


def public_converted(name: str, tmp_path: Path) -> Path:
    """The public-format copy of data set ``name`` (tests/fixtures/make_fixtures.py, PUBLIC), converted."""
    import importlib.util

    from guirl.data.loaders import convert_dataset

    spec = importlib.util.spec_from_file_location(
        "make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py"
    )
    mf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mf)  # type: ignore[union-attr]
    converted = tmp_path / f"converted_{name}"
    convert_dataset(name, mf.PUBLIC[name](tmp_path / "src"), converted)
    return converted


# ----------------------------------------------------------------------------- data
def test_the_compact_json_data_folder_of_a_converted_data_set_reaches_its_images(tmp_path):
    # a converted data set keeps its screenshots under its own folder (androidcontrol/<episode>/<i>.png),
    # not MiniGUI's images/: the folder links what the screenshots name, and a second write keeps the links
    converted = public_converted("androidcontrol", tmp_path)
    split = load_splits(converted)["train"]
    assert S.screenshot_tops(split.episodes) == ["androidcontrol"]
    for _ in range(2):
        S.write_agentcpm_data(converted, split, [ep.episode_id for ep in split.episodes], tmp_path / "acpm")
    out = load_splits(tmp_path / "acpm")["train"]
    assert out.episodes and all((out.image_root / s.screenshot).is_file() for ep in out.episodes for s in ep.steps)


def test_dedup_and_the_compact_json_data_folder(cfg, data, tmp_path):
    split = load_splits(data)["train"]
    d = S.dedup(cfg, split)
    t = d.table
    assert len(t) == len(split.episodes) and t["kept"].iloc[0]
    assert t.groupby("query")["kept"].any().all()  # every query keeps its first trajectory
    assert t.loc[t["max_similarity"].isna(), "kept"].all()  # nothing to compare with: kept
    sweep = S.dedup_sweep(d, [-0.99, 0.5, 1.0])
    assert sweep["kept"].is_monotonic_increasing and sweep["kept"].iloc[-1] == len(t)  # 1.0 drops nothing
    assert sweep["kept"].iloc[0] == t["query"].nunique()  # -0.99: one per query
    kept = list(t.loc[t["kept"], "episode_id"])
    stats = S.write_agentcpm_data(data, split, kept, tmp_path / "acpm")
    again = S.write_agentcpm_data(data, split, kept, tmp_path / "acpm")  # idempotent
    assert stats == again and stats["kept"] == len(kept)
    out = load_splits(tmp_path / "acpm")["train"]
    assert (
        sum(len(ep.steps) for ep in out.episodes)
        == stats["train_steps"]
        == stats["kept_steps"] - stats["schema_left_out"]
    )
    from guirl.methods.agentcpm.data import schema_error

    assert all(schema_error(s.action) is None for ep in out.episodes for s in ep.steps)
    assert (out.image_root / out.episodes[0].steps[0].screenshot).is_file()  # images through the link


def test_compact_splits(data):
    splits = {k: v for k, v in load_splits(data).items() if k != "train"}
    compact, counts = S.compact_splits(splits)
    assert list(counts["split"]) == list(splits)
    for r in counts.to_dict(orient="records"):
        assert r["counted"] == sum(len(ep.steps) for ep in compact[r["split"]].episodes)
        assert r["counted"] + r["left_out"] == r["steps"]


def test_grounding_rows_replay_the_test_screens(cfg, data):
    rows = S.grounding_rows(cfg, data, 4)
    by = pd.Series([r["type"] for r in rows]).value_counts().to_dict()
    assert by == {k: 4 for k in S.GROUNDING_TASKS}
    for r in rows:
        assert (data / r["image"]).is_file() and r["split"] != "train"
        x1, y1, x2, y2 = r["box"]
        if r["point"] is not None:
            assert x1 <= r["point"][0] <= x2 and y1 <= r["point"][1] <= y2


# ----------------------------------------------------------------------------- tables
def test_table1_layout(cfg):
    recs = [
        {"model": m, "task": t, "correct": c}
        for m, hits in (("A", (1, 1, 0)), ("B", (0, 0, 0)))
        for t, c in zip(S.GROUNDING_TASKS.values(), hits)
        for _ in range(3)
    ]
    t = S.table1(cfg, recs)
    assert list(t["model"]) == ["A", "B"]
    assert t.iloc[0]["Fun2Point"] == 100.0 and t.iloc[0]["Bbox2Text"] == 0.0
    assert math.isclose(t.iloc[0]["Average"], 200 / 3)
    assert (t["Fun2Point_lo"] <= t["Fun2Point"]).all() and (t["Fun2Point"] <= t["Fun2Point_hi"]).all()


def online(rows):
    ev = OnlineEvaluation(history="1AO")
    ev.episodes = [
        {
            "run": run,
            "task_id": t,
            "category": cat,
            "success": s,
            "subgoal_rate": g,
            "turns": 0,
            "stopped": True,
            "trace": [],
            "actions": [],
        }
        for run, t, cat, s, g in rows
    ]
    by_run = {}
    for e in ev.episodes:
        by_run.setdefault(e["run"], []).append(e)
    ev.runs = list(by_run.values())
    from guirl.metrics.summary import summarize_online

    ev.summary = summarize_online(ev.runs)
    return ev


def test_table6_and_its_paired_differences(cfg):
    a = online(
        [(0, "t1", "x", False, 0.5), (0, "t2", "y", False, 0.0), (1, "t1", "x", True, 1.0), (1, "t2", "y", False, 0.5)]
    )
    b = online(
        [(0, "t1", "x", True, 1.0), (0, "t2", "y", True, 1.0), (1, "t1", "x", True, 1.0), (1, "t2", "y", False, 0.5)]
    )
    t6 = S.table6({"A": a, "B": b})
    assert list(t6["Task SR"]) == [25.0, 75.0] and list(t6["Task SR std"]) == [25.0, 25.0]
    assert t6.iloc[0]["Task SR (mean ± std)"] == "25.0 ± 25.0" and list(t6["n_tasks"]) == [2, 2]
    p = online_paired(cfg, {"A": a, "B": b}, [("A", "B")])
    task = p[p["metric"] == "Task SR"].iloc[0]
    assert task["diff"] == 50.0 and task["lo"] <= task["diff"] <= task["hi"]
    assert task["resolved"] == (task["lo"] > 0 or task["hi"] < 0)
    c = online([(0, "t1", "x", True, 1.0), (1, "t1", "x", True, 1.0)])
    with pytest.raises(ValueError, match="same runs and tasks"):
        online_paired(cfg, {"A": a, "C": c}, [("A", "C")])


def test_by_group_per_category(cfg):
    a = online(
        [(0, "t1", "x", False, 0.5), (0, "t2", "y", True, 1.0), (1, "t1", "x", True, 1.0), (1, "t2", "y", True, 1.0)]
    )
    g = S.by_group(cfg, {"A": a}, "category")
    assert list(g["category"]) == ["x", "y"] and list(g["Task SR"]) == [0.5, 1.0]
    assert list(g["Subgoal SR"]) == [0.75, 1.0] and list(g["Task SR std"]) == [0.5, 0.0]


def test_combined_joins_task_sets_run_by_run():
    a = online([(0, "l1", "long_loop", False, 0.5), (1, "l1", "long_loop", True, 1.0)])
    b = online(
        [(0, "o1", "x", True, 1.0), (0, "o2", "y", True, 1.0), (1, "o1", "x", False, 0.0), (1, "o2", "y", True, 1.0)]
    )
    (m,) = S.combined({"M": a}, {"M": b}).values()
    assert [len(r) for r in m.runs] == [3, 3] and len(m.episodes) == 6
    assert m.summary["task_sr"] == 100 * (2 / 3 + 2 / 3) / 2 and m.summary["n_runs"] == 2
    with pytest.raises(ValueError, match="'M' is not in task set 1"):
        S.combined({"M": a}, {"N": b})
    with pytest.raises(ValueError, match="other histories or runs"):
        S.combined({"M": a}, {"M": online([(0, "o1", "x", True, 1.0)])})


def test_table6_task_sets_split_the_categories():
    from guirl.env.tasks import CATEGORIES
    from guirl.methods.androidlong.rl import TASK_CATEGORY

    assert S.TASK_SETS["long_loop"] == (TASK_CATEGORY,) == ("long_loop",)
    assert sorted(S.TASK_SETS["long_loop"] + S.TASK_SETS["other"]) == sorted(CATEGORIES)


def test_by_app_reads_the_apps_of_every_task_set(cfg):
    from guirl.studies.shared.evaluation import online_tasks

    c = cfg.replace({"eval.n_tasks": 3, "eval.n_seeds": 1})
    sets = [S.TASK_SETS["long_loop"], S.TASK_SETS["other"]]
    tasks = [t for cats in sets for t in online_tasks(c, 0, same_tasks=c.eval.online_same_tasks, categories=cats)]
    ev = online([(0, t.task_id, t.category, True, 1.0) for t in tasks])
    g = S.by_group(c, {"A": ev}, "app", task_sets=sets)
    assert set(g["app"]) == {t.apps[0] for t in tasks} and g["n_tasks"].sum() == len(tasks) == 6
    with pytest.raises(ValueError, match="in none of the task sets"):
        S.by_group(c, {"A": ev}, "app", task_sets=sets[:1])


def test_error_table_and_paper_layouts(cfg):
    a = online([(0, "t1", "x", False, 0.5), (0, "t2", "y", True, 1.0)])
    errors = S.error_table({"A": a})
    assert errors.iloc[0]["success"] == 1 and errors.iloc[0]["insufficient_exploration"] == 1
    by_app = pd.DataFrame([{"model": "SFT (no memory)", "app": "contacts", "Subgoal SR": 0.5, "Task SR": 0.25}])
    cells = S.paper_apps(by_app)
    assert set(cells["column"]) == {"Contacts Subgoal SR", "Contacts Task SR"}
    assert set(cells["row"]) == {"AndroidLong (ours) SFT (no memory)"} and set(cells["table"]) == {"Table 9"}


def test_upstream_predictions_name_the_notebook(cfg):
    with pytest.raises(FileNotFoundError, match="make nb-01_sft"):
        S.upstream_predictions(cfg, "01_sft", history="1AO")


def test_stage_lists(cfg, data, tmp_path):
    acpm_data = tmp_path / "acpm"
    split = load_splits(data)["train"]
    S.write_agentcpm_data(data, split, [ep.episode_id for ep in split.episodes], acpm_data)
    sft, rft = S.agentcpm_stages(cfg, data_dir=acpm_data, start=tmp_path / "g", run_dir=tmp_path)
    assert sft.cfg.sft.output_format == "agentcpm" and sft.cfg.sft.max_steps == cfg.agentcpm.sft.max_steps
    assert rft.base_model == sft.output_dir / "final" and rft.cfg.rl.reward == "agentcpm"
    # Stage I on the tiny profile: 01's grounding model, nothing for 07 to train
    one, start = S.stage_one(
        cfg, grounding={"final": str(tmp_path / "g")}, data_dir=data, base_model=tmp_path / "b", run_dir=tmp_path
    )
    assert (one, start) == (None, tmp_path / "g")
    cfgs = S.androidlong_configs(cfg)
    al_sft, al_grpo = S.androidlong_stages(cfgs, data_dir=data, start=tmp_path / "m", run_dir=tmp_path)
    assert [s.cfg.androidlong.memory for s in al_sft] == [False, True]
    assert [s.name for s in al_sft] == ["records", "records"] and all(s.cfg.rl.role == "androidlong" for s in al_grpo)
    recs = [json.loads(line) for line in Path(al_sft[1].inputs["records"]).read_text().splitlines()]
    assert any(r["memory"] for r in recs)  # the long loops of the training split carry a memory


def test_stage_one_without_01s_grounding_model(tmp_path):
    # the paper profiles (no grounding.enabled): Stage I is 07's own grounding stage on the converted
    # data set's rows, from the base model, in the compact JSON format with AgentCPM-GUI's prompt
    from guirl.studies.shared.stages import sft_schedule
    from guirl.train.launch import SFT_ENTRY
    from guirl.train.sft import build_records

    cfg = load_config("paper-3b", overrides=["agentcpm.grounding.max_steps=7"])
    assert not cfg.grounding.enabled
    converted = public_converted("androidcontrol", tmp_path)
    stage, start = S.stage_one(cfg, grounding=None, data_dir=converted, base_model=tmp_path / "base", run_dir=tmp_path)
    assert (stage.name, stage.entry, stage.base_model) == ("grounding", SFT_ENTRY, tmp_path / "base")
    assert stage.output_dir == tmp_path / S.STAGE_ONE and start == stage.output_dir / "final"
    c = stage.cfg
    assert (c.sft.output_format, c.sft.system_prompt) == ("agentcpm", None)  # App. C.2's prompt, as Stage II
    g = cfg.agentcpm.grounding
    assert (c.grounding.max_steps, c.grounding.learning_rate, c.grounding.per_device_batch_size) == (
        7,
        g.learning_rate,
        g.per_device_batch_size,
    )
    recs = build_records(c, "grounding", converted)
    answers = [r["completion"][0]["content"][0]["text"] for r in recs]
    points = [json.loads(a)["POINT"] for a, r in zip(answers, recs) if r["action_type"] == "text_to_point"]
    assert points and all(0 <= v <= 1000 and isinstance(v, int) for p in points for v in p)  # the 0-1000 grid
    (row,) = sft_schedule({S.STAGE_ONE: stage}).to_dict(orient="records")
    assert (row["kind"], row["records"], row["optimizer_steps"]) == ("grounding", len(recs), 7)
    # a data set without UI elements (GUI-Odyssey) has no Stage I data: one line naming the fix
    odyssey = public_converted("guiodyssey", tmp_path)
    with pytest.raises(ValueError, match=r"0 grounding samples .*run 07 on a data set with UI elements"):
        S.stage_one(cfg, grounding=None, data_dir=odyssey, base_model=tmp_path / "base", run_dir=tmp_path)
    manifest = json.loads((odyssey / "manifest.json").read_text())
    del manifest["grounding_samples"]
    (odyssey / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"no grounding_samples count .*convert the data set again"):
        S.stage_one(cfg, grounding=None, data_dir=odyssey, base_model=tmp_path / "base", run_dir=tmp_path)


# ----------------------------------------------------------------------------- paper-profile dry runs (CPU)
# The paper-3b profile with what a CPU box cannot do swapped out (the tiny checkpoint, float32, one
# CPU process without DeepSpeed, no bf16) and the lengths cut to a step; every other value (LoRA,
# Tables 4-5 / App. C.2 / Table 7 through the sections, 3AO histories, the paper prompts) is the
# paper profile's.
CPU = [
    "model.torch_dtype=float32",
    "runtime.device=cpu",
    "runtime.accelerate_config=configs/accelerate/cpu.yaml",
    "runtime.deepspeed_config=null",
    "runtime.num_processes=1",
    "runtime.bf16=false",  # a later layer than Tables 4-5's bf16: AgentCPM-GUI's stages take it too
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from guirl.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models"))


@pytest.mark.slow
def test_agentcpm_paper_profile_dry_run(tiny_model, minigui, tmp_path):
    from guirl.train.launch import run_stage
    from guirl.train.rl import read_log

    cfg = load_config(
        "paper-3b",
        overrides=[
            f"model.path={tiny_model}",
            *CPU,
            "agentcpm.grounding.max_steps=1",
            "agentcpm.sft.max_steps=1",
            "agentcpm.rft.max_steps=1",
            "agentcpm.rft.prompts_per_step=1",  # 8 completions a step: one prompt x Table 5's 8 generations
            "agentcpm.rft.max_new_tokens=24",
        ],
    )
    # Stage I: 07's own grounding stage on a converted data set's UI elements, from the base model
    one, start = S.stage_one(
        cfg,
        grounding=None,
        data_dir=public_converted("androidcontrol", tmp_path),
        base_model=tiny_model,
        run_dir=tmp_path,
    )
    first = run_stage(one, echo=False)
    assert first["global_step"] == 1 and Path(first["final"]) == start
    split = load_splits(minigui)["train"]
    S.write_agentcpm_data(minigui, split, [ep.episode_id for ep in split.episodes], tmp_path / "acpm")
    sft, rft = S.agentcpm_stages(cfg, data_dir=tmp_path / "acpm", start=start, run_dir=tmp_path)
    assert sft.base_model == start  # Stage II starts from Stage I
    assert sft.cfg.sft.histories == ["3AO"] and sft.cfg.sft.system_prompt is None  # Table 4 / App. C.2 prompt
    assert (rft.cfg.rl.group_size, rft.cfg.rl.prompts_per_step, rft.cfg.rl.beta) == (8, 1, 0.04)
    res = run_stage(sft, echo=False)
    assert res["global_step"] == 1 and res["adapter"] is False  # all parameters: AgentCPM-GUI Table 4 names no adapter
    out = run_stage(rft, echo=False)
    log = read_log(out["log"])
    assert out["global_step"] == 1 and log[0]["n_generated"] == 8
    assert -1.0 <= log[0]["reward"] <= 1.0 and "reward/format" in log[0]  # the -1 / 0 / 1 reward


@pytest.mark.slow
def test_androidlong_paper_profile_dry_run(tiny_model, minigui, tmp_path):
    from conftest import stage_of
    from guirl.train.launch import run_stage
    from guirl.train.rl import read_log

    cfg = load_config(
        "paper-3b",
        overrides=[
            f"model.path={tiny_model}",
            *CPU,
            "sft.max_steps=1",
            "androidlong.sft.max_steps=1",
            "androidlong.rl.max_steps=1",
            "androidlong.rl.group_size=2",
            "androidlong.rl.prompts_per_step=1",  # one task x 2 episodes
            "androidlong.rl.max_new_tokens=16",
            "eval.max_turns=2",
        ],
    )
    # 01's main agent on the paper profile is a LoRA adapter: the AndroidLong stages continue it
    agent = run_stage(
        stage_of(cfg, "sft", data_dir=minigui, base_model=tiny_model, output_dir=tmp_path / "01"), echo=False
    )
    assert agent["adapter"] is True
    cfgs = S.androidlong_configs(cfg)
    assert cfgs[True].model.max_pixels == 500_000 and cfgs[True].rl.learning_rate == 1e-6  # Table 7
    sft, grpo = S.androidlong_stages(cfgs, data_dir=minigui, start=Path(agent["final"]), run_dir=tmp_path)
    mem_sft = run_stage(sft[1], echo=False)  # with memory; merges the adapter first
    assert mem_sft["global_step"] == 1 and Path(mem_sft["base_model"]).name == "base_merged"
    out = run_stage(grpo[1], echo=False)
    log = read_log(out["log"])
    assert out["role"] == "androidlong" and out["global_step"] == 1
    assert 0.0 <= log[0]["reward"] <= 1.0 and "reward/subgoal_rate" in log[0]
    assert log[0]["n_generated"] <= 2 * 2  # two episodes of at most two turns
