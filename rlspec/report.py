"""Clause × implementation tables: printed, and written as Markdown, JSON and JUnit XML.

A table (one per contract) is a dict::

    {"contract": "gae", "version": "1.0", "clauses": {"GAE-1": "statement", ...},
     "categories": {"GAE-1": "maths", ...}, "not_checked": {"GAE-13": "why"},
     "implementations": {LABEL: {"target": "path/or.module as given", "status": "checked" | "error" | "unavailable",
                                 "reason": "why it did not load (error, unavailable)",
                                 "clauses": {"GAE-1": CELL, ...}}}}

    CELL = {"status": "pass" | "fail" | "missing" | "partial" | "unsupported", "category": "maths" | "robustness" |
            "validation", "kind": "" | "wrong" | "accepted" | "weak" | "crashed" | "hang" | "mutated",
            "label": "PASS" | ..., "message", "tried", "failed", "failed_by_kind", "unsupported", "case", "reproduce"}

report.json is ``{"schema_version": SCHEMA_VERSION, "rlspec": version, "profile": name, "tables": [TABLE, ...]}``.
An implementation that fails to load is an error (a failure); one that cannot run on this machine is
unavailable (not a failure).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import shlex
from pathlib import Path
from typing import Sequence
from xml.etree import ElementTree

from rlspec import jsonio
from rlspec.spec.core import CATEGORIES, KINDS, Outcome

SCHEMA_VERSION = 1  # of report.json; raised when a key changes meaning or goes away

LABELS = {"pass": "PASS", "missing": "MISSING", "partial": "PARTIAL", "unsupported": "UNSUPPORTED",
          "wrong": "FAIL", "accepted": "ACCEPTS-BAD", "weak": "WEAK-REJECT", "crashed": "CRASH", "hang": "HANG",
          "mutated": "MUTATES-INPUT"}
LEGEND = {
    "FAIL": "wrong value",
    "ACCEPTS-BAD": "bad input accepted silently",
    "WEAK-REJECT": "bad input rejected, but not by a ValueError/TypeError naming the argument (a lesser "
                   "violation than accepting it)",
    "CRASH": "an unexpected exception inside the implementation, or it ended the checking process",
    "HANG": "no progress within the per-example deadline (--timeout)",
    "MUTATES-INPUT": "an input tensor changed in place by the implementation",
    "MISSING": "the interface name is absent",
    "PARTIAL": "the parts the implementation has passed; a name another part needs is absent",
    "UNSUPPORTED": "declared unsupported (--unsupported FILE)",
    "PASS*": "passes; some examples declared unsupported",
    "ERROR": "the implementation failed to load",
    "n/a": "unavailable on this machine",
}
FAILING = ("fail", "missing", "partial")  # cell statuses that fail the check


def rlspec_version() -> str:
    try:
        return importlib.metadata.version("rlspec")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def cell(outcome: Outcome, category: str, command: Sequence[str]) -> dict:
    """One clause's result; ``command`` is the `rlspec check ... --impl ...` that reproduces it."""
    label = LABELS[outcome.kind or outcome.status]
    if outcome.status == "pass" and outcome.unsupported:
        label = "PASS*"
    return dict(status=outcome.status, category=category, kind=outcome.kind, label=label, message=outcome.message,
                tried=outcome.tried, failed=outcome.failed, failed_by_kind=dict(outcome.kinds),
                unsupported=outcome.unsupported, case=outcome.case,
                reproduce=shlex.join([*command, *outcome.reproduce]) if outcome.reproduce else "")


def build(contract_id: str, version: str, clauses: dict[str, str], categories: dict[str, str], results: list[dict],
          not_checked: dict[str, str] | None = None) -> dict:
    """clauses: the clauses checked; results: one entry per implementation: dict(label, target, status,
    reason, clauses: {id: cell}); not_checked: clauses left out and why (a pinned contract version)."""
    return {"contract": contract_id, "version": version, "clauses": dict(clauses),
            "categories": {c: categories[c] for c in clauses}, "not_checked": dict(not_checked or {}),
            "implementations": {r["label"]: {k: v for k, v in r.items() if k != "label"} for r in results}}


def failures(table: dict) -> dict[str, int]:
    """How many clauses failed, by what they show (FAIL, CRASH, ...), plus ERROR per implementation that
    did not load."""
    counts: dict[str, int] = {}
    for impl in table["implementations"].values():
        if impl["status"] == "error":
            counts["ERROR"] = counts.get("ERROR", 0) + 1
        for c in impl.get("clauses", {}).values():
            if c["status"] in FAILING:
                counts[c["label"]] = counts.get(c["label"], 0) + 1
    return counts


