"""The bonus engine's main update behind contract ``data_parallel`` (spec/data_parallel.py).

``update`` is the engine's own PPO + V-trace update (rlspec/algos/bonus_vtrace.py, ``ppo_vtrace_update``) with
the gradient averaging and the advantage standardization over every rank's samples its Ray trainers use when a
process group is initialized (ray.average_over_ranks, standardize_over_ranks),
on a fixed fragment [T, N, ...] split along its env columns (N). Each rank's minibatch is its whole shard
(``minibatches`` = 1): the Ray trainers draw their own minibatch order per rank, which with several minibatches
makes the union of the ranks' minibatches another set of samples than one process's. The bonus phase (pack
draws from the success miner) is not part of it. What an update ends with: the policy, the critic and the
optimizer's state.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from rlspec.algos.bonus_vtrace import BonusKit, Fragment, make_learner, ppo_vtrace_update
from rlspec.algos.config import LearnerConfig
from rlspec.engines.bonus.ray import average_over_ranks, standardize_over_ranks

T, OBS, ACT, BINS = 8, 5, 2, 3  # fragment length, observation size, action dimensions, bins per dimension
CONFIG = LearnerConfig(hidden=(16, 16), epochs=2, minibatches=1)
UNIT = 1  # an env column
KIT = BonusKit.named("reference")  # loaded here, once, not in every forked rank


def batch(seed: int, size: int) -> Fragment:
    """A fragment of T steps in ``size`` env columns, behaviour log-probabilities near uniform tokens'."""
    g = torch.Generator().manual_seed(seed)
    obs, next_obs = torch.randn(T, size, OBS, generator=g), torch.randn(T, size, OBS, generator=g)
    tokens = torch.randint(BINS, (T, size, ACT), generator=g)
    logp = ACT * -torch.log(torch.tensor(float(BINS))) + 0.05 * torch.randn(T, size, generator=g)
    reward = torch.randn(T, size, generator=g)
    terminated, truncated = torch.rand(T, size, generator=g) < 0.1, torch.rand(T, size, generator=g) < 0.1
    return Fragment(obs, tokens, logp, reward, terminated, truncated, next_obs)


def shard(batch: Fragment, rank: int, world: int) -> Fragment:
    """Env columns [rank·N/W, (rank + 1)·N/W) of every [T, N, ...] field."""
    n = batch.obs.shape[1] // world
    return Fragment(*(column[:, rank * n:(rank + 1) * n] for column in batch))


def update(batch: Fragment, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    state = make_learner(CONFIG, OBS, ACT, BINS, KIT, gen)
    ranks = dict(average_gradients=average_over_ranks,
                 standardize=functools.partial(standardize_over_ranks, KIT.safe_standardize))
    ppo_vtrace_update(state, batch, CONFIG, KIT, gen, **(ranks if dist.is_initialized() else {}))
    return dict(policy=state.policy.state_dict(), critic=state.critic.state_dict(), opt=state.opt.state_dict())
