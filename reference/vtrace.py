"""Reference ``vtrace`` (spec/vtrace.py): float64 Python loops that read like IMPALA §4.1–4.2."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.returns import validate_truncation
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
           pg_rho_bar: float | None = None, truncated: torch.Tensor | None = None,
           next_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """vs_t = V_t + δ_t + γ_t·c_t·(vs_{t+1} − V_{t+1}), pg_t = ρ^pg_t·(r_t + γ_t·vs_{t+1} − V_t); a truncated
    step ends the window: V_{t+1} and vs_{t+1} are both next_value_t there (spec/vtrace.py "Truncation")."""
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar,
                                 lam, pg_rho_bar)
    trunc = validate_truncation("vtrace", truncated, next_value, value, "value")
    T, n = value.shape[0], math.prod(value.shape[1:])
    lr, disc, r, v = (x.detach().double().reshape(T, n).tolist() for x in (log_rho, discount, reward, value))
    boot = bootstrap_value.detach().double().reshape(n).tolist()  # [n]
    cut = [[False] * n] * T if trunc is None else trunc.reshape(T, n).tolist()  # [T][n]
    b = r if next_value is None else next_value.detach().double().reshape(T, n).tolist()  # [T][n], read at a cut
    vs = [[0.0] * n for _ in range(T)]  # [T][n]
    pg = [[0.0] * n for _ in range(T)]  # [T][n]
    for j in range(n):
        next_v, next_vs = boot[j], boot[j]  # V_T and vs_T = V_T
        for t in reversed(range(T)):
            if cut[t][j]:  # the window ends after t: V(s'_t) for both, as V_T at the end of the batch
                next_v = next_vs = b[t][j]
            ratio = _exp(lr[t][j])
            rho, c, rho_pg = min(rho_bar, ratio), lam * min(c_bar, ratio), min(pg_rho_bar, ratio)
            delta = rho * (r[t][j] + disc[t][j] * next_v - v[t][j])
            trace = disc[t][j] * c  # 0 at an episode end: nothing after it enters, not even an inf vs
            vs[t][j] = v[t][j] + delta + (trace * (next_vs - next_v) if trace else 0.0)
            pg[t][j] = rho_pg * (r[t][j] + (disc[t][j] * next_vs if disc[t][j] else 0.0) - v[t][j])
            next_v, next_vs = v[t][j], vs[t][j]
    out = [torch.tensor(x, dtype=torch.float64, device=value.device).reshape(value.shape).to(value.dtype)
           for x in (vs, pg)]
    return out[0], out[1]
