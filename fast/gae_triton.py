"""Triton ``gae`` (spec/gae.py): δ and γλ·carry from fast/gae.py ``gae_coefficients`` (torch, all rows at
once), then A_t = δ_t + γλ·carry_t·A_{t+1} and returns = A + V in one Triton scan kernel
(fast/returns_triton.py). Without CUDA the kernel runs under the Triton interpreter on CPU tensors."""

from __future__ import annotations

import torch

from rlspec.fast.gae import gae_coefficients
from rlspec.fast.returns_triton import BACKEND_NOTE, DEVICE, backward_scan
from rlspec.spec.gae import validate_gae

__all__ = ["BACKEND_NOTE", "DEVICE", "gae"]


def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
        bootstrap_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, bootstrap_value, gamma, lam)
    delta, carry = gae_coefficients(reward, value, term, trunc, bootstrap_value, gamma, lam)  # [T, B] each
    return backward_scan(delta, carry, value.new_zeros(value.shape[1:]), offset=value)  # A_T = 0
