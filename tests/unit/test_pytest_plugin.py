"""rlspec inside someone else's pytest: a throw-away project in its own directory (its own module and test file,
no rlspec source beside it) runs `python -m pytest`, and the outcomes of its conformance items are read back from
pytest's own JUnit XML: passes, an xfail with its reason, a strict XPASS that fails the run, a clause failure with
its replay line, the replay of that token, and a declaration that names no clause failing collection."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

USER_GAE = """
    '''A user's GAE: the maths is the reference's; NaN inputs are silently zeroed instead of rejected.'''
    import torch
    from rlspec.reference import gae as _ref

    def gae(reward, value, terminated, truncated, next_value, gamma, lam):
        reward, value, next_value = (torch.nan_to_num(t) for t in (reward, value, next_value))
        return _ref.gae(reward, value, terminated, truncated, next_value, gamma, lam)
    """

FLOAT32_GAMMA = """
    import torch
    from rlspec.reference import gae as _ref

    def gae(reward, value, terminated, truncated, next_value, gamma, lam):
        gamma = float(torch.tensor(gamma, dtype=torch.float32))  # the bug: γ rounded to float32
        return _ref.gae(reward, value, terminated, truncated, next_value, gamma, lam)
    """

TESTS = """
    import my_gae
    import float32_gamma
    from rlspec.testing import conformance

    test_gae = conformance("gae", impl=my_gae, clauses=["GAE-1", "GAE-2", "GAE-9", "GAE-11"],
                           expected_failures={"GAE-11": "we do not validate NaN", "GAE-2": "thought to fail"})
    test_bug = conformance("gae", impl=float32_gamma, clauses=["GAE-1", "GAE-3"])
    """


# the project's own pytest configuration: pytest's rootdir is the project, never a checkout above it (nox puts
# tmp_path under .nox/, inside this repository)
PYPROJECT = """
    [project]
    name = "their-project"
    version = "0"

    [tool.pytest.ini_options]
    addopts = "-ra"
    """


def _project(tmp_path: Path, tests: str = TESTS) -> Path:
    root = tmp_path / "their_project"
    root.mkdir()
    for name, body in (("my_gae.py", USER_GAE), ("float32_gamma.py", FLOAT32_GAMMA), ("test_theirs.py", tests),
                       ("pyproject.toml", PYPROJECT)):
        (root / name).write_text(textwrap.dedent(body))
    return root


def _pytest(root: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    """(exit code, output, {test id: passed | failed | xfailed | skipped}) of pytest run inside ``root``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPOTHESIS_PROFILE")}
    junit = root / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"--junitxml={junit}", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    outcomes = {}
    if junit.exists():
        for case in ElementTree.parse(junit).iter("testcase"):
            child = next(iter(c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
            skipped = case.find("skipped")
            if skipped is not None and skipped.get("type") == "pytest.xfail":
                child = "xfailed"
            outcomes[f"{case.get('classname')}::{case.get('name')}"] = child
    return proc.returncode, proc.stdout + proc.stderr, outcomes


def test_an_outside_project_runs_clauses_as_items_with_xfail_and_strict(tmp_path):
    root = _project(tmp_path)
    code, out, outcomes = _pytest(root)
    assert code == 1, out
    assert f"rootdir: {root}" in out, out  # its own configuration, not this checkout's
    assert outcomes == {"test_theirs.test_gae.gae::GAE-1": "passed", "test_theirs.test_gae.gae::GAE-2": "failure",
                        "test_theirs.test_gae.gae::GAE-9": "passed", "test_theirs.test_gae.gae::GAE-11": "xfailed",
                        "test_theirs.test_bug.gae::GAE-1": "failure", "test_theirs.test_bug.gae::GAE-3": "failure"}, out
    assert "[XPASS(strict)] thought to fail" in out  # a declared failure that passes fails the run
    assert "XFAIL test_theirs.py::test_gae::gae::GAE-11 - we do not validate NaN" in out or "1 xfailed" in out
    xml = (root / "junit.xml").read_text()
    assert '<property name="category" value="validation" />' in xml and 'name="contract_version"' in xml
    assert "[GAE-1] advantages" in out and "(maths clause of gae 1.1)" in out
    assert "replay: pytest test_theirs.py::test_bug::gae::GAE-1 (a pinned example: it runs first)" in out
    assert "or: rlspec check gae --impl float32_gamma --clause GAE-1" in out
    bug = re.search(r"replay: pytest (\S+) --rlspec-reproduce (\S+)", out)
    assert bug and bug.group(1) == "test_theirs.py::test_bug::gae::GAE-3", out

    code, again, outcomes = _pytest(root, "--rlspec-reproduce", bug.group(2))
    assert code == 1 and outcomes == {"test_theirs.test_bug.gae::GAE-3": "failure"}, again  # only that clause
    assert "5 deselected" in again


def test_a_declaration_that_names_no_clause_fails_collection(tmp_path):
    root = _project(tmp_path, """
        import my_gae
        from rlspec.testing import conformance

        test_gae = conformance("gae", impl=my_gae, expected_failures={"GAE-99": "typo"})
        """)
    code, out, _ = _pytest(root)
    assert code == 2 and "expected_failures names 'GAE-99', which matches no clause of gae" in out, out


def test_the_plugin_loads_nothing_heavy_into_every_pytest_run():
    """pytest loads the plugin in every run where rlspec is installed: it must not import torch or Hypothesis."""
    code = "import sys, rlspec.pytest_plugin; print(sorted(m for m in ('torch', 'hypothesis') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
