"""Test half shared by the returns family (``lambda_return``, ``gae``, ``vtrace``, ``risk_target``):
Hypothesis building blocks and the bad-input properties. The runtime half (time-major validators) is
``rlspec.contracts.returns``.

Each contract describes its bad-input clauses with a :class:`BadInput`: the clause ids, a small valid
case and how to call the implementation; the three ``rejects_*`` checks then perturb one argument of
that case and require a ValueError/TypeError that names the argument and the offending shape, dtype,
value or index (``spec.core.expect_rejection``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from rlspec.spec.core import expect_rejection, fail

seeds = st.integers(0, 2**31 - 1)
unit_params = st.one_of(st.sampled_from([0.0, 0.5, 0.95, 0.99, 1.0]), st.floats(0.0, 1.0))


def noise_like(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Fresh N(0, 10²) values in the shape and dtype of ``t`` (a perturbation)."""
    return (10 * torch.randn(t.shape, generator=g, dtype=torch.float64)).to(t.dtype)


def perturbation(t: torch.Tensor, g: torch.Generator, huge: bool) -> torch.Tensor:
    """``noise_like``, or with ``huge`` the dtype's largest finite value everywhere: accepted as finite, but
    sums of it overflow to inf, so a cut that multiplies by 0 instead of selecting turns 0·inf into NaN."""
    return torch.full_like(t, torch.finfo(t.dtype).max) if huge else noise_like(t, g)


# what an overflow clause's message adds to the isolation clause's
OVERFLOW_NOTE = " to the dtype's largest finite value (overflowing to inf)"


def overflow_rationale(maths_clause: str, cut: str) -> str:
    """The rationale of a returns-family robustness clause that repeats the isolation clause ``maths_clause``
    with the dtype's largest finite values after ``cut``."""
    return (f"The literal recursion multiplies what lies after {cut} by a zero: with the dtype's largest finite "
            "values there the future overflows to inf and IEEE 754 gives 0·inf = NaN, so a textbook implementation "
            "returns NaN before the cut, while finite changes there leave it bit-identical (that is "
            f"{maths_clause}, which every correct implementation passes). The kit asks for select semantics at "
            "the cut (torch.where, or leaving the term out) because a critic that overflows after an episode "
            "ends must not poison the targets of the episode before it: one NaN target turns every parameter NaN "
            "at the next optimizer step.")


@st.composite
def with_position(draw, case_strategy, time_major: str):
    """A case plus ``pos`` (a row in 0..T−1 of the argument ``time_major``) and ``seed`` (for perturbations)."""
    case = draw(case_strategy)
    return dict(case, pos=draw(st.integers(0, case[time_major].shape[0] - 1)), seed=draw(seeds))


def bad_discounting(*names: str) -> st.SearchStrategy:
    """Hyper-parameters outside [0, 1] (NaN included), one at a time."""
    values = {"gamma": (1.5, -0.1), "lam": (1.01, float("nan"))}
    return st.sampled_from([dict(name=n, value=v) for n in names for v in values[n]])


@dataclasses.dataclass(frozen=True)
class BadInput:
    """The bad-input clauses of one contract. ``base()`` is a small valid case (a fresh dict of fresh
    tensors, [5, 3] time-major); ``call(impl, case)`` runs the implementation on it."""

    fn: str
    shape_clause: str
    param_clause: str
    value_clause: str
    base: Callable[[], dict]
    call: Callable[[Any, dict], Any]

    def rejects_shape(self, impl, name: str, shape: tuple, dtype: torch.dtype) -> None:
        """Argument ``name`` replaced by zeros of ``shape``/``dtype``: the message names the argument
        and what is wrong with it (the dtype if that differs, else the shape)."""
        case = self.base()
        wrong_dtype = dtype != case[name].dtype
        case[name] = torch.zeros(shape, dtype=dtype)
        mention = str(dtype) if wrong_dtype else str(tuple(shape))
        expect_rejection(self.shape_clause, lambda: self.call(impl, case), names=[f"'{name}'"],
                         mentions=[mention], what=f"{name} {list(shape)} {dtype}")

    def rejects_param(self, impl, name: str, value: Any) -> None:
        case = dict(self.base(), **{name: value})
        expect_rejection(self.param_clause, lambda: self.call(impl, case), names=[f"'{name}'"],
                         mentions=[repr(value)], what=f"{self.fn}({name}={value!r})")

    def rejects_value(self, impl, name: str, bad: float, t: int, b: int) -> None:
        """One element of argument ``name`` set to ``bad`` ([t, b], or [b] for a per-column argument):
        the message names the argument and the index."""
        case = self.base()
        arg = case[name] if case[name].dtype.is_floating_point else case[name].float()
        case[name] = arg = arg.clone()
        index = (t, b) if arg.dim() == 2 else (b,)
        arg[index] = bad
        expect_rejection(self.value_clause, lambda: self.call(impl, case), names=[f"'{name}'"],
                         mentions=[str(list(index))], what=f"{name}{list(index)} = {bad}")


def assert_within(clause: str, what: str, got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor,
                  **inputs) -> None:
    """|got − want| <= bound elementwise, else a violation naming the worst points (err / bound)."""
    if got.shape != want.shape:
        fail(clause, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}", **inputs)
    err = (got.double() - want.double()).abs()
    bad = ~(err <= bound)  # NaN counts as bad
    if not bool(bad.any()):
        return
    ratio = torch.where(bad, torch.nan_to_num(err / bound.clamp_min(1e-300), nan=float("inf")), -1.0)
    worst = torch.argsort(ratio.reshape(-1), descending=True)[:3].tolist()
    points = []
    for flat in worst:
        if ratio.reshape(-1)[flat] < 0:
            break
        idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)]
        points.append(f"{idx}: got {float(got.reshape(-1)[flat]):.9g}, expected "
                      f"{float(want.reshape(-1)[flat]):.9g} ± {float(bound.reshape(-1)[flat]):.3g}")
    fail(clause, f"{what}: {int(bad.sum())} of {bad.numel()} elements outside the error bound; max |abs "
                 f"diff| = {float(torch.nan_to_num(err, nan=float('inf'))[bad].max()):.3g}; worst: "
                 + "; ".join(points), **inputs)