def by_category(table: dict) -> dict[str, tuple[int, int]]:
    """category -> (clause cells failing, clause cells checked) over every checked implementation."""
    out = {k: [0, 0] for k in CATEGORIES}
    for impl in table["implementations"].values():
        for clause, c in impl.get("clauses", {}).items():
            counts = out[table["categories"][clause]]
            counts[1] += 1
            counts[0] += c["status"] in FAILING
    return {k: (bad, n) for k, (bad, n) in out.items() if n}


def failed(table: dict) -> bool:
    return bool(failures(table))


def _cell_label(impl: dict, clause: str) -> str:
    if impl["status"] == "error":
        return "ERROR"
    if impl["status"] == "unavailable":
        return "n/a"
    return impl["clauses"].get(clause, {}).get("label", "-")


def _counts(c: dict) -> str:
    """'7 of 25 examples failed (5 wrong value, 2 crashed)', '7 examples passed; 23 declared unsupported'."""
    parts = []
    if c["failed"]:
        by_kind = ", ".join(f"{n} {KINDS[k]}" for k, n in c["failed_by_kind"].items())
        parts.append(f"{c['failed']} of {c['tried']} examples failed" +
                     (f" ({by_kind})" if len(c["failed_by_kind"]) > 1 else ""))
    elif c["unsupported"] and not c["tried"]:
        return f"every example drawn ({c['unsupported']}) declared unsupported"
    elif c["unsupported"]:
        parts.append(f"{c['tried']} examples passed")
    if c["unsupported"]:
        parts.append(f"{c['unsupported']} declared unsupported")
    return "; ".join(parts)


def _details(table: dict) -> list[tuple[str, list[str]]]:
    """(headline, further lines) for every implementation or clause that is not a plain PASS."""
    out = []
    for label, impl in table["implementations"].items():
        if impl["status"] == "error":
            out.append((f"{label}: FAILED TO LOAD: {impl['reason']}", []))
        elif impl["status"] == "unavailable":
            out.append((f"{label}: unavailable here: {impl['reason']}", []))
        for clause, c in impl.get("clauses", {}).items():
            if c["label"] == "PASS":
                continue
            counts = _counts(c)
            head = f"{label} {clause} ({c['category']}) {c['label']}" + (f": {counts}" if counts else "")
            lines = [c["message"]] if c["message"] else []
            lines += [f"failing case: {c['case']}"] if c["case"] and " | inputs: " not in c["message"] else []
            lines += [f"reproduce: {c['reproduce']}"] if c["reproduce"] else []
            out.append((head, lines))
    return out


def _legend(table: dict) -> list[str]:
    seen = {_cell_label(i, c) for i in table["implementations"].values() for c in table["clauses"]}
    return [f"{k} = {v}" for k, v in LEGEND.items() if k in seen]


def _sections(table: dict) -> list[tuple[str, list[str]]]:
    """(category, its clauses in contract order) for the categories the table holds."""
    return [(k, [c for c in table["clauses"] if table["categories"][c] == k]) for k in CATEGORIES
            if k in table["categories"].values()]


def _summary(table: dict) -> str:
    """'maths 9/9 pass, robustness 0/1, validation 3/3' over every checked implementation's cells."""
    return ", ".join(f"{k} {n - bad}/{n} pass" for k, (bad, n) in by_category(table).items())


def _md(text: str) -> str:
    """Table-cell text: a '|' (as in |x|) would end the cell."""
    return text.replace("|", "\\|")


def to_markdown(table: dict) -> str:
    impls = table["implementations"]
    lines = [f"### {table['contract']} {table['version']}", ""]
    targets = [f"- `{label}`: {_md(i['target'])}" for label, i in impls.items() if i["target"] != label]
    lines += targets + [""] * bool(targets)
    lines += ["| clause | " + " | ".join(_md(i) for i in impls) + " |", "|---|" + "---|" * len(impls)]
    for category, clauses in _sections(table):
        lines.append(f"| **{category}** |" + " |" * len(impls))
        for clause in clauses:
            lines.append(f"| {clause}: {_md(table['clauses'][clause])} | " +
                         " | ".join(_cell_label(i, clause) for i in impls.values()) + " |")
    lines += ["", _summary(table)] if by_category(table) else []
    legend = _legend(table)
    if legend:
        lines += ["", "; ".join(legend)]
    lines += [f"- not checked: {c}: {why}" for c, why in table["not_checked"].items()]
    details = _details(table)
    if details:
        lines.append("")
        for head, more in details:
            lines.append(f"- **{head}**")
            lines += ["  " + ("`" + m + "`" if m.startswith("reproduce: ") else m).replace("\n", "\n  ") for m in more]
    return "\n".join(lines) + "\n"


