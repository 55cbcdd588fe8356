"""Reference ``gae`` (spec/gae.py): float64 Python loops that read like the formula."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.gae import validate_gae
from rlspec.contracts.validate import scalar_args


@scalar_args("gamma", "lam")
def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
        next_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A_t = δ_t + γλ·carry_t·A_{t+1}, δ_t = r_t + γ·next_t − v_t; returns A + V (PPO review CRITICAL-2)."""
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    T, n = value.shape[0], math.prod(value.shape[1:])
    r, v, boot = (x.double().reshape(T, n).tolist() for x in (reward, value, next_value))  # [T][n]
    term, trunc = term.reshape(T, n).tolist(), trunc.reshape(T, n).tolist()  # [T][n]
    A = [[0.0] * n for _ in range(T)]  # [T][n]
    for b in range(n):
        A_next = 0.0
        for t in reversed(range(T)):
            if term[t][b]:  # true terminal: nothing is bootstrapped
                nxt, carry = 0.0, 0.0
            elif trunc[t][b] or t == T - 1:  # time limit or rollout cut: V(s'_t), no A from beyond
                nxt, carry = boot[t][b], 0.0
            else:
                nxt, carry = v[t + 1][b], 1.0
            delta = r[t][b] + gamma * nxt - v[t][b]
            coef = gamma * lam * carry
            A[t][b] = delta + coef * A_next if coef else delta  # a cut keeps even an inf A_next out
            A_next = A[t][b]
    adv = torch.tensor(A, dtype=torch.float64, device=value.device).reshape(value.shape)
    returns = adv + value.double()
    return adv.to(value.dtype), returns.to(value.dtype)
