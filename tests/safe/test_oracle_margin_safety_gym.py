"""The oracle margin (rlspec/envs/oracle.py) on Safety-Gymnasium's SafetyPointGoal1-v0: the nearest hazard's edge
minus the goal distance, read from the builder's task, against the positions themselves; and a PPOLagSem run
shaped by it, which renders no frame and loads no model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlspec.envs.safety_gym import import_safety_gymnasium, make_env, make_vector

try:
    import_safety_gymnasium()
except ModuleNotFoundError as err:  # pytest.importorskip, through the shim
    pytest.skip(f"safety-gymnasium is not installed: {err}", allow_module_level=True)

from rlspec.engines import safe  # noqa: E402
from rlspec.envs.oracle import oracle_margin  # noqa: E402
from rlspec.runs.rundir import read_metrics  # noqa: E402

ENV = "SafetyPointGoal1-v0"


def test_the_margin_is_the_nearest_hazard_edge_minus_the_goal_distance():
    env = make_env(ENV)
    env.reset(seed=5)
    for _ in range(5):
        env.step(env.action_space.sample())
        task = env.unwrapped.task
        p = np.asarray(task.agent.pos)[:2]
        edge = min(np.linalg.norm(p - np.asarray(h)[:2]) for h in task.hazards.pos) - task.hazards.size
        goal = np.linalg.norm(p - np.asarray(task.goal.pos)[:2])
        assert oracle_margin(env) == pytest.approx(edge - goal, abs=1e-9)
    env.close()


def test_a_run_shaped_by_the_oracle_trains_without_frames(tmp_path):
    envs = make_vector(ENV, 1, seed=0)
    envs.reset()
    out = envs.step(torch.zeros(1, envs.act_dim), margins=True)
    assert out.frames is None and torch.isfinite(out.margins).all()
    envs.close()
    cfg = safe.build_config(overrides=[f"env_id={ENV}", "num_envs=1", "total_steps=2000", "steps_per_epoch=1000",
                                       "ppo.update_iters=2", "algo=PPOLagSem", "semantic.enable=true",
                                       "semantic.shaping_enable=true", "semantic.margin_source=oracle",
                                       "semantic.capture_interval=5", "plots=false"])
    rows = read_metrics(safe.run(cfg, tmp_path / "run", show_progress=False))
    assert len(rows) == 2 and all(r["Semantics/FailSoftEvents"] == 0 for r in rows)
    assert all(np.isfinite(r["Loss/Loss_pi"]) and r["Semantics/RawMargin"] != 0 for r in rows)
    assert rows[0]["Semantics/Shaping/RMS"] > 0  # β anneals to 0 at half the steps: the second epoch is unshaped
    assert rows[1]["Semantics/Beta"] == 0 and rows[1]["Semantics/Shaping/RMS"] == 0
