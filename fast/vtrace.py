"""Fast ``vtrace`` (spec/vtrace.py): vectorized torch in the input dtype, on any device, no autograd.

The clipped ratios, TD errors δ [T, B] and trace factors γ_t·c_t [T, B] are computed for all rows at once
(``vtrace_coefficients``, shared with fast/vtrace_triton.py); the remaining recursion
(vs − V)_t = δ_t + γ_t·c_t·(vs − V)_{t+1} is one fused multiply-add per step, a Python loop over time only
(never over the batch) with no host synchronization.
At a cut (coefficient 0) the step selects instead of multiplying (fast/recursion.py): an inf after the
cut never becomes 0·inf = NaN before it.
"""

from __future__ import annotations

import torch

from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.validate import scalar_args
from rlspec.contracts.vtrace import validate_vtrace
from rlspec.fast.recursion import carry_step


def following(rows: torch.Tensor, bootstrap_value: torch.Tensor, trunc: torch.Tensor | None = None,
              next_value: torch.Tensor | None = None) -> torch.Tensor:
    """x_{t+1} [T, B] of rows x [T, B]: bootstrap_value [B] after the last row, next_value where a truncation
    ends the window inside the batch (spec/vtrace.py "Truncation")."""
    nxt = torch.cat([rows[1:], bootstrap_value.unsqueeze(0)])  # [T, B]
    return nxt if trunc is None else torch.where(trunc, next_value, nxt)


def vtrace_coefficients(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
                        bootstrap_value: torch.Tensor, rho_bar: float, c_bar: float, lam: float,
                        trunc: torch.Tensor | None = None,
                        next_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ratio, δ, γ_t·c_t) [T, B] each, with δ_t = min(ρ̄, ρ_t)·(r_t + γ_t·V_{t+1} − V_t) and
    c_t = λ·min(c̄, ρ_t) (IMPALA eq. 1), V_{t+1} = next_value_t and no trace at a truncated step, from validated
    inputs. No host sync."""
    ratio = torch.exp(log_rho)  # [T, B]
    next_v = following(value, bootstrap_value, trunc, next_value)  # [T, B]: V_{t+1}
    delta = ratio.clamp(max=rho_bar) * (reward + discount * next_v - value)  # [T, B]
    trace = discount * (lam * ratio.clamp(max=c_bar))  # [T, B]
    return ratio, delta, trace if trunc is None else torch.where(trunc, torch.zeros_like(trace), trace)


def pg_advantage(ratio: torch.Tensor, vs: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor,
                 value: torch.Tensor, bootstrap_value: torch.Tensor, pg_rho_bar: float,
                 trunc: torch.Tensor | None = None, next_value: torch.Tensor | None = None) -> torch.Tensor:
    """min(ρ̄_pg, ρ_t)·(r_t + γ_t·vs_{t+1} − V_t) [T, B], vs_T = V_T, vs_{t+1} = next_value_t at a truncated
    step (IMPALA §4.2)."""
    next_vs = following(vs, bootstrap_value, trunc, next_value)  # [T, B]
    return ratio.clamp(max=pg_rho_bar) * (carry_step(reward, discount, next_vs) - value)


@scalar_args("rho_bar", "c_bar", "lam", "pg_rho_bar")
@torch.no_grad()  # targets: no gradient flows through vs or the pg advantage (VTRACE-5)
def vtrace(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
           bootstrap_value: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0, lam: float = 1.0,
           pg_rho_bar: float | None = None, truncated: torch.Tensor | None = None,
           next_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar,
                                 lam, pg_rho_bar)
    trunc = validate_truncation("vtrace", truncated, next_value, value, "value")
    ratio, delta, trace = vtrace_coefficients(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam,
                                              trunc, next_value)
    diff = torch.empty_like(value)  # [T, B]: vs − V
    acc = value.new_zeros(value.shape[1:])  # [B]: vs_T − V_T = 0
    for t in reversed(range(value.shape[0])):
        acc = carry_step(delta[t], trace[t], acc)
        diff[t] = acc
    vs = value + diff  # [T, B]
    return vs, pg_advantage(ratio, vs, discount, reward, value, bootstrap_value, pg_rho_bar, trunc, next_value)
