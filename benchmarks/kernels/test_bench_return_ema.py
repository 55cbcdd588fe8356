"""return_ema ``update`` on a batch [15, 4096] float32: reference, fast, sheeprl 0.8.4 ``Moments``.

Every implementation starts fresh, makes one checked update (against fast-torch's first update), and is
then timed from that warm state: the same state history for all of them.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

CONFIG = (0.99, 1.0, 0.05, 0.95)  # decay, max_range, percentile_low, percentile_high (sheeprl DreamerV3)
IMPLS = ["reference", "fast-torch", "sheeprl"]


class _Fabric:
    """Stands in for lightning's Fabric: in one process, all_gather returns the process's own batch."""

    @staticmethod
    def all_gather(x: torch.Tensor) -> torch.Tensor:
        return x


def _batch(device: str) -> torch.Tensor:
    """Returns [15, 4096] (horizon × batch), spread wide enough that invscale is above its floor."""
    gen = torch.Generator().manual_seed(0)
    return (100 * torch.randn(15, 4096, generator=gen)).to(device)


def _update(impl: str, device: str):
    """A fresh instance's update(x) -> (offset, invscale)."""
    if impl == "sheeprl":
        moments = pytest.importorskip("sheeprl.algos.dreamer_v3.utils").Moments(*CONFIG).to(device)
        fabric = _Fabric()
        return lambda x: moments(x, fabric)
    return importlib.import_module(IMPLEMENTATIONS["return_ema"][impl]).ReturnEMA(*CONFIG).update


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_update(check_and_time, device, impl):
    x = _batch(device)
    update = _update(impl, device)
    check_and_time("return_ema.update", lambda: update(x), _update("fast-torch", device)(x))
