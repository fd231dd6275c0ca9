"""The paper path end to end: notebooks 00-07 on the ``paper-3b`` profile's code path with the
``paper_smoke`` overlay (on top of ``smoke``) and the public-format fixtures
(``tests/fixtures/make_fixtures.py``, ``PUBLIC``): the papers' recipes, the data sets' formats and
official splits, each paper's protocol, its stages, and DeepSpeed ZeRO-2 through the profile's own
accelerate config (on DeepSpeed's CPU accelerator, one process), with the tiny random model.

One module, so that ``make test``'s pytest-xdist (``--dist loadscope``) runs its cases in order on
one process; each case is one notebook run, in the order the notebooks read each other:

* 00 converts the GUI-Odyssey, AITZ and AMEX copies (04 trains on GUI-Odyssey and tests on all
  three, CES Table 1) and the AndroidControl copy (01-03 and 05-07 run on it);
* 03's verifier and first C-DREM grounder are the tiny model served on localhost through the
  OpenAI-compatible client (``coepg.verifiers`` / ``coepg.grounders`` endpoints, as the 72B is
  served on a cluster), the second grounder and the planner the tiny model's folder;
* 04's Executor is the tiny model's folder (the paper's GUI-R1-7B is a folder on a cluster) with
  CES's Executor prompt, its State Tracker the offline tiny Qwen3.

Each check asserts what the paper path adds over the tiny profile: the data set's own test split
and paper-sized rows, the paper's protocol, the stages trained under DeepSpeed, and every table of
the notebook written with rows (``PAPER_TABLES``).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guirl.config import load_config
from guirl.runner import run_notebook
from test_notebooks import in_range

REPO = Path(__file__).resolve().parents[1]
PROFILE = "paper-3b"
OVERLAYS = ["smoke", "paper_smoke"]

_spec = importlib.util.spec_from_file_location("make_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)  # type: ignore[union-attr]

#: The notebook runs of the chain, in order: (case id, notebook, data set).
RUNS = [
    ("00_guiodyssey", "00_data_prep", "guiodyssey"),
    ("00_aitz", "00_data_prep", "aitz"),
    ("00_amex", "00_data_prep", "amex"),
    ("00_androidcontrol", "00_data_prep", "androidcontrol"),
    ("01_sft", "01_sft", "androidcontrol"),
    ("02_ccpo_rl", "02_ccpo_rl", "androidcontrol"),
    ("03_coepg_iterations", "03_coepg_iterations", "androidcontrol"),
    ("04_ces_staged_rl", "04_ces_staged_rl", "guiodyssey"),
    ("05_efficiency_profiling", "05_efficiency_profiling", "androidcontrol"),
    ("06_attention_visualization", "06_attention_visualization", "androidcontrol"),
    ("07_agentcpm_androidlong", "07_agentcpm_androidlong", "androidcontrol"),
]

#: Seconds a case may take: measured on 2 cores beside the other smoke chains, with margin.
TIMEOUT_S = 1800


class Chain:
    """The chain's output folders, the public copies, the served tiny model and the tiny folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.roots = {
            var: base / var.removeprefix("GUIRL_").lower()
            for var in ("GUIRL_RUNS", "GUIRL_FIGURES", "GUIRL_DATA", "GUIRL_CACHE")
        }
        self.sources = {
            name: mf.PUBLIC[name](base / "public") for name in ("androidcontrol", "guiodyssey", "aitz", "amex")
        }
        self.tiny: Path | None = None
        self.endpoint: str | None = None

    def figures(self, notebook: str) -> Path:
        return self.roots["GUIRL_FIGURES"] / PROFILE / notebook


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    c = Chain(tmp_path_factory.mktemp("paper-path"))
    for folder in c.roots.values():
        folder.mkdir(parents=True, exist_ok=True)
    yield c
    server = getattr(c, "server", None)
    if server is not None:
        server.stop()


