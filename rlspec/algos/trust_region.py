"""Functional core of the trust-region algorithms on Safety-Gymnasium: TRPO, TRPOLag, CPO and P3O (PPOLagSem design
§2A), and TRPOPID (TRPO with CPPOPID's PID λ, OmniSafe's TRPOPID: a second anchor),
built on the PPO family's pieces (rlspec/algos/safe_ppo.py: state, rollout, critics, GAE and advantage
processing, λ via ``update_safety``, loss guards) and the contract ``trust_region`` through the Kit.

``p3o_update`` is the PPO family's update (``safe_ppo.update``) with P3O's minibatch actor loss;
``natural_update`` (TRPO, TRPOLag, TRPOPID and CPO) takes one natural-gradient step of the actor on the whole
rollout, then trains the critics as the PPO family does. rlspec/algos/safe_update.py dispatches between them.
Steps of a TRPO/TRPOLag/CPO update (OmniSafe 0.5.0's NaturalPG._update, base/trpo.py, naive_lagrange/trpo_lag.py,
second_order/cpo.py):

1. Values, GAE and advantage processing as the PPO family (safe_ppo ``advantages``, ``process_advantages``).
2. TRPOLag, TRPOPID: λ from J_c before the actor step (OmniSafe TRPOLag._update; TRPOPID's PID as CPPOPID's),
   A = (A_r − λ·A_c)/(1 + λ).
3. Actor: S(θ) = mean(ρ_θ·A), ρ_θ = π_θ(a|s)/π_old(a|s) (OmniSafe's loss is −S); g = ∇S(θ_old);
   F = ∇² mean KL(π_old ‖ π_θ) + damping·I on every ``fvp_sample_freq``-th observation;
   x = CG(F, g) (cg_iters, OmniSafe's eps 1e-6); TRPO: step = sqrt(2δ/(xᵀFx + 1e-8))·x, then the backtracking
   line search (15 candidates, decay 0.8) accepts the first that improves S and keeps KL <= δ (target_kl,
   KL over the whole rollout); none accepted: θ stays (Misc/AcceptanceStep 0, reported).
   CPO: b = ∇S_c(θ_old), S_c = mean(ρ·A_c); p = CG(F, b); q = xᵀFx; c = J_c − d; ``cpo_step`` picks the case
   and direction; its line search (20 candidates) also requires S_c(θ) − S_c(θ_old) <= max(−c, 0) and asks
   for a surrogate improvement only in cases 2–4 (OmniSafe ``optim_case > 1``).
4. Critics: ``update_iters`` epochs of shuffled Adam minibatches, as the PPO family (no KL check: the
   actor is not stepped there).
5. The observation normalizer learns from the rollout after the update (safe_ppo, PPO review CRITICAL-1).

P3O (OmniSafe penalty_function/p3o.py): the PPO family's minibatch loop with the actor loss
``p3o_loss(ρ, A_r, A_c, c)`` = −mean(min(ρA_r, clip(ρ)A_r)) + κ·ReLU(mean(ρA_c) + c), c = J_c − d, minus
entropy_coef·H, the KL early stop and learning rates as PPO's.

The PPOLagSem design §2A describes P3O as a primal–dual method with dual-variable dynamics; OmniSafe's P3O (followed
here, as the issue asks) is the exact-penalty form with a fixed κ and no dual variable: λ stays 0.

Where this differs from OmniSafe 0.5.0, on purpose or by default:
* c is J_c − d in episode-cost units for CPO and P3O as OmniSafe 0.5.0 (cpo.py ``ep_costs``, p3o.py ``Jc``),
  while b and S_c are per-step surrogates: the scales differ, as in OmniSafe. With no finished episode yet
  (J_c NaN) c = −∞: the constraint counts as satisfied (CPO takes the TRPO step, P3O's penalty is 0).
* The critics use PPOConfig (update_iters 40, batch_size 64, critic_lr 3e-4, the PPO family's values);
  OmniSafe's TRPO.yaml/CPO.yaml use update_iters 10, batch_size 128, critic lr 1e-3 — set them with
  ``--set ppo.update_iters=10 --set ppo.batch_size=128 --set ppo.critic_lr=0.001``.
* The CPO dual uses the contract's ascent-convention sign of r (spec/trust_region.py TR-11; OmniSafe 0.5.0
  takes r with the descent sign), and its case 1 at B = 0 takes the recovery step (TR-17).
* Several processes (the fast engine): g, b, every F·v, and the line search's S, S_c and KL are averaged
  over processes (``Comm``: OmniSafe avg_grads, avg_tensor in _fvp, dist_avg in the line searches), so every
  process takes the same step; per-process sample counts are equal (the engine checks it).
"""

