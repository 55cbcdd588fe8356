"""Triton ``lambda_return`` (spec/lambda_return.py): base and γλ·c coefficients from fast/lambda_return.py
``lambda_coefficients`` (torch, all rows at once), then R_t = base_t + carry_t·R_{t+1} from R_T = v_T in
one Triton scan kernel (fast/returns_triton.py). Without CUDA the kernel runs under the Triton
interpreter on CPU tensors."""

from __future__ import annotations

import torch

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.validate import scalar_args
from rlspec.fast.lambda_return import lambda_coefficients
from rlspec.fast.returns_triton import backward_scan
from rlspec.fast.triton_mode import BACKEND_NOTE, DEVICE

__all__ = ["BACKEND_NOTE", "DEVICE", "lambda_return"]


@scalar_args("gamma", "lam")
def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None, truncated: torch.Tensor | None = None,
                  next_value: torch.Tensor | None = None) -> torch.Tensor:
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    trunc = validate_truncation("lambda_return", truncated, next_value, reward, "reward")
    base, carry = lambda_coefficients(reward, cont, value, gamma, lam, first, trunc, next_value)  # [T, B] each
    return backward_scan(base, carry, value[-1])  # R_T = v_T
