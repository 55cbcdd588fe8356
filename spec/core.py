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

import ast
import collections
import contextlib
import dataclasses
import functools
import inspect
import math
import os
import random
import re
import sys
import textwrap
import types
import zlib
from typing import Any, Callable, Mapping, Protocol, Sequence

import hypothesis
import torch
from hypothesis import HealthCheck, Phase, example, find, given, reject, reproduce_failure, settings
from hypothesis import strategies as st
from hypothesis.errors import DidNotReproduce, HypothesisException, InvalidArgument, Unsatisfiable
from hypothesis.reporting import with_reporter

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
    # derandomize=False stated: under a CI variable Hypothesis loads its own derandomized profile,
    # which a profile registered without it would inherit
    "dev": dict(max_examples=200, derandomize=False, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow]),
    "nightly": dict(max_examples=2000, derandomize=False, deadline=None, print_blob=True,
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
# What kind of failure a violation is, from most to least severe for a user of the implementation.
WRONG = "wrong"  # a wrong value (or a result the check cannot even read: wrong type or shape)
ACCEPTED = "accepted"  # bad input accepted silently
WEAK = "weak"  # bad input rejected, but with another exception type or a message not naming the argument
CRASHED = "crashed"  # an unexpected exception inside the implementation, or it ended the checking process
HANG = "hang"  # no progress within the per-example deadline (an endless loop, a deadlock)
MUTATED = "mutated"  # the implementation changed one of its input tensors in place
KINDS = {WRONG: "wrong value", ACCEPTED: "bad input accepted", WEAK: "weak rejection", CRASHED: "crashed",
         HANG: "hang", MUTATED: "changed an input in place"}


class ContractViolation(AssertionError):
    """A clause does not hold. ``str(exc)`` starts with ``[CLAUSE-ID]``; ``kind`` is one of :data:`KINDS`."""

    def __init__(self, clause: str, message: str, kind: str = WRONG):
        super().__init__(f"[{clause}] {message}")
        self.clause, self.kind = clause, kind


def fail(clause: str, message: str, **inputs: Any) -> None:
    raise ContractViolation(clause, message + _format_inputs(inputs))


def describe(value: Any, max_items: int = 6) -> str:
    """A compact rendering of a value for messages: a tensor shows its shape, dtype, the range of its
    finite values and how many are NaN/inf, and at most ``max_items`` values; containers recurse."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1).cpu()
        parts = [f"shape={tuple(value.shape)}", f"dtype={str(value.dtype).removeprefix('torch.')}"]
        if value.device.type != "cpu":
            parts.append(f"device={value.device}")
        if flat.numel() == 0:
            return f"tensor({', '.join(parts)}, empty)"
        if flat.numel() > max_items and flat.dtype == torch.bool:
            parts.append(f"{int(flat.sum())} True")
        elif flat.numel() > max_items and not flat.is_complex():
            finite = flat[torch.isfinite(flat)] if flat.is_floating_point() else flat
            if finite.numel():
                parts.append(f"min={_fmt_scalar(finite.min().item())}, max={_fmt_scalar(finite.max().item())}")
            if flat.is_floating_point():
                n_nan, n_inf = int(torch.isnan(flat).sum()), int(torch.isinf(flat).sum())
                parts += [f"{n} {what}" for n, what in ((n_nan, "NaN"), (n_inf, "inf")) if n]
        shown = ", ".join(_fmt_scalar(v) for v in flat[:max_items].tolist())
        more = f", ... {flat.numel() - max_items} more" if flat.numel() > max_items else ""
        return f"tensor({', '.join(parts)}, values=[{shown}{more}])"
    if isinstance(value, float):
        return _fmt_scalar(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v, max_items)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.Tensor, dict, list, tuple)) for v in value):
        items = [describe(v, max_items) for v in value[:max_items]]
        more = [f"... {len(value) - max_items} more"] if len(value) > max_items else []
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        return open_ + ", ".join(items + more) + close
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + f"... ({len(text)} characters)"


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
    rel = torch.where((e == 0) | torch.isinf(diff), math.inf, diff / e.abs())  # vs 0, or an infinite miss: inf
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


def named_grads(loss: torch.Tensor, wrt: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """{name: ∂loss/∂x} for each named tensor of ``wrt``; zeros where no path exists (also when the loss
    carries no graph at all), so a dropped path compares as a zero gradient."""
    xs = list(wrt.values())
    grads = torch.autograd.grad(loss, xs, allow_unused=True) if loss.requires_grad else [None] * len(xs)
    return {k: torch.zeros_like(x) if g is None else g for (k, x), g in zip(wrt.items(), grads)}


def assert_grads_close(clause: str, what: str, got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor],
                       *, atol: float = 1e-5, rtol: float = 1e-4, **inputs: Any) -> None:
    """Gradient parity: the same names, and each ∂ within ``atol``·max(1, max|want|) + ``rtol``·|want| of the
    oracle's (a backward that drops or reroutes a path fails although the loss values agree)."""
    if set(got) != set(want):
        fail(clause, f"{what}: gradients w.r.t. {sorted(got)}, expected {sorted(want)}", **inputs)
    for name, w in want.items():
        scale = max(1.0, float(w.detach().abs().max())) if w.numel() else 1.0
        assert_close(clause, f"{what}: ∂/∂{name}", got[name], w, atol=atol * scale, rtol=rtol, **inputs)


def expect_rejection(clause: str, call: Callable[[], Any], *, names: Sequence[str],
                     mentions: Sequence[str] = (), what: str) -> None:
    """The call must raise ValueError/TypeError whose message names every string in ``names``
    (the argument) and ``mentions`` (expected and actual values). Accepting the input is an
    :data:`ACCEPTED` violation; rejecting it any other way a :data:`WEAK` one."""
    try:
        call()
    except (ValueError, TypeError) as err:
        msg = str(err)
        missing = [s for s in (*names, *mentions) if s not in msg]
        if missing:
            raise ContractViolation(clause, f"{what}: rejected with {type(err).__name__}, but the message does not "
                                            f"mention {missing}: {msg!r}", WEAK) from None
        return
    except Exception as err:  # noqa: BLE001 - any other exception type is itself the violation
        raise ContractViolation(clause, f"{what}: raised {type(err).__name__} ({err}), expected ValueError or "
                                        f"TypeError naming {list(names)}", WEAK) from None
    raise ContractViolation(clause, f"{what}: accepted silently, expected a ValueError/TypeError naming "
                                    f"{list(names)}", ACCEPTED)


class InputChanged(AssertionError):
    """A function of the implementation wrote into one of its input tensors (the check's expectations, computed
    from the inputs, would be computed from the clobbered values); or it returned a foreign array type."""

    def __init__(self, message: str, kind: str = MUTATED):
        super().__init__(message)
        self.kind = kind


def _tensors(value: Any, where: str):
    """(where, tensor) for ``value`` itself or the tensors one level inside a list, tuple or dict."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                yield f"{where}[{i}]", v
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, torch.Tensor):
                yield f"{where}[{k!r}]", v


def _foreign(value: Any) -> str | None:
    """The type name of a numpy or JAX array (or scalar) in a result where the interfaces return torch tensors."""
    for v in (value if isinstance(value, tuple) else (value,)):
        module = type(v).__module__ or ""
        if module.split(".")[0] in ("numpy", "jax", "jaxlib") and hasattr(v, "dtype"):
            return f"{module.split('.')[0]}.{type(v).__name__}"
    return None


OUTPUT_ARGS = ("out", "final_out")  # arguments an interface writes into by design


def _guarded(fn: Callable, name: str, writes: Sequence[str]) -> Callable:
    """``fn`` checked at every call: no input tensor changed in place (but the arguments in ``writes`` and
    OUTPUT_ARGS), no numpy / JAX array returned."""
    signature = None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        pass
    written = (*OUTPUT_ARGS, *writes)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs).arguments if signature else dict(enumerate(args), **kwargs)
        except TypeError:
            bound = dict(enumerate(args), **kwargs)
        before = [(f"'{arg}'" + where[len(str(arg)):], t, t.detach().clone())
                  for arg, value in bound.items() if arg not in written
                  for where, t in _tensors(value, str(arg)) if not t.is_sparse]
        result = fn(*args, **kwargs)
        for where, t, copy in before:
            if t.shape != copy.shape or not torch.equal(_bits(t.detach()), _bits(copy)):
                raise InputChanged(f"{name} changed its argument {where} in place (a caller's rollout is clobbered, "
                                   "and the expected values are computed from the inputs as given): work on a copy")
        foreign = _foreign(result)
        if foreign:
            raise InputChanged(f"{name} returned a {foreign}, where the interface returns torch tensors", WRONG)
        return result

    return call


class Guarded:
    """The implementation as the properties see it: its functions wrapped by :func:`_guarded`; classes,
    instances and constants passed through as they are. ``writes``: function -> the arguments it writes into
    by design (a contract's ``writes``)."""

    def __init__(self, impl: Any, writes: Mapping[str, Sequence[str]] | None = None):
        self._impl, self._writes = impl, dict(writes or {})

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._impl, name)
        if callable(attr) and not isinstance(attr, type) and (inspect.isfunction(attr) or inspect.ismethod(attr)
                                                               or hasattr(attr, "__wrapped__")):
            return _guarded(attr, name, self._writes.get(name, ()))
        return attr


class HostSync(AssertionError):
    """A tensor was read back to the host inside :func:`no_host_sync`."""


HOST_READS = ("item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__", "nonzero")
HOST_BUILDS = ("tensor", "as_tensor", "asarray")  # torch.<name>(host data, device=...)


def _index_syncs(index) -> str | None:
    """Why indexing with ``index`` synchronizes on CUDA, or None: a 0-d integer tensor is read back with
    ``.item()``; a boolean mask needs the count of its true entries (``nonzero``) to size the result."""
    for part in index if isinstance(index, tuple) else (index,):
        if isinstance(part, torch.Tensor) and part.dtype == torch.bool:
            return f"a boolean mask of shape {tuple(part.shape)} used as an index (nonzero on the host)"
        if isinstance(part, torch.Tensor) and part.dim() == 0 and not part.is_floating_point():
            return "a 0-d integer tensor used as an index (read back with .item())"
    return None


@contextlib.contextmanager
def no_host_sync():
    """Fail on what synchronizes a CUDA device with the host, done inside the block: a tensor read back
    (``.item()``, ``float(t)``, ``bool(t)``, ``.tolist()``, ``.numpy()``, ``.cpu()``, ``nonzero``), a 0-d
    integer tensor or a boolean mask used as an index, and a tensor built from host data for an explicit
    device (``torch.tensor(x, device=d)``: on CUDA a blocking copy from pageable memory; ``torch.full`` is
    not). On CPU this is the observable stand-in for a CUDA synchronization, so "fast paths never stall the
    GPU" is testable without a GPU; on CUDA ``torch.cuda.set_sync_debug_mode("error")`` is the real check."""
    saved = {name: getattr(torch.Tensor, name) for name in (*HOST_READS, "__getitem__", "__setitem__")}
    built = {name: getattr(torch, name) for name in HOST_BUILDS}

    def forbid(name):
        def raiser(self, *args, **kwargs):
            raise HostSync(f"Tensor.{name} read a tensor of shape {tuple(self.shape)} back to the host")
        return raiser

    def indexing(name):
        def checked(self, index, *args):
            why = _index_syncs(index)
            if why:
                raise HostSync(f"Tensor.{name}: {why}")
            return saved[name](self, index, *args)
        return checked

    def building(name):
        def checked(data, *args, **kwargs):
            if kwargs.get("device") is not None and not isinstance(data, torch.Tensor):
                raise HostSync(f"torch.{name} built a tensor from host data ({type(data).__name__}) for "
                               f"device={kwargs['device']}: a blocking copy on CUDA (torch.full takes a scalar)")
            return built[name](data, *args, **kwargs)
        return checked

    try:
        for name in HOST_READS:
            setattr(torch.Tensor, name, forbid(name))
        for name in ("__getitem__", "__setitem__"):
            setattr(torch.Tensor, name, indexing(name))
        for name in HOST_BUILDS:
            setattr(torch, name, building(name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)
        for name, fn in built.items():
            setattr(torch, name, fn)


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


def per_function(clause: str, check: Callable[..., None], names: Sequence[str],
                 strategy: st.SearchStrategy | None = None, examples: tuple[dict, ...] = (),
                 max_examples: int | None = None) -> tuple[Property, ...]:
    """One property per interface name for a clause that states the same thing of several functions:
    ``check(impl, fn=name, **case)``. An implementation lacking some of them gets partial credit (the parts
    it has are checked; run_contract reports the clause PARTIAL), not a clause lost as a block."""
    return tuple(Property(clause, functools.partial(check, fn=name), strategy, examples, (name,), max_examples)
                 for name in names)


# --------------------------------------------------------------------------------------------------
# Categories and versions
# --------------------------------------------------------------------------------------------------
MATHS, ROBUSTNESS, VALIDATION = "maths", "robustness", "validation"
CATEGORIES = {
    MATHS: "values the published formula determines on valid, finite inputs (identities, isolation, shapes, "
           "dtypes, documented defaults, gradients)",
    ROBUSTNESS: "what the kit asks beyond the literal formula: overflow, NaN/inf isolation, extreme inputs, "
                "numerical stability, returned state that is a copy; each clause says what the literal formula "
                "gives there and why the kit asks more",
    VALIDATION: "bad input rejected before any work, naming the argument (and the expected and actual value)",
}


def by_category(**clauses: Sequence[str]) -> dict[str, str]:
    """``by_category(maths=("GAE-1", ...), validation=(...))`` -> {clause: category}."""
    unknown = sorted(set(clauses) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"by_category: unknown categories {unknown}; expected {list(CATEGORIES)}")
    out: dict[str, str] = {}
    for category, ids in clauses.items():
        for clause in ids:
            if clause in out:
                raise ValueError(f"by_category: clause {clause} is in both {out[clause]} and {category}")
            out[clause] = category
    return out


def parse_version(text: str) -> tuple[int, int]:
    """'MAJOR.MINOR' (or 'MAJOR') -> (major, minor); a ValueError naming the text otherwise."""
    parts = str(text).split(".")
    if not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"a contract version is 'MAJOR.MINOR' (e.g. '1.0'), got {text!r}")
    return int(parts[0]), int(parts[1]) if len(parts) == 2 else 0


@dataclasses.dataclass(frozen=True)
class Change:
    """One line of a contract's changelog. A clause added is a minor version, a clause made stricter or
    otherwise changed (or removed) a major one: ``added`` / ``changed`` name the clauses."""
    version: str
    text: str
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


FIRST_RELEASE = (Change("1.0", "first versioned release"),)


@dataclasses.dataclass(frozen=True)
class Contract:
    id: str
    clauses: Mapping[str, str]
    interface: tuple[str, ...]
    properties: tuple[Property, ...]
    # Optional: interface name -> its signature (arguments with shapes and defaults; for a class the
    # constructor, the attributes it must have and its methods), shown by `rlspec list CONTRACT` and in a
    # MISSING outcome. signatures_from_text() builds it from the INTERFACE text.
    signatures: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # clause -> one of CATEGORIES (every clause has one); build it with by_category(...)
    categories: Mapping[str, str] = dataclasses.field(default_factory=dict, kw_only=True)
    # clause -> why the kit asks this: required for every robustness clause (what the literal formula gives
    # and why the kit asks more) and for a clause that every shipped third-party adapter fails on values
    rationale: Mapping[str, str] = dataclasses.field(default_factory=dict, kw_only=True)
    # the changelog, oldest first; the last entry's version is the contract's version
    changes: tuple[Change, ...] = dataclasses.field(default=FIRST_RELEASE, kw_only=True)
    # interface function -> the arguments it writes into by design (every other input tensor of a function must
    # come back unchanged: spec.core.Guarded)
    writes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, kw_only=True)

    def __post_init__(self) -> None:
        checked = {p.clause for p in self.properties}
        unknown = sorted(checked - set(self.clauses))
        unchecked = sorted(set(self.clauses) - checked)
        if unknown or unchecked:
            raise ValueError(f"contract {self.id}: properties name unknown clauses {unknown}; "
                             f"clauses without a property {unchecked}")
        uncategorized = [c for c in self.clauses if c not in self.categories]
        stray = sorted(set(self.categories) - set(self.clauses))
        if uncategorized or stray:
            raise ValueError(f"contract {self.id}: clauses without a category {uncategorized}; categories of "
                             f"unknown clauses {stray}")
        unexplained = [c for c, k in self.categories.items() if k == ROBUSTNESS and not self.rationale.get(c)]
        if unexplained:
            raise ValueError(f"contract {self.id}: robustness clauses without a rationale {unexplained}")
        versions = [parse_version(c.version) for c in self.changes]
        if not versions or versions != sorted(set(versions)):
            raise ValueError(f"contract {self.id}: changes must be non-empty, oldest first, one per version; "
                             f"got {[c.version for c in self.changes]}")
        named = {c for change in self.changes for c in (*change.added, *change.changed)}
        if named - set(self.clauses):
            raise ValueError(f"contract {self.id}: changes name unknown clauses {sorted(named - set(self.clauses))}")

    @property
    def version(self) -> str:
        return self.changes[-1].version

    def since(self, clause: str) -> str:
        """The version that added ``clause`` (the first version for a clause there from the start)."""
        return next((c.version for c in self.changes if clause in c.added), self.changes[0].version)


