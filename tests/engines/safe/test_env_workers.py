"""Env workers over shared memory (rlspec/envs/subproc_vector.py): the in-process vector's steps, episodes and
checkpoints bit for bit with 1 and 2 workers, with and without the calling process stepping the first slice; a
worker's (or the caller's slice's) exception or death raised as one line naming it; no shared-memory segment
left behind."""

from __future__ import annotations

import functools
import multiprocessing
from pathlib import Path

import pytest
import torch

from rlspec.engines.safe import loop as safe
from rlspec.engines.safe import parallel
from rlspec.envs import subproc_vector
from rlspec.envs.safe_vector import SafeVectorEnv
from rlspec.envs.safety_gym import make_vector
from rlspec.envs.subproc_vector import OUTPUTS, EnvWorkerError, SubprocSafeVectorEnv
from rlspec.envs.toy_safe import ToyGoal
from rlspec.runs.faults import outcome

SHM = Path("/dev/shm")


class Exploding(ToyGoal):
    """ToyGoal that raises on its 3rd step."""

    def step(self, action):
        if self.t == 2:
            raise RuntimeError("boom at step 3")
        return super().step(action)


def make_exploding(env_id, num_envs, seed, forced_cost, first_index):
    """make_vector's signature; the envs from global index 2 on explode (they run in a spawned worker)."""
    if first_index >= 2:
        return SafeVectorEnv(Exploding, num_envs, seed, first_index)
    return make_vector(env_id, num_envs, seed, forced_cost, first_index)


def make_exploding_first(env_id, num_envs, seed, forced_cost, first_index):
    """make_vector's signature; the slice starting at global index 0 explodes."""
    if first_index == 0:
        return SafeVectorEnv(Exploding, num_envs, seed, first_index)
    return make_vector(env_id, num_envs, seed, forced_cost, first_index)


def make_failing(env_id, num_envs, seed, forced_cost, first_index):
    raise ValueError(f"no env {env_id!r}")


def _actions(gen: torch.Generator, n: int) -> torch.Tensor:
    return 1.5 * torch.randn(n, 2, generator=gen)  # float32, beyond the bounds: clipping is exercised


def _assert_same_step(a, b):
    for f in OUTPUTS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and torch.equal(x, y), f


@pytest.mark.parametrize(("workers", "here"), [(1, False), (2, False), (1, True), (2, True)])
def test_workers_step_the_in_process_episodes_and_restore_them(workers, here):
    ref = make_vector("ToyGoal-v0", 5, 3, 0.25)
    vec = SubprocSafeVectorEnv("ToyGoal-v0", 5, 3, workers, 0.25, caller_steps=here)
    try:
        assert torch.equal(ref.reset(), vec.reset())
        gen = torch.Generator().manual_seed(0)
        for t in range(230):  # past ToyGoal's 100-step truncation: autoresets and finished episodes
            acts = _actions(gen, 5)
            _assert_same_step(ref.step(acts), vec.step(acts))
            if t == 120:
                state, ref_state = vec.state_dict(), ref.state_dict()
        finished = ref.pop_finished()
        assert len(finished) >= 10 and vec.pop_finished() == finished
        assert len(state["workers"]) == workers + here
        again = SubprocSafeVectorEnv("ToyGoal-v0", 5, 3, workers, 0.25, caller_steps=here)  # restore at t = 120
        try:
            again.load_state_dict(state)
            gen.manual_seed(1)
            ref.load_state_dict(ref_state)
            assert torch.equal(again.obs, ref.obs)
            for _ in range(100):
                acts = _actions(gen, 5)
                _assert_same_step(ref.step(acts), again.step(acts))
            assert again.pop_finished() == ref.pop_finished()
        finally:
            again.close()
    finally:
        vec.close()


@pytest.mark.parametrize("make", [lambda: make_vector("ToyGoal-v0", 3, 1),
                                  lambda: SubprocSafeVectorEnv("ToyGoal-v0", 3, 1, 2),
                                  lambda: SubprocSafeVectorEnv("ToyGoal-v0", 3, 1, 1, caller_steps=True)],
                         ids=["in-process", "workers", "workers+caller"])
def test_a_split_step_is_the_step_and_is_used_in_order(make):
    ref, vec = make_vector("ToyGoal-v0", 3, 1), make()
    try:
        ref.reset(), vec.reset()
        with pytest.raises(RuntimeError, match="step_wait: no step started"):
            vec.step_wait()
        acts = _actions(torch.Generator().manual_seed(2), 3)
        vec.step_async(acts)
        if isinstance(vec, SubprocSafeVectorEnv):  # the workers' answers to the step are not read as another's
            with pytest.raises(RuntimeError, match="pop during a step"):
                vec.pop_finished()
            with pytest.raises(ValueError, match="argument 'render' must be False"):
                vec.step_async(acts, render=True)
        _assert_same_step(ref.step(acts), vec.step_wait())
        with pytest.raises(RuntimeError, match="step_wait: no step started"):
            vec.step_wait()
        assert vec.state_dict()["workers" if isinstance(vec, SubprocSafeVectorEnv) else "t"]  # in step again
    finally:
        vec.close()


