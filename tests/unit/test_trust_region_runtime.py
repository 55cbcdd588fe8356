"""``trust_region`` at runtime: the fast twin never reads a tensor back to the host (spec.core.no_host_sync,
the CPU stand-in for the gpu_gate's sync check), and the flat-parameter helpers drive a real nn.Module
through a TRPO and a CPO update the way the safe-RL engine will."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.trust_region import (CG_DAMPING, CPO_LINE_SEARCH_STEPS, MAX_KL, FlatParams, flat_grad,
                                           policy_mean_kl)
from rlspec.fast import trust_region as fast
from rlspec.reference import trust_region as ref
from rlspec.spec.core import HostSync, no_host_sync
from rlspec.spec.trust_region import LineProblem, spd_matrix

IMPLS = pytest.mark.parametrize("tr", [ref, fast], ids=["reference", "fast-torch"])


def _inputs():
    F = spd_matrix(0, 6, 100.0)
    g = torch.randn(6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    b = torch.randn(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    problem = LineProblem(3, 6, "random", 0.3, True, -0.05, None, torch.float64)
    ratio = torch.exp(0.2 * torch.randn(32, generator=torch.Generator().manual_seed(3)))
    return F, g, b, problem, ratio


def _calls(tr, F, g, b, problem, ratio):
    """A CPO update's numerics (two solves, the step for four violations, the line search) and a P3O loss."""
    x = tr.conjugate_gradient(lambda v: F @ v, g, 10).x
    p = tr.conjugate_gradient(lambda v: F @ v, b, 10).x
    q = x @ (F @ x)
    steps = [tr.cpo_step(g, b, x, p, q, torch.tensor(c, dtype=torch.float64), MAX_KL).step
             for c in (-1.0, -0.01, 0.01, 1.0)]
    out = tr.line_search(problem.theta0, steps[1], problem.evaluate, **problem.kwargs(CPO_LINE_SEARCH_STEPS, 0.8, True))
    loss = tr.p3o_loss(ratio, torch.ones(32), -torch.ones(32), torch.tensor(-0.1)).loss
    return x, steps, out, loss


def test_fast_twin_never_syncs():
    inputs = _inputs()
    with no_host_sync():
        x, steps, out, loss = _calls(fast, *inputs)
    assert torch.isfinite(x).all() and all(torch.isfinite(s).all() for s in steps)
    assert out.params.shape == (6,) and torch.isfinite(loss)
    ref_out = _calls(ref, *inputs)[2]  # and it agrees with the reference
    assert int(out.accepted_step) == int(ref_out.accepted_step) and torch.allclose(out.params, ref_out.params)


def test_fast_fvp_never_syncs():
    actor = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    flat, obs = FlatParams(actor), torch.randn(16, 3, dtype=torch.float64)
    theta = flat.get()
    # validate_args=False: torch.distributions' argument checks read tensors on the host
    # a tensor scale: a float one would be copied from the host (torch.tensor(1.0, device=...)) at every call
    scale = torch.ones((), dtype=torch.float64)
    dist = lambda th: torch.distributions.Normal(flat.call(th, obs), scale, validate_args=False)  # noqa: E731
    with no_host_sync():
        fvp = fast.fisher_vector_product(policy_mean_kl(dist, theta), theta, CG_DAMPING)
        res = fast.conjugate_gradient(fvp, torch.ones_like(theta), 15)
    assert torch.isfinite(res.x).all()


def test_guard_trips_on_the_reference():
    inputs = _inputs()
    with pytest.raises(HostSync), no_host_sync():
        _calls(ref, *inputs)


def test_flat_params_round_trip():
    torch.manual_seed(0)
    actor = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    actor[0].bias.requires_grad_(False)  # frozen parameters are not part of θ
    flat = FlatParams(actor)
    theta = flat.get()
    assert flat.names == ["0.weight", "2.weight", "2.bias"] and theta.shape == (12 + 8 + 2,)
    obs = torch.randn(5, 3)
    assert torch.equal(flat.call(theta, obs), actor(obs))
    flat.set(theta + 1.0)
    assert torch.equal(flat.get(), theta + 1.0)
    assert torch.equal(flat.call(theta + 1.0, obs), actor(obs))
    with pytest.raises(ValueError, match="theta"):
        flat.set(torch.zeros(3))


