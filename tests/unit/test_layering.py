"""Runtime code never loads the test half, and imports point down the layers (README "Layout").

* Probe: importing every runtime module (rlspec.contracts, reference/, fast/, models, algos, envs,
  engines, runs, evidence, the registry) in a fresh interpreter loads none of hypothesis, pytest, pytest_benchmark.
* Layers: each runtime module's ``rlspec.*`` imports (module level or inside functions) stay within the
  layers its own layer may use.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import rlspec

ROOT = Path(__file__).resolve().parents[2]
TEST_ONLY = ("hypothesis", "pytest", "pytest_benchmark", "_pytest")

# layer -> the rlspec layers its modules may import (itself included)
LOWER = {
    "contracts": {"contracts"},
    "reference": {"contracts", "reference"},
    "fast": {"contracts", "reference", "fast"},
    "models": {"contracts", "reference", "fast", "models"},
    "semantics": {"contracts", "reference", "fast", "models", "semantics", "registry"},
    "algos": {"contracts", "reference", "fast", "models", "semantics", "algos", "registry"},
    "envs": {"contracts", "reference", "fast", "envs"},
    "runs": {"contracts", "runs"},
    "evidence": {"evidence"},
    "registry": {"registry"},
    "engines": {"contracts", "reference", "fast", "models", "semantics", "algos", "envs", "runs", "registry",
                "engines"},
}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "rlspec" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LOWER else None


def runtime_modules() -> list[str]:
    names = ["rlspec.registry"]
    for layer in LOWER:
        if layer == "registry":
            continue
        try:
            pkg = __import__(f"rlspec.{layer}", fromlist=["_"])
        except ModuleNotFoundError:
            continue
        names.append(pkg.__name__)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    return sorted(names)


def source_file(module: str) -> Path:
    spec = __import__("importlib.util").util.find_spec(module)
    return Path(spec.origin)


PROBE = """
import importlib, json, sys
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception as err:
        failed[name] = f"{type(err).__name__}: {err}"
print(json.dumps({"failed": failed, "loaded": sorted(m for m in sys.modules if m.split('.')[0] in %r)}))
""" % (TEST_ONLY,)


def test_runtime_imports_load_no_test_package():
    modules = runtime_modules()
    assert "rlspec.reference.gae" in modules and "rlspec.fast.gae_triton" in modules
    assert {"rlspec.models.actor_critic", "rlspec.algos.safe_ppo", "rlspec.envs.safety_gym", "rlspec.engines.safe",
            "rlspec.runs.config", "rlspec.runs.rundir", "rlspec.runs.plots"} <= set(modules)
    env = dict(os.environ, TRITON_INTERPRET="1")  # the Triton backends must import too
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert not report["failed"], f"runtime modules that do not import: {report['failed']}"
    assert not report["loaded"], f"importing the runtime modules loaded test-only packages: {report['loaded']}"


def _rlspec_imports(path: Path, module: str, modules: frozenset[str] = frozenset()) -> list[str]:
    """The rlspec modules and names ``module`` imports. ``from pkg import a, b`` gives pkg, pkg.a and pkg.b; pkg
    is left out where a and b are all in ``modules`` (submodules: the import is of them)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):  # annotations only: never executed
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node.body = []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            out += names if all(n in modules for n in names) else [base, *names]
    return [m for m in out if m.startswith("rlspec.") or m == "rlspec"]


def test_imports_point_down_the_layers():
    wrong = []
    for module in runtime_modules():
        layer = layer_of(module)
        for target in _rlspec_imports(source_file(module), module):
            t_layer = layer_of(target)
            if target.startswith(("rlspec.spec", "rlspec.golden_bridge", "rlspec.cli", "rlspec.report")):
                wrong.append(f"{module} imports {target} (test half or CLI)")
            elif t_layer is not None and t_layer not in LOWER[layer]:
                wrong.append(f"{module} ({layer}) imports {target} ({t_layer})")
    assert not wrong, "\n".join(wrong)


def test_every_runtime_package_has_a_layer():
    on_disk = {p.name for p in Path(rlspec.__file__).parent.iterdir() if (p / "__init__.py").exists()}
    assert on_disk <= set(LOWER), f"packages under rlspec/ without a layer in LOWER: {sorted(on_disk - set(LOWER))}"


def test_cli_loads_the_test_half_only_for_the_checker():
    """`rlspec train/eval/plot` import rlspec.cli: that must not load Hypothesis (rlspec.checker does, for
    check); nor torch: the command line parses (and answers --help, tests/unit/test_cli_help.py) before a
    verb loads it."""
    light = TEST_ONLY + ("torch", "numpy")
    code = ("import sys, rlspec.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in %r))" % (light,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
    from rlspec import cli
    from rlspec.spec.core import CATEGORIES, PROFILES
    assert set(cli.PROFILES) == set(PROFILES)
    assert cli.CATEGORIES == tuple(CATEGORIES)
    from rlspec import pytest_plugin
    assert set(pytest_plugin.PROFILES) == set(PROFILES)


def _import_graph() -> dict[str, set[str]]:
    """module -> the runtime modules it imports (module level or inside functions); `from pkg import mod`, mod a
    submodule, is an import of pkg.mod (the package's __init__ runs first whatever is imported from it)."""
    modules = frozenset(runtime_modules())
    return {m: {t for t in _rlspec_imports(source_file(m), m, modules) if t in modules and t != m} for m in modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_function_level_imports_included():
    cycles = _cycles(_import_graph())
    assert not cycles, "modules importing each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def _imported_roots(path: Path) -> set[str]:
    """The top-level names of every absolute import in ``path`` (module level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


PRODUCT = ("rlspec", "spec", "reference", "fast", "golden_bridge", "thirdparty", "tools")


def test_nothing_of_the_product_imports_the_benchmarks():
    """benchmarks/ may import rlspec; rlspec (and the kit's other folders) never import benchmarks."""
    wrong = [str(p.relative_to(ROOT)) for folder in PRODUCT for p in sorted((ROOT / folder).rglob("*.py"))
             if "benchmarks" in _imported_roots(p)]
    assert not wrong, f"product modules importing benchmarks: {wrong}"


def test_the_benchmarks_import_as_a_package_without_sys_path():
    """Ordinary package imports: no benchmark module edits sys.path to reach a sibling."""
    modules = sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(modules) > 20
    hacks = [str(p.relative_to(ROOT)) for p in modules if re.search(r"sys\.path\.(insert|append)", p.read_text())]
    assert not hacks, f"benchmark modules editing sys.path: {hacks}"
    missing = sorted({str(p.parent.relative_to(ROOT)) for p in modules if not (p.parent / "__init__.py").exists()})
    assert not missing, f"benchmark folders that are no package: {missing}"
