"""fast lambda_return's CPU path, the whole recursion in one C++ pass (fast/recursion.py ``scan``), against
the torch loop it replaces (``carry_step`` per step) and the reference: equal on ordinary input up to one
rounding of the multiply-add, exactly ``base`` at a cut, and an inf that overflows after a cut still stays
out of the steps before it. Where the kernel cannot be built the torch loop runs, with a warning."""

from __future__ import annotations

import pytest
import torch

from rlspec.fast import lambda_return as fast
from rlspec.fast import recursion
from rlspec.reference import lambda_return as reference


def _inputs(dtype=torch.float32, batch=(64,)):
    gen = torch.Generator().manual_seed(1)
    return dict(reward=torch.randn(15, *batch, generator=gen, dtype=dtype),
                cont=(torch.rand(15, *batch, generator=gen) > 0.2).to(dtype),
                value=10 * torch.randn(16, *batch, generator=gen, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch", [(64,), (3, 5), (4096,)])
def test_scan_equals_the_torch_loop_and_the_reference(dtype, batch):
    x = _inputs(dtype, batch)
    base, carry = fast.lambda_coefficients(**x, gamma=0.99, lam=0.95, first=None)
    assert recursion.scan_runs_here(base)
    out = fast.lambda_return(**x, gamma=0.99, lam=0.95)
    loop = fast._guarded(base, carry, x["value"][-1])
    assert out.shape == loop.shape == x["reward"].shape and out.dtype == dtype
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out, loop, rtol=16 * eps, atol=16 * eps * 10)  # FMA or not: one rounding per step
    cut = carry == 0
    assert torch.equal(out[cut], base[cut])  # a cut selects base: bit for bit
    expected = reference.lambda_return(**{k: v.double() for k, v in x.items()}, gamma=0.99, lam=0.95)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-4)


def test_scan_splits_over_threads_without_changing_a_value(monkeypatch):
    base, carry = torch.randn(15, 40_000), (torch.rand(15, 40_000) > 0.1).float() * 0.9
    last = torch.randn(40_000)
    monkeypatch.setattr(recursion, "MIN_ELEMENTS_PER_THREAD", 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = recursion.scan(base, carry, last)
    finally:
        torch.set_num_threads(previous)
    monkeypatch.setattr(recursion, "MIN_ELEMENTS_PER_THREAD", 1 << 40)
    torch.testing.assert_close(recursion.scan(base, carry, last), two, rtol=0, atol=0)
    assert torch.equal(two[-1], last)


def test_inf_after_a_cut_does_not_reach_before_it():
    """R_2 = 3e38, R_1 = 3e38 + R_2 = inf in float32, c_0 = 0: R_0 is r_0 (guarded), not r_0 + 0·inf = NaN."""
    reward = torch.full((3, 1), 3e38)
    cont = torch.tensor([[0.0], [1.0], [1.0]])
    value = torch.zeros(4, 1)
    out = fast.lambda_return(reward, cont, value, gamma=1.0, lam=1.0)
    assert out[0, 0].item() == torch.tensor(3e38).item()
    assert out[1, 0].item() == float("inf") and out[2, 0].item() == torch.tensor(3e38).item()


def test_autograd_takes_the_torch_loop():
    x = _inputs()
    reward = x.pop("reward").requires_grad_()
    assert not recursion.scan_runs_here(reward)
    out = fast.lambda_return(reward, **x, gamma=0.99, lam=0.95)
    out.sum().backward()
    assert reward.grad is not None and reward.grad.shape == reward.shape
    assert torch.all(reward.grad >= 1)  # each r_t reaches R_t with weight 1, and earlier R with weights >= 0


def test_without_a_compiler_the_torch_loop_runs_and_says_so(no_cxx):
    no_cxx(recursion.scan_library, recursion._scan_usable)
    x = _inputs()
    with pytest.warns(RuntimeWarning, match=r"carry_step in a loop over time.*no-such-compiler.*\$CXX"):
        out = fast.lambda_return(**x, gamma=0.99, lam=0.95)
    base, carry = fast.lambda_coefficients(**x, gamma=0.99, lam=0.95, first=None)
    torch.testing.assert_close(out, fast._guarded(base, carry, x["value"][-1]), rtol=0, atol=0)
