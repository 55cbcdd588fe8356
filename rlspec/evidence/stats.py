"""Statistics for comparing learning runs, as the field reports them (Agarwal et al. 2021, "Deep RL at the Edge
of the Statistical Precipice", and its library rliable; Patterson et al. 2024, "Empirical design in RL").

One number per seed (a final return, a steps-to-threshold with censored seeds at the budget, ...) per arm:

- ``iqm``: the interquartile mean, the mean of the middle 50% of the values (scipy.stats.trim_mean at 25%):
  robust to one outlying seed, less noisy than the median.
- ``interval``: a percentile bootstrap CI of a statistic (mean or IQM). With several tasks the resampling is
  *stratified*: seeds are resampled within each task, as rliable does.
- ``permutation_p``: the exact two-sided permutation p-value of the difference in means (every split of the
  pooled seeds enumerated, up to 10^5 splits): no normality assumed. With n seeds per arm it cannot go below
  2 / C(2n, n) (0.10 at 3 vs 3, 0.0079 at 5 vs 5).
- ``mde``: the minimum detectable difference in means at 80% power and two-sided α = 0.05, from the pooled
  standard deviation and Student's t: a true difference below it is missed more often than not.
- ``probability_of_improvement``: P(a > b) + ½·P(a = b) over every pair of a seed of a and a seed of b (the
  Mann–Whitney U statistic over n_a·n_b; rliable's "probability of improvement"), with a bootstrap CI: 0.5 is
  no tendency either way, 1 every seed of a beats every seed of b. It says how often, not by how much.
- ``tost``: two one-sided tests of "the difference lies within ±margin"; the margin must be declared before the
  runs (in the benchmark's code). Equivalence is claimed only when both one-sided p-values are below α.

``compare`` puts these together and writes the verdict word from the numbers: ``ahead`` / ``behind`` (the
permutation p below α), ``equivalent within ±m`` (TOST), ``too few seeds to decide`` (the smallest p the seed
counts allow is not below α: no result of these runs could have decided), ``no difference detectable at this
power`` (otherwise; a difference smaller than the MDE could exist). Nothing else in the docs may say "within" or
"as good as".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

ALPHA, POWER, LEVEL, RESAMPLES = 0.05, 0.8, 0.95, 10_000


def _values(x: Sequence[float], name: str) -> np.ndarray:
    """A 1-D float array of finite values; a ValueError naming ``name`` otherwise."""
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 0 or not np.isfinite(a).all():
        raise ValueError(f"{name}: expected finite per-seed values, got {a.tolist()!r} (count a censored seed "
                         "at the budget with censored_at)")
    return a


def censored_at(values: Sequence[float], budget: float | Sequence[float]) -> list[float]:
    """Per-seed values with a seed that never got there (NaN) counted at its budget (one, or one per seed)."""
    a = np.asarray(values, dtype=float)
    return np.where(np.isnan(a), np.asarray(budget, dtype=float), a).tolist()


def iqm(x: Sequence[float]) -> float:
    """The interquartile mean: the mean of the middle 50% (the mean itself for fewer than 4 values)."""
    return float(stats.trim_mean(_values(x, "iqm"), 0.25))


STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {  # over the last axis
    "mean": lambda x: np.mean(x, axis=-1),
    "iqm": lambda x: stats.trim_mean(x, 0.25, axis=-1),
}


def interval(tasks: Sequence[Sequence[float]], statistic: str = "mean", level: float = LEVEL,
             seed: int = 0) -> tuple[float, float]:
    """(low, high): percentile bootstrap CI of ``statistic`` (mean or iqm) over the seeds of every task pooled,
    resampling seeds within each task (stratified). A task with one seed contributes no spread."""
    samples = [_values(t, "interval") for t in tasks]
    gen = np.random.default_rng(seed)
    draws = np.concatenate([s[gen.integers(0, s.size, (RESAMPLES, s.size))] for s in samples], axis=1)  # [R, N]
    values = STATISTICS[statistic](draws)  # [R]
    tail = (1 - level) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


EXACT_UP_TO = 100_000  # splits enumerated; beyond (e.g. 10 vs 10 seeds: 184,756) a seeded Monte-Carlo draw


def permutation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided permutation p-value of mean(a) − mean(b): the share of splits of the pooled seeds whose
    |difference| is at least the observed one; exact (every split) up to EXACT_UP_TO splits, else from
    EXACT_UP_TO seeded random splits."""
    a, b = _values(a, "a"), _values(b, "b")
    exact = math.comb(a.size + b.size, a.size) <= EXACT_UP_TO
    result = stats.permutation_test((a, b), lambda x, y, axis: np.abs(np.mean(x, axis) - np.mean(y, axis)),
                                    permutation_type="independent", vectorized=True, alternative="greater",
                                    n_resamples=np.inf if exact else EXACT_UP_TO, rng=np.random.default_rng(0))
    return float(result.pvalue)


