"""The replay contract must catch every planted bug with the right clause id and a useful message."""

from __future__ import annotations

import pytest
from planted_replay import PLANTED_REPLAY
from rlspec.spec.core import run_contract
from rlspec.spec.replay import CONTRACT


@pytest.mark.parametrize("bug", PLANTED_REPLAY, ids=lambda b: b.name.replace(" ", "-"))
def test_planted_bug_is_caught(bug):
    outcomes = {o.clause: o for o in run_contract(CONTRACT, bug.impl)}
    caught = outcomes[bug.catches]
    assert caught.status == "fail", f"{bug.name}: {bug.catches} did not fail"
    assert caught.message.startswith(f"[{bug.catches}]"), caught.message
    assert bug.says in caught.message, caught.message
    wrongly = [c for c in bug.spared if outcomes[c].status != "pass"]
    assert not wrongly, f"{bug.name}: clauses unrelated to the bug failed too: " + \
        "; ".join(outcomes[c].message for c in wrongly)
