"""The third-party conformance table: the committed table is well-formed, complete and current (made at the
contracts' present versions, with no unjustified suspect clause in its census), and the table's classification
(partial support, declarations checked against the runner, the census) does what it says.

The adapters themselves need the pinned third parties (``nox -s thirdparty``); nothing here imports them.
"""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import torch

from rlspec import registry
from rlspec.reference import gae as reference_gae
from rlspec.thirdparty import ADAPTERS, KINDS, Declared, Unsupported
from rlspec.spec.versions import statement_fingerprint
from rlspec.thirdparty.table import COLUMNS, census, check_module, problems

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "benchmarks" / "kit" / "results" / "thirdparty"


def _declared_contracts(module: str) -> tuple[str, ...]:
    """``CONTRACTS`` of an adapter module, read from its source (importing it needs its library)."""
    path = ROOT / "thirdparty" / (module.rsplit(".", 1)[1] + ".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CONTRACTS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{path} declares no CONTRACTS")


def test_committed_table_is_well_formed_and_lists_every_adapter():
    table = json.loads((TABLE / "conformance.json").read_text())
    markdown = (TABLE / "conformance.md").read_text()
    assert {"meta", "adapters", "findings"} <= set(table)
    rows = {row["adapter"]: row for row in table["adapters"]}
    assert list(rows) == list(ADAPTERS), f"table rows {list(rows)}, adapters {list(ADAPTERS)}"
    for name, row in rows.items():
        assert "unavailable" not in row, f"{name} was unavailable when the table was made: {row['unavailable']}"
        assert row["module"] == ADAPTERS[name]
        assert tuple(row["contracts"]) == _declared_contracts(ADAPTERS[name]), name
        for cid, entry in row["contracts"].items():
            clauses = registry.load_contract(cid).clauses
            unknown = sorted(set(entry["clauses"]) - set(clauses))
            assert not unknown, f"{name} × {cid}: clauses the contract no longer has: {unknown} (regenerate the table)"
            assert entry["reproduce"] == f"rlspec check {cid} --impl {ADAPTERS[name]}"
            for clause, cell in entry["clauses"].items():
                assert cell["status"] in COLUMNS, (name, clause, cell)
                assert cell["status"] == "pass" or cell["reason"].strip(), (name, clause, cell)
                assert cell["category"] == registry.load_contract(cid).categories[clause], (name, clause)
            assert f"## {row['library']} × {cid} {entry['version']}" in markdown, (name, cid)
    assert not problems(table["adapters"], table["findings"]), problems(table["adapters"], table["findings"])
    assert {f["id"] for f in table["findings"]} == {"torchrl-float32-discounts", "omnisafe-pid-nan", "sheeprl-twohot"}


def test_committed_table_is_not_older_than_the_contracts_it_covers():
    """Each row was checked at its contract's present version and clause statements: a contract that moved on
    (a clause added, tightened or re-worded) makes the committed verdicts stale until `nox -s thirdparty` runs."""
    table = json.loads((TABLE / "conformance.json").read_text())
    for row in table["adapters"]:
        for cid, entry in row["contracts"].items():
            contract = registry.load_contract(cid)
            made = (entry.get("version"), entry.get("statements"))
            assert made == (contract.version, statement_fingerprint(contract)), (
                f"{row['adapter']} × {cid} was checked at {made}; the contract is now {contract.version} "
                f"({statement_fingerprint(contract)}): regenerate the table with nox -s thirdparty")
            assert list(entry["clauses"]) == list(contract.clauses), (row["adapter"], cid)


def test_the_census_flags_a_clause_every_adapter_fails_on_values_unless_justified():
    def cell(status, failure="", category="maths"):
        return dict(status=status, failure=failure, category=category, reason="r")

    rows = [dict(adapter=a, contracts={"gae": dict(clauses={
        "GAE-1": cell(s, f), "GAE-9": cell("accepts", "accepted silently", "validation")})})
        for a, s, f in (("a", "bug", "wrong value"), ("b", "difference", "wrong value"), ("c", "unsupported", ""))]
    entry = census(rows)["gae"]["GAE-1"]
    assert entry["suspect"] and entry["failed"] == ["a", "b"] and entry["unsupported"] == ["c"]
    assert any("gae GAE-1: every adapter that checks it fails on values" in p for p in problems(rows))
    assert not census(rows)["gae"]["GAE-9"]["suspect"]  # a validation clause: libraries that validate nothing
    rows[2]["contracts"]["gae"]["clauses"]["GAE-1"] = cell("pass")
    assert not census(rows)["gae"]["GAE-1"]["suspect"]  # one library meets it


def _adapter(gae, **declared: Declared) -> types.SimpleNamespace:
    return types.SimpleNamespace(LIBRARY="toy 0.0", CONTRACTS=("gae",), DECLARED=declared, gae=gae)


def test_partial_support_counts_unsupported_examples_and_checks_the_rest():
    def gae(reward, value, terminated, truncated, next_value, gamma, lam):
        if lam != 1.0:
            raise Unsupported(f"toy fixes λ = 1, got lam={lam!r}")
        return reference_gae.gae(reward, value, terminated, truncated, next_value, gamma, lam)

    cells = check_module(_adapter(gae), "toy")["contracts"]["gae"]["clauses"]
    assert cells["GAE-1"]["status"] == "pass" and cells["GAE-1"]["checked"] > 0
    assert cells["GAE-1"]["unsupported_examples"] > 0 and "λ = 1" in cells["GAE-1"]["partial"]
    # bad γ with λ = 0.95 only: every example of GAE-10's λ-valid half is unsupported, the rest must reject
    assert cells["GAE-11"]["status"] == "unsupported", cells["GAE-11"]


def test_declarations_are_checked_against_what_the_runner_finds():
    def float32_gamma(reward, value, terminated, truncated, next_value, gamma, lam):  # planted: γ in float32,
        g32 = float(torch.as_tensor(min(max(float(gamma), 0.0), 1.0), dtype=torch.float32))  # clamped silently
        return reference_gae.gae(reward, value, terminated, truncated, next_value, g32, lam)

    declared = dict(GAE_1=Declared("bug", "γ rounded to float32"), GAE_2=Declared("bug", "never happens"))
    module = _adapter(float32_gamma, **{k.replace("_", "-"): v for k, v in declared.items()})
    row = dict(adapter="toy", **check_module(module, "toy"))
    cells = row["contracts"]["gae"]["clauses"]
    assert cells["GAE-1"]["status"] == "bug" and cells["GAE-1"]["failure"] == "wrong value"
    assert cells["GAE-2"]["status"] == "stale"
    assert cells["GAE-3"]["status"] == "undeclared" and "wrong value" in cells["GAE-3"]["reason"]
    assert cells["GAE-10"]["status"] == "undeclared" and cells["GAE-10"]["failure"] == "accepted silently"
    found = problems([row])
    assert any("GAE-2: stale" in p for p in found) and any("GAE-3: undeclared" in p for p in found)


def test_declared_kinds_are_closed():
    assert KINDS == ("difference", "bug", "accepts", "unsupported")
    try:
        Declared("feature", "x")
    except ValueError as err:
        assert "kind" in str(err) and "feature" in str(err)
    else:
        raise AssertionError("Declared accepted an unknown kind")
