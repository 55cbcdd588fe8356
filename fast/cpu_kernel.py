"""Builds and loads the fast twins' C++ CPU kernels (fast/*.cpp with fast/cpu_kernels.h; plain C ABIs called
through ctypes, no torch headers, ~1 s to build each).

A kernel is compiled on first use with the system C++ compiler ($CXX, default c++) with FLAGS into
$RLSPEC_CACHE (default ~/.cache/rlspec)/kernels/, keyed by its source, the shared header, the flags, the
compiler and the CPU (the flags line of /proc/cpuinfo: one library per instruction set in a shared cache).
FLAGS: `-O3 -march=native -fopenmp-simd -fno-trapping-math`, no -ffast-math (values keep IEEE semantics;
-fno-trapping-math only lets GCC if-convert selects on AVX2, benchmarks/kernels/results/channel_norm_vectorization.md).

Each user (fast/channel_norm.py, fast/twohot.py, fast/recursion.py) caches its library and, where it cannot
be built (no compiler, an unwritable cache), falls back to torch with one warning (``available``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch

HERE = Path(__file__).parent
HEADER = HERE / "cpu_kernels.h"
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-trapping-math", "-std=c++17", "-shared", "-fPIC", "-pthread")
SUFFIX = {torch.float32: "f32", torch.float64: "f64"}  # the dtypes every kernel exports, one symbol each


def _cpu_id() -> str:
    flags = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")] \
        if Path("/proc/cpuinfo").exists() else []
    return platform.machine() + (flags[0] if flags else platform.processor())


def build(source: Path, functions: tuple[str, ...], flags: tuple[str, ...] = FLAGS) -> ctypes.CDLL:
    """fast/SOURCE compiled (once per source × header × flags × compiler × CPU, then from the cache) and
    loaded, each of ``functions`` exported once per SUFFIX (``name_f32``, ``name_f64``) and returning void;
    RuntimeError naming the cause (compiler, build error, cache) where it cannot be."""
    cxx = os.environ.get("CXX", "c++")
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"fast.{source.stem}: the C++ compiler {cxx!r} ($CXX) is not usable ({e}); the kernel "
                           f"needs one (Debian: apt-get install g++)") from e
    text = [source.read_text(), HEADER.read_text(), *flags, version, _cpu_id()]
    key = hashlib.sha256("\0".join(text).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("RLSPEC_CACHE", Path.home() / ".cache" / "rlspec")) / "kernels"
    target = cache / f"{source.stem}-{key}.so"
    try:
        if not target.exists():
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as tmp:  # build aside, then one atomic rename
                built = Path(tmp) / target.name
                run = subprocess.run([cxx, *flags, f"-I{HERE}", str(source), "-o", str(built)], capture_output=True,
                                     text=True, check=False)
                if run.returncode:
                    raise RuntimeError(f"fast.{source.stem}: building {source.name} with {cxx} failed:\n{run.stderr}")
                os.replace(built, target)
        lib = ctypes.CDLL(str(target))
    except OSError as e:  # an unwritable cache ($RLSPEC_CACHE), a library that does not load
        raise RuntimeError(f"fast.{source.stem}: cannot build or load {target} ({e}); set $RLSPEC_CACHE to a "
                           f"writable directory") from e
    for name in functions:
        for suffix in SUFFIX.values():
            getattr(lib, f"{name}_{suffix}").restype = None
    return lib


def available(load, what: str) -> bool:
    """Whether ``load()`` builds and loads; warns (once per caller: callers cache this) with the build error
    and ``what`` runs instead when it cannot."""
    try:
        load()
    except RuntimeError as e:
        warnings.warn(f"the C++ kernel is unavailable, using {what}: {e}", RuntimeWarning, stacklevel=3)
        return False
    return True


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def threads(elements: int, per_thread: int) -> ctypes.c_int:
    """torch's thread count, at most one thread per ``per_thread`` elements of work (a std::thread costs
    tens of µs)."""
    return ctypes.c_int(max(1, min(torch.get_num_threads(), elements // per_thread)))
