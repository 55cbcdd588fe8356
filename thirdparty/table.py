"""The cross-implementation conformance table: every adapter × every contract it declares, run by the
kit's own runner (``rlspec.spec.core.run_property`` and ``clause_outcome``, what ``rlspec check <contract>
--impl <adapter>`` runs), each clause classified and explained.

A clause's cell is one of

* ``pass``: every example the library can express passed (``partial`` notes how many it could not);
* ``difference`` / ``bug`` / ``accepts``: it failed, and the adapter declares why (rlspec.thirdparty);
* ``unsupported``: the library lacks the interface name, or could express none of the examples;
* ``undeclared``: it failed and the adapter does not say why, or fails otherwise than declared;
* ``stale``: the adapter declares a failure that no longer happens.

The last two are problems: the table is still written, and ``python -m rlspec.thirdparty`` exits 1.
Failures are also sorted by what the runner saw: a wrong value, bad input accepted silently, a weak
rejection (another exception type, or a message that does not name the argument) or a crash. Every cell
carries its clause's category (maths, robustness, validation), and the Markdown has a section per category.

Each row records the contract version (and a fingerprint of its clause statements) it was checked at: a
cpu_gate test fails when a contract has moved on since the committed table was made.

The census counts, per clause, the adapters that pass, fail (declared or not) or cannot express it. A maths
or robustness clause that every adapter checking it fails on values is *suspect*: a demand no independent
implementation meets may ask more than its formula. It is a problem unless the contract's ``rationale`` says
why the kit asks it anyway.

Examples an adapter cannot express (it raises :class:`rlspec.thirdparty.Unsupported`, directly or inside
a rejection check) are discarded with Hypothesis' ``reject()`` and counted, so the rest of the clause is
still checked. This lives here, not in the runner, until the runner has its own partial-support
declarations.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import re
from typing import Any

from hypothesis import HealthCheck, reject, settings

from rlspec import registry
from rlspec.spec.core import CATEGORIES, MATHS, PROFILES, ROBUSTNESS, Outcome, Property, clause_outcome, run_property
from rlspec.spec.versions import statement_fingerprint
from rlspec.thirdparty import ADAPTERS, Declared, Unsupported

PROFILE = "thirdparty"
# the ci profile (bounded, derandomized: the committed table reproduces bit for bit), with the health
# checks that discarded (unsupported) examples would trip switched off
settings.register_profile(PROFILE, **dict(PROFILES["ci"], suppress_health_check=list(HealthCheck)))

PROBLEMS = ("undeclared", "stale")
MESSAGE_CHARS = 400


def _unsupported_in(err: BaseException | None) -> Unsupported | None:
    """The Unsupported behind ``err``: itself, or the exception a rejection check turned into a violation."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, Unsupported):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


class NoExpressibleExample(Exception):
    """A fixed check (no strategy) whose one call the library cannot express."""


@dataclasses.dataclass
class Tally:
    """Per clause: examples checked, examples the library could not express and why."""

    checked: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unsupported: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    why: dict[str, str] = dataclasses.field(default_factory=dict)


def tolerant(prop: Property, *tallies: Tally) -> Property:
    """``prop`` with examples that raise Unsupported discarded (and counted in each tally) instead of failed."""

    def check(impl, **case):
        try:
            prop.check(impl, **case)
        except Exception as err:  # anything but Unsupported propagates unchanged
            cause = _unsupported_in(err)
            if cause is None:
                raise
            for tally in tallies:
                tally.unsupported[prop.clause] += 1
                tally.why.setdefault(prop.clause, str(cause))
            if prop.strategy is None:  # a fixed check: nothing else to try
                raise NoExpressibleExample(str(cause)) from None
            reject()
        for tally in tallies:
            tally.checked[prop.clause] += 1

    return dataclasses.replace(prop, check=check)


def run_tolerant(contract: Any, module: Any, tally: Tally) -> list[Outcome]:
    """``run_contract`` with every property tolerant: a property (one part of a clause) that can express none of
    its examples is unsupported, so the clause's other parts still decide it."""
    parts: dict[str, list[tuple[Property, Outcome]]] = {}
    for prop in contract.properties:
        own = Tally()
        out = run_property(tolerant(prop, tally, own), module, PROFILE, writes=contract.writes)
        if out.status == "fail" and own.unsupported[prop.clause] and not own.checked[prop.clause] and (
                "Unsatisfiable" in out.message or NoExpressibleExample.__name__ in out.message):
            out = Outcome(prop.clause, "unsupported", f"no expressible example: {own.why[prop.clause]}")
        parts.setdefault(prop.clause, []).append((prop, out))
    return [clause_outcome(parts[c]) for c in contract.clauses if c in parts]


