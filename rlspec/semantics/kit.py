"""The contract implementations the semantic side calls, chosen by the run's kit like the core's
(rlspec/algos/safe_ppo.py ``Kit``): contracts shaping, modulation and risk_target."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from rlspec import registry


@dataclass(frozen=True)
class SemanticKit:
    shaping: ModuleType  # contract shaping: MarginNormalizer, PotentialShaper, TemporalPool, beta_schedule, ...
    modulation_scale: Callable  # contract modulation
    risk_target: Callable  # contract risk_target

    @classmethod
    def named(cls, name: str) -> "SemanticKit":
        """The kit a run config names: "reference" or "fast"."""
        m = registry.kit_modules(name, ("shaping", "modulation", "risk_target"))
        return cls(m["shaping"], m["modulation"].modulation_scale, m["risk_target"].risk_target)
