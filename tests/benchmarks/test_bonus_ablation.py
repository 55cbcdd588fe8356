"""benchmarks/bonus/ablation.py's summary on runs the test writes in the bonus engine's format: per arm the late
success rate, the success over the whole run and the steps to the success threshold with bootstrap CIs over
seeds, the greedy success read from each run's eval.json, the bonus statistics added up, and each bonus arm
against the baseline (overlap, ahead or behind outside the CI). Trains nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from run_files import write_csv

from benchmarks.bonus import ablation

STEPS = [1000.0 * (k + 1) for k in range(10)]
NAN = math.nan


def run(root: Path, arm: str, seed: int, success: list[float], greedy: float, bonus: dict | None = None) -> None:
    path = root / f"{arm}-s{seed}"
    columns = {"step": STEPS[:len(success)], "Metrics/SuccessRate": success, "Metrics/EpRet": [100.0] * len(success)}
    write_csv(path / "metrics.csv", {**columns, **(bonus or {})})
    config = {"task": "metaworld:reach-v3", "ablation": arm, "seed": seed, "total_steps": 10_000, "num_envs": 4,
              "fragment_len": 250}  # 1,000 env steps per update
    (path / "config.json").write_text(json.dumps({"engine": "bonus", "config": config}))
    (path / "eval").mkdir()
    (path / "eval/eval.json").write_text(json.dumps({"episodes": 20, "EpRet": 1.0, "SuccessRate": greedy}))


def test_arms_with_their_cis_and_their_verdicts_against_the_baseline(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    # the bonus columns of a top1 run: bonus time on rows 3 and 7 (the first stopped by the KL guard), the trigger
    # held back by the cooldown (reason 4) on the other rows
    ran = [0, 0, 1, 0, 0, 0, 1, 0, 0, 0]
    top1 = {"bonus/ran": ran, "bonus/updates": [4 if r else NAN for r in ran],
            "bonus/early_stop_reason": [NAN, NAN, 1, NAN, NAN, NAN, 0, NAN, NAN, NAN],
            "bonus/not_triggered_reason_code": [NAN if r else 4 for r in ran],
            "pairs/mined": [5.0 * k for k in range(10)], "bonus/errors": [0] * 10}
    for seed, level in enumerate([0.3, 0.35, 0.4]):
        run(runs, "baseline", seed, [0.0] * 5 + [level] * 5, greedy=0.25)  # reaches 0.3 at step 6,000
        run(runs, "queue", seed, [0.0] * 5 + [level] * 5, greedy=0.25)
        run(runs, "top1", seed, [0.6] * 10, greedy=0.5, bonus=top1)  # above the baseline from the start
    run(runs, "topk", 0, [1.0] * 4, greedy=1.0)  # unfinished (4 of 10 updates): left out
    r = ablation.summarize(runs, out, "metaworld:reach-v3", threshold=0.3)
    assert "topk" not in r["ablations"] and r["unfinished"] == [{"run": str(runs / "topk-s0"), "env_steps": 4000.0}]
    base, top = r["ablations"]["baseline"], r["ablations"]["top1"]
    assert base["success_rate"]["mean"] == pytest.approx(0.35) and base["success_rate"]["min"] == 0.3
    assert 0.3 - 1e-12 <= base["success_rate"]["ci_low"] < 0.35 < base["success_rate"]["ci_high"] <= 0.4 + 1e-12
    assert base["success_rate_mean_over_run"]["mean"] == pytest.approx(0.175)  # half the run at 0
    assert base["steps_to_threshold"]["mean"] == 6000.0 and base["steps_to_threshold"]["reached"] == "3/3"
    assert top["steps_to_threshold"]["mean"] == 1000.0 and top["greedy_success"]["mean"] == pytest.approx(0.5)
    assert base["greedy_success"]["mean"] == pytest.approx(0.25)
    assert top["bonus"]["updates_with_bonus"] == 6 and top["bonus"]["of_updates"] == 30
    assert top["bonus"]["early_stops"] == {"kl": 3, "entropy": 0}
    assert top["bonus"]["not_triggered"]["cooldown"] == 24 and top["bonus"]["pairs_mined"] == 45.0
    verdict = r["against_baseline"]
    top_late, queue_run = verdict["top1"]["success_rate"], verdict["queue"]["success_rate_mean_over_run"]
    assert (top_late["ci_overlaps_baseline"], top_late["ahead_outside_ci"], top_late["behind_outside_ci"]) == (
        False, True, False)
    assert (queue_run["ci_overlaps_baseline"], queue_run["ahead_outside_ci"], queue_run["behind_outside_ci"]) == (
        True, False, False)
    # the per-seed comparison: 3 vs 3 cannot decide (p >= 0.1), whatever the CIs say
    assert top_late["compare"]["difference"] == pytest.approx(0.25) and top_late["compare"]["permutation_p"] == 0.1
    assert top_late["compare"]["verdict"].startswith("too few seeds to decide")
    assert queue_run["compare"]["difference"] == 0.0 and queue_run["compare"]["permutation_p"] == 1.0
    table = (out / "bonus_ablation_metaworld_reach-v3.md").read_text()
    assert "| top1 | +0.250 | too few seeds to decide" in table
    assert json.loads((out / "bonus_ablation_metaworld_reach-v3.json").read_text())["against_baseline"] == verdict
    assert (out / "bonus_ablation_metaworld_reach-v3.png").stat().st_size > 0


def test_a_run_another_process_writes_is_never_deleted(tmp_path):
    """An interrupted first chunk (no checkpoint) is started again from scratch, but not while another
    invocation holds the run's lock: that one is refused with RunLocked and nothing is deleted."""
    from rlspec.runs.rundir import RunLocked, lock

    out = tmp_path / "baseline-s4"
    (out / "metrics.csv").parent.mkdir(parents=True)
    (out / "metrics.csv").write_text("step\n256\n")
    held = lock(out)  # the other invocation, mid-way through its first chunk
    try:
        with pytest.raises(RunLocked, match="in use by process"):
            ablation.run_one("token-reach", "baseline", 4, 512, [], tmp_path)
        assert (out / "metrics.csv").read_text() == "step\n256\n"
    finally:
        held.close()
