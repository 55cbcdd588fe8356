"""Reference ``trust_region`` (spec/trust_region.py): float64 scalars, plain Python control flow.

Readability over speed: the conjugate gradient stops on the host when it has converged, the line search
evaluates one candidate at a time and stops at the first accepted one, the CPO dual branches on its
case. The fast twin (fast/trust_region.py) does the same maths without reading tensors on the host.
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
                                           line_search_fractions, validate_cg, validate_cpo, validate_fvp,
                                           validate_line_search, validate_natural_step, validate_p3o,
                                           validate_p3o_violation)
from rlspec.contracts.validate import scalar_args

F64 = torch.float64


@scalar_args("iters", "residual_tol", "eps")
def conjugate_gradient(fvp, b: torch.Tensor, iters: int = CG_ITERS, residual_tol: float = RESIDUAL_TOL,
                       eps: float = 0.0) -> CGResult:
    """Solve F x = b from x₀ = 0; F is applied only through ``fvp`` (at most ``iters`` calls).

    α = rᵀr / (pᵀFp + eps), x += α p, r −= α F p; stop once ‖r‖ < residual_tol;
    β = r'ᵀr' / (rᵀr + eps), p = r' + β p.  eps = 0 is exact CG (OmniSafe adds eps = 1e-6).
    """
    validate_cg(b, iters, residual_tol, eps)
    x = torch.zeros_like(b, dtype=F64)  # [n]
    r = b.double().clone()  # [n] residual b − F x
    p = r.clone()  # [n] search direction
    rr = float(r @ r)
    done, breakdown = 0, False
    while done < iters and math.sqrt(rr) >= residual_tol:
        z = fvp(p.to(b.dtype))
        check_fvp_output("conjugate_gradient", z, b)
        z = z.double()  # [n] F p
        pz = float(p @ z)
        if not pz > 0:  # F is not positive definite along p (or NaN): stop, say so
            breakdown = True
            break
        alpha = rr / (pz + eps)
        x += alpha * p
        r -= alpha * z
        rr_new = float(r @ r)
        p = r + rr_new / (rr + eps) * p
        rr = rr_new
        done += 1
    return CGResult(x.to(b.dtype), torch.tensor(done), torch.tensor(math.sqrt(rr), dtype=b.dtype),
                    torch.tensor(breakdown))


@scalar_args("damping")
def fisher_vector_product(kl_fn, params: torch.Tensor, damping: float = CG_DAMPING):
    """v ↦ ∇²_θ kl_fn(θ)|_{θ=params} v + damping·v, recomputed from scratch on every call (double
    backward through a fresh forward pass, as OmniSafe's NaturalPG._fvp)."""
    validate_fvp(params, damping)

    def fvp(v: torch.Tensor) -> torch.Tensor:
        require_vector("fisher_vector_product", "v", v, params.shape[0])
        theta = params.detach().requires_grad_(True)
        kl = kl_fn(theta)
        check_kl("fisher_vector_product", kl)
        (grad,) = torch.autograd.grad(kl, theta, create_graph=True)  # [n]
        (hv,) = torch.autograd.grad(grad @ v.to(grad.dtype), theta)  # [n]
        return hv + damping * v

    return fvp


@scalar_args("max_kl")
def natural_step(x: torch.Tensor, xFx, max_kl: float) -> torch.Tensor:
    """α·x with α = sqrt(2δ / (xᵀFx + ε)): the step whose quadratic KL model ½ stepᵀF step is δ."""
    validate_natural_step(x, xFx, max_kl)
    alpha = math.sqrt(2 * max_kl / (float(xFx) + EPS))
    return (alpha * x.double()).to(x.dtype)


def _cpo_case(bb: float, c: float, B: float) -> int:
    if bb <= CPO_ZERO_COST_GRAD and c < 0:
        return ZERO_COST_GRAD
    if c < 0:
        return ALL_FEASIBLE if B < 0 else PARTLY_FEASIBLE
    return FEASIBLE_RECOVERY if B >= 0 else INFEASIBLE_RECOVERY


def _clamp(v: float, lo: float, hi: float) -> float | None:
    """v projected onto [lo, hi]; None for an empty interval."""
    return None if hi <= lo else min(max(v, lo), hi)


def _cpo_dual(q: float, r: float, s: float, c: float, A: float, B: float, max_kl: float) -> tuple[float, float]:
    """(λ*, ν*) of CPO's dual when the trust region meets the constraint (cases 1, 2).

    f(λ) = max_ν≥0 of the dual: ν*(λ) = max(0, λc + r)/s, positive for λ on one side of λ_mid = −r/c.
    There f = f_a(λ) = −½(A/λ + Bλ) + rc/s, elsewhere f = f_b(λ) = −½(q/λ + 2δλ); each is concave, so its
    maximum over its interval is its stationary point sqrt(A/B) or sqrt(q/2δ) projected onto it.
    """
    mid = -r / c if c != 0 else (-math.inf if r > 0 else math.inf if r < 0 else 0.0)
    mid = max(mid, 0.0)
    if c < 0:  # ν* > 0 for λ < λ_mid
        region_a, region_b = (0.0, mid), (mid, math.inf)
    else:  # ν* > 0 for λ > λ_mid
        region_a, region_b = (mid, math.inf), (0.0, mid)
    lam_a = _clamp(math.sqrt(max(A, 0.0) / B) if B > 0 else math.inf, *region_a)  # A >= 0 up to rounding
    lam_b = _clamp(math.sqrt(max(q, 0.0) / (2 * max_kl)), *region_b)

    def f_a(lam):
        return -math.inf if lam is None else -0.5 * (A / (lam + EPS) + B * lam) + r * c / (s + EPS)

    def f_b(lam):
        return -math.inf if lam is None else -0.5 * (q / (lam + EPS) + 2 * max_kl * lam)

    lam = lam_a if f_a(lam_a) >= f_b(lam_b) else lam_b
    return lam, max(0.0, lam * c + r) / (s + EPS)


@scalar_args("max_kl")
def cpo_step(g: torch.Tensor, b: torch.Tensor, x: torch.Tensor, p: torch.Tensor, q, c, max_kl: float) -> CPOStep:
    """CPO's direction for max gᵀd s.t. ½dᵀFd <= δ, c + bᵀd <= 0 (Achiam et al. 2017, appendix 10.2).

    g, b: gradients of the reward and cost surrogates; x = F⁻¹g, p = F⁻¹b (conjugate gradient);
    q = xᵀFx; c = J_c − d (the constraint's current violation).
    """
    validate_cpo(g, b, x, p, q, c, max_kl)
    gd, bd, xd, pd = g.double(), b.double(), x.double(), p.double()
    q, c = float(q), float(c)
    r, s = float(gd @ pd), float(bd @ pd)
    A = q - r * r / (s + EPS)
    B = 2 * max_kl - c * c / (s + EPS)
    case = _cpo_case(float(bd @ bd), c, B)
    if case in (ALL_FEASIBLE, ZERO_COST_GRAD):  # the TRPO step is feasible
        alpha = math.sqrt(2 * max_kl / (q + EPS))
        lam, nu, step = 1 / (alpha + EPS), 0.0, alpha * xd
    elif case == PARTLY_FEASIBLE or (case == FEASIBLE_RECOVERY and B > 0):
        lam, nu = _cpo_dual(q, r, s, c, A, B, max_kl)
        step = (xd - nu * pd) / (lam + EPS)
    else:  # infeasible recovery, and case 1 at B = 0 (the trust region touches the constraint in one
        # point, the dual's λ* = ∞; the limit of its step): the KL-sized step that decreases the cost fastest
        lam, nu = 0.0, math.sqrt(2 * max_kl / (s + EPS))
        step = -nu * pd
    as_t = lambda v: torch.tensor(v, dtype=g.dtype)  # noqa: E731
    return CPOStep(step.to(g.dtype), torch.tensor(case), as_t(lam), as_t(nu), as_t(r), as_t(s), as_t(A), as_t(B))


def _reasons(surrogate: float, kl: float, cost: float | None, surrogate_before: float, cost_before: float | None,
             cost_violation: float | None, max_kl: float, require_improvement: bool) -> int:
    values = (surrogate, kl) if cost is None else (surrogate, kl, cost)
    if not all(math.isfinite(v) for v in values):
        return NONFINITE
    code = ACCEPTED
    if require_improvement and surrogate - surrogate_before < 0:
        code |= NO_IMPROVEMENT
    if cost is not None and cost - cost_before > max(-cost_violation, 0.0):
        code |= COST_VIOLATED
    if kl > max_kl:
        code |= KL_VIOLATED
    return code


@scalar_args("max_kl", "max_steps", "decay")
def line_search(params: torch.Tensor, step: torch.Tensor, evaluate, *, max_kl: float, surrogate_before,
                cost_before=None, cost_violation=None, require_improvement: bool = True,
                max_steps: int = TRPO_LINE_SEARCH_STEPS, decay: float = LINE_SEARCH_DECAY) -> LineSearchResult:
    """Backtracking: candidate k = params + decay**(k−1)·step, k = 1..max_steps; the first one that is finite,
    within the trust region (KL <= max_kl), improves the surrogate (if required) and, when a cost is
    given, raises the cost surrogate by at most max(−cost_violation, 0) is accepted. None: the old params."""
    validate_line_search(params, step, max_kl, surrogate_before, cost_before, cost_violation, max_steps, decay)
    with_cost = cost_before is not None
    before = (float(surrogate_before), float(cost_before) if with_cost else None,
              float(cost_violation) if with_cost else None)
    reasons = [NOT_EVALUATED] * max_steps
    for k, frac in enumerate(line_search_fractions(max_steps, decay)):
        candidate = params + frac * step  # [n]
        surrogate, kl, cost = check_evaluation("line_search", evaluate(candidate[None]), 1, with_cost)
        kl = float(kl[0])
        reasons[k] = _reasons(float(surrogate[0]), kl, float(cost[0]) if with_cost else None, *before,
                              max_kl, require_improvement)
        if reasons[k] == ACCEPTED:
            return LineSearchResult(candidate, torch.tensor(k + 1), torch.tensor(frac, dtype=params.dtype),
                                    torch.tensor(reasons), torch.tensor(kl, dtype=params.dtype))
    zero = torch.zeros((), dtype=params.dtype)
    return LineSearchResult(params.clone(), torch.tensor(0), zero, torch.tensor(reasons), zero)


@scalar_args("kappa", "clip_ratio")
def p3o_loss(ratio: torch.Tensor, adv_r: torch.Tensor, adv_c: torch.Tensor, cost_violation, kappa: float = P3O_KAPPA,
             clip_ratio: float = P3O_CLIP, cost_clip: bool = False) -> P3OLoss:
    """−mean(min(ρA, clip(ρ, 1±ε)A)) + κ·ReLU(S_c + c), S_c = mean(ρA_C) (OmniSafe) or, with cost_clip,
    mean(max(ρA_C, clip(ρ, 1±ε)A_C)) (the P3O paper's pessimistic clipped cost surrogate)."""
    validate_p3o(ratio, adv_r, adv_c, cost_violation, kappa, clip_ratio)
    rho, a, ac = ratio.double(), adv_r.double(), adv_c.double()
    clipped = rho.clamp(1 - clip_ratio, 1 + clip_ratio)
    reward_loss = -torch.minimum(rho * a, clipped * a).mean()
    cost_surrogate = (torch.maximum(rho * ac, clipped * ac) if cost_clip else rho * ac).mean()
    penalty = kappa * torch.relu(cost_surrogate + torch.as_tensor(cost_violation, dtype=F64))
    dt = ratio.dtype
    return P3OLoss((reward_loss + penalty).to(dt), reward_loss.to(dt), penalty.to(dt))


@scalar_args("cost_return", "cost_limit", "cost_gamma")
def p3o_cost_violation(cost_return: float, cost_limit: float, cost_gamma: float) -> float:
    """c = (1 − γ_c)·(J_c − d), the cost term of P3O's objective κ·max(0, L_C + (1 − γ)(J_C(π_k) − d)) (Zhang et al.
    2022, "Penalized Proximal Policy Optimization"): by the performance difference lemma, J_C(π) − d <= 0 iff
    (1 − γ)(J_C(π_k) − d) + E_{d^π}[A_C] <= 0, the surrogate L_C standing for the expectation."""
    validate_p3o_violation(cost_return, cost_limit, cost_gamma)
    return (1.0 - cost_gamma) * (cost_return - cost_limit)
