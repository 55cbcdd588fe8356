"""Every key of the safe engine takes effect or is refused, for every key by construction (rlspec/runs/config.py
flat_keys): a key the run's algo never reads (rlspec/engines/safe/config.py unread_keys) is refused when given,
naming the algo; every other key, set to another valid value, changes a two-epoch run (its metrics rows or its
last checkpoint's tensors) under the first algo of ALGO_ORDER that reads it. A key whose effect two epochs on
ToyGoal cannot show is in NOT_IN_TWO_EPOCHS with where it is pinned instead."""

from __future__ import annotations

import math

import pytest
import torch

from rlspec.algos.config import ALGOS
from rlspec.engines import safe
from rlspec.engines.safe.config import PARALLEL_ONLY, SafeConfig, describe, unread_keys
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.rundir import load_checkpoint, read_metrics

TINY = ["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=3", "ep_window=5",
        "ppo.update_iters=2", "ppo.batch_size=50", "forced_cost=0.3"]
ALGO_ORDER = ("PPOLag", "CPPOPID", "PPOSimmerPID", "TRPOLag", "CPO", "P3O")
# values that bind in a two-epoch run (a clip that clips, a line search that backtracks); other keys: GENERIC
VALUES = {"ppo.update_iters": 3, "ppo.batch_size": 25, "ppo.hidden": "[16,16]", "ppo.activation": "relu",
          "ppo.kl_check": "pass", "ppo.adv_combine": "seed", "ppo.lambda_update": "after", "ppo.value_clip": 1e-6,
          "ppo.gamma": 0.5, "ppo.cost_gamma": 0.5, "ppo.lam": 0.5, "ppo.lam_c": 0.5, "safety.pid_d_delay": 1,
          "safety.saute_gamma": 0.9, "safety.max_ep_len": 50, "safety.simmer_polyak": 0.5, "safety.simmer_kd": 5.0,
          "trust_region.cg_iters": 2, "trust_region.fvp_sample_freq": 2, "num_envs": 5,
          "steps_per_epoch": 75, "seed": 1, "forced_cost": 0.6, "total_steps": 150}
# settings a key needs beside it to act (both runs get them): a KL stop that fires; a D term's history (five
# epochs); Simmer's D term acts on the difference a clipped budget makes
CONTEXT = {"ppo.kl_check": ["ppo.target_kl=1e-6"], "safety.pid_d_delay": ["total_steps=750"],
           "safety.simmer_kd": ["total_steps=750", "safety.simmer_upper_budget=1.0"]}
NOT_IN_TWO_EPOCHS = {
    "checkpoint_every": "when checkpoints are written, not what (tests/engines/test_faults.py)",
    "torch_threads": "the threads of the same computation (its numbers do not depend on them by design)",
    "execution": "parallel is the local run bit for bit (tests/engines/safe/test_safe_fast.py)",
    "env_id": "the other envs need Safety-Gymnasium (nox -s safety)",
    "algo": "chooses which keys are read (this file)",
    "ep_window": "the episodes averaged; two epochs finish fewer than it (tests/engines/safe/test_safe_engine_runs.py)",
    "semantic.enable": "PPOLagSem's semantic side (tests/semantic/test_ppolagsem_engine.py)",
    **dict.fromkeys(("trust_region.line_search_steps", "trust_region.line_search_decay",
                     "trust_region.cpo_line_search_steps"), "the line search takes its first candidate on ToyGoal "
                    "(the trust_region contract's line_search clauses pin the steps and the decay)"),
    "kit": "the same maths by another implementation (tests/conformance: equal within each clause's tolerance)",
}


def _generic(value):
    """Another valid value of the key's type: a flipped bool, int + 1, a float a hundred times smaller (or 0.1)."""
    if isinstance(value, bool):
        return str(not value).lower()
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.01 if value > 0 else value * 2 if value < 0 else 0.1
    raise AssertionError(f"no generic other value for {value!r}: add it to VALUES")


def _fingerprint(tmp_path, sets: list[str]) -> tuple:
    """(metrics rows without timings and memory, NaN as None; every tensor of the last checkpoint) of a run."""
    run = safe.run(safe.build_config(overrides=[*TINY, *sets]), tmp_path / f"run{len(list(tmp_path.iterdir()))}",
                   show_progress=False)
    rows = [{k: None if math.isnan(v) else v for k, v in r.items() if not k.startswith(("Time/", "Memory/"))}
            for r in read_metrics(run)]
    return rows, _tensors(load_checkpoint(run / "checkpoints/last.pt"))


def _tensors(x, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return {prefix: x}
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, (list, tuple)) else (
        vars(x).items() if hasattr(x, "__dict__") and not isinstance(x, type) else ())
    return {k: v for key, item in items for k, v in _tensors(item, f"{prefix}.{key}").items()}


def _same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        x.shape == b[1][k].shape and torch.equal(x.double().nan_to_num(7.0), b[1][k].double().nan_to_num(7.0))
        for k, x in a[1].items())


def _read_keys() -> dict[str, str]:
    """key -> the first algo of ALGO_ORDER that reads it, for every key some algo reads (semantic's aside)."""
    out = {}
    for key in runconfig.flat_keys(SafeConfig):
        if key in PARALLEL_ONLY or key in NOT_IN_TWO_EPOCHS or key.startswith("semantic.") or key == "frame_size":
            continue
        out[key] = next(a for a in ALGO_ORDER if key not in unread_keys(safe.build_config(overrides=[f"algo={a}"])))
    return out


def test_a_key_the_algo_never_reads_is_refused_naming_the_algo():
    """For every algo and every key: refused when given if the algo never reads it, else not (by construction)."""
    engine = describe("safe", SafeConfig, safe.validate, safe.run)
    for algo in ALGOS:
        cfg = safe.build_config(overrides=[f"algo={algo}"])
        unread = set(unread_keys(cfg))
        for key in runconfig.flat_keys(SafeConfig):
            given = [f"{key}={runconfig.value_at(cfg, key)}"]
            if key in unread:
                with pytest.raises(runconfig.ConfigError) as err:
                    shell.refuse_contradictions(engine, cfg, [], given)
                semantic = key.startswith("semantic.") or key == "frame_size"
                said = "semantic.enable false" if semantic else f"algo {algo}"
                assert f"config key {key!r} = " in str(err.value), str(err.value)
                assert f"contradicts {said}, which never reads it" in str(err.value), str(err.value)
            else:
                shell.refuse_contradictions(engine, cfg, [], given)
    assert "trust_region.cg_iters" in unread_keys(safe.build_config(overrides=["algo=PPOLag"]))
    assert "ppo.clip" in unread_keys(safe.build_config(overrides=["algo=CPO"]))  # the natural step has no clip


@pytest.mark.parametrize("key", sorted(_read_keys()))
def test_a_key_the_algo_reads_changes_the_run(tmp_path, key):
    algo = _read_keys()[key]
    base = [f"algo={algo}", *CONTEXT.get(key, [])]
    value = VALUES.get(key, None)
    if value is None:
        value = _generic(runconfig.value_at(safe.build_config(overrides=base), key))
    assert not _same(_fingerprint(tmp_path, base), _fingerprint(tmp_path, [*base, f"{key}={value}"])), (
        f"{key}={value} under {algo} left the run as it was")


def test_a_run_s_fingerprint_is_the_same_when_run_again(tmp_path):
    """What the test above compares holds no timing or memory figure: the same settings give the same one."""
    assert _same(_fingerprint(tmp_path, ["algo=PPOLag"]), _fingerprint(tmp_path, ["algo=PPOLag"]))
