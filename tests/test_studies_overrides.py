"""An override of each SFT / RL key a notebook trains with reaches the trainer: the Stage records notebooks
02, 03, 04 and 07 build (their ``cfg`` is what ``guirl.stages.sft`` / ``guirl.stages.rl`` train with),
resolved as the runner resolves them (``load_config(..., notebook=...)``); 05 (which trains nothing)
evaluates at the budget an override sets. A key a notebook sets per stage by design is refused with one
line instead (``Method.derived``), and the few that a stage takes on purpose from elsewhere are listed
below with the reason, so that nothing is dropped silently."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from guirl.config import Config, ConfigError, load_config

FAKE = Path("/nonexistent/guirl-override-test")

#: Each SFT / RL key the stages train with, and a value no profile or recipe uses (so it can only come from here).
TRAIN_KEYS: dict[str, Any] = {
    "sft.learning_rate": 1.234e-4,
    "sft.epochs": 2.5,
    "sft.max_steps": 7,
    "sft.per_device_batch_size": 3,
    "sft.grad_accum": 5,
    "sft.warmup_ratio": 0.123,
    "sft.lr_scheduler_type": "linear",
    "sft.save_steps": 11,
    "lora.enabled": True,
    "lora.r": 13,
    "lora.alpha": 7.0,
    "lora.dropout": 0.07,
    "model.max_pixels": 50176,
    "rl.learning_rate": 2.345e-5,
    "rl.max_steps": 9,
    "rl.prompts_per_step": 3,
    "rl.group_size": 5,
    "rl.max_new_tokens": 21,
    "rl.temperature": 0.77,
    "rl.top_p": 0.91,
    "rl.beta": 0.0123,
    "rl.eps_low": 0.17,
    "rl.eps_high": 0.27,
    "rl.weight_decay": 0.031,
    "rl.max_grad_norm": 0.7,
    "rl.dapo_std_threshold": 0.33,
    "rl.mini_batches": 3,
    "rl.micro_batch_size": 3,
    "rl.rollout_batch_size": 5,
    "rl.warmup_steps": 2,
    "rl.save_steps": 2,
    "rl.save_total_limit": 3,
    "rl.advantage": "dr_grpo",
    "rl.loss_agg": "seq-mean-token-sum",
    "rl.max_draws": 3,
    "rl.lora": True,
    "rl.lora_learning_rate": 3.21e-5,
    "rl.role": "ccpo",
    "rl.reward": "ccpo",
    "rl.histories": ["2AO"],
}

#: (notebook, stage, key) -> why the stage takes the key from elsewhere, on purpose.
BY_DESIGN = {
    # 02's ablations: Table 11's rollout counts and the "+ CASC" row's reward are what they vary
    ("02_ccpo_rl", "ccpo_1AO_g2", "rl.group_size"): "a Table 11 ablation run of 2 rollouts",
    ("02_ccpo_rl", "ccpo_1AO_g8", "rl.group_size"): "a Table 11 ablation run of 8 rollouts",
    # 04's weaker executor is 01's Low-executor recipe (sft.executor, as 01 trains it) cut to ces.weak_executor_steps
    ("04_ces_staged_rl", "weak_executor", "sft.max_steps"): "ces.weak_executor_steps",
    ("04_ces_staged_rl", "weak_executor", "sft.learning_rate"): "sft.executor.learning_rate (01's executor)",
}


def stages(
    notebook: str, cfg: Config, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> list[tuple[str, str, Config]]:
    """``[(stage name, "sft" | "rl", the Stage's cfg)]`` of every stage the notebook builds from ``cfg``."""
    out: list[tuple[str, str, Config]] = []
    if notebook == "02_ccpo_rl":
        from guirl.studies import ccpo_rl
        from guirl.studies.shared.rl_runs import rl_stage

        for run in ccpo_rl.main_runs(cfg) + ccpo_rl.ablation_runs(cfg):
            st = rl_stage(cfg, run, sft=FAKE, data_dir=FAKE, run_dir=tmp_path)
            out.append((st.name, "rl", st.cfg))
    elif notebook == "03_coepg_iterations":
        from guirl.studies import coepg_iterations as ci

        s = ci.Setup(cfg, FAKE, tmp_path, tuple([None] * 300), None, 3136, 141120, "ccpo", FAKE)  # type: ignore[arg-type]
        recs = {"planner": FAKE / "p.jsonl", "grounder": FAKE / "g.jsonl", "e2e": FAKE / "e.jsonl"}
        for name, st in {**ci.sft_stages(s, 1, recs), "e2e": ci.e2e_stage(s, recs)}.items():
            out.append((name, "sft", st.cfg))
        out.append(("planner_grpo", "rl", ci.grpo_stage(s, {"final": FAKE}, [], tmp_path / "g").cfg))
        for a in ci.ablation_runs(cfg):
            if not a.main:
                out.append(
                    (a.name, "rl", ci.grpo_stage(s, {"final": FAKE}, [], tmp_path / a.name, **a.overrides()).cfg)
                )
    elif notebook == "04_ces_staged_rl":
        from guirl.studies import ces_staged_rl as cs

        monkeypatch.setattr(cs, "_pool_sizes", lambda cfg, data_dir: (100, 90))
        monkeypatch.setattr(cs, "model_folder", lambda cfg, source: FAKE / "model")
        monkeypatch.setattr(cs, "coordinator_start", lambda cfg: FAKE / "start")
        records = {"coordinator": FAKE / "c.jsonl", "state_tracker": FAKE / "s.jsonl"}
        for name, st in cs.ces_stages(cfg, data_dir=FAKE, run_dir=tmp_path, records=records).items():
            out.append((name, "rl" if name in (cs.STAGE1, cs.STAGE2) else "sft", st.cfg))
    elif notebook == "07_agentcpm_androidlong":
        import guirl.studies.parts.agentcpm_androidlong.agentcpm as acpm
        from guirl.studies import agentcpm_androidlong as S

        train = SimpleNamespace(episodes=[SimpleNamespace(steps=[0, 1, 2])] * 20)
        monkeypatch.setattr(acpm, "load_splits", lambda data_dir: {"train": train})
        sft, rft = S.agentcpm_stages(cfg, data_dir=FAKE, start=FAKE, run_dir=tmp_path)
        out += [("agentcpm_sft", "sft", sft.cfg), ("agentcpm_rft", "rl", rft.cfg)]
        for memory, c in S.androidlong_configs(cfg).items():  # each model's SFT and GRPO stages train with it
            tag = "mem" if memory else "nomem"
            out += [(f"androidlong_sft_{tag}", "sft", c), (f"androidlong_grpo_{tag}", "rl", c)]
    return out


def _expected(notebook: str, stage: str, key: str, value: Any, cfg: Config) -> Any:
    if notebook == "07_agentcpm_androidlong" and key == "rl.max_new_tokens" and stage.endswith("_mem"):
        return value + cfg.androidlong.memory_tokens  # the memory's own tokens on top (androidlong.memory_tokens)
    return value


#: notebook -> (its own experiment file, the kinds of stage it trains: 02 trains RL from 01's SFT models)
NOTEBOOKS = {
    "02_ccpo_rl": (None, ("rl",)),
    "03_coepg_iterations": (None, ("sft", "rl")),
    "04_ces_staged_rl": (None, ("sft", "rl")),
    "07_agentcpm_androidlong": ("07_agentcpm_androidlong.tiny", ("sft", "rl")),
}


def _kind(key: str) -> str | None:
    return "rl" if key.startswith("rl.") else "sft" if key.startswith(("sft.", "lora.")) else None


CASES = [
    (nb, key)
    for nb, (_, kinds) in sorted(NOTEBOOKS.items())
    for key in sorted(TRAIN_KEYS)
    if _kind(key) is None or _kind(key) in kinds
]


@pytest.mark.parametrize("notebook, key", CASES)
def test_an_override_reaches_every_stage_that_trains_with_it(
    notebook: str, key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import guirl.methods as methods

    value = TRAIN_KEYS[key]
    derived = {k for m in methods.all_methods() if notebook in m.notebooks for k in m.derived}
    override = f"{key}={json.dumps(value)}"
    if key in derived:
        with pytest.raises(ConfigError) as err:
            load_config("tiny", NOTEBOOKS[notebook][0], [override], notebook=notebook)
        assert err.value.key == key and "sets it per stage" in str(err.value) and "\n" not in str(err.value)
        return
    cfg = load_config("tiny", NOTEBOOKS[notebook][0], [override], notebook=notebook)
    kind = _kind(key)
    checked = 0
    for name, stage_kind, scfg in stages(notebook, cfg, monkeypatch, tmp_path):
        if kind is not None and stage_kind != kind:
            continue
        why = BY_DESIGN.get((notebook, name, key))
        got = scfg.to_flat()[key]
        if why is not None:
            assert got != value, f"{notebook} {name} {key}: listed as taken from {why}, yet it is the override"
            continue
        assert got == _expected(notebook, name, key, value, cfg), f"{notebook}: stage {name} trains with {key}={got!r}"
        checked += 1
    assert checked, f"{notebook}: no stage trains with {key}"


def test_the_checker_can_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a study that rewrote a key from its own section again would be caught: 04's stage 1 with its learning rate
    # taken from the paper's value behind the user's back
    from guirl.studies import ces_staged_rl as cs

    real = cs.rl_config
    monkeypatch.setattr(cs, "rl_config", lambda cfg, role, n: real(cfg, role, n).replace({"rl.learning_rate": 1e-6}))
    cfg = load_config("tiny", None, ["rl.learning_rate=2.345e-5"], notebook="04_ces_staged_rl")
    got = {
        name: c.rl.learning_rate
        for name, kind, c in stages("04_ces_staged_rl", cfg, monkeypatch, tmp_path)
        if kind == "rl"
    }
    assert got and all(v == 1e-6 for v in got.values())  # what the assertion above would reject


@pytest.mark.parametrize("profile", ["tiny", "paper-7b"])
def test_the_saved_config_shows_the_value_that_ran(
    profile: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the runner saves the resolved config; loaded back (as the notebook does) it builds the same stages
    cfg = load_config(profile, None, ["rl.learning_rate=2.345e-5"], notebook="04_ces_staged_rl")
    saved = load_config(cfg.save(tmp_path / "04.config.yaml"))
    assert saved == cfg and saved.ces.coordinator.learning_rate == saved.ces.state_tracker.learning_rate == 2.345e-5
    a = {n: c.hash() for n, _, c in stages("04_ces_staged_rl", cfg, monkeypatch, tmp_path)}
    b = {n: c.hash() for n, _, c in stages("04_ces_staged_rl", saved, monkeypatch, tmp_path)}
    assert a == b


@pytest.mark.parametrize(
    "override, budget",
    [([], 60), (["eval.max_test_steps=9"], 9), (["ccpo.eval.max_test_steps=7"], 7)],
)
def test_05_evaluates_at_the_budget_an_override_sets(override: list[str], budget: int, monkeypatch) -> None:
    # 05 trains nothing; its Table 13 evaluation (CASC at inference) runs at 02's budget, ccpo.eval.max_test_steps
    from guirl.studies import efficiency_profiling as E
    from guirl.studies.shared import evaluation as ev

    seen: list[int | None] = []
    monkeypatch.setattr(ev, "eval_policy", lambda cfg, result: None)
    monkeypatch.setattr(ev, "evaluation_grid", lambda cfg, *a, **k: seen.append(cfg.eval.max_test_steps) or [])
    cfg = load_config("tiny", "05_efficiency_profiling", override, notebook="05_efficiency_profiling")
    inp = SimpleNamespace(cfg=cfg, rl={("ccpo", h): {} for h in cfg.analysis.histories}, splits={})
    E.table13_records(inp)  # type: ignore[arg-type]
    assert seen and set(seen) == {budget}