def signatures_from_text(text: str) -> dict[str, str]:
    """Split an INTERFACE text into one entry per name: a line starting in column 0 with an identifier
    opens the entry for that name; indented lines continue it."""
    entries: dict[str, str] = {}
    name = None
    for line in textwrap.dedent(text).splitlines():
        head = re.match(r"[A-Za-z_]\w*", line)
        if head:
            name = head.group()
            entries[name] = (entries[name] + "\n" if name in entries else "") + line.rstrip()
        elif name and line.strip():
            entries[name] += "\n" + line.rstrip()
    return entries


def interface_text(module: types.ModuleType) -> str:
    """The string literal right after ``INTERFACE = ...`` in a contract module's source, or ''."""
    body = ast.parse(inspect.getsource(module)).body
    for stmt, nxt in zip(body, body[1:]):
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "INTERFACE" for t in stmt.targets) \
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                and isinstance(nxt.value.value, str):
            return nxt.value.value
    return ""


@dataclasses.dataclass(frozen=True)
class Outcome:
    clause: str
    status: str  # "pass" | "fail" | "missing" | "partial" (some parts missing, the rest passed) | "unsupported"
    message: str = ""
    kind: str = ""  # for "fail": one of KINDS (of the failing example shown)
    tried: int = 0  # examples checked
    failed: int = 0  # of which failed
    kinds: Mapping[str, int] = dataclasses.field(default_factory=dict)  # failed examples by kind
    unsupported: int = 0  # examples skipped because the user declared them unsupported
    case: str = ""  # the failing example (the smallest Hypothesis found), compact
    reproduce: tuple[str, ...] = ()  # `rlspec check` options that replay the failing example


