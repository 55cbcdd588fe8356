"""`rlspec check A B --jobs N`: contracts checked in worker processes print the same tables and write the
same report.md and report.json, byte for byte, as one after the other (--jobs 1); a violation found in a
worker still fails the run; what --unsupported rules matched in every worker is added up."""

from __future__ import annotations

import json
import textwrap

from rlspec import cli, registry

# REMA-5 caught (test_runner.py): no floor on invscale
BUGGY_EMA = """
    from rlspec.reference.return_ema import ReturnEMA as _Ref

    class ReturnEMA(_Ref):
        def update(self, x):
            offset, _ = super().update(x)
            return offset, self.high - self.low
    """
RULES = """
    MOD-4                      # a whole clause
    REMA-8 if name == "decay"  # some cases
    """
ARGS = ["check", "return_ema", "modulation", "--clause", "REMA-5,REMA-8,MOD-1,MOD-4", "--profile", "ci"]


def _run(tmp_path, capfd, jobs: int, *extra: str) -> tuple[int, str, str, dict, bytes]:
    """(exit status, stdout, stderr (of the workers too), report.json without its written_at time, report.md)."""
    out = tmp_path / f"jobs{jobs}"
    code = cli.main([*ARGS, "--jobs", str(jobs), "--out", str(out), *extra])
    captured = capfd.readouterr()
    text = captured.out.replace(str(out), "OUT")
    report = json.loads((out / "report.json").read_text())
    assert report.pop("written_at").endswith("+00:00")  # when: the one field two runs may differ in
    return code, text, captured.err, report, (out / "report.md").read_bytes()


def test_jobs_give_the_same_output_and_report_and_still_fail(tmp_path, capfd, monkeypatch):
    buggy = tmp_path / "buggy_ema.py"
    buggy.write_text(textwrap.dedent(BUGGY_EMA))
    rules = tmp_path / "rules.unsupported"
    rules.write_text(textwrap.dedent(RULES))
    # the parent passes the implementations to check to its workers: a patched registry reaches them
    monkeypatch.setitem(registry.IMPLEMENTATIONS, "return_ema",
                        {**registry.IMPLEMENTATIONS["return_ema"], "buggy": str(buggy)})
    one = _run(tmp_path, capfd, 1, "--unsupported", str(rules))
    two = _run(tmp_path, capfd, 2, "--unsupported", str(rules))
    code, text, err, report_json, report_md = one
    assert code == 1 and "violations in: return_ema (1 FAIL; by category: maths 1)" in text
    assert "buggy REMA-5 (maths) FAIL" in text and "reproduce: rlspec check return_ema --impl " + str(buggy) in text
    assert f"  MOD-4  ({rules}:2): MOD-4\n" in text  # the whole-clause rule, used
    assert f'  REMA-8 if name == "decay"  ({rules}:3): ' in text and " examples in REMA-8\n" in text  # some cases
    assert two[0] == code and two[1] == text  # the same exit status and printed tables
    assert two[3] == report_json and two[4] == report_md  # the same report (report.md byte for byte)
    for log in (one[2], two[2]):  # progress on stderr, one line per contract start and finish
        assert log.count("rlspec check: return_ema started (1 of 2)") == 1
        assert log.count("rlspec check: modulation started (2 of 2)") == 1
        assert log.count("rlspec check: return_ema finished in ") == 1
        assert "s: 1 FAIL" in log and "modulation finished in " in log
