"""rlspec.algos.trust_region on tiny fixed batches and ToyGoal-v0: TRPO's accepted step is the
natural-gradient step (explicit Fisher), improves the surrogate and keeps KL <= δ, a step with no acceptable
candidate leaves the actor unchanged and is reported; CPO's case follows c = J_c − d and its accepted step
keeps the cost-surrogate constraint; TRPOLag's and TRPOPID's λ rise under a cost above the limit; P3O's
penalty is inactive (and the update unchanged) when the cost surrogate plus c is negative; runs resume bit
for bit."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlspec.algos import safe_ppo
from rlspec.algos.safe_ppo import Kit, PPOConfig, Rollout, SafetyConfig, advantages, make_state, process_advantages
from rlspec.algos.safe_update import update
from rlspec.algos.trust_region import TrustRegionConfig
from rlspec.contracts.trust_region import (
    ALL_FEASIBLE,
    FEASIBLE_RECOVERY,
    INFEASIBLE_RECOVERY,
    KL_VIOLATED,
    PARTLY_FEASIBLE,
    ZERO_COST_GRAD,
    FlatParams,
)
from rlspec.engines import safe
from rlspec.runs.config import ConfigError
from rlspec.runs.rundir import load_checkpoint, read_metrics

KIT = Kit.reference()
D, A, T, N = 3, 2, 16, 2
PPO = PPOConfig(hidden=(4,), update_iters=2, batch_size=16, linear_lr_decay=False)
SAFETY = SafetyConfig()  # cost limit 25


def state_for(algo: str, ppo: PPOConfig = PPO, seed: int = 0):
    return make_state(algo, ppo, SAFETY, D, A, N, KIT, torch.Generator().manual_seed(seed))


def batch_for(state, seed: int = 1) -> Rollout:
    """A fixed rollout whose log-probabilities are the actor's own (ratio 1 at θ_old)."""
    g = torch.Generator().manual_seed(seed)
    obs, act = torch.randn(T, N, D, generator=g), torch.randn(T, N, A, generator=g)
    with torch.no_grad():
        logp = state.actor.log_prob(obs, act)[0]
    return Rollout(obs=obs, act=act, logp=logp, reward=torch.randn(T, N, generator=g),
                   cost=torch.rand(T, N, generator=g), terminated=torch.zeros(T, N, dtype=torch.bool),
                   truncated=torch.zeros(T, N, dtype=torch.bool), next_obs=torch.randn(T, N, D, generator=g),
                   raw_obs=obs)


def processed(state, batch):
    """(A_r, A_c) [M] as the update sees them (before the update touches the critics)."""
    (adv_r, _, _), (adv_c, _, _) = advantages(state, batch, PPO, KIT)
    return process_advantages(adv_r.reshape(-1), adv_c.reshape(-1), PPO)


def surrogate(actor, batch, adv) -> float:
    """mean(π_θ(a|s)/π_old(a|s)·A), independently of the module under test."""
    with torch.no_grad():
        logp = actor.log_prob(batch.obs.reshape(T * N, D), batch.act.reshape(T * N, A))[0]
    return float((torch.exp(logp - batch.logp.reshape(-1)) * adv).mean())


def mean_kl(old_actor, actor, batch) -> float:
    obs = batch.obs.reshape(T * N, D)
    with torch.no_grad():
        return float(torch.distributions.kl_divergence(old_actor(obs), actor(obs)).mean())


def run_update(state, batch, jc=10.0, kit=KIT, tr=TrustRegionConfig(), ppo=PPO):
    old = {k: v.clone() for k, v in state.actor.state_dict().items()}
    metrics = update(state, batch, jc, ppo, SAFETY, kit, torch.Generator().manual_seed(5), tr=tr)
    return old, metrics


def old_actor(state, old):
    copy = make_state(state.algo, PPO, SAFETY, D, A, N, KIT, torch.Generator().manual_seed(0)).actor
    copy.load_state_dict(old)
    return copy


