"""Fast ``gae`` (spec/gae.py): vectorized torch in the input dtype, on any device.

The TD errors δ [T, B] and the carry factors γλ·carry [T, B] are computed for all rows at once; the
remaining recursion A_t = δ_t + (γλ·carry_t)·A_{t+1} is one fused multiply-add per step, a Python loop
over time only (never over the batch) with no host synchronization. For long T a parallel (Triton) scan
over the affine maps A ↦ δ_t + a_t·A is future work.
"""

from __future__ import annotations

import torch

from rlspec.spec.gae import validate_gae


def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
        bootstrap_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, bootstrap_value, gamma, lam)
    T = value.shape[0]
    cut = trunc.clone()  # [T, B]: bootstrap from V(s'_t) and carry nothing
    cut[T - 1:] = True  # the rollout cut (an empty slice when T = 0)
    cut &= ~term
    next_value = torch.cat([value[1:], bootstrap_value[T - 1:]])  # [T, B]: v_{t+1}, b_{T-1} on the last row
    next_value = torch.where(cut, bootstrap_value, torch.where(term, torch.zeros_like(value), next_value))
    delta = reward + gamma * next_value - value  # [T, B]
    carry = torch.where(cut | term, torch.zeros_like(value), torch.full_like(value, gamma * lam))  # [T, B]
    adv = torch.empty_like(value)  # [T, B]
    next_adv = value.new_zeros(value.shape[1:])  # [B]
    for t in reversed(range(T)):
        next_adv = torch.addcmul(delta[t], carry[t], next_adv)
        adv[t] = next_adv  # a copy, not out=: autograd can differentiate through it
    return adv, adv + value
