"""TorchRL 0.14.1's functional advantage estimators behind contracts ``gae`` and ``vtrace``.

``torchrl.objectives.value.functional`` takes batch-major tensors ``[*B, T, 1]`` (time at dim −2), a
scalar ``gamma`` and boolean ``done`` / ``terminated`` flags, with ``next_state_value`` = V(s'_t) per step.

gae (``generalized_advantage_estimate``; spec/gae.py)
    done = terminated | truncated, terminated = terminated; next_state_value_t = next_value_t where the
    contract reads it (a truncated step, the last row) and V(s_{t+1}) = value_{t+1} elsewhere (TorchRL
    multiplies it by 0 on terminated steps). TorchRL's done stops the recursion and terminated the
    bootstrap, exactly the contract's carry_t and next_t; a step flagged both is terminal.
vtrace (``vtrace_advantage_estimate``; spec/vtrace.py)
    TorchRL takes one scalar γ and flags where the contract takes a per-step discount γ_t: a discount
    holding only 0 and one γ > 0 maps to gamma = γ, done = terminated = (discount == 0); any other
    discount is unsupported. TorchRL has no λ (λ = 1 only) and clips the policy-gradient ratio at ρ̄
    (pg_rho_bar = ρ̄ only). next_state_value = cat(value[1:], bootstrap_value); it returns
    (advantage, vs), the contract (vs, pg_advantage). A truncation is TorchRL's own encoding: done = True,
    terminated = False and next_state_value_t = next_value_t there.

Flags that are bool, or hold only 0 and 1, become bool (TorchRL's encoding); any other flag tensor is
passed as it is, for TorchRL to deal with.
"""

from __future__ import annotations

import torch
from torchrl.objectives.value.functional import generalized_advantage_estimate, vtrace_advantage_estimate

from rlspec.thirdparty import Declared, LITERAL_CUT, Unsupported

LIBRARY = "torchrl 0.14.1"
CONTRACTS = ("gae", "vtrace")


def _flags(t: torch.Tensor) -> torch.Tensor:
    """Bool flags in TorchRL's encoding where the contract's 0/1 encoding applies; anything else as given."""
    if t.dtype == torch.bool or not bool(((t == 0) | (t == 1)).all()):
        return t
    return t != 0


def _batch_major(t: torch.Tensor) -> torch.Tensor:
    """[T, *B] -> [*B, T, 1] (TorchRL's time_dim = -2 with one feature)."""
    return t.movedim(0, -1).unsqueeze(-1)


def _time_major(t: torch.Tensor) -> torch.Tensor:
    """[*B, T, 1] -> [T, *B]."""
    return t.squeeze(-1).movedim(-1, 0)


def gae(reward, value, terminated, truncated, next_value, gamma, lam):
    terminated, truncated = _flags(terminated), _flags(truncated)
    read = truncated.clone() if truncated.dtype == torch.bool else truncated != 0  # [T, B]
    if read.shape[0]:
        read[-1] = True
    following = torch.cat([value[1:], next_value[-1:]])  # V(s_{t+1}) [T, B]
    next_state_value = torch.where(read, next_value, following)
    adv, target = generalized_advantage_estimate(
        gamma, lam, _batch_major(value), _batch_major(next_state_value), _batch_major(reward),
        _batch_major(terminated | truncated), _batch_major(terminated))
    return _time_major(adv), _time_major(target)


def vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
           pg_rho_bar=None, truncated=None, next_value=None):
    if lam != 1.0:
        raise Unsupported(f"TorchRL's vtrace has no λ (λ = 1 only), got lam={lam!r}")
    if pg_rho_bar is not None and pg_rho_bar != rho_bar:
        raise Unsupported(f"TorchRL clips the pg ratio at ρ̄ (rho_thresh): pg_rho_bar={pg_rho_bar!r} != "
                          f"rho_bar={rho_bar!r}")
    gammas = discount.detach()[discount.detach() != 0].unique()
    if gammas.numel() > 1:
        raise Unsupported(f"TorchRL takes one scalar gamma: the discount holds {gammas.numel()} distinct "
                          "non-zero values")
    gamma = float(gammas[0]) if gammas.numel() else 0.99  # all steps terminal: γ is never read
    end = discount == 0  # [T, B]
    next_state_value = torch.cat([value[1:], bootstrap_value.unsqueeze(0)])[: value.shape[0]]  # [T, B]
    done = end
    if truncated is not None:
        done = end | (_flags(truncated) != 0)
        next_state_value = torch.where(done & ~end, next_value, next_state_value)
    zero_log_mu = torch.zeros_like(log_rho)
    adv, vs = vtrace_advantage_estimate(
        gamma, _batch_major(log_rho), _batch_major(zero_log_mu), _batch_major(value),
        _batch_major(next_state_value), _batch_major(reward), _batch_major(done), _batch_major(end),
        rho_thresh=rho_bar, c_thresh=c_bar)
    return _time_major(vs), _time_major(adv)


FLOAT32_DISCOUNTS = ("float64 inputs get float32 discounts: functional.py multiplies the Python float gamma (and "
                     "lmbda*gamma) by an int tensor ((~done).int()), which torch makes float32; build the "
                     "discounts in the value's dtype")
NO_VALIDATION = "no input validation"
DECLARED = {
    "GAE-13": Declared("difference", f"generalized_advantage_estimate {LITERAL_CUT}"),
    "VTRACE-16": Declared("difference", f"vtrace_advantage_estimate {LITERAL_CUT}"),
    "GAE-1": Declared("bug", FLOAT32_DISCOUNTS + " (advantages off by ~1e-8 relative in float64)"),
    "GAE-3": Declared("bug", FLOAT32_DISCOUNTS + " (the bootstrap moves A by float32(γ)·Δ, not γ·Δ)"),
    "GAE-12": Declared("bug", FLOAT32_DISCOUNTS + " (so a 0-d float64 tensor gamma gives float64 discounts and "
                                                  "other bits than the Python float)"),
    "GAE-9": Declared("accepts", "shape mismatches raise RuntimeError('All input tensors ... must share a unique "
                                 "shape') without naming the argument; a dtype mismatch is promoted silently"),
    "GAE-10": Declared("accepts", f"{NO_VALIDATION}: gamma and lmbda outside [0, 1] are used as given"),
    "GAE-11": Declared("accepts", f"{NO_VALIDATION}: NaN/Inf rewards and values propagate into the advantages"),
    "VTRACE-1": Declared("bug", FLOAT32_DISCOUNTS + " (vtrace_advantage_estimate: gamma * not_done)"),
    "VTRACE-2": Declared("bug", FLOAT32_DISCOUNTS + " (vtrace_advantage_estimate: gamma * not_terminated)"),
    "VTRACE-17": Declared("bug", FLOAT32_DISCOUNTS + " (vs and pg with truncated steps, in float64)"),
    "VTRACE-22": Declared("accepts", f"{NO_VALIDATION}: done and next_state_value are used as given, so a "
                                     "next_value without truncated flags (or a NaN one) passes"),
    "VTRACE-5": Declared("difference", "the functional keeps the autograd graph; TorchRL's VTrace estimator class "
                                       "runs it without grad (differentiable=False by default)"),
    "VTRACE-8": Declared("bug", "T = 0 raises IndexError: vtrace_advantage_estimate seeds its recursion with "
                                "next_state_value[..., -1, :]; return empty tensors for an empty time axis"),
    "VTRACE-9": Declared("accepts", "shape mismatches raise RuntimeError (broadcasting or 'must share a unique "
                                    "shape') without naming the argument; a dtype mismatch is promoted silently"),
    "VTRACE-10": Declared("accepts", f"{NO_VALIDATION}: rho_thresh / c_thresh <= 0 are used as given"),
    "VTRACE-15": Declared("accepts", f"{NO_VALIDATION}: an unclipped log-ratio of 800 overflows exp to inf and "
                                     "propagates"),
    "VTRACE-11": Declared("accepts", f"{NO_VALIDATION}: NaN/Inf rewards, values and log-ratios propagate"),
}
