"""`rlspec check` runs every contract in a supervised worker process: the implementation under test can end,
crash or hang its process, and that becomes a reported outcome of the clause it was running, never a silent
exit of the checker.

A worker (a spawned interpreter) checks one clause at a time and sends each clause's cell to the parent as it is
done, with a heartbeat before every example. The parent keeps every cell it received; when a worker

* raises ``SystemExit`` or ``KeyboardInterrupt`` out of the implementation (``sys.exit(0)`` in a function):
  the worker itself reports the clause as CRASH and goes on;
* dies (``os._exit``, a segfault, the out-of-memory killer): the clause it was running is CRASH with the exit
  status or signal, and a fresh worker goes on with the clauses after it;
* sends nothing for ``deadline`` seconds (an endless loop, a deadlock): it is killed, the clause is HANG, and a
  fresh worker goes on;

and an implementation that ends the process while it is imported FAILED TO LOAD with the cause. Ctrl-C and
SIGTERM stop every worker; the tables of the contracts that finished are printed and written (exit 130).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import sys
import time
import traceback
from typing import Any, Callable

DEADLINE_S = 300.0  # per example, by default (`rlspec check --timeout`)
POLL_S = 0.2
STARTUP_S = 60.0  # a fresh worker's spawn and imports (torch, the kit) count against no example's deadline


class CheckerError(RuntimeError):
    """An exception in rlspec's own code inside a worker (its traceback as the message): a bug to report."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM while contracts were being checked; ``tables`` holds those that finished."""

    def __init__(self, tables: list[dict], signum: int):
        super().__init__(signal.Signals(signum).name)
        self.tables, self.signum = tables, signum


@dataclasses.dataclass
class Job:
    """One contract to check, and where a fresh worker takes it up after the last one ended."""
    task: Any  # rlspec.checker.Task
    index: int
    total: int
    target: int = 0  # the implementation (index into task.targets) to start from
    done: set[str] = dataclasses.field(default_factory=set)  # its clauses already reported
    entries: dict[int, dict] = dataclasses.field(default_factory=dict)  # implementation index -> entry so far
    rules: list[dict] | None = None  # what the --unsupported rules matched, once finished
    clause: str | None = None  # the clause being checked now
    loading: bool = False  # the implementation being imported now
    started: float | None = None  # when a worker first took it up (time.monotonic)


def choose_triton(mode: str) -> None:
    """The application's choice of how Triton backends run (fast/triton_mode.py); before any is imported.
    auto: keep $TRITON_INTERPRET if set, else interpret exactly when there is no CUDA device."""
    import torch

    if mode == "interpret" or (mode == "auto" and "TRITON_INTERPRET" not in os.environ
                               and not torch.cuda.is_available()):
        os.environ["TRITON_INTERPRET"] = "1"
    elif mode == "compiled":
        os.environ["TRITON_INTERPRET"] = "0"


