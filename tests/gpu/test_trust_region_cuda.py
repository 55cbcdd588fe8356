"""On CUDA, the fast ``trust_region`` twin agrees with the float64 reference and never synchronizes with the
host: a whole CPO actor update (FVP, two conjugate-gradient solves, the step, the line search) and a P3O
loss run under ``torch.cuda.set_sync_debug_mode("error")`` after one warm-up update. The CPU gate covers
the same calls with spec.core.no_host_sync (tests/unit/test_trust_region_runtime.py).

Written without a GPU at hand: unverified until ``nox -s gpu_gate`` runs on a CUDA machine."""

from __future__ import annotations

import pytest
import torch

from cuda_util import sync_is_an_error

from rlspec.contracts.trust_region import CG_DAMPING, CPO_LINE_SEARCH_STEPS, MAX_KL, flat_grad
from rlspec.fast import trust_region as fast
from rlspec.reference import trust_region as ref
from rlspec.spec.trust_region import tiny_policy, tiny_policy_sizes

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]

OBS, HIDDEN, ACT, N = 8, 16, 2, 512


def _problem(device: str, dtype: torch.dtype):
    g = torch.Generator().manual_seed(0)
    n = sum(torch.Size(s).numel() for s in tiny_policy_sizes("gaussian", OBS, HIDDEN, ACT))
    theta = 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    obs = torch.randn(N, OBS, generator=g, dtype=torch.float64)
    dist = tiny_policy("gaussian", theta, obs, HIDDEN, ACT)
    act = dist.mean + dist.stddev * torch.randn(N, ACT, generator=g, dtype=torch.float64)
    logp = dist.log_prob(act).sum(-1)
    adv_r, adv_c = torch.randn(N, generator=g, dtype=torch.float64), torch.randn(N, generator=g, dtype=torch.float64)
    to = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
    return tuple(map(to, (theta, obs, act, logp, adv_r, adv_c)))


def _cpo_update(tr, theta, obs, act, logp, adv_r, adv_c, c):
    def policy(th):
        return tiny_policy("gaussian", th, obs, HIDDEN, ACT)  # distributions built with validation off below

    def surrogate(th, adv):
        return (torch.exp(policy(th).log_prob(act).sum(-1) - logp) * adv).mean(-1)

    with torch.no_grad():
        old = policy(theta)
    fvp = tr.fisher_vector_product(lambda th: torch.distributions.kl_divergence(old, policy(th)).mean(), theta,
                                   CG_DAMPING)
    th = theta.clone().requires_grad_(True)
    g, b = flat_grad(surrogate(th, adv_r), th), flat_grad(surrogate(th, adv_c), th)
    x, p = tr.conjugate_gradient(fvp, g, 15).x, tr.conjugate_gradient(fvp, b, 15).x
    step = tr.cpo_step(g, b, x, p, x @ fvp(x), c, MAX_KL)

    def evaluate(thetas):
        with torch.no_grad():
            kl = torch.distributions.kl_divergence(old, policy(thetas)).mean((-2, -1))
            return surrogate(thetas, adv_r), kl, surrogate(thetas, adv_c)

    out = tr.line_search(theta, step.step, evaluate, max_kl=MAX_KL, surrogate_before=surrogate(theta, adv_r),
                         cost_before=surrogate(theta, adv_c), cost_violation=c, require_improvement=False,
                         max_steps=CPO_LINE_SEARCH_STEPS)
    return step, out


@pytest.fixture(autouse=True)
def _no_distribution_validation():
    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)  # its checks read tensors on the host
    yield
    torch.distributions.Distribution.set_default_validate_args(previous)


@pytest.mark.parametrize("c", [-1.0, -0.01, 0.01, 1.0])
def test_cpo_update_matches_reference_on_cuda(c):
    want_step, want = _cpo_update(ref, *_problem("cpu", torch.float64), c)
    got_step, got = _cpo_update(fast, *_problem("cuda", torch.float64), torch.tensor(c, device="cuda"))
    assert int(got_step.case) == int(want_step.case)
    torch.testing.assert_close(got_step.step.cpu(), want_step.step, rtol=1e-6, atol=1e-8)  # CG amplifies rounding
    assert int(got.accepted_step) == int(want.accepted_step)
    torch.testing.assert_close(got.params.cpu(), want.params, rtol=1e-6, atol=1e-8)  # CG amplifies rounding


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpo_update_does_not_sync(dtype):
    problem = _problem("cuda", dtype)
    c = torch.tensor(0.01, device="cuda", dtype=dtype)
    _cpo_update(fast, *problem, c)  # warm-up: kernels, autograd graph caches
    with sync_is_an_error():
        step, out = _cpo_update(fast, *problem, c)
    assert step.step.is_cuda and out.params.is_cuda and out.reasons.is_cuda


def test_p3o_loss_does_not_sync():
    g = torch.Generator(device="cuda").manual_seed(0)
    ratio = torch.exp(0.2 * torch.randn(65536, device="cuda", generator=g)).requires_grad_(True)
    adv_r, adv_c = torch.randn(65536, device="cuda", generator=g), torch.randn(65536, device="cuda", generator=g)
    violation = torch.tensor(-0.1, device="cuda")  # built outside: a tensor from host data is itself a sync
    fast.p3o_loss(ratio, adv_r, adv_c, violation).loss.backward()
    with sync_is_an_error():
        out = fast.p3o_loss(ratio, adv_r, adv_c, violation)
        out.loss.backward()
    assert out.loss.is_cuda and ratio.grad.is_cuda
