"""Every key of the safe, Dreamer and bonus engines takes effect or is refused, for every key by construction
(rlspec/runs/config.py flat_keys): a key the run never reads (Engine.decides: the safe engine's `unread_keys` of
its algo, Dreamer's encoder keys, bonus's ablation, best-worker and token-reach keys) is refused when given,
naming what decides it; every other key, set to another valid value, changes a short run (its metrics rows or
its last checkpoint's tensors). A key whose effect a short run cannot show is listed with where it is pinned
instead."""

from __future__ import annotations

import functools
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlspec.algos.config import ALGOS
from rlspec.engines import bonus, dreamer, safe
from rlspec.engines.bonus.config import BonusConfig
from rlspec.engines.bonus.config import decides as bonus_decides
from rlspec.engines.dreamer.config import DreamerRunConfig, encoder_decides
from rlspec.engines.safe.config import SafeConfig, algo_decides, unread_keys
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.rundir import load_checkpoint, read_metrics


@dataclass(frozen=True)
class Short:
    """An engine's short run and how its keys are set in it."""

    sets: list[str]  # the short run's settings
    run: object  # (overrides, out) -> run directory
    values: dict[str, object]  # a value that acts in the short run, where _generic's does not
    context: dict[str, list[str]] = field(default_factory=dict)  # settings a key needs beside it (both runs)
    elsewhere: dict[str, str] = field(default_factory=dict)  # key -> where its effect is pinned instead


SAFE = Short(
    sets=["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=3", "ep_window=5",
          "ppo.update_iters=2", "ppo.batch_size=50", "forced_cost=0.3"],
    run=lambda overrides, out: safe.run(safe.build_config(overrides=overrides), out, show_progress=False),
    values={"ppo.update_iters": 3, "ppo.batch_size": 25, "ppo.hidden": "[16,16]", "ppo.activation": "relu",
            "ppo.kl_check": "pass", "ppo.adv_combine": "seed", "ppo.lambda_update": "after", "ppo.value_clip": 1e-6,
            "ppo.gamma": 0.5, "ppo.cost_gamma": 0.5, "ppo.lam": 0.5, "ppo.lam_c": 0.5, "safety.pid_d_delay": 1,
            "safety.saute_gamma": 0.9, "safety.max_ep_len": 50, "safety.simmer_polyak": 0.5,
            "safety.simmer_kd": 5.0, "trust_region.cg_iters": 2, "trust_region.fvp_sample_freq": 2, "num_envs": 5,
            "steps_per_epoch": 75, "seed": 1, "forced_cost": 0.6, "total_steps": 150, "ppo.obs_norm_update": "step"},
    # a KL stop that fires; a D term's history (five epochs); Simmer's D term acts on what a clipped budget makes
    context={"ppo.kl_check": ["ppo.target_kl=1e-6"], "safety.pid_d_delay": ["total_steps=750"],
             "safety.simmer_kd": ["total_steps=750", "safety.simmer_upper_budget=1.0"]},
    elsewhere={
        "ep_window": "the episodes averaged; two epochs finish fewer (tests/engines/safe/test_safe_engine_runs.py)",
        "env_id": "the other envs need Safety-Gymnasium (nox -s safety)",
        "semantic.enable": "PPOLagSem's semantic side (tests/semantic/test_ppolagsem_engine.py)",
        **dict.fromkeys(("trust_region.line_search_steps", "trust_region.line_search_decay",
                         "trust_region.cpo_line_search_steps"), "the line search takes its first candidate on "
                        "ToyGoal (the trust_region contract's line_search clauses pin the steps and the decay)"),
    })
