"""fast twohot ``mean``'s CPU kernel (fast/twohot_mean.cpp) against softmax · bins in float64: every row to
the rounding of float32 (or float64), NaN exactly where torch.softmax gives NaN (a NaN logit, a +inf logit,
a row of −inf), −inf logits weighing exactly nothing, rows split over threads without changing a value,
and the torch path with a warning where the kernel cannot be built."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.twohot import support
from rlspec.fast import twohot as fast

N = 255


def _expected(logits: torch.Tensor) -> torch.Tensor:
    """symexp(softmax(l) · b) in float64, torch's own ops."""
    y = torch.softmax(logits.double(), -1) @ support(N, -20.0, 20.0, torch.float64, "cpu")
    return torch.sign(y) * torch.expm1(y.abs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_matches_softmax_times_bins(dtype):
    fast.mean_library()  # built and loaded here (an error, not the torch path, if it cannot be)
    logits = 4 * torch.randn(7, 33, N, generator=torch.Generator().manual_seed(0), dtype=dtype)
    out = fast.mean(logits)
    assert out.shape == (7, 33) and out.dtype == dtype
    torch.testing.assert_close(out.double(), _expected(logits), rtol=1e-5 if dtype == torch.float32 else 1e-12,
                               atol=1e-5 if dtype == torch.float32 else 1e-12)


def test_non_finite_rows_are_nan_where_softmax_is():
    logits = torch.randn(6, N, generator=torch.Generator().manual_seed(1))
    logits[0, 3] = float("nan")
    logits[1, 9] = float("inf")
    logits[2] = -float("inf")
    logits[3, :200] = -float("inf")  # masked bins: no weight at all
    logits[4, 0] = -1e4  # underflows to exactly 0 in torch's exp
    out, expected = fast.mean(logits), _expected(logits)
    assert torch.equal(out.isnan(), expected.isnan()) and out[:3].isnan().all()
    torch.testing.assert_close(out[3:].double(), expected[3:], rtol=1e-5, atol=1e-5)
    only_tail = logits[3, 200:].unsqueeze(0)  # the same row without its masked bins: the same mean
    y = torch.softmax(only_tail.double(), -1) @ support(N, -20.0, 20.0, torch.float64, "cpu")[200:]
    torch.testing.assert_close(out[3].double(), (torch.sign(y) * torch.expm1(y.abs()))[0], rtol=1e-5, atol=1e-5)


def test_rows_split_over_threads_without_changing_a_value(monkeypatch):
    logits = torch.randn(4096, N, generator=torch.Generator().manual_seed(2))
    monkeypatch.setattr(fast, "MIN_LOGITS_PER_THREAD", 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = fast.mean(logits)
    finally:
        torch.set_num_threads(previous)
    monkeypatch.setattr(fast, "MIN_LOGITS_PER_THREAD", 1 << 40)
    torch.testing.assert_close(fast.mean(logits), two, rtol=0, atol=0)


def test_a_non_contiguous_view_reads_the_right_rows():
    base = torch.randn(N, 40, generator=torch.Generator().manual_seed(3))
    logits = base.t()[::3]  # [14, N], strided
    torch.testing.assert_close(fast.mean(logits).double(), _expected(logits), rtol=1e-5, atol=1e-5)


def test_without_a_compiler_the_torch_path_runs_and_says_so(no_cxx):
    no_cxx(fast.mean_library, fast._mean_kernel_usable)
    logits = torch.randn(5, 9, N, generator=torch.Generator().manual_seed(4))
    with pytest.warns(RuntimeWarning, match=r"softmax and a product with the bins.*no-such-compiler"):
        out = fast.mean(logits)
    torch.testing.assert_close(out.double(), _expected(logits), rtol=1e-5, atol=1e-5)
