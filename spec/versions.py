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

``python -m rlspec.spec.versions --lock`` records each contract's version, a fingerprint of its spec and
reference sources and, per version, a fingerprint of its clause statements and categories in
``tests/meta/contract_versions.json``. A cpu_gate test fails when a source changed and the lock was not renewed
(renewing it is the moment to bump the version with a changelog line, or to decide the change keeps every
verdict), and when the statements changed while the version stayed (the lock refuses to record that).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import pkgutil
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
    """sha256 of the contract's spec module (every module of it, where it is a package) and its registered
    reference implementation's source."""
    from rlspec import registry

    modules = [registry.CONTRACTS[contract_id]]
    if "reference" in registry.IMPLEMENTATIONS.get(contract_id, {}):
        modules.append(registry.IMPLEMENTATIONS[contract_id]["reference"].partition(":")[0])
    digest = hashlib.sha256()
    for name in modules:
        for module in _with_submodules(importlib.import_module(name)):
            digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


def _with_submodules(module) -> list:
    """The module and, for a package, each of its submodules in name order."""
    if not hasattr(module, "__path__"):
        return [module]
    names = sorted(m.name for m in pkgutil.walk_packages(module.__path__, module.__name__ + "."))
    return [module, *(importlib.import_module(n) for n in names)]


def current() -> dict[str, dict[str, str]]:
    """contract -> its version, source fingerprint and statement fingerprint, as they are now."""
    from rlspec import registry

    return {cid: dict(version=registry.load_contract(cid).version, source=source_fingerprint(cid),
                      statements=statement_fingerprint(registry.load_contract(cid))) for cid in registry.CONTRACTS}


def lock_problems(lock: dict, now: dict) -> list[str]:
    """Why the lock does not hold ``now``: a source changed since it was renewed, a version it does not know, or
    clause statements that changed while the version stayed."""
    out = []
    for cid, cur in now.items():
        held = lock.get(cid)
        if held is None:
            out.append(f"{cid}: not in the lock (a new contract: renew the lock)")
            continue
        before = held["statements"].get(cur["version"])
        if before is not None and before != cur["statements"]:
            out.append(f"{cid} {cur['version']}: clause statements or categories changed without a new version: "
                       "bump it (a clause added: minor; made stricter or changed: major) with a changelog line")
        elif held["version"] != cur["version"] or held["source"] != cur["source"]:
            out.append(f"{cid}: spec or reference source changed since the lock ({held['version']}, now "
                       f"{cur['version']}): if a verdict can change, bump the version with a changelog line; then "
                       "renew the lock")
    return out


def renew(lock: dict, now: dict) -> dict:
    """The lock with ``now`` recorded; a statement fingerprint once recorded for a version is never replaced."""
    out = {}
    for cid, cur in now.items():
        statements = dict(lock.get(cid, {}).get("statements", {}))
        statements.setdefault(cur["version"], cur["statements"])
        out[cid] = dict(version=cur["version"], source=cur["source"], statements=statements)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlspec.spec.versions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", action="store_true", help=f"renew {LOCK.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    now = current()
    lock = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    bad = lock_problems(lock, now)
    for line in bad:
        print(line, file=sys.stderr)
    if args.lock:
        unbumped = [line for line in bad if "without a new version" in line]
        if unbumped:
            print("python -m rlspec.spec.versions: not renewed: bump those versions first", file=sys.stderr)
            return 2
        LOCK.write_text(json.dumps(renew(lock, now), indent=2) + "\n")
        print(f"renewed {LOCK}")
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
