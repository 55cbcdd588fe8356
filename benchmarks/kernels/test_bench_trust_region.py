"""trust_region benchmarks: fast twin vs float64-accumulating reference, one run, float32, at a
SafetyPointGoal1-like size: observation 60, one 64-unit tanh layer, 2 actions (n = 4036 parameters; OmniSafe
uses two 64-unit layers), N = 4000 samples (OmniSafe's epoch is 20000 steps). No target is set by the issue.

* ``trust_region.fvp×15`` — 15 Fisher-vector products (one conjugate-gradient solve's worth): the fast twin
  keeps ∇KL's graph and runs one backward per product; the reference redoes forward + double backward.
* ``trust_region.cpo_update`` — a whole CPO actor update: both gradients, two 15-iteration solves, q, the
  case/dual, the 20-candidate line search. The reference stops at the first accepted candidate, the fast
  twin scores all 20 in one batched call (no host sync): on a CPU that is extra work, on a GPU one launch
  instead of a synchronization per candidate.
* ``trust_region.line_search[K=20, N=4000]`` — the search alone, on a step whose first four candidates break
  the trust region (the fifth is accepted): the reference's early exit (5 evaluations) against the fast
  twin's one batched call scoring all 20.
* ``trust_region.p3o_loss[65536]``.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.contracts.trust_region import CG_DAMPING, CPO_LINE_SEARCH_STEPS, MAX_KL, flat_grad
from rlspec.registry import IMPLEMENTATIONS
from rlspec.spec.trust_region import tiny_policy, tiny_policy_sizes

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch"]
OBS, HIDDEN, ACT, N = 60, 64, 2, 4000


def _module(impl: str):
    return importlib.import_module(IMPLEMENTATIONS["trust_region"][impl])


class Batch:
    def __init__(self, device: str):
        g = torch.Generator().manual_seed(0)
        n = sum(torch.Size(s).numel() for s in tiny_policy_sizes("gaussian", OBS, HIDDEN, ACT))
        self.theta = (0.1 * torch.randn(n, generator=g)).to(device)
        self.obs = torch.randn(N, OBS, generator=g).to(device)
        with torch.no_grad():
            self.old = self.policy(self.theta)
            self.act = self.old.sample()
            self.logp = self.old.log_prob(self.act).sum(-1)
        self.adv_r, self.adv_c = torch.randn(N, generator=g).to(device), torch.randn(N, generator=g).to(device)

    def policy(self, theta):
        return tiny_policy("gaussian", theta, self.obs, HIDDEN, ACT)

    def surrogate(self, theta, adv):  # [(K,)]
        return (torch.exp(self.policy(theta).log_prob(self.act).sum(-1) - self.logp) * adv).mean(-1)

    def kl(self, theta):
        return torch.distributions.kl_divergence(self.old, self.policy(theta)).mean((-2, -1))

    def evaluate(self, thetas):
        with torch.no_grad():
            return self.surrogate(thetas, self.adv_r), self.kl(thetas), self.surrogate(thetas, self.adv_c)


def _fvp_products(tr, batch: Batch, v: torch.Tensor) -> torch.Tensor:
    fvp = tr.fisher_vector_product(batch.kl, batch.theta, CG_DAMPING)
    for _ in range(15):
        out = fvp(v)
    return out


def _cpo_update(tr, batch: Batch, c: float) -> torch.Tensor:
    fvp = tr.fisher_vector_product(batch.kl, batch.theta, CG_DAMPING)
    th = batch.theta.clone().requires_grad_(True)
    g, b = flat_grad(batch.surrogate(th, batch.adv_r), th), flat_grad(batch.surrogate(th, batch.adv_c), th)
    x, p = tr.conjugate_gradient(fvp, g, 15).x, tr.conjugate_gradient(fvp, b, 15).x
    step = tr.cpo_step(g, b, x, p, x @ fvp(x), c, MAX_KL)
    out = tr.line_search(batch.theta, step.step, batch.evaluate, max_kl=MAX_KL,
                         surrogate_before=batch.surrogate(batch.theta, batch.adv_r),
                         cost_before=batch.surrogate(batch.theta, batch.adv_c), cost_violation=c,
                         require_improvement=False, max_steps=CPO_LINE_SEARCH_STEPS)
    return out.params


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_fvp_products(check_and_time, device, impl):
    batch = Batch(device)
    v = torch.ones_like(batch.theta)
    check_and_time("trust_region.fvp×15[n=4036, N=4000]", lambda: _fvp_products(_module(impl), batch, v),
                   _fvp_products(_module("fast-torch"), batch, v))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_cpo_update(check_and_time, device, impl):
    batch = Batch(device)
    check_and_time("trust_region.cpo_update[n=4036, N=4000]", lambda: _cpo_update(_module(impl), batch, 0.05),
                   _cpo_update(_module("fast-torch"), batch, 0.05))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_line_search(check_and_time, device, impl):
    batch = Batch(device)
    step = 0.05 * torch.randn(batch.theta.shape, generator=torch.Generator().manual_seed(1)).to(device)
    search = dict(max_kl=MAX_KL, surrogate_before=batch.surrogate(batch.theta, batch.adv_r),
                  cost_before=batch.surrogate(batch.theta, batch.adv_c), cost_violation=-1.0,
                  require_improvement=False, max_steps=CPO_LINE_SEARCH_STEPS)  # accepts candidate 5 (KL before)
    run = lambda tr: tr.line_search(batch.theta, step, batch.evaluate, **search).params  # noqa: E731
    check_and_time("trust_region.line_search[K=20, N=4000]", lambda: run(_module(impl)), run(_module("fast-torch")))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_p3o_loss(check_and_time, device, impl):
    g = torch.Generator().manual_seed(0)
    ratio = torch.exp(0.2 * torch.randn(65536, generator=g)).to(device)
    adv_r, adv_c = torch.randn(65536, generator=g).to(device), torch.randn(65536, generator=g).to(device)
    fn = _module(impl).p3o_loss
    check_and_time("trust_region.p3o_loss[65536]", lambda: fn(ratio, adv_r, adv_c, -0.1).loss,
                   _module("fast-torch").p3o_loss(ratio, adv_r, adv_c, -0.1).loss)
