"""success_set benchmarks: the vectorized fast twin vs the float64 row-by-row reference, one run,
float32 inputs, at sizes of a Meta-World bonus phase (39-d observations, ACTION_DIM = 4, N_BINS = 16). No
target is set by the issue.

* ``success_set.loss_a+grad[N=256, A=4, B=16]`` — Loss A and its gradient over a bonus batch of window steps
  (the reference loops over rows and dimensions: ~3 s a call at this size).
* ``success_set.top_k[Q=16, M=512, E=39]`` — cross-cluster Top-K of 16 failures against a 512-success pool.
* ``success_set.divergence_step[T=500, O=39]`` — t_d along a 500-step episode pair.
* ``success_set.mine_pair[M=128, T=150]`` — one failure mined against 128 successes (Top-4, w = 8).
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.contracts.success_set import Episode, SuccessSetConfig
from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch"]
A, B, OBS = 4, 16, 39


def _module(impl: str):
    return importlib.import_module(IMPLEMENTATIONS["success_set"][impl])


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loss_and_grad(ss, logits, fail_actions, pos_mask, weight):
    z = logits.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(ss.loss_a(z, fail_actions, pos_mask, weight, tau=0.5).loss, z)
    return grad


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_loss_a(check_and_time, device, impl):
    g, n = _gen(), 256
    args = (torch.randn(n, A, B, generator=g).to(device), torch.randint(0, B, (n, A), generator=g).to(device),
            (torch.rand(n, A, B, generator=g) < 0.2).to(device), torch.rand(n, generator=g).to(device))
    check_and_time("success_set.loss_a+grad[N=256, A=4, B=16]", lambda: _loss_and_grad(_module(impl), *args),
                   _loss_and_grad(_module("fast-torch"), *args))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_top_k(check_and_time, device, impl):
    g = _gen(1)
    query, pool = torch.randn(16, OBS, generator=g).to(device), torch.randn(512, OBS, generator=g).to(device)
    clusters = torch.randint(0, 8, (512,), generator=g).to(device)
    run = lambda ss: ss.top_k_successes(query, pool, 4, clusters).similarity  # noqa: E731
    check_and_time("success_set.top_k[Q=16, M=512, E=39]", lambda: run(_module(impl)), run(_module("fast-torch")))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_divergence(check_and_time, device, impl):
    g = _gen(2)
    fail = torch.randn(500, OBS, generator=g).to(device) + 3
    succ = fail + 0.02 * torch.arange(500, device=device)[:, None] * torch.randn(500, OBS, generator=g).to(device)
    run = lambda ss: torch.tensor(ss.divergence_step(fail, succ, 0.9))  # noqa: E731
    check_and_time("success_set.divergence_step[T=500, O=39]", lambda: run(_module(impl)), run(_module("fast-torch")))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_mine_pair(check_and_time, device, impl):
    g = _gen(3)
    base = torch.randn(150, OBS, generator=g) + 2

    def episode(i: int, cluster: int) -> Episode:
        states = base + 0.1 * (i % 7) * torch.randn(150, OBS, generator=g)
        return Episode(i, states.to(device), torch.randint(0, B, (150, A), generator=g).to(device), cluster)

    fail = episode(10**6, -1)
    pool = [episode(i, i % 8) for i in range(128)]
    cfg = SuccessSetConfig(top_k=4, window=8)
    run = lambda ss: ss.mine_pair(fail, pool, cfg).succ_actions.float()  # noqa: E731
    check_and_time("success_set.mine_pair[M=128, T=150]", lambda: run(_module(impl)), run(_module("fast-torch")))
