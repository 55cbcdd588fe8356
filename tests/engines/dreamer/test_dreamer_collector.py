"""Dreamer's replay writer against contract ``collector`` (rlspec/engines/dreamer/collector.py).

Its ring stores one transition row per step and no final observation, and a step both terminated and truncated
keeps only continue = 0: it fails COLL-2 and COLL-5 by design, and passes the rest. It is not registered (the
gate's conformance test runs registered implementations, which pass every clause); this test pins its verdicts
and the cause the failures name, so that a change either way shows.
"""

from __future__ import annotations

from rlspec.engines.dreamer import collector
from rlspec.spec.collector import CONTRACT
from rlspec.spec.core import run_contract


def test_the_replay_writer_fails_exactly_the_final_observation_and_both_flags_clauses():
    outcomes = {o.clause: o for o in run_contract(CONTRACT, collector, "ci")}
    assert {c for c, o in outcomes.items() if o.status != "pass"} == {"COLL-2", "COLL-5"}
    assert "is the next episode's reset observation" in outcomes["COLL-2"].message
    assert "(terminated, truncated) = (True, False), the env set (True, True)" in outcomes["COLL-5"].message
