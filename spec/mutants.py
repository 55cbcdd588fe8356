"""Mutation testing of reference/: how much of a wrong reference would the properties catch?

A small AST mutator makes one-change copies ("mutants") of ``reference/<contract>.py`` (for a contract whose
reference is not Python, a twin: room_env's Warp kernels); each mutant is
loaded by path in place of the reference (as ``rlspec check --impl file.py`` loads a user's module) and
the contract's properties run against it under the ``ci`` profile, in declaration order, stopping at the
first property that fails (the mutant is *killed* by that clause). A mutant that passes every property
*survives*: either a gap in the spec (add a property) or an *equivalent* mutant (no input can tell it
from the reference), listed with a one-line reason in ``benchmarks/kit/results/mutants/equivalent.txt``.

    python -m rlspec.spec.mutants [--contracts gae vtrace ...] [--max-per-contract N] [--jobs 2]

writes ``benchmarks/kit/results/mutants/kill_rate.json`` and ``kill_rate.md`` (a run over some contracts keeps the others'
results). ``nox -s mutants`` runs it over every contract whose reference lives in reference/, and room_env's
Warp twin.

Mutation operators (each applied at one site at a time): arithmetic swaps (+ -, * /, // /, ** *, also in
``x op= y``), comparison swaps (< <=, > >=, == !=, is / is not, in / not in), numeric constants (c → c+1,
c → 0, or 0 → 1), boolean constants flipped, ``and`` ↔ ``or``, unary minus / ``not`` dropped, min ↔ max
(builtins, ``torch.minimum``/``maximum``, ``.min``/``.max``, ``amin``/``amax``, ``clamp_min``/``clamp_max``,
``argmin``/``argmax``), ``.detach()`` / ``.clone()`` / ``.clamp*(...)`` / ``torch.clamp(x, ...)`` removed,
``log1p``/``expm1`` replaced by their naive forms (``log(1 + x)``, ``exp(x) - 1``), slice bounds ± 1, a
statement inside an ``if``/``else`` body removed, a bare call statement (``validate(...)``,
``x.scatter_add_(...)``) removed. Not mutated: docstrings, annotations, f-strings (error messages),
decorators and imports.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import importlib.util
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "kit" / "results" / "mutants"
EQUIVALENT_FILE = OUT / "equivalent.txt"
SURVIVOR_NOTES = OUT / "survivors.txt"  # why a survivor is not killed yet (not a claim of equivalence)
SEED = 20261123  # of the per-contract sample when --max-per-contract caps the mutants

# Clauses added for mutation testing: a mutant they kill is listed as "killed by a new clause".
ADDED_CLAUSES: tuple[str, ...] = (
    "TWOHOT-25", "TWOHOT-26", "REMA-10", "REMA-11", "REMA-12", "VTRACE-14", "MOD-11", "MOD-12", "LAG-16", "LAG-17",
    "LAG-18", "LAG-19", "NUM-24", "NUM-25", "NUM-26", "NUM-27", "NUM-28", "REPLAY-19", "REPLAY-20", "REPLAY-21",
    "REPLAY-22", "REPLAY-23", "SHAPE-19", "SHAPE-20", "SHAPE-21", "SHAPE-22", "PARITY-7", "PARITY-8", "PARITY-9",
    "PARITY-10", "PARITY-11", "TR-15", "TR-16",
)

# --------------------------------------------------------------------------------------------------
# The mutator
# --------------------------------------------------------------------------------------------------
BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
               ast.FloorDiv: ast.Div, ast.Pow: ast.Mult, ast.Mod: ast.FloorDiv}
CMP_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
MIN_MAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum", "amin": "amax",
           "amax": "amin", "clamp_min": "clamp_max", "clamp_max": "clamp_min", "argmin": "argmax",
           "argmax": "argmin", "clamp_min_": "clamp_max_", "clamp_max_": "clamp_min_"}
DROPPED_METHODS = {"detach", "clone", "clamp", "clamp_", "clamp_min", "clamp_max", "clip"}
NAIVE = {"log1p": "(lambda _a: torch.log(1 + _a))", "expm1": "(lambda _a: torch.exp(_a) - 1)"}


@dataclasses.dataclass(frozen=True)
class Mutation:
    index: int  # of the node in ast.walk order of the parsed source
    line: int
    col: int
    what: str  # e.g. "Add -> Sub"; with the location, the mutant's stable id
    apply: Callable[[ast.AST], ast.AST | None]  # the replacement node (None: remove the statement)

    def id(self, file: str) -> str:
        return f"{file}:{self.line}:{self.col} {self.what}"


def _name(op: type) -> str:
    return op.__name__


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _skipped(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, f-strings, decorators, imports."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                mark(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                mark(d)
            mark(getattr(node, "returns", None))
        if isinstance(node, ast.arg):
            mark(node.annotation)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, (ast.JoinedStr, ast.Import, ast.ImportFrom)):
            mark(node)
    return skip


def _candidates(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST | None]]]:
    """(description, replace) for every mutation of ``node`` itself."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP_SWAPS:
        new = BINOP_SWAPS[type(node.op)]

        def swap_op(n, new=new):
            n.op = new()
            return n
        yield f"{_name(type(node.op))} -> {_name(new)}", swap_op
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in CMP_SWAPS:
                new = CMP_SWAPS[type(op)]

                def swap_cmp(n, i=i, new=new):
                    n.ops[i] = new()
                    return n
                yield f"{_name(type(op))} -> {_name(new)}", swap_cmp
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
        targets = [v + 1, 0] if v != 0 else [1]
        for t in targets:
            yield f"constant {v!r} -> {type(v)(t)!r}", (lambda n, t=t: ast.Constant(type(v)(t)))
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield f"{node.value} -> {not node.value}", (lambda n: ast.Constant(not n.value))
    if isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And

        def swap_bool(n, new=new):
            n.op = new()
            return n
        yield f"{_name(type(node.op))} -> {_name(new)}", swap_bool
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)) \
            and not (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)):
        yield f"{_name(type(node.op))} dropped", (lambda n: n.operand)
    if isinstance(node, ast.Name) and node.id in ("min", "max"):
        yield f"{node.id} -> {MIN_MAX[node.id]}", (lambda n: ast.Name(MIN_MAX[n.id], n.ctx))
    if isinstance(node, ast.Attribute) and node.attr in MIN_MAX:
        def swap_attr(n):
            n.attr = MIN_MAX[n.attr]
            return n
        yield f".{node.attr} -> .{MIN_MAX[node.attr]}", swap_attr
    if isinstance(node, ast.Attribute) and node.attr in NAIVE:
        yield f"{node.attr} -> naive {NAIVE[node.attr]}", (lambda n: _expr(NAIVE[n.attr]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DROPPED_METHODS:
        f = node.func
        if isinstance(f.value, ast.Name) and f.value.id == "torch":  # torch.clamp(x, ...) -> x
            if node.args:
                yield f"torch.{f.attr}(x, ...) -> x", (lambda n: n.args[0])
        else:
            yield f".{f.attr}(...) removed", (lambda n: n.func.value)
    if isinstance(node, ast.Slice):
        for bound in ("lower", "upper"):
            b = getattr(node, bound)
            if b is None:
                continue
            for delta, op in ((1, ast.Add), (-1, ast.Sub)):
                def shift(n, bound=bound, op=op):
                    setattr(n, bound, ast.BinOp(getattr(n, bound), op(), ast.Constant(1)))
                    return n
                yield f"slice {bound} {'+' if delta > 0 else '-'} 1", shift
    if isinstance(node, ast.stmt) and parent is not None:
        in_guard = isinstance(parent, ast.If) and (node in parent.body or node in parent.orelse)
        bare_call = isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        if in_guard or bare_call:
            yield f"statement removed{' (in a guard)' if in_guard else ''}", (lambda n: None)


def mutations(source: str) -> list[Mutation]:
    tree = ast.parse(source)
    skip = _skipped(tree)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for what, apply in _candidates(node, parents.get(id(node))):
            found.append(Mutation(index, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), what, apply))
    return found


def mutant_source(source: str, m: Mutation) -> str:
    """The source with mutation ``m`` applied (re-parsed, so every mutant starts from the original)."""
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    target = nodes[m.index]
    parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
    parent = parents[id(target)]
    replacement = m.apply(copy.deepcopy(target))
    for field, value in ast.iter_fields(parent):
        if value is target:
            setattr(parent, field, replacement)
            break
        if isinstance(value, list) and any(v is target for v in value):
            i = next(i for i, v in enumerate(value) if v is target)
            if replacement is None:
                del value[i]
                if not value and field in ("body", "orelse") and not (isinstance(parent, ast.If) and field == "orelse"):
                    value.append(ast.Pass())
            else:
                value[i] = replacement
            break
    return ast.unparse(ast.fix_missing_locations(tree))


# --------------------------------------------------------------------------------------------------
# Running one mutant
# --------------------------------------------------------------------------------------------------
class MutantTimeout(BaseException):  # BaseException: no property's `except Exception` swallows it
    pass


def _on_alarm(signum, frame):
    raise MutantTimeout()


def first_failing_clause(contract, impl, profile: str = "ci", seed: int | None = None) -> tuple[str, str] | None:
    """(clause, message) of the first property that fails against ``impl`` under ``profile``, or None if all
    pass; with ``seed``, the profile's examples are drawn at random from that seed instead of derandomized (one
    "draw" of the same budget). No shrinking: a mutant needs one failing example, not the smallest."""
    import hypothesis
    from hypothesis import HealthCheck, Phase, example, given, settings
    from hypothesis.reporting import with_reporter

    base = settings.get_profile(profile)
    if seed is not None:
        base = settings(base, derandomize=False)

    def runner(prop):
        if prop.strategy is None:
            return lambda: prop.check(impl)
        n = base.max_examples if prop.max_examples is None else min(base.max_examples, prop.max_examples)

        @settings(base, max_examples=n, report_multiple_bugs=False, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=[*base.suppress_health_check, HealthCheck.filter_too_much])
        @given(case=prop.strategy)
        def run(case):
            prop.check(impl, **case)
        for ex in reversed(prop.examples):
            run = example(case=ex)(run)
        return run if seed is None else hypothesis.seed(seed)(run)

    for prop in contract.properties:
        run = runner(prop)
        try:
            with with_reporter(lambda _: None):
                run()
        except hypothesis.errors.Unsatisfiable as err:
            return prop.clause, f"could not run: {err}"
        except Exception as err:  # noqa: BLE001 - any failure of the property kills the mutant
            return prop.clause, f"{type(err).__name__}: {str(err)[:300]}"
    return None


def run_mutant(job: tuple) -> dict:
    """In a worker: load one mutant by path and run its contract's properties (under the job's profile, and
    seed if it has one). Returns the result row."""
    cid, mid, module_name, source, timeout, profile, seed = job
    from rlspec import registry

    contract = registry.load_contract(cid)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rlspec-mutant-") as tmp:
        path = Path(tmp) / f"{module_name}.py"
        path.write_text(source)
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(timeout)
        try:
            try:
                impl = registry.load_object(str(path))
            except Exception as err:  # noqa: BLE001 - a mutant that cannot even load is killed
                result = ("load", f"{type(err).__name__}: {err}")
            else:
                result = first_failing_clause(contract, impl, profile, seed)
        except MutantTimeout:
            result = ("timeout", f"still running after {timeout} s")
        finally:
            signal.alarm(0)
    status = "survived" if result is None else "killed"
    return dict(id=mid, status=status, clause=result[0] if result else None,
                message=result[1] if result else "", seconds=round(time.monotonic() - start, 2))


def run_isolated(job: tuple) -> dict:
    """``run_mutant`` in a process of its own. A mutant of native kernel code (room_env's Warp twin: a
    shifted index is an out-of-bounds write) can crash the interpreter; the crash then kills the mutant
    (clause "crash"), where in a shared worker it would take the pool's other work down with it."""
    mid, timeout = job[1], job[4]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rlspec-mutant-") as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job))
        try:
            proc = subprocess.run([sys.executable, "-m", "rlspec.spec.mutants", "--one", str(path)],
                                  capture_output=True, text=True, timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            proc = None
    seconds = round(time.monotonic() - start, 2)
    if proc is not None and proc.returncode == 0:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    why = (f"still running after {timeout + 120} s" if proc is None else
           f"the process died: {_exit_reason(proc.returncode)}; {proc.stderr.strip()[-200:]}")
    return dict(id=mid, status="killed", clause="timeout" if proc is None else "crash", message=why, seconds=seconds)


def _exit_reason(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


# --------------------------------------------------------------------------------------------------
# Contracts, equivalents, the report
# --------------------------------------------------------------------------------------------------
# Contracts whose reference is not Python mutate another implementation: room_env's reference is the Game Boy
# ROM (C compiled by sdcc, run in PyBoy), so its Warp twin is mutated; its properties run it on device "cpu".
MUTATED_TWIN: dict[str, str] = {"room_env": "fast-warp"}


def reference_file(cid: str) -> Path | None:
    """The file whose mutants run against ``cid``'s properties: reference/<cid>.py, or the twin named in
    MUTATED_TWIN; None for a contract with neither."""
    from rlspec import registry

    impls = registry.IMPLEMENTATIONS.get(cid, {})
    target = impls.get(MUTATED_TWIN[cid], "") if cid in MUTATED_TWIN else impls.get("reference", "")
    if cid not in MUTATED_TWIN and not target.startswith("rlspec.reference."):
        return None
    return Path(importlib.util.find_spec(target).origin) if target else None


def load_equivalents(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """``<mutant id> | <reason>`` per line ('#' comments); every entry needs a reason."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        mid, sep, reason = line.partition(" | ")
        if not sep or not reason.strip():
            raise ValueError(f"{path}:{n}: expected '<mutant id> | <reason>', got {line!r}")
        out[mid.strip()] = reason.strip()
    return out


def plan(cid: str, cap: int | None, seed: int) -> tuple[str, list[tuple[str, str]], int]:
    """(relative file, [(mutant id, source)], total mutants before sampling)."""
    path = reference_file(cid)
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else f"reference/{path.name}"
    source = path.read_text()
    muts = mutations(source)
    total = len(muts)
    if cap is not None and total > cap:
        muts = sorted(random.Random(f"{seed}:{cid}").sample(muts, cap), key=lambda m: m.index)
    ids = [m.id(rel) for m in muts]
    dup = {i for i in ids if ids.count(i) > 1}
    jobs = []
    for m, mid in zip(muts, ids):
        if mid in dup:  # two mutations of one kind at one position (rare): number them
            mid = f"{mid} #{m.index}"
        jobs.append((mid, mutant_source(source, m)))
    return rel, jobs, total


def summarize(cid: str, rel: str, total: int, rows: list[dict], equivalents: dict[str, str]) -> dict:
    for r in rows:
        if r["status"] == "survived" and r["id"] in equivalents:
            r.update(status="equivalent", reason=equivalents[r["id"]])
    n = {s: sum(r["status"] == s for r in rows) for s in ("killed", "equivalent", "survived")}
    considered = n["killed"] + n["survived"]
    dev_only = sum(r["status"] != "killed" and r.get("dev", {}).get("status") == "killed" for r in rows)
    drawn = [r for r in rows if "draws" in r]
    return dict(contract=cid, file=rel, mutants_total=total, mutants_run=len(rows), **n,
                kill_rate=round(n["killed"] / considered, 4) if considered else None, killed_at_dev_only=dev_only,
                fragile=sum(r["draws_killed"] < r["draws"] for r in drawn) if drawn else None,
                results=sorted(rows, key=lambda r: r["id"]))


README = Path(__file__).resolve().parents[1] / "README.md"
README_BEGIN, README_END = "<!-- mutants:begin -->", "<!-- mutants:end -->"


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "kill_rate.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "kill_rate.md").write_text(to_markdown(report))
    if README.exists() and README_BEGIN in README.read_text():
        README.write_text(with_summary(README.read_text(), report))


def totals(report: dict) -> dict:
    """Summed over every contract: mutants run and total, killed, equivalent, survived, killed at dev only."""
    keys = ("mutants_run", "mutants_total", "killed", "equivalent", "survived")
    tot = {k: sum(s[k] for s in report["contracts"].values()) for k in keys}
    tot["killed_at_dev_only"] = sum(s.get("killed_at_dev_only") or 0 for s in report["contracts"].values())
    return tot


def summary(report: dict) -> str:
    """The README's sentence on the last results, every number read from the report."""
    t = totals(report)
    considered = t["killed"] + t["survived"]
    rate = f"{100 * t['killed'] / considered:.1f}%" if considered else "no"
    return (f"{rate} of the non-equivalent mutants are killed at `ci` ({t['killed']:,} of {considered:,}; "
            f"{t['mutants_run']:,} of {t['mutants_total']:,} mutants run, {t['equivalent']} equivalent); of the "
            f"{t['survived']} that survive `ci`, {t['killed_at_dev_only']} die at `dev`.")


def with_summary(readme: str, report: dict) -> str:
    """readme with the text between the mutants markers replaced by summary(report)."""
    head, rest = readme.split(README_BEGIN, 1)
    return head + README_BEGIN + "\n" + summary(report) + "\n" + README_END + rest.split(README_END, 1)[1]


def to_markdown(report: dict) -> str:
    c = report["contracts"]
    lines = ["# Mutation testing of reference/", "",
             f"Generated by `{report['command']}`. Profile `{report['profile']}`; per-mutant timeout "
             f"{report['timeout_s']} s. {report['sampling']}", "",
             "| contract | file | mutants (run / total) | killed at ci | equivalent | survived ci | of those, killed "
             "at dev | kill rate at ci | ci kills not made by every random draw |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cid, s in c.items():
        rate = f"{100 * s['kill_rate']:.1f}%" if s["kill_rate"] is not None else "-"
        fragile = "-" if s.get("fragile") is None else str(s["fragile"])
        lines.append(f"| {cid} | {s['file']} | {s['mutants_run']} / {s['mutants_total']} | {s['killed']} | "
                     f"{s['equivalent']} | {s['survived']} | {s.get('killed_at_dev_only', '-')} | {rate} | {fragile} |")
    tot = totals(report)
    considered = tot["killed"] + tot["survived"]
    rate = f"{100 * tot['killed'] / considered:.1f}%" if considered else "-"
    lines.append(f"| **all** | | {tot['mutants_run']} / {tot['mutants_total']} | {tot['killed']} | "
                 f"{tot['equivalent']} | {tot['survived']} | {tot['killed_at_dev_only']} | **{rate}** | |")
    lines += ["", "Kill rate = killed / (killed + survived) under the `ci` profile (25 derandomized examples, what a "
              "downstream CI runs); equivalent mutants (no input can tell them from the reference) are listed in "
              "`benchmarks/kit/results/mutants/equivalent.txt` with a reason each. Every mutant that survives `ci` runs again under "
              "`dev` (200 examples, seeded): a kill there is a gap of the ci budget. With `--draws N`, every ci kill "
              "runs again on N random draws of the same budget: a kill that not every draw makes hangs on which "
              "examples the derandomized sample holds, not on a pinned edge case.", ""]
    rows = [r for s in c.values() for r in s["results"]]
    survivors = [r for r in rows if r["status"] == "survived"]
    notes = load_equivalents(SURVIVOR_NOTES)
    lines += ["## Survivors (not killed; not claimed equivalent)", ""] + \
             ([f"- `{r['id']}`" + (f": {notes[r['id']]}" if r["id"] in notes else "") for r in survivors]
              or ["none"]) + [""]
    added = [r for r in rows if r["status"] == "killed" and r["clause"] in report["added_clauses"]]
    lines += ["## Killed by clauses added for mutation testing", ""] + \
             ([f"- `{r['id']}`: {r['clause']}" for r in added] or ["none"]) + [""]
    eq = [r for r in rows if r["status"] == "equivalent"]
    lines += ["## Equivalent", ""] + ([f"- `{r['id']}`: {r['reason']}" for r in eq] or ["none"]) + [""]
    return "\n".join(lines)


def _write(out: Path, contracts: dict, equivalents: dict[str, str], meta: dict, by_contract: dict) -> None:
    from rlspec import registry

    order = [c for c in registry.CONTRACTS if c in contracts]
    stale = sorted(set(equivalents) - {r["id"] for s in contracts.values() for r in s["results"]})
    capped = {c: f"{s['mutants_run']} of {s['mutants_total']}" for c, s in contracts.items()
              if s["mutants_run"] < s["mutants_total"]}
    sampling = ("Every mutant was run (no sampling)." if not capped else
                "Sampled (a deterministic sample, random.Random(f'{seed}:<contract>').sample, seed "
                f"{SEED}; the rest were not run): " + ", ".join(f"{c} {n}" for c, n in capped.items()) + ".")
    report = dict(command="nox -s mutants", profile="ci", timeout_s=meta["timeout_s"], seed=meta["seed"],
                  sampling=sampling, added_clauses=list(ADDED_CLAUSES), stale_equivalents=stale,
                  runs=dict(last=meta, by_contract=by_contract), contracts={c: contracts[c] for c in order})
    write_report(report, out)
    print(f"wrote {out / 'kill_rate.json'} and {out / 'kill_rate.md'}", flush=True)
    if stale:
        print("equivalent.txt entries that match no mutant run (stale, or not run this time):\n  " + "\n  ".join(stale))


def _at_dev(pool, runner, cid: str, rows: list[dict], sources: dict[str, str], args) -> None:
    """Every mutant that survives ``ci`` run again under ``dev`` (200 examples, seeded): a kill there is a gap of
    the ci budget (which examples are drawn decides), recorded as the row's ``dev``."""
    survivors = [r for r in rows if r["status"] == "survived"]
    work = [(cid, r["id"], f"dev_{cid}_{i}", sources[r["id"]], args.timeout, "dev", args.seed)
            for i, r in enumerate(survivors) if r["id"] in sources]
    by_id = {r["id"]: r for r in rows}
    for out in pool.imap_unordered(runner, work):
        by_id[out["id"]]["dev"] = dict(status=out["status"], clause=out["clause"])


def _draws(pool, runner, cid: str, rows: list[dict], sources: dict[str, str], args) -> None:
    """Every mutant ci kills run again with ``args.draws`` random draws of the ci budget (25 examples from seeds
    seed+1 ...): ``draws_killed`` of ``draws`` says whether the kill holds whatever is drawn, or hangs on the
    derandomized sample (the clause's decisive inputs are not pinned)."""
    killed = [r for r in rows if r["status"] == "killed" and r["id"] in sources and r["clause"] not in ("load",)]
    work = [(cid, r["id"], f"draw_{cid}_{i}_{k}", sources[r["id"]], args.timeout, "ci", args.seed + 1 + k)
            for i, r in enumerate(killed) for k in range(args.draws)]
    counts = {r["id"]: 0 for r in killed}
    for out in pool.imap_unordered(runner, work):
        counts[out["id"]] += out["status"] == "killed"
    for r in killed:
        r.update(draws=args.draws, draws_killed=counts[r["id"]])


def main(argv: list[str] | None = None) -> int:
    from rlspec import registry

    ap = argparse.ArgumentParser(prog="python -m rlspec.spec.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--contracts", nargs="*",
                    help="default: every contract with a file to mutate (reference/, room_env's Warp twin)")
    ap.add_argument("--max-per-contract", type=int, default=None, help="deterministic sample (seeded) above this")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--jobs", type=int, default=2, choices=(1, 2))
    ap.add_argument("--timeout", type=int, default=120, help="seconds per mutant; a mutant past it is killed")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--report-only", action="store_true",
                    help="re-apply benchmarks/kit/results/mutants/equivalent.txt to the committed results and rewrite the report")
    ap.add_argument("--survivors-only", action="store_true",
                    help="rerun only the mutants the last results list as survived or equivalent (after adding "
                         "clauses); the others' rows are kept")
    ap.add_argument("--draws", type=int, default=0, metavar="N",
                    help="also run every ci kill with N random draws of the ci budget and record how many kill it "
                         "(a kill that not every draw makes hangs on which examples are drawn)")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # run_isolated's child: one job (JSON), one result
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_mutant(tuple(json.loads(args.one.read_text())))))
        return 0
    cids = args.contracts or [c for c in registry.CONTRACTS if reference_file(c) is not None]
    equivalents = load_equivalents()
    planned = {} if args.report_only else {cid: plan(cid, args.max_per_contract, args.seed) for cid in cids}
    if args.list:
        for cid, (rel, jobs, total) in planned.items():
            print(f"{cid}: {len(jobs)} of {total} mutants")
            for mid, _ in jobs:
                print(f"  {mid}")
        return 0
    path = args.out / "kill_rate.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    contracts = dict(old.get("contracts", {}))
    meta = dict(timeout_s=args.timeout, seed=args.seed, max_per_contract=args.max_per_contract,
                survivors_only=args.survivors_only)
    meta.update(old.get("runs", {}).get("last", {}) if args.report_only else {})
    if args.report_only:  # re-apply equivalent.txt to the results already there
        for cid, s in list(contracts.items()):
            rows = [dict(r, status="survived" if r["status"] == "equivalent" else r["status"]) for r in s["results"]]
            contracts[cid] = summarize(cid, s["file"], s["mutants_total"], rows, equivalents)
        _write(args.out, contracts, equivalents, meta, old.get("runs", {}).get("by_contract", {}))
        return 0
    by_contract = dict(old.get("runs", {}).get("by_contract", {}))
    ctx = multiprocessing.get_context("spawn")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    with ctx.Pool(args.jobs) as pool:
        for cid, (rel, jobs, total) in planned.items():
            t0 = time.monotonic()
            baseline = run_mutant((cid, "unmutated", f"unmutated_{cid}", reference_file(cid).read_text(), args.timeout,
                                   "ci", None))
            if baseline["status"] != "survived":  # the harness itself would kill everything
                raise SystemExit(f"{cid}: the unmutated reference fails {baseline['clause']}: {baseline['message']}")
            kept = {r["id"]: dict(r, status="survived" if r["status"] == "equivalent" else r["status"])
                    for r in contracts.get(cid, {}).get("results", [])} if args.survivors_only else {}
            work = [(cid, mid, f"mutant_{cid}_{i}", src, args.timeout, "ci", None) for i, (mid, src) in enumerate(jobs)
                    if kept.get(mid, {}).get("status", "survived") == "survived"]
            runner = run_isolated if cid in MUTATED_TWIN else run_mutant
            rows = list(pool.imap_unordered(runner, work))
            ran = {w[1] for w in work}
            rows += [kept[mid] for mid, _ in jobs if mid not in ran]  # killed before (a mutant new to the file runs)
            sources = dict(jobs)
            _at_dev(pool, runner, cid, rows, sources, args)
            if args.draws:
                _draws(pool, runner, cid, rows, sources, args)
            contracts[cid] = summarize(cid, rel, total, rows, equivalents)
            by_contract[cid] = dict(meta, seconds=round(time.monotonic() - t0))
            s = contracts[cid]
            print(f"{cid}: {s['killed']} killed, {s['equivalent']} equivalent, {s['survived']} survived of "
                  f"{len(rows)} ({time.monotonic() - t0:.0f} s)", flush=True)
            for r in s["results"]:
                if r["status"] == "survived":
                    print(f"  SURVIVED {r['id']}", flush=True)
            _write(args.out, contracts, equivalents, meta, by_contract)  # after each contract: a partial run counts
    return 0


if __name__ == "__main__":
    sys.exit(main())
