"""The documentation site and the README: the site builds in strict mode (and strict mode does fail on a broken
link); each contract page carries every clause of its contract; each engine page carries every config key; the
README stays short, and every path, rlspec verb and nox session it names exists."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlspec import registry
from rlspec.cli import _parser
from rlspec.runs import config as runconfig

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_site", ROOT / "tools/docs_site.py")  # the hook file mkdocs.yml
docs_site = importlib.util.module_from_spec(_spec)  # names (tools/ is not a package)
_spec.loader.exec_module(docs_site)

MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MKDOCS, "-f", str(config), "-d", str(site)], capture_output=True, text=True,
                          cwd=config.parent, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly_with_every_contract_and_engine_page(tmp_path):
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for cid in registry.CONTRACTS:
        page = (tmp_path / "site/contracts" / cid / "index.html").read_text()
        assert all(clause in page for clause in registry.load_contract(cid).clauses), cid
    dreamer = (tmp_path / "site/engines/dreamer/index.html").read_text()
    assert "<code>replay_ends</code>" in dreamer and "<!-- config-keys" not in dreamer
    safe = (tmp_path / "site/engines/safe/index.html").read_text()  # the benchmark's table, included, not copied
    table = (ROOT / "benchmarks/safe/results/safe_vs_omnisafe.md").read_text()
    verdicts = re.findall(r"no difference detectable at this power \(MDE [\d.]+\)", table)
    assert verdicts and all(v in safe for v in verdicts) and "<!-- include" not in safe
    area = (tmp_path / "site/benchmarks/safe/index.html").read_text()  # benchmarks/safe/README.md, same table
    assert all(v in area for v in verdicts) and 'href="../../engines/safe/"' in area
    shown = {p.relative_to(ROOT).as_posix() for p in docs_site.benchmark_files(ROOT)}
    assert {"benchmarks/README.md", "benchmarks/runs/README.md", "benchmarks/kernels/results/kernels.json"} <= shown
    for path in shown - {p for p in shown if p.endswith("README.md")}:
        assert (tmp_path / "site" / path).is_file() or path.endswith(".md"), path


@pytest.mark.parametrize("page, link, site", [
    ("docs/engines/safe.md", "../../benchmarks/safe/results/x.png", "../benchmarks/safe/results/x.png"),
    ("docs/engines/safe.md", "../operating/runs.md#resume", "../operating/runs.md#resume"),
    ("benchmarks/safe/README.md", "../../docs/engines/safe.md", "../../engines/safe.md"),
    ("benchmarks/safe/README.md", "results/t.md", "results/t.md"),
    ("benchmarks/README.md", "../docs/guide/statistics.md", "../guide/statistics.md"),
    ("docs/index.md", "../rlspec/cli.py", "../rlspec/cli.py"),  # not in the site: left for strict mode to flag
    ("docs/index.md", "https://example.org/a.md", "https://example.org/a.md"),
])
def test_a_link_true_in_the_repository_reaches_the_same_file_in_the_site(page, link, site):
    assert docs_site.LINK.sub(lambda m: docs_site._site_link(page, m), f"[a]({link})") == f"[a]({site})"


def test_an_include_of_a_missing_file_names_it_and_its_page():
    with pytest.raises(ValueError, match=r"include: results/none.md \(in benchmarks/safe/README.md\)"):
        docs_site._included(ROOT, "benchmarks/safe/README.md", "results/none.md")
    moved = docs_site._included(ROOT, "docs/engines/safe.md", "../../benchmarks/safe/results/safe_vs_omnisafe.md")
    assert moved == (ROOT / "benchmarks/safe/results/safe_vs_omnisafe.md").read_text()  # no links in the table


def test_an_included_files_links_are_moved_to_the_including_page(tmp_path):
    (tmp_path / "benchmarks/a/results").mkdir(parents=True)
    (tmp_path / "benchmarks/a/results/t.md").write_text("| [JSON](t.json) | [web](https://x.org/y) |\n")
    got = docs_site._included(tmp_path, "docs/engines/x.md", "../../benchmarks/a/results/t.md")
    assert got == "| [JSON](../../benchmarks/a/results/t.json) | [web](https://x.org/y) |\n"


def test_strict_mode_fails_on_a_broken_link(tmp_path):
    """The site's own validation settings, on a page that links to a page that does not exist."""
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "t", "strict": True, "validation": ours["validation"]}))
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "missing.md" in done.stdout + done.stderr


@pytest.mark.parametrize("cid", ["gae", "replay", "trainer"])
def test_a_contract_page_states_every_clause_and_its_version(cid):
    contract = registry.load_contract(cid)
    page = docs_site.contract_page(cid)
    assert page.startswith(f"# {cid} {contract.version}\n")
    for clause, statement in contract.clauses.items():
        line = next(li for li in page.splitlines() if li.startswith(f"- **{clause}** "))
        assert f"(since {contract.since(clause)})" in line
        assert re.sub(r"\\(.)", r"\1", line.split("): ", 1)[1]).replace("&lt;", "<").replace("&gt;", ">").replace(
            "&amp;", "&") == statement


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_an_engine_keys_table_has_every_key_once(engine):
    table = docs_site.config_keys(engine)
    rows = [li.split("|")[1].strip().strip("`") for li in table.splitlines()[2:]]
    assert rows == runconfig.flat_keys(docs_site._engine_config(engine))


def test_an_unknown_engine_in_a_marker_names_it():
    with pytest.raises(ValueError, match="'dreamr' is none of"):
        docs_site.config_keys("dreamr")


README = (ROOT / "README.md").read_text()


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 300


OUTPUTS = ("rlspec-report/", "runs/", "site/")  # what the README's own commands write


def test_every_path_the_readme_names_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    quoted = [q for q in re.findall(r"`([^`\s]+)`", README) if "/" in q and not q.startswith(("http", "-"))]
    exists = [(ROOT / p.rstrip("/").split(":")[0]).exists() or (ROOT / p).with_suffix(".py").exists()
              for p in links + quoted]
    missing = [p for p, ok in zip(links + quoted, exists) if not ok and not p.startswith(OUTPUTS)]
    assert links and not missing, missing


def test_every_rlspec_verb_and_nox_session_the_readme_names_exists():
    verbs = set(re.findall(r"\brlspec (\w+)", README)) - {"is", "pins", "installed"}
    known = set(next(a for a in _parser()._actions if a.dest == "verb").choices)
    assert verbs and verbs <= known, verbs - known
    sessions = set(re.findall(r"nox -s (\w+)", README))
    noxfile = (ROOT / "noxfile.py").read_text()
    assert sessions and all(re.search(rf"@nox.session[^\n]*\ndef {s}\(", noxfile) for s in sessions), sessions


def test_the_docs_name_the_design_documents_and_seed_means_an_rng_seed():
    """The README, the docs pages and the benchmarks' pages cite the design documents by name (docs/sources.md),
    never as "seed 000".."seed 004"; the sources page says which number was which."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "benchmarks").glob("*/README.md")]
    cited = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages if p.name != "sources.md"
             for m in re.finditer(r"[Ss]eeds? 00[0-4]", p.read_text())]
    assert not cited, cited
    sources = (ROOT / "docs/sources.md").read_text()
    for name in ("PPOLagSem design", "PPO review", "numerics note", "success-set design", "Dreamer plan"):
        assert f"**{name}**" in sources, name


def test_docs_holds_only_pages_and_the_results_live_in_benchmarks():
    """docs/ is documentation only (Markdown pages); every JSON, table source and kept run is under benchmarks/."""
    others = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix != ".md")
    assert others == [], others
