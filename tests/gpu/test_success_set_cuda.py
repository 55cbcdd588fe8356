"""success_set's fast twin on CUDA tensors agrees with the float64 CPU reference (Loss A and its gradient,
cross-cluster Top-K, divergence step, a mined pack). Unverified on the development machine (no GPU)."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.success_set import Episode, SuccessSetConfig
from rlspec.fast import success_set as fast
from rlspec.reference import success_set as ref

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]


def _loss_and_grad(ss, z, a, mask, w):
    z = z.clone().requires_grad_(True)
    out = ss.loss_a(z, a, mask, w, tau=0.5, margin=0.1)
    (grad,) = torch.autograd.grad(out.loss, z)
    return out.loss.detach().cpu(), grad.cpu()


def test_loss_a_on_cuda_matches_reference():
    g = torch.Generator().manual_seed(0)
    z, a = torch.randn(512, 4, 16, generator=g), torch.randint(0, 16, (512, 4), generator=g)
    mask, w = torch.rand(512, 4, 16, generator=g) < 0.2, torch.rand(512, generator=g)
    want = _loss_and_grad(ref, z, a, mask, w)
    got = _loss_and_grad(fast, z.cuda(), a.cuda(), mask.cuda(), w.cuda())
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_mining_on_cuda_matches_reference():
    g = torch.Generator().manual_seed(1)
    query, pool = torch.randn(8, 39, generator=g, dtype=torch.float64), torch.randn(300, 39, generator=g,
                                                                                     dtype=torch.float64)
    clusters = torch.randint(0, 6, (300,), generator=g)
    got = fast.top_k_successes(query.cuda(), pool.cuda(), 5, clusters.cuda())
    want = ref.top_k_successes(query, pool, 5, clusters)
    assert torch.equal(got.indices.cpu(), want.indices)
    base = torch.randn(40, 39, generator=g, dtype=torch.float64) + 2
    eps = [Episode(i, (base + 0.1 * i * torch.randn(40, 39, generator=g, dtype=torch.float64)),
                   torch.randint(0, 16, (40, 4), generator=g), i % 3) for i in range(12)]
    fail = Episode(99, base + 0.5 * torch.randn(40, 39, generator=g, dtype=torch.float64),
                   torch.randint(0, 16, (40, 4), generator=g))
    cuda = lambda ep: ep._replace(states=ep.states.cuda(), actions=ep.actions.cuda())  # noqa: E731
    cfg = SuccessSetConfig(top_k=4, window=5)
    got, want = fast.mine_pair(cuda(fail), [cuda(e) for e in eps], cfg), ref.mine_pair(fail, eps, cfg)
    assert (got.succ_ep_ids, got.divergence_t, got.window_start, got.window_end) == \
        (want.succ_ep_ids, want.divergence_t, want.window_start, want.window_end)
    assert torch.equal(got.succ_actions.cpu(), want.succ_actions)