# ----------------------------------------------------------------------------------------------- TRPO
def test_trpo_accepted_step_is_the_natural_gradient_step_within_the_trust_region():
    state = state_for("TRPO")
    batch = batch_for(state)
    adv, _ = processed(state, batch)
    flat = FlatParams(state.actor)
    theta = flat.get().double()
    obs, act, logp_old = batch.obs.reshape(-1, D), batch.act.reshape(-1, A), batch.logp.reshape(-1)
    before = surrogate(state.actor, batch, adv)
    # explicit float64 Fisher of the mean KL (+ damping) and gradient of the surrogate
    actor64 = old_actor(state, state.actor.state_dict()).double()
    f64 = FlatParams(actor64)
    with torch.no_grad():
        p_old = f64.call(theta, obs.double())
    kl = lambda th: torch.distributions.kl_divergence(p_old, f64.call(th, obs.double())).mean()  # noqa: E731
    F = torch.autograd.functional.hessian(kl, theta) + 0.1 * torch.eye(theta.numel(), dtype=torch.float64)
    s = lambda th: (torch.exp(f64.call(th, obs.double()).log_prob(act.double()).sum(-1)  # noqa: E731
                              - logp_old.double()) * adv.double()).mean()
    g = torch.autograd.functional.jacobian(s, theta)
    x = torch.linalg.solve(F, g)
    want = math.sqrt(2 * 0.01 / float(x @ F @ x + 1e-8)) * x

    old, m = run_update(state, batch, tr=TrustRegionConfig(cg_iters=3 * theta.numel()))
    assert m["Misc/AcceptanceStep"] == 1.0 and m["Misc/LineSearchRejections"] == 0.0
    step = flat.get().double() - theta
    # the direction is F⁻¹g up to OmniSafe's CG eps (1e-6 in α and β), the length puts ½ΔᵀFΔ at δ
    assert float(step @ want) / float(step.norm() * want.norm()) > 0.999
    assert float(0.5 * step @ F @ step) == pytest.approx(0.01, rel=1e-3)
    after = surrogate(state.actor, batch, adv)
    kl_after = mean_kl(old_actor(state, old), state.actor, batch)
    assert after > before and m["Loss/Loss_pi"] == pytest.approx(-after, rel=1e-5, abs=1e-7)
    assert kl_after <= 0.01 and m["Train/KL"] == pytest.approx(kl_after, rel=1e-4)
    assert m["Misc/FinalStepNorm"] == pytest.approx(float(step.norm()), rel=1e-5)


def test_trpo_without_an_acceptable_candidate_keeps_the_actor_and_reports_it():
    big_step = lambda x, xFx, max_kl: 100.0 * KIT.natural_step(x, xFx, max_kl)  # noqa: E731  KL ≈ 1e4·δ
    kit = dataclasses.replace(KIT, natural_step=big_step)
    state = state_for("TRPO")
    batch = batch_for(state)
    old, m = run_update(state, batch, kit=kit, tr=TrustRegionConfig(line_search_steps=3))
    assert all(torch.equal(state.actor.state_dict()[k], v) for k, v in old.items())
    assert m["Misc/AcceptanceStep"] == 0.0 and m["Train/KL"] == 0.0 and m["Misc/FinalStepNorm"] == 0.0
    assert int(m["Misc/LineSearchRejections"]) & KL_VIOLATED
    assert not math.isnan(m["Loss/Loss_reward_critic"])  # the critics still learn


def test_trpo_uses_the_reward_advantage_and_trpolag_the_combined_one():
    """TRPOLag with λ = 0 (no finished episode: J_c NaN) takes TRPO's step; with λ > 0 another one."""
    steps = {}
    for algo, jc, lam0 in (("TRPO", math.nan, 0.0), ("TRPOLag", math.nan, 0.0), ("TRPOLag", math.nan, 2.0)):
        state = state_for(algo)
        if state.multiplier is not None:
            state.multiplier.lagrangian_multiplier = torch.tensor(lam0)
        before = FlatParams(state.actor).get()
        run_update(state, batch_for(state), jc=jc)
        steps[(algo, lam0)] = FlatParams(state.actor).get() - before
    assert torch.equal(steps[("TRPO", 0.0)], steps[("TRPOLag", 0.0)])
    assert not torch.allclose(steps[("TRPO", 0.0)], steps[("TRPOLag", 2.0)])


