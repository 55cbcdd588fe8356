"""MkDocs hooks of the documentation site (mkdocs.yml): the pages written from the code.

* one page per contract, ``contracts/<id>.md``, from its spec module (the docstring with the formula and its
  conventions, the clauses by category with the version that added each, why a robustness clause asks more than
  the formula, the interface, the changelog, the registered implementations) and an index of them;
* the config keys of each engine, with their defaults and docstrings, where an engine page says
  ``<!-- config-keys ENGINE -->``;
* a generated results table where a page says ``<!-- include PATH -->`` (PATH relative to the page, as a link
  is: e.g. the table a benchmark script writes from its JSON), so that no page carries a hand copy of it;
* the benchmarks' pages: every README.md under benchmarks/ and every file of a ``results/`` folder there, at
  the same path in the site (``benchmarks/safe/README.md`` becomes ``benchmarks/safe/``); the results' tables
  and pages are in the nav only where mkdocs.yml lists them (their area's README links to the others).

Links are written as they are true in the repository (``docs/engines/safe.md`` links
``../../benchmarks/safe/results/x.png``, so GitHub shows them too); the build maps each relative link that
lands in docs/ or benchmarks/ to the same file in the site. Nothing is written into docs/: the pages exist
only in the build, so they cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
from pathlib import Path
from typing import Any

from rlspec import registry
from rlspec.checker import by_category, interface_signatures
from rlspec.runs import config as runconfig
from rlspec.spec.core import CATEGORIES

KEYS = re.compile(r"<!-- config-keys (\w+) -->")
INCLUDE = re.compile(r"<!-- include ([\w./-]+) -->")
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's or image's target


def _escape(text: str) -> str:
    """Plain text as Markdown that shows it as written (no emphasis, links or HTML)."""
    return re.sub(r"([\\`*_\[\]#|])", r"\\\1", html.escape(text, quote=False))


def contract_page(contract_id: str) -> str:
    """The Markdown page of one contract, everything read from its spec module and the registry."""
    contract = registry.load_contract(contract_id)
    module = registry.load_object(registry.CONTRACTS[contract_id])
    lines = [f"# {contract_id} {contract.version}", "",
             f"`rlspec check {contract_id}` checks every registered implementation; "
             f"`rlspec check {contract_id} --impl your.module` checks yours. Spec module: "
             f"`{registry.CONTRACTS[contract_id]}`.", "", "## The contract", "", "```text",
             (module.__doc__ or "").strip(), "```", "", "## Clauses", ""]
    for category, clauses in by_category(contract):
        lines += [f"### {category}", "", _escape(CATEGORIES[category]), ""]
        for clause in clauses:
            lines.append(f"- **{clause}** (since {contract.since(clause)}): {_escape(contract.clauses[clause])}")
            if clause in contract.rationale:
                lines.append(f"    - *Why*: {_escape(contract.rationale[clause])}")
        lines.append("")
    lines += ["## Interface", "", "```text", *interface_signatures(contract).values(), "```", "",
              "## Changelog", "", *(f"- {c.version}: {_escape(c.text)}" for c in reversed(contract.changes)), "",
              "## Implementations", "",
              *(f"- `{name}`: `{target}`" for name, target in registry.IMPLEMENTATIONS.get(contract_id, {}).items()),
              "", "How third-party libraries fare: [the third-party table](../benchmarks/kit/results/thirdparty/conformance.md).", ""]
    return "\n".join(lines)


def contracts_index() -> str:
    lines = ["# Contracts", "", "Each page is written from the contract's spec module when the site is built.", "",
             "| contract | version | clauses | implementations |", "|---|---|---|---|"]
    for cid in registry.CONTRACTS:
        contract = registry.load_contract(cid)
        impls = ", ".join(registry.IMPLEMENTATIONS.get(cid, {}))
        lines.append(f"| [{cid}]({cid}.md) | {contract.version} | {len(contract.clauses)} | {impls} |")
    return "\n".join(lines) + "\n"


def _engine_config(engine: str) -> type:
    from rlspec.engines import bonus, dreamer, safe

    configs = {"safe": safe.SafeConfig, "dreamer": dreamer.DreamerRunConfig, "bonus": bonus.BonusConfig}
    if engine not in configs:
        raise ValueError(f"config-keys: engine {engine!r} is none of {sorted(configs)}")
    return configs[engine]


def config_keys(engine: str) -> str:
    """A table of every settable key of ``engine``: dotted name, default, docstring (the CLI's help)."""
    cls = _engine_config(engine)
    default = cls()
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key in runconfig.flat_keys(cls):
        *path, name = key.split(".")
        owner = default
        for part in path:
            owner = getattr(owner, part)
        doc = runconfig.field_docs(type(owner)).get(name, "")
        lines.append(f"| `{key}` | `{_default(getattr(owner, name))}` | {_escape(doc)} |")
    return "\n".join(lines)


def _default(value: Any) -> str:
    return repr(dataclasses.asdict(value)) if dataclasses.is_dataclass(value) else repr(value).replace("|", "/")


# --------------------------------------------------------------------------------------------------
# MkDocs hooks
# --------------------------------------------------------------------------------------------------
def on_config(config):
    """The contract pages go under the nav's "Contracts" section, after its index."""
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Contracts" in entry:
            entry["Contracts"] = ["contracts/index.md", *(f"contracts/{c}.md" for c in registry.CONTRACTS)]
    return config


def on_files(files, config):
    from mkdocs.structure.files import File, InclusionLevel

    files.append(File.generated(config, "contracts/index.md", content=contracts_index()))
    for cid in registry.CONTRACTS:
        files.append(File.generated(config, f"contracts/{cid}.md", content=contract_page(cid)))
    root, listed = _root(config), set(_nav_pages(config["nav"]))
    for path in benchmark_files(root):
        in_nav = path.name == "README.md" or path.relative_to(root).as_posix() in listed
        files.append(File(path.relative_to(root).as_posix(), str(root), config["site_dir"],
                          config["use_directory_urls"],
                          inclusion=InclusionLevel.INCLUDED if in_nav else InclusionLevel.NOT_IN_NAV))
    return files


def _nav_pages(nav) -> list[str]:
    """Every page path the nav names (its sections flattened)."""
    if isinstance(nav, str):
        return [nav]
    items = nav.values() if isinstance(nav, dict) else nav
    return [page for item in items for page in _nav_pages(item)]


def benchmark_files(root: Path) -> list[Path]:
    """The benchmarks' files the site shows: each README.md under benchmarks/ and each file under a results/."""
    bench = root / "benchmarks"
    return sorted({*bench.rglob("README.md"), *(p for p in bench.glob("*/results/**/*") if p.is_file())})


def on_page_markdown(markdown, page, config, files):
    root = _root(config)
    here = _repo_path(root, page.file)
    markdown = INCLUDE.sub(lambda m: _included(root, here, m.group(1)), markdown)
    markdown = LINK.sub(lambda m: _site_link(here, m), markdown)
    return KEYS.sub(lambda m: config_keys(m.group(1)), markdown)


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _repo_path(root: Path, file) -> str:
    """The page's path in the repository: its own for a benchmarks file, docs/<src_uri> for the rest."""
    return file.src_uri if file.src_dir and Path(file.src_dir).resolve() == root else f"docs/{file.src_uri}"


def site_path(repo_path: str) -> str | None:
    """Where a repository file lives in the site: docs/X at X, benchmarks/X at benchmarks/X, nothing else."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return repo_path if repo_path.startswith("benchmarks/") else None


def _relative(target: str) -> bool:
    return not ("://" in target or target.startswith(("#", "/", "mailto:")))


def _site_link(page: str, m: re.Match) -> str:
    """A link written from the page's place in the repository, as the site reaches the same file."""
    target, _, anchor = m.group(1).partition("#")
    if not target or not _relative(target):
        return m.group(0)
    landed = site_path(os.path.normpath(os.path.join(os.path.dirname(page), target)))
    if landed is None:
        return m.group(0)
    moved = os.path.relpath(landed, os.path.dirname(site_path(page)) or ".")
    return f"]({moved}{'#' + anchor if anchor else ''})"


def _included(root: Path, page: str, path: str) -> str:
    """The file's Markdown, its relative links rewritten from the file's folder to the page's (both in the repo)."""
    source = (root / os.path.dirname(page) / path).resolve()
    if not source.is_file() or not source.is_relative_to(root):
        raise ValueError(f"include: {path} (in {page}) is no file of the repository")
    def move(m: re.Match) -> str:
        target = m.group(1)
        if not _relative(target):
            return m.group(0)
        return "](" + os.path.relpath(source.parent / target, root / os.path.dirname(page)) + ")"
    return LINK.sub(move, source.read_text())
