"""The compiled Triton ``log_prob`` (fast/twohot_triton.py) on CUDA against the float64 reference,
with the TWOHOT-12 tolerance (spec/twohot.py ``_log_prob_tol``). The CPU gate covers the same kernel
under the interpreter; this checks the code the GPU actually runs."""

from __future__ import annotations

import pytest
import torch
from cuda_util import copy_bandwidth, cuda_seconds, write_report

from rlspec.contracts.twohot import support
from rlspec.fast import twohot as fast_twohot
from rlspec.fast import twohot_triton
from rlspec.reference import twohot as reference
from rlspec.spec.core import assert_close
from rlspec.spec.twohot import _log_prob_tol

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="CUDA is not available: the compiled Triton kernel needs a GPU"),
]


def _case(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [64, 256, 255] (scale 5) and x [64, 256]: interior points, exact bins, beyond both ends."""
    g = torch.Generator().manual_seed(0)
    logits = 5 * torch.randn(64, 256, 255, generator=g, dtype=torch.float64)
    y = torch.empty(64, 256, dtype=torch.float64).uniform_(-24.0, 24.0, generator=g)  # symlog space
    y[::4] = support(255, -20.0, 20.0, dtype)[torch.randint(0, 255, y[::4].shape, generator=g)].double()
    return logits.to(dtype), reference.symexp(y).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_log_prob_matches_reference_on_cuda(dtype):
    assert twohot_triton.BACKEND_NOTE == "cuda", "TRITON_INTERPRET is set: unset it to test the compiled kernel"
    logits, x = _case(dtype)
    got = twohot_triton.log_prob(logits.cuda(), x.cuda())
    assert got.is_cuda and got.dtype == dtype and got.shape == x.shape
    want = reference.log_prob(logits.double(), x.double(), support_dtype=dtype)
    assert_close("TWOHOT-12", f"log_prob on CUDA ({dtype})", got.cpu(), want, atol=_log_prob_tol(logits, 255, -20.0, 20.0))


def test_log_prob_throughput_vs_copy_bandwidth():
    """log_prob throughput as a fraction of the measured device-to-device copy bandwidth.
    A report, not a timed assertion: written to bench-results/twohot_gpu.json."""
    logits = torch.randn(64, 4096, 255, device="cuda")  # [T, B, bins], 267 MB
    x = torch.randn(64, 4096, device="cuda") * 100
    copy_bw = copy_bandwidth(logits.numel() * 4) / 1e9  # GB/s: read + write
    report = {"device": torch.cuda.get_device_name(), "copy_GBps": copy_bw}
    moved = (logits.numel() + 2 * x.numel()) * 4  # logits and x read, out written
    for name, fn in (("fast-triton", twohot_triton.log_prob), ("fast-torch", fast_twohot.log_prob)):
        ms = cuda_seconds(lambda: fn(logits, x)) * 1e3
        report[name] = {"ms": ms, "GBps": moved / ms / 1e6, "fraction_of_copy": moved / ms / 1e6 / copy_bw}
    print(write_report("twohot_gpu", report).read_text())
    assert 0 < report["fast-triton"]["fraction_of_copy"], report
