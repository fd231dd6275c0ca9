"""The notebooks: committed clean and on the contract (docs/architecture.md, notebooks/README.md),
the Makefile runs the same list, and each one runs end to end on the tiny profile with the smoke
overlay, checked through what it wrote: the ``Report`` sidecars (tables exist, row counts, metric
ranges) and the config it saved, which must be the one the runner resolved.

The smoke runs form two chains (``smoke_chains``), each in its own module
(tests/test_notebooks_smoke_a.py, ..._b.py) so that ``make test`` runs them side by side. A chain's
runs share one set of output folders and run in order, so a later notebook finds what an earlier
one generated (as in ``make reproduce``).
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, make_notebook
from guirl import dag
from guirl.config import Config, load_config
from guirl.runner import RunResult, default_experiment, list_notebooks, run_notebook

NOTEBOOKS = list_notebooks(REPO / "notebooks")
ALL_IPYNB = sorted((REPO / "notebooks").glob("*.ipynb"))
REQUIRED_PARAMETERS = ("profile", "experiment", "overrides", "config_path")
LOAD_CALL = "load_run_config(profile, experiment, overrides, config_path)"


def config_key_names() -> set[str]:
    """Every name a notebook parameter could shadow: top-level keys, section names and the keys
    inside every section (method sections included)."""
    names = set(Config.model_fields)
    for info in Config.model_fields.values():
        ann = info.annotation
        args = getattr(ann, "__args__", ())
        for model in (ann, *args):
            if isinstance(model, type) and hasattr(model, "model_fields"):
                names |= set(model.model_fields)
    return names


def papermill_parameters(source: str) -> list[str]:
    """The parameter names papermill itself reads from a ``parameters`` cell."""
    import nbformat
    from papermill.translators import PythonTranslator

    return [p.name for p in PythonTranslator.inspect(nbformat.v4.new_code_cell(source))]


def _is_flat_literal(node: ast.AST) -> bool:
    """A constant, or a list/tuple of constants (no names, calls or nested containers)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    return False


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def notebook_problems(nb: dict[str, Any]) -> list[str]:
    """What is wrong with a committed notebook (empty list: nothing)."""
    problems = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for i, cell in enumerate(code):
        if cell.get("outputs"):
            problems.append(f"code cell {i} has outputs")
        if cell.get("execution_count") is not None:
            problems.append(f"code cell {i} has an execution count")
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):  # nbformat 4.5: every cell has a unique id
        ids = [c.get("id") for c in nb.get("cells", [])]
        if None in ids:
            problems.append(f"cell {ids.index(None)} has no id (nbformat 4.5)")
        elif len(set(ids)) != len(ids):
            problems.append("two cells share an id")
    try:
        dag.notebook_reads("notebook", nb)
    except dag.DagError as err:
        problems.append(str(err).removeprefix("notebook: "))
    tagged = [c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        return problems + [f"{len(tagged)} cells tagged 'parameters' (need exactly 1)"]
    if tagged[0].get("cell_type") != "code":
        return problems + ["the 'parameters' cell is not a code cell"]
    try:
        tree = ast.parse(_source(tagged[0]))
    except SyntaxError as err:
        return problems + [f"parameters cell does not parse: {err.msg}"]
    names = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            problems.append(f"parameters cell line {stmt.lineno}: only `name = literal` assignments")
            continue
        if not _is_flat_literal(stmt.value):
            problems.append(f"parameters cell line {stmt.lineno}: `{stmt.targets[0].id}` is not a flat literal")
        names.append(stmt.targets[0].id)
    missing = [p for p in REQUIRED_PARAMETERS if p not in names]
    if missing:
        problems.append(f"parameters cell does not define {missing}")
    unparsed = [n for n in names if n not in papermill_parameters(_source(tagged[0]))]
    if unparsed:
        problems.append(f"papermill cannot parse the lines of {unparsed} (keep '=' out of their comments)")
    shadows = sorted((set(names) - set(REQUIRED_PARAMETERS)) & config_key_names())
    if shadows:
        problems.append(f"parameters {shadows} shadow config keys (use --override instead)")
    if "smoke" in names:
        problems.append("a `smoke` parameter: smoke budgets are the overlay configs/overlays/smoke.yaml")
    following = code[code.index(tagged[0]) + 1 : code.index(tagged[0]) + 2]
    if not following or LOAD_CALL not in _source(following[0]):
        problems.append(f"the code cell after the parameters does not call {LOAD_CALL}")
    return problems


# The checker itself must catch each problem (so the real check can fail).
GOOD = "profile = 'tiny'\nexperiment = None\noverrides = []\nconfig_path = None\n"
LOAD = f"from guirl.config import load_run_config\ncfg = {LOAD_CALL}"


@pytest.mark.parametrize(
    "params, body, reads, body_outputs, expected",
    [
        (GOOD, LOAD, [], False, []),  # a clean notebook
        (GOOD + "n_samples = 6\n", LOAD, ["00_x"], False, []),  # an own parameter, reading a notebook
        (GOOD, LOAD, [], True, ["code cell 1 has outputs", "code cell 1 has an execution count"]),
        (GOOD + "lr = 10 ** -3\n", LOAD, [], False, ["not a flat literal"]),  # an expression
        (GOOD + "d = {'a': 1}\n", LOAD, [], False, ["not a flat literal"]),  # a nested container
        (GOOD + "import os\n", LOAD, [], False, ["only `name = literal`"]),  # a statement
        ("profile = 'tiny'\nexperiment = None\n", LOAD, [], False, ["does not define ['overrides', 'config_path']"]),
        (GOOD + "seed = 0\n", LOAD, [], False, ["['seed'] shadow config keys"]),  # a top-level key
        (GOOD + "source = 'minigui'\n", LOAD, [], False, ["['source'] shadow config keys"]),  # data.source
        (GOOD + "smoke = False\n", LOAD, [], False, ["smoke budgets are the overlay"]),  # the old smoke flag
        (GOOD + "n = 6  # n=6 samples\n", LOAD, [], False, ["papermill cannot parse the lines of ['n']"]),
        (GOOD, "cfg = load_config(profile)", [], False, ["does not call load_run_config"]),  # resolves again
        (GOOD, LOAD, None, False, ["metadata.guirl.reads: missing"]),  # reads not declared
        (None, LOAD, [], False, ["0 cells tagged"]),  # no parameters cell
    ],
)
def test_notebook_checker(
    tmp_path: Path, params: str | None, body: str, reads: list | None, body_outputs: bool, expected: list[str]
) -> None:
    path = make_notebook(tmp_path / "n.ipynb", params or "x = 1", [body], reads)
    nb = json.loads(path.read_text())
    if params is None:
        nb["cells"][0]["metadata"]["tags"] = []
    if reads is None:
        del nb["metadata"]["guirl"]
    if body_outputs:
        nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "2"}]
        nb["cells"][1]["execution_count"] = 1
    problems = notebook_problems(nb)
    assert len(problems) == len(expected), problems
    for got, want in zip(problems, expected):
        assert want in got


def test_notebook_checker_wants_unique_cell_ids(tmp_path: Path) -> None:
    nb = json.loads(make_notebook(tmp_path / "n.ipynb", "x = 1", ["y = 2"], []).read_text())
    assert not any(p.endswith(("(nbformat 4.5)", "share an id")) for p in notebook_problems(nb))
    del nb["cells"][1]["id"]
    assert "cell 1 has no id (nbformat 4.5)" in notebook_problems(nb)
    nb["cells"][1]["id"] = nb["cells"][0]["id"]
    assert "two cells share an id" in notebook_problems(nb)


def test_committed_notebooks_are_clean() -> None:
    # Every notebook in notebooks/ (numbered or not); an empty folder passes trivially.
    problems = {p.name: notebook_problems(json.loads(p.read_text())) for p in ALL_IPYNB}
    assert {k: v for k, v in problems.items() if v} == {}


