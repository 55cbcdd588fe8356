"""Every registered ``return_ema`` implementation reproduces sheeprl 0.8.4's ``Moments`` state and outputs
(fixtures/return_ema/sheeprl_moments.json) update by update, within the manifest's tolerance."""

from __future__ import annotations

from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "return_ema"


def test_moments_sequence(impl):
    inputs, expected, entry = read_golden("return_ema/sheeprl_moments.json")
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    ema = impl.ReturnEMA(decay=0.99, max_range=1.0, percentile_low=0.05, percentile_high=0.95)
    for t, x in enumerate(inputs["batches"]):  # x [15, 16]
        offset, invscale = ema.update(x)
        for what, got in (("low", ema.low), ("high", ema.high), ("offset", offset), ("invscale", invscale)):
            # REMA-2: the EMA-of-percentiles formula over a sequence of updates
            assert_close("REMA-2", f"{what} after update {t} vs sheeprl Moments", got, expected[what][t],
                         x=x, **tol)
