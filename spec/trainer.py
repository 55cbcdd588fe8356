"""Contract ``trainer``: a trainer's result depends on its seed alone, not on where it was stopped, killed or
resumed.

Sources: the reproducibility a resume promises (Stable-Baselines3 issues #1277 and #1016: a resumed run restarts
or regresses when the replay buffer, optimizer state or schedule is not saved; hill-a/stable-baselines#301 asks
for "a test that reloads and continues and gets the identical result"); the bit-for-bit resume rlspec's own
engines promise and test.

Interface
---------
    run(out, total_steps, seed, resume) -> None
        out          a directory path (it does not exist before a fresh run; the trainer creates it)
        total_steps  train until this step, in the trainer's own unit (env steps, updates, epochs · steps)
        seed         int
        resume       False: a fresh run in ``out``; True: continue the run ``out`` holds from what it saved
                     (from nothing, if it saved nothing yet) up to ``total_steps``
    fingerprint(out) -> mapping
        what the run saved and a resumed run depends on (parameters, optimizer state, RNG states, replay,
        counters): tensors, numpy arrays, numbers, strings, bytes or None, nested in mappings, lists, tuples
    steps(out) -> int
        optional: the step (in total_steps' unit) the state the run saved is at (TRAIN-6 needs it)
    UNIT, MAX_STEPS  optional ints (default 1 and 4·UNIT): the checks stop at multiples of UNIT and run up to
                     MAX_STEPS (a few hundred steps of a toy trainer, a few epochs of an engine)

Fingerprints are compared bit for bit (rlspec.contracts.trainer.same_leaf): same machine, same thread count,
same result. TRAIN-4 forks (POSIX): the straight run, the killed run and the resume each run in a child with
one torch thread, and each kill comes at a drawn fraction of the straight run's own running time.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from rlspec.contracts.trainer import differences, flatten
from rlspec.spec import forked
from rlspec.spec.core import Contract, Property, by_category, fail

CLAUSES = {
    "TRAIN-1": "same seed, same run: two straight runs to N from empty directories give the same fingerprint, bit for "
               "bit (and the fingerprint holds at least one tensor or array)",
    "TRAIN-2": "the seed is used: straight runs to N with two different seeds give different fingerprints",
    "TRAIN-3": "a stop changes nothing: a run to k < N, then resume to N, gives the straight run's fingerprint, and "
               "so does a resume to N of a run that saved nothing yet (its directory absent)",
    "TRAIN-4": "a kill changes nothing: a run to N killed by SIGKILL at drawn moments (three times, resumed after "
               "each from what it had saved, or from nothing), then resumed to N, gives the straight run's "
               "fingerprint",
    "TRAIN-5": "a finished run stays finished: resuming a run that reached N to N again leaves its fingerprint as "
               "it was",
    "TRAIN-6": "the saved state is at the total: after straight runs to N and to k, steps(out) reads N and k (a loop "
               "that steps past its total, or leaves its last step unsaved, is as reproducible as a right one and "
               "fails only here)",
}
CATEGORIES = by_category(maths=tuple(CLAUSES))
_SB3 = ("Stable-Baselines3's PPO.save keeps the policy and its optimizer, not the env's state, the last observation "
        "or the generators, so a loaded model learns from other samples than the straight run (and a kill during its "
        "in-place save can leave a file PPO.load refuses). ")
RATIONALE = {
    "TRAIN-3": _SB3 + "The clause asks what a resume promises: SB3's users report resumed runs that restart or "
                      "regress (its issues #1277, #1016) and ask for a test that reloads, continues and gets the "
                      "identical result (hill-a/stable-baselines#301); rlspec's three engines pass it.",
    "TRAIN-4": _SB3 + "The clause asks it of a killed run because a preemptible machine kills without warning: only "
                      "what was saved, atomically, can carry the run on; rlspec's three engines pass it.",
}
INTERFACE = ("run", "fingerprint")
"""
run(out: str, total_steps: int, seed: int, resume: bool) -> None
fingerprint(out: str) -> mapping of tensors / arrays / numbers (nested)
"""


# --------------------------------------------------------------------------------------------------
# Cases: sizes as fractions of the implementation's own range
# --------------------------------------------------------------------------------------------------
KILLS = 3  # kills per case, each in the run resumed after the one before (a preemptible machine)


@st.composite
def cases(draw):
    """Where N falls in [2·UNIT, MAX_STEPS], where the stop (k) and the kills fall in the run, two seeds."""
    seed = draw(st.integers(0, 2**16 - 1))
    return dict(total=draw(st.floats(0.0, 1.0)), stop=draw(st.floats(0.0, 1.0)),
                kills=draw(st.tuples(*[st.floats(0.02, 0.6)] * KILLS)),
                seed=seed, other_seed=draw(st.integers(0, 2**16 - 1).filter(lambda s: s != seed)))


EXAMPLES = (dict(total=0.5, stop=0.37, kills=(0.5, 0.25, 0.4), seed=0, other_seed=1),)


def _sizes(impl: Any, total: float, stop: float) -> tuple[int, int]:
    """(N, k): multiples of UNIT with UNIT <= k < N <= MAX_STEPS."""
    unit = int(getattr(impl, "UNIT", 1))
    units = max(2, int(getattr(impl, "MAX_STEPS", 4 * unit)) // unit)
    n = 2 + round(total * (units - 2))
    return n * unit, (1 + min(n - 2, int(stop * (n - 1)))) * unit


def _inputs(impl: Any, case: dict) -> dict:
    n, k = _sizes(impl, case["total"], case["stop"])
    return dict(total_steps=n, stop_at=k, seed=case["seed"])


def _fingerprint(clause: str, impl: Any, out: Path) -> dict[str, Any]:
    try:
        return flatten(impl.fingerprint(str(out)))
    except TypeError as err:
        fail(clause, str(err))


def _straight(clause: str, impl: Any, root: Path, name: str, total: int, seed: int) -> dict[str, Any]:
    impl.run(str(root / name), total, seed, False)
    return _fingerprint(clause, impl, root / name)


def _same(clause: str, what: str, got: dict, want: dict, inputs: dict) -> None:
    diff = differences(got, want)
    if diff:
        fail(clause, f"{what}: the fingerprint differs from the straight run's in {len(diff)} of "
                     f"{len(set(got) | set(want))} entries ({', '.join(diff[:5])}{', ...' if len(diff) > 5 else ''})",
             **inputs)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_same_seed(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        first = _straight("TRAIN-1", impl, Path(tmp), "a", inputs["total_steps"], case["seed"])
        second = _straight("TRAIN-1", impl, Path(tmp), "b", inputs["total_steps"], case["seed"])
    if not any(hasattr(v, "shape") for v in first.values()):
        fail("TRAIN-1", f"the fingerprint holds no tensor or array (entries {sorted(first)[:8]}): nothing a run "
                        "learned can be compared", **inputs)
    _same("TRAIN-1", "a second straight run with the same seed", second, first, inputs)


def check_seed_used(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        first = _straight("TRAIN-2", impl, Path(tmp), "a", inputs["total_steps"], case["seed"])
        other = _straight("TRAIN-2", impl, Path(tmp), "b", inputs["total_steps"], case["other_seed"])
    if not differences(first, other):
        fail("TRAIN-2", f"seeds {case['seed']} and {case['other_seed']} gave the same fingerprint in all "
                        f"{len(first)} entries: the seed does not reach the run", **inputs)


def check_stop_resume(impl, **case):
    inputs = _inputs(impl, case)
    n, k, seed = inputs["total_steps"], inputs["stop_at"], case["seed"]
    with tempfile.TemporaryDirectory() as tmp:
        want = _straight("TRAIN-3", impl, Path(tmp), "straight", n, seed)
        impl.run(str(Path(tmp) / "stopped"), k, seed, False)
        impl.run(str(Path(tmp) / "stopped"), n, seed, True)
        got = _fingerprint("TRAIN-3", impl, Path(tmp) / "stopped")
        _same("TRAIN-3", f"stopped at {k}, resumed to {n}", got, want, inputs)
        impl.run(str(Path(tmp) / "nothing"), n, seed, True)
        got = _fingerprint("TRAIN-3", impl, Path(tmp) / "nothing")
    _same("TRAIN-3", f"resumed to {n} with nothing saved", got, want, inputs)


def _in_child(clause: str, impl: Any, out: Path, total: int, seed: int, resume: bool, what: str,
              inputs: dict) -> float:
    """Seconds the run took in a forked child; a failure naming ``what`` run it was if it raised or hung."""
    status, value = forked.fork(lambda: impl.run(str(out), total, seed, resume)).result()
    if status != "ok":
        fail(clause, f"{what} {'raised' if status == 'error' else status}: {value}", **inputs)
    return value


def _killed(impl: Any, out: Path, total: int, seed: int, resume: bool, after: float) -> tuple[str, Any]:
    """Run in a forked child and SIGKILL it ``after`` seconds into its run: forked.Child.result's (status, value)."""
    child = forked.fork(lambda: impl.run(str(out), total, seed, resume))
    child.started()
    time.sleep(after)
    child.kill()
    return child.result()


