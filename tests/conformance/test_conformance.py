"""Every clause of every contract against every registered implementation (the runner's own code path).

A registered backend that cannot be imported here fails: the CPU gate is where Triton (interpreted)
and Warp (device='cpu') must work.
"""

from __future__ import annotations

import pytest

from rlspec import registry
from rlspec.spec.core import run_property

CASES = [
    pytest.param(cid, name, prop, id=f"{cid}-{name}-{prop.clause}")
    for cid in registry.CONTRACTS
    for name in registry.IMPLEMENTATIONS.get(cid, {})
    for prop in registry.load_contract(cid).properties
]


@pytest.mark.parametrize("contract_id, impl_name, prop", CASES)
def test_clause(contract_id, impl_name, prop):
    resolved = registry.resolve(impl_name, registry.IMPLEMENTATIONS[contract_id][impl_name])
    assert resolved.error is None, f"{contract_id}/{impl_name} did not import: {resolved.error}"
    outcome = run_property(prop, resolved.impl, writes=registry.load_contract(contract_id).writes)
    assert outcome.status == "pass", outcome.message
