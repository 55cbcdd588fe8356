"""Reference ``vtrace`` (spec/vtrace.py): float64 Python loops that read like IMPALA §4.1–4.2."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import scalar_args
from rlspec.contracts.vtrace import validate_vtrace


def _exp(x: float) -> float:
    """e^x, inf where it overflows: a ratio clipped by a finite bar never needs its value (validation rejects
    an overflowing ratio that is used unclipped)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


@scalar_args("rho_bar", "c_bar", "lam", "pg_rho_bar")
def vtrace(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
           bootstrap_value: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0, lam: float = 1.0,
           pg_rho_bar: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """vs_t = V_t + δ_t + γ_t·c_t·(vs_{t+1} − V_{t+1}), pg_t = ρ^pg_t·(r_t + γ_t·vs_{t+1} − V_t)."""
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar,
                                 lam, pg_rho_bar)
    T, n = value.shape[0], math.prod(value.shape[1:])
    lr, disc, r, v = (x.detach().double().reshape(T, n).tolist() for x in (log_rho, discount, reward, value))
    boot = bootstrap_value.detach().double().reshape(n).tolist()  # [n]
    vs = [[0.0] * n for _ in range(T)]  # [T][n]
    pg = [[0.0] * n for _ in range(T)]  # [T][n]
    for b in range(n):
        next_v, next_vs = boot[b], boot[b]  # V_T and vs_T = V_T
        for t in reversed(range(T)):
            ratio = _exp(lr[t][b])
            rho, c, rho_pg = min(rho_bar, ratio), lam * min(c_bar, ratio), min(pg_rho_bar, ratio)
            delta = rho * (r[t][b] + disc[t][b] * next_v - v[t][b])
            trace = disc[t][b] * c  # 0 at an episode end: nothing after it enters, not even an inf vs
            vs[t][b] = v[t][b] + delta + (trace * (next_vs - next_v) if trace else 0.0)
            pg[t][b] = rho_pg * (r[t][b] + (disc[t][b] * next_vs if disc[t][b] else 0.0) - v[t][b])
            next_v, next_vs = v[t][b], vs[t][b]
    out = [torch.tensor(x, dtype=torch.float64, device=value.device).reshape(value.shape).to(value.dtype)
           for x in (vs, pg)]
    return out[0], out[1]
