"""The spec framework every contract module builds on.

A contract module (``spec/<contract>.py``) declares

* ``CLAUSES``: stable ids → one-line statements (``"TWOHOT-3": "encoded weights sum to 1"``);
* ``INTERFACE``: the names every implementation provides (functions or classes);
* ``PROPERTIES``: :class:`Property` objects, each pairing one clause with a check function
  ``check(impl, **case)``, a Hypothesis strategy that draws ``case`` dicts, and pinned edge cases;

and exposes them as ``CONTRACT = Contract(...)``. :func:`run_property` runs one property against any
implementation object (a module, or anything with the interface's attributes) and turns the result
into an :class:`Outcome` that the runner tabulates.

Check functions report a violation by raising :class:`ContractViolation` (via :func:`fail` or
:func:`assert_close`), whose message starts with the clause id and names the offending inputs and the
expected vs actual values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import Any, Callable, Mapping, Sequence

import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

# --------------------------------------------------------------------------------------------------
# Hypothesis profiles: `ci` is bounded and derandomized (a CI failure reproduces bit-for-bit),
# `dev` digs deeper, `nightly` is for long soak runs. Select with HYPOTHESIS_PROFILE or --profile.
# --------------------------------------------------------------------------------------------------
PROFILES: dict[str, dict[str, Any]] = {
    "ci": dict(
        max_examples=25,
        derandomize=True,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
    "dev": dict(max_examples=200, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow]),
    "nightly": dict(max_examples=2000, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow]),
}


def register_profiles() -> None:
    for name, kwargs in PROFILES.items():
        settings.register_profile(name, **kwargs)


def default_profile() -> str:
    """`HYPOTHESIS_PROFILE` if set, else `ci` under CI, else `dev`."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


# --------------------------------------------------------------------------------------------------
# Violations and their messages
# --------------------------------------------------------------------------------------------------
class ContractViolation(AssertionError):
    """A clause does not hold. ``str(exc)`` starts with ``[CLAUSE-ID]``."""

    def __init__(self, clause: str, message: str):
        super().__init__(f"[{clause}] {message}")
        self.clause = clause


def fail(clause: str, message: str, **inputs: Any) -> None:
    raise ContractViolation(clause, message + _format_inputs(inputs))


def describe(value: Any, max_items: int = 8) -> str:
    """A short, exact-enough rendering of an input value for violation messages."""
    if isinstance(value, torch.Tensor):
        head = f"tensor(shape={tuple(value.shape)}, dtype={str(value.dtype).removeprefix('torch.')}"
        flat = value.detach().reshape(-1).cpu()
        if flat.numel() == 0:
            return head + ", empty)"
        shown = ", ".join(_fmt_scalar(v) for v in flat[:max_items].tolist())
        more = ", ..." if flat.numel() > max_items else ""
        return f"{head}, values=[{shown}{more}])"
    if isinstance(value, float):
        return _fmt_scalar(value)
    return repr(value)


def _fmt_scalar(v: Any) -> str:
    return f"{v:.9g}" if isinstance(v, float) else repr(v)


def _format_inputs(inputs: Mapping[str, Any]) -> str:
    if not inputs:
        return ""
    return " | inputs: " + ", ".join(f"{k}={describe(v)}" for k, v in inputs.items())


