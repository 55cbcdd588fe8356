"""Triton ``vtrace`` (spec/vtrace.py): ratios, δ and γ_t·c_t from fast/vtrace.py ``vtrace_coefficients``
(torch, all rows at once), then (vs − V)_t = δ_t + γ_t·c_t·(vs − V)_{t+1} and vs = V + (vs − V) in one
Triton scan kernel (fast/returns_triton.py). Without CUDA the kernel runs under the Triton interpreter."""

from __future__ import annotations

import torch

from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.validate import scalar_args
from rlspec.contracts.vtrace import validate_vtrace
from rlspec.fast.returns_triton import backward_scan
from rlspec.fast.triton_mode import BACKEND_NOTE, DEVICE
from rlspec.fast.vtrace import pg_advantage, vtrace_coefficients

__all__ = ["BACKEND_NOTE", "DEVICE", "vtrace"]


@scalar_args("rho_bar", "c_bar", "lam", "pg_rho_bar")
@torch.no_grad()  # targets (VTRACE-5)
def vtrace(log_rho: torch.Tensor, discount: torch.Tensor, reward: torch.Tensor, value: torch.Tensor,
           bootstrap_value: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0, lam: float = 1.0,
           pg_rho_bar: float | None = None, truncated: torch.Tensor | None = None,
           next_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar,
                                 lam, pg_rho_bar)
    trunc = validate_truncation("vtrace", truncated, next_value, value, "value")
    ratio, delta, trace = vtrace_coefficients(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam,
                                              trunc, next_value)
    _, vs = backward_scan(delta, trace, value.new_zeros(value.shape[1:]), offset=value)  # vs − V, vs
    return vs, pg_advantage(ratio, vs, discount, reward, value, bootstrap_value, pg_rho_bar, trunc, next_value)
