"""Golden tests: a test module sets ``CONTRACT``; its ``impl`` argument then runs once per implementation
registered for that contract in ``rlspec.registry.IMPLEMENTATIONS``.

A registered implementation that fails to import fails the test.
"""

from __future__ import annotations

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
    resolved = registry.resolve(name, target)
    if resolved.unavailable:  # e.g. Triton compiled without CUDA when the caller did not ask for the interpreter
        pytest.skip(f"{contract}/{name} cannot run here: {resolved.unavailable}")
    assert resolved.error is None, f"{contract}/{name} did not import: {resolved.error}"
    return resolved.impl
