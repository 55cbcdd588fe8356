"""Clause × implementation tables: printed, and written as Markdown and JSON.

A table (one per contract) is a dict::

    {"contract": "gae", "clauses": {"GAE-1": "statement", ...},
     "implementations": {LABEL: {"target": "path/or.module as given", "status": "checked" | "error" | "unavailable",
                                 "reason": "why it did not load (error, unavailable)",
                                 "clauses": {"GAE-1": CELL, ...}}}}

    CELL = {"status": "pass" | "fail" | "missing" | "unsupported", "kind": "" | "wrong" | "accepted" | "weak" |
            "crashed", "label": "PASS" | "FAIL" | ..., "message", "tried", "failed", "failed_by_kind",
            "unsupported", "case", "reproduce"}

An implementation that fails to load is an error (a failure); one that cannot run on this machine is
unavailable (not a failure).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Sequence

from rlspec.spec.core import KINDS, Outcome

LABELS = {"pass": "PASS", "missing": "MISSING", "unsupported": "UNSUPPORTED",
          "wrong": "FAIL", "accepted": "ACCEPTS-BAD", "weak": "WEAK-REJECT", "crashed": "CRASH"}
LEGEND = {
    "FAIL": "wrong value",
    "ACCEPTS-BAD": "bad input accepted silently",
    "WEAK-REJECT": "bad input rejected, but not by a ValueError/TypeError naming the argument (a lesser "
                   "violation than accepting it)",
    "CRASH": "an unexpected exception inside the implementation",
    "MISSING": "the interface name is absent",
    "UNSUPPORTED": "declared unsupported (--unsupported FILE)",
    "PASS*": "passes; some examples declared unsupported",
    "ERROR": "the implementation failed to load",
    "n/a": "unavailable on this machine",
}


def cell(outcome: Outcome, command: Sequence[str]) -> dict:
    """One clause's result; ``command`` is the `rlspec check ... --impl ...` that reproduces it."""
    label = LABELS[outcome.kind or outcome.status]
    if outcome.status == "pass" and outcome.unsupported:
        label = "PASS*"
    return dict(status=outcome.status, kind=outcome.kind, label=label, message=outcome.message,
                tried=outcome.tried, failed=outcome.failed, failed_by_kind=dict(outcome.kinds),
                unsupported=outcome.unsupported, case=outcome.case,
                reproduce=shlex.join([*command, *outcome.reproduce]) if outcome.reproduce else "")


def build(contract_id: str, clauses: dict[str, str], results: list[dict]) -> dict:
    """clauses: the clauses checked; results: one entry per implementation: dict(label, target, status,
    reason, clauses: {id: cell})."""
    return {"contract": contract_id, "clauses": dict(clauses),
            "implementations": {r["label"]: {k: v for k, v in r.items() if k != "label"} for r in results}}


def failures(table: dict) -> dict[str, int]:
    """How many clauses failed, by what they show (FAIL, CRASH, ...), plus ERROR per implementation that
    did not load."""
    counts: dict[str, int] = {}
    for impl in table["implementations"].values():
        if impl["status"] == "error":
            counts["ERROR"] = counts.get("ERROR", 0) + 1
        for c in impl.get("clauses", {}).values():
            if c["status"] in ("fail", "missing"):
                counts[c["label"]] = counts.get(c["label"], 0) + 1
    return counts


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
            head = f"{label} {clause} {c['label']}" + (f": {counts}" if counts else "")
            lines = [c["message"]] if c["message"] else []
            lines += [f"failing case: {c['case']}"] if c["case"] and " | inputs: " not in c["message"] else []
            lines += [f"reproduce: {c['reproduce']}"] if c["reproduce"] else []
            out.append((head, lines))
    return out


def _legend(table: dict) -> list[str]:
    seen = {_cell_label(i, c) for i in table["implementations"].values() for c in table["clauses"]}
    return [f"{k} = {v}" for k, v in LEGEND.items() if k in seen]


def _md(text: str) -> str:
    """Table-cell text: a '|' (as in |x|) would end the cell."""
    return text.replace("|", "\\|")


def to_markdown(table: dict) -> str:
    impls = table["implementations"]
    lines = [f"### {table['contract']}", ""]
    targets = [f"- `{label}`: {_md(i['target'])}" for label, i in impls.items() if i["target"] != label]
    lines += targets + [""] * bool(targets)
    lines += ["| clause | " + " | ".join(_md(i) for i in impls) + " |", "|---|" + "---|" * len(impls)]
    for clause, text in table["clauses"].items():
        lines.append(f"| {clause}: {_md(text)} | " + " | ".join(_cell_label(i, clause) for i in impls.values()) + " |")
    legend = _legend(table)
    if legend:
        lines += ["", "; ".join(legend)]
    details = _details(table)
    if details:
        lines.append("")
        for head, more in details:
            lines.append(f"- **{head}**")
            lines += ["  " + ("`" + m + "`" if m.startswith("reproduce: ") else m).replace("\n", "\n  ") for m in more]
    return "\n".join(lines) + "\n"


def to_text(table: dict) -> str:
    impls = table["implementations"]
    width = max([len(c) for c in table["clauses"]] + [6]) + 2
    cols = [max(len(i), 11) + 2 for i in impls]
    out = [f"== {table['contract']} =="]
    out.append("clause".ljust(width) + "".join(i.ljust(w) for i, w in zip(impls, cols)).rstrip())
    for clause in table["clauses"]:
        out.append((clause.ljust(width) + "".join(_cell_label(i, clause).ljust(w)
                                                  for i, w in zip(impls.values(), cols))).rstrip())
    legend = _legend(table)
    if legend:
        out.append("(" + "; ".join(legend) + ")")
    for head, more in _details(table):
        out.append("  " + head)
        out += ["      " + m.replace("\n", "\n      ") for m in more]
    return "\n".join(out)


def write(tables: list[dict], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "report.md", out_dir / "report.json"
    md.write_text("# rlspec conformance report\n\n" + "\n".join(to_markdown(t) for t in tables))
    js.write_text(json.dumps(tables, indent=2))
    return md, js
