"""Contract ``trust_region``: the numerical core of TRPO, TRPOLag, CPO and P3O (PPOLagSem design §2A baselines).

Sources: Schulman et al. 2015 (TRPO: natural gradient step, Fisher-vector products, backtracking line
search); Achiam et al. 2017 (CPO: the linearized problem and its dual, appendix 10.2); Zhang et al. 2022
(P3O: the penalized clipped objective); OmniSafe 0.5.0 ``utils/math.py`` (conjugate_gradients),
``algorithms/on_policy/base/natural_pg.py`` (_fvp), ``base/trpo.py`` (_search_step_size, _update_actor),
``second_order/cpo.py`` (_determine_case, _step_direction, _cpo_search_step), ``penalty_function/p3o.py``,
whose defaults (rlspec.contracts.trust_region) the baselines run. Vectors are flat parameter vectors [n].

conjugate_gradient(fvp, b [n], iters=15, residual_tol=1e-10, eps=0) -> CGResult(x, iterations, residual_norm,
breakdown)
    Solves F x = b for symmetric positive-definite F, applied only through fvp(v) = F v. From x₀ = 0,
    r₀ = p₀ = b, while k < iters and ‖r_k‖ >= residual_tol:
        α = r_kᵀr_k / (p_kᵀFp_k + eps),  x_{k+1} = x_k + α p_k,  r_{k+1} = r_k − α F p_k
        p_{k+1} = r_{k+1} + (r_{k+1}ᵀr_{k+1} / (r_kᵀr_k + eps)) p_k
    In exact arithmetic x_k minimizes the F-norm error over the Krylov space K_k = span(b, Fb, …, F^{k−1}b),
    so x_k = V(VᵀFV)⁻¹Vᵀb for any basis V of K_k (the float64 closed form of CG-2), and x_n = F⁻¹b.
    ``iterations`` counts the updates of x (<= iters, the cap); ``residual_norm`` is ‖r‖; ``breakdown``
    says the loop stopped because pᵀFp <= 0 (F not positive definite along p, or NaN) — a counted event,
    never a NaN in x. OmniSafe adds eps = 1e-6 to both denominators; the spec's default is exact CG
    (eps = 0; the golden test passes OmniSafe's value), because a fixed 1e-6 shrinks α badly once pᵀFp is
    small (late in training, when gradients are small).

fisher_vector_product(kl_fn, params [n], damping=0.1) -> fvp
    kl_fn(θ) is the mean KL(π_params ‖ π_θ) over a batch (π_params held fixed; contracts.policy_mean_kl
    builds it). fvp(v) = ∇²_θ kl_fn(θ)|_{θ=params} v + damping·v: the Fisher information of the policy
    at params times v, plus damping (OmniSafe cg_damping). Linear in v, symmetric, and
    vᵀ fvp(v) >= damping·‖v‖² (the Hessian of a KL at its minimum is positive semi-definite).

natural_step(x [n], xFx, max_kl) = α·x,  α = sqrt(2δ / (xᵀFx + ε)),  ε = 1e-8:  the TRPO step, whose
    quadratic KL model ½ stepᵀF step equals δ (up to ε). δ = max_kl = 0.01.

cpo_step(g, b, x, p, q, c, max_kl) -> CPOStep(step, case, lam, nu, r, s, A, B)
    g, b: gradients of the reward and cost surrogates at θ; x = F⁻¹g, p = F⁻¹b; q = xᵀFx; c = J_c − d.
    Linearized problem (CPO eq. 10):  max_d gᵀd  s.t.  ½dᵀFd <= δ,  c + bᵀd <= 0.
    r = gᵀp, s = bᵀp, A = q − r²/(s + ε), B = 2δ − c²/(s + ε). Cases (OmniSafe's numbering):
        4  bᵀb <= 1e-6 and c < 0   (no cost gradient, feasible)          step = natural_step
        3  c < 0, B < 0            (the whole trust region is feasible)   step = natural_step
        2  c < 0 <= B              (the constraint cuts the trust region) step = (x − ν*p)/(λ* + ε)
        1  c >= 0, B >= 0          (infeasible, recovery possible)        step = (x − ν*p)/(λ* + ε)
        0  c >= 0, B < 0           (no feasible point in the region)      step = −sqrt(2δ/(s + ε))·p
    Dual (cases 1, 2): max over λ > 0 of f(λ) = max_{ν>=0} −(q − 2νr + ν²s)/(2λ) + νc − λδ, where
    ν*(λ) = max(0, λc + r)/s; with λ_mid = −r/c, f = f_a(λ) = −½(A/λ + Bλ) + rc/s where ν* > 0 (λ < λ_mid
    if c < 0, λ > λ_mid if c > 0) and f_b(λ) = −½(q/λ + 2δλ) elsewhere; each is concave, so λ* is
    sqrt(A/B) or sqrt(q/2δ) projected onto its interval (an empty interval does not compete), whichever f
    is larger; ν* = max(0, λ*c + r)/(s + ε).
    Closed form (CPO-2, independent of the dual): with d = αx + βp the constraints read α²q + 2αβr + β²s
    <= 2δ and c + αr + βs <= 0; if c + r·sqrt(2δ/q) <= 0 the TRPO step α = sqrt(2δ/q) is optimal, else
    the optimum is where the hyperplane meets the ellipse: α = sqrt(B/A), β = −(c + αr)/s (exact A, B).
    OmniSafe 0.5.0 differs here (the spec follows the mathematics): its g is the ascent gradient (−∇loss)
    but its λ-intervals, f_a and ν* use r with the sign of the descent convention it was ported from
    (jachiam/cpo, where g = ∇loss), and ``torch.clamp(λ, lo, hi)`` with lo > hi returns hi (a negative λ)
    where the interval is empty. On 2000 seeded random 2-D problems none of its case-1 steps meets the
    linearized cost constraint and about half of its case-2 steps leave the trust region; on the golden
    tiny network its case-1 rows with r < 0 get λ* < 0 and no step is accepted (tests/golden/
    test_trust_region_golden.py, which pins this reading against OmniSafe's logged λ*, ν*). The cases,
    q, r, s, A, B and the line search agree.

line_search(params [n], step [n], evaluate, *, max_kl, surrogate_before, cost_before=None,
            cost_violation=None, require_improvement=True, max_steps=15, decay=0.8) -> LineSearchResult
    Candidates θ_k = params + decay^(k−1)·step, k = 1..max_steps (TRPO: 15, CPO: 20). evaluate(thetas
    [K, n]) -> (surrogate [K], kl [K], cost [K] or None). A candidate is rejected, with the reason bits
        NONFINITE 1        a value is NaN/±Inf (then no other bit)
        NO_IMPROVEMENT 2   surrogate(θ_k) − surrogate_before < 0           (when require_improvement)
        COST_VIOLATED 4    cost(θ_k) − cost_before > max(−cost_violation, 0)     (when a cost is given)
        KL_VIOLATED 8      kl(θ_k) > max_kl
    and the first candidate with no bit set is accepted. reasons[k] is the bitmask of candidate k+1 for
    every candidate up to the accepted one and −1 (not evaluated) after it. With none accepted the old
    parameters come back (same values), accepted_step = 0. TRPO: require_improvement, no cost; CPO: the
    cost check with c, and require_improvement only in cases 2–4 (OmniSafe: optim_case > 1).
    OmniSafe's searches differ on non-finite values only: TRPO accepts a NaN KL (NaN > δ is False), CPO
    accepts a NaN surrogate and retries the same step size on a NaN KL; the spec rejects all three.

p3o_loss(ratio [N], adv_r [N], adv_c [N], cost_violation, kappa=20, clip_ratio=0.2, cost_clip=False)
    L = −mean(min(ρA, clip(ρ, 1−ε, 1+ε)A)) + κ·ReLU(S_c + c),  S_c = mean(ρA_C)   (OmniSafe P3O)
    With cost_clip, S_c = mean(max(ρA_C, clip(ρ)A_C)) (the paper's pessimistic clipped cost surrogate).

p3o_cost_violation(cost_return, cost_limit, cost_gamma) -> c = (1 − γ_c)·(J_c − d)
    The paper's c (Zhang et al. 2022): κ·max(0, L_C + (1 − γ)(J_C(π_k) − d)), J_C the discounted cost return;
    the factor comes from the performance difference lemma, which puts J_C(π) − J_C(π_k) on the scale of
    E[A_C]/(1 − γ). OmniSafe 0.5.0 (p3o.py ``Jc = EpCost − cost_limit``, omnisafe#118) passes the
    undiscounted episode cost minus d, unscaled: with γ_c = 0.99 its c is ~100× the paper's, so the
    per-step surrogate S_c hardly moves the ReLU's switch (the penalty is on whenever EpCost > d). rlspec's
    safe engine follows OmniSafe (its anchor); p3o_loss takes c as the caller computes it.
    The penalty, and its gradient, vanish where S_c + c <= 0: a satisfied constraint exerts no pull.

dtype: every function keeps the input dtype (float32 or float64). The reference accumulates CG and the
CPO dual in float64; the fast twin computes in the input dtype on its device without host reads.
OmniSafe's mean KL (kl_divergence(...).mean() over every element) averages a Normal's KL over action
dimensions as well as samples: for A action dimensions its δ is a per-dimension budget.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import strategies as st

from rlspec.contracts.trust_region import (
    ACCEPTED,
    ALL_FEASIBLE,
    COST_VIOLATED,
    CPO_ZERO_COST_GRAD,
    EPS,
    FEASIBLE_RECOVERY,
    INFEASIBLE_RECOVERY,
    KL_VIOLATED,
    LINE_SEARCH_DEFAULTS,
    NO_IMPROVEMENT,
    NONFINITE,
    NOT_EVALUATED,
    P3O_DEFAULTS,
    PARTLY_FEASIBLE,
    ZERO_COST_GRAD,
    describe_reasons,
    line_search_fractions,
)
from rlspec.spec.core import (
    Change,
    Contract,
    Property,
    assert_close,
    assert_identical,
    by_category,
    expect_rejection,
    fail,
    per_function,
)
from rlspec.spec.power import defaults_check, with_omitted
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "TR-1": "conjugate_gradient solves F x = b on dense SPD systems (n <= 8, cond <= 1e3) within n iterations: "
            "x = F⁻¹b (float64 solve), ‖Fx − b‖ small, no breakdown",
    "TR-2": "conjugate_gradient stops at the cap: with iters = k < n it calls fvp at most k times and returns the "
            "k-th CG iterate V(VᵀFV)⁻¹Vᵀb over the Krylov space K_k (float64 closed form)",
    "TR-3": "conjugate_gradient stops once ‖r‖ < residual_tol: F with m distinct eigenvalues takes <= m updates; "
            "residual_norm = ‖b − Fx‖; b = 0 gives x = 0 after 0 updates",
    "TR-4": "conjugate_gradient reports breakdown (pᵀFp <= 0 or NaN) and returns a finite x instead of NaN",
    "TR-5": "fisher_vector_product(v) = ∇²KL(π_params ‖ π_θ)|_params v + damping·v (explicit float64 Hessian, tiny "
            "Gaussian and categorical policies)",
    "TR-6": "fisher_vector_product is linear in v, symmetric (uᵀFv = vᵀFu) and vᵀFv >= damping·‖v‖²",
    "TR-7": "natural_step = sqrt(2δ/(xᵀFx + 1e-8))·x, in x's dtype",
    "TR-8": "line_search accepts the first candidate params + decay^k·step that is finite, has KL <= max_kl, "
            "improves the surrogate (if required) and raises the cost by <= max(−c, 0); reasons name every "
            "failed condition of the candidates before it",
    "TR-9": "line_search with no acceptable candidate returns the old parameters unchanged, accepted_step 0, and "
            "the failed conditions of every candidate",
    "TR-10": "cpo_step's case: 4 if bᵀb <= 1e-6 and c < 0, else 3 (c < 0, B < 0), 2 (c < 0 <= B), 1 (c >= 0, "
             "B >= 0), 0 (c >= 0 > B), with r, s, A, B as defined",
    "TR-11": "cpo_step's direction solves max gᵀd s.t. ½dᵀFd <= δ, c + bᵀd <= 0 (closed form on small problems) "
             "in cases 1–4, and is −sqrt(2δ/s)·F⁻¹b in case 0 and in case 1 at B = 0 (the one feasible point)",
    "TR-12": "p3o_loss = −mean(min(ρA, clip(ρ)A)) + κ·ReLU(S_c + c) in value and gradient (float64 closed form); "
             "no penalty and no penalty gradient where S_c + c <= 0",
    "TR-13": "bad input is rejected naming the argument (iters < 1, negative damping or κ, max_kl <= 0, decay "
             "outside (0, 1), mismatched shapes, a cost_before without cost_violation, a malformed evaluate, a kl_fn "
             "that is not scalar)",
    "TR-14": "hyper-parameters (iters, residual_tol, eps, damping, max_kl, max_steps, decay, kappa, clip_ratio) "
             "given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "TR-15": "cpo_step's multipliers are the ones its step uses: cases 3, 4 (TRPO step α·x) ν = 0, λ = 1/α with "
             "α = sqrt(2δ/(q + 1e-8)); case 0 λ = 0, ν = sqrt(2δ/(s + 1e-8)) (also case 1 at B = 0, where the "
             "dual's λ* = ∞); "
             "cases 1, 2 λ > 0, ν = max(0, λc + r)/(s + 1e-8) and step = (x − ν·p)/λ",
    "TR-16": "documented defaults: line_search without require_improvement, max_steps, decay and p3o_loss without "
             "kappa, clip_ratio, cost_clip equal passing True, 15, 0.8 and 20.0, 0.2, False (bit for bit)",
    "TR-17": "boundaries and hygiene, pinned exactly: cpo_step's case split at bᵀb = 1e-6, c = 0, B = 0 > c and "
             "B = 0 < c (case 1 with the recovery step −sqrt(2δ/s)·F⁻¹b, finite) (with r, s, "
             "A = q − r²/(s + 1e-8), B = 2δ − c²/(s + 1e-8)); line_search accepts a candidate with equal surrogate, "
             "KL = max_kl and cost rise = max(−c, 0); conjugate_gradient iterates "
             "at ‖r‖ = residual_tol, reports breakdown at pᵀFp = 0 and with eps > 0 follows α = rᵀr/(pᵀFp + eps), "
             "β = r'ᵀr'/(rᵀr + eps)",
    "TR-18": "the caller's tensors stay the caller's: line_search with nothing accepted returns a new tensor, not "
             "params itself, and fisher_vector_product leaves params' requires_grad and values alone",
    "TR-19": "p3o_cost_violation(J_c, d, γ_c) = (1 − γ_c)·(J_c − d), the P3O paper's cost term that p3o_loss takes "
             "as c (float64 closed form; the numbers given as Python floats, numpy scalars or 0-d tensors)",
    "TR-20": "p3o_cost_violation rejects γ_c outside [0, 1) and a non-finite J_c or d, naming the argument and the "
             "value",
}

CATEGORIES = by_category(
    maths=("TR-1", "TR-2", "TR-3", "TR-5", "TR-6", "TR-7", "TR-8", "TR-9", "TR-10", "TR-11", "TR-12", "TR-15",
           "TR-16", "TR-17", "TR-19"),
    robustness=("TR-4", "TR-14", "TR-18"),
    validation=("TR-13", "TR-20"),
)
RATIONALE = {
    "TR-4": "The textbook CG recurrence divides by pᵀFp: a Fisher estimate that is not positive definite (a "
            "flat policy, a damping of 0) gives a division by zero or a negative curvature, and the iterate "
            "turns NaN or runs off. The kit asks CG to report the breakdown and return its last finite iterate,"
            " because a NaN search direction makes the whole trust-region step NaN.",
    "TR-18": "The formulas say nothing about the caller's tensors. The kit asks that a failed line search "
             "return a new tensor (the caller updates the result in place, which would move its own parameters)"
             " and that the Fisher-vector product differentiate a detached copy (marking the caller's "
             "parameters as requiring grad changes every later autograd graph built from them).",
    "TR-14": SCALAR_RATIONALE,
    "TR-19": "The P3O paper's objective carries (1 − γ)(J_C(π_k) − d): the performance difference lemma puts the "
             "constraint J_C(π) <= d on the scale of the per-step surrogate. OmniSafe 0.5.0, the only adapted "
             "library with a P3O, omits the factor (omnisafe#118): the clause states the paper's term and "
             "OmniSafe's form is a declared difference.",
}

INTERFACE = ("conjugate_gradient", "fisher_vector_product", "natural_step", "cpo_step", "line_search", "p3o_loss",
             "p3o_cost_violation")
CHECKED_BY_TR13 = INTERFACE[:-1]  # the functions of 1.0; p3o_cost_violation's rejections are TR-20
F64 = torch.float64


# --------------------------------------------------------------------------------------------------
# Test problems and closed forms (float64)
# --------------------------------------------------------------------------------------------------
def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def spd_matrix(seed: int, n: int, cond: float, distinct: int | None = None) -> torch.Tensor:
    """Q diag(λ) Qᵀ [n, n], eigenvalues log-spaced in [1, cond] (or only ``distinct`` different ones)."""
    g = _gen(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))
    levels = torch.logspace(0, math.log10(cond), distinct or n, dtype=F64)
    eig = levels[torch.arange(n) % levels.numel()][torch.randperm(n, generator=g)]
    return (q * eig) @ q.T


def krylov_iterate(F: torch.Tensor, b: torch.Tensor, k: int) -> torch.Tensor:
    """argmin over K_k(F, b) of the F-norm error = V(VᵀFV)⁻¹Vᵀb, V an orthonormal Krylov basis (Arnoldi
    with reorthogonalization; stops early when K_k is invariant, where CG has converged)."""
    basis = [b / b.norm()]
    while len(basis) < k:
        w = F @ basis[-1]
        for _ in range(2):
            w = w - torch.stack(basis).T @ (torch.stack(basis) @ w)
        if w.norm() <= 1e-12 * (F @ basis[-1]).norm():
            break
        basis.append(w / w.norm())
    V = torch.stack(basis, dim=1)  # [n, k]
    return V @ torch.linalg.solve(V.T @ F @ V, V.T @ b)


def counting(fvp):
    """fvp with a ``calls`` counter."""
    def wrapped(v):
        wrapped.calls += 1
        return fvp(v)
    wrapped.calls = 0
    return wrapped


def tiny_policy_sizes(kind: str, obs_dim: int, hidden: int, act: int) -> list[tuple[int, ...]]:
    """Parameter shapes in flat order: OmniSafe's GaussianLearningActor.named_parameters() order (its own
    log_std Parameter before its ``mean`` MLP's), then W1, b1, W2, b2."""
    shapes = [(hidden, obs_dim), (hidden,), (act, hidden), (act,)]
    return [(act,)] + shapes if kind == "gaussian" else shapes


