"""The bonus-phase engine (success-set design): Part1 episode reassembly, the token task, V-trace targets with
truncation, the bonus phase's side-path guarantees, ablations, determinism and resume identity."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from rlspec.algos import bonus_vtrace as bv
from rlspec.algos.episodes import EpisodeAssembler
from rlspec.cli import main as cli_main
from rlspec.engines import bonus
from rlspec.envs import token_reach as tr
from rlspec.runs.config import ConfigError
from rlspec.runs.rundir import load_checkpoint, read_metrics


def _fragment(ep, ts, done, success=None, obs_dim=2):
    T = len(ts)
    obs = torch.arange(T * obs_dim, dtype=torch.float32).reshape(T, obs_dim) + 100 * ep
    return (torch.full((T,), ep), torch.tensor(ts), obs, torch.zeros(T, 2, dtype=torch.long), torch.ones(T),
            torch.tensor(done), torch.tensor(success or [False] * T))


# ------------------------------------------------------------------------------------------- Part1
def test_assembler_joins_interleaved_fragments_of_several_episodes():
    asm = EpisodeAssembler()
    assert asm.add(*_fragment(1, [0, 1], [False, False])) == []
    assert asm.add(*_fragment(2, [0], [False])) == []
    out = asm.add(*_fragment(1, [2, 3], [False, True], [False, True]))
    assert len(out) == 1 and out[0].success and out[0].ret == 4.0
    assert out[0].episode.ep_id == 1 and out[0].episode.states.shape == (4, 2)
    out = asm.add(*_fragment(2, [1], [True], [False]))
    assert len(out) == 1 and not out[0].success and out[0].episode.states.shape == (2, 2)
    assert asm.counts == {"finished": 2, "gaps": 0, "evicted": 0} and not asm.open


def test_assembler_drops_an_episode_with_a_lost_fragment_and_counts_it():
    asm = EpisodeAssembler()
    asm.add(*_fragment(1, [0, 1], [False, False]))
    assert asm.add(*_fragment(1, [4, 5], [False, True])) == []  # steps 2..3 were lost
    assert asm.add(*_fragment(2, [3, 4], [False, True])) == []  # its beginning was lost
    assert asm.counts["gaps"] == 2 and asm.counts["finished"] == 0 and not asm.open
    assert len(asm.add(*_fragment(3, [0, 1], [False, True]))) == 1  # the next whole episode is kept


def test_assembler_evicts_the_oldest_open_episode():
    asm = EpisodeAssembler(max_open=2)
    for ep in (1, 2, 3):
        asm.add(*_fragment(ep, [0], [False]))
    assert list(asm.open) == [2, 3] and asm.counts["evicted"] == 1


def test_assembler_names_a_misshapen_argument():
    ep, t, obs, act, rew, done, succ = _fragment(1, [0, 1], [False, False])
    with pytest.raises(ValueError, match="'reward' must have 2 rows"):
        EpisodeAssembler().add(ep, t, obs, act, rew[:1], done, succ)


# ---------------------------------------------------------------------------------------- the task
def test_token_reach_episodes_do_not_depend_on_the_number_of_envs():
    one, three = tr.TokenReachVector(1, seed=5), tr.TokenReachVector(3, seed=5)
    o1, o3 = one.reset(), three.reset()
    rng = np.random.default_rng(0)
    for _ in range(130):  # crosses episode ends (truncation at 60 steps)
        tokens = rng.integers(0, tr.N_BINS, (3, tr.ACTION_DIM))
        s1, s3 = one.step(tokens[:1]), three.step(tokens)
        np.testing.assert_array_equal(s1.obs[0], s3.obs[0])
        np.testing.assert_array_equal(s1.reward[0], s3.reward[0])
        assert s1.truncated[0] == s3.truncated[0]


def test_token_reach_wall_blocks_outside_the_gaps_and_success_terminates():
    env = tr.TokenReachVector(2, seed=0)
    env.reset()
    env.pos[:] = [[-0.05, 0.0], [-0.05, 0.5]]  # at the wall: between the gaps / in the upper gap
    env.goal[:] = [[0.1, 0.0], [0.1, 0.5]]
    right = np.array([[4, 2], [4, 2]])  # +1·STEP in x, 0 in y
    out = env.step(right)
    assert out.final_obs[0, 0] == np.float32(-0.05)  # blocked
    assert out.final_obs[1, 0] == np.float32(0.05) and out.success[1] and out.terminated[1]
    assert out.reward[1] == pytest.approx(0.1 + tr.SUCCESS_REWARD, abs=1e-6)
    assert env.t[1] == 0 and env.episodes[1] == 2  # autoreset


def test_token_reach_rejects_out_of_range_tokens():
    env = tr.TokenReachVector(1, seed=0)
    env.reset()
    with pytest.raises(ValueError, match=r"'tokens' must be ints in \[0, 5\) of shape \(1, 2\), got int64 of shape \(1, 2\) in \[0, 5\]"):
        env.step(np.array([[0, tr.N_BINS]]))
    with pytest.raises(ValueError, match="got float64"):
        env.step(np.array([[0.5, 1.0]]))


# --------------------------------------------------------------------------------------- V-trace
def test_vtrace_targets_on_policy_are_discounted_returns_with_the_timeout_bootstrapped():
    """On-policy (ρ = 1): v_s is the Monte-Carlo return to the episode end; a truncated step adds γ·V(s_final)
    and stops; a terminated one stops, also when the same step hit the time limit (terminal wins: no
    bootstrap); the fragment's end bootstraps V(s'_{T-1}) (float64 closed form)."""
    gen = torch.Generator().manual_seed(0)
    cfg = bv.LearnerConfig()
    st = bv.make_learner(cfg, 3, 2, 5, bv.BonusKit.reference(), gen)
    T = 5
    obs, next_obs = torch.randn(T, 1, 3, generator=gen), torch.randn(T, 1, 3, generator=gen)
    tokens = torch.randint(0, 5, (T, 1, 2), generator=gen)
    with torch.no_grad():
        logp = bv.token_logp(st.policy(obs), tokens)[0]
        nv = st.critic(next_obs)[:, 0].double()
    reward = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]])
    term = torch.tensor([[False], [False], [True], [False], [False]])
    trunc = torch.tensor([[False], [True], [True], [False], [False]])  # step 2: terminated at the time limit
    batch = bv.Fragment(obs, tokens, logp, reward, term, trunc, next_obs)
    from rlspec.reference.vtrace import vtrace

    _, vs, _, rho = bv.vtrace_targets(st, batch, cfg, vtrace)
    g = cfg.gamma
    expected = [1 + g * (2 + g * nv[1]), 2 + g * nv[1], 3.0, 4 + g * (5 + g * nv[4]), 5 + g * nv[4]]
    torch.testing.assert_close(vs[:, 0].double(), torch.stack([torch.as_tensor(e, dtype=torch.float64)
                                                               for e in expected]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rho, torch.ones_like(rho))


# ------------------------------------------------------------------------------ return scale, clips
def test_return_scale_is_the_std_of_the_discounted_return_restarted_at_episode_ends():
    """Closed form: rewards 1, 2, 3 ... of two envs fed as two workers' fragments; G restarts after a done;
    σ_G² is the variance of every G_t (float64; the RunningMeanStd prior: count 1e-4 of variance 1)."""
    g = 0.9
    scale = bv.ReturnScale(4, g, bv.BonusKit.reference())
    reward = torch.arange(1.0, 7.0).reshape(3, 2)  # [T, N]
    done = torch.tensor([[False, False], [True, False], [False, False]])
    scale.observe(reward, done, torch.tensor([3, 1]))
    scale.observe(reward[:1], done[:1], torch.tensor([3, 1]))  # the next fragment continues both envs
    env3 = [1.0, g * 1 + 3, 5.0, g * 5 + 1]  # G of env 3: the done after its second step restarts it
    env1 = [2.0, g * 2 + 4, g * (g * 2 + 4) + 6, g * (g * (g * 2 + 4) + 6) + 2]
    expected = np.var(env3 + env1)
    n = 8
    prior = (1e-4 * 1.0 + n * expected + np.mean(env3 + env1) ** 2 * 1e-4 * n / (n + 1e-4)) / (n + 1e-4)
    assert scale.scale() == pytest.approx(math.sqrt(prior + 1e-8), rel=1e-9)
    torch.testing.assert_close(scale.ret[[3, 1]], torch.tensor([env3[-1], env1[-1]], dtype=torch.float64))
    assert scale.ret[[0, 2]].eq(0).all()


def _update_after_return_scale(c: float, normalize: bool):
    """A fresh learner's policy and critic after one main update on a batch with rewards × c."""
    gen = torch.Generator().manual_seed(1)
    cfg = bv.LearnerConfig(epochs=2, minibatches=2)
    st = bv.make_learner(cfg, 3, 2, 5, bv.BonusKit.reference(), gen)
    T, N = 16, 4
    obs = torch.randn(T + 1, N, 3, generator=gen)
    tokens = torch.randint(0, 5, (T, N, 2), generator=gen)
    with torch.no_grad():
        logp = bv.token_logp(st.policy(obs[:-1]), tokens)[0] - 0.1 * torch.rand(T, N, generator=gen)
    reward = c * (1 + 0.5 * torch.randn(T, N, generator=gen))  # [T, N]
    term = torch.rand(T, N, generator=gen) < 0.05
    trunc = ~term & (torch.rand(T, N, generator=gen) < 0.05)
    scale = bv.ReturnScale(N, cfg.gamma, bv.BonusKit.reference())
    scale.observe(reward, term | trunc, torch.arange(N))
    batch = bv.Fragment(obs[:-1], tokens, logp, reward, term, trunc, obs[1:])
    kit = bv.BonusKit.reference()
    metrics = bv.ppo_vtrace_update(st, batch, cfg, kit, gen, return_scale=scale.scale() if normalize else 1.0)
    return st, metrics


