"""The safe-control contracts catch their planted bugs, and the fast twins never synchronize with the host.

The no-sync guard makes the gpu_gate's memcpy check runnable on CPU: while it is active, any tensor→host
conversion (``.item()``, ``float()``, ``int()``, ``bool()``, ``.tolist()``, ``.numpy()``, a tensor used as
a Python index) raises. The fast ``modulation`` / ``lagrange`` updates run under it, and a planted
variant that calls ``.item()`` shows the guard bites.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from planted_safe_control import PLANTED_SAFE_CONTROL
from rlspec.fast import lagrange as fast_lag
from rlspec.fast import modulation as fast_mod
from rlspec.spec.core import run_contract

from rlspec import registry


@pytest.mark.parametrize("bug", PLANTED_SAFE_CONTROL, ids=lambda b: b.name.replace(" ", "-"))
def test_planted_bug_is_caught(bug):
    outcomes = {o.clause: o for o in run_contract(registry_contract(bug.contract), bug.impl)}
    caught = outcomes[bug.catches]
    assert caught.status == "fail", f"{bug.name}: {bug.catches} did not fail"
    assert caught.message.startswith(f"[{bug.catches}]"), caught.message
    assert bug.says in caught.message, caught.message
    wrongly = [c for c in bug.spared if outcomes[c].status != "pass"]
    assert not wrongly, f"{bug.name}: unrelated clauses failed: " + "; ".join(outcomes[c].message for c in wrongly)


def registry_contract(name: str):
    """The registered contract, or the spec module directly until the lead registers it."""
    if name in registry.CONTRACTS:
        return registry.load_contract(name)
    import importlib

    return importlib.import_module(f"rlspec.spec.{name}").CONTRACT


class HostSync(AssertionError):
    pass


@contextlib.contextmanager
def no_host_sync():
    """Fail on any tensor→host conversion inside the block."""
    names = ("item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__")
    saved = {n: getattr(torch.Tensor, n) for n in names}

    def forbid(name):
        def raiser(self, *args, **kwargs):
            raise HostSync(f"tensor→host conversion Tensor.{name} on a tensor of shape {tuple(self.shape)}")
        return raiser

    try:
        for n in names:
            setattr(torch.Tensor, n, forbid(n))
        yield
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


def _drive_lagrangians(mod, jcs, scale):
    objs = (mod.DualAscent(), mod.OmniSafeLagrange(), mod.PIDLagrangian(pid_d_delay=3))
    for jc in jcs:
        objs[0].update(jc, scale=scale)
        objs[1].update(jc, scale=scale)
        objs[2].update(jc)
    return [o.lagrangian_multiplier for o in objs]


def _drive_safe_state(mod, steps=4):
    g = torch.Generator().manual_seed(0)
    sb, sim = mod.SauteBudget(3, safety_budget=2.0, saute_gamma=0.9, max_ep_len=5), mod.SimmerPID()
    sb.reset(torch.zeros(3, 2))
    budget = torch.full((3, 1), 5.0)
    for _ in range(steps):
        sb.step(torch.randn(3, 2, generator=g), torch.randn(3, generator=g), torch.rand(3, generator=g),
                torch.rand(3, generator=g) < 0.3)
        budget = sim.act(budget, torch.tensor(4.0))
    return sb.z, budget


def test_fast_twins_stay_on_device():
    preds = torch.cat([torch.rand(30, generator=torch.Generator().manual_seed(1)), torch.tensor([math.nan, math.inf])])
    jcs = [torch.tensor(v) for v in (30.0, math.nan, 10.0, 40.0, 25.0)]
    with no_host_sync():
        m = fast_mod.modulation_scale(preds, 12)
        gated = fast_mod.modulation_scale(preds[:5], 12)  # < 10 predictions
        lams = _drive_lagrangians(fast_lag, jcs, scale=m)  # M stays a device tensor end to end
        z, budget = _drive_safe_state(fast_lag)
    assert 0.0 < float(m) < 1.0 and float(gated) == 1.0
    assert all(isinstance(lam, torch.Tensor) and float(lam) >= 0.0 for lam in lams)
    assert z.shape == (3,) and budget.shape == (3, 1)


def test_guard_catches_a_host_sync():
    with pytest.raises(HostSync, match="item"), no_host_sync():
        torch.tensor(30.0).item()  # what a fast update calling .item() does
    with pytest.raises(HostSync), no_host_sync():
        _drive_lagrangians(__import__("rlspec.reference.lagrange", fromlist=["x"]), [torch.tensor(30.0)], 1.0)
