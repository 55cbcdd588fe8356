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


# --------------------------------------------------------------------------------------------------
# The collector layout: truncation inside a batch, and the concatenation clause
# --------------------------------------------------------------------------------------------------
TERMINAL, TRUNCATED = 1, 2  # codes of ``ends`` (0: the episode goes on after row t)


@st.composite
def with_ends(draw, case_strategy, time_major: str):
    """A case plus ``ends`` [T, B] int8 (per env up to three episode ends, each terminal or truncated, and with
    probability ½ one at both edges t = 0 and t = T − 1, where off-by-one bugs live) and ``seed``."""
    case = draw(case_strategy)
    T, B = case[time_major].shape[:2]
    ends = torch.zeros(T, B, dtype=torch.int8)
    for col in range(B):
        rows = set(draw(st.lists(st.integers(0, T - 1), max_size=3)))
        if draw(st.booleans()):
            rows |= {0, T - 1}
        for t in sorted(rows):
            ends[t, col] = draw(st.sampled_from([TERMINAL, TRUNCATED]))
    return dict(case, ends=ends, seed=draw(seeds))


def pinned_ends(T: int, B: int = 3) -> torch.Tensor:
    """``ends`` [T, B] of the pinned concatenation example: ends at both edges and inside, terminal and truncated,
    in every env (T >= 3)."""
    ends = torch.zeros(T, B, dtype=torch.int8)
    ends[0, 0], ends[T - 1, 0], ends[T // 2, 1], ends[T - 1, 1], ends[1, 2] = (
        TRUNCATED, TRUNCATED, TERMINAL, TERMINAL, TRUNCATED)
    return ends


def pieces(done: torch.Tensor) -> list[tuple[int, int, int]]:
    """(env, first row, last row) of every trajectory piece of a batch whose episode ends are ``done`` [T, B]: a
    piece runs up to an end, or to the last row."""
    T, B = done.shape
    out = []
    for col in range(B):
        first = 0
        for t in range(T):
            if bool(done[t, col]) or t == T - 1:
                out.append((col, first, t))
                first = t + 1
    return out


def assert_concatenation(clause: str, names: tuple[str, ...], whole: tuple[torch.Tensor, ...],
                         alone: Callable[[int, int, int], tuple[torch.Tensor, ...]], done: torch.Tensor,
                         bound: Callable[[int, int, int], tuple[Any, ...]], **inputs) -> None:
    """The outputs ``whole`` ([T, B] each) of a batch of concatenated trajectories equal, on every piece, the
    outputs of that piece run alone (``alone(env, first, last)``: [L, 1] each), within ``bound(env, first,
    last)`` (per output a float or an [L, 1] tensor)."""
    for col, first, last in pieces(done):
        for name, batch, single, tol in zip(names, whole, alone(col, first, last), bound(col, first, last)):
            got = batch[first:last + 1, col:col + 1]
            tol = tol if isinstance(tol, torch.Tensor) else torch.full(got.shape, tol, dtype=torch.float64)
            assert_within(clause, f"{name} rows {first}..{last} of env {col} in the batch of concatenated "
                                  "trajectories vs that trajectory run alone", got, single, tol, **inputs)


TRUNCATION_ERRORS = st.sampled_from([
    dict(problem="missing", name="truncated"), dict(problem="missing", name="next_value"),
    dict(problem="shape", name="next_value"), dict(problem="shape", name="truncated"),
    dict(problem="dtype", name="next_value"), dict(problem="value", name="truncated"),
    dict(problem="value", name="next_value"),
])


def rejects_truncation(clause: str, fn: str, call: Callable[[dict], Any], base: Callable[[], dict], problem: str,
                       name: str) -> None:
    """``base()`` is a valid case with ``truncated`` and ``next_value`` [5, 3]; one of them is left out, or given
    in another shape or dtype, or with a non-0/1 flag or a NaN at [4, 2]: the message names the argument (a
    missing one: the argument given without it) and what is wrong."""
    case = base()
    other = "next_value" if name == "truncated" else "truncated"
    if problem == "missing":
        case[name] = None
        names, mentions = [f"'{other}'", f"'{name}'"], []
    elif problem == "shape":
        case[name] = torch.zeros((5, 2), dtype=case[name].dtype)
        names, mentions = [f"'{name}'"], [str((5, 2))]
    elif problem == "dtype":
        case[name] = case[name].double()
        names, mentions = [f"'{name}'"], [str(torch.float64)]
    else:
        case[name] = case[name].float().clone()
        case[name][4, 2] = 0.5 if name == "truncated" else float("nan")
        names, mentions = [f"'{name}'"], [str([4, 2])]
    expect_rejection(clause, lambda: call(case), names=names, mentions=mentions, what=f"{fn}: {name} {problem}")