def to_text(table: dict) -> str:
    impls = table["implementations"]
    width = max([len(c) + 2 for c in table["clauses"]] + [12]) + 2
    cols = [max(len(i), 11) + 2 for i in impls]
    out = [f"== {table['contract']} {table['version']} =="]
    out.append("clause".ljust(width) + "".join(i.ljust(w) for i, w in zip(impls, cols)).rstrip())
    for category, clauses in _sections(table):
        out.append(category)
        for clause in clauses:
            out.append((f"  {clause}".ljust(width) + "".join(_cell_label(i, clause).ljust(w)
                                                            for i, w in zip(impls.values(), cols))).rstrip())
    if by_category(table):
        out.append(_summary(table))
    legend = _legend(table)
    if legend:
        out.append("(" + "; ".join(legend) + ")")
    out += [f"  not checked: {c}: {why}" for c, why in table["not_checked"].items()]
    for head, more in _details(table):
        out.append("  " + head)
        out += ["      " + m.replace("\n", "\n      ") for m in more]
    return "\n".join(out)


def to_json(tables: list[dict], profile: str) -> str:
    written = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return jsonio.dumps(dict(schema_version=SCHEMA_VERSION, rlspec=rlspec_version(), profile=profile,
                             written_at=written, tables=tables))


def replaced(out_dir: Path) -> str | None:
    """What an earlier check left in ``out_dir`` (its contracts and when), which a new report replaces; None
    when there is none."""
    try:
        old = json.loads((out_dir / "report.json").read_text())
        contracts = ", ".join(t["contract"] for t in old["tables"])
    except (OSError, ValueError, KeyError, TypeError):
        return None if not (out_dir / "report.json").exists() else "an unreadable report.json"
    return f"the report of an earlier check ({contracts or 'no contract'}, written {old.get('written_at', '?')})"


def write(tables: list[dict], out_dir: Path, profile: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "report.md", out_dir / "report.json"
    md.write_text("# rlspec conformance report\n\n" + "\n".join(to_markdown(t) for t in tables))
    js.write_text(to_json(tables, profile))
    return md, js


# --------------------------------------------------------------------------------------------------
# JUnit XML: one <testsuite> per contract, one <testcase> per clause × implementation
# --------------------------------------------------------------------------------------------------
def _properties(parent: ElementTree.Element, **values: str) -> None:
    props = ElementTree.SubElement(parent, "properties")
    for name, value in values.items():
        ElementTree.SubElement(props, "property", name=name, value=str(value))


def _testcase(suite: ElementTree.Element, table: dict, label: str, impl: dict, clause: str) -> str:
    """Add one clause × implementation testcase; returns its outcome ('passed', 'failure', 'error', 'skipped')."""
    case = ElementTree.SubElement(suite, "testcase", classname=f"rlspec.{table['contract']}.{label}", name=clause)
    category = table["categories"][clause]
    _properties(case, category=category, contract_version=table["version"], statement=table["clauses"][clause])
    if impl["status"] != "checked":
        tag = "error" if impl["status"] == "error" else "skipped"
        ElementTree.SubElement(case, tag, message=f"{label}: {impl['status']}: {impl['reason']}")
        return "error" if tag == "error" else "skipped"
    c = impl["clauses"][clause]
    if c["status"] == "unsupported":
        ElementTree.SubElement(case, "skipped", message=c["message"] or "declared unsupported")
        return "skipped"
    if c["status"] not in FAILING:
        return "passed"
    body = [f"[{category}] {c['message']}"]
    body += [f"failing case: {c['case']}"] if c["case"] else []
    body += [f"reproduce: {c['reproduce']}"] if c["reproduce"] else []
    failure = ElementTree.SubElement(case, "failure", type=c["label"], message=f"[{category}] {c['message']}"[:500])
    failure.text = "\n".join(body)
    return "failure"


def to_junit(tables: list[dict], profile: str) -> str:
    root = ElementTree.Element("testsuites", name="rlspec")
    totals = dict(tests=0, failures=0, errors=0, skipped=0)
    for table in tables:
        suite = ElementTree.SubElement(root, "testsuite", name=f"rlspec.{table['contract']}")
        _properties(suite, contract=table["contract"], contract_version=table["version"], rlspec=rlspec_version(),
                    profile=profile)
        counts = dict(tests=0, failures=0, errors=0, skipped=0)
        for label, impl in table["implementations"].items():
            for clause in table["clauses"]:
                result = _testcase(suite, table, label, impl, clause)
                counts["tests"] += 1
                if result != "passed":
                    counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[result]] += 1
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