@pytest.mark.parametrize("c", [0.1, 300.0])
def test_scaling_rewards_by_c_leaves_the_normalized_update_unchanged(c):
    """σ_G scales with c, so the normalized targets, losses and both networks after the update are the same;
    without the normalization the policy's update differs (the initial critic's O(1) values weigh differently
    against rewards × c in the advantages: the check can fail)."""
    ref, m_ref = _update_after_return_scale(1.0, True)
    got, m_got = _update_after_return_scale(c, True)
    # exact but for RunningMeanStd's prior (count 1e-4 of variance 1: a 1e-4/(n·Var[G]) bias)
    assert m_got["Train/ReturnScale"] == pytest.approx(c * m_ref["Train/ReturnScale"], rel=1e-4)
    assert m_got["Loss/Loss_value"] == pytest.approx(m_ref["Loss/Loss_value"], rel=1e-4)
    for net in ("policy", "critic"):
        for (k, a), b in zip(getattr(ref, net).state_dict().items(), getattr(got, net).state_dict().values()):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"{net}.{k}")
    raw, _ = _update_after_return_scale(c, False)
    raw_ref, _ = _update_after_return_scale(1.0, False)
    assert not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in
                   zip(raw.policy.state_dict().values(), raw_ref.policy.state_dict().values()))


