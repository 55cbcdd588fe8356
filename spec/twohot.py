"""Contract ``twohot``: symlog, symexp and the symlog-spaced two-hot distribution of DreamerV3.

Source: the Dreamer plan (Master Plan v2), milestone M2 "Math & distributions primitives (symlog-twohot)".

Formulas
--------
    symlog(x) = sign(x) · ln(1 + |x|)               symexp(y) = sign(y) · (e^{|y|} − 1)

    support   b_k = linspace(low, high, n)[k],  k = 0..n−1   (defaults n = 255, low = −20, high = 20),
              built by ``torch.linspace`` *in the dtype of the input*; torch builds the first half from
              ``low`` and the second half from ``high``, so for low = −high the bins are exact mirrors,
              b_{n−1−k} = −b_k bit for bit, except the middle bin of an odd n: it comes from the first half
              and lands a few ulps off 0 (7.45e-8 in float32, 2.8e-16 in float64 for the default 255 bins).

    encode    for a symlog-space value y [...], ŷ = clamp(y, low, high), k = the largest index with
              b_k ≤ ŷ (capped at n−2):   w_{k+1} = (ŷ − b_k) / (b_{k+1} − b_k),  w_k = 1 − w_{k+1},
              all other weights 0. Result [..., n].

    log_prob(logits [..., n], x [...]) = Σ_k encode(symlog(x))_k · log_softmax(logits)_k      → [...]
              (the log-likelihood, i.e. minus the cross-entropy against the two-hot target; ≤ 0)

    mean(logits [..., n]) = symexp(Σ_k softmax(logits)_k · b_k)                                 → [...]

Conventions
-----------
* Interpolation happens in **symlog space** (Dreamer plan M2, sheeprl 0.8.4 ``TwoHotEncodingDistribution``,
  DreamerV3 2023). danijar's 2025 code interpolates in **raw space** between symexp-spaced bins; that
  gives different weights for the same x. This contract takes the seed's convention.
* Targets are ``x [...]`` with exactly ``logits.shape[:-1]``. sheeprl takes ``x [..., 1]`` and silently
  broadcasts a ``[B]`` target against the bins when B == n; here both layouts are rejected.
* dtype policy: float16/bfloat16/float32/float64 inputs; outputs keep the input dtype; the support is
  built in that dtype. The reference computes in float64 from those support values.
* Masked bins: a −inf logit is legal (a bin the model may never predict). A bin whose two-hot weight is 0
  contributes 0 whatever its logit (0·(−inf) = 0, not NaN); a bin with positive weight and a −inf logit
  gives log_prob = −inf; ``mean`` gives masked bins probability 0. At least one logit per row is finite.
* Gradients: ``log_prob`` and ``mean`` are differentiable in ``logits`` (and ``log_prob`` in ``x`` where
  symlog(x) lies strictly inside the support and off the bins); every backend supports autograd and
  matches the reference's gradients (TWOHOT-22). symlog'(0) = symexp'(0) = 1: sign(x)·f(|x|) written
  naively differentiates to 0 at 0 (a zero-initialized critic's mean sits exactly there).
* The support must be finite: low, high ∈ (−∞, ∞), low < high, num_bins ≥ 2 (TWOHOT-23).
* Tolerances are stated per clause in units of eps = finfo(dtype).eps.

Uniform logits: with low = −high, Σ p_k b_k = 0 in real arithmetic. The reference sums mirror pairs first
(p_k b_k + p_{n−1−k} b_{n−1−k} = c·b − c·b = 0 exactly), so its mean is p·b_mid: 0 for an even n, the
middle bin's few ulps times 1/n for an odd one. An implementation with any other summation order is
allowed the recursive-summation error bound n · eps · Σ|p_k b_k| ≤ n · eps · high (TWOHOT-15).
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.twohot import (
    DEFAULT_BINS,
    DEFAULT_HIGH,
    DEFAULT_LOW,
    FLOAT_DTYPES,
    support,
)
from rlspec.reference import twohot as reference  # the oracle
from rlspec.spec.core import Contract, Property, assert_close, by_category, expect_rejection, fail, per_function
from rlspec.spec.power import defaults_check, with_omitted
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "TWOHOT-1": "symlog and symexp are odd: f(-x) == -f(x) exactly",
    "TWOHOT-2": "symlog and symexp are monotone non-decreasing",
    "TWOHOT-3": "symexp(symlog(x)) == x within 4·eps·(1+|x|)·(1+|symlog x|)",
    "TWOHOT-4": "symlog/symexp follow sign(x)·ln(1+|x|) and sign(y)·(exp|y|-1) (vs float64 reference)",
    "TWOHOT-5": "encoded weights are >= 0",
    "TWOHOT-6": "encoded weights sum to 1 (within 4·eps)",
    "TWOHOT-7": "at most two weights are non-zero and they are on adjacent bins",
    "TWOHOT-8": "sum_k w_k·b_k == clamp(y, low, high) (within 8·eps·max(|low|,|high|))",
    "TWOHOT-9": "a value exactly on a bin encodes one-hot on that bin",
    "TWOHOT-10": "values at or beyond either end encode one-hot on the end bin",
    "TWOHOT-11": "encode interpolates linearly in symlog space (vs float64 reference)",
    "TWOHOT-12": "log_prob == sum_k encode(symlog x)_k · log_softmax(logits)_k (vs float64 reference)",
    "TWOHOT-13": "log_prob is maximal when softmax(logits) equals the encoded two-hot",
    "TWOHOT-14": "mean == symexp(sum_k softmax(logits)_k · b_k) (vs float64 reference)",
    "TWOHOT-15": "uniform logits on a support with low = −high give mean 0 (within n·eps·high)",
    "TWOHOT-16": "shapes and dtypes: encode [...]->[..., n]; log_prob, mean [..., n]->[...]",
    "TWOHOT-17": "logits whose last dim != num_bins are rejected, naming 'logits' and both widths",
    "TWOHOT-18": "a target whose shape != logits.shape[:-1] is rejected (no silent broadcast)",
    "TWOHOT-19": "non-floating logits or targets are rejected with a TypeError naming the argument",
    "TWOHOT-20": "NaN targets are rejected, naming 'x'",
    "TWOHOT-21": "−inf logits (masked bins) are legal: log_prob and mean equal the float64 reference, a "
                 "zero-weight masked bin contributing 0 (not NaN)",
    "TWOHOT-22": "log_prob and mean are differentiable: gradients in logits (and in x inside the support) "
                 "match the float64 reference's autograd gradients; symlog'(0) = symexp'(0) = 1",
    "TWOHOT-23": "a support with non-finite low/high, low >= high or num_bins < 2 is rejected naming the "
                 "argument",
    "TWOHOT-24": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the "
                 "Python number they hold",
    "TWOHOT-25": "symlog, symexp and twohot_encode reject non-floating input with a TypeError naming the argument; "
                 "twohot_encode rejects NaN, naming 'y'",
    "TWOHOT-26": "documented defaults: omitting num_bins, low or high (encode, log_prob, mean) equals passing "
                 "255, -20.0, 20.0 (bit for bit)",
}

CATEGORIES = by_category(
    maths=("TWOHOT-1", "TWOHOT-2", "TWOHOT-3", "TWOHOT-4", "TWOHOT-5", "TWOHOT-6", "TWOHOT-7", "TWOHOT-8",
           "TWOHOT-9", "TWOHOT-10", "TWOHOT-11", "TWOHOT-12", "TWOHOT-13", "TWOHOT-14", "TWOHOT-15", "TWOHOT-16",
           "TWOHOT-22", "TWOHOT-26"),
    robustness=("TWOHOT-21", "TWOHOT-24"),
    validation=("TWOHOT-17", "TWOHOT-18", "TWOHOT-19", "TWOHOT-20", "TWOHOT-23", "TWOHOT-25"),
)
RATIONALE = {
    "TWOHOT-21": "The literal Σ_k w_k·log_softmax(logits)_k multiplies a masked bin's zero weight by its −inf log "
                 "probability: IEEE 754 gives 0·(−inf) = NaN, so a textbook log_prob is NaN as soon as one bin is "
                 "masked. The kit asks that a zero-weight bin contribute 0 (the limit w·log p → 0), because masking "
                 "bins with −inf logits is how a critic is restricted to a sub-range, and a NaN loss there trains "
                 "every parameter to NaN.",
    "TWOHOT-24": SCALAR_RATIONALE,
    "TWOHOT-4": "ln(1 + |x|) has full relative accuracy near 0 only through log1p: computed as log(1 + |x|), 1 "
                "+ |x| rounds to 1 for |x| below eps and symlog returns 0 (relative error 1), so a reward of "
                "1e-8 becomes the target 0. The clause asks the formula's value within 2 eps relative, which "
                "log1p gives; sheeprl 0.8.4, the one twohot adapter, computes log(1 + |x|).",
    "TWOHOT-12": "The dtype policy builds the support in the input's dtype, so a float64 head is compared with "
                 "the formula at float64 precision. sheeprl 0.8.4 (the one twohot adapter) builds float32 bins "
                 "for any input, which moves float64 results by float32 rounding; the clause keeps the formula "
                 "at the input's precision.",
    "TWOHOT-13": "The dtype policy builds the support in the input's dtype, so a float64 head is compared with "
                 "the formula at float64 precision. sheeprl 0.8.4 (the one twohot adapter) builds float32 bins "
                 "for any input, which moves float64 results by float32 rounding; the clause keeps the formula "
                 "at the input's precision.",
    "TWOHOT-14": "The dtype policy builds the support in the input's dtype, so a float64 head is compared with "
                 "the formula at float64 precision. sheeprl 0.8.4 (the one twohot adapter) builds float32 bins "
                 "for any input, which moves float64 results by float32 rounding; the clause keeps the formula "
                 "at the input's precision.",
    "TWOHOT-15": "The dtype policy builds the support in the input's dtype, so a float64 head is compared with "
                 "the formula at float64 precision. sheeprl 0.8.4 (the one twohot adapter) builds float32 bins "
                 "for any input, which moves float64 results by float32 rounding; the clause keeps the formula "
                 "at the input's precision.",
    "TWOHOT-22": "sign(x)·ln(1 + |x|) is differentiable at 0 with slope 1 (likewise symexp); written as "
                 "sign(x)·f(|x|), autograd differentiates to 0 there (sign' = |x|' = 0 at 0), exactly where a "
                 "zero-initialized critic's mean sits. The clause asks the true derivative; sheeprl 0.8.4, the "
                 "one twohot adapter, uses the naive form.",
}

INTERFACE = ("symlog", "symexp", "twohot_encode", "log_prob", "mean")
"""
symlog(x: Tensor) -> Tensor
symexp(y: Tensor) -> Tensor
twohot_encode(y: Tensor, num_bins=255, low=-20.0, high=20.0) -> Tensor     # y in symlog space
log_prob(logits: Tensor, x: Tensor, num_bins=255, low=-20.0, high=20.0) -> Tensor
mean(logits: Tensor, num_bins=255, low=-20.0, high=20.0) -> Tensor
"""


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
dtypes = st.sampled_from(FLOAT_DTYPES)
seeds = st.integers(0, 2**31 - 1)
batch_shapes = st.lists(st.integers(1, 5), min_size=0, max_size=2).map(tuple)
raw_floats = st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)


@st.composite
def supports(draw, symmetric: bool = False):
    """(num_bins, low, high): the default, small odd/even supports and asymmetric ranges."""
    num_bins = draw(st.sampled_from([DEFAULT_BINS, 2, 3, 4, 5, 41, 256]))
    if symmetric or draw(st.booleans()):
        high = draw(st.sampled_from([DEFAULT_HIGH, 1.0, 5.0, 7.5]))
        return num_bins, -high, high
    low = draw(st.floats(-25.0, 5.0))
    width = draw(st.floats(0.5, 30.0))
    return num_bins, low, low + width


@st.composite
def symlog_values(draw, num_bins: int, low: float, high: float, dtype: torch.dtype, shape: tuple):
    """y [shape] in symlog space: a mix of exact bins, interior points, both ends and beyond."""
    g = torch.Generator().manual_seed(draw(seeds))
    bins = support(num_bins, low, high, dtype)
    n = math.prod(shape)
    kind = torch.randint(0, 4, (n,), generator=g)
    on_bin = bins[torch.randint(0, num_bins, (n,), generator=g)]
    inside = low + (high - low) * torch.rand(n, generator=g, dtype=torch.float64)
    beyond = torch.where(torch.rand(n, generator=g) < 0.5, low - 1 - 10 * torch.rand(n, generator=g),
                         high + 1 + 10 * torch.rand(n, generator=g)).double()
    ends = torch.where(torch.rand(n, generator=g) < 0.5, bins[0], bins[-1])
    y = torch.where(kind == 0, on_bin.double(), torch.where(kind == 1, inside,
                    torch.where(kind == 2, beyond, ends.double())))
    return y.to(dtype).reshape(shape)


@st.composite
def encode_cases(draw):
    num_bins, low, high = draw(supports())
    dtype = draw(dtypes)
    shape = draw(batch_shapes)
    y = draw(symlog_values(num_bins, low, high, dtype, shape))
    return dict(y=y, num_bins=num_bins, low=low, high=high)


@st.composite
def logits_cases(draw, symmetric: bool = False, with_x: bool = True):
    num_bins, low, high = draw(supports(symmetric=symmetric))
    dtype = draw(dtypes)
    shape = draw(batch_shapes)
    g = torch.Generator().manual_seed(draw(seeds))
    scale = draw(st.sampled_from([0.0, 0.1, 1.0, 5.0, 30.0]))
    logits = (scale * torch.randn(*shape, num_bins, generator=g, dtype=torch.float64)).to(dtype)
    case = dict(logits=logits, num_bins=num_bins, low=low, high=high)
    if with_x:
        y = draw(symlog_values(num_bins, low, high, torch.float64, shape))
        case["x"] = reference.symexp(y).to(dtype)
    return case


def _scalar_x_case(x: float, dtype=torch.float32, num_bins=DEFAULT_BINS, low=DEFAULT_LOW,
                   high=DEFAULT_HIGH) -> dict:
    g = torch.Generator().manual_seed(7)
    return dict(logits=torch.randn(3, num_bins, generator=g, dtype=dtype),
                x=torch.full((3,), x, dtype=dtype), num_bins=num_bins, low=low, high=high)


# --------------------------------------------------------------------------------------------------
# Properties: symlog / symexp
# --------------------------------------------------------------------------------------------------
@st.composite
def raw_tensors(draw):
    dtype = draw(dtypes)
    values = draw(st.lists(raw_floats, min_size=1, max_size=16))
    return dict(x=torch.tensor(values, dtype=dtype))


RAW_EXAMPLES = tuple(dict(x=torch.tensor(v, dtype=d)) for d in FLOAT_DTYPES for v in
                     ([0.0, -0.0, 1e-30, -1e-30, 1e-8, 1.0, -1.0], [1e6, -1e6, 3.5e8, 88.0]))


def check_odd(impl, x):
    for fn in ("symlog", "symexp"):
        arg = x if fn == "symlog" else reference.symlog(x.double()).to(x.dtype)
        pos, neg = getattr(impl, fn)(arg), getattr(impl, fn)(-arg)
        if not torch.equal(neg, -pos):
            i = int((neg != -pos).nonzero()[0])
            fail("TWOHOT-1", f"{fn}(-v) = {neg[i].item()!r} but -{fn}(v) = {(-pos[i]).item()!r}",
                 v=arg[i].item())


def check_monotone(impl, x):
    xs = torch.sort(x).values
    for fn, arg in (("symlog", xs), ("symexp", reference.symlog(xs.double()).to(x.dtype))):
        out = getattr(impl, fn)(arg)
        drops = (out[1:] < out[:-1]).nonzero()
        if len(drops):
            i = int(drops[0])
            fail("TWOHOT-2", f"{fn} decreases: {fn}({arg[i].item()!r}) = {out[i].item()!r} > "
                             f"{fn}({arg[i + 1].item()!r}) = {out[i + 1].item()!r}")


def check_roundtrip(impl, x):
    eps = _eps(x.dtype)
    y = reference.symlog(x.double())
    tol = 4 * eps * (1 + x.double().abs()) * (1 + y.abs())
    back = impl.symexp(impl.symlog(x))
    err = (back.double() - x.double()).abs()
    if bool((err > tol).any()):
        i = int((err - tol).argmax())
        fail("TWOHOT-3", f"symexp(symlog(x)) = {back[i].item()!r}, expected {x[i].item()!r} "
                         f"± {tol[i].item():.3g} ({x.dtype})")


def check_symlog_formula(impl, x):
    ref = reference
    eps = _eps(x.dtype)
    want = ref.symlog(x.double())
    tiny = torch.finfo(x.dtype).tiny  # relative everywhere: log(1 + |x|) instead of log1p fails near 0
    assert_close("TWOHOT-4", "symlog(x)", impl.symlog(x), want, atol=tiny, rtol=2 * eps, x=x)
    y = want.clamp(-40, 40).to(x.dtype)
    want_exp = ref.symexp(y.double())
    assert_close("TWOHOT-4", "symexp(y)", impl.symexp(y), want_exp, atol=tiny,
                 rtol=4 * eps * (1 + y.double().abs().max().item()), y=y)


def check_rejects_direct(impl, fn):
    arg = "x" if fn == "symlog" else "y"
    for dtype in (torch.int64, torch.bool):
        expect_rejection("TWOHOT-25", lambda: getattr(impl, fn)(torch.zeros(3, dtype=dtype)), names=[arg],
                         mentions=[str(dtype).removeprefix("torch.")], what=f"{fn} with {dtype} {arg}")
    if fn == "twohot_encode":
        y = torch.tensor([0.0, math.nan, 1.0])
        expect_rejection("TWOHOT-25", lambda: impl.twohot_encode(y), names=["y", "NaN"],
                         what="twohot_encode with y[1] = NaN")


def _call_part(impl, fn: str, logits, x, **kw):
    """One of the support-taking functions on a case (twohot_encode on the reference's symlog of x)."""
    if fn == "twohot_encode":
        return impl.twohot_encode(reference.symlog(x), **kw)
    return impl.log_prob(logits, x, **kw) if fn == "log_prob" else impl.mean(logits, **kw)


SUPPORT_FUNCTIONS = ("twohot_encode", "log_prob", "mean")


def _with_defaults(fn):
    return lambda impl, case, kw: _call_part(impl, fn, case["logits"], case["x"], **kw)


SUPPORT_PARAMS = ("num_bins", "low", "high")


@st.composite
def default_support_cases(draw):
    """logits [..., 255] and x [...] spread over the default support and beyond; the explicit low/high (used
    when not omitted) the defaults or narrower."""
    g = torch.Generator().manual_seed(draw(seeds))
    shape, dtype = draw(batch_shapes), draw(dtypes)
    logits = draw(st.sampled_from([1.0, 5.0])) * torch.randn(*shape, DEFAULT_BINS, generator=g, dtype=torch.float64)
    y = -25 + 50 * torch.rand(shape, generator=g, dtype=torch.float64)
    return dict(logits=logits.to(dtype), x=reference.symexp(y).to(dtype), num_bins=DEFAULT_BINS,
                low=draw(st.sampled_from([DEFAULT_LOW, -5.0])), high=draw(st.sampled_from([DEFAULT_HIGH, 3.0])))


# --------------------------------------------------------------------------------------------------
# Properties: encode
# --------------------------------------------------------------------------------------------------
def _encode(impl, y, num_bins, low, high):
    return impl.twohot_encode(y, num_bins=num_bins, low=low, high=high)


def check_nonneg(impl, y, num_bins, low, high):
    w = _encode(impl, y, num_bins, low, high)
    if bool((w < 0).any()):
        idx = tuple((w < 0).nonzero()[0].tolist())
        fail("TWOHOT-5", f"weight {w[idx].item()!r} < 0 at bin {idx[-1]}", y=y[idx[:-1]].item(),
             num_bins=num_bins, low=low, high=high)


def check_sum_one(impl, y, num_bins, low, high):
    w = _encode(impl, y, num_bins, low, high)
    assert_close("TWOHOT-6", "weights.sum(-1)", w.double().sum(-1), torch.ones(y.shape, dtype=torch.float64),
                 atol=4 * _eps(y.dtype), y=y, num_bins=num_bins, low=low, high=high)


def check_two_adjacent(impl, y, num_bins, low, high):
    w = _encode(impl, y, num_bins, low, high).reshape(-1, num_bins)
    for row, yv in zip(w, y.reshape(-1).tolist()):
        nz = row.nonzero().reshape(-1).tolist()
        if len(nz) > 2 or (len(nz) == 2 and nz[1] - nz[0] != 1):
            fail("TWOHOT-7", f"non-zero weights at bins {nz[:6]}, expected at most two adjacent bins",
                 y=yv, num_bins=num_bins, low=low, high=high)


def check_expectation(impl, y, num_bins, low, high):
    w = _encode(impl, y, num_bins, low, high).double()
    bins = support(num_bins, low, high, y.dtype).double()
    want = y.double().clamp(bins[0].item(), bins[-1].item())
    assert_close("TWOHOT-8", "sum_k w_k*b_k", w @ bins, want,
                 atol=8 * _eps(y.dtype) * max(abs(low), abs(high)), y=y, num_bins=num_bins, low=low,
                 high=high)


def check_on_bin(impl, num_bins, low, high, dtype, seed):
    bins = support(num_bins, low, high, dtype)
    k = torch.randint(0, num_bins, (8,), generator=torch.Generator().manual_seed(seed))
    k[:2] = torch.tensor([0, num_bins - 1])
    w = _encode(impl, bins[k], num_bins, low, high)
    want = torch.nn.functional.one_hot(k, num_bins).double()
    assert_close("TWOHOT-9", "weights of y = b_k", w, want, atol=4 * _eps(dtype), y=bins[k],
                 bin_index=k, num_bins=num_bins, low=low, high=high)


def check_beyond_ends(impl, num_bins, low, high, dtype):
    y = torch.tensor([low, low - 1e-3, low - 1e6, -math.inf, high, high + 1e-3, high + 1e6, math.inf],
                     dtype=dtype)
    w = _encode(impl, y, num_bins, low, high)
    k = torch.tensor([0] * 4 + [num_bins - 1] * 4)
    assert_close("TWOHOT-10", "weights of y at/beyond the ends", w,
                 torch.nn.functional.one_hot(k, num_bins).double(), atol=4 * _eps(dtype), y=y,
                 num_bins=num_bins, low=low, high=high)


def check_encode_reference(impl, y, num_bins, low, high):
    want = reference.twohot_encode(y.double(), num_bins, low, high, support_dtype=y.dtype)
    assert_close("TWOHOT-11", "twohot_encode(y)", _encode(impl, y, num_bins, low, high), want,
                 atol=16 * _eps(y.dtype), y=y, num_bins=num_bins, low=low, high=high)


# --------------------------------------------------------------------------------------------------
# Properties: log_prob and mean
# --------------------------------------------------------------------------------------------------
def _dist_tol(logits: torch.Tensor) -> float:
    """log_softmax loses about eps·max|logit| per term; allow a margin over that."""
    scale = 1.0 + (logits.double().abs().max().item() if logits.numel() else 0.0)
    return 32 * _eps(logits.dtype) * scale * (1 + math.log(logits.shape[-1]))


def _log_prob_tol(logits: torch.Tensor, num_bins: int, low: float, high: float) -> float:
    """_dist_tol plus the effect of rounding in symlog(x): an error dy <= 4·eps·(1+max|b|) moves the
    two-hot weight by dy/Δb, which moves log_prob by that times the largest adjacent log-prob gap."""
    log_p = torch.log_softmax(logits.double(), dim=-1).clamp_min(-1e4)  # [..., n]
    gap = float((log_p[..., 1:] - log_p[..., :-1]).abs().max()) if logits.numel() else 0.0
    dy = 4 * _eps(logits.dtype) * (1 + max(abs(low), abs(high)))
    return _dist_tol(logits) + dy / ((high - low) / (num_bins - 1)) * gap


def check_log_prob_reference(impl, logits, x, num_bins, low, high):
    got = impl.log_prob(logits, x, num_bins=num_bins, low=low, high=high)
    want = reference.log_prob(logits.double(), x.double(), num_bins, low, high, support_dtype=x.dtype)
    assert_close("TWOHOT-12", "log_prob(logits, x)", got, want, atol=_log_prob_tol(logits, num_bins, low, high),
                 rtol=0,
                 logits=logits, x=x, num_bins=num_bins, low=low, high=high)


def check_log_prob_max(impl, logits, x, num_bins, low, high):
    ref = reference
    w = ref.twohot_encode(ref.symlog(x.double()), num_bins, low, high, support_dtype=x.dtype)
    best_logits = w.clamp_min(1e-30).log().to(logits.dtype)  # softmax(best_logits) == w
    best = impl.log_prob(best_logits, x, num_bins=num_bins, low=low, high=high).double()
    neg_entropy = (w * w.clamp_min(1e-30).log()).sum(-1)  # the maximum of sum_k w_k log p_k over p
    tol = max(_log_prob_tol(best_logits, num_bins, low, high), _log_prob_tol(logits, num_bins, low, high))
    assert_close("TWOHOT-13", "log_prob at logits = log(two-hot)", best, neg_entropy, atol=tol, x=x)
    other = impl.log_prob(logits, x, num_bins=num_bins, low=low, high=high).double()
    if bool((other > best + tol).any()):
        i = tuple((other > best + tol).nonzero()[0].tolist())
        fail("TWOHOT-13", f"log_prob = {other[i].item():.9g} with other logits exceeds "
                          f"{best[i].item():.9g} with logits on the encoded bins", x=x[i].item(),
             logits=logits[i], num_bins=num_bins, low=low, high=high)


def _mean_tol(dtype: torch.dtype, num_bins: int, low: float, high: float) -> float:
    return 2 * num_bins * _eps(dtype) * max(abs(low), abs(high))


def check_mean_reference(impl, logits, num_bins, low, high):
    got = impl.mean(logits, num_bins=num_bins, low=low, high=high)
    want = reference.mean(logits.double(), num_bins, low, high, support_dtype=logits.dtype)
    tol = _mean_tol(logits.dtype, num_bins, low, high) + _dist_tol(logits)
    # an error dy in symlog space becomes (1 + |mean|)·dy after symexp
    assert_close("TWOHOT-14", "mean(logits)", got, want, atol=tol, rtol=tol, logits=logits,
                 num_bins=num_bins, low=low, high=high)


def check_uniform_mean(impl, num_bins, high, dtype, batch):
    logits = torch.full((batch, num_bins), 0.37, dtype=dtype)
    got = impl.mean(logits, num_bins=num_bins, low=-high, high=high)
    tol = num_bins * _eps(dtype) * high
    assert_close("TWOHOT-15", "mean(uniform logits)", got, torch.zeros(batch, dtype=torch.float64),
                 atol=tol, num_bins=num_bins, low=-high, high=high, dtype=dtype)


def check_shapes(impl, logits, x, num_bins, low, high, fn):
    lead = tuple(logits.shape[:-1])
    if fn == "symlog":
        out, shape = impl.symlog(x), lead
    else:
        out = _call_part(impl, fn, logits, x, num_bins=num_bins, low=low, high=high)
        shape = lead + (num_bins,) if fn == "twohot_encode" else lead
    if tuple(out.shape) != shape or out.dtype != logits.dtype:
        fail("TWOHOT-16", f"{fn} has shape {tuple(out.shape)} dtype {out.dtype}, expected "
                          f"{shape} {logits.dtype}", logits_shape=tuple(logits.shape))


# --------------------------------------------------------------------------------------------------
# Properties: bad input
# --------------------------------------------------------------------------------------------------
def check_rejects_width(impl, num_bins, extra):
    width = num_bins + extra
    logits, x = torch.zeros(4, width), torch.zeros(4)
    expect_rejection("TWOHOT-17", lambda: impl.log_prob(logits, x, num_bins=num_bins),
                     names=["logits"], mentions=[str(num_bins), str(width)],
                     what=f"log_prob with logits [4, {width}] and num_bins={num_bins}")
    expect_rejection("TWOHOT-17", lambda: impl.mean(logits, num_bins=num_bins),
                     names=["logits"], mentions=[str(num_bins), str(width)],
                     what=f"mean with logits [4, {width}] and num_bins={num_bins}")


def check_rejects_target_shape(impl, batch):
    n = DEFAULT_BINS
    logits = torch.zeros(batch, n)
    for x in (torch.zeros(batch, 1), torch.zeros(n), torch.zeros(batch + 1)):
        if tuple(x.shape) == (batch,):
            continue
        expect_rejection("TWOHOT-18", lambda: impl.log_prob(logits, x), names=["x"],
                         mentions=[str(tuple(x.shape))],
                         what=f"log_prob with logits {list(logits.shape)} and x {list(x.shape)}")


def check_rejects_dtype(impl):
    n = DEFAULT_BINS
    expect_rejection("TWOHOT-19", lambda: impl.log_prob(torch.zeros(2, n, dtype=torch.int64),
                                                        torch.zeros(2)),
                     names=["logits"], mentions=["int64"], what="log_prob with int64 logits")
    expect_rejection("TWOHOT-19", lambda: impl.log_prob(torch.zeros(2, n), torch.zeros(2, dtype=torch.int32)),
                     names=["x"], mentions=["int32"], what="log_prob with int32 x")
    expect_rejection("TWOHOT-19", lambda: impl.mean(torch.zeros(2, n, dtype=torch.bool)),
                     names=["logits"], mentions=["bool"], what="mean with bool logits")


def check_rejects_nan(impl, position):
    n = DEFAULT_BINS
    x = torch.zeros(6)
    x[position] = math.nan
    expect_rejection("TWOHOT-20", lambda: impl.log_prob(torch.zeros(6, n), x), names=["x", "NaN"],
                     mentions=[str(position)], what=f"log_prob with x[{position}] = NaN")


# --------------------------------------------------------------------------------------------------
# Properties: masked bins, gradients, support validation
# --------------------------------------------------------------------------------------------------
@st.composite
def masked_cases(draw):
    """A logits case with a drawn fraction of its bins at −inf (at least one finite bin per row)."""
    case = draw(logits_cases())
    logits, n = case["logits"].clone(), case["num_bins"]
    g = torch.Generator().manual_seed(draw(seeds))
    masked = torch.rand(logits.shape, generator=g) < draw(st.sampled_from([0.05, 0.3, 0.9]))
    keep = torch.randint(0, n, logits.shape[:-1], generator=g).unsqueeze(-1)  # [..., 1]
    masked.scatter_(-1, keep, False)
    logits[masked] = -math.inf
    return dict(case, logits=logits)


MASKED_EXAMPLES = (  # −inf on bin 253, x = 1e9 encodes one-hot on bin 254
    dict(logits=torch.zeros(1, DEFAULT_BINS, dtype=torch.float64).index_fill_(1, torch.tensor([253]), -math.inf),
         x=torch.tensor([1e9], dtype=torch.float64), num_bins=DEFAULT_BINS, low=DEFAULT_LOW, high=DEFAULT_HIGH),
    dict(logits=torch.zeros(2, 5).index_fill_(1, torch.tensor([0, 1]), -math.inf),
         x=torch.tensor([-1e6, 0.0]), num_bins=5, low=-2.0, high=2.0),
)


def check_masked(impl, logits, x, num_bins, low, high):
    finite = torch.where(torch.isinf(logits), torch.zeros_like(logits), logits)
    want = reference.log_prob(logits.double(), x.double(), num_bins, low, high, support_dtype=x.dtype)
    got = impl.log_prob(logits, x, num_bins=num_bins, low=low, high=high)
    # a masked bin whose reference weight is within symlog's rounding of 0 may get weight 0 in the input
    # dtype: symlog(x) errs by dy <= 4·eps·(1 + max|b|) (as in _log_prob_tol), moving a weight by dy/Δb;
    # −inf and a finite value are both right there. The same holds for a masked bin with reference weight 0
    # that y lies within dy of (y on a bin, its neighbour masked): y ± dy is checked as well
    y = reference.symlog(x.double())
    dy = 4 * _eps(x.dtype) * (1 + max(abs(low), abs(high)))
    dw = dy / ((high - low) / (num_bins - 1)) + 16 * _eps(x.dtype)
    ambiguous = torch.zeros(logits.shape[:-1], dtype=torch.bool)
    for shift in (0.0, dy, -dy):
        w = reference.twohot_encode(y + shift, num_bins, low, high, support_dtype=x.dtype)  # [..., n]
        ambiguous |= ((w > 0) & (w <= 2 * dw) & torch.isinf(logits)).any(-1)
    got, want = got[~ambiguous], want[~ambiguous]
    assert_close("TWOHOT-21", "log_prob with −inf logits", got, want,
                 atol=_log_prob_tol(finite, num_bins, low, high), logits=logits, x=x, num_bins=num_bins,
                 low=low, high=high)
    want_mean = reference.mean(logits.double(), num_bins, low, high, support_dtype=logits.dtype)
    tol = _mean_tol(logits.dtype, num_bins, low, high) + _dist_tol(finite)
    assert_close("TWOHOT-21", "mean with −inf logits", impl.mean(logits, num_bins=num_bins, low=low, high=high),
                 want_mean, atol=tol, rtol=tol, logits=logits, num_bins=num_bins, low=low, high=high)


def _grads(fn, *args):
    """Gradients of Σ_i u_i·fn(args)_i with respect to every tensor in ``args`` (u fixed, seeded)."""
    leaves = [a.detach().requires_grad_() for a in args]
    out = fn(*leaves)
    if not out.requires_grad:  # detached: no gradient for anything
        return (None,) * len(leaves)
    u = torch.linspace(-1.0, 2.0, out.numel(), dtype=torch.float64).reshape(out.shape).to(out.dtype)
    return torch.autograd.grad((out * u).sum(), leaves, allow_unused=True)


def check_gradients(impl, logits, x, num_bins, low, high):
    if logits.numel() == 0:
        return
    kw = dict(num_bins=num_bins, low=low, high=high)
    ref_kw = dict(kw, support_dtype=x.dtype)
    for fn in ("symlog", "symexp"):
        zero = torch.zeros(2, dtype=x.dtype, requires_grad=True)
        out = getattr(impl, fn)(zero)
        slope = torch.autograd.grad(out.sum(), zero)[0] if out.requires_grad else None
        if slope is None or not torch.equal(slope, torch.ones_like(zero)):
            fail("TWOHOT-22", f"d {fn}(v)/dv at v = 0 is {None if slope is None else slope.tolist()}, expected 1 "
                              "(sign(v)·f(|v|) differentiates to 0 there)")
    got = _grads(lambda z, t: impl.log_prob(z, t, **kw), logits, x)
    want = _grads(lambda z, t: reference.log_prob(z, t, **ref_kw), logits.double(), x.double())
    tol = 3 * _dist_tol(logits)
    inputs = dict(logits=logits, x=x, num_bins=num_bins, low=low, high=high)
    for name, g in (("logits", got[0]), ("x", got[1])):
        if g is None:
            fail("TWOHOT-22", f"log_prob gives no gradient for '{name}' (requires_grad input; a backend "
                              "without autograd must reject, not silently train nothing)", **inputs)
    assert_close("TWOHOT-22", "d log_prob / d logits", got[0], want[0], atol=tol, **inputs)
    bins = support(num_bins, low, high, x.dtype).double()
    y = reference.symlog(x.double())
    step = (high - low) / (num_bins - 1)
    off_bins = (torch.searchsorted(bins, y.reshape(-1)).reshape(y.shape).clamp(1, num_bins - 1))
    gap = torch.minimum((y - bins[off_bins - 1]).abs(), (bins[off_bins] - y).abs())
    smooth = (y > low) & (y < high) & (gap > 1e-3 * step)  # the x-derivative jumps at every bin
    scale = 1 + logits.double().abs().max().item()
    assert_close("TWOHOT-22", "d log_prob / d x (inside the support, off the bins)", got[1][smooth],
                 want[1][smooth], atol=64 * _eps(x.dtype) * scale / step, rtol=64 * _eps(x.dtype), **inputs)
    got_m = _grads(lambda z: impl.mean(z, **kw), logits)[0]
    want_m = _grads(lambda z: reference.mean(z, **ref_kw), logits.double())[0]
    if got_m is None:
        fail("TWOHOT-22", "mean gives no gradient for 'logits'", **inputs)
    # d mean / d l_k = symexp'(y)·p_k·(b_k − y) with symexp'(y) = 1 + |mean|: compare p_k·(b_k − y), whose
    # error is that of y and p (TWOHOT-14's tolerance) times max|b|
    per_row = 1 + reference.mean(logits.double(), **ref_kw).abs().unsqueeze(-1)  # [..., 1]
    tol_m = (_mean_tol(logits.dtype, num_bins, low, high) + _dist_tol(logits)) * (1 + max(abs(low), abs(high)))
    assert_close("TWOHOT-22", "d mean / d logits, divided by symexp'(y) = 1 + |mean|", got_m.double() / per_row,
                 want_m / per_row, atol=tol_m, **inputs)


BAD_SUPPORTS = (dict(num_bins=1, low=-1.0, high=1.0, name="num_bins"),
                dict(num_bins=5, low=-math.inf, high=1.0, name="low"),
                dict(num_bins=5, low=-1.0, high=math.inf, name="high"),
                dict(num_bins=5, low=math.nan, high=1.0, name="low"),
                dict(num_bins=5, low=2.0, high=1.0, name="high"))


def check_rejects_support(impl, num_bins, low, high, name, fn):
    logits, x = torch.zeros(3, max(num_bins, 2)), torch.zeros(3)
    expect_rejection("TWOHOT-23", lambda: _call_part(impl, fn, logits, x, num_bins=num_bins, low=low, high=high),
                     names=[name], what=f"{fn}(num_bins={num_bins}, low={low}, high={high})")


def check_scalar_hyperparameters(impl, logits, x, num_bins, low, high, fn):
    check_scalar_types("TWOHOT-24", lambda **p: _call_part(impl, fn, logits, x, **p),
                       dict(num_bins=num_bins, low=low, high=high), logits=logits, x=x)


PROPERTIES = (
    Property("TWOHOT-1", check_odd, raw_tensors(), RAW_EXAMPLES, ("symlog", "symexp")),
    Property("TWOHOT-2", check_monotone, raw_tensors(), RAW_EXAMPLES, ("symlog", "symexp")),
    Property("TWOHOT-3", check_roundtrip, raw_tensors(), RAW_EXAMPLES, ("symlog", "symexp")),
    Property("TWOHOT-4", check_symlog_formula, raw_tensors(), RAW_EXAMPLES, ("symlog", "symexp")),
    Property("TWOHOT-5", check_nonneg, encode_cases(), requires=("twohot_encode",)),
    Property("TWOHOT-6", check_sum_one, encode_cases(), requires=("twohot_encode",)),
    Property("TWOHOT-7", check_two_adjacent, encode_cases(), requires=("twohot_encode",)),
    Property("TWOHOT-8", check_expectation, encode_cases(), requires=("twohot_encode",)),
    Property("TWOHOT-9", check_on_bin,
             st.builds(lambda s, d, seed: dict(num_bins=s[0], low=s[1], high=s[2], dtype=d, seed=seed),
                       supports(), dtypes, seeds),
             (dict(num_bins=255, low=-20.0, high=20.0, dtype=torch.float32, seed=0),),
             ("twohot_encode",)),
    Property("TWOHOT-10", check_beyond_ends,
             st.builds(lambda s, d: dict(num_bins=s[0], low=s[1], high=s[2], dtype=d), supports(), dtypes),
             (dict(num_bins=255, low=-20.0, high=20.0, dtype=torch.float32),),
             ("twohot_encode",)),
    Property("TWOHOT-11", check_encode_reference, encode_cases(), requires=("twohot_encode",)),
    Property("TWOHOT-12", check_log_prob_reference, logits_cases(),
             (_scalar_x_case(0.0), _scalar_x_case(-3.2), _scalar_x_case(1e9), _scalar_x_case(-1e9),
              _scalar_x_case(math.expm1(20.0)), _scalar_x_case(2.5, torch.float64)),
             ("log_prob",)),
    Property("TWOHOT-13", check_log_prob_max, logits_cases(), (_scalar_x_case(-3.2),), ("log_prob",)),
    Property("TWOHOT-14", check_mean_reference, logits_cases(with_x=False), requires=("mean",)),
    Property("TWOHOT-15", check_uniform_mean,
             st.builds(lambda n, h, d, b: dict(num_bins=n, high=h, dtype=d, batch=b),
                       st.sampled_from([255, 3, 41, 256]), st.sampled_from([20.0, 1.0, 7.5]), dtypes,
                       st.integers(1, 4)),
             (dict(num_bins=255, high=20.0, dtype=torch.float32, batch=2),), ("mean",)),
    *per_function("TWOHOT-16", check_shapes, ("symlog",) + SUPPORT_FUNCTIONS, logits_cases()),
    Property("TWOHOT-17", check_rejects_width,
             st.builds(lambda n, e: dict(num_bins=n, extra=e), st.sampled_from([255, 41]),
                       st.sampled_from([1, -1, 2])),
             (dict(num_bins=255, extra=1),), ("log_prob", "mean"), max_examples=3),
    Property("TWOHOT-18", check_rejects_target_shape,
             st.builds(lambda b: dict(batch=b), st.sampled_from([4, 255])),
             (dict(batch=255),), ("log_prob",), max_examples=2),
    Property("TWOHOT-19", check_rejects_dtype, requires=("log_prob", "mean")),
    Property("TWOHOT-21", check_masked, masked_cases(), MASKED_EXAMPLES, ("log_prob", "mean")),
    Property("TWOHOT-22", check_gradients, logits_cases(), (_scalar_x_case(-3.2), _scalar_x_case(2.5, torch.float64)),
             ("log_prob", "mean"), max_examples=10),
    *per_function("TWOHOT-23", check_rejects_support, SUPPORT_FUNCTIONS, st.sampled_from(BAD_SUPPORTS),
                  max_examples=len(BAD_SUPPORTS)),
    Property("TWOHOT-20", check_rejects_nan, st.builds(lambda p: dict(position=p), st.integers(0, 5)),
             (dict(position=5),), ("log_prob",), max_examples=3),
    *per_function("TWOHOT-24", check_scalar_hyperparameters, SUPPORT_FUNCTIONS, logits_cases(),
                  (_scalar_x_case(-3.2),), max_examples=5),
    *per_function("TWOHOT-25", check_rejects_direct, ("symlog", "symexp", "twohot_encode")),
    *(Property("TWOHOT-26", defaults_check("TWOHOT-26", fn, _with_defaults(fn), SUPPORT_PARAMS,
                                           dict(num_bins=DEFAULT_BINS, low=DEFAULT_LOW, high=DEFAULT_HIGH)),
               with_omitted(default_support_cases(), SUPPORT_PARAMS),
               (dict(_scalar_x_case(-3.2), omitted=frozenset(SUPPORT_PARAMS)),), (fn,), max_examples=8)
      for fn in SUPPORT_FUNCTIONS),
)

CONTRACT = Contract("twohot", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