class Unsupported(Protocol):
    """What a user declared unsupported (rlspec/unsupported.py reads it from a file)."""

    def clause(self, clause: str) -> str | None: ...  # the rule, if the whole clause is unsupported
    def case(self, clause: str, case: Mapping[str, Any]) -> str | None: ...  # the rule matching this case


class ReproduceError(ValueError):
    """A replay token that is damaged or belongs to another contract, clause or Hypothesis version."""


def make_token(contract_id: str, clause: str, part: int, blob: str) -> str:
    """The replay token of one failing example: which contract, clause and property of the clause (``part``,
    for a clause with several) it belongs to, Hypothesis's blob and a checksum, 'gae:GAE-3:0:AXic...:1a2b3c4d'."""
    body = f"{contract_id}:{clause}:{part}:{blob}"
    return f"{body}:{zlib.crc32(body.encode()):08x}"


def token_contract(token: str) -> str:
    """The contract a replay token belongs to; a ReproduceError if it is not a whole token rlspec printed."""
    fields = token.strip().split(":")
    body = ":".join(fields[:-1])
    if len(fields) != 5 or f"{zlib.crc32(body.encode()):08x}" != fields[-1]:
        raise ReproduceError(f"--reproduce {token!r} is not a replay token rlspec printed (or it was cut or edited): "
                             "copy the whole token from the reproduce line")
    return fields[0]


