"""Runtime half of contract ``vtrace`` (the formula, clauses and properties: spec/vtrace.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.returns import (
    require_dtype,
    require_time_major,
    require_unit_interval,
)
from rlspec.contracts.validate import (
    require_finite,
    require_no_nan,
    require_range,
    require_shape,
)

ARGS = ("log_rho", "discount", "reward", "value", "bootstrap_value")


PARAMS = ("rho_bar", "c_bar", "lam", "pg_rho_bar")
DEFAULTS = dict(rho_bar=1.0, c_bar=1.0, lam=1.0, pg_rho_bar=None)  # documented defaults (VTRACE-14)


def validate_vtrace(fn: str, log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor,
                    value: torch.Tensor, bootstrap_value: torch.Tensor, rho_bar: float, c_bar: float,
                    lam: float, pg_rho_bar: float | None) -> float:
    """Reject bad input (see the module docstring); returns ρ̄_pg with None resolved to ρ̄."""
    require_time_major(fn, "value", value)
    for name, t in (("log_rho", log_rho), ("discount", discount), ("reward", reward)):
        require_dtype(fn, name, t, value.dtype, "value")
        require_shape(fn, name, t, value.shape, "(= value.shape [T, B])")
    require_dtype(fn, "bootstrap_value", bootstrap_value, value.dtype, "value")
    require_shape(fn, "bootstrap_value", bootstrap_value, value.shape[1:], "(= value.shape[1:]: V(x_T))")
    pg_rho_bar = rho_bar if pg_rho_bar is None else pg_rho_bar
    for name, v in (("rho_bar", rho_bar), ("c_bar", c_bar), ("pg_rho_bar", pg_rho_bar)):
        require_range(fn, name, v, 0.0, math.inf, lo_open=True)
    require_range(fn, "lam", lam, 0.0, 1.0)
    for name, t in (("reward", reward), ("value", value), ("bootstrap_value", bootstrap_value)):
        require_finite(fn, name, t)
    require_no_nan(fn, "log_rho", log_rho)
    plus_inf = log_rho == math.inf
    if bool(plus_inf.any()):
        idx = [int(i) for i in plus_inf.nonzero()[0].tolist()]
        raise ValueError(f"{fn}: argument 'log_rho' has {int(plus_inf.sum())} +inf of {log_rho.numel()} "
                         f"elements (first at index {idx}), expected < +inf (μ(a_t|x_t) > 0 for a taken "
                         "action)")
    require_unit_interval(fn, "discount", discount)
    unclipped = [n for n, v in (("rho_bar", rho_bar), ("c_bar", c_bar), ("pg_rho_bar", pg_rho_bar)) if v == math.inf]
    if unclipped and log_rho.numel():
        limit = math.log(torch.finfo(value.dtype).max)  # e^log_rho is used as is: it must be finite
        over = log_rho > limit
        if bool(over.any()):
            idx = [int(i) for i in over.nonzero()[0].tolist()]
            raise ValueError(f"{fn}: argument 'log_rho' has {int(over.sum())} values above log(max {value.dtype}) = "
                             f"{limit:.6g} (first at index {idx}: {log_rho[tuple(idx)].item()!r}): with "
                             f"{' and '.join(unclipped)} = inf the importance ratio e^log_rho overflows; clip it")
    return pg_rho_bar


def to_rlax(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
            bootstrap_value: torch.Tensor) -> dict[str, torch.Tensor]:
    """rlax's arguments (v_tm1, v_t, r_t, discount_t, rho_tm1), each [T, B]; rlax takes one column [T]
    at a time. v_t is V_{t+1}: the next row's value, V_T on the last row. A pure conversion: it validates
    nothing, so an adapter built on it shows the library's own behaviour on bad input."""
    v_t = torch.cat([value, bootstrap_value.unsqueeze(0)])[1:]  # [T, B] (also for T = 0)
    return dict(v_tm1=value, v_t=v_t, r_t=reward, discount_t=discount, rho_tm1=torch.exp(log_rho))


def rlax_pg_advantage(vs: torch.Tensor, log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor,
                      value: torch.Tensor, bootstrap_value: torch.Tensor, lam: float,
                      pg_rho_bar: float) -> torch.Tensor:
    """rlax's pg advantage from our vs [T, B]: ρ^pg_t·(r_t + γ_t·(λ·vs_{t+1} + (1 − λ)·V_{t+1}) − V_t)."""
    next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])  # [T, B], vs_T = V_T
    next_v = torch.cat([value[1:], bootstrap_value.unsqueeze(0)])  # [T, B]
    rho_pg = torch.clamp(torch.exp(log_rho), max=pg_rho_bar)
    return rho_pg * (reward + discount * (lam * next_vs + (1 - lam) * next_v) - value)
