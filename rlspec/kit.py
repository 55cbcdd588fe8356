"""The checker behind `rlspec check` and `rlspec list`: runs contracts' properties over implementations and
prints and writes the reports. Imported only by those verbs (it loads Hypothesis through rlspec.spec)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import textwrap
from pathlib import Path

from rlspec import registry, report
from rlspec.spec.core import (
    Contract,
    ReproduceError,
    case_keys,
    interface_text,
    run_contract,
    signatures_from_text,
)
from rlspec.unsupported import UnsupportedCases, UnsupportedFileError
from rlspec.unsupported import load as load_unsupported


def load_contract(cid: str) -> Contract:
    """The contract, with its interface signatures read from its INTERFACE text if it declares none."""
    contract = registry.load_contract(cid)
    if contract.signatures:
        return contract
    text = interface_text(sys.modules[registry.CONTRACTS[cid]])
    return dataclasses.replace(contract, signatures=signatures_from_text(text))


def check(contract_ids: list[str], impl_target: str | None, profile: str, out_dir: Path, *,
          clauses: list[str] | None = None, unsupported_file: Path | None = None, seed: int | None = None,
          reproduce: str | None = None) -> int:
    """Check the contracts; exit status 1 on any violation or implementation that fails to load (or when
    the one --impl asked for is unavailable here), 2 on a bad --clause / --unsupported / --reproduce."""
    contracts = {cid: load_contract(cid) for cid in contract_ids}
    if clauses:
        unknown = [c for c in clauses if not any(c in k.clauses for k in contracts.values())]
        if unknown:
            return _usage(f"unknown clause {', '.join(unknown)}; {' '.join(contract_ids)} has "
                          f"{', '.join(c for k in contracts.values() for c in k.clauses)}")
    if reproduce is not None and len(clauses or ()) != 1:
        return _usage("--reproduce replays one example of one clause: give exactly one --clause")
    try:
        unsupported = (load_unsupported(unsupported_file, [c for cid in registry.CONTRACTS
                                                           for c in registry.load_contract(cid).clauses])
                       if unsupported_file else None)
        tables = [check_contract(contract, impl_target, profile, clauses, unsupported, unsupported_file,
                                 seed, reproduce) for contract in contracts.values()
                  if not clauses or set(clauses) & set(contract.clauses)]
    except (UnsupportedFileError, ReproduceError) as err:
        return _usage(str(err))
    md, js = report.write(tables, out_dir)
    print(f"\nreport: {md} and {js}")
    if unsupported is not None:
        print("unsupported (" + str(unsupported_file) + "):")
        for r in unsupported.summary():
            used = (f"{r['examples']} example{'s' * (r['examples'] != 1)} in " if r["examples"] else "") + \
                   (f"{', '.join(r['clauses'])}" if r["clauses"] else "matched nothing")
            print(f"  {r['rule']}  ({r['where']}): {used}")
    return _summary(tables, impl_target)


def check_contract(contract: Contract, impl_target: str | None, profile: str, clauses: list[str] | None,
                   unsupported: UnsupportedCases | None, unsupported_file: Path | None, seed: int | None,
                   reproduce: str | None) -> dict:
    selected = [c for c in contract.clauses if not clauses or c in clauses]
    resolved = ([registry.resolve(impl_target, impl_target)] if impl_target
                else registry.implementations(contract.id))
    results = []
    for r in resolved:
        entry = dict(label=r.label, target=r.target, status="checked", reason="", clauses={})
        if r.error or r.unavailable:
            entry.update(status="error" if r.error else "unavailable", reason=r.error or r.unavailable)
        else:
            command = ["rlspec", "check", contract.id, "--impl", r.target] + \
                      (["--unsupported", str(unsupported_file)] if unsupported_file else [])
            outcomes = run_contract(contract, r.impl, profile, clauses=selected, unsupported=unsupported,
                                    seed=seed, reproduce=reproduce)
            entry["clauses"] = {o.clause: report.cell(o, command) for o in outcomes}
        results.append(entry)
    table = report.build(contract.id, {c: contract.clauses[c] for c in selected}, results)
    print(report.to_text(table), flush=True)
    return table


def _summary(tables: list[dict], impl_target: str | None) -> int:
    """The last line(s): what failed to load, which contracts have violations (by kind), or that all pass."""
    broken = [f"{label}: {i['reason']}" for t in tables for label, i in t["implementations"].items()
              if i["status"] == "error"]
    bad = {t["contract"]: {k: n for k, n in report.failures(t).items() if k != "ERROR"} for t in tables}
    bad = {cid: counts for cid, counts in bad.items() if counts}
    nothing = [f"{label} ({i['reason']})" for t in tables for label, i in t["implementations"].items()
               if impl_target and i["status"] == "unavailable"]
    for line in broken:
        print(f"FAILED TO LOAD {line}")
    if bad:
        print("violations in: " + "; ".join(f"{cid} (" + ", ".join(f"{n} {label}" for label, n in counts.items()) + ")"
                                            for cid, counts in bad.items()))
    if nothing:
        print("nothing checked: unavailable here: " + "; ".join(nothing))
    if not (broken or bad or nothing):
        n_unsupported = sum(c["status"] == "unsupported" for t in tables for i in t["implementations"].values()
                            for c in i.get("clauses", {}).values())
        print("all clauses pass" + (f" ({n_unsupported} declared unsupported)" if n_unsupported else ""))
    return 1 if broken or bad or nothing else 0


def _usage(message: str) -> int:
    print(f"rlspec check: error: {message}", file=sys.stderr)
    return 2


def list_contracts(cid: str | None) -> int:
    """Every contract's interface and clauses; with CONTRACT, its signatures (attributes, defaults), the
    case keys each clause draws (for --unsupported conditions) and its implementations."""
    for contract_id in ([cid] if cid else registry.CONTRACTS):
        contract = load_contract(contract_id)
        impls = registry.IMPLEMENTATIONS.get(contract_id, {})
        if not cid:
            print(f"{contract_id}: interface {', '.join(contract.interface)}; implementations {', '.join(impls)}")
            for clause, text in contract.clauses.items():
                print(f"  {clause}: {text}")
            continue
        print(f"{contract_id} (module {registry.CONTRACTS[contract_id]})\n\nInterface (every implementation "
              f"provides these names; a missing one fails only the clauses that use it):")
        for name, text in interface_signatures(contract).items():
            print(textwrap.indent(text, "  "))
        print("\nClauses (the case keys each draws, for conditions in an --unsupported file):")
        props = {}
        for prop in contract.properties:
            props.setdefault(prop.clause, []).append(prop)
        for clause, text in contract.clauses.items():
            keys = list(dict.fromkeys(k for p in props[clause] for k in case_keys(p)))
            uses = sorted({n for p in props[clause] for n in p.requires})
            print(f"  {clause}: {text}\n      uses {', '.join(uses) or '-'}; "
                  f"case keys: {', '.join(keys) or '- (a fixed check)'}")
        print("\nImplementations:")
        for name, target in impls.items():
            print(f"  {name}: {target}")
    if not cid:
        print("\n`rlspec list CONTRACT` shows the signatures, attributes and defaults of its interface.")
    return 0


def interface_signatures(contract: Contract) -> dict[str, str]:
    """Name -> signature text: the contract's own, else introspected from the reference implementation."""
    sigs = {n: contract.signatures[n] for n in contract.interface if n in contract.signatures}
    extra = {n: t + "   (optional)" for n, t in contract.signatures.items() if n not in contract.interface}
    undeclared = [n for n in contract.interface if n not in sigs]
    if undeclared and "reference" in registry.IMPLEMENTATIONS.get(contract.id, {}):
        ref = registry.load_object(registry.IMPLEMENTATIONS[contract.id]["reference"])
        for name in undeclared:
            sigs[name] = "# as the reference implementation defines it (the contract declares no signature)\n" + \
                         _introspect(name, getattr(ref, name))
    return {**{n: sigs.get(n, n) for n in contract.interface}, **extra}


def _introspect(name: str, obj: object) -> str:
    """name(signature) and, for a class, its public methods."""
    text = f"{name}{_signature(obj)}"
    if isinstance(obj, type):
        methods = [m for m, v in vars(obj).items() if callable(v) and (not m.startswith("_") or m == "__call__")]
        text += "".join(f"\n    .{m}{_signature(getattr(obj, m), drop_self=True)}" for m in methods)
    return text


def _signature(fn: object, drop_self: bool = False) -> str:
    sig = inspect.signature(fn)
    if drop_self:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return str(sig).replace("'", "")
