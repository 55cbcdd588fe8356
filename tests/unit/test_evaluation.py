"""rlspec.evidence.evaluation: the PPOLagSem design's metrics against closed forms, the three log readers on logs written in
each tool's own format, and the grouped plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from run_files import write_csv

from rlspec import cli
from rlspec.evidence import evaluation as ev


def rlspec_run(root: Path, name: str, algo: str, steps, ret, cost, lam) -> Path:
    path = root / name
    write_csv(path / "metrics.csv", {"step": steps, "Metrics/EpRet": ret, "Metrics/EpCost": cost,
                                     "Metrics/LagrangeMultiplier": lam, "Time/FPS": [1.0] * len(steps)})
    (path / "config.json").write_text(json.dumps({"engine": "safe", "config": {"algo": algo, "seed": 0}}))
    return path


def omnisafe_run(root: Path, algo: str, seed: int, steps, ret, cost, lam) -> Path:
    path = root / f"{algo}-{{SafetyPointGoal1-v0}}" / f"seed-{seed:03d}-2026-11-27-15-00-00"
    write_csv(path / "progress.csv", {"Metrics/EpRet": ret, "Metrics/EpCost": cost, "Metrics/EpLen": [1000] * len(ret),
                                      "Train/Epoch": list(range(len(ret))), "TotalEnvSteps": steps,
                                      "Metrics/LagrangeMultiplier": lam})
    return path


def sb3_run(root: Path, name: str, steps, ret) -> Path:
    path = root / name
    write_csv(path / "progress.csv", {"rollout/ep_len_mean": [1000] * len(ret), "rollout/ep_rew_mean": ret,
                                      "time/fps": [600] * len(ret), "time/total_timesteps": steps})
    return path


STEPS = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000]


def test_metrics_match_their_closed_forms(tmp_path):
    ret = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    cost = [60, 50, 40, 35, 30, 28, 20, 30, 10, 40]
    ramp = np.linspace(1, 2, 10)
    lam = list(ramp + 0.3 * np.array([1, -1] * 5))
    curve = ev.read_run(rlspec_run(tmp_path, "a", "PPOLag", STEPS, ret, cost, lam))
    m = ev.run_metrics(curve, threshold=4.5, cost_limit=25, late=0.5)
    late_cost = np.array([28, 20, 30, 10, 40])
    assert m["steps_to_threshold"] == 6000  # the first row whose return is ≥ 4.5
    assert m["final_return"] == pytest.approx(np.mean([5, 6, 7, 8, 9]))
    assert m["final_cost"] == pytest.approx(late_cost.mean())
    assert m["violation_rate"] == pytest.approx(3 / 5)
    assert m["late_cost_variance"] == pytest.approx(late_cost.var())
    assert m["multiplier_oscillation"] == pytest.approx(0.3 * math.sqrt(2) * (1 - 1 / 5))
    assert m["final_multiplier"] == pytest.approx(np.mean(lam[5:]))
    assert ev.oscillation_amplitude(ramp) == pytest.approx(0, abs=1e-12)  # drift alone does not oscillate
    assert math.isnan(ev.run_metrics(curve, threshold=100, cost_limit=25)["steps_to_threshold"])


def test_late_values_are_the_last_rows_without_nan_and_at_least_one(tmp_path):
    ret = [0, 1, 2, 3, 4, 5, 6, 7, math.nan, 9]
    curve = ev.read_run(rlspec_run(tmp_path, "a", "PPOLag", STEPS, ret, [1.0] * 10, [0.0] * 10))
    assert list(ev.late_values(curve, "return", 0.3)) == [7, 9]  # rows 8..10, the NaN row dropped
    assert ev.late_mean(curve, "return", 0.3) == pytest.approx(8.0)
    assert list(ev.late_values(curve, "return", 0.01)) == [9]  # a fraction below one row still takes one
    assert ev.late_values(curve, "success").size == 0 and math.isnan(ev.late_mean(curve, "success"))


def test_bootstrap_ci_is_the_mean_with_a_seeded_percentile_band():
    assert ev.bootstrap_ci([3.0]) == (3.0, 3.0, 3.0)
    assert ev.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    x = [1.0, 2.0, 4.0, 8.0, float("nan")]
    mean, lo, hi = ev.bootstrap_ci(x)
    assert mean == pytest.approx(3.75) and 1.0 <= lo < mean < hi <= 8.0
    assert ev.bootstrap_ci(x) == (mean, lo, hi)  # reproducible
    wide = ev.bootstrap_ci(x, level=0.99)
    assert wide[1] <= lo and wide[2] >= hi
    assert all(math.isnan(v) for v in ev.bootstrap_ci([float("nan")]))


def test_readers_bring_three_formats_to_one_curve(tmp_path):
    ours = ev.read_run(rlspec_run(tmp_path, "r", "CPO", STEPS[:3], [1, 2, 3], [9, 8, 7], [0, 0, 0]))
    theirs = ev.read_run(omnisafe_run(tmp_path, "PPOLag", 1, STEPS[:3], [1, 2, 3], [9, 8, 7], [0.1, 0.2, 0.3]))
    sb3 = ev.read_run(sb3_run(tmp_path, "PPO_1", STEPS[:3], [5, 6, 7]))
    assert (ours.group, ours.source) == ("rlspec CPO", "rlspec")
    assert (theirs.group, theirs.source) == ("omnisafe PPOLag", "omnisafe")
    assert (sb3.group, sb3.source) == ("sb3 PPO", "sb3")
    np.testing.assert_array_equal(theirs.steps, STEPS[:3])
    np.testing.assert_array_equal(theirs.values["multiplier"], [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(sb3.values["return"], [5, 6, 7])
    assert set(sb3.values) == {"return", "episode_length"}  # SB3 knows no cost
    assert math.isnan(ev.run_metrics(sb3, threshold=6, cost_limit=25)["final_cost"])


def test_unreadable_runs_say_what_is_missing(tmp_path):
    with pytest.raises(ev.EvaluationError, match="not a run directory"):
        ev.read_run(tmp_path / "nothing")
    write_csv(tmp_path / "odd" / "progress.csv", {"a": [1], "b": [2]})
    with pytest.raises(ev.EvaluationError, match="neither OmniSafe's"):
        ev.read_run(tmp_path / "odd")
    write_csv(tmp_path / "empty" / "progress.csv", {"TotalEnvSteps": []})
    with pytest.raises(ev.EvaluationError, match="no logged rows"):
        ev.read_run(tmp_path / "empty")


def test_group_report_gives_each_group_its_seeds_and_cis(tmp_path):
    curves = [ev.read_run(omnisafe_run(tmp_path, "PPOLag", s, STEPS, [s + i for i in range(10)], [30 - s] * 10,
                                       [1.0] * 10)) for s in range(3)]
    curves.append(ev.read_run(rlspec_run(tmp_path, "x", "PPOLag", STEPS, [0] * 10, [20] * 10, [1.0] * 10)))
    report = ev.group_report(curves, threshold=9, cost_limit=25)
    theirs = report["groups"]["omnisafe PPOLag"]
    assert len(theirs["runs"]) == 3 and theirs["summary"]["steps_to_threshold"]["reached"] == "3/3"
    assert theirs["summary"]["final_cost"]["mean"] == pytest.approx(29)
    assert theirs["summary"]["steps_to_threshold"]["mean"] == pytest.approx(np.mean([10000, 9000, 8000]))
    ours = report["groups"]["rlspec PPOLag"]["summary"]
    assert ours["steps_to_threshold"]["reached"] == "0/1"  # censored: counted at its budget, its last step
    assert ours["steps_to_threshold"]["mean"] == report["groups"]["rlspec PPOLag"]["runs"][0]["env_steps"]
    assert ours["violation_rate"]["mean"] == 0.0
    with pytest.raises(ev.EvaluationError, match="no runs"):
        ev.group_report([])


def test_plot_draws_each_group_with_its_seeds(tmp_path):
    pytest.importorskip("matplotlib")
    curves = [ev.read_run(omnisafe_run(tmp_path, "CPO", s, STEPS, list(range(10)), [25] * 10, [0] * 10))
              for s in range(2)] + [ev.read_run(sb3_run(tmp_path, "PPO_1", STEPS, list(range(10))))]
    path = ev.plot_groups(curves, tmp_path / "plots" / "groups.png", cost_limit=25)
    from matplotlib.image import imread
    image = imread(path)
    assert image.shape[1] > image.shape[0] > 200 and image[..., :3].std() > 0.05  # a drawn figure, not blank


def test_sheeprl_events_map_to_our_names(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "logs" / "runs" / "dreamer_v3" / "room" / "2026-11-27_exp_5" / "version_0"
    writer = SummaryWriter(str(run))
    for step, ret in ((256, 0.0), (512, 0.5), (1024, 1.0)):  # rewards at episode ends
        writer.add_scalar("Rewards/rew_avg", ret, step)
    for step in (512, 1024):  # losses at log intervals
        writer.add_scalar("Loss/world_model_loss", 10.0 / step, step)
        writer.add_scalar("Loss/state_loss", 1.0, step)
        writer.add_scalar("Time/sps_train", 3.0, step)
    writer.close()
    curve = ev.read_run(tmp_path / "logs")
    assert (curve.group, curve.source) == ("sheeprl dreamer_v3", "sheeprl")
    np.testing.assert_array_equal(curve.steps, [256, 512, 1024])
    np.testing.assert_array_equal(curve.values["return"], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(curve.values["world_model_loss"], [math.nan, 10 / 512, 10 / 1024])
    assert set(curve.values) == {"return", "world_model_loss", "kl_loss"}  # Time/* has no counterpart
    assert ev.steps_to_threshold(curve, 0.9) == 1024
    other = tmp_path / "other"
    SummaryWriter(str(other)).close()
    w = SummaryWriter(str(other))
    w.add_scalar("train/reward", 1.0, 1)
    w.close()
    with pytest.raises(ev.EvaluationError, match="tags: train/reward"):
        ev.read_run(other)
    with pytest.raises(ev.EvaluationError, match="events of 2 runs"):
        ev.read_run(tmp_path)  # the logs of two runs (logs/..., other) are never merged into one curve


def test_report_command_groups_any_mix_of_runs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    runs = [omnisafe_run(tmp_path, "PPOLag", s, STEPS, [s + i for i in range(10)], [30] * 10, [1.0] * 10)
            for s in range(2)] + [rlspec_run(tmp_path, "ours", "PPOLag", STEPS, list(range(10)), [20] * 10, [1.0] * 10)]
    out = tmp_path / "report"
    assert cli.main(["report", *map(str, runs), "--threshold", "9", "--cost-limit", "25", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["groups"]) == {"omnisafe PPOLag", "rlspec PPOLag"} and report["cost_limit"] == 25
    assert report["groups"]["omnisafe PPOLag"]["summary"]["violation_rate"]["mean"] == 1.0
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "report.md").read_text().strip() and "| rlspec PPOLag | 1 |" in printed
    assert (out / "report.png").stat().st_size > 0
    assert ev.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    assert "not a run directory" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_report_refuses_a_run_twice_a_file_out_and_a_cell_that_is_no_number(tmp_path, capsys):
    run = omnisafe_run(tmp_path, "PPOLag", 0, STEPS, list(range(10)), [30] * 10, [1.0] * 10)
    (tmp_path / "file").write_text("kept")
    for argv, says in (([str(run), str(run / ".." / run.name)], f"run {run / '..' / run.name} is given twice (also "
                                                                 f"as {run}); each run counts once"),
                       ([str(run), "--out", str(tmp_path / "file")], "is a file; expected a folder"),
                       ([str(run), "--threshold", "nan"], "--threshold: expected a finite number, got nan")):
        with pytest.raises(SystemExit) as stop:
            ev.main([*argv, "--out", str(tmp_path / "out")] if "--out" not in argv else argv)
        assert stop.value.code == 2 and says in capsys.readouterr().err
    progress = run / "progress.csv"
    lines = progress.read_text().splitlines()
    head = lines[0].split(",")
    cells = lines[3].split(",")
    cells[head.index("Metrics/EpRet")] = "n/a"
    progress.write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")
    assert ev.main([str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{progress}: column 'Metrics/EpRet', line 4: expected a number, got 'n/a'" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and (tmp_path / "file").read_text() == "kept"


def test_json_outputs_are_strict_and_name_what_was_not_finite():
    from rlspec import jsonio

    text = jsonio.dumps({"a": 1.0, "b": [float("nan"), 2.0], "c": {"d": float("-inf")}, "e": np.float32("inf")})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in strict JSON")) == {
        "a": 1.0, "b": [None, 2.0], "c": {"d": None}, "e": None,
        "non_finite": {"b[0]": "NaN", "c.d": "-inf", "e": "inf"}}
    assert "non_finite" not in jsonio.dumps({"a": 1.0})


def test_sheeprl_resumed_chunks_read_in_the_order_they_ran(tmp_path):
    """A resumed sheeprl run logs into version_0, version_1, ... of its run directory; one resumed from a
    checkpoint before its end logs some steps again: the later file's value counts (version_10 ran after
    version_2, whatever the names' order)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for version, stamp, rows in ((2, 1000, ((256, 0.0), (512, 0.25))), (10, 2000, ((512, 0.5), (768, 1.0)))):
        run = tmp_path / "s0" / f"version_{version}"
        writer = SummaryWriter(str(run))
        for step, ret in rows:
            writer.add_scalar("Rewards/rew_avg", ret, step)
        writer.close()
        (events,) = run.glob("events.out.tfevents.*")
        events.rename(run / f"events.out.tfevents.{stamp}.host.1.0")
    curve = ev.read_run(tmp_path / "s0")
    np.testing.assert_array_equal(curve.steps, [256, 512, 768])
    np.testing.assert_array_equal(curve.values["return"], [0.0, 0.5, 1.0])