#: Literal paper rows a notebook may name: the paper prints them for one model size only.
ONE_SIZE_ROWS = {
    "Qwen2.5VL-7B SFT",  # CCPO Table 5: 7B rows only
    "Co-EPG-Web-7B-M1",  # Co-EPG Tables 3-4: 7B rows only
    "Co-EPG-Web-7B-M3",
    "GUI-R1-7B RL",  # CES Tables 1-2 name their executors' models, not a size of the model that runs
    "GUI-R1-7B + CES (Ours) Multi-Agent",
    "GUI-Owl-7B",
    "UI-R1-3B",
}


def test_paper_rows_and_splits_follow_the_run_not_a_literal() -> None:
    """A notebook's paper rows name the model size that runs (``paper_model_size``) and its tables
    the run's data set and main test split (``primary_test_split``): no code cell writes a sized
    paper row (``...-3B`` / ``...-7B``) or MiniGUI's split name as a literal, which on a paper
    profile would print 3B rows beside a 7B run or look up a split a converted data set has not."""
    import re

    sized = re.compile(r"[\"']([A-Za-z0-9.+ -]*-[37]B\b[^\"']*)[\"']")
    found = []
    for p in NOTEBOOKS:
        for i, cell in enumerate(json.loads(p.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            code = "\n".join(line.split("#")[0] for line in "".join(cell["source"]).splitlines())
            found += [f"{p.name} cell {i}: {m}" for m in sized.findall(code) if m not in ONE_SIZE_ROWS]
            found += [f"{p.name} cell {i}: test_in_domain" for _ in re.findall(r"[\"']test_in_domain[\"']", code)]
    assert found == []


def test_the_static_check_can_fail() -> None:
    import re

    sized = re.compile(r"[\"']([A-Za-z0-9.+ -]*-[37]B\b[^\"']*)[\"']")
    assert sized.findall('rows = {"SFT": "Qwen2.5VL-3B w/ SFT", "x": f"CCPO-7B-{h}"}') == [
        "Qwen2.5VL-3B w/ SFT",
        "CCPO-7B-{h}",
    ]
    assert sized.findall('rows = {"SFT": f"Qwen2.5VL-{size} w/ SFT"}') == []


def test_makefile_runs_the_same_notebooks_in_the_same_order() -> None:
    out = subprocess.run(
        ["make", "-s", "list-notebooks"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == [str(p.relative_to(REPO)) for p in NOTEBOOKS]


def test_notebook_names_are_unique_by_number() -> None:
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert len(numbers) == len(set(numbers)), numbers


# ---------------------------------------------------------------------------------- outputs
class Outputs:
    """What one notebook run wrote: the executed copy, the saved config, the report folder."""

    def __init__(self, result: RunResult, figures: Path) -> None:
        self.result = result
        self.folder = figures / result.profile / result.notebook.stem

    def sidecar(self, name: str) -> dict[str, Any]:
        path = self.folder / f"{name}.json"
        assert path.is_file(), f"{self.result.notebook.name} wrote no {name} (no {path.name})"
        return json.loads(path.read_text())

    def table(self, name: str, rows: int | Callable[[int], bool] | None = None) -> list[dict[str, Any]]:
        """The records of table ``name`` (its csv and md must exist too), with ``rows`` rows."""
        side = self.sidecar(name)
        assert side["kind"] == "table" and {f"{name}.csv", f"{name}.md"} <= set(side["files"])
        assert all((self.folder / f).is_file() for f in side["files"])
        records = side["data"]
        if isinstance(rows, int):
            assert len(records) == rows, (name, len(records))
        elif rows is not None:
            assert rows(len(records)), (name, len(records))
        return records

    def figure(self, name: str) -> dict[str, Any]:
        side = self.sidecar(name)
        assert side["kind"] == "figure" and all((self.folder / f).is_file() for f in side["files"])
        return side["data"]


def in_range(records: list[dict[str, Any]], columns: Callable[[str], bool], low: float, high: float) -> int:
    """Assert every value of the matching columns is a number in [low, high]; returns how many."""
    n = 0
    for rec in records:
        for key, value in rec.items():
            if columns(key) and value is not None and not (isinstance(value, float) and math.isnan(value)):
                assert low <= value <= high, (key, value)
                n += 1
    assert n > 0, "no column matched"
    return n


def check_saved_config_is_the_one_used(out: Outputs) -> Config:
    """The runner's saved config, the notebook's own saved copy and every sidecar agree."""
    saved = load_config(out.result.config_path)
    assert saved.hash() == out.result.config_hash
    assert load_config(out.folder / "config.yaml") == saved
    hashes = {json.loads(p.read_text())["config_hash"] for p in out.folder.glob("*.json")}
    assert hashes == {saved.hash()}
    return saved


def minigui_state(data: Path) -> dict[str, int]:
    folder = data / "tiny" / "minigui"
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*.jsonl"))}


MINIGUI_TEST = ("test_in_domain", "test_unseen_task", "test_unseen_app")


def check_00_data_prep(out: Outputs, state: dict[str, Any]) -> None:
    cfg = check_saved_config_is_the_one_used(out)
    n_tasks = cfg.data.n_train_tasks + cfg.data.n_test_tasks
    splits = out.table("splits", rows=4)
    assert {r["split"] for r in splits} == {"train", "test_in_domain", "test_unseen_task", "test_unseen_app"}
    assert sum(r["n_tasks"] for r in splits) == n_tasks == 18  # the smoke overlay's MiniGUI size
    in_range(splits, lambda k: k == "target_box_share", 0.0, 1.0)
    # 4 splits, the test splits together, the whole set; 3 quantities each; MiniGUI has no paper number
    sizes = out.table("split_sizes_vs_paper", rows=18)
    assert [r["split"] for r in sizes[::3]] == ["train", *sorted(set(MINIGUI_TEST)), "test (all)", "(all)"]
    assert all(r["paper"] is None and r["location"] == "" for r in sizes)
    counted = {(r["split"], r["quantity"]): r["ours"] for r in sizes}
    assert counted[("(all)", "episodes")] == n_tasks
    assert counted[("test (all)", "episodes")] == sum(r["n_tasks"] for r in splits if r["split"] != "train")
    actions = out.table("action_types", rows=lambda n: n >= 3)
    assert math.isclose(sum(r["share"] for r in actions), 1.0) and in_range(actions, "share".__eq__, 0.0, 1.0)
    assert sum(r["n_steps"] for r in actions) == sum(r["n_steps"] for r in splits)
    out.table("action_types_detail", rows=lambda n: n >= len(actions))
    assert sum(r["n_tasks"] for r in out.table("categories", rows=lambda n: n >= 2)) == n_tasks
    out.table("apps", rows=lambda n: n >= 2)
    t1 = out.table("table1_vs_paper", rows=8)  # CCPO Table 1: 4 data sets x (Tasks, Avg steps)
    assert all(r["ours"] is None and r["location"].startswith("CCPO Table 1") for r in t1)  # MiniGUI: no paper row
    in_range(out.table("lengths", rows=lambda n: n >= 2), lambda k: k.startswith("steps_"), 1, 100)
    for name in ("action_types_chart", "categories_apps", "lengths_hist"):
        out.figure(name)
    assert 1 <= len(out.figure("samples")["steps"]) <= 6
    state["minigui"] = minigui_state(out.result.output.parents[2] / "data")


def check_setup_table(out: Outputs, cfg: Config) -> None:
    """The paper's training setup beside the run's values (``setup_vs_paper``): exactly
    :func:`guirl.setups.run_setup` of the saved config, each status one of the three."""
    from guirl.setups import STATUSES, run_setup

    want = run_setup(cfg, out.result.notebook.stem).to_dict(orient="records")
    rows = out.table("setup_vs_paper", rows=len(want))
    assert len(rows) > 0 and all(r["status"] in STATUSES for r in rows)
    assert [(r["hyperparameter"], r["status"]) for r in rows] == [(r["hyperparameter"], r["status"]) for r in want]


def check_01_sft(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.studies.shared.agents import evaluated_histories, history_agents, sft_agents

    cfg = check_saved_config_is_the_one_used(out)
    check_setup_table(out, cfg)
    agents = sft_agents(cfg)
    assert [a.level for a in agents] == ["High", "Low"]  # tiny: the goal-only main agent and the Low executor
    histories, splits = len(cfg.eval.histories), 3
    # zero-shot and the executor at the first history setting, the main agent's model of each setting at it
    # (tiny: one model per setting, CCPO's separate 1AO / 3AO models)
    assert [a.history for a in history_agents(cfg)] == cfg.sft.histories[1:] == cfg.eval.histories[1:]
    trained = out.table("stages", rows=int(cfg.grounding.enabled) + len(agents) + len(history_agents(cfg)))
    check_sft_schedule(out, trained)
    assert [r["stage"] for r in trained] == (["grounding"] if cfg.grounding.enabled else []) + [
        a.name for a in agents + history_agents(cfg)
    ]
    table2 = out.table("table2_step_metrics", rows=2 + histories)
    assert [(r["model"], r["history"]) for r in table2] == [("zero-shot", cfg.eval.histories[0])] + [
        (a.name, h) for a in agents + history_agents(cfg) for h in evaluated_histories(cfg, a)
    ]
    assert in_range(table2, lambda k: k.endswith((" TM", " GR", " SR")), 0.0, 100.0) == len(table2) * splits * 3
    steps = out.table("step_metrics_ci", rows=(2 + histories) * splits)
    in_range(steps, lambda k: k in ("TM", "SR"), 0.0, 100.0)
    assert {r["n"] for r in steps} == {cfg.eval.max_test_steps}  # every split has more steps than the cap
    gain = out.table("sft_gain", rows=splits)  # main agent - zero-shot, where both were evaluated
    levels = out.table("instruction_level_gain", rows=splits)  # Low - High at the first history setting
    for g in gain + levels:  # paired, with its interval; the mark agrees with it
        assert g["lo"] <= g["diff"] <= g["hi"] and g["resolved"] == (g["lo"] > 0 or g["hi"] < 0)
        assert g["history"] == cfg.eval.histories[0] and g["n_steps"] <= cfg.eval.max_test_steps
    sr = {(r["model"], r["split"]): r["SR"] for r in steps if r["history"] == cfg.eval.histories[0]}
    for g in levels:
        assert math.isclose(g["diff"], sr[("SFT (Low)", g["split"])] - sr[("SFT (High)", g["split"])], abs_tol=1e-6)
    vs_paper = out.table("table2_vs_paper", rows=12)  # CCPO Table 2: 2 rows x 6 columns, ours on AC-High only
    for r in vs_paper:
        assert r["location"].startswith("CCPO Table 2") and r["paper"] is not None
        if r["column"].startswith("GUI-Odyssey"):
            assert r["ours"] is None  # no GUI-Odyssey numbers of ours
        elif not r["column"].endswith(" GR"):  # GR is undefined when a smoke split has no click step
            assert r["ours"] is not None
        if r["ours"] is not None:
            assert 0.0 <= r["ours"] <= 100.0 and math.isclose(r["difference"], r["ours"] - float(r["paper"]))
    t3 = out.table("agentcpm_table3_vs_paper", rows=10)  # AgentCPM-GUI-SFT: 5 data sets x (TM, EM)
    ours3 = {r["column"]: r["ours"] for r in t3 if r["ours"] is not None}
    assert set(ours3) == {"AC-Low TM", "AC-Low EM", "AC-High TM", "AC-High EM"}
    assert ours3["AC-Low EM"] == sr[("SFT (Low)", "test_in_domain")]
    assert ours3["AC-High EM"] == sr[("SFT (High)", "test_in_domain")]
    by_type = out.table("accuracy_by_action_type")
    assert len(by_type) >= 2 and all(0.0 <= r["exact"] <= 100.0 for r in by_type)
    assert out.figure("accuracy_by_action_type_chart")["gt_type"]
    online = out.table("online_task_sr", rows=1)
    in_range(online, lambda k: k.lower().endswith("_sr"), 0.0, 100.0)
    cats = out.table("online_by_category", rows=lambda n: n >= 2)
    assert cats[-1]["category"] == "(all)" and cats[-1]["n_tasks"] == cfg.eval.n_tasks
    assert math.isclose(cats[-1]["task_sr"], online[0]["task_sr"], abs_tol=1e-9)  # same tasks in every run
    assert sum(r["n_tasks"] for r in cats[:-1]) == cfg.eval.n_tasks
    for r in cats:
        assert r["lo"] <= r["task_sr"] <= r["hi"] and r["resolved"] == (r["lo"] > 0)
        assert r["expert_steps"] >= 1 and 0 <= r["n_within_turns"] <= r["n_tasks"]
        assert 0 <= r["n_text_free"] <= r["n_tasks"] and 0 <= r["subgoal_sr_at_reset"] <= 100
    assert sum(r["n_within_turns"] for r in cats[:-1]) == cats[-1]["n_within_turns"]
    assert sum(r["n_text_free"] for r in cats[:-1]) == cats[-1]["n_text_free"]
    for r in cats:  # the categories whose every task needs text (MiniGUI's templates: guirl.env.tasks)
        if r["category"] in ("item_creation", "information_query"):
            assert r["n_text_free"] == 0, r
    vs = out.table("online_vs_paper", rows=10)  # AndroidLong Table 6: 5 rows x (Task SR, std)
    ours = {r["column"]: r["ours"] for r in vs if r["row"] == "SFT (no memory)"}
    assert ours == {"Task SR": online[0]["task_sr"], "Task SR std": online[0]["task_sr_std"]}
    assert sum(r["ours"] is not None for r in vs) == 2
    out.figure("training_curve")
    # 01 read the MiniGUI folder 00 built in this session and did not build it again.
    assert minigui_state(out.result.output.parents[2] / "data") == state["minigui"]


def check_02_ccpo_rl(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.studies.ccpo_rl import ablation_runs, main_runs

    cfg = check_saved_config_is_the_one_used(out)
    check_setup_table(out, cfg)
    n_main, n_ab, histories, splits = len(main_runs(cfg)), len(ablation_runs(cfg)), len(cfg.eval.histories), 3
    (schedule,) = out.table("rl_schedule", rows=1)  # resolved before training, then trained to the step
    assert schedule["from"] == "max_steps" and schedule["max_steps"] == cfg.ccpo.rl.max_steps == cfg.rl.max_steps
    assert schedule["tasks"] > 0 and schedule["prompts_per_step"] == cfg.rl.prompts_per_step
    stages = out.table("rl_stages", rows=n_main + n_ab)
    assert all(s["steps"] == schedule["max_steps"] and s["trained"] > 0 for s in stages)
    rise = out.table("reward_rise", rows=n_main + n_ab)
    paired = out.table("rl_gains", rows=3 * splits * histories) + out.table("table5_paired", rows=3 * splits)
    paired += out.table("casc_inference_paired", rows=splits * histories)  # CCPO* - CCPO, Table 13's inference
    for r in rise + paired:
        assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0)
    for r in out.table("greedy_changed", rows=2 * splits * histories):  # SFT -> SO-RL, SFT -> CCPO
        assert r["before"] == "SFT" and 0.0 <= r["lo"] <= r["changed"] <= r["hi"] <= 100.0
        assert r["n_steps"] <= cfg.eval.max_test_steps and r["fixed"] + r["broken"] <= r["n_steps"]
    for r in out.table("table4_time_breakdown", rows=n_main):  # the parts and the rest add up to the step
        parts = [v for k, v in r.items() if k.endswith("(%)")]
        assert math.isclose(sum(parts), 100.0, abs_tol=1e-6) and r["s/step"] > 0 and r["rollouts (s)"] > 0
    table2 = out.table("table2_step_metrics", rows=3 * histories)  # SFT, SO-RL, CCPO per history
    assert {r["model"] for r in table2} == {"SFT", "SO-RL", "CCPO"}
    assert in_range(table2, lambda k: k.endswith((" TM", " SR")), 0.0, 100.0) == len(table2) * splits * 2
    for r in out.table("table2_vs_paper", rows=12):  # SFT, SO-RL, CCPO-3B-1AO / -3AO x TM, GR, SR
        assert r["location"].startswith("CCPO Table 2") and r["paper"] is not None
    t4 = out.table("table4_efficiency", rows=n_main)
    for r in t4:
        assert r["s/step"] > 0 and r["Token Length"] > 0 and r["Cost-model Speedup"] > 0
        assert math.isclose(r["Token Ratio"], 1.0 / (1.0 - r["Compression Rate (%)"] / 100.0), rel_tol=1e-9)
        if r["Model"] == "SO-RL":
            assert r["Compression Rate (%)"] == 0.0 and r["Speedup"] == 1.0
        else:  # CASC crops history screenshots: fewer tokens than the full history
            assert 0.0 <= r["History Compression (%)"] < 100.0
    assert len(out.table("table4_vs_paper")) == 14  # 3B rows: SO-RL 3 columns, CCPO 4, at 1AO and 3AO
    t5 = out.table("table5_ablation", rows=4)
    assert [r["row"] for r in t5] == ["SFT", "+ Semi-online", "+ CASC", "+ CASC + CR"]
    assert math.isclose(t5[3]["SR delta"], t5[3]["SR"] - t5[2]["SR"], abs_tol=1e-9)
    assert len(out.table("table5_vs_paper")) == 12
    assert [r["row"] for r in out.table("table10_min_max", rows=3)] == ["SO-RL", "CCPO MIN", "CCPO"]
    t11 = out.table("table11_rollouts", rows=1 + sum(r.tag.startswith("g") for r in ablation_runs(cfg)))
    assert cfg.rl.group_size in [r["rollouts"] for r in t11] and in_range(t11, lambda k: k == "overall", 0, 100) == len(
        t11
    )
    curve = out.figure("figure6_reward_vs_distance")
    assert curve["r_acc"][0] == 1.0 and curve["r_acc"][-1] < curve["r_acc"][0]  # full credit at the target
    for name in ("reward_kl_curves", "figure9_prompt_tokens"):
        assert out.figure(name)["step"]
    assert out.figure("roi_samples")["kind"]


def check_03_coepg_iterations(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.studies import coepg_iterations as ci

    cfg = check_saved_config_is_the_one_used(out)
    check_setup_table(out, cfg)
    sec = cfg.coepg
    k_max, n, splits = sec.iterations, sec.n_runs, 3
    assert k_max >= 2 and sec.planners == sec.verifiers == [] == sec.grounders  # pools trained here
    stages = out.table("stages", rows=2 * sec.pool_size + k_max * (2 + n) + 1 + (len(ci.ablation_runs(cfg)) - 1) * n)
    assert all(r["steps"] is not None for r in stages)
    check_sft_schedule(out, [r for r in stages if r["kind"] == "sft" and r["skipped"] is None])
    check_rl_schedule(out, [r for r in stages if r["kind"] == "rl" and r["skipped"] is None])

    def marks(rows: list[dict[str, Any]]) -> None:  # paired, with the interval; the mark agrees with it
        for g in rows:
            assert g["lo"] <= g["diff"] <= g["hi"] and g["resolved"] == (g["lo"] > 0 or g["hi"] < 0), g
            assert -100.0 <= g["diff"] <= 100.0

    def interval(rows: list[dict[str, Any]], col: str, low: float, high: float) -> None:
        for r in rows:
            if r[col] is not None:
                assert low <= r[f"{col} lo"] <= r[col] <= r[f"{col} hi"] <= high, (col, r)

    quality = out.table("figure6_data_quality", rows=k_max)  # D_0 .. D_{K-1}
    assert [r["data"] for r in quality] == [f"D{k}" for k in range(k_max)]
    interval(quality, "purity", 0.0, 100.0)
    for r in quality:
        assert 0 <= r["plans_verified"] <= r["plans_generated"] and r["steps_kept"] <= r["steps"]
    t6 = out.table("table6_iterations", rows=2 * k_max)
    assert [r["model"] for r in t6] == [ci.iteration_label(k, g) for k in range(1, k_max + 1) for g in (False, True)]
    assert in_range(t6, lambda c: c.endswith((" SR", " TM")), 0.0, 100.0) >= 2 * k_max * splits
    interval(t6, "Avg SR", 0.0, 100.0)
    assert {r["n_steps"] for r in t6} == {splits * sec.eval.max_test_steps * n}  # the same steps for every model
    assert all(0.0 < r["top answer (%)"] <= 100.0 for r in t6)  # 100: the model wrote one answer everywhere
    marks(out.table("iteration_gains", rows=len(ci.iteration_pairs(k_max))))
    interval(out.table("table3_dual_vs_e2e", rows=3), "Avg SR", 0.0, 100.0)
    marks(out.table("table3_paired", rows=2))
    t4 = out.table("table4_cdrem_ablation", rows=4)
    assert [r["weighting"] for r in t4] == ["single", "average", "prior", "cdrem"] and t4[0]["verdict"] == "baseline"
    marks(t4)
    interval(t4, "Avg SR", 0.0, 100.0)
    t5 = out.table("table5_priors", rows=8)
    marks(t5)
    w = {(r["priors"], r["confidence"]): r["w_phi at c=-0.5"] for r in t5}
    assert math.isclose(w[("1:1:2", "logprob")], 0.232697, abs_tol=1e-6)  # eq. 5 literal: the larger prior, less weight
    assert math.isclose(w[("1:1:2", "prob")], 0.478359, abs_tol=1e-6)  # the intent: more weight
    assert math.isclose(w[("1:1:1", "logprob")], 1 / 3, abs_tol=1e-9)
    curve = out.table("figure5_sr", rows=lambda m: m >= 4)  # single and C-DREM: step 0, checkpoints, final
    assert {r["run"] for r in curve} == {"w/o C-DREM", "C-DREM"} and {r["step"] for r in curve} >= {
        0,
        sec.grpo.max_steps,
    }
    interval(curve, "Avg SR", 0.0, 100.0)
    for name, rows in (
        ("table6_vs_paper", 6),
        ("table7_vs_paper", 6),
        ("table3_vs_paper", 2),
        ("table4_vs_paper", 4),
        ("table5_vs_paper_logprob", 4),
        ("table5_vs_paper_prob", 4),
        ("figure6_vs_paper", 2),
    ):
        vs = out.table(name, rows=rows)
        assert all(r["location"].startswith("Co-EPG") and r["paper"] is not None for r in vs)
    ours6 = [r for r in out.table("table6_vs_paper") if r["ours"] is not None]
    assert len(ours6) == 2 * min(k_max, 3)
    for name in ("figure2", "figure5", "figure6"):
        out.figure(name)


def check_06_attention_visualization(out: Outputs, state: dict[str, Any]) -> None:
    cfg = check_saved_config_is_the_one_used(out)
    models = ["SFT", "SO-RL", "CCPO", "CCPO (full history)"]  # CCPO: CASC-cropped history as at inference
    shares = ("box_share", "box_area", "roi_share", "current_share", "image_share")  # box_area: chance level
    per_step = out.table("attention_per_step")
    n_steps = len(per_step) // len(models)
    assert n_steps >= 1 and len(per_step) == n_steps * len(models)
    assert n_steps <= 3 * cfg.analysis.attention_steps  # at most attention_steps per test split
    assert [r["model"] for r in per_step[::n_steps]] == models
    in_range(per_step, lambda k: k in shares, 0.0, 1.0)
    summary = out.table("attention_shares", rows=len(models) * len(shares))
    for r in summary:  # mean with its 95% interval over the steps where the share is defined
        assert r["n"] == 0 or r["lo"] <= r["mean"] <= r["hi"], r
    in_range(summary, lambda k: k in ("mean", "lo", "hi"), 0.0, 1.0)
    cropped = [r for r in summary if r["model"] == "CCPO" and r["share"] == "roi_share" and r["n"] > 0]
    assert all(math.isclose(r["mean"], 1.0) for r in cropped)  # a CASC crop is its own ROI
    paired = out.table("attention_paired", rows=lambda n: 1 <= n <= 4 * 4)  # 4 pairs x 4 model-dependent shares
    for p in paired:  # B - A in points over the same steps; the mark agrees with the interval
        assert p["B"].startswith("CCPO") and p["A"] in ("SFT", "SO-RL")
        assert p["lo"] <= p["diff"] <= p["hi"] and p["resolved"] == (p["lo"] > 0 or p["hi"] < 0)
        assert -100.0 <= p["diff"] <= 100.0 and 1 <= p["n_steps"] <= n_steps
    assert out.figure("attention_shares_chart")["model"]
    overlay = out.figure("attention_overlay")
    assert list(overlay["models"]) == models and overlay["columns"][-1] == overlay["step"][2]
    for row in overlay["models"].values():
        assert len(row["panels"]) == len(overlay["columns"]) and row["panels"][-1] is not None  # current shown
        for panel in filter(None, row["panels"]):
            cells = [v for line in panel["map"] for v in line]  # a (rows, cols) grid of attention shares
            assert len({len(line) for line in panel["map"]}) == 1 and min(cells) >= 0 and sum(cells) <= 1.0 + 1e-6


def check_05_efficiency_profiling(out: Outputs, state: dict[str, Any]) -> None:
    cfg = check_saved_config_is_the_one_used(out)
    hist, screens, sides = cfg.analysis.histories, 2, 2  # MiniGUI and AndroidControl-size screens; full vs CASC
    settings = len(hist) * screens * sides
    tokens = out.table("tokens", rows=settings)
    in_range(tokens, lambda k: k in ("prompt_tokens", "visual_tokens"), 1, 50_000)
    arch = len(hist) * len(cfg.analysis.architecture_screens) * sides  # settings of each random-weight architecture
    prof = out.table("profile", rows=lambda n: n > settings and (n - settings) % arch == 0)  # tiny + mid (+ 3B, 7B)
    in_range(prof, "compression_pct".__eq__, 0.0, 99.999)  # CASC never adds tokens
    in_range(prof, lambda k: k in ("step_s", "speedup", "ceiling", "step_tflops", "peak_mb", "mfu"), 1e-9, 1e6)
    for r in prof:
        assert math.isclose(r["measured_over_ceiling"], r["speedup"] / r["ceiling"], rel_tol=1e-9)
        assert math.isclose(r["counted_over_analytic"], 1.0, rel_tol=1e-6)  # FlopCounterMode = analytic model
        assert r["visual_tokens"] < r["prompt_tokens"]
        if r["side"] == "full":
            assert r["compression_pct"] == 0.0 and r["speedup"] == 1.0
        else:
            assert r["compression_pct"] > 0.0
    assert {r["model"] for r in out.table("cost_fits")} == {r["model"] for r in prof}
    for r in out.table("headline", rows=len(hist)):  # the largest architecture, AndroidControl-size screens, CASC
        assert 0.0 < r["compression_pct"] < 100.0 and r["speedup"] > 0.0 and r["ceiling"] >= 1.0
        assert math.isclose(r["measured_over_ceiling"], r["speedup"] / r["ceiling"], rel_tol=1e-9)
    assert len(out.figure("step_time_vs_tokens")["prompt_tokens"]) == len(prof)
    latency = out.table("latency", rows=sides * len({r["model"] for r in prof}))
    in_range(latency, "first_token_s".__eq__, 1e-6, 600.0)
    # the paper's cells of our history settings: ours beside every efficiency cell, none beside accuracy (AC TM/GR/SR)
    for name, rows in (("table4", 7 * len(hist)), ("table14", 13 * len(hist)), ("table6", 9)):
        for r in out.table(f"{name}_vs_paper", rows=rows):
            assert (r["ours"] is None) == r["column"].startswith("AC "), r
    gain = out.table("table13_sr_gain", rows=3 * len(hist))  # three test splits
    for g in gain:
        assert g["lo"] <= g["diff"] <= g["hi"]
    t13 = out.table("table13_inference", rows=len(hist) * sides)
    in_range(t13, lambda k: k.startswith("flops_reduction_"), 1.0 - 1e-9, 100.0)
    in_range(t13, "SR".__eq__, 0.0, 100.0)
    roll = out.table("rollout_tokens", rows=2 * len(hist))  # SO-RL and CCPO runs of 02
    in_range(roll, "compression_pct".__eq__, -1e-9, 99.999)
    per_action = out.table("tokens_per_action", rows=lambda n: n >= 5)
    in_range(per_action, "tiny tokenizer".__eq__, 1.0, 200.0)


def check_08_seed_study(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.studies.seed_study import other_goal, train_seeds

    cfg = check_saved_config_is_the_one_used(out)
    seeds = train_seeds(cfg)
    assert len(seeds) == cfg.eval.n_train_seeds >= 2  # the smoke overlay trains one seed more than 01
    table = out.table("seed_sr", rows=2)  # the High agent and the Low executor, in-domain
    assert [(r["model"], r["split"]) for r in table] == [
        ("SFT (High)", "test_in_domain"),
        ("SFT (Low)", "test_in_domain"),
    ]
    for r in table:
        assert r["n_seeds"] == len(seeds) and 0 < r["n_steps"] <= cfg.eval.max_test_steps
        assert r["SR_lo"] <= r["SR"] <= r["SR_hi"] and math.isclose(r["half_width"], (r["SR_hi"] - r["SR_lo"]) / 2)
        per_seed = [float(x.split(": ")[1]) for x in r["per_seed"].split(", ")]
        assert len(per_seed) == len(seeds) and math.isclose(sum(per_seed) / len(seeds), r["SR"], abs_tol=0.06)
    for r in table:  # the permutation test of the seed spread: a p-value, and a null std no wider than the widest split
        assert 0.0 < r["seed_std_p"] <= 1.0 and 0.0 <= r["seed_std_null"] <= 50.0 * math.sqrt(
            len(seeds) / (len(seeds) - 1)
        )
    for t in out.table("seed_targets", rows=2):
        assert t["mean_ok"] == (t["SR"] >= 40.0) and t["std_ok"] == (t["seed_std"] <= 3.0)
        assert t["seeds_differ"] == (t["seed_std_p"] < 0.05)
    paired = out.table("seed_paired", rows=1)  # Low - High, over seeds and steps
    for g in paired:
        assert g["lo"] <= g["diff"] <= g["hi"] and g["resolved"] == (g["lo"] > 0 or g["hi"] < 0)
        assert g["n_seeds"] == len(seeds) and math.isclose(g["diff"], g["B_SR"] - g["A_SR"], abs_tol=1e-6)
    for a in out.table("seed_conclusions", rows=len(seeds)):
        assert a["same_conclusion"] == (a["verdict"] == a["verdict_all_seeds"] == paired[0]["verdict"])
        assert a["resolved"] == (a["lo"] > 0 or a["hi"] < 0)
    # what the goal is worth: each agent with its true goal (B) against another episode's goal (A)
    goal = out.table("goal_worth", rows=2)
    assert [(g["A"], g["B"]) for g in goal] == [(other_goal(r["model"]), r["model"]) for r in table]
    agent_sr = {r["model"]: r["SR"] for r in table}
    for g in goal:
        assert g["lo"] <= g["diff"] <= g["hi"] and g["resolved"] == (g["lo"] > 0 or g["hi"] < 0)
        assert g["n_seeds"] == len(seeds) and math.isclose(g["diff"], g["B_SR"] - g["A_SR"], abs_tol=1e-6)
        assert math.isclose(g["B_SR"], agent_sr[g["B"]], abs_tol=0.06)  # the true-goal side is the seed table's
    verdicts = {g["B"]: g["verdict"] for g in goal}
    for a in out.table("goal_worth_by_seed", rows=2 * len(seeds)):
        assert a["verdict_all_seeds"] == verdicts[a["B"]] and a["resolved"] == (a["lo"] > 0 or a["hi"] < 0)
        assert a["same_conclusion"] == (a["verdict"] == a["verdict_all_seeds"])
    assert len(out.figure("seed_spread")["SR"]) == 2 * len(seeds)
    # seed 0 is 01's model on 01's test steps: its SR equals 01's table cell
    sr01 = {
        r["model"]: r["SR"]
        for r in json.loads((out.folder.parent / "01_sft" / "step_metrics_ci.json").read_text())["data"]
        if r["history"] == cfg.eval.histories[0] and r["split"] == "test_in_domain"
    }
    for r in table:
        assert math.isclose(float(r["per_seed"].split(", ")[0].split(": ")[1]), sr01[r["model"]], abs_tol=0.06)


def check_04_ces_staged_rl(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.methods.ces.analysis import FAILURE_KINDS
    from guirl.studies.ces_staged_rl import SYSTEMS

    cfg = check_saved_config_is_the_one_used(out)
    check_setup_table(out, cfg)
    assert cfg.ces.eval.protocol == "ces_paper"  # the CES rule, 04 scores with it on every experiment
    sec, splits = cfg.ces, 3
    n_exec = 1 + (sec.weak_executor_steps is not None) + len(sec.table2_executors)
    stages = out.table("stages", rows=4 + (sec.weak_executor_steps is not None))
    check_sft_schedule(out, [r for r in stages if r["kind"] == "sft"])
    check_rl_schedule(out, [r for r in stages if r["kind"] == "rl"])
    rl = {r["stage"]: r for r in stages if r["kind"] == "rl"}
    assert {r["role"] for r in rl.values()} == {"ces.coordinator", "ces.state_tracker"}
    assert all(r["steps"] >= 1 and r["trained"] > 0 for r in rl.values())
    curves = out.figure("figure6_training_curves")
    assert set(curves["stage"]) == {"stage1_coordinator", "stage2_state_tracker"}
    assert {"reward", "reward/format", "reward/type", "reward/param"} <= set(curves["variable"])
    n_systems = len(SYSTEMS) + 3 * (n_exec - 1)  # every system with the main executor, three with the others
    steps = out.table("step_metrics_ci", rows=n_systems * splits)
    assert {r["n"] for r in steps} == {sec.eval.max_test_steps}  # every split has more steps than the cap
    in_range(steps, lambda k: k in ("TM", "SR", "TM_lo", "TM_hi", "SR_lo", "SR_hi"), 0.0, 100.0)
    for r in steps:
        assert r["SR_lo"] <= r["SR"] <= r["SR_hi"] and r["TM_lo"] <= r["TM"] <= r["TM_hi"]
    t1 = out.table("table1", rows=3)
    assert [r["row"] for r in t1] == ["Executor alone", "+ CES-P (warm-up)", "+ CES"]
    assert in_range(t1, lambda k: k.endswith((" Type", " SR")), 0.0, 100.0) == 3 * splits * 2
    t2 = out.table("table2", rows=3 * n_exec)
    for r in t2:
        if r["row"].endswith("Executor alone"):
            assert all(v is None for k, v in r.items() if k.endswith(" delta"))  # no delta (NaN: null in the sidecar)
        else:  # the change from the same executor alone
            base = next(b for b in t2 if b["row"] == r["row"].split(" | ")[0] + " | Executor alone")
            assert math.isclose(r["test_in_domain SR delta"], r["test_in_domain SR"] - base["test_in_domain SR"])
    t3 = out.table("table3", rows=4)
    assert [r["row"] for r in t3] == ["CES", "w/o Coordinator", "w/o State Tracker", "w/o RL (SFT only)"]
    paired = (
        out.table("table1_paired", rows=2 * splits * 2)
        + out.table("table2_paired", rows=2 * n_exec * splits)
        + out.table("table3_paired", rows=3 * splits)
    )
    for r in paired:  # paired on the same test steps; the mark agrees with the interval
        assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0)
        assert (
            math.isclose(r["diff"], r["B_value"] - r["A_value"], abs_tol=1e-6)
            and r["n_steps"] <= sec.eval.max_test_steps
        )
    for name, rows in (("table1_vs_paper", 69), ("table2_vs_paper", 90), ("table3_vs_paper", 24)):
        vs = out.table(name, rows=rows)  # every cell of the paper's table, ours beside its GUI-Odyssey columns
        assert all(r["location"].startswith("CES Table") for r in vs)
        ours = [r for r in vs if r["ours"] is not None]
        assert ours and all(r["column"].startswith("GUI-Odyssey") for r in ours)
    cats = list(sec.online_categories)
    online = out.table("online_by_category", rows=2 * (len(cats) + 1))
    assert {r["category"] for r in online} == {*cats, "(all)"} and {r["model"] for r in online} == {
        "Executor alone",
        "CES",
    }
    for r in online:
        assert r["lo"] <= r["task_sr"] <= r["hi"] and r["resolved"] == (r["lo"] > 0)
        assert r["n_runs"] == cfg.eval.n_seeds and 0.0 <= r["subgoal_sr"] <= 100.0
    assert [r["n_tasks"] for r in online if r["category"] == "(all)"] == [sec.eval.n_tasks] * 2
    for r in out.table("online_paired", rows=2):
        assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0)
    fails = out.table("figure5_failures", rows=2 * len(FAILURE_KINDS))
    for model in ("Executor alone", "CES"):
        part = [r for r in fails if r["model"] == model]
        assert [r["kind"] for r in part] == list(FAILURE_KINDS)
        failed = sum(s["n_counted"] * (1 - s["SR"] / 100) for s in steps if s["model"] == model)
        assert sum(r["n"] for r in part) == round(failed)  # every failed step gets exactly one kind
        for r in part:
            assert r["lo"] <= r["share"] <= r["hi"] and r["n"] <= r["n_steps"]
    for r in out.table("figure5_paired", rows=len(FAILURE_KINDS)):
        assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0)
    assert len(out.table("figure5_vs_paper", rows=4)) == 4
    temporal = out.table("figure2_temporal", rows=4 * len(sec.temporal_gaps))  # 3 models and the annotated state
    for r in temporal:
        assert r["lo"] <= r["accuracy"] <= r["hi"] and 0 <= r["accuracy"] <= 100 and r["chance"] == 50.0
        assert 1 <= r["n"] <= sec.temporal_pairs and r["gap"] in sec.temporal_gaps
    for name in ("figure5_chart", "figure2_chart"):
        out.figure(name)


def planned_vs_trained(out: Outputs, table: str, trained: list[dict[str, Any]]) -> list[tuple[dict, dict]]:
    """``(planned, trained)`` row pairs of the schedule ``table`` (written before the stages train)
    and the ``stages`` table's rows ``trained``: the schedule has one row per trained stage, by name."""
    plan = out.table(table, rows=len(trained))
    by_name = {r["stage"]: r for r in trained}
    assert sorted(r["stage"] for r in plan) == sorted(by_name)
    return [(want, by_name[want["stage"]]) for want in plan]


def check_sft_schedule(out: Outputs, trained: list[dict[str, Any]]) -> None:
    """``sft_schedule``, written before the stages train, names the stages of ``trained`` (the
    ``stages`` table's SFT rows), with the records they trained on and the optimizer steps they
    trained; its own columns agree with each other."""
    for want, got in planned_vs_trained(out, "sft_schedule", trained):
        assert want["optimizer_steps"] == got["steps"] >= 1 and want["records"] == got["records"], (want, got)
        assert want["global_batch"] == want["per_device_batch"] * want["grad_accum"] * want["processes"]
        assert (want["from"] == "epochs") == (want["epochs"] is not None), want


def check_rl_schedule(out: Outputs, trained: list[dict[str, Any]]) -> None:
    """``rl_schedule``, written before the stages train, names the RL stages of ``trained`` (the
    ``stages`` table's RL rows) with their roles and the RL steps they trained; its own columns
    agree with each other."""
    for want, got in planned_vs_trained(out, "rl_schedule", trained):
        assert want["rl_steps"] == got["steps"] >= 1 and want["role"] == got["role"], (want, got)
        assert want["samples_per_step"] == want["prompts_per_step"] * want["group_size"]
        assert want["optimizer_updates"] == want["rl_steps"] * want["mini_batches"]


def check_07_agentcpm_androidlong(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.actions.formats import FORMAT_NAMES
    from guirl.env.tasks import CATEGORIES
    from guirl.methods.androidlong.errors import ERROR_TYPES
    from guirl.studies.agentcpm_androidlong import ACPM_LABELS, AL_ROWS, GROUNDING_TASKS, run_folder

    cfg = check_saved_config_is_the_one_used(out)
    check_setup_table(out, cfg)
    splits = 3

    def marks_agree(rows):
        for r in rows:
            assert r["lo"] <= r["diff"] <= r["hi"] and r["resolved"] == (r["lo"] > 0 or r["hi"] < 0), r

    # AgentCPM-GUI: de-duplication and data
    sweep = out.table("dedup_sweep", rows=lambda n: n >= 5)
    assert [r["kept"] for r in sweep] == sorted(r["kept"] for r in sweep)  # a higher threshold keeps more
    in_range(sweep, "kept_share".__eq__, 0.0, 100.0)
    (data,) = out.table("agentcpm_data", rows=1)
    assert data["kept"] <= data["trajectories"] and data["train_steps"] == data["kept_steps"] - data["schema_left_out"]
    stages = out.table("stages", rows=6)
    assert all(r["steps"] >= 1 for r in stages)
    assert [r["kind"] for r in stages] == ["sft", "sft", "sft", "rl", "rl", "rl"]
    check_sft_schedule(out, stages[:3])
    check_rl_schedule(out, stages[3:])
    marks_agree(out.table("reward_rise", rows=3))
    assert set(out.figure("rl_curves")["stage"]) == {"agentcpm_rft", "androidlong_grpo_nomem", "androidlong_grpo_mem"}
    # Table 1: Stage I and the two compact JSON models on the three CAGUI tasks
    t1 = out.table("table1_grounding", rows=3 if cfg.grounding.enabled else 2)
    assert [r["model"] for r in t1][-2:] == [ACPM_LABELS["sft"], ACPM_LABELS["rft"]]
    for r in t1:
        for task in GROUNDING_TASKS.values():
            assert r[f"{task}_lo"] <= r[task] <= r[f"{task}_hi"] and 1 <= r["n"] <= cfg.agentcpm.grounding_samples
    ours1 = [r for r in out.table("table1_vs_paper") if r["ours"] is not None]
    assert {r["column"] for r in ours1} == {"Fun2Point", "Text2Point", "Bbox2Text", "Average"}
    assert all(r["row"] == "AgentCPM-GUI" for r in ours1)
    # Table 2: TM / EM of ours and of 01's models re-scored through the unified mapping
    counts = out.table("schema_steps", rows=splits)
    assert all(r["counted"] + r["left_out"] == r["steps"] for r in counts)
    for r in out.table("mapping_identity", rows=2):  # the identity mapping agrees with direct scoring
        assert r["steps"] >= 1 and r["type_match_agree"] == 100.0 and r["exact_agree"] == 100.0
    t2 = out.table("table2_tm_em", rows=lambda n: n >= 3)
    models = [r["model"] for r in t2]
    assert models[:2] == [ACPM_LABELS["sft"], ACPM_LABELS["rft"]]
    assert all("-> unified]" in m for m in models[2:]) and any(m.startswith("SFT (High)") for m in models)
    in_range(t2, lambda k: k.endswith((" TM", " EM")), 0.0, 100.0)
    in_range(out.table("table2_ci"), lambda k: k in ("TM", "SR"), 0.0, 100.0)
    t3 = out.table("table3_paired", rows=lambda n: 2 * splits <= n <= 3 * splits)
    marks_agree(t3)
    assert {r["metric"] for r in t3} == {"TM", "EM"}
    ours23 = {(r["row"], r["column"]) for r in out.table("table2_3_vs_paper") if r["ours"] is not None}
    assert ours23 == {
        (row, f"AC-High {m}") for row in ("AgentCPM-GUI", "AgentCPM-GUI-SFT", "AgentCPM-GUI-RFT") for m in ("TM", "EM")
    }
    tokens = out.table("tokens_per_action", rows=len(FORMAT_NAMES))
    in_range(tokens, "tokens per action".__eq__, 1.0, 200.0)
    in_range(tokens, "expressible (%)".__eq__, 0.0, 100.0)
    # AndroidLong: Table 6 on the long-loop tasks and on the other categories, paired differences, per category /
    # app over both, figures, taxonomy
    episodes = [json.loads(line) for line in (run_folder(cfg) / "online_episodes.jsonl").read_text().splitlines()]
    for name, table, paired in (
        ("long_loop", "table6_online", "table6_paired"),
        ("other", "table6_other_categories", "table6_other_paired"),
    ):
        t6 = out.table(table, rows=4)
        assert [r["model"] for r in t6] == list(AL_ROWS.values())
        in_range(t6, lambda k: k.endswith("SR") or k.endswith("SR std"), 0.0, 100.0)
        assert all(r["n_runs"] == cfg.eval.n_seeds and r["n_tasks"] == cfg.eval.n_tasks for r in t6)
        t6p = out.table(paired, rows=8)
        marks_agree(t6p)
        sr = {r["model"]: r["Task SR"] for r in t6}
        for r in t6p:
            if r["metric"] == "Task SR":
                assert math.isclose(r["diff"], sr[r["B"]] - sr[r["A"]], abs_tol=1e-6)
        # the table's tasks are its set's categories: long loops only, then every other category
        cats = {e["category"] for e in episodes if e["task_set"] == name}
        want = {"long_loop"} if name == "long_loop" else set(CATEGORIES) - {"long_loop"}
        assert cats <= want and len(cats) == min(len(want), cfg.eval.n_tasks), (name, cats)  # categories take turns
    vs6 = out.table("table6_vs_paper", rows=10)
    assert sum(r["ours"] is not None for r in vs6) == 8  # 4 rows x (Task SR, std); not the w/o-auto-entering row
    long6 = {r["model"]: r["Task SR"] for r in out.table("table6_online")}
    assert all(
        math.isclose(r["ours"], long6[r["row"]]) for r in vs6 if r["ours"] is not None and r["column"] == "Task SR"
    )
    cats = out.table("by_category", rows=lambda n: n >= 4)
    assert {r["category"] for r in cats} == {e["category"] for e in episodes} >= {"long_loop"}  # both task sets
    in_range(cats, lambda k: k in ("Subgoal SR", "Task SR"), 0.0, 1.0)
    apps = out.table("by_app", rows=lambda n: n >= 4)
    for r in cats + apps:
        assert r["model"] in AL_ROWS.values() and r["n_tasks"] >= 1
    for name in ("figure7_subgoal_sr", "figures8_9_category", "figures10_11_app"):
        assert out.figure(name)["model"]
    out.table("tables8_9_vs_paper")
    errors = out.table("error_taxonomy", rows=4)
    for r in errors:  # every episode of every run of both task sets classified once
        assert sum(r[k] for k in (*ERROR_TYPES, "success")) == 2 * cfg.eval.n_tasks * cfg.eval.n_seeds


def check_09_tiny_pretraining(out: Outputs, state: dict[str, Any]) -> None:
    from guirl.env.pretraining import PROBES, SKILLS

    cfg = check_saved_config_is_the_one_used(out)
    p = cfg.pretrain
    assert p is not None and not p.rebuild  # make reproduce scores the shipped base; make tiny-base rebuilds it
    data = out.table("data", rows=len(SKILLS))
    assert {r["skill"] for r in data} == set(SKILLS) and all(r["train"] > 0 for r in data)
    assert {r["skill"]: r["probes"] for r in data if r["probes"]} == {k: p.probe_per_skill for k in PROBES}
    probes = out.table("probes", rows=2 * len(PROBES))
    assert {r["model"] for r in probes} == {"random init", "tiny-base (shipped)"}
    for r in probes:
        assert r["n"] == p.probe_per_skill and 0 <= r["lo"] <= r["accuracy"] <= r["hi"] <= 100
    assert all(r["accuracy"] == 0 for r in probes if r["model"] == "random init")  # random weights read nothing
    paired = out.table("probes_paired", rows=len(PROBES))
    for r, base in zip(paired, [r for r in probes if r["model"] != "random init"]):
        assert math.isclose(r["B_acc"], base["accuracy"]) and math.isclose(
            r["diff"], r["B_acc"] - r["A_acc"], abs_tol=1e-9
        )
    out.table("probe_examples", rows=lambda n: 0 < n <= 3 * len(PROBES))
    assert out.figure("probes_chart")


#: One check per notebook, run on its smoke outputs: a new notebook needs one (the pattern of
#: the recommenders project's notebook tests: assert tables, row counts and metric ranges).
CHECKS: dict[str, Callable[[Outputs, dict[str, Any]], None]] = {
    "00_data_prep": check_00_data_prep,
    "01_sft": check_01_sft,
    "02_ccpo_rl": check_02_ccpo_rl,
    "03_coepg_iterations": check_03_coepg_iterations,
    "04_ces_staged_rl": check_04_ces_staged_rl,
    "05_efficiency_profiling": check_05_efficiency_profiling,
    "06_attention_visualization": check_06_attention_visualization,
    "07_agentcpm_androidlong": check_07_agentcpm_androidlong,
    "08_seed_study": check_08_seed_study,
    "09_tiny_pretraining": check_09_tiny_pretraining,
}


def test_every_notebook_has_an_output_check() -> None:
    assert set(CHECKS) == {p.stem for p in NOTEBOOKS}


#: The notebook that splits the smoke runs in two chains (``smoke_chains``).
SPLIT_AT = "02_ccpo_rl"


def smoke_chains(notebooks: list[Path], split_at: str = SPLIT_AT) -> dict[str, list[Path]]:
    """The smoke runs as two chains that ``make test`` runs side by side (one test module each,
    ``SMOKE_MODULE``): ``"a"``, the notebook ``split_at`` and every notebook that reads it, directly
    or not; ``"b"``, the others. Each chain starts with the notebooks its members read (00 and 01 run
    in both), in the DAG's order. One chain when ``split_at`` is not among ``notebooks``."""
    by_stem = {p.stem: p for p in notebooks}
    reads = {stem: set(dag.notebook_reads(p)) for stem, p in by_stem.items()}

    def upstream(stems: set[str]) -> set[str]:
        out, todo = set(), list(stems)
        while todo:
            for r in reads.get(todo.pop(), ()):
                if r not in out:
                    out.add(r)
                    todo.append(r)
        return out

    if split_at not in by_stem:
        return {"a": list(notebooks)}
    a = {split_at} | {stem for stem in by_stem if split_at in upstream({stem})}
    b = set(by_stem) - a - upstream(a)
    chains = {"a": a | upstream(a), "b": b | upstream(b)} if b else {"a": a | upstream(a)}
    return {name: [p for p in notebooks if p.stem in stems] for name, stems in chains.items()}


def test_smoke_chains_cover_every_notebook_after_what_it_reads() -> None:
    chains = smoke_chains(NOTEBOOKS)
    assert {p.stem for ps in chains.values() for p in ps} == {p.stem for p in NOTEBOOKS}
    for ps in chains.values():
        stems = [p.stem for p in ps]
        for i, p in enumerate(ps):
            assert set(dag.notebook_reads(p)) <= set(stems[:i]), (p.stem, stems)
    if len(chains) == 2:  # 02 and its readers in one, the rest in the other
        assert {p.stem for p in chains["a"]} >= {"02_ccpo_rl", "05_efficiency_profiling", "06_attention_visualization"}
        assert "02_ccpo_rl" not in {p.stem for p in chains["b"]}


#: Per-test timeouts (seconds) of the smoke runs that outgrow the Makefile's TEST_TIMEOUT on a loaded
#: 2-core host. 02 trains 8 RL stages: with about 9 CPU-bound jobs per core (load average 15-21), 5 of
#: them took 66 min (13 min each; 00 took 55 s and 01 625 s); a second `make test` beside this one
#: (2 jobs per core) puts 02 at about 28 min, so 3600 s leaves about 2x.
#: 07 trains 6 stages (3 SFT, 3 RL) and plays 4 models online: 379 s at load average 4-8 (01: 299 s
#: beside it), so about 3x that at 02's load; 1800 s leaves about 1.5x.
#: 03 runs two Co-EPG iterations (pools, verifier, SFT, GRPO, distillation): 432 s beside chain "a"
#: on 2 idle cores (`make test` from a fresh clone; 02 took 416 s there), so a host busy with as much
#: other work puts it near the default 900 s; 1800 s leaves about 2x.
SMOKE_TIMEOUT_S = {"02_ccpo_rl": 3600, "03_coepg_iterations": 1800, "07_agentcpm_androidlong": 1800}

#: The module that holds a chain's smoke runs (one module per chain: ``make test``'s pytest-xdist
#: ``--dist loadscope`` runs a module in order on one process, and the chains side by side).
SMOKE_MODULE = "test_notebooks_smoke_{chain}.py"


def smoke_chain_test(chain: str) -> Callable[..., None] | None:
    """The smoke test of one chain (``smoke_chains``), for its module ``SMOKE_MODULE``: one case per
    notebook, in the chain's order, each checked by ``CHECKS``. ``None`` when there is no such chain
    (no notebooks, or no split), so that an empty chain collects no test rather than a skipped one.
    The chain's output folders (``smoke_roots``) and what its checks leave for later ones
    (``smoke_state``) are module fixtures of conftest.py."""
    notebooks = smoke_chains(NOTEBOOKS).get(chain) if NOTEBOOKS else None
    if not notebooks:
        return None

    def param(notebook: Path):
        marks = [pytest.mark.timeout(SMOKE_TIMEOUT_S[notebook.stem])] if notebook.stem in SMOKE_TIMEOUT_S else []
        return pytest.param(notebook, id=notebook.stem, marks=marks)

    @pytest.mark.notebook
    @pytest.mark.slow
    @pytest.mark.parametrize("notebook", [param(p) for p in notebooks])
    def test_notebook_smoke(
        notebook: Path,
        smoke_roots: dict[str, Path],
        smoke_state: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        for var, folder in smoke_roots.items():
            folder.mkdir(parents=True, exist_ok=True)
            monkeypatch.setenv(var, str(folder))
        result = run_notebook(notebook, "tiny", overlays=["smoke"], quiet=True)
        assert result.output == (smoke_roots["GUIRL_RUNS"] / "tiny" / notebook.name).resolve()
        executed = json.loads(result.output.read_text())
        errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert errors == []
        # the run's config: the profile, the notebook's own experiment file (if any) and the smoke overlay
        assert load_config(result.config_path) == load_config(
            "tiny", default_experiment(notebook, "tiny"), overlays=["smoke"]
        )
        CHECKS[notebook.stem](Outputs(result, smoke_roots["GUIRL_FIGURES"]), smoke_state)

    return test_notebook_smoke


def test_every_smoke_chain_has_its_module() -> None:
    """A chain without its module would never run; a module without its chain collects nothing."""
    modules = {p.name for p in (REPO / "tests").glob(SMOKE_MODULE.format(chain="*"))}
    assert modules == {SMOKE_MODULE.format(chain=c) for c in smoke_chains(NOTEBOOKS)}
    for chain in smoke_chains(NOTEBOOKS):
        text = (REPO / "tests" / SMOKE_MODULE.format(chain=chain)).read_text()
        assert f'smoke_chain_test("{chain}")' in text


@pytest.mark.notebook
@pytest.mark.slow
def test_data_prep_with_a_source_override_saves_the_config_it_used(
    tmp_path: Path, isolated_outputs: dict[str, Path]
) -> None:
    """00 with --override data.source=aitz: the saved config says aitz, and so does what 00 wrote
    (it used to save 'minigui' while converting the `-p source` it was given)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    aitz = fixtures.make_aitz(tmp_path / "raw")
    overrides = ["data.source=aitz", f"data.path={aitz}"]
    result = run_notebook(REPO / "notebooks" / "00_data_prep.ipynb", "tiny", overrides=overrides, quiet=True)
    out = Outputs(result, isolated_outputs["GUIRL_FIGURES"])
    saved = check_saved_config_is_the_one_used(out)
    assert saved == load_config("tiny", overrides=overrides) and saved.data.source == "aitz"
    splits = out.table("splits", rows=lambda n: n >= 1)
    assert sum(r["n_tasks"] for r in splits) == 2  # the fixture's two AITZ episodes
    assert (isolated_outputs["GUIRL_DATA"] / "tiny" / "aitz" / "episodes.jsonl").is_file()
    assert not (isolated_outputs["GUIRL_DATA"] / "tiny" / "minigui").exists()
