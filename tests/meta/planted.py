"""Deliberately broken implementations: the reference with exactly one bug planted.

Each entry names the contract, the clause that must catch the bug, a fragment the violation message
must contain, and clauses the bug must NOT trip (a spec that fails everything catches nothing).
"""

from __future__ import annotations

import dataclasses
import types

import torch

from rlspec.contracts.twohot import support, validate_log_prob_args
from rlspec.fast import twohot as fast_twohot
from rlspec.fast.twohot import locate
from rlspec.reference import return_ema as ref_ema
from rlspec.reference import twohot as ref_twohot


def _twohot(**overrides) -> types.SimpleNamespace:
    base = {name: getattr(ref_twohot, name) for name in ("symlog", "symexp", "twohot_encode", "log_prob", "mean")}
    return types.SimpleNamespace(**{**base, **overrides})


def _encode_with(weights_fn):
    """An encoder whose (k, w_hi) come from ``weights_fn(y_hat, bins)``; the rest as the reference."""

    def twohot_encode(y, num_bins=255, low=-20.0, high=20.0, support_dtype=None):
        bins = support(num_bins, low, high, support_dtype or y.dtype).double()
        k, w_hi = weights_fn(y.double(), bins)
        w = torch.zeros(*y.shape, num_bins, dtype=torch.float64)
        w.scatter_(-1, k.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
        w.scatter_add_(-1, (k + 1).unsqueeze(-1), w_hi.unsqueeze(-1))
        return w.to(y.dtype)

    return twohot_encode


def _locate(y_hat, bins):
    k = (torch.searchsorted(bins, y_hat.reshape(-1), right=True) - 1).clamp(0, len(bins) - 2).reshape(y_hat.shape)
    return k, (y_hat - bins[k]) / (bins[k + 1] - bins[k])


def _off_by_one(y, bins):  # bin index one too high (searchsorted without the -1)
    k, _ = _locate(y.clamp(bins[0], bins[-1]), bins)
    k = (k + 1).clamp_max(len(bins) - 2)
    return k, ((y.clamp(bins[0], bins[-1]) - bins[k]) / (bins[k + 1] - bins[k])).clamp(0, 1)


def _raw_space(y, bins):  # danijar 2025: interpolate between symexp(b_k) in raw space
    y = y.clamp(bins[0], bins[-1])
    k, _ = _locate(y, bins)
    raw = ref_twohot.symexp(y)
    lo, hi = ref_twohot.symexp(bins[k]), ref_twohot.symexp(bins[k + 1])
    return k, (raw - lo) / (hi - lo)


def _no_clamp(y, bins):  # extrapolates beyond the ends instead of clamping
    finite = y.clamp(-1e6, 1e6)
    k, _ = _locate(finite, bins)
    return k, (finite - bins[k]) / (bins[k + 1] - bins[k])


def _log_prob_unnormalized(logits, x, num_bins=255, low=-20.0, high=20.0, support_dtype=None):
    target = ref_twohot.twohot_encode(ref_twohot.symlog(x.double()), num_bins, low, high, support_dtype or x.dtype)
    return (target * logits.double()).sum(-1).to(logits.dtype)  # raw logits: no log_softmax


def _log_prob_broadcasting(logits, x, num_bins=255, low=-20.0, high=20.0):
    if x.shape == (*logits.shape[:-1], 1):  # sheeprl's [..., 1] target layout, accepted and squeezed
        x = x[..., 0]
    if x.shape != logits.shape[:-1]:  # sheeprl's silent broadcast of a [n] target when B == n
        x = x.expand(logits.shape[:-1])
    return ref_twohot.log_prob(logits, x, num_bins, low, high)


def _mean_symlog_space(logits, num_bins=255, low=-20.0, high=20.0):
    return ref_twohot.symlog(ref_twohot.mean(logits, num_bins, low, high))  # forgot the symexp


def _symlog_without_one(x):
    return torch.sign(x) * torch.log(x.abs().clamp_min(1e-30))


def _symlog_log_of_one_plus(x):  # log(1 + |x|) instead of log1p: |x| below eps vanishes
    return torch.sign(x) * torch.log(1 + x.abs())


def _symlog_sign_times(x):  # sign(x)·log1p(|x|): right values, but autograd gives 0 at x = 0
    return torch.sign(x) * torch.log1p(x.abs())


def _log_prob_lerp(logits, x, num_bins=255, low=-20.0, high=20.0):
    """lerp(l_k, l_{k+1}, w): a zero-weight masked bin (−inf) gives −inf + 1·inf = NaN."""
    validate_log_prob_args(logits, x, num_bins, low, high)
    bins = support(num_bins, low, high, x.dtype)
    k, w = locate(fast_twohot.symlog(x), bins)
    pair = logits.gather(-1, torch.stack((k, k + 1), dim=-1))
    return torch.lerp(pair[..., 0], pair[..., 1], w.to(logits.dtype)) - torch.logsumexp(logits, dim=-1)


def _log_prob_detached(logits, x, num_bins=255, low=-20.0, high=20.0):  # trains nothing
    return ref_twohot.log_prob(logits.detach(), x.detach(), num_bins, low, high)


def _encode_any_support(y, num_bins=255, low=-20.0, high=20.0, support_dtype=None):  # no finiteness check
    bins = support(max(num_bins, 2), max(low, -1e30), min(high, 1e30), support_dtype or y.dtype).double()
    k, w = _locate(y.double().clamp(bins[0], bins[-1]), bins)
    out = torch.zeros(*y.shape, len(bins), dtype=torch.float64)
    out.scatter_(-1, k.unsqueeze(-1), (1 - w).unsqueeze(-1)).scatter_add_(-1, (k + 1).unsqueeze(-1), w.unsqueeze(-1))
    return out.to(y.dtype)


class _Percentile1090(ref_ema.ReturnEMA):
    def __init__(self, decay=0.99, max_range=1.0, percentile_low=0.05, percentile_high=0.95):
        super().__init__(decay, max_range, 0.10, 0.90)  # hard-coded 10/90, configuration ignored


class _NoEma(ref_ema.ReturnEMA):
    def update(self, x):
        d, self.decay = self.decay, 0.0  # the batch percentiles replace the state
        try:
            return super().update(x)
        finally:
            self.decay = d


class _NoFloor(ref_ema.ReturnEMA):
    def update(self, x):
        offset, _ = super().update(x)
        return offset, self.high - self.low  # no max(1/max_range, .): zero on constant returns


class _NanAccepted(ref_ema.ReturnEMA):
    def update(self, x):
        d = self.decay
        self.low = d * self.low + (1 - d) * torch.nanquantile(x.double(), self.percentile_low)
        self.high = d * self.high + (1 - d) * torch.nanquantile(x.double(), self.percentile_high)
        return self.low.clone(), torch.clamp(self.high - self.low, min=1 / self.max_range)


class _StateBeforeCheck(ref_ema.ReturnEMA):
    def update(self, x):
        self.low = self.low * self.decay  # state touched before the input is validated
        return super().update(x)


class _NearestRank(ref_ema.ReturnEMA):
    def update(self, x):
        v = torch.sort(x.double().reshape(-1)).values
        q = lambda p: v[round(p * (v.numel() - 1))]  # noqa: E731 - nearest rank, not linear
        d = self.decay
        self.low = d * self.low + (1 - d) * q(self.percentile_low)
        self.high = d * self.high + (1 - d) * q(self.percentile_high)
        return self.low.clone(), torch.clamp(self.high - self.low, min=1 / self.max_range)


@dataclasses.dataclass(frozen=True)
class Planted:
    name: str
    contract: str
    impl: object
    catches: str  # the clause that must fail
    says: str  # a fragment the violation message must contain
    spared: tuple[str, ...] = ()  # clauses that must still pass


def _ema(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(ReturnEMA=cls)


PLANTED = (
    Planted("off-by-one bin index", "twohot", _twohot(twohot_encode=_encode_with(_off_by_one)),
            "TWOHOT-8", "sum_k w_k*b_k", ("TWOHOT-1", "TWOHOT-3", "TWOHOT-6")),
    Planted("interpolation in raw space", "twohot", _twohot(twohot_encode=_encode_with(_raw_space)),
            "TWOHOT-8", "sum_k w_k*b_k", ("TWOHOT-1", "TWOHOT-6", "TWOHOT-9")),
    Planted("no clamp at the ends", "twohot", _twohot(twohot_encode=_encode_with(_no_clamp)),
            "TWOHOT-10", "at/beyond the ends", ("TWOHOT-1", "TWOHOT-9")),
    Planted("log_prob on unnormalized logits", "twohot", _twohot(log_prob=_log_prob_unnormalized),
            "TWOHOT-12", "log_prob(logits, x)", ("TWOHOT-8", "TWOHOT-14")),
    Planted("sheeprl target layout and broadcast", "twohot", _twohot(log_prob=_log_prob_broadcasting),
            "TWOHOT-18", "accepted silently", ("TWOHOT-12", "TWOHOT-17")),
    Planted("mean left in symlog space", "twohot", _twohot(mean=_mean_symlog_space),
            "TWOHOT-14", "mean(logits)", ("TWOHOT-12", "TWOHOT-15")),
    Planted("symlog as log|x|", "twohot", _twohot(symlog=_symlog_without_one),
            "TWOHOT-4", "symlog(x)", ("TWOHOT-8",)),
    Planted("symlog as log(1 + |x|)", "twohot", _twohot(symlog=_symlog_log_of_one_plus),
            "TWOHOT-4", "symlog(x)", ("TWOHOT-1", "TWOHOT-2", "TWOHOT-8")),
    Planted("symlog as sign(x)·log1p(|x|) (zero gradient at 0)", "twohot", _twohot(symlog=_symlog_sign_times),
            "TWOHOT-22", "d symlog(v)/dv at v = 0", ("TWOHOT-1", "TWOHOT-3", "TWOHOT-4")),
    Planted("log_prob by lerp through a masked bin", "twohot", _twohot(log_prob=_log_prob_lerp),
            "TWOHOT-21", "log_prob with −inf logits", ("TWOHOT-12", "TWOHOT-13", "TWOHOT-22")),
    Planted("log_prob without a gradient", "twohot", _twohot(log_prob=_log_prob_detached),
            "TWOHOT-22", "no gradient for 'logits'", ("TWOHOT-12", "TWOHOT-21")),
    Planted("infinite support accepted", "twohot", _twohot(twohot_encode=_encode_any_support),
            "TWOHOT-23", "accepted silently", ("TWOHOT-5", "TWOHOT-6", "TWOHOT-9")),
    Planted("percentiles 10/90", "return_ema", _ema(_Percentile1090), "REMA-1", "after one update",
            ("REMA-4", "REMA-5")),
    Planted("missing EMA", "return_ema", _ema(_NoEma), "REMA-1", "after one update", ("REMA-4", "REMA-6")),
    Planted("no invscale floor", "return_ema", _ema(_NoFloor), "REMA-5", "1/max_range", ("REMA-4",)),
    Planted("NaN batch accepted", "return_ema", _ema(_NanAccepted), "REMA-6", "accepted silently",
            ("REMA-1", "REMA-2")),
    Planted("state changed before validation", "return_ema", _ema(_StateBeforeCheck), "REMA-6",
            "by a rejected update", ()),
    Planted("nearest-rank percentile", "return_ema", _ema(_NearestRank), "REMA-1", "after one update",
            ("REMA-4", "REMA-5")),
)

