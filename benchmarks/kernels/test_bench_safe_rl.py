"""Safe-RL control and numerics: fast twins vs the float64 reference, one group per call, at
the sizes a vectorized PPO-Lagrangian loop uses. The issue sets no speed targets here (its fast twins
exist to stay on the device); the ratios are reported. On CPU the scalar controllers (PIDLagrangian) are
much slower as 0-d tensor ops than the reference's Python floats: their point is never stalling a CUDA
loop on a host read, which the gpu_gate checks."""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch"]
N, D = 4096, 512  # envs, embedding width


def _module(contract: str, impl: str):
    return importlib.import_module(IMPLEMENTATIONS[contract][impl])


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_modulation_scale(check_and_time, device, impl):
    preds = torch.rand(N, generator=_gen()).to(device)  # risk predictions of one batch
    fn = _module("modulation", impl).modulation_scale
    check_and_time("modulation.modulation_scale[4096]", lambda: fn(preds, 100),
                   _module("modulation", "fast-torch").modulation_scale(preds, 100))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_pid_lagrangian(check_and_time, device, impl):
    costs = (25 + 10 * torch.randn(200, generator=_gen())).tolist()  # J_c of 200 epochs

    def run(module):
        ctl = module.PIDLagrangian()
        for jc in costs:
            lam = ctl.update(jc)
        return lam

    check_and_time("lagrange.PIDLagrangian[200 updates]", lambda: run(_module("lagrange", impl)),
                   run(_module("lagrange", "fast-torch")))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_safe_standardize(check_and_time, device, impl):
    x = (3 + 5 * torch.randn(16 * N, generator=_gen())).to(device)  # advantages of a rollout
    fn = _module("numerics", impl).safe_standardize
    check_and_time("numerics.safe_standardize[65536]", lambda: fn(x),
                   _module("numerics", "fast-torch").safe_standardize(x))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_masked_policy_loss(check_and_time, device, impl):
    g = _gen()
    ratio = torch.exp(0.1 * torch.randn(16 * N, generator=g)).to(device)
    adv, mask = torch.randn(16 * N, generator=g).to(device), (torch.rand(16 * N, generator=g) < 0.3).to(device)
    fn = _module("numerics", impl).masked_policy_loss
    check_and_time("numerics.masked_policy_loss[65536]", lambda: fn(ratio, adv, mask),
                   _module("numerics", "fast-torch").masked_policy_loss(ratio, adv, mask))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_semantic_margin(check_and_time, device, impl):
    g = _gen()
    e, mu_safe, mu_unsafe = (torch.randn(N, D, generator=g).to(device), torch.randn(D, generator=g).to(device),
                             torch.randn(D, generator=g).to(device))
    fn = _module("shaping", impl).semantic_margin
    check_and_time("shaping.semantic_margin[4096, 512]", lambda: fn(e, mu_safe, mu_unsafe),
                   _module("shaping", "fast-torch").semantic_margin(e, mu_safe, mu_unsafe))
