"""Every planted bug dies also on random draws of the ``ci`` budget (25 examples from fixed seeds, not the
derandomized sample): a kill that only the derandomized sample makes hangs on which examples happen to be drawn,
where it should rest on the clause's pinned edge cases. The draws are seeded, so the test is deterministic."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import settings
from test_planted import BUGS

from rlspec.spec.core import PROFILES, run_property

DRAWS = "ci-draw"  # the ci budget, drawn at random from the seed given
settings.register_profile(DRAWS, **dict(PROFILES["ci"], derandomize=False))
SEEDS = (1,)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bug", BUGS, ids=lambda b: f"{b.contract}:{b.name.replace(' ', '-')}")
def test_planted_bug_dies_on_a_random_draw_of_the_ci_budget(bug, seed):
    contract = importlib.import_module(f"rlspec.spec.{bug.contract}").CONTRACT
    outcomes = [run_property(p, bug.impl, DRAWS, seed=seed, writes=contract.writes) for p in contract.properties
                if p.clause == bug.catches]
    assert any(o.status == "fail" for o in outcomes), \
        f"{bug.name}: {bug.catches} passes on the ci budget drawn from seed {seed}: pin its decisive example"
