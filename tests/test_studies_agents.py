"""Tests for guirl.studies.shared.agents: notebook 01's agents (main agent, Low-level executor with
its own recipe from ``sft.executor``), their stages, and what 01 trained read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import stage_of
from guirl.config import ConfigError, load_config
from guirl.studies.shared.agents import agent_stages, sft_agents, upstream_agents, zero_shot_source
from guirl.train.launch import SFT_ENTRY, stage_fingerprint

#: the tiny profile's recipe before the cosine High agent: both agents 280 steps at a constant lr
OLD_TINY = [
    "sft.max_steps=280",
    "sft.learning_rate=3e-3",
    "sft.lr_scheduler_type=constant_with_warmup",
    "grounding.max_steps=100",
    "sft.executor=null",  # clear the tiny executor recipe, then train one with the main agent's recipe
    "sft.executor={}",
]


def recipe(cfg) -> tuple:
    """An SFT agent's (steps, batch, schedule, peak lr)."""
    return (cfg.sft.max_steps, cfg.sft.per_device_batch_size, cfg.sft.lr_scheduler_type, cfg.sft.learning_rate)


@pytest.mark.parametrize(
    ("overrides", "agents"),
    [
        # tiny: the goal-only main agent in 01_sft/sft and the Low executor in 01_sft/sft_low
        ([], [("SFT (High)", "High", "sft", False), ("SFT (Low)", "Low", "sft_low", True)]),
        # no executor: the main agent only
        (["sft.executor=null"], [("SFT (High)", "High", "sft", False)]),
        # a Low main agent keeps the main folder
        (["sft.executor=null", "sft.use_step_instruction=true"], [("SFT (Low)", "Low", "sft", True)]),
    ],
)
def test_sft_agents(overrides: list[str], agents: list[tuple]) -> None:
    cfg = load_config("tiny", overrides=overrides)
    got = sft_agents(cfg)
    assert [(a.name, a.level, a.stage_dir, a.cfg.sft.use_step_instruction) for a in got] == agents
    # the main agent trains with the run config on the first history setting (one model per setting)
    first = cfg.replace({"sft.histories": cfg.sft.histories[:1], "sft.history_recipes": None})
    assert got[0].cfg == first and got[0].history == cfg.sft.histories[0]
    for a in got[1:]:  # an executor's config differs in the instruction level and its own recipe only
        diff = {k for k, v in a.cfg.to_flat().items() if first.to_flat().get(k, "absent") != v}
        own = {f"sft.{k}" for k, v in cfg.sft.executor.model_dump().items() if v is not None}
        assert diff == {"sft.use_step_instruction", "sft.executor"} | own


def test_one_sft_model_per_history_setting() -> None:
    from guirl.studies.shared.agents import evaluated_histories, history_agents

    cfg = load_config("tiny")  # sft.histories [1AO, 3AO], the 3AO model 120 steps (sft.history_recipes)
    main, low = sft_agents(cfg)
    (h3,) = history_agents(cfg)
    assert (h3.name, h3.stage_dir, h3.history, h3.cfg.sft.histories) == ("SFT (High, 3AO)", "sft_3AO", "3AO", ["3AO"])
    assert recipe(h3.cfg) == (120, 8, "cosine", 3e-3) and recipe(main.cfg)[0] == 560  # its own length only
    assert h3.cfg.sft.use_step_instruction is False and h3.cfg.sft.history_recipes is None
    assert [evaluated_histories(cfg, a) for a in (main, low, h3)] == [["1AO"], ["1AO"], ["3AO"]]
    # paper profiles: both settings of sft.histories, each its own model from the base
    paper = load_config("paper-3b")
    assert [(a.stage_dir, a.cfg.sft.histories) for a in sft_agents(paper) + history_agents(paper)] == [
        ("sft", ["1AO"]),
        ("sft_3AO", ["3AO"]),
    ]
    # an evaluated setting no model trains on is scored with the first setting's model
    one = load_config("tiny", overrides=["sft.histories=[1AO]", "sft.history_recipes=null"])
    assert history_agents(one) == [] and evaluated_histories(one, sft_agents(one)[0]) == ["1AO", "3AO"]
    # the option: one model on every setting's records (the main folder), scored at every setting
    mixed = load_config("tiny", overrides=["sft.mix_histories=true", "sft.history_recipes=null"])
    (m, _) = sft_agents(mixed)
    assert history_agents(mixed) == [] and m.cfg.sft.histories == ["1AO", "3AO"] and m.history is None
    assert evaluated_histories(mixed, m) == ["1AO", "3AO"]
    with pytest.raises(ConfigError, match="history_recipes: .'5AO'. not in histories"):
        load_config("tiny", overrides=["sft.history_recipes={5AO: {max_steps: 3}}"])


