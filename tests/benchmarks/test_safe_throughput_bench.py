"""benchmarks/safe/throughput.py's own logic, in the main environment on ToyGoal-v0 (no Safety-Gymnasium, no
SB3): the interleaved schedule, the medians and ratios, and a whole tiny run's JSON. Nothing timed is asserted."""

from __future__ import annotations

import json
import os

import pytest

from benchmarks.safe import throughput as bench


def test_schedule_times_every_arm_once_per_round_in_a_rotated_order():
    assert bench.schedule(["a", "b", "c"], 3) == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert bench.schedule(["a"], 2) == ["a", "a"]


def test_summary_is_the_median_of_the_rounds_and_ratios_skip_absent_baselines():
    samples = [{"rollout_s": 2.0, "update_s": 1.0, "rollout_cpu_s": 4.0},
               {"rollout_s": 1.0, "update_s": 3.0, "rollout_cpu_s": 2.0},
               {"rollout_s": 4.0, "update_s": 0.5, "rollout_cpu_s": 8.0}]
    s = bench.summarize(samples, 100, has_update=True)
    assert s["rollout_steps_per_s"] == 50.0  # median rollout 2 s
    assert s["rollout_update_steps_per_s"] == 100 / 4.0  # median of the sums 3, 4, 4.5
    assert s["update_s"] == 1.0 and s["rollout_cpu_steps_per_s"] == 25.0 and s["rounds"] == 3
    assert bench.summarize(samples, 100, has_update=False)["rollout_update_steps_per_s"] is None
    group = {"ref": {"r": 100.0}, "fast": {"r": 180.0}, "none": {"r": None}}
    assert bench.ratios(group, "fast", ["ref", "absent", "none"], "r") == {"ref": 1.8}


def test_goals_compare_two_workers_with_the_reference_and_sb3_subproc_under_amdahl_s_bound():
    # reference: 1000 steps, rollout 2 s (500/s), update 3 s; SB3 subproc: rollout 1 s, rollout + update 1.6 s
    ref = {"steps": 1000, "rollout_steps_per_s": 500.0, "update_s": 3.0, "rollout_update_steps_per_s": 200.0}
    sb3 = {"steps": 1000, "rollout_steps_per_s": 1000.0, "rollout_update_steps_per_s": 625.0}
    fast = {"ratios": {"rollout_steps_per_s": {bench.REFERENCE: 1.6, bench.SB3_DUMMY: 1.2, bench.SB3_SUBPROC: 0.8},
                       "rollout_update_steps_per_s": {bench.REFERENCE: 1.2, bench.SB3_SUBPROC: 0.38}}}
    group = {bench.REFERENCE: ref, bench.SB3_SUBPROC: sb3, "fast (2 workers)": fast}
    assert bench.bound(group, 2) == {"rollout_steps_per_s": 1000.0,  # the reference's rollout on 2 cores
                                     "rollout_update_steps_per_s": 1000 / (1.0 + 3.0)}  # the update stays serial
    goals = bench.goals({"4 envs": group, "8 envs": {}}, bench.worker_name(2), cores=2)
    assert goals["4 envs, rollout_steps_per_s"] == {
        bench.REFERENCE: {"ratio": 1.6, "met": True, "bound": 2.0, "reachable": True},
        bench.SB3_SUBPROC: {"ratio": 0.8, "met": False, "bound": 1.0, "reachable": False}}
    both = goals["4 envs, rollout_update_steps_per_s"]
    assert both[bench.REFERENCE] == {"ratio": 1.2, "met": False, "bound": 1.25, "reachable": False}  # 250 / 200
    assert both[bench.SB3_SUBPROC]["bound"] == pytest.approx(0.4) and both[bench.SB3_SUBPROC]["met"] is False


def test_a_tiny_toygoal_run_writes_every_arm_interleaved_with_its_ratios(tmp_path):
    assert bench.main(["--env", "ToyGoal-v0", "--envs", "2", "--workers", "1", "--steps", "40", "--rounds", "2",
                       "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "safe_throughput.json").read_text())
    group = report["results"]["2 envs"]
    assert list(group) == [bench.REFERENCE, "fast (1 worker)", "fast (1 worker + learner)",
                           "fast (1 worker + learner, blocking)", bench.CEILING]  # no SB3 for the toy env
    for arm in group.values():
        assert arm["steps"] == 40 and arm["rounds"] == 2 and len(arm["samples"]) == 2
    ref = group[bench.REFERENCE]
    assert ref["ratios"]["rollout_steps_per_s"] == {bench.REFERENCE: 1.0}
    assert ref["rollout_update_steps_per_s"] < ref["rollout_steps_per_s"]  # the update takes time
    ceiling = group[bench.CEILING]
    assert ceiling["rollout_update_steps_per_s"] is None
    assert ceiling["ceiling_steps_per_s"] == ceiling["rollout_steps_per_s"] * len(os.sched_getaffinity(0))
    assert report["goals_2_workers"] == {}  # no 2-worker arm measured
    cores = len(os.sched_getaffinity(0))
    assert report["amdahl_bound"]["2 envs"]["rollout_steps_per_s"] == ref["rollout_steps_per_s"] * cores
    learner = report["goals_1_worker_and_learner"]["2 envs, rollout_update_steps_per_s"][bench.REFERENCE]
    assert learner["bound"] == pytest.approx(report["amdahl_bound"]["2 envs"]["rollout_update_steps_per_s"]
                                             / ref["rollout_update_steps_per_s"])
    assert report["command"].endswith("--rounds 2 --out " + str(tmp_path))
    assert (tmp_path / "safe_throughput.png").stat().st_size > 0
