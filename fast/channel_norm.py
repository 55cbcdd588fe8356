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
The library is compiled on first use with the system C++ compiler ($CXX, default c++: `-O3 -march=native
-fopenmp-simd -fno-trapping-math`, no -ffast-math; without -fno-trapping-math the σ loops stay scalar on AVX2
and the kernel loses to the eager composition there: docs/bench/channel_norm_vectorization.md) into
$RLSPEC_CACHE (default ~/.cache/rlspec)/kernels/, keyed by the source, the flags, the compiler and the CPU
(the flags line of /proc/cpuinfo: one library per instruction set in a shared cache), and loaded with ctypes
(no torch headers, ~1 s to build). float32 results agree with the eager composition to rounding
(tests/dreamer/test_channel_norm.py).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from rlspec.reference.world_model import norm_silu as eager  # the composition the kernel fuses

SOURCE = Path(__file__).with_name("channel_norm_silu.cpp")
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-trapping-math", "-std=c++17", "-shared", "-fPIC", "-pthread")
KERNEL_DTYPES = {torch.float32: "f32", torch.float64: "f64"}
MIN_ROWS_PER_THREAD = 4096  # below this a std::thread costs more than it saves

__all__ = ["channel_norm_silu", "eager", "library"]


def _cpu_id() -> str:
    flags = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")] \
        if Path("/proc/cpuinfo").exists() else []
    return platform.machine() + (flags[0] if flags else platform.processor())


@functools.cache
def library(flags: tuple[str, ...] = FLAGS) -> ctypes.CDLL:
    """The compiled kernel (built once per source × flags × compiler × CPU, then loaded from the cache);
    ``flags`` other than FLAGS only for comparing builds (tests/bench/dreamer_phase_profile.py)."""
    cxx = os.environ.get("CXX", "c++")
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"fast.channel_norm: the C++ compiler {cxx!r} ($CXX) is not usable ({e}); the fused "
                           f"kernel needs one (Debian: apt-get install g++)") from e
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *flags, version, _cpu_id()]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("RLSPEC_CACHE", Path.home() / ".cache" / "rlspec")) / "kernels"
    target = cache / f"channel_norm_silu-{key}.so"
    try:
        if not target.exists():
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as tmp:  # build aside, then one atomic rename
                built = Path(tmp) / target.name
                run = subprocess.run([cxx, *flags, str(SOURCE), "-o", str(built)], capture_output=True, text=True)
                if run.returncode:
                    raise RuntimeError(f"fast.channel_norm: building {SOURCE.name} with {cxx} failed:\n{run.stderr}")
                os.replace(built, target)
        lib = ctypes.CDLL(str(target))
    except OSError as e:  # an unwritable cache ($RLSPEC_CACHE), a library that does not load
        raise RuntimeError(f"fast.channel_norm: cannot build or load {target} ({e}); set $RLSPEC_CACHE to a "
                           f"writable directory") from e
    for name in KERNEL_DTYPES.values():
        getattr(lib, f"cn_silu_forward_{name}").restype = None
        getattr(lib, f"cn_silu_backward_{name}").restype = None
    return lib


@functools.cache
def _usable() -> bool:
    """Whether the kernel is built and loaded; warns once (with the build error) when it cannot be."""
    try:
        library()
    except RuntimeError as e:
        warnings.warn(f"fast.channel_norm: the fused kernel is unavailable, using the eager composition: {e}",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def _threads(rows: int) -> ctypes.c_int:
    return ctypes.c_int(max(1, min(torch.get_num_threads(), rows // MIN_ROWS_PER_THREAD)))


class _ChannelNormSiLU(torch.autograd.Function):
    """x [R, C] rows (contiguous), w, b [C] -> y [R, C]; saves x, mean, rstd (not the normalized x)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
        R, C = x.shape
        y, mean, rstd = torch.empty_like(x), x.new_empty(R), x.new_empty(R)
        getattr(library(), f"cn_silu_forward_{KERNEL_DTYPES[x.dtype]}")(
            _ptr(x), _ptr(w), _ptr(b), _ptr(y), _ptr(mean), _ptr(rstd), ctypes.c_int64(R), ctypes.c_int64(C),
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
            _ptr(g), _ptr(x), _ptr(w), _ptr(b), _ptr(mean), _ptr(rstd), _ptr(dx), _ptr(dw), _ptr(db),
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
