"""Fused LayerNorm over channels + SiLU (the conv stages of the world model, reference/world_model.py
``channel_norm`` then ``F.silu``) for channels-last activations on CPU: one C++ kernel per direction
(fast/channel_norm_silu.cpp: formulas there), one read and one write of the activation each way instead of the
eager composition's two passes and two fresh allocations each way. On a 2-core Xeon at the DreamerV3-XS conv
stack these four eager passes cost ~0.7 s of a ~4 s train step, mostly memory traffic and the page faults of
fresh 100 MB buffers.

    channel_norm_silu(norm, x)   x [N, C, h, w] -> silu(LN_C(x)) [N, C, h, w], norm = nn.LayerNorm(C)

The kernel runs for CPU float32/float64 tensors; anything else (CUDA, bf16 under autocast) takes the eager
composition, which is the reference's formula; so does a machine where the kernel cannot be built (no C++
compiler), with one warning saying why (the tests call ``library()`` directly, so there it is an error).
The library is compiled on first use and loaded with ctypes by fast/cpu_kernel.py (its flags: without
-fno-trapping-math the σ loops stay scalar on AVX2 and the kernel loses to the eager composition there:
benchmarks/kernels/results/channel_norm_vectorization.md). float32 results agree with the eager composition to rounding
(tests/engines/dreamer/test_channel_norm.py).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from rlspec.fast import cpu_kernel
from rlspec.fast.cpu_kernel import ptr
from rlspec.reference.world_model import norm_silu as eager  # the composition the kernel fuses

SOURCE = Path(__file__).with_name("channel_norm_silu.cpp")
KERNEL_DTYPES = cpu_kernel.SUFFIX
MIN_ROWS_PER_THREAD = 4096  # below this a std::thread costs more than it saves

__all__ = ["channel_norm_silu", "eager", "library"]


@functools.cache
def library(flags: tuple[str, ...] = cpu_kernel.FLAGS) -> ctypes.CDLL:
    """The compiled kernel (fast/cpu_kernel.py); ``flags`` other than its FLAGS only for comparing builds
    (benchmarks/dreamer/phase_profile.py)."""
    return cpu_kernel.build(SOURCE, ("cn_silu_forward", "cn_silu_backward"), flags)


@functools.cache
def _usable() -> bool:
    """Whether the kernel is built and loaded; warns once (with the build error) when it cannot be."""
    return cpu_kernel.available(library, "the eager composition")


def _threads(rows: int) -> ctypes.c_int:
    return cpu_kernel.threads(rows, MIN_ROWS_PER_THREAD)


class _ChannelNormSiLU(torch.autograd.Function):
    """x [R, C] rows (contiguous), w, b [C] -> y [R, C]; saves x, mean, rstd (not the normalized x)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
        R, C = x.shape
        y, mean, rstd = torch.empty_like(x), x.new_empty(R), x.new_empty(R)
        getattr(library(), f"cn_silu_forward_{KERNEL_DTYPES[x.dtype]}")(
            ptr(x), ptr(w), ptr(b), ptr(y), ptr(mean), ptr(rstd), ctypes.c_int64(R), ctypes.c_int64(C),
            ctypes.c_double(eps), _threads(R))
        ctx.save_for_backward(x, w, b, mean, rstd)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g: torch.Tensor):
        x, w, b, mean, rstd = ctx.saved_tensors
        R, C = x.shape
        g = g.contiguous()
        threads = _threads(R)
        dx = torch.empty_like(x)
        dw, db = (torch.zeros(threads.value, C, dtype=torch.float64) for _ in range(2))  # per-thread partials
        getattr(library(), f"cn_silu_backward_{KERNEL_DTYPES[x.dtype]}")(
            ptr(g), ptr(x), ptr(w), ptr(b), ptr(mean), ptr(rstd), ptr(dx), ptr(dw), ptr(db),
            ctypes.c_int64(R), ctypes.c_int64(C), threads)
        return dx, dw.sum(0).to(w.dtype), db.sum(0).to(b.dtype), None


def channel_norm_silu(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """silu(LN_C(x)) for x [N, C, h, w]: the fused kernel for a channels-last CPU float32/float64 x whose
    LayerNorm parameters share its dtype (and a built kernel), the eager composition otherwise. Output
    channels-last like x."""
    fused = (x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and norm.weight is not None
             and norm.weight.dtype == norm.bias.dtype == x.dtype and x.is_contiguous(memory_format=torch.channels_last)
             and _usable())
    if not fused:
        return eager(norm, x)
    N, C, h, w = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(-1, C)  # [N·h·w, C]: a view of the channels-last storage
    y = _ChannelNormSiLU.apply(rows, norm.weight, norm.bias, norm.eps)
    return y.reshape(N, h, w, C).permute(0, 3, 1, 2)  # [N, C, h, w] channels-last