def _update_on_observations(scale: torch.Tensor, shift: torch.Tensor, normalize: bool):
    """A fresh learner's networks after one main update on observations scale·x + shift (per dimension), the
    statistics committed from the batch as the replay side commits them."""
    gen = torch.Generator().manual_seed(2)
    cfg = bv.LearnerConfig(epochs=2, minibatches=2, normalize_obs=normalize)
    kit = bv.BonusKit.reference()
    st = bv.make_learner(cfg, 3, 2, 5, kit, gen)
    T, N = 16, 4
    obs = (scale * torch.randn(T + 1, N, 3, generator=gen, dtype=torch.float64) + shift).float()
    tokens = torch.randint(0, 5, (T, N, 2), generator=gen)
    logp = -1 - torch.rand(T, N, generator=gen)  # a behaviour policy that does not read the observations
    reward = 1 + 0.5 * torch.randn(T, N, generator=gen)
    done = torch.rand(T, N, generator=gen) < 0.05
    if normalize:
        norm = kit.ObsNormalizer((3,))
        norm.commit(obs[:-1].reshape(-1, 3))
        st.policy.norm.set_extra_state(norm.state_dict())
    batch = bv.Fragment(obs[:-1], tokens, logp, reward, done, torch.zeros_like(done), obs[1:])
    bv.ppo_vtrace_update(st, batch, cfg, kit, gen)
    return {f"{net}.{k}": v for net in ("policy", "critic") for k, v in getattr(st, net).state_dict().items()
            if k.startswith("net.")}


def test_normalized_observations_make_the_update_invariant_to_their_affine_scale():
    """With normalize_obs the policy and the critic both see (obs − μ)/σ, so observations a·x + b (a > 0 per
    dimension) give the same update as x, up to the RunningMeanStd prior (count 1e-4); without it they do not
    (the check can fail: e.g. a critic fed raw observations)."""
    one, zero = torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    scale, shift = torch.tensor([3.0, 0.5, 40.0], dtype=torch.float64), torch.tensor([-2.0, 1.0, 10.0],
                                                                                      dtype=torch.float64)
    ref, got = _update_on_observations(one, zero, True), _update_on_observations(scale, shift, True)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-3, atol=1e-4, msg=k)
    raw_ref, raw = _update_on_observations(one, zero, False), _update_on_observations(scale, shift, False)
    assert not all(torch.allclose(raw[k], raw_ref[k], rtol=1e-3, atol=1e-4) for k in raw_ref)