def read_token(token: str, contract: Contract) -> tuple[str, int, str]:
    """(clause, part, blob) of a token made by :func:`make_token` for ``contract``; a ReproduceError saying what is
    wrong otherwise (damaged, cut, another contract, a clause or part the contract does not have)."""
    contract_id = token_contract(token)
    _, clause, part, blob, _ = token.strip().split(":")
    if contract_id != contract.id:
        raise ReproduceError(f"--reproduce: the token replays an example of contract {contract_id!r}, not "
                             f"{contract.id!r}: run `rlspec check {contract_id} ... --reproduce TOKEN`")
    parts = [p for p in contract.properties if p.clause == clause]
    if not part.isdigit() or int(part) >= len(parts):
        raise ReproduceError(f"--reproduce: {contract.id} has no clause {clause} part {part} (this token comes "
                             "from another rlspec version)")
    return clause, int(part), blob


def missing_names(impl: Any, names: Sequence[str]) -> list[str]:
    return [n for n in names if not callable(getattr(impl, n, None))]


class _Trial:
    """Runs one property's check example by example, counting what happens; never raises for a failure."""

    def __init__(self, prop: Property, impl: Any, unsupported: Unsupported | None):
        self.prop, self.impl, self.unsupported = prop, impl, unsupported
        self.tried = self.skipped = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.first: tuple[BaseException, dict] | None = None  # the first failure and its case
        self.last: tuple[BaseException, dict] | None = None  # the latest (after shrinking, the smallest)

    def __call__(self, case: dict) -> BaseException | None:
        """The check's error on ``case``, if any; a case declared unsupported is skipped and rejected, so
        that Hypothesis draws another in its place."""
        if self.unsupported is not None and self.unsupported.case(self.prop.clause, case):
            self.skipped += 1
            reject()
        self.tried += 1
        try:
            self.prop.check(self.impl, **case)
        except HypothesisException:  # the check itself discarded the case (reject/assume): not tried
            self.tried -= 1
            raise
        except Exception as err:  # noqa: BLE001 - every failure is counted and classified
            self.kinds[failure_kind(err, self.impl, self.prop.requires)] += 1
            self.first = self.first or (err, case)
            self.last = (err, case)
            return err
        return None

    def raising(self, case: dict) -> None:
        err = self(case)
        if err is not None:
            raise err

    def outcome(self, counts: _Trial, flags: tuple[str, ...], note: str = "") -> Outcome:
        """The failing outcome for this trial's last failure, with ``counts``' tallies."""
        err, case = self.last
        return Outcome(self.prop.clause, "fail", failure_message(self.prop.clause, err, self.impl,
                                                                 self.prop.requires) + note,
                       failure_kind(err, self.impl, self.prop.requires), counts.tried,
                       sum(counts.kinds.values()), dict(counts.kinds), counts.skipped,
                       describe_case(case), flags)

    def passed(self, message: str = "") -> Outcome:
        return Outcome(self.prop.clause, "unsupported" if self.skipped and not self.tried else "pass", message,
                       tried=self.tried, unsupported=self.skipped)


