"""Contract versions: pins, and the lock that keeps a changed contract from keeping its version.

Each contract carries a version ``MAJOR.MINOR`` and a changelog (``Contract.changes``): a clause added is a
minor version, a clause made stricter or otherwise changed (or removed) a major one. A user pins the version
their expectations (expected failures, unsupported declarations) were written for, as array-api-tests pins
the standard's version:

* the same major, pinned minor ≤ the installed one: the clauses added after the pin are not checked (said
  so in the report), everything else is;
* a pinned major below the installed one: refused (:class:`VersionMismatch`, exit status 2), listing what
  changed since, so that the expectations are read again before the pin moves;
* a pin newer than the installed contract: refused (upgrade rlspec).

``python -m rlspec.spec.versions --lock`` records each contract's version with a fingerprint of its spec and
reference sources in ``tests/meta/contract_versions.json``; a cpu_gate test fails when a source changed and
the lock was not renewed, so a tightened clause cannot keep its version unnoticed (renewing the lock is the
moment to bump the version and add a changelog line, or to say that the change kept every verdict).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import sys
from pathlib import Path

from rlspec.spec.core import Contract, parse_version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "tests" / "meta" / "contract_versions.json"


class VersionMismatch(ValueError):
    """A pinned contract version this rlspec cannot honour; the message says why and what changed."""


def parse_pins(texts: list[str] | None, known: list[str]) -> dict[str, str]:
    """'CONTRACT=VERSION' texts -> {contract: version}; a ValueError naming the bad text."""
    pins = {}
    for text in texts or ():
        contract, sep, version = text.partition("=")
        if not sep or contract not in known:
            raise ValueError(f"--spec-version expects CONTRACT=MAJOR.MINOR with CONTRACT one of {', '.join(known)}, "
                             f"got {text!r}")
        parse_version(version)
        pins[contract] = version
    return pins


def pinned_clauses(contract: Contract, pinned: str) -> tuple[list[str], dict[str, str]]:
    """(the clauses to check under the pin, {clause left out: why}); VersionMismatch when the pin cannot be
    honoured."""
    want, have = parse_version(pinned), parse_version(contract.version)
    if want > have:
        raise VersionMismatch(f"{contract.id} is {contract.version} in this rlspec, older than the pinned {pinned}: "
                              "install a newer rlspec, or pin the version it has")
    if want[0] < have[0]:
        since = [f"  {c.version}: {c.text}" + (f" (changed: {', '.join(c.changed)})" if c.changed else "")
                 + (f" (added: {', '.join(c.added)})" if c.added else "")
                 for c in contract.changes if parse_version(c.version)[0] > want[0]]
        raise VersionMismatch(f"{contract.id} is {contract.version} in this rlspec, a new major version since the "
                              f"pinned {pinned}; what changed:\n" + "\n".join(since) +
                              f"\nread your expected failures against these changes, then pin {contract.id}="
                              f"{contract.version}")
    out: dict[str, str] = {}
    for clause in contract.clauses:
        if parse_version(contract.since(clause)) > want:
            out[clause] = f"added in {contract.id} {contract.since(clause)}, after the pinned {pinned}"
    return [c for c in contract.clauses if c not in out], out


def statement_fingerprint(contract: Contract) -> str:
    """sha256 of the clause ids, statements and categories: what a table of verdicts was made against."""
    text = json.dumps([[c, s, contract.categories[c]] for c, s in contract.clauses.items()], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def source_fingerprint(contract_id: str) -> str:
    """sha256 of the contract's spec module and its registered reference implementation's source."""
    from rlspec import registry

    modules = [registry.CONTRACTS[contract_id]]
    if "reference" in registry.IMPLEMENTATIONS.get(contract_id, {}):
        modules.append(registry.IMPLEMENTATIONS[contract_id]["reference"].partition(":")[0])
    digest = hashlib.sha256()
    for name in modules:
        digest.update(inspect.getsource(importlib.import_module(name)).encode())
    return digest.hexdigest()[:16]


def current() -> dict[str, dict[str, str]]:
    from rlspec import registry

    return {cid: dict(version=registry.load_contract(cid).version, source=source_fingerprint(cid))
            for cid in registry.CONTRACTS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlspec.spec.versions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", action="store_true", help=f"rewrite {LOCK.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    now = current()
    if args.lock:
        LOCK.write_text(json.dumps(now, indent=2) + "\n")
    print("\n".join(f"{cid} {v['version']} ({v['source']})" for cid, v in now.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
