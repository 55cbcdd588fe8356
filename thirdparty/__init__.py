"""Adapters: third-party RL libraries behind the kit's contract interfaces (``rlspec.thirdparty``).

Each ``<library>_adapter`` module exposes a contract's interface on top of a pinned library, converting
conventions explicitly (time-major layouts, flag encodings, which value is bootstrapped where) and
nothing else: it never runs the kit's validation on the library's behalf, so a library that accepts bad
input shows as such. This package is the only place besides golden_bridge/ where third-party RL packages
are imported; ``nox -s thirdparty`` installs them and writes the conformance table (benchmarks/kit/results/thirdparty/).

Every adapter module declares

* ``LIBRARY``: "name version" of the pinned library, ``CONTRACTS``: the contracts it adapts;
* ``DECLARED``: clause id -> :class:`Declared`, what the library is known to do differently there:
  ``difference`` (a documented convention of the library that the contract does not take),
  ``bug`` (a wrong value or a crash a maintainer could fix), ``accepts`` (bad input accepted silently or
  rejected without naming the argument), ``unsupported`` (the library has no such feature). The table
  checks every declaration against what the runner finds: an undeclared failure or a declaration that
  no longer fails is reported, so the declarations cannot go stale silently.

An adapter called with arguments its library cannot express (rlax's fixed c̄ = 1, TorchRL's scalar γ)
raises :class:`Unsupported`; the table counts those examples as unsupported instead of failing them.
"""

from __future__ import annotations

import dataclasses

# adapter name -> module; the table runs each over the contracts it declares
ADAPTERS: dict[str, str] = {
    "sheeprl": "rlspec.thirdparty.sheeprl_adapter",
    "sb3": "rlspec.thirdparty.sb3_adapter",
    "cleanrl": "rlspec.thirdparty.cleanrl_adapter",
    "rlax": "rlspec.thirdparty.rlax_adapter",
    "torchrl": "rlspec.thirdparty.torchrl_adapter",
    "omnisafe": "rlspec.thirdparty.omnisafe_adapter",
}

KINDS = ("difference", "bug", "accepts", "unsupported")


class Unsupported(NotImplementedError):
    """The library cannot express this call (an argument value outside what it supports)."""


@dataclasses.dataclass(frozen=True)
class Declared:
    kind: str  # one of KINDS
    reason: str  # one line a maintainer can act on: what the library does, where, and what would fix it

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Declared: argument 'kind' must be one of {KINDS}, got {self.kind!r}")


# the reason every adapter of the returns family gives for the overflow robustness clauses
LITERAL_CUT = ("computes the published recursion literally, multiplying the future by the zero discount at a cut: "
               "with the dtype's largest finite values after it, 0·inf = NaN reaches the rows before (finite values "
               "there leave them bit-identical: the maths isolation clause passes)")


def unsupported(name: str, reason: str):
    """A stand-in for an interface name the library lacks: calling it raises :class:`Unsupported`, so the
    clauses that use it only for some examples still run on the others."""

    def missing(*args, **kwargs):
        raise Unsupported(f"{name}: {reason}")

    missing.__name__ = missing.__qualname__ = name
    return missing
