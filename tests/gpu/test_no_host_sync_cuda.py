"""On CUDA, the fast safe-RL guards and updates never synchronize with the host: each call runs
under ``torch.cuda.set_sync_debug_mode("error")``, which raises on any synchronizing operation. One
warm-up call before the check moves each object's state to the device. The CPU gate covers the same
calls with spec.core.no_host_sync (tests/unit/test_*_device.py)."""

from __future__ import annotations

import math

import pytest
import torch
from cuda_util import sync_is_an_error

from rlspec.fast import lagrange, modulation, numerics

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]


def _calls():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4096, device="cuda", generator=g)
    new, old = torch.randn(4096, device="cuda", generator=g), torch.randn(4096, device="cuda", generator=g)
    new[3] = math.nan
    mask = torch.rand(4096, device="cuda", generator=g) < 0.5
    adv = torch.randn(256, 6, device="cuda", generator=g)
    preds = torch.rand(512, device="cuda", generator=g)
    jc, m = torch.tensor(30.0, device="cuda"), torch.tensor(0.5, device="cuda")
    norm = numerics.ObsNormalizer(shape=(6,))
    norm.commit(adv)  # an update point: allowed to check its input on the host
    guard = numerics.LossGuard()
    duals = (lagrange.DualAscent(), lagrange.OmniSafeLagrange(), lagrange.PIDLagrangian())
    return {
        "modulation_scale": lambda: modulation.modulation_scale(preds, 12),
        "DualAscent.update": lambda: duals[0].update(jc, scale=m),
        "OmniSafeLagrange.update": lambda: duals[1].update(jc, scale=m),
        "PIDLagrangian.update": lambda: duals[2].update(jc),
        "safe_standardize": lambda: numerics.safe_standardize(x),
        "ObsNormalizer.normalize": lambda: norm.normalize(adv),
        "ratio_guard": lambda: numerics.ratio_guard(new, old),
        "LossGuard": lambda: guard(new.sum(), "policy"),
        "masked_component_weights": lambda: numerics.masked_component_weights(adv, torch.zeros(6, device="cuda")),
        "value_loss": lambda: numerics.value_loss(x, x + 1, 2 * x, value_clip=0.5),
        "masked_mean": lambda: numerics.masked_mean(new, mask),
    }


@pytest.mark.parametrize("name", ["modulation_scale", "DualAscent.update", "OmniSafeLagrange.update",
                                  "PIDLagrangian.update", "safe_standardize", "ObsNormalizer.normalize",
                                  "ratio_guard", "LossGuard", "masked_component_weights", "value_loss",
                                  "masked_mean"])
def test_fast_call_does_not_sync(name):
    call = _calls()[name]
    call()  # warm-up: state moves to the device
    with sync_is_an_error():
        out = call()
    outs = out if isinstance(out, tuple) else (out,)
    outs = [v for o in outs for v in (o.values() if isinstance(o, dict) else (o,))]  # ratio_guard: (ratio, events)
    assert all(isinstance(t, torch.Tensor) and t.is_cuda for t in outs if t is not None), name
