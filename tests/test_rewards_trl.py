"""Tests for guirl.rewards.trl: the TRL adapters are picklable callables (worker processes receive
them by value), keep their ``__name__`` and score the same batch identically after a round trip,
including in a freshly spawned process. The adapters' scoring itself is tested in test_rewards.py."""

from __future__ import annotations

import json
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action
from guirl.methods import get_reward
from guirl.rewards.base import RewardInputError
from guirl.rewards.trl import FormatParser, TRLComponents, TRLReward, as_trl_components, as_trl_reward, format_parser

BOX = (0.4, 0.4, 0.6, 0.5)  # target element, centre (0.5, 0.45)
SIZE = (1080, 2400)
#: The paper profiles' pixel budget (configs/profiles/base/paper.yaml).
BUDGET = dict(min_pixels=3136, max_pixels=12845056)


def _fmt(x: float, y: float) -> str:
    a = Action(type="click", point=(x, y))
    return get_format("ccpo").format(a, FormatContext(width=SIZE[0], height=SIZE[1], **BUDGET), thought="t")


def batch() -> tuple[list, dict]:
    gt = json.dumps(Action(type="click", point=(0.5, 0.45)).to_dict())
    comps = [
        _fmt(0.5, 0.45),  # right
        [{"role": "assistant", "content": _fmt(0.9, 0.9)}],  # conversational, wrong
        "garbage",  # unparsable
    ]
    kwargs = {
        "gt_action": [gt] * 3,
        "gt_box": [list(BOX)] * 3,
        "screen_size": [list(SIZE)] * 3,
        "grounding": [[{"point": [0.5, 0.45], "token_logprobs": [-0.1]}] * 3] * 3,  # Co-EPG's 3 grounders
    }
    return comps, kwargs


def round_trip(obj):
    return pickle.loads(pickle.dumps(obj))


def adapters() -> list:
    parse = format_parser("ccpo", **BUDGET)
    return [
        # a paper reward (AgentCPM-GUI), the default ground-truth builder
        as_trl_reward(get_reward("agentcpm").fn, parse, name="agentcpm_reward"),
        # a reward with an extra dataset column (Co-EPG's grounding ensemble)
        as_trl_reward(get_reward("coepg").fn, parse, name="coepg", extra_columns=("grounding",)),
        # the per-component companion (UI-S1 semi-online reward)
        as_trl_components(get_reward("semi_online").fn, parse),
    ]


@pytest.mark.parametrize("adapter", adapters(), ids=lambda a: a.__name__)
def test_adapter_pickles_and_scores_unchanged(adapter) -> None:
    comps, kwargs = batch()
    before = adapter(comps, **kwargs)
    back = round_trip(adapter)
    assert back == adapter
    assert back.__name__ == adapter.__name__
    assert back(comps, **kwargs) == before


def test_format_parser_pickles_and_parses_unchanged() -> None:
    parse = format_parser("ccpo", size_column="size", **BUDGET)
    back = round_trip(parse)
    assert isinstance(back, FormatParser) and back == parse
    assert back.__name__ == "parse_ccpo"
    row = {"size": list(SIZE)}
    for text in (_fmt(0.25, 0.75), "garbage"):  # a valid action; a failed parse
        assert back(text, row) == parse(text, row)
    with pytest.raises(RewardInputError, match="'size'"):
        back(_fmt(0.25, 0.75), {"screen_size": list(SIZE)})


def test_names_are_what_trl_logs() -> None:
    reward, _, comps = adapters()
    assert isinstance(reward, TRLReward) and reward.__name__ == "agentcpm_reward"
    assert isinstance(comps, TRLComponents) and comps.__name__ == "uis1_reward_components"
    # the class keeps its own name; only instances carry the reward's name
    assert TRLReward.__name__ == "TRLReward"


def test_unknown_format_fails_at_construction() -> None:
    with pytest.raises(KeyError, match="unknown action format 'nope'"):
        format_parser("nope")


def test_extra_columns_are_stored_as_a_tuple() -> None:
    # a list argument would make the frozen adapter unhashable and compare unequal to a tuple
    fn = as_trl_reward(get_reward("coepg").fn, format_parser("ccpo", **BUDGET), name="c", extra_columns=["grounding"])
    assert fn.extra_columns == ("grounding",)
    hash(fn)


def _score_in_worker(adapter, comps, kwargs):
    return adapter(comps, **kwargs)


def test_adapter_runs_in_a_spawned_worker() -> None:
    # spawn (not fork): the worker imports everything afresh and gets the adapter only by pickle
    reward = adapters()[0]
    comps, kwargs = batch()
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(_score_in_worker, reward, comps, kwargs).result(timeout=120) == reward(comps, **kwargs)
