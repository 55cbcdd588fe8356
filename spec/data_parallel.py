"""Contract ``data_parallel``: one update on W ranks, each on its shard of a global batch, equals one process's
update on the whole batch.

Sources: data parallelism as PyTorch's DistributedDataParallel defines it (gradients all-reduced and averaged
over the ranks, so that W ranks on equal shards take the step one process takes on the global batch); the
question users moving to several GPUs ask (sheeprl#213, IsaacLab#2462: does N-rank training equal the single
process with the same global batch?); rlspec's safe engine, whose update is checked this way.

Interface
---------
    batch(seed, size) -> batch
        a global batch of ``size`` samples drawn from ``seed``: tensors or arrays (nested in mappings, lists,
        tuples) whose dim 0 is the sample, unless the implementation shards it itself (``shard`` below)
    update(batch, seed) -> parameters
        one update (however many optimizer steps the implementation takes) from the initial parameters ``seed``
        determines, on ``batch``; returns the parameters it ends with, nested like a trainer's fingerprint
        (tensors, arrays, numbers). On W > 1 ranks it runs in each rank's process with torch.distributed's
        default process group initialized (gloo, CPU) and that rank's shard, and averages what it must itself;
        the one-process run has no process group (``torch.distributed.is_initialized()`` is False)
    shard(batch, rank, world) -> batch      optional; default: the contiguous ``rank``-th of ``world`` equal parts
                                            of every tensor and array along dim 0 (rlspec.contracts.data_parallel)
    UNIT                                    optional int (default 1): ``size`` is a multiple of W·UNIT

Every run forks (POSIX): one child per rank and one for the single process, each with one torch thread.
Parameters are compared with rlspec.contracts.data_parallel's RTOL and ATOL (1e-4, 1e-5) per entry.
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from hypothesis import strategies as st

from rlspec.contracts import data_parallel as dp
from rlspec.contracts.trainer import differences, flatten
from rlspec.spec import forked
from rlspec.spec.core import Contract, Property, by_category, fail

CLAUSES = {
    "DP-1": "W ranks equal one process: with W ∈ {2, 3} ranks (torch.distributed, gloo), each rank's update on its "
            "contiguous shard of a global batch ends with the parameters one process's update on the whole batch "
            "ends with, within rtol 1e-4 and atol 1e-5 per entry",
    "DP-2": "the ranks agree: every rank ends with the same parameters, bit for bit (a tensor left out of the "
            "all-reduce, or an initialization seeded by the rank, drifts apart)",
    "DP-3": "the batch is used: one process's updates from the same seed on two different batches end with "
            "different parameters (an update that ignores its batch passes DP-1 and DP-2 trivially)",
}
CATEGORIES = by_category(maths=tuple(CLAUSES))
INTERFACE = ("batch", "update")
"""
batch(seed: int, size: int) -> tensors / arrays (nested), samples along dim 0
update(batch, seed: int) -> parameters (nested tensors / arrays / numbers)
"""
GLOO_TIMEOUT = datetime.timedelta(seconds=120)  # a rank whose peer died fails its collective instead of hanging


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------
@st.composite
def cases(draw):
    """W ranks, m·UNIT samples per rank, the seed of the batch and the parameters, another batch seed."""
    seed = draw(st.integers(0, 2**16 - 1))
    return dict(world=draw(st.sampled_from((2, 3))), per_rank=draw(st.integers(1, 4)), seed=seed,
                other_seed=draw(st.integers(0, 2**16 - 1).filter(lambda s: s != seed)))


EXAMPLES = (dict(world=2, per_rank=2, seed=0, other_seed=1), dict(world=3, per_rank=1, seed=5, other_seed=6))


def _inputs(impl: Any, case: dict) -> dict:
    return dict(world=case["world"], size=case["world"] * case["per_rank"] * int(getattr(impl, "UNIT", 1)),
                seed=case["seed"])


# --------------------------------------------------------------------------------------------------
# Runs in forked children
# --------------------------------------------------------------------------------------------------
def _save_update(impl: Any, batch: Any, seed: int, out: Path) -> None:
    torch.save(flatten(impl.update(batch, seed)), out)


def _rank(impl: Any, batch: Any, seed: int, rank: int, world: int, rendezvous: Path, out: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=GLOO_TIMEOUT)
    try:
        _save_update(impl, batch, seed, out)
    finally:
        dist.destroy_process_group()


def _results(clause: str, children: list[forked.Child], what: list[str], inputs: dict) -> None:
    """Wait for every child; a failure naming the first that raised or hung (the others are killed then)."""
    for i, child in enumerate(children):
        status, value = child.result()
        if status != "ok":
            for other in children[i + 1:]:
                other.kill()
                other.result()
            fail(clause, f"{what[i]} {'raised' if status == 'error' else status}: {value}", **inputs)


def _load(path: Path) -> dict[str, Any]:
    return torch.load(path, weights_only=False)


def one_process(clause: str, impl: Any, batch_seed: int, inputs: dict, tmp: Path) -> dict[str, Any]:
    """Parameters of one process's update on the whole batch drawn from ``batch_seed``."""
    out = tmp / f"one-{batch_seed}.pt"
    batch = impl.batch(batch_seed, inputs["size"])
    _results(clause, [forked.fork(lambda: _save_update(impl, batch, inputs["seed"], out))],
             ["one process's update"], inputs)
    return _load(out)


