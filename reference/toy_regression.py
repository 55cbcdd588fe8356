"""The toy learner that reference/trainer.py and reference/data_parallel.py train: linear regression on the
squared error. Neither contract pins a learning rule (any rule a trainer or a data-parallel update uses is
theirs), so this module is no contract's reference and is not mutated (spec/mutants.py): the machinery
around it is what those references show.

A problem is a target w* [D] ~ N(0, I); a sample is x [D] ~ N(0, I) with y = w*·x + NOISE·ε. The online
learner (trainer) draws one sample per step into its replay and takes a heavy-ball SGD step on a minibatch of
BATCH replay rows; the full-batch learner (data_parallel) takes UPDATE_STEPS plain SGD steps.
"""

from __future__ import annotations

import torch

D, NOISE, DTYPE = 8, 0.1, torch.float64
BATCH, LR, MOMENTUM = 16, 0.05, 0.9  # the online learner's minibatch and heavy-ball SGD
UPDATE_STEPS, SGD_LR = 4, 0.1  # the full-batch learner's plain SGD


def target(gen: torch.Generator) -> torch.Tensor:
    """w* [D]."""
    return torch.randn(D, generator=gen, dtype=DTYPE)


def initial_weights(gen: torch.Generator) -> torch.Tensor:
    """[D], small."""
    return 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


def samples(gen: torch.Generator, w_star: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x [n, D], y [n]."""
    x = torch.randn(n, D, generator=gen, dtype=DTYPE)
    return x, x @ w_star + NOISE * torch.randn(n, generator=gen, dtype=DTYPE)


def env_step(gen: torch.Generator, w_star: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The online learner's one new sample per step: x [1, D], y [1]."""
    return samples(gen, w_star, 1)


def empty_replay() -> tuple[torch.Tensor, torch.Tensor]:
    """x [0, D], y [0]."""
    return torch.zeros(0, D, dtype=DTYPE), torch.zeros(0, dtype=DTYPE)


def online_step(weights: torch.Tensor, velocity: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One heavy-ball step on BATCH rows drawn (with replacement) from the replay x [n, D], y [n]: (w, v)."""
    idx = torch.randint(len(y), (BATCH,), generator=gen)  # [BATCH]
    return momentum_step(weights, velocity, gradient(weights, x[idx], y[idx]))


def sgd_step(weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """w − lr·g."""
    return weights - SGD_LR * grad


def gradient(weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d mean((x·w − y)²) / dw [D] over the rows of x [n, D], y [n]."""
    return 2.0 * x.T @ (x @ weights - y) / len(y)


def momentum_step(weights: torch.Tensor, velocity: torch.Tensor,
                  grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Heavy-ball SGD in PyTorch's form: v ← μ·v + g, w ← w − lr·v; returns (w, v)."""
    velocity = MOMENTUM * velocity + grad
    return weights - LR * velocity, velocity
