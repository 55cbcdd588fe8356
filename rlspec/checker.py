"""The checker behind `rlspec check` and `rlspec list`: runs contracts' properties over implementations and
prints and writes the reports. Imported only by those verbs (it loads Hypothesis through rlspec.spec)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import signal
import sys
import textwrap
import time
from pathlib import Path

import torch

from rlspec import registry, report, supervise
from rlspec.spec.core import (
    CATEGORIES,
    CRASHED,
    HANG,
    Contract,
    Outcome,
    ReproduceError,
    case_keys,
    interface_text,
    read_token,
    run_contract,
    signatures_from_text,
    token_contract,
)
from rlspec.spec.versions import parse_pins, pinned_clauses
from rlspec.supervise import choose_triton
from rlspec.unsupported import UnsupportedCases, UnsupportedFileError, check_names
from rlspec.unsupported import load as load_unsupported


def load_contract(cid: str) -> Contract:
    """The contract, with its interface signatures read from its INTERFACE text if it declares none."""
    contract = registry.load_contract(cid)
    if contract.signatures:
        return contract
    text = interface_text(sys.modules[registry.CONTRACTS[cid]])
    return dataclasses.replace(contract, signatures=signatures_from_text(text))


def check(contract_ids: list[str], impl_target: str | None, profile: str, out_dir: Path, *,
          clauses: list[str] | None = None, categories: list[str] | None = None,
          unsupported_file: Path | None = None, seed: int | None = None, reproduce: str | None = None,
          jobs: int = 1, triton: str = "auto", junit: Path | None = None,
          spec_versions: list[str] | None = None, timeout: float = supervise.DEADLINE_S) -> int:
    """Check the contracts, ``jobs`` at a time in worker processes (exit status: rlspec.cli.EXIT_STATUS). The
    printed tables and the reports are the same for any ``jobs``."""
    choose_triton(triton)
    contracts = {cid: load_contract(cid) for cid in contract_ids}
    if clauses:
        unknown = [c for c in clauses if not any(c in k.clauses for k in contracts.values())]
        if unknown:
            return _usage(f"unknown clause {', '.join(unknown)}; {' '.join(contract_ids)} has "
                          f"{', '.join(c for k in contracts.values() for c in k.clauses)}")
    if reproduce is not None:
        try:
            contracts, clauses = _replayed(reproduce, contracts, clauses)
        except ReproduceError as err:
            return _usage(str(err))
    try:  # the choice of clauses: bad options are usage errors
        pins = parse_pins(spec_versions, list(contracts))
        selection = {cid: select(contract, clauses, categories, pins.get(cid)) for cid, contract in contracts.items()}
    except ValueError as err:  # VersionMismatch included
        return _usage(str(err))
    if not any(selected for selected, _ in selection.values()):
        return _usage(f"nothing to check: no clause of {', '.join(contracts)} is "
                      + " and ".join(filter(None, (f"in {', '.join(clauses)}" if clauses else "",
                                                   f"of category {', '.join(categories)}" if categories else "",
                                                   "in the pinned versions" if spec_versions else ""))))
    try:
        unsupported = (load_unsupported(unsupported_file, [c for cid in registry.CONTRACTS
                                                           for c in registry.load_contract(cid).clauses])
                       if unsupported_file else None)
        if unsupported is not None:
            check_names(unsupported, [c for selected, _ in selection.values() for c in selected],
                        lambda clause: _case_keys(contracts, clause))
        tasks = [Task(cid, _targets(cid, impl_target), profile, selected, skipped, unsupported, unsupported_file,
                      seed, reproduce) for cid, (selected, skipped) in selection.items() if selected]
        tables = run_tasks(tasks, jobs, triton, timeout)
    except (UnsupportedFileError, ReproduceError) as err:
        return _usage(str(err))
    except supervise.CheckerError as err:
        print(f"rlspec check: internal error in rlspec itself (please report it with this text):\n{err}",
              file=sys.stderr)
        return 1
    except supervise.Interrupted as stop:
        md, _ = report.write(stop.tables, out_dir, profile)
        print(f"rlspec check: interrupted ({signal.Signals(stop.signum).name}): {len(stop.tables)} of {len(tasks)} "
              f"contracts finished; their tables are above and in {md}", file=sys.stderr)
        return 128 + stop.signum
    try:
        earlier = report.replaced(out_dir)
        md, js = report.write(tables, out_dir, profile)
        print(f"\nreport: {md} and {js}" + (f" (they replace {earlier})" if earlier else ""))
        if junit is not None:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(report.to_junit(tables, profile))
            print(f"JUnit XML: {junit}")
    except OSError as err:  # a full disk, an unwritable folder
        print(f"rlspec check: error: the report could not be written ({err}); the tables above are complete",
              file=sys.stderr)
        return 1
    if unsupported is not None:
        print("unsupported (" + str(unsupported_file) + "):")
        for r in unsupported.summary():
            used = (f"{r['examples']} example{'s' * (r['examples'] != 1)} in " if r["examples"] else "") + \
                   (f"{', '.join(r['clauses'])}" if r["clauses"] else "matched nothing")
            print(f"  {r['rule']}  ({r['where']}): {used}")
    status = _summary(tables, impl_target)
    checked = [c for t in tables for c in t["clauses"]]
    dead = [r for r in (unsupported.rules if unsupported is not None else ()) if not r.clauses
            and any(r.covers(c) for c in checked)]
    for rule in dead:
        print(f"unsupported rule matched nothing it covers: {rule.text} ({rule.where}): remove it, or fix its "
              "condition (a declaration that matches nothing hides nothing and goes stale unseen)")
    return max(status, 1) if dead else status


def _case_keys(contracts: dict[str, Contract], clause: str) -> list[str]:
    """The case keys of every property of ``clause`` (what an --unsupported condition can read)."""
    return [k for c in contracts.values() for p in c.properties if p.clause == clause for k in case_keys(p)]


def _replayed(token: str, contracts: dict[str, Contract],
              clauses: list[str] | None) -> tuple[dict[str, Contract], list[str]]:
    """The one contract and clause a replay token belongs to; ReproduceError if they are not among those asked."""
    cid = token_contract(token)
    if cid not in contracts:
        raise ReproduceError(f"--reproduce: the token replays an example of contract {cid!r}; the command checks "
                             f"{', '.join(contracts)}")
    clause, _, _ = read_token(token, contracts[cid])
    if clauses and clause not in clauses:
        raise ReproduceError(f"--reproduce: the token replays {clause}, not {', '.join(clauses)}")
    return {cid: contracts[cid]}, [clause]


def select(contract: Contract, clauses: list[str] | None, categories: list[str] | None,
           pinned: str | None) -> tuple[list[str], dict[str, str]]:
    """(the clauses of ``contract`` to check, {clause left out by the pinned version: why}): those named (all if
    none), of the categories named (all if none), and under a pinned version only the clauses it had."""
    unknown = sorted(set(categories or ()) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"--category expects {', '.join(CATEGORIES)}, got {', '.join(unknown)}")
    allowed, skipped = pinned_clauses(contract, pinned) if pinned else (list(contract.clauses), {})
    chosen = [c for c in allowed if (not clauses or c in clauses)
              and (not categories or contract.categories[c] in categories)]
    return chosen, {c: why for c, why in skipped.items() if not clauses or c in clauses}


def _targets(cid: str, impl_target: str | None) -> list[tuple[str, str, bool]]:
    """(label, import target, registered) of each implementation to check: --impl, else the registry's."""
    if impl_target:
        return [(impl_target, impl_target, False)]
    return [(name, target, True) for name, target in registry.IMPLEMENTATIONS.get(cid, {}).items()]


