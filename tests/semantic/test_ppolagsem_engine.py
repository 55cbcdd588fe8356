"""PPOLagSem on the safe-RL engine (PPOLagSem design §4.4, §25.15, §25.16) on ToyGoal-v0 with the tiny
random CLIP: frames rendered on capture steps, parity with PPOLag when disabled (weights, λ, every logged
value, the logged keys, no semantic import, the caller's RNG streams), straight = stopped-and-resumed
with every hook state in the checkpoint, every §7/§15.5 key in metrics.csv and TensorBoard, and the
shaping ratio reaching 0 once β has annealed."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import subprocess
import sys
from collections import deque

import numpy as np
import pytest
import torch

from rlspec import cli
from rlspec.engines.safe import loop as safe
from rlspec.envs import safety_gym
from rlspec.envs.safe_vector import episode_seed
from rlspec.envs.toy_safe import ToyGoal
from rlspec.fast.shaping import beta_schedule
from rlspec.runs import config as runconfig
from rlspec.runs.rundir import load_checkpoint, read_metrics
from rlspec.semantics import telemetry

# 3 epochs of 150 steps over 2 envs (checkpoints fall mid-episode, ToyGoal episodes are 100 steps);
# forced_cost 0.3 puts J_c (≥ 30) above the limit 25, so λ moves
TINY = ["env_id=ToyGoal-v0", "total_steps=450", "steps_per_epoch=150", "num_envs=2", "ep_window=5",
        "ppo.update_iters=2", "ppo.batch_size=50", "forced_cost=0.3", "frame_size=32"]


def semantic(clip_dir, **extra) -> list[str]:
    """--set overrides of an enabled float32 CPU PPOLagSem on ``clip_dir``."""
    base = {"enable": "true", "model_name": str(clip_dir), "model_device": "cpu", "dtype_preference": "float32",
            **extra}
    return [f"semantic.{k}={v}" for k, v in base.items()]


FULL = dict(shaping_enable="true", potential_enable="true", temporal_window=3, capture_interval=2,
            risk_enable="true", risk_min_samples=16, risk_batch_size=32, risk_update_iters=3,
            modulation_enable="true", modulation_min_episodes=1, risk_horizon=8)


def config(*overrides: str) -> safe.SafeConfig:
    return safe.build_config(overrides=[*TINY, *overrides])


def deterministic(rows):
    """The rows without the wall-clock columns (Time/*, the embedding latency)."""
    return [{k: v for k, v in r.items() if not k.startswith("Time/") and k != "Semantics/EmbedLatencyMs"}
            for r in rows]


def same(a, b) -> bool:
    """Recursive equality: tensors and arrays exactly (NaN = NaN), objects by their attributes."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            torch.nan_to_num(a, nan=7.25) if a.is_floating_point() else a,
            torch.nan_to_num(b, nan=7.25) if b.is_floating_point() else b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, deque)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return type(a) is type(b) and same(vars(a), vars(b))
    return a == b


def hook_state(ckpt: dict) -> dict:
    import io

    return torch.load(io.BytesIO(ckpt["semantics"]["blob"]), weights_only=False)


# ----------------------------------------------------------------------------------------------- frames
def test_vector_env_renders_the_frame_of_s_prime_before_autoreset():
    """step(render=True): frame i is env i's render() of s'_t, the state its step reached, also on a step
    that ends the episode (before the autoreset); without render the step is the same and has no frames."""
    envs = safety_gym.make_vector("ToyGoal-v0", 2, seed=3, width=24, height=24)
    plain = safety_gym.make_vector("ToyGoal-v0", 2, seed=3, width=24, height=24)
    twins = [ToyGoal(width=24, height=24) for _ in range(2)]  # the same episodes, reset here by hand
    envs.reset(), plain.reset()
    episodes = [0, 0]
    for i, twin in enumerate(twins):
        twin.reset(seed=episode_seed(3, i, 0))
    action = torch.tensor([[1.0, 0.5], [-0.3, 0.2]])  # env 0 leaves the box (terminates) at step 34
    ended = 0
    for _ in range(120):  # and both are truncated after 100 steps of an episode
        out, ref = envs.step(action, render=True), plain.step(action)
        for i, twin in enumerate(twins):
            twin.step(action[i].numpy())
        assert out.frames.shape == (2, 24, 24, 3) and out.frames.dtype == np.uint8 and ref.frames is None
        assert np.array_equal(out.frames, np.stack([twin.render() for twin in twins]))
        assert torch.equal(ref.obs, out.obs) and torch.equal(ref.reward, out.reward)
        for i in np.flatnonzero((out.terminated | out.truncated).numpy()):
            assert not np.array_equal(out.frames[i], envs.envs[i].render())  # the new episode's first state
            episodes[i] += 1
            twins[i].reset(seed=episode_seed(3, i, episodes[i]))
            ended += 1
    assert ended >= 2 and envs.finished and any(ep[2] < 100 for ep in envs.finished)  # a termination, too


# ----------------------------------------------------------------------------------------------- parity
def test_disabled_ppolagsem_is_ppolag(tmp_path):
    """§25.16: enable=False (other semantic keys set, a model folder that does not exist) gives PPOLag's run:
    the same weights, optimizers, λ and its Adam state, generator, every logged value (Time/* are wall
    clock), the same logged keys, the same checkpoint keys, no RUN/semantics.json, and the global RNG
    streams exactly as they were."""
    off = ["semantic.enable=false", "semantic.model_name=/no/such/model", "semantic.shaping_enable=true",
           "semantic.risk_enable=true", "semantic.modulation_enable=true", "semantic.capture_interval=1"]
    rng_before = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    lag = safe.run(config("algo=PPOLag"), tmp_path / "lag", show_progress=False)
    sem = safe.run(config("algo=PPOLagSem", *off), tmp_path / "sem", show_progress=False)
    rng_after = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    assert torch.equal(rng_before[0], rng_after[0]) and same(rng_before[1], rng_after[1])
    assert rng_before[2] == rng_after[2]
    a, b = read_metrics(lag), read_metrics(sem)
    assert [list(r) for r in a] == [list(r) for r in b]  # the same columns, in the same order
    assert len(a) == 3 and same(deterministic(a), deterministic(b))
    lam = [r["Metrics/LagrangeMultiplier"] for r in a]
    assert lam[0] < lam[1] < lam[2]  # λ moved: its updates are part of what is compared
    ca, cb = load_checkpoint(lag / "checkpoints/last.pt"), load_checkpoint(sem / "checkpoints/last.pt")
    assert ca.keys() == cb.keys() and "semantics" not in cb and same(ca, cb)
    assert not (sem / "semantics.json").exists()


DISABLED_RUN = """
import sys
from pathlib import Path
from rlspec.engines.safe import loop as safe
from rlspec.contracts.parity import FORBIDDEN_MODULES
cfg = safe.build_config(overrides={overrides!r})
safe.run(cfg, Path({out!r}), show_progress=False)
semantic = sorted(m for m in sys.modules if m.startswith("rlspec.semantics."))
print(semantic, sorted(m for m in FORBIDDEN_MODULES if m in sys.modules))
"""


def test_disabled_ppolagsem_imports_nothing_semantic(tmp_path):
    """PARITY-3 on the engine: a fresh interpreter that runs a disabled PPOLagSem has imported
    rlspec.semantics.config and nothing else of rlspec.semantics, nor transformers nor the shaping code."""
    code = DISABLED_RUN.format(overrides=[*TINY, "algo=PPOLagSem", "total_steps=150", "semantic.shaping_enable=true"],
                               out=str(tmp_path / "run"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "['rlspec.semantics.config'] []", out.stdout + out.stderr


# ----------------------------------------------------------------------------------------------- resume
def test_resumed_ppolagsem_equals_straight_run(tmp_path, clip_dir):
    """Every hook state (risk head + Adam + generator, risk buffer, margin normalizer, potentials, temporal
    pools, modulator, counters) travels in the checkpoint: stopping after one epoch and resuming gives the
    straight run's metrics (every Semantics/* and Risk/* value), weights and hook state, bit for bit."""
    cfg = config("algo=PPOLagSem", *semantic(clip_dir, **FULL))
    straight = safe.run(cfg, tmp_path / "straight", show_progress=False)
    part = safe.run(cfg, tmp_path / "resumed", stop_after_epochs=1, show_progress=False)
    safe.run(cfg, part, resume=True, show_progress=False)
    a, b = deterministic(read_metrics(straight)), deterministic(read_metrics(part))
    assert len(a) == len(b) == 3 and same(a, b)
    assert a[-1]["Risk/TrainStatusCode"] == 0 and a[-1]["Semantics/CaptureCount"] == 3 * 75 // 2 + 1
    assert any(r["Semantics/Shaping/Max"] != 0 for r in a)  # shaping happened
    ca, cb = load_checkpoint(straight / "checkpoints/last.pt"), load_checkpoint(part / "checkpoints/last.pt")
    sa, sb = hook_state(ca), hook_state(cb)
    assert same(sa, sb) and same({k: v for k, v in ca.items() if k != "semantics"},
                                 {k: v for k, v in cb.items() if k != "semantics"})
    assert any(sa["manager"]["pool"].windows) and sa["adapter"]["buffer"].captures  # kit reference's pool


def test_resume_without_the_hook_state_would_differ(tmp_path, clip_dir):
    """The check above can fail: a resumed run whose hooks start afresh (the state dropped from the
    checkpoint) logs different semantic values than the straight run."""
    cfg = config("algo=PPOLagSem", *semantic(clip_dir, **FULL))
    straight = safe.run(cfg, tmp_path / "straight", show_progress=False)
    part = safe.run(cfg, tmp_path / "resumed", stop_after_epochs=1, show_progress=False)
    ckpt_path = part / "checkpoints/last.pt"
    ckpt = torch.load(ckpt_path, weights_only=False)  # as written (its run id included), to write it back
    fresh = safe.build_hooks(cfg.semantic, num_envs=cfg.num_envs, gamma=cfg.ppo.gamma,
                             total_steps=cfg.total_steps, seed=cfg.seed)
    ckpt["semantics"] = fresh.state_dict()
    torch.save(ckpt, ckpt_path)
    safe.run(cfg, part, resume=True, show_progress=False)
    a, b = deterministic(read_metrics(straight)), deterministic(read_metrics(part))
    assert same(a[0], b[0]) and not same(a[1:], b[1:])


# -------------------------------------------------------------------------------------------- telemetry
def test_every_semantic_key_is_logged_and_shaping_decays(tmp_path, clip_dir):
    """Every key of §7 and §15.5 (telemetry.keys: Semantics/*, Risk/*, modulation) in metrics.csv and in
    TensorBoard, beside PPOLag's; β follows its cosine schedule to 0 at half the run, and the shaping
    ratio E[shaping]/E[r] is non-zero while β > 0 and exactly 0 once β = 0 (additive shaping)."""
    extra = dict(FULL, potential_enable="false", beta_start=0.5, beta_end_step_fraction=0.5, capture_interval=1)
    cfg = config("algo=PPOLagSem", "total_steps=600", *semantic(clip_dir, **extra))
    run = safe.run(cfg, tmp_path / "run", show_progress=False)
    rows = read_metrics(run)
    lag_keys = set(read_metrics(safe.run(config("algo=PPOLag", "total_steps=150"), tmp_path / "lag",
                                         show_progress=False))[0])
    want = set(telemetry.keys(cfg.semantic))
    assert len(want) == 39 and {"Semantics/ShapingRewardRatio", "Semantics/ShapingStd",
                                "Semantics/TemporalWindowFill", "Semantics/Debug/ClipStatus"} <= want
    assert set(rows[0]) == lag_keys | want
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = EventAccumulator(str(run / "tb")).Reload()
    assert want <= set(tb.Tags()["scalars"])
    assert [r["Semantics/Debug/ClipStatus"] for r in rows] == [1.0] * 4  # ok_st_float32
    # β at the last step of each epoch (global step 150·e − 2: the last vectorized step of 2 envs)
    betas = [r["Semantics/Beta"] for r in rows]
    assert betas == pytest.approx([beta_schedule(150 * e - 2, 600, 0.5, 0.5) for e in (1, 2, 3, 4)], rel=1e-12)
    ratio = [r["Semantics/ShapingRewardRatio"] for r in rows]
    assert ratio[0] != 0 and ratio[2:] == [0.0, 0.0] and betas[2:] == [0.0, 0.0]
    assert [r["Semantics/ShapingStd"] for r in rows][2:] == [0.0, 0.0] and rows[0]["Semantics/ShapingStd"] > 0
    for r in rows:
        assert r["Semantics/ShapingRewardRatio"] == pytest.approx(
            r["Semantics/Shaping/Mean"] / r["Semantics/RawReward"], rel=1e-12)
    assert rows[-1]["Semantics/TemporalWindowFill"] >= 0 and rows[-1]["Semantics/CaptureIntervalEffective"] == 1
    meta = json.loads((run / "semantics.json").read_text())
    assert meta["status"] == "ok_st_float32" and meta["safe_prompts"] == list(cfg.semantic.safe_prompts)
    assert len(meta["prompts_sha256"]) == 64 and meta["model"] is not None
    assert {p.name for p in (run / "plots").iterdir()} >= {"beta.png", "shaping_ratio.png"}


def test_shaped_rewards_reach_the_rollout_and_episode_returns_stay_raw(clip_dir):
    """collect(): the stored reward is the env reward plus the hooks' shaping (before any scaler), while the
    vector env's episode returns (Metrics/EpRet) stay the raw env returns."""
    cfg = config("algo=PPOLagSem", *semantic(clip_dir, shaping_enable="true", beta_start=1.0))
    kit = safe.Kit.reference()
    rollouts = []
    for hooks_on in (False, True):
        gen = torch.Generator().manual_seed(0)
        envs = safety_gym.make_vector("ToyGoal-v0", 2, 0, 0.3, **safe.render_settings(cfg))
        state = safe.make_state("PPOLagSem", cfg.ppo, cfg.safety, envs.obs_dim, envs.act_dim, 2, kit, gen)
        hooks = safe._semantic_hooks(cfg, 1) if hooks_on else None
        envs.reset()
        rollouts.append((safe.collect(state, envs, 60, gen, hooks), envs.ep_ret.copy(), hooks))
    (plain, ret_plain, _), (shaped, ret_shaped, hooks) = rollouts
    assert torch.equal(plain.obs, shaped.obs) and torch.equal(plain.cost, shaped.cost)
    assert np.array_equal(ret_plain, ret_shaped)
    delta = shaped.reward - plain.reward  # [T, N]
    assert bool((delta != 0).all()) and float(delta.abs().max()) <= 2.0 * 1.0 + 1e-6  # |β·clamp(m̄)| ≤ 2
    logs = hooks.telemetry()
    assert logs["Semantics/Shaping/Mean"] == pytest.approx(float(delta.double().mean()), rel=1e-9)
    assert logs["Semantics/CaptureCount"] == 60


# --------------------------------------------------------------------------------------------- config
def test_semantic_keys_through_build_config_and_errors_name_the_field(clip_dir):
    cfg = safe.build_config(overrides=["algo=PPOLagSem", "semantic.enable=true", f"semantic.model_name={clip_dir}",
                                       'semantic.safe_prompts=["a clear floor","a green goal"]',
                                       "semantic.capture_interval=20"])
    assert cfg.semantic.model_name == str(clip_dir) and cfg.semantic.capture_interval == 20
    assert cfg.semantic.safe_prompts == ("a clear floor", "a green goal")
    assert runconfig.from_dict(safe.SafeConfig, runconfig.to_dict(cfg)) == cfg  # config.json round trip
    with pytest.raises(runconfig.ConfigError, match="field 'capture_interval' must be an int >= 1, got 0"):
        safe.build_config(overrides=["semantic.capture_interval=0"])
    with pytest.raises(runconfig.ConfigError, match="unknown config key 'semantic.capture_every'"):
        safe.build_config(overrides=["semantic.capture_every=2"])
    with pytest.raises(runconfig.ConfigError,
                       match=r"'semantic.enable': expected False with algo 'PPOLag' \(True needs PPOLagSem\), "
                             "got True"):
        safe.validate(safe.build_config(overrides=["algo=PPOLag", "semantic.enable=true"]))
    assert dataclasses.replace(cfg, semantic=dataclasses.replace(cfg.semantic, enable=False)).semantic.enable is False


def test_cli_trains_and_resumes_ppolagsem(tmp_path, clip_dir):
    run = tmp_path / "run"
    args = ["train", "safe", "--algo", "PPOLagSem", "--out", str(run), "--quiet"]
    sets = [f"--set={s}" for s in [*TINY, *semantic(clip_dir, shaping_enable="true", capture_interval=5)]]
    assert cli.main(args + sets + ["--stop-after-epochs", "2"]) == 0
    assert cli.main(["train", "safe", "--resume", str(run), "--quiet"]) == 0
    rows = read_metrics(run)
    assert len(rows) == 3 and rows[-1]["Semantics/CaptureIntervalEffective"] == 5
    assert rows[-1]["Semantics/CaptureCount"] == 3 * 75 // 5
    assert cli.main(["eval", str(run), "--episodes", "1"]) == 0 and (run / "eval/eval.json").is_file()


def test_a_model_that_does_not_load_leaves_training_as_ppolag(tmp_path):
    """Fail-soft in the engine (§2 principle 4): enabled, shaping on, but the model folder is missing — the run
    completes, logs every Semantics/* key with the load error's ClipStatus and the failure counted, renders
    nothing, shapes nothing: its PPO side is PPOLag's run exactly."""
    sem = safe.run(config("algo=PPOLagSem", "semantic.enable=true", "semantic.model_name=/no/such/model",
                          "semantic.shaping_enable=true"), tmp_path / "sem", show_progress=False)
    lag = safe.run(config("algo=PPOLag"), tmp_path / "lag", show_progress=False)
    a, b = deterministic(read_metrics(lag)), deterministic(read_metrics(sem))
    logged = set(telemetry.SEMANTIC_KEYS) - {"Semantics/EmbedLatencyMs"}  # deterministic() drops the latency
    assert all(set(y) == set(x) | logged for x, y in zip(a, b))
    assert same(a, [{k: v for k, v in y.items() if k in x} for x, y in zip(a, b)])
    assert [r["Semantics/Debug/ClipStatus"] for r in b] == [telemetry.CLIP_STATUS["load_error:ModelNotFound"]] * 3
    assert b[-1]["Semantics/FailSoftEvents"] >= 1 and b[-1]["Semantics/Debug/EmbedAttempts"] == 0
    assert json.loads((sem / "semantics.json").read_text())["status"] == "load_error:ModelNotFound"


def test_semantics_refuse_env_workers(tmp_path, clip_dir):
    """The parallel execution's worker envs render nothing: PPOLagSem there is a ConfigError naming the key, not
    a crash."""
    from rlspec.engines.safe import parallel

    cfg = safe.build_config(overrides=["algo=PPOLagSem", *TINY, *semantic(clip_dir), "execution=parallel",
                                       "env_workers=2"])
    with pytest.raises(runconfig.ConfigError, match="'semantic.enable': PPOLagSem renders frames from in-process"):
        safe.run(cfg, tmp_path / "run", show_progress=False, execution=parallel.execution(cfg))
