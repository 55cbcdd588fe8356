"""ppo.obs_norm_update: when the observation statistics learn. 'rollout' (the default): every stored policy
input of a rollout is normalized by the statistics it started from, which learn the whole rollout after the
update; 'step' (OmniSafe's timing): each observation enters the statistics before it is normalized. Both take
every observation once. Checked against the reference ObsNormalizer fed in each order."""

from __future__ import annotations

import pytest
import torch

from rlspec.algos.config import PPOConfig, SafetyConfig
from rlspec.algos.safe_ppo import Kit, make_state
from rlspec.engines.safe import loop as safe
from rlspec.envs import safety_gym
from rlspec.reference.numerics import ObsNormalizer
from rlspec.runs import config as runconfig
from rlspec.runs.rundir import load_checkpoint

T, N = 6, 2


def rollout(per_step: bool):
    envs = safety_gym.make_vector("ToyGoal-v0", N, seed=0)
    envs.reset()
    state = make_state("PPO", PPOConfig(), SafetyConfig(), envs.obs_dim, envs.act_dim, N, Kit.reference(),
                       torch.Generator().manual_seed(0))
    return safe.collect(state, envs, T, torch.Generator().manual_seed(1), norm_per_step=per_step), state


def test_step_timing_normalizes_each_observation_after_taking_it_in():
    batch, state = rollout(per_step=True)
    oracle = ObsNormalizer((batch.raw_obs.shape[-1],))
    for t in range(T):
        oracle.commit(batch.raw_obs[t])
        torch.testing.assert_close(batch.obs[t], oracle.normalize(batch.raw_obs[t]), rtol=0, atol=1e-6)
    assert torch.equal(state.obs_norm.state_dict()["count"], oracle.state_dict()["count"])


def test_rollout_timing_keeps_the_statistics_frozen_while_collecting():
    batch, state = rollout(per_step=False)
    frozen = ObsNormalizer((batch.raw_obs.shape[-1],))
    for t in range(T):
        torch.testing.assert_close(batch.obs[t], frozen.normalize(batch.raw_obs[t]), rtol=0, atol=1e-6)
    assert torch.equal(state.obs_norm.state_dict()["count"], frozen.state_dict()["count"])  # nothing taken yet
    stepped, _ = rollout(per_step=True)
    assert not torch.allclose(stepped.obs[1:], batch.obs[1:])  # the timings give other inputs


def test_a_run_takes_every_observation_once_in_either_timing(tmp_path):
    tiny = ["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=2", "ppo.update_iters=2",
            "ppo.batch_size=50", "plots=false"]
    counts = {}
    for timing in ("rollout", "step"):
        cfg = safe.build_config(overrides=[*tiny, f"ppo.obs_norm_update={timing}"])
        run = safe.run(cfg, tmp_path / timing, show_progress=False)
        counts[timing] = float(load_checkpoint(run / "checkpoints/last.pt")["controllers"]["obs_norm"].state_dict()["count"])
    assert counts["rollout"] == pytest.approx(counts["step"]) and counts["step"] == pytest.approx(300, abs=1)
    with pytest.raises(runconfig.ConfigError, match="obs_norm_update"):
        safe.build_config(overrides=[*tiny, "ppo.obs_norm_update=episode"])