def test_sft_result_is_the_model_of_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guirl.studies.shared.agents import sft_result

    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    cfg = load_config("tiny")
    for folder in ("sft", "sft_3AO"):
        (tmp_path / "tiny" / "01_sft" / folder).mkdir(parents=True)
        (tmp_path / "tiny" / "01_sft" / folder / "result.json").write_text(json.dumps({"final": folder}))
    assert [sft_result(cfg, h)["final"] for h in ("1AO", "3AO")] == ["sft", "sft_3AO"]
    with pytest.raises(ValueError, match=r"no SFT model of 2AO: .* add 2AO to sft.histories"):
        sft_result(cfg, "2AO")


@pytest.mark.parametrize(
    ("overrides", "main", "executor"),
    [
        # nothing set: the executor trains with the main agent's steps, batch, schedule and lr
        (["sft.max_steps=280"], (280, 8, "constant_with_warmup", 3e-3), (280, 8, "constant_with_warmup", 3e-3)),
        # set: only the executor's step count changes
        (
            ["sft.max_steps=280", "sft.executor.max_steps=120"],
            (280, 8, "constant_with_warmup", 3e-3),
            (120, 8, "constant_with_warmup", 3e-3),
        ),
        # longer than the main agent is allowed too
        (
            ["sft.max_steps=50", "sft.executor.max_steps=70"],
            (50, 8, "constant_with_warmup", 3e-3),
            (70, 8, "constant_with_warmup", 3e-3),
        ),
        # its own batch and schedule: a main agent at batch 4 with a cosine decay, the executor as before
        (
            [
                "sft.max_steps=560",
                "sft.per_device_batch_size=4",
                "sft.lr_scheduler_type=cosine",
                "sft.executor.max_steps=280",
                "sft.executor.per_device_batch_size=8",
                "sft.executor.lr_scheduler_type=constant_with_warmup",
            ],
            (560, 4, "cosine", 3e-3),
            (280, 8, "constant_with_warmup", 3e-3),
        ),
        # its own peak lr only: everything else is the main agent's
        (
            ["sft.executor.learning_rate=1.5e-3"],
            (280, 8, "constant_with_warmup", 3e-3),
            (280, 8, "constant_with_warmup", 1.5e-3),
        ),
    ],
)
def test_executor_recipe(overrides: list[str], main: tuple, executor: tuple) -> None:
    agents = sft_agents(load_config("tiny", overrides=[*OLD_TINY, *overrides]))  # batch 8, constant lr
    assert [recipe(a.cfg) for a in agents] == [main, executor]
    assert agents[1].cfg.sft.executor is None  # the executor's own config has no second agent


def test_tiny_profile_recipes() -> None:
    # docs/tiny-agents.md: the High agent 560 steps decaying to 0 from 3e-3, the Low executor 280 from 2e-3,
    # both after 300 grounding steps
    cfg = load_config("tiny")
    assert cfg.grounding.max_steps == 300
    assert [recipe(a.cfg) for a in sft_agents(cfg)] == [(560, 8, "cosine", 3e-3), (280, 8, "cosine", 2e-3)]
    assert cfg.sft.histories == ["1AO", "3AO"] and cfg.sft.history_recipes["3AO"].max_steps == 120


def test_an_executor_on_a_low_main_agent_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sft.executor: the main agent already has the step instruction"):
        load_config("tiny", overrides=["sft.use_step_instruction=true"])


def test_an_executor_config_saves_and_loads_back(tmp_path: Path) -> None:
    executor = sft_agents(load_config("tiny"))[1].cfg
    assert load_config(executor.save(tmp_path / "low.yaml")) == executor  # what run_stage hands the subprocess


def test_paper_profiles_train_one_high_agent() -> None:
    assert [(a.name, a.stage_dir) for a in sft_agents(load_config("paper-3b"))] == [("SFT (High)", "sft")]


def test_agent_stages_with_the_history_models(tmp_path: Path) -> None:
    cfg = load_config("tiny")
    stages = agent_stages(cfg, data_dir=tmp_path, start=tmp_path / "g", run_dir=tmp_path / "run", histories=True)
    # the 3AO model is queued after the two agents: it starts on the core the first one to finish frees
    assert [s.output_dir.name for s in stages] == ["sft", "sft_low", "sft_3AO"]


