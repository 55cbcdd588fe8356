"""Runtime half of contract ``trust_region`` (formulas: rlspec.spec.trust_region): defaults, result
types, validators, and the flat-parameter helpers an engine uses to drive TRPO / CPO on a module.

Imports only torch. Defaults are OmniSafe 0.5.0's (configs/on-policy/TRPO.yaml, CPO.yaml, P3O.yaml,
utils/math.py, base/trpo.py, second_order/cpo.py).

How an engine calls the contract (``tr`` = a reference or fast implementation module)::

    flat = FlatParams(actor)                       # trainable parameters as one vector [n]
    theta = flat.get()
    dist = lambda th: make_dist(flat.call(th, obs))                   # th [n] -> a Distribution
    fvp = tr.fisher_vector_product(policy_mean_kl(dist, theta), theta, damping)
    th = theta.clone().requires_grad_(True)
    g = flat_grad(surrogate(th), th)               # ∇ of the reward surrogate at theta
    x = tr.conjugate_gradient(fvp, g, cg_iters).x  # F⁻¹ g
    step = tr.natural_step(x, x @ fvp(x), max_kl)  # TRPO; CPO: tr.cpo_step(g, b, x, p, q, c, max_kl)
    out = tr.line_search(theta, step, evaluate, max_kl=max_kl, surrogate_before=surrogate(theta))
    flat.set(out.params)

``evaluate(thetas [K, n]) -> (surrogate [K], kl [K], cost [K] or None)`` scores candidate parameter
vectors (the reference passes one row at a time, a fast twin all K at once).
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, NamedTuple

import torch

from rlspec.contracts.params import (  # noqa: F401  (re-exported: the contract's defaults)
    CG_DAMPING,
    CG_ITERS,
    CPO_LINE_SEARCH_STEPS,
    LINE_SEARCH_DECAY,
    MAX_KL,
    P3O_CLIP,
    P3O_KAPPA,
    TRPO_LINE_SEARCH_STEPS,
)
from rlspec.contracts.validate import require_floating, require_int, require_range

# OmniSafe 0.5.0 defaults
RESIDUAL_TOL = 1e-10  # utils/math.py conjugate_gradients: stop once ‖r‖ < residual_tol
# documented defaults of the optional arguments (TR-16)
LINE_SEARCH_DEFAULTS = dict(require_improvement=True, max_steps=TRPO_LINE_SEARCH_STEPS, decay=LINE_SEARCH_DECAY)
P3O_DEFAULTS = dict(kappa=P3O_KAPPA, clip_ratio=P3O_CLIP, cost_clip=False)
EPS = 1e-8  # OmniSafe's guard in sqrt(2δ/(xᵀFx + ε)) and in CPO's divisions by s, λ
CPO_ZERO_COST_GRAD = 1e-6  # CPO case 4 (plain TRPO) when bᵀb <= this and the point is feasible

# Line-search reasons: a bitmask per candidate (0 = accepted) ...
ACCEPTED, NONFINITE, NO_IMPROVEMENT, COST_VIOLATED, KL_VIOLATED = 0, 1, 2, 4, 8
NOT_EVALUATED = -1  # ... or -1 for candidates after the accepted one
REASON_NAMES = {NONFINITE: "non-finite", NO_IMPROVEMENT: "surrogate did not improve",
                COST_VIOLATED: "cost constraint violated", KL_VIOLATED: "KL > max_kl"}

# CPO cases (OmniSafe's optim_case numbering)
INFEASIBLE_RECOVERY, FEASIBLE_RECOVERY, PARTLY_FEASIBLE, ALL_FEASIBLE, ZERO_COST_GRAD = 0, 1, 2, 3, 4


class CGResult(NamedTuple):
    x: torch.Tensor  # [n] approximate solution of F x = b
    iterations: torch.Tensor  # [] int64: updates of x performed (<= iters)
    residual_norm: torch.Tensor  # [] ‖r‖ of the recursive residual b − F x
    breakdown: torch.Tensor  # [] bool: stopped because pᵀFp <= 0 (F not positive definite along p)


class LineSearchResult(NamedTuple):
    params: torch.Tensor  # [n] accepted candidate, or the old parameters (same values) if none
    accepted_step: torch.Tensor  # [] int64: 1-based index of the accepted candidate, 0 if none
    step_fraction: torch.Tensor  # [] decay**(accepted_step − 1), 0 if none
    reasons: torch.Tensor  # [max_steps] int64: bitmask of failed conditions per candidate (0 = accepted)
    kl: torch.Tensor  # [] KL of the accepted candidate, 0 if none


class CPOStep(NamedTuple):
    step: torch.Tensor  # [n] direction before the line search
    case: torch.Tensor  # [] int64 in 0..4
    lam: torch.Tensor  # [] λ*
    nu: torch.Tensor  # [] ν*
    r: torch.Tensor  # [] gᵀF⁻¹b
    s: torch.Tensor  # [] bᵀF⁻¹b
    A: torch.Tensor  # [] q − r²/(s + ε)
    B: torch.Tensor  # [] 2δ − c²/(s + ε)


class P3OLoss(NamedTuple):
    loss: torch.Tensor  # [] reward part + cost penalty
    reward_loss: torch.Tensor  # [] −mean(min(ρA, clip(ρ)A))
    cost_penalty: torch.Tensor  # [] κ·ReLU(cost surrogate + c)


def line_search_fractions(max_steps: int, decay: float) -> list[float]:
    """decay**k for k = 0..max_steps−1: candidate k+1 is θ + decay**k · step (host floats, no data)."""
    return [decay**k for k in range(max_steps)]


def describe_reasons(code: int) -> str:
    """'accepted', 'not evaluated', or the failed conditions joined by ' and '."""
    if code == ACCEPTED:
        return "accepted"
    if code == NOT_EVALUATED:
        return "not evaluated"
    return " and ".join(name for bit, name in REASON_NAMES.items() if code & bit)


# --------------------------------------------------------------------------------------------------
# Validation (shapes and configuration only: no tensor values are read)
# --------------------------------------------------------------------------------------------------
def require_vector(fn: str, name: str, t: torch.Tensor, n: int | None = None) -> None:
    require_floating(fn, name, t)
    if t.dim() != 1 or (n is not None and t.shape[0] != n):
        expected = f"[{n}]" if n is not None else "[n] (a flat vector)"
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected {expected}")


def require_scalar(fn: str, name: str, value) -> None:
    """A data scalar (a loss, xᵀFx, J_c − d): a real number (numpy scalars included) or a 0-d floating tensor,
    which may live on the device: its value is not read."""
    if isinstance(value, torch.Tensor):
        require_floating(fn, name, value)
        if value.dim() != 0:
            raise ValueError(f"{fn}: argument '{name}' must be a scalar (0-d tensor), got shape {tuple(value.shape)}")
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: argument '{name}' must be a float or a 0-d tensor, got {type(value).__name__}")


def validate_cg(b: torch.Tensor, iters: int, residual_tol: float, eps: float) -> None:
    fn = "conjugate_gradient"
    require_vector(fn, "b", b)
    require_int(fn, "iters", iters, 1)
    require_range(fn, "residual_tol", residual_tol, 0.0, math.inf, hi_open=True)
    require_range(fn, "eps", eps, 0.0, math.inf, hi_open=True)


def check_fvp_output(fn: str, z: torch.Tensor, v: torch.Tensor) -> None:
    if not isinstance(z, torch.Tensor) or z.shape != v.shape:
        got = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise ValueError(f"{fn}: fvp(v) returned {got}, expected a tensor of v's shape {tuple(v.shape)}")


def validate_fvp(params: torch.Tensor, damping: float) -> None:
    require_vector("fisher_vector_product", "params", params)
    require_range("fisher_vector_product", "damping", damping, 0.0, math.inf, hi_open=True)


def check_kl(fn: str, kl: torch.Tensor) -> None:
    if not isinstance(kl, torch.Tensor) or kl.dim() != 0:
        got = tuple(kl.shape) if isinstance(kl, torch.Tensor) else type(kl).__name__
        raise ValueError(f"{fn}: kl_fn(params) returned {got}, expected a 0-d tensor (the mean KL)")


def validate_max_kl(fn: str, max_kl: float) -> None:
    require_range(fn, "max_kl", max_kl, 0.0, math.inf, lo_open=True, hi_open=True)


def validate_natural_step(x: torch.Tensor, xFx, max_kl: float) -> None:
    require_vector("natural_step", "x", x)
    require_scalar("natural_step", "xFx", xFx)
    validate_max_kl("natural_step", max_kl)


def validate_cpo(g: torch.Tensor, b: torch.Tensor, x: torch.Tensor, p: torch.Tensor, q, c, max_kl: float) -> None:
    fn = "cpo_step"
    require_vector(fn, "g", g)
    for name, t in (("b", b), ("x", x), ("p", p)):
        require_vector(fn, name, t, g.shape[0])
    require_scalar(fn, "q", q)
    require_scalar(fn, "c", c)
    validate_max_kl(fn, max_kl)


def validate_line_search(params: torch.Tensor, step: torch.Tensor, max_kl: float, surrogate_before, cost_before,
                         cost_violation, max_steps: int, decay: float) -> None:
    fn = "line_search"
    require_vector(fn, "params", params)
    require_vector(fn, "step", step, params.shape[0])
    validate_max_kl(fn, max_kl)
    require_scalar(fn, "surrogate_before", surrogate_before)
    if (cost_before is None) != (cost_violation is None):
        raise ValueError(f"{fn}: arguments 'cost_before' and 'cost_violation' go together (the CPO cost check), "
                         f"got cost_before={cost_before!r}, cost_violation={cost_violation!r}")
    if cost_before is not None:
        require_scalar(fn, "cost_before", cost_before)
        require_scalar(fn, "cost_violation", cost_violation)
    require_int(fn, "max_steps", max_steps, 1)
    require_range(fn, "decay", decay, 0.0, 1.0, lo_open=True, hi_open=True)


def check_evaluation(fn: str, out, k: int, with_cost: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """evaluate(...) must return (surrogate [k], kl [k], cost [k] or None): None exactly when no cost check."""
    if not isinstance(out, tuple) or len(out) != 3:
        raise ValueError(f"{fn}: evaluate(thetas) must return (surrogate, kl, cost), got {type(out).__name__}")
    surrogate, kl, cost = out
    for name, t in (("surrogate", surrogate), ("kl", kl), *((("cost", cost),) if with_cost else ())):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != (k,):
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{fn}: evaluate(thetas [{k}, n]) returned {name} of shape {got}, expected ({k},)")
    return surrogate, kl, cost if with_cost else None


def validate_p3o(ratio: torch.Tensor, adv_r: torch.Tensor, adv_c: torch.Tensor, cost_violation, kappa: float,
                 clip_ratio: float) -> None:
    fn = "p3o_loss"
    require_vector(fn, "ratio", ratio)
    if ratio.shape[0] == 0:
        raise ValueError(f"{fn}: argument 'ratio' is empty (shape {tuple(ratio.shape)}), expected at least one sample")
    require_vector(fn, "adv_r", adv_r, ratio.shape[0])
    require_vector(fn, "adv_c", adv_c, ratio.shape[0])
    require_scalar(fn, "cost_violation", cost_violation)
    require_range(fn, "kappa", kappa, 0.0, math.inf, hi_open=True)
    require_range(fn, "clip_ratio", clip_ratio, 0.0, 1.0, lo_open=True, hi_open=True)


def validate_p3o_violation(cost_return, cost_limit, cost_gamma) -> None:
    fn = "p3o_cost_violation"
    for name, value in (("cost_return", cost_return), ("cost_limit", cost_limit)):
        require_range(fn, name, value, -math.inf, math.inf, lo_open=True, hi_open=True)
    require_range(fn, "cost_gamma", cost_gamma, 0.0, 1.0, hi_open=True)


# --------------------------------------------------------------------------------------------------
# Flat parameters of a module (what TRPO/CPO step on)
# --------------------------------------------------------------------------------------------------
class FlatParams:
    """The trainable parameters of ``module`` (``named_parameters`` order, ``requires_grad`` only) as one
    flat vector [n], and back: ``get``, ``set``, and ``call(theta, *args)`` = the module's forward with
    ``theta`` in place of its parameters (``torch.func.functional_call``; differentiable in theta)."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.names = [name for name, p in module.named_parameters() if p.requires_grad]
        if not self.names:
            raise ValueError(f"FlatParams: module {type(module).__name__} has no trainable parameters")
        params = dict(module.named_parameters())
        self.shapes = [params[name].shape for name in self.names]
        self.sizes = [params[name].numel() for name in self.names]
        self.numel = sum(self.sizes)

    def _params(self) -> list[torch.nn.Parameter]:
        params = dict(self.module.named_parameters())
        return [params[name] for name in self.names]

    def get(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self._params()])  # [n], a copy

    def set(self, theta: torch.Tensor) -> None:
        require_vector("FlatParams.set", "theta", theta, self.numel)
        with torch.no_grad():
            for p, chunk in zip(self._params(), theta.split(self.sizes)):
                p.copy_(chunk.view_as(p))

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        require_vector("FlatParams.unflatten", "theta", theta, self.numel)
        return {name: chunk.view(shape) for name, chunk, shape in zip(self.names, theta.split(self.sizes), self.shapes)}

    def call(self, theta: torch.Tensor, *args, **kwargs):
        return torch.func.functional_call(self.module, self.unflatten(theta), args, kwargs)


def flat_grad(value: torch.Tensor, theta: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
    """∇_theta value [n] (zeros where value does not depend on theta)."""
    (grad,) = torch.autograd.grad(value, theta, create_graph=create_graph, allow_unused=True)
    return torch.zeros_like(theta) if grad is None else grad


def policy_mean_kl(dist_fn: Callable[[torch.Tensor], torch.distributions.Distribution],
                   params: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """kl_fn(θ) = mean of KL(π_params ‖ π_θ) over every element ``kl_divergence`` returns (OmniSafe's
    reduction: for a Normal of batch shape [N, A] that is the mean over N·A, not Σ_A then mean over N).
    π_params is evaluated once, without gradient: the old policy the Fisher is taken at."""
    with torch.no_grad():
        old = dist_fn(params.detach())
    return lambda theta: torch.distributions.kl_divergence(old, dist_fn(theta)).mean()