def ranks(clause: str, impl: Any, inputs: dict, tmp: Path) -> list[dict[str, Any]]:
    """Each rank's parameters after the W-rank update on the shards of the batch drawn from the case's seed."""
    world, whole = inputs["world"], impl.batch(inputs["seed"], inputs["size"])
    split = getattr(impl, "shard", dp.shard)
    shards = [split(whole, rank, world) for rank in range(world)]
    outs = [tmp / f"rank-{rank}.pt" for rank in range(world)]
    children = [forked.fork(lambda r=rank: _rank(impl, shards[r], inputs["seed"], r, world, tmp / "rendezvous",
                                                 outs[r])) for rank in range(world)]
    _results(clause, children, [f"rank {r} of {world}" for r in range(world)], inputs)
    return [_load(out) for out in outs]


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def _listed(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (", ..." if len(paths) > 5 else "")


def check_ranks_equal_one(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        want = one_process("DP-1", impl, case["seed"], inputs, Path(tmp))
        got = ranks("DP-1", impl, inputs, Path(tmp))[0]
    far = dp.too_far(got, want)
    if far:
        fail("DP-1", f"rank 0 of {inputs['world']} ends with parameters beyond rtol {dp.RTOL} / atol {dp.ATOL} of "
                     f"one process's in {len(far)} of {len(set(got) | set(want))} entries ({_listed(far)})", **inputs)


def check_ranks_agree(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        params = ranks("DP-2", impl, inputs, Path(tmp))
    for rank, other in enumerate(params[1:], start=1):
        diff = differences(other, params[0])
        if diff:
            fail("DP-2", f"rank {rank} of {inputs['world']} ends with other parameters than rank 0 in {len(diff)} of "
                         f"{len(set(other) | set(params[0]))} entries ({_listed(diff)})", **inputs)


def check_batch_used(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        first = one_process("DP-3", impl, case["seed"], inputs, Path(tmp))
        other = one_process("DP-3", impl, case["other_seed"], inputs, Path(tmp))
    if not differences(first, other):
        fail("DP-3", f"batches drawn from seeds {case['seed']} and {case['other_seed']} end with the same parameters "
                     f"in all {len(first)} entries: the update does not use its batch", **inputs)


# each case forks W + 1 processes and initializes a process group: the pinned examples and one drawn case
PROPERTIES = tuple(Property(clause, check, cases(), EXAMPLES, INTERFACE, max_examples=1) for clause, check in (
    ("DP-1", check_ranks_equal_one), ("DP-2", check_ranks_agree), ("DP-3", check_batch_used)))

CONTRACT = Contract("data_parallel", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES)
