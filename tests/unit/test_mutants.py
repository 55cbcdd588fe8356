"""The mutation harness itself (spec/mutants.py): what it mutates, and how a mutant that cannot load or that
crashes the interpreter is counted (killed, never a hang or a survivor)."""

from __future__ import annotations

from rlspec.spec import mutants

TINY = "def f(x):\n    if x > 0:\n        return x + 1\n    return -x\n"


def test_the_mutations_of_a_small_function():
    whats = sorted(m.what for m in mutants.mutations(TINY))
    assert whats == sorted(["Gt -> GtE", "constant 0 -> 1", "Add -> Sub", "constant 1 -> 2", "constant 1 -> 0",
                            "USub dropped", "statement removed (in a guard)"]), whats
    add = next(m for m in mutants.mutations(TINY) if m.what == "Add -> Sub")
    assert "return x - 1" in mutants.mutant_source(TINY, add)


def test_a_mutant_that_cannot_load_is_killed_at_load():
    row = mutants.run_mutant(("gae", "m", "mutant_gae_load", "raise ImportError('broken')\n", 60, "ci", None))
    assert (row["status"], row["clause"]) == ("killed", "load") and "broken" in row["message"], row


def test_a_mutant_that_crashes_the_interpreter_is_killed_by_the_crash():
    """A native crash (here an abort at import) in the process of its own: killed, clause 'crash'."""
    row = mutants.run_isolated(("gae", "m", "mutant_gae_abort", "import os\nos.abort()\n", 60, "ci", None))
    assert (row["status"], row["clause"]) == ("killed", "crash") and "SIGABRT" in row["message"], row


def test_an_unmutated_reference_survives_in_a_process_of_its_own():
    source = mutants.reference_file("gae").read_text()
    row = mutants.run_isolated(("gae", "unmutated", "unmutated_gae", source, 300, "ci", None))
    assert row["status"] == "survived", row


def test_a_seeded_draw_runs_the_contract_like_the_derandomized_sample():
    """The dev pass and the --draws pass run a mutant under another profile or a seeded draw of the ci budget: the
    reference survives such a draw, and a mutant that cannot load is still killed at load."""
    source = mutants.reference_file("gae").read_text()
    unmutated = mutants.run_mutant(("gae", "u", "unmutated_gae_draw", source, 300, "ci", 7))
    assert unmutated["status"] == "survived", unmutated
    row = mutants.run_mutant(("gae", "m", "mutant_gae_draw", "raise ImportError('broken')\n", 60, "dev", 3))
    assert (row["status"], row["clause"]) == ("killed", "load"), row


def test_the_readme_sentence_is_the_committed_results():
    """README's mutation sentence is summary() of benchmarks/kit/results/mutants/kill_rate.json (rewritten by every run)."""
    import json

    report = json.loads((mutants.README.parent / "benchmarks/kit/results/mutants/kill_rate.json").read_text())
    readme = mutants.README.read_text()
    assert mutants.with_summary(readme, report) == readme
    t = mutants.totals(report)
    assert t["killed"] + t["equivalent"] + t["survived"] == t["mutants_run"]
    assert f"({t['killed']:,} of {t['killed'] + t['survived']:,};" in readme
