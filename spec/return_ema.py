"""Contract ``return_ema``: DreamerV3's percentile return normalizer (ReturnEMA / sheeprl ``Moments``).

Source: the Dreamer plan (Master Plan v2), milestone M2 "ReturnEMA class (percentile-based normalization)".

Formula (one ``update(x)`` with a batch x of any shape, flattened to n >= 1 values)
-------------------------------------------------------------------------------------
    q(p)   = v_i + (pos − i)·(v_{i+1} − v_i),  pos = p·(n − 1), i = ⌊pos⌋, v = sorted(x), v_n := v_{n−1}
             (linear interpolation: ``torch.quantile(x, p, interpolation="linear")``)
    low_t  = d·low_{t−1}  + (1 − d)·q(p_low)           low_0 = high_0 = 0
    high_t = d·high_{t−1} + (1 − d)·q(p_high)
    update returns (offset, invscale) = (low_t, max(1/max_range, high_t − low_t))

A consumer normalizes returns as (R − offset) / invscale; invscale >= 1/max_range rules out a division by
zero on constant returns. Defaults d = 0.99, p_low = 0.05, p_high = 0.95, max_range = 1.0 (sheeprl's
DreamerV3 config ``moments.max: 1.0``, i.e. the paper's max(1, S)).

Interface: a class ``ReturnEMA(decay=0.99, max_range=1.0, percentile_low=0.05, percentile_high=0.95)``
with ``update(x) -> (offset, invscale)`` (0-d tensors), state ``low`` and ``high`` (0-d tensors) and
``state_dict()`` / ``load_state_dict(d)``. The state dtype is the implementation's choice (reference:
float64; sheeprl and fast: float32); tolerances below are in units of that dtype's eps.

A batch with NaN or ±Inf, an empty batch or a non-floating batch is rejected with a ValueError/TypeError
naming ``x``, and the state is left exactly as it was.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.return_ema import DEFAULTS
from rlspec.reference.return_ema import ReturnEMA as Reference  # the oracle
from rlspec.spec.core import Contract, Property, assert_close, by_category, expect_rejection, fail
from rlspec.spec.power import same_with_defaults, with_omitted
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "REMA-1": "the first update from the zero state gives low=(1-d)·q(p_low), high=(1-d)·q(p_high), "
              "q by linear interpolation (torch.quantile)",
    "REMA-2": "a sequence of updates follows the EMA-of-percentiles formula (vs float64 reference)",
    "REMA-3": "the response is monotone: from the same state, a batch x' >= x gives low', high' >= low, high",
    "REMA-4": "an update is invariant to permutations of the batch (bit for bit)",
    "REMA-5": "invscale >= 1/max_range and finite, also on constant batches (no division by zero)",
    "REMA-6": "a batch with NaN/Inf, an empty or an integer batch is rejected naming 'x'; state unchanged",
    "REMA-7": "state_dict round-trips: a fresh instance loading it continues bit-identically",
    "REMA-8": "bad configuration (decay, percentiles, max_range) is rejected naming the argument",
    "REMA-9": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "REMA-10": "documented defaults: ReturnEMA() with decay, max_range, percentile_low or percentile_high omitted "
               "equals passing 0.99, 1.0, 0.05, 0.95 (bit for bit over a run)",
    "REMA-11": "state is detached: updates with x that requires grad leave low, high and state_dict() without an "
               "autograd graph",
    "REMA-12": "returned tensors are copies: writing into update()'s offset or state_dict()'s tensors changes "
               "neither the state nor later updates",
}

CATEGORIES = by_category(
    maths=("REMA-1", "REMA-2", "REMA-3", "REMA-4", "REMA-5", "REMA-7", "REMA-10", "REMA-11"),
    robustness=("REMA-9", "REMA-12"),
    validation=("REMA-6", "REMA-8"),
)
RATIONALE = {
    "REMA-12": "The EMA formula says nothing about aliasing, so an implementation that hands out its own "
               "low/high buffers computes every value right. The kit asks for copies because the natural next "
               "line of a caller, normalizing in place (x.sub_(offset)), would then rewrite the normalizer's "
               "state silently and shift every later advantage.",
    "REMA-9": SCALAR_RATIONALE,
}

INTERFACE = ("ReturnEMA",)




def _eps(t: torch.Tensor) -> float:
    return torch.finfo(t.dtype).eps


def _tol(state: torch.Tensor, batches) -> float:
    scale = 1.0 + max(float(b.double().abs().max()) for b in batches)
    return 16 * _eps(state) * scale


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
configs = st.fixed_dictionaries(dict(
    decay=st.sampled_from([0.99, 0.9, 0.5, 0.0]),
    max_range=st.sampled_from([1.0, 0.25, 100.0]),
    percentile_low=st.sampled_from([0.05, 0.0, 0.1, 0.5]),
    percentile_high=st.sampled_from([0.95, 1.0, 0.9, 0.6]),
)).filter(lambda c: c["percentile_low"] < c["percentile_high"])


@st.composite
def batch_sequences(draw, max_len: int = 5):
    """A list of batches [T, B] (float32 or float64): gaussian, shifted, heavy-tailed, constant, tiny."""
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    out = []
    for _ in range(draw(st.integers(1, max_len))):
        shape = (draw(st.integers(1, 16)), draw(st.integers(1, 64)))
        kind = draw(st.sampled_from(["normal", "shifted", "outliers", "constant", "single"]))
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        if kind == "shifted":
            x = 50.0 + 10.0 * x
        elif kind == "outliers":
            x = torch.where(torch.rand(shape, generator=g) < 0.05, 1e4 * x, x)
        elif kind == "constant":
            x = torch.full(shape, float(draw(st.sampled_from([0.0, -3.5, 1e3]))), dtype=torch.float64)
        elif kind == "single":
            x = x[:1, :1]
        out.append(x.to(dtype))
    return out


cases = st.fixed_dictionaries(dict(config=configs, batches=batch_sequences()))
EXAMPLES = (
    dict(config=DEFAULTS, batches=[torch.full((15, 64), 2.0)]),  # constant returns
    dict(config=DEFAULTS, batches=[torch.arange(100.0).reshape(4, 25)]),  # percentiles by hand: 4.95, 94.05
    dict(config=DEFAULTS, batches=[torch.tensor([[7.0]]), torch.randn(3, 5, generator=torch.Generator().manual_seed(1))]),
)


def _quantile(x: torch.Tensor, p: float) -> torch.Tensor:
    return torch.quantile(x.double().reshape(-1), p, interpolation="linear")


def _state(ema) -> tuple[torch.Tensor, torch.Tensor]:
    return ema.low.detach().clone(), ema.high.detach().clone()


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_first_update(impl, config, batches):
    ema = impl.ReturnEMA(**config)
    x = batches[0]
    d = config["decay"]
    offset, invscale = ema.update(x)
    low = (1 - d) * _quantile(x, config["percentile_low"])
    high = (1 - d) * _quantile(x, config["percentile_high"])
    tol = _tol(ema.low, [x])
    inputs = dict(x=x, **config)
    assert_close("REMA-1", "low after one update", ema.low, low, atol=tol, rtol=tol, **inputs)
    assert_close("REMA-1", "high after one update", ema.high, high, atol=tol, rtol=tol, **inputs)
    assert_close("REMA-1", "offset", offset, low, atol=tol, rtol=tol, **inputs)
    assert_close("REMA-1", "invscale", invscale, torch.clamp(high - low, min=1 / config["max_range"]),
                 atol=tol, rtol=tol, **inputs)


def check_sequence(impl, config, batches):
    ema, ref = impl.ReturnEMA(**config), Reference(**config)
    for t, x in enumerate(batches):
        got, want = ema.update(x), ref.update(x)
        tol = _tol(ema.low, batches[: t + 1])
        for what, g, w in (("low", ema.low, ref.low), ("high", ema.high, ref.high),
                           ("offset", got[0], want[0]), ("invscale", got[1], want[1])):
            assert_close("REMA-2", f"{what} after update {t}", g, w, atol=tol, rtol=tol, x=x, **config)


def check_monotone(impl, config, batches, shift_seed):
    g = torch.Generator().manual_seed(shift_seed)
    a, b = impl.ReturnEMA(**config), impl.ReturnEMA(**config)
    for x in batches[:-1]:
        a.update(x)
        b.update(x)
    x = batches[-1]
    bigger = x + torch.rand(x.shape, generator=g, dtype=x.dtype) * (1 + x.abs())
    a.update(x)
    b.update(bigger)
    for what in ("low", "high"):
        lo, hi = getattr(a, what), getattr(b, what)
        if bool(hi < lo):
            fail("REMA-3", f"{what} = {float(hi)!r} after the larger batch, below {float(lo)!r} after the "
                           "original batch", x=x, larger=bigger, **config)


def check_permutation(impl, config, batches, perm_seed):
    a, b = impl.ReturnEMA(**config), impl.ReturnEMA(**config)
    g = torch.Generator().manual_seed(perm_seed)
    for x in batches:
        shuffled = x.reshape(-1)[torch.randperm(x.numel(), generator=g)].reshape(x.shape)
        out_a, out_b = a.update(x), b.update(shuffled)
        for what, u, v in (("offset", out_a[0], out_b[0]), ("invscale", out_a[1], out_b[1]),
                           ("low", a.low, b.low), ("high", a.high, b.high)):
            if not torch.equal(u, v):
                fail("REMA-4", f"{what} = {float(v)!r} for the shuffled batch, {float(u)!r} for the original",
                     x=x, shuffled=shuffled, **config)


def check_invscale_floor(impl, config, batches):
    ema = impl.ReturnEMA(**config)
    floor = 1 / config["max_range"]
    for x in batches:
        offset, invscale = ema.update(x)
        normalized = (x.to(offset.dtype) - offset) / invscale
        if not (bool(torch.isfinite(invscale)) and float(invscale) >= floor * (1 - 4 * _eps(invscale))):
            fail("REMA-5", f"invscale = {float(invscale)!r}, expected finite and >= 1/max_range = {floor!r}",
                 x=x, **config)
        if not bool(torch.isfinite(normalized).all()):
            fail("REMA-5", "(x - offset) / invscale is not finite", x=x, offset=float(offset),
                 invscale=float(invscale))


def check_rejects_bad_batch(impl, config, batches, bad, position):
    ema = impl.ReturnEMA(**config)
    for x in batches:
        ema.update(x)
    before = {k: v.clone() for k, v in ema.state_dict().items()}
    if bad == "empty":
        x, mentions = torch.zeros(0, 4), ["empty"]
    elif bad == "int":
        x, mentions = torch.ones(3, 4, dtype=torch.int64), ["int64"]
    else:
        x = batches[-1].clone().reshape(-1)
        x[position % x.numel()] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[bad]
        mentions = []
    expect_rejection("REMA-6", lambda: ema.update(x), names=["x"], mentions=mentions,
                     what=f"update with a batch containing {bad}")
    after = ema.state_dict()
    for k, v in before.items():
        if not torch.equal(v, after[k]):
            fail("REMA-6", f"state '{k}' changed from {v.tolist()!r} to {after[k].tolist()!r} by a rejected "
                           f"update ({bad})", **config)


def check_state_roundtrip(impl, config, batches):
    a = impl.ReturnEMA(**config)
    a.update(batches[0])
    b = impl.ReturnEMA(**config)
    b.load_state_dict(a.state_dict())
    for x in batches[1:] + batches[:1]:
        out_a, out_b = a.update(x), b.update(x)
        for what, u, v in (("offset", out_a[0], out_b[0]), ("invscale", out_a[1], out_b[1])):
            if not torch.equal(u, v):
                fail("REMA-7", f"{what} = {float(v)!r} after load_state_dict, {float(u)!r} in the original",
                     x=x, **config)


def check_rejects_config(impl, name, value):
    config = dict(DEFAULTS, **{name: value})
    expect_rejection("REMA-8", lambda: impl.ReturnEMA(**config), names=[name], mentions=[repr(value)],
                     what=f"ReturnEMA({name}={value!r})")


def check_scalar_hyperparameters(impl, config, batches):
    def run(**config):
        ema = impl.ReturnEMA(**config)
        return [ema.update(x) for x in batches]

    check_scalar_types("REMA-9", run, dict(config), **config)


def _run_all(ema, batches):
    return [(*ema.update(x), ema.state_dict()) for x in batches]


def check_defaults(impl, omitted, config, batches):
    kept = {k: v for k, v in config.items() if k not in omitted}
    same_with_defaults("REMA-10", f"ReturnEMA ({', '.join(sorted(omitted))} omitted)",
                       lambda extra: _run_all(impl.ReturnEMA(**kept, **extra), batches),
                       {k: DEFAULTS[k] for k in sorted(omitted)}, **config)


def check_detached(impl, config, batches):
    ema = impl.ReturnEMA(**config)
    for x in batches:
        ema.update(x.clone().requires_grad_())
    attached = [k for k, v in [("low", ema.low), ("high", ema.high), *ema.state_dict().items()]
                if isinstance(v, torch.Tensor) and (v.requires_grad or v.grad_fn is not None)]
    if attached:
        fail("REMA-11", f"{attached} keep an autograd graph after updates with x that requires grad (memory grows "
                        "every update)", **config)


def check_copies(impl, config, batches):
    ema, twin = impl.ReturnEMA(**config), impl.ReturnEMA(**config)
    for t, x in enumerate(batches):
        offset, _ = ema.update(x)
        want, _ = twin.update(x)
        offset.fill_(123.0)
        for v in ema.state_dict().values():
            v.fill_(-7.0)
        for (k, got), (_, exp) in zip(ema.state_dict().items(), twin.state_dict().items()):
            if not torch.equal(got, exp):
                fail("REMA-12", f"state_dict()['{k}'] = {got.tolist()!r} after the caller wrote into the tensors "
                                f"returned by update {t}, expected {exp.tolist()!r}: return copies", **config)


PROPERTIES = (
    Property("REMA-1", check_first_update, cases, EXAMPLES, INTERFACE),
    Property("REMA-2", check_sequence, cases, EXAMPLES, INTERFACE),
    Property("REMA-3", check_monotone, st.builds(lambda c, s: dict(c, shift_seed=s), cases, seeds),
             requires=INTERFACE),
    Property("REMA-4", check_permutation, st.builds(lambda c, s: dict(c, perm_seed=s), cases, seeds),
             requires=INTERFACE),
    Property("REMA-5", check_invscale_floor, cases, EXAMPLES, INTERFACE),
    Property("REMA-6", check_rejects_bad_batch,
             st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), cases,
                       st.sampled_from(["nan", "inf", "-inf", "empty", "int"]), st.integers(0, 10**6)),
             requires=INTERFACE),
    Property("REMA-7", check_state_roundtrip, cases, EXAMPLES, INTERFACE),
    Property("REMA-8", check_rejects_config,
             st.sampled_from([dict(name="decay", value=1.0), dict(name="decay", value=-0.1),
                              dict(name="max_range", value=0.0), dict(name="percentile_low", value=-0.05),
                              dict(name="percentile_high", value=1.5),
                              dict(name="percentile_high", value=0.05)]),
             requires=INTERFACE, max_examples=6),
    Property("REMA-9", check_scalar_hyperparameters, cases, EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REMA-10", check_defaults, with_omitted(cases, tuple(DEFAULTS)),
             (dict(EXAMPLES[2], config=dict(decay=0.5, max_range=0.25, percentile_low=0.1, percentile_high=0.9),
                   omitted=frozenset(DEFAULTS)),), INTERFACE, max_examples=10),
    Property("REMA-11", check_detached, cases, EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REMA-12", check_copies, cases, EXAMPLES, INTERFACE, max_examples=10),
)

CONTRACT = Contract("return_ema", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
