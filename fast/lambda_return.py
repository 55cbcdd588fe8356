"""Fast ``lambda_return`` (spec/lambda_return.py): vectorized torch in the input dtype, on any device.

Everything that does not depend on R_{t+1} is computed for all T rows at once (``lambda_coefficients``,
shared with the Triton backend fast/lambda_return_triton.py); the remaining recursion
R_t = base_t + (γλ·c_t)·R_{t+1} is one fused multiply-add per step, a Python loop over time only (never
over the batch) with no host synchronization. fast/lambda_return_triton.py runs the same recursion as
one Triton scan kernel (fast/returns_triton.py).
At a cut (coefficient 0) the step selects instead of multiplying (fast/recursion.py): an inf after the
cut never becomes 0·inf = NaN before it.

On CPU without autograd the recursion skips that select: one ``addcmul`` per step, written in place into
the output (the select and its mask were two of the three ops per step, and the ops on [B] rows are what
a [15, 4096] call costs). The two differ only where R_{t+1} is not finite at a cut, and the NaN that
0·inf makes there reaches R_0 (NaN stays NaN through every later step), so R_0 holding no NaN proves the
unguarded rows equal the guarded ones; otherwise the guarded recursion runs. That proof is one host read,
so it runs only where reading values is allowed (``value_checks_on()``; inside ``without_value_checks()``,
as the fast engine's loop runs, the guarded recursion runs and nothing is read back).
"""

from __future__ import annotations

import torch

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.validate import scalar_args, value_checks_on
from rlspec.fast.recursion import carry_step


def lambda_coefficients(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float,
                        lam: float, first: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(base [T, B], carry [T, B]) of R_t = base_t + carry_t·R_{t+1}, R_T = v_T, with
    base_t = r_t + γc_t(1 − f_{t+1})(1 − λ)·v_{t+1} and carry_t = γc_t(1 − f_{t+1})·λ (spec/lambda_return.py
    "Formula"), from inputs already validated (``first``: the bool mask ``validate_lambda_return``
    returns, or None). No host sync."""
    discount = gamma * cont  # [T, B]
    if first is not None:
        discount = torch.where(first[1:], torch.zeros_like(discount), discount)  # reset after t: a cut
    base = torch.addcmul(reward, discount, value[1:], value=1 - lam)  # [T, B]
    return base, discount * lam  # carry [T, B]


@scalar_args("gamma", "lam")
def lambda_return(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float, lam: float,
                  is_first: torch.Tensor | None = None) -> torch.Tensor:
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    base, carry = lambda_coefficients(reward, cont, value, gamma, lam, first)  # [T, B] each
    if reward.device.type == "cpu" and value_checks_on() and not (torch.is_grad_enabled() and base.requires_grad):
        out = _unguarded(base, carry, value[-1])  # [T+1, B]
        if not out[0].sum().isnan():  # the proof above (a false alarm only reruns guarded)
            return out[:-1]
    return _guarded(base, carry, value[-1])


def _unguarded(base: torch.Tensor, carry: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """R_t = base_t + carry_t·R_{t+1} without the select at a cut, rows R_0..R_T [T+1, B]."""
    out = base.new_empty((base.shape[0] + 1, *base.shape[1:]))  # [T+1, B]
    rows, bases, carries = out.unbind(), base.unbind(), carry.unbind()  # [B] views: one call, not 4 per step
    rows[-1].copy_(last)
    for t in reversed(range(base.shape[0])):
        torch.addcmul(bases[t], carries[t], rows[t + 1], out=rows[t])
    return out


def _guarded(base: torch.Tensor, carry: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """R_t = base_t + carry_t·R_{t+1}, exactly base_t at a cut, rows R_0..R_{T-1} [T, B]; autograd-friendly."""
    rows = [last]  # R_T = v_T, then R_{T-1}, ..., R_0: [B] each
    for t in reversed(range(base.shape[0])):
        rows.append(carry_step(base[t], carry[t], rows[-1]))
    return torch.stack(rows[::-1])[:-1]  # [T+1, B] -> [T, B]: one copy at the end, autograd-friendly
