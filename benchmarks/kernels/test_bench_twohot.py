"""twohot ``log_prob`` and ``mean`` on logits [64, 256, 255] float32: reference, fast, sheeprl 0.8.4.

sheeprl's ``TwoHotEncodingDistribution`` is constructed inside the timed call (its softmax and bins are
built there): that is what a caller pays for one log_prob or one mean.

``exp-bound`` (mean's group, CPU): ``torch.exp`` of the logits alone into a preallocated buffer, on the same
threads. Every exact mean evaluates e^{l - max} once per logit with torch's vectorized exp (Sleef, 1 ulp),
so this time bounds what any of them, fused or not, can save; benchmarks/kernels/ratios.py prints it beside the rest.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.fast import twohot as fast
from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

SHAPE = (64, 256)  # [T, B] of a DreamerV3 reward/critic head
IMPLS = ["reference", "fast-torch", "fast-compiled", "fast-triton", "sheeprl"]


def _inputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [*SHAPE, 255] and raw-space targets x [*SHAPE] (symexp of uniform in [-15, 15])."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(*SHAPE, 255, generator=gen)
    x = fast.symexp(torch.empty(SHAPE).uniform_(-15, 15, generator=gen))
    return logits.to(device), x.to(device)


def _twohot(impl: str):
    """(log_prob(logits, x), mean(logits)) of one implementation, both returning [*SHAPE]."""
    if impl == "sheeprl":
        dist = pytest.importorskip("sheeprl.utils.distribution").TwoHotEncodingDistribution
        return (lambda logits, x: dist(logits, dims=1).log_prob(x[..., None]),
                lambda logits: dist(logits, dims=1).mean.squeeze(-1))
    module = importlib.import_module(IMPLEMENTATIONS["twohot"][impl])
    return module.log_prob, module.mean


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_log_prob(check_and_time, device, impl):
    logits, x = _inputs(device)
    log_prob, _ = _twohot(impl)
    check_and_time("twohot.log_prob", lambda: log_prob(logits, x), fast.log_prob(logits, x))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_mean(check_and_time, device, impl):
    logits, _ = _inputs(device)
    _, mean = _twohot(impl)
    check_and_time("twohot.mean", lambda: mean(logits), fast.mean(logits))


def test_mean_exp_bound(benchmark):
    """The exp of every logit, nothing else: the floor of an exact mean on this CPU (module docstring)."""
    logits, _ = _inputs("cpu")
    out = torch.empty_like(logits)
    benchmark.group = "twohot.mean"
    benchmark.extra_info.update(op="twohot.mean", impl="exp-bound", device="cpu")
    benchmark(torch.exp, logits, out=out)
    torch.testing.assert_close(out, logits.exp())
