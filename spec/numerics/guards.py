"""Contract ``numerics`` (spec/numerics/__init__.py): Properties of the PPO ratio guard and the loss guard (NUM-13..15,
28)."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import (
    EVENTS,
    LOG_RATIO_CLAMP,
    RATIO_MAX,
    RATIO_MIN,
)
from rlspec.spec.core import (
    assert_close,
    fail,
)
from rlspec.spec.numerics._common import _eps, dtypes, seeds


# --------------------------------------------------------------------------------------------------
# Properties: PPO ratio guard and loss guard
# --------------------------------------------------------------------------------------------------
@st.composite
def log_prob_pairs(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    n = draw(st.integers(1, 40))
    old = -torch.rand(n, generator=g, dtype=torch.float64) * 5
    scale = draw(st.sampled_from([0.1, 3.0, 30.0]))
    new = old + scale * torch.randn(n, generator=g, dtype=torch.float64)
    if draw(st.booleans()):
        special = torch.tensor([math.nan, math.inf, -math.inf, 50.0, -50.0], dtype=torch.float64)
        idx = torch.randint(0, n, (min(n, 3),), generator=g)
        new[idx] = special[torch.randint(0, 5, idx.shape, generator=g)]
    return dict(new_log_prob=new.to(dtype), old_log_prob=old.to(dtype))


RATIO_EXAMPLES = (  # numerics note Test 5: 0.1 normal, ±50 clamp, NaN and Inf → 1
    dict(new_log_prob=torch.tensor([0.1, 50.0, -50.0, math.nan, math.inf, -math.inf, 21.0, 4.0]),
         old_log_prob=torch.zeros(8)),
    dict(new_log_prob=torch.tensor([52.0], dtype=torch.float64),  # numerics note: 50 − (−2) = 52 → 100
         old_log_prob=torch.tensor([-2.0], dtype=torch.float64)),
)


def _ratio_want(new, old):
    d = new.double() - old.double()
    finite = torch.isfinite(d)
    r = torch.where(finite, torch.exp(d.nan_to_num(0.0).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
                    .clamp(RATIO_MIN, RATIO_MAX), torch.ones_like(d))
    inside = finite & (d >= math.log(RATIO_MIN)) & (d <= math.log(RATIO_MAX))
    return d, finite, r, inside


def check_ratio(impl, new_log_prob, old_log_prob):
    new = new_log_prob.clone().requires_grad_(True)
    ratio, _ = impl.ratio_guard(new, old_log_prob)
    d, finite, want, inside = _ratio_want(new_log_prob, old_log_prob)
    e = _eps(new_log_prob.dtype)
    tol = 4 * e * (1 + d.nan_to_num(0.0).abs().clamp(max=LOG_RATIO_CLAMP))  # exp amplifies |Δ|·eps
    inputs = dict(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    assert_close("NUM-13", "ratio", ratio.detach(), want, atol=0.0, rtol=float(tol.max()), **inputs)
    ratio.sum().backward()
    grad = new.grad if new.grad is not None else torch.zeros_like(new)
    assert_close("NUM-13", "d ratio / d new_log_prob (ratio inside [0.01, 100], else 0)", grad,
                 torch.where(inside, want, torch.zeros_like(want)), atol=0.0, rtol=float(tol.max()), **inputs)


def check_ratio_events(impl, new_log_prob, old_log_prob):
    _, events = impl.ratio_guard(new_log_prob, old_log_prob)
    d, finite, _, inside = _ratio_want(new_log_prob, old_log_prob)
    want = {"log_ratio_clamped": int((finite & (d.abs() > LOG_RATIO_CLAMP)).sum()),
            "nonfinite": int((~finite).sum()), "ratio_clamped": int((finite & ~inside).sum())}
    if sorted(events) != sorted(EVENTS):
        fail("NUM-14", f"events has keys {sorted(events)}, expected {sorted(EVENTS)}")
    for k, v in want.items():
        if not isinstance(events[k], torch.Tensor) or int(events[k]) != v:
            fail("NUM-14", f"events['{k}'] = {events[k]!r}, expected a tensor equal to {v}",
                 new_log_prob=new_log_prob, old_log_prob=old_log_prob)


@st.composite
def loss_sequences(draw):
    kinds = ["policy", "value", "entropy"]
    vals = [0.5, -1.25, 0.0, math.nan, math.inf, -math.inf, 3e38]
    seq = draw(st.lists(st.tuples(st.sampled_from(kinds), st.sampled_from(vals)), min_size=1, max_size=12))
    return dict(sequence=seq, split=draw(st.integers(0, 12)), dtype=draw(dtypes))


LOSS_EXAMPLES = (
    dict(sequence=[("policy", math.nan), ("policy", math.inf), ("value", 1.0), ("entropy", -math.inf),
                   ("value", math.nan)], split=2, dtype=torch.float32),
)


def check_loss_guard(impl, sequence, split, dtype):
    import warnings

    guard = impl.LossGuard()
    want_counts: dict[str, int] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, (kind, value) in enumerate(sequence):
            if i == split:
                guard.counts()  # a sync point in the middle must not re-warn later
            w = torch.tensor(1.0, dtype=dtype, requires_grad=True)
            loss = w * torch.tensor(value, dtype=dtype)
            out = guard(loss, kind)
            want_counts[kind] = want_counts.get(kind, 0) + (not math.isfinite(value))
            if math.isfinite(value):
                if not torch.equal(out.detach(), loss.detach()):
                    fail("NUM-15", f"a finite {kind} loss {value!r} came out as {float(out)!r}")
                out.backward()
                if w.grad is None or float(w.grad) != float(torch.tensor(value, dtype=dtype)):
                    fail("NUM-15", f"the gradient of a finite {kind} loss did not pass through the guard "
                                   f"(got {w.grad!r}, expected {value!r})")
            elif float(out) != 0.0:
                fail("NUM-15", f"a non-finite {kind} loss {value!r} came out as {float(out)!r}, expected 0")
        counts = guard.counts()
    counts = {k: int(v) for k, v in counts.items() if int(v)}
    if counts != {k: v for k, v in want_counts.items() if v}:
        fail("NUM-15", f"counts() = {counts}, expected {want_counts} non-finite losses per kind",
             sequence=sequence)
    per_kind = {}
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            kinds = [k for k in want_counts if k in str(w.message)]
            for k in kinds:
                per_kind[k] = per_kind.get(k, 0) + 1
    want_warn = {k: 1 for k, v in want_counts.items() if v}
    if per_kind != want_warn:
        fail("NUM-15", f"RuntimeWarnings per kind {per_kind}, expected exactly one per kind with a non-finite "
                       f"loss {want_warn}", sequence=sequence)
