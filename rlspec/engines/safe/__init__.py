"""The safe-RL PPO family's engine (`rlspec train safe`): one config and loop, two executions (``execution=``):

* reference.py: ``local``, the loop in one process, deterministic, top to bottom;
* parallel.py: ``parallel``, the same loop executed elsewhere: envs in worker processes, data parallel under
  torchrun, the networks on a device; it builds on reference.py, which never imports it.

This module joins them behind the CLI: `rlspec train safe` (choosing the execution by the config),
`rlspec train safe-fast` (the former engine name: the same engine with SafeFastConfig's defaults, execution
parallel with 2 envs in 2 workers; its runs are recorded and resumed as safe-fast's), eval, plot, and
`rlspec compare safe`, which runs both executions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from rlspec.engines import lazy
from rlspec.engines.safe import config
from rlspec.engines.safe.config import ENGINE, FAST_ALIAS, SafeConfig, SafeFastConfig
from rlspec.runs import shell

# every other name (run, collect, describe, build_config, evaluate, plot, compare, Execution, ...) from the loop
# or the parallel execution, imported on first use: they import torch
__getattr__ = lazy(__name__, ("reference", "parallel"))


def _validate(cfg: SafeConfig) -> None:
    from rlspec.engines.safe.reference import validate

    validate(cfg)


def _run(name: str):
    """The run of `rlspec train NAME`: the loop of reference.py, executed as cfg.execution says (parallel:
    parallel.py's workers, torchrun process group and device; a process group it joined is left after)."""
    def run(cfg: SafeConfig, out: Path, resume: bool, stop_after: int | None, show_progress: bool) -> Path:
        from rlspec.engines.safe import parallel, reference

        execution = parallel.execution if cfg.execution == "parallel" else lambda cfg: reference.Execution()
        engine = reference.describe(name, type(cfg), execution)
        return parallel.leaving_process_group(lambda: engine.run(cfg, out, resume, stop_after, show_progress))
    return run


def train(argv: list[str], name: str = ENGINE, cls: type = SafeConfig) -> int:
    """`rlspec train safe ...` (or, with ``name``/``cls``, the safe-fast alias); parsing and --help import no torch."""
    return shell.train(config.describe(name, cls, _validate, _run(name)), argv)


def _train_fast(argv: list[str]) -> int:
    print(f"rlspec: `rlspec train {FAST_ALIAS}` is `rlspec train safe` with execution=parallel, num_envs=2 and "
          "env_workers=2 as defaults (its runs resume as safe-fast's)", file=sys.stderr)
    return train(argv, FAST_ALIAS, SafeFastConfig)


def _evaluate_fast(run_dir, argv: list[str]) -> int:
    from rlspec.engines.safe.reference import evaluate

    return evaluate(Path(run_dir), argv, SafeFastConfig)


def _plot_fast(run_dir) -> int:
    from rlspec.engines.safe.reference import plot

    return plot(Path(run_dir), SafeFastConfig)


def _compare_fast(argv: list[str]) -> int:
    from rlspec.engines.safe.parallel import compare

    return compare(argv)


# `rlspec train/eval/plot/compare safe-fast` (rlspec/cli.py)
safe_fast = SimpleNamespace(train=_train_fast, compare=_compare_fast, evaluate=_evaluate_fast, plot=_plot_fast)
