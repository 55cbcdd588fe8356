"""Execution parallel of the safe engine (``execution=parallel``): the reference loop (reference.py ``run``, the
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
    rlspec train safe-fast ...    # the former engine name: safe with execution=parallel, num_envs=2 and
                                  # env_workers=2 as its defaults (SafeFastConfig)

With one process the run is the local execution's run exactly (the workers step the same episodes).
``steps_per_epoch`` counts the env steps of all processes together (OmniSafe's convention).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import torch
import torch.distributed as dist

from rlspec import jsonio
from rlspec.algos.safe_ppo import LOCAL, Comm
from rlspec.engines.safe import reference as safe
from rlspec.engines.safe.config import SafeConfig, SafeFastConfig
from rlspec.engines.safe.reference import Execution
from rlspec.envs.subproc_vector import EnvWorkerError, SubprocSafeVectorEnv
from rlspec.runs import device, shell
from rlspec.runs.compare import largest, mean
from rlspec.runs.config import bad
from rlspec.runs.faults import RunStopped, attempt
from rlspec.runs.rundir import read_metrics


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


def compare(argv: list[str]) -> int:
    """`rlspec compare safe [--algo A] [--env E] [--preset P] [--set k=v ...] [--out DIR]`: run the local
    execution and this one (SafeFastConfig's defaults) on the same config into DIR/reference and DIR/fast, then
    compare every logged metric row by row (timings apart) and the env steps/s. Written to DIR/compare.json.
    With one process the parallel execution steps the same episodes, so the runs must be identical: exit 1 if
    any metric differs."""
    description = safe.describe(cls=SafeFastConfig)
    args = shell.compare_parser(description, compare.__doc__, "compare-ALGO-ENV-sSEED").parse_args(argv)

    def both() -> tuple[Path, dict[str, Path]]:
        cfg = shell.compare_config(description, args)
        ref_cfg = replace(SafeConfig(**{f.name: getattr(cfg, f.name) for f in fields(cfg)}), execution="local",
                          **safe.PARALLEL_ONLY)
        out = shell.claim_compare_out(args.out or Path("runs") / f"compare-{cfg.algo}-{cfg.env_id}-s{cfg.seed}")
        return out, {"reference": safe.run(ref_cfg, out / "reference", show_progress=not args.quiet),
                     "fast": safe.run(cfg, out / "fast", show_progress=not args.quiet, execution=execution(cfg))}

    status, ran = attempt("rlspec compare safe", both)
    if status is not None:
        return status
    out, runs = ran
    result = compare_runs(runs["reference"], runs["fast"])
    (out / "compare.json").write_text(jsonio.dumps(result))
    worst = max(result["max_diff"].items(), key=lambda kv: kv[1], default=("-", 0.0))
    print(f"rows: {result['rows']}; identical: {result['identical']} (largest difference {worst[1]:.3g} in {worst[0]}); "
          f"env steps/s reference {result['fps']['reference']:.0f}, fast {result['fps']['fast']:.0f} "
          f"(fast/reference {result['fps']['ratio']:.2f}x); written to {out / 'compare.json'}")
    return 0 if result["identical"] else 1


def compare_runs(ref: Path, fast: Path) -> dict:
    """Per metric (Time/* left out), the largest difference of two runs' rows in order (rlspec/runs/compare.py:
    |a − b| / max(|a|, |b|, 1), NaN equals NaN), whether they are identical, and their mean env steps/s."""
    a, b = read_metrics(ref), read_metrics(fast)
    keys = sorted(k for k in set().union(*a[:1], *b[:1]) if not k.startswith("Time/"))
    diff = largest(zip(a, b), keys)
    fps = {name: mean(rows, "Time/FPS") for name, rows in (("reference", a), ("fast", b))}
    fps["ratio"] = fps["fast"] / fps["reference"] if fps["reference"] else math.nan
    return {"runs": {"reference": str(ref), "fast": str(fast)}, "rows": [len(a), len(b)],
            "identical": len(a) == len(b) and all(v == 0.0 for v in diff.values()), "max_diff": diff, "fps": fps}