def run_property(prop: Property, impl: Any, profile: str | None = None, *,
                 unsupported: Unsupported | None = None, seed: int | None = None,
                 reproduce: str | None = None, writes: Mapping[str, Sequence[str]] | None = None) -> Outcome:
    """Run one property against ``impl``; never raises for a violation, returns the outcome.

    Every example runs (pinned ones first) and failures are counted by kind; if any failed, a second
    run shows the first failing pinned example, or else lets Hypothesis shrink the drawn failure to the
    smallest it finds, whose ``reproduce`` blob replays it.
    ``unsupported`` skips the clause or the cases the user declared unsupported; ``seed`` fixes the
    draws of a profile that is not derandomized; ``reproduce`` replays one blob instead. The implementation's
    functions are guarded (:class:`Guarded`): an input tensor changed in place, other than those in ``writes``
    (the contract's), or a numpy array returned is a failure of its own.
    """
    missing = missing_names(impl, prop.requires)
    if missing:
        return Outcome(prop.clause, "missing", f"implementation lacks {', '.join(missing)}")
    impl = impl if isinstance(impl, Guarded) else Guarded(impl, writes)
    rule = unsupported.clause(prop.clause) if unsupported is not None else None
    if rule:
        return Outcome(prop.clause, "unsupported", f"declared unsupported: {rule}")
    if prop.strategy is None:  # a fixed check: no case to declare unsupported
        counts = _Trial(prop, impl, None)
        counts({})
        return counts.outcome(counts, ("--clause", prop.clause)) if counts.last else counts.passed()

    counts = _Trial(prop, impl, unsupported)
    profile = profile or default_profile()
    base = settings.get_profile(profile)
    if not base.derandomize and seed is None:
        seed = random.randrange(2**32)
    flags = ("--clause", prop.clause, "--profile", profile) + (() if seed is None else ("--seed", str(seed)))
    try:
        with with_reporter(lambda _: None):  # Hypothesis would print the failing case in full
            if reproduce is not None:
                return _replay(prop, counts, base, seed, reproduce, flags)
            try:
                _given(prop, counts, base, seed)()
            except Unsatisfiable:
                if not counts.skipped:  # the check discarded every case itself: nothing was checked
                    raise
                # else every case drawn was declared unsupported
            if not counts.last:
                return counts.passed()
            shrunk = _Trial(prop, impl, unsupported)
            try:  # the first failing pinned example, else the drawn failure shrunk
                _given(prop, shrunk.raising, base, seed)()
            except Exception as err:  # noqa: BLE001 - the failure found again, shrunk
                if shrunk.last is not None and not isinstance(err, HypothesisException):
                    blob = _blob(err)
                    return shrunk.outcome(counts, flags + (("--reproduce", blob) if blob else ()))
            counts.last = counts.first  # not found again: the implementation is not deterministic
            return counts.outcome(counts, flags, " (flaky: this example passed when run again)")
    except HypothesisException as err:
        return Outcome(prop.clause, "fail", f"[{prop.clause}] the property could not run: {type(err).__name__}: {err}",
                       WRONG, counts.tried, sum(counts.kinds.values()), dict(counts.kinds), counts.skipped)


