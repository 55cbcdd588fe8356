"""The bonus engine behind contract ``trainer`` (spec/trainer.py): `rlspec train bonus` in this process
(rlspec/engines/trainer_adapter.py), the local execution on token-reach with the smoke preset's bonus settings
(the prototypes ablation: mining, the paired queue, bonus time), 4 envs, 16-step fragments, a tiny learner
with observation normalization, a checkpoint every update.

The unit is one update (64 env steps: 4 envs × fragment_len 16; the engine runs whole updates,
total_steps // 64 of them). The fingerprint is the last checkpoint: the update count, the generator state, the
envs (episode counts, steps, positions and goals) and their observations, the fragment replay, the episode
assembler's open episodes, the episode window, the success pool, paired queue, prototypes and miner counts,
the return scale's and observation normalizer's statistics, the policy's and critic's parameters, the main and
bonus Adam states and the bonus scheduler's state. It holds no wall-clock entry (env steps/s is only in
metrics.csv).
"""

from __future__ import annotations

from rlspec.engines import trainer_adapter

UNIT = 64  # env steps of one update: num_envs 4 × fragment_len 16
MAX_STEPS = 4 * UNIT
ARGV = ["--task", "token-reach", "--preset", "smoke", *trainer_adapter.sets(
    "num_envs=4", "fragment_len=16", "checkpoint_every=1", "learner.hidden=16", "learner.epochs=2",
    "learner.minibatches=2", "learner.normalize_obs=true", "plots=false")]


def run(out: str, total_steps: int, seed: int, resume: bool) -> None:
    """`rlspec train bonus` to ``total_steps`` in ``out``, fresh or resumed (trainer_adapter.run)."""
    trainer_adapter.run("bonus", ARGV, out, total_steps, seed, resume)


def steps(out: str) -> int:
    """The env step of the last checkpoint: its update count times UNIT."""
    return trainer_adapter.steps(out, "update", UNIT)


fingerprint = trainer_adapter.fingerprint
