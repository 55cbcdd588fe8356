"""Dreamer's replay writer against contract ``collector`` (rlspec/engines/dreamer/collector.py).

With ``replay_ends`` on (the registered adapter) the ring stores each step's flags and final observation and
the writer passes every clause. Off (the default), its rows hold no final observation and a step both
terminated and truncated keeps only continue = 0: it then fails COLL-2 and COLL-5 and passes the rest. This
test pins both verdicts and the cause the failures name, so that a change either way shows.
"""

from __future__ import annotations

import types

from rlspec.engines.dreamer import collector
from rlspec.spec.collector import CONTRACT
from rlspec.spec.core import run_contract


def _verdicts(impl) -> dict:
    return {o.clause: o for o in run_contract(CONTRACT, impl, "ci")}


def test_the_replay_writer_with_replay_ends_passes_every_clause():
    outcomes = _verdicts(collector)
    assert {c: o.message for c, o in outcomes.items() if o.status != "pass"} == {}


def test_without_replay_ends_it_fails_exactly_the_final_observation_and_both_flags_clauses():
    off = types.SimpleNamespace(collect=lambda envs, obs, policy, steps: collector.rows(envs, steps, False))
    outcomes = _verdicts(off)
    assert {c for c, o in outcomes.items() if o.status != "pass"} == {"COLL-2", "COLL-5"}
    assert "is the next episode's reset observation" in outcomes["COLL-2"].message
    assert "(terminated, truncated) = (True, False), the env set (True, True)" in outcomes["COLL-5"].message
