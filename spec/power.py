"""Checks shared by the clauses added for conformance power: the gaps automated mutants of
reference/ slipped through, as classes rather than instances.

* :func:`same_with_defaults`: calling with documented defaults omitted equals calling with the documented
  values (the runtime half's constants) passed explicitly, bit for bit;
* :func:`global_rng_untouched`: a call leaves the caller's global RNG streams (torch, numpy, random) as
  they were;
* :func:`assert_same_values`: nested results (tensors, numbers, dicts, lists, tuples) compared bit for bit.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Mapping

import numpy as np
import torch

from rlspec.spec.core import assert_identical, fail


def assert_same_values(clause: str, what: str, got: Any, expected: Any, **inputs: Any) -> None:
    """``got`` and ``expected`` have the same structure and the same bits (tensors: dtype, shape and every
    element; numbers: equal, NaN matching NaN)."""
    if isinstance(expected, torch.Tensor):
        assert_identical(clause, what, got, expected, **inputs)
    elif isinstance(expected, Mapping):
        if not isinstance(got, Mapping) or set(got) != set(expected):
            fail(clause, f"{what}: keys {sorted(got) if isinstance(got, Mapping) else type(got).__name__}, "
                         f"expected {sorted(expected)}", **inputs)
        for k in expected:
            assert_same_values(clause, f"{what}[{k!r}]", got[k], expected[k], **inputs)
    elif isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            fail(clause, f"{what}: {got!r}, expected {len(expected)} items", **inputs)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same_values(clause, f"{what}[{i}]", g, e, **inputs)
    elif isinstance(expected, float) and expected != expected:
        if not (isinstance(got, float) and got != got):
            fail(clause, f"{what}: {got!r}, expected NaN", **inputs)
    elif got != expected or type(got) is not type(expected):
        fail(clause, f"{what}: {got!r}, expected {expected!r}", **inputs)


def same_with_defaults(clause: str, what: str, run: Callable[[dict], Any], defaults: Mapping[str, Any],
                       **inputs: Any) -> None:
    """``run(kwargs)`` calls the implementation with ``kwargs`` added to the case's explicit arguments
    and returns what to compare: with the documented defaults omitted (``{}``) and passed explicitly
    (``defaults``), the results must be identical."""
    assert_same_values(clause, f"{what} with its defaults omitted vs passed explicitly ({dict(defaults)})",
                       run({}), run(dict(defaults)), **inputs)


def _rng_states() -> tuple:
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def global_rng_untouched(clause: str, what: str, call: Callable[[], Any]) -> Any:
    """Run ``call`` and fail if it drew from (or reseeded) the global torch, numpy or random stream."""
    torch_state, np_state, py_state = _rng_states()
    out = call()
    after = _rng_states()
    changed = [name for name, same in (
        ("torch (torch.get_rng_state)", torch.equal(torch_state, after[0])),
        ("numpy (np.random.get_state)", all(np.array_equal(a, b) for a, b in zip(np_state, after[1]))),
        ("random (random.getstate)", py_state == after[2])) if not same]
    if changed:
        fail(clause, f"{what} changed the caller's global RNG stream(s): {', '.join(changed)}; everything "
                     "random must come from the explicit generator")
    return out


def defaults_check(clause: str, fn_name: str, call: Callable[..., Any], params: tuple[str, ...],
                   defaults: Mapping[str, Any]) -> Callable[..., None]:
    """A check ``(impl, omitted, **case)``: ``call(impl, case, explicit_kwargs)`` with the parameters in
    ``omitted`` left out must equal the call passing ``defaults[p]`` for them; the other ``params`` are
    passed as the case has them."""

    def check(impl, omitted, **case):
        kept = {k: case[k] for k in params if k not in omitted}
        same_with_defaults(clause, f"{fn_name} ({', '.join(sorted(omitted))} omitted)",
                           lambda extra: call(impl, case, {**kept, **extra}),
                           {k: defaults[k] for k in sorted(omitted)})

    return check


def with_omitted(strategy, params: tuple[str, ...]):
    """Cases of ``strategy`` with ``omitted``: a non-empty subset of ``params`` (every one, half the time)."""
    from hypothesis import strategies as st

    subsets = st.one_of(st.just(frozenset(params)), st.frozensets(st.sampled_from(params), min_size=1))
    return st.builds(lambda case, omitted: dict(case, omitted=omitted), strategy, subsets)