DREAMER = Short(
    sets=["num_envs=2", "total_steps=40", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64",
          "step_limit=10", "log_every=8", "checkpoint_every=16", "ep_window=5", "dreamer.deter=16", "dreamer.stoch=4",
          "dreamer.classes=4", "dreamer.hidden=16", "dreamer.embed_dim=16", "dreamer.pool=8", "dreamer.mlp_hidden=16",
          "dreamer.mlp_layers=1", "dreamer.horizon=4", "dreamer.batch_size=2", "dreamer.seq_len=8"],
    run=lambda overrides, out: dreamer.LocalExecution(dreamer.build_config(overrides=overrides)).run(
        out, show_progress=False),
    values={"dreamer.pool": 4, "dreamer.seq_len": 6, "dreamer.head_input": "state", "dreamer.wm_clip": 1e-3,
            "dreamer.actor_clip": 1e-9, "dreamer.critic_clip": 1e-3, "min_ready_steps": 20, "total_steps": 32,
            "num_envs": 4, "replay_capacity": 40, "step_limit": 4, "dreamer.encoder": "conv",
            "dreamer.precision": "bf16-mixed"},
    context={"num_envs": ["min_ready_steps=32"],
             "dreamer.encoder": ["dreamer.pool=1", "dreamer.frame=[64,64]", "dreamer.cnn_stages=2",
                                 "dreamer.cnn_mult=2"]},
    elsewhere={
        "ep_window": "the episodes averaged in a row; a 40-step run finishes few (test_dreamer_engine.py)",
        "log_every": "when rows are written, not what is learned (tests/engines/dreamer/test_dreamer_engine.py)",
        "frameskip": "frames per action: the room's first 40 steps look alike (tests/envs: the ROM's own tests)",
        "task": "the room's scenario (tests/envs/test_room_env.py)", "env": "a user's ROM (test_dreamer_user_rom.py)",
        **dict.fromkeys(("rom", "state", "plugin"), "a user's ROM (tests/engines/dreamer/test_dreamer_user_rom.py)"),
        "dreamer.frame": "the crop: with the conv encoder (this file's dreamer.encoder case)",
        **dict.fromkeys(("dreamer.cnn_mult", "dreamer.cnn_stages"), "the conv encoder's (dreamer.encoder case)"),
    })
BONUS = Short(  # 12 updates, the bonus phase from the 7th on
    sets=["total_steps=3072"],
    run=lambda overrides, out: bonus.run(bonus.build_config("smoke", overrides), out, show_progress=False),
    values={"bonus.top_k": 1, "bonus.min_clusters": 2, "bonus.cooldown_steps": 2048, "fragment_len": 32,
            "learner.hidden": "[16,16]", "learner.target_kl": 1e-6, "bonus.min_pairs": 8, "total_steps": 2048,
            "replay_capacity": 4, "pool_size": 4, "queue_size": 4, "bonus.kl_guard": 1e-9, "bonus.entropy_floor": 10.0},
    elsewhere={
        "task": "Meta-World's tasks (tests/engines/bonus/test_bonus_ray_metaworld.py)",
        "ablation": "chooses which keys are read (tests/engines/test_config_keys.py)",
        **dict.fromkeys(("bonus.min_clusters", "bonus.diverse_clusters"), "the short run's pairs span both "
                        "prototypes from the start (spec/success_set.py's scheduler and queue clauses pin them)"),
    })
# keys no short run can show, in every engine
EVERY = {
    "checkpoint_every": "when checkpoints are written, not what (tests/engines/test_faults.py)",
    "plots": "whether RUN/plots is drawn, not the run (tests/engines/test_faults.py)",
    "torch_threads": "the threads of the same computation (its numbers do not depend on them by design)",
    "execution": "another execution is the same run (tests/engines/*/test_*_fast*.py); its keys: test_config_keys.py",
    "kit": "the same maths by another implementation (tests/conformance: equal within each clause's tolerance)",
    "algo": "chooses which keys are read (this file)",
}
SAFE_ORDER = ("PPOLag", "CPPOPID", "PPOSimmerPID", "TRPOLag", "CPO", "P3O")  # the first that reads a key runs it


def _generic(value):
    """Another valid value of the key's type: a flipped bool, int + 1, a float a hundred times smaller (or 0.1)."""
    if isinstance(value, bool):
        return str(not value).lower()
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.01 if value > 0 else value * 2 if value < 0 else 0.1
    raise AssertionError(f"no generic other value for {value!r}: add one to the engine's values")


def _tensors(x, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return {prefix: x}
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, (list, tuple)) else (
        vars(x).items() if hasattr(x, "__dict__") and not isinstance(x, type) else ())
    return {k: v for key, item in items for k, v in _tensors(item, f"{prefix}.{key}").items()}


def _fingerprint(short: Short, tmp_path, sets: list[str]) -> tuple:
    """(metrics rows without timings and memory, NaN as None; every tensor of the last checkpoint) of a run."""
    run = short.run([*short.sets, *sets], tmp_path / f"run{len(list(tmp_path.iterdir()))}")
    rows = [{k: None if math.isnan(v) else v for k, v in r.items() if not k.startswith(("Time/", "Memory/"))}
            for r in read_metrics(run)]
    return rows, _tensors(load_checkpoint(run / "checkpoints/last.pt"))


def _same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        x.shape == b[1][k].shape and torch.equal(x.double().nan_to_num(7.0), b[1][k].double().nan_to_num(7.0))
        for k, x in a[1].items())


