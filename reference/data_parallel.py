"""Reference ``data_parallel`` (spec/data_parallel.py): full-batch gradient descent on the toy linear regression
of reference/toy_regression.py, its gradient averaged over the ranks.

One update is toy.UPDATE_STEPS steps of plain SGD from initial weights drawn from the seed. With W ranks each
computes the mean-loss gradient on its shard, all-reduces the sum and divides by W: the shards are equal, so the
mean of their means is the whole batch's mean gradient, and every rank takes the step one process takes. Plain SGD (no
momentum, no Adam) makes a missing division by W visible: Adam's first step, g / sqrt(g²), is the same for g and
W·g.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from rlspec.reference import toy_regression as toy


def batch(seed: int, size: int) -> dict[str, torch.Tensor]:
    """x [size, D], y [size] of a problem drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    x, y = toy.samples(gen, toy.target(gen), size)
    return dict(x=x, y=y)


def _mean_over_ranks(grad: torch.Tensor) -> torch.Tensor:
    """The mean of the ranks' gradients [D] (the gradient itself in one process)."""
    if not dist.is_initialized():
        return grad
    dist.all_reduce(grad, op=dist.ReduceOp.SUM)
    return grad / dist.get_world_size()


def update(batch: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """UPDATE_STEPS averaged-gradient SGD steps from the weights ``seed`` draws; the weights [D] they end with."""
    weights = toy.initial_weights(torch.Generator().manual_seed(seed))
    for _ in range(toy.UPDATE_STEPS):
        weights = toy.sgd_step(weights, _mean_over_ranks(toy.gradient(weights, batch["x"], batch["y"])))
    return dict(weights=weights)
