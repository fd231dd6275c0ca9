"""Tests for guirl.rollout: the Policy interface, HFPolicy generation, online and offline episode loops."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.data.schema import Episode, Step, read_episodes
from guirl.env.expert import solve
from guirl.env.export import build_minigui_dataset
from guirl.env.tasks import generate_tasks
from guirl.models import build_tiny_model, load_policy
from guirl.prompts import PromptSpec, action_text, episode_step_prompt, format_context
from guirl.rl.semi_online import patch_step
from guirl.rollout import (
    ONLINE_FIELDS,
    Completion,
    Decision,
    FunctionPolicy,
    HFPolicy,
    Policy,
    derive_seed,
    end_at_placeholder,
    follow_annotation,
    play_online,
    rollout_recorded,
    step_prompts,
    trim_generated,
)
from guirl.rollout.offline import annotated_entry, policy_entry

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
W, H = 280, 504  # MiniGUI screen (tiny profile)
FMT = get_format("ccpo")
CTX = format_context((W, H), MIN_PX, MAX_PX)


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
def tiny_model(tiny_checkpoint: Path):
    """``(model, processor)`` on one torch thread (the 1.1 M-parameter model gains nothing from
    more, and two threads on a busy 2-core machine spin-wait); the thread count is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield load_policy(tiny_checkpoint, None, min_pixels=MIN_PX, max_pixels=MAX_PX)
    finally:
        torch.set_num_threads(before)


def recorded_episodes(minigui12: Path, n: int = 3) -> tuple[list[Episode], Path]:
    root = minigui12 / "test_in_domain"
    return list(read_episodes(root / "episodes.jsonl"))[:n], root


def hand_episode(n_steps: int = 4) -> Episode:
    """Four steps on one screen size: click, type, click, terminate (no images needed by the
    scripted policies: paths are only carried)."""
    box = (0.1, 0.4, 0.9, 0.6)
    actions = [
        Action("click", point=(0.5, 0.5)),
        Action("type", text="hello"),
        Action("click", point=(0.2, 0.8)),
        Action("terminate", status="success"),
    ][:n_steps]
    steps = tuple(Step(i, f"s{i}.png", (W, H), a, target_box=box if a.point else None) for i, a in enumerate(actions))
    return Episode(f"ep-{n_steps}", "do things", steps, source="test", split="test_in_domain")


def text_of(action: Action) -> str:
    return action_text(action, PromptSpec(output_format="ccpo"), CTX)


def history_texts(prompt) -> list[str]:
    """The action texts shown in a prompt's history (the text item after each "Step k: " label,
    skipping an image placeholder in nAO mode)."""
    user = prompt[0][1]["content"]
    out = []
    for j, c in enumerate(user):
        if c["type"] == "text" and c["text"].startswith("Step "):
            nxt = user[j + 1] if user[j + 1]["type"] == "text" else user[j + 2]
            out.append(nxt["text"].rstrip("\n"))
    return out


# ----------------------------------------------------------------------------- small pieces
@given(st.integers(0, 2**40), st.lists(st.integers(0, 10**6), max_size=3))
def test_derive_seed_is_deterministic_and_in_range(seed: int, keys: list[int]) -> None:
    s = derive_seed(seed, *keys)
    assert s == derive_seed(seed, *keys) and 0 <= s < 2**31


def test_derive_seed_streams_differ() -> None:
    grid = {(s, t): derive_seed(s, t) for s in range(20) for t in range(20)}
    assert len(set(grid.values())) == len(grid)  # run s turn t+1 never reuses run s+1 turn t
    assert derive_seed(None, 3) is None  # no seed: the global random state
    with pytest.raises(ValueError, match=">= 0"):
        derive_seed(-1, 0)


@pytest.mark.parametrize(
    "ids, eos, expected",
    [
        ([5, 6, 2, 0, 0], {2}, (5, 6, 2)),  # EOS kept, padding after it dropped
        ([5, 6, 7], {2}, (5, 6, 7)),  # cut by max_new_tokens: no EOS
        ([2, 2, 2], {2}, (2,)),  # pad == EOS: only the first one is generated
        ([5, 3, 9], {2, 3}, (5, 3)),  # several EOS ids (generation_config lists)
        ([], {2}, ()),  # nothing generated
    ],
)
def test_trim_generated(ids, eos, expected) -> None:
    assert trim_generated(ids, eos) == expected