from __future__ import annotations

import math

import torch

from rlspec.algos.config import TrustRegionConfig, validate_config  # noqa: F401  (re-exported)
from rlspec.algos.guards import logged_loss
from rlspec.algos.safe_ppo import (
    Comm,
    Kit,
    PPOConfig,
    Rollout,
    SafePPOState,
    SafetyConfig,
    advantages,
    combine_advantages,
    critic_steps,
    optimize,
    process_advantages,
    update_safety,
)
from rlspec.algos.safe_ppo import update as ppo_update
from rlspec.contracts.trust_region import EPS, PARTLY_FEASIBLE, FlatParams, flat_grad, policy_mean_kl

CG_EPS = 1e-6  # OmniSafe utils/math.py conjugate_gradients: α = rᵀr/(pᵀFp + 1e-6)


def constraint_violation(jc: float, safety: SafetyConfig) -> float:
    """c = J_c − d (episode-cost units, OmniSafe 0.5.0's CPO and P3O); −∞ while no episode has finished."""
    return jc - safety.cost_limit if math.isfinite(jc) else -math.inf


def _mean(comm: Comm, t: torch.Tensor) -> torch.Tensor:
    """The mean over processes of a per-process mean (equal sample counts)."""
    return t if comm.world_size == 1 else comm.sum(t.detach()) / comm.world_size


# ------------------------------------------------------------------------------------------- P3O
def p3o_update(state: SafePPOState, batch: Rollout, jc: float, ppo: PPOConfig, safety: SafetyConfig, kit: Kit,
                gen: torch.Generator, progress: float, comm: Comm, tr: TrustRegionConfig) -> dict[str, float]:
    c = constraint_violation(jc, safety)
    penalties = []

    def actor_loss(logp, entropy, logp_old, adv, adv_c):  # [B] each
        ratio, events = kit.ratio_guard(logp, logp_old)
        out = kit.p3o_loss(ratio, adv, adv_c, c, tr.kappa, ppo.clip)
        penalties.append(float(out.cost_penalty.detach()))
        return out.loss - ppo.entropy_coef * entropy.mean(), events

    metrics = ppo_update(state, batch, jc, ppo, safety, kit, gen, progress, comm, actor_loss=actor_loss)
    metrics["Loss/Loss_pi_cost"] = sum(penalties) / len(penalties) if penalties else math.nan
    return metrics