def test_observation_statistics_travel_with_the_policy_weights():
    """A policy built elsewhere (a rollout worker, `rlspec eval`) that loads the learner's state_dict acts on
    the same normalized input: the statistics are the ObsNorm's extra state."""
    kit, gen = bv.BonusKit.reference(), torch.Generator().manual_seed(4)
    cfg = bv.LearnerConfig(normalize_obs=True)
    learner = bv.make_policy(cfg, 3, 2, 5, kit, gen)
    norm = kit.ObsNormalizer((3,))
    norm.commit(5 + 2 * torch.randn(64, 3, generator=gen))
    learner.norm.set_extra_state(norm.state_dict())
    worker = bv.make_policy(cfg, 3, 2, 5, kit, torch.Generator())
    obs = 5 + 2 * torch.randn(8, 3, generator=gen)
    assert not torch.allclose(worker(obs), learner(obs))
    worker.load_state_dict(learner.state_dict())
    torch.testing.assert_close(worker(obs), learner(obs), rtol=0, atol=0)
    torch.testing.assert_close(learner.norm(obs), norm.normalize(obs), rtol=0, atol=0)
    assert set(bv.make_policy(bv.LearnerConfig(), 3, 2, 5, kit, gen).state_dict()) == {  # off: no extra keys
        k for k in learner.state_dict() if k.startswith("net.")}


def _guarded_update(critic=None, **learner):
    """A fresh learner (action_dim 2) after one main update with LearnerConfig(**learner); ``critic``: a wrapper
    installed after the V-trace targets are computed (a critic that goes wrong during the update)."""
    gen = torch.Generator().manual_seed(3)
    cfg = bv.LearnerConfig(**{"epochs": 4, "minibatches": 2, **learner})
    st = bv.make_learner(cfg, 3, 2, 5, bv.BonusKit.reference(), gen)
    T, N = 16, 4
    obs = torch.randn(T + 1, N, 3, generator=gen)
    tokens = torch.randint(0, 5, (T, N, 2), generator=gen)
    with torch.no_grad():
        logp = bv.token_logp(st.policy(obs[:-1]), tokens)[0]
    batch = bv.Fragment(obs[:-1], tokens, logp, torch.randn(T, N, generator=gen), torch.zeros(T, N, dtype=torch.bool),
                        torch.zeros(T, N, dtype=torch.bool), obs[1:])
    kit = bv.BonusKit.reference()
    if critic is not None:
        targets = bv.vtrace_targets
        def wrapped(state, *args):  # targets from the healthy critic, then the update sees the wrapper
            out = targets(state, *args)
            state.critic = critic(state.critic)
            return out
        bv_targets, bv.vtrace_targets = bv.vtrace_targets, wrapped
        try:
            return st, bv.ppo_vtrace_update(st, batch, cfg, kit, gen)
        finally:
            bv.vtrace_targets = bv_targets
    return st, bv.ppo_vtrace_update(st, batch, cfg, kit, gen)


def test_kl_early_stop_ends_the_epochs_and_equals_the_shorter_update():
    """Above target_kl after the first epoch, the remaining epochs are skipped: the networks equal an update of one
    epoch (the same generator draws), and the stop is logged; without target_kl every epoch runs."""
    stopped, m = _guarded_update(target_kl=1e-12)
    one, m_one = _guarded_update(epochs=1)
    assert m["Train/StopIter"] == 1 and m["Guard/KLEarlyStop"] == 1 and m_one["Guard/KLEarlyStop"] == 0
    for (k, a), b in zip(one.policy.state_dict().items(), stopped.policy.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=k)
    _, m_all = _guarded_update()
    assert m_all["Train/StopIter"] == 4 and m_all["Guard/KLEarlyStop"] == 0
    _, m_loose = _guarded_update(target_kl=10.0)
    assert m_loose["Train/StopIter"] == 4


def test_ratio_guard_counts_clamps_when_the_policy_runs_away_and_heads_log_their_entropy():
    """lr 5 over 8 epochs moves π far from π_old: log-ratios beyond log 100 are clamped and counted; a small lr
    clamps nothing. Per-head entropies sum to Train/Entropy (each minibatch's Σ_d H_d)."""
    _, wild = _guarded_update(lr=5.0, epochs=8)
    _, calm = _guarded_update(lr=1e-5)
    assert wild["Guard/RatioClamped"] > 0 and calm["Guard/RatioClamped"] == 0 == calm["Guard/RatioNonFinite"]
    assert math.isfinite(wild["Loss/Loss_pi"])
    assert calm["Train/Entropy/0"] + calm["Train/Entropy/1"] == pytest.approx(calm["Train/Entropy"], rel=1e-6)
    assert 0 < calm["Train/Entropy/0"] <= math.log(5) + 1e-6