@pytest.mark.parametrize(
    "ids, eos, expected",
    [
        ((5, 6, 2), 2, (5, 6, 2)),  # no placeholder: unchanged
        ((5, 99, 6, 2), 2, (5, 2)),  # <|image_pad|> mid-action: the action ends there, with EOS
        ((99, 6), 2, (2,)),  # a placeholder first: an EOS-only completion (never empty)
        ((5, 98, 6), None, (5,)),  # <|video_pad|>, a model without EOS id: dropped
    ],
)
def test_end_at_placeholder(ids, eos, expected) -> None:
    assert end_at_placeholder(ids, {98, 99}, eos) == expected


def test_hf_policy_ends_a_completion_at_a_generated_image_placeholder(tiny_model, minigui12: Path, monkeypatch) -> None:
    import torch

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 1)
    tok = processor.tokenizer
    a, b = tok.convert_tokens_to_ids("a"), tok.convert_tokens_to_ids("b")
    eos = model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos

    def generate(input_ids, **_):  # an undertrained model emitting <|image_pad|> inside its action
        tail = torch.tensor([[a, model.config.image_token_id, b, eos]], dtype=input_ids.dtype)
        return torch.cat([input_ids, tail], dim=1)

    monkeypatch.setattr(model, "generate", generate)
    (c,) = HFPolicy(model, processor, max_new_tokens=4, batch_size=1).complete(prompts)[0]
    assert c.token_ids == (a, eos) and c.text == tok.decode([a], skip_special_tokens=True)


def test_function_policy_answers_n_and_records_calls() -> None:
    pol = FunctionPolicy(lambda prompt: prompt[0][0]["content"])
    prompts = [([{"role": "user", "content": "a"}], []), ([{"role": "user", "content": "b"}], [])]
    assert isinstance(pol, Policy)
    out = pol.complete(prompts, n=2, do_sample=True, seed=7)
    assert [[c.text for c in cs] for cs in out] == [["a", "a"], ["b", "b"]]
    assert out[0][0] == Completion("a", ())
    assert pol.calls == [(prompts, {"n": 2, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "seed": 7})]
    several = FunctionPolicy(lambda p: ["x", "y"])
    assert [c.text for c in several.complete(prompts[:1], n=2)[0]] == ["x", "y"]
    with pytest.raises(ValueError, match="returned 2 texts for n=3"):
        several.complete(prompts[:1], n=3)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"n": 0}, "n must be"),  # no completions
        ({"temperature": 0.0}, "temperature"),  # greedy is do_sample=False, not temperature 0
        ({"top_p": 0.0}, "top_p"),  # empty nucleus
        ({"top_p": 1.5}, "top_p"),  # not a probability
    ],
)
def test_bad_decoding_options_are_rejected(kw, match) -> None:
    with pytest.raises(ValueError, match=match):
        FunctionPolicy(lambda p: "x").complete([([], [])], **kw)


# ----------------------------------------------------------------------------- HFPolicy, tiny model
def prompts_of(minigui12: Path, n: int = 3, spec: PromptSpec | None = None):
    episodes, root = recorded_episodes(minigui12, 1)
    spec = spec or PromptSpec(n_history=1, history_mode="nAO")
    return [it.prompt for it in step_prompts(episodes, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=root)][:n]


