"""Planted bugs for contract ``data_parallel``: the reference update with one switch per known data-parallel bug
(each entry turns exactly one on). Each names the clause that must catch it; ``spared`` clauses must pass."""

from __future__ import annotations

import types

import torch
import torch.distributed as dist
from planted import Planted

from rlspec.reference import data_parallel as ref
from rlspec.reference import toy_regression as toy


def _update(*, reduce=True, divide=True, rank_seeded=False, own_batch=False, summed_loss=False):
    """The reference update, with switches: skip the all-reduce, all-reduce the sum without dividing by W, seed
    the initial weights with seed + rank, train on a batch of its own drawn from the seed, take the gradient of
    the summed (not the mean) squared error."""

    def mean_over_ranks(grad):
        if not dist.is_initialized() or not reduce:
            return grad
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad / dist.get_world_size() if divide else grad

    def update(batch, seed):
        rank = dist.get_rank() if dist.is_initialized() else 0
        weights = toy.initial_weights(torch.Generator().manual_seed(seed + rank if rank_seeded else seed))
        if own_batch:
            batch = ref.batch(seed, len(batch["y"]))
        for _ in range(toy.UPDATE_STEPS):
            grad = toy.gradient(weights, batch["x"], batch["y"]) * (len(batch["y"]) if summed_loss else 1)
            weights = toy.sgd_step(weights, mean_over_ranks(grad))
        return dict(weights=weights)

    return types.SimpleNamespace(batch=ref.batch, update=update)


PLANTED_DATA_PARALLEL = (
    Planted("data_parallel: no all-reduce (each rank learns from its shard alone)", "data_parallel",
            _update(reduce=False), "DP-1", "beyond rtol", ("DP-3",)),
    Planted("data_parallel: the gradients summed over the ranks, not averaged", "data_parallel",
            _update(divide=False), "DP-1", "beyond rtol", ("DP-2", "DP-3")),
    Planted("data_parallel: the initial weights seeded with seed + rank", "data_parallel", _update(rank_seeded=True),
            "DP-2", "other parameters than rank 0", ("DP-3",)),
    Planted("data_parallel: the batch ignored (one drawn from the seed)", "data_parallel", _update(own_batch=True),
            "DP-3", "does not use its batch", ("DP-2",)),
    Planted("data_parallel: the summed squared error's gradient averaged over the ranks", "data_parallel",
            _update(summed_loss=True), "DP-1", "beyond rtol", ("DP-2", "DP-3")),
)
