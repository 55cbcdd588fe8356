"""Reference ``trainer`` (spec/trainer.py): a toy trainer whose stop, kill and resume leave its result unchanged.

It learns the toy linear regression of reference/toy_regression.py online: each step the "env" draws one sample
into the replay and SGD with momentum takes a step on a minibatch drawn from it. Everything a later step depends
on is in one checkpoint: the step count, the weights, the momentum buffer, the replay and the generator's state.
It is written every EVERY steps and after the loop (at the last step, if the run took one), atomically (a
temporary file, then ``os.replace``), so SIGKILL at any moment leaves the last complete one.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from rlspec.reference import toy_regression as toy

UNIT, MAX_STEPS = 1, 256  # any step can be a stop; the checks run up to 256 steps
EVERY = 8
CHECKPOINT = "checkpoint.pt"


def _fresh(seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    w_star = toy.target(gen)
    weights = toy.initial_weights(gen)
    x, y = toy.empty_replay()
    return dict(step=0, weights=weights, velocity=torch.zeros_like(weights), target=w_star, x=x, y=y,
                gen=gen.get_state())


def _step(state: dict, gen: torch.Generator) -> None:
    x, y = toy.env_step(gen, state["target"])  # [1, D], [1]
    state["x"], state["y"] = torch.cat([state["x"], x]), torch.cat([state["y"], y])  # replay [t + 1, ...]
    state["weights"], state["velocity"] = toy.online_step(state["weights"], state["velocity"], state["x"],
                                                          state["y"], gen)
    state["step"] += 1


def _save(path: Path, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a reader sees the old checkpoint or the new one


def _checkpoint(path: Path, state: dict, gen: torch.Generator) -> None:
    state["gen"] = gen.get_state()
    _save(path, state)


def run(out: str, total_steps: int, seed: int, resume: bool) -> None:
    """Train to ``total_steps`` in directory ``out``; ``resume``: continue from its checkpoint (if it has one)."""
    path = Path(out) / CHECKPOINT
    path.parent.mkdir(exist_ok=True)  # out's parent exists (spec/trainer.py)
    state = torch.load(path) if resume and path.is_file() else _fresh(seed)
    gen = torch.Generator()
    gen.set_state(state["gen"])
    start = state["step"]
    while state["step"] < total_steps:
        _step(state, gen)
        if state["step"] % EVERY == 0:
            _checkpoint(path, state, gen)
    if state["step"] > start:  # the last step, wherever it falls; a run that took none writes nothing
        _checkpoint(path, state, gen)


def fingerprint(out: str) -> dict:
    """The last checkpoint: step, weights, velocity, target, replay (x, y), generator state."""
    return torch.load(Path(out) / CHECKPOINT)


def steps(out: str) -> int:
    """The step count of the last checkpoint."""
    return int(torch.load(Path(out) / CHECKPOINT)["step"])