def test_hf_policy_greedy_shapes_and_token_ids(tiny_model, minigui12: Path) -> None:
    model, processor = tiny_model
    prompts = prompts_of(minigui12)
    pol = HFPolicy(model, processor, max_new_tokens=6, batch_size=2)
    out = pol.complete(prompts, n=3)
    assert len(out) == len(prompts) and all(len(cs) == 3 for cs in out)
    eos = {processor.tokenizer.eos_token_id, processor.tokenizer.pad_token_id} - {None}
    for cs in out:
        assert cs[0] == cs[1] == cs[2]  # greedy: n identical completions
        c = cs[0]
        assert 1 <= len(c.token_ids) <= 6  # generated ids only: no prompt ids
        assert processor.decode(list(c.token_ids), skip_special_tokens=True) == c.text
        assert all(t not in eos for t in c.token_ids[:-1])  # nothing generated after an EOS
    # batch size 1 has no padding, so reversing the prompts reverses the outputs exactly
    one = HFPolicy(model, processor, max_new_tokens=6, batch_size=1)
    assert one.complete(prompts[::-1]) == one.complete(prompts)[::-1]


def test_hf_policy_sampling_is_seeded_and_leaves_global_state(tiny_model, minigui12: Path) -> None:
    import torch

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 2)
    pol = HFPolicy(model, processor, max_new_tokens=8, batch_size=2)
    state = torch.get_rng_state()
    a = pol.complete(prompts, n=4, do_sample=True, temperature=1.0, seed=11)
    assert torch.equal(torch.get_rng_state(), state)  # a seeded call does not move the global RNG
    b = pol.complete(prompts, n=4, do_sample=True, temperature=1.0, seed=11)
    c = pol.complete(prompts, n=4, do_sample=True, temperature=1.0, seed=12)
    assert a == b  # same seed, same batches: same completions
    assert a != c  # another seed draws other tokens (random model, 8 tokens x 8 sequences)
    assert all(len(cs) == 4 for cs in a)
    assert len({cs[k].token_ids for cs in a for k in range(4)}) > 1  # the n samples are not copies


def test_hf_policy_restores_training_mode(tiny_model, minigui12: Path) -> None:
    model, processor = tiny_model
    pol = HFPolicy(model, processor, max_new_tokens=4, batch_size=2)
    model.train()
    try:
        greedy_in_train_mode = pol.complete(prompts_of(minigui12, 2))
        assert model.training  # the trained policy goes back to train mode
    finally:
        model.eval()
    assert pol.complete(prompts_of(minigui12, 2)) == greedy_in_train_mode  # generation ran in eval mode


def test_hf_policy_image_cache_changes_nothing(tiny_model, minigui12: Path) -> None:
    """3AO prompts repeat each screen in several histories: the cached encoding is the processor's."""
    import torch

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 6, PromptSpec(n_history=3, history_mode="nAO"))
    cached = HFPolicy(model, processor, max_new_tokens=6, batch_size=3)
    plain = HFPolicy(model, processor, max_new_tokens=6, batch_size=3, image_cache_bytes=0)
    for i in (0, 3):
        a, b = cached.encode(prompts[i : i + 3]), plain.encode(prompts[i : i + 3])
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert cached.complete(prompts) == plain.complete(prompts)
    stats = cached._encoder.image_processor
    assert stats.hits > 0 and stats.misses < stats.hits + stats.misses  # screens were reused
    assert plain._encoder is processor  # 0 bytes: no cache


@pytest.mark.parametrize("n_history", [1, 3])
def test_hf_policy_vision_cache_changes_nothing(tiny_model, minigui12: Path, n_history: int) -> None:
    """Each screen's vision tokens are computed once and passed to ``generate``: the same greedy and
    seeded sampled completions as encoding every batch's pixels, and the same tokens as the tower
    on the whole batch."""
    import torch

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 10, PromptSpec(n_history=n_history, history_mode="nAO"))
    cached = HFPolicy(model, processor, max_new_tokens=8, batch_size=4)
    plain = HFPolicy(model, processor, max_new_tokens=8, batch_size=4, image_cache_bytes=0)
    assert cached._vision is not None and plain._vision is None
    assert cached.complete(prompts) == plain.complete(prompts)
    sampled = dict(n=2, do_sample=True, temperature=1.0, seed=3)
    assert cached.complete(prompts, **sampled) == plain.complete(prompts, **sampled)
    assert cached._vision.hits > 0 and cached._vision.misses < cached._vision.hits
    enc = cached.encode(prompts[4:8])
    got = cached.generate_inputs(enc)["mm_encoder_outputs"]["image"].pooler_output
    with torch.no_grad():
        want = model.model.get_image_features(enc["pixel_values"], enc["image_grid_thw"], return_dict=True)
    assert len(got) == len(want.pooler_output) and all(torch.equal(a, b) for a, b in zip(got, want.pooler_output))