def tiny_policy(kind: str, theta: torch.Tensor, obs: torch.Tensor, hidden: int, act: int):
    """π_θ(·|obs) for θ [n] or a batch of candidates [K, n]: tanh MLP obs [N, o] -> Normal(mean, exp(log_std))
    of batch shape [(K,) N, act], or Categorical(logits) of batch shape [(K,) N]."""
    sizes = [math.prod(s) for s in tiny_policy_sizes(kind, obs.shape[-1], hidden, act)]
    lead = theta.shape[:-1]
    parts = [t.reshape(*lead, *s) for t, s in zip(theta.split(sizes, -1),
                                                 tiny_policy_sizes(kind, obs.shape[-1], hidden, act))]
    log_std, (w1, b1, w2, b2) = (parts[0], parts[1:]) if kind == "gaussian" else (None, parts)
    h = torch.tanh(obs @ w1.transpose(-1, -2) + b1.unsqueeze(-2))  # [(K,) N, hidden]
    out = h @ w2.transpose(-1, -2) + b2.unsqueeze(-2)  # [(K,) N, act]
    if kind == "gaussian":
        return torch.distributions.Normal(out, log_std.exp().unsqueeze(-2).expand_as(out))
    return torch.distributions.Categorical(logits=out)


def tiny_kl_fn(kind: str, params: torch.Tensor, obs: torch.Tensor, hidden: int, act: int):
    """kl_fn(θ) = mean KL(π_params ‖ π_θ) (OmniSafe's reduction: the mean over every KL element)."""
    old = tiny_policy(kind, params.detach(), obs, hidden, act)
    return lambda theta: torch.distributions.kl_divergence(old, tiny_policy(kind, theta, obs, hidden, act)).mean()


