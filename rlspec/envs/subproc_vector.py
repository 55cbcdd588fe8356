"""``SubprocSafeVectorEnv``: SafeVectorEnv's interface and episodes with the envs stepped in worker processes.

The ``num_envs`` envs are split into contiguous slices, one ``SafeVectorEnv`` per worker process (spawned);
with ``caller_steps`` the calling process steps the first slice itself while the workers step theirs (on two
cores: one worker and the caller, no core idle while the caller waits and one process fewer to wake).
Each slice keeps its envs' global indices (``first_index``), so the episodes (seeds), the observations and
the order of finished episodes are exactly those of one ``SafeVectorEnv(num_envs)``: the fast engine
collects the same data as the reference engine for the same actions.

Transport. The actions and every per-step output (obs, final_obs, reward, cost, terminated, truncated) live
in one shared-memory block of [num_envs, ...] arrays; worker w reads and writes its rows only. A vector step
is one byte to every worker (all sent before any answer is read, so the slices step in parallel) and one
byte back: nothing is pickled on the hot path. ``step_async``/``step_wait`` split a step, so the caller
works (the engines' collect: log-probabilities, the previous step's row) while the workers step. Rare
commands (reset, finished episodes, checkpoints, the errors) travel pickled over the same pipe. A waiting
side polls its pipe for up to SPIN_S before it blocks, where the processes fit on the cores (``receive``;
measured on 2 cores, 1 worker + the caller, SafetyPointGoal1-v0: +2.5% env steps/s at 4 envs, +7.3% at 8;
benchmarks/safe/results/safe_throughput.json's blocking arm). A worker's
exception, or its death, is raised here as ``EnvWorkerError`` (the fast engine's subclass stops a run with
exit 3): one line naming the worker, its envs, the command and the cause. ``close()`` stops the workers and
unlinks the block.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import pickle
import signal
import time
import traceback
from multiprocessing import shared_memory
from typing import Callable

import numpy as np
import torch

from rlspec.envs.safe_vector import VectorStep

SPIN_S = 0.002  # how long a waiting side polls its pipe before it blocks (``receive``): ~one vector step
STEP, OK = b"s", b"."  # the hot path's two one-byte messages (a pickle never equals either)
OUTPUTS = ("obs", "final_obs", "reward", "cost", "terminated", "truncated")  # VectorStep's fields, no frames


class EnvWorkerError(RuntimeError):
    """An env worker raised or died; the message is its one-line cause."""


def _layout(num_envs: int, obs_dim: int, act_dim: int) -> tuple[dict[str, tuple], int]:
    """({field: (dtype, shape, byte offset)}, the block's size in bytes); every field 8-byte aligned."""
    fields = {"act": (np.float64, (num_envs, act_dim)), "obs": (np.float32, (num_envs, obs_dim)),
              "final_obs": (np.float32, (num_envs, obs_dim)), "reward": (np.float32, (num_envs,)),
              "cost": (np.float32, (num_envs,)), "terminated": (np.bool_, (num_envs,)),
              "truncated": (np.bool_, (num_envs,))}
    out, offset = {}, 0
    for name, (dtype, shape) in fields.items():
        out[name] = (np.dtype(dtype), shape, offset)
        offset += -(-np.dtype(dtype).itemsize * int(np.prod(shape)) // 8) * 8
    return out, offset


def _views(shm: shared_memory.SharedMemory, layout: dict) -> dict[str, np.ndarray]:
    """Numpy arrays over the shared block, one per field of ``layout``."""
    return {name: np.ndarray(shape, dtype, shm.buf, offset) for name, (dtype, shape, offset) in layout.items()}


def describe(err: BaseException) -> str:
    """One line: ``Type: message (file:line in function)`` of the innermost frame."""
    where = ""
    frames = traceback.extract_tb(err.__traceback__)
    if frames:
        f = frames[-1]
        where = f" ({f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name})"
    return f"{type(err).__name__}: {' '.join(str(err).split())}{where}"


class _Worker:
    """The worker side: a SafeVectorEnv over this slice, its rows of the shared block once attached."""

    def __init__(self, envs):
        self.envs, self.shm, self.view = envs, None, None

    def attach(self, arg) -> None:
        name, num_envs, start = arg
        self.shm = shared_memory.SharedMemory(name=name)
        self.use_rows(_views(self.shm, _layout(num_envs, self.envs.obs_dim, self.envs.act_dim)[0]), start)

    def use_rows(self, full: dict[str, np.ndarray], start: int) -> None:
        self.view = {k: v[start:start + self.envs.num_envs] for k, v in full.items()}  # this slice's rows

    def publish_obs(self, obs: torch.Tensor) -> None:
        self.view["obs"][:] = obs.numpy()

    def step(self) -> None:
        out = self.envs.step(torch.from_numpy(self.view["act"].copy()))
        for name in OUTPUTS:
            self.view[name][:] = getattr(out, name).numpy()

    def handle(self, cmd: str, arg):
        if cmd == "step":
            return self.step()
        if cmd == "reset":
            return self.publish_obs(self.envs.reset())
        if cmd == "load":
            self.envs.load_state_dict(arg)
            return self.publish_obs(self.envs.obs)
        if cmd == "pop":
            return self.envs.pop_finished()
        if cmd == "state":
            return self.envs.state_dict()
        if cmd == "attach":
            return self.attach(arg)
        raise ValueError(f"unknown command {cmd!r}")

    def close(self) -> None:
        self.envs.close()
        self.view = None
        if self.shm is not None:
            self.shm.close()


def receive(conn, spin_s: float) -> bytes:
    """The next message on ``conn``, polled for up to ``spin_s`` seconds before blocking: a process that keeps
    polling keeps its core, so the message finds it running; one that blocks must be woken by the scheduler
    first, which on a virtual machine's idle vCPU takes ~0.1–0.3 ms, a real share of a 1–3 ms vector step."""
    deadline = time.perf_counter() + spin_s
    while not conn.poll(0) and time.perf_counter() < deadline:
        pass
    return conn.recv_bytes()


def _worker(conn, make: Callable[[], object], spin_s: float = 0.0) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle; it closes us
    torch.set_num_threads(1)
    try:
        worker = _Worker(make())
    except Exception as err:  # noqa: BLE001 - any failure is reported, as one line
        conn.send(("error", describe(err)))
        return
    conn.send(("ok", (worker.envs.obs_dim, worker.envs.act_dim)))
    try:
        while True:
            msg = receive(conn, spin_s)
            cmd, arg = ("step", None) if msg == STEP else pickle.loads(msg)
            if cmd == "close":
                break
            try:
                result = worker.handle(cmd, arg)
            except Exception as err:  # noqa: BLE001
                conn.send(("error", describe(err)))
                continue
            conn.send_bytes(OK) if cmd == "step" else conn.send(("ok", result))
    except (EOFError, ConnectionError):  # the main process is gone (it ended, or was killed mid-message)
        pass
    finally:
        worker.close()
        conn.close()


class SubprocSafeVectorEnv:
    error: type[EnvWorkerError] = EnvWorkerError  # what a worker's failure raises (an engine may narrow it)

    def __init__(self, env_id: str, num_envs: int, seed: int, workers: int, forced_cost: float = 0.0,
                 first_index: int = 0, make_vector: Callable | None = None, caller_steps: bool = False,
                 spin_s: float | None = None):
        """``make_vector``: (env_id, num_envs, seed, forced_cost, first_index) -> SafeVectorEnv, run in each
        worker (picklable; default rlspec.envs.safety_gym.make_vector); ``caller_steps``: this process steps
        the first of workers + 1 slices; ``spin_s``: how long a waiting side polls before it blocks (``receive``;
        None: SPIN_S where this process and the workers fit on the usable cores, else 0 — a poller on a shared
        core takes the time of the process it waits for)."""
        if not 1 <= workers <= num_envs - caller_steps:
            raise ValueError(f"SubprocSafeVectorEnv: argument 'workers' must be in [1, num_envs = {num_envs}"
                             f"{' - 1 (caller_steps)' if caller_steps else ''}], got {workers}")
        if make_vector is None:
            from rlspec.envs.safety_gym import make_vector
        if spin_s is None:
            spin_s = SPIN_S if workers + 1 <= len(os.sched_getaffinity(0)) else 0.0
        self.num_envs, self.seed, self.first_index, self.spin_s = num_envs, seed, first_index, spin_s
        parts = workers + caller_steps
        sizes = [num_envs // parts + (p < num_envs % parts) for p in range(parts)]  # contiguous slices
        starts = [sum(sizes[:p]) for p in range(parts)]  # local row of each slice's first env
        self.sizes, self.starts = sizes[caller_steps:], starts[caller_steps:]  # the workers' slices
        ctx = mp.get_context("spawn")
        self.conns, self.procs, self.shm, self.view, self.here = [], [], None, None, None
        self._obs: torch.Tensor | None = None
        self._stepping = False  # a step_async awaits its step_wait
        for size, start in zip(self.sizes, self.starts):
            parent, child = ctx.Pipe()
            make = functools.partial(make_vector, env_id, size, seed, forced_cost, first_index + start)
            proc = ctx.Process(target=_worker, args=(child, make, spin_s), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        try:
            if caller_steps:  # made while the workers make theirs
                self.here = _Worker(self._here("make", make_vector, env_id, sizes[0], seed, forced_cost, first_index))
            self.obs_dim, self.act_dim = self._gather("make")[0]
            layout, size = _layout(num_envs, self.obs_dim, self.act_dim)
            self.shm = shared_memory.SharedMemory(create=True, size=size)
            self.view = _views(self.shm, layout)
            if self.here is not None:
                self.here.use_rows(self.view, 0)
            for w in range(len(self.conns)):
                self._send(w, "attach", pickle.dumps(("attach", (self.shm.name, num_envs, self.starts[w]))))
            self._gather("attach")
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------------------------- the pipe
    def _fail(self, w: int, cmd: str, cause: str) -> EnvWorkerError:
        """The error for worker ``w`` failing ``cmd`` with ``cause``, naming its global env indices."""
        first = self.first_index + self.starts[w]
        return self.error(f"env worker {w} (envs {first}..{first + self.sizes[w] - 1}) failed in {cmd}: {cause}")

    def _here(self, cmd: str, fn: Callable, *args):
        """fn(*args) for this process's slice; its exception as the error naming the slice (one line)."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - any failure is reported, as one line
            last = self.first_index + self.starts[0] - 1  # the workers' slices start after this one
            raise self.error(f"this process (envs {self.first_index}..{last}) failed in {cmd}: {describe(err)}") \
                from err

    def _gather(self, cmd: str) -> list:
        """Every worker's answer to ``cmd`` (all read, so the pipes stay in step); the first failure raised."""
        results, failures = [], []
        for w, (conn, proc) in enumerate(zip(self.conns, self.procs)):
            try:
                msg = receive(conn, self.spin_s if cmd == "step" else 0.0)
            except (EOFError, OSError):
                proc.join(timeout=5)
                failures.append(self._fail(w, cmd, f"the process exited (exit code {proc.exitcode})"))
                continue
            tag, value = ("ok", None) if msg == OK else pickle.loads(msg)
            if tag == "error":
                failures.append(self._fail(w, cmd, value))
            results.append(value)
        if failures:
            raise failures[0]
        return results

    def _all(self, cmd: str, args: list | None = None) -> list:
        """Send ``cmd`` (with slice p's ``args[p]``) to every worker, run it on this process's slice meanwhile,
        then gather the answers: one per slice, in slice order. Every pipe is read before a failure is raised."""
        if self._stepping:  # the workers' answers to the step would be read as this command's
            raise RuntimeError(f"SubprocSafeVectorEnv: {cmd} during a step (call step_wait first)")
        mine = [] if self.here is None else [None if args is None else args[0]]
        for w in range(len(self.conns)):
            self._send(w, cmd, pickle.dumps((cmd, None if args is None else args[len(mine) + w])))
        return self._with_here(cmd, lambda: self.here.handle(cmd, mine[0]))

    def _with_here(self, cmd: str, run_here: Callable) -> list:
        """[run_here()] (if this process steps a slice) + the workers' answers, all read before raising."""
        try:
            mine = [] if self.here is None else [self._here(cmd, run_here)]
        except EnvWorkerError:
            with contextlib.suppress(EnvWorkerError):  # a worker failing too: this slice's failure is the one told
                self._gather(cmd)
            raise
        return mine + self._gather(cmd)

    def _send(self, w: int, cmd: str, msg: bytes) -> None:
        try:
            self.conns[w].send_bytes(msg)
        except OSError:  # BrokenPipeError: the worker is gone
            self.procs[w].join(timeout=5)
            raise self._fail(w, cmd, f"the process exited (exit code {self.procs[w].exitcode})") from None

    # ---------------------------------------------------------------------------------- the interface
    @property
    def obs(self) -> torch.Tensor:
        if self._obs is None:
            raise RuntimeError("SubprocSafeVectorEnv: call reset() or load_state_dict() first")
        return self._obs

    def _read_obs(self) -> torch.Tensor:
        self._obs = torch.from_numpy(self.view["obs"].copy())  # [N, D], a copy: the next step overwrites it
        return self._obs

    def reset(self) -> torch.Tensor:
        self._all("reset")
        return self._read_obs()

    def step(self, actions: torch.Tensor) -> VectorStep:
        """actions [N, A] -> one step of every env (SafeVectorEnv.step without frames)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: torch.Tensor, render: bool = False) -> None:
        """Start a step: the workers step their envs while the caller works, until ``step_wait``."""
        if render:
            raise ValueError("SubprocSafeVectorEnv.step_async: argument 'render' must be False (frames come from "
                             "in-process envs, SafeVectorEnv), got True")
        self.view["act"][:] = actions.detach().to("cpu", torch.float64).numpy()  # exact: float32 ⊂ float64
        for w in range(len(self.conns)):
            self._send(w, "step", STEP)
        self._stepping = True

    def step_wait(self) -> VectorStep:
        """The step that ``step_async`` started: every worker's answer, then copies of the outputs."""
        if not self._stepping:
            raise RuntimeError("SubprocSafeVectorEnv.step_wait: no step started (call step_async first)")
        self._stepping = False
        self._with_here("step", lambda: self.here.step())
        out = VectorStep(**{f: torch.from_numpy(self.view[f].copy()) for f in OUTPUTS})
        self._obs = out.obs
        return out

    def pop_finished(self) -> list[tuple]:
        """Finished episodes in SafeVectorEnv's order: by step, then by global env index."""
        return sorted((e for part in self._all("pop") for e in part), key=lambda e: (e[3], e[4]))

    def state_dict(self) -> dict:
        return {"workers": self._all("state")}

    def load_state_dict(self, state: dict) -> None:
        parts = len(self.conns) + (self.here is not None)
        if len(state["workers"]) != parts:
            raise ValueError(f"SubprocSafeVectorEnv.load_state_dict: state has {len(state['workers'])} slices, "
                             f"this vector has {parts}")
        self._all("load", state["workers"])
        self._read_obs()

    def close(self) -> None:
        """Stop the workers (those that do not exit in 10 s are killed) and unlink the shared block; idempotent."""
        for conn in self.conns:
            try:
                conn.send(("close", None))
            except OSError:  # already gone
                pass
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.conns:
            conn.close()
        if self.here is not None:
            self.here.close()
        self.conns, self.procs, self.view, self.here = [], [], None, None
        if self.shm is not None:
            self.shm.close()
            self.shm.unlink()
            self.shm = None
