"""Evaluation for the notebooks, bound to a resolved run config (top layer).

One line each in a notebook:

* :func:`eval_policy`: an :class:`~guirl.rollout.HFPolicy` from a checkpoint folder or a
  finished training stage, with the run's pixel budget, dtype, device and ``eval`` budgets.
* :func:`evaluation_grid`: offline step-level evaluation of policies x test splits x history
  settings -> prediction records (:mod:`guirl.metrics.records`); :func:`evaluate_offline` is
  one cell of it with explicit arguments.
* :func:`step_metrics`: TM / GR / SR with bootstrap intervals per (model, history, split);
  :func:`table2`: the CCPO Table 2 layout (one row per model and history, TM / GR / SR per
  split); :func:`gain_table`: the SR gain of one model over another;
  :func:`accuracy_by_action_type` and :func:`plot_accuracy_by_action_type`.
* :func:`evaluate_online`: online MiniGUI play over runs (AndroidLong protocol: Task SR and
  Subgoal SR, mean and std over runs) and :func:`online_table`.

The loops themselves live in :mod:`guirl.rollout` and take any :class:`~guirl.rollout.Policy`,
so the tests drive every function here with scripted policies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from guirl import timing
from guirl.actions.types import TEXT_TYPES, ActionType
from guirl.config import Config
from guirl.configbase import Sampling, stage_updates
from guirl.data.schema import Episode
from guirl.data.splits import Split
from guirl.metrics.paired import difference_row, paired_difference, paired_matrix
from guirl.metrics.protocols import get_protocol
from guirl.metrics.records import PREDICTION_FIELDS, prediction_record
from guirl.metrics.summary import summarize_online, summarize_steps
from guirl.prompts import PromptSpec, prompt_spec
from guirl.rollout import Agent, HFPolicy, HistoryBuilder, Policy, agent_steps, derive_seed, play_online, step_prompts

__all__ = [
    "METRICS",
    "ONLINE_EPISODE_COLUMNS",
    "ONLINE_TASK_SEED_OFFSET",
    "OnlineEvaluation",
    "TEXT_ACTIONS",
    "accuracy_by_action_type",
    "eval_policy",
    "evaluate_offline",
    "evaluate_online",
    "evaluation_grid",
    "paper_eval_config",
    "gain_table",
    "online_by_category",
    "online_task_facts",
    "online_caption",
    "online_for_paper",
    "paired_gain_table",
    "table2_for_paper",
    "online_table",
    "online_tasks",
    "online_prefix",
    "plot_accuracy_by_action_type",
    "step_metrics",
    "table2",
    "task_facts",
]

#: Step metrics of the CCPO Table 2 layout, in column order.
METRICS = ("TM", "GR", "SR")
#: Online task sets are drawn with ``seed = cfg.seed + ONLINE_TASK_SEED_OFFSET (+ run)``, away
#: from the seeds that draw the training and test tasks.
ONLINE_TASK_SEED_OFFSET = 1000
#: Columns of the per-episode online rows (``online_episodes.jsonl``), after ``run``; ``actions``: the
#: parsed actions the agent played, in order (``Action.to_dict``), so a failure can be read back;
#: ``stopped`` / ``trace``: whether the agent ended the episode itself and what each turn did
#: (:func:`guirl.rollout.play_online`), which AndroidLong's error taxonomy reads.
ONLINE_EPISODE_COLUMNS = (
    "task_id",
    "category",
    "success",
    "subgoal_rate",
    "turns",
    "n_unparsable",
    "n_invalid",
    "actions",
    "stopped",
    "trace",
)


# ----------------------------------------------------------------------------- policies
def eval_policy(
    cfg: Config, source: str | Path | Mapping[str, Any], *, progress: bool = False, desc: str = "generate"
) -> HFPolicy:
    """A greedy-by-default :class:`HFPolicy` for evaluation.

    ``source`` is a checkpoint folder (e.g. the model before training) or a finished training
    stage's result (:func:`guirl.train.launch.run_stage`; LoRA adapters are merged). The model
    is loaded with ``model.min_pixels`` / ``max_pixels`` / ``torch_dtype`` on ``runtime.device``;
    generation uses ``eval.max_new_tokens`` and ``eval.batch_size``; ``runtime.threads`` (when set)
    sets torch's CPU threads of this process.
    """
    from guirl.models import load_policy, load_trained

    if cfg.runtime.threads is not None:
        import torch

        torch.set_num_threads(cfg.runtime.threads)
    m = cfg.model
    kw = dict(min_pixels=m.min_pixels, max_pixels=m.max_pixels, dtype=m.torch_dtype, device=cfg.runtime.device)
    with timing.phase("io", "load model"):
        model, processor = (
            load_trained(dict(source), **kw) if isinstance(source, Mapping) else load_policy(source, **kw)
        )
    return HFPolicy(
        model,
        processor,
        max_new_tokens=cfg.eval.max_new_tokens,
        batch_size=cfg.eval.batch_size,
        progress=progress,
        desc=desc,
    )


# ----------------------------------------------------------------------------- offline, step level
def evaluate_offline(
    policy: Policy | Agent,
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    protocol: str,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
    model_name: str,
    split: str,
    max_steps: int | None = None,
    history_builder: HistoryBuilder | None = None,
    labels: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Step-level evaluation of one split under one history setting: every step with its
    ground-truth history (the first ``max_steps`` in episode order), answered greedily in one
    batched call, parsed with ``spec.output_format`` and scored with ``protocol``.

    ``policy`` may be an :class:`~guirl.rollout.Agent` (several models or a memory): it answers
    the same steps through :func:`guirl.rollout.agent_steps` (episodes in lockstep, so its state
    runs forward) and its text is parsed with its own ``output_format``; no ``history_builder``;
    a step whose :class:`~guirl.rollout.AgentStep` carries ``info`` adds it as ``agent_info``.
    ``history_builder`` rewrites the ground-truth history (see
    :func:`guirl.rollout.step_prompts`); ``labels`` are extra fields put into every record
    (e.g. ``{"train_seed": 1}``). Returns one prediction record per step
    (:data:`guirl.metrics.records.PREDICTION_FIELDS` plus ``labels``), in episode order. An
    unknown protocol fails before anything is generated.
    """
    get_protocol(protocol)
    extra = dict(labels or {})
    clash = set(extra) & set(PREDICTION_FIELDS)
    if clash:
        raise ValueError(f"evaluate_offline: labels {sorted(clash)} would overwrite prediction fields")
    if isinstance(policy, Agent):
        if history_builder is not None:
            raise ValueError("evaluate_offline: an agent builds its own prompts; history_builder is for a policy")
        answered = agent_steps(
            policy,
            episodes,
            spec,
            image_root=image_root,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            max_steps=max_steps,
        )
        outputs = [(a.episode, a.t, a.step.text, dict(a.step.info or {})) for a in answered]
        output_format = policy.output_format
    else:
        with timing.phase("images", "step prompts"):
            items = step_prompts(
                episodes,
                spec,
                min_pixels=min_pixels,
                max_pixels=max_pixels,
                image_root=image_root,
                max_steps=max_steps,
                history_builder=history_builder,
            )
        answers = policy.complete([it.prompt for it in items])
        outputs = [(it.episode, it.t, completions[0].text, {}) for it, completions in zip(items, answers)]
        output_format = spec.output_format
    with timing.phase("scoring", "step predictions"):
        return _records(outputs, model_name, split, spec, output_format, protocol, min_pixels, max_pixels, extra)


