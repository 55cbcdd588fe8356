"""Reference ``lambda_return`` (spec/lambda_return.py): float64 Python loops that read like the formula."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.validate import scalar_args


@scalar_args("gamma", "lam")
def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None) -> torch.Tensor:
    """R_t = r_t + γ·c_t·(1 − f_{t+1})·((1 − λ)·v_{t+1} + λ·R_{t+1}),  R_T = v_T   (seed 004 M5, §2.3)."""
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    T, n = reward.shape[0], math.prod(reward.shape[1:])
    r = reward.double().reshape(T, n).tolist()  # [T][n]
    c = cont.double().reshape(T, n).tolist()  # [T][n]
    v = value.double().reshape(T + 1, n).tolist()  # [T+1][n]
    f = [[False] * n] * (T + 1) if first is None else first.reshape(T + 1, n).tolist()  # [T+1][n]
    R = [[0.0] * n for _ in range(T)]  # [T][n]
    for b in range(n):
        R_next = v[T][b]  # R_T: bootstrap from the last value
        for t in reversed(range(T)):
            discount = 0.0 if f[t + 1][b] else gamma * c[t][b]  # a reset after t cuts like a terminal
            R[t][b] = r[t][b] + discount * ((1 - lam) * v[t + 1][b] + lam * R_next) if discount else r[t][b]
            R_next = R[t][b]
    return torch.tensor(R, dtype=torch.float64, device=reward.device).reshape(reward.shape).to(reward.dtype)
