"""Contract ``numerics`` (spec/numerics/__init__.py): Properties of safe_standardize / safe_zero_center, RunningMeanStd
and the frozen ObsNormalizer (NUM-1..12, 30)."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.numerics import (
    OBS_CLIP,
    OBS_EPSILON,
    RMS_EPSILON,
    STD_EPS,
)
from rlspec.reference import numerics as reference  # the oracle
from rlspec.spec.core import (
    assert_close,
    describe,
    expect_rejection,
    fail,
)
from rlspec.spec.numerics._common import _chunks, _eps, _tol_rms


# --------------------------------------------------------------------------------------------------
# Properties: safe_standardize / safe_zero_center
# --------------------------------------------------------------------------------------------------
def _centred(impl, fn: str, x, eps):
    return impl.safe_standardize(x, eps=eps) if fn == "safe_standardize" else impl.safe_zero_center(x)


def check_empty(impl, shape, dtype, fn):
    x = torch.zeros(shape, dtype=dtype)
    out = _centred(impl, fn, x, STD_EPS)
    if out.shape != x.shape or out.dtype != dtype:
        fail("NUM-1", f"{fn} of an empty tensor gave shape {tuple(out.shape)} {out.dtype}, expected "
                      f"{tuple(shape)} {dtype}")


def check_constant(impl, x, eps, fn):
    c = x.reshape(-1)[:1].expand(x.numel()).reshape(x.shape).clone()
    out = _centred(impl, fn, c, eps)
    if not torch.equal(out, torch.zeros_like(c)):
        fail("NUM-2", f"{fn} of a constant tensor gave {out.reshape(-1)[:4].tolist()}, expected exact zeros", x=c)


def check_standardize(impl, x, eps):
    x64 = x.double().reshape(-1)
    n = x64.numel()
    mu = x64[0] + (x64 - x64[0]).mean()
    sigma = float(((x64 - mu) ** 2).sum().div(n - 1).sqrt()) if n > 1 else 0.0
    if n > 1 and abs(sigma / eps - 1) < 1e-3:
        return  # at σ ≈ eps the branch may fall either way by rounding; both sides are checked elsewhere
    out = impl.safe_standardize(x, eps=eps)
    want = reference.safe_standardize(x.double(), eps=eps)
    e = _eps(x.dtype)
    scale = (1 + float(x64.abs().max()) / sigma) if sigma >= eps else 1 + float(x64.abs().max())
    assert_close("NUM-3", f"safe_standardize(x) (σ = {sigma:.3g}, {'divided' if sigma >= eps else 'centred only'})",
                 out, want, atol=16 * e * scale, rtol=16 * e, x=x, eps=eps)


def check_zero_center(impl, x, eps):
    out = impl.safe_zero_center(x)
    want = reference.safe_zero_center(x.double())
    e = _eps(x.dtype)
    assert_close("NUM-4", "safe_zero_center(x)", out, want, atol=8 * e * (1 + float(x.double().abs().max())),
                 x=x)


def check_propagates(impl, x, eps, bad, position, fn):
    y = x.clone().reshape(-1)
    y[position % y.numel()] = bad
    y = y.reshape(x.shape)
    out = _centred(impl, fn, y, eps)
    if bool(torch.isfinite(out).all()):
        fail("NUM-5", f"{fn} turned an input with {bad} into an all-finite output "
                      f"{out.reshape(-1)[:4].tolist()} (the event is hidden)", x=y)


# --------------------------------------------------------------------------------------------------
# Properties: RunningMeanStd and the frozen observation normalizer
# --------------------------------------------------------------------------------------------------
def _closed_form(stream: torch.Tensor, epsilon: float = RMS_EPSILON):
    """(mean, var, count) of the pooled stream plus the (mean 0, var 1, weight ε) pseudo-sample."""
    x = stream.double()
    m = x.shape[0]
    count = epsilon + m
    mean = x.sum(0) / count
    var = (epsilon * (1 + mean**2) + ((x - mean) ** 2).sum(0)) / count
    return mean, var, torch.tensor(count, dtype=torch.float64)


def _rms_state(rms) -> dict[str, torch.Tensor]:
    """The whole state (opaque: whatever state_dict() holds), to compare before and after."""
    return {k: v.detach().clone().cpu() for k, v in rms.state_dict().items()}


STATISTICS = ("mean", "var", "count")


def statistics(clause: str, obj, owner: str) -> dict[str, torch.Tensor]:
    """The running statistics as the interface names them: ``obj.mean``, ``obj.var``, ``obj.count`` (of a
    RunningMeanStd, or of an ObsNormalizer's ``.rms``), copied; a missing one is a violation naming what the
    contract reads."""
    out = {}
    for k in STATISTICS:
        if not hasattr(obj, k):
            fail(clause, f"{owner} has no attribute '{k}': the contract reads the running statistics as "
                         f"{owner}.mean, .var and .count (float64 tensors of the given shape; `rlspec list numerics`)")
        out[k] = torch.as_tensor(getattr(obj, k)).detach().clone().cpu()
    return out


def _normalizer_statistics(clause: str, norm) -> dict[str, torch.Tensor]:
    if not hasattr(norm, "rms"):
        fail(clause, "ObsNormalizer has no attribute 'rms': the contract reads its statistics as "
                     "ObsNormalizer.rms.mean, .var and .count (`rlspec list numerics`)")
    return statistics(clause, norm.rms, "ObsNormalizer.rms")


def check_chan(impl, shape, stream, splits, other):
    rms = impl.RunningMeanStd(shape=shape)
    init = statistics("NUM-6", rms, "RunningMeanStd")
    f64 = torch.float64
    initial = {"mean": torch.zeros(shape, dtype=f64), "var": torch.ones(shape, dtype=f64),
               "count": torch.tensor(RMS_EPSILON, dtype=f64)}
    for key, want in initial.items():
        assert_close("NUM-6", f"initial {key}", init[key], want, atol=0.0, shape=shape)
    for b in _chunks(stream, splits):
        rms.update(b)
    mean, var, count = _closed_form(stream)
    tol_m, tol_v = _tol_rms(stream, len(splits))
    st_ = statistics("NUM-6", rms, "RunningMeanStd")
    inputs = dict(stream=stream, splits=splits)
    assert_close("NUM-6", f"count after {len(splits)} batches", st_["count"], count, atol=1e-9, **inputs)
    assert_close("NUM-6", "mean vs the pooled closed form", st_["mean"], mean, atol=tol_m, **inputs)
    assert_close("NUM-6", "var vs the pooled closed form", st_["var"], var, atol=tol_v, rtol=tol_v, **inputs)


def check_split_invariance(impl, shape, stream, splits, other):
    a, b = impl.RunningMeanStd(shape=shape), impl.RunningMeanStd(shape=shape)
    for x in _chunks(stream, splits):
        a.update(x)
    for x in _chunks(stream, other):
        b.update(x)
    tol_m, tol_v = _tol_rms(stream, len(splits) + len(other))
    sa, sb = statistics("NUM-7", a, "RunningMeanStd"), statistics("NUM-7", b, "RunningMeanStd")
    for key, tol in (("count", 1e-9), ("mean", tol_m), ("var", tol_v)):
        assert_close("NUM-7", f"{key} for split {splits} vs split {other}", sa[key], sb[key], atol=tol,
                     rtol=tol if key == "var" else 0.0, stream=stream)


def _bad_batch(stream: torch.Tensor, shape: tuple, bad: str, position: int) -> tuple[torch.Tensor, list[str]]:
    if bad == "empty":
        return torch.zeros(0, *shape), ["empty"]
    if bad == "int":
        return torch.ones(2, *shape, dtype=torch.int64), ["int64"]
    if bad == "shape":
        return torch.zeros(2, *shape, 5), [str(shape)]
    x = stream.clone().reshape(-1)
    x[position % x.numel()] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[bad]
    return x.reshape(stream.shape), []


def check_rejects_batch(impl, shape, stream, splits, other, bad, position):
    rms = impl.RunningMeanStd(shape=shape)
    rms.update(_chunks(stream, splits)[0])
    before = _rms_state(rms)
    x, mentions = _bad_batch(stream, shape, bad, position)
    expect_rejection("NUM-8", lambda: rms.update(x), names=["x"], mentions=mentions,
                     what=f"RunningMeanStd.update with a bad batch ({bad})")
    after = _rms_state(rms)
    for k, v in before.items():
        if not torch.equal(v, after[k]):
            fail("NUM-8", f"state '{k}' changed from {describe(v)} to {describe(after[k])} by a rejected "
                          f"update ({bad})", shape=shape)


def check_roundtrip(impl, shape, stream, splits, other, fn):
    chunks = _chunks(stream, splits)
    a = getattr(impl, fn)(shape=shape)
    step = a.update if fn == "RunningMeanStd" else a.commit
    step(chunks[0])
    b = getattr(impl, fn)(shape=shape)
    b.load_state_dict(a.state_dict())
    for x in chunks[1:] + chunks[:1]:
        step(x)
        (b.update if fn == "RunningMeanStd" else b.commit)(x)
    sa, sb = a.state_dict(), b.state_dict()
    for k in sa:
        if not torch.equal(sa[k], sb[k]):
            fail("NUM-9", f"{fn} '{k}' = {describe(sb[k])} after load_state_dict, {describe(sa[k])} "
                          "in the original", stream=stream, splits=splits)
    if fn == "ObsNormalizer" and not torch.equal(a.normalize(stream), b.normalize(stream)):
        fail("NUM-9", "ObsNormalizer.normalize differs after load_state_dict", stream=stream)


def _committed_normalizer(impl, shape, stream, splits, clip=OBS_CLIP):
    norm = impl.ObsNormalizer(shape=shape, clip=clip)
    for x in _chunks(stream, splits)[:-1]:
        norm.commit(x)
    return norm


def check_normalize(impl, shape, stream, splits, other, clip):
    norm = _committed_normalizer(impl, shape, stream, splits, clip)
    st_ = _normalizer_statistics("NUM-10", norm)
    obs = 3 * stream  # observations of the next rollout, some beyond the clip
    out = norm.normalize(obs)
    mean, var = st_["mean"], st_["var"]
    want = ((obs.double() - mean) / torch.sqrt(var + OBS_EPSILON)).clamp(-clip, clip)
    e = _eps(obs.dtype)
    tol = 8 * e * (1 + float(((obs.double().abs() + mean.abs()) / torch.sqrt(var + OBS_EPSILON)).max()))
    if out.dtype != obs.dtype:
        fail("NUM-10", f"normalize returned {out.dtype} for {obs.dtype} observations")
    assert_close("NUM-10", "normalize(obs)", out, want, atol=tol, rtol=tol, obs=obs, clip=clip)


def check_frozen(impl, shape, stream, splits, other, clip):
    norm = _committed_normalizer(impl, shape, stream, splits, clip)
    before = {k: v.detach().clone() for k, v in norm.state_dict().items()}
    chunks = _chunks(stream, other)  # a rollout arriving step by step
    during = [norm.normalize(x) for x in chunks]
    after = norm.state_dict()
    for k, v in before.items():
        if not torch.equal(v, after[k]):
            fail("NUM-11", f"normalize changed statistic '{k}' during the rollout: {describe(v)} -> "
                           f"{describe(after[k])}; statistics must stay frozen until commit()",
                 stream=stream, steps=other)
    whole = norm.normalize(stream)
    if not torch.equal(torch.cat(during), whole):
        fail("NUM-11", "the rollout normalized step by step differs from normalizing it at once: rows of one "
                       "rollout saw different statistics", stream=stream, steps=other)


def check_commit(impl, shape, stream, splits, other):
    norm, rms = impl.ObsNormalizer(shape=shape), impl.RunningMeanStd(shape=shape)
    for x in _chunks(stream, splits):
        norm.commit(x)
        rms.update(x)
        s_norm, s_rms = _normalizer_statistics("NUM-12", norm), statistics("NUM-12", rms, "RunningMeanStd")
        for k in STATISTICS:
            if not torch.equal(s_norm[k], s_rms[k]):
                fail("NUM-12", f"after commit, '{k}' = {describe(s_norm[k])}, RunningMeanStd.update gives "
                               f"{describe(s_rms[k])}", batch=x)


def check_commit_rejects(impl, shape, stream, splits, other, bad, position):
    norm = impl.ObsNormalizer(shape=shape)
    for x in _chunks(stream, splits):
        norm.commit(x)
    before = _rms_state(norm)
    x, mentions = _bad_batch(stream, shape, bad, position)
    expect_rejection("NUM-30", lambda: norm.commit(x), names=["x"], mentions=mentions,
                     what=f"ObsNormalizer.commit with a bad batch ({bad})")
    for k, v in _rms_state(norm).items():
        if not torch.equal(v, before[k]):
            fail("NUM-30", f"statistic '{k}' changed by a rejected commit ({bad})")
