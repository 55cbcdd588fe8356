"""The step of the backward recursions in the returns family (gae, lambda_return, vtrace, risk_target)."""

from __future__ import annotations

import torch


def carry_step(base: torch.Tensor, coef: torch.Tensor, carried: torch.Tensor) -> torch.Tensor:
    """base + coef·carried, and exactly ``base`` where coef == 0: a cut (terminal, reset, episode end) keeps
    everything after it out, also an inf that overflowed there (0·inf would be NaN)."""
    return torch.where(coef == 0, base, torch.addcmul(base, coef, carried))
