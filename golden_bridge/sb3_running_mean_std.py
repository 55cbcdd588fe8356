"""Golden fixtures from Stable-Baselines3's ``RunningMeanStd`` and ``VecNormalize`` observation
normalization (the only module that imports stable_baselines3).

One fixed stream x [36, 3] (float64, drawn from an explicit ``torch.Generator``; columns: standard
normal, offset 1e3 + 5·N(0, 1), mixed scale {-|N|, +500}) is fed to SB3's ``RunningMeanStd`` in two
different splits into batches; the state after every batch is recorded. The final statistics then
normalize a held-out batch with ``VecNormalize._normalize_obs`` (clip_obs 10, epsilon 1e-8).
"""

from __future__ import annotations

import numpy as np
import torch
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env.vec_normalize import VecNormalize

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "stable-baselines3"
SPLIT_A = (1, 5, 16, 2, 12)  # uneven, including a single-row batch
SPLIT_B = (9, 9, 9, 9)
EPS64 = float(torch.finfo(torch.float64).eps)


def _stream(g: torch.Generator, rows: int) -> torch.Tensor:
    n = torch.randn(rows, 3, generator=g, dtype=torch.float64)
    mixed = torch.where(torch.rand(rows, generator=g) < 0.15, torch.full((rows,), 500.0), -n[:, 2].abs())
    x = torch.stack([n[:, 0], 1e3 + 5 * n[:, 1], mixed], dim=1)  # [rows, 3]
    return torch.round(x * 64) / 64  # dyadic: short, exact decimals in the JSON


def _run(stream: np.ndarray, split: tuple[int, ...]) -> dict[str, torch.Tensor]:
    rms = RunningMeanStd(epsilon=1e-4, shape=(3,))
    rows, start = [], 0
    for size in split:
        rms.update(stream[start:start + size])
        start += size
        rows.append((rms.mean.copy(), rms.var.copy(), float(rms.count)))
    return {"mean": torch.tensor(np.stack([r[0] for r in rows])),  # [batches, 3]
            "var": torch.tensor(np.stack([r[1] for r in rows])),  # [batches, 3]
            "count": torch.tensor([r[2] for r in rows], dtype=torch.float64)}  # [batches]


class _Normalizer:
    """The two attributes ``VecNormalize._normalize_obs`` reads (its defaults), without an env."""

    clip_obs, epsilon = 10.0, 1e-8


def running_mean_std(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    stream = _stream(g, sum(SPLIT_A))  # [36, 3]
    a, b = _run(stream.numpy(), SPLIT_A), _run(stream.numpy(), SPLIT_B)
    rms = RunningMeanStd(epsilon=1e-4, shape=(3,))
    rms.update(stream.numpy())
    obs = _stream(g, 4)  # [4, 3] held-out rollout
    obs[0, 1] = 2e3  # far beyond the clip of 10 standard deviations
    normalized = torch.tensor(VecNormalize._normalize_obs(_Normalizer(), obs.numpy(), rms))  # [4, 3]
    scale = 1.0 + float(stream.abs().max())
    return Fixture(
        path="numerics/sb3_running_mean_std.json", contract="numerics", package=PACKAGE,
        qualname="stable_baselines3.common.running_mean_std.RunningMeanStd.update, "
                 "stable_baselines3.common.vec_env.vec_normalize.VecNormalize._normalize_obs",
        seed=seed, atol=64 * EPS64 * scale * scale, rtol=64 * EPS64,
        why="both sides are float64; numpy's pairwise sums vs torch's reductions differ by a few eps of "
            "|x| <= 1.1e3 per Chan update (var: of |x|^2), 64·eps·(1+max|x|)^2 covers <= 5 updates",
        convention="RunningMeanStd(epsilon=1e-4, shape=(3,)) == ours; stream [36, 3] fed as split_a "
                   "(1, 5, 16, 2, 12) and split_b (9, 9, 9, 9) batches; expected *_a[t] / *_b[t] = state "
                   "after batch t; normalized = clip((obs - mean)/sqrt(var + 1e-8), ±10) with the stats of "
                   "one update on the whole stream (ObsNormalizer(epsilon=1e-8, clip=10) after commit)",
        inputs=dict(stream=stream, split_a=torch.tensor(SPLIT_A, dtype=torch.float64),
                    split_b=torch.tensor(SPLIT_B, dtype=torch.float64), obs=obs),
        expected=dict(mean_a=a["mean"], var_a=a["var"], count_a=a["count"], mean_b=b["mean"], var_b=b["var"],
                      count_b=b["count"], normalized=normalized))


GENERATORS = [running_mean_std]
