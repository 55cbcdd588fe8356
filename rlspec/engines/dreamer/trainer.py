"""The dreamer engine behind contract ``trainer`` (spec/trainer.py): `rlspec train dreamer` in this process
(rlspec/engines/trainer_adapter.py), the local execution (LocalExecution: PyBoy, CPU) on room-exit
with 2 envs, a tiny world model and actor-critic, 16 env steps of prefill, then an update every 4 env steps.

The unit is 16 env steps (8 vector steps of the 2 envs): the checkpoint interval, and the metrics interval too,
so that every checkpoint comes right after a metrics row (the loop's metric sums, which a row resets, are in the
checkpoint). The fingerprint is the last checkpoint: the env step, the world model's, actor's, critic's and
slow critic's parameters, their Adam states, the update count and ReturnEMA, the replay ring (its storage and
cursors), the envs (their seed, episode counts and replayable actions), the loop's state (observations,
policy carry, episode returns and lengths, finished episodes, metric sums since the last row) and the
generator state. It holds no wall-clock entry (env steps/s and updates/s are only in metrics.csv).
"""

from __future__ import annotations

from rlspec.engines import trainer_adapter

UNIT = 16  # env steps: checkpoint_every = log_every, a multiple of num_envs
MAX_STEPS = 4 * UNIT
ARGV = ["--task", "room-exit", *trainer_adapter.sets(
    "num_envs=2", "min_ready_steps=16", "train_ratio=4", "replay_capacity=64", "step_limit=10",
    f"log_every={UNIT}", f"checkpoint_every={UNIT}", "ep_window=5", "dreamer.deter=16", "dreamer.stoch=4",
    "dreamer.classes=4", "dreamer.hidden=16", "dreamer.embed_dim=16", "dreamer.pool=8", "dreamer.mlp_hidden=16",
    "dreamer.mlp_layers=1", "dreamer.horizon=4", "dreamer.batch_size=2", "dreamer.seq_len=8", "plots=false")]


def run(out: str, total_steps: int, seed: int, resume: bool) -> None:
    """`rlspec train dreamer` to ``total_steps`` in ``out``, fresh or resumed (trainer_adapter.run)."""
    trainer_adapter.run("dreamer", ARGV, out, total_steps, seed, resume)


def steps(out: str) -> int:
    """The env step of the last checkpoint."""
    return trainer_adapter.steps(out, "env_steps")


fingerprint = trainer_adapter.fingerprint
