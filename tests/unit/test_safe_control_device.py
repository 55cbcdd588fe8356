"""The fast ``modulation`` / ``lagrange`` updates never synchronize with the host.

They run under spec.core.no_host_sync (any tensor→host read raises), the CPU-observable stand-in for
the gpu_gate's sync check; the reference, which reads values on the host, trips the same guard.
"""

from __future__ import annotations

import math

import pytest
import torch

from rlspec.fast import lagrange as fast_lag
from rlspec.fast import modulation as fast_mod
from rlspec.spec.core import HostSync, no_host_sync


def _drive_lagrangians(mod, jcs, scale):
    objs = (mod.DualAscent(), mod.OmniSafeLagrange(), mod.PIDLagrangian(pid_d_delay=3))
    for jc in jcs:
        objs[0].update(jc, scale=scale)
        objs[1].update(jc, scale=scale)
        objs[2].update(jc)
    return [o.lagrangian_multiplier for o in objs]


def _drive_safe_state(mod, steps=4):
    g = torch.Generator().manual_seed(0)
    kw = {} if mod.__name__.endswith("reference.lagrange") else dict(check_values=False)  # no host read
    sb, sim = mod.SauteBudget(3, safety_budget=2.0, saute_gamma=0.9, max_ep_len=5, **kw), mod.SimmerPID()
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


def test_saute_without_value_checks_keeps_z_and_counts():
    """check_values=False (no host read): an env with a non-finite cost keeps its budget z and is counted;
    the other envs step as with the checks on."""
    kw = dict(safety_budget=2.0, saute_gamma=0.9, max_ep_len=5)
    quiet, checked = fast_lag.SauteBudget(3, check_values=False, **kw), fast_lag.SauteBudget(3, **kw)
    for sb in (quiet, checked):
        sb.reset(torch.zeros(3, 2))
    cost = torch.tensor([0.5, math.nan, 0.25])
    with no_host_sync():
        quiet.step(torch.zeros(3, 2), torch.ones(3), cost, torch.zeros(3, dtype=torch.bool))
    checked.step(torch.zeros(3, 2), torch.ones(3), torch.tensor([0.5, 0.0, 0.25]), torch.zeros(3, dtype=torch.bool))
    assert int(quiet.violations) == 1
    assert float(quiet.z[1]) == 1.0  # untouched
    assert torch.equal(quiet.z[[0, 2]], checked.z[[0, 2]])
    with pytest.raises(ValueError, match="'cost'"):
        checked.step(torch.zeros(3, 2), torch.ones(3), cost, torch.zeros(3, dtype=torch.bool))