def test_plot_of_several_runs_overlays_sheeprl_beside_rlspec(tmp_path, capsys):
    """`rlspec plot` of a sheeprl run directory (its TensorBoard events, resumed in two chunks) and an rlspec run:
    one figure and rlspec report's table, sheeprl's return under our name; one sheeprl directory alone too; a
    directory no reader knows keeps the run error."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("matplotlib")
    from torch.utils.tensorboard import SummaryWriter

    sheep = tmp_path / "sheeprl" / "room-exit" / "s0"
    for version, rows in ((0, ((1000, 0.0), (2000, 0.25))), (1, ((3000, 0.5), (4000, 1.0)))):
        writer = SummaryWriter(str(sheep / f"version_{version}"))
        for step, ret in rows:
            writer.add_scalar("Rewards/rew_avg", ret, step)
        writer.close()
    ours = rlspec_run(tmp_path, "ours", "dreamer", [1000, 2000, 3000, 4000], [0.0, 0.0, 1.0, 1.0], [0] * 4, [0] * 4)
    out = tmp_path / "fig"
    assert cli.main(["plot", str(sheep), str(ours), "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["groups"]) == {"sheeprl dreamer_v3", "rlspec dreamer"}
    assert report["groups"]["sheeprl dreamer_v3"]["summary"]["final_return"]["mean"] == 1.0
    assert (out / "report.png").stat().st_size > 0 and "| sheeprl dreamer_v3 | 1 |" in capsys.readouterr().out
    alone = tmp_path / "alone"
    assert cli.main(["plot", str(sheep), "--out", str(alone)]) == 0 and (alone / "report.png").is_file()
    (tmp_path / "empty").mkdir()
    assert cli.main(["plot", str(tmp_path / "empty")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_each_engine_s_loss_names_are_read(tmp_path):
    """rlspec's safe engine logs OmniSafe's loss names, its Dreamer engine sheeprl-like ones: both reach
    policy_loss/value_loss, and the first listed name wins when a run has both."""
    safe_run = rlspec_run(tmp_path, "safe", "PPOLag", [1, 2], [1.0, 2.0], [0.0, 1.0], [0.1, 0.2])
    write_csv(safe_run / "metrics.csv", {"step": [1, 2], "Metrics/EpRet": [1.0, 2.0], "Loss/Loss_pi": [0.5, 0.4],
                                         "Loss/Loss_reward_critic": [3.0, 2.0]})
    curve = ev.read_run(safe_run)
    assert list(curve.values["policy_loss"]) == [0.5, 0.4] and list(curve.values["value_loss"]) == [3.0, 2.0]
    assert ev.logged_names("rlspec", ["Loss/actor_loss", "Loss/Loss_pi"])["policy_loss"] == "Loss/actor_loss"
    assert "policy_loss" not in ev.logged_names("sb3", ["Loss/Loss_pi"])


def test_sb3_success_rate_is_read_as_success(tmp_path):
    write_csv(tmp_path / "sb3" / "progress.csv",
              {"time/total_timesteps": [2048, 4096], "rollout/ep_rew_mean": [1.0, 2.0],
               "rollout/success_rate": [0.25, 0.5]})
    curve = ev.read_run(tmp_path / "sb3")
    assert curve.source == "sb3" and list(curve.values["success"]) == [0.25, 0.5]
    assert ev.run_metrics(curve, None, None, late=0.5)["final_success"] == 0.5  # the last half: one row
    no_success = ev.read_run(rlspec_run(tmp_path, "r", "PPO", [1, 2], [1.0, 2.0], [0.0, 0.0], [0.0, 0.0]))
    assert math.isnan(ev.run_metrics(no_success, None, None)["final_success"])


def test_a_baseline_comparison_reports_p_mde_and_the_verdict_its_numbers_allow(tmp_path, capsys):
    """5 OmniSafe seeds at return ≈ 30 + s against 5 rlspec seeds at ≈ s: ahead/behind at p = 2/252; the costs
    (29 − s vs 20) are lower on rlspec's side: ahead for a cost too. 3 of them against 3: no verdict is possible
    (the exact p cannot go below 0.1)."""
    theirs = [omnisafe_run(tmp_path, "PPOLag", s, STEPS, [30 + s] * 10, [29 - s] * 10, [1.0] * 10) for s in range(5)]
    ours = [rlspec_run(tmp_path, f"r{s}", "PPOLag", STEPS, [s] * 10, [20] * 10, [1.0] * 10) for s in range(5)]
    report = ev.group_report([ev.read_run(p) for p in theirs + ours], baseline="omnisafe PPOLag")
    ret, cost = (report["comparisons"]["rlspec PPOLag"][m] for m in ("final_return", "final_cost"))
    assert ret["difference"] == pytest.approx(-30) and ret["permutation_p"] == pytest.approx(2 / 252)
    assert ret["verdict"] == "behind" and cost["verdict"] == "ahead" and ret["n"] == [5, 5]
    assert "| rlspec PPOLag | final_return | -30 |" in ev.table(report) and "| behind |" in ev.table(report)
    small = ev.group_report([ev.read_run(p) for p in theirs[:3] + ours[:3]], baseline="omnisafe PPOLag")
    assert small["comparisons"]["rlspec PPOLag"]["final_return"]["verdict"].startswith("too few seeds to decide")
    with pytest.raises(ev.EvaluationError, match="--baseline 'sb3 PPO' is none of the groups"):
        ev.group_report([ev.read_run(p) for p in ours], baseline="sb3 PPO")
    with pytest.raises(SystemExit) as stop:
        ev.main([str(p) for p in ours] + ["--margin", "2", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and "--margin: expected a number > 0 given with --baseline" in capsys.readouterr().err
