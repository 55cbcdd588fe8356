"""The step of the backward recursions in the returns family (gae, lambda_return, vtrace, risk_target), and
the whole recursion at once on CPU (fast/recursion_scan.cpp, built by fast/cpu_kernel.py)."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from rlspec.fast import cpu_kernel

SCAN_SOURCE = Path(__file__).with_name("recursion_scan.cpp")
MIN_ELEMENTS_PER_THREAD = 1 << 18  # below this a std::thread costs more than it saves


def carry_step(base: torch.Tensor, coef: torch.Tensor, carried: torch.Tensor) -> torch.Tensor:
    """base + coef·carried, and exactly ``base`` where coef == 0: a cut (terminal, reset, episode end) keeps
    everything after it out, also an inf that overflowed there (0·inf would be NaN)."""
    return torch.where(coef == 0, base, torch.addcmul(base, coef, carried))


@functools.cache
def scan_library() -> ctypes.CDLL:
    return cpu_kernel.build(SCAN_SOURCE, ("scan",))


@functools.cache
def _scan_usable() -> bool:
    return cpu_kernel.available(scan_library, "carry_step in a loop over time")


def scan_runs_here(base: torch.Tensor) -> bool:
    """Whether ``scan`` takes ``base``: a CPU float32/float64 tensor outside a graph, with a built kernel."""
    return (base.device.type == "cpu" and base.dtype in cpu_kernel.SUFFIX
            and not (torch.is_grad_enabled() and base.requires_grad) and _scan_usable())


def scan(base: torch.Tensor, carry: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """R_0..R_T [T+1, ...] of R_T = last, R_t = carry_step(base_t, carry_t, R_{t+1}) for base, carry [T, ...]
    and last [...] where ``scan_runs_here(base)``; one C++ pass, no graph."""
    T, batch = base.shape[0], base.shape[1:]
    B = batch.numel()
    out = base.new_empty((T + 1, *batch))
    base, carry, last = (t.contiguous() for t in (base, carry, last))
    getattr(scan_library(), f"scan_{cpu_kernel.SUFFIX[out.dtype]}")(
        cpu_kernel.ptr(base), cpu_kernel.ptr(carry), cpu_kernel.ptr(last), cpu_kernel.ptr(out), ctypes.c_int64(T),
        ctypes.c_int64(B), cpu_kernel.threads(T * B, MIN_ELEMENTS_PER_THREAD))
    return out
