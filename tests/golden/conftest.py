"""Golden tests: a test module sets ``CONTRACT``; its ``impl`` argument then runs once per implementation
registered for that contract in ``rlspec.registry.IMPLEMENTATIONS``.

A registered implementation that fails to import fails the test; the one exception is "fast-triton"
while its module does not exist yet.
"""

from __future__ import annotations

import importlib.util

import pytest

from rlspec import registry


def pytest_generate_tests(metafunc):
    if "impl" in metafunc.fixturenames:
        names = list(registry.IMPLEMENTATIONS[metafunc.module.CONTRACT])
        metafunc.parametrize("impl", [(metafunc.module.CONTRACT, n) for n in names], ids=names, indirect=True)


@pytest.fixture
def impl(request):
    contract, name = request.param
    target = registry.IMPLEMENTATIONS[contract][name]
    module = target.partition(":")[0]
    if name == "fast-triton" and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} does not exist yet")
    resolved = registry.resolve(name, target)
    assert resolved.error is None, f"{contract}/{name} did not import: {resolved.error}"
    return resolved.impl