class _Diverged(torch.nn.Module):
    """A critic whose outputs became non-finite."""

    def __init__(self, critic):
        super().__init__()
        self.inner = critic

    def forward(self, obs):
        return self.inner(obs) * math.inf


def test_a_non_finite_value_loss_is_zeroed_and_counted_and_leaves_the_critic():
    before = None
    def diverge(critic):
        nonlocal before
        before = {k: v.clone() for k, v in critic.state_dict().items()}
        return _Diverged(critic)
    with pytest.warns(RuntimeWarning, match="non-finite value loss"):
        st, m = _guarded_update(critic=diverge)
    assert m["Guard/LossNonFinite/value"] == 4 * 2 and m["Guard/LossNonFinite/policy"] == 0  # epochs × minibatches
    # every value step replaced: logged as NaN, which stops a run as Diverged (rlspec/algos/guards.py)
    assert math.isnan(m["Loss/Loss_value"]) and math.isfinite(m["Loss/Loss_pi"])
    for k, v in st.critic.inner.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0, msg=k)


def test_policy_and_critic_gradients_are_clipped_apart():
    """A huge critic gradient no longer shrinks the policy's: each group is clipped to its own norm."""
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([a, b], lr=1.0)
    loss = (torch.tensor([0.3, 0.4]) * a).sum() + (torch.tensor([300.0, 400.0]) * b).sum()
    norms = bv._step(opt, loss, [([a], 1.0), ([b], 0.5)], None)
    assert norms == pytest.approx([0.5, 500.0])
    torch.testing.assert_close(a.detach(), torch.tensor([-0.3, -0.4]))  # under its clip: untouched
    torch.testing.assert_close(b.detach(), torch.tensor([-0.3, -0.4]))  # 500 clipped to 0.5


# ------------------------------------------------------------------------------------ the engine
def smoke(tmp_path, name="run", **overrides):
    cfg = bonus.build_config("smoke", [f"{k}={v}" for k, v in overrides.items()])
    return bonus.run(cfg, tmp_path / name, show_progress=False), cfg


def test_smoke_run_mines_pairs_triggers_bonus_time_and_learns_to_succeed_sometimes(tmp_path):
    out, _ = smoke(tmp_path)
    rows = read_metrics(out)
    last = rows[-1]
    assert all(math.isfinite(r["Loss/Loss_pi"]) and math.isfinite(r["Loss/Loss_value"]) for r in rows)
    assert last["pairs/mined"] > 0 and last["pairs/errors"] == 0 and last["episodes/gaps"] == 0
    ran = [r for r in rows if r["bonus/ran"] == 1]
    assert ran and all(0 < r["bonus/updates"] <= 4 for r in ran) and last["bonus/errors"] == 0
    assert all(r["bonus/not_triggered_reason_code"] in (1, 2, 3, 4) for r in rows if r["bonus/ran"] == 0)
    assert last["Metrics/SuccessRate"] > 0  # the random policy already succeeds now and then; mining needs it
    assert (out / "plots/success.png").is_file() and (out / "checkpoints/last.pt").is_file()


def test_same_seed_same_run_and_resume_is_identical(tmp_path):
    a, _ = smoke(tmp_path, "a")
    b, _ = smoke(tmp_path, "b")
    cfg = bonus.build_config("smoke")
    bonus.run(cfg, tmp_path / "c", stop_after_updates=10, show_progress=False)
    bonus.run(cfg, tmp_path / "c", resume=True, show_progress=False)
    ref = read_metrics(a)
    for other in (b, tmp_path / "c"):
        rows = read_metrics(other)
        assert len(rows) == len(ref)
        for r0, r1 in zip(ref, rows):
            assert {k: v for k, v in r0.items() if k != "Time/env_steps_per_s"} == pytest.approx(
                {k: v for k, v in r1.items() if k != "Time/env_steps_per_s"}, nan_ok=True, rel=0, abs=0)
    wa, wc = (load_checkpoint(p / "checkpoints/last.pt")["world"]["learner"]["policy"] for p in (a, tmp_path / "c"))
    assert all(torch.equal(wa[k], wc[k]) for k in wa)


