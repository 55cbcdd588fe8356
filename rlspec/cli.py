"""`rlspec` command line: `rlspec check <contract>|all [--impl MODULE_OR_PATH]`, `rlspec list`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlspec import registry, report
from rlspec.spec.core import PROFILES, run_contract


def check(contract_ids: list[str], impl_target: str | None, profile: str, out_dir: Path) -> int:
    tables = []
    for cid in contract_ids:
        contract = registry.load_contract(cid)
        resolved = ([registry.resolve(impl_target, impl_target)] if impl_target
                    else registry.implementations(cid))
        results = {r.label: (r.error if r.error else run_contract(contract, r.impl, profile))
                   for r in resolved}
        table = report.build(cid, contract.clauses, results)
        print(report.to_text(table), flush=True)
        tables.append(table)
    md, js = report.write(tables, out_dir)
    bad = [t["contract"] for t in tables if report.failed(t)]
    unavailable = [t["contract"] for t in tables if impl_target and
                   any("unavailable" in v for v in t["implementations"].values())]
    print(f"\nreport: {md} and {js}")
    print("violations in: " + ", ".join(bad) if bad else "all clauses pass")
    return 1 if bad or unavailable else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rlspec", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)
    p_check = sub.add_parser("check", help="run a contract's properties over implementations")
    p_check.add_argument("contract", help=f"one of {', '.join(registry.CONTRACTS)}, or 'all'")
    p_check.add_argument("--impl", help="check this module instead of the registered ones: "
                                        "'pkg.module[:attr]' or 'path/to/file.py[:attr]'")
    p_check.add_argument("--profile", choices=sorted(PROFILES), default=None,
                         help="hypothesis profile (default: $HYPOTHESIS_PROFILE, else ci; dev and nightly dig deeper)")
    p_check.add_argument("--out", type=Path, default=Path("rlspec-report"),
                         help="where report.md and report.json go (default: ./rlspec-report)")
    sub.add_parser("list", help="list contracts, clauses and registered implementations")
    args = parser.parse_args(argv)

    if args.verb == "list":
        for cid in registry.CONTRACTS:
            contract = registry.load_contract(cid)
            print(f"{cid}: implementations {', '.join(registry.IMPLEMENTATIONS.get(cid, {}))}")
            for clause, text in contract.clauses.items():
                print(f"  {clause}: {text}")
        return 0
    ids = list(registry.CONTRACTS) if args.contract == "all" else [args.contract]
    unknown = [c for c in ids if c not in registry.CONTRACTS]
    if unknown:
        parser.error(f"unknown contract {unknown[0]!r}; known: {', '.join(registry.CONTRACTS)}, all")
    if args.impl and args.contract == "all":
        parser.error("--impl checks one module against one contract: name the contract")
    return check(ids, args.impl, args.profile or os.environ.get("HYPOTHESIS_PROFILE", "ci"), args.out)


if __name__ == "__main__":
    sys.exit(main())
