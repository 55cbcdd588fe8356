"""rlspec.algos.safe_ppo against closed forms: advantage processing and combination (OmniSafe
0.5.0 and seed forms), truncation bootstrap from V(final obs), λ before/after the update, KL stop before
the optimizer step, value clipping's own range, frozen observation normalizer, per-step reward scaling,
Sauté budget feedback, ratio/loss guards."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlspec.algos import safe_ppo
from rlspec.algos.safe_ppo import (
    Kit,
    PPOConfig,
    RewardScaler,
    Rollout,
    SafetyConfig,
    advantages,
    combine_advantages,
    env_feedback,
    make_state,
    process_advantages,
    update,
)
from rlspec.contracts.lagrange import saute_budget

KIT = Kit.reference()
D, A = 3, 2


def state_for(algo="PPOLag", num_envs=2, seed=0, **ppo):
    cfg = PPOConfig(**ppo)
    return make_state(algo, cfg, SafetyConfig(), D, A, num_envs, KIT, torch.Generator().manual_seed(seed)), cfg


def rollout(T=4, N=2, seed=1, dim=D, **override) -> Rollout:
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    fields = dict(obs=r(T, N, dim), act=r(T, N, A), logp=r(T, N) - 2, reward=r(T, N), cost=r(T, N).abs(),
                  terminated=torch.zeros(T, N, dtype=torch.bool), truncated=torch.zeros(T, N, dtype=torch.bool),
                  next_obs=r(T, N, dim), raw_obs=r(T, N, D))
    fields.update(override)
    return Rollout(**fields)


def test_process_advantages_is_omnisafe_buffer_get():
    adv_r, adv_c = torch.tensor([1.0, 2.0, 3.0, 6.0]), torch.tensor([1.0, 1.0, 2.0, 4.0])
    out_r, out_c = process_advantages(adv_r, adv_c, PPOConfig())
    pop_std = math.sqrt(((adv_r - 3) ** 2).mean().item())  # population std, as dist_statistics_scalar
    torch.testing.assert_close(out_r, (adv_r - 3.0) / (pop_std + 1e-8))
    torch.testing.assert_close(out_c, adv_c - 2.0)  # centered, not scaled
    same_r, same_c = process_advantages(adv_r, adv_c, PPOConfig(standardize_reward_adv=False, center_cost_adv=False))
    assert torch.equal(same_r, adv_r) and torch.equal(same_c, adv_c)


@pytest.mark.parametrize("value", [0.3, 1234.5678, -7e4])
def test_process_advantages_of_a_constant_batch_are_exact_zeros(value):
    """A constant float32 batch centres to exact zeros (the numerics contract's shifted mean): x − Σx/n leaves
    one rounding error e in every sample, which (x − μ)/(std + 1e-8) turned into 1 or −1 everywhere (a bias
    toward every action taken). An empty batch stays empty; a non-finite one stays non-finite (the LossGuard's)."""
    adv = torch.full((1000,), value)
    out_r, out_c = process_advantages(adv, adv.clone(), PPOConfig())
    assert torch.equal(out_r, torch.zeros(1000)) and torch.equal(out_c, torch.zeros(1000))
    empty_r, empty_c = process_advantages(torch.empty(0), torch.empty(0), PPOConfig())
    assert empty_r.shape == (0,) == empty_c.shape
    bad_r, _ = process_advantages(torch.tensor([1.0, math.nan, 2.0]), torch.zeros(3), PPOConfig())
    assert bad_r.isnan().all()


def test_combine_advantages_both_forms():
    adv_r, adv_c = torch.tensor([1.0, -1.0]), torch.tensor([2.0, 0.0])
    torch.testing.assert_close(combine_advantages(adv_r, adv_c, 1.0, "omnisafe"), torch.tensor([-0.5, -0.5]))
    torch.testing.assert_close(combine_advantages(adv_r, adv_c, 1.0, "seed"), torch.tensor([-1.0, -1.0]))
    torch.testing.assert_close(combine_advantages(adv_r, adv_c, 0.0, "omnisafe"), adv_r)
    with pytest.raises(ValueError, match="combine_advantages: argument 'mode' must be 'omnisafe' or 'seed', got 'x'"):
        combine_advantages(adv_r, adv_c, 1.0, "x")


class FirstFeature(torch.nn.Module):
    """V(s) = 10·s[..., 0]: a critic with a closed form."""

    def forward(self, obs):
        return 10 * obs[..., 0]


def test_truncation_bootstraps_the_final_observation():
    state, ppo = state_for(num_envs=1, gamma=0.9, lam=0.5)
    state.reward_critic = state.cost_critic = FirstFeature()
    obs = torch.tensor([[[1.0, 0, 0]], [[2.0, 0, 0]], [[3.0, 0, 0]]])  # [T=3, N=1, D]
    next_obs = torch.tensor([[[5.0, 0, 0]], [[3.0, 0, 0]], [[4.0, 0, 0]]])  # s'_0 = final obs (5), s'_1 = s_2
    term = torch.tensor([[False], [False], [False]])
    trunc = torch.tensor([[True], [False], [False]])
    batch = rollout(T=3, N=1, obs=obs, next_obs=next_obs, terminated=term, truncated=trunc,
                    reward=torch.tensor([[1.0], [2.0], [3.0]]), cost=torch.zeros(3, 1))
    (adv, ret, v), _ = advantages(state, batch, ppo, KIT)
    a2 = 3 + 0.9 * 40 - 30  # rollout cut: bootstrap V(s'_2)
    a1 = 2 + 0.9 * 30 - 20 + 0.9 * 0.5 * a2
    a0 = 1 + 0.9 * 50 - 10  # truncated: V(final obs), nothing carried from the next episode
    torch.testing.assert_close(adv[:, 0], torch.tensor([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + v)
    term_batch = dataclasses.replace(batch, terminated=trunc, truncated=term)  # a true terminal: no bootstrap
    (adv_t, _, _), _ = advantages(state, term_batch, ppo, KIT)
    assert adv_t[0, 0].item() == pytest.approx(1 - 10)


@pytest.mark.parametrize("when, expected", [("before", 0.001 + 0.035), ("after", 0.001)])
def test_lambda_update_before_or_after_the_policy_update(monkeypatch, when, expected):
    seen = []
    real = safe_ppo.combine_advantages
    monkeypatch.setattr(safe_ppo, "combine_advantages",
                        lambda r, c, lam, mode: seen.append(lam) or real(r, c, lam, mode))
    state, ppo = state_for(lambda_update=when, update_iters=1, batch_size=8)
    metrics = update(state, rollout(), jc=100.0, ppo=ppo, safety=SafetyConfig(), kit=KIT,
                     gen=torch.Generator().manual_seed(0))
    assert seen == [pytest.approx(expected)]  # Adam's first step moves λ by lr = 0.035 (J_c > d)
    assert metrics["Metrics/LagrangeMultiplier"] == pytest.approx(0.036)  # after the update either way


def test_nan_cost_skips_the_lambda_update():
    state, ppo = state_for(update_iters=1, batch_size=8)
    update(state, rollout(), jc=math.nan, ppo=ppo, safety=SafetyConfig(), kit=KIT, gen=torch.Generator())
    assert state.lagrange_multiplier() == pytest.approx(0.001) and int(state.multiplier.skipped) == 1


def _actor_steps(state) -> int:
    return int(next(iter(state.actor_opt.state.values()))["step"]) if state.actor_opt.state else 0


def test_kl_early_stop_is_checked_before_the_optimizer_step():
    state, ppo = state_for(target_kl=1e-12, update_iters=3, batch_size=4)
    batch = rollout()
    with torch.no_grad():  # the rollout's log-probs are the current policy's: the first KL is 0
        batch.logp.copy_(state.actor.log_prob(batch.obs, batch.act)[0])
    m = update(state, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator().manual_seed(0))
    assert _actor_steps(state) == 1  # step 1 (KL 0) taken; the second minibatch's KL > 1.5e-12 stops first
    assert m["Train/StopIter"] == 1 and m["Train/KL"] > 0
    free, ppo = state_for(target_kl=None, update_iters=3, batch_size=4)
    m = update(free, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator().manual_seed(0))
    assert _actor_steps(free) == 3 * 2 and m["Train/StopIter"] == 3  # 8 samples / 4 per minibatch, 3 epochs


def test_value_clipping_uses_its_own_range():
    calls = []

    def spy(values, old, returns, value_clip):
        calls.append(value_clip)
        return KIT.value_loss(values, old, returns, value_clip)

    kit = dataclasses.replace(KIT, value_loss=spy)
    state, ppo = state_for(value_clip=7.5, clip=0.1, target_kl=None, update_iters=1, batch_size=8)
    update(state, rollout(), 1.0, ppo, SafetyConfig(), kit, torch.Generator())
    assert calls == [7.5, 7.5]  # reward and cost critic, never the policy's clip 0.1


def test_observation_normalizer_is_frozen_during_the_rollout_and_commits_after():
    state, ppo = state_for(update_iters=1, batch_size=8)
    batch = rollout()
    x = torch.randn(2, D)
    before = state.obs_norm.normalize(x)
    update(state, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator())
    raw = batch.raw_obs.reshape(-1, D).double()
    n, eps = raw.shape[0], 1e-4
    assert float(state.obs_norm.rms.count) == pytest.approx(n + eps)
    torch.testing.assert_close(state.obs_norm.rms.mean, raw.mean(0) * n / (n + eps))
    assert not torch.equal(state.obs_norm.normalize(x), before)


def test_reward_scaler_updates_once_per_vectorized_step():
    scaler = RewardScaler(2, gamma=0.5, kit=KIT)
    r = torch.tensor([1.0, 3.0])
    out = scaler(r, torch.tensor([False, True]))
    eps = 1e-4  # RunningMeanStd starts at (mean 0, var 1, count 1e-4); one batch of both envs' returns
    var = (1 * eps + 1.0 * 2 + 4.0 * eps * 2 / (eps + 2)) / (eps + 2)
    torch.testing.assert_close(out, r / math.sqrt(var + 1e-8))  # the same statistics for both envs
    torch.testing.assert_close(scaler.ret, torch.tensor([1.0, 0.0], dtype=torch.float64))  # env 1 was done
    out2 = scaler(torch.tensor([2.0, 2.0]), torch.tensor([False, False]))
    assert float(scaler.rms.count) == pytest.approx(4 + eps) and out2[0] == out2[1]


def test_saute_feedback_keeps_the_final_budget_and_resets_done_envs():
    state, _ = state_for("PPOSaute")
    d = saute_budget(25.0, 0.999, 1000)
    reward = torch.tensor([1.0, 1.0])
    shaped, z_final = env_feedback(state, reward, torch.tensor([d / 2, 2 * d]), torch.tensor([True, False]))
    torch.testing.assert_close(z_final, torch.tensor([0.5 / 0.999, -1 / 0.999], dtype=torch.float64))
    torch.testing.assert_close(state.budget.z, torch.tensor([1.0, -1 / 0.999], dtype=torch.float64))
    torch.testing.assert_close(shaped, torch.tensor([1.0, -1.0]))  # budget spent: unsafe_reward
    obs = safe_ppo.policy_input(state, torch.zeros(2, D))
    assert obs.shape == (2, D + 1) and obs[0, -1] == 1.0


def test_simmer_controller_sets_the_saute_budget():
    state, _ = state_for("PPOSimmerPID")
    start = state.budget.budget
    safe_ppo.update_safety(state, 100.0, SafetyConfig())  # cost far above the budget: the budget shrinks
    assert state.budget.budget < start and state.budget.budget == float(state.simmer_budget[0])


def test_ratio_guard_counts_and_losses_stay_finite():
    state, ppo = state_for(target_kl=None, update_iters=1, batch_size=8)
    batch = rollout()
    batch.logp.fill_(-1e4)  # log ratio ≫ 20: clamped, counted
    m = update(state, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator())
    assert m["Guard/ratio_log_ratio_clamped"] == 8 and m["Guard/ratio_ratio_clamped"] == 8
    assert all(math.isfinite(m[k]) for k in ("Loss/Loss_pi", "Loss/Loss_reward_critic", "Loss/Loss_cost_critic"))


def test_loss_guard_zeroes_a_non_finite_loss_and_counts_it():
    state, ppo = state_for(target_kl=None, update_iters=1, batch_size=8)
    with torch.no_grad():
        state.actor.log_std[0] = math.nan  # every log-prob and the policy loss are NaN
    with pytest.warns(RuntimeWarning, match="LossGuard: non-finite pi loss"):
        m = update(state, rollout(), 1.0, ppo, SafetyConfig(), KIT, torch.Generator())
    assert m["Guard/nonfinite_pi"] == 1 and math.isnan(m["Loss/Loss_pi"])  # replaced by 0, counted; every step
    # of the update replaced: logged as NaN, so the engine's finite check stops the run (rlspec/algos/guards.py)
    assert m["Guard/nonfinite_reward_critic"] == 0 and m["Guard/ratio_nonfinite"] == 8


def test_non_finite_kl_stops_before_any_step():
    state, ppo = state_for(update_iters=2, batch_size=4)
    with torch.no_grad():
        state.actor.log_std[0] = math.nan
    m = update(state, rollout(), 1.0, ppo, SafetyConfig(), KIT, torch.Generator())
    assert m["Train/StopIter"] == 1 and _actor_steps(state) == 0


def test_same_generator_same_networks_and_unknown_algo():
    a, _ = state_for(seed=3)
    b, _ = state_for(seed=3)
    c, _ = state_for(seed=4)
    wa, wb, wc = (torch.cat([p.flatten() for p in s.actor.parameters()]) for s in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    with pytest.raises(ValueError, match="make_state: argument 'algo' must be one of"):
        state_for("PPOLagrange")  # TRPO was the example before it was added


@pytest.mark.parametrize("guarded", [None, "cost_critic"])
def test_one_backward_of_the_summed_losses_steps_each_network_as_its_own_backward_would(guarded):
    """optimize: the three networks' steps from one backward equal, bit for bit, a backward, clip and step per
    loss; a loss the guard replaced by a detached 0 leaves its network untouched."""
    def steps_of(state):
        obs = torch.randn(8, D, generator=torch.Generator().manual_seed(3))
        target = torch.randn(8, generator=torch.Generator().manual_seed(4))
        critics = safe_ppo.critic_steps(state, obs, target, target, target, 2 * target, cfg, KIT)
        if guarded == "cost_critic":
            critics[1] = (torch.zeros(()), *critics[1][1:])  # what the guard returns for a non-finite loss
        dist = state.actor(obs)
        actor_loss = -(dist.log_prob(torch.zeros(8, A)).sum(-1) * target).mean()
        return [*critics, (actor_loss, state.actor, state.actor_opt)]

    joint, cfg = state_for(max_grad_norm=0.05)  # a small clip norm: every network's gradient is clipped
    alone, _ = state_for(max_grad_norm=0.05)
    before = {k: v.clone() for k, v in alone.cost_critic.state_dict().items()}
    safe_ppo.optimize(steps_of(joint), cfg, safe_ppo.LOCAL)
    for loss, net, opt in steps_of(alone):  # one backward, clip and step per loss
        if loss.requires_grad:
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            opt.step()
    for name in ("actor", "reward_critic", "cost_critic"):
        a, b = getattr(joint, name).state_dict(), getattr(alone, name).state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    moved = any(not torch.equal(before[k], v) for k, v in joint.cost_critic.state_dict().items())
    assert moved == (guarded is None)


def test_the_pass_kl_check_is_omnisafes_exact_kl_after_each_pass():
    state, ppo = state_for(target_kl=1e-12, update_iters=3, batch_size=4, kl_check="pass")
    batch = rollout()
    obs = batch.obs.reshape(8, D)
    with torch.no_grad():
        old = state.actor(obs)
        before = [p.clone() for p in state.actor.parameters()]
    m = update(state, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator().manual_seed(0))
    assert _actor_steps(state) == 2 and m["Train/StopIter"] == 1  # one whole pass (8 / 4), then the stop
    with torch.no_grad():  # KL(N(μ0, σ0)‖N(μ1, σ1)) per dimension, summed over A, mean over the rollout
        mu0, s0, new = old.mean, old.stddev, state.actor(obs)
        closed = (torch.log(new.stddev / s0) + (s0 ** 2 + (mu0 - new.mean) ** 2) / (2 * new.stddev ** 2) - 0.5)
    assert m["Train/KL"] == pytest.approx(float(closed.sum(-1).mean()), rel=1e-3) and m["Train/KL"] > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, state.actor.parameters()))
    loose, ppo = state_for(target_kl=1e3, update_iters=3, batch_size=4, kl_check="pass")
    m = update(loose, batch, 1.0, ppo, SafetyConfig(), KIT, torch.Generator().manual_seed(0))
    assert _actor_steps(loose) == 3 * 2 and m["Train/StopIter"] == 3  # below the threshold: every pass runs


def test_an_update_logs_the_mean_loss_unless_the_guard_replaced_every_step():
    from rlspec.algos.guards import logged_loss

    assert logged_loss(3.0, 4, 0) == 0.75 and logged_loss(3.0, 4, 3) == 0.75  # a replaced step counts as 0
    assert math.isnan(logged_loss(0.0, 4, 4)) and math.isnan(logged_loss(0.0, 0, 0))
