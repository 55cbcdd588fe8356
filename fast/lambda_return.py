"""Fast ``lambda_return`` (spec/lambda_return.py): vectorized torch in the input dtype, on any device.

Everything that does not depend on R_{t+1} is computed for all T rows at once (``lambda_coefficients``,
shared with the Triton backend fast/lambda_return_triton.py); the remaining recursion
R_t = base_t + (γλ·c_t)·R_{t+1} is one fused multiply-add per step, a Python loop over time only (never
over the batch) with no host synchronization. fast/lambda_return_triton.py runs the same recursion as
one Triton scan kernel (fast/returns_triton.py).
At a cut (coefficient 0) the step selects instead of multiplying (fast/recursion.py): an inf after the
cut never becomes 0·inf = NaN before it.

On CPU without autograd the whole recursion is one C++ pass (fast/recursion.py ``scan``, the same select):
the ops on [B] rows, three per step, are what a [15, 4096] call costs in torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.validate import scalar_args
from rlspec.fast import recursion
from rlspec.fast.recursion import carry_step


def lambda_coefficients(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float,
                        lam: float, first: torch.Tensor | None, trunc: torch.Tensor | None = None,
                        next_value: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(base [T, B], carry [T, B]) of R_t = base_t + carry_t·R_{t+1}, R_T = v_T, with
    base_t = r_t + γc_t(1 − f_{t+1})(1 − λ)·v_{t+1} and carry_t = γc_t(1 − f_{t+1})·λ, and at a truncated step
    base_t = r_t + γc_t·b_t, carry_t = 0 (spec/lambda_return.py "Formula", "Truncation"), from inputs already
    validated (``first``, ``trunc``: the bool masks the validators return, or None). No host sync."""
    discount = gamma * cont  # [T, B]
    if first is not None:
        discount = torch.where(first[1:], torch.zeros_like(discount), discount)  # reset after t: a cut
    base = torch.addcmul(reward, discount, value[1:], value=1 - lam)  # [T, B]
    carry = discount * lam  # [T, B]
    if trunc is None:
        return base, carry
    bootstrapped = torch.addcmul(reward, gamma * cont, next_value)  # [T, B]: r_t + γc_t·b_t
    return torch.where(trunc, bootstrapped, base), torch.where(trunc, torch.zeros_like(carry), carry)


@scalar_args("gamma", "lam")
def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None, truncated: torch.Tensor | None = None,
                  next_value: torch.Tensor | None = None) -> torch.Tensor:
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    trunc = validate_truncation("lambda_return", truncated, next_value, reward, "reward")
    base, carry = lambda_coefficients(reward, cont, value, gamma, lam, first, trunc, next_value)  # [T, B] each
    if recursion.scan_runs_here(base):
        return recursion.scan(base, carry, value[-1])[:-1]
    return _guarded(base, carry, value[-1])


def _guarded(base: torch.Tensor, carry: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """R_t = base_t + carry_t·R_{t+1}, exactly base_t at a cut, rows R_0..R_{T-1} [T, B]; autograd-friendly."""
    rows = [last]  # R_T = v_T, then R_{T-1}, ..., R_0: [B] each
    for t in reversed(range(base.shape[0])):
        rows.append(carry_step(base[t], carry[t], rows[-1]))
    return torch.stack(rows[::-1])[:-1]  # [T+1, B] -> [T, B]: one copy at the end, autograd-friendly