def mde(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference in means a two-sided t-test at ``alpha`` detects with ``power``:
    (t_{1−α/2, df} + t_{power, df}) · s_pooled · √(1/n_a + 1/n_b), df = n_a + n_b − 2 (NaN below 2 + 2 seeds)."""
    a, b = _values(a, "a"), _values(b, "b")
    df = a.size + b.size - 2
    if a.size < 2 or b.size < 2:
        return math.nan
    pooled = math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / df)
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * pooled
                 * math.sqrt(1 / a.size + 1 / b.size))


def tost(a: Sequence[float], b: Sequence[float], margin: float) -> float:
    """The p-value of "−margin < mean(a) − mean(b) < margin": the larger of the two one-sided t-tests'."""
    a, b = _values(a, "a"), _values(b, "b")
    if not margin > 0:
        raise ValueError(f"tost: argument 'margin' must be > 0 (declared before the runs), got {margin!r}")
    above = stats.ttest_ind(a + margin, b, alternative="greater").pvalue  # H0: diff <= -margin
    below = stats.ttest_ind(a - margin, b, alternative="less").pvalue  # H0: diff >= +margin
    return float(max(above, below))


def probability_of_improvement(a: Sequence[float], b: Sequence[float], higher_is_better: bool = True,
                               level: float = LEVEL, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """(P(a better than b) + ½·P(tie) over all n_a·n_b pairs of seeds, its percentile bootstrap CI: seeds
    resampled within each arm). scipy.stats.mannwhitneyu's U of a against b, / (n_a·n_b)."""
    a, b = _values(a, "a"), _values(b, "b")
    sign = 1.0 if higher_is_better else -1.0

    def share(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # [..., n_a], [..., n_b] -> [...]
        d = sign * (x[..., :, None] - y[..., None, :])
        return ((d > 0) + 0.5 * (d == 0)).mean((-2, -1))

    point = float(stats.mannwhitneyu(sign * a, sign * b).statistic / (a.size * b.size))
    gen = np.random.default_rng(seed)
    draws = share(a[gen.integers(0, a.size, (RESAMPLES, a.size))], b[gen.integers(0, b.size, (RESAMPLES, b.size))])
    tail = (1 - level) / 2
    return point, (float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail)))


def compare(a: Sequence[float], b: Sequence[float], margin: float | None = None, higher_is_better: bool = True,
            alpha: float = ALPHA) -> dict:
    """Arm a against arm b (per-seed values): means, IQMs and their CIs, the difference, the exact permutation
    p, the MDE, TOST against ``margin`` (when declared), the probability that a seed of a beats one of b (by
    ``higher_is_better``) and the verdict word those numbers give."""
    a, b = _values(a, "a"), _values(b, "b")
    diff = float(a.mean() - b.mean())
    out = {"n": [int(a.size), int(b.size)], "mean": [float(a.mean()), float(b.mean())],
           "mean_ci": [list(interval([a])), list(interval([b]))], "iqm": [iqm(a), iqm(b)],
           "iqm_ci": [list(interval([a], "iqm")), list(interval([b], "iqm"))], "difference": diff,
           "permutation_p": permutation_p(a, b), "mde": mde(a, b, alpha), "alpha": alpha,
           "margin": margin, "tost_p": tost(a, b, margin) if margin is not None else None}
    point, ci = probability_of_improvement(a, b, higher_is_better)
    out["p_improvement"], out["p_improvement_ci"] = point, list(ci)
    out["verdict"] = verdict(out, higher_is_better)
    return out


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided permutation p that n_a vs n_b seeds allow: the observed split alone (and its mirror
    when n_a = n_b) at the most extreme |difference|."""
    return (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a)


def verdict(result: dict, higher_is_better: bool = True) -> str:
    """The words a comparison's numbers allow, and no others."""
    floor = smallest_p(*result["n"])
    if floor >= result["alpha"] and (result["tost_p"] is None or result["tost_p"] >= result["alpha"]):
        n_a, n_b = result["n"]
        return f"too few seeds to decide (the smallest p {n_a} vs {n_b} seeds allow is {floor:.2g})"
    if result["permutation_p"] < result["alpha"]:
        better = (result["difference"] > 0) == higher_is_better
        return "ahead" if better else "behind"
    if result["tost_p"] is not None and result["tost_p"] < result["alpha"]:
        return f"equivalent within ±{result['margin']:g}"
    mde_text = "n/a" if math.isnan(result["mde"]) else f"{result['mde']:.3g}"
    return f"no difference detectable at this power (MDE {mde_text})"
