"""Tests for guirl.rl: group advantages (vectorised == loop), DAPO filter, losses, UI-S1 semi-online."""

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
from guirl.rl.losses import LOSS_AGG_MODES, agg_loss, clipped_surrogate, kl_k3, policy_loss
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
