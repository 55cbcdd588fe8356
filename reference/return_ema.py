"""Reference ``return_ema`` (spec/return_ema.py): float64 state, percentiles read off a full sort."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.return_ema import DEFAULTS, read_state, validate_config
from rlspec.contracts.validate import require_finite, require_floating, require_nonempty, scalar_args


def percentile(x: torch.Tensor, p: float) -> torch.Tensor:
    """q(p) by linear interpolation between order statistics (spec/return_ema.py)."""
    v = torch.sort(x.double().reshape(-1)).values  # [n]
    pos = p * (v.numel() - 1)
    i = math.floor(pos)
    upper = v[min(i + 1, v.numel() - 1)]
    return v[i] + (pos - i) * (upper - v[i])


class ReturnEMA:
    @scalar_args("decay", "max_range", "percentile_low", "percentile_high")
    def __init__(self, decay: float = DEFAULTS["decay"], max_range: float = DEFAULTS["max_range"],
                 percentile_low: float = DEFAULTS["percentile_low"],
                 percentile_high: float = DEFAULTS["percentile_high"]):
        validate_config(decay, max_range, percentile_low, percentile_high)
        self.decay, self.max_range = decay, max_range
        self.percentile_low, self.percentile_high = percentile_low, percentile_high
        self.low = torch.zeros((), dtype=torch.float64)
        self.high = torch.zeros((), dtype=torch.float64)

    def update(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        require_floating("ReturnEMA.update", "x", x)
        require_nonempty("ReturnEMA.update", "x", x)
        require_finite("ReturnEMA.update", "x", x)
        d, x = self.decay, x.detach()  # the state is statistics: it keeps no autograd graph
        self.low = d * self.low + (1 - d) * percentile(x, self.percentile_low)
        self.high = d * self.high + (1 - d) * percentile(x, self.percentile_high)
        invscale = torch.clamp(self.high - self.low, min=1 / self.max_range)
        return self.low.clone(), invscale

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"low": self.low.clone(), "high": self.high.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.low, self.high = read_state(state, torch.float64)
