"""The fast ``numerics`` hot functions never synchronize with the host (spec/numerics/ dtype policy).

On CPU a host sync cannot be observed directly, so the hot functions run under spec.core.no_host_sync
(every tensor→host read raises); outputs must stay tensors. The reference is allowed to sync and is
shown to trip the guard, so the guard is known to bite.
"""

from __future__ import annotations

import math

import pytest
import torch

from rlspec.fast import numerics as fast
from rlspec.reference import numerics as reference
from rlspec.spec.core import HostSync, no_host_sync


def _hot_calls(impl):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, generator=g)
    new, old = torch.randn(32, generator=g), torch.randn(32, generator=g)
    new[3], new[5] = math.nan, math.inf
    adv = torch.randn(16, 6, generator=g)
    adv[:, 3:] = 0.0
    mask = torch.rand(32, generator=g) < 0.5
    norm = impl.ObsNormalizer(shape=(3,))
    norm.commit(torch.randn(8, 3, generator=g))  # commit may sync (input check): outside the patch
    guard = impl.LossGuard()
    return {
        "safe_standardize": lambda: impl.safe_standardize(x),
        "safe_standardize(constant)": lambda: impl.safe_standardize(torch.full((5,), 2.0)),
        "safe_zero_center": lambda: impl.safe_zero_center(x),
        "ObsNormalizer.normalize": lambda: norm.normalize(torch.randn(4, 3)),
        "ratio_guard": lambda: impl.ratio_guard(new, old),
        "LossGuard": lambda: guard(torch.tensor(math.nan), "policy"),
        "masked_component_weights": lambda: impl.masked_component_weights(adv, torch.zeros(6)),
        "kl_early_stop": lambda: impl.kl_early_stop(new - old, 0.01),
        "value_loss": lambda: impl.value_loss(x, x + 1, 2 * x, value_clip=0.5),
        "masked_mean": lambda: impl.masked_mean(new, mask),
        "masked_policy_loss": lambda: impl.masked_policy_loss(torch.exp(old), new, mask),
        "entropy_loss": lambda: impl.entropy_loss({"op": x[:32].abs(), "blend": new.abs()},
                                                  {"op": torch.ones(32, dtype=torch.bool), "blend": mask}),
    }


def _tensors(out) -> list:
    if isinstance(out, dict):
        out = tuple(out.values())
    return [t for o in out for t in _tensors(o)] if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", list(_hot_calls(fast)))
def test_fast_hot_function_stays_on_device(name):
    call = _hot_calls(fast)[name]
    with no_host_sync():
        out = call()
    assert all(isinstance(t, torch.Tensor) for t in _tensors(out)), f"{name} returned a non-tensor"


def test_loss_guard_counts_after_the_sync_point():
    guard = fast.LossGuard()
    for v in (math.nan, 1.0, math.inf):
        guard(torch.tensor(v), "value")
    with pytest.warns(RuntimeWarning, match="value"):
        assert guard.counts() == {"value": 2}


def test_the_guard_catches_a_sync():
    call = _hot_calls(reference)["safe_standardize"]  # the reference branches on σ on the host
    with pytest.raises(HostSync), no_host_sync():
        call()
