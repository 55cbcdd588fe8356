"""The returns contracts must catch every planted bug with the right clause id and a useful message."""

from __future__ import annotations

import importlib

import pytest

from rlspec.spec.core import run_contract

from planted_returns import PLANTED_RETURNS


@pytest.mark.parametrize("bug", PLANTED_RETURNS, ids=lambda b: b.name.replace(" ", "-"))
def test_planted_bug_is_caught(bug):
    contract = importlib.import_module(f"rlspec.spec.{bug.contract}").CONTRACT
    outcomes = {o.clause: o for o in run_contract(contract, bug.impl)}
    caught = outcomes[bug.catches]
    assert caught.status == "fail", f"{bug.name}: {bug.catches} did not fail"
    assert caught.message.startswith(f"[{bug.catches}]"), caught.message
    assert bug.says in caught.message, caught.message
    wrongly = [c for c in bug.spared if outcomes[c].status != "pass"]
    assert not wrongly, f"{bug.name}: clauses unrelated to the bug failed too: " + \
        "; ".join(outcomes[c].message for c in wrongly)
