"""SB3's side of the safe-RL comparison (benchmarks/safe/anchors/run_sb3.py): SB3 PPO's arguments from rlspec's resolved
config, checked without SB3."""

from __future__ import annotations

import pytest

from benchmarks.safe.anchors import run_sb3 as bench


def test_sb3_arguments_come_from_rlspec_s_config_and_the_entropy_bonus_is_rescaled():
    from rlspec.engines.safe import build_config

    sets = bench.shared(1, 200_000, 4_000, 2)
    cfg = build_config("default", [*sets, "ppo.entropy_coef=0.01", "ppo.update_iters=7"])
    kwargs = bench.sb3_kwargs(cfg, 1, 4_000, 2)
    assert kwargs["n_epochs"] == 7 and kwargs["n_steps"] == 2_000 and kwargs["stats_window_size"] == 50
    # SB3's entropy sums the action dimensions, rlspec's (OmniSafe's) averages them: the same bonus per unit
    assert kwargs["ent_coef"] == pytest.approx(0.01 / bench.ACT_DIM) and bench.ACT_DIM == 2
    assert kwargs["learning_rate"] == cfg.ppo.actor_lr and kwargs["hidden"] == list(cfg.ppo.hidden)
