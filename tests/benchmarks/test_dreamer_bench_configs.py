"""The Dreamer benchmarks' configs are valid runs: each room_exit arm with the settings of the arms on
benchmarks/dreamer/README.md, and still_vs_sheeprl's, validated as the engine validates them before a run
(a key one execution does not read is refused)."""

from __future__ import annotations

import pytest

from benchmarks.dreamer import room_exit, still_vs_sheeprl
from rlspec.engines import dreamer

CONV = ["dreamer.encoder=conv", "dreamer.cnn_stages=3", "dreamer.cnn_mult=8"]  # the committed conv arm
CROP = ["dreamer.frame=64,64", "dreamer.cnn_stages=4"]
POSTERIOR = ["dreamer.head_input=posterior", "replay_ends=true"]


@pytest.mark.parametrize("engine", sorted(room_exit.ARMS))
@pytest.mark.parametrize("settings", [[], CONV, CONV + CROP, CONV + CROP + POSTERIOR],
                         ids=["mlp", "conv", "crop", "posterior"])
def test_each_room_exit_arm_is_a_valid_run(monkeypatch, engine, settings):
    monkeypatch.setattr(room_exit, "OVERRIDES", [*room_exit.OVERRIDES, *settings])  # as --set extends it
    cfg = room_exit.arm_config(engine, ["seed=3", "total_steps=40960", "checkpoint_every=2048"])
    assert (cfg.execution, cfg.seed, cfg.total_steps) == (room_exit.ARMS[engine], 3, 40960)
    assert ("posterior" if POSTERIOR[0] in settings else "next") == cfg.dreamer.head_input


def test_still_vs_sheeprl_runs_a_valid_config():
    cfg = dreamer.build_config("room-exit", [*still_vs_sheeprl.OVERRIDES, "seed=0"])
    dreamer.validate(cfg)
    assert cfg.task == "standing-still"