def worker_main(conn, triton: str, threads: int, run_clause: Callable, resolve: Callable,
                forward: tuple[type[BaseException], ...]) -> None:
    """A worker: takes jobs from ``conn`` until it gets None; see the module docstring for the messages."""
    # torch.compile compiles in this process, not in a pool of its own that would outlive a stopped worker
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    choose_triton(triton)
    torch.set_num_threads(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C ends
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the parent's stop: exit cleanly, releasing what it holds
    sys.unraisablehook = _exit_if_stopped
    while (job := conn.recv()) is not None:
        try:
            run_job(conn, job, run_clause, resolve)
        except forward as err:  # the user's mistake (an --unsupported condition that cannot be evaluated)
            conn.send(("error", err))
        except Exception:  # noqa: BLE001 - a bug of the checker itself, not of the implementation under test
            conn.send(("error", CheckerError(traceback.format_exc())))


def _exit_if_stopped(unraisable) -> None:
    """A worker's sys.unraisablehook: the parent's SIGTERM raised SystemExit where Python cannot pass it on (a
    gc callback, a __del__): exit now, instead of printing "Exception ignored" with a traceback and going on."""
    if isinstance(unraisable.exc_value, SystemExit):
        os._exit(0)
    sys.__unraisablehook__(unraisable)


def run_job(conn, job: Job, run_clause: Callable, resolve: Callable) -> None:
    task = job.task
    for t, (label, target, registered) in enumerate(task.targets):
        if t < job.target:
            continue
        conn.send(("loading", t))
        resolved = resolve(label, target, registered)
        conn.send(("loaded", t, resolved.label, resolved.error, resolved.unavailable))
        if resolved.error or resolved.unavailable:
            continue
        for clause in task.clauses:
            if t == job.target and clause in job.done:
                continue
            conn.send(("clause", t, clause))
            conn.send(("cell", t, clause, run_clause(task, resolved, clause, lambda: conn.send(("beat",)))))
    conn.send(("finished", task.unsupported.summary() if task.unsupported is not None else None))


def supervise(jobs: list[Job], workers: int, triton: str, threads: int, deadline: float, run_clause: Callable,
              resolve: Callable, make_table: Callable[[Job], dict], crash_cell: Callable[..., dict],
              on_table: Callable[[dict], None], on_start: Callable[[Job], None],
              forward: tuple[type[BaseException], ...] = ()) -> list[dict]:
    """Every job's table, in order (each handed to ``on_table`` once it and those before it are done; ``on_start``
    when a worker first takes a job up). Up to ``workers`` worker processes, each taking one job after another;
    one that ended is replaced. An exception of a ``forward`` type in a worker stops every worker and is raised
    here."""
    context = multiprocessing.get_context("spawn")
    pending, idle, busy, finished = list(jobs), [], {}, {}
    tables: list[dict] = []

    def start():
        parent, child = context.Pipe()
        proc = context.Process(target=worker_main, args=(child, triton, threads, run_clause, resolve, forward),
                               daemon=True)
        proc.start()
        child.close()
        return proc, parent

    previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    everyone = lambda: (*busy, *(p for p, _ in idle))  # noqa: E731
    try:
        while pending or busy:
            while pending and (idle or len(busy) < workers):
                grace = 0.0 if idle else STARTUP_S
                proc, conn = idle.pop() if idle else start()
                job = pending.pop(0)
                if job.started is None:
                    job.started = time.monotonic()
                    on_start(job)
                conn.send(job)
                busy[proc] = [job, conn, time.monotonic() + grace]
            for proc, state in list(busy.items()):
                job, conn, _ = state
                if _drain(conn, job, state, finished):
                    del busy[proc]
                    idle.append((proc, conn))
                elif not proc.is_alive() or time.monotonic() - state[2] > deadline:
                    hung = proc.is_alive()
                    _stop(proc)
                    _record_end(job, hung, proc.exitcode, deadline, crash_cell)
                    del busy[proc]
                    pending.insert(0, job)  # a fresh worker goes on after the clause that ended this one
            while len(tables) < len(jobs) and jobs[len(tables)].index in finished:
                tables.append(make_table(jobs[len(tables)]))
                on_table(tables[-1])
            time.sleep(POLL_S if busy else 0)
        for proc, conn in idle:
            conn.send(None)
            proc.join(timeout=10)
    except (*forward, CheckerError):
        for proc in everyone():
            _stop(proc)
        raise
    except _Signal as sig:
        for proc in everyone():
            _stop(proc)
        for job in jobs[len(tables):]:  # finished after one still running: shown now
            if job.index in finished:
                tables.append(make_table(job))
                on_table(tables[-1])
        raise Interrupted(tables, sig.signum) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return tables


def _stop(proc) -> None:
    """End a worker: SIGTERM (it exits cleanly), SIGKILL if it has not after 2 s (stuck in native code)."""
    proc.terminate()
    proc.join(2)
    if proc.is_alive():
        proc.kill()
        proc.join()


class _Signal(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupt(signum, frame):
    raise _Signal(signum)


def _drain(conn, job: Job, state: list, finished: dict) -> bool:
    """Apply the worker's messages to ``job``; True once it reported the job finished."""
    try:
        while conn.poll():
            message = conn.recv()
            state[2] = time.monotonic()
            kind = message[0]
            if kind == "loading":
                job.target, job.loading, job.clause = message[1], True, None
                job.done = set() if job.target not in job.entries else job.done
            elif kind == "loaded":
                _, t, label, error, unavailable = message
                job.loading = False
                status = "error" if error else "unavailable" if unavailable else "checked"
                job.entries.setdefault(t, dict(label=label, target=job.task.targets[t][1], status=status,
                                               reason=error or unavailable or "", clauses={}))
            elif kind == "clause":
                job.clause = message[2]
            elif kind == "cell":
                _, t, clause, cell = message
                job.entries[t]["clauses"][clause] = cell
                job.done.add(clause)
                job.clause = None
            elif kind == "error":
                raise message[1]
            elif kind == "finished":
                job.rules = message[1]
                finished[job.index] = job
                return True
    except (EOFError, OSError):  # the worker is gone: the caller sees it dead
        return False
    return False


def _record_end(job: Job, hung: bool, exitcode: int | None, deadline: float, crash_cell: Callable) -> None:
    """The outcome of the clause (or the import) the worker was in when it ended."""
    why = (f"no progress for {deadline:g} s (the per-example deadline, --timeout): an endless loop or a deadlock"
           if hung else f"the implementation ended the checking process ({_exit_reason(exitcode)})")
    if job.target >= len(job.task.targets):  # it ended after its last target, before saying so: nothing to blame
        return
    label, target, _ = job.task.targets[job.target]
    if job.loading or job.target not in job.entries:
        job.entries[job.target] = dict(label=label, target=target, status="error", reason=f"while importing: {why}",
                                       clauses={})
        job.target, job.done = job.target + 1, set()
        return
    clause = job.clause or next((c for c in job.task.clauses if c not in job.done), None)
    if clause is None:  # it ended between clauses: nothing to blame
        job.target, job.done = job.target + 1, set()
        return
    job.entries[job.target]["clauses"][clause] = crash_cell(job.task, target, clause, why, hung)
    job.done.add(clause)
    if len(job.done) == len(job.task.clauses):
        job.target, job.done = job.target + 1, set()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "it did not exit"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit status {code}: it called sys.exit or os._exit" if code in (0, 1, 2, 3) else f"exit status {code}"
