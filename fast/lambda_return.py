"""Fast ``lambda_return`` (spec/lambda_return.py): vectorized torch in the input dtype, on any device.

Everything that does not depend on R_{t+1} is computed for all T rows at once; the remaining recursion
R_t = base_t + (γλ·c_t)·R_{t+1} is one fused multiply-add per step, a Python loop over time only (never
over the batch) with no host synchronization. For long T a parallel (Triton) scan over the affine maps
R ↦ base_t + a_t·R is future work.
"""

from __future__ import annotations

import torch

from rlspec.spec.lambda_return import validate_lambda_return


def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None) -> torch.Tensor:
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    discount = gamma * cont  # [T, B]
    if first is not None:
        discount = torch.where(first[1:], torch.zeros_like(discount), discount)  # reset after t: a cut
    base = reward + discount * (1 - lam) * value[1:]  # [T, B]
    carry = discount * lam  # [T, B]
    out = torch.empty_like(reward)  # [T, B]
    next_R = value[-1]  # [B]: R_T = v_T
    for t in reversed(range(reward.shape[0])):
        next_R = torch.addcmul(base[t], carry[t], next_R)
        out[t] = next_R  # a copy, not out=: autograd can differentiate through it
    return out
