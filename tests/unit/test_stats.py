"""rlspec/evidence/stats.py against closed forms: the IQM of a known sample, exact permutation p-values by
counting splits, the MDE from Student's t table values, TOST on samples whose answer is known, the stratified
bootstrap, censoring at the budget, and the verdict words each result allows."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rlspec.evidence import stats


def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == 4.5  # (3 + 4 + 5 + 6) / 4: the outlier has no weight
    assert stats.iqm([1.0, 2.0, 9.0]) == 4.0  # fewer than 4 seeds: nothing to trim


def _splits_p(a, b):
    """Two-sided permutation p by counting every split of the pooled values (|diff| >= observed)."""
    pooled, k = list(a) + list(b), len(a)
    observed = abs(np.mean(a) - np.mean(b))
    diffs = [abs(np.mean([pooled[i] for i in idx]) - np.mean([pooled[i] for i in range(len(pooled)) if i not in idx]))
             for idx in itertools.combinations(range(len(pooled)), k)]
    return sum(d >= observed - 1e-12 for d in diffs) / len(diffs)


@pytest.mark.parametrize("a, b", [([1, 2, 3], [4, 5, 6]), ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]),
                                  ([0.3, 2.0, 1.1, 4.0], [1.5, 0.2, 3.3]), ([5, 5, 6], [5, 6, 6, 7])])
def test_permutation_p_counts_every_split(a, b):
    assert stats.permutation_p(a, b) == pytest.approx(_splits_p(a, b))
    if len(a) == len(b) and max(a) < min(b):
        assert stats.permutation_p(a, b) == pytest.approx(2 / math.comb(2 * len(a), len(a)))  # its floor


def test_mde_is_students_t_sum_times_the_pooled_standard_error():
    # df = 2: t_0.975 = 4.302653, t_0.80 = 1.060660 (tables); s_pooled = √2, √(1/2 + 1/2) = 1
    assert stats.mde([-1, 1], [-1, 1]) == pytest.approx((4.302653 + 1.060660) * math.sqrt(2), rel=1e-6)
    # df = 8: t_0.975 = 2.306004, t_0.80 = 0.888951; s = √2.5 (0..4), √(2/5)
    assert stats.mde(range(5), range(5)) == pytest.approx((2.306004 + 0.888951) * math.sqrt(2.5) * math.sqrt(0.4),
                                                          rel=1e-4)
    assert math.isnan(stats.mde([1.0], [1.0, 2.0]))


def test_tost_declares_equivalence_only_inside_the_margin():
    x = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert stats.tost(x, x, margin=10) < 0.001
    assert stats.tost(x, x, margin=0.1) > 0.4
    assert stats.tost([10 + v for v in x], x, margin=5) > 0.5  # a difference of 10 is not within ±5
    with pytest.raises(ValueError, match="'margin' must be > 0"):
        stats.tost(x, x, margin=0)


def test_stratified_interval_resamples_within_each_task():
    low, high = stats.interval([[1.0, 1.0, 1.0], [5.0, 5.0]])  # no spread inside a task: none in the CI
    assert low == high == pytest.approx(2.6)
    assert stats.interval([[3.0], [7.0]]) == (5.0, 5.0)
    low, high = stats.interval([[0.0, 1.0, 2.0, 3.0, 10.0]], "iqm")
    assert 0.0 <= low <= stats.iqm([0, 1, 2, 3, 10]) <= high <= 10.0 and low < high


def test_censored_seeds_count_at_their_budget():
    assert stats.censored_at([100.0, math.nan, 50.0], [200.0, 300.0, 400.0]) == [100.0, 300.0, 50.0]
    with pytest.raises(ValueError, match="censored_at"):
        stats.iqm([1.0, math.nan])


def test_the_verdict_says_only_what_the_numbers_allow():
    low, high = [0, 1, 2, 3, 4], [10, 11, 12, 13, 14]
    assert stats.compare(high, low)["verdict"] == "ahead"
    assert stats.compare(high, low, higher_is_better=False)["verdict"] == "behind"  # a cost: higher is worse
    same = stats.compare(low, [v + 0.1 for v in low], margin=5)
    assert same["verdict"] == "equivalent within ±5" and same["tost_p"] < 0.05
    weak = stats.compare([0, 5, 1, 4, 2], [1, 4, 0, 5, 3])
    assert weak["verdict"].startswith("no difference detectable at this power (MDE ") and weak["tost_p"] is None
    three = stats.compare([1, 2, 3], [4, 5, 6])  # the best 3-vs-3 split has p = 0.1: never "behind" at α = 0.05
    assert three["permutation_p"] == pytest.approx(0.1)
    assert three["verdict"] == "too few seeds to decide (the smallest p 3 vs 3 seeds allow is 0.1)"
    assert stats.smallest_p(5, 5) == pytest.approx(2 / 252) and stats.smallest_p(2, 3) == pytest.approx(1 / 10)


def test_probability_of_improvement_counts_pairs_and_ties():
    a, b = [3.0, 4.0, 5.0], [1.0, 2.0, 3.0]  # 9 pairs: 8 won, 1 tie (3 vs 3)
    point, (lo, hi) = stats.probability_of_improvement(a, b)
    assert point == pytest.approx(8.5 / 9) and lo <= point <= hi <= 1.0
    assert stats.probability_of_improvement(a, b, higher_is_better=False)[0] == pytest.approx(0.5 / 9)
    assert stats.probability_of_improvement([1.0, 1.0], [1.0, 1.0]) == (0.5, (0.5, 0.5))
    assert stats.probability_of_improvement([9.0, 8.0], [1.0, 2.0]) == (1.0, (1.0, 1.0))  # every resample wins
    result = stats.compare(a, b, higher_is_better=False)  # compare orients it as the verdict does
    assert result["p_improvement"] == pytest.approx(0.5 / 9) and len(result["p_improvement_ci"]) == 2
