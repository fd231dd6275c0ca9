"""The per-method config sections (lib/guirl/methods/<paper>/config.py): the paper profiles resolve
each with the papers' values. Every case names its place in the paper (docs/papers.md says which
text file is which paper); the values are read by hand from the tables."""

from __future__ import annotations

import pytest

import guirl.methods as methods
from guirl.actions.formats import FormatContext
from guirl.config import ConfigError, load_config
from guirl.methods.agentcpm.reward import AgentCPMConfig
from guirl.methods.ces.reward import CESConfig
from guirl.methods.coepg.config import pixel_budget
from guirl.methods.coepg.reward import CoEPGConfig


@pytest.fixture(scope="module")
def paper():
    return load_config("paper-3b")


def test_every_paper_method_of_this_change_has_a_section():
    for name in ("coepg", "ces", "agentcpm", "androidlong"):
        assert methods.get(name).config_section is not None, name


@pytest.mark.parametrize(
    "key, value",
    [
        # ---- Co-EPG App. B (line 379), App. A (373), Sec. 5.2 (140)
        ("coepg.model.max_pixels", 802816),  # App. B: at most 1024 x 28 x 28 pixels
        ("coepg.sft.learning_rate", 1e-6),  # App. B
        ("coepg.sft.epochs", 3),  # App. B
        ("coepg.sft.lr_scheduler_type", "cosine"),  # App. B: warm-up, then cosine decay
        ("coepg.grpo.group_size", 7),  # App. B: 7 rollouts per group
        ("coepg.grpo.temperature", 0.9),  # App. B
        ("coepg.grpo.learning_rate", 5e-7),  # App. B
        ("coepg.grpo.prompts_per_step", 42),  # App. B: batch 294 = 42 groups of 7
        ("coepg.grpo.beta", 0.01),  # App. B: KL coefficient
        ("coepg.grpo.eps_low", 0.2),  # App. B: clip ratio
        ("coepg.grpo.eps_high", 0.2),  # App. B: clip ratio
        ("coepg.grpo.priors", (1.0, 1.0, 2.0)),  # App. B-C: 72B : 32B : phi_k
        ("coepg.eval.max_test_steps", 500),  # App. A: 500 sampled step-actions
        ("coepg.iterations", 3),  # Sec. 5.4: three iterations
        ("coepg.pool_size", 2),  # Sec. 4.2: the latest two planners and grounders
        ("coepg.system_prompt", "coepg"),  # Table 12 (system role)
        ("coepg.user_template", "coepg_androidcontrol_high"),  # Table 12 (high-level prompt)
        ("coepg.n_runs", 3),  # Sec. 5.2: mean of three runs
        # ---- CES Table 4 (lines 424-433), Sec. 5.1 (198), App. B.1-B.2 (412-420)
        ("ces.coordinator.learning_rate", 1e-6),  # Table 4
        ("ces.coordinator.epochs", 10),  # Table 4 / Sec. 5.1
        ("ces.state_tracker.epochs", 5),  # Table 4 / Sec. 5.1
        ("ces.coordinator.prompts_per_step", 32),  # Table 4: train_batch_size
        ("ces.coordinator.eps_low", 0.2),  # Table 4: clip_ratio
        ("ces.coordinator.group_size", 4),  # Table 4: rollout_n
        ("ces.coordinator.max_new_tokens", 256),  # Table 4: max_response_length
        ("ces.state_tracker.max_new_tokens", 512),  # Table 4: max_response_length
        ("ces.warmup.epochs", 1),  # Sec. 5.1: one epoch of warm-up SFT
        ("ces.warmup.learning_rate", 5e-5),  # Sec. 5.1
        ("ces.warmup.lora.enabled", True),  # App. B.2: LoRA
        ("ces.warmup.lora.r", 8),  # App. B.2
        ("ces.warmup.lora.alpha", 16),  # App. B.2
        ("ces.warmup.samples", 1000),  # App. B.1: 1K steps
        ("ces.rl_pool", 3000),  # App. B.1: 3K steps for RL
        ("ces.warmup.think", "description_intention"),  # App. B.1: <think>description.intention</think>
        ("ces.alpha1", 0.1),  # Sec. 5.1: alpha_1
        ("ces.alpha2", 0.9),  # Sec. 5.1: alpha_2
        ("ces.gamma1", 0.2),  # Sec. 5.1: gamma_1
        ("ces.gamma2", 0.8),  # Sec. 5.1: gamma_2
        ("ces.executor_model", "checkpoints/GUI-R1-7B"),  # Sec. 5.1: GUI-R1-7B (a local folder)
        ("ces.state_tracker_model", "checkpoints/Qwen3-4B"),  # Sec. 5.1: Qwen3-4B
        ("ces.executor_prompt", "ces_executor"),  # App. C: the Executor's prompt
        ("ces.tracker_input", "executor_output"),  # eq. 3: u^t
        (
            "ces.table2_executors",
            ["checkpoints/UI-R1-3B", "checkpoints/GUI-Owl-7B", "checkpoints/GUI-Owl-32B"],
        ),  # Table 2
        # ---- AgentCPM-GUI Table 4 (lines 265-280), Table 5 (284-298), Table 7 (406-413)
        ("agentcpm.sft.max_line_res", 1120),  # Table 4
        ("agentcpm.sft.epochs", 3),  # Table 4
        ("agentcpm.sft.learning_rate", 1e-5),  # Table 4
        ("agentcpm.sft.warmup_ratio", 0.05),  # Table 4
        ("agentcpm.rft.max_new_tokens", 512),  # Table 5: max_completion_length
        ("agentcpm.rft.group_size", 8),  # Table 5: num_generations
        ("agentcpm.rft.prompts_per_step", 32),  # Table 5: 1 x 32 accumulation x 8 GPUs / 8 generations
        ("agentcpm.rft.learning_rate", 1e-6),  # Table 5
        ("agentcpm.rft.max_grad_norm", 1.0),  # Table 5
        ("agentcpm.rft.beta", 0.04),  # Table 5: KL coefficient
        ("agentcpm.rft.weight_decay", 0.1),  # Table 5
        ("agentcpm.rft.reward_schema", "paper"),  # Sec. 2.5.1 + App. C.2: the paper's schema is the format check
        ("agentcpm.grounding_samples", 1500),  # App. C.1: 1,500 samples per grounding task
        ("agentcpm.mapping_variant", "paper"),  # App. B mapping tables
        # ---- AndroidLong App. C.1-C.2 (lines 45, 62), Table 7 (68-86)
        ("androidlong.sft.epochs", 2),  # App. C.2
        ("androidlong.sft.learning_rate", 1e-5),  # App. C.2: cosine from 1e-5 ...
        ("androidlong.rl.prompts_per_step", 32),  # Table 7: 256 episodes at once, 8 per task
        ("androidlong.rl.max_new_tokens", 2048),  # Table 7
        ("androidlong.memory", False),  # Table 6: the models without memory first
        ("androidlong.rl.learning_rate", 1e-6),  # Table 7
        ("androidlong.rl.eps_low", 0.2),  # Table 7: clip_ratio
        ("androidlong.rl.beta", 0.001),  # Table 7: kl_loss_coef
        ("androidlong.rl.temperature", None),  # Table 7 names the sampling temperature; its value is missing: no key
        ("androidlong.rl.group_size", 8),  # Table 7: n
        ("androidlong.model.max_pixels", 500000),  # Table 7
        ("androidlong.model.min_pixels", 65536),  # Table 7
        ("androidlong.eval.n_seeds", 3),  # App. C.1: three runs of the same tasks
        ("eval.max_turns", 100),  # AndroidLong Table 7: at most 100 turns (AL-04)
        # ---- CCPO Table 7 (lines 388-399), AC column of CCPO's recipe (CCPO-35, CCPO-36)
        ("sft.learning_rate", 3e-5),  # AC learning rate
        ("sft.epochs", 3),  # AC total_epochs
        ("sft.warmup_ratio", 0.01),  # warm up 0.01
        ("sft.lr_scheduler_type", "constant_with_warmup"),  # constant
        ("lora.r", 8),  # lora rank
        ("lora.alpha", 16),  # lora alpha
        ("lora.dropout", 0.1),  # lora dropout
    ],
)
def test_paper_profiles_hold_the_papers_values(paper, key, value):
    got = paper.to_flat()[key] if key in paper.to_flat() else None
    if isinstance(value, tuple):
        got = tuple(got)
    assert got == value, key


