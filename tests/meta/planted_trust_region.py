"""Planted bugs for contract ``trust_region``: the reference with one bug each."""

from __future__ import annotations

import math
import types

import torch
from planted import Planted
from rlspec.contracts.trust_region import EPS, CGResult, CPOStep, P3OLoss
from rlspec.reference import trust_region as ref


def _tr(**overrides) -> types.SimpleNamespace:
    names = ("conjugate_gradient", "fisher_vector_product", "natural_step", "cpo_step", "line_search", "p3o_loss",
             "p3o_cost_violation")
    return types.SimpleNamespace(**{**{n: getattr(ref, n) for n in names}, **overrides})


def _cg_without_residual_update(fvp, b, iters=15, residual_tol=1e-10, eps=0.0):
    """r is never updated: every direction is built from the initial residual b."""
    x, r = torch.zeros_like(b), b.clone()
    p, rr, done = r.clone(), float(r @ r), 0
    while done < iters and math.sqrt(rr) >= residual_tol:
        z = fvp(p)
        if not float(p @ z) > 0:
            return CGResult(x, torch.tensor(done), torch.tensor(math.sqrt(rr)), torch.tensor(True))
        alpha = rr / (float(p @ z) + eps)
        x = x + alpha * p
        rr_new = float(r @ r)  # r -= alpha * z is missing
        p = r + rr_new / (rr + eps) * p
        rr, done = rr_new, done + 1
    return CGResult(x, torch.tensor(done), torch.tensor(math.sqrt(rr)), torch.tensor(False))


def _cg_past_the_cap(fvp, b, iters=15, residual_tol=1e-10, eps=0.0):
    return ref.conjugate_gradient(fvp, b, iters + 1, residual_tol, eps)  # `<=` where `<` was meant


def _fvp_without_damping(kl_fn, params, damping=0.1):
    return ref.fisher_vector_product(kl_fn, params, 0.0)


def _fvp_damping_times_params(kl_fn, params, damping=0.1):
    """OmniSafe names the product's argument ``params``; a port that adds damping·θ (the parameters)."""
    hessian = ref.fisher_vector_product(kl_fn, params, 0.0)
    return lambda v: hessian(v) + damping * params


def _line_search_kl_at_full_step_only(params, step, evaluate, **kwargs):
    """The KL is looked at for the full step; backtracked candidates are checked on the surrogate only."""
    def evaluate_once(thetas):
        surrogate, kl, cost = evaluate(thetas)
        first = evaluate_once.calls == 0
        evaluate_once.calls += 1
        return surrogate, kl if first else torch.zeros_like(kl), cost
    evaluate_once.calls = 0
    return ref.line_search(params, step, evaluate_once, **kwargs)


def _line_search_keeps_last_candidate(params, step, evaluate, **kwargs):
    """When nothing is accepted, the smallest (rejected) step is kept instead of the old parameters."""
    out = ref.line_search(params, step, evaluate, **kwargs)
    if int(out.accepted_step) == 0:
        last = kwargs.get("decay", 0.8) ** (kwargs.get("max_steps", 15) - 1)
        return out._replace(params=params + last * step)
    return out


def _cpo_recovery_when_feasible(g, b, x, p, q, c, max_kl):
    """Case chosen from B alone: B < 0 means 'recovery', even when c < 0 (the whole region is feasible)."""
    out = ref.cpo_step(g, b, x, p, q, c, max_kl)
    if int(out.case) == 3:
        nu = math.sqrt(2 * max_kl / (float(out.s) + EPS))
        return out._replace(step=-nu * p, case=torch.tensor(0), lam=torch.zeros_like(out.lam),
                            nu=torch.tensor(nu, dtype=out.nu.dtype))
    return out


def _cpo_descent_sign(g, b, x, p, q, c, max_kl):
    """OmniSafe 0.5.0's dual: r from the ascent gradient used in formulas written for the descent one."""
    out = ref.cpo_step(g, b, x, p, q, c, max_kl)
    if int(out.case) not in (1, 2):
        return out
    r, s, A, B, c = float(out.r), float(out.s), float(out.A), float(out.B), float(c)
    lam, _ = ref._cpo_dual(float(q), -r, s, c, A, B, max_kl)
    nu = max(0.0, lam * c - r) / (s + EPS)
    step = (x.double() - nu * p.double()) / (lam + EPS)
    return CPOStep(step.to(x.dtype), out.case, torch.tensor(lam), torch.tensor(nu), out.r, out.s, out.A, out.B)


