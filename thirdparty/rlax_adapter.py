"""rlax 0.1.9 (jax, CPU) behind contracts ``gae``, ``vtrace`` and ``lambda_return``.

rlax functions take one sequence [T] at a time; the adapter vmaps them over the flattened batch columns of
the contract's time-major [T, *B] arrays and converts torch <-> numpy at the boundary (a 0-d tensor
hyper-parameter becomes the numpy scalar of its dtype; Python and numpy scalars pass as given). jax runs with x64
enabled (set when this module loads) so float64 inputs stay float64.

gae (``truncated_generalized_advantage_estimation(r_t, discount_t, lambda_, values)``; spec/gae.py)
    discount_t = γ·(1 − terminated)·(1 − truncated); values = cat(value, next_value[T−1]) (the bootstrap
    at the rollout cut). rlax has no time-limit flag: a truncation inside the window is converted the way
    Stable-Baselines3's collect loop does, r_t ← r_t + γ·next_value_t with discount 0 (Pardo et al. 2018),
    which is the contract's formula in real arithmetic.
vtrace (``vtrace_td_error_and_advantage``; spec/vtrace.py)
    v_tm1 = value, v_t = cat(value[1:], bootstrap_value), rho_tm1 = exp(log_rho), lambda_ = lam,
    clip_rho_threshold = ρ̄, clip_pg_rho_threshold = ρ̄_pg (ρ̄ when None; rlax's own default is 1);
    vs = errors + value. rlax fixes c̄ = 1: a c_bar that clips differently for the given ratios is
    unsupported. rlax's pg_advantage bootstraps λ·vs_{t+1} + (1 − λ)·V_{t+1} (a documented difference).
lambda_return (``lambda_returns(r_t, discount_t, v_t, lambda_)``; spec/lambda_return.py)
    discount_t = γ·cont·(1 − is_first[1:]) (an episode start cuts like a terminal), v_t = value[1:].
truncated / next_value (vtrace and lambda_return): rlax has no truncation input either; the adapter folds a
    truncation as for gae, r_t ← r_t + γ_t·next_value_t and discount_t ← 0 where truncated and not terminal.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import rlax
import torch

from rlspec.thirdparty import Declared, LITERAL_CUT, Unsupported

jax.config.update("jax_enable_x64", True)

LIBRARY = "rlax 0.1.9 (jax 0.10.2, CPU)"
CONTRACTS = ("gae", "vtrace", "lambda_return")


# jit-compiled once per shape and dtype; λ and the thresholds are traced arguments (no recompilation)
@jax.jit
def _gae(r_t, discount_t, values, lam):  # [T, N], [T, N], [T+1, N] -> [T, N]
    return jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(1, 1, None, 1), out_axes=1)(
        r_t, discount_t, lam, values)


@jax.jit
def _vtrace(v_tm1, v_t, r_t, discount_t, rho_tm1, lam, rho_bar, pg_rho_bar):  # [T, N] each -> 3 × [T, N]
    def column(*cols):
        return rlax.vtrace_td_error_and_advantage(*cols, lambda_=lam, clip_rho_threshold=rho_bar,
                                                  clip_pg_rho_threshold=pg_rho_bar)
    return jax.vmap(column, in_axes=1, out_axes=1)(v_tm1, v_t, r_t, discount_t, rho_tm1)


@jax.jit
def _lambda_returns(r_t, discount_t, v_t, lam):  # [T, N] each -> [T, N]
    return jax.vmap(lambda r, d, v: rlax.lambda_returns(r, d, v, lambda_=lam), in_axes=1, out_axes=1)(
        r_t, discount_t, v_t)


def _numpy(x):
    """A torch tensor as numpy (a 0-d one as the numpy scalar of its dtype); anything else as given."""
    return x.detach().cpu().numpy()[()] if isinstance(x, torch.Tensor) else x


def _columns(fn, tensors, *scalars):
    """``fn`` over time-major [T(+1), *B] tensors flattened to [T(+1), N] numpy arrays; torch [T, *B] back."""
    batch = tensors[0].shape[1:]
    flat = [_numpy(t.reshape(t.shape[0], math.prod(t.shape[1:]))) for t in tensors]
    out = fn(*flat, *(_numpy(x) for x in scalars))
    back = lambda x: torch.from_numpy(np.array(x)).reshape(x.shape[0], *batch)  # noqa: E731
    return tuple(back(x) for x in out) if isinstance(out, tuple) else back(out)


def gae(reward, value, terminated, truncated, next_value, gamma, lam):
    term, trunc = terminated.to(value.dtype), truncated.to(value.dtype)
    time_limit = (trunc * (1 - term)) != 0  # truncated and not terminated [T, B]
    r_t = torch.where(time_limit, reward + gamma * next_value, reward)  # SB3's timeout bootstrap
    discount_t = gamma * (1 - term) * (1 - trunc)
    values = torch.cat([value, next_value[-1:]])  # [T+1, B]; T = 0: V(s_0) only, unread
    if value.shape[0] == 0:
        values = torch.zeros(1, *value.shape[1:], dtype=value.dtype)
    adv = _columns(_gae, (r_t, discount_t, values), lam)
    return adv, adv + value.detach()


def _fold_truncation(reward, discount, truncated, next_value):
    """(reward, discount) [T, B] with each truncation that is not terminal folded SB3's way: r_t + γ_t·b_t, then 0."""
    if truncated is None:
        return reward, discount
    time_limit = (truncated != 0) & (discount != 0)
    return (torch.where(time_limit, reward + discount * next_value, reward),
            torch.where(time_limit, torch.zeros_like(discount), discount))


def vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
           pg_rho_bar=None, truncated=None, next_value=None):
    reward, discount = _fold_truncation(reward, discount, truncated, next_value)
    rho = torch.exp(log_rho)
    if c_bar != 1.0 and bool((rho.detach() > min(1.0, c_bar)).any()):
        raise Unsupported(f"rlax fixes c̄ = 1: c_bar={c_bar!r} clips some of these ratios differently")
    v_t = torch.cat([value[1:], bootstrap_value.unsqueeze(0)])[: value.shape[0]]  # V_{t+1} [T, B]
    errors, pg_advantage, _ = _columns(_vtrace, (value, v_t, reward, discount, rho), lam, rho_bar,
                                       rho_bar if pg_rho_bar is None else pg_rho_bar)
    return errors + value.detach(), pg_advantage


def lambda_return(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    discount_t = gamma * cont
    if is_first is not None:
        discount_t = discount_t * (1 - is_first[1:].to(cont.dtype))
    if truncated is not None:  # a truncation bootstraps whatever is_first says
        discount_t = torch.where(truncated != 0, gamma * cont, discount_t)
    reward, discount_t = _fold_truncation(reward, discount_t, truncated, next_value)
    return _columns(_lambda_returns, (reward, discount_t, value[1:]), lam)


NO_VALIDATION = "no input validation (chex checks ranks and float types only)"
SHAPES = ("a shape mismatch fails inside the conversion or jax.vmap ('inconsistent sizes for array axes') "
          "without naming the argument; a dtype mismatch is promoted silently")
PG_BOOTSTRAP = ("rlax's pg_advantage bootstraps λ·vs_{t+1} + (1−λ)·V_{t+1} where IMPALA §4.2 takes vs_{t+1} "
                "(equal for λ = 1); spec.vtrace.rlax_pg_advantage converts")
NUMPY_SCALARS = ("jax types numpy scalars strongly and Python scalars weakly: under jax_enable_x64 a np.float64 "
                 "hyper-parameter makes float32 inputs compute and return float64")
DECLARED = {
    "GAE-13": Declared("difference", f"truncated_generalized_advantage_estimation {LITERAL_CUT}"),
    "VTRACE-16": Declared("difference", f"vtrace_td_error_and_advantage {LITERAL_CUT}"),
    "LAMBDA-13": Declared("difference", f"lambda_returns {LITERAL_CUT}"),
    "LAMBDA-14": Declared("difference", f"lambda_returns {LITERAL_CUT}"),
    "VTRACE-15": Declared("accepts", f"{NO_VALIDATION}: with an infinite clip threshold an overflowing "
                                      "e^log_rho is used as given (inf/NaN targets)"),
    "GAE-9": Declared("accepts", SHAPES),
    "GAE-10": Declared("accepts", f"{NO_VALIDATION}: gamma and lambda_ outside [0, 1] are used as given"),
    "GAE-11": Declared("accepts", f"{NO_VALIDATION}: NaN/Inf rewards and values propagate into the advantages"),
    "GAE-12": Declared("difference", NUMPY_SCALARS),
    "VTRACE-12": Declared("difference", NUMPY_SCALARS),
    "LAMBDA-12": Declared("bug", "lambda_returns crashes (lax.scan: carry input and output types differ) when "
                                 "lambda_ is a np.float64 and the arrays float32 under jax_enable_x64: the scan's "
                                 "carry starts as v_t[-1]; cast lambda_ to discount_t.dtype"),
    "VTRACE-2": Declared("difference", PG_BOOTSTRAP),
    "VTRACE-3": Declared("difference", PG_BOOTSTRAP + " (the on-policy pg_advantage with λ < 1)"),
    "VTRACE-17": Declared("difference", PG_BOOTSTRAP + " (the pg_advantage before a truncation with λ < 1)"),
    "VTRACE-22": Declared("accepts", f"{NO_VALIDATION}: rlax has no truncation input; the adapter's fold passes a "
                                     "lone or NaN next_value as given"),
    "LAMBDA-20": Declared("accepts", f"{NO_VALIDATION}: rlax has no truncation input; the adapter's fold passes a "
                                     "lone or NaN next_value as given"),
    "VTRACE-9": Declared("accepts", SHAPES),
    "VTRACE-10": Declared("accepts", f"{NO_VALIDATION}: clip thresholds <= 0 and λ outside [0, 1] are used as given"),
    "VTRACE-11": Declared("accepts", f"{NO_VALIDATION}: NaN/Inf values and discounts outside [0, 1] propagate"),
    "LAMBDA-8": Declared("bug", "T = 0 raises IndexError: lambda_returns seeds its scan with v_t[-1]; return an "
                                "empty array for an empty sequence"),
    "LAMBDA-9": Declared("accepts", SHAPES),
    "LAMBDA-10": Declared("accepts", f"{NO_VALIDATION}: γ and lambda_ outside [0, 1] are used as given"),
    "LAMBDA-11": Declared("accepts", f"{NO_VALIDATION}: NaN/Inf values and continues outside [0, 1] propagate"),
}
