"""benchmarks/safe/vs_omnisafe.py on runs the test writes in each tool's own format: only finished runs enter
the statistics, CI overlap and the generated verdicts against each anchor, the cost-band check, CPU
seconds per epoch. Trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import write_csv

from benchmarks.safe import vs_omnisafe as svo

STEPS = [1000 * (k + 1) for k in range(10)]


def settings(algo: str, **changed) -> dict:
    """An rlspec run's config as the shared override set of a 10,000-step comparison makes it (``changed`` apart)."""
    return {"algo": algo, "env_id": "SafetyPointGoal1-v0", "total_steps": 10_000, "steps_per_epoch": 4_000,
            "num_envs": 1, "torch_threads": 1, "ep_window": 50, **changed}


def expected(algo: str = "PPOLag") -> list[str]:
    return svo.shared(algo, 0, 10_000, 4_000, 1)["rlspec"]


def ours(root: Path, seed: int, ret: float, cost: float, steps=STEPS, **changed) -> None:
    write_csv(root / f"PPOLag-s{seed}" / "metrics.csv",
              {"step": steps, "Metrics/EpRet": [ret] * len(steps), "Metrics/EpCost": [cost] * len(steps),
               "Metrics/LagrangeMultiplier": [0.1] * len(steps), "Time/Rollout": [2.0] * len(steps),
               "Time/Update": [3.0] * len(steps)})
    (root / f"PPOLag-s{seed}" / "config.json").write_text(json.dumps({"engine": "safe", "config": settings(
        "PPOLag", **changed)}))


def theirs(root: Path, seed: int, ret: float, cost: float, steps=STEPS, stamp: str = "2026-11-28-07-00-00") -> None:
    write_csv(root / "PPOLag-{SafetyPointGoal1-v0}" / f"seed-{seed:03d}-{stamp}" / "progress.csv",
              {"Metrics/EpRet": [ret] * len(steps), "Metrics/EpCost": [cost] * len(steps), "TotalEnvSteps": steps,
               "Metrics/LagrangeMultiplier": [0.2] * len(steps), "Time/Rollout": [4.0] * len(steps),
               "Time/Update": [6.0] * len(steps)})


def test_overlapping_sides_meet_the_goal_and_unfinished_runs_stay_out(tmp_path):
    a, b = tmp_path / "rlspec", tmp_path / "omnisafe"
    for seed, (r, c) in enumerate([(10, 24), (12, 26), (11, 25)]):
        ours(a, seed, r, c)
        theirs(b, seed, r + 0.5, c + 1)
    ours(a, 3, 100.0, 0.0, steps=STEPS[:4])  # unfinished: must not enter the statistics
    ours(a, 4, 100.0, 0.0, ep_window=20)  # finished, but not on the same work: listed and left out
    theirs(b, 0, 99.0, 99.0, stamp="2026-11-27-07-00-00")  # an older directory of seed 0: passed over
    out = svo.compare_algo("PPOLag", [svo.read_run(p) for p in svo.find_runs(a, b, "PPOLag")], 10_000,
                           expected())
    groups = out["report"]["groups"]
    assert len(groups["rlspec PPOLag"]["runs"]) == 3 and len(groups["omnisafe PPOLag"]["runs"]) == 3
    assert groups["rlspec PPOLag"]["summary"]["final_return"]["mean"] == pytest.approx(11.0)
    assert groups["omnisafe PPOLag"]["summary"]["final_cost"]["mean"] == pytest.approx(26.0)
    assert out["unfinished"] == [{"path": str(a / "PPOLag-s3"), "env_steps": 4000.0}]
    assert out["excluded_other_settings"] == {str(a / "PPOLag-s4"): {"ep_window": ["20", "50"]}}
    anchor = out["checks"]["omnisafe PPOLag"]
    assert anchor["return_ci_overlaps"] is True and anchor["cost_ci_overlaps"] is True
    assert anchor["late_cost_within_limit_pm5"] is True and out["checks"]["rlspec PPOLag"] == {
        "late_cost_within_limit_pm5": True}
    # 3 vs 3 seeds: the exact p cannot go below 0.1, so no verdict whatever the means
    assert anchor["return"]["difference"] == pytest.approx(-0.5) and anchor["return"]["permutation_p"] >= 0.1
    assert anchor["return"]["verdict"] == "too few seeds to decide (the smallest p 3 vs 3 seeds allow is 0.1)"
    assert out["wall_s_per_epoch"] == {"rlspec PPOLag": [5.0] * 4, "omnisafe PPOLag": [10.0] * 3}  # s4 left out