def fvp_problem(seed: int, kind: str, obs_dim: int, hidden: int, act: int, batch: int):
    g = _gen(seed)
    n = sum(math.prod(s) for s in tiny_policy_sizes(kind, obs_dim, hidden, act))
    params = 0.7 * torch.randn(n, generator=g, dtype=F64)
    obs = torch.randn(batch, obs_dim, generator=g, dtype=F64)
    vectors = torch.randn(4, n, generator=g, dtype=F64)
    return params, tiny_kl_fn(kind, params, obs, hidden, act), vectors


def cpo_problem(seed: int, n: int, t: float, max_kl: float, b_kind: str, dtype: torch.dtype):
    """(g, b, x, p, q, c, F) with c = t·sqrt(2δs): t < −1 case 3, −1 <= t < 0 case 2, 0 <= t <= 1 case 1,
    t > 1 case 0 (b_kind 'zero'/'tiny': bᵀb <= 1e-6 and c = −0.1, case 4, or c >= 0.1, case 0)."""
    gen = _gen(seed)
    F = spd_matrix(seed, n, 30.0) * 0.5
    g = torch.randn(n, generator=gen, dtype=F64)
    b = torch.randn(n, generator=gen, dtype=F64)
    b = {"random": b, "zero": torch.zeros(n, dtype=F64), "tiny": 1e-4 * b / b.norm()}[b_kind]
    x, p = torch.linalg.solve(F, g), torch.linalg.solve(F, b)
    s = float(b @ p)
    c = t * math.sqrt(2 * max_kl * s) if b_kind == "random" else (-0.1 if t <= 0 else 0.1 + 0.1 * t)
    as_dt = lambda v: v.to(dtype)  # noqa: E731
    return as_dt(g), as_dt(b), as_dt(x), as_dt(p), float(g @ x), c, F


def cpo_expected_case(g, b, p, c: float, max_kl: float) -> tuple[int, dict]:
    g, b, p = g.double(), b.double(), p.double()
    r, s = float(g @ p), float(b @ p)
    B = 2 * max_kl - c * c / (s + EPS)
    if float(b @ b) <= CPO_ZERO_COST_GRAD and c < 0:
        case = ZERO_COST_GRAD
    elif c < 0:
        case = ALL_FEASIBLE if B < 0 else PARTLY_FEASIBLE
    else:
        case = FEASIBLE_RECOVERY if B >= 0 else INFEASIBLE_RECOVERY
    return case, dict(r=r, s=s, B=B)


def lqclp_closed_form(x, p, q: float, r: float, s: float, c: float, max_kl: float) -> torch.Tensor:
    """argmax gᵀd s.t. ½dᵀFd <= δ, c + bᵀd <= 0 over d = αx + βp (exact arithmetic, no ε); the recovery
    step −sqrt(2δ/(s + ε))·p when the two sets do not meet (c > 0, c² > 2δs)."""
    if c > 0 and c * c > 2 * max_kl * s:
        return -math.sqrt(2 * max_kl / (s + EPS)) * p  # the spec's stated recovery step, ε included
    alpha = math.sqrt(2 * max_kl / q)
    if c + alpha * r <= 0:
        return alpha * x
    A, B = q - r * r / s, 2 * max_kl - c * c / s
    alpha = math.sqrt(B / A)
    return alpha * x - (c + alpha * r) / s * p


class LineProblem:
    """A ray θ₀ + f·step through smooth (non-quadratic) surrogate, KL and cost landscapes, evaluated in
    float64 for any batch of candidates [K, n]; max_kl is kl_scale times the full step's KL."""

    def __init__(self, seed: int, n: int, shape: str, kl_scale: float, with_cost: bool, c: float,
                 nan_from: float | None, dtype: torch.dtype):
        g = _gen(seed)
        r = lambda *s: torch.randn(*s, generator=g, dtype=F64)  # noqa: E731
        self.dtype, self.nan_from = dtype, nan_from
        self.theta0, self.step = r(n).to(dtype), r(n).to(dtype)
        step = self.step.double()
        direction = {"improves": step, "worsens": -step, "random": r(n)}[shape]
        self.g_s, self.s0 = direction + 0.3 * r(n), float(r(()))
        m = r(n, n)
        self.M = 0.5 * m @ m.T  # surrogate curvature: improvement peaks, then falls, along the ray
        self.F = spd_matrix(seed + 1, n, 10.0)
        cost_dir = {"improves": -step, "worsens": step, "random": r(n)}[shape] if with_cost else r(n)
        self.g_c, self.c0, self.C = cost_dir + 0.3 * r(n), float(r(())), self.M.clone()
        self.with_cost, self.c = with_cost, c
        self.max_kl = kl_scale * float(self._kl(step[None])[0])
        if shape == "worsens":  # no candidate improves the surrogate / keeps the cost: pure ascent away
            self.g_s, self.M = -step * (1 + step.norm()), torch.zeros_like(self.M)
            self.g_c, self.C = step * (1 + step.norm()), torch.zeros_like(self.C)

    def _kl(self, delta: torch.Tensor) -> torch.Tensor:  # [K, n] -> [K]
        return 0.5 * torch.einsum("kn,nm,km->k", delta, self.F, delta) + 0.1 * delta.norm(dim=-1) ** 3

    def evaluate(self, thetas: torch.Tensor):
        delta = thetas.double() - self.theta0.double()  # [K, n]
        surrogate = self.s0 + delta @ self.g_s - 0.5 * torch.einsum("kn,nm,km->k", delta, self.M, delta)
        kl = self._kl(delta)
        cost = self.c0 + delta @ self.g_c + 0.5 * torch.einsum("kn,nm,km->k", delta, self.C, delta)
        if self.nan_from is not None:  # the step blows up beyond a fraction of the full step
            big = delta.norm(dim=-1) > self.nan_from * self.step.double().norm() * (1 - 1e-9)
            surrogate = torch.where(big, math.nan, surrogate)
        return surrogate.to(self.dtype), kl.to(self.dtype), cost.to(self.dtype) if self.with_cost else None

    def kwargs(self, max_steps: int, decay: float, require_improvement: bool) -> dict:
        cost = dict(cost_before=self.c0, cost_violation=self.c) if self.with_cost else {}
        return dict(max_kl=self.max_kl, surrogate_before=self.s0, require_improvement=require_improvement,
                    max_steps=max_steps, decay=decay, **cost)

    def expected(self, max_steps: int, decay: float, require_improvement: bool) -> tuple[list[int], int]:
        """(reason bits of every candidate, 1-based index of the first accepted or 0)."""
        codes = []
        for frac in line_search_fractions(max_steps, decay):
            s, kl, cost = (v.double()[0] if v is not None else None
                           for v in self.evaluate((self.theta0 + frac * self.step)[None]))
            if not (torch.isfinite(s) and torch.isfinite(kl) and (cost is None or torch.isfinite(cost))):
                codes.append(NONFINITE)
                continue
            code = KL_VIOLATED if kl > self.max_kl else ACCEPTED
            if require_improvement and s - self.s0 < 0:
                code |= NO_IMPROVEMENT
            if cost is not None and cost - self.c0 > max(-self.c, 0.0):
                code |= COST_VIOLATED
            codes.append(code)
        return codes, next((k + 1 for k, code in enumerate(codes) if code == ACCEPTED), 0)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