def check_kill_resume(impl, **case):
    inputs = _inputs(impl, case)
    n, seed = inputs["total_steps"], case["seed"]
    with tempfile.TemporaryDirectory() as tmp:
        took = _in_child("TRAIN-4", impl, Path(tmp) / "straight", n, seed, False, "the straight run", inputs)
        want = _fingerprint("TRAIN-4", impl, Path(tmp) / "straight")
        moments = []
        for i, fraction in enumerate(case["kills"]):
            status, error = _killed(impl, Path(tmp) / "killed", n, seed, i > 0, fraction * took)
            if status in ("error", "hung"):
                fail("TRAIN-4", f"killed at {', '.join(moments) or 'no moment yet'}: the {'resumed' if i else 'fresh'} "
                                f"run {'raised' if status == 'error' else status}: {error}", **inputs)
            moments.append(f"{fraction:.2f}" + ("" if status == "killed" else " (finished before)"))
        moment = f"killed at {', '.join(moments)} of the straight run's {took:.3f} s, each time resumed"
        _in_child("TRAIN-4", impl, Path(tmp) / "killed", n, seed, True, f"{moment}: the last resume to {n}", inputs)
        got = _fingerprint("TRAIN-4", impl, Path(tmp) / "killed")
    _same("TRAIN-4", f"{moment}, finished at {n}", got, want, inputs)


