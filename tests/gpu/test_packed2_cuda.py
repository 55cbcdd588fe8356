"""packed2 on CUDA (spec/packed2.py; the Dreamer plan M4 micro-benchmark, M6 unpack kernel).

* The compiled Triton kernel, the Warp kernel on CUDA and the torch LUT on CUDA agree bit for bit with
  the CPU reference (PACKED2-4/5/6 on the code the GPU actually runs; the CPU gate covers the same
  kernels interpreted / on Warp's CPU device).
* Unpack bandwidth at a batch of 16384 frames [16384, 1, 72, 20], (bytes read + bytes written) / time,
  as a fraction of the device-to-device copy bandwidth measured in the same run (target 0.8).
  Written to bench-results/packed2_gpu.json; reported, never asserted.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from cuda_util import copy_bandwidth, cuda_seconds, write_report

from rlspec.contracts.packed2 import FRAME_SHAPE, levels
from rlspec.reference import packed2 as reference
from rlspec.spec.core import assert_identical

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: the packed2 kernels' "
                                                             "CUDA paths need a GPU"),
]

BACKENDS = {
    "fast-torch": "rlspec.fast.packed2",
    "fast-triton": "rlspec.fast.packed2_triton",
    "fast-warp": "rlspec.fast.packed2_warp",
}
BENCH_FRAMES = 16384
BENCH_DTYPES = (torch.uint8, torch.float32, torch.bfloat16)  # uint8: unpack; floats: unpack_normalized
TARGET_FRACTION = 0.8


def _backend(name: str):
    module = importlib.import_module(BACKENDS[name])
    if name == "fast-triton":
        assert module.BACKEND_NOTE == "cuda", "TRITON_INTERPRET is set: unset it to test the compiled kernel"
    return module


def _cases() -> list[torch.Tensor]:
    """CPU uint8 inputs: every byte value, 64 random frames, a non-contiguous view, an odd size."""
    g = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (64, *FRAME_SHAPE), generator=g, dtype=torch.uint8)  # [64, 1, 72, 20]
    odd = torch.randint(0, 256, (3, 1000003 // 3 + 1), generator=g, dtype=torch.uint8)  # not a BLOCK multiple
    return [torch.arange(256, dtype=torch.uint8), frames, frames[::2, :, ::3], odd]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_bit_identical_to_reference_on_cuda(name):
    impl = _backend(name)
    for packed in _cases():
        values = reference.unpack(packed)  # [..., W] CPU truth
        got = impl.unpack(packed.cuda())
        assert got.is_cuda
        assert_identical("PACKED2-4", f"{name} unpack on CUDA", got, values, shape=tuple(packed.shape))
        assert_identical("PACKED2-4", f"{name} pack on CUDA", impl.pack(values.cuda()),
                         reference.pack(values), shape=tuple(values.shape))
        for dtype in impl.NORMALIZED_DTYPES:
            assert_identical("PACKED2-6", f"{name} unpack_normalized({dtype}) on CUDA",
                             impl.unpack_normalized(packed.cuda(), dtype), levels(dtype)[values.long()],
                             shape=tuple(packed.shape))


def test_unpack_bandwidth_vs_device_copy():
    g = torch.Generator().manual_seed(0)
    packed = torch.randint(0, 256, (BENCH_FRAMES, *FRAME_SHAPE), generator=g, dtype=torch.uint8).cuda()
    # the copy reference moves as many bytes as the largest unpack (float32 out: 1 read + 16 written)
    copy_bytes = packed.numel() * 8
    copy_bw = copy_bandwidth(copy_bytes)  # bytes read + written per second
    lut = _backend("fast-torch")
    rows = []
    for name in BACKENDS:
        impl = _backend(name)
        for dtype in BENCH_DTYPES:
            if dtype == torch.uint8:
                fn = lambda impl=impl: impl.unpack(packed)
                check = lut.unpack(packed)
            else:
                fn = lambda impl=impl, dtype=dtype: impl.unpack_normalized(packed, dtype)
                check = lut.unpack_normalized(packed, dtype)
            assert_identical("PACKED2-6", f"{name} at {BENCH_FRAMES} frames ({dtype})", fn(), check)
            seconds = cuda_seconds(fn)
            moved = packed.numel() * (1 + 4 * dtype.itemsize)  # bytes read + written
            rows.append(dict(impl=name, op="unpack" if dtype == torch.uint8 else "unpack_normalized",
                             dtype=str(dtype).removeprefix("torch."), frames=BENCH_FRAMES,
                             median_s=seconds, bytes_moved=moved, bandwidth_gb_s=moved / seconds / 1e9,
                             fraction_of_copy=moved / seconds / copy_bw,
                             meets_target=moved / seconds / copy_bw >= TARGET_FRACTION))
    report = dict(device=torch.cuda.get_device_name(), copy_bandwidth_gb_s=copy_bw / 1e9,
                  copy_bytes=2 * copy_bytes, target_fraction=TARGET_FRACTION, results=rows)
    write_report("packed2_gpu", report)
    print(f"\ndevice-to-device copy: {copy_bw / 1e9:.1f} GB/s on {report['device']}")
    for r in rows:
        print(f"  {r['impl']:<12} {r['op']:<18} {r['dtype']:<9} {r['median_s'] * 1e3:8.3f} ms "
              f"{r['bandwidth_gb_s']:8.1f} GB/s = {r['fraction_of_copy']:.2f} of copy")