def test_a_miss_is_reported_with_the_words_its_numbers_allow(tmp_path):
    a, b = tmp_path / "rlspec", tmp_path / "omnisafe"
    for seed, spread in enumerate([-2.0, -1.0, 0.0, 1.0, 2.0]):
        ours(a, seed, 20 + spread, 40 + spread)  # far above the limit: outside the band
        theirs(b, seed, 5 + spread, 24 + spread)
    out = svo.compare_algo("PPOLag", [svo.read_run(p) for p in svo.find_runs(a, b, "PPOLag")], 10_000,
                           expected())
    anchor = out["checks"]["omnisafe PPOLag"]
    assert anchor["return_ci_overlaps"] is False and anchor["cost_ci_overlaps"] is False
    assert out["checks"]["rlspec PPOLag"]["late_cost_within_limit_pm5"] is False
    assert anchor["late_cost_within_limit_pm5"] is True
    # 5 vs 5, every rlspec seed above every OmniSafe seed: p = 2/252; a higher return is ahead, a higher cost behind
    assert anchor["return"]["verdict"] == "ahead" and anchor["cost"]["verdict"] == "behind"
    assert anchor["return"]["permutation_p"] == pytest.approx(2 / 252) and anchor["return"]["margin"] is None


def test_main_writes_the_json_and_the_figure(tmp_path):
    a, b, out = tmp_path / "rlspec", tmp_path / "omnisafe", tmp_path / "out"
    for seed in range(3):
        ours(a, seed, 10 + seed, 25)
        theirs(b, seed, 10 + seed, 25)
    assert svo.main(["--rlspec", str(a), "--omnisafe", str(b), "--total-steps", "10000", "--out", str(out)]) == 0
    result = json.loads((out / "safe_vs_omnisafe.json").read_text())
    assert result["algos"]["PPOLag"]["checks"]["omnisafe PPOLag"]["return"]["difference"] == 0.0
    assert result["algos"]["PPOLag"]["setting_differences"] is None  # no defaults table written here
    assert (out / "safe_vs_omnisafe_PPOLag.png").stat().st_size > 0
    table = (out / "safe_vs_omnisafe.md").read_text().splitlines()
    assert table[2].startswith("| PPOLag | omnisafe | 3 | 11.0 [10.0, 12.0] | 25.0 [25.0, 25.0] | 10.0/25, 11.0/25, ")
    too_few = "too few seeds to decide (the smallest p 3 vs 3 seeds allow is 0.1) (p = 1)"
    assert table[3].endswith(f"| 0.10 [0.10, 0.10] | 5–5 | yes | omnisafe: {too_few}; {too_few} |")
    assert svo.main(["--rlspec", str(tmp_path / "none"), "--omnisafe", str(tmp_path / "none"), "--out",
                     str(out)]) == 1


def sb3(root: Path, seed: int, ret: float, cost: float, steps=STEPS) -> None:
    write_csv(root / f"PPO-s{seed}" / "progress.csv",
              {"time/total_timesteps": steps, "rollout/ep_rew_mean": [ret] * len(steps),
               "rollout/ep_cost_mean": [cost] * len(steps), "rollout/ep_len_mean": [1000] * len(steps)})


def test_ppo_has_two_anchors_and_sb3_cost_comes_from_its_callback_column(tmp_path):
    a, b, c = tmp_path / "rlspec", tmp_path / "omnisafe", tmp_path / "sb3"
    for seed in range(3):
        write_csv(a / f"PPO-s{seed}" / "metrics.csv", {"step": STEPS, "Metrics/EpRet": [10.0 + seed] * 10,
                                                       "Metrics/EpCost": [50.0] * 10,
                                                       "Metrics/LagrangeMultiplier": [0.0] * 10})
        (a / f"PPO-s{seed}" / "config.json").write_text(json.dumps({"engine": "safe", "config": settings("PPO")}))
        write_csv(b / "PPO-{SafetyPointGoal1-v0}" / f"seed-{seed:03d}-t" / "progress.csv",
                  {"Metrics/EpRet": [11.0 + seed] * 10, "Metrics/EpCost": [50.0] * 10, "TotalEnvSteps": STEPS})
        sb3(c, seed, 5.0 + seed, 80.0)
    paths = svo.find_runs(a, b, "PPO", c)
    assert [p.parent.name if "seed-" in p.name else p.name for p in paths][-3:] == ["PPO-s0", "PPO-s1", "PPO-s2"]
    out = svo.compare_algo("PPO", [svo.read_run(p) for p in paths], 10_000, expected("PPO"))
    assert out["report"]["groups"]["sb3 PPO"]["summary"]["final_cost"]["mean"] == pytest.approx(80.0)
    assert out["checks"]["omnisafe PPO"]["return"]["difference"] == pytest.approx(-1.0)
    sb3_checks = out["checks"]["sb3 PPO"]
    assert sb3_checks["return_ci_overlaps"] is False and sb3_checks["cost_ci_overlaps"] is False
    assert out["checks"]["sb3 PPO"]["cost"]["difference"] == pytest.approx(-30.0)  # lower: the better side
    assert svo.find_runs(a, b, "PPOLag", c) == []  # SB3 anchors PPO only
    logged = svo.read_run(a / "PPO-s0")  # rlspec logs λ = 0 for PPO, which has none: not compared or drawn
    assert "multiplier" not in svo.without_multiplier("PPO", logged).values and "multiplier" in logged.values
    assert svo.without_multiplier("PPOLag", logged) is logged


