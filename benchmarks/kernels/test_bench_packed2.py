"""packed2 on CPU (Dreamer plan M4 "packed2 unpack micro-benchmark"): every implementation relative to the
256×4 LUT (fast-torch), on batches of replay frames [N, 1, 72, 20] uint8.

The interpreted Triton kernel and Warp's single-threaded CPU device are far slower than the LUT, so they
run on small N; the LUT runs at every N used, and each benchmark group is one (op, N) so that the
medians in a group compare equal work. Per-byte time (median / packed bytes) and the speed relative to
the LUT at the same N go to ``extra_info`` and to bench-results/packed2_cpu.json, printed at the end.
Reported, never asserted. The GPU numbers (fraction of device-copy bandwidth) are
tests/gpu/test_packed2_cuda.py's.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch

from rlspec.contracts.packed2 import FRAME_SHAPE
from rlspec.fast import packed2 as lut
from rlspec.spec.core import assert_identical

pytestmark = pytest.mark.bench

MODULES = {
    "reference": "rlspec.reference.packed2",
    "fast-torch": "rlspec.fast.packed2",
    "fast-triton": "rlspec.fast.packed2_triton",
    "fast-warp": "rlspec.fast.packed2_warp",
}
LARGE, MEDIUM, SMALL = 1024, 64, 8  # frames: LUT + reference | + Warp (CPU) | + Triton (interpreted)
CASES = [(impl, frames) for frames, impls in ((LARGE, ("reference", "fast-torch")),
                                              (MEDIUM, ("fast-torch", "fast-warp")),
                                              (SMALL, ("fast-torch", "fast-triton")))
         for impl in impls]
RESULTS = Path("bench-results/packed2_cpu.json")
_rows: list[dict] = []


def _ops(module):
    """op name -> fn(packed) (unpack family) or fn(values) (pack)."""
    return {"unpack": module.unpack,
            "unpack_normalized": lambda packed: module.unpack_normalized(packed, torch.float32),
            "pack": module.pack}


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if not _rows:
        return
    lut_ns = {(r["op"], r["frames"]): r["ns_per_byte"] for r in _rows if r["impl"] == "fast-torch"}
    for r in _rows:
        r["speed_vs_lut"] = lut_ns[r["op"], r["frames"]] / r["ns_per_byte"]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(_rows, indent=2) + "\n")
    print("\npacked2 on CPU (median per packed byte; speed relative to the LUT at the same N):")
    for r in sorted(_rows, key=lambda r: (r["op"], -r["frames"], r["impl"])):
        print(f"  {r['op']:<18} N={r['frames']:<5} {r['impl']:<12} {r['ns_per_byte']:10.2f} ns/byte  "
              f"{r['speed_vs_lut']:8.3f}x LUT")
    print(f"wrote {RESULTS}")


@pytest.mark.parametrize("op", ["unpack", "unpack_normalized", "pack"])
@pytest.mark.parametrize("impl, frames", CASES, ids=[f"{i}-N{n}" for i, n in CASES])
def test_packed2(benchmark, op, impl, frames):
    if op == "pack" and impl in ("fast-triton", "fast-warp"):
        pytest.skip("the kernel modules re-export fast/packed2.py's pack")
    g = torch.Generator().manual_seed(0)
    packed = torch.randint(0, 256, (frames, *FRAME_SHAPE), generator=g, dtype=torch.uint8)  # [N, 1, 72, 20]
    arg = lut.unpack(packed) if op == "pack" else packed  # pack takes the [N, 1, 72, 80] pixels
    fn = _ops(importlib.import_module(MODULES[impl]))[op]
    assert_identical("PACKED2-4", f"{impl} {op}", fn(arg), _ops(lut)[op](arg))  # the same work, exactly
    benchmark.group = f"packed2.{op}[N={frames}]"
    benchmark.extra_info.update(op=f"packed2.{op}[N={frames}]", impl=impl, device="cpu", frames=frames,
                                packed_bytes=packed.numel())
    benchmark(fn, arg)
    if benchmark.stats is not None:  # None under --benchmark-disable
        ns_per_byte = benchmark.stats.stats.median / packed.numel() * 1e9
        benchmark.extra_info["ns_per_byte"] = ns_per_byte
        _rows.append(dict(op=op, impl=impl, frames=frames, ns_per_byte=ns_per_byte))