def _cpo_dual_at_infinite_lambda(g, b, x, p, q, c, max_kl):
    """Case 1 at B = 0 < c through the dual anyway: λ* = sqrt(A/B) = ∞ is lost (λ = 0), the step blows up to
    (x − ν·p)/1e-8 (the fast twin before its fix; the reference raised TypeError)."""
    out = ref.cpo_step(g, b, x, p, q, c, max_kl)
    if int(out.case) != 1 or float(out.B) != 0:
        return out
    nu = max(0.0, float(out.r)) / (float(out.s) + EPS)
    step = (x.double() - nu * p.double()) / EPS
    return out._replace(step=step.to(x.dtype), lam=torch.zeros_like(out.lam), nu=torch.tensor(nu, dtype=out.nu.dtype))


def _p3o_without_relu(ratio, adv_r, adv_c, cost_violation, kappa=20.0, clip_ratio=0.2, cost_clip=False):
    """κ·(S_c + c) instead of κ·ReLU(S_c + c): a satisfied constraint now pushes the cost further down."""
    out = ref.p3o_loss(ratio, adv_r, adv_c, cost_violation, kappa, clip_ratio, cost_clip)
    rho, ac = ratio.double(), adv_c.double()
    clipped = rho.clamp(1 - clip_ratio, 1 + clip_ratio)
    s_c = (torch.maximum(rho * ac, clipped * ac) if cost_clip else rho * ac).mean()
    penalty = (kappa * (s_c + cost_violation)).to(ratio.dtype)
    return P3OLoss(out.reward_loss + penalty, out.reward_loss, penalty)


def _violation_unscaled(cost_return, cost_limit, cost_gamma):
    """OmniSafe 0.5.0's P3O term: J_c − d without the paper's (1 − γ_c)."""
    ref.p3o_cost_violation(cost_return, cost_limit, cost_gamma)  # validated as the reference does
    return float(cost_return) - float(cost_limit)


def _violation_unvalidated(cost_return, cost_limit, cost_gamma):
    """γ_c = 1 (and NaN) go through: (1 − γ_c) = 0 switches the constraint off."""
    return (1.0 - float(cost_gamma)) * (float(cost_return) - float(cost_limit))


PLANTED_TRUST_REGION = (
    Planted("CG without the residual update", "trust_region", _tr(conjugate_gradient=_cg_without_residual_update),
            "TR-1", "x vs float64 solve", ("TR-4",)),
    Planted("CG one iteration past the cap", "trust_region", _tr(conjugate_gradient=_cg_past_the_cap),
            "TR-2", "fvp called", ("TR-1", "TR-3", "TR-4")),
    Planted("FVP without damping", "trust_region", _tr(fisher_vector_product=_fvp_without_damping),
            "TR-5", "+ damping·v", ("TR-1",)),
    Planted("FVP damping times the parameters", "trust_region", _tr(fisher_vector_product=_fvp_damping_times_params),
            "TR-6", "fvp(2u − 3v)", ()),
    Planted("line search checks KL only at the full step", "trust_region",
            _tr(line_search=_line_search_kl_at_full_step_only), "TR-8", "accepted candidate", ("TR-11",)),
    Planted("line search keeps the last candidate", "trust_region", _tr(line_search=_line_search_keeps_last_candidate),
            "TR-9", "the old parameters", ()),
    Planted("CPO recovery branch when feasible", "trust_region", _tr(cpo_step=_cpo_recovery_when_feasible),
            "TR-10", "case 0, expected 3", ("TR-8", "TR-12")),
    Planted("CPO dual with the descent-convention sign of r (OmniSafe 0.5.0)", "trust_region",
            _tr(cpo_step=_cpo_descent_sign), "TR-11", "closed-form optimum", ("TR-10",)),
    Planted("CPO dual at B = 0 < c (λ* = ∞)", "trust_region", _tr(cpo_step=_cpo_dual_at_infinite_lambda),
            "TR-17", "step", ("TR-10", "TR-11", "TR-15")),
    Planted("P3O penalty without the ReLU", "trust_region", _tr(p3o_loss=_p3o_without_relu),
            "TR-12", "cost_penalty", ("TR-11",)),
    Planted("P3O cost term without (1 − γ_c) (OmniSafe 0.5.0)", "trust_region",
            _tr(p3o_cost_violation=_violation_unscaled), "TR-19", "(1 − γ_c)·(J_c − d)", ("TR-20",)),
    Planted("P3O cost term accepts γ_c = 1", "trust_region", _tr(p3o_cost_violation=_violation_unvalidated),
            "TR-20", "accepted silently", ("TR-19",)),
    Planted("line search refuses numpy hyper-parameters", "trust_region",
            _tr(line_search=ref.line_search.__wrapped__), "TR-14", "max_kl=np.float32(", ("TR-8", "TR-9")),
)
