"""Every planted bug (tests/meta/planted*.py: the reference with one bug each) must be caught by the
right clause under the ``ci`` profile (25 derandomized examples: what a downstream CI runs, whatever profile this
run was started with), with a message naming it, while the clauses unrelated to the bug still pass."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from rlspec.spec.core import run_property

BUGS = [
    bug
    for path in sorted(Path(__file__).parent.glob("planted*.py"))
    for name, value in vars(importlib.import_module(path.stem)).items()
    if name.startswith("PLANTED") and isinstance(value, tuple)
    for bug in value
]


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: f"{b.contract}:{b.name.replace(' ', '-')}")
def test_planted_bug_is_caught(bug):
    contract = importlib.import_module(f"rlspec.spec.{bug.contract}").CONTRACT
    # only the clauses the bug names: some properties are slow (PARITY-3 spawns an interpreter)
    # a clause with several properties: its first failure (or a pass if all pass)
    outcomes = {}
    for p in contract.properties:
        if p.clause in {bug.catches, *bug.spared} and getattr(outcomes.get(p.clause), "status", "pass") == "pass":
            outcomes[p.clause] = run_property(p, bug.impl, "ci", writes=contract.writes)
    caught = outcomes[bug.catches]
    assert caught.status == "fail", f"{bug.name}: {bug.catches} did not fail"
    assert caught.message.startswith(f"[{bug.catches}]"), caught.message
    assert bug.says in caught.message, caught.message
    wrongly = [c for c in bug.spared if outcomes[c].status != "pass"]
    assert not wrongly, f"{bug.name}: clauses unrelated to the bug failed too: " + \
        "; ".join(outcomes[c].message for c in wrongly)
