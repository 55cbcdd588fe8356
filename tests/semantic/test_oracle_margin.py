"""semantic.margin_source=oracle: PPOLagSem's shaping from the env's true margin (nearest hazard edge − goal
distance) instead of a vision model's, through the same normalization and β. The margin against its closed form,
the shaped rewards against the shaping formula on the margins the envs gave, a run that loads no model and renders
no frame, and the configurations it refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_ppolagsem_engine import TINY

from rlspec.engines.safe import loop as safe
from rlspec.envs import safety_gym
from rlspec.envs.oracle import oracle_margin
from rlspec.envs.toy_safe import HAZARD_RADIUS, ToyGoal
from rlspec.fast.shaping import MarginNormalizer, additive_shaping, beta_schedule
from rlspec.runs import config as runconfig
from rlspec.runs.rundir import read_metrics
from rlspec.semantics.adapter import SemanticRewardAdapter
from rlspec.semantics.config import SemanticConfig

ORACLE = ["algo=PPOLagSem", "semantic.enable=true", "semantic.shaping_enable=true", "semantic.margin_source=oracle",
          "semantic.capture_interval=2"]


def test_toy_goal_margin_is_hazard_edge_minus_goal_distance():
    env = ToyGoal()
    env.reset(seed=3)
    env.step(np.array([0.5, -0.2]))
    want = np.linalg.norm(env.hazard - env.p) - HAZARD_RADIUS - np.linalg.norm(env.goal - env.p)
    assert oracle_margin(env) == pytest.approx(want, abs=1e-12)


def test_an_env_without_hazards_and_goal_is_refused():
    with pytest.raises(ValueError, match="oracle_margin: object has no hazards and goal"):
        oracle_margin(object())


def test_the_vector_env_gives_the_margins_of_s_prime_before_any_reset():
    envs = safety_gym.make_vector("ToyGoal-v0", 2, seed=0)
    envs.reset()
    for _ in range(3):
        out = envs.step(torch.zeros(2, 2), margins=True)
        assert out.frames is None and out.margins.dtype == torch.float32 and out.margins.shape == (2,)
        assert out.margins.tolist() == pytest.approx([oracle_margin(e) for e in envs.envs], abs=1e-6)
    assert envs.step(torch.zeros(2, 2)).margins is None


def test_shaped_rewards_follow_the_formula_on_the_oracle_margins():
    cfg = SemanticConfig(enable=True, shaping_enable=True, margin_source="oracle", beta_start=0.2)
    adapter = SemanticRewardAdapter(cfg, 3, 0.99, 1000)
    assert adapter.manager.ready and adapter.manager.backend is None  # nothing was loaded
    normalizer = MarginNormalizer(cfg.norm_window, cfg.margin_scale, cfg.margin_norm_enable)
    gen = torch.Generator().manual_seed(0)
    for step in range(0, 30, 3):
        rewards, margins = torch.randn(3, generator=gen), torch.randn(3, generator=gen)
        got = adapter(step, rewards, torch.zeros(3), torch.zeros(3, dtype=torch.bool), margins=margins)
        want = additive_shaping(rewards, beta_schedule(step, 1000, 0.2, cfg.beta_end_step_fraction),
                                normalizer(margins), torch.ones(3, dtype=torch.bool))
        assert torch.allclose(got, want, atol=1e-6)
    missing = adapter(30, rewards, torch.zeros(3), torch.zeros(3, dtype=torch.bool))  # a capture without margins
    assert torch.equal(missing, rewards) and adapter.fail_events == 1


def test_an_oracle_run_loads_no_model_and_renders_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(ToyGoal, "render", lambda self: pytest.fail("the oracle rendered a frame"))
    run = safe.run(safe.build_config(overrides=[*TINY, *ORACLE]), tmp_path / "run", show_progress=False)
    rows = read_metrics(run)
    assert all(r["Semantics/FailSoftEvents"] == 0 and r["Semantics/Debug/ClipStatus"] == 4 for r in rows)
    assert any(r["Semantics/Shaping/RMS"] > 0 for r in rows) and any(r["Semantics/RawMargin"] != 0 for r in rows)


def test_the_oracle_takes_no_risk_head():
    with pytest.raises(runconfig.ConfigError, match="risk_enable.*margin_source 'oracle'"):
        safe.build_config(overrides=[*TINY, *ORACLE, "semantic.risk_enable=true"])
    with pytest.raises(runconfig.ConfigError, match="margin_source.*one of \\['vision', 'oracle'\\]"):
        safe.build_config(overrides=[*TINY, *ORACLE[:3], "semantic.margin_source=lidar"])
