"""Reference ``risk_target`` (spec/risk_target.py): float64 loops that read like the definition, O(L·H)."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.risk_target import validate_risk_target
from rlspec.contracts.validate import scalar_args


@scalar_args("gamma", "horizon")
def risk_target(cost: torch.Tensor, done: torch.Tensor, gamma: float, horizon: int) -> torch.Tensor:
    """g_t = Σ_{k<m_t} γ^k·c_{t+k}: at most H steps, through the episode's last step, within the buffer
    (PPOLagSem design §5.2, §29.2.1)."""
    flags = validate_risk_target("risk_target", cost, done, gamma, horizon)
    L, n = cost.shape[0], math.prod(cost.shape[1:])
    c = cost.detach().double().reshape(L, n).tolist()  # [L][n]; a target: no gradient (RISK-13)
    d = flags.reshape(L, n).tolist()  # [L][n]
    g = [[0.0] * n for _ in range(L)]  # [L][n]
    for b in range(n):
        for t in range(L):
            total, discount = 0.0, 1.0
            for s in range(t, min(t + horizon, L)):  # the horizon cap and the end of the buffer
                total += discount * c[s][b]
                if d[s][b]:  # s is the last step of its episode: nothing after it
                    break
                discount *= gamma
            g[t][b] = total
    return torch.tensor(g, dtype=torch.float64, device=cost.device).reshape(cost.shape).to(cost.dtype)