# ------------------------------------------------------------------------------------------------ CPO
@pytest.mark.parametrize("jc, cases", [
    (0.0, (ALL_FEASIBLE, ZERO_COST_GRAD)),  # c = −25: the whole trust region is feasible
    (math.nan, (ALL_FEASIBLE, ZERO_COST_GRAD)),  # no finished episode: counted as feasible
    (25.0 - 1e-4, (PARTLY_FEASIBLE,)),  # c < 0 but the constraint cuts the trust region (c² < 2δs)
    (25.0, (FEASIBLE_RECOVERY,)),  # c = 0: on the boundary
    (1e4, (INFEASIBLE_RECOVERY,)),  # c ≫ 0: no feasible point in the trust region
])
def test_cpo_case_follows_the_constraint_and_the_accepted_step_keeps_it(jc, cases):
    state = state_for("CPO")
    batch = batch_for(state)
    adv_r, adv_c = processed(state, batch)
    before_r, before_c = surrogate(state.actor, batch, adv_r), surrogate(state.actor, batch, adv_c)
    calls = []

    def recording_line_search(*args, **kwargs):
        calls.append(kwargs)
        return KIT.line_search(*args, **kwargs)

    old, m = run_update(state, batch, jc=jc, kit=dataclasses.replace(KIT, line_search=recording_line_search))
    assert m["Misc/OptimCase"] in cases, m
    # OmniSafe's _cpo_search_step: S_c(θ_old) = mean(A_c) (ρ = 1), violation c, 20 candidates, improvement
    # required in cases 2–4 only
    (ls,) = calls
    assert ls["cost_before"] == pytest.approx(float(adv_c.mean()), abs=1e-7) and ls["max_steps"] == 20
    assert ls["cost_violation"] == (jc - 25.0 if math.isfinite(jc) else -math.inf)
    assert ls["require_improvement"] == (m["Misc/OptimCase"] >= PARTLY_FEASIBLE)
    c = jc - 25.0 if math.isfinite(jc) else -math.inf
    assert m["Misc/B"] == pytest.approx(0.02 - c * c / (m["Misc/s"] + 1e-8)) if math.isfinite(c) else True
    after_r, after_c = surrogate(state.actor, batch, adv_r), surrogate(state.actor, batch, adv_c)
    if m["Misc/AcceptanceStep"] > 0:
        assert after_c - before_c <= max(-c, 0.0) + 1e-12
        assert mean_kl(old_actor(state, old), state.actor, batch) <= 0.01
        if m["Misc/OptimCase"] >= PARTLY_FEASIBLE:
            assert after_r >= before_r
    if m["Misc/OptimCase"] == INFEASIBLE_RECOVERY:  # the step only lowers the cost surrogate
        assert m["Misc/AcceptanceStep"] > 0 and after_c < before_c
        assert m["Misc/Lambda_star"] == 0.0 and m["Misc/Nu_star"] > 0
    assert m["Misc/cost_gradient_norm"] > 0 and math.isfinite(m["Loss/Loss_cost_critic"])


# ------------------------------------------------------------------------------------------------ P3O
def test_p3o_penalty_inactive_when_the_constraint_holds():
    """c = J_c − d = −25 makes S_c + c < 0: the penalty and its gradient vanish, so the update equals the
    one with κ = 0; with c = +1e3 it is active and the actor moves elsewhere."""
    outs, cost_surrogate = {}, {}
    for jc, kappa in ((0.0, 20.0), (0.0, 0.0), (1025.0, 20.0)):
        state = state_for("P3O")
        batch = batch_for(state)
        _, adv_c = processed(state, batch)
        _, m = run_update(state, batch, jc=jc, tr=TrustRegionConfig(kappa=kappa))
        outs[(jc, kappa)] = (FlatParams(state.actor).get(), m)
        cost_surrogate[(jc, kappa)] = surrogate(state.actor, batch, adv_c)
    (inactive, m0), (no_penalty, _), (active, m1) = outs.values()
    assert m0["Loss/Loss_pi_cost"] == 0.0 and torch.equal(inactive, no_penalty)
    assert m1["Loss/Loss_pi_cost"] > 0 and not torch.equal(active, inactive)
    assert cost_surrogate[(1025.0, 20.0)] < cost_surrogate[(0.0, 0.0)]  # the active penalty lowers S_c


def test_p3o_penalty_is_kappa_relu_of_the_cost_surrogate_plus_c():
    """First minibatch of the first epoch sees ρ = 1: the penalty is κ·(mean(A_c over it) + c)."""
    state = state_for("P3O")
    batch = batch_for(state)
    _, adv_c = processed(state, batch)
    ppo = dataclasses.replace(PPO, update_iters=1, batch_size=T * N)  # one minibatch: the whole rollout
    _, m = run_update(state, batch, jc=30.0, ppo=ppo)
    assert m["Loss/Loss_pi_cost"] == pytest.approx(20.0 * max(float(adv_c.mean()) + 5.0, 0.0), rel=1e-5)


