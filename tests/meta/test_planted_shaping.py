"""The shaping and parity contracts must catch every planted bug with the right clause id and message."""

from __future__ import annotations

import importlib
import textwrap

import pytest

from rlspec.registry import load_object
from rlspec.spec.core import run_property
from rlspec.spec.parity import CONTRACT as PARITY

from planted_shaping import PLANTED_PARITY, PLANTED_SHAPING


def _outcomes(contract, impl, clauses):
    """Only the clauses the bug names (PARITY-3 spawns an interpreter: not run where it proves nothing)."""
    return {p.clause: run_property(p, impl) for p in contract.properties if p.clause in clauses}


@pytest.mark.parametrize("bug", PLANTED_SHAPING + PLANTED_PARITY, ids=lambda b: b.name.replace(" ", "-"))
def test_planted_bug_is_caught(bug):
    contract = importlib.import_module(f"rlspec.spec.{bug.contract}").CONTRACT
    outcomes = _outcomes(contract, bug.impl, {bug.catches, *bug.spared})
    caught = outcomes[bug.catches]
    assert caught.status == "fail", f"{bug.name}: {bug.catches} did not fail"
    assert caught.message.startswith(f"[{bug.catches}]"), caught.message
    assert bug.says in caught.message, caught.message
    wrongly = [c for c in bug.spared if outcomes[c].status != "pass"]
    assert not wrongly, f"{bug.name}: clauses unrelated to the bug failed too: " + \
        "; ".join(outcomes[c].message for c in wrongly)


WRAPPERS = {
    "eager": ("importing", """
        from rlspec.reference import shaping  # module level: loaded whether semantics are on or off
        from rlspec.reference.parity import SemanticPPOLag, make_learner

        def make_semantic_learner(config, semantic_cfgs, seed):
            return SemanticPPOLag(config, semantic_cfgs, seed)
        """),
    "in_init": ("constructing and updating", """
        from rlspec.reference.parity import SemanticPPOLag, make_learner

        class Wrapper(SemanticPPOLag):
            def __init__(self, config, semantic_cfgs, seed):
                from rlspec.reference import shaping  # noqa: F401 - imported before looking at the flag
                super().__init__(config, semantic_cfgs, seed)

        def make_semantic_learner(config, semantic_cfgs, seed):
            return Wrapper(config, semantic_cfgs, seed)
        """),
}


@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_semantic_import_is_caught(kind, tmp_path):
    says, body = WRAPPERS[kind]
    path = tmp_path / f"wrapper_{kind}.py"
    path.write_text(textwrap.dedent(body))
    outcome = _outcomes(PARITY, load_object(str(path)), {"PARITY-3"})["PARITY-3"]
    assert outcome.status == "fail" and outcome.message.startswith("[PARITY-3]"), outcome.message
    assert says in outcome.message and "rlspec.reference.shaping" in outcome.message, outcome.message