def test_policy_mean_kl_is_zero_and_flat_at_params():
    actor = torch.nn.Linear(3, 2).double()
    flat, obs = FlatParams(actor), torch.randn(7, 3, dtype=torch.float64)
    theta = flat.get().requires_grad_(True)
    kl_fn = policy_mean_kl(lambda th: torch.distributions.Categorical(logits=flat.call(th, obs)), theta)
    kl = kl_fn(theta)
    assert float(kl.detach()) == 0.0 and float(flat_grad(kl, theta).abs().max()) < 1e-12


class GaussianActor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        self.log_std = torch.nn.Parameter(torch.full((2,), -0.5))

    def forward(self, obs):
        return torch.distributions.Normal(self.mean(obs), self.log_std.exp())


def _batch(actor, n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 4, generator=g)
    with torch.no_grad():
        dist = actor(obs)
        act = dist.sample()
        logp = dist.log_prob(act).sum(-1)
    adv_r = torch.randn(n, generator=g) + act[:, 0]  # reward likes action 0
    adv_c = torch.randn(n, generator=g) + act[:, 0] + act[:, 1]  # cost grows with both
    return obs, act, logp, (adv_r - adv_r.mean()) / adv_r.std(), (adv_c - adv_c.mean()) / adv_c.std()


def _update(tr, algo: str, c: float = 0.0):
    """One TRPO or CPO actor update of a torch.nn.Module through FlatParams, as the engine will run it."""
    torch.manual_seed(0)
    actor = GaussianActor()
    obs, act, logp, adv_r, adv_c = _batch(actor)
    flat = FlatParams(actor)
    theta = flat.get()
    dist = lambda th: flat.call(th, obs)  # noqa: E731 - GaussianActor.forward returns the Normal

    def surrogate(th, adv):  # th [n] or candidates [K, n]
        if th.dim() == 2:
            return torch.stack([surrogate(row, adv) for row in th])
        return (torch.exp(dist(th).log_prob(act).sum(-1) - logp) * adv).mean()

    old = dist(theta)
    kl = lambda th: torch.distributions.kl_divergence(old, dist(th)).mean()  # noqa: E731

    def evaluate(thetas):
        with torch.no_grad():
            costs = surrogate(thetas, adv_c) if algo == "CPO" else None
            return surrogate(thetas, adv_r), torch.stack([kl(row) for row in thetas]), costs

    fvp = tr.fisher_vector_product(policy_mean_kl(dist, theta), theta, CG_DAMPING)
    th = theta.clone().requires_grad_(True)
    g = flat_grad(surrogate(th, adv_r), th)
    x = tr.conjugate_gradient(fvp, g, 15).x
    q = x @ fvp(x)
    search = dict(max_kl=MAX_KL, surrogate_before=surrogate(theta, adv_r))
    if algo == "TRPO":
        step = tr.natural_step(x, q, MAX_KL)
    else:
        b = flat_grad(surrogate(th, adv_c), th)
        cpo = tr.cpo_step(g, b, x, tr.conjugate_gradient(fvp, b, 15).x, q, c, MAX_KL)
        step = cpo.step
        search.update(cost_before=surrogate(theta, adv_c), cost_violation=c, require_improvement=int(cpo.case) > 1,
                      max_steps=CPO_LINE_SEARCH_STEPS)
    out = tr.line_search(theta, step, evaluate, **search)
    flat.set(out.params)
    return out, theta, flat, surrogate, kl, adv_r, adv_c


@IMPLS
def test_trpo_update_improves_within_the_trust_region(tr):
    out, theta, flat, surrogate, kl, adv_r, _ = _update(tr, "TRPO")
    new = flat.get()
    assert int(out.accepted_step) >= 1
    assert float(surrogate(new, adv_r)) > float(surrogate(theta, adv_r))
    assert 0.0 < float(kl(new)) <= MAX_KL


@IMPLS
def test_cpo_recovery_lowers_the_cost_surrogate(tr):
    out, theta, flat, surrogate, kl, _, adv_c = _update(tr, "CPO", c=5.0)  # far above the limit
    new = flat.get()
    assert int(out.accepted_step) >= 1
    assert float(surrogate(new, adv_c)) < float(surrogate(theta, adv_c))
    assert float(kl(new)) <= MAX_KL
