"""The safe engine's parallel execution: with envs in worker processes it is the local run, bit for bit. (Its
data-parallel update is checked by contract ``data_parallel``: rlspec/engines/safe/data_parallel.py.)"""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlspec import cli
from rlspec.algos import safe_ppo
from rlspec.engines.safe import loop as safe
from rlspec.engines.safe import parallel, verbs
from rlspec.runs.rundir import read_metrics

PARALLEL = ["--set", "execution=parallel"]
TINY = ["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=3", "ep_window=5",
        "ppo.update_iters=2", "ppo.batch_size=50", "forced_cost=0.3"]


def _rows(run):
    """Metrics rows without timings, NaN as None (so that equal rows compare equal)."""
    return [{k: None if math.isnan(v) else v for k, v in r.items() if not k.startswith("Time/")}
            for r in read_metrics(run)]


@pytest.mark.parametrize("workers, learner_steps", [(1, False), (2, False), (1, True)])
def test_workers_give_the_reference_run(tmp_path, workers, learner_steps):
    ref = safe.run(safe.build_config(overrides=["algo=CPPOPID", *TINY]), tmp_path / "ref", show_progress=False)
    cfg = safe.build_config(overrides=["algo=CPPOPID", *TINY, f"env_workers={workers}",
                                       f"learner_steps={learner_steps}", "execution=parallel"])
    fast = safe.run(cfg, tmp_path / "fast", show_progress=False, execution=parallel.execution(cfg))
    a, b = _rows(ref), _rows(fast)
    assert len(a) == 2 and a == b


def test_a_resumed_run_with_workers_is_the_reference_run(tmp_path):
    ref = safe.run(safe.build_config(overrides=["algo=PPOLag", *TINY]), tmp_path / "ref", show_progress=False)
    cfg = safe.build_config(overrides=["algo=PPOLag", *TINY, "env_workers=2", "execution=parallel"])
    part = safe.run(cfg, tmp_path / "fast", stop_after_epochs=1, show_progress=False,
                    execution=parallel.execution(cfg))
    assert len(read_metrics(part)) == 1
    safe.run(cfg, part, resume=True, show_progress=False, execution=parallel.execution(cfg))
    a, b = _rows(ref), _rows(part)
    assert len(a) == 2 and a == b