def test_agent_stages_are_records_of_the_sft_entry(tmp_path: Path) -> None:
    cfg = load_config("tiny")
    stages = agent_stages(cfg, data_dir=tmp_path / "data", start=tmp_path / "g", run_dir=tmp_path / "run")
    assert [(s.name, s.entry, s.output_dir.name, s.base_model) for s in stages] == [
        ("sft", SFT_ENTRY, "sft", tmp_path / "g"),
        ("sft", SFT_ENTRY, "sft_low", tmp_path / "g"),
    ]
    assert [s.cfg for s in stages] == [a.cfg for a in sft_agents(cfg)] and stages[0].data_dir == tmp_path / "data"


def test_an_executor_recipe_that_restates_the_old_one_keeps_its_trained_stage(tmp_path: Path) -> None:
    def fingerprints(overrides: list[str]) -> list[str]:
        # the values as a profile states them (Config.replace): an override would also reach the papers' own SFT
        # values (ces.warmup.max_steps, ...), which ride along in every stage's config
        from guirl.config import parse_override

        cfg = load_config("tiny")
        for item in overrides:
            cfg = cfg.replace(dict([parse_override(item)]))
        return [
            stage_fingerprint(
                stage_of(a.cfg, "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "o", entry="e")
            )["config_sha256"]
            for a in sft_agents(cfg)
        ]

    before = fingerprints(OLD_TINY)
    # the main agent 560 steps with a decay, the executor pinned to the constant-lr recipe both agents had before
    after = fingerprints(
        [
            "sft.executor.lr_scheduler_type=constant_with_warmup",
            "sft.executor.learning_rate=null",
            "grounding.max_steps=100",
        ]
    )
    assert after[1] == before[1]  # the executor's finished stage is reused
    assert after[0] != before[0]  # the main agent trains again
    assert fingerprints([])[1] != before[1]  # the tiny profile now: the executor decays to 0 too, so it trains again
    # its own lr alone is a new executor (and only that: the main agent keeps its stage)
    lower = fingerprints(["sft.executor.learning_rate=1e-3"])
    assert lower[1] != fingerprints([])[1] and lower[0] == fingerprints([])[0]


def test_upstream_agents_and_zero_shot_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUIRL_RUNS", str(tmp_path))
    cfg = load_config("tiny")
    for folder in ("grounding", "sft"):
        path = tmp_path / "tiny" / "01_sft" / folder / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"final": f"{folder[0]}/final", "base_model": "base"}))
    with pytest.raises(FileNotFoundError, match="sft_low/result.json"):
        upstream_agents(cfg)  # the Low executor has not been trained
    low = tmp_path / "tiny" / "01_sft" / "sft_low" / "result.json"
    low.parent.mkdir(parents=True)
    low.write_text(json.dumps({"final": "l/final", "base_model": "base"}))
    stages = upstream_agents(cfg)
    assert list(stages) == ["grounding", "SFT (High)", "SFT (Low)"]
    assert zero_shot_source(stages) == "g/final"  # zero-shot = the grounding model
    assert zero_shot_source({"SFT (High)": {"base_model": "base"}}) == "base"  # paper profiles: the pretrained model


@pytest.mark.parametrize(
    ("grounding", "stages"),
    [
        # default: grounding.enabled (tiny: true) trains grounding first; then the agents and the 3AO model
        (None, ["grounding", "sft", "sft_low", "sft_3AO"]),
        (False, ["sft", "sft_low", "sft_3AO"]),  # the base is a grounding model already (scope sft): agents only
    ],
)
def test_train_agents_grounding_flag(tmp_path: Path, monkeypatch, grounding, stages: list[str]) -> None:
    from guirl.studies.shared import agents as A

    ran: list[tuple[str, str]] = []  # (output folder, base model) of every stage, in order

    def fake_stage(stage, **_):
        ran.append((stage.output_dir.name, str(stage.base_model)))
        return {"final": str(stage.output_dir / "final")}

    monkeypatch.setattr(A, "run_stage", fake_stage)
    monkeypatch.setattr(A, "run_stages", lambda stages, parallel: [fake_stage(s) for s in stages])
    out = A.train_agents(
        load_config("tiny"), data_dir=tmp_path, base_model=Path("B"), run_dir=tmp_path / "r", grounding=grounding
    )
    assert [name for name, _ in ran] == stages
    first_agent = str(tmp_path / "r" / "grounding" / "final") if grounding is None else "B"
    assert ran[-1][1] == ran[-2][1] == ran[-3][1] == first_agent  # all from the grounding model (else the base)
    models = ["SFT (High)", "SFT (Low)", "SFT (High, 3AO)"]
    assert list(out) == (["grounding"] if grounding is None else []) + models
    ran.clear()  # 08's seeds retrain the two agents only
    A.train_agents(
        load_config("tiny"), data_dir=tmp_path, base_model=Path("B"), run_dir=tmp_path / "s", histories=False
    )
    assert [name for name, _ in ran][-2:] == ["sft", "sft_low"]
