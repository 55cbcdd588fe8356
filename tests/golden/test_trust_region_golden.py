"""Every registered ``trust_region`` implementation against OmniSafe 0.5.0's own NaturalPG/TRPO/CPO/P3O actor
updates on a 28-parameter Gaussian policy (fixtures/trust_region/*.json, golden_bridge/omnisafe_trust_region.py).

The tests drive the contract the way the safe-RL engine will: gradients of the surrogates, an FVP over the
policy's mean KL, conjugate gradient (with OmniSafe's eps = 1e-6), the step, the line search. Where
OmniSafe's CPO dual differs from the mathematics (spec/trust_region.py: r's sign, torch.clamp on an empty
interval) the tests check that claim against OmniSafe's logged λ*, ν* and that our step is feasible and at
least as good in the linearized problem; the line search is checked on OmniSafe's own directions.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

from rlspec.contracts.trust_region import (CG_DAMPING, CG_ITERS, CPO_LINE_SEARCH_STEPS, EPS, LINE_SEARCH_DECAY,
                                           P3O_CLIP, P3O_KAPPA, TRPO_LINE_SEARCH_STEPS, flat_grad, policy_mean_kl)
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close, fail
from rlspec.spec.trust_region import tiny_policy

CONTRACT = "trust_region"
OMNISAFE_CG_EPS = 1e-6  # utils/math.py conjugate_gradients(eps=1e-6)
MAX_KL = 0.01


class Rollout:
    """The fixture's batch seen through the contract: surrogates, their gradients, KL, FVP, evaluate."""

    def __init__(self, impl, inputs: dict):
        self.impl, self.theta0 = impl, inputs["theta"]
        self.obs, self.act, self.logp = inputs["obs"], inputs["act"], inputs["logp"]
        a, o, n = self.act.shape[1], self.obs.shape[1], self.theta0.numel()
        self.hidden = (n - 2 * a) // (o + 1 + a)  # n = A + h·o + h + A·h + A
        self.old = self.policy(self.theta0.detach())
        self.fvp = impl.fisher_vector_product(policy_mean_kl(self.policy, self.theta0), self.theta0, CG_DAMPING)

    def policy(self, theta: torch.Tensor):
        return tiny_policy("gaussian", theta, self.obs, self.hidden, self.act.shape[1])

    def surrogate(self, theta: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:  # [(K,)]
        ratio = torch.exp(self.policy(theta).log_prob(self.act).sum(-1) - self.logp)  # [(K,) N]
        return (ratio * adv).mean(-1)

    def grad(self, adv: torch.Tensor, theta: torch.Tensor | None = None) -> torch.Tensor:
        theta = (self.theta0 if theta is None else theta).clone().requires_grad_(True)
        return flat_grad(self.surrogate(theta, adv), theta)

    def solve(self, b: torch.Tensor) -> torch.Tensor:
        return self.impl.conjugate_gradient(self.fvp, b, CG_ITERS, eps=OMNISAFE_CG_EPS).x

    def evaluate(self, adv_r: torch.Tensor, adv_c: torch.Tensor | None):
        def scores(thetas: torch.Tensor):  # [K, n] -> 3 × [K]
            with torch.no_grad():
                kl = torch.distributions.kl_divergence(self.old, self.policy(thetas)).mean((-2, -1))
                cost = None if adv_c is None else self.surrogate(thetas, adv_c)
                return self.surrogate(thetas, adv_r), kl, cost
        return scores


def test_fvp_and_conjugate_gradient(impl):
    inputs, expected, entry = read_golden("trust_region/omnisafe_fvp_cg.json")
    tol = entry["tolerance"]
    run = Rollout(impl, inputs)
    for i, v in enumerate(inputs["v"]):
        assert_close("TR-5", f"fvp(v[{i}]) vs OmniSafe NaturalPG._fvp", run.fvp(v), expected["fvp"][i],
                     atol=tol["atol"], rtol=tol["rtol"])
    assert_close("TR-1", "conjugate_gradient(fvp, v[0], 15, eps=1e-6) vs OmniSafe conjugate_gradients",
                 run.solve(inputs["v"][0]), expected["x"], atol=tol["atol"], rtol=tol["rtol"])


def test_trpo_update(impl):
    inputs, expected, entry = read_golden("trust_region/omnisafe_trpo.json")
    tol = entry["tolerance"]
    run = Rollout(impl, inputs)
    g = run.grad(inputs["adv_r"])
    x = run.solve(g)
    xFx = x @ run.fvp(x)
    for k, max_kl in enumerate(inputs["target_kl"].tolist()):
        accept, xhx, alpha = expected["stats"][k].tolist()
        assert_close("TR-7", "xᵀFx vs OmniSafe Misc/xHx", xFx, torch.tensor(xhx, dtype=xFx.dtype), atol=tol["atol"],
                     rtol=tol["rtol"])
        step = impl.natural_step(x, xFx, max_kl)
        assert_close("TR-7", f"TRPO step (target_kl {max_kl}) vs OmniSafe's", step, expected["direction"][k],
                     atol=tol["atol"], rtol=tol["rtol"])
        out = impl.line_search(run.theta0, step, run.evaluate(inputs["adv_r"], None), max_kl=max_kl,
                               surrogate_before=run.surrogate(run.theta0, inputs["adv_r"]),
                               max_steps=TRPO_LINE_SEARCH_STEPS, decay=LINE_SEARCH_DECAY)
        if int(out.accepted_step) != int(accept):
            fail("TR-8", f"target_kl {max_kl}: accepted step {int(out.accepted_step)}, OmniSafe {int(accept)}; "
                         f"reasons {out.reasons.tolist()}")
        assert_close("TR-8", f"θ after the TRPO update (target_kl {max_kl}) vs OmniSafe's", out.params,
                     expected["theta_new"][k], atol=tol["atol"], rtol=tol["rtol"])


def omnisafe_cpo_dual(q: float, r: float, s: float, c: float, A: float, B: float, max_kl: float) -> tuple[float, float]:
    """What OmniSafe 0.5.0's CPO._step_direction computes in cases 1 and 2, as we read it: the descent
    convention's formulas (jachiam/cpo) applied to the ascent gradient's r, and torch.clamp(λ, lo, hi)
    returning hi when lo > hi (min(max(λ, lo), hi))."""
    bound = r / (c + 1e-8)
    clamp = lambda v, lo, hi: min(max(v, lo), hi)  # noqa: E731 - torch.clamp's order
    lam_a, lam_b = math.sqrt(A / B), math.sqrt(q / (2 * max_kl))
    if c < 0:
        lam_a, lam_b = clamp(lam_a, 0.0, bound), clamp(lam_b, bound, math.inf)
    else:
        lam_a, lam_b = clamp(lam_a, bound, math.inf), clamp(lam_b, 0.0, bound)
    f_a = -0.5 * (A / (lam_a + 1e-8) + B * lam_a) - r * c / (s + 1e-8)
    f_b = -0.5 * (q / (lam_b + 1e-8) + 2 * max_kl * lam_b)
    lam = lam_a if f_a >= f_b else lam_b
    return lam, max(lam * c - r, 0.0) / (s + 1e-8)


@functools.cache
def _cpo_rollout(impl):
    """The fixture, the rollout and the reward side's solve, shared by the rows (they differ in c and adv_c)."""
    inputs, expected, entry = read_golden("trust_region/omnisafe_cpo.json")
    run = Rollout(impl, inputs)
    g = run.grad(inputs["adv_r"])
    x = run.solve(g)
    return inputs, expected, entry, run, g, x, x @ run.fvp(x)


@functools.cache
def _cost_solve(impl, k: int):
    inputs, _, _, run, *_ = _cpo_rollout(impl)
    first = next(j for j in range(k + 1) if torch.equal(inputs["adv_c"][j], inputs["adv_c"][k]))
    if first < k:
        return _cost_solve(impl, first)
    b = run.grad(inputs["adv_c"][k])
    return b, run.solve(b)


@pytest.mark.parametrize("k", range(9))
def test_cpo_update(impl, k):
    inputs, expected, entry, run, g, x, q = _cpo_rollout(impl)
    tol = entry["tolerance"]
    b, p = _cost_solve(impl, k)
    adv_r, adv_c, c = inputs["adv_r"], inputs["adv_c"][k], float(inputs["c"][k])
    case_os, q_os, r_os, s_os, A_os, B_os, lam_os, nu_os, accept_os = expected["stats"][k].tolist()
    out = impl.cpo_step(g, b, x, p, q, c, MAX_KL)
    where = dict(row=k, c=c, case=int(case_os))
    if int(out.case) != int(case_os):
        fail("TR-10", f"case {int(out.case)}, OmniSafe {int(case_os)}", **where)
    logged = (("q", q, q_os), ("r", out.r, r_os), ("s", out.s, s_os), ("A", out.A, A_os), ("B", out.B, B_os))
    for name, got, want in logged[:3] if int(case_os) == 4 else logged:  # case 4: OmniSafe logs A = B = 0
        assert_close("TR-10", f"{name} vs OmniSafe Misc/{name}", got, torch.tensor(want, dtype=got.dtype),
                     atol=tol["atol"], rtol=tol["rtol"], **where)

    # our reading of OmniSafe's dual reproduces its logged λ*, ν* in every row (the conversion's own test)
    if int(case_os) in (1, 2):
        lam_desc, nu_desc = omnisafe_cpo_dual(q_os, r_os, s_os, c, A_os, B_os, MAX_KL)
        assert_close("TR-11", "OmniSafe Lambda_star vs omnisafe_cpo_dual", torch.tensor(lam_os), torch.tensor(lam_desc),
                     atol=tol["atol"], rtol=tol["rtol"], **where)
        assert_close("TR-11", "OmniSafe Nu_star vs omnisafe_cpo_dual", torch.tensor(nu_os), torch.tensor(nu_desc),
                     atol=tol["atol"], rtol=tol["rtol"], **where)
    same_dual = math.isclose(float(out.lam), lam_os, rel_tol=1e-6, abs_tol=1e-9) and \
        math.isclose(float(out.nu), nu_os, rel_tol=1e-6, abs_tol=1e-9)
    evaluate = run.evaluate(adv_r, adv_c)
    search = dict(max_kl=MAX_KL, surrogate_before=run.surrogate(run.theta0, adv_r),
                  cost_before=run.surrogate(run.theta0, adv_c), cost_violation=c,
                  require_improvement=int(case_os) > 1, max_steps=CPO_LINE_SEARCH_STEPS, decay=LINE_SEARCH_DECAY)
    if same_dual:  # the whole update matches OmniSafe's
        assert_close("TR-11", "CPO direction vs OmniSafe's", out.step, expected["direction"][k], atol=tol["atol"],
                     rtol=tol["rtol"], **where)
    else:  # OmniSafe's dual is off: ours must solve the linearized problem and do at least as well
        assert_close("TR-11", "CPO direction vs (x − ν*p)/(λ* + ε)", out.step, (x - out.nu * p) / (out.lam + EPS),
                     atol=tol["atol"], rtol=tol["rtol"], **where)

        def model(lam, nu):  # d = (x − νp)/(λ + ε) in the problem's own terms: ½dᵀFd, c + bᵀd, gᵀd
            a, b_ = 1 / (lam + EPS), -nu / (lam + EPS)
            kl = 0.5 * (a * a * q_os + 2 * a * b_ * r_os + b_ * b_ * s_os)
            return kl, c + a * r_os + b_ * s_os, a * q_os + b_ * r_os

        kl_ours, cost_ours, gain_ours = model(float(out.lam), float(out.nu))
        kl_os, cost_os, gain_os = model(lam_os, nu_os)
        if not (kl_ours <= MAX_KL * (1 + 1e-6) and cost_ours <= 1e-6 * MAX_KL):
            fail("TR-11", f"our step leaves the linearized problem: ½dᵀFd = {kl_ours:.6g}, c + bᵀd = {cost_ours:.3g}",
                 **where)
        if kl_os <= MAX_KL * (1 + 1e-6) and cost_os <= 1e-6 * MAX_KL and not gain_ours >= gain_os - 1e-9:
            fail("TR-11", f"gᵀd = {gain_ours:.6g} below OmniSafe's feasible {gain_os:.6g}", **where)

    # the line search on OmniSafe's own direction reproduces its decision and parameters
    out_ls = impl.line_search(run.theta0, expected["direction"][k], evaluate, **search)
    if int(out_ls.accepted_step) != int(accept_os):
        fail("TR-8", f"line search on OmniSafe's direction accepted {int(out_ls.accepted_step)}, OmniSafe "
                     f"{int(accept_os)}; reasons {out_ls.reasons.tolist()}", **where)
    assert_close("TR-8", "θ after the line search vs OmniSafe's", out_ls.params, expected["theta_new"][k],
                 atol=tol["atol"], rtol=tol["rtol"], **where)


def test_cpo_fixture_covers_every_case_and_both_duals():
    """The rows span cases 0–4, rows where OmniSafe's dual agrees with ours, and rows where it does not."""
    inputs, expected, _ = read_golden("trust_region/omnisafe_cpo.json")
    assert sorted({int(v) for v in expected["stats"][:, 0]}) == [0, 1, 2, 3, 4]
    lam = expected["stats"][:, 6]
    assert bool((lam < 0).any()), "no row shows OmniSafe's negative λ* (torch.clamp on an empty interval)"


def test_p3o_loss(impl):
    inputs, expected, entry = read_golden("trust_region/omnisafe_p3o.json")
    tol = entry["tolerance"]
    run = Rollout(impl, inputs)
    for k, c in enumerate(inputs["c"].tolist()):
        theta = inputs["theta_eval"].clone().requires_grad_(True)
        ratio = torch.exp(run.policy(theta).log_prob(run.act).sum(-1) - run.logp)
        out = impl.p3o_loss(ratio, inputs["adv_r"], inputs["adv_c"], c, P3O_KAPPA, P3O_CLIP)
        assert_close("TR-12", "(reward_loss, cost_penalty) vs OmniSafe (PPO._loss_pi, P3O._loss_pi_cost)",
                     torch.stack([out.reward_loss, out.cost_penalty]).detach(), expected["loss"][k],
                     atol=tol["atol"], rtol=tol["rtol"], c=c)
        assert_close("TR-12", "∇θ loss vs OmniSafe's", flat_grad(out.loss, theta), expected["grad"][k],
                     atol=tol["atol"], rtol=tol["rtol"], c=c)


def test_omnisafe_eps_is_what_makes_cg_match():
    """The convention is load-bearing: exact CG (eps = 0) differs from OmniSafe's on the same system."""
    from rlspec.reference import trust_region as ref

    inputs, expected, _ = read_golden("trust_region/omnisafe_fvp_cg.json")
    run = Rollout(ref, inputs)
    exact = ref.conjugate_gradient(run.fvp, inputs["v"][0], CG_ITERS).x
    tol = read_golden("trust_region/omnisafe_fvp_cg.json")[2]["tolerance"]
    allowed = tol["atol"] + tol["rtol"] * float(expected["x"].abs().max())
    assert float((exact - expected["x"]).abs().max()) > 1e3 * allowed


def test_omnisafe_dual_on_random_problems():
    """spec/trust_region.py's claim about OmniSafe's dual (as pinned against its logged λ*, ν* above), on 2000
    seeded random 2-D problems: none of its case-1 steps meets the linearized cost constraint, and between
    a third and two thirds of its case-2 steps leave the trust region; the reference's steps do neither."""
    from rlspec.reference import trust_region as ref

    gen = torch.Generator().manual_seed(0)
    counts = {1: [0, 0], 2: [0, 0]}  # case: [problems, OmniSafe steps violating the model]
    for _ in range(2000):
        m = torch.randn(2, 2, generator=gen, dtype=torch.float64)
        F = m @ m.T + 0.1 * torch.eye(2, dtype=torch.float64)
        g, b = torch.randn(2, generator=gen, dtype=torch.float64), torch.randn(2, generator=gen, dtype=torch.float64)
        c = 0.2 * float(torch.randn((), generator=gen, dtype=torch.float64))
        x, p = torch.linalg.solve(F, g), torch.linalg.solve(F, b)
        q = float(g @ x)
        ours = ref.cpo_step(g, b, x, p, q, c, MAX_KL)
        case = int(ours.case)
        if case not in counts:
            continue
        lam, nu = omnisafe_cpo_dual(q, float(ours.r), float(ours.s), c, float(ours.A), float(ours.B), MAX_KL)
        for d, who in ((ours.step, "ours"), ((x - nu * p) / (lam + 1e-8), "omnisafe")):
            # margins: the spec's ε = 1e-8 guards move the optimum by ~1e-8
            violated = (c + float(b @ d) > 1e-6) if case == 1 else (0.5 * float(d @ F @ d) > MAX_KL * (1 + 1e-6))
            assert who == "omnisafe" or not violated, f"reference step violates the model in case {case}"
            counts[case][1] += who == "omnisafe" and violated
        counts[case][0] += 1
    assert counts[1][0] > 100 and counts[1][1] == counts[1][0], counts
    assert counts[2][0] > 100 and 1 / 3 < counts[2][1] / counts[2][0] < 2 / 3, counts
