"""`rlspec --help` and every verb's --help answer without importing torch: the command line imports only the
standard library and the registry's names, `rlspec train ENGINE` parses with the engine's config module (no
torch), and the --help of a verb whose parser lives next to torch code (compare, eval, ...) comes from
rlspec/help_cache.py while the sources that produced it are unchanged.

Each case runs `cli.main` in a fresh interpreter and reads back what it printed, its exit status and which
heavy packages it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "hypothesis", "numpy")
RUN = """
import json, sys
from rlspec import cli
try:
    code = cli.main(json.loads(sys.argv[1]))
except SystemExit as exit_:
    code = exit_.code
print(json.dumps({"code": code, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def _main(argv: list[str], cache: Path) -> tuple[int, str, list[str]]:
    """(exit status, what it printed before the status line, heavy packages loaded) of cli.main(argv)."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), COLUMNS="100")
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(argv)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    *text, status = out.stdout.splitlines()
    result = json.loads(status)
    return result["code"], "\n".join(text) + "\n", result["heavy"]


@pytest.mark.parametrize("argv, says", [
    (["--help"], ["{check,list,train,compare,eval,plot,probe,semantics,report}", "train an engine"]),
    (["check", "--help"], ["--jobs N", "--impl IMPL", "twohot, return_ema"]),
    (["list", "--help"], ["one of twohot"]),
    (["train", "--help"], ["one of safe, bonus, dreamer"]),
    (["compare", "--help"], ["one of safe, bonus, dreamer"]),
    (["eval", "--help"], ["a run directory"]),
    (["plot", "--help"], ["a run directory"]),
])
def test_the_command_line_parses_without_torch(argv, says, tmp_path):
    code, text, heavy = _main(argv, tmp_path)
    assert code == 0 and heavy == []
    assert text.startswith(f"usage: rlspec {' '.join(argv[:-1])}".rstrip()), text
    for s in says:
        assert s in text


def _train_help(engine: str, monkeypatch) -> str:
    """What an engine's own `train` parser prints for --help, at the width the subprocesses use."""
    from rlspec import cli
    from rlspec.runs import shell

    monkeypatch.setenv("COLUMNS", "100")
    module = cli._engine(engine)  # its torch half: DESCRIPTION / describe() come from the loop's module
    return shell.parser(module.describe() if engine == "safe" else module.DESCRIPTION).format_help()


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_an_engine_train_help_is_its_own_and_needs_no_torch(engine, tmp_path, monkeypatch):
    expected = _train_help(engine, monkeypatch)
    code, text, heavy = _main(["train", engine, "--help"], tmp_path)
    assert code == 0 and text == expected and heavy == []  # the first time: nothing is kept, nothing heavy loaded
    assert "config keys (--set KEY=VALUE):" in text and " (int, default " in text
    assert not list(tmp_path.rglob("*.json"))


def test_a_bad_train_flag_is_an_error_before_torch(tmp_path):
    code, _, heavy = _main(["train", "dreamer", "--preset", "nope"], tmp_path)
    assert code == 2 and heavy == []


# The verbs whose parser lives in a module that imports torch (compare, eval, probe, ...) print their --help
# through rlspec/help_cache.py: `rlspec compare dreamer --help` stands for them.
COMPARE = ["compare", "dreamer", "--help"]


def test_a_kept_help_comes_back_without_torch(tmp_path):
    code, first, heavy = _main(COMPARE, tmp_path)
    assert code == 0 and "torch" in heavy  # nothing kept yet: the engine was imported
    assert first.startswith("usage: rlspec compare dreamer") and "--updates UPDATES" in first and "--rtol" in first
    code, again, heavy = _main(COMPARE, tmp_path)
    assert code == 0 and again == first and heavy == []


def test_a_changed_source_file_invalidates_the_kept_help(tmp_path):
    _, expected, _ = _main(COMPARE, tmp_path)
    [entry_path] = (tmp_path / "rlspec/help").glob("*.json")
    entry = json.loads(entry_path.read_text())
    engine_file = str(ROOT / "rlspec/engines/dreamer/verbs.py")
    assert entry["files"][engine_file]  # the verb's source is among the files it depends on
    entry["files"][engine_file] = "0" * 64  # as if verbs.py had been edited since
    entry["text"] = "stale\n"
    entry_path.write_text(json.dumps(entry))
    code, text, heavy = _main(COMPARE, tmp_path)
    assert code == 0 and text == expected and "torch" in heavy  # produced again, not the stale text
    code, text, heavy = _main(COMPARE, tmp_path)
    assert text == expected and heavy == []  # and kept again


def test_help_is_printed_where_nothing_can_be_kept(tmp_path):
    _, expected, _ = _main(COMPARE, tmp_path / "cache")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    code, text, _ = _main(COMPARE, not_a_dir)
    assert code == 0 and text == expected


def test_a_bad_option_next_to_help_is_an_error_and_nothing_is_kept(tmp_path):
    code, text, _ = _main(["compare", "dreamer", "--updates", "x", "--help"], tmp_path)
    assert code == 2 and not list(tmp_path.rglob("*.json"))


def test_a_reader_that_stops_early_gets_no_traceback():
    """`rlspec list | head -1`: the pipe's reader is gone while rlspec still writes; it stops as cat does
    (SIGPIPE's exit status), with nothing on stderr. The read end is closed before rlspec starts, so the
    first write fails for certain."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "rlspec.cli", "list"], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == "", proc.stderr
