"""Safety-Gymnasium: the Python ≥ 3.11 import shim, the replay checkpoint of the vector env on
MuJoCo, a smoke run of every algorithm (the PPO family, TRPO, TRPOLag, CPO, P3O), λ and the Simmer budget
moving the right way when the cost exceeds the limit, and resume identity on the real env. Skipped where
safety_gymnasium is not installed (the core environment); ``nox -s safety`` installs it
(rlspec/envs/safety_gym.py) and runs these."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlspec.envs.safety_gym import env_problem, import_safety_gymnasium, make_env, make_vector

try:
    import_safety_gymnasium()
except ModuleNotFoundError as err:  # pytest.importorskip, through the shim
    pytest.skip(f"safety_gymnasium is not installed: {err}", allow_module_level=True)

from rlspec.engines import safe  # noqa: E402
from rlspec.runs.rundir import load_checkpoint, read_metrics  # noqa: E402

ENV = "SafetyPointGoal1-v0"
# one env, 1000-step epochs: each epoch ends exactly one 1000-step episode, so J_c is known at every update
SMOKE = [f"env_id={ENV}", "num_envs=1", "total_steps=2000", "steps_per_epoch=1000", "ppo.update_iters=2",
         "ppo.batch_size=500", "forced_cost=1.0"]


def test_shim_imports_and_env_follows_the_safe_api():
    env = make_env(ENV)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (60,) and env.action_space.shape == (2,)
    out = env.step(np.zeros(2))
    assert len(out) == 6 and np.isfinite(out[1]) and out[2] >= 0


def test_an_unregistered_id_gets_the_nearest_registered_ones():
    assert env_problem("SafetyPointGoal1-v0") is None and env_problem("ToyGoal-v0") is None
    near = env_problem("SafetyPointGoal9-v0")
    assert near.startswith("'SafetyPointGoal9-v0' is not a Safety-Gymnasium env; did you mean ") and \
        "SafetyPointGoal1-v0" in near
    assert "are, e.g. SafetyPointGoal1-v0" in env_problem("Nope-v0")


def test_vector_checkpoint_replays_bit_identically():
    a = make_vector(ENV, 2, seed=3)
    a.reset()
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        a.step(torch.rand(2, 2, generator=g) * 2 - 1)
    b = make_vector(ENV, 2, seed=3)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.obs, b.obs)
    for _ in range(20):
        act = torch.rand(2, 2, generator=g) * 2 - 1
        sa, sb = a.step(act), b.step(act)
        assert torch.equal(sa.obs, sb.obs) and torch.equal(sa.reward, sb.reward) and torch.equal(sa.cost, sb.cost)


@pytest.mark.parametrize("algo", ["PPO", "PPOLag", "CPPOPID", "PPOSaute", "PPOSimmerPID",
                                  "TRPO", "TRPOLag", "CPO", "P3O"])
def test_smoke_every_algorithm(tmp_path, algo):
    rows = read_metrics(safe.run(safe.build_config(overrides=[f"algo={algo}", *SMOKE]), tmp_path, show_progress=False))
    assert len(rows) == 2
    for r in rows:
        assert all(math.isfinite(r[k]) for k in ("Loss/Loss_pi", "Loss/Loss_reward_critic", "Train/Entropy",
                                                 "Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen"))
        assert r["Metrics/EpLen"] == 1000 and r["Metrics/EpCost"] >= 1000  # the forced cost: far above 25
    lam = [r["Metrics/LagrangeMultiplier"] for r in rows]
    if algo in ("TRPO", "TRPOLag", "CPO"):  # one natural-gradient step per epoch, reported
        assert all(0 <= r["Misc/AcceptanceStep"] <= 20 and math.isfinite(r["Misc/FinalStepNorm"]) for r in rows)
    if algo == "CPO":  # c = J_c − 25 ≥ 975: no feasible point in the trust region, the recovery step
        assert [r["Misc/OptimCase"] for r in rows] == [0.0, 0.0]
    if algo == "P3O":  # the penalty κ·ReLU(S_c + c) is active
        assert all(r["Loss/Loss_pi_cost"] > 0 for r in rows)
    if algo in ("PPOLag", "CPPOPID", "TRPOLag"):
        assert math.isfinite(rows[0]["Loss/Loss_cost_critic"]) and 0.001 < lam[0] < lam[1]
    else:
        assert lam == [0.0, 0.0]
    if algo == "PPOSimmerPID":
        budget = [r["Metrics/SafetyBudget"] for r in rows]
        assert budget[1] < budget[0]


def test_resume_identity_on_safety_gymnasium(tmp_path):
    cfg = safe.build_config(overrides=["algo=PPOLag", f"env_id={ENV}", "num_envs=1", "total_steps=1000",
                                       "steps_per_epoch=500", "ppo.update_iters=1", "ppo.batch_size=250"])
    straight = safe.run(cfg, tmp_path / "a", show_progress=False)
    part = safe.run(cfg, tmp_path / "b", stop_after_epochs=1, show_progress=False)  # mid-episode (500/1000)
    safe.run(cfg, part, resume=True, show_progress=False)
    a, b = read_metrics(straight), read_metrics(part)
    assert len(a) == len(b) == 2
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        assert all(ra[k] == rb[k] or (math.isnan(ra[k]) and math.isnan(rb[k])) for k in ra if not k.startswith("Time/"))
    ca, cb = load_checkpoint(straight / "checkpoints/last.pt"), load_checkpoint(part / "checkpoints/last.pt")
    assert all(torch.equal(ca["actor"][k], cb["actor"][k]) for k in ca["actor"])


@pytest.mark.skipif(os.environ.get("MUJOCO_GL") not in ("egl", "osmesa"),
                    reason="headless MuJoCo rendering needs MUJOCO_GL=egl or osmesa (nox -s safety sets egl)")
def test_eval_writes_a_video(tmp_path):
    cfg = safe.build_config(overrides=["algo=PPO", f"env_id={ENV}", "num_envs=1", "total_steps=500",
                                       "steps_per_epoch=500", "ppo.update_iters=1", "ppo.batch_size=500"])
    run = safe.run(cfg, tmp_path, show_progress=False)
    assert safe.evaluate(run, ["--episodes", "1", "--video", "--size", "48", "--max-frames", "12"]) == 0
    import imageio.v2 as imageio

    frames = imageio.mimread(run / "eval/episode0.mp4")
    assert len(frames) == 12 and frames[0].shape == (48, 48, 3) and np.ptp(frames[0]) > 0  # a picture, not a blank


def test_eval_video_without_mujoco_gl_set_renders_headless(tmp_path):
    """A user on a headless machine need not know MUJOCO_GL: `rlspec eval RUN --video` sets egl for them."""
    cfg = safe.build_config(overrides=["algo=PPO", f"env_id={ENV}", "num_envs=1", "total_steps=500",
                                       "steps_per_epoch=500", "ppo.update_iters=1", "ppo.batch_size=500"])
    run = safe.run(cfg, tmp_path, show_progress=False)
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    done = subprocess.run([sys.executable, "-m", "rlspec.cli", "eval", str(run), "--episodes", "1", "--video",
                           "--size", "32", "--max-frames", "4"], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and (run / "eval/episode0.mp4").is_file(), done.stderr[-2000:]
