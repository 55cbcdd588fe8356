"""Test-wide settings. Hypothesis profiles (registered by rlspec.spec.core.register_profiles):

* ``ci``: 25 examples per property, derandomized (a CI failure reproduces exactly), no deadline;
* ``dev``: 200 examples, random seeds (the seed is printed on failure, replay with --hypothesis-seed);
* ``nightly``: 2000 examples.

Selected by $HYPOTHESIS_PROFILE (nox sets ``ci``), else ``ci`` when $CI is set, else ``dev``.
"""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from rlspec.spec.core import default_profile, register_profiles

register_profiles()
settings.load_profile(default_profile())


def pytest_configure(config):
    """Under `pytest -n N` (pytest-xdist, as nox -s cpu_gate runs): the N workers share the cores, so each
    runs torch on one thread, and each compiles torch.compile's kernels into a cache of its own (two workers
    compiling the same graph into one cache can load a half-written library)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        torch.set_num_threads(1)
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
            user = getpass.getuser()
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tempfile.gettempdir(), f"torchinductor_{user}", worker))


def pytest_report_header(config):
    prof = settings.get_profile(default_profile())
    return (f"hypothesis profile: {default_profile()} (max_examples={prof.max_examples}, "
            f"derandomize={prof.derandomize})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and call.when == "call":
        seed = item.config.getoption("hypothesis_seed", default=None)
        rep.sections.append(("hypothesis", f"profile={default_profile()} "
                             f"derandomize={settings.default.derandomize} seed={seed!r} "
                             "(rerun: HYPOTHESIS_PROFILE=<same> pytest --hypothesis-seed=<seed> <test id>)"))


@pytest.fixture
def no_cxx(monkeypatch, tmp_path):
    """No usable C++ compiler: $CXX names a missing file, the kernel cache is fresh. ``no_cxx(*loaders)`` clears
    those functools caches (fast/ kernel loaders and their availability checks) now and after the test."""
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("RLSPEC_CACHE", str(tmp_path))
    cleared = []

    def clear(*loaders):
        cleared.extend(loaders)
        for loader in loaders:
            loader.cache_clear()

    yield clear
    for loader in cleared:
        loader.cache_clear()
