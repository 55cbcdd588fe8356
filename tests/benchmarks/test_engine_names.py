"""Every name a benchmark reads from an engine package (``from rlspec.engines import dreamer`` then
``dreamer.NAME``) exists: the engines load most names lazily, so a renamed one fails only when a long run
reaches it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _engine_names() -> list[tuple[str, str, str]]:
    """(file, engine, name) of every ``engine.NAME`` in benchmarks/, engine imported from rlspec.engines."""
    found = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        engines = {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   and node.module == "rlspec.engines" for a in node.names}
        found += [(path.relative_to(BENCHMARKS).as_posix(), engines[node.value.id], node.attr)
                  for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id in engines]
    return sorted(set(found))


def test_the_benchmarks_read_engine_names():
    assert {engine for _, engine, _ in _engine_names()} >= {"dreamer", "safe"}


@pytest.mark.parametrize("file,engine,name", _engine_names())
def test_each_engine_name_a_benchmark_reads_exists(file, engine, name):
    package = importlib.import_module(f"rlspec.engines.{engine}")
    assert hasattr(package, name), f"{file}: rlspec.engines.{engine} has no {name!r}"
