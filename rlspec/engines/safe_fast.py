"""Fast engine of the safe-RL PPO family (issue 11): the reference loop (rlspec/engines/safe.py ``run``,
the same functional core and kit), executed elsewhere:

* envs in ``env_workers`` worker processes (rlspec/envs/subproc_vector.py), stepped in parallel, actions
  for all envs from one batched policy call;
* under torchrun, data parallel across processes as OmniSafe's ``parallel``: torch.distributed (gloo on
  CPU), each process its own slice of envs (global indices rank·num_envs ...), its own action noise, the
  same initial weights; gradients averaged after clipping, advantage statistics, the KL early-stop decision
  and J_c over all processes; rank 0 writes the run directory.

    rlspec train safe-fast --algo PPOLag --env SafetyPointGoal1-v0 --set num_envs=8 --set env_workers=4
    torchrun --nproc_per_node 2 "$(which rlspec)" train safe-fast --algo PPOLag --set num_envs=4 ...

With one process the run is the reference engine's run exactly (the workers step the same episodes).
``steps_per_epoch`` counts the env steps of all processes together (OmniSafe's convention).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from rlspec.algos.safe_ppo import LOCAL, Comm
from rlspec.engines import safe
from rlspec.engines.safe import Execution, SafeConfig
from rlspec.envs.subproc_vector import SubprocSafeVectorEnv
from rlspec.runs.config import ConfigError

ENGINE = "safe-fast"


@dataclass(frozen=True)
class FastConfig(SafeConfig):
    env_workers: int = 2
    """Worker processes stepping this process's num_envs envs (0: step them in this process)."""


class TorchDistComm(Comm):
    """Comm over the default torch.distributed process group."""

    def __init__(self):
        self.world_size = dist.get_world_size()

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        out = t.detach().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    def average_gradients(self, net: torch.nn.Module) -> None:
        for p in net.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= self.world_size


def execution(cfg: FastConfig) -> Execution:
    """Envs in workers; the torch.distributed group (if one is initialized) as comm."""
    if cfg.env_workers < 0 or cfg.env_workers > cfg.num_envs:
        raise ConfigError(f"config key 'env_workers': expected 0..num_envs = {cfg.num_envs}, got {cfg.env_workers}")
    grouped = dist.is_available() and dist.is_initialized()
    comm: Comm = TorchDistComm() if grouped else LOCAL
    make = Execution.make_envs
    if cfg.env_workers:
        def make(c: FastConfig, first: int) -> SubprocSafeVectorEnv:
            return SubprocSafeVectorEnv(c.env_id, c.num_envs, c.seed, c.env_workers, c.forced_cost, first)
    return Execution(make_envs=make, comm=comm, rank=dist.get_rank() if grouped else 0, engine=ENGINE)


def train(argv: list[str]) -> int:
    """`rlspec train safe-fast ...`; under torchrun (WORLD_SIZE > 1) joins the gloo process group first."""
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized()
    if launched:
        dist.init_process_group("gloo")
    try:
        return safe.train(argv, FastConfig, ENGINE, execution)
    finally:
        if launched:
            dist.destroy_process_group()


def plot(run_dir: Path) -> int:
    return safe.plot(run_dir, FastConfig)


def evaluate(run_dir: Path, argv: list[str]) -> int:
    return safe.evaluate(run_dir, argv, FastConfig)


def compare(argv: list[str]) -> int:
    return safe.compare(argv)
