"""The bonus engine's real components (issue 14): Meta-World token tasks and the Ray execution with two
trainer actors in one gloo process group. Needs the `bonus` extra (cpu_gate installs it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlspec.engines import bonus
from rlspec.runs.rundir import read_metrics

metaworld = pytest.importorskip("metaworld")


def test_metaworld_tokens_map_to_actions_truncate_and_keep_ids_unique_after_a_restart():
    from rlspec.envs.metaworld_tokens import N_BINS, MetaWorldTokenVector

    envs = MetaWorldTokenVector("metaworld:reach-v3", 2, seed=0, first_env=4, episode_steps=5)
    obs = envs.reset()
    assert obs.shape == (2, 39) and envs.action_dim == 4
    np.testing.assert_array_equal(envs.values[[0, N_BINS // 2, N_BINS - 1]], [-1.0, 0.0, 1.0])
    for k in range(5):
        out = envs.step(np.full((2, 4), N_BINS // 2))
    assert out.truncated.all() and not out.terminated.any() and (envs.t == 0).all() and (envs.episodes == 2).all()
    same = MetaWorldTokenVector("metaworld:reach-v3", 2, seed=0, first_env=4, episode_steps=5)
    np.testing.assert_array_equal(same.reset(), obs)  # env i is made from (seed, global index)
    state = envs.state_dict()
    envs.load_state_dict(state)
    assert (envs.episodes > state["episodes"]).all() and (envs.t == 0).all()
    with pytest.raises(ValueError, match="'tokens' must be ints in"):
        envs.step(np.full((2, 4), N_BINS))


def test_unknown_metaworld_task_is_a_config_error():
    from rlspec.runs.config import ConfigError

    with pytest.raises(ConfigError, match="config key 'task': .*unknown Meta-World environment 'fly-v3'"):
        bonus.validate(bonus.build_config(overrides=["task=metaworld:fly-v3"]))


def test_local_engine_trains_on_metaworld(tmp_path):
    cfg = bonus.build_config("smoke", ["task=metaworld:reach-v3", "num_envs=2", "fragment_len=16",
                                       "total_steps=64", "episode_steps=20"])
    rows = read_metrics(bonus.run(cfg, tmp_path / "mw", show_progress=False))
    assert len(rows) == 2 and all(math.isfinite(r["Loss/Loss_pi"]) for r in rows)
    assert rows[-1]["Metrics/EpLen"] <= 20 and rows[-1]["episodes/finished"] >= 2


def test_ray_execution_two_trainers_stay_in_lockstep(tmp_path):
    """Two trainer actors average gradients through gloo: after several updates (bonus time included) their
    weights are identical; the run logs finite losses and mines pairs; one worker acts with the perturbed EMA
    policy (off-policy fragments V-trace corrects)."""
    ray = pytest.importorskip("ray")
    from rlspec.engines.bonus_ray import RayWorld

    cfg = bonus.build_config("smoke", ["execution=ray", "rollout_workers=2", "trainers=2", "num_envs=2",
                                       "fragment_len=64", "best_workers=1", "best_every=3", "best_perturb_std=0.01"])
    bonus.validate(cfg)
    w = RayWorld(cfg)
    try:
        rows = [w.train_update((k + 1) * bonus.steps_per_update(cfg)) for k in range(10)]
        w0, w1 = ray.get([t.weights.remote() for t in w.trainers])
        assert all(torch.equal(w0[k], w1[k]) for k in w0)
        assert all(math.isfinite(r["Loss/Loss_pi"]) for r in rows)
        assert rows[-1]["pairs/mined"] > 0 and rows[-1]["episodes/gaps"] == 0 and rows[-1]["bonus/errors"] == 0
        assert any(r["bonus/ran"] == 1 for r in rows)
        assert any(r["Train/RhoClipFrac"] > 0 for r in rows)  # the best worker's fragments are off-policy
        assert not torch.equal(w.best["net.0.weight"], w0["net.0.weight"])  # the EMA lags the weights
    finally:
        w.close()
