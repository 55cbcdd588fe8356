"""benchmarks/semantics/protocol.py without training: every arm's overrides make a valid safe config (the
control's prompts exchanged), and on run directories the test writes each criterion is judged from its closed
form (P2 on held-out correlation, P3 overshoot and oscillation, P5 steps to the threshold at equal cost, the
early shaping-ratio band, P6's throughput drop)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import write_csv

from benchmarks.semantics import protocol as sp

STEPS = [1000 * (k + 1) for k in range(20)]


def write_run(root: Path, arm: str, seed: int, hit: int, cost: float, lam: list[float], corr: float = 0.0,
              ratio: float = 0.0, fps: float = 100.0, times: tuple[float, float, float] = (10.0, 5.0, 0.0)) -> None:
    """A finished run whose return is 0 before step ``hit`` and 10 from it on; ``times``: rollout and update
    seconds per epoch, ms per embedded frame."""
    n = len(STEPS)
    write_csv(root / arm / f"s{seed}" / "metrics.csv",
              {"step": STEPS, "Metrics/EpRet": [10.0 if s >= hit else 0.0 for s in STEPS], "Metrics/EpCost": [cost] * n,
               "Metrics/LagrangeMultiplier": lam, "Time/FPS": [fps] * n, "Risk/HeldOut/Corr": [corr] * n,
               "Semantics/RawReward": [0.01] * n, "Semantics/Shaping/Mean": [0.01 * ratio] * n,
               "Semantics/RawReward/RMS": [0.02] * n, "Semantics/Shaping/RMS": [0.02 * ratio] * n,
               "Time/Rollout": [times[0]] * n, "Time/Update": [times[1]] * n,
               "Semantics/EmbedLatencyMs": [times[2]] * n})
    algo = "PPOLag" if arm == "PPOLag" else "PPOLagSem"
    (root / arm / f"s{seed}" / "config.json").write_text(json.dumps({"engine": "safe", "config": {"algo": algo}}))


def test_every_arm_is_a_valid_config(tmp_path):
    from rlspec.engines import safe

    for arm in sp.ARMS:
        cfg = safe.build_config("default", sp.overrides(arm, tmp_path / "model", seed=3, steps=8000))
        assert cfg.seed == 3 and cfg.total_steps == 8000 and cfg.steps_per_epoch == 4000
        assert cfg.algo == ("PPOLag" if arm == "PPOLag" else "PPOLagSem") and cfg.semantic.enable == (arm != "PPOLag")
        if arm != "PPOLag":
            assert cfg.semantic.risk_holdout_fraction == sp.HOLDOUT and cfg.semantic.shaping_enable
            assert cfg.semantic.risk_enable == (arm != "oracle") and cfg.semantic.potential_enable == (
                arm == "potential+risk")
            assert cfg.semantic.margin_source == ("oracle" if arm == "oracle" else "vision")
    swapped = safe.build_config("default", sp.overrides("polarity-swapped", tmp_path, 0, 8000)).semantic
    plain = safe.build_config("default", sp.overrides("shaping+risk", tmp_path, 0, 8000)).semantic
    assert swapped.safe_prompts == plain.unsafe_prompts and swapped.unsafe_prompts == plain.safe_prompts
    random = safe.build_config("default", sp.overrides("random-prompts", tmp_path, 0, 8000)).semantic
    assert random.safe_prompts == sp.RANDOM_SAFE and random.unsafe_prompts == sp.RANDOM_UNSAFE
    assert not {"shaping", "risk"} & set(sp.ARMS)  # duplicates of shaping+risk and PPOLag: not run again


def test_criteria_from_their_closed_forms(tmp_path):
    flat, bumpy = [1.0] * 20, [1.0 + (0.5 if k % 2 else -0.5) for k in range(18)] + [3.0, 1.0]
    for seed in range(3):
        write_run(tmp_path, "PPOLag", seed, hit=10_000, cost=20.0, lam=flat, fps=200.0)
        write_run(tmp_path, "potential+risk", seed, hit=6_000, cost=19.0, lam=flat, ratio=0.1, fps=150.0,  # 40% fewer
                  times=(14.0, 6.0, 2.0))
        write_run(tmp_path, "random-prompts", seed, hit=10_000 if seed < 2 else 30_000, cost=30.0, lam=flat,  # cost above
                  corr=0.5)  # PPOLag's; seed 2 never reaches the threshold: counted at the 20k budget
        write_run(tmp_path, "shaping+risk", seed, hit=9_000, cost=30.0, lam=bumpy, corr=0.2, ratio=0.3)
        write_run(tmp_path, "shaping+risk+modulation", seed, hit=9_000, cost=20.0, lam=flat, corr=0.4, ratio=0.01)
    write_run(tmp_path, "polarity-swapped", 0, hit=10_000, cost=20.0, lam=flat)
    (tmp_path / "polarity-swapped" / "s1").mkdir()  # no metrics: not finished, left out
    result = sp.report(tmp_path, steps=20_000, threshold=None, out=tmp_path / "out")
    assert result["return_threshold"] == pytest.approx(8.0) and result["seeds"]["polarity-swapped"] == 1
    c = result["criteria"]
    assert c["P5"]["potential+risk"]["fewer_fraction"] == pytest.approx(0.4) and c["P5"]["potential+risk"]["verdict"] == "met"
    assert c["P5"]["random-prompts"]["fewer_fraction"] == pytest.approx((10_000 - 40_000 / 3) / 10_000)
    assert c["P5"]["random-prompts"]["steps_to_threshold"]["reached"] == "2/3" and not c["P5"]["random-prompts"]["cost_equal_or_lower"]
    assert c["P5"]["random-prompts"]["verdict"] == "not met"
    assert {a: v["verdict"] for a, v in c["P2"].items()} == {
        "potential+risk": "not met", "random-prompts": "met", "shaping+risk": "not met",
        "shaping+risk+modulation": "met", "polarity-swapped": "not met"}
    assert {a: v["verdict"] for a, v in c["shaping_band"].items()} == {
        "potential+risk": "met", "random-prompts": "not met", "shaping+risk": "not met",
        "shaping+risk+modulation": "not met", "polarity-swapped": "not met"}
    assert c["P2"]["random-prompts"]["seeds_above"] == "3/3" and c["shaping_band"]["potential+risk"]["seeds_in_band"] == "3/3"
    assert c["shaping_band"]["shaping+risk"]["seeds_in_band"] == "0/3"
    assert c["shaping_band"]["shaping+risk"]["beta_start_for_10_percent"] == pytest.approx(0.05 * 0.1 / 0.3)
    proxy = c["P3"]["lambda_proxy"]["overshoot"]  # λ's max − late mean: listed, judged on nothing
    assert proxy["shaping+risk"]["mean"] == pytest.approx(3.0 - 2.0) and proxy["shaping+risk+modulation"]["mean"] == 0
    # P3 is judged on cost: overshoot above the limit 25 is 0 with modulation, 5 without; 3 vs 3 seeds cannot decide
    assert c["P3"]["cost_overshoot"]["difference"] == pytest.approx(-5.0)
    assert c["P3"]["late_cost_variance"]["difference"] == 0.0
    assert c["P3"]["verdict"].startswith("late_cost_variance: too few seeds to decide")
    again = sp.rechecked(json.loads(json.dumps(result)))["criteria"]  # from the JSON alone (NaN-safe comparison)
    assert json.dumps(again, sort_keys=True) == json.dumps(c, sort_keys=True)
    assert c["P6"]["potential+risk"]["drop"] == pytest.approx(0.25)
    # 200 captures per 4000-step epoch × 2 ms = 0.4 s of embedding; the rollout's other extra 14 − 10 − 0.4 s is
    # rendering and hooks; without it an epoch takes 20 − 3.6 s against PPOLag's 15 s
    split = c["P6"]["potential+risk"]
    assert split["embedding_s"] == pytest.approx(0.4) and split["render_and_hooks_s"] == pytest.approx(3.6)
    assert split["update_extra_s"] == pytest.approx(1.0)
    assert split["drop_without_render"] == pytest.approx(1 - 15 / 16.4)
    assert (tmp_path / "out/semantic_protocol.png").is_file()
    written = json.loads((tmp_path / "out/semantic_protocol.json").read_text())["criteria"]
    assert json.dumps(written, sort_keys=True) == json.dumps(c, sort_keys=True)


def test_the_band_ratio_is_the_rms_of_the_early_window(tmp_path):
    """RMS(shaping) / RMS(r) over the first 20% of epochs, each epoch's RMS squared before the mean (equal steps);
    NaN for a run without the columns."""
    run = tmp_path / "s0"
    write_csv(run / "metrics.csv", {"step": STEPS, "Semantics/RawReward/RMS": [0.1, 0.3, 0.1, 0.3] + [9.0] * 16,
                                    "Semantics/Shaping/RMS": [0.01, 0.01, 0.02, 0.02] + [0.0] * 16})
    assert sp.early_rms_ratio(run) == pytest.approx(((0.0001 * 2 + 0.0004 * 2) / 4 / ((0.01 + 0.09) * 2 / 4)) ** 0.5)
    write_csv(tmp_path / "s1" / "metrics.csv", {"step": STEPS, "Semantics/RawReward": [0.01] * 20})
    assert sp.early_rms_ratio(tmp_path / "s1") != sp.early_rms_ratio(tmp_path / "s1")  # NaN


def test_the_early_ratio_is_the_ratio_of_the_window_means(tmp_path):
    """E[shaping] / E[r] over the first 20% of epochs: an epoch whose mean reward is ~0 does not blow it up (the
    mean of the epochs' own ratios would be ~50)."""
    run = tmp_path / "s0"
    write_csv(run / "metrics.csv", {"step": STEPS, "Semantics/RawReward": [1e-4, 0.02, 0.02, 0.02] + [0.0] * 16,
                                    "Semantics/Shaping/Mean": [0.005, 0.001, 0.001, 0.001] + [9.0] * 16})
    assert sp.early_ratio(run) == pytest.approx((0.008 / 4) / (0.0601 / 4))
