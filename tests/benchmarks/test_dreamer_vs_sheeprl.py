"""The DreamerV3-beside-sheeprl comparisons (benchmarks/dreamer/vs_sheeprl.py, dreamer_still_vs_sheeprl.py) on
rows the test writes: which seeds count, censoring at the budget, the goals' arithmetic. Trains nothing."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.dreamer import still_vs_sheeprl as still
from benchmarks.dreamer import vs_sheeprl as vs


def rows(successes: list[float], cpu_per_chunk: float = 100.0) -> list[dict]:
    return [{"env_steps": 2048 * (i + 1), "cpu_s": cpu_per_chunk * (i + 1), "greedy_success": s}
            for i, s in enumerate(successes)]


def test_a_seed_counts_once_complete_and_a_miss_enters_at_the_budget():
    impl = vs.implementation({0: rows([0.0, 0.9]), 1: rows([0.0, 0.0, 0.0]), 2: rows([0.5])}, budget=3 * 2048)
    assert impl["reached"] == "1 of 2" and impl["running"] == [2]  # seed 2: neither reached nor at the budget
    assert impl["env_steps_to_goal"]["mean"] == (4096 + 6144) / 2 and impl["env_steps_to_goal_censored"] == 1
    assert impl["cpu_s_to_goal"]["mean"] == 200.0 and impl["cpu_s_censored"] == [300.0]


def test_fast_over_sheeprl_is_a_bound_when_no_sheeprl_seed_gets_there():
    budget = 3 * 2048
    sheep = vs.implementation({s: rows([0.0] * 3, 200.0) for s in range(3)}, budget)
    fast = vs.implementation({s: rows([0.0, 0.95], 150.0) for s in range(3)}, budget)
    ref = vs.implementation({s: rows([0.0, 0.0, 0.9]) for s in range(3)}, budget)
    goals = vs.goals({"sheeprl": sheep, "reference": ref, "fast": fast})
    assert goals["fast_cpu_s_over_sheeprl"]["ratio_at_most"] == pytest.approx(300.0 / 600.0)
    assert goals["fast_cpu_s_over_sheeprl"]["met"] and "censored" in goals["fast_cpu_s_over_sheeprl"]
    diff = goals["reference_env_steps_minus_sheeprl"]  # every seed at the budget on both sides: 0, CI [0, 0]
    assert diff["mean"] == 0.0 and diff["ci"] == [0.0, 0.0] and diff["met"]
    assert goals["reference_all_seeds_reach"]["met"] and goals["fast_all_seeds_reach"]["met"]
    reached = vs.implementation({s: rows([0.0, 0.9], 400.0) for s in range(3)}, budget)
    ratio = vs.goals({"sheeprl": reached, "fast": fast})["fast_cpu_s_over_sheeprl"]
    assert ratio["ratio"] == pytest.approx(300.0 / 800.0) and "censored" not in ratio


def test_difference_ci_is_the_bootstrap_of_the_mean_difference():
    low, high = vs.difference_ci([1.0, 2.0, 3.0], [10.0, 10.0, 10.0])
    assert -9.0 <= low <= -8.0 <= high <= -7.0  # the means differ by -8; resampled means stay in [1, 3]


def test_standing_still_fall_reads_the_loss_at_n_updates():
    n = still.N_UPDATES
    updates = np.arange(1, n + 11, dtype=float)
    loss = 100.0 / updates**2  # 100 at the first update, 100 / N² at update N
    out = still.fall(updates, loss)
    assert out["start"] == 100.0 and out["after_n"] == pytest.approx(100.0 / n**2)
    assert out["fall"] == pytest.approx(1 - 1 / n**2) and out["first_update_with_goal_fall"] == 3.0  # 100/9 < 20
    with pytest.raises(SystemExit, match=f"before {n}"):
        still.fall(updates[: n // 2], loss[: n // 2])


def test_rows_past_the_budget_are_summarized_apart():
    """A seed continued past the budget: its statistics stay those of the budget; what came later is listed."""
    impl = vs.implementation({0: rows([0.0, 0.0, 0.0, 0.5, 0.95], 100.0)}, budget=3 * 2048)
    seed = impl["seeds"][0]
    assert not seed["reached"] and seed["last_env_steps"] == 3 * 2048 and impl["cpu_s_censored"] == [300.0]
    assert seed["beyond_budget"] == {"last_env_steps": 5 * 2048, "best_success": 0.95, "first_at_goal": 5 * 2048}
