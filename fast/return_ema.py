"""Fast ``return_ema`` (spec/return_ema.py): float32 state on the batch's device, no full sort.

``torch.quantile`` sorts all n values (and does so once per percentile); only the order statistics
around p·(n−1) are needed, so each tail is read with one ``topk`` of size ≈ min(p, 1−p)·n + 2.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.return_ema import DEFAULTS, read_state, validate_config
from rlspec.contracts.validate import require_finite, require_floating, require_nonempty, scalar_args


def percentile(v: torch.Tensor, p: float) -> torch.Tensor:
    """q(p) of the flat batch v [n] by linear interpolation, from the nearer tail only."""
    n = v.numel()
    pos = p * (n - 1)
    i = math.floor(pos)
    j = min(i + 1, n - 1)
    if p <= 0.5:
        tail = torch.topk(v, j + 1, largest=False, sorted=True).values  # [j+1]: order stats 0..j
        lo, hi = tail[i], tail[j]
    else:
        tail = torch.topk(v, n - i, largest=True, sorted=True).values  # [n-i]: order stats n-1..i
        lo, hi = tail[n - 1 - i], tail[n - 1 - j]
    return torch.lerp(lo, hi, pos - i)


class ReturnEMA:
    @scalar_args("decay", "max_range", "percentile_low", "percentile_high")
    def __init__(self, decay: float = DEFAULTS["decay"], max_range: float = DEFAULTS["max_range"],
                 percentile_low: float = DEFAULTS["percentile_low"],
                 percentile_high: float = DEFAULTS["percentile_high"]):
        validate_config(decay, max_range, percentile_low, percentile_high)
        self.decay, self.min_invscale = decay, 1.0 / max_range
        self.percentile_low, self.percentile_high = percentile_low, percentile_high
        self.low = torch.zeros((), dtype=torch.float32)
        self.high = torch.zeros((), dtype=torch.float32)

    def update(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        require_floating("ReturnEMA.update", "x", x)
        require_nonempty("ReturnEMA.update", "x", x)
        require_finite("ReturnEMA.update", "x", x)
        v = x.detach().reshape(-1).float()  # [n]
        q = torch.stack((percentile(v, self.percentile_low), percentile(v, self.percentile_high)))
        d = self.decay
        state = torch.stack((self.low.to(v.device), self.high.to(v.device))) * d + q * (1 - d)  # [2]
        self.low, self.high = state[0], state[1]
        return self.low.clone(), torch.clamp(self.high - self.low, min=self.min_invscale)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"low": self.low.clone(), "high": self.high.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.low, self.high = read_state(state, torch.float32)
