"""The pytest plugin (entry point ``pytest11``): collects ``rlspec.testing.conformance(...)`` objects of a test
module as one item per clause, and adds the options ``--rlspec-profile`` and ``--rlspec-reproduce``.

Loaded in every pytest run where rlspec is installed, so it imports only pytest and rlspec.testing (torch and
Hypothesis load when a conformance object is built).
"""

from __future__ import annotations

import shlex

import pytest

from rlspec.testing import Conformance

PROFILES = ("ci", "dev", "nightly")  # spec.core.PROFILES' names (tests/unit/test_layering.py keeps them equal)


class ClauseFailure(AssertionError):
    """A clause that does not hold; shown as its message, without a traceback."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rlspec", "rlspec conformance items")
    group.addoption("--rlspec-profile", choices=PROFILES, default=None,
                    help="Hypothesis profile of the conformance items (default: conformance(profile=...), else the "
                         "one --hypothesis-profile loads, else ci)")
    group.addoption("--rlspec-reproduce", metavar="TOKEN", default=None,
                    help="replay the failing example of a token a conformance failure printed (only its clause runs)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rlspec: an rlspec conformance item (one clause of a contract)")
    if config.getoption("hypothesis_profile", None) in PROFILES:  # before Hypothesis's plugin loads it by name
        from rlspec.spec.core import register_profiles

        register_profiles()


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    if isinstance(obj, Conformance):
        return ConformanceSuite.from_parent(collector, name=name, conformance=obj)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    token = config.getoption("rlspec_reproduce")
    if token is None:
        return
    contract, clause = _token_clause(token)
    keep = [i for i in items if not isinstance(i, ClauseItem) or (i.contract, i.clause) == (contract, clause)]
    if not any(isinstance(i, ClauseItem) for i in keep):
        raise pytest.UsageError(f"--rlspec-reproduce: no collected conformance item is {contract}::{clause}")
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


def _token_clause(token: str) -> tuple[str, str]:
    from rlspec.spec.core import ReproduceError, token_contract

    try:
        contract = token_contract(token)
    except ReproduceError as err:
        raise pytest.UsageError(str(err)) from None
    return contract, token.split(":")[1]


class ConformanceSuite(pytest.Collector):
    """One conformance object (the test module's name for it), holding its contract's node."""

    def __init__(self, *, conformance: Conformance, **kwargs):
        super().__init__(**kwargs)
        self.conformance = conformance

    def collect(self):
        yield ContractNode.from_parent(self, name=self.conformance.contract.id, conformance=self.conformance)


class ContractNode(pytest.Collector):
    """The contract's clauses, each an item (node id ``MODULE::NAME::CONTRACT::CLAUSE``); declared expected failures
    marked xfail."""

    def __init__(self, *, conformance: Conformance, **kwargs):
        super().__init__(**kwargs)
        self.conformance = conformance

    def collect(self):
        spec = self.conformance
        for clause in spec.clauses:
            item = ClauseItem.from_parent(self, name=clause, clause=clause)
            item.add_marker(pytest.mark.rlspec)
            if clause in spec.expected:
                item.add_marker(pytest.mark.xfail(reason=spec.expected[clause], strict=spec.strict,
                                                  raises=ClauseFailure))
            yield item


class ClauseItem(pytest.Item):
    """One clause of one contract against one implementation."""

    def __init__(self, *, clause: str, **kwargs):
        super().__init__(**kwargs)
        self.clause = clause
        self.conformance: Conformance = self.parent.conformance
        self.contract = self.conformance.contract.id
        self.user_properties.append(("category", self.conformance.category(clause)))
        self.user_properties.append(("contract_version", self.conformance.contract.version))

    def runtest(self) -> None:
        config = self.config
        reproduce = config.getoption("rlspec_reproduce")
        seed = config.getoption("hypothesis_seed", None)  # --hypothesis-seed: a string
        seed = int(seed) if isinstance(seed, str) and seed.isdigit() else seed
        outcome = self.conformance.run(self.clause, self._profile(), seed, reproduce)
        if outcome.status == "pass":
            return
        if outcome.status == "unsupported":
            pytest.skip(outcome.message or "declared unsupported")
        raise ClauseFailure(self._text(outcome))

    def _profile(self) -> str:
        loaded = self.config.getoption("hypothesis_profile", None)
        return self.config.getoption("rlspec_profile") or self.conformance.profile or loaded or "ci"

    def _text(self, outcome) -> str:
        lines = [f"{outcome.message} ({self.conformance.category(self.clause)} clause of "
                 f"{self.contract} {self.conformance.contract.version})"]
        if outcome.case and " | inputs: " not in outcome.message:
            lines.append(f"failing case: {outcome.case}")
        flags = list(outcome.reproduce)
        token = flags[flags.index("--reproduce") + 1] if "--reproduce" in flags else None
        cli = (f"rlspec check {self.contract} --impl {shlex.quote(self.conformance.target)} "
               + (f"--reproduce {token}" if token else f"--clause {self.clause}")) if self.conformance.target else ""
        if token:
            lines.append(f"replay: pytest {shlex.quote(self.nodeid)} --rlspec-reproduce {token}")
        elif flags:
            lines.append(f"replay: pytest {shlex.quote(self.nodeid)} (a pinned example: it runs first)")
        lines += [f"    or: {cli}"] if cli and flags else []
        return "\n".join(lines)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClauseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"{self.contract}::{self.clause}"
