"""Contract ``numerics`` (spec/numerics/__init__.py): Helpers and strategies shared by the numerics properties: every
tensor from an explicit torch.Generator seeded by Hypothesis."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import (
    STD_EPS,
)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


# --------------------------------------------------------------------------------------------------
# Strategies: every tensor comes from an explicit torch.Generator seeded by Hypothesis
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
dtypes = st.sampled_from([torch.float32, torch.float64])
KINDS = ("normal", "offset", "mixed_scale", "constant", "tiny_var", "single", "integers")


def _values(g: torch.Generator, kind: str, shape: tuple) -> torch.Tensor:
    """float64 values of one of KINDS (numerics note Test 1: normal, zero/small variance, scale mixing)."""
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "offset":
        return 1e3 + 5 * x
    if kind == "mixed_scale":  # numerics note: distance penalties ~ -1 mixed with success rewards +500
        return torch.where(torch.rand(shape, generator=g) < 0.1, torch.full_like(x, 500.0), -x.abs())
    if kind == "constant":
        return torch.full(shape, float(torch.tensor([0.0, 5.0, -3.25, 0.1])[torch.randint(4, (), generator=g)]),
                          dtype=torch.float64)
    if kind == "tiny_var":
        return 2.0 + 1e-11 * x
    if kind == "integers":
        return torch.randint(-3, 4, shape, generator=g).double()
    return x


@st.composite
def standardize_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    kind = draw(st.sampled_from(KINDS))
    shape = (1,) if kind == "single" else draw(st.sampled_from([(2,), (7,), (3, 5), (64,), (4, 1, 3)]))
    return dict(x=_values(g, kind, shape).to(draw(dtypes)), eps=draw(st.sampled_from([STD_EPS, 1e-3])))


STANDARDIZE_EXAMPLES = (
    dict(x=torch.tensor([5.0, 5.0, 5.0]), eps=STD_EPS),  # numerics note: constant → zeros, not NaN
    dict(x=torch.tensor([-1.0, -0.5, 500.0]), eps=STD_EPS),  # numerics note Test 1: scale mixing
    dict(x=torch.tensor([1.0, 1.0 + 1e-7, 1.0 - 1e-7], dtype=torch.float64), eps=1e-6),  # σ < eps
    dict(x=torch.tensor([0.1] * 7), eps=STD_EPS),  # constant whose plain mean rounds off 0.1
    dict(x=torch.tensor([3.0], dtype=torch.float64), eps=STD_EPS),  # n = 1
)


@st.composite
def streams(draw, max_rows: int = 40):
    """A stream x [M, *shape] (float64 values, float32 or float64) and a split into batch sizes."""
    g = torch.Generator().manual_seed(draw(seeds))
    shape = draw(st.sampled_from([(), (3,), (2, 2)]))
    m = draw(st.integers(1, max_rows))
    kind = draw(st.sampled_from(["normal", "offset", "mixed_scale", "constant", "integers"]))
    x = _values(g, kind, (m, *shape)).to(draw(dtypes))
    return dict(shape=shape, stream=x, splits=_split(draw, m), other=_split(draw, m))


def _split(draw, m: int) -> list[int]:
    cuts = sorted(draw(st.sets(st.integers(1, max(m - 1, 1)), max_size=6)) - {m}) if m > 1 else []
    edges = [0, *cuts, m]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


STREAM_EXAMPLES = (
    dict(shape=(), stream=torch.arange(10.0, dtype=torch.float64), splits=[10], other=[1] * 10),
    dict(shape=(3,), stream=torch.full((6, 3), 4.0), splits=[1, 5], other=[3, 3]),
    dict(shape=(), stream=torch.tensor([1e3, 1e3 + 1, 1e3 - 1], dtype=torch.float64), splits=[3], other=[2, 1]),
)


def _chunks(x: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    return list(torch.split(x, sizes))


def _tol_rms(x: torch.Tensor, n_batches: int) -> tuple[float, float]:
    """(mean tol, var tol) in units of the stream's eps (the module docstring's rule): an implementation
    may take each batch's moments in the batch dtype (Stable-Baselines3 does, then accumulates in float64),
    so every Chan update rounds at eps(x.dtype) of |mean| and of var + δ²."""
    scale = 1.0 + float(x.double().abs().max())
    k = 16 * _eps(x.dtype) * (n_batches + 2)
    return k * scale, k * scale * scale