def _read_keys() -> list[tuple[str, str, list[str]]]:
    """(engine, key, the settings that read it) for every key of both engines that a short run reads."""
    out = []
    for key in runconfig.flat_keys(SafeConfig):
        owned = key in runconfig.owned_keys(SafeConfig, safe.config.EXECUTIONS)
        if owned or key in EVERY or key in SAFE.elsewhere or key.startswith("semantic.") or key == "frame_size":
            continue
        algo = next(a for a in SAFE_ORDER if key not in unread_keys(safe.build_config(overrides=[f"algo={a}"])))
        out.append(("safe", key, [f"algo={algo}"]))
    owned = runconfig.owned_keys(DreamerRunConfig, dreamer.EXECUTIONS)
    out += [("dreamer", key, []) for key in runconfig.flat_keys(DreamerRunConfig)
            if key not in owned and key not in EVERY and key not in DREAMER.elsewhere
            and key not in encoder_decides(dreamer.build_config())]
    owned = runconfig.owned_keys(BonusConfig, bonus.EXECUTIONS)
    out += [("bonus", key, []) for key in runconfig.flat_keys(BonusConfig)
            if key not in owned and key not in EVERY and key not in BONUS.elsewhere
            and key not in bonus_decides(bonus.build_config("smoke"))]
    return out


def test_a_key_the_run_never_reads_is_refused_naming_what_decides_it():
    """Every algo × every safe key, and Dreamer's encoder keys: refused when given where unread, else not."""
    engine = safe.config.describe("safe", SafeConfig, safe.validate, safe.run)
    for algo in ALGOS:
        cfg = safe.build_config(overrides=[f"algo={algo}"])
        unread = set(unread_keys(cfg))
        for key in runconfig.flat_keys(SafeConfig):
            given = [f"{key}={runconfig.value_at(cfg, key)}"]
            if key not in unread:
                shell.refuse_contradictions(engine, cfg, [], given)
                continue
            with pytest.raises(runconfig.ConfigError) as err:
                shell.refuse_contradictions(engine, cfg, [], given)
            semantic = key.startswith("semantic.") or key == "frame_size"
            said = "semantic.enable false" if semantic else f"algo {algo}"
            assert f"config key {key!r} = " in str(err.value), str(err.value)
            assert f"contradicts {said}, which never reads it" in str(err.value), str(err.value)
    assert "trust_region.cg_iters" in unread_keys(safe.build_config(overrides=["algo=PPOLag"]))
    assert "ppo.clip" in unread_keys(safe.build_config(overrides=["algo=CPO"]))  # the natural step has no clip
    assert set(encoder_decides(dreamer.build_config())) == {"dreamer.cnn_mult", "dreamer.cnn_stages"}
    assert set(encoder_decides(dreamer.build_config(overrides=["dreamer.encoder=conv"]))) == {"dreamer.embed_dim"}


SHORT = {"safe": SAFE, "dreamer": DREAMER, "bonus": BONUS}
DECIDES = {"safe": algo_decides, "dreamer": encoder_decides, "bonus": bonus_decides}  # each Engine.decides


@functools.lru_cache(maxsize=None)
def _base(engine: str, sets: tuple[str, ...]) -> tuple:
    """The fingerprint of the run a key is compared with, once per worker for the keys that share it."""
    return _fingerprint(SHORT[engine], Path(tempfile.mkdtemp(prefix="rlspec-every-key-")), list(sets))


def _config(engine: str, sets: list[str]):
    if engine == "bonus":
        return bonus.build_config("smoke", sets)
    return (safe if engine == "safe" else dreamer).build_config(overrides=sets)


@pytest.mark.parametrize("engine, key, reads", _read_keys(), ids=lambda x: x if isinstance(x, str) else None)
def test_a_key_the_run_reads_changes_it(tmp_path, engine, key, reads):
    short = SHORT[engine]
    base = [*reads, *short.context.get(key, [])]
    value = short.values.get(key)
    if value is None:
        value = _generic(runconfig.value_at(_config(engine, [*short.sets, *base]), key))
    given = _config(engine, [*short.sets, *base, f"{key}={value}"])
    if key in DECIDES[engine](given):  # the value another key decides (bonus's ablation): refused when given
        with pytest.raises(runconfig.ConfigError, match=f"config key {key!r} = .* contradicts"):
            shell.refuse_contradictions(SimpleNamespace(decides=DECIDES[engine]), given, [], [f"{key}={value}"])
        return
    changed = _fingerprint(short, tmp_path, [*base, f"{key}={value}"])
    assert not _same(_base(engine, tuple(base)), changed), f"{key}={value} ({reads}) left the run as it was"


@pytest.mark.parametrize("short", [SAFE, DREAMER, BONUS], ids=["safe", "dreamer", "bonus"])
def test_a_run_s_fingerprint_is_the_same_when_run_again(tmp_path, short):
    """What the test above compares holds no timing or memory figure: the same settings give the same one."""
    assert _same(_fingerprint(short, tmp_path, []), _fingerprint(short, tmp_path, []))
