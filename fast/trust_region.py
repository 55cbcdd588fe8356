"""Fast ``trust_region`` (spec/trust_region.py): the same maths in the inputs' dtype and device, with no
host read of tensor values, so a CUDA TRPO/CPO update never stalls on a synchronization.

* conjugate_gradient runs exactly ``iters`` products; once ‖r‖ < residual_tol (or pᵀFp <= 0) an ``active``
  mask freezes x and r (``torch.where``), so the result equals the early-stopping reference's.
* fisher_vector_product builds ∇kl once (``create_graph``) and answers each product with one backward
  pass through it (``retain_graph``): one backward per product instead of a forward and two backwards.
* line_search scores all ``max_steps`` candidates with one ``evaluate(thetas [K, n])`` call and picks the
  first accepted one by argmax; later candidates are reported as not evaluated, as in the reference.
* cpo_step computes every case's direction and selects with ``torch.where``.
Only configuration (dtypes, flags, counts) is branched on.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.trust_region import (ACCEPTED, ALL_FEASIBLE, CG_DAMPING, CG_ITERS, COST_VIOLATED,
                                           CPO_ZERO_COST_GRAD, EPS, FEASIBLE_RECOVERY, INFEASIBLE_RECOVERY,
                                           KL_VIOLATED, LINE_SEARCH_DECAY, NO_IMPROVEMENT, NONFINITE,
                                           NOT_EVALUATED, P3O_CLIP, P3O_KAPPA, PARTLY_FEASIBLE, RESIDUAL_TOL,
                                           TRPO_LINE_SEARCH_STEPS, ZERO_COST_GRAD, CGResult, CPOStep,
                                           LineSearchResult, P3OLoss, check_evaluation, check_fvp_output, check_kl,
                                           require_vector,
                                           validate_cg, validate_cpo, validate_fvp,
                                           validate_line_search, validate_natural_step, validate_p3o)
from rlspec.contracts.validate import scalar_args
from rlspec.reference.trust_region import p3o_cost_violation  # noqa: F401 - scalar host math, nothing to vectorize


def _scalar(value, like: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor of like's dtype and device; a Python number becomes a fill kernel's argument, not a
    host-to-device copy (which would synchronize a CUDA stream)."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype=like.dtype, device=like.device).reshape(())
    return torch.full((), float(value), dtype=like.dtype, device=like.device)


@scalar_args("iters", "residual_tol", "eps")
def conjugate_gradient(fvp, b: torch.Tensor, iters: int = CG_ITERS, residual_tol: float = RESIDUAL_TOL,
                       eps: float = 0.0) -> CGResult:
    validate_cg(b, iters, residual_tol, eps)
    x = torch.zeros_like(b)  # [n]
    r, p = b.clone(), b.clone()  # [n] residual, direction
    rr = r @ r  # []
    active = rr.sqrt() >= residual_tol  # [] bool: not yet converged, no breakdown
    done = torch.zeros((), dtype=torch.int64, device=b.device)
    breakdown = torch.zeros((), dtype=torch.bool, device=b.device)
    for _ in range(iters):
        z = fvp(p)
        check_fvp_output("conjugate_gradient", z, b)
        pz = p @ z
        breakdown = breakdown | (active & ~(pz > 0))
        active = active & (pz > 0)
        alpha = rr / (pz + eps)
        x = torch.where(active, x + alpha * p, x)
        r = torch.where(active, r - alpha * z, r)
        rr_new = r @ r
        p = torch.where(active, r + rr_new / (rr + eps) * p, p)
        rr = torch.where(active, rr_new, rr)
        done = done + active.long()
        active = active & (rr.sqrt() >= residual_tol)
    return CGResult(x, done, rr.sqrt(), breakdown)


@scalar_args("damping")
def fisher_vector_product(kl_fn, params: torch.Tensor, damping: float = CG_DAMPING):
    validate_fvp(params, damping)
    theta = params.detach().requires_grad_(True)
    kl = kl_fn(theta)
    check_kl("fisher_vector_product", kl)
    (grad,) = torch.autograd.grad(kl, theta, create_graph=True)  # [n], kept with its graph

    def fvp(v: torch.Tensor) -> torch.Tensor:
        require_vector("fisher_vector_product", "v", v, params.shape[0])
        (hv,) = torch.autograd.grad(grad, theta, grad_outputs=v, retain_graph=True)  # vᵀH = (Hv)ᵀ
        return hv + damping * v

    return fvp


@scalar_args("max_kl")
def natural_step(x: torch.Tensor, xFx, max_kl: float) -> torch.Tensor:
    validate_natural_step(x, xFx, max_kl)
    return torch.sqrt(2 * max_kl / (_scalar(xFx, x) + EPS)) * x


def _interval_max(f, stationary: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    """(λ, f(λ)): the concave f's stationary point projected onto [lo, hi]; f = −inf on an empty one."""
    lam = torch.minimum(torch.maximum(stationary, lo), hi)
    return lam, torch.where(hi > lo, f(lam), -math.inf)


