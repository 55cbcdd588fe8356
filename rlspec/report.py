"""Clause × implementation tables: printed, and written as Markdown and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rlspec.spec.core import Outcome

SYMBOL = {"pass": "PASS", "fail": "FAIL", "missing": "MISSING", None: "n/a"}


def build(contract_id: str, clauses: dict[str, str], results: dict[str, list[Outcome] | str]) -> dict:
    """results: implementation label -> outcomes, or the reason it is unavailable."""
    table = {"contract": contract_id, "clauses": dict(clauses), "implementations": {}}
    for label, res in results.items():
        if isinstance(res, str):
            table["implementations"][label] = {"unavailable": res}
        else:
            table["implementations"][label] = {o.clause: {"status": o.status, "message": o.message}
                                               for o in res}
    return table


def failed(table: dict) -> bool:
    return any(cell["status"] != "pass" for impl in table["implementations"].values()
               if "unavailable" not in impl for cell in impl.values())


def _md(text: str) -> str:
    """Table-cell text: a '|' (as in |x|) would end the cell."""
    return text.replace("|", "\\|")


def to_markdown(table: dict) -> str:
    impls = list(table["implementations"])
    lines = [f"### {table['contract']}", "", "| clause | " + " | ".join(impls) + " |",
             "|---|" + "---|" * len(impls)]
    for clause, text in table["clauses"].items():
        cells = []
        for impl in impls:
            res = table["implementations"][impl]
            cells.append("n/a" if "unavailable" in res else SYMBOL[res[clause]["status"]])
        lines.append(f"| {clause}: {_md(text)} | " + " | ".join(cells) + " |")
    details = [f"- {impl}: unavailable ({res['unavailable']})" for impl, res in
               table["implementations"].items() if "unavailable" in res]
    details += [f"- {impl} {clause}: {_md(cell['message'])}" for impl, res in table["implementations"].items()
                if "unavailable" not in res for clause, cell in res.items() if cell["status"] != "pass"]
    return "\n".join(lines + ([""] + details if details else [])) + "\n"


def to_text(table: dict) -> str:
    impls = list(table["implementations"])
    width = max(len(c) for c in table["clauses"]) + 2
    cols = [max(len(i), 7) + 2 for i in impls]
    out = [f"== {table['contract']} ==", "clause".ljust(width) + "".join(i.ljust(w) for i, w in zip(impls, cols))]
    for clause in table["clauses"]:
        row = clause.ljust(width)
        for impl, w in zip(impls, cols):
            res = table["implementations"][impl]
            row += ("n/a" if "unavailable" in res else SYMBOL[res[clause]["status"]]).ljust(w)
        out.append(row)
    for impl, res in table["implementations"].items():
        if "unavailable" in res:
            out.append(f"  {impl}: unavailable here ({res['unavailable']})")
            continue
        for clause, cell in res.items():
            if cell["status"] != "pass":
                out.append(f"  {impl} {cell['message'] if cell['status'] == 'fail' else clause + ': ' + cell['message']}")
    return "\n".join(out)


def write(tables: list[dict], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "report.md", out_dir / "report.json"
    md.write_text("# rlspec conformance report\n\n" + "\n".join(to_markdown(t) for t in tables))
    js.write_text(json.dumps(tables, indent=2))
    return md, js