@pytest.mark.parametrize("here, make, who", [(False, make_exploding, "env worker 1 (envs 2..3)"),
                                             (True, make_exploding_first, "this process (envs 0..1)")],
                         ids=["worker", "caller"])
def test_a_slice_exception_is_one_line_naming_it_and_close_unlinks_the_block(here, make, who):
    """Envs 2..3 in worker 1 (or envs 0..1 in this process) explode at step 3; the other slice steps on."""
    vec = SubprocSafeVectorEnv("ToyGoal-v0", 4, 0, 2 - here, make_vector=make, caller_steps=here)
    name = vec.shm.name
    assert (SHM / name).exists()
    vec.reset()
    vec.step(torch.zeros(4, 2))
    vec.step(torch.zeros(4, 2))
    with pytest.raises(EnvWorkerError) as info:
        vec.step(torch.zeros(4, 2))
    msg = str(info.value)
    assert msg.startswith(f"{who} failed in step: RuntimeError: boom at step 3 (test_env_workers.py:") \
        and "\n" not in msg
    vec.pop_finished()  # the pipes are still in step: the other slice's worker answered and is read
    procs = vec.procs
    vec.close()
    assert not (SHM / name).exists() and all(not p.is_alive() for p in procs)
    vec.close()  # idempotent


def test_the_caller_cannot_take_every_env():
    with pytest.raises(ValueError, match=r"argument 'workers' must be in \[1, num_envs = 2 - 1 \(caller_steps\)\], "
                                         r"got 2"):
        SubprocSafeVectorEnv("ToyGoal-v0", 2, 0, 2, caller_steps=True)


def test_a_dead_worker_is_named_with_its_exit_code():
    vec = SubprocSafeVectorEnv("ToyGoal-v0", 3, 0, 2, first_index=6)
    name, proc = vec.shm.name, vec.procs[0]
    vec.reset()
    proc.kill()
    proc.join()
    with pytest.raises(EnvWorkerError, match=r"^env worker 0 \(envs 6\.\.7\) failed in step: the process exited "
                                             r"\(exit code -9\)$"):
        vec.step(torch.zeros(3, 2))
    vec.close()
    assert not (SHM / name).exists()


@pytest.mark.parametrize("here, who", [(False, r"env worker 0 \(envs 0\.\.1\)"),
                                       (True, r"this process \(envs 0\.\.0\)")])
def test_a_slice_that_cannot_make_its_envs_is_named_and_nothing_is_left(monkeypatch, here, who):
    """The segments this constructor creates are recorded (other tests, in other xdist workers, make their own in
    /dev/shm meanwhile): none is left, and no worker process."""
    made = []

    class Recorded(subproc_vector.shared_memory.SharedMemory):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.name)

    monkeypatch.setattr(subproc_vector.shared_memory, "SharedMemory", Recorded)
    before = set(multiprocessing.active_children())
    with pytest.raises(EnvWorkerError, match=rf"^{who} failed in make: ValueError: no env 'Nope-v0' "
                                             r"\(test_env_workers\.py:\d+ in make_failing\)$"):
        SubprocSafeVectorEnv("Nope-v0", 3, 0, 2, make_vector=make_failing, caller_steps=here)
    assert not [n for n in made if (SHM / n.lstrip("/")).exists()]
    assert not set(multiprocessing.active_children()) - before


def test_a_worker_exception_stops_the_run_with_exit_3_and_one_line(tmp_path, capsys):
    cfg = safe.build_config(overrides=["env_id=ToyGoal-v0", "total_steps=40", "steps_per_epoch=20", "num_envs=4"])
    make = lambda c, first: parallel.RunWorkers(c.env_id, c.num_envs, c.seed, 2, first_index=first,  # noqa: E731
                                                  make_vector=make_exploding)
    work = functools.partial(safe.run, cfg, tmp_path / "run", show_progress=False,
                             execution=safe.Execution(make_envs=make))
    assert outcome("rlspec train safe", work) == 3
    err = capsys.readouterr().err
    assert err == ("rlspec train safe: stopped: env worker 1 (envs 2..3) failed in step: RuntimeError: boom at "
                   f"step 3 (test_env_workers.py:{Exploding.step.__code__.co_firstlineno + 2} in step)\n")


def test_receive_returns_a_message_sent_while_it_polls_or_after_it_blocked():
    import os
    import threading

    here, there = multiprocessing.Pipe()
    for delay, message in ((0.0005, b"s"), (0.05, b"t")):  # within the polling budget; after it: the wait blocks
        sender = threading.Timer(delay, there.send_bytes, args=(message,))
        sender.start()
        assert subproc_vector.receive(here, spin_s=0.01) == message
        sender.join()
    there.close()
    with pytest.raises(EOFError):  # a closed peer ends the wait, as a plain recv_bytes does
        subproc_vector.receive(here, spin_s=0.001)
    cores = len(os.sched_getaffinity(0))
    for workers in (1, 2):  # polling only where this process and the workers fit on the cores
        vec = SubprocSafeVectorEnv("ToyGoal-v0", 2, 0, workers)
        try:
            assert vec.spin_s == (subproc_vector.SPIN_S if workers + 1 <= cores else 0.0)
        finally:
            vec.close()
