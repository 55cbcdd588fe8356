"""OmniSafe's side of the safe-RL comparison (benchmarks/safe/anchors/run_omnisafe.py): the shared override set and the
defaults table, checked without OmniSafe (its yaml ``defaults`` written here in its layout)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from benchmarks.safe.anchors import run_omnisafe as bench

# OmniSafe 0.5.0 configs/on-policy/CPO.yaml ``defaults`` (the keys the table reads)
CPO_YAML = {"algo_cfgs": {"update_iters": 10, "batch_size": 128, "entropy_coef": 0.0, "gamma": 0.99,
                          "cost_gamma": 0.99, "lam": 0.95, "lam_c": 0.95, "max_grad_norm": 40.0,
                          "use_max_grad_norm": True, "critic_norm_coef": 0.001, "standardized_rew_adv": True,
                          "standardized_cost_adv": True, "obs_normalize": True, "reward_normalize": False,
                          "target_kl": 0.01, "cg_iters": 15, "cg_damping": 0.1, "fvp_sample_freq": 1,
                          "cost_limit": 25},
            "model_cfgs": {"linear_lr_decay": True, "actor": {"hidden_sizes": [64, 64], "activation": "tanh",
                                                              "lr": None},
                           "critic": {"hidden_sizes": [64, 64], "activation": "tanh", "lr": 0.001}}}


def test_both_sides_get_one_override_set():
    sets = bench.shared("PPOLag", 3, 200_000, 4_000, 2)
    assert sets["rlspec"] == ["algo=PPOLag", "env_id=SafetyPointGoal1-v0", "seed=3", "total_steps=200000",
                              "steps_per_epoch=4000", "num_envs=2", "torch_threads=1", "ep_window=50"]
    assert sets["omnisafe"] == {"seed": 3, "train_cfgs": {"total_steps": 200_000, "vector_env_nums": 2,
                                                          "parallel": 1, "device": "cpu", "torch_threads": 1},
                                "algo_cfgs": {"steps_per_epoch": 4_000}}


def test_the_table_finds_where_an_algorithms_defaults_differ_and_the_sets_that_align_them():
    rows = bench.defaults_table("CPO", CPO_YAML, [])
    differ = {(r["rlspec"], r["omnisafe"]): (r["rlspec_value"], r["omnisafe_value"]) for r in rows if not r["equal"]}
    assert differ == {("ppo.update_iters", "algo_cfgs.update_iters"): (40.0, 10.0),
                      ("ppo.batch_size", "algo_cfgs.batch_size"): (64.0, 128.0),
                      ("ppo.actor_lr", "model_cfgs.actor.lr"): (3e-4, None),  # CPO's actor takes no lr step
                      ("ppo.critic_lr", "model_cfgs.critic.lr"): (3e-4, 1e-3)}
    assert not any(r["rlspec"] in ("ppo.clip", "safety.lambda_lr") for r in rows)  # the PPO family's keys only
    sets = bench.anchor_sets(rows)
    assert sorted(sets) == ["ppo.batch_size=128", "ppo.critic_lr=0.001", "ppo.update_iters=10"]
    aligned = bench.defaults_table("CPO", CPO_YAML, sets)
    assert [r["rlspec"] for r in aligned if not r["equal"]] == ["ppo.actor_lr"]  # only the lr-less actor


def test_a_seed_counts_as_finished_only_when_its_progress_reached_the_total(tmp_path):
    def log(name: str, steps: list[int]) -> Path:
        run = tmp_path / "CPO-{SafetyPointGoal1-v0}" / name
        run.mkdir(parents=True)
        with (run / "progress.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["TotalEnvSteps", "Metrics/EpRet"])
            writer.writerows([s, 0.0] for s in steps)
        return run

    log("seed-000-2026-11-28-01-00-00", [4000, 8000])  # interrupted
    assert bench.finished(tmp_path, "CPO", 0, 12_000) is None
    done = log("seed-000-2026-11-28-02-00-00", [4000, 8000, 12000])
    assert bench.finished(tmp_path, "CPO", 0, 12_000) == done and bench.finished(tmp_path, "CPO", 1, 12_000) is None


def test_write_only_writes_the_override_sets_and_bad_budgets_exit_2(tmp_path, capsys):
    assert bench.main(["--algos", "PPOLag", "CPO", "--seeds", "0", "1", "--total-steps", "8000",
                       "--steps-per-epoch", "4000", "--out", str(tmp_path), "--write-only"]) == 0
    report = json.loads((tmp_path / "omnisafe_safe.json").read_text())
    assert report["lambda_updates"] == 2 and set(report["algos"]) == {"PPOLag", "CPO"}
    assert report["algos"]["CPO"]["shared"]["1"]["omnisafe"]["seed"] == 1
    assert bench.main(["--total-steps", "100", "--steps-per-epoch", "4000", "--out", str(tmp_path)]) == 2
    assert "--total-steps: expected >= --steps-per-epoch = 4000, got 100" in capsys.readouterr().err


def test_invocations_add_their_seeds_to_one_json_and_another_budget_is_refused(tmp_path, capsys):
    def run(*argv: str) -> int:
        return bench.main([*argv, "--total-steps", "8000", "--steps-per-epoch", "4000", "--out", str(tmp_path),
                           "--write-only"])

    assert run("--algos", "PPOLag", "--seeds", "0", "1") == 0
    assert run("--algos", "PPOLag", "CPO", "--seeds", "2") == 0
    report = json.loads((tmp_path / "omnisafe_safe.json").read_text())
    assert sorted(report["algos"]["PPOLag"]["shared"]) == ["0", "1", "2"]
    assert sorted(report["algos"]["CPO"]["shared"]) == ["2"]
    before = (tmp_path / "omnisafe_safe.json").read_text()
    assert bench.main(["--seeds", "3", "--total-steps", "12000", "--steps-per-epoch", "4000", "--out",
                       str(tmp_path), "--write-only"]) == 2
    assert "lambda_updates: expected 3 (this invocation's), got 2" in capsys.readouterr().err
    assert (tmp_path / "omnisafe_safe.json").read_text() == before  # nothing stored is lost


def test_each_finished_seed_is_recorded_and_an_invocation_running_beside_it_is_kept(tmp_path, monkeypatch):
    out = tmp_path.resolve()

    def train(algo, cfgs, where):  # stands in for omnisafe.Agent(...).learn(): its log, and a second lane's write
        run = where / f"{algo}-{{{bench.ENV}}}" / f"seed-{cfgs['seed']:03d}-2026-11-28-01-00-00"
        run.mkdir(parents=True)
        (run / "progress.csv").write_text(f"TotalEnvSteps,Metrics/EpRet\n4000,0.0\n8000,{cfgs['seed']}.0\n")
        assert bench.main(["--algos", "PPOLag", "--seeds", str(cfgs["seed"]), "--total-steps", "8000",
                           "--steps-per-epoch", "4000", "--out", str(where), "--write-only"]) == 0

    monkeypatch.setattr(bench, "omnisafe_defaults", lambda algo: CPO_YAML)
    monkeypatch.setattr(bench, "run_omnisafe", train)
    assert bench.main(["--algos", "CPO", "--seeds", "0", "1", "--total-steps", "8000", "--steps-per-epoch", "4000",
                       "--out", str(out)]) == 0
    report = json.loads((out / "omnisafe_safe.json").read_text())
    assert sorted(report["algos"]["PPOLag"]["shared"]) == ["0", "1"]  # the other lane's seeds survive
    runs = report["algos"]["CPO"]["runs"]
    assert sorted(runs) == ["0", "1"] and runs["1"] == "CPO-{SafetyPointGoal1-v0}/seed-001-2026-11-28-01-00-00"
    assert report["algos"]["CPO"]["rlspec_anchor_sets"] and not list(out.glob("*.partial"))
