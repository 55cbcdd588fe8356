"""Golden fixtures from sheeprl 0.8.4's DreamerV3 pieces (the only module that imports sheeprl).

Every generator draws its inputs from an explicit ``torch.Generator`` (never the global RNG), runs the
sheeprl code on them in float32 (sheeprl's dtype: its bins and ``Moments`` buffers are float32), and
returns a :class:`Fixture` holding inputs in *our* layout plus sheeprl's outputs.

Inputs are rounded to short decimals / dyadic steps so the JSON stays a few KB; rounding changes no
code path exercised.
"""

from __future__ import annotations

import torch
from sheeprl.algos.dreamer_v3.utils import Moments
from sheeprl.utils.distribution import TwoHotEncodingDistribution
from sheeprl.utils.utils import symexp, symlog

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "sheeprl"
EPS32 = torch.finfo(torch.float32).eps
BINS = torch.linspace(-20, 20, 255)  # sheeprl's support: linspace(low=-20, high=20, 255) in float32


def _round(t: torch.Tensor, step: float) -> torch.Tensor:
    """Round to a multiple of ``step`` and cast to float32 (short JSON decimals)."""
    return (torch.round(t / step) * step).float()


def twohot_log_prob(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    logits = torch.stack([_round(2 * torch.randn(255, generator=g, dtype=torch.float64), 1 / 8),
                          _round(6 * torch.randn(255, generator=g, dtype=torch.float64), 1 / 8)])  # [2, 255]
    on_bins = symexp(BINS[[0, 1, 100, 127, 128, 200, 253, 254]].double()).float()  # x = symexp(b_k) [8]
    edges = torch.tensor([0.0, -0.0, 1e9, -1e9, 1e-30, -1e-30, 1e-8, -3.7, -1000.0])  # 0, beyond ends, tiny
    fixed = torch.cat([on_bins, edges])  # [17]
    random = symexp(44 * torch.rand(2, 7, generator=g, dtype=torch.float64) - 22).float()  # [2, 7]
    x = torch.cat([fixed.expand(2, -1), random], dim=1)  # [2, 24] (our layout)
    rows = logits[:, None, :].expand(*x.shape, 255)  # [2, 24, 255]: each row's logits for all its targets
    log_prob = TwoHotEncodingDistribution(rows, dims=1).log_prob(x[..., None])  # x [2, 24, 1] -> [2, 24]
    # float32 symlog(x) errs by |dy| <= 2·eps·20 inside the support, moving the two-hot weights by
    # dy / Δb (Δb = 40/254); that costs dy/Δb times the largest gap between adjacent log-probs
    log_p = torch.log_softmax(logits.double(), dim=-1)  # [2, 255]
    gap = float((log_p[:, 1:] - log_p[:, :-1]).abs().max())
    atol = 2 * EPS32 * 20 / float(BINS[1] - BINS[0]) * gap + 32 * EPS32 * (1 + float(logits.abs().max()))
    return Fixture(
        path="twohot/sheeprl_log_prob.json", contract="twohot", package=PACKAGE,
        qualname="sheeprl.utils.distribution.TwoHotEncodingDistribution.log_prob", seed=seed,
        atol=atol, rtol=0.0,
        why="float32 symlog(x) (|dy| <= 2·eps·20) shifts the two-hot weights by dy/Δb, times the largest "
            "adjacent log-prob gap of these logits, + 32·eps·(1+max|logit|) for float32 log-softmax",
        convention="sheeprl log_prob takes x [..., 1]; ours takes x [...] (stored: x [2, 24]); "
                   "logits [2, 255] are shared by each row's 24 targets: "
                   "expected = log_prob(logits[:, None].expand(2, 24, 255), x)",
        inputs=dict(logits=logits, x=x), expected=dict(log_prob=log_prob))


def twohot_mean(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    spike_high, spike_low = torch.zeros(255), torch.zeros(255)
    spike_high[254], spike_low[10] = 30.0, 12.0  # mean ~ symexp(20) = 4.9e8, and a mean far below 0
    logits = torch.stack([
        torch.zeros(255), torch.full((255,), 0.375),  # uniform: mean 0 in exact arithmetic
        _round(torch.randn(255, generator=g, dtype=torch.float64), 1 / 8),
        _round(5 * torch.randn(255, generator=g, dtype=torch.float64), 1 / 8),
        spike_high, spike_low,
    ])  # [6, 255]
    mean = TwoHotEncodingDistribution(logits, dims=1).mean.squeeze(-1)  # sheeprl [6, 1] -> [6]
    return Fixture(
        path="twohot/sheeprl_mean.json", contract="twohot", package=PACKAGE,
        qualname="sheeprl.utils.distribution.TwoHotEncodingDistribution.mean", seed=seed,
        atol=2 * 255 * EPS32 * 20, rtol=2 * 255 * EPS32 * 20,
        why="float32 sum of 255 terms |p_k b_k| <= 20 errs by <= n*eps*20 in symlog space (atol, covers "
            "uniform logits); symexp turns it into a relative error of the same size (rtol)",
        convention="sheeprl mean keeps a trailing 1 ([6, 1]); stored squeezed to ours [6]",
        inputs=dict(logits=logits), expected=dict(mean=mean))


def twohot_symlog(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    magnitudes = torch.tensor([0.0, 1e-30, 1e-8, 1e-3, 0.5, 1.0, 1.718, 10.0, 1e3, 1e6, 1e9, 3e38])
    x = torch.cat([magnitudes, -magnitudes, symexp(_round(40 * torch.rand(8, generator=g) - 20, 1 / 16))])
    y_magnitudes = torch.tensor([0.0, 1e-30, 1e-6, 0.5, 1.0, 5.0, 20.0, 20.5, 80.0, 88.0])
    y = torch.cat([y_magnitudes, -y_magnitudes, _round(40 * torch.rand(8, generator=g) - 20, 1 / 16)])
    return Fixture(
        path="twohot/sheeprl_symlog.json", contract="twohot", package=PACKAGE,
        qualname="sheeprl.utils.utils.symlog, sheeprl.utils.utils.symexp", seed=seed,
        atol=4 * EPS32, rtol=4 * EPS32,
        why="sheeprl computes log(1+|x|) and exp(|y|)-1 in float32: a few ulp relative, ~eps absolute "
            "near 0 where log1p/expm1 are exact",
        convention="same layout; expected symlog = symlog(x), symexp = symexp(y), elementwise float32",
        inputs=dict(x=x, y=y), expected=dict(symlog=symlog(x), symexp=symexp(y)))


class _SingleProcess:
    """Stands in for lightning's Fabric in ``Moments.forward``: one process, all_gather is identity."""

    @staticmethod
    def all_gather(x: torch.Tensor) -> torch.Tensor:
        return x


def return_ema_moments(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    n = torch.randn(6, 15, 16, generator=g, dtype=torch.float64)  # [6 updates, T=15, B=16]
    outliers = torch.rand(15, 16, generator=g) < 0.05
    batches = _round(torch.stack([
        n[0], 200 + 100 * n[1], torch.full((15, 16), 2.0), torch.where(outliers, 1e4 * n[3], n[3]),
        -30 + 0.5 * n[4], n[5],
    ]), 0.1)  # [6, 15, 16]: normal, shifted, constant, outliers, negative, normal
    moments = Moments(decay=0.99, max_=1.0, percentile_low=0.05, percentile_high=0.95)
    rows = []  # per update: (low, high, offset, invscale)
    for x in batches:
        offset, invscale = moments(x, _SingleProcess())
        rows.append(torch.stack([moments.low, moments.high, offset, invscale]))
    low, high, offset, invscale = torch.stack(rows).T  # each [6]
    return Fixture(
        path="return_ema/sheeprl_moments.json", contract="return_ema", package=PACKAGE,
        qualname="sheeprl.algos.dreamer_v3.utils.Moments.forward", seed=seed,
        atol=128 * EPS32, rtol=0.0,
        why="sheeprl keeps float32 state: each of the 6 updates rounds d·state, (1-d)·q and their sum at "
            "eps·|state| (|state| < 4 here): <= 6·3·4 = 72 eps, with margin",
        convention="Moments(decay=0.99, max_=1.0, 0.05, 0.95) == ReturnEMA(0.99, max_range=1.0, 0.05, 0.95); "
                   "batches[t] [15, 16] fed in order from zero state; all_gather = identity (1 process); "
                   "expected[t] = low, high, offset, invscale after update t",
        inputs=dict(batches=batches), expected=dict(low=low, high=high, offset=offset, invscale=invscale))


GENERATORS = [twohot_log_prob, twohot_mean, twohot_symlog, return_ema_moments]