def test_hf_policy_vision_cache_follows_the_weights(tiny_model, minigui12: Path) -> None:
    """A policy being trained: after an in-place update of the vision tower the cached tokens are
    dropped, and the completions are those of the updated model."""
    import torch

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 4)
    pol = HFPolicy(model, processor, max_new_tokens=6, batch_size=2)
    pol.complete(prompts)
    misses = pol._vision.misses
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():
            for p in model.model.visual.parameters():
                p.mul_(1.5)  # what an optimizer step does: an in-place change
        after = pol.complete(prompts)
        assert pol._vision.misses == 2 * misses  # every screen encoded again
        assert after == HFPolicy(model, processor, max_new_tokens=6, batch_size=2, image_cache_bytes=0).complete(
            prompts
        )
    finally:
        model.load_state_dict(saved)


def test_generation_cache_reuses_exactly_the_same_greedy_call(
    tiny_model, minigui12: Path, tmp_path, monkeypatch
) -> None:
    """A second policy on the same weights and prompts reads the stored ids (no generate call) and
    answers the same; changed weights, other prompts or other keywords miss; sampling is never stored."""
    import torch

    from guirl.rollout.generation_cache import CACHE_ENV

    model, processor = tiny_model
    prompts = prompts_of(minigui12, 5)
    plain = HFPolicy(model, processor, max_new_tokens=6, batch_size=2).complete(prompts)
    assert not list(tmp_path.rglob("*.json"))  # no folder named: nothing stored
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    first = HFPolicy(model, processor, max_new_tokens=6, batch_size=2)
    assert first.complete(prompts) == plain and first._generations.misses == 3
    assert len(list(tmp_path.rglob("*.json"))) == 3  # one entry per batch
    calls = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(1) or real(**kw))
    again = HFPolicy(model, processor, max_new_tokens=6, batch_size=2)
    assert again.complete(prompts) == plain and calls == [] and again._generations.hits == 3
    HFPolicy(model, processor, max_new_tokens=5, batch_size=2).complete(prompts)  # other keywords
    HFPolicy(model, processor, max_new_tokens=6, batch_size=3).complete(prompts)  # other batches
    assert len(calls) == 3 + 2  # 3 batches of 2, 2 batches of 3
    HFPolicy(model, processor, max_new_tokens=6, batch_size=2).complete(prompts, n=2, do_sample=True, seed=1)
    assert len(calls) == 5 + 3 and len(list(tmp_path.rglob("*.json"))) == 3 + 3 + 2  # sampling: not stored
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():
            model.lm_head.weight.mul_(1.5)
        changed = HFPolicy(model, processor, max_new_tokens=6, batch_size=2)
        assert changed.complete(prompts) == HFPolicy(
            model, processor, max_new_tokens=6, batch_size=2, generation_cache=False
        ).complete(prompts)
        assert changed._generations.hits == 0  # other weights: generated again
    finally:
        model.load_state_dict(saved)


@pytest.mark.parametrize("kw", [{"max_new_tokens": 0, "batch_size": 1}, {"max_new_tokens": 4, "batch_size": 0}])
def test_hf_policy_rejects_bad_budgets(kw) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        HFPolicy(None, None, **kw)


# ----------------------------------------------------------------------------- online
def test_play_online_random_model(tiny_model) -> None:
    model, processor = tiny_model
    tasks = generate_tasks(2, seed=5, prefix="online")
    res = play_online(
        HFPolicy(model, processor, max_new_tokens=8, batch_size=2),
        tasks,
        PromptSpec(n_history=1, history_mode="nAO"),
        width=W,
        height=H,
        max_turns=2,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        progress=False,
    )
    assert [r["task_id"] for r in res] == [t.task_id for t in tasks]
    for r, task in zip(res, tasks):
        assert set(r) == set(ONLINE_FIELDS)
        assert r["category"] == task.category
        assert 0.0 <= r["subgoal_rate"] <= 1.0 and isinstance(r["success"], bool)
        assert 1 <= r["turns"] <= 2 and 0 <= r["n_unparsable"] <= r["turns"]
        assert len(r["actions"]) == r["turns"] - r["n_unparsable"]
        assert r["subgoals_total"] == len(task.subgoals) and 0 <= r["subgoals_done"] <= r["subgoals_total"]
    json.dumps(res)