float_dtypes = st.sampled_from([F64, F64, torch.float32])

cg_cases = st.fixed_dictionaries(dict(seed=seeds, n=st.integers(1, 8), cond=st.sampled_from([1.0, 10.0, 100.0, 1e3]),
                                      scale=st.sampled_from([1.0, 1e-3, 50.0])))
cg_cap_cases = st.builds(lambda seed, n, cond, k: dict(seed=seed, n=n, cond=cond, k=min(k, n - 1)),
                         seeds, st.integers(3, 8), st.sampled_from([10.0, 100.0]), st.integers(1, 6))
cg_stop_cases = st.fixed_dictionaries(dict(seed=seeds, n=st.integers(2, 8), distinct=st.integers(1, 3),
                                           zero_b=st.sampled_from([False, False, False, True])))
cg_breakdown_cases = st.fixed_dictionaries(dict(seed=seeds, n=st.integers(1, 6),
                                                kind=st.sampled_from(["negative", "nan"]), iters=st.integers(1, 10)))
fvp_cases = st.fixed_dictionaries(dict(
    seed=seeds, kind=st.sampled_from(["gaussian", "categorical"]), obs_dim=st.integers(1, 3),
    hidden=st.integers(1, 4), act=st.integers(1, 3), batch=st.integers(1, 6),
    damping=st.sampled_from([0.1, 0.1, 1e-3, 2.0, 0.0])))
natural_cases = st.fixed_dictionaries(dict(seed=seeds, n=st.integers(1, 40), xFx=st.sampled_from([1e-9, 0.3, 7.0, 1e4]),
                                           max_kl=st.sampled_from([0.01, 0.02, 0.5]), dtype=float_dtypes,
                                           tensor_xfx=st.booleans()))


@st.composite
def line_cases(draw, forced_failure: bool = False):
    with_cost = draw(st.booleans())
    case = dict(seed=draw(seeds), n=draw(st.integers(1, 5)), max_steps=draw(st.sampled_from([1, 2, 5, 15, 20])),
                decay=draw(st.sampled_from([0.8, 0.5, 0.9])), with_cost=with_cost,
                c=draw(st.sampled_from([-0.5, -0.05, 0.0, 0.3])), require_improvement=draw(st.booleans()),
                dtype=draw(float_dtypes), nan_from=draw(st.sampled_from([None, None, None, 0.6])))
    if forced_failure:  # every candidate fails one way or another
        mode = draw(st.sampled_from(["worsens", "kl", "nan", "cost"]))
        case.update(shape="worsens" if mode in ("worsens", "cost") else "random",
                    kl_scale=1e-14 if mode == "kl" else draw(st.sampled_from([0.05, 2.0])),
                    nan_from=0.0 if mode == "nan" else case["nan_from"],
                    require_improvement=True if mode == "worsens" else case["require_improvement"],
                    with_cost=True if mode == "cost" else with_cost, c=0.3 if mode == "cost" else case["c"])
    else:
        case.update(shape=draw(st.sampled_from(["improves", "improves", "random"])),
                    kl_scale=draw(st.sampled_from([0.01, 0.1, 0.5, 1.0, 2.0])))
    return case


cpo_cases = st.fixed_dictionaries(dict(
    seed=seeds, n=st.sampled_from([2, 2, 2, 3, 5]),
    # continuous t avoids |t| = 1 (B = 0: the case is a rounding decision) and subnormal c (0 in float32)
    t=st.one_of(st.sampled_from([-2.5, -1.3, -0.7, -0.2, 0.0, 0.3, 0.8, 1.4, 3.0]),
                st.floats(-3, 3).filter(lambda t: abs(abs(t) - 1) > 1e-3 and (t == 0 or abs(t) > 1e-6))),
    max_kl=st.sampled_from([0.01, 0.05, 0.5]), b_kind=st.sampled_from(["random"] * 6 + ["zero", "tiny"]),
    dtype=float_dtypes))
p3o_cases = st.fixed_dictionaries(dict(
    seed=seeds, n=st.integers(1, 64), c=st.sampled_from([-10.0, -0.3, 0.0, 0.2, 5.0]),
    kappa=st.sampled_from([20.0, 1.0, 0.0]), clip_ratio=st.sampled_from([0.2, 0.1, 0.3]),
    cost_clip=st.booleans(), spread=st.sampled_from([0.05, 0.3, 1.0]), dtype=float_dtypes))

CG_EXAMPLES = (dict(seed=0, n=8, cond=1e3, scale=1.0), dict(seed=1, n=1, cond=1.0, scale=1.0))
LINE_EXAMPLES = (
    # the full step breaks the trust region, the surrogate improves all along: KL decides
    dict(seed=3, n=4, max_steps=15, decay=0.8, with_cost=False, c=0.0, require_improvement=True, dtype=F64,
         nan_from=None, shape="improves", kl_scale=0.1),
    # CPO-style: cost checked with slack max(−c, 0) = 0.05
    dict(seed=4, n=3, max_steps=20, decay=0.8, with_cost=True, c=-0.05, require_improvement=False, dtype=F64,
         nan_from=None, shape="random", kl_scale=0.5),
    # NaN beyond 60 % of the step
    dict(seed=5, n=2, max_steps=5, decay=0.5, with_cost=False, c=0.0, require_improvement=True, dtype=torch.float32,
         nan_from=0.6, shape="improves", kl_scale=2.0),
)
FAIL_EXAMPLES = (
    dict(seed=6, n=3, max_steps=15, decay=0.8, with_cost=False, c=0.0, require_improvement=True, dtype=F64,
         nan_from=None, shape="worsens", kl_scale=2.0),
    dict(seed=7, n=3, max_steps=4, decay=0.8, with_cost=True, c=0.3, require_improvement=False, dtype=F64,
         nan_from=None, shape="worsens", kl_scale=2.0),
)
CPO_EXAMPLES = tuple(dict(seed=11, n=2, t=t, max_kl=0.01, b_kind="random", dtype=F64)
                     for t in (-2.0, -0.5, 0.0, 0.5, 2.0)) + (
    dict(seed=12, n=2, t=-1.0, max_kl=0.01, b_kind="zero", dtype=F64),
    dict(seed=13, n=3, t=1.0, max_kl=0.01, b_kind="tiny", dtype=F64),
    # found by mutation testing: the dual's region choice and λ < 1 on the ν > 0 side decide the step here
    dict(seed=0, n=3, t=0.0, max_kl=0.01, b_kind="random", dtype=F64),  # c = 0 < r: ν > 0 for every λ
    dict(seed=2, n=3, t=0.0, max_kl=0.5, b_kind="random", dtype=F64),  # c = 0 > r: optimum λ < 1 with ν = 0
    dict(seed=0, n=2, t=0.3, max_kl=0.05, b_kind="random", dtype=F64),
    dict(seed=0, n=3, t=-0.7, max_kl=0.01, b_kind="random", dtype=F64),
    dict(seed=1, n=2, t=-0.7, max_kl=0.05, b_kind="random", dtype=F64),
)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def _cg(impl, F: torch.Tensor, b: torch.Tensor, **kwargs):
    fvp = counting(lambda v: (F.to(v.dtype) @ v))
    return impl.conjugate_gradient(fvp, b, **kwargs), fvp