def test_normalized_observations_resume_identically_and_every_step_is_committed_once(tmp_path):
    """normalize_obs: the statistics (the replay side's and the policy's copy) are checkpointed, so a resumed
    run repeats the uninterrupted one; every collected observation was committed once (count = env steps + the
    1e-4 prior) and the policy holds the statistics of its last update's batch; `rlspec eval` loads them."""
    a, cfg = smoke(tmp_path, "a", **{"learner.normalize_obs": "true"})
    bonus.run(cfg, tmp_path / "c", stop_after_updates=10, show_progress=False)
    bonus.run(cfg, tmp_path / "c", resume=True, show_progress=False)
    for r0, r1 in zip(read_metrics(a), read_metrics(tmp_path / "c"), strict=True):
        assert {k: v for k, v in r0.items() if k != "Time/env_steps_per_s"} == pytest.approx(
            {k: v for k, v in r1.items() if k != "Time/env_steps_per_s"}, nan_ok=True, rel=0, abs=0)
    world = load_checkpoint(a / "checkpoints/last.pt")["world"]
    stats, policy = world["replay"]["obs_norm"], world["learner"]["policy"]
    assert float(stats["count"]) == pytest.approx(cfg.total_steps + 1e-4, rel=1e-12)
    assert all(torch.equal(policy["norm._extra_state"][k], stats[k]) for k in ("mean", "var", "count"))
    assert not torch.allclose(stats["var"], torch.ones_like(stats["var"]))
    assert cli_main(["eval", str(a), "--episodes", "2"]) == 0


@pytest.mark.parametrize("ablation", ["baseline", "queue", "top1"])
def test_ablations_turn_on_only_their_parts(tmp_path, ablation):
    out, _ = smoke(tmp_path, ablation=ablation, total_steps=2048)
    rows = read_metrics(out)
    keys = set(rows[-1])
    assert ("pairs/queue" in keys) == (ablation != "baseline")
    assert ("bonus/ran" in keys) == (ablation == "top1")
    if ablation == "top1":
        packs = load_checkpoint(out / "checkpoints/last.pt")["world"]["replay"]["queue"]
        assert packs and all(len(p.succ_ep_ids) == 1 for p in packs)


@pytest.mark.parametrize("ablation", ["topk", "placebo"])
def test_the_placebo_shuffles_each_batchs_positive_sets_across_its_rows(tmp_path, monkeypatch, ablation):
    """placebo: Loss A gets the stacked batch with its positive sets permuted across rows (same states, failed
    actions and weights); topk gets them as stacked."""
    stacked, given, real_stack = [], [], bv.stack_packs
    monkeypatch.setattr(bv, "stack_packs", lambda *a: stacked.append(real_stack(*a)) or stacked[-1])
    real = bv.BonusKit.named

    def recording(*args, **kwargs):
        given.append(args[1:4])  # fail_actions, pos_mask, zone_w
        return real.__func__(bv.BonusKit, "reference").loss_a(*args, **kwargs)

    monkeypatch.setattr(bv.BonusKit, "named", classmethod(lambda cls, name: dataclasses.replace(
        real.__func__(cls, name), loss_a=recording)))
    smoke(tmp_path, ablation=ablation, total_steps=4096)
    assert given, "bonus time never ran"
    _, fail, pos, w = stacked[-1]  # the last bonus batch; its Loss A calls are the last ones
    got_fail, got_pos, got_w = given[-1]
    assert torch.equal(got_fail, fail) and torch.equal(got_w, w.float())
    rows = sorted(map(tuple, pos.flatten(1).tolist()))
    assert sorted(map(tuple, got_pos.flatten(1).tolist())) == rows  # the same positive sets, row for row
    assert torch.equal(got_pos, pos) == (ablation == "topk")


def test_heldout_packs_log_the_margin_change_of_packs_never_trained_on(tmp_path, monkeypatch):
    """learner.heldout_packs: the last packs reserved are kept out of the bonus batch (the stacked batches alternate
    trained, held out) and bonus/heldout_margin_change is logged; without it the key is absent."""
    stacked, real_stack = [], bv.stack_packs
    monkeypatch.setattr(bv, "stack_packs", lambda packs, n: stacked.append(len(packs)) or real_stack(packs, n))
    out, cfg = smoke(tmp_path, **{"learner.heldout_packs": 1}, total_steps=4096)
    rows = [r for r in read_metrics(out) if r["bonus/ran"] == 1]
    changes = [r["bonus/heldout_margin_change"] for r in rows]
    assert rows and all(math.isfinite(c) for c in changes) and any(c != 0 for c in changes)
    assert 1 in stacked  # a held-out batch of one pack was built beside the trained ones
    plain, _ = smoke(tmp_path, name="plain", total_steps=2048)
    assert "bonus/heldout_margin_change" not in read_metrics(plain)[-1]


