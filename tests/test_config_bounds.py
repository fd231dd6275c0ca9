"""Upper bounds of numeric config values (guirl.configbase.MAX_*): a value beyond one cannot be meant
and is refused before anything runs, in one line naming the key and the limit; ``seed`` is refused
below 0 and above ``MAX_SEED`` (a negative or huge seed crashed 13-23 s into a run)."""

from __future__ import annotations

import types
import typing

import annotated_types as at
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from guirl.config import Config, ConfigError, load_config
from guirl.configbase import MAX_COUNT, MAX_LR, MAX_PIXELS, MAX_SEED, MAX_SIDE, MAX_STEPS, MAX_THREADS

#: Numeric fields whose upper bound is a validator (a list or tuple checked item by item), with a value beyond it.
VALIDATED = {
    "analysis.large_screen": "[1080, 100000]",
    "analysis.attention_layers": "[1, 100000]",
    "ces.temporal_gaps": "[1, 100000000]",
}


def _numeric_leaves(model: type[BaseModel], prefix: str = ""):
    """(dotted key, field info) of every int / float field (also inside lists, tuples and options)."""
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
        subs = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if subs:
            yield from _numeric_leaves(subs[0], f"{prefix}{name}.")
            continue
        flat = []
        for a in args:
            items = typing.get_args(a) if typing.get_origin(a) in (list, tuple) else (a,)
            for x in items:
                flat.append(typing.get_args(x)[0] if typing.get_origin(x) is typing.Annotated else x)
        if any(a in (int, float) for a in flat):
            yield f"{prefix}{name}", info


def _has_upper_bound(info) -> bool:
    if any(isinstance(m, (at.Le, at.Lt)) for m in info.metadata):
        return True
    inner = [typing.get_args(a) for a in typing.get_args(info.annotation)]  # list[Annotated[int, Field(le=...)]]
    return any(
        isinstance(m, (at.Le, at.Lt)) or any(isinstance(x, (at.Le, at.Lt)) for x in getattr(m, "metadata", ()))
        for args in inner
        for m in args[1:]
    )


def test_every_numeric_value_has_an_upper_bound() -> None:
    # the schema itself: a numeric key without a bound (or a validator that bounds it) fails here
    leaves = dict(_numeric_leaves(Config))
    assert len(leaves) > 150
    missing = [k for k, info in leaves.items() if not _has_upper_bound(info) and k not in VALIDATED]
    assert not missing, f"numeric keys without an upper bound: {missing}"


def test_the_bound_checker_can_fail() -> None:
    from pydantic import Field

    from guirl.configbase import Section

    class Loose(Section):
        n: int = Field(default=1, ge=1)
        m: int = Field(default=1, ge=1, le=5)

    leaves = dict(_numeric_leaves(Loose))
    assert not _has_upper_bound(leaves["n"]) and _has_upper_bound(leaves["m"])


@pytest.mark.parametrize(
    "override, key, limit",
    [
        # the values of the issue: each crashed or ran for hours instead of stopping here
        ("sft.max_steps=1e26", "sft.max_steps", MAX_STEPS),
        ("seed=1e23", "seed", MAX_SEED),
        ("runtime.threads=100000", "runtime.threads", MAX_THREADS),
        ("data.width=100000", "data.width", MAX_SIDE),
        ("data.n_train_tasks=1e12", "data.n_train_tasks", MAX_COUNT),
        ("sft.learning_rate=30", "sft.learning_rate", MAX_LR),
        ("model.max_pixels=1e12", "model.max_pixels", MAX_PIXELS),
        ("rl.group_size=1000000", "rl.group_size", 65_536),
        ("ces.coordinator.epochs=1e9", "ces.coordinator.epochs", 10_000),
        ("coepg.grpo.priors=[1, 1, 1e9]", "coepg.grpo.priors", 1_000_000.0),
        ("eval.max_test_steps=1e9", "eval.max_test_steps", MAX_STEPS),
    ],
)
def test_a_value_beyond_its_bound_is_refused_in_one_line(override: str, key: str, limit) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("tiny", overrides=[override])
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"override {override}: {key}")
    assert f"above the limit {limit}" in message and f"at most {limit}" in message, message


@pytest.mark.parametrize("key, value", sorted(VALIDATED.items()))
def test_validated_lists_refuse_values_beyond_their_bound(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("tiny", overrides=[f"{key}={value}"])
    assert err.value.key.startswith(key) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "seed, fine", [(-1, False), (0, True), (MAX_SEED, True), (MAX_SEED + 1, False), (2**64, False)]
)
def test_seed_bounds(seed: int, fine: bool) -> None:
    if fine:
        assert load_config("tiny", overrides=[f"seed={seed}"]).seed == seed
    else:
        with pytest.raises(ConfigError) as err:
            load_config("tiny", overrides=[f"seed={seed}"])
        assert err.value.key == "seed" and ("below the minimum 0" in str(err.value) or str(MAX_SEED) in str(err.value))


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=MAX_STEPS + 1, max_value=10**30))
def test_any_step_count_beyond_the_bound_is_refused(n: int) -> None:
    with pytest.raises(ConfigError, match=f"above the limit {MAX_STEPS}"):
        load_config("tiny", overrides={"rl.max_steps": n})


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_STEPS))
def test_any_step_count_within_the_bound_is_kept(n: int) -> None:
    assert load_config("tiny", overrides={"rl.max_steps": n}).rl.max_steps == n


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=MAX_SEED + 1)))
def test_any_seed_out_of_range_is_refused(seed: int) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("tiny", overrides={"seed": seed})
    assert err.value.key == "seed"
