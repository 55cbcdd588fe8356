"""How a run fails: loudly, losing nothing. Every engine's `rlspec train` ends through ``outcome``, with one
of the exit statuses listed in ``rlspec.cli.EXIT_STATUS`` (0 finished, 2 a bad command line, config,
checkpoint or run directory: nothing created or changed, 3 stopped on a fault it detected (divergence, a
plug-in that failed, a write that failed: a full disk): the last clean checkpoint kept, 130 interrupted: the
last checkpoint kept, ``--resume RUN`` goes on from it; 143 and 129 for SIGTERM and SIGHUP, which end a run as
Ctrl-C does)."""

from __future__ import annotations

import math
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar

from rlspec.runs.config import ConfigError

if TYPE_CHECKING:
    import torch  # annotations only: this module imports no torch (the command line reads it before parsing)

T = TypeVar("T")


class RunStopped(RuntimeError):
    """The run stopped on a fault it detected; exit status 3."""


class WriteFailed(RunStopped):
    """The run could not write (a full disk, a read-only or vanished folder): what it said and what is kept."""


class Diverged(RunStopped):
    """Non-finite losses or parameters at env step ``step``. ``kept``: what the run directory keeps (filled in
    by the RunDir the run writes, which knows its last checkpoint)."""

    def __init__(self, step: int, what: str, kept: str | None = None):
        super().__init__(step, what)
        self.step, self.what, self.kept = step, what, kept

    def __str__(self) -> str:
        return f"non-finite {self.what} at step {self.step}" + (f"; {self.kept}" if self.kept else "")


class RunLocked(RuntimeError):
    """Another process holds the run directory; exit status 2."""


class AlreadyFinished(Exception):
    """--resume of a run that reached its total_steps: nothing to do, nothing changed; exit status 0."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) inside a run, with what was kept and how to go on; exit status 128 + the
    signal's number (130 for Ctrl-C)."""

    def __init__(self, message: str = "", signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: the run ends as on Ctrl-C (``terminating`` raises it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_RECEIVED: list[int] = []  # the SIGTERM / SIGHUP of the run ``outcome`` is ending (none: Ctrl-C)


def _terminate(signum, frame):
    _RECEIVED.append(signum)
    raise Terminated(signum)


def signal_of(err: KeyboardInterrupt) -> int:
    """The signal that ended the run: ``err``'s own, else the SIGTERM or SIGHUP received (Ray's ray.get
    re-raises one that arrives inside it as a plain KeyboardInterrupt), else SIGINT."""
    return getattr(err, "signum", None) or (_RECEIVED[-1] if _RECEIVED else signal.SIGINT)


def nonfinite_tensors(groups: dict[str, Iterable[torch.Tensor]]) -> list[str]:
    """The names of the groups (a module's parameters, a state dict's values) holding a non-finite float."""
    return [name for name, tensors in groups.items()
            if not all(bool(t.isfinite().all()) for t in tensors if t.is_floating_point())]


def check_finite(step: int, losses: dict[str, float], params: dict[str, Iterable[torch.Tensor]]) -> None:
    """Diverged naming the non-finite ``losses`` and parameter groups, if any."""
    bad = [k for k, v in losses.items() if not math.isfinite(float(v))]
    bad_params = nonfinite_tensors(params)
    if bad or bad_params:
        raise Diverged(step, ", ".join(bad + [f"parameters of {', '.join(bad_params)}"] * bool(bad_params)))


def outcome(prog: str, work: Callable[[], Path]) -> int:
    """Run ``work`` (it returns the run directory) and turn its end into one line and an exit status (the
    table in the module docstring); no traceback for any of these. SIGTERM and SIGHUP end it as Ctrl-C does."""
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGHUP)}
    _RECEIVED.clear()
    try:
        status, path = attempt(prog, work)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if status is not None:
        return status
    print(f"run: {path}")
    return 0


def attempt(prog: str, work: Callable[[], T]) -> tuple[int | None, T | None]:
    """(None, what ``work`` returned) when it ends normally; else (its exit status, None), having said why in
    one line (the table in the module docstring). `rlspec compare` runs its two runs through this."""
    try:
        return None, work()
    except AlreadyFinished as done:
        print(f"{prog}: {done}")
        return 0, None
    except (ConfigError, FileExistsError, FileNotFoundError, RunLocked) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2, None
    except RunStopped as err:
        print(f"{prog}: stopped: {err}", file=sys.stderr)
        return 3, None
    except KeyboardInterrupt as err:
        said = str(err) if isinstance(err, Interrupted) else "interrupted before the run began; nothing was written"
        signum = signal_of(err)
        print(f"{prog}: {said}" + (f" ({signal.Signals(signum).name})" if signum != signal.SIGINT else ""),
              file=sys.stderr)
        return 128 + signum, None