@pytest.mark.parametrize(
    "experiment, lr, epochs, global_batch",
    [
        ("androidcontrol", 3e-5, 3, 64),  # CCPO Table 7, AC column
        ("guiodyssey", 3e-4, 3, 64),  # CCPO Table 7, GUI O column
        ("mind2web", 3e-4, 3, 16),  # CCPO Table 7, M2W column
    ],
)
def test_ccpo_table7_per_data_set(experiment, lr, epochs, global_batch):
    c = load_config("paper-3b", experiment)
    assert (c.sft.learning_rate, c.sft.epochs) == (lr, epochs)
    assert c.sft.per_device_batch_size * c.sft.grad_accum * c.runtime.num_processes == global_batch


def test_sections_build_the_reward_configs(paper):
    # one source of truth: the reward configs' defaults are the sections' defaults
    assert paper.coepg.reward_config() == CoEPGConfig()
    assert paper.ces.reward_config() == CESConfig()
    assert paper.agentcpm.reward_config() == AgentCPMConfig()
    c = load_config("paper-3b", overrides=["coepg.grpo.confidence=prob", "ces.reward_rules=ces_reward_code"])
    assert c.coepg.reward_config().confidence == "prob" and c.ces.reward_config().rules == "ces_reward_code"


def test_coepg_pixel_budget_reads_the_section(paper):
    # Co-EPG App. B: 802,816 px, so a 1080x2400 screen is 588x1316 for Co-EPG's models
    lo, hi = pixel_budget(paper)
    assert (lo, hi) == (3136, 802816)
    sp = FormatContext(width=1080, height=2400, min_pixels=lo, max_pixels=hi).space("resized")
    assert (sp.width, sp.height) == (588, 1316)
    assert pixel_budget(load_config("tiny")) == (3136, 141120)  # the tiny recipe: one MiniGUI screen
    with pytest.raises(ConfigError, match="coepg: section not set"):
        pixel_budget(load_config("tiny", overrides={"coepg": None}))