def test_a_failing_bonus_phase_is_counted_and_training_goes_on(tmp_path, monkeypatch):
    def broken_loss_a(*args, **kwargs):
        raise RuntimeError("planted")

    real = bv.BonusKit.named
    monkeypatch.setattr(bv.BonusKit, "named", classmethod(lambda cls, name: dataclasses.replace(
        real.__func__(cls, name), loss_a=broken_loss_a)))
    out, cfg = smoke(tmp_path)
    rows = read_metrics(out)
    per_update = cfg.num_envs * cfg.fragment_len
    assert rows[-1]["bonus/errors"] > 0 and rows[-1]["step"] == cfg.total_steps // per_update * per_update
    ran = [r for r in rows if r["bonus/ran"] == 1]
    # a failing update reports KL = inf: the guard stops bonus time after it (every rank alike)
    assert ran and all(r["bonus/updates"] == 1 and r["bonus/early_stop_reason"] == 1 for r in ran)


def test_bonus_step_raises_the_success_set_over_the_failed_action():
    """One Loss A step on a fixed batch: Loss A falls, log p⁺ − log p⁻ rises (contract success_set SUCC: the
    gradient direction), and the guard sees a small KL."""
    from rlspec.reference.success_set import loss_a

    gen = torch.Generator().manual_seed(0)
    cfg = dataclasses.replace(bv.LearnerConfig(), bonus_lr=1e-2)
    st = bv.make_learner(cfg, 4, 2, 5, bv.BonusKit.reference(), gen)
    states = torch.randn(16, 4, generator=gen)
    fail = torch.randint(0, 5, (16, 2), generator=gen)
    pos = torch.zeros(16, 2, 5, dtype=torch.bool)
    pos[..., 0] = True
    pos.scatter_(-1, ((fail + 2) % 5).unsqueeze(-1), True)
    pos.scatter_(-1, fail.unsqueeze(-1), False)
    w = torch.ones(16)
    before = loss_a(st.policy(states), fail, pos, w)
    with torch.no_grad():
        ref_logp = torch.log_softmax(st.policy(states), -1)
    kl, _ = bv._bonus_step(st, (states, fail, pos, w), ref_logp, bv.SuccessSetConfig(), 0.5, loss_a)
    after = loss_a(st.policy(states), fail, pos, w)
    assert float(after.loss.detach()) < float(before.loss.detach())
    assert float((after.logp_pos - after.logp_neg).mean().detach()) > float((before.logp_pos - before.logp_neg).mean().detach())
    assert 0 < kl < 0.5


def test_cli_trains_and_reports_bad_keys(tmp_path, capsys):
    assert cli_main(["train", "bonus", "--set", "nope=1", "--out", str(tmp_path / "x")]) == 2
    assert "nope" in capsys.readouterr().err
    assert cli_main(["train", "bonus", "--set", "num_envs=0", "--out", str(tmp_path / "y")]) == 2
    assert "'num_envs': expected an int >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="config key 'task': expected token-reach or metaworld:NAME-v3, got 'pong'"):
        bonus.validate(bonus.build_config(overrides=["task=pong"]))
    with pytest.raises(ConfigError, match="config key 'execution'"):
        bonus.validate(bonus.build_config(overrides=["execution=threads"]))
    with pytest.raises(ConfigError, match="config key 'learner.target_kl': the KL early stop needs trainers = 1"):
        bonus.validate(bonus.build_config(overrides=["execution=ray", "trainers=2", "rollout_workers=2",
                                                     "learner.target_kl=0.02"]))
    with pytest.raises(ConfigError, match="config key 'learner.target_kl': expected > 0 or none, got -0.1"):
        bonus.validate(bonus.build_config(overrides=["learner.target_kl=-0.1"]))
    bonus.validate(bonus.build_config(overrides=["learner.target_kl=0.02"]))  # one trainer: accepted
    run = tmp_path / "z"
    assert cli_main(["train", "bonus", "--preset", "smoke", "--set", "total_steps=512", "--out", str(run),
                     "--quiet"]) == 0
    assert cli_main(["eval", str(run), "--episodes", "2"]) == 0
    assert (run / "eval/eval.json").is_file()


def test_best_policy_is_the_ema_of_the_weights_after_each_update():
    cfg = bonus.build_config("smoke", ["best_workers=1", "best_ema=0.9"])
    w = bonus.World(cfg)
    side = w.learner
    before = {k: v.clone() for k, v in side.ema.items()}
    w.train_update(256)
    now = side.learner.policy.state_dict()
    for k in before:
        torch.testing.assert_close(side.ema[k], 0.9 * before[k] + 0.1 * now[k], rtol=1e-6, atol=1e-7)
    assert bonus.World(bonus.build_config("smoke")).learner.ema is None  # nothing kept when no worker uses it
    w = bonus.World(bonus.build_config("smoke", ["best_workers=1", "learner.normalize_obs=true"]))
    w.train_update(256)  # the weights' EMA, the current observation statistics
    assert all(torch.equal(w.learner.ema["norm._extra_state"][k], v)
               for k, v in w.learner.learner.policy.norm.get_extra_state().items())
    with pytest.raises(ConfigError, match="'best_workers'"):
        bonus.validate(bonus.build_config("smoke", ["best_workers=2"]))