def check_cg_solves(impl, seed, n, cond, scale):
    F = spd_matrix(seed, n, cond) * scale
    b = torch.randn(n, generator=_gen(seed + 7), dtype=F64)
    res, _ = _cg(impl, F, b, iters=n)
    x_star = torch.linalg.solve(F, b)
    inputs = dict(n=n, cond=cond, scale=scale, seed=seed)
    if bool(res.breakdown):
        fail("TR-1", "breakdown reported on a symmetric positive-definite F", **inputs)
    assert_close("TR-1", "x vs float64 solve F⁻¹b", res.x, x_star, atol=1e-6 * float(x_star.norm()) + 1e-300,
                 **inputs)
    true_residual = float((F @ res.x - b).norm())
    if not true_residual <= 1e-6 * float(b.norm()) * cond:
        fail("TR-1", f"‖Fx − b‖ = {true_residual:.3g} after iters = n, expected <= 1e-6·cond·‖b‖", **inputs)


def check_cg_cap(impl, seed, n, cond, k):
    F = spd_matrix(seed, n, cond)
    b = torch.randn(n, generator=_gen(seed + 7), dtype=F64)
    res, fvp = _cg(impl, F, b, iters=k)
    inputs = dict(n=n, cond=cond, k=k, seed=seed)
    if fvp.calls > k:
        fail("TR-2", f"fvp called {fvp.calls} times with iters = {k}", **inputs)
    if not int(res.iterations) <= k:
        fail("TR-2", f"iterations = {int(res.iterations)} > iters = {k}", **inputs)
    want = krylov_iterate(F, b, k)
    assert_close("TR-2", f"x after iters = {k} vs the Krylov iterate V(VᵀFV)⁻¹Vᵀb", res.x, want,
                 atol=1e-7 * float(want.norm()), **inputs)


def check_cg_stops(impl, seed, n, distinct, zero_b):
    m = min(distinct, n)
    F = spd_matrix(seed, n, 50.0, distinct=m)
    b = torch.zeros(n, dtype=F64) if zero_b else torch.randn(n, generator=_gen(seed + 7), dtype=F64)
    tol = 1e-10
    res, _ = _cg(impl, F, b, iters=n + 3, residual_tol=tol)
    inputs = dict(n=n, distinct=m, zero_b=zero_b, seed=seed)
    limit = 0 if zero_b else m
    if not int(res.iterations) <= limit:
        fail("TR-3", f"{int(res.iterations)} updates, expected <= {limit} (distinct eigenvalues; b = 0 needs none)",
             **inputs)
    if zero_b:
        assert_identical("TR-3", "x for b = 0", res.x, torch.zeros(n, dtype=F64), **inputs)
    true_residual = float((b - F @ res.x).norm())
    assert_close("TR-3", "residual_norm vs ‖b − Fx‖", res.residual_norm, torch.tensor(true_residual, dtype=F64),
                 atol=1e-12, **inputs)
    if not float(res.residual_norm) < tol:
        fail("TR-3", f"stopped with residual_norm {float(res.residual_norm):.3g} >= residual_tol {tol}", **inputs)


def check_cg_breakdown(impl, seed, n, kind, iters):
    F = -spd_matrix(seed, n, 10.0) if kind == "negative" else torch.full((n, n), math.nan, dtype=F64)
    b = torch.randn(n, generator=_gen(seed + 7), dtype=F64)
    res, _ = _cg(impl, F, b, iters=iters)
    inputs = dict(n=n, kind=kind, iters=iters, seed=seed)
    if not bool(res.breakdown):
        fail("TR-4", f"F {kind}: breakdown not reported", **inputs)
    if not bool(torch.isfinite(res.x).all()):
        fail("TR-4", f"F {kind}: x = {res.x.tolist()} is not finite", **inputs)
    if int(res.iterations) != 0:
        fail("TR-4", f"F {kind}: {int(res.iterations)} updates of x, expected 0 (pᵀFp <= 0 at the first)", **inputs)


def _fvp_setup(impl, seed, kind, obs_dim, hidden, act, batch, damping):
    params, kl_fn, vectors = fvp_problem(seed, kind, obs_dim, hidden, act, batch)
    fvp = impl.fisher_vector_product(kl_fn, params, damping)
    inputs = dict(kind=kind, obs_dim=obs_dim, hidden=hidden, act=act, batch=batch, damping=damping, seed=seed)
    return params, kl_fn, vectors, fvp, inputs


def check_fvp_hessian(impl, **case):
    params, kl_fn, vectors, fvp, inputs = _fvp_setup(impl, **case)
    H = torch.autograd.functional.hessian(kl_fn, params)  # [n, n]
    for v in vectors[:2]:
        want = H @ v + case["damping"] * v
        scale = float(H.abs().sum(1).max()) * float(v.abs().max()) + case["damping"] * float(v.abs().max())
        assert_close("TR-5", "fvp(v) vs explicit Hessian of the mean KL · v + damping·v", fvp(v), want,
                     atol=1e-10 * (1 + scale), v=v, **inputs)


def check_fvp_algebra(impl, **case):
    _, _, (u, v, w, _), fvp, inputs = _fvp_setup(impl, **case)
    fu, fv = fvp(u), fvp(v)
    scale = 1 + float(fu.abs().max()) + float(fv.abs().max())
    assert_close("TR-6", "fvp(2u − 3v) vs 2·fvp(u) − 3·fvp(v)", fvp(2 * u - 3 * v), 2 * fu - 3 * fv,
                 atol=1e-10 * scale, **inputs)
    assert_close("TR-6", "uᵀ·fvp(v) vs vᵀ·fvp(u)", u @ fv, v @ fu, atol=1e-10 * scale * float(u.norm() + v.norm()),
                 **inputs)
    quad, floor = float(w @ fvp(w)), case["damping"] * float(w @ w)
    if not quad >= floor - 1e-10 * (1 + abs(floor)):
        fail("TR-6", f"wᵀ·fvp(w) = {quad:.9g} < damping·‖w‖² = {floor:.9g}", **inputs)


def check_natural_step(impl, seed, n, xFx, max_kl, dtype, tensor_xfx):
    x = torch.randn(n, generator=_gen(seed), dtype=F64)
    arg = torch.tensor(xFx, dtype=dtype) if tensor_xfx else xFx
    got = impl.natural_step(x.to(dtype), arg, max_kl)
    want = math.sqrt(2 * max_kl / (float(torch.tensor(xFx, dtype=dtype)) + EPS)) * x.to(dtype).double()
    if got.dtype != dtype:
        fail("TR-7", f"natural_step returned {got.dtype} for {dtype} input", xFx=xFx, max_kl=max_kl)
    assert_close("TR-7", "natural_step", got, want, atol=0.0, rtol=8 * torch.finfo(dtype).eps, xFx=xFx, max_kl=max_kl)


def _line_search(impl, case):
    problem = LineProblem(case["seed"], case["n"], case["shape"], case["kl_scale"], case["with_cost"], case["c"],
                          case["nan_from"], case["dtype"])
    args = (case["max_steps"], case["decay"], case["require_improvement"])
    out = impl.line_search(problem.theta0, problem.step, problem.evaluate, **problem.kwargs(*args))
    return problem, out, *problem.expected(*args)


def _check_reasons(clause, out, codes, accepted, case):
    got = [int(v) for v in out.reasons]
    want = codes[:accepted] + [NOT_EVALUATED] * (len(codes) - accepted) if accepted else codes
    if got != want:
        k = next(i for i, (a, b) in enumerate(zip(got + [None] * len(want), want)) if a != b)
        fail(clause, f"reasons {got}, expected {want}: candidate {k + 1} reported "
                     f"'{describe_reasons(got[k]) if k < len(got) else 'nothing'}', expected "
                     f"'{describe_reasons(want[k])}'", **case)


def check_line_search(impl, **case):
    problem, out, codes, accepted = _line_search(impl, case)
    got_step = int(out.accepted_step)
    if got_step != accepted:
        fail("TR-8", f"accepted candidate {got_step}, expected {accepted} (0: none); candidates: "
                     + "; ".join(f"{k + 1}: {describe_reasons(c)}" for k, c in enumerate(codes)), **case)
    _check_reasons("TR-8", out, codes, accepted, case)
    if accepted:
        frac = line_search_fractions(case["max_steps"], case["decay"])[accepted - 1]
        want = problem.theta0 + frac * problem.step
        tol = 4 * torch.finfo(case["dtype"]).eps * float(want.abs().max() + 1)
        assert_close("TR-8", f"params of accepted candidate {accepted}", out.params, want, atol=tol, **case)
        assert_close("TR-8", "step_fraction", out.step_fraction, torch.tensor(frac, dtype=F64), atol=0.0,
                     rtol=4 * torch.finfo(case["dtype"]).eps, **case)
        kl = problem.evaluate(want[None])[1][0]
        assert_close("TR-8", "kl of the accepted candidate", out.kl, kl, atol=0.0, rtol=1e-5, **case)
    else:
        assert_identical("TR-8", "params when nothing is accepted", out.params, problem.theta0, **case)


