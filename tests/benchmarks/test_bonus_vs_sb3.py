"""benchmarks/bonus/vs_sb3.py on runs the test writes in each tool's format: rlspec runs grouped by ablation arm,
only finished runs in the statistics, the late-success CI overlap and "within SB3's CI or ahead", steps to the
success threshold, and the greedy success read from each side's own file. Trains nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from run_files import write_csv

from benchmarks.bonus import vs_sb3 as bvs

STEPS = [1000 * (k + 1) for k in range(10)]


def ours(root: Path, arm: str, seed: int, success: list[float], greedy: float | None = None, **config) -> None:
    run = root / "metaworld_reach-v3" / f"{arm}-s{seed}"
    write_csv(run / "metrics.csv", {"step": STEPS[:len(success)], "Metrics/EpRet": [1.0] * len(success),
                                    "Metrics/SuccessRate": success, "Metrics/EpLen": [200.0] * 9 + [90.0]})
    config = {"task": "metaworld:reach-v3", "total_steps": 10_000, "num_envs": 4, "fragment_len": 250,  # 1000/update
              "seed": seed, "ablation": arm, **config}
    (run / "config.json").write_text(json.dumps({"engine": "bonus", "config": config}))
    if greedy is not None:
        (run / "eval").mkdir()
        (run / "eval/eval.json").write_text(json.dumps({"episodes": 20, "EpRet": 1.0, "SuccessRate": greedy}))


def theirs(root: Path, seed: int, success: list[float], greedy: float) -> None:
    run = root / "reach-v3" / f"PPO-s{seed}"
    write_csv(run / "progress.csv", {"time/total_timesteps": STEPS, "rollout/ep_rew_mean": [2.0] * 10,
                                     "rollout/success_rate": success, "rollout/ep_len_mean": [150.0] * 10})
    (run / "greedy.json").write_text(json.dumps({"greedy_success": greedy}))


def test_arms_beside_sb3_from_their_closed_forms(tmp_path):
    a, b, out = tmp_path / "rlspec", tmp_path / "sb3", tmp_path / "out"
    for seed, level in enumerate([0.5, 0.6, 0.7]):
        ours(a, "baseline", seed, [0.0] * 5 + [level] * 5, greedy=level)  # reaches 0.5 at step 6000
        ours(a, "prototypes", seed, [0.1] * 10)  # far below, never at 0.5, no greedy evaluation yet
        theirs(b, seed, [0.0] * 2 + [level] * 8, greedy=1.0)  # reaches 0.5 at step 3000
    ours(a, "baseline", 3, [1.0] * 4)  # unfinished: left out
    assert bvs.main(["--rlspec", str(a), "--sb3", str(b), "--total-steps", "10000", "--out", str(out)]) == 0
    r = json.loads((out / "bonus_vs_sb3_reach-v3.json").read_text())
    groups = r["report"]["groups"]
    assert sorted(groups) == ["rlspec baseline", "rlspec prototypes", "sb3 PPO"]
    assert groups["rlspec baseline"]["summary"]["final_success"]["mean"] == pytest.approx(0.6)
    base, proto = r["checks"]["rlspec baseline"], r["checks"]["rlspec prototypes"]
    assert base["success_ci_overlaps"] is True and proto["success_ci_overlaps"] is False
    # 3 vs 3 seeds: the exact p cannot go below 0.1 (proto's every seed below every SB3 seed gives exactly 0.1)
    assert base["success"]["difference"] == pytest.approx(0.0)
    assert proto["success"]["permutation_p"] == pytest.approx(0.1)
    assert proto["success"]["verdict"].startswith("too few seeds to decide")
    steps = r["steps_to_success_threshold"]
    assert steps["rlspec baseline"]["mean"] == 6000.0 and steps["sb3 PPO"]["mean"] == 3000.0
    assert steps["rlspec prototypes"]["reached"] == "0/3"  # never reached: counted at the budget, not dropped
    assert steps["rlspec prototypes"]["mean"] == 10_000.0 and math.isnan(steps["rlspec prototypes"]["raw"][0])
    table = (out / "bonus_vs_sb3_reach-v3.md").read_text()
    assert "| rlspec prototypes | 0.100 [0.100, 0.100] | 0.100 | 10.0k (0/3) | too few seeds to decide" in table
    again = tmp_path / "again.json"  # --recheck: the same checks and table from the JSON's own per-seed values
    again.write_text((out / "bonus_vs_sb3_reach-v3.json").read_text())
    assert bvs.main(["--recheck", str(again)]) == 0
    assert json.loads(again.read_text())["checks"] == r["checks"] and again.with_suffix(".md").read_text() == table
    assert r["greedy_success"]["rlspec baseline"]["mean"] == pytest.approx(0.6)
    assert r["greedy_success"]["sb3 PPO"]["seeds"] == [1.0, 1.0, 1.0]
    assert r["final_episode_length"]["sb3 PPO"]["seeds"] == [150.0] * 3
    assert r["final_episode_length"]["rlspec baseline"]["mean"] == pytest.approx(90.0)
    assert r["unfinished"] == [str(a / "metaworld_reach-v3" / "baseline-s3")]
    assert (out / "bonus_vs_sb3_reach-v3.png").stat().st_size > 0
    assert bvs.main(["--rlspec", str(tmp_path / "none"), "--sb3", str(tmp_path / "none"), "--out", str(out)]) == 1
    assert bvs.main(["--rlspec", str(a), "--arms", "baseline", "--sb3", str(b), "--total-steps", "10000", "--out",
                     str(out)]) == 0
    assert sorted(json.loads((out / "bonus_vs_sb3_reach-v3.json").read_text())["report"]["groups"]) == [
        "rlspec baseline", "sb3 PPO"]


def test_labelled_directories_are_groups_of_their_own_with_the_settings_they_changed(tmp_path):
    """Two variants of the learner (LABEL=DIR) beside SB3: each its own group, each with the config keys it set
    apart from the preset (the test's runs set num_envs and fragment_len; the variant also two learner keys)."""
    a, v, b, out = tmp_path / "default", tmp_path / "variant", tmp_path / "sb3", tmp_path / "out"
    for seed in range(3):
        ours(a, "baseline", seed, [0.2] * 10)
        ours(v, "baseline", seed, [0.4] * 10, learner={"normalize_obs": True, "epochs": 10})
        theirs(b, seed, [0.3] * 10, greedy=0.0)
    assert bvs.main(["--rlspec", f"default={a}", f"obsnorm={v}", "--sb3", str(b), "--total-steps", "10000",
                     "--out", str(out)]) == 0
    r = json.loads((out / "bonus_vs_sb3_reach-v3.json").read_text())
    assert sorted(r["report"]["groups"]) == ["rlspec default baseline", "rlspec obsnorm baseline", "sb3 PPO"]
    assert r["report"]["groups"]["rlspec obsnorm baseline"]["summary"]["final_success"]["mean"] == pytest.approx(0.4)
    base = {"fragment_len": 250, "num_envs": 4}
    assert r["settings"] == {"rlspec default baseline": base,
                             "rlspec obsnorm baseline": {**base, "learner.epochs": 10, "learner.normalize_obs": True}}


def test_a_run_is_finished_at_its_own_last_update_or_rollout(tmp_path):
    """The bonus engine stops at the last whole update within the budget (3 envs × 300 steps: 9,900 of 10,000),
    SB3 at the first whole rollout past it; an rlspec run made for another budget is not this comparison's."""
    import numpy as np

    from rlspec.evidence.evaluation import Curve

    def rlspec_run(name: str, total: int, last: float) -> Curve:
        run = tmp_path / name
        run.mkdir()
        config = {"task": "metaworld:reach-v3", "total_steps": total, "num_envs": 3, "fragment_len": 300}
        (run / "config.json").write_text(json.dumps({"engine": "bonus", "config": config}))
        return Curve("rlspec baseline", run, "rlspec", np.array([900.0, last]))

    assert bvs.finished(rlspec_run("done", 10_000, 9_900), 10_000)
    assert not bvs.finished(rlspec_run("short", 10_000, 9_000), 10_000)
    assert not bvs.finished(rlspec_run("other-budget", 20_000, 9_900), 10_000)
    sb3 = Curve("sb3 PPO", tmp_path, "sb3", np.array([2048.0, 10_240.0]))
    assert bvs.finished(sb3, 10_000) and not bvs.finished(sb3, 12_000)