# ----------------------------------------------------------------------------- TRPO, TRPOLag, CPO
class _ActorProblem:
    """The actor as a function of its flat parameters θ [n] on the rollout: surrogates, KL, Fisher."""

    def __init__(self, state: SafePPOState, obs, act, logp_old, adv, adv_c, tr: TrustRegionConfig, kit: Kit,
                 comm: Comm):
        self.flat = FlatParams(state.actor)
        self.theta = self.flat.get()  # [n] θ_old
        self.obs, self.act, self.logp_old, self.adv, self.adv_c = obs, act, logp_old, adv, adv_c  # [M, ...]
        self.comm = comm
        with torch.no_grad():
            self.old = self.flat.call(self.theta, obs)  # π_old, batch [M, A]
        kl_fn = policy_mean_kl(lambda th: self.flat.call(th, obs[::tr.fvp_sample_freq]), self.theta)
        local_fvp = kit.fisher_vector_product(kl_fn, self.theta, tr.cg_damping)
        self.fvp = lambda v: _mean(comm, local_fvp(v))  # [n] -> [n]: OmniSafe averages F·v over processes

    def surrogates(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(S = mean(ρA), S_c = mean(ρA_c), mean KL(π_old ‖ π_θ)) of this process's samples, θ [n]."""
        dist = self.flat.call(theta, self.obs)
        ratio = torch.exp(dist.log_prob(self.act).sum(-1) - self.logp_old)  # [M]
        kl = torch.distributions.kl_divergence(self.old, dist).mean()
        return (ratio * self.adv).mean(), (ratio * self.adv_c).mean(), kl

    def gradient(self, which: int) -> torch.Tensor:
        """∇S (which = 0) or ∇S_c (which = 1) at θ_old [n], averaged over processes."""
        theta = self.theta.clone().requires_grad_(True)
        return _mean(self.comm, flat_grad(self.surrogates(theta)[which], theta))

    @torch.no_grad()
    def evaluate(self, thetas: torch.Tensor, with_cost: bool):
        """The line search's scores of candidates [K, n]: (S [K], KL [K], S_c [K] or None), process means."""
        rows = [self.surrogates(th) for th in thetas]
        s, s_c, kl = (_mean(self.comm, torch.stack(col)) for col in zip(*rows))
        return s, kl, s_c if with_cost else None


def _actor_step(state: SafePPOState, problem: _ActorProblem, jc: float, safety: SafetyConfig,
                tr: TrustRegionConfig, kit: Kit) -> dict[str, float]:
    """One TRPO or CPO step of the actor (module docstring, step 3); returns OmniSafe's Misc/ metrics."""
    cpo = state.algo == "CPO"
    g = problem.gradient(0)  # [n]
    x = kit.conjugate_gradient(problem.fvp, g, tr.cg_iters, eps=CG_EPS).x  # F⁻¹g [n]
    xFx = x @ problem.fvp(x)
    alpha = math.sqrt(2 * tr.target_kl / (float(xFx) + EPS))
    with torch.no_grad():
        s_before, s_c_before, _ = (_mean(problem.comm, v) for v in problem.surrogates(problem.theta))
    metrics = {"Misc/Alpha": alpha, "Misc/xHx": float(xFx), "Misc/gradient_norm": float(g.norm()),
               "Misc/H_inv_g": float(x.norm())}
    if cpo:
        c = constraint_violation(jc, safety)
        b = problem.gradient(1)  # [n]
        p = kit.conjugate_gradient(problem.fvp, b, tr.cg_iters, eps=CG_EPS).x  # F⁻¹b [n]
        d = kit.cpo_step(g, b, x, p, xFx, c, tr.target_kl)
        case = int(d.case)
        out = kit.line_search(problem.theta, d.step, lambda th: problem.evaluate(th, True), max_kl=tr.target_kl,
                              surrogate_before=s_before, cost_before=s_c_before, cost_violation=c,
                              require_improvement=case >= PARTLY_FEASIBLE, max_steps=tr.cpo_line_search_steps,
                              decay=tr.line_search_decay)
        metrics.update({"Misc/cost_gradient_norm": float(b.norm()), "Misc/OptimCase": float(case),
                        "Misc/Lambda_star": float(d.lam), "Misc/Nu_star": float(d.nu), "Misc/A": float(d.A),
                        "Misc/B": float(d.B), "Misc/q": float(xFx), "Misc/r": float(d.r), "Misc/s": float(d.s)})
    else:
        step = kit.natural_step(x, xFx, tr.target_kl)
        out = kit.line_search(problem.theta, step, lambda th: problem.evaluate(th, False), max_kl=tr.target_kl,
                              surrogate_before=s_before, max_steps=tr.line_search_steps, decay=tr.line_search_decay)
    problem.flat.set(out.params)
    evaluated = [int(r) for r in out.reasons if int(r) > 0]
    with torch.no_grad():
        s_after, s_c_after, _ = (_mean(problem.comm, v) for v in problem.surrogates(out.params))
    metrics.update({
        "Misc/AcceptanceStep": float(out.accepted_step),  # 0: no candidate accepted, θ unchanged
        # bitwise OR of the rejected candidates' reasons (contract trust_region REASON_NAMES)
        "Misc/LineSearchRejections": float(_bit_or(evaluated)),
        "Misc/FinalStepNorm": float((out.params - problem.theta).norm()),
        "Train/KL": float(out.kl),
        # OmniSafe's actor loss after the step: −S (TRPO), −S + S_c (CPO)
        "Loss/Loss_pi": float(-s_after + s_c_after) if cpo else float(-s_after),
    })
    return metrics


def _bit_or(codes: list[int]) -> int:
    out = 0
    for code in codes:
        out |= code
    return out


def natural_update(state: SafePPOState, batch: Rollout, jc: float, ppo: PPOConfig, safety: SafetyConfig,
                    kit: Kit, gen: torch.Generator, comm: Comm, tr: TrustRegionConfig) -> dict[str, float]:
    T, N = batch.reward.shape
    M = T * N
    use_cost = state.cost_critic is not None
    before = state.guard.counts()  # the run's counts: this update's are the difference
    (adv_r, ret_r, v_r), (adv_c, ret_c, v_c) = advantages(state, batch, ppo, kit)  # [T, N] each
    flat = lambda x: x.reshape(M, *x.shape[2:])  # noqa: E731  [T, N, ...] -> [M, ...]
    adv_r, adv_c = process_advantages(flat(adv_r), flat(adv_c), ppo, comm)
    if ppo.lambda_update == "before":
        update_safety(state, jc, safety)
    multiplier = state.lagrange_multiplier()
    # TRPOLag, TRPOPID: the combined advantage; CPO keeps A_r and A_c apart
    adv = combine_advantages(adv_r, adv_c, multiplier, ppo.adv_combine) if state.multiplier is not None else adv_r
    obs, ret_r, ret_c, v_r, v_c = flat(batch.obs), flat(ret_r), flat(ret_c), flat(v_r), flat(v_c)
    problem = _ActorProblem(state, obs, flat(batch.act), flat(batch.logp), adv, adv_c, tr, kit, comm)
    metrics = _actor_step(state, problem, jc, safety, tr, kit)
    losses = {"reward_critic": [], "cost_critic": []}
    for _ in range(ppo.update_iters):  # the critics, as the PPO family's (no KL check: the actor is done)
        perm = torch.randperm(M, generator=gen)
        for start in range(0, M, ppo.batch_size):
            idx = perm[start:start + ppo.batch_size]  # [B]
            critics = critic_steps(state, obs[idx], v_r[idx], ret_r[idx], v_c[idx], ret_c[idx], ppo, kit)
            optimize(critics, ppo, comm)
            for (loss, _, _), kind in zip(critics, ("reward_critic", "cost_critic")):
                losses[kind].append(float(loss.detach()))
    if ppo.lambda_update == "after":
        update_safety(state, jc, safety)
    if state.obs_norm is not None:
        state.obs_norm.commit(batch.raw_obs.reshape(M, -1))
    with torch.no_grad():
        dist = state.actor(obs)
    counts = state.guard.counts()
    loss = lambda k: logged_loss(sum(losses[k]), len(losses[k]), counts.get(k, 0) - before.get(k, 0))  # noqa: E731
    metrics.update({
        "Loss/Loss_reward_critic": loss("reward_critic"), "Train/Entropy": float(dist.entropy().mean()),
        "Train/PolicyStd": float(dist.stddev.mean()), "Train/StopIter": float(ppo.update_iters),
        "Value/Adv": float(adv_r.mean()), "Metrics/LagrangeMultiplier": state.lagrange_multiplier(),
        **{f"Guard/nonfinite_{k}": float(counts.get(k, 0)) for k in ("reward_critic", "cost_critic")},
    })
    if use_cost:
        metrics["Loss/Loss_cost_critic"] = loss("cost_critic")
    return metrics
