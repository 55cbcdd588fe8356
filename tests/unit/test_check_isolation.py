"""`rlspec check` keeps running whatever the implementation under test does to its process (rlspec/supervise.py):
an exit, a crash or a hang is the outcome of the clause it happened in (CRASH, HANG, FAILED TO LOAD, with the
cause), the other clauses are still checked, and the exit status is never 0; a signal to the checker stops its
workers and keeps the tables that finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from rlspec import cli

ENDS = """
    import os, sys
    from rlspec.reference.gae import gae as _gae

    def gae(reward, value, terminated, truncated, next_value, gamma, lam):
        if reward.shape == (5, 3) and gamma == 1.5:  # the bad-input case of GAE-10: sys.exit in the function
            sys.exit(0)
        if reward.shape == (5, 3) and float(reward.abs().sum()) == 0 and next_value.shape == (6, 3):
            os._exit(3)  # GAE-9's shape case: the process ends without a word
        return _gae(reward, value, terminated, truncated, next_value, gamma, lam)
    """


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _cells(out) -> dict:
    table = json.loads((out / "report.json").read_text())["tables"][0]
    return next(iter(table["implementations"].values()))


def test_an_exit_in_the_implementation_is_a_crash_of_its_clause_and_the_rest_is_checked(tmp_path, capsys):
    impl = _write(tmp_path, "ends.py", ENDS)
    out = tmp_path / "r"
    code = cli.main(["check", "gae", "--impl", str(impl), "--clause", "GAE-1,GAE-9,GAE-10,GAE-2", "--jobs", "1",
                     "--out", str(out)])
    text = capsys.readouterr().out
    cells = _cells(out)["clauses"]
    assert code == 1 and "violations in: gae (2 CRASH" in text, text
    assert cells["GAE-10"]["label"] == "CRASH" and "raised SystemExit(0)" in cells["GAE-10"]["message"]
    assert cells["GAE-9"]["label"] == "CRASH"
    assert "ended the checking process (exit status 3" in cells["GAE-9"]["message"]
    assert cells["GAE-1"]["label"] == cells["GAE-2"]["label"] == "PASS"  # checked before and after, by a new worker


def test_an_implementation_that_hangs_is_stopped_at_the_deadline(tmp_path, capsys):
    impl = _write(tmp_path, "hangs.py", """
        from rlspec.reference.gae import gae as _gae

        def gae(reward, value, terminated, truncated, next_value, gamma, lam):
            while gamma == 1.5:
                pass
            return _gae(reward, value, terminated, truncated, next_value, gamma, lam)
        """)
    out = tmp_path / "r"
    code = cli.main(["check", "gae", "--impl", str(impl), "--clause", "GAE-10,GAE-2", "--jobs", "1", "--timeout", "3",
                     "--out", str(out)])
    cells = _cells(out)["clauses"]
    assert code == 1, capsys.readouterr().out
    assert cells["GAE-10"]["label"] == "HANG" and "no progress for 3 s" in cells["GAE-10"]["message"]
    assert cells["GAE-2"]["label"] == "PASS"


def test_a_module_that_ends_the_process_while_imported_failed_to_load(tmp_path, capsys):
    for name, body, says in (("exits.py", "import sys\nsys.exit(0)\n", "SystemExit(0)"),
                             ("segfaults.py", "import ctypes\nctypes.string_at(0)\n", "signal SIGSEGV")):
        impl = _write(tmp_path, name, body)
        code = cli.main(["check", "gae", "--impl", str(impl), "--clause", "GAE-2", "--jobs", "1",
                         "--out", str(tmp_path / f"report-{name}")])
        text = capsys.readouterr().out
        assert code == 1 and f"FAILED TO LOAD {impl}" in text and says in text, text


def test_a_signal_stops_the_workers_and_keeps_the_finished_tables(tmp_path):
    out, err = tmp_path / "r", tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "rlspec.cli", "check", "return_ema", "rssm", "--jobs", "1",
                                 "--out", str(out)], stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env=dict(os.environ, TRITON_INTERPRET="1"))
        deadline = time.monotonic() + 300
        while "rssm started" not in err.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    text = err.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, text
    assert "interrupted (SIGTERM): 1 of 2 contracts finished" in text and "== return_ema 1.0 ==" in stdout, text
    assert [t["contract"] for t in json.loads((out / "report.json").read_text())["tables"]] == ["return_ema"]
    assert "Traceback" not in text and "leaked" not in text


def test_a_worker_stopped_inside_a_gc_callback_exits_without_a_traceback():
    """The parent's SIGTERM raises SystemExit in the worker; raised in a __del__ or a gc callback, Python would
    print "Exception ignored ... Traceback" and go on: the worker's unraisable hook exits instead."""
    import subprocess
    import sys

    code = ("import sys\nfrom rlspec.supervise import _exit_if_stopped\nsys.unraisablehook = _exit_if_stopped\n"
            "class Stop:\n    def __del__(self):\n        raise SystemExit(0)\n"
            "Stop()\nprint('went on')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "went on" not in proc.stdout, proc