def _serve_tiny(c: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny model (the folder ``model.path: tiny`` resolves to in this chain's cache) served on
    localhost, once per chain."""
    if c.endpoint is not None:
        return
    from guirl.models import build_tiny_model
    from guirl.rollout.openai_server import ChatServer

    cfg = load_config(PROFILE, overlays=OVERLAYS)
    c.tiny = build_tiny_model(seed=cfg.seed)
    server = ChatServer(c.tiny, name="tiny", min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels)
    server.start()
    c.server = server  # type: ignore[attr-defined]
    c.endpoint = f"{server.url}#tiny"


def _overrides(c: Chain, notebook: str, source: str) -> list[str]:
    out = [f"data.path={c.sources[source]}"]
    if notebook == "03_coepg_iterations":
        out += [
            f"coepg.planners=[{c.tiny}]",
            f"coepg.verifiers=[{c.endpoint}]",
            f"coepg.grounders=[{c.endpoint}, {c.tiny}]",
        ]
    if notebook == "04_ces_staged_rl":
        out += [f"ces.executor_model={c.tiny}", "ces.state_tracker_model=tiny", "ces.table2_executors=[]"]
    return out


def _experiment(notebook: str, source: str) -> str | None:
    from guirl.runner import default_experiment

    own = default_experiment(REPO / "notebooks" / f"{notebook}.ipynb", PROFILE)
    return own if own is not None else (None if source == "androidcontrol" else source)


# ----------------------------------------------------------------------------- checks
#: Every table each notebook writes on the paper path: a notebook that stops writing one, or writes
#: one without rows, fails its case.
PAPER_TABLES: dict[str, set[str]] = {
    "01_sft": {
        "accuracy_by_action_type",
        "agentcpm_table3_vs_paper",
        "instruction_level_gain",
        "online_by_category",
        "online_task_sr",
        "online_vs_paper",
        "setup_vs_paper",
        "sft_gain",
        "sft_schedule",
        "stages",
        "step_metrics_ci",
        "table2_step_metrics",
        "table2_vs_paper",
    },
    "02_ccpo_rl": {
        "casc_inference_paired",
        "greedy_changed",
        "reward_rise",
        "rl_gains",
        "rl_schedule",
        "rl_stages",
        "setup_vs_paper",
        "step_metrics_ci",
        "table10_min_max",
        "table11_rollouts",
        "table2_step_metrics",
        "table2_vs_paper",
        "table4_efficiency",
        "table4_time_breakdown",
        "table4_vs_paper",
        "table5_ablation",
        "table5_paired",
        "table5_vs_paper",
    },
    "03_coepg_iterations": {
        "figure5_sr",
        "figure6_data_quality",
        "figure6_vs_paper",
        "iteration_gains",
        "rl_schedule",
        "setup_vs_paper",
        "sft_schedule",
        "stages",
        "table2_levels",
        "table3_dual_vs_e2e",
        "table3_paired",
        "table3_vs_paper",
        "table4_cdrem_ablation",
        "table4_vs_paper",
        "table5_priors",
        "table5_vs_paper_logprob",
        "table5_vs_paper_prob",
        "table6_iterations",
        "table6_vs_paper",
        "table7_vs_paper",
    },
    "04_ces_staged_rl": {
        "figure2_temporal",
        "figure5_failures",
        "figure5_paired",
        "figure5_vs_paper",
        "online_by_category",
        "online_paired",
        "rl_schedule",
        "setup_vs_paper",
        "sft_schedule",
        "stages",
        "step_metrics_ci",
        "table1",
        "table1_paired",
        "table1_vs_paper",
        "table2",
        "table2_paired",
        "table2_vs_paper",
        "table3",
        "table3_paired",
        "table3_vs_paper",
    },
    "05_efficiency_profiling": {
        "cost_fits",
        "headline",
        "latency",
        "profile",
        "rollout_tokens",
        "table12_vs_paper",
        "table13_inference",
        "table13_sr_gain",
        "table13_vs_paper",
        "table14_vs_paper",
        "table15_vs_paper",
        "table4_vs_paper",
        "table6_vs_paper",
        "tokens",
        "tokens_per_action",
    },
    "06_attention_visualization": {"attention_paired", "attention_per_step", "attention_shares"},
    "07_agentcpm_androidlong": {
        "agentcpm_data",
        "by_app",
        "by_category",
        "dedup_sweep",
        "error_taxonomy",
        "mapping_identity",
        "reward_rise",
        "rl_schedule",
        "schema_steps",
        "setup_vs_paper",
        "sft_schedule",
        "stages",
        "table1_grounding",
        "table1_vs_paper",
        "table2_3_vs_paper",
        "table2_ci",
        "table2_tm_em",
        "table3_paired",
        "table6_online",
        "table6_other_categories",
        "table6_other_paired",
        "table6_paired",
        "table6_vs_paper",
        "tables8_9_vs_paper",
        "tokens_per_action",
    },
}


def _tables(folder: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for side in sorted(folder.glob("*.json")):
        data = json.loads(side.read_text())
        if isinstance(data, dict) and data.get("kind") == "table":
            assert all((folder / f).is_file() for f in data["files"]), side.name
            out[side.stem] = data["data"]
    return out


def _deepspeed_checkpoints(stage_dir: Path) -> list[Path]:
    """The DeepSpeed checkpoints a stage wrote: ``checkpoint-*/global_step*`` (transformers' Trainer,
    the SFT stages) or ``checkpoint-*/pytorch_model`` (accelerate's ``save_state`` under DeepSpeed,
    the RL engine); a stage trained without DeepSpeed writes neither."""
    return sorted([*stage_dir.glob("checkpoint-*/global_step*"), *stage_dir.glob("checkpoint-*/pytorch_model")])


def check(c: Chain, case: str, notebook: str, source: str, result: Any) -> None:
    cfg = load_config(result.config_path)
    assert cfg.profile == PROFILE and cfg.data.source == source
    assert cfg.runtime.deepspeed_config == "configs/deepspeed/zero2.json"
    folder = c.figures(notebook)
    tables = _tables(folder)
    runs = c.roots["GUIRL_RUNS"] / PROFILE / notebook
    if notebook == "00_data_prep":
        (table,) = [t for name, t in tables.items() if name == "split_sizes_vs_paper"]
        ours = {r["split"]: r["ours"] for r in table if r["quantity"] == "episodes"}
        assert {k: v for k, v in ours.items() if k != "(all)"} == mf.PUBLIC_SPLITS[source]
        assert any(r["paper"] is not None for r in table)
        return
    for name, rows in tables.items():
        assert rows, f"{notebook} wrote table {name} without rows"
    assert set(tables) >= PAPER_TABLES.get(notebook, set()), sorted(PAPER_TABLES.get(notebook, set()) - set(tables))
    if notebook in ("01_sft", "02_ccpo_rl", "03_coepg_iterations", "04_ces_staged_rl", "07_agentcpm_androidlong"):
        setup = tables["setup_vs_paper"]
        assert setup and all(r["paper"] not in (None, "") for r in setup)
    if notebook == "01_sft":
        t2 = tables["table2_step_metrics"]
        assert [c for c in t2[0] if c.endswith(" SR")] == ["test SR"]  # AndroidControl's official test split
        in_range(t2, lambda k: k.endswith((" TM", " SR")), 0.0, 100.0)
        assert all(r["location"].startswith("CCPO Table 2") for r in tables["table2_vs_paper"])
        for stage in ("sft", "sft_3AO"):
            assert _deepspeed_checkpoints(runs / stage), f"01's {stage} trained without DeepSpeed"
    if notebook in ("01_sft", "03_coepg_iterations", "04_ces_staged_rl", "07_agentcpm_androidlong"):
        trained = {r["stage"]: r["steps"] for r in tables["stages"]}  # SFT stages trained the planned steps
        assert all(r["optimizer_steps"] == trained[r["stage"]] for r in tables["sft_schedule"]), tables["sft_schedule"]
        if "rl_schedule" in tables:  # and the RL stages the planned RL steps
            assert all(r["rl_steps"] == trained[r["stage"]] for r in tables["rl_schedule"]), tables["rl_schedule"]
    if notebook == "02_ccpo_rl":
        (schedule,) = tables["rl_schedule"]
        assert schedule["max_steps"] == cfg.rl.max_steps and schedule["from"] == "max_steps"  # the smoke budget wins
        rl_stages = [d for d in runs.iterdir() if (d / "rl_log.jsonl").is_file()]
        assert rl_stages and all(_deepspeed_checkpoints(d) for d in rl_stages)
        assert all(r["skipped"] is None and r["steps"] == cfg.rl.max_steps for r in tables["rl_stages"])
    if notebook == "03_coepg_iterations":
        assert (runs / "served").is_dir()  # the served verifier and grounder answered
    if notebook == "04_ces_staged_rl":  # trained on GUI-Odyssey, scored on its test split and AITZ's and AMEX's
        assert cfg.method_section("ces").eval.protocol == "ces_paper"  # CES Sec. 5.1: the acted element's box
        for row in tables["table1"]:
            assert in_range([row], lambda k: k.endswith("test SR"), 0.0, 100.0) == 3, row
        assert {"test SR", "aitz/test SR", "amex/test SR"} <= set(tables["table1"][0])
    if notebook == "07_agentcpm_androidlong":  # AgentCPM-GUI's AndroidControl rule on AndroidControl's test split
        caption = json.loads((folder / "table2_tm_em.json").read_text())["caption"]
        assert "androidcontrol test split under the agentcpm_androidcontrol protocol" in caption, caption
        in_range(tables["table2_tm_em"], lambda k: k.endswith((" TM", " EM")), 0.0, 100.0)
        # Stage I (AgentCPM-GUI Sec. 2.3): no 01 grounding model on a paper profile, so 07 trains its own on the
        # rows 00 wrote from AndroidControl's training screens, under DeepSpeed, listed before it trained
        converted = c.roots["GUIRL_DATA"] / PROFILE / source
        n_rows = json.loads((converted / "manifest.json").read_text())["grounding_samples"]
        assert n_rows > 0 and len((converted / "grounding_train.jsonl").read_text().splitlines()) == n_rows
        trained = {r["stage"]: r["steps"] for r in tables["stages"]}
        (planned,) = [r for r in tables["sft_schedule"] if r["stage"] == "agentcpm_grounding"]
        assert planned["kind"] == "grounding" and trained["agentcpm_grounding"] == planned["optimizer_steps"] >= 1
        assert _deepspeed_checkpoints(runs / "agentcpm_grounding"), "07's Stage I trained without DeepSpeed"
        assert "Stage I (agentcpm_grounding)" in {r["model"] for r in tables["table1_grounding"]}


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize(("case", "notebook", "source"), RUNS, ids=[r[0] for r in RUNS])
def test_paper_path(case: str, notebook: str, source: str, chain: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, folder in chain.roots.items():
        monkeypatch.setenv(var, str(folder))
    if notebook == "03_coepg_iterations":
        _serve_tiny(chain, monkeypatch)
    if notebook == "04_ces_staged_rl" and chain.tiny is None:
        from guirl.models import build_tiny_model

        chain.tiny = build_tiny_model(seed=load_config(PROFILE, overlays=OVERLAYS).seed)
    result = run_notebook(
        REPO / "notebooks" / f"{notebook}.ipynb",
        PROFILE,
        experiment=_experiment(notebook, source),
        overlays=OVERLAYS,
        overrides=_overrides(chain, notebook, source),
        quiet=True,
    )
    executed = json.loads(result.output.read_text())
    errors = [o for cell in executed["cells"] for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    check(chain, case, notebook, source, result)
