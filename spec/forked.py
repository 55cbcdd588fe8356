"""Test half shared by ``trainer`` and ``data_parallel``: a function run in a forked child process (POSIX), so
that a check can SIGKILL it or run several ranks, with the implementation object as it is (a module, a file, a
planted bug: nothing to re-import).

A child runs with one torch thread (a process forked from a multi-threaded torch must not use its parent's
thread pool); it reports its start, its running time and its error over a pipe, and never returns into the
caller's code (``os._exit``).
"""

from __future__ import annotations

import os
import signal
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

WAIT_S = 600.0  # a child still running after this long is reported as hung, not waited on for ever


@dataclass
class Child:
    pid: int
    pipe: int  # the read end: b"s" at the start, then b"ok SECONDS" or b"error TEXT"

    def started(self) -> None:
        """Block until the child has started ``fn`` (its fork and setup are done)."""
        os.read(self.pipe, 1)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had finished already
            pass

    def result(self) -> tuple[str, float | str | None]:
        """("ok", seconds fn ran), ("error", its message), ("killed", None) or ("hung", seconds waited)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.005)
        else:
            self.kill()
            os.waitpid(self.pid, 0)
            os.close(self.pipe)
            return "hung", WAIT_S
        report = b""
        while chunk := os.read(self.pipe, 65536):
            report += chunk
        os.close(self.pipe)
        text = report.decode(errors="replace").removeprefix("s")
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and not text.startswith("ok "):
            return "killed", None
        if text.startswith("ok "):
            return "ok", float(text[3:])
        return "error", text.removeprefix("error ") or f"the child exited with status {status} and no report"


def fork(fn: Callable[[], None]) -> Child:
    """Run ``fn()`` in a forked child; the parent gets the Child at once."""
    import torch._dynamo  # noqa: F401 - torch.optim imports it on the first optimizer built (about 1.5 s): once here,
    # not again in every child
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns of fork in a threaded process: the child uses none
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write)
        return Child(pid, read)
    os.close(read)
    code = 1
    try:
        torch.set_num_threads(1)
        os.write(write, b"s")
        start = time.perf_counter()
        fn()
        os.write(write, f"ok {time.perf_counter() - start!r}".encode())
        code = 0
    except BaseException as err:  # noqa: BLE001 - reported to the parent, whatever it is
        text = "".join(traceback.format_exception_only(type(err), err)).strip()
        os.write(write, f"error {text}"[:60000].encode())
    finally:
        os._exit(code)