def check_line_search_fails(impl, **case):
    problem, out, codes, accepted = _line_search(impl, case)
    if accepted:
        fail("TR-9", "test problem has an acceptable candidate (strategy bug)", **case)
    if int(out.accepted_step) != 0:
        k = int(out.accepted_step)
        fail("TR-9", f"accepted candidate {k} although it fails: {describe_reasons(codes[k - 1])}", **case)
    assert_identical("TR-9", "params with no acceptable candidate (the old parameters)", out.params, problem.theta0,
                     **case)
    _check_reasons("TR-9", out, codes, 0, case)
    if float(out.step_fraction) != 0.0:
        fail("TR-9", f"step_fraction {float(out.step_fraction)} with nothing accepted, expected 0", **case)


def _cpo(impl, case):
    g, b, x, p, q, c, F = cpo_problem(case["seed"], case["n"], case["t"], case["max_kl"], case["b_kind"], case["dtype"])
    return impl.cpo_step(g, b, x, p, q, c, case["max_kl"]), (g, b, x, p, q, c, F)


def check_cpo_case(impl, **case):
    out, (g, b, x, p, q, c, F) = _cpo(impl, case)
    want, terms = cpo_expected_case(g, b, p, c, case["max_kl"])
    if int(out.case) != want:
        fail("TR-10", f"case {int(out.case)}, expected {want}", c=c, q=q, **terms, **case)
    eps = torch.finfo(case["dtype"]).eps
    for name in ("r", "s", "B"):
        assert_close("TR-10", name, getattr(out, name), torch.tensor(terms[name], dtype=F64),
                     atol=64 * eps * (1 + abs(terms[name])), c=c, **case)


def check_cpo_multipliers(impl, **case):
    out, (g, b, x, p, q, c, F) = _cpo(impl, case)
    case_id, delta = int(out.case), case["max_kl"]
    lam, nu, r, s = (float(getattr(out, k)) for k in ("lam", "nu", "r", "s"))
    rtol = 1e-4 if case["dtype"] == torch.float32 else 1e-9
    if case_id in (ALL_FEASIBLE, ZERO_COST_GRAD):
        want = dict(lam=1 / (math.sqrt(2 * delta / (float(q) + EPS)) + EPS), nu=0.0)
    elif case_id == INFEASIBLE_RECOVERY or (case_id == FEASIBLE_RECOVERY and float(out.B) == 0):
        want = dict(lam=0.0, nu=math.sqrt(2 * delta / (s + EPS)))
    else:
        if not lam > 0:
            fail("TR-15", f"case {case_id}: λ = {lam!r}, expected > 0", **case)
        want = dict(lam=lam, nu=max(0.0, lam * float(c) + r) / (s + EPS))
        step = (x.double() - want["nu"] * p.double()) / (lam + EPS)
        assert_close("TR-15", f"case {case_id}: step vs (x − ν·p)/λ", out.step.double(), step,
                     atol=rtol * float(step.abs().max()), rtol=rtol, **case)
    for k, v in want.items():
        assert_close("TR-15", f"case {case_id}: {k}", float(getattr(out, k)), v, atol=rtol * (1 + abs(v)), rtol=0.0,
                     q=float(q), c=float(c), r=r, s=s, **case)


def check_cpo_step(impl, **case):
    out, (g, b, x, p, q, c, F) = _cpo(impl, case)
    case_id, terms = cpo_expected_case(g, b, p, c, case["max_kl"])
    xd, pd = x.double(), p.double()
    if case_id == ZERO_COST_GRAD:  # b ≈ 0: the constraint is a constant c < 0, the TRPO step is optimal
        want = math.sqrt(2 * case["max_kl"] / q) * xd
    else:
        want = lqclp_closed_form(xd, pd, q, terms["r"], terms["s"], c, case["max_kl"])
    if out.step.dtype != case["dtype"]:
        fail("TR-11", f"step dtype {out.step.dtype}, expected {case['dtype']}", **case)
    err = out.step.double() - want
    f_norm = lambda d: math.sqrt(max(float(d @ F @ d), 0.0))  # noqa: E731 - the trust region's own metric
    # A = q − r²/s cancels when g is nearly parallel to b: rounding and the ε = 1e-8 in s + ε perturb A by
    # about q·(eps + ε/s), and the step by that relative to A (∂d/∂α has F-norm sqrt(A), α = sqrt(B/A))
    amp = 1 + q / max(q - terms["r"] ** 2 / terms["s"], 1e-300) if terms["s"] > 0 else 1.0
    rtol = 10 * amp * (EPS / max(min(terms["s"], q), 1e-300) + 16 * torch.finfo(case["dtype"]).eps)
    tol = rtol * max(f_norm(want), math.sqrt(case["max_kl"]))
    if not f_norm(err) <= tol:
        fail("TR-11", f"case {case_id}: step is {f_norm(err):.3g} away (F-norm) from the closed-form optimum, "
                      f"tolerance {tol:.3g}; got {out.step.tolist()}, expected {want.tolist()}; "
                      f"½dᵀFd = {0.5 * f_norm(out.step.double()) ** 2:.6g} (δ = {case['max_kl']}), "
                      f"c + bᵀd = {c + float(b.double() @ out.step.double()):.6g}", c=c, q=q, **terms, **case)


# --------------------------------------------------------------------------------------------------
# TR-17: exact boundaries (each pinned so that the comparison sits exactly on its edge in float64)
# --------------------------------------------------------------------------------------------------
_BETA = 0.4999999899999999  # β² + 1e-8 == 0.25 exactly: with c = −0.5, δ = 0.5, B = 1 − 0.25/0.25 = 0
CPO_BOUNDARIES = (  # F = I (x = g, p = b): b, c, max_kl and the expected case
    dict(b=(1e-3, 0.0), c=-0.1, max_kl=0.01, case=ZERO_COST_GRAD),  # bᵀb = 1e-6 exactly, c < 0
    dict(b=(1e-4, 0.0), c=0.0, max_kl=0.01, case=FEASIBLE_RECOVERY),  # bᵀb <= 1e-6 but c = 0: not case 4
    dict(b=(_BETA, 0.0), c=-0.5, max_kl=0.5, case=PARTLY_FEASIBLE),  # B = 0, c < 0
    # B = 0, c > 0: the trust region touches the constraint in one point, the recovery step −sqrt(2δ/s)·p
    # (the dual's λ* is infinite there: a TypeError / a 7e7 step before the fix)
    dict(b=(_BETA, 0.0), c=0.5, max_kl=0.5, case=FEASIBLE_RECOVERY, recovery_step=True),
)


def check_cpo_boundaries(impl):
    g = torch.tensor([0.3, 0.7], dtype=F64)
    for pin in CPO_BOUNDARIES:
        b = torch.tensor(pin["b"], dtype=F64)
        q, c, delta = float(g @ g), pin["c"], pin["max_kl"]
        out = impl.cpo_step(g, b, g, b, q, c, delta)
        r, s = float(g @ b), float(b @ b)
        terms = dict(r=r, s=s, A=q - r * r / (s + EPS), B=2 * delta - c * c / (s + EPS))
        if int(out.case) != pin["case"] or not all(math.isfinite(float(v)) for v in out.step):
            fail("TR-17", f"case {int(out.case)} (step {out.step.tolist()}), expected {pin['case']}", q=q, **pin,
                 **terms)
        for name, want in terms.items():
            assert_close("TR-17", name, float(getattr(out, name)), want, atol=1e-14 * (1 + abs(want)), rtol=0.0,
                         **pin)
        if pin.get("recovery_step"):
            assert_close("TR-17", "step vs the recovery step −sqrt(2δ/(s + 1e-8))·p", out.step,
                         -math.sqrt(2 * delta / (s + EPS)) * b, atol=1e-12, rtol=0.0, **pin)


def check_line_search_edges(impl):
    params, step = torch.zeros(2, dtype=F64), torch.ones(2, dtype=F64)

    def on_the_edge(thetas):  # [K, n]: equal surrogate, KL = max_kl, cost rise = max(−c, 0), all exactly
        k = thetas.shape[0]
        return (torch.full((k,), 1.5, dtype=F64), torch.full((k,), 0.01, dtype=F64),
                torch.full((k,), 0.75, dtype=F64))

    out = impl.line_search(params, step, on_the_edge, max_kl=0.01, surrogate_before=1.5, cost_before=0.25,
                           cost_violation=-0.5, require_improvement=True, max_steps=3, decay=0.5)
    if int(out.accepted_step) != 1 or [int(v) for v in out.reasons] != [ACCEPTED, NOT_EVALUATED, NOT_EVALUATED]:
        fail("TR-17", f"accepted_step {int(out.accepted_step)}, reasons {out.reasons.tolist()}: a candidate with the "
                      "same surrogate, KL = max_kl and cost rise = max(−c, 0) must be accepted at once")


