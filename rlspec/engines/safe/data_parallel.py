"""The safe engine's update behind contract ``data_parallel`` (spec/data_parallel.py).

``update`` is the engine's own update (rlspec/algos/safe_update.py) on a fixed rollout, with the engine's
TorchDistComm (rlspec/engines/safe/parallel.py) when a process group is initialized: gradients averaged over the
ranks, the PPO family's KL early stop decided on the whole rollout, CPO's F·v and line-search values averaged.
The rollout [T, N, ...] is split along its env columns (N), and each rank's minibatch is its whole shard
(``batch_size`` = T·N/W), so that one process on all columns and W processes on their shards take the same
steps. What an update ends with: the three networks, their optimizers' state, the Lagrange multiplier's
state and the decisions among the metrics (the early-stop iteration, CPO's case and accepted line-search
step, the multiplier).

Two algorithms are registered: PPOLAG (the PPO family) and CPO (the natural-gradient family).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.distributed as dist

from rlspec.algos.config import PPOConfig, SafetyConfig
from rlspec.algos.safe_ppo import LOCAL, Kit, Rollout, make_state
from rlspec.algos.safe_update import update as safe_update
from rlspec.engines.safe.parallel import TorchDistComm

T, OBS, ACT = 8, 3, 2  # rollout length, observation and action sizes
EP_COST = 40.0  # the episode cost the Lagrange multiplier (and CPO's constraint) sees
UPDATE_ITERS = 3
# the metrics that are decisions every rank must share; the losses and statistics are each rank's own shard's
DECISIONS = ("Train/StopIter", "Misc/OptimCase", "Misc/AcceptanceStep", "Metrics/LagrangeMultiplier")


def _state(algo: str, num_envs: int, seed: int):
    ppo = PPOConfig(update_iters=UPDATE_ITERS, batch_size=T * num_envs, linear_lr_decay=False)
    return ppo, make_state(algo, ppo, SafetyConfig(), OBS, ACT, num_envs, Kit.reference(),
                           torch.Generator().manual_seed(seed))


def _plain(obj: Any) -> Any:
    """A controller as its attributes (numbers, tensors); None stays None."""
    return None if obj is None else {k: v for k, v in vars(obj).items() if not callable(v)}


@dataclasses.dataclass(frozen=True)
class SafeDataParallel:
    algo: str
    UNIT = 1  # an env column

    def batch(self, seed: int, size: int) -> Rollout:
        """A rollout of T steps in ``size`` env columns, its log-probabilities near a fresh actor's."""
        g = torch.Generator().manual_seed(seed)
        obs, next_obs = torch.randn(T, size, OBS, generator=g), torch.randn(T, size, OBS, generator=g)
        act = torch.randn(T, size, ACT, generator=g)
        reward, cost = torch.randn(T, size, generator=g), torch.rand(T, size, generator=g)
        terminated, truncated = torch.rand(T, size, generator=g) < 0.1, torch.rand(T, size, generator=g) < 0.1
        _, state = _state(self.algo, size, seed)
        with torch.no_grad():
            logp = state.actor.log_prob(obs, act)[0] + 0.05 * torch.randn(T, size, generator=g)
        return Rollout(obs=obs, act=act, logp=logp, reward=reward, cost=cost, terminated=terminated,
                       truncated=truncated, next_obs=next_obs, raw_obs=obs)

    def shard(self, batch: Rollout, rank: int, world: int) -> Rollout:
        """Env columns [rank·N/W, (rank + 1)·N/W) of every [T, N, ...] field."""
        n = batch.obs.shape[1] // world
        return Rollout(**{f.name: getattr(batch, f.name)[:, rank * n:(rank + 1) * n]
                          for f in dataclasses.fields(Rollout)})

    def update(self, batch: Rollout, seed: int) -> dict:
        ppo, state = _state(self.algo, batch.obs.shape[1], seed)
        comm = TorchDistComm(torch.device("cpu")) if dist.is_initialized() else LOCAL
        metrics = safe_update(state, batch, EP_COST, ppo, SafetyConfig(), Kit.reference(),
                              torch.Generator().manual_seed(seed), comm=comm)
        nets = dict(actor=state.actor, reward_critic=state.reward_critic, cost_critic=state.cost_critic,
                    actor_opt=state.actor_opt, reward_opt=state.reward_opt, cost_opt=state.cost_opt)
        return dict({k: None if v is None else v.state_dict() for k, v in nets.items()},
                    multiplier=_plain(state.multiplier),
                    decisions={k: metrics[k] for k in DECISIONS if k in metrics})


PPOLAG = SafeDataParallel("PPOLag")
CPO = SafeDataParallel("CPO")
