"""The safe engine behind contract ``trainer`` (spec/trainer.py): `rlspec train safe` in this process
(rlspec/engines/trainer_adapter.py), PPOLag on ToyGoal-v0 with 2 envs, 64 env steps an epoch and a tiny
network, a checkpoint every epoch.

The unit is one epoch (64 env steps: the engine runs whole epochs, total_steps // steps_per_epoch of them). The
actor's linear learning-rate decay is off: it spreads over total_steps, so a run to k extended to N follows
another schedule than a straight run to N, by design. The fingerprint is the last checkpoint: epoch and step,
the generator state, the envs (their seed, episode counts and replayable actions), the episode window, the
actor's and both critics' parameters and Adam states, and the controllers (the Lagrange multiplier with its Adam
moments, the observation normalizer's statistics, the loss guard's counts). It holds no wall-clock entry.
"""

from __future__ import annotations

from rlspec.engines import trainer_adapter

UNIT = 64  # env steps of one epoch (steps_per_epoch)
MAX_STEPS = 4 * UNIT
ARGV = ["--algo", "PPOLag", "--env", "ToyGoal-v0", *trainer_adapter.sets(
    "num_envs=2", f"steps_per_epoch={UNIT}", "checkpoint_every=1", "ep_window=10", "ppo.hidden=16",
    "ppo.update_iters=2", "ppo.batch_size=32", "ppo.linear_lr_decay=false", "plots=false")]


def run(out: str, total_steps: int, seed: int, resume: bool) -> None:
    """`rlspec train safe` to ``total_steps`` in ``out``, fresh or resumed (trainer_adapter.run)."""
    trainer_adapter.run("safe", ARGV, out, total_steps, seed, resume)


def steps(out: str) -> int:
    """The env step of the last checkpoint."""
    return trainer_adapter.steps(out, "step")


fingerprint = trainer_adapter.fingerprint