def check_line_search_new_tensor(impl):
    params, step = torch.zeros(2, dtype=F64), torch.ones(2, dtype=F64)

    def too_far(thetas):
        k = thetas.shape[0]
        return torch.zeros(k, dtype=F64), torch.ones(k, dtype=F64), None

    out = impl.line_search(params, step, too_far, max_kl=0.01, surrogate_before=0.0, max_steps=2)
    if int(out.accepted_step) != 0 or out.params is params or out.params.data_ptr() == params.data_ptr():
        fail("TR-18", "line_search with nothing accepted returned the caller's params tensor itself (or accepted "
                      "a candidate): a later in-place update of the result would change the caller's parameters")


def _cg_eps_recurrence(F: torch.Tensor, b: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    x, r = torch.zeros_like(b), b.clone()
    p, rr = r.clone(), float(r @ r)
    for _ in range(iters):
        z = F @ p
        alpha = rr / (float(p @ z) + eps)
        x, r = x + alpha * p, r - alpha * z
        rr_new = float(r @ r)
        p, rr = r + rr_new / (rr + eps) * p, rr_new
    return x


def check_cg_edges(impl):
    tol = 1e-10
    b = torch.tensor([tol, 0.0], dtype=F64)  # ‖b‖ == residual_tol exactly: not yet below it
    res, _ = _cg(impl, torch.eye(2, dtype=F64), b, iters=3, residual_tol=tol)
    if int(res.iterations) != 1 or not torch.equal(res.x, b):
        fail("TR-17", f"‖b‖ = residual_tol = {tol}: {int(res.iterations)} updates, x = {res.x.tolist()}; expected one "
                      "update to x = b (CG stops only once ‖r‖ < residual_tol)")
    res, _ = _cg(impl, torch.zeros(2, 2, dtype=F64), torch.ones(2, dtype=F64), iters=3)
    if not bool(res.breakdown) or int(res.iterations) != 0 or not bool(torch.isfinite(res.x).all()):
        fail("TR-17", f"F = 0 (pᵀFp = 0): breakdown {bool(res.breakdown)}, {int(res.iterations)} updates, x = "
                      f"{res.x.tolist()}; expected a breakdown after 0 updates and a finite x")
    F, b = spd_matrix(3, 3, 10.0), torch.randn(3, generator=_gen(5), dtype=F64)
    res, _ = _cg(impl, F, b, iters=3, residual_tol=0.0, eps=0.1)
    assert_close("TR-17", "x with eps = 0.1 vs the float64 eps-CG recurrence", res.x, _cg_eps_recurrence(F, b, 3, 0.1),
                 atol=1e-12 * float(b.norm()))


def check_fvp_hygiene(impl):
    params, kl_fn, (v, *_) = fvp_problem(0, "gaussian", 2, 2, 1, 3)
    params = params.detach()
    before = params.clone()
    impl.fisher_vector_product(kl_fn, params, 0.1)(v)
    if params.requires_grad or not torch.equal(params, before):
        fail("TR-18", f"fvp(v) left the caller's params with requires_grad={params.requires_grad} (or changed "
                      "them): the FVP must differentiate a detached copy")


def _p3o_closed_form(ratio, adv_r, adv_c, c, kappa, clip_ratio, cost_clip):
    clipped = ratio.clamp(1 - clip_ratio, 1 + clip_ratio)
    reward = -torch.minimum(ratio * adv_r, clipped * adv_r).mean()
    s_c = (torch.maximum(ratio * adv_c, clipped * adv_c) if cost_clip else ratio * adv_c).mean()
    return reward, kappa * torch.relu(s_c + c), s_c


def check_p3o(impl, seed, n, c, kappa, clip_ratio, cost_clip, spread, dtype):
    gen = _gen(seed)
    ratio = torch.exp(spread * torch.randn(n, generator=gen, dtype=F64)).to(dtype)
    adv_r, adv_c = (torch.randn(n, generator=gen, dtype=F64).to(dtype) for _ in range(2))
    inputs = dict(n=n, c=c, kappa=kappa, clip_ratio=clip_ratio, cost_clip=cost_clip, dtype=dtype, seed=seed)
    rho = ratio.clone().requires_grad_(True)
    out = impl.p3o_loss(rho, adv_r, adv_c, c, kappa, clip_ratio, cost_clip)
    rho64 = ratio.double().requires_grad_(True)
    reward, penalty, s_c = _p3o_closed_form(rho64, adv_r.double(), adv_c.double(), c, kappa, clip_ratio, cost_clip)
    tol = 16 * torch.finfo(dtype).eps * (1 + kappa) * float(adv_r.abs().max() + adv_c.abs().max()) * (1 + abs(c))
    for name, want in (("cost_penalty", penalty), ("reward_loss", reward), ("loss", reward + penalty)):
        got = getattr(out, name)
        if got.dtype != dtype:
            fail("TR-12", f"{name} dtype {got.dtype}, expected {dtype}", **inputs)
        assert_close("TR-12", name, got, want.detach(), atol=tol, S_c=float(s_c.detach()), **inputs)
    (grad,) = torch.autograd.grad(out.loss, rho)
    (want_grad,) = torch.autograd.grad(reward + penalty, rho64)
    assert_close("TR-12", "∂loss/∂ratio", grad, want_grad, atol=tol, S_c=float(s_c.detach()), **inputs)


def check_rejections(impl, fn):
    """TR-13: each bad call of ``fn`` raises ValueError/TypeError naming the argument."""
    b = torch.ones(3, dtype=F64)
    fvp = lambda v: v  # noqa: E731
    kl_fn = lambda th: (th**2).sum()  # noqa: E731
    evaluate = lambda th: (th.sum(-1), th.sum(-1).abs(), None)  # noqa: E731
    ls = dict(max_kl=0.01, surrogate_before=0.0)
    vec = torch.ones(3, dtype=F64)
    cases = [
        ("fisher_vector_product", "kl_fn", lambda: impl.fisher_vector_product(lambda th: th ** 2, b, 0.1)(vec)),
        ("conjugate_gradient", "iters", lambda: impl.conjugate_gradient(fvp, b, iters=0)),
        ("conjugate_gradient", "b", lambda: impl.conjugate_gradient(fvp, torch.ones(2, 2, dtype=F64))),
        ("conjugate_gradient", "residual_tol", lambda: impl.conjugate_gradient(fvp, b, residual_tol=-1.0)),
        ("conjugate_gradient", "fvp(v)", lambda: impl.conjugate_gradient(lambda v: v[:2], b)),
        ("fisher_vector_product", "damping", lambda: impl.fisher_vector_product(kl_fn, b, damping=-0.1)),
        ("natural_step", "max_kl", lambda: impl.natural_step(vec, 1.0, 0.0)),
        ("cpo_step", "p", lambda: impl.cpo_step(vec, vec, vec, torch.ones(2, dtype=F64), 1.0, 0.1, 0.01)),
        ("cpo_step", "c", lambda: impl.cpo_step(vec, vec, vec, vec, 1.0, torch.ones(2, dtype=F64), 0.01)),
        ("line_search", "decay", lambda: impl.line_search(vec, vec, evaluate, decay=1.0, **ls)),
        ("line_search", "max_steps", lambda: impl.line_search(vec, vec, evaluate, max_steps=0, **ls)),
        ("line_search", "step", lambda: impl.line_search(vec, torch.ones(4, dtype=F64), evaluate, **ls)),
        ("line_search", "cost_violation", lambda: impl.line_search(vec, vec, evaluate, cost_before=0.0, **ls)),
        ("line_search", "evaluate", lambda: impl.line_search(vec, vec, lambda th: (th.sum(), th.sum(), None), **ls)),
        ("p3o_loss", "kappa", lambda: impl.p3o_loss(vec, vec, vec, 0.0, kappa=-1.0)),
        ("p3o_loss", "clip_ratio", lambda: impl.p3o_loss(vec, vec, vec, 0.0, clip_ratio=0.0)),
        ("p3o_loss", "adv_c", lambda: impl.p3o_loss(vec, vec, torch.ones(2, dtype=F64), 0.0)),
        ("fisher_vector_product", "v", lambda: impl.fisher_vector_product(kl_fn, b, 0.1)(torch.ones(2, dtype=F64))),
    ]
    for called, name, call in cases:
        if called == fn:
            expect_rejection("TR-13", call, names=(name,), what=f"{fn} with a bad '{name}'")


def check_hyperparameter_types(impl, fn):
    """TR-14: ``fn``'s hyper-parameters as np.float32/np.int64/0-d tensors, bit for bit."""
    F, vec = spd_matrix(0, 4, 10.0), torch.randn(4, generator=_gen(1), dtype=F64)
    params, kl_fn, vectors = fvp_problem(2, "gaussian", 2, 2, 1, 3)
    problem = LineProblem(3, 4, "improves", 0.1, True, -0.05, None, F64)
    g, b, x, p, q, c, _ = cpo_problem(4, 2, 0.5, 0.01, "random", F64)
    ratio = torch.exp(0.3 * torch.randn(16, generator=_gen(5), dtype=F64))
    calls = {
        "conjugate_gradient": (lambda **hp: impl.conjugate_gradient(lambda v: F @ v, vec, **hp),
                               dict(iters=3, residual_tol=1e-10, eps=1e-6)),
        "fisher_vector_product": (lambda **hp: impl.fisher_vector_product(kl_fn, params, **hp)(vectors[0]),
                                  dict(damping=0.1)),
        "natural_step": (lambda **hp: impl.natural_step(vec, 0.3, **hp), dict(max_kl=0.01)),
        "cpo_step": (lambda **hp: impl.cpo_step(g, b, x, p, q, c, **hp), dict(max_kl=0.01)),
        "line_search": (lambda **hp: impl.line_search(problem.theta0, problem.step, problem.evaluate,
                                                      **{**problem.kwargs(5, 0.8, True), **hp}),
                        dict(max_kl=problem.max_kl, max_steps=5, decay=0.7)),
        "p3o_loss": (lambda **hp: impl.p3o_loss(ratio, ratio - 1, 1 - ratio, -0.01, **hp),
                     dict(kappa=20.0, clip_ratio=0.2)),
    }
    call, hyper = calls[fn]
    check_scalar_types("TR-14", call, hyper, function=fn)


CG = ("conjugate_gradient",)
def _line_search_with(impl, case, kw):
    problem = LineProblem(case["seed"], case["n"], case["shape"], case["kl_scale"], case["with_cost"], case["c"],
                          case["nan_from"], case["dtype"])
    required = {k: v for k, v in problem.kwargs(15, 0.8, True).items() if k not in LINE_SEARCH_DEFAULTS}
    return tuple(impl.line_search(problem.theta0, problem.step, problem.evaluate, **required, **kw))


p3o_violation_cases = st.fixed_dictionaries(dict(
    cost_return=st.one_of(st.sampled_from([0.0, 12.5, 25.0, 80.0]), st.floats(-1e3, 1e3)),
    cost_limit=st.sampled_from([0.0, 25.0, 1.5]), cost_gamma=st.sampled_from([0.0, 0.9, 0.99, 0.999]),
    spelling=st.sampled_from(["float", "numpy", "tensor"])))
SPELLINGS = {"float": float, "numpy": np.float64, "tensor": lambda x: torch.tensor(x, dtype=F64)}


def check_p3o_violation(impl, cost_return, cost_limit, cost_gamma, spelling):
    spell = SPELLINGS[spelling]
    got = float(impl.p3o_cost_violation(spell(cost_return), spell(cost_limit), spell(cost_gamma)))
    want = (1 - cost_gamma) * (cost_return - cost_limit)
    tol = 4 * torch.finfo(F64).eps * (abs(cost_return) + abs(cost_limit))
    assert_close("TR-19", "p3o_cost_violation vs (1 − γ_c)·(J_c − d)", torch.tensor(got, dtype=F64),
                 torch.tensor(want, dtype=F64), atol=tol, cost_return=cost_return, cost_limit=cost_limit,
                 cost_gamma=cost_gamma, spelling=spelling)


def check_rejects_p3o_violation(impl, name, value):
    args = dict(dict(cost_return=30.0, cost_limit=25.0, cost_gamma=0.99), **{name: value})
    expect_rejection("TR-20", lambda: impl.p3o_cost_violation(**args), names=[f"'{name}'"], mentions=[repr(value)],
                     what=f"p3o_cost_violation({name}={value!r})")


def _p3o_with(impl, case, kw):
    gen = _gen(case["seed"])
    ratio = torch.exp(case["spread"] * torch.randn(case["n"], generator=gen, dtype=F64)).to(case["dtype"])
    adv_r, adv_c = (torch.randn(case["n"], generator=gen, dtype=F64).to(case["dtype"]) for _ in range(2))
    return tuple(impl.p3o_loss(ratio, adv_r, adv_c, case["c"], **kw))


PROPERTIES = (
    Property("TR-1", check_cg_solves, cg_cases, CG_EXAMPLES, CG),
    Property("TR-2", check_cg_cap, cg_cap_cases,
             (dict(seed=2, n=8, cond=100.0, k=3), dict(seed=3, n=5, cond=10.0, k=1)), CG),
    Property("TR-3", check_cg_stops, cg_stop_cases,
             (dict(seed=4, n=8, distinct=2, zero_b=False), dict(seed=5, n=3, distinct=1, zero_b=True)), CG),
    Property("TR-4", check_cg_breakdown, cg_breakdown_cases, (dict(seed=6, n=3, kind="negative", iters=5),), CG,
             max_examples=10),
    Property("TR-5", check_fvp_hessian, fvp_cases,
             (dict(seed=7, kind="gaussian", obs_dim=3, hidden=4, act=2, batch=6, damping=0.1),
              dict(seed=8, kind="categorical", obs_dim=2, hidden=3, act=3, batch=4, damping=0.1)),
             ("fisher_vector_product",), max_examples=12),
    Property("TR-6", check_fvp_algebra, fvp_cases,
             (dict(seed=9, kind="gaussian", obs_dim=2, hidden=3, act=2, batch=1, damping=0.1),),
             ("fisher_vector_product",), max_examples=12),
    Property("TR-7", check_natural_step, natural_cases, (dict(seed=0, n=5, xFx=0.3, max_kl=0.01, dtype=F64,
                                                               tensor_xfx=True),), ("natural_step",)),
    Property("TR-8", check_line_search, line_cases(), LINE_EXAMPLES, ("line_search",)),
    Property("TR-9", check_line_search_fails, line_cases(forced_failure=True), FAIL_EXAMPLES, ("line_search",)),
    Property("TR-10", check_cpo_case, cpo_cases, CPO_EXAMPLES, ("cpo_step",)),
    Property("TR-11", check_cpo_step, cpo_cases, CPO_EXAMPLES, ("cpo_step",)),
    Property("TR-15", check_cpo_multipliers, cpo_cases, CPO_EXAMPLES, ("cpo_step",)),
    Property("TR-16", defaults_check("TR-16", "line_search", _line_search_with,
                                     ("require_improvement", "max_steps", "decay"), LINE_SEARCH_DEFAULTS),
             with_omitted(line_cases(), ("require_improvement", "max_steps", "decay")),
             tuple(dict(c, omitted=frozenset(LINE_SEARCH_DEFAULTS)) for c in LINE_EXAMPLES), ("line_search",),
             max_examples=10),
    Property("TR-16", defaults_check("TR-16", "p3o_loss", _p3o_with, ("kappa", "clip_ratio", "cost_clip"),
                                     P3O_DEFAULTS),
             with_omitted(p3o_cases, ("kappa", "clip_ratio", "cost_clip")),
             (dict(seed=0, n=32, c=0.2, kappa=5.0, clip_ratio=0.1, cost_clip=True, spread=0.5, dtype=F64,
                   omitted=frozenset(P3O_DEFAULTS)),), ("p3o_loss",), max_examples=10),
    Property("TR-12", check_p3o, p3o_cases,
             (dict(seed=0, n=32, c=-10.0, kappa=20.0, clip_ratio=0.2, cost_clip=False, spread=0.3, dtype=F64),
              dict(seed=1, n=32, c=0.2, kappa=20.0, clip_ratio=0.2, cost_clip=True, spread=0.3, dtype=F64)),
             ("p3o_loss",)),
    *per_function("TR-13", check_rejections, CHECKED_BY_TR13),
    Property("TR-17", check_cpo_boundaries, requires=("cpo_step",)),
    Property("TR-17", check_line_search_edges, requires=("line_search",)),
    Property("TR-17", check_cg_edges, requires=("conjugate_gradient",)),
    Property("TR-18", check_line_search_new_tensor, requires=("line_search",)),
    Property("TR-18", check_fvp_hygiene, requires=("fisher_vector_product",)),
    *per_function("TR-14", check_hyperparameter_types, CHECKED_BY_TR13),
    Property("TR-19", check_p3o_violation, p3o_violation_cases,
             (dict(cost_return=40.0, cost_limit=25.0, cost_gamma=0.99, spelling="float"),
              dict(cost_return=3.0, cost_limit=25.0, cost_gamma=0.0, spelling="tensor")), ("p3o_cost_violation",)),
    Property("TR-20", check_rejects_p3o_violation,
             st.sampled_from([dict(name="cost_gamma", value=1.0), dict(name="cost_gamma", value=-0.1),
                              dict(name="cost_gamma", value=math.nan), dict(name="cost_return", value=math.nan),
                              dict(name="cost_return", value=math.inf), dict(name="cost_limit", value=-math.inf)]),
             requires=("p3o_cost_violation",), max_examples=6),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "p3o_cost_violation: the P3O paper's (1 − γ_c)·(J_c − d), OmniSafe's unscaled form a documented "
                  "difference", added=("TR-19", "TR-20")),
)

CONTRACT = Contract("trust_region", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE,
                    changes=CHANGES)
