"""fast lambda_return's unguarded CPU recursion (no select at a cut) against the guarded one and the reference:
equal on ordinary input, and an inf that overflows after a cut still stays out of the steps before it."""

from __future__ import annotations

import torch

from rlspec.fast import lambda_return as fast
from rlspec.reference import lambda_return as reference


def _inputs():
    gen = torch.Generator().manual_seed(1)
    return dict(reward=torch.randn(15, 64, generator=gen), cont=(torch.rand(15, 64, generator=gen) > 0.2).float(),
                value=10 * torch.randn(16, 64, generator=gen))


def test_unguarded_equals_guarded_and_reference():
    x = _inputs()
    base, carry = fast.lambda_coefficients(**x, gamma=0.99, lam=0.95, first=None)
    out = fast.lambda_return(**x, gamma=0.99, lam=0.95)
    torch.testing.assert_close(out, fast._guarded(base, carry, x["value"][-1]), rtol=0, atol=0)
    expected = reference.lambda_return(**{k: v.double() for k, v in x.items()}, gamma=0.99, lam=0.95)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-4)


def test_inf_after_a_cut_does_not_reach_before_it():
    """R_2 = 3e38, R_1 = 3e38 + R_2 = inf in float32, c_0 = 0: R_0 is r_0 (guarded), not r_0 + 0·inf = NaN."""
    reward = torch.full((3, 1), 3e38)
    cont = torch.tensor([[0.0], [1.0], [1.0]])
    value = torch.zeros(4, 1)
    out = fast.lambda_return(reward, cont, value, gamma=1.0, lam=1.0)
    assert out[0, 0].item() == torch.tensor(3e38).item()
    assert out[1, 0].item() == float("inf") and out[2, 0].item() == torch.tensor(3e38).item()


def test_autograd_takes_the_guarded_path():
    x = _inputs()
    reward = x.pop("reward").requires_grad_()
    out = fast.lambda_return(reward, **x, gamma=0.99, lam=0.95)
    out.sum().backward()
    assert reward.grad is not None and reward.grad.shape == reward.shape
    assert torch.all(reward.grad >= 1)  # each r_t reaches R_t with weight 1, and earlier R with weights >= 0