def _given(prop: Property, body: Callable[[dict], Any], base: settings, seed: int | None,
           blob: str | None = None) -> Callable[[], None]:
    n = base.max_examples if prop.max_examples is None else min(base.max_examples, prop.max_examples)

    @settings(base, max_examples=n, report_multiple_bugs=False, database=None, print_blob=True,
              phases=[Phase.explicit, Phase.generate, Phase.shrink],
              suppress_health_check=[*base.suppress_health_check, HealthCheck.filter_too_much])
    @given(case=prop.strategy)
    def run(case: dict) -> None:
        body(case)

    if blob is not None:
        return reproduce_failure(hypothesis.__version__, blob.encode())(run)
    for ex in reversed(prop.examples):
        run = example(case=ex)(run)
    return run if seed is None else hypothesis.seed(seed)(run)


def _replay(prop: Property, trial: _Trial, base: settings, seed: int | None, blob: str,
            flags: tuple[str, ...]) -> Outcome:
    try:
        _given(prop, trial.raising, base, seed, blob)()
    except DidNotReproduce:
        return trial.passed("the example given by --reproduce passes")
    except InvalidArgument as err:
        raise ReproduceError(f"--reproduce {blob!r} cannot be replayed for {prop.clause}: {err}") from None
    except Exception:  # noqa: BLE001 - the replayed failure
        if trial.last is not None:
            return trial.outcome(trial, flags + ("--reproduce", blob))
        raise
    return trial.passed()