@dataclasses.dataclass(frozen=True)
class Task:
    """One contract to check: everything a worker process needs (picklable)."""
    contract: str
    targets: list[tuple[str, str, bool]]
    profile: str
    clauses: list[str]  # the clauses to check
    not_checked: dict[str, str]  # clauses left out by a pinned version, and why
    unsupported: UnsupportedCases | None
    unsupported_file: Path | None
    seed: int | None
    reproduce: str | None


def run_tasks(tasks: list[Task], jobs: int, triton: str, timeout: float = supervise.DEADLINE_S) -> list[dict]:
    """Each task's table, in the order of ``tasks``, each printed once it and those before it are done. The tasks
    run in up to ``jobs`` supervised worker processes (rlspec/supervise.py: a spawned interpreter each, sharing
    out torch's threads), so that an implementation that exits, crashes or hangs is a reported outcome; the rules
    of an --unsupported file count what every worker matched."""
    workers = max(1, min(jobs, len(tasks)))
    threads = max(1, torch.get_num_threads() // workers)  # more threads than cores: each op spins and crawls
    # each worker counts on its own copy of the rules (all still at zero here), added up as each job finishes
    work = [supervise.Job(dataclasses.replace(task, unsupported=copy.deepcopy(task.unsupported)), i, len(tasks))
            for i, task in enumerate(tasks)]

    def table(job: supervise.Job) -> dict:
        task = tasks[job.index]
        if task.unsupported is not None and job.rules is not None:
            task.unsupported.add(job.rules)
        contract = load_contract(task.contract)
        out = report.build(contract.id, contract.version, {c: contract.clauses[c] for c in task.clauses},
                           dict(contract.categories), [job.entries[t] for t in sorted(job.entries)], task.not_checked)
        result = ", ".join(f"{n} {label}" for label, n in report.failures(out).items()) or "no violation"
        _progress(f"{task.contract} finished in {time.monotonic() - job.started:.1f} s: {result}")
        return out

    return supervise.supervise(work, workers, triton, threads, timeout, _run_clause, _resolve, table, _ended_cell,
                               _print_table, lambda job: _progress(f"{job.task.contract} started ({job.index + 1} of "
                                                                   f"{job.total})"),
                               forward=(UnsupportedFileError, ReproduceError))


def _command(task: Task, target: str) -> list[str]:
    """The `rlspec check` command that checks ``target`` as this task does."""
    return ["rlspec", "check", task.contract, "--impl", target] + \
        (["--unsupported", str(task.unsupported_file)] if task.unsupported_file else []) + \
        (_rom_flags() if task.contract == "gb_emulator" else [])


def _rom_flags() -> list[str]:
    """gb_emulator's --rom / --rom-frames (rlspec/cli.py hands them over in the environment), for its commands."""
    from rlspec.contracts import gb_emulator

    paths = gb_emulator.user_roms()
    return [f for p in paths for f in ("--rom", str(p))] + (["--rom-frames", str(gb_emulator.user_frames())]
                                                           if paths else [])


def _resolve(label: str, target: str, registered: bool) -> registry.Resolved:
    """registry.resolve, with a module that calls sys.exit while it is imported an error, not the worker's end."""
    try:
        return registry.resolve(label, target, registered)
    except SystemExit as err:
        return registry.Resolved(label, target, error=f"SystemExit({err.code!r}): the module calls sys.exit while "
                                                      "it is imported")


def _run_clause(task: Task, resolved: registry.Resolved, clause: str, beat) -> dict:
    """In a worker: one clause against one implementation, ``beat()`` before every example; an implementation
    that raises SystemExit or KeyboardInterrupt (sys.exit in a function) crashed that clause."""
    contract = _beating(load_contract(task.contract), beat)
    try:
        outcomes = run_contract(contract, resolved.impl, task.profile, clauses=[clause], unsupported=task.unsupported,
                                seed=task.seed, reproduce=task.reproduce)
    except (SystemExit, KeyboardInterrupt) as err:
        code = f"({err.code!r})" if isinstance(err, SystemExit) else ""
        outcomes = [Outcome(clause, "fail", f"[{clause}] the implementation raised {type(err).__name__}{code} "
                                            "(a sys.exit or an interrupt inside its code)", CRASHED, tried=1, failed=1,
                            kinds={CRASHED: 1}, reproduce=("--clause", clause))]
    return report.cell(outcomes[0], contract.categories[clause], _command(task, resolved.target))


def _beating(contract: Contract, beat) -> Contract:
    """``contract`` with ``beat()`` called before every example of every property (the worker's heartbeat)."""
    def wrap(check):
        def checked(impl, **case):
            beat()
            return check(impl, **case)
        return checked
    return dataclasses.replace(contract, properties=tuple(dataclasses.replace(p, check=wrap(p.check))
                                                          for p in contract.properties))


def _ended_cell(task: Task, target: str, clause: str, why: str, hung: bool) -> dict:
    """The cell of a clause whose worker ended (CRASH) or stopped making progress (HANG)."""
    kind = HANG if hung else CRASHED
    outcome = Outcome(clause, "fail", f"[{clause}] {why}", kind, tried=1, failed=1, kinds={kind: 1},
                      reproduce=("--clause", clause))
    return report.cell(outcome, load_contract(task.contract).categories[clause], _command(task, target))


def _progress(line: str) -> None:
    print(f"rlspec check: {line}", file=sys.stderr, flush=True)


def _print_table(table: dict) -> dict:
    print(report.to_text(table), flush=True)
    return table


def check_contract(contract: Contract, resolved: list[registry.Resolved], profile: str, clauses: list[str] | None,
                   unsupported: UnsupportedCases | None, unsupported_file: Path | None, seed: int | None,
                   reproduce: str | None, not_checked: dict[str, str] | None = None) -> dict:
    selected = [c for c in contract.clauses if not clauses or c in clauses]
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
            entry["clauses"] = {o.clause: report.cell(o, contract.categories[o.clause], command) for o in outcomes}
        results.append(entry)
    return report.build(contract.id, contract.version, {c: contract.clauses[c] for c in selected},
                        dict(contract.categories), results, not_checked)


def _summary(tables: list[dict], impl_target: str | None) -> int:
    """The last line(s): what failed to load, which contracts have violations (by kind), or that all pass."""
    broken = [f"{label}: {i['reason']}" for t in tables for label, i in t["implementations"].items()
              if i["status"] == "error"]
    bad = {t["contract"]: {k: n for k, n in report.failures(t).items() if k != "ERROR"} for t in tables}
    bad = {cid: counts for cid, counts in bad.items() if counts}
    where = {t["contract"]: ", ".join(f"{k} {n}" for k, (n, _) in report.by_category(t).items() if n)
             for t in tables}
    nothing = [f"{label} ({i['reason']})" for t in tables for label, i in t["implementations"].items()
               if impl_target and i["status"] == "unavailable"]
    for line in broken:
        print(f"FAILED TO LOAD {line}")
    if bad:
        print("violations in: " + "; ".join(f"{cid} (" + ", ".join(f"{n} {label}" for label, n in counts.items())
                                            + f"; by category: {where[cid]})" for cid, counts in bad.items()))
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
    """Every contract's version, interface and clauses by category; with CONTRACT, its signatures (attributes,
    defaults), the case keys each clause draws (for --unsupported conditions), why each robustness clause asks
    more than the formula, its changelog and its implementations."""
    for contract_id in ([cid] if cid else registry.CONTRACTS):
        contract = load_contract(contract_id)
        impls = registry.IMPLEMENTATIONS.get(contract_id, {})
        if not cid:
            print(f"{contract_id} {contract.version}: interface {', '.join(contract.interface)}; implementations "
                  f"{', '.join(impls)}")
            for category, clauses in by_category(contract):
                print(f"  {category}:")
                for clause in clauses:
                    print(f"    {clause}: {contract.clauses[clause]}")
            continue
        print(f"{contract_id} {contract.version} (module {registry.CONTRACTS[contract_id]})\n\nInterface (every "
              f"implementation provides these names; a missing one fails only the clauses that use it):")
        for name, text in interface_signatures(contract).items():
            print(textwrap.indent(text, "  "))
        print("\nClauses by category (the case keys each draws, for conditions in an --unsupported file):")
        props = {}
        for prop in contract.properties:
            props.setdefault(prop.clause, []).append(prop)
        for category, clauses in by_category(contract):
            print(f"  {category}: {CATEGORIES[category]}")
            for clause in clauses:
                keys = list(dict.fromkeys(k for p in props[clause] for k in case_keys(p)))
                uses = sorted({n for p in props[clause] for n in p.requires})
                print(f"    {clause} (since {contract.since(clause)}): {contract.clauses[clause]}\n"
                      f"        uses {', '.join(uses) or '-'}; case keys: {', '.join(keys) or '- (a fixed check)'}")
                if clause in contract.rationale:
                    print(textwrap.fill(f"why: {contract.rationale[clause]}", 116, initial_indent=" " * 8,
                                        subsequent_indent=" " * 8))
        print("\nChangelog:")
        for change in reversed(contract.changes):
            print(f"  {change.version}: {change.text}")
        print("\nImplementations:")
        for name, target in impls.items():
            print(f"  {name}: {target}")
    if not cid:
        print("\n`rlspec list CONTRACT` shows the signatures, attributes and defaults of its interface, why each "
              "robustness clause asks more than the formula, and the changelog.")
    return 0


def by_category(contract: Contract) -> list[tuple[str, list[str]]]:
    return [(k, [c for c in contract.clauses if contract.categories[c] == k]) for k in CATEGORIES
            if k in contract.categories.values()]


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