def scripted_online_policy(tasks, scripts):
    """A policy that answers each task's prompts from its script, in turn order, and records the
    last history entry it was shown."""
    by_instruction = {t.instruction: i for i, t in enumerate(tasks)}
    assert len(by_instruction) == len(tasks)
    turn = [0] * len(tasks)
    seen: list[list[str]] = [[] for _ in tasks]

    def answer(prompt):
        messages, images = prompt
        i = by_instruction[messages[1]["content"][0]["text"].removeprefix("Task: ").rstrip("\n")]
        shown = history_texts(prompt)
        seen[i].append(shown[-1] if shown else "")
        assert len(images) == (2 if turn[i] else 1)  # 1AO: the previous screen, then the current one
        out = scripts[i][turn[i]] + "\n"
        turn[i] += 1
        return out

    return FunctionPolicy(answer), turn, seen


def test_play_online_scripted_expert() -> None:
    """The expert's actions (plus a garbage turn and an invalid action for the first task) solve
    both tasks; counters and history follow the script; a finished task is not prompted again."""
    tasks = generate_tasks(6, seed=3, prefix="t")[1:3]  # an information query (3 steps), a compound task (4)
    expert = [[FMT.format(s.action, CTX) for s in solve(t, seed=0, render=False).steps] for t in tasks]
    invalid = FMT.format(Action("type", text="zzz"), CTX)  # no focused field on the home screen
    pol, turn, seen = scripted_online_policy(tasks, [["garbage!", invalid, *expert[0]], list(expert[1])])
    spec = PromptSpec(n_history=1, history_mode="nAO")
    res = play_online(
        pol, tasks, spec, width=W, height=H, max_turns=6, min_pixels=MIN_PX, max_pixels=MAX_PX, progress=False
    )
    a, b = res
    assert (a["success"], a["subgoal_rate"], a["turns"], a["n_unparsable"], a["n_invalid"]) == (True, 1.0, 5, 1, 1)
    assert (b["success"], b["subgoal_rate"], b["turns"], b["n_unparsable"], b["n_invalid"]) == (True, 1.0, 4, 0, 0)
    assert a["subgoals_done"] == a["subgoals_total"] == len(tasks[0].subgoals)
    assert b["actions"] == [FMT.parse(x, CTX).action.to_dict() for x in expert[1]]  # parsed actions, in order
    assert len(a["actions"]) == 4  # the garbage turn is not an action; the invalid one is
    # the history shows the previous output: raw text for garbage, the re-written action otherwise
    assert seen[0][:3] == ["", "garbage!", invalid]
    assert seen[1] == [""] + expert[1][:-1]
    assert turn == [5, 4]
    assert [len(p) for p, _ in pol.calls] == [2, 2, 2, 2, 1]  # lockstep batches over running tasks


@pytest.mark.parametrize(
    "do_sample, seed, expected_seeds",
    [
        (False, None, [None, None]),  # greedy, no seed
        (True, 5, [derive_seed(5, 0), derive_seed(5, 1)]),  # one derived seed per turn
    ],
)
def test_play_online_passes_decoding_options(do_sample, seed, expected_seeds) -> None:
    tasks = generate_tasks(2, seed=5, prefix="online")
    pol = FunctionPolicy(lambda p: "nonsense")
    play_online(
        pol,
        tasks,
        PromptSpec(n_history=1),
        width=W,
        height=H,
        max_turns=2,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        do_sample=do_sample,
        temperature=0.7,
        top_p=0.9,
        seed=seed,
        progress=False,
    )
    assert [o["seed"] for _, o in pol.calls] == expected_seeds
    assert all((o["do_sample"], o["temperature"], o["top_p"], o["n"]) == (do_sample, 0.7, 0.9, 1) for _, o in pol.calls)


