"""Reference ``lambda_return`` (spec/lambda_return.py): float64 Python loops that read like the formula."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.validate import scalar_args


@scalar_args("gamma", "lam")
def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None, truncated: torch.Tensor | None = None,
                  next_value: torch.Tensor | None = None) -> torch.Tensor:
    """R_t = r_t + γ·c_t·(1 − f_{t+1})·((1 − λ)·v_{t+1} + λ·R_{t+1}),  R_T = v_T   (Dreamer plan M5, §2.3);
    at a truncated step R_t = r_t + γ·c_t·b_t (spec/lambda_return.py "Truncation")."""
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    trunc = validate_truncation("lambda_return", truncated, next_value, reward, "reward")
    T, n = reward.shape[0], math.prod(reward.shape[1:])
    r = reward.double().reshape(T, n).tolist()  # [T][n]
    c = cont.double().reshape(T, n).tolist()  # [T][n]
    v = value.double().reshape(T + 1, n).tolist()  # [T+1][n]
    f = [[False] * n] * (T + 1) if first is None else first.reshape(T + 1, n).tolist()  # [T+1][n]
    cut = [[False] * n] * T if trunc is None else trunc.reshape(T, n).tolist()  # [T][n]
    b = r if next_value is None else next_value.double().reshape(T, n).tolist()  # [T][n], read only at a cut
    R = [[0.0] * n for _ in range(T)]  # [T][n]
    for j in range(n):
        R_next = v[T][j]  # R_T: bootstrap from the last value
        for t in reversed(range(T)):
            if cut[t][j]:  # the episode was cut after t: V(s'_t), nothing from row t+1 on
                discount = gamma * c[t][j]
                R[t][j] = r[t][j] + discount * b[t][j] if discount else r[t][j]
            else:
                discount = 0.0 if f[t + 1][j] else gamma * c[t][j]  # a reset after t cuts like a terminal
                R[t][j] = r[t][j] + discount * ((1 - lam) * v[t + 1][j] + lam * R_next) if discount else r[t][j]
            R_next = R[t][j]
    return torch.tensor(R, dtype=torch.float64, device=reward.device).reshape(reward.shape).to(reward.dtype)
