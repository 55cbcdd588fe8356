"""PARITY-3 catches a semantic wrapper that imports the embedding/shaping code while semantics are off."""

from __future__ import annotations

import textwrap

import pytest

from rlspec.registry import load_object
from rlspec.spec.core import run_property
from rlspec.spec.parity import CONTRACT as PARITY

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
    prop = next(p for p in PARITY.properties if p.clause == "PARITY-3")
    outcome = run_property(prop, load_object(str(path)))
    assert outcome.status == "fail" and outcome.message.startswith("[PARITY-3]"), outcome.message
    assert says in outcome.message and "rlspec.reference.shaping" in outcome.message, outcome.message