# ----------------------------------------------------------------------------- offline: ground-truth history
@pytest.mark.parametrize("max_steps", [None, 1, 5])  # all steps, one step, a cut inside an episode
def test_step_prompts_match_episode_step_prompt(minigui12: Path, max_steps) -> None:
    episodes, root = recorded_episodes(minigui12)
    spec = PromptSpec(n_history=2, history_mode="nAO", use_step_instruction=True)
    items = step_prompts(episodes, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=root, max_steps=max_steps)
    expected = [(ep, t) for ep in episodes for t in range(len(ep.steps))][:max_steps]
    assert [(it.episode.episode_id, it.t) for it in items] == [(ep.episode_id, t) for ep, t in expected]
    for it, (ep, t) in zip(items, expected):
        messages, images, target = episode_step_prompt(
            ep, t, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=str(root)
        )
        assert it.prompt == (messages, images) and it.target == target


# ----------------------------------------------------------------------------- offline: own-history rollouts
def test_follow_annotation_reproduces_ground_truth_prompts(minigui12: Path) -> None:
    """With the annotated action as every history entry, the rollout's prompts are exactly the
    ground-truth-history prompts of step_prompts, whatever the policy says."""
    episodes, root = recorded_episodes(minigui12)
    spec = PromptSpec(n_history=2, history_mode="nAO", use_step_instruction=True)
    rolls = rollout_recorded(
        FunctionPolicy(lambda p: "whatever"),
        episodes,
        spec,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        image_root=root,
        decide=follow_annotation(spec, min_pixels=MIN_PX, max_pixels=MAX_PX),
    )
    got = [s.prompt for r in rolls for s in r.steps]
    assert got == [
        it.prompt for it in step_prompts(episodes, spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=root)
    ]
    assert all(r.done and not r.stopped and len(r.steps) == len(r.episode.steps) for r in rolls)


def test_own_history_shows_policy_outputs() -> None:
    """Default decision: the policy's first completion becomes the history; an unparsable one is
    shown as its raw text, a wrong action re-written in the format."""
    ep = hand_episode()
    outputs = [
        "  not an action  ",
        text_of(Action("click", point=(0.9, 0.1))),
        text_of(Action("press", key="back")),
        "",
    ]
    pol = FunctionPolicy(lambda p: outputs[len(history_texts(p))])
    spec = PromptSpec(n_history=3, history_mode="nA")
    (roll,) = rollout_recorded(pol, [ep], spec, min_pixels=MIN_PX, max_pixels=MAX_PX, image_root="/imgs")
    assert [history_texts(s.prompt) for s in roll.steps] == [
        [],
        ["not an action"],
        ["not an action", outputs[1]],
        ["not an action", outputs[1], outputs[2]],
    ]
    assert [e.source for e in roll.history] == ["policy"] * 4
    assert roll.history[0].action is None and roll.history[1].action == FMT.parse(outputs[1], CTX).action
    assert [e.image for e in roll.history] == [f"/imgs/s{i}.png" for i in range(4)]  # recorded screens
    assert roll.steps[2].prompt[1] == ["/imgs/s2.png"]  # nA: only the current screen


def patching_decide(spec: PromptSpec, threshold: int):
    """A decide hook that patches a type mismatch with the annotated action while the patch budget
    lasts, then stops (the semi-online pattern, with rl.semi_online.patch_step)."""
    used: dict[int, int] = {}

    def decide(rollout, t, completions, parsed):
        gt = rollout.episode.steps[t].action
        matched = parsed[0].ok and parsed[0].action.type == gt.type
        d = patch_step(matched, used.get(id(rollout), 0), threshold)
        used[id(rollout)] = d.patches_used
        if d.kind == "keep":
            return Decision(policy_entry(rollout, t, completions[0], parsed[0], spec, CTX), kind="keep")
        if d.kind == "patch":
            return Decision(annotated_entry(rollout, t, spec, CTX), kind="patch")
        return Decision(None, stop=True, kind="stop")

    return decide