def _blob(err: BaseException) -> str | None:
    """The reproduce_failure blob from Hypothesis's notes on a failure, if it printed one."""
    for note in getattr(err, "__notes__", ()):
        found = re.search(r"@reproduce_failure\('[^']*', b'([^']*)'\)", note)
        if found:
            return found.group(1)
    return None


def failure_kind(err: BaseException, impl: Any, names: Sequence[str]) -> str:
    """:data:`CRASHED` when an exception other than a violation came out of the implementation's code;
    an exception raised by the check itself means it could not read the result: a wrong value."""
    if isinstance(err, (ContractViolation, InputChanged)):
        return err.kind
    if isinstance(err, HostSync):
        return WRONG
    return CRASHED if _raised_in(err, _impl_files(impl, names)) else WRONG


MAX_MESSAGE = 2000  # characters of a failure message; a longer one (a whole tensor printed) is cut


def failure_message(clause: str, err: BaseException, impl: Any, names: Sequence[str]) -> str:
    if isinstance(err, ContractViolation):
        text = str(err)
    elif isinstance(err, (HostSync, InputChanged)):
        text = f"[{clause}] {err}"
    elif where := _raised_in(err, _impl_files(impl, names)):
        text = f"[{clause}] raised {type(err).__name__}: {err} (at {where})"
    else:
        text = f"[{clause}] the check could not read the result: {type(err).__name__}: {err}"
    if len(text) <= MAX_MESSAGE:
        return text
    cut = len(text) - MAX_MESSAGE
    return f"{text[:MAX_MESSAGE - 500]} [... {cut} characters cut ...] {text[-500:]}"