def test_runs_without_the_algorithm_s_anchor_sets_are_left_out(tmp_path):
    a, b, out = tmp_path / "rlspec", tmp_path / "omnisafe", tmp_path / "out"
    aligned = {"ppo": {"update_iters": 10, "batch_size": 128, "critic_lr": 0.001}}
    for seed in range(3):
        ours(a, seed, 10 + seed, 25, **aligned)
        theirs(b, seed, 10 + seed, 25)
    ours(a, 3, 99.0, 0.0, ppo={"update_iters": 40, "batch_size": 128, "critic_lr": 1e-3})  # rlspec's default iters
    b.mkdir(parents=True, exist_ok=True)
    (b / "omnisafe_safe.json").write_text(json.dumps({"algos": {"PPOLag": {"rlspec_anchor_sets": [
        "ppo.update_iters=10", "ppo.batch_size=128", "ppo.critic_lr=1e-3"]}}}))
    assert svo.main(["--rlspec", str(a), "--omnisafe", str(b), "--total-steps", "10000", "--out", str(out)]) == 0
    result = json.loads((out / "safe_vs_omnisafe.json").read_text())["algos"]["PPOLag"]
    assert result["excluded_other_settings"] == {str(a / "PPOLag-s3"): {"ppo.update_iters": ["40", "10"]}}
    assert len(result["report"]["groups"]["rlspec PPOLag"]["runs"]) == 3  # 0.001 is 1e-3
    assert result["rlspec_anchor_sets"] == ["ppo.update_iters=10", "ppo.batch_size=128", "ppo.critic_lr=1e-3"]


def test_seconds_per_epoch_is_the_median_so_one_waiting_epoch_does_not_move_it(tmp_path):
    write_csv(tmp_path / "run" / "metrics.csv", {"step": [1, 2, 3], "Time/Rollout": [2.0, 600.0, 3.0],
                                                 "Time/Update": [1.0, 1.0, 1.0]})  # epoch 2 waited 10 min
    assert svo.seconds_per_epoch(tmp_path / "run") == 4.0  # of 3, 601, 4 (the mean: 202.7)
    write_csv(tmp_path / "sb3" / "progress.csv", {"time/total_timesteps": [4000, 8000, 12000, 16000],
                                                 "time/time_elapsed": [11, 22, 633, 645]})  # SB3: elapsed seconds
    assert svo.seconds_per_epoch(tmp_path / "sb3") == 11.5  # of 11, 11, 611, 12


def test_cpo_dual_cases_are_counted_per_side(tmp_path):
    write_csv(tmp_path / "CPO-s0" / "metrics.csv", {"step": [1, 2, 3], "Metrics/EpRet": [1.0] * 3,
                                                    "Misc/OptimCase": [0.0, 3.0, 0.0]})
    (tmp_path / "CPO-s0" / "config.json").write_text(json.dumps({"engine": "safe", "config": settings("CPO")}))
    write_csv(tmp_path / "CPO-{SafetyPointGoal1-v0}" / "seed-000-t" / "progress.csv",
              {"TotalEnvSteps": [1, 2, 3], "Metrics/EpRet": [1.0] * 3, "Misc/OptimCase": [2.0, 2.0, 4.0]})
    curves = [svo.read_run(p) for p in svo.find_runs(tmp_path, tmp_path, "CPO")]
    assert svo.optim_cases(curves) == {"rlspec CPO": {"0": 2, "3": 1}, "omnisafe CPO": {"2": 2, "4": 1}}
    ours(tmp_path, 0, 1.0, 1.0)  # PPOLag logs no case
    assert svo.optim_cases([svo.read_run(tmp_path / "PPOLag-s0")]) == {}


def test_the_json_says_which_columns_each_tool_logs_otherwise():
    assert svo.logged_otherwise("PPOLag") == [svo.KL_PPO]
    assert svo.logged_otherwise("CPO") == [svo.KL_NATURAL, svo.LOSS_CPO]
    assert svo.logged_otherwise("TRPO") == [svo.KL_NATURAL]