@pytest.mark.parametrize(
    "override, key",
    [
        ("coepg.grpo.group_size=1", "coepg.grpo.group_size"),  # GRPO needs a group
        ("ces.coordinator.epochs=0", "ces.coordinator.epochs"),  # epochs > 0
        ("agentcpm.mapping_variant=nope", "agentcpm.mapping_variant"),  # paper or released
        ("androidlong.rl.temperature=0.5", "androidlong.rl.temperature"),  # not a key: Table 7 gives no value
    ],
)
def test_section_errors_name_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        load_config("paper-3b", overrides=[override])
    assert err.value.key == key


def test_every_profile_has_every_section_with_its_recipe():
    # each method's recipe (methods/<paper>/config.py) sizes its section per profile: the papers' values on the
    # paper profiles, the CPU sizes on the tiny profile; a profile file no longer lists the sections
    tiny, paper = load_config("tiny"), load_config("paper-3b")
    for name in methods.names():
        assert getattr(tiny, name) is not None and getattr(paper, name) is not None, name
    assert tiny.ces.state_tracker_model == "tiny" and paper.ces.state_tracker_model == "checkpoints/Qwen3-4B"
    assert tiny.coepg.sft.max_steps == 60 and paper.coepg.sft.max_steps is None
    assert tiny.coepg.model.max_pixels == tiny.model.max_pixels  # PROFILE: the tiny profile's own value
    assert tiny.agentcpm.sft.learning_rate == tiny.sft.learning_rate and paper.agentcpm.sft.learning_rate == 1e-5


@pytest.mark.parametrize("name", ["ccpo", "semi_online", "coepg", "ces", "agentcpm", "androidlong"])
@pytest.mark.parametrize("kind", ["paper", "tiny"])
def test_recipes_set_known_keys_and_cite_them(name: str, kind: str) -> None:
    # every key of a recipe is a key of the config (validated: the profiles load) and a tiny recipe keeps the
    # paper's own section; only CCPO's recipe sets kernel keys (01's SFT and 02's RL are CCPO's baselines)
    recipe = methods.get(name).recipe
    keys = list(recipe(kind, "androidcontrol")) if recipe is not None else []
    known = set(load_config("paper-3b").to_flat())
    for key in keys:
        assert key in known or any(k.startswith(key + ".") for k in known), (name, key)
        assert key.split(".")[0] == name or name == "ccpo", (name, key)
