"""The safe-RL PPO family's engines (`rlspec train safe`, `rlspec train safe-fast`), one config and loop:

* reference.py: the loop in one process, deterministic, top to bottom (`safe`);
* parallel.py: the same loop executed elsewhere: envs in worker processes, data parallel under torchrun, the
  networks on a device (`safe-fast`); it builds on reference.py, which never imports it.

This module is the `safe` engine's entry: reference.py's verbs, and `rlspec compare safe`, which runs both.
"""

from __future__ import annotations

from rlspec.engines.safe.parallel import compare
from rlspec.engines.safe.reference import (
    ALGOS,
    ENGINE,
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
    train,
    validate,
)

__all__ = ["ALGOS", "ENGINE", "PRESETS", "Execution", "SafeConfig", "build_config", "collect", "compare", "describe",
           "evaluate", "plot", "render_settings", "run", "train", "validate"]
