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

from rlspec.engines.safe import parallel, reference
from rlspec.engines.safe.parallel import SafeFastConfig, compare
from rlspec.engines.safe.reference import (
    ALGOS,
    ENGINE,
    EXECUTIONS,
    PRESETS,
    Execution,
    SafeConfig,
    build_config,
    collect,
    describe,
    evaluate,
    plot,
    render_settings,
    run,
    validate,
)
from rlspec.runs import shell

__all__ = ["ALGOS", "ENGINE", "EXECUTIONS", "PRESETS", "Execution", "SafeConfig", "SafeFastConfig", "build_config",
           "collect", "compare", "describe", "evaluate", "execution", "plot", "render_settings", "run", "safe_fast",
           "train", "validate"]

FAST_ALIAS = "safe-fast"


def execution(cfg: SafeConfig) -> Execution:
    """Where ``cfg``'s run executes: in this process, or (execution parallel) parallel.py's workers/torchrun/device."""
    return parallel.execution(cfg) if cfg.execution == "parallel" else Execution()


def train(argv: list[str], name: str = ENGINE, cls: type = SafeConfig) -> int:
    """`rlspec train safe ...` (or, with ``name``/``cls``, the safe-fast alias); under torchrun (WORLD_SIZE > 1)
    the parallel execution joins the process group, left after the run."""
    doc = "\n".join((__doc__, reference.__doc__, parallel.__doc__))
    return parallel.leaving_process_group(lambda: shell.train(describe(name, cls, execution, doc), argv))


def _train_fast(argv: list[str]) -> int:
    print(f"rlspec: `rlspec train {FAST_ALIAS}` is `rlspec train safe` with execution=parallel, num_envs=2 and "
          "env_workers=2 as defaults (its runs resume as safe-fast's)", file=sys.stderr)
    return train(argv, FAST_ALIAS, SafeFastConfig)


# `rlspec train/eval/plot/compare safe-fast` (rlspec/cli.py)
safe_fast = SimpleNamespace(train=_train_fast, compare=compare,
                            evaluate=lambda run_dir, argv: evaluate(Path(run_dir), argv, SafeFastConfig),
                            plot=lambda run_dir: plot(Path(run_dir), SafeFastConfig))