def describe_case(case: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={describe(v, max_items=4)}" for k, v in case.items())


def case_keys(prop: Property) -> tuple[str, ...]:
    """The names in the ``case`` dicts a property draws (from its pinned examples and one drawn case):
    what a condition in an unsupported file can test."""
    if prop.strategy is None:
        return ()
    keys = {k: None for ex in prop.examples for k in ex}
    drawn = find(prop.strategy, lambda _: True, settings=settings(database=None, max_examples=1,
                                                                 phases=[Phase.generate]))
    return tuple(dict.fromkeys([*keys, *drawn]))


def _impl_files(impl: Any, names: Sequence[str]) -> set[str]:
    """The source files of ``impl``'s module and of the classes/functions it provides under ``names``."""
    inner = impl
    while hasattr(inner, "_impl") and not isinstance(inner, type):  # Guarded, registry.OnDevice wrap the module
        inner = inner._impl
    objects = [inner, *(getattr(inner, n, None) for n in names)]
    files = set()
    for obj in objects:
        for o in (obj.__mro__ if isinstance(obj, type) else (obj,)):
            module = o if isinstance(o, types.ModuleType) else sys.modules.get(getattr(o, "__module__", None) or "")
            path = getattr(module, "__file__", None)
            if path:
                files.add(os.path.realpath(path))
    return files


def _raised_in(err: BaseException, files: set[str]) -> str:
    """'file.py:LINE in function' of the innermost traceback frame in ``files``, or ''."""
    where = ""
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if os.path.realpath(code.co_filename) in files:
            where = f"{os.path.basename(code.co_filename)}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return where


def run_contract(contract: Contract, impl: Any, profile: str | None = None, *,
                 clauses: Sequence[str] | None = None, unsupported: Unsupported | None = None,
                 seed: int | None = None, reproduce: str | None = None) -> list[Outcome]:
    """Every clause of ``contract`` (or only ``clauses``) against ``impl``, one outcome per clause
    (:func:`clause_outcome` joins a clause's properties); ``reproduce``, a token from a reproduce line, replays
    that one example instead (ReproduceError if it is not one of this contract's)."""
    replay = read_token(reproduce, contract) if reproduce is not None else None
    by_clause: dict[str, list[tuple[Property, Outcome]]] = {}
    parts: collections.Counter[str] = collections.Counter()
    for prop in contract.properties:
        part = parts[prop.clause]
        parts[prop.clause] += 1
        if clauses is not None and prop.clause not in clauses:
            continue
        if replay is not None and (prop.clause, part) != replay[:2]:
            continue
        out = run_property(prop, impl, profile, unsupported=unsupported, seed=seed,
                           reproduce=replay[2] if replay else None, writes=contract.writes)
        out = _with_token(out, contract.id, part)
        if out.status == "missing":
            expected = [contract.signatures[n] for n in missing_names(impl, prop.requires) if n in contract.signatures]
            out = dataclasses.replace(out, message=out.message + "".join(f"; expected {e}" for e in expected))
        by_clause.setdefault(prop.clause, []).append((prop, out))
    return [clause_outcome(by_clause[c]) for c in contract.clauses if c in by_clause]


def _with_token(out: Outcome, contract_id: str, part: int) -> Outcome:
    """``out`` with the blob of its reproduce flags bound into a replay token (contract, clause, part)."""
    flags = list(out.reproduce)
    if "--reproduce" not in flags:
        return out
    i = flags.index("--reproduce") + 1
    flags[i] = make_token(contract_id, out.clause, part, flags[i])
    return dataclasses.replace(out, reproduce=tuple(flags))


def clause_outcome(parts: Sequence[tuple[Property, Outcome]]) -> Outcome:
    """One clause's outcome from its properties': the first failure; else, when some properties could not run
    because a name is missing while others ran, PARTIAL (which names ran, which are missing); else missing or
    unsupported when every property is, else a pass counting every property's examples."""
    outcomes = [o for _, o in parts]
    failed = next((o for o in outcomes if o.status == "fail"), None)
    if failed is not None:
        return failed
    missing = [(p, o) for p, o in parts if o.status == "missing"]
    ran = [(p, o) for p, o in parts if o.status != "missing"]
    if missing and ran:
        names = lambda group: ", ".join(dict.fromkeys(n for p, _ in group for n in p.requires))  # noqa: E731
        tried = sum(o.tried for _, o in ran)
        return Outcome(outcomes[0].clause, "partial", f"checked {names(ran)} ({tried} examples passed); not "
                       f"checked: {'; '.join(o.message for _, o in missing)}", tried=tried,
                       unsupported=sum(o.unsupported for _, o in ran))
    if all(o.status == outcomes[0].status for o in outcomes) and outcomes[0].status != "pass":
        return outcomes[0]  # missing, or declared unsupported, as a whole
    return Outcome(outcomes[0].clause, "pass", tried=sum(o.tried for o in outcomes),
                   unsupported=sum(o.unsupported for o in outcomes))


register_profiles()
