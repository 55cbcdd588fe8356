"""Triton ``gae`` (spec/gae.py): δ and γλ·carry from fast/gae.py ``gae_coefficients`` (torch, all rows at
once), then A_t = δ_t + γλ·carry_t·A_{t+1} and returns = A + V in one Triton scan kernel
(fast/returns_triton.py). Without CUDA the kernel runs under the Triton interpreter on CPU tensors."""

from __future__ import annotations

import torch

from rlspec.contracts.gae import validate_gae
from rlspec.contracts.validate import scalar_args
from rlspec.fast.gae import gae_coefficients
from rlspec.fast.returns_triton import backward_scan
from rlspec.fast.triton_mode import BACKEND_NOTE, DEVICE

__all__ = ["BACKEND_NOTE", "DEVICE", "gae"]


@scalar_args("gamma", "lam")
def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
        next_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    delta, carry = gae_coefficients(reward, value, term, trunc, next_value, gamma, lam)  # [T, B] each
    return backward_scan(delta, carry, value.new_zeros(value.shape[1:]), offset=value)  # A_T = 0
