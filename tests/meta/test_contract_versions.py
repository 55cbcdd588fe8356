"""Contract versions: every contract is versioned and categorized, the lock holds (a changed contract cannot keep
its version unnoticed), and a pinned version is honoured or refused as spec/versions.py says."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rlspec import cli, registry
from rlspec.spec import versions
from rlspec.spec.core import CATEGORIES, ROBUSTNESS, Change, parse_version


def test_every_contract_has_a_version_categories_and_a_rationale_for_each_robustness_clause():
    for cid in registry.CONTRACTS:
        contract = registry.load_contract(cid)
        parse_version(contract.version)
        assert set(contract.categories) == set(contract.clauses), cid
        assert set(contract.categories.values()) <= set(CATEGORIES), cid
        for clause, category in contract.categories.items():
            if category == ROBUSTNESS:
                assert len(contract.rationale[clause]) > 80, (cid, clause)  # what the formula gives, why more


def test_the_lock_holds():
    lock = json.loads(versions.LOCK.read_text())
    assert versions.lock_problems(lock, versions.current()) == []


def test_the_lock_catches_a_changed_source_and_statements_changed_without_a_bump():
    now = versions.current()
    lock = versions.renew({}, now)
    edited = {**now, "gae": dict(now["gae"], source="0" * 16)}
    assert any(p.startswith("gae: spec or reference source changed") for p in versions.lock_problems(lock, edited))
    tightened = {**now, "gae": dict(now["gae"], statements="1" * 16)}
    assert any("without a new version" in p for p in versions.lock_problems(lock, tightened))
    version = now["gae"]["version"]
    assert versions.renew(lock, tightened)["gae"]["statements"][version] == now["gae"]["statements"]  # never replaced
    bumped = {**now, "gae": dict(now["gae"], version="2.0", statements="1" * 16)}
    renewed = versions.renew(lock, bumped)
    assert versions.lock_problems(renewed, bumped) == [] and set(renewed["gae"]["statements"]) == {version, "2.0"}


def _versioned(contract, *changes: Change):
    return dataclasses.replace(contract, changes=contract.changes + changes)


def test_a_pin_checks_the_clauses_of_its_version_and_refuses_what_it_cannot_honour():
    newer = registry.load_contract("gae")  # 1.1 added GAE-14
    assert newer.version == "1.1"
    clauses, skipped = versions.pinned_clauses(newer, "1.0")
    assert "GAE-14" not in clauses and skipped == {"GAE-14": "added in gae 1.1, after the pinned 1.0"}
    assert versions.pinned_clauses(newer, "1.1") == (list(newer.clauses), {})
    major = _versioned(newer, Change("2.0", "GAE-5 no longer demands overflow isolation", changed=("GAE-5",)))
    with pytest.raises(versions.VersionMismatch, match=r"(?s)a new major version since the pinned 1\.1.*2\.0: GAE-5 "
                                                       r"no longer .*\(changed: GAE-5\).*pin gae=2\.0"):
        versions.pinned_clauses(major, "1.1")
    with pytest.raises(versions.VersionMismatch, match="older than the pinned 1.2"):
        versions.pinned_clauses(newer, "1.2")


def test_cli_pins_and_categories(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli.main(["check", "gae", "--spec-version", "gae=1.0", "--category", "robustness", "--jobs", "1",
                     "--out", str(out)]) == 0
    table = json.loads((out / "report.json").read_text())["tables"][0]
    assert table["version"] == "1.1" and list(table["clauses"]) == ["GAE-12", "GAE-13"]
    assert table["not_checked"] == {"GAE-14": "added in gae 1.1, after the pinned 1.0"}
    assert "== gae 1.1 ==" in capsys.readouterr().out
    assert cli.main(["check", "gae", "--spec-version", "gae=3.0", "--out", str(out)]) == 2
    assert "older than the pinned 3.0" in capsys.readouterr().err
    assert cli.main(["check", "gae", "--spec-version", "vtrace=1.0", "--out", str(out)]) == 2
    assert "CONTRACT=MAJOR.MINOR with CONTRACT one of gae" in capsys.readouterr().err


def test_a_selection_that_leaves_nothing_to_check_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["check", "packed2", "--category", "robustness", "--out", str(tmp_path)]) == 2
    assert "nothing to check: no clause of packed2 is of category robustness" in capsys.readouterr().err


def test_a_spec_package_is_fingerprinted_with_every_module_of_it():
    """A contract whose spec is a package (numerics): an edit in any of its modules changes the fingerprint."""
    import importlib

    modules = [m.__name__ for m in versions._with_submodules(importlib.import_module("rlspec.spec.numerics"))]
    assert modules[0] == "rlspec.spec.numerics"
    assert {"rlspec.spec.numerics.losses", "rlspec.spec.numerics.normalizers", "rlspec.spec.numerics.guards"} <= set(
        modules)