RUNNER_KINDS = {"wrong": "wrong value", "accepted": "accepted silently", "weak": "weak rejection",
                "crashed": "crashed"}


def failure_kind(outcome: Outcome) -> str:
    """How a failed clause failed: the runner's own kind where it reports one, else read from its message
    (spec/core.py's wording)."""
    kind = getattr(outcome, "kind", "")
    if kind in RUNNER_KINDS:
        return RUNNER_KINDS[kind]
    message = outcome.message
    if "accepted silently" in message:
        return "accepted silently"
    if "but the message does not mention" in message or re.search(
            r"raised \w+ \(.*\), expected ValueError", message, re.S):
        return "weak rejection"
    if re.match(r"\[[\w-]+\] raised \w+", message):
        return "crashed"
    return "wrong value"


DECLARED_KINDS = {"bug": ("wrong value", "crashed"), "accepts": ("accepted silently", "weak rejection")}


def classify(outcome: Outcome, declared: Declared | None, tally: Tally) -> dict[str, Any]:
    clause = outcome.clause
    checked, skipped = tally.checked[clause], tally.unsupported[clause]
    cell: dict[str, Any] = {"checked": checked, "unsupported_examples": skipped}
    message = outcome.message.strip()
    # every example was one the library cannot express (the runner saw no example run, or a
    # "failure" that only says so)
    none_expressible = skipped and not checked and outcome.status != "missing" and (
        outcome.status != "fail" or "Unsatisfiable" in message or NoExpressibleExample.__name__ in message)
    if outcome.status == "partial":  # a name some of the clause's parts need is missing: the rest passed
        cell.update(status="unsupported" if declared and declared.kind == "unsupported" else "undeclared",
                    partial=message, reason=declared.reason if declared else f"{message}; the adapter does not "
                                                                               "declare it unsupported")
        return cell
    if outcome.status in ("missing", "unsupported") or none_expressible:
        cell.update(status="unsupported", reason=declared.reason if declared else
                    tally.why.get(clause) or f"{message} (undeclared)")
        if outcome.status == "missing" and not (declared and declared.kind == "unsupported"):
            cell.update(status="undeclared", reason=f"{message}; the adapter does not declare it unsupported")
        return cell
    if outcome.status == "pass":
        if skipped:
            cell["partial"] = tally.why[clause]
        if declared and declared.kind != "unsupported":
            cell.update(status="stale", reason=f"declared {declared.kind} ({declared.reason}), but the clause passes")
        elif declared and not skipped:
            cell.update(status="stale", reason=f"declared unsupported ({declared.reason}), but every example ran")
        else:
            cell["status"] = "pass"
        return cell
    kind = failure_kind(outcome)
    cell.update(failure=kind, message=_first_line(message))
    if declared is None:
        cell.update(status="undeclared", reason=f"{kind}: {_first_line(message, 200)}")
    elif declared.kind == "unsupported" or kind not in DECLARED_KINDS.get(declared.kind, (kind,)):
        cell.update(status="undeclared", reason=f"declared {declared.kind} ({declared.reason}), but observed {kind}")
    else:
        cell.update(status=declared.kind, reason=declared.reason)
    if skipped:
        cell["partial"] = tally.why[clause]
    return cell


def _first_line(message: str, limit: int = MESSAGE_CHARS) -> str:
    line = message.splitlines()[0] if message else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def check_adapter(name: str) -> dict[str, Any]:
    """{adapter, module, library, contracts: {contract: {reproduce, clauses: {clause: cell}}}}, or
    {adapter, module, unavailable: why} when the adapter (its library) cannot be imported."""
    target = ADAPTERS[name]
    try:
        module = importlib.import_module(target)
    except Exception as err:  # noqa: BLE001 - a library that cannot load is reported, not crashed on
        return {"adapter": name, "module": target, "unavailable": f"{type(err).__name__}: {err}"}
    return dict(adapter=name, **check_module(module, target))


