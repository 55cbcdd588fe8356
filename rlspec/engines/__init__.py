"""Execution and IO: where and when train/policy steps run (a deterministic CPU loop; CUDA actor/learner
streams; subprocess/distributed/Ray workers). Imports algos, models, envs and runs.

Each engine package is light to import: its config module (the run's keys, presets and how `rlspec train`
describes the engine) imports no torch, and the rest of the package's names load on first use (``lazy``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

_MISSING = object()


def lazy(package: str, modules: tuple[str, ...]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562): a name the package does not define is taken from the first
    of its submodules ``modules`` that has it, imported on first use (the engine's torch half)."""
    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            for module in modules:
                found = getattr(importlib.import_module(f"{package}.{module}"), name, _MISSING)
                if found is not _MISSING:
                    return found
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