@pytest.mark.parametrize(
    "script, threshold, kinds, sources",
    [
        # every step right: the policy's own history throughout
        ("RRRR", 1, ["keep"] * 4, ["policy"] * 4),
        # one mismatch patched, then a second one stops the episode
        ("RWRW", 1, ["keep", "patch", "keep", "stop"], ["policy", "annotation", "policy"]),
        # stop at the first error (threshold 0): nothing after it is generated
        ("WRRR", 0, ["stop"], []),
        # unlimited patches (-1): every mismatch patched, never stops
        ("WWWW", -1, ["patch"] * 4, ["annotation"] * 4),
    ],
)
def test_patch_and_stop_hook(script: str, threshold: int, kinds, sources) -> None:
    ep = hand_episode()
    wrong = text_of(Action("press", key="home"))
    step_of = {f"s{i}.png": i for i in range(4)}  # the current screen names the step

    def answer(prompt):
        t = step_of[prompt[1][-1]]
        return text_of(ep.steps[t].action) if script[t] == "R" else wrong

    pol = FunctionPolicy(answer)
    spec = PromptSpec(n_history=4, history_mode="nA")
    (roll,) = rollout_recorded(
        pol, [ep], spec, min_pixels=MIN_PX, max_pixels=MAX_PX, decide=patching_decide(spec, threshold)
    )
    assert [s.decision.kind for s in roll.steps] == kinds
    assert [e.source for e in roll.history] == sources
    assert roll.stopped is ("stop" in kinds) and roll.done
    # a patched step shows the annotated action to the next prompt
    for s, nxt in zip(roll.steps, roll.steps[1:]):
        if s.decision.kind == "patch":
            assert history_texts(nxt.prompt)[-1] == text_of(ep.steps[s.t].action)


def test_shared_history_with_n_completions_and_a_history_hook() -> None:
    """n completions share one prompt per step; a history hook sees every earlier step's n parsed
    completions (e.g. to aggregate their coordinates) and may replace the history images."""
    from PIL import Image

    ep = hand_episode()
    n = 3
    seen_points: list[list[list]] = []

    def builder(rollout, t):
        seen_points.append([[p.action.point if p.ok else None for p in s.parsed] for s in rollout.steps])
        return [(e.text, Image.new("RGB", (8 + k, 8))) for k, e in enumerate(rollout.history)]

    pts = [(0.1, 0.1), (0.2, 0.2), (0.3, 0.3)]
    pol = FunctionPolicy(lambda p: [text_of(Action("click", point=q)) for q in pts])
    spec = PromptSpec(n_history=2, history_mode="nAO")
    (roll,) = rollout_recorded(
        pol,
        [ep],
        spec,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        n=n,
        do_sample=True,
        seed=9,
        decide=follow_annotation(spec, min_pixels=MIN_PX, max_pixels=MAX_PX),
        history_builder=builder,
    )
    assert [len(s.completions) for s in roll.steps] == [n] * 4
    assert [len(call[0]) for call in pol.calls] == [1] * 4  # one shared prompt per step
    assert [o["seed"] for _, o in pol.calls] == [derive_seed(9, t) for t in range(4)]
    assert len(seen_points[3]) == 3 and all(len(step) == n for step in seen_points[3])
    assert np.allclose(seen_points[3][0], pts, atol=0.01)  # step 0's three clicks, as parsed
    images = roll.steps[3].prompt[1]
    assert [im.size for im in images[:-1]] == [(9, 8), (10, 8)]  # the hook's images, last n_history of them
    assert images[-1] == "s3.png"  # the current screen is the recorded one