def assert_close(clause: str, what: str, got: Any, expected: Any, *, atol: float, rtol: float = 0.0,
                 worst: int = 3, **inputs: Any) -> None:
    """Raise a clause-tagged violation unless ``|got - expected| <= atol + rtol·|expected|``.

    The message carries max |abs diff|, max |rel diff|, how many of how many elements are off and the
    worst points (index, got, expected). NaNs only match NaNs at the same position.
    """
    got_t = torch.as_tensor(got).detach().cpu()
    exp_t = torch.as_tensor(expected).detach().cpu()
    if got_t.shape != exp_t.shape:
        fail(clause, f"{what}: shape {tuple(got_t.shape)}, expected {tuple(exp_t.shape)}", **inputs)
    g, e = got_t.double(), exp_t.double()
    both_nan = torch.isnan(g) & torch.isnan(e)
    same_inf = torch.isinf(g) & torch.isinf(e) & (g == e)
    diff = (g - e).abs()
    ok = (diff <= atol + rtol * e.abs()) | both_nan | same_inf
    if bool(ok.all()):
        return
    bad = ~ok
    diff = torch.where(bad & torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    rel = diff / e.abs().clamp_min(1e-300)
    n_bad, n = int(bad.sum()), bad.numel()
    order = torch.argsort(torch.where(bad, diff, torch.full_like(diff, -1.0)).reshape(-1),
                          descending=True)[: min(worst, n_bad)]
    points = []
    for flat_i in order.tolist():
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_i), g.shape)) if g.dim() else ()
        points.append(f"{list(idx)}: got {float(g.reshape(-1)[flat_i]):.9g}, "
                      f"expected {float(e.reshape(-1)[flat_i]):.9g}")
    fail(clause,
         f"{what}: {n_bad} of {n} elements differ beyond atol={atol:g}, rtol={rtol:g}; "
         f"max |abs diff| = {float(diff[bad].max()):.3g}, max |rel diff| = {float(rel[bad].max()):.3g}; "
         f"worst: " + "; ".join(points),
         **inputs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integers with the same bit patterns, so that -0.0 != 0.0 and NaN payloads count."""
    if t.dtype.is_floating_point:
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def assert_identical(clause: str, what: str, got: Any, expected: torch.Tensor, *, worst: int = 3,
                     **inputs: Any) -> None:
    """Raise unless ``got`` has ``expected``'s type, dtype and shape and the same bits everywhere; the
    message names how many of how many elements differ and the first ones (index, got, expected)."""
    if not isinstance(got, torch.Tensor):
        fail(clause, f"{what}: returned {type(got).__name__}, expected a tensor", **inputs)
    if got.dtype != expected.dtype or tuple(got.shape) != tuple(expected.shape):
        fail(clause, f"{what}: shape {tuple(got.shape)} dtype {got.dtype}, expected "
                     f"{tuple(expected.shape)} {expected.dtype}", **inputs)
    g, e = got.detach().cpu(), expected.detach().cpu()
    bad = _bits(g) != _bits(e)
    if not bool(bad.any()):
        return
    idx = bad.nonzero()[:worst].tolist()
    points = "; ".join(f"{i}: got {g[tuple(i)].item()!r}, expected {e[tuple(i)].item()!r}" for i in idx)
    fail(clause, f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; first: {points}", **inputs)


def expect_rejection(clause: str, call: Callable[[], Any], *, names: Sequence[str],
                     mentions: Sequence[str] = (), what: str) -> None:
    """The call must raise ValueError/TypeError whose message names every string in ``names``
    (the argument) and ``mentions`` (expected and actual values)."""
    try:
        call()
    except (ValueError, TypeError) as err:
        msg = str(err)
        missing = [s for s in (*names, *mentions) if s not in msg]
        if missing:
            fail(clause, f"{what}: rejected, but the message does not mention {missing}: {msg!r}")
        return
    except Exception as err:  # noqa: BLE001 - any other exception type is itself the violation
        fail(clause, f"{what}: raised {type(err).__name__} ({err}), expected ValueError or TypeError")
    fail(clause, f"{what}: accepted silently, expected a ValueError/TypeError naming {list(names)}")


class HostSync(AssertionError):
    """A tensor was read back to the host inside :func:`no_host_sync`."""


HOST_READS = ("item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__")


@contextlib.contextmanager
def no_host_sync():
    """Fail on any tensor→host read inside the block (``.item()``, ``float(t)``, ``bool(t)``, a tensor used
    as an index, ``.tolist()``, ``.numpy()``, ``.cpu()``): on CPU, the observable stand-in for a CUDA
    device→host synchronization, so "fast paths never stall the GPU" is testable without a GPU."""
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def forbid(name):
        def raiser(self, *args, **kwargs):
            raise HostSync(f"Tensor.{name} read a tensor of shape {tuple(self.shape)} back to the host")
        return raiser

    try:
        for name in HOST_READS:
            setattr(torch.Tensor, name, forbid(name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)


# --------------------------------------------------------------------------------------------------
# Properties, contracts and the runner
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Property:
    clause: str
    check: Callable[..., None]
    strategy: st.SearchStrategy | None = None  # draws the ``case`` dict; None: a fixed check
    examples: tuple[dict, ...] = ()  # pinned edge cases, always run first
    requires: tuple[str, ...] = ()  # interface names the check calls
    max_examples: int | None = None  # cap for slow checks (statistical, interpreted kernels)


@dataclasses.dataclass(frozen=True)
class Contract:
    id: str
    clauses: Mapping[str, str]
    interface: tuple[str, ...]
    properties: tuple[Property, ...]

    def __post_init__(self) -> None:
        checked = {p.clause for p in self.properties}
        unknown = sorted(checked - set(self.clauses))
        unchecked = sorted(set(self.clauses) - checked)
        if unknown or unchecked:
            raise ValueError(f"contract {self.id}: properties name unknown clauses {unknown}; "
                             f"clauses without a property {unchecked}")


@dataclasses.dataclass(frozen=True)
class Outcome:
    clause: str
    status: str  # "pass" | "fail" | "missing"
    message: str = ""


def missing_names(impl: Any, names: Sequence[str]) -> list[str]:
    return [n for n in names if not callable(getattr(impl, n, None))]


def run_property(prop: Property, impl: Any, profile: str | None = None) -> Outcome:
    """Run one property against ``impl``; never raises for a violation, returns the outcome."""
    missing = missing_names(impl, prop.requires)
    if missing:
        return Outcome(prop.clause, "missing", f"implementation lacks {', '.join(missing)}")
    try:
        if prop.strategy is None:
            prop.check(impl)
        else:
            base = settings.get_profile(profile or default_profile())
            n = base.max_examples if prop.max_examples is None else min(base.max_examples,
                                                                          prop.max_examples)

            @settings(base, max_examples=n, report_multiple_bugs=False, database=None,
                      phases=[Phase.explicit, Phase.generate, Phase.shrink])
            @given(case=prop.strategy)
            def run(case: dict) -> None:
                prop.check(impl, **case)

            for ex in reversed(prop.examples):
                run = example(case=ex)(run)
            run()
    except ContractViolation as err:
        return Outcome(prop.clause, "fail", _with_notes(str(err), err))
    except Exception as err:  # noqa: BLE001 - a crash inside the implementation violates the clause
        return Outcome(prop.clause, "fail",
                       _with_notes(f"[{prop.clause}] raised {type(err).__name__}: {err}", err))
    return Outcome(prop.clause, "pass")


def _with_notes(message: str, err: BaseException) -> str:
    """Append Hypothesis's notes (the shrunk failing case and how to reproduce it)."""
    notes = [n.strip() for n in getattr(err, "__notes__", ()) if n.strip()]
    return message + ("\n  " + "\n  ".join(notes) if notes else "")


def run_contract(contract: Contract, impl: Any, profile: str | None = None) -> list[Outcome]:
    """Every clause of ``contract`` against ``impl``; a clause with several properties fails if any does."""
    by_clause: dict[str, Outcome] = {}
    for prop in contract.properties:
        out = run_property(prop, impl, profile)
        prev = by_clause.get(prop.clause)
        if prev is None or prev.status == "pass":
            by_clause[prop.clause] = out
    return [by_clause[c] for c in contract.clauses]


register_profiles()
