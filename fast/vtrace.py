"""Fast ``vtrace`` (spec/vtrace.py): vectorized torch in the input dtype, on any device, no autograd.

The clipped ratios, TD errors δ [T, B] and trace factors γ_t·c_t [T, B] are computed for all rows at once;
the remaining recursion (vs − V)_t = δ_t + γ_t·c_t·(vs − V)_{t+1} is one fused multiply-add per step, a
Python loop over time only (never over the batch) with no host synchronization.
"""

from __future__ import annotations

import torch

from rlspec.spec.vtrace import validate_vtrace


@torch.no_grad()  # targets: no gradient flows through vs or the pg advantage (VTRACE-5)
def vtrace(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
           bootstrap_value: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0, lam: float = 1.0,
           pg_rho_bar: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar,
                                 lam, pg_rho_bar)
    ratio = torch.exp(log_rho)  # [T, B]
    next_v = torch.cat([value[1:], bootstrap_value.unsqueeze(0)])  # [T, B]: V_{t+1}
    delta = ratio.clamp(max=rho_bar) * (reward + discount * next_v - value)  # [T, B]
    trace = discount * (lam * ratio.clamp(max=c_bar))  # [T, B]: γ_t·c_t
    diff = torch.empty_like(value)  # [T, B]: vs − V
    acc = value.new_zeros(value.shape[1:])  # [B]: vs_T − V_T = 0
    for t in reversed(range(value.shape[0])):
        acc = torch.addcmul(delta[t], trace[t], acc)
        diff[t] = acc
    vs = value + diff  # [T, B]
    next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])  # [T, B]: vs_{t+1}, vs_T = V_T
    pg = ratio.clamp(max=pg_rho_bar) * (reward + discount * next_vs - value)  # [T, B]
    return vs, pg
