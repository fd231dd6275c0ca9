"""Tests for guirl.rl: group advantages (vectorised == loop), DAPO filter, losses (data-parallel
invariant aggregation), UI-S1 semi-online, engine samples and hooks, completion log-probs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    broadcast_to_tokens,
    dapo_keep_groups,
    dapo_keep_mask,
    group_advantages,
    group_advantages_loop,
)
from guirl.rl.losses import LOSS_AGG_MODES, agg_loss, agg_norm, clipped_surrogate, kl_k3, policy_loss
from guirl.rl.samples import (
    Sample,
    TaskStream,
    dapo_keep_hook,
    group_advantage_hook,
    renumber_groups,
    take_groups,
)
from guirl.rl.semi_online import (
    discounted_step_returns,
    discounted_step_returns_batch,
    episode_returns,
    patch_step,
    simulate_patched_rollout,
    uis1_advantages,
)

HYP = settings(max_examples=150, deadline=None)
T = torch.tensor


@st.composite
def grouped_rewards(draw, allow_nan: bool = True, rounded: bool = False):
    n = draw(st.integers(1, 24))
    floats = st.floats(-5, 5).map(lambda v: round(v, 3)) if rounded else st.floats(-5, 5)
    vals = st.sampled_from([0.0, 0.1, 0.5, 1.0, -1.0]) | floats
    if allow_nan:
        vals = vals | st.just(math.nan)
    r = draw(st.lists(vals, min_size=n, max_size=n))
    g = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    return T(r, dtype=torch.float64), T(g)


class TestGroupAdvantages:
    @pytest.mark.parametrize(
        "rewards, groups, scale, expected",
        [
            # one group [1, 0]: mean 0.5, unbiased std 0.7071 -> +-0.7071
            ([1.0, 0.0], [0, 0], "std", [0.70710, -0.70710]),
            # mean-only: r - mean
            ([1.0, 0.0, 0.5], [7, 7, 7], "none", [0.5, -0.5, 0.0]),
            # zero-std group -> 0; singleton group -> 0
            ([0.3, 0.3, 1.0], [0, 0, 1], "std", [0.0, 0.0, 0.0]),
            # NaN excluded from stats and given 0: group {1, 0} as in the first case
            ([1.0, math.nan, 0.0], [0, 0, 0], "std", [0.70710, 0.0, -0.70710]),
        ],
    )
    def test_table(self, rewards, groups, scale, expected):
        adv = group_advantages(T(rewards, dtype=torch.float64), T(groups), scale=scale)
        assert adv.tolist() == pytest.approx(expected, abs=1e-4)

    @pytest.mark.parametrize("scale", ["std", "none"])
    @HYP
    @given(data=grouped_rewards())
    def test_vectorised_equals_loop(self, scale, data):
        r, g = data
        assert torch.allclose(group_advantages(r, g, scale=scale), group_advantages_loop(r, g, scale=scale), atol=1e-8)

    @pytest.mark.parametrize("scale", ["std", "none"])
    @HYP
    @given(data=grouped_rewards())
    def test_finite_and_zero_mean_per_group(self, scale, data):
        r, g = data
        adv = group_advantages(r, g, scale=scale)
        assert torch.isfinite(adv).all()
        for gid in g.unique():
            sel = (g == gid) & ~torch.isnan(r)
            assert abs(float(adv[sel].sum())) < 1e-6 * max(1, int(sel.sum()))

    @HYP
    @given(data=grouped_rewards(allow_nan=False, rounded=True))
    def test_std_scaled_groups_have_unit_std(self, data):
        r, g = data
        adv = group_advantages(r, g, scale="std", eps=0.0)
        for gid in g.unique():
            sel = g == gid
            if sel.sum() > 1 and len(set(r[sel].tolist())) > 1:
                assert float(adv[sel].std()) == pytest.approx(1.0, rel=1e-6)

    def test_registry(self):
        r, g = T([1.0, 0.0, 0.0, 1.0]), T([0, 0, 1, 1])
        assert set(ADVANTAGE_ESTIMATORS) == {"grpo", "dr_grpo"}
        assert ADVANTAGE_ESTIMATORS["dr_grpo"](r, g).tolist() == [0.5, -0.5, -0.5, 0.5]

    def test_bad_shapes(self):
        with pytest.raises(ValueError, match="1-D"):
            group_advantages(torch.zeros(3), torch.zeros(4, dtype=torch.long))
        with pytest.raises(ValueError, match="integer"):
            group_advantages(torch.zeros(3), torch.zeros(3))

    def test_broadcast(self):
        m = T([[1, 1, 0], [1, 0, 0]])
        assert broadcast_to_tokens(T([2.0, -1.0]), m).tolist() == [[2.0, 2.0, 0.0], [-1.0, 0.0, 0.0]]


class TestDAPOFilter:
    @pytest.mark.parametrize(
        "rewards, groups, thr, kept",
        [
            ([1, 1, 0, 1, 0, 0], [0, 0, 1, 1, 2, 2], 0.0, [1]),  # groups 0 and 2 are constant
            ([1, 0.9, 0, 1], [0, 0, 1, 1], 0.1, [1]),  # std 0.07 <= 0.1 dropped; 0.71 kept
            ([1, math.nan, 0], [5, 5, 5], 0.0, [5]),  # NaN ignored: {1, 0} varies
            ([1], [3], 0.0, []),  # singleton dropped
        ],
    )
    def test_table(self, rewards, groups, thr, kept):
        out = dapo_keep_groups(T(rewards, dtype=torch.float32), T(groups), std_threshold=thr)
        assert out.tolist() == kept

    @HYP
    @given(data=grouped_rewards(rounded=True))  # spreads of 1e-290 underflow the std to 0
    def test_kept_groups_have_nonzero_advantages(self, data):
        r, g = data
        mask = dapo_keep_mask(r, g)
        adv = group_advantages(r, g)
        for gid in g.unique():
            sel = g == gid
            has_signal = bool((adv[sel] != 0).any())
            assert bool(mask[sel].all()) == has_signal


class TestLosses:
    def setup_method(self):
        torch.manual_seed(0)
        self.B, self.Tn = 3, 5
        self.logp = -torch.rand(self.B, self.Tn)
        self.old = self.logp + 0.3 * torch.randn(self.B, self.Tn)
        self.mask = T([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float32)

    @HYP
    @given(d=st.lists(st.floats(-30, 30), min_size=1, max_size=16))
    def test_k3_nonnegative(self, d):
        x = T(d)
        assert (kl_k3(torch.zeros_like(x), x) >= 0).all()

    def test_k3_values(self):
        # d = ref - logp = 1 -> e - 2; d = 0 -> 0
        assert kl_k3(T([0.0, 0.0]), T([1.0, 0.0])).tolist() == pytest.approx([math.e - 2, 0.0])

    def test_shapes_and_on_policy_value(self):
        adv = T([1.0, -1.0, 0.5])
        loss, st_ = clipped_surrogate(self.logp, self.logp, adv, self.mask)
        assert loss.shape == () and st_["pg_losses"].shape == (self.B, self.Tn)
        # ratio == 1: per-token loss is -A; token-mean over 5 + 2 + 1 tokens
        assert float(loss) == pytest.approx(-(5 * 1 - 2 * 1 + 0.5) / 8)
        assert float(st_["clipfrac"]) == 0.0

    @pytest.mark.parametrize(
        "log_ratio, adv, eps_low, eps_high, expected",
        [
            (math.log(1.5), 1.0, 0.2, 0.2, -1.2),  # positive A, ratio above 1+eps: clipped
            (math.log(1.5), 1.0, 0.2, 0.28, -1.28),  # clip-higher raises the cap
            (math.log(0.5), 1.0, 0.2, 0.2, -0.5),  # positive A, low ratio: unclipped (pessimistic)
            (math.log(0.5), -1.0, 0.2, 0.2, 0.8),  # negative A, low ratio: clipped at 0.8
            (math.log(1.5), -1.0, 0.2, 0.2, 1.5),  # negative A, high ratio: unclipped
        ],
    )
    def test_clip_cases(self, log_ratio, adv, eps_low, eps_high, expected):
        logp = T([[log_ratio]])
        loss, _ = clipped_surrogate(
            logp, torch.zeros(1, 1), T([adv]), torch.ones(1, 1), eps_low=eps_low, eps_high=eps_high
        )
        assert float(loss) == pytest.approx(expected)

    def test_aggregation_equivalences(self):
        x = torch.randn(self.B, self.Tn)
        full = torch.ones(self.B, self.Tn)
        # equal lengths: token-mean == seq-mean-token-mean; seq-mean-token-sum == T * token-mean
        assert agg_loss(x, full, "token-mean") == pytest.approx(float(agg_loss(x, full, "seq-mean-token-mean")))
        assert agg_loss(x, full, "seq-mean-token-sum") == pytest.approx(
            self.Tn * float(agg_loss(x, full, "token-mean"))
        )
        # Dr. GRPO norm with norm_len = T equals seq-mean-token-sum / T even with padding
        a = agg_loss(x, self.mask, "seq-mean-token-sum-norm", norm_len=self.Tn)
        assert float(a) == pytest.approx(float(agg_loss(x, self.mask, "seq-mean-token-sum")) / self.Tn)
        # with padding, token-mean and seq-mean-token-mean differ (long sequences weigh more)
        y = T([[1.0] * 5, [0.0] * 5, [0.0] * 5])
        assert float(agg_loss(y, self.mask, "token-mean")) == pytest.approx(5 / 8)
        assert float(agg_loss(y, self.mask, "seq-mean-token-mean")) == pytest.approx(1 / 3)

    def test_padding_is_ignored(self):
        x = torch.randn(self.B, self.Tn)
        x2 = x.clone()
        x2[self.mask == 0] = 1e6
        for mode in LOSS_AGG_MODES:
            assert float(agg_loss(x, self.mask, mode)) == pytest.approx(float(agg_loss(x2, self.mask, mode)))

    def test_policy_loss_adds_kl(self):
        adv = T([1.0, 0.0, -1.0])
        ref = self.logp - 0.1
        loss0, _ = policy_loss(self.logp, self.old, adv, self.mask)
        loss1, s = policy_loss(self.logp, self.old, adv, self.mask, ref_logp=ref, beta=0.5)
        assert float(loss1) == pytest.approx(float(loss0) + 0.5 * float(s["kl"]))
        assert float(s["kl"]) > 0

    def test_gradient_direction(self):
        # positive advantage: minimising the loss raises logp of that sequence
        logp = torch.zeros(1, 2, requires_grad=True)
        loss, _ = clipped_surrogate(logp, torch.zeros(1, 2), T([1.0]), torch.ones(1, 2))
        loss.backward()
        assert (logp.grad < 0).all()

    def test_errors(self):
        with pytest.raises(KeyError, match="unknown loss aggregation"):
            agg_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum")
        with pytest.raises(ValueError, match="beta"):
            policy_loss(self.logp, self.old, T([1.0, 1.0, 1.0]), self.mask, beta=0.1)


@st.composite
def split_batches(draw):
    """A (B, T) loss matrix with a padded mask, split into ranks x micro-batches of rows."""
    b = draw(st.integers(2, 9))
    t = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 10_000))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, generator=g, dtype=torch.float64)
    lengths = draw(st.lists(st.integers(0, t), min_size=b, max_size=b))
    mask = torch.tensor([[1.0] * n + [0.0] * (t - n) for n in lengths], dtype=torch.float64)
    dp = draw(st.integers(1, 3))
    # each row goes to a rank, then each rank's rows are cut into micro-batches
    owner = draw(st.lists(st.integers(0, dp - 1), min_size=b, max_size=b))
    micro = draw(st.integers(1, 4))
    parts = []
    for r in range(dp):
        rows = [i for i in range(b) if owner[i] == r]
        parts.append([rows[j : j + micro] for j in range(0, len(rows), micro)])
    return x, mask, parts


class TestDataParallelAggregation:
    """verl agg_loss with a global normaliser / TRL dapo with num_items_in_batch: the split of one
    optimizer step's batch over ranks and micro-batches must not change the loss."""

    @pytest.mark.parametrize("mode", sorted(LOSS_AGG_MODES))
    @settings(max_examples=60, deadline=None)
    @given(data=split_batches())
    def test_split_equals_whole(self, mode, data):
        x, mask, parts = data
        whole = agg_loss(x, mask, mode, norm_len=6)
        dp = len(parts)
        norm = sum(float(agg_norm(mask[rows], mode, norm_len=6)) for rank in parts for rows in rank)
        # per rank: sum over its micro-batches (gradient accumulation); over ranks: the mean (DDP)
        per_rank = [
            sum(float(agg_loss(x[rows], mask[rows], mode, norm_len=6, global_norm=norm, dp_size=dp)) for rows in rank)
            for rank in parts
        ]
        assert sum(per_rank) / dp == pytest.approx(float(whole), rel=1e-9, abs=1e-12)

    def test_two_ranks_by_hand(self):
        # rank 0 holds 3 valid tokens summing to 3, rank 1 one token of 5: token-mean is 8 / 4 = 2
        x = T([[1.0, 1.0, 1.0], [5.0, 0.0, 0.0]])
        mask = T([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
        r0 = agg_loss(x[:1], mask[:1], "token-mean", global_norm=4.0, dp_size=2)
        r1 = agg_loss(x[1:], mask[1:], "token-mean", global_norm=4.0, dp_size=2)
        assert (float(r0), float(r1)) == pytest.approx((1.5, 2.5))  # 3/4*2, 5/4*2
        assert float(r0 + r1) / 2 == pytest.approx(2.0)
        # each rank on its own count instead: (1 + 5) / 2 = 3, the split-dependent answer
        local = (agg_loss(x[:1], mask[:1], "token-mean") + agg_loss(x[1:], mask[1:], "token-mean")) / 2
        assert float(local) == pytest.approx(3.0)

    @pytest.mark.parametrize(
        "mode, expected",
        [
            ("token-mean", 4.0),  # valid tokens 3 + 1 + 0
            ("seq-mean-token-mean", 2.0),  # non-empty sequences
            ("seq-mean-token-sum", 3.0),  # all sequences
            ("seq-mean-token-sum-norm", 15.0),  # sequences x norm_len 5
        ],
    )
    def test_agg_norm(self, mode, expected):
        mask = T([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        assert float(agg_norm(mask, mode, norm_len=5)) == expected

    def test_policy_loss_passes_the_global_normaliser(self):
        torch.manual_seed(1)
        f64 = torch.float64
        logp = -torch.rand(4, 3, dtype=f64)
        old = logp + 0.2 * torch.randn(4, 3, dtype=f64)
        ref = logp - 0.1
        mask = T([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=f64)
        adv = T([1.0, -1.0, 0.5, 0.2], dtype=f64)
        kw = dict(beta=0.1, eps_low=0.2, eps_high=0.28)
        whole, _ = policy_loss(logp, old, adv, mask, ref_logp=ref, **kw)
        n = float(agg_norm(mask))
        halves = [
            policy_loss(logp[s], old[s], adv[s], mask[s], ref_logp=ref[s], global_norm=n, dp_size=2, **kw)[0]
            for s in (slice(0, 2), slice(2, 4))
        ]
        assert float(sum(halves)) / 2 == pytest.approx(float(whole), rel=1e-12)

    def test_errors(self):
        with pytest.raises(ValueError, match="global_norm"):
            agg_loss(torch.zeros(1, 1), torch.ones(1, 1), dp_size=2)
        with pytest.raises(ValueError, match="dp_size"):
            agg_loss(torch.zeros(1, 1), torch.ones(1, 1), global_norm=1.0, dp_size=0)
        with pytest.raises(KeyError, match="unknown loss aggregation"):
            agg_norm(torch.ones(1, 1), "sum")


def _sample(group: int, reward: float, n_tokens: int = 2) -> Sample:
    return Sample(prompt=([], []), completion_ids=tuple(range(n_tokens)), text="", group=group, reward=reward)


class TestSamplesAndHooks:
    def test_task_stream_is_resumable_and_epoch_shuffled(self):
        a = TaskStream(list(range(5)), seed=3)
        first = a.next(7)  # crosses into the second epoch
        assert sorted(first[:5]) == [0, 1, 2, 3, 4] and a.epoch == pytest.approx(7 / 5)
        state = a.state_dict()
        rest = a.next(6)
        b = TaskStream(list(range(5)), seed=3)
        b.load_state_dict(state)
        assert b.next(6) == rest  # resumed stream continues identically
        assert TaskStream(list(range(5)), seed=3).next(13) == first + rest
        assert TaskStream(list(range(5)), seed=4).next(5) != first[:5]  # another seed, another order
        assert TaskStream(list(range(5)), shuffle=False).next(6) == [0, 1, 2, 3, 4, 0]

    def test_task_stream_errors(self):
        with pytest.raises(ValueError, match="empty"):
            TaskStream([])
        s = TaskStream([1, 2])
        with pytest.raises(ValueError, match="training data changed"):
            s.load_state_dict({"cursor": 1, "n_items": 3, "seed": 0})

    def test_renumber_and_take_groups(self):
        samples = [_sample(g, 0.0) for g in (5, 5, 2, 2, 9)]
        assert renumber_groups(samples, 10) == 13
        assert [s.group for s in samples] == [10, 10, 11, 11, 12]
        # first two groups in draw order, whole
        assert [s.group for s in take_groups(samples, 2)] == [10, 10, 11, 11]
        assert take_groups(samples, 0) == []
        assert len(take_groups(samples, 9)) == 5

    def test_group_advantage_hook(self):
        samples = [_sample(0, 1.0), _sample(0, 0.0), _sample(1, 0.5), _sample(1, 0.5)]
        adv = group_advantage_hook("grpo")(samples)
        assert adv.tolist() == pytest.approx([0.7071, -0.7071, 0.0, 0.0], abs=1e-4)
        assert group_advantage_hook("dr_grpo")(samples).tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])
        assert group_advantage_hook()([]).numel() == 0
        with pytest.raises(KeyError, match="unknown advantage estimator"):
            group_advantage_hook("ppo")

    def test_dapo_keep_hook(self):
        samples = [_sample(0, 1.0), _sample(0, 0.0), _sample(1, 1.0), _sample(1, 1.0), _sample(2, 1.0), _sample(2, 0.9)]
        assert dapo_keep_hook(0.0)(samples) == [True, True, False, False, True, True]
        # std of {1, 0.9} is 0.07: dropped at threshold 0.2 (CCPO Table 8, AndroidControl)
        assert dapo_keep_hook(0.2)(samples) == [True, True, False, False, False, False]


class TestSemiOnline:
    @pytest.mark.parametrize(
        "matches, threshold, kinds",
        [
            ([True, True, True], 1, ["keep", "keep", "keep"]),  # no errors
            ([True, False, True, False, True], 1, ["keep", "patch", "keep", "stop"]),  # 2nd error stops
            ([False, False, False], -1, ["patch", "patch", "patch"]),  # unlimited
            ([False, True], 0, ["stop"]),  # no patching: first error ends the rollout
            ([False, False, True], 2, ["patch", "patch", "keep"]),
        ],
    )
    def test_patch_module(self, matches, threshold, kinds):
        assert [d.kind for d in simulate_patched_rollout(matches, threshold)] == kinds

    def test_patch_counts(self):
        assert patch_step(False, 0, 1).patches_used == 1
        assert patch_step(True, 1, 1).patches_used == 1
        with pytest.raises(ValueError):
            patch_step(False, 0, -2)

    @pytest.mark.parametrize(
        "rewards, matches, gamma, expected",
        [
            ([1, 1, 1], None, 0.5, [1.75, 1.5, 1.0]),  # plain discounting
            ([1, 1, 1], [True, True, True], 0.5, [1.75, 1.5, 1.0]),
            ([1, 0.55, 1], [True, False, True], 0.5, [1.0, 0.55, 1.0]),  # cut at step 1: step 0 sees nothing after it
            ([0.2, 1.0], [True, True], 0.0, [0.2, 1.0]),  # gamma 0: step rewards
        ],
    )
    def test_discounted_returns(self, rewards, matches, gamma, expected):
        assert discounted_step_returns(rewards, gamma, matches) == pytest.approx(expected)

    @HYP
    @given(
        data=st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=6),
        n_traj=st.integers(1, 3),
        gamma=st.floats(0, 1),
        seed=st.integers(0, 1000),
    )
    def test_batch_equals_per_trajectory(self, data, n_traj, gamma, seed):
        rs, ms, tids, sids = [], [], [], []
        for t in range(n_traj):
            for s_, (r, m) in enumerate(data):
                rs.append(r), ms.append(m), tids.append(t), sids.append(s_)
        perm = torch.randperm(len(rs), generator=torch.Generator().manual_seed(seed))
        r_t, m_t, t_t, s_t = T(rs, dtype=torch.float64)[perm], T(ms)[perm], T(tids)[perm], T(sids)[perm]
        out = discounted_step_returns_batch(r_t, t_t, s_t, gamma, m_t)
        ref = discounted_step_returns([r for r, _ in data], gamma, [m for _, m in data])
        for i in range(len(rs)):
            assert float(out[i]) == pytest.approx(ref[int(s_t[i])])

    def test_episode_returns(self):
        assert episode_returns(T([1.0, 2.0, 0.5]), T([0, 0, 1])).tolist() == [3.0, 3.0, 0.5]

    def test_uis1_advantages_combine(self):
        # task 0 with two rollouts of two steps each
        ep = T([2.0, 2.0, 1.0, 1.0])
        step = T([1.5, 1.0, 0.5, 1.0])
        grp = T([0, 0, 0, 0])
        sid = T([0, 1, 0, 1])
        adv = uis1_advantages(ep, step, grp, sid, omega=1.0, mode="mean_norm")
        # episode: mean 1.5 -> +0.5, +0.5, -0.5, -0.5; step 0 group {1.5, 0.5} -> +-0.5; step 1 {1, 1} -> 0
        assert adv.tolist() == pytest.approx([1.0, 0.5, -1.0, -0.5])
        only_ep = uis1_advantages(ep, step, grp, sid, omega=0.0)
        assert only_ep.tolist() == pytest.approx([0.5, 0.5, -0.5, -0.5])


class TestCompletionLogprobs:
    """The engine's log-probs come from the model forward with images; they must equal what
    ``generate`` computed for the same tokens (same 3-D mrope positions)."""

    @pytest.fixture(scope="class")
    def tiny(self):
        from guirl.models import build_tiny_model, load_model, load_processor

        path = build_tiny_model()
        return load_model(path), load_processor(path, min_pixels=3136, max_pixels=3136 * 16)

    @staticmethod
    def _prompts():
        from PIL import Image

        from guirl.prompts import PromptSpec, build_prompt

        red, green = Image.new("RGB", (112, 224), (200, 30, 30)), Image.new("RGB", (224, 112), (20, 130, 30))
        spec = PromptSpec(output_format="ccpo", n_history=2)
        return [
            build_prompt("open notes", [], red, spec),  # 1 image
            build_prompt("type milk", [("click", green), ("click", red)], green, spec),  # 3 images
        ]

    def test_equal_to_generation_scores_and_mrope_matters(self, tiny):
        from guirl.rl.logprobs import FORWARD_KEYS, completion_logprobs, encode_samples, open_image, prompt_texts

        model, proc = tiny
        prompts = self._prompts()
        enc = proc(
            text=prompt_texts(proc, prompts),
            images=[[open_image(x) for x in ims] for _, ims in prompts],
            return_tensors="pt",
            padding=True,
            padding_side="left",
        )
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(
                **enc, max_new_tokens=6, do_sample=True, output_logits=True, return_dict_in_generate=True
            )
        new = out.sequences[:, enc["input_ids"].shape[1] :]
        reference = torch.log_softmax(torch.stack(out.logits, 1).float(), -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        batch = encode_samples(proc, prompts, [row.tolist() for row in new])
        assert batch["image_grid_thw"].shape[0] == 4 and batch["mm_token_type_ids"].shape == batch["input_ids"].shape
        with torch.no_grad():
            ours, ent = completion_logprobs(model, batch, with_entropy=True)
            no_mrope, _ = completion_logprobs(
                model, batch, forward_keys=[k for k in FORWARD_KEYS if k != "mm_token_type_ids"]
            )
        assert torch.allclose(ours, reference, atol=1e-5)  # float32 rounding only
        assert (no_mrope - reference).abs().max() > 1e-3  # docs/stack.md pitfall: positions silently change
        assert ent.shape == ours.shape and (ent > 0).all()

    def test_temperature_scales_the_distribution(self, tiny):
        from guirl.rl.logprobs import completion_logprobs, encode_samples

        model, proc = tiny
        batch = encode_samples(proc, self._prompts()[:1], [(5, 6, 7)])
        with torch.no_grad():
            lp1, ent1 = completion_logprobs(model, batch, with_entropy=True)
            lp2, ent2 = completion_logprobs(model, batch, temperature=2.0, with_entropy=True)
        assert not torch.allclose(lp1, lp2)
        # log softmax(logits / 2): a flatter distribution, higher entropy at every position
        assert (ent2 > ent1).all()
        with pytest.raises(ValueError, match="temperature"):
            completion_logprobs(model, batch, temperature=0.0)

    @pytest.mark.parametrize(
        "prompts_images, completions, match",
        [
            (1, [(1, 2), (3,)], "1 prompts but 2 completions"),  # lengths differ
            (1, [()], "empty completion"),  # nothing generated
            (0, [(1,)], "image placeholders"),  # an image list that does not fit the placeholders
        ],
    )
    def test_encode_errors(self, tiny, prompts_images, completions, match):
        from guirl.rl.logprobs import encode_samples

        _, proc = tiny
        messages, images = self._prompts()[0]
        prompt = (messages, images[:prompts_images])
        with pytest.raises(ValueError, match=match):
            encode_samples(proc, [prompt], completions)
