"""Each engine package is light to import (its config module and __init__ load no torch and no numpy: the
command line parses with them) and still hands out every name of its torch half, loaded on first use
(rlspec.engines.lazy): the same objects as the submodules', an unknown name an AttributeError naming it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

ENGINES = ("safe", "dreamer", "bonus")
PROBE = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted(m for m in ("torch", "numpy") if m in sys.modules)))
"""


def test_engine_packages_and_their_configs_import_no_torch():
    modules = [f"rlspec.engines.{e}{m}" for e in ENGINES for m in ("", ".config")] + ["rlspec.algos.config",
                                                                                     "rlspec.contracts.params"]
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("package, name, module", [
    ("safe", "run", "loop"), ("safe", "collect", "loop"), ("safe", "compare", "verbs"), ("safe", "evaluate", "verbs"),
    ("dreamer", "compare", "verbs"), ("dreamer", "LocalExecution", "local"),
    ("dreamer", "DeviceExecution", "device"), ("dreamer", "make_envs", "loop"),
    ("bonus", "run", "loop"), ("bonus", "World", "local"), ("bonus", "compare", "verbs"),
])
def test_a_torch_side_name_is_the_submodule_object(package, name, module):
    pkg = importlib.import_module(f"rlspec.engines.{package}")
    assert getattr(pkg, name) is getattr(importlib.import_module(f"rlspec.engines.{package}.{module}"), name)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    from rlspec.engines import dreamer

    with pytest.raises(AttributeError, match="'rlspec.engines.dreamer' has no attribute 'no_such_name'"):
        dreamer.no_such_name  # noqa: B018
    assert not hasattr(dreamer, "__no_such_dunder__")


@pytest.mark.parametrize("package", ENGINES)
def test_every_engine_package_has_the_one_layout(package):
    """config.py, loop.py, verbs.py, the contract adapters, and one module named for each ``execution`` value."""
    from pathlib import Path

    config = importlib.import_module(f"rlspec.engines.{package}.config")
    folder = Path(config.__file__).parent
    expected = {"__init__", "config", "loop", "verbs", "collector", "trainer", *config.EXECUTIONS}
    modules = {p.stem for p in folder.glob("*.py")}
    assert expected <= modules, sorted(expected - modules)
    assert modules - expected <= {"data_parallel"}, sorted(modules - expected)