def check_finished_stays(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        want = _straight("TRAIN-5", impl, Path(tmp), "run", inputs["total_steps"], case["seed"])
        impl.run(str(Path(tmp) / "run"), inputs["total_steps"], case["seed"], True)
        got = _fingerprint("TRAIN-5", impl, Path(tmp) / "run")
    _same("TRAIN-5", f"resumed at {inputs['total_steps']} to {inputs['total_steps']}", got, want, inputs)


def check_saved_at_total(impl, **case):
    inputs = _inputs(impl, case)
    with tempfile.TemporaryDirectory() as tmp:
        for name, total in (("straight", inputs["total_steps"]), ("short", inputs["stop_at"])):
            impl.run(str(Path(tmp) / name), total, case["seed"], False)
            saved = impl.steps(str(Path(tmp) / name))
            if saved != total:
                fail("TRAIN-6", f"a straight run to {total} saved its state at step {saved!r}", **inputs)


# a trainer's checks run whole trainings: the pinned example and one drawn case each
PROPERTIES = tuple(Property(clause, check, cases(), EXAMPLES, requires, max_examples=1)
                   for clause, check, requires in (
    ("TRAIN-1", check_same_seed, INTERFACE), ("TRAIN-2", check_seed_used, INTERFACE),
    ("TRAIN-3", check_stop_resume, INTERFACE), ("TRAIN-4", check_kill_resume, INTERFACE),
    ("TRAIN-5", check_finished_stays, INTERFACE), ("TRAIN-6", check_saved_at_total, ("run", "steps"))))

CONTRACT = Contract("trainer", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
