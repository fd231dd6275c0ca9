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
    assert got[0].cfg is cfg  # the main agent trains with the run config itself
    for a in got[1:]:  # an executor's config differs in the instruction level and its own recipe only
        diff = {k for k, v in a.cfg.to_flat().items() if cfg.to_flat().get(k, "absent") != v}
        own = {f"sft.{k}" for k, v in cfg.sft.executor.model_dump().items() if v is not None}
        assert diff == {"sft.use_step_instruction", "sft.executor"} | own


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


def test_an_executor_on_a_low_main_agent_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sft.executor: the main agent already has the step instruction"):
        load_config("tiny", overrides=["sft.use_step_instruction=true"])


def test_an_executor_config_saves_and_loads_back(tmp_path: Path) -> None:
    executor = sft_agents(load_config("tiny"))[1].cfg
    assert load_config(executor.save(tmp_path / "low.yaml")) == executor  # what run_stage hands the subprocess


def test_paper_profiles_train_one_high_agent() -> None:
    assert [(a.name, a.stage_dir) for a in sft_agents(load_config("paper-3b"))] == [("SFT (High)", "sft")]


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
        return [
            stage_fingerprint(
                stage_of(a.cfg, "sft", data_dir=tmp_path, base_model=tmp_path, output_dir=tmp_path / "o", entry="e")
            )["config_sha256"]
            for a in sft_agents(load_config("tiny", overrides=overrides))
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
        (None, ["grounding", "sft", "sft_low"]),  # default: grounding.enabled (tiny: true) trains grounding first
        (False, ["sft", "sft_low"]),  # the base is a grounding model already (scope sft): agents only
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
    assert ran[-1][1] == ran[-2][1] == first_agent  # both agents start from the grounding model (else the base)
    assert list(out) == (["grounding"] if grounding is None else []) + ["SFT (High)", "SFT (Low)"]