def check_module(module: Any, target: str) -> dict[str, Any]:
    """Every contract ``module.CONTRACTS`` names, run on ``module`` and classified with its declarations."""
    row: dict[str, Any] = {"module": target, "library": module.LIBRARY, "contracts": {}}
    for cid in module.CONTRACTS:
        contract = registry.load_contract(cid)
        tally = Tally()
        outcomes = run_tolerant(contract, module, tally)
        row["contracts"][cid] = {
            "version": contract.version, "statements": statement_fingerprint(contract),
            "reproduce": f"rlspec check {cid} --impl {target}",
            "clauses": {o.clause: dict(classify(o, module.DECLARED.get(o.clause), tally),
                                       category=contract.categories[o.clause]) for o in outcomes},
        }
    unknown = sorted(set(module.DECLARED) - {c for t in row["contracts"].values() for c in t["clauses"]})
    if unknown:
        row["unknown_declarations"] = unknown
    return row


FAILED_ON_VALUES = ("wrong value", "crashed")


def census(rows: list[dict]) -> dict[str, dict[str, dict[str, Any]]]:
    """contract -> clause -> {category, pass, fail, declared, unsupported (adapters), suspect, justified}: how
    every adapter that checks the clause fares. ``suspect``: a maths or robustness clause that every adapter
    expressing it fails on values; ``justified``: the contract's rationale says why the kit asks it anyway."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        for cid, table in row.get("contracts", {}).items():
            for clause, cell in table["clauses"].items():
                entry = out.setdefault(cid, {}).setdefault(clause, dict(
                    category=cell.get("category", ""), passed=[], failed=[], declared=[], unsupported=[],
                    on_values=[]))
                status = cell["status"]
                group = {"pass": "passed", "unsupported": "unsupported"}.get(status, "failed")
                entry[group].append(row["adapter"])
                if status in ("difference", "bug", "accepts"):
                    entry["declared"].append(row["adapter"])
                if group == "failed" and cell.get("failure") in FAILED_ON_VALUES:
                    entry["on_values"].append(row["adapter"])
    for cid, clauses in out.items():
        rationale = registry.load_contract(cid).rationale
        for clause, entry in clauses.items():
            expressing = entry["passed"] + entry["failed"]
            entry["suspect"] = bool(entry["category"] in (MATHS, ROBUSTNESS) and expressing
                                    and len(entry["on_values"]) == len(expressing))
            entry["justified"] = bool(rationale.get(clause))
    return out


def problems(rows: list[dict], findings: list[dict] = ()) -> list[str]:
    out = [f"finding {f['id']} not reproduced: {f['summary']}" for f in findings if not f["verified"]]
    out += [f"{cid} {clause}: every adapter that checks it fails on values ({', '.join(e['on_values'])}) and the "
            "contract gives no rationale for asking it" for cid, clauses in census(rows).items()
            for clause, e in clauses.items() if e["suspect"] and not e["justified"]]
    for row in rows:
        if "unavailable" in row:
            out.append(f"{row['adapter']}: unavailable ({row['unavailable']})")
            continue
        out += [f"{row['adapter']}: declarations for clauses it never checks: {row['unknown_declarations']}"] \
            if row.get("unknown_declarations") else []
        for cid, table in row["contracts"].items():
            out += [f"{row['adapter']} {clause}: {cell['status']}: {cell['reason']}"
                    for clause, cell in table["clauses"].items() if cell["status"] in PROBLEMS]
    return out


def build(names: list[str] | None = None) -> list[dict]:
    return [check_adapter(n) for n in (names or list(ADAPTERS))]


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------
COLUMNS = ("pass", "difference", "bug", "accepts", "unsupported", "undeclared", "stale")
HEADINGS = {"pass": "passed", "difference": "documented differences", "bug": "bugs",
            "accepts": "accepts bad input", "unsupported": "unsupported", "undeclared": "undeclared",
            "stale": "stale"}


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def counts(clauses: dict[str, dict], category: str | None = None) -> dict[str, int]:
    return {c: sum(cell["status"] == c for cell in clauses.values() if category in (None, cell.get("category")))
            for c in COLUMNS}


def _grouped(clauses: dict[str, dict]) -> list[str]:
    """One line per (status, reason): clauses failing for one reason are listed together; a bug shows the
    runner's evidence (its first clause's message)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for clause, cell in clauses.items():
        if cell["status"] != "pass":
            groups.setdefault((cell["status"], cell.get("failure", ""), cell["reason"]), []).append(clause)
    lines = []
    for (status, failure, reason), names in groups.items():
        seen = f" (observed: {failure})" if failure else ""
        line = f"- **{', '.join(names)}** {status}{seen}: {reason}"
        if status == "bug":
            line += f" — e.g. `{_first_line(clauses[names[0]]['message'], 200)}`"
        lines.append(line)
    return lines


