"""Fast ``gae`` (spec/gae.py): vectorized torch in the input dtype, on any device.

The TD errors δ [T, B] and the carry factors γλ·carry [T, B] are computed for all rows at once
(``gae_coefficients``, shared with the Triton backend fast/gae_triton.py); the remaining recursion
A_t = δ_t + (γλ·carry_t)·A_{t+1} is one fused multiply-add per step, a Python loop over time only (never
over the batch) with no host synchronization. fast/gae_triton.py runs the same recursion as one Triton
scan kernel (fast/returns_triton.py).
At a cut (coefficient 0) the step selects instead of multiplying (fast/recursion.py): an inf after the
cut never becomes 0·inf = NaN before it.
"""

from __future__ import annotations

import torch

from rlspec.contracts.gae import validate_gae
from rlspec.contracts.validate import scalar_args
from rlspec.fast.recursion import carry_step


def gae_coefficients(reward: torch.Tensor, value: torch.Tensor, term: torch.Tensor, trunc: torch.Tensor,
                     next_value: torch.Tensor, gamma: float,
                     lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(δ [T, B], γλ·carry [T, B]) of A_t = δ_t + γλ·carry_t·A_{t+1} (spec/gae.py "Formula"), from inputs
    already validated (``term``, ``trunc``: the bool flags ``validate_gae`` returns). No host sync."""
    T = value.shape[0]
    cut = trunc.clone()  # [T, B]: bootstrap from V(s'_t) and carry nothing
    cut[T - 1:] = True  # the rollout cut (an empty slice when T = 0)
    cut &= ~term
    nxt = torch.cat([value[1:], next_value[T - 1:]])  # [T, B]: v_{t+1}, b_{T-1} on the last row
    nxt = torch.where(cut, next_value, torch.where(term, torch.zeros_like(value), nxt))
    delta = reward + gamma * nxt - value  # [T, B]
    carry = torch.where(cut | term, torch.zeros_like(value), torch.full_like(value, gamma * lam))  # [T, B]
    return delta, carry


@scalar_args("gamma", "lam")
def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
        next_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    delta, carry = gae_coefficients(reward, value, term, trunc, next_value, gamma, lam)  # [T, B] each
    adv = torch.empty_like(value)  # [T, B]
    next_adv = value.new_zeros(value.shape[1:])  # [B]
    for t in reversed(range(value.shape[0])):
        next_adv = carry_step(delta[t], carry[t], next_adv)
        adv[t] = next_adv  # a copy, not out=: autograd can differentiate through it
    return adv, adv + value