def _records(
    outputs: Sequence[tuple[Episode, int, str, dict[str, Any]]],
    model_name: str,
    split: str,
    spec: PromptSpec,
    output_format: str,
    protocol: str,
    min_pixels: int,
    max_pixels: int,
    extra: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """One scored prediction record per ``(episode, t, text, info)`` (:func:`evaluate_offline`)."""
    return [
        {
            **prediction_record(
                model=model_name,
                split=split,
                history=spec.tag,
                episode=episode,
                t=t,
                output=text,
                output_format=output_format,
                protocol=protocol,
                min_pixels=min_pixels,
                max_pixels=max_pixels,
            ),
            **({"agent_info": info} if info else {}),
            **extra,
        }
        for episode, t, text, info in outputs
    ]


def paper_eval_config(cfg: Config, method: str) -> Config:
    """The config a paper's notebook evaluates with: the stage values of ``<method>.eval`` (its
    test-step budget, online sizes and decoding: ``ccpo.eval`` for 02 and 05, ``coepg.eval``,
    ``ces.eval``, ``agentcpm.eval``) on top of ``cfg``; a kernel ``eval`` key set in a later layer
    than the paper's value already won when the config was resolved."""
    return cfg.replace(stage_updates(cfg.method_section(method).eval))


def evaluation_grid(
    cfg: Config,
    policies: Mapping[str, Policy | Agent | Callable[[], Policy | Agent]],
    splits: Mapping[str, Split],
    *,
    histories: Sequence[str] | None = None,
    history_builder: HistoryBuilder | None = None,
    labels: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Prediction records of every policy x split x history setting (in that nesting order).

    ``policies`` maps a model name to a :class:`Policy` or an :class:`~guirl.rollout.Agent`, or to
    a function that builds one (called once, when its turn comes, so only one model is in memory
    at a time). ``histories``
    defaults to ``eval.histories``; each tag's prompt comes from :func:`guirl.prompts.prompt_spec`.
    The protocol, pixel budget and the per-split step cap come from ``cfg`` (``eval.max_test_steps``;
    a paper's notebook evaluates with :func:`paper_eval_config`); ``history_builder`` and ``labels``
    are passed to :func:`evaluate_offline`.
    """
    from tqdm.auto import tqdm

    tags = list(histories if histories is not None else cfg.eval.histories)
    get_protocol(cfg.eval.protocol)
    specs = {tag: prompt_spec(cfg, tag) for tag in tags}
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(policies) * len(splits) * len(tags), desc="offline evaluation", disable=not progress)
    for name, source in policies.items():
        policy = source if isinstance(source, (Policy, Agent)) else source()
        for split_name, split in splits.items():
            for tag in tags:
                bar.set_postfix_str(f"{name} {split_name} {tag}")
                records += evaluate_offline(
                    policy,
                    split.episodes,
                    specs[tag],
                    protocol=cfg.eval.protocol,
                    image_root=split.image_root,
                    min_pixels=cfg.model.min_pixels,
                    max_pixels=cfg.model.max_pixels,
                    model_name=name,
                    split=split_name,
                    max_steps=cfg.eval.max_test_steps,
                    history_builder=history_builder,
                    labels=labels,
                )
                bar.update()
        del policy
    bar.close()
    return records


def _level_order(a: Sequence[Any], b: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The distinct ``(a, b)`` pairs ordered by ``a``'s first appearance, then ``b``'s (the row
    order of a pandas pivot with ``sort=False``)."""
    rank_a = {v: i for i, v in enumerate(dict.fromkeys(a))}
    rank_b = {v: i for i, v in enumerate(dict.fromkeys(b))}
    return sorted(dict.fromkeys(zip(a, b)), key=lambda k: (rank_a[k[0]], rank_b[k[1]]))


def _groups(records: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Records grouped by ``keys``, groups in order of first appearance, records in input order."""
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def step_metrics(
    cfg: Config, records: Sequence[dict[str, Any]], by: Sequence[str] = ("model", "history", "split")
) -> pd.DataFrame:
    """One row per group of records (``by``: model, history, split; add a label such as a
    training seed to split further), in order of first appearance: the ``by`` fields, ``n``,
    ``n_counted`` (steps in the protocol's SR denominator), ``n_unparsable`` and TM / GR / SR (%) with their 95% bootstrap bounds
    (:func:`guirl.metrics.summary.summarize_steps`, ``eval.bootstrap_samples`` resamples, seed
    ``cfg.seed``)."""
    rows = [
        {**dict(zip(by, key)), **summarize_steps(group, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)}
        for key, group in _groups(records, tuple(by)).items()
    ]
    return pd.DataFrame(rows)


def table2(steps: pd.DataFrame, splits: Sequence[str], metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """CCPO Table 2 layout: one row per (model, history) (models in order of first appearance,
    then histories), columns
    ``"<split> <metric>"`` for each split (in the given order) and metric; a cell that was not
    evaluated is ``nan``.

    ``steps`` is :func:`step_metrics`' frame.
    """
    keys = _level_order(steps["model"], steps["history"])
    cells = {(r["model"], r["history"], r["split"]): r for r in steps.to_dict(orient="records")}
    rows = []
    for name, tag in keys:
        row: dict[str, Any] = {"model": name, "history": tag}
        for split in splits:
            cell = cells.get((name, tag, split))
            for k in metrics:
                row[f"{split} {k}"] = float(cell[k]) if cell is not None else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "history", *[f"{s} {k}" for s in splits for k in metrics]])


def gain_table(steps: pd.DataFrame, baseline: str, model: str, metric: str = "SR") -> pd.DataFrame:
    """``metric`` of every model per (split, history), plus the column
    ``"<model> - <baseline> (<metric> points)"``: the difference in percentage points.

    ``steps`` is :func:`step_metrics`' frame; rows by split (in order of first appearance), then
    history.
    """
    names = list(dict.fromkeys(steps["model"]))
    for want in (baseline, model):
        if want not in names:
            raise KeyError(f"gain_table: model {want!r} is not in the step metrics (models: {names})")
    keys = _level_order(steps["split"], steps["history"])
    cells = {(r["split"], r["history"], r["model"]): r[metric] for r in steps.to_dict(orient="records")}
    rows = []
    for split, tag in keys:
        row: dict[str, Any] = {"split": split, "history": tag}
        row.update({name: float(cells.get((split, tag, name), float("nan"))) for name in names})
        row[f"{model} - {baseline} ({metric} points)"] = row[model] - row[baseline]
        rows.append(row)
    return pd.DataFrame(rows)


def paired_gain_table(
    cfg: Config, records: Sequence[dict[str, Any]], baseline: str, model: str, metric: str = "exact"
) -> pd.DataFrame:
    """Paired difference ``model - baseline`` of a per-step metric, per (split, history) cell that
    both models were evaluated on (e.g. a baseline evaluated at one history only).

    Both models' prediction records are matched step by step (and by training seed, the
    records' ``seed`` field, when they carry one): :func:`guirl.metrics.paired.paired_matrix`
    refuses records that are not paired. For ``metric="exact"`` only the protocol's counted
    steps enter (the SR denominator). Columns: ``split``, ``history``, ``baseline`` and ``model``
    (the metric in %), ``diff`` / ``lo`` / ``hi`` (percentage points, 95% two-way bootstrap
    interval over seeds and test steps, ``eval.bootstrap_samples`` resamples, seed ``cfg.seed``),
    ``resolved`` (the interval excludes 0), ``verdict`` ("B > A": the model is better) and
    ``n_seeds`` / ``n_steps``.
    """
    names = list(dict.fromkeys(r["model"] for r in records))
    for want in (baseline, model):
        if want not in names:
            raise KeyError(f"paired_gain_table: model {want!r} has no records (models: {names})")
    rows = []
    both = {(r["split"], r["history"]) for r in records if r["model"] == baseline} & {
        (r["split"], r["history"]) for r in records if r["model"] == model
    }
    keys = [k for k in _level_order([r["split"] for r in records], [r["history"] for r in records]) if k in both]
    if not keys:
        raise ValueError(f"paired_gain_table: {baseline!r} and {model!r} share no (split, history) cell")
    for split, tag in keys:

        def matrix(name: str, split: Any = split, tag: Any = tag) -> Any:
            sel = [
                {**r, "seed": r.get("seed", 0)}
                for r in records
                if r["model"] == name
                and r["split"] == split
                and r["history"] == tag
                and (metric != "exact" or r.get("counted", True))
            ]
            return paired_matrix(sel, value=metric, name=f"{name} records, {split} {tag}")

        (a, seeds_a, steps_a), (b, seeds_b, steps_b) = matrix(baseline), matrix(model)
        if (seeds_a, steps_a) != (seeds_b, steps_b):
            raise ValueError(
                f"paired_gain_table: {baseline!r} and {model!r} were not scored on the same seeds and steps "
                f"of {split} {tag} ({len(steps_a)} vs {len(steps_b)} steps)"
            )
        d = paired_difference(a, b, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
        rows.append(
            {"split": split, "history": tag, baseline: 100 * a.mean(), model: 100 * b.mean(), **difference_row(d)}
        )
    return pd.DataFrame(rows)


def table2_for_paper(
    steps: pd.DataFrame,
    *,
    split: str,
    history: str,
    rows: Mapping[str, str],
    column_prefix: str,
    metrics: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Our CCPO-Table-2 cells as :func:`guirl.report.paper_comparison` reads them: one row per
    (model, metric) of ``steps`` (:func:`step_metrics`' frame) at ``split`` / ``history``, with
    ``row`` = the paper's row name ``rows[model]`` and ``column`` = ``"<column_prefix> <name>"``
    (e.g. ``"AC-High SR"``); ``ours`` in %. ``metrics`` maps our metric to the paper's name for it
    (default: TM, GR, SR as themselves; AgentCPM-GUI's tables, e.g., call SR "EM" and have no GR)."""
    names = dict(metrics) if metrics is not None else {m: m for m in METRICS}
    out = []
    for name, paper_row in rows.items():
        sel = steps[(steps["model"] == name) & (steps["split"] == split) & (steps["history"] == history)]
        if len(sel) != 1:
            raise KeyError(f"table2_for_paper: no single row for model {name!r}, {split} {history}")
        for metric, label in names.items():
            out.append({"row": paper_row, "column": f"{column_prefix} {label}", "ours": float(sel.iloc[0][metric])})
    return pd.DataFrame(out)


def accuracy_by_action_type(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """TM and SR (%) and step count ``n`` per (model, ground-truth action type), over every split
    and history setting; sorted by model, then type."""
    by_type = (
        pd.DataFrame(list(records), columns=["model", "gt_type", "type_match", "exact"])
        .groupby(["model", "gt_type"], sort=True)
        .agg(n=("exact", "size"), type_match=("type_match", "mean"), exact=("exact", "mean"))
        .reset_index()
    )
    by_type[["type_match", "exact"]] *= 100
    return by_type


def plot_accuracy_by_action_type(by_type: pd.DataFrame):
    """Horizontal bars of step SR (%) per action type, one bar per model; returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6, 3))
    sns.barplot(data=by_type, y="gt_type", x="exact", hue="model", orient="h", ax=ax)
    ax.set_xlabel("step SR (%)")
    ax.set_ylabel("")
    ax.set_title("Accuracy by action type")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- online, task level
@dataclass
class OnlineEvaluation:
    """Online play over runs: ``runs`` (one list of :func:`guirl.rollout.play_online` records
    per run), ``episodes`` (flat rows: ``run`` and :data:`ONLINE_EPISODE_COLUMNS`), ``summary``
    (:func:`guirl.metrics.summary.summarize_online`) and the ``history`` tag played with."""

    history: str
    runs: list[list[dict[str, Any]]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)


def online_tasks(
    cfg: Config, run: int, *, same_tasks: bool = False, categories: Sequence[str] | None = None
) -> list[Any]:
    """The ``eval.n_tasks`` MiniGUI tasks of online run ``run``: drawn with seed
    ``cfg.seed + ONLINE_TASK_SEED_OFFSET + run`` (a new task set per run), or with ``run = 0``
    for every run when ``same_tasks``; ``categories``: drawn from these task categories only
    (``guirl.env.tasks.CATEGORIES``, taking turns), e.g. the long-horizon ones, with task ids
    ``online-<categories>-<seed>-<i>`` (:func:`online_prefix`), so that two task sets of one run
    never share an id."""
    from guirl.env.tasks import generate_tasks

    return generate_tasks(
        cfg.eval.n_tasks,
        seed=cfg.seed + ONLINE_TASK_SEED_OFFSET + (0 if same_tasks else run),
        categories=categories,
        prefix=online_prefix(categories),
    )


def online_prefix(categories: Sequence[str] | None = None) -> str:
    """The task-id prefix of :func:`online_tasks`: ``online`` for tasks of every category, else
    ``online-`` and the categories joined by ``+`` (``online-long_loop``)."""
    return "online" if categories is None else "online-" + "+".join(categories)


def evaluate_online(
    cfg: Config,
    policy: Policy | Agent,
    *,
    history: str | None = None,
    n_runs: int | None = None,
    same_tasks: bool | None = None,
    sampling: Sampling | None = None,
    categories: Sequence[str] | None = None,
    progress: bool = True,
) -> OnlineEvaluation:
    """Online MiniGUI play over ``n_runs`` runs (default ``eval.n_seeds``) of ``eval.n_tasks``
    tasks each, at most ``eval.max_turns`` turns, on ``data.width`` x ``data.height`` screens.

    ``history`` is the tag of the prompt setting (default: the first of ``eval.histories``).
    Tasks come from :func:`online_tasks` (``same_tasks``: the same tasks in every run, so runs
    differ only by sampling). Decoding follows ``sampling`` (:class:`guirl.configbase.Sampling`;
    greedy unless ``do_sample``); a sampled run ``k`` draws with seed ``derive_seed(cfg.seed, k)``.
    ``same_tasks`` / ``sampling`` default to ``eval.online_same_tasks`` / ``eval.online_sampling``
    (AndroidLong's protocol: the same tasks, sampled, in every run).
    """
    same_tasks = cfg.eval.online_same_tasks if same_tasks is None else same_tasks
    sampling = cfg.eval.online_sampling if sampling is None else sampling
    tag = history or cfg.eval.histories[0]
    spec = prompt_spec(cfg, tag)
    out = OnlineEvaluation(history=tag)
    for k in range(n_runs if n_runs is not None else cfg.eval.n_seeds):
        res = play_online(
            policy,
            online_tasks(cfg, k, same_tasks=same_tasks, categories=categories),
            spec,
            width=cfg.data.width,
            height=cfg.data.height,
            max_turns=cfg.eval.max_turns,
            min_pixels=cfg.model.min_pixels,
            max_pixels=cfg.model.max_pixels,
            **sampling.kwargs(),
            seed=derive_seed(cfg.seed, k) if sampling.do_sample else None,
            progress=progress,
        )
        out.runs.append(res)
        out.episodes += [{"run": k, **{c: r[c] for c in ONLINE_EPISODE_COLUMNS}} for r in res]
    out.summary = summarize_online(out.runs)
    return out


#: Action types whose argument is free text the agent must write (copied from the goal, or read off the
#: screen): the actions kernel's TEXT_TYPES less ``open_app``, whose text is one of a few app names.
TEXT_ACTIONS: frozenset[ActionType] = TEXT_TYPES - {ActionType.OPEN_APP}


def online_task_facts(cfg: Config, categories: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """``{task_id: {"expert_steps": n, "subgoal_rate_at_reset": r, "needs_text": 0.0 | 1.0}}`` for
    each task of every online run (:func:`online_tasks`).

    ``expert_steps``: the steps the scripted MiniGUI expert (:func:`guirl.env.expert.solve`, no
    rendering) takes; a task whose expert needs more than ``eval.max_turns`` steps is out of
    reach within the turn limit. ``subgoal_rate_at_reset``: the share of the task's subgoals
    already met on its first screen (:func:`guirl.rollout.online.subgoal_rate`, as
    :func:`guirl.rollout.play_online` scores the last one), i.e. the Subgoal SR of an agent that does nothing (a conditional loop such as "if they
    live in Lima, send ..." is already met for the contacts who do not). ``needs_text``: 1.0 when the
    expert's solution has an action of :data:`TEXT_ACTIONS` (a name or number to type, an answer to
    give), 0.0 when clicks, presses and scrolls suffice; an agent that cannot write the right text
    can solve only the latter. ``categories``: the tasks of :func:`online_tasks` with those categories.
    """
    out: dict[str, dict[str, float]] = {}
    for k in range(cfg.eval.n_seeds):
        for task in online_tasks(cfg, k, same_tasks=cfg.eval.online_same_tasks, categories=categories):
            if task.task_id not in out:
                out[task.task_id] = task_facts(task, width=cfg.data.width, height=cfg.data.height)
    return out


def task_facts(task: Any, *, width: int, height: int) -> dict[str, float]:
    """One MiniGUI task's facts (:func:`online_task_facts`): the scripted expert's step count on a
    ``width`` x ``height`` px phone (no rendering), the Subgoal SR of its first screen, and whether
    the expert writes text (``needs_text``, 0.0 or 1.0)."""
    from guirl.env import PhoneState
    from guirl.env.expert import solve
    from guirl.rollout.online import subgoal_rate

    steps = solve(task, render=False, width=width, height=height).steps
    return {
        "expert_steps": len(steps),
        "subgoal_rate_at_reset": subgoal_rate(task, PhoneState.from_dict(task.initial_state)),
        "needs_text": float(any(s.action.type in TEXT_ACTIONS for s in steps)),
    }


def online_by_category(
    cfg: Config,
    result: OnlineEvaluation,
    model: str,
    *,
    task_facts: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Online Task SR per task category (and ``"(all)"``) of one model, with an interval.

    ``result.episodes`` holds one row per (run, task); in the AndroidLong protocol every run
    plays the same tasks, so the successes of a category form a ``(n_runs, n_tasks)`` 0/1
    matrix. Columns: ``model``, ``category``, ``n_tasks``, ``n_runs``, ``task_sr`` (%, mean over
    runs and tasks), ``task_sr_std`` (population std over runs of the per-run Task SR, the
    paper's "± std"), ``subgoal_sr`` (%), ``lo`` / ``hi`` (95% two-way bootstrap interval over
    runs and tasks, :func:`guirl.metrics.paired.paired_difference` against 0,
    ``eval.bootstrap_samples`` resamples, seed ``cfg.seed``) and ``resolved`` (the interval
    excludes 0: Task SR measurably above zero). With ``task_facts`` (:func:`online_task_facts`)
    three more columns say what the category's tasks allow: ``expert_steps`` (mean steps of the
    scripted expert), ``n_within_turns`` (tasks whose expert needs at most ``eval.max_turns``
    steps: the most the agent can solve), ``n_text_free`` (tasks whose expert writes no text: the
    most an agent that cannot copy text can solve) and ``subgoal_sr_at_reset`` (%, the Subgoal SR
    of doing nothing: read ``subgoal_sr`` against it). Raises ``ValueError`` when runs played
    different task sets (``eval.online_same_tasks: false``): the matrix would not be paired, or
    when ``task_facts`` lacks a task or a fact.
    """
    import numpy as np

    from guirl.metrics.paired import paired_matrix

    if not result.episodes:
        raise ValueError(f"online_by_category: {model!r} has no online episodes")
    categories = sorted({e["category"] for e in result.episodes})
    rows = []
    for cat in [*categories, "(all)"]:
        eps = [e for e in result.episodes if cat == "(all)" or e["category"] == cat]
        m, runs, tasks = paired_matrix(
            [{**e, "success": float(e["success"])} for e in eps],
            value="success",
            seed_key="run",
            step_keys=("task_id",),
            name=f"{model} online episodes ({cat})",
        )
        sub, _, _ = paired_matrix(eps, value="subgoal_rate", seed_key="run", step_keys=("task_id",), name=model)
        d = paired_difference(np.zeros_like(m), m, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
        row = {
            "model": model,
            "category": cat,
            "n_tasks": len(tasks),
            "n_runs": len(runs),
            "task_sr": 100 * float(m.mean()),
            "task_sr_std": 100 * float(m.mean(axis=1).std()),
            "subgoal_sr": 100 * float(sub.mean()),
            "lo": 100 * d.lo,
            "hi": 100 * d.hi,
            "resolved": d.resolved,
        }
        if task_facts is not None:
            missing = [t for (t,) in tasks if t not in task_facts]
            if missing:
                raise ValueError(f"online_by_category: task_facts has no entry for task {missing[0]!r}")
            facts = [task_facts[t] for (t,) in tasks]
            for (t,), f in zip(tasks, facts):
                lacking = [k for k in ("expert_steps", "subgoal_rate_at_reset", "needs_text") if k not in f]
                if lacking:
                    raise ValueError(f"online_by_category: task_facts[{t!r}] has no {lacking} (online_task_facts)")
            row["expert_steps"] = float(np.mean([f["expert_steps"] for f in facts]))
            row["n_within_turns"] = sum(f["expert_steps"] <= cfg.eval.max_turns for f in facts)
            row["n_text_free"] = sum(not f["needs_text"] for f in facts)
            row["subgoal_sr_at_reset"] = 100 * float(np.mean([f["subgoal_rate_at_reset"] for f in facts]))
        rows.append(row)
    return pd.DataFrame(rows)


def online_caption(cfg: Config) -> str:
    """Caption of an online table: what the mean and std are over (runs, tasks, decoding, turns)."""
    tasks = f"the same {cfg.eval.n_tasks} tasks" if cfg.eval.online_same_tasks else f"{cfg.eval.n_tasks} new tasks each"
    sampling = cfg.eval.online_sampling
    decoding = f"sampled at temperature {sampling.temperature:g}" if sampling.do_sample else "greedy"
    return (
        f"Online MiniGUI: Task SR and Subgoal SR (%), mean and std over {cfg.eval.n_seeds} runs of {tasks} "
        f"({decoding}), at most {cfg.eval.max_turns} turns"
    )


def online_for_paper(summary: Mapping[str, float], row: str) -> pd.DataFrame:
    """One model's online summary (:func:`summarize_online`) in AndroidLong Table 6's cells
    (``row``, e.g. ``"SFT (no memory)"``; columns ``Task SR`` and ``Task SR std``, in %), as
    :func:`guirl.report.paper_comparison` reads them."""
    return pd.DataFrame(
        [
            {"row": row, "column": "Task SR", "ours": float(summary["task_sr"])},
            {"row": row, "column": "Task SR std", "ours": float(summary["task_sr_std"])},
        ]
    )


def online_table(results: Mapping[str, OnlineEvaluation]) -> pd.DataFrame:
    """One row per model: ``model``, ``history`` and the online summary (Task SR, Subgoal SR,
    their std over runs, ``n_runs``)."""
    return pd.DataFrame([{"model": name, "history": ev.history, **ev.summary} for name, ev in results.items()])
