"""Each paper's recipe (``methods/<paper>/config.py``) and the one precedence rule of every notebook:
profile (with the recipes) < experiment < overlay < override, across the two spellings of a stage
value (``ces.coordinator.learning_rate`` is CES's ``rl.learning_rate``); the saved config shows the
value that ran; keys a notebook sets per stage are refused when a run sets them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import Field

import guirl.methods as methods
from guirl.config import ConfigError, config_class, load_config, overlay_keys_not_applied
from guirl.configbase import PROFILE, Sampling, Section, mirrored_fields, stage_updates


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


# ----------------------------------------------------------------------------- one precedence rule
@pytest.mark.parametrize(
    "layers, expect",
    [
        # the profile's kernel value and the paper's stage value are one level: the paper's stands
        (
            {},
            {"ces.coordinator.learning_rate": 1e-6, "ces.state_tracker.learning_rate": 1e-6, "rl.learning_rate": 5e-7},
        ),
        # an experiment's kernel key is a later layer: it wins in every stage section that mirrors it
        (
            {"exp": {"rl": {"learning_rate": 2e-6}}},
            {"ces.coordinator.learning_rate": 2e-6, "coepg.grpo.learning_rate": 2e-6},
        ),
        # an overlay beats an experiment's paper value
        (
            {"exp": {"ces": {"coordinator": {"learning_rate": 3e-6}}}, "ov": {"rl": {"learning_rate": 4e-6}}},
            {"ces.coordinator.learning_rate": 4e-6},
        ),
        # an override of the paper's key beats an overlay's kernel key, for that stage only
        (
            {"ov": {"rl": {"learning_rate": 4e-6}}, "over": ["ces.coordinator.learning_rate=5e-6"]},
            {"ces.coordinator.learning_rate": 5e-6, "ces.state_tracker.learning_rate": 4e-6, "rl.learning_rate": 4e-6},
        ),
        # both spellings in one layer: the paper's (the more specific) stands
        (
            {"over": ["rl.learning_rate=6e-6", "ces.coordinator.learning_rate=7e-6"]},
            {"ces.coordinator.learning_rate": 7e-6, "ces.state_tracker.learning_rate": 6e-6},
        ),
        # nested values compare leaf by leaf: an overlay's temperature reaches AndroidLong's online sampling
        (
            {"ov": {"eval": {"online_sampling": {"temperature": 0.4}}}},
            {"androidlong.eval.online_sampling.temperature": 0.4},
        ),
    ],
)
def test_one_precedence_rule_across_spellings(tmp_path: Path, layers: dict, expect: dict) -> None:
    exp = write_yaml(tmp_path / "exp.yaml", layers["exp"]) if "exp" in layers else None
    ov = [write_yaml(tmp_path / "ov.yaml", layers["ov"])] if "ov" in layers else []
    cfg = load_config("paper-7b", exp, layers.get("over", []), overlays=ov)
    flat = cfg.to_flat()
    assert {k: flat[k] for k in expect} == expect
    # the saved config loads back to the same values: it shows what ran
    assert load_config(cfg.save(tmp_path / "saved.yaml")) == cfg


def test_the_tiny_recipe_takes_the_profiles_own_values() -> None:
    # PROFILE: the tiny recipe's Co-EPG pixel budget is the profile's, and follows a later layer's too
    tiny = load_config("tiny")
    assert tiny.coepg.model.max_pixels == tiny.model.max_pixels == 141120
    assert load_config("tiny", overrides=["model.max_pixels=50176"]).coepg.model.max_pixels == 50176
    assert tiny.agentcpm.rft.learning_rate == tiny.rl.learning_rate and tiny.ces.warmup.lora.enabled is False
    # the paper recipe keeps the paper's values whatever the profile's kernel keys
    paper = load_config("paper-3b")
    assert (paper.coepg.model.max_pixels, paper.coepg.sft.learning_rate) == (802816, 1e-6)
    assert (paper.sft.learning_rate, paper.lora.r) == (3e-5, 8)  # CCPO Table 7: the kernel keys (01, 02)


def test_papers_that_name_no_adapter_fine_tune_all_parameters() -> None:
    """The paper profiles' ``lora`` is CCPO Table 7's (notebook 01's SFT): AgentCPM-GUI's Stage II
    (Table 4), AndroidLong's SFT (App. C.2) and Co-EPG's SFT (App. B) name no adapter and train
    all parameters; CES's warm-up keeps its own LoRA (App. B.2); an override of a paper's switch wins."""
    from guirl.methods.agentcpm.config import sft_updates
    from guirl.methods.androidlong.config import variant_updates
    from guirl.methods.coepg.config import sft_stage_config

    paper = load_config("paper-7b")
    # the papers' weight decay reaches their SFT stages (Co-EPG App. B, AgentCPM-GUI Table 4); CCPO's none
    assert (sft_stage_config(paper).sft.weight_decay, sft_updates(paper)["sft.weight_decay"]) == (0.05, 0.1)
    assert paper.sft.weight_decay == 0.0 and load_config("tiny").coepg.sft.weight_decay == 0.0
    assert paper.lora.enabled is True  # CCPO Table 7
    assert sft_updates(paper)["lora.enabled"] is False
    assert variant_updates(paper, memory=False)["lora.enabled"] is False
    assert sft_stage_config(paper).lora.enabled is False
    assert stage_updates(paper.ces.warmup)["lora.enabled"] is True
    on = load_config("paper-7b", overrides=["agentcpm.sft.lora.enabled=true", "coepg.sft.lora.enabled=true"])
    assert sft_updates(on)["lora.enabled"] is True and sft_stage_config(on).lora.enabled is True
    # the tiny recipe takes the profile's switch (all parameters there too)
    tiny = load_config("tiny")
    assert (tiny.agentcpm.sft.lora.enabled, tiny.androidlong.sft.lora.enabled, tiny.coepg.sft.lora.enabled) == (
        tiny.lora.enabled,
    ) * 3


def test_ccpo_recipe_follows_the_data_set() -> None:
    # CCPO Tables 7-8 by column, in the kernel keys of the paper profiles; the tiny profile keeps its own
    go = load_config("paper-3b", "guiodyssey")
    assert (go.sft.learning_rate, go.rl.prompts_per_step, go.rl.dapo_std_threshold, go.semi_online.gamma) == (
        3e-4,
        8,
        0.1,
        0.3,
    )
    assert load_config("paper-3b", "aitz").sft.learning_rate == 3e-5  # no CCPO column: the AC one
    tiny = load_config("tiny", "guiodyssey")
    assert tiny.sft.learning_rate == load_config("tiny").sft.learning_rate and tiny.data.source == "guiodyssey"
    # and CCPO's kernel values never reach another paper's stages: their stage values are their own
    assert go.ces.coordinator.prompts_per_step == 32 and go.agentcpm.sft.learning_rate == 1e-5


@pytest.mark.parametrize(
    ("profile", "experiment", "overrides", "n_tasks", "steps"),
    [
        ("paper-7b", None, [], 1000, 94),  # CCPO Table 8 AC: 3 epochs x 1000 trajectories / 32 a step
        ("paper-7b", "guiodyssey", [], 1000, 375),  # GUI O: 3 epochs / 8 a step
        ("paper-3b", "mind2web", [], 1000, 500),  # M2W: 8 epochs / 16 a step
        ("paper-7b", None, ["rl.max_steps=50"], 1000, 50),  # an override of the kernel key wins
        ("paper-7b", None, ["ccpo.rl.epochs=1"], 64, 2),
        ("tiny", None, [], 1000, 10),  # the tiny profile's rl.max_steps (CPU budget)
        ("tiny", None, ["rl.max_steps=7"], 1000, 7),
    ],
)
def test_ccpos_rl_length_is_table_8s_epochs_unless_steps_are_set(profile, experiment, overrides, n_tasks, steps):
    from guirl.methods.ccpo.config import rl_steps

    cfg = load_config(profile, experiment, overrides)
    assert rl_steps(cfg.ccpo.rl, n_tasks, cfg.rl.prompts_per_step) == steps


def test_02_resolves_and_trains_its_rl_length_before_training(tmp_path: Path) -> None:
    from guirl.actions import Action
    from guirl.data.schema import Episode, Step, write_episodes
    from guirl.studies import ccpo_rl as cs

    def episode(eid: str, split: str) -> Episode:
        step = Step(step_id=0, screenshot=f"img/{eid}.png", screen_size=(10, 20), action=Action("wait"))
        return Episode(episode_id=eid, instruction="do it", steps=(step,), source="fixture", split=split)

    data = tmp_path / "data"
    data.mkdir()
    write_episodes([episode(f"e{i}", "train") for i in range(100)] + [episode("t0", "test")], data / "episodes.jsonl")
    cfg = load_config("paper-7b")
    (row,) = cs.rl_schedule(cfg, data).to_dict(orient="records")
    assert (row["tasks"], row["epochs"], row["max_steps"], row["from"]) == (100, 3.0, 10, "epochs")  # ceil(300 / 32)
    assert cs.rl_config(cfg, data).rl.max_steps == 10
    assert cs.rl_config(load_config("paper-7b", overrides=["rl.max_steps=4"]), data).rl.max_steps == 4


# ----------------------------------------------------------------------------- recipes and stage sections
def _schema_with(name: str, **changes: Any):
    ms = [dataclasses.replace(m, **changes) if m.name == name else m for m in methods.all_methods()]
    return config_class(ms)


@pytest.mark.parametrize(
    "recipe, key, words",
    [
        ({"ces.rl_pool": PROFILE}, "ces.rl_pool", "mirrors no kernel key"),  # PROFILE only for stage values
        ({"coepg.n_runs": 2}, "coepg.n_runs", "keys of its own section or kernel keys"),  # another paper's section
        ({"nope.x": 1}, "nope.x", "keys of its own section or kernel keys"),
        ({"sft.learning_rate": 1e-3}, "sft.learning_rate", "the recipe of 'ccpo' sets it to"),  # two recipes disagree
    ],
)
def test_recipe_errors_name_the_recipe(recipe: dict, key: str, words: str) -> None:
    schema = _schema_with("ces", recipe=lambda kind, source: dict(recipe))
    with pytest.raises(ConfigError) as err:
        load_config("paper-3b", schema=schema)
    assert err.value.key == key and words in str(err.value) and "\n" not in str(err.value)


class _Typo(Section):
    mirrors: ClassVar[str] = "rl"
    learnin_rate: float = 1e-6  # not an rl key, not declared the paper's own


class _NoKernel(Section):
    mirrors: ClassVar[str] = "optimizer"
    lr: float = 1e-6


class _NoDefault(Section):
    mirrors: ClassVar[str] = "rl"
    learning_rate: float = Field(gt=0)


class _WithTypo(Section):
    part: _Typo = Field(default_factory=_Typo)


class _WithNoKernel(Section):
    part: _NoKernel = Field(default_factory=_NoKernel)


class _WithNoDefault(Section):
    part: _NoDefault | None = None


@pytest.mark.parametrize(
    "section, words",
    [(_WithTypo, "not keys of the 'rl' section"), (_WithNoKernel, "not a kernel section"), (_WithNoDefault, "default")],
)
def test_stage_sections_are_checked_when_the_schema_is_built(section: type, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        _schema_with("ces", config_section=section, recipe=None)


def test_stage_updates_and_mirrored_fields() -> None:
    sec = load_config("paper-7b").ces
    assert mirrored_fields(sec.warmup) == [
        "epochs",
        "max_steps",
        "learning_rate",
        "per_device_batch_size",
        "grad_accum",
        "warmup_ratio",
        "lr_scheduler_type",
    ]
    assert stage_updates(sec.warmup) == {
        "sft.epochs": 1.0,
        "sft.max_steps": None,
        "sft.learning_rate": 5e-5,
        "sft.per_device_batch_size": 1,
        "sft.grad_accum": 8,
        "sft.warmup_ratio": 0.01,
        "sft.lr_scheduler_type": "constant_with_warmup",
        "lora.enabled": True,
        "lora.r": 8,
        "lora.alpha": 16.0,
        "lora.dropout": 0.1,
    }
    assert stage_updates(sec) == {}  # a plain section
    assert Sampling(do_sample=False).kwargs() == {"do_sample": False, "temperature": 1.0, "top_p": 1.0}


# ----------------------------------------------------------------------------- keys set per stage
@pytest.mark.parametrize(
    "notebook, override, key",
    [
        ("02_ccpo_rl", "rl.histories=[3AO]", "rl.histories"),  # one run per eval.histories setting
        ("02_ccpo_rl", "rl.role=ccpo", "rl.role"),
        ("03_coepg_iterations", "rl.max_new_tokens=64", "rl.max_new_tokens"),  # the planner's budget
        ("04_ces_staged_rl", "rl.reward=ccpo", "rl.reward"),
        ("07_agentcpm_androidlong", "androidlong.memory=true", "androidlong.memory"),  # one model of each
        ("07_agentcpm_androidlong", "eval.protocol=ccpo", "eval.protocol"),
    ],
)
def test_a_key_a_notebook_sets_per_stage_is_refused(tmp_path: Path, notebook: str, override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("tiny", overrides=[override], notebook=notebook)
    assert err.value.key == key and f"notebook {notebook} sets it per stage" in str(err.value)
    exp = write_yaml(tmp_path / "exp.yaml", yaml.safe_load(f"{{{key.split('.')[0]}: {{{key.split('.')[1]}: x}}}}"))
    with pytest.raises(ConfigError, match="sets it per stage") as err:
        load_config("tiny", exp, notebook=notebook)  # an experiment file too (the value is never checked)
    assert str(err.value).startswith(str(exp)) or "exp.yaml" in str(err.value)
    load_config("tiny", overrides=[override])  # outside a notebook: a plain key


def test_an_overlay_may_set_a_per_stage_key_and_the_runner_says_it() -> None:
    # the smoke overlay's rl.save_steps (a checkpoint a step) does not reach 03's GRPO stages (3 checkpoints)
    load_config("tiny", overlays=["smoke"], notebook="03_coepg_iterations")
    unused = overlay_keys_not_applied("03_coepg_iterations", ["smoke"])
    assert len(unused) == 1 and unused[0].startswith("rl.save_steps (configs/overlays/smoke.yaml")
    assert overlay_keys_not_applied("01_sft", ["smoke"]) == []


def test_the_runner_refuses_before_anything_runs(tmp_path: Path) -> None:
    from guirl.runner import plan_run

    with pytest.raises(ConfigError, match="notebook 02_ccpo_rl sets it per stage"):
        plan_run("notebooks/02_ccpo_rl.ipynb", "tiny", overrides=["rl.role=semi_online"])
    plan = plan_run("notebooks/02_ccpo_rl.ipynb", "tiny", overrides=["rl.learning_rate=2e-4"])
    assert plan.config.rl.learning_rate == 2e-4


# ----------------------------------------------------------------------------- no recipe leaks between papers
#: Kernel keys CCPO's recipe sets that another paper's stage may still take from the profile, and why.
SHARED_BY_DESIGN = {
    "rl.micro_batch_size": "a memory split of each mini-batch (the loss is normalised over the mini-batch: the same "
    "gradient, train/rl.py)",
}


def ccpo_values_reaching(cfg: Any, sections: dict[str, Section], donor: set[str], derived: set[str]) -> list[str]:
    """The kernel keys in ``donor`` (CCPO's recipe) that a stage section of ``sections`` (``{path:
    section}``, nested stage sections walked) takes from the profile instead of holding its own
    value: every key of the mirrored kernel section that the stage section has no field for, less
    the keys a notebook sets per stage (``derived``), :data:`SHARED_BY_DESIGN` and an adapter's
    shape where the stage trains no adapter. ``cfg``: the run config whose kernel sections are mirrored."""
    out = []

    def walk(path: str, sec: Section) -> None:
        for name in type(sec).model_fields:
            value = getattr(sec, name)
            if isinstance(value, Section):
                walk(f"{path}.{name}", value)
        mirror = type(sec).mirrors
        if mirror is None or (mirror == "lora" and not getattr(sec, "enabled", True)):
            return
        for key in type(getattr(cfg, mirror)).model_fields:
            dotted = f"{mirror}.{key}"
            if dotted in donor and key not in type(sec).model_fields and dotted not in derived | set(SHARED_BY_DESIGN):
                out.append(f"{path} takes {dotted} from the profile (CCPO's value)")

    for path, sec in sections.items():
        walk(path, sec)
    return out


@pytest.mark.parametrize("profile", ["paper-3b", "paper-7b"])
def test_no_paper_trains_with_ccpos_values(profile: str) -> None:
    """Issue of recipes leaking: the paper profiles' kernel keys are CCPO's (Tables 7-8, notebooks 01
    and 02); every other paper's stage holds its own value of each such key it trains with, a paper
    value or one marked 'not a paper value' in ``methods/<paper>/config.py``."""
    from guirl.methods.ccpo.config import recipe

    cfg = load_config(profile)
    donor = {k for src in ("androidcontrol", "guiodyssey", "mind2web") for k in recipe("paper", src)}
    for m in methods.all_methods():
        if m.name in ("ccpo", "semi_online") or m.config_section is None:
            continue
        sec = cfg.method_section(m.name)
        subs = {
            f"{m.name}.{n}": getattr(sec, n) for n in type(sec).model_fields if isinstance(getattr(sec, n), Section)
        }
        assert ccpo_values_reaching(cfg, subs, donor, set(m.derived)) == [], m.name


def test_the_leak_check_can_fail() -> None:
    class Leaky(Section):
        mirrors: ClassVar[str] = "sft"
        learning_rate: float = 1e-6

    cfg = load_config("tiny")
    leaks = ccpo_values_reaching(cfg, {"x.sft": Leaky()}, {"sft.learning_rate", "sft.warmup_ratio"}, set())
    assert leaks == ["x.sft takes sft.warmup_ratio from the profile (CCPO's value)"]
