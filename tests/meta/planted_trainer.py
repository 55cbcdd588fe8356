"""Planted bugs for contract ``trainer``: the reference toy trainer's loop with one switch per known resume bug
(each entry turns exactly one on). Each names the clause that must catch it; ``spared`` clauses must pass."""

from __future__ import annotations

import types
from pathlib import Path

import torch
from planted import Planted

from rlspec.reference import trainer as ref


def _trainer(*, reseed=False, fresh_momentum=False, fixed_seed=None, global_rng=False, step_first=False,
             side_replay=False, overshoot=False, no_final_save=False, load_on_resume=False):
    """The reference loop, with switches: on resume draw from a generator seeded anew (its state not restored),
    restart the momentum at zero, ignore the seed, draw from torch's global generator (never seeded), take a
    step before checking the total, keep the replay in a file appended every step beside the checkpoint, loop
    while step <= total (one step past it), save every EVERY steps only (not at the last), load a checkpoint on
    every resume (none there: it raises)."""

    def run(out, total_steps, seed, resume):
        path = Path(out) / ref.CHECKPOINT
        path.parent.mkdir(parents=True, exist_ok=True)
        side = Path(out) / "replay.pt"
        resumed = resume and (load_on_resume or path.is_file())
        state = torch.load(path) if resumed else ref._fresh(seed if fixed_seed is None else fixed_seed)
        gen = torch.Generator()
        gen.set_state(state["gen"])
        if resumed and reseed:
            gen.manual_seed(seed + state["step"])
        if resumed and fresh_momentum:
            state["velocity"] = torch.zeros_like(state["velocity"])
        if resumed and side_replay:
            state["x"], state["y"] = torch.load(side)
        if global_rng:
            gen = torch.default_generator
        while state["step"] < total_steps + overshoot or (step_first and resumed and state["step"] == total_steps):
            ref._step(state, gen)
            resumed = False
            if side_replay:
                torch.save((state["x"], state["y"]), side)
            if state["step"] % ref.EVERY == 0 or (state["step"] >= total_steps and not no_final_save):
                state["gen"] = gen.get_state()
                ref._save(path, state)

    return types.SimpleNamespace(run=run, fingerprint=ref.fingerprint, steps=ref.steps, UNIT=ref.UNIT,
                                 MAX_STEPS=ref.MAX_STEPS)


ALL = ("TRAIN-1", "TRAIN-2", "TRAIN-3", "TRAIN-4", "TRAIN-5", "TRAIN-6")


def _spared(*failing: str) -> tuple[str, ...]:
    return tuple(c for c in ALL if c not in failing)


PLANTED_TRAINER = (
    Planted("trainer: the generator's state not restored on resume (reseeded)", "trainer", _trainer(reseed=True),
            "TRAIN-3", "stopped at", _spared("TRAIN-3", "TRAIN-4")),
    Planted("trainer: the optimizer's momentum not restored on resume", "trainer", _trainer(fresh_momentum=True),
            "TRAIN-3", "velocity", _spared("TRAIN-3", "TRAIN-4")),
    Planted("trainer: the seed ignored", "trainer", _trainer(fixed_seed=0), "TRAIN-2", "does not reach the run",
            _spared("TRAIN-2")),
    Planted("trainer: torch's global generator, never seeded", "trainer", _trainer(global_rng=True), "TRAIN-1",
            "same seed", ("TRAIN-5",)),
    Planted("trainer: a resumed run steps before it checks its total", "trainer", _trainer(step_first=True),
            "TRAIN-5", "resumed at", ("TRAIN-1", "TRAIN-2", "TRAIN-3")),
    Planted("trainer: the replay appended to its own file every step, the checkpoint every 8", "trainer",
            _trainer(side_replay=True), "TRAIN-4", "killed at", _spared("TRAIN-4")),
    Planted("trainer: the loop runs while step <= total (one step past it)", "trainer", _trainer(overshoot=True),
            "TRAIN-6", "saved its state at step", ("TRAIN-1", "TRAIN-2", "TRAIN-3", "TRAIN-5")),
    Planted("trainer: a checkpoint every 8 steps and none at the last", "trainer", _trainer(no_final_save=True),
            "TRAIN-6", "saved its state at step", ("TRAIN-1", "TRAIN-2", "TRAIN-3", "TRAIN-5")),
    Planted("trainer: a resume loads a checkpoint whether or not one was saved", "trainer",
            _trainer(load_on_resume=True), "TRAIN-3", "No such file", ("TRAIN-1", "TRAIN-2", "TRAIN-5", "TRAIN-6")),
)
