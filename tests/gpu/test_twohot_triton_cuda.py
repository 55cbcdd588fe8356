"""The compiled Triton ``log_prob`` (fast/twohot_triton.py) on CUDA against the float64 reference,
with the TWOHOT-12 tolerance (spec/twohot.py ``_dist_tol``). The CPU gate covers the same kernel
under the interpreter; this checks the code the GPU actually runs."""

from __future__ import annotations

import pytest
import torch

from rlspec.fast import twohot_triton
from rlspec.reference import twohot as reference
from rlspec.spec.core import assert_close
from rlspec.spec.twohot import _dist_tol, support

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
    assert_close("TWOHOT-12", f"log_prob on CUDA ({dtype})", got.cpu(), want, atol=_dist_tol(logits))
