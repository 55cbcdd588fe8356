"""rlspec's clauses inside your own pytest suite.

    # tests/test_my_gae.py
    import my_gae
    from rlspec.testing import conformance

    test_gae = conformance("gae", impl=my_gae, expected_failures={"GAE-11": "we do not validate NaN"})

pytest (with rlspec installed: its ``pytest11`` plugin, ``rlspec.pytest_plugin``) collects one item per clause,
``test_my_gae.py::test_gae::gae::GAE-3``. A passing clause passes; a failing one fails with the clause's message,
the smallest failing example and the command that replays it; a clause declared in ``expected_failures`` is an
xfail with its reason, and with ``strict=True`` (the default) a declared clause that passes fails the run, so the
declarations cannot go stale (scikit-learn's ``parametrize_with_checks`` and array-api-tests' xfails file work
the same way). Keys of ``expected_failures`` are clause ids or shell-style patterns (``GAE-*``); one that matches
no clause, an unknown contract or category, an unreadable ``unsupported`` file or a ``version`` this rlspec
cannot honour is an error when the test module is collected.

Options: ``clauses`` / ``categories`` select clauses, ``unsupported`` is an ``--unsupported`` file (cases the
implementation does not support are skipped, not failed), ``version`` pins the contract version the
expectations were written for (clauses added since are not collected; a newer major version is refused, listing
what changed), ``profile`` the Hypothesis profile. The profile is, in order: pytest's ``--rlspec-profile``,
``profile=``, the profile Hypothesis loaded (``--hypothesis-profile``), else ``ci`` (25 derandomized examples:
a verdict reproduces bit for bit). ``--rlspec-reproduce TOKEN`` replays the failing example a failure printed
(only that clause is run).

This module imports nothing heavy until ``conformance`` is called (the plugin imports it in every pytest run).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from rlspec.spec.core import Contract, Outcome
    from rlspec.unsupported import UnsupportedCases


@dataclasses.dataclass(frozen=True)
class Conformance:
    """What ``conformance(...)`` returns: a contract, the implementation, and which clauses to collect and how."""
    contract: Contract
    impl: Any
    target: str  # how `rlspec check --impl` names the implementation ('' when it has no importable name)
    clauses: tuple[str, ...]  # in contract order
    expected: Mapping[str, str]  # clause -> the reason it is expected to fail
    strict: bool
    unsupported: UnsupportedCases | None
    profile: str | None

    def run(self, clause: str, profile: str, seed: int | None = None, reproduce: str | None = None) -> Outcome:
        from rlspec.spec.core import run_contract

        return run_contract(self.contract, self.impl, profile, clauses=[clause], unsupported=self.unsupported,
                            seed=seed, reproduce=reproduce)[0]

    def category(self, clause: str) -> str:
        return self.contract.categories[clause]


def conformance(contract: str, impl: Any, *, expected_failures: Mapping[str, str] | None = None, strict: bool = True,
                clauses: Sequence[str] | None = None, categories: Sequence[str] | None = None,
                unsupported: str | Path | None = None, version: str | None = None,
                profile: str | None = None) -> Conformance:
    """The clauses of ``contract`` as pytest items for ``impl`` (a module or object with the contract's
    interface, or an import target 'pkg.module[:attr]' / 'path/to/file.py[:attr]'); see the module docstring."""
    from rlspec import checker, registry
    from rlspec.spec.core import PROFILES
    from rlspec.unsupported import load as load_unsupported

    if contract not in registry.CONTRACTS:
        raise ValueError(f"conformance: unknown contract {contract!r}; known: {', '.join(registry.CONTRACTS)}")
    spec = checker.load_contract(contract)
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"conformance: argument 'profile' must be one of {list(PROFILES)}, got {profile!r}")
    selected, _ = checker.select(spec, list(clauses) if clauses else None, list(categories) if categories else None,
                             version)
    unknown = sorted(set(clauses or ()) - set(spec.clauses))
    if unknown:
        raise ValueError(f"conformance: {contract} has no clause {', '.join(unknown)}")
    target, obj = _implementation(impl)
    rules = load_unsupported(Path(unsupported), spec.clauses) if unsupported is not None else None
    return Conformance(spec, obj, target, tuple(selected), _expected(spec, expected_failures or {}), strict, rules,
                       profile)


def _implementation(impl: Any) -> tuple[str, Any]:
    """(the target `rlspec check --impl` takes, the object): a string is loaded as --impl loads it."""
    from rlspec import registry

    if isinstance(impl, (str, Path)):
        try:
            return str(impl), registry.load_object(str(impl))
        except Exception as err:  # noqa: BLE001 - any load failure is the user's to see, in one line
            raise ValueError(f"conformance: argument 'impl' {str(impl)!r} failed to load: "
                             f"{registry.load_error(err)}") from None
    name = getattr(impl, "__name__", "")
    importable = isinstance(name, str) and name and not name.startswith("rlspec_user_") and hasattr(impl, "__file__")
    return (name if importable else ""), impl


def _expected(contract: Contract, declared: Mapping[str, str]) -> dict[str, str]:
    """clause -> reason for every clause a key of ``declared`` (an id or a pattern) covers."""
    out: dict[str, str] = {}
    for pattern, reason in declared.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"conformance: expected_failures[{pattern!r}] must be a reason (a non-empty string), "
                             f"got {reason!r}")
        covered = [c for c in contract.clauses if fnmatch.fnmatchcase(c, pattern)]
        if not covered:
            raise ValueError(f"conformance: expected_failures names {pattern!r}, which matches no clause of "
                             f"{contract.id} ({', '.join(contract.clauses)})")
        out.update(dict.fromkeys(covered, reason))
    return out