@scalar_args("max_kl")
def cpo_step(g: torch.Tensor, b: torch.Tensor, x: torch.Tensor, p: torch.Tensor, q, c, max_kl: float) -> CPOStep:
    validate_cpo(g, b, x, p, q, c, max_kl)
    q, c = _scalar(q, g), _scalar(c, g)
    r, s = g @ p, b @ p
    A = q - r * r / (s + EPS)
    B = 2 * max_kl - c * c / (s + EPS)
    feasible = c < 0
    case = torch.where((b @ b <= CPO_ZERO_COST_GRAD) & feasible, ZERO_COST_GRAD,
                       torch.where(feasible, torch.where(B < 0, ALL_FEASIBLE, PARTLY_FEASIBLE),
                                   torch.where(B >= 0, FEASIBLE_RECOVERY, INFEASIBLE_RECOVERY)))
    # cases 3, 4: the TRPO step
    alpha = torch.sqrt(2 * max_kl / (q + EPS))
    # cases 1, 2: the dual (reference/_cpo_dual); ν*(λ) > 0 on one side of λ_mid = −r/c
    mid = torch.where(c != 0, -r / c, torch.where(r > 0, -math.inf, torch.where(r < 0, math.inf, 0.0)))
    mid = mid.clamp_min(0.0)
    zero, inf = torch.zeros_like(mid), torch.full_like(mid, math.inf)
    lo_a, hi_a = torch.where(feasible, zero, mid), torch.where(feasible, mid, inf)
    lo_b, hi_b = torch.where(feasible, mid, zero), torch.where(feasible, inf, mid)
    lam_a, f_a = _interval_max(lambda lam: -0.5 * (A / (lam + EPS) + B * lam) + r * c / (s + EPS),
                               torch.where(B > 0, torch.sqrt(A.clamp_min(0.0) / B), inf), lo_a, hi_a)
    lam_b, f_b = _interval_max(lambda lam: -0.5 * (q / (lam + EPS) + 2 * max_kl * lam),
                               torch.sqrt(q.clamp_min(0.0) / (2 * max_kl)), lo_b, hi_b)
    lam_dual = torch.where(f_a >= f_b, lam_a, lam_b)
    nu_dual = (lam_dual * c + r).clamp_min(0.0) / (s + EPS)
    # case 0: recovery
    nu_rec = torch.sqrt(2 * max_kl / (s + EPS))

    # case 1 at B = 0 (λ* = ∞) takes its limit, the recovery step (reference/cpo_step)
    trpo, dual = case >= ALL_FEASIBLE, (case == PARTLY_FEASIBLE) | ((case == FEASIBLE_RECOVERY) & (B > 0))
    step = torch.where(trpo, alpha * x, torch.where(dual, (x - nu_dual * p) / (lam_dual + EPS), -nu_rec * p))
    lam = torch.where(trpo, 1 / (alpha + EPS), torch.where(dual, lam_dual, 0.0))
    nu = torch.where(trpo, 0.0, torch.where(dual, nu_dual, nu_rec))
    return CPOStep(step, case.long(), lam, nu, r, s, A, B)


@scalar_args("max_kl", "max_steps", "decay")
def line_search(params: torch.Tensor, step: torch.Tensor, evaluate, *, max_kl: float, surrogate_before,
                cost_before=None, cost_violation=None, require_improvement: bool = True,
                max_steps: int = TRPO_LINE_SEARCH_STEPS, decay: float = LINE_SEARCH_DECAY) -> LineSearchResult:
    validate_line_search(params, step, max_kl, surrogate_before, cost_before, cost_violation, max_steps, decay)
    with_cost = cost_before is not None
    k = torch.arange(max_steps, device=params.device)  # [K]
    fracs = torch.full((max_steps,), decay, dtype=params.dtype, device=params.device).pow(k)  # [K] decay**k
    candidates = params + fracs[:, None] * step  # [K, n]
    surrogate, kl, cost = check_evaluation("line_search", evaluate(candidates), max_steps, with_cost)
    # compared in float64, as the reference does: a float32 KL against a float64 max_kl must not round
    surrogate, kl = surrogate.double(), kl.double()
    finite = torch.isfinite(surrogate) & torch.isfinite(kl)  # [K]
    code = torch.where(kl > max_kl, KL_VIOLATED, ACCEPTED)  # [K] int64
    if require_improvement:
        code = code | torch.where(surrogate - surrogate_before < 0, NO_IMPROVEMENT, ACCEPTED)
    if with_cost:
        cost = cost.double()
        finite = finite & torch.isfinite(cost)
        slack = _scalar(cost_violation, cost).neg().clamp_min(0.0)
        code = code | torch.where(cost - cost_before > slack, COST_VIOLATED, ACCEPTED)
    code = torch.where(finite, code, NONFINITE)
    accepted = code == ACCEPTED  # [K]
    found = accepted.any()
    first = accepted.long().argmax().reshape(1)  # [1] the first accepted index (0 if none)
    later = k > first
    reasons = torch.where(later & found, NOT_EVALUATED, code)
    zero = torch.zeros((), dtype=params.dtype, device=params.device)
    pick = lambda t: t.index_select(0, first)[0]  # noqa: E731 - the first accepted candidate's entry
    return LineSearchResult(torch.where(found, pick(candidates), params), torch.where(found, first[0] + 1, 0),
                            torch.where(found, pick(fracs), zero), reasons,
                            torch.where(found, pick(kl).to(params.dtype), zero))


@scalar_args("kappa", "clip_ratio")
def p3o_loss(ratio: torch.Tensor, adv_r: torch.Tensor, adv_c: torch.Tensor, cost_violation, kappa: float = P3O_KAPPA,
             clip_ratio: float = P3O_CLIP, cost_clip: bool = False) -> P3OLoss:
    validate_p3o(ratio, adv_r, adv_c, cost_violation, kappa, clip_ratio)
    clipped = ratio.clamp(1 - clip_ratio, 1 + clip_ratio)  # [N]
    reward_loss = -torch.minimum(ratio * adv_r, clipped * adv_r).mean()
    cost_terms = torch.maximum(ratio * adv_c, clipped * adv_c) if cost_clip else ratio * adv_c  # [N]
    penalty = kappa * torch.relu(cost_terms.mean() + cost_violation)
    return P3OLoss(reward_loss + penalty, reward_loss, penalty)