def test_env_workers_out_of_range_is_named(tmp_path, capsys):
    code = cli.main(["train", "safe", *PARALLEL, "--env", "ToyGoal-v0", "--set", "num_envs=2", "--set", "env_workers=3",
                     "--out", str(tmp_path / "x")])
    assert code == 2 and "config key 'env_workers': expected 0..num_envs = 2, got 3" in capsys.readouterr().err
    code = cli.main(["train", "safe", *PARALLEL, "--env", "ToyGoal-v0", "--set", "num_envs=2", "--set", "env_workers=2",
                     "--set", "learner_steps=true", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "config key 'env_workers': expected 0..num_envs - 1 (learner_steps) = 1, got 2" in err
    code = cli.main(["train", "safe", *PARALLEL, "--env", "ToyGoal-v0", "--set", "env_workers=0", "--set",
                     "learner_steps=true", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "config key 'learner_steps': expected false with env_workers=0" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("value, why", [("meta", "unsupported device type meta"), ("tpu", ""), ("gpu0", "")] +
                         ([] if torch.cuda.is_available() else [("cuda", "CUDA is not available")]))
def test_bad_device_is_named_and_writes_nothing(tmp_path, capsys, value, why):
    code = cli.main(["train", "safe", *PARALLEL, "--env", "ToyGoal-v0", "--set", f"device={value}", "--out",
                     str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and f"config key 'device': expected cpu, cuda, cuda:K (a visible device) or auto, got {value!r}" in err
    assert why in err and not (tmp_path / "x").exists()


def test_rollout_moves_its_training_fields_only():
    T, N, D = 3, 2, 4
    r = safe_ppo.Rollout(*(torch.zeros(T, N, D) for _ in range(2)), torch.zeros(T, N), torch.zeros(T, N),
                         torch.zeros(T, N), torch.zeros(T, N, dtype=torch.bool), torch.zeros(T, N, dtype=torch.bool),
                         torch.zeros(T, N, D), torch.zeros(T, N, D))
    assert r.to(torch.device("cpu")) is r  # nothing moves on the host
    moved = r.to(torch.device("meta"))  # a device without data: every training field goes, raw_obs stays
    assert all(getattr(moved, f).device.type == "meta" for f in ("obs", "act", "logp", "reward", "cost",
                                                                   "terminated", "truncated", "next_obs"))
    assert moved.raw_obs is r.raw_obs


def test_compare_runs_both_engines_and_finds_a_difference(tmp_path, capsys):
    argv = ["--algo", "PPOLag", "--quiet", "--out", str(tmp_path / "cmp"), *(a for kv in TINY for a in ("--set", kv))]
    assert cli.main(["compare", "safe", *argv]) == 0
    result = json.loads((tmp_path / "cmp/compare.json").read_text())
    assert result["identical"] and result["rows"] == [2, 2] and result["max_diff"]["Metrics/EpCost"] == 0.0
    assert result["fps"]["local"] > 0 and result["fps"]["parallel"] > 0
    assert _rows(tmp_path / "cmp/local") == _rows(tmp_path / "cmp/parallel")
    saved = json.loads((tmp_path / "cmp/parallel/config.json").read_text())["config"]
    assert (saved["execution"], saved["num_envs"], saved["env_workers"]) == ("parallel", 3, 2)  # TINY's num_envs
    csv = tmp_path / "cmp/parallel/metrics.csv"  # one logged value changed: compare_runs names it
    head, *rows = csv.read_text().splitlines()
    col = head.split(",").index("Metrics/LagrangeMultiplier")
    cells = rows[1].split(",")
    before = float(cells[col])
    cells[col] = repr(before + 0.5)
    csv.write_text("\n".join([head, rows[0], ",".join(cells), *rows[2:]]) + "\n")
    changed = verbs.compare_runs(tmp_path / "cmp/local", tmp_path / "cmp/parallel")
    assert not changed["identical"] and changed["max_diff"]["Metrics/LagrangeMultiplier"] == pytest.approx(
        0.5 / max(abs(before), abs(before + 0.5), 1.0))  # rlspec/runs/compare.py's measure


def test_execution_parallel_is_a_key_of_the_safe_engine(tmp_path, capsys):
    """`rlspec train safe --set execution=parallel` runs the workers (the local run, bit for bit); the parallel
    keys are refused by name with execution local; safe-fast, the former name, is no engine now."""
    argv = ["--algo", "CPPOPID", "--quiet", *(a for kv in TINY for a in ("--set", kv))]
    assert cli.main(["train", "safe", *argv, "--out", str(tmp_path / "local")]) == 0
    assert cli.main(["train", "safe", *argv, "--set", "execution=parallel", "--set", "env_workers=2",
                     "--out", str(tmp_path / "par")]) == 0
    assert _rows(tmp_path / "local") == _rows(tmp_path / "par") and len(_rows(tmp_path / "par")) == 2
    saved = json.loads((tmp_path / "par/config.json").read_text())
    assert saved["engine"] == "safe" and saved["config"]["execution"] == "parallel"
    capsys.readouterr()
    assert cli.main(["train", "safe", *argv, "--set", "env_workers=2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert ("config key 'env_workers': expected 0 with execution local (the key is execution parallel's: it does "
            "nothing here), got 2") in err
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit, match="2"):
        cli.main(["train", "safe-fast", *argv, "--out", str(tmp_path / "alias")])
    assert "unknown engine 'safe-fast'" in capsys.readouterr().err