def test_lockstep_over_episodes_of_different_lengths_and_repeats() -> None:
    """Episodes advance together; a short one drops out of the batch; the same episode twice is
    two independent rollouts; max_steps caps every episode."""
    eps = [hand_episode(4), hand_episode(2), hand_episode(4)]
    pol = FunctionPolicy(lambda p: "x")
    rolls = rollout_recorded(pol, eps, PromptSpec(n_history=1), min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert [len(r.steps) for r in rolls] == [4, 2, 4]
    assert [len(c[0]) for c in pol.calls] == [3, 3, 2, 2]
    assert rolls[0] is not rolls[2] and rolls[0].history == rolls[2].history
    capped = rollout_recorded(pol, eps, PromptSpec(n_history=1), min_pixels=MIN_PX, max_pixels=MAX_PX, max_steps=1)
    assert [len(r.steps) for r in capped] == [1, 1, 1] and not any(r.done for r in capped)


def test_rollout_rejects_a_policy_that_answers_the_wrong_count() -> None:
    class Short:
        def complete(self, prompts, **kw):
            return [[Completion("x")] for _ in prompts[:-1]]

    with pytest.raises(ValueError, match="completions for 2 prompts"):
        rollout_recorded(Short(), [hand_episode(), hand_episode()], PromptSpec(), min_pixels=MIN_PX, max_pixels=MAX_PX)


def test_rollout_with_tiny_model_keeps_token_ids(tiny_model, minigui12: Path) -> None:
    model, processor = tiny_model
    episodes, root = recorded_episodes(minigui12, 2)
    rolls = rollout_recorded(
        HFPolicy(model, processor, max_new_tokens=5, batch_size=4),
        episodes,
        PromptSpec(n_history=1, history_mode="nAO"),
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
        image_root=root,
        n=2,
        do_sample=True,
        seed=0,
        max_steps=2,
    )
    for r in rolls:
        assert len(r.steps) == 2
        for s in r.steps:
            assert len(s.completions) == 2 and all(1 <= len(c.token_ids) <= 5 for c in s.completions)
            assert len(s.prompt[1]) == (2 if s.t else 1)


def test_step_prompts_history_hook(minigui12: Path) -> None:
    """The rollout history hook also serves ground-truth-history prompts: the default builder
    gives episode_step_prompt's prompts exactly; a cropping hook replaces the history images and
    sees the annotated actions (their coordinates) of the earlier steps."""
    from PIL import Image

    from guirl.rollout import recorded_history

    episodes, root = recorded_episodes(minigui12)
    spec = PromptSpec(n_history=2, history_mode="nAO", use_step_instruction=True)
    kw = dict(min_pixels=MIN_PX, max_pixels=MAX_PX, image_root=root)
    plain = step_prompts(episodes, spec, **kw)
    assert step_prompts(episodes, spec, history_builder=recorded_history, **kw) == plain
    seen = []

    def crop(rollout, t):
        seen.append((t, [e.action for e in rollout.history], rollout.steps))
        return [(e.text, Image.new("RGB", (4, 4))) for e in rollout.history]

    cropped = step_prompts(episodes, spec, history_builder=crop, **kw)
    for a, b in zip(plain, cropped):
        assert a.target == b.target and a.prompt[0] == b.prompt[0]  # same messages and completion
        assert a.prompt[1][-1] == b.prompt[1][-1]  # the current screen is not touched
        assert all(getattr(im, "size", None) == (4, 4) for im in b.prompt[1][:-1])
    ep0 = episodes[0]
    assert seen[2] == (2, [ep0.steps[0].action, ep0.steps[1].action], [])  # annotated history, no completions


class _Task:
    """A task stand-in: fixed subgoal status and check."""

    def __init__(self, status: list[bool], ok: bool) -> None:
        self.status, self.ok = status, ok

    def subgoal_status(self, state: object) -> list[bool]:
        return self.status

    def check(self, state: object) -> bool:
        return self.ok


@pytest.mark.parametrize(
    ("status", "ok", "want"),
    [
        ([True, False, True], False, 2 / 3),  # the share of subgoals met
        ([False, False], True, 0.0),  # subgoals, not the final check, when the task has some
        ([], True, 1.0),  # no subgoals: the task's own check
        ([], False, 0.0),
    ],
)
def test_subgoal_rate(status: list[bool], ok: bool, want: float) -> None:
    from guirl.rollout.online import subgoal_rate

    assert subgoal_rate(_Task(status, ok), state=None) == pytest.approx(want)