def _summary_tables(rows: list[dict]) -> list[str]:
    """A summary table per category: per library × contract, the clauses of that category by status."""
    lines = []
    for category, what in CATEGORIES.items():
        lines += ["", f"### {category.capitalize()}", "", f"{what.capitalize()}.", "",
                  "| library | contract | version | clauses | " + " | ".join(HEADINGS[c] for c in COLUMNS) + " |",
                  "|---|---|---|---|" + "---|" * len(COLUMNS)]
        for row in rows:
            if "unavailable" in row:
                lines.append(f"| {row['adapter']} | — | — | unavailable: {_md(row['unavailable'])} |"
                             + " |" * len(COLUMNS))
                continue
            for cid, table in row["contracts"].items():
                n = counts(table["clauses"], category)
                total = sum(n.values())
                if total:
                    lines.append(f"| {row['library']} | {cid} | {table['version']} | {total} | "
                                 + " | ".join(str(n[c]) if n[c] else "" for c in COLUMNS) + " |")
    return lines


def _census_table(rows: list[dict]) -> list[str]:
    lines = ["", "## Census: each clause across the libraries", "",
             "Per clause, the adapters that pass it, fail it (the declared ones in brackets) and cannot express "
             "it. A maths or robustness clause that every adapter expressing it fails on values is **suspect** "
             "unless its contract says why it asks that (`rlspec list CONTRACT` shows the rationale).", "",
             "| contract | clause | category | passed | failed | unsupported | verdict |",
             "|---|---|---|---|---|---|---|"]
    for cid, clauses in census(rows).items():
        for clause, e in clauses.items():
            failed = ", ".join(f"{a} (declared)" if a in e["declared"] else a for a in e["failed"])
            verdict = ("suspect, justified" if e["justified"] else "SUSPECT") if e["suspect"] else ""
            lines.append(f"| {cid} | {clause} | {e['category']} | {len(e['passed'])} | {failed or ''} | "
                         f"{len(e['unsupported']) or ''} | {verdict} |")
    return lines


def to_markdown(rows: list[dict], meta: dict[str, Any], findings: list[dict]) -> str:
    lines = ["# Third-party conformance", "",
             f"Generated by `nox -s thirdparty` ({meta['command']}); Hypothesis profile `{PROFILE}` "
             f"({meta['max_examples']} examples per property, derandomized); rlspec {meta['rlspec']}, "
             f"torch {meta['torch']}. Each row is one adapter in `thirdparty/` run over one contract (at the "
             "version shown) by the kit's runner; reproduce a row with the command shown (without the adapter's "
             "partial-support handling, its unsupported examples show there as failures).", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if k != "wheels")
             + "; wheels read as files: " + (", ".join(meta["versions"]["wheels"]) or "none") + ".", "",
             "Cells: **passed** — every example the library can express passed; **documented differences** — a "
             "convention of the library that the contract does not take; **bugs** — a wrong value or a crash; "
             "**accepts bad input** — accepted silently, or rejected without naming the argument; "
             "**unsupported** — the library has no such feature or can express none of the examples; "
             "**undeclared** / **stale** — the adapter's declarations disagree with what the runner found "
             "(`nox -s thirdparty` fails on these).", "", "## Summary by category"]
    lines += _summary_tables(rows)
    for row in rows:
        if "unavailable" in row:
            continue
        for cid, table in row["contracts"].items():
            lines += ["", f"## {row['library']} × {cid} {table['version']}", "", f"`{table['reproduce']}`", ""]
            lines += _grouped(table["clauses"])
            partial = [f"{clause} ({cell['checked']} checked, {cell['unsupported_examples']} unsupported: "
                       f"{cell['partial']})" for clause, cell in table["clauses"].items() if cell.get("partial")]
            if partial:
                lines.append("- partly expressible: " + "; ".join(partial))
            passed = [c for c, cell in table["clauses"].items() if cell["status"] == "pass"]
            lines.append(f"- passed: {', '.join(passed) if passed else 'none'}")
    lines += _census_table(rows)
    lines += ["", "## Findings of the outside run, measured again", ""]
    lines += [f"- **{f['library']}** — {f['claim']}: **{'verified' if f['verified'] else 'NOT reproduced'}**. "
              f"{f['summary']}" for f in findings]
    return "\n".join(lines) + "\n"