# ------------------------------------------------------------------------------------------- dispatch
def test_ppo_family_goes_to_its_own_update_unchanged():
    a, b = state_for("PPOLag"), state_for("PPOLag")
    batch = batch_for(a)
    ma = safe_ppo.update(a, batch, 30.0, PPO, SAFETY, KIT, torch.Generator().manual_seed(5))
    mb = update(b, batch, 30.0, PPO, SAFETY, KIT, torch.Generator().manual_seed(5))
    assert ma == mb or all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(ma.values(), mb.values()))
    assert all(torch.equal(a.actor.state_dict()[k], v) for k, v in b.actor.state_dict().items())


def test_ppo_update_refuses_a_trust_region_state():
    state = state_for("CPO")
    with pytest.raises(ValueError, match="algo 'CPO' is trained by rlspec.algos.safe_update.update"):
        safe_ppo.update(state, batch_for(state), 0.0, PPO, SAFETY, KIT, torch.Generator())


def test_bad_trust_region_setting_is_named():
    cfg = safe.build_config(overrides=["algo=TRPO", "env_id=ToyGoal-v0", "trust_region.line_search_decay=1.5"])
    with pytest.raises(Exception, match=r"config key 'trust_region.line_search_decay': expected in \(0, 1\), got 1.5"):
        safe.validate(cfg)


@pytest.mark.parametrize("override, says", [
    ("safety.cost_limit=-1", "config key 'safety.cost_limit': OmniSafeLagrange: argument 'cost_limit' must lie in "
                             "[0.0, inf), got -1.0"),
    ("ppo.activation=gelu", "config key 'ppo.activation': mlp: argument 'activation' must be one of "
                            "['elu', 'relu', 'tanh'], got 'gelu'"),
])
def test_a_value_only_an_object_checks_is_refused_by_key_before_the_run(override, says):
    """The networks' and controllers' own validation runs in validate(), so the error names the config key."""
    cfg = safe.build_config(overrides=["algo=PPOLag", "env_id=ToyGoal-v0", override])
    with pytest.raises(ConfigError) as err:
        safe.validate(cfg)
    assert str(err.value) == says


# ---------------------------------------------------------------------------- engine runs on ToyGoal
TINY = ["env_id=ToyGoal-v0", "total_steps=450", "steps_per_epoch=150", "num_envs=2", "ep_window=5",
        "ppo.update_iters=2", "ppo.batch_size=50", "ppo.hidden=[16]"]


def _rows(path):
    return [{k: v for k, v in r.items() if not k.startswith("Time/")} for r in read_metrics(path)]


def _same(a, b) -> bool:
    return a.keys() == b.keys() and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a.values(),
                                                                                                    b.values()))


@pytest.mark.parametrize("algo", ["TRPO", "TRPOLag", "TRPOPID", "CPO", "P3O"])
def test_resumed_run_equals_straight_run(tmp_path, algo):
    cfg = safe.build_config(overrides=[f"algo={algo}", *TINY, "forced_cost=0.3"])
    straight = safe.run(cfg, tmp_path / "straight", show_progress=False)
    part = safe.run(cfg, tmp_path / "resumed", stop_after_epochs=1, show_progress=False)
    safe.run(cfg, part, resume=True, show_progress=False)
    a, b = _rows(straight), _rows(part)
    assert len(a) == len(b) == 3 and all(_same(x, y) for x, y in zip(a, b)), (a, b)
    ca, cb = load_checkpoint(straight / "checkpoints/last.pt"), load_checkpoint(part / "checkpoints/last.pt")
    for key in ("actor", "reward_critic"):
        assert all(torch.equal(ca[key][k], cb[key][k]) for k in ca[key])
    keys = {"TRPO": "Misc/AcceptanceStep", "TRPOLag": "Misc/AcceptanceStep", "TRPOPID": "Misc/AcceptanceStep",
            "CPO": "Misc/OptimCase", "P3O": "Loss/Loss_pi_cost"}
    assert all(math.isfinite(r[keys[algo]]) for r in a)


@pytest.mark.parametrize("algo", ["TRPOLag", "TRPOPID"])
def test_lambda_rises_when_cost_exceeds_the_limit(tmp_path, algo):
    cfg = safe.build_config(overrides=[f"algo={algo}", *TINY, "forced_cost=1.0"])  # ≥ 100 per episode > 25
    lam = [r["Metrics/LagrangeMultiplier"] for r in read_metrics(safe.run(cfg, tmp_path, show_progress=False))]
    assert 0.001 < lam[0] < lam[1] < lam[2]  # λ_0 = 0.001, then one Adam step up per epoch
