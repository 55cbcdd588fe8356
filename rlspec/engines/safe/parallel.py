"""Execution parallel of the safe engine (``execution=parallel``): the run loop (loop.py ``run``, the
same functional core and kit), executed elsewhere:

* envs in ``env_workers`` worker processes (rlspec/envs/subproc_vector.py), stepped in parallel, actions
  for all envs from one batched policy call; with ``learner_steps`` this process steps a share too;
* under torchrun, data parallel across processes as OmniSafe's ``parallel``: torch.distributed (gloo on
  CPU), each process its own slice of envs (global indices rank·num_envs ...), its own action noise, the
  same initial weights; gradients averaged after clipping, advantage statistics, the KL early-stop decision
  and J_c over all processes; TRPO, TRPOLag and CPO also average their actor gradients, every Fisher-vector
  product and the line search's surrogates and KL (rlspec/algos/trust_region.py), P3O runs the PPO loop;
  rank 0 writes the run directory.

    rlspec train safe --set execution=parallel --algo PPOLag --set num_envs=8 --set env_workers=4
    torchrun --nproc_per_node 2 "$(which rlspec)" train safe --set execution=parallel --set num_envs=4 ...

With one process the run is the local execution's run exactly (the workers step the same episodes).
``steps_per_epoch`` counts the env steps of all processes together (OmniSafe's convention).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
import torch.distributed as dist

from rlspec.algos.safe_ppo import LOCAL, Comm
from rlspec.engines.safe.config import SafeConfig
from rlspec.engines.safe.loop import Execution
from rlspec.envs.subproc_vector import EnvWorkerError, SubprocSafeVectorEnv
from rlspec.runs import device
from rlspec.runs.config import bad
from rlspec.runs.faults import RunStopped


class EnvWorkerStopped(EnvWorkerError, RunStopped):
    """A failed env worker stops the run: exit 3 with its one line, the last checkpoint kept."""


class RunWorkers(SubprocSafeVectorEnv):
    """The run's env workers (a failure is EnvWorkerStopped)."""

    error = EnvWorkerStopped


class TorchDistComm(Comm):
    """Comm over the default torch.distributed process group; ``device``: where its collectives run (NCCL
    reduces CUDA tensors only, so host statistics travel through the device and come back)."""

    def __init__(self, device: torch.device):
        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        self.device = device

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        out = t.detach().to(self.device, copy=True)
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out.to(t.device)

    def average_gradients(self, net: torch.nn.Module) -> None:
        for p in net.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= self.world_size


def policy_device(cfg: SafeConfig) -> torch.device:
    """cfg.device resolved here; "cuda" under torchrun is this process's cuda:LOCAL_RANK."""
    requested = cfg.device
    if requested == "cuda" and "LOCAL_RANK" in os.environ:
        requested = f"cuda:{os.environ['LOCAL_RANK']}"
    try:
        return device.resolve(requested)
    except (RuntimeError, ValueError) as err:
        raise bad("device", device.CHOICES, cfg.device, str(err)) from None


def execution(cfg: SafeConfig) -> Execution:
    """Envs in workers; the torch.distributed group (if one is initialized) as comm; the networks on
    cfg.device."""
    if cfg.env_workers < 0 or cfg.env_workers > cfg.num_envs - cfg.learner_steps:
        raise bad("env_workers", f"0..num_envs{' - 1 (learner_steps)' * cfg.learner_steps} = "
                  f"{cfg.num_envs - cfg.learner_steps}", cfg.env_workers)
    if cfg.learner_steps and not cfg.env_workers:
        raise bad("learner_steps", "false with env_workers=0 (every env already steps in this process)", True)
    dev = policy_device(cfg)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():  # launched by torchrun
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    grouped = dist.is_available() and dist.is_initialized()
    comm: Comm = TorchDistComm(dev) if grouped else LOCAL
    make = Execution.make_envs
    if cfg.env_workers:
        def make(c: SafeConfig, first: int) -> RunWorkers:
            return RunWorkers(c.env_id, c.num_envs, c.seed, c.env_workers, c.forced_cost, first,
                              caller_steps=c.learner_steps)
    return Execution(make_envs=make, comm=comm, rank=dist.get_rank() if grouped else 0, device=str(dev))


def leaving_process_group(work: Callable[[], int]) -> int:
    """``work()``; a torch.distributed process group it joined (under torchrun: ``execution``) is left after."""
    joined = dist.is_available() and dist.is_initialized()
    try:
        return work()
    finally:
        if not joined and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
