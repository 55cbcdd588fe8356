"""The safe-RL PPO family's engine (`rlspec train safe`), in the engines' one layout: config.py (the keys, no
torch), loop.py (the run loop), one module per execution (``execution=``), verbs.py (eval, plot, compare):

* local.py: ``local``, the loop in one process, deterministic, top to bottom;
* parallel.py: ``parallel``, the same loop executed elsewhere: envs in worker processes, data parallel under
  torchrun, the networks on a device; it builds on loop.py, which never imports it.

This module joins them behind the CLI: `rlspec train safe` (choosing the execution by the config), eval,
plot, and `rlspec compare safe`, which runs both executions.
"""

from __future__ import annotations

from pathlib import Path

from rlspec.engines import lazy
from rlspec.engines.safe import config
from rlspec.engines.safe.config import ENGINE, SafeConfig
from rlspec.runs import shell

# every other name (run, collect, describe, build_config, evaluate, plot, compare, Execution, ...) from the loop,
# the executions or the verbs, imported on first use: they import torch
__getattr__ = lazy(__name__, ("loop", "local", "parallel", "verbs"))


def _validate(cfg: SafeConfig) -> None:
    from rlspec.engines.safe.loop import validate

    validate(cfg)


def _run(cfg: SafeConfig, out: Path, resume: bool, stop_after: int | None, show_progress: bool) -> Path:
    """The run of `rlspec train safe`: the loop of loop.py, executed as cfg.execution says (local.py: one process;
    parallel.py: workers, a torchrun process group and a device; a process group it joined is left after)."""
    from rlspec.engines.safe import local, loop, parallel

    execution = {"local": local.execution, "parallel": parallel.execution}[cfg.execution]
    engine = loop.describe(execution)
    return parallel.leaving_process_group(lambda: engine.run(cfg, out, resume, stop_after, show_progress))


def train(argv: list[str]) -> int:
    """`rlspec train safe ...`; parsing and --help import no torch."""
    return shell.train(config.describe(ENGINE, SafeConfig, _validate, _run), argv)