def test_kit_names_the_implementations_and_the_former_fast_key_is_refused(tmp_path, capsys):
    """kit=reference|fast (one meaning of "fast": the fast/ twins); the boolean key it replaced is an unknown
    key now, from --set and from a config.json."""
    from rlspec.algos.bonus_vtrace import BonusKit
    from rlspec.fast import vtrace as fast_vtrace
    from rlspec.runs import config as runconfig

    assert bonus.build_config(overrides=["kit=fast"]).kit == "fast"
    with pytest.raises(ConfigError, match="fast"):
        bonus.build_config(overrides=["fast=true"])
    with pytest.raises(ConfigError, match="fast"):
        runconfig.from_dict(bonus.BonusConfig, {**runconfig.to_dict(bonus.build_config()), "fast": True})
    assert BonusKit.named("fast").vtrace is fast_vtrace.vtrace
    with pytest.raises(ConfigError, match=r"config key 'kit': expected one of \['reference', 'fast'\], got 'turbo'"):
        bonus.validate(bonus.build_config(overrides=["kit=turbo"]))


def test_the_metaworld_preset_is_the_learner_measured_beside_sb3():
    """The README's Meta-World numbers for `--preset metaworld` come from runs whose config differs from the
    default learner's runs by exactly the preset's keys (benchmarks/bonus/results/bonus_vs_sb3_reach-v3.json records each
    arm's settings): the preset cannot drift from the evidence unnoticed."""
    import json
    from pathlib import Path

    from rlspec.engines.bonus.config import PRESETS

    bench = json.loads((Path(__file__).parents[3] / "benchmarks/bonus/results/bonus_vs_sb3_reach-v3.json").read_text())
    default, preset = bench["settings"]["rlspec default baseline"], bench["settings"]["rlspec metaworld baseline"]
    assert {k: v for k, v in preset.items() if default.get(k) != v} == PRESETS["metaworld"]
    cfg = bonus.build_config("metaworld")
    assert cfg.learner.normalize_obs and cfg.learner.epochs == PRESETS["metaworld"]["learner.epochs"]


def _update_with_constant_advantages(reward: float, kit_name: str):
    """A fresh learner's policy after one main update whose V-trace advantages all equal ``reward``: γ = 0, the
    critic's output layer zeroed (V ≡ 0), on-policy, no episode ends, so A_t = r_t = reward everywhere."""
    gen = torch.Generator().manual_seed(5)
    cfg = bv.LearnerConfig(epochs=2, minibatches=2, gamma=0.0)
    kit = bv.BonusKit.named(kit_name)
    st = bv.make_learner(cfg, 3, 2, 5, kit, gen)
    last = [m for m in st.critic.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    T, N = 7, 3
    obs = torch.randn(T + 1, N, 3, generator=gen)
    tokens = torch.randint(0, 5, (T, N, 2), generator=gen)
    with torch.no_grad():
        logp = bv.token_logp(st.policy(obs[:-1]), tokens)[0]
    never = torch.zeros(T, N, dtype=torch.bool)
    batch = bv.Fragment(obs[:-1], tokens, logp, torch.full((T, N), reward), never, never, obs[1:])
    bv.ppo_vtrace_update(st, batch, cfg, kit, gen)
    return st.policy.state_dict()


@pytest.mark.parametrize("kit_name", ["reference", "fast"])
def test_constant_advantages_standardize_to_zero_through_the_kits_safe_form(kit_name):
    """Advantages standardized by the numerics contract's safe_standardize: a constant batch (0.3 in float32,
    whose mean is not exactly 0.3) is zero-centred exactly, so the policy moves as with all-zero advantages (the
    entropy term only). (A − mean)/(std + 1e-8) turned it into ±0.75 rounding noise and a policy gradient."""
    noisy = torch.full((21,), 0.3)
    assert ((noisy - noisy.mean()) / (noisy.std(unbiased=False) + 1e-8)).abs().max() > 0.1  # the old form's noise
    for (k, a), b in zip(_update_with_constant_advantages(0.0, kit_name).items(),
                         _update_with_constant_advantages(0.3, kit_name).values()):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=k)
    kit = bv.BonusKit.named(kit_name)
    assert kit.safe_standardize(torch.empty(0)).shape == (0,)  # an empty batch: empty, no NaN
    assert kit.safe_standardize(torch.tensor([1.0, math.nan, 2.0])).isnan().all()  # non-finite: the LossGuard's
