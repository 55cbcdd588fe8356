"""`rlspec check` as an outside user meets it: real modules written to tmp_path, checked
through the CLI, with the printed text and report.json/report.md asserted.

Covered: modules that fail to load (syntax error, exception at import, missing file or attribute) fail
loudly; a file imports its sibling; the failure kinds (wrong value, bad input accepted, weak rejection,
crash, missing name) are told apart; --clause; failure counts; the reproduce command replays the
failing example; --unsupported; `rlspec list`; compact tensors.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap

import pytest
import torch
from hypothesis import strategies as st

from rlspec import cli, registry
from rlspec.spec.core import Property, describe, fail, run_property

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _check(tmp_path, capsys, contract, impl, *args):
    """Run `rlspec check`; (exit code, printed text, the report.json table, report.md)."""
    out = tmp_path / "report"
    code = cli.main(["check", contract, "--impl", str(impl), "--profile", "ci", "--out", str(out), *args])
    text = capsys.readouterr().out
    tables = json.loads((out / "report.json").read_text())["tables"] if (out / "report.json").exists() else None
    md = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    return code, text, (tables[0] if tables else None), md


# --------------------------------------------------------------------------------------------------
# Modules that do not load
# --------------------------------------------------------------------------------------------------
BROKEN = {
    "syntax": ("def gae(reward, value:\n    return reward\n", "SyntaxError", "line 1"),
    "raises": ("import torch\nx = 1\nraise RuntimeError('cannot find libfoo.so')\n",
               "RuntimeError: cannot find libfoo.so", ":3)"),
    "imports_missing": ("import not_installed_pkg_xyz\n", "ModuleNotFoundError", "not_installed_pkg_xyz"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_module_that_fails_to_import_fails_loudly(kind, tmp_path, capsys):
    body, error, detail = BROKEN[kind]
    path = _write(tmp_path, f"broken_{kind}.py", body)
    code, text, table, md = _check(tmp_path, capsys, "gae", path, "--clause", "GAE-1,GAE-2")
    assert code == 1
    assert "all clauses pass" not in text
    assert f"FAILED TO LOAD {path}: " in text and error in text and detail in text
    assert text.count("ERROR") >= 2  # one row per clause
    impl = table["implementations"][str(path)]
    assert impl["status"] == "error" and error in impl["reason"] and detail in impl["reason"]
    assert impl["clauses"] == {}
    assert "FAILED TO LOAD" in md and error in md and "| GAE-1: " in md


@pytest.mark.parametrize("target, says", [("nowhere/missing_impl.py", "FileNotFoundError: no such file"),
                                          ("{tmp}/present.py:no_such_attr", "has no attribute 'no_such_attr'")])
def test_a_missing_file_or_attribute_fails_loudly(target, says, tmp_path, capsys):
    _write(tmp_path, "present.py", "from rlspec.reference.gae import gae\n")
    target = target.format(tmp=tmp_path)
    code, text, table, _ = _check(tmp_path, capsys, "gae", target, "--clause", "GAE-2")
    assert code == 1 and says in text
    assert table["implementations"][target] == {"target": target, "status": "error",
                                                "reason": table["implementations"][target]["reason"], "clauses": {}}
    assert says in table["implementations"][target]["reason"]


def test_a_file_imports_its_sibling_and_the_header_shows_the_path_as_given(tmp_path, capsys, monkeypatch):
    pkg = tmp_path / "mylib"
    pkg.mkdir()
    _write(pkg, "kitux_gae_helper.py", "from rlspec.reference.gae import gae as _gae\n\n"
                                       "def advantages(*args):\n    return _gae(*args)\n")
    _write(pkg, "my_gae.py", "from kitux_gae_helper import advantages\n\n"
                             "def gae(reward, value, terminated, truncated, next_value, gamma, lam):\n"
                             "    return advantages(reward, value, terminated, truncated, next_value, gamma, lam)\n")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    code, text, table, _ = _check(tmp_path, capsys, "gae", "mylib/../mylib/my_gae.py", "--clause", "GAE-1")
    assert sys.path == before  # restored
    assert code == 0 and "all clauses pass" in text
    assert "mylib/../mylib/my_gae.py" in text.splitlines()[1]  # the column header: the raw --impl
    assert table["implementations"]["mylib/../mylib/my_gae.py"]["clauses"]["GAE-1"]["status"] == "pass"


def test_registered_backends_that_cannot_run_here_are_unavailable_not_errors(tmp_path):
    path = _write(tmp_path, "needs_dep.py", "import not_installed_backend_dep_xyz\n")
    assert registry.resolve("fast-x", str(path), registered=True).unavailable.startswith("ModuleNotFoundError")
    assert registry.resolve("user", str(path)).error.startswith("ModuleNotFoundError")  # --impl: an error


def test_triton_without_cuda_or_interpreter_is_reported_unavailable(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="0", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "rlspec.cli", "check", "gae", "--triton", "compiled", "--clause",
                           "GAE-2", "--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # registered and unavailable: not a failure
    assert "fast-triton: unavailable here: BackendUnavailable: Triton kernels need a CUDA device" in proc.stdout
    assert "all clauses pass" in proc.stdout
    impl = json.loads((tmp_path / "report.json").read_text())["tables"][0]["implementations"]["fast-triton"]
    assert impl["status"] == "unavailable" and "TRITON_INTERPRET=1" in impl["reason"]


# --------------------------------------------------------------------------------------------------
# Kinds of failure
# --------------------------------------------------------------------------------------------------
WRONG_GAE = """
    from rlspec.reference.gae import gae as _gae

    def gae(reward, value, terminated, truncated, next_value, gamma, lam):
        adv, ret = _gae(reward, value, terminated, truncated, next_value, gamma, lam)
        if reward.shape[0] >= 4 and gamma < 0.9:  # wrong only on rollouts of 4 steps or more, with gamma < 0.9
            adv = adv + 0.5
        return adv, adv + value
    """


def test_a_wrong_value_reports_how_many_examples_failed_and_reproduces(tmp_path, capsys):
    path = _write(tmp_path, "wrong_gae.py", WRONG_GAE)
    code, text, table, md = _check(tmp_path, capsys, "gae", path, "--clause", "GAE-1")
    cell = table["implementations"][str(path)]["clauses"]["GAE-1"]
    assert code == 1 and cell["status"] == "fail" and cell["kind"] == "wrong" and cell["label"] == "FAIL"
    assert 0 < cell["failed"] < cell["tried"]  # every example ran, not only up to the first failure
    assert cell["failed_by_kind"] == {"wrong": cell["failed"]}
    assert f"GAE-1 (maths) FAIL: {cell['failed']} of {cell['tried']} examples failed" in text
    assert "(FAIL = wrong value)" in text and "violations in: gae (1 FAIL; by category: maths 1)" in text
    assert "reward=tensor(shape=(4, 1)" in cell["message"]  # shrunk to the shortest failing rollout
    assert cell["reproduce"].startswith(f"rlspec check gae --impl {path} --clause GAE-1 --profile ci --reproduce ")
    assert f"reproduce: {cell['reproduce']}" in text and f"`reproduce: {cell['reproduce']}`" in md

    replay = shlex.split(cell["reproduce"])[1:] + ["--out", str(tmp_path / "again")]
    assert cli.main(replay) == 1
    again = json.loads((tmp_path / "again" / "report.json").read_text())["tables"][0]
    redo = again["implementations"][str(path)]["clauses"]["GAE-1"]
    assert redo["message"] == cell["message"] and redo["tried"] == 1  # exactly the failing example


def test_bad_input_accepted_and_weak_rejections_are_told_apart(tmp_path, capsys):
    path = _write(tmp_path, "lax_twohot.py", """
        import torch
        from rlspec.reference import twohot as ref
        from rlspec.reference.twohot import mean, symexp, symlog, twohot_encode

        def log_prob(logits, x, num_bins=255, low=-20.0, high=20.0):
            if logits.shape[-1] != num_bins:
                raise RuntimeError("bad width")  # another exception type
            if x.shape != logits.shape[:-1]:
                raise ValueError("shapes do not match")  # names neither the argument nor the shapes
            if torch.isnan(x).any():
                return torch.zeros(x.shape, dtype=logits.dtype)  # NaN accepted silently
            return ref.log_prob(logits, x, num_bins, low, high)
        """)
    code, text, table, md = _check(tmp_path, capsys, "twohot", path, "--clause", "TWOHOT-17,TWOHOT-18,TWOHOT-20")
    cells = table["implementations"][str(path)]["clauses"]
    assert code == 1
    assert {c: (v["kind"], v["label"]) for c, v in cells.items()} == {
        "TWOHOT-17": ("weak", "WEAK-REJECT"), "TWOHOT-18": ("weak", "WEAK-REJECT"),
        "TWOHOT-20": ("accepted", "ACCEPTS-BAD")}
    assert "raised RuntimeError (bad width), expected ValueError or TypeError naming ['logits']" \
        in cells["TWOHOT-17"]["message"]
    assert "rejected with ValueError, but the message does not mention ['x'" in cells["TWOHOT-18"]["message"]
    assert "accepted silently" in cells["TWOHOT-20"]["message"]
    assert "WEAK-REJECT = bad input rejected, but not by a ValueError/TypeError naming the argument" in text
    assert "a lesser violation than accepting it" in text and "ACCEPTS-BAD = bad input accepted silently" in text
    assert "violations in: twohot (2 WEAK-REJECT, 1 ACCEPTS-BAD; by category: validation 3)" in text
    assert "| TWOHOT-17: " in md and "WEAK-REJECT |" in md


def test_a_crash_inside_the_implementation_is_not_a_wrong_value(tmp_path, capsys):
    path = _write(tmp_path, "crashing_gae.py", """
        from rlspec.reference.gae import gae as _gae

        def gae(reward, value, terminated, truncated, next_value, gamma, lam):
            if bool(terminated.any()):
                return _helper(terminated)
            return _gae(reward, value, terminated, truncated, next_value, gamma, lam)

        def _helper(flags):
            return {}["terminal steps are not implemented"]
        """)
    code, text, table, _ = _check(tmp_path, capsys, "gae", path, "--clause", "GAE-1")
    cell = table["implementations"][str(path)]["clauses"]["GAE-1"]
    assert code == 1 and cell["kind"] == "crashed" and cell["label"] == "CRASH"
    assert cell["message"].startswith("[GAE-1] raised KeyError: 'terminal steps are not implemented' "
                                      "(at crashing_gae.py:10 in _helper)")
    assert cell["failed_by_kind"] == {"crashed": cell["failed"]} and 0 < cell["failed"] < cell["tried"]
    assert "CRASH = an unexpected exception inside the implementation" in text


def test_a_result_the_check_cannot_read_is_a_wrong_value_and_a_missing_name_shows_its_signature(tmp_path, capsys):
    path = _write(tmp_path, "none_twohot.py", """
        from rlspec.reference.twohot import symexp

        def symlog(x):
            return None  # not a tensor
        """)
    code, text, table, _ = _check(tmp_path, capsys, "twohot", path, "--clause", "TWOHOT-4,TWOHOT-12")
    cells = table["implementations"][str(path)]["clauses"]
    assert code == 1
    assert cells["TWOHOT-4"]["kind"] == "wrong"
    assert cells["TWOHOT-4"]["message"].startswith("[TWOHOT-4] the check could not read the result: ")
    assert cells["TWOHOT-12"]["status"] == "missing" and cells["TWOHOT-12"]["label"] == "MISSING"
    assert "implementation lacks log_prob; expected log_prob(logits: Tensor, x: Tensor, num_bins=255" in text


def test_run_property_counts_every_example_and_shrinks_the_failure():
    seen = []

    def check(impl, x):
        seen.append(x)
        if x >= 1000:
            fail("T-1", f"x = {x} >= 1000")

    prop = Property("T-1", check, st.fixed_dictionaries(dict(x=st.integers(1, 10**6))), (dict(x=7),))
    out = run_property(prop, None, "ci")
    first_pass = seen[: out.tried]
    assert out.tried == 26 and len(set(first_pass)) == 26 and first_pass[0] == 7  # pinned example first
    assert 1 < out.failed == sum(x >= 1000 for x in first_pass) < out.tried
    assert out.kind == "wrong" and out.message == "[T-1] x = 1000 >= 1000" and out.case == "x=1000"  # shrunk
    assert out.reproduce[:2] == ("--clause", "T-1") and out.reproduce[-2] == "--reproduce"
    blob = out.reproduce[-1]
    again = run_property(prop, None, "ci", reproduce=blob)
    assert again.message == out.message and again.tried == 1


def test_a_profile_that_is_not_derandomized_prints_its_seed():
    prop = Property("T-2", lambda impl, x: fail("T-2", "always") if x > 5 else None,
                    st.fixed_dictionaries(dict(x=st.integers(0, 100))))
    out = run_property(prop, None, "dev", seed=1234)
    assert out.reproduce[:6] == ("--clause", "T-2", "--profile", "dev", "--seed", "1234")
    assert run_property(prop, None, "dev", seed=1234).failed == out.failed  # the same draws


def test_one_clause_and_unknown_clauses(tmp_path, capsys):
    code, text, table, _ = _check(tmp_path, capsys, "gae", "rlspec.reference.gae", "--clause", "GAE-9")
    assert code == 0 and list(table["clauses"]) == ["GAE-9"]
    assert [line.split() for line in text.splitlines()[2:4]] == [["validation"], ["GAE-9", "PASS"]]
    assert "GAE-1 " not in text
    assert cli.main(["check", "gae", "--clause", "GAE-99", "--out", str(tmp_path)]) == 2
    assert "unknown clause GAE-99; gae has GAE-1, GAE-2" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Declared partial support
# --------------------------------------------------------------------------------------------------
CBAR_ONE = """
    from rlspec.reference.vtrace import vtrace as _vtrace

    def vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
               pg_rho_bar=None):
        return _vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar=rho_bar, c_bar=1.0, lam=lam,
                       pg_rho_bar=pg_rho_bar)  # like rlax: no c_bar, traces always clipped at 1
    """


def test_unsupported_cases_are_reported_as_such_not_as_failures(tmp_path, capsys):
    path = _write(tmp_path, "cbar_one.py", CBAR_ONE)
    clauses = ("--clause", "VTRACE-1,VTRACE-9,VTRACE-10")
    code, text, table, _ = _check(tmp_path, capsys, "vtrace", path, *clauses)
    cells = table["implementations"][str(path)]["clauses"]
    assert code == 1 and cells["VTRACE-1"]["label"] == "FAIL" and cells["VTRACE-10"]["label"] == "ACCEPTS-BAD"

    rules = _write(tmp_path, "rlax.unsupported", """
        # this library fixes c_bar = 1
        VTRACE-* if c_bar != 1
        VTRACE-10 if name == "c_bar"   # so it cannot reject a bad c_bar
        """)
    code, text, table, md = _check(tmp_path, capsys, "vtrace", path, *clauses, "--unsupported", str(rules))
    cells = table["implementations"][str(path)]["clauses"]
    assert code == 0 and "all clauses pass" in text
    one, ten = cells["VTRACE-1"], cells["VTRACE-10"]
    assert one["status"] == "pass" and one["label"] == "PASS*" and one["unsupported"] > 0 and one["tried"] > 0
    assert ten["status"] == "pass" and ten["unsupported"] > 0
    assert f"VTRACE-1 (maths) PASS*: {one['tried']} examples passed; {one['unsupported']} declared unsupported" in text
    n = ten["unsupported"]
    assert f'VTRACE-10 if name == "c_bar"  ({rules}:4): {n} example{"s" * (n != 1)} in VTRACE-10' in text
    assert "PASS* = passes; some examples declared unsupported" in md


def test_a_whole_clause_declared_unsupported_and_bad_files(tmp_path, capsys):
    rules = _write(tmp_path, "rules.txt", "GAE-1\n")
    code, text, table, _ = _check(tmp_path, capsys, "gae", _write(tmp_path, "w.py", WRONG_GAE),
                                  "--clause", "GAE-1", "--unsupported", str(rules))
    cell = next(iter(table["implementations"].values()))["clauses"]["GAE-1"]
    assert code == 0 and cell["status"] == "unsupported" and cell["label"] == "UNSUPPORTED"
    assert "all clauses pass (1 declared unsupported)" in text
    assert cell["message"] == f"declared unsupported: GAE-1 ({rules}:1)"
    for body, says in (("GAE-77\n", ":1: 'GAE-77' matches no clause"),
                       ("\nGAE-* if gamma >\n", ":2: cannot parse the condition"),
                       ("GAE-* if gamma(1) > 2\n", "the left side of a comparison is a case key"),
                       ("GAE-* if reward > 0\n", "reward is a tensor of shape")):
        (tmp_path / "bad.txt").write_text(body)
        assert cli.main(["check", "gae", "--clause", "GAE-1", "--unsupported", str(tmp_path / "bad.txt"),
                         "--impl", "rlspec.reference.gae", "--out", str(tmp_path / "x")]) == 2
        assert says in capsys.readouterr().err
    (tmp_path / "bin.txt").write_bytes(b"GAE-1\xff\xfe\n")
    assert cli.main(["check", "gae", "--clause", "GAE-1", "--unsupported", str(tmp_path / "bin.txt"),
                     "--impl", "rlspec.reference.gae", "--out", str(tmp_path / "x")]) == 2
    assert "is not a text file of rules" in capsys.readouterr().err


def test_a_bad_profile_or_output_path_is_refused_before_checking(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "fast")
    with pytest.raises(SystemExit) as stop:
        cli.main(["check", "gae", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2 and "$HYPOTHESIS_PROFILE is 'fast', not one of rlspec's profiles (ci, dev, nightly)" \
        in capsys.readouterr().err
    monkeypatch.delenv("HYPOTHESIS_PROFILE")
    (tmp_path / "file").write_text("kept")
    for flag, path, says in (("--out", tmp_path / "file", "is a file; expected a folder"),
                             ("--junit-xml", tmp_path, "is a folder; expected a file")):
        with pytest.raises(SystemExit) as stop:
            cli.main(["check", "gae", flag, str(path)])
        assert stop.value.code == 2 and f"{flag} {path} {says}" in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "kept" and not (tmp_path / "r").exists()


def test_a_report_that_cannot_be_written_is_an_error_after_the_tables(tmp_path, capsys, monkeypatch):
    from rlspec import report

    def full_disk(*_args, **_kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report, "write", full_disk)
    code = cli.main(["check", "gae", "--clause", "GAE-1", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 1 and "GAE-1" in out
    assert "the report could not be written ([Errno 28] No space left on device); the tables above are complete" in err


def test_a_second_check_into_one_out_says_whose_report_it_replaces(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli.main(["check", "gae", "--clause", "GAE-1", "--out", str(out)]) == 0
    first = json.loads((out / "report.json").read_text())
    assert "replace" not in capsys.readouterr().out
    assert cli.main(["check", "vtrace", "--clause", "VTRACE-1", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"(they replace the report of an earlier check (gae, written {first['written_at']}))" in said
    assert [t["contract"] for t in json.loads((out / "report.json").read_text())["tables"]] == ["vtrace"]


def test_unsupported_conditions():
    from rlspec.unsupported import UnsupportedCases, parse_rule

    rules = UnsupportedCases([parse_rule(line, f"f:{i}") for i, line in enumerate([
        "VTRACE-* if c_bar != 1 and rho_bar >= 2",
        "TWOHOT-12 if logits.dtype == float16",
        "REMA-* if config.decay in (0.0, 0.5)",
        "LAMBDA-3 if lam == inf",
        "GAE-4"])])
    assert rules.case("VTRACE-1", dict(c_bar=0.5, rho_bar=2.0)) == "VTRACE-* if c_bar != 1 and rho_bar >= 2 (f:0)"
    assert rules.case("VTRACE-1", dict(c_bar=0.5, rho_bar=1.0)) is None
    assert rules.case("VTRACE-1", dict(c_bar=torch.tensor(0.5), rho_bar=torch.tensor(3.0)))  # 0-d tensors
    assert rules.case("VTRACE-1", dict(rho_bar=3.0)) is None  # no c_bar in this case: the rule does not apply
    assert rules.case("GAE-1", dict(c_bar=0.5, rho_bar=3.0)) is None  # other clauses
    assert rules.case("TWOHOT-12", dict(logits=torch.zeros(2, dtype=torch.float16)))
    assert rules.case("TWOHOT-12", dict(logits=torch.zeros(2))) is None
    assert rules.case("REMA-2", dict(config=dict(decay=0.5))) and not rules.case("REMA-2", dict(config=dict(decay=0.9)))
    assert rules.case("LAMBDA-3", dict(lam=float("inf")))
    assert rules.clause("GAE-4") == "GAE-4 (f:4)" and rules.clause("GAE-5") is None
    assert [r["examples"] for r in rules.summary()] == [2, 1, 1, 1, 0]


# --------------------------------------------------------------------------------------------------
# Discoverability and compact messages
# --------------------------------------------------------------------------------------------------
def test_list_shows_signatures_attributes_defaults_and_case_keys(capsys):
    assert cli.main(["list", "replay"]) == 0
    text = capsys.readouterr().out
    assert "ReplayRing(capacity, num_envs, obs_shape=(1, 72, 20), obs_dtype=torch.uint8" in text
    assert ".t, .committed_t" in text and "commit_stride=1" in text
    assert "REPLAY-14 (since 1.0): a bad push is rejected" in text and "case keys: capacity, num_envs" in text
    assert "validation: bad input rejected" in text and "Changelog:\n  1.1: store_final" in text
    assert "  1.0: first versioned release" in text
    assert "fast-torch: rlspec.fast.replay" in text
    assert cli.main(["list", "return_ema"]) == 0  # no INTERFACE text: introspected from the reference
    text = capsys.readouterr().out
    assert "ReturnEMA(decay: float = 0.99, max_range: float = 1.0" in text and ".update(x: torch.Tensor)" in text
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    assert "gae 1.1: interface gae; implementations reference, fast-torch, fast-triton" in text
    assert "  validation:\n    VTRACE-9: " in text


def test_tensors_print_compactly():
    logits = torch.arange(3 * 255, dtype=torch.float64).reshape(3, 255) / 4 - 10
    logits[1, 7] = float("nan")
    logits[2, 0] = float("-inf")  # a masked bin
    text = describe(logits)
    assert text == ("tensor(shape=(3, 255), dtype=float64, min=-10, max=181, 1 NaN, 1 inf, "
                    "values=[-10, -9.75, -9.5, -9.25, -9, -8.75, ... 759 more])")
    assert describe(torch.tensor([1.5, 2.0])) == "tensor(shape=(2,), dtype=float32, values=[1.5, 2])"
    assert describe(torch.zeros(10, dtype=torch.bool)) == \
        "tensor(shape=(10,), dtype=bool, 0 True, values=[False, False, False, False, False, False, ... 4 more])"
    assert len(describe([torch.zeros(100)] * 20)) < 700


def test_a_message_that_prints_a_whole_tensor_is_cut():
    big = torch.arange(3 * 255.0).reshape(3, 255)
    prop = Property("T-3", lambda impl: fail("T-3", f"logits {big.tolist()} are wrong", x=big))
    out = run_property(prop, None)
    assert len(out.message) < 2100 and out.message.startswith("[T-3] logits [[0.0, 1.0, 2.0")
    assert "characters cut ...]" in out.message and out.message.endswith("... 759 more])")


def test_unsupported_cases_are_replaced_by_new_draws():
    from rlspec.unsupported import UnsupportedCases, parse_rule

    checked = []
    prop = Property("T-4", lambda impl, x: checked.append(x), st.fixed_dictionaries(dict(x=st.integers(0, 10**6))))
    half = UnsupportedCases([parse_rule("T-4 if x > 500000", "f:1")])
    out = run_property(prop, None, "ci", unsupported=half)
    assert out.status == "pass" and out.tried == 25 == len(checked) and out.unsupported > 0
    assert max(checked) <= 500000 and half.summary()[0]["examples"] == out.unsupported
    every = run_property(prop, None, "ci", unsupported=UnsupportedCases([parse_rule("T-* if x >= 0", "f:1")]))
    assert (every.status, every.tried) == ("unsupported", 0) and every.unsupported > 0


def test_a_failing_pinned_example_is_shown_before_drawn_ones():
    def check(impl, x):
        if x >= 1000:
            fail("T-5", f"x = {x} >= 1000")

    prop = Property("T-5", check, st.fixed_dictionaries(dict(x=st.integers(1, 10**6))), (dict(x=5000),))
    out = run_property(prop, None, "ci")
    assert out.message == "[T-5] x = 5000 >= 1000" and out.failed > 1
    assert "--reproduce" not in out.reproduce  # `--clause T-5` alone runs the pinned examples first


def test_a_check_that_discards_every_case_checked_nothing():
    from hypothesis import reject

    prop = Property("T-6", lambda impl, x: reject(), st.fixed_dictionaries(dict(x=st.integers(0, 10))))
    out = run_property(prop, None, "ci")
    assert out.status == "fail" and out.tried == 0 and "Unsatisfiable" in out.message


def test_an_input_changed_in_place_and_a_numpy_result_are_failures_of_their_own(tmp_path, capsys):
    clobbers = _write(tmp_path, "clobbers.py", """
        from rlspec.reference.gae import gae as _gae

        def gae(reward, value, terminated, truncated, next_value, gamma, lam):
            out = _gae(reward, value, terminated, truncated, next_value, gamma, lam)
            reward.mul_(2.0)  # the caller's rollout, rewritten
            return out
        """)
    code, text, table, _ = _check(tmp_path, capsys, "gae", clobbers, "--clause", "GAE-1")
    cell = table["implementations"][str(clobbers)]["clauses"]["GAE-1"]
    assert code == 1 and cell["label"] == "MUTATES-INPUT" and "changed its argument 'reward' in place" in \
        cell["message"], cell
    as_numpy = _write(tmp_path, "as_numpy.py", """
        from rlspec.reference.gae import gae as _gae

        def gae(reward, value, terminated, truncated, next_value, gamma, lam):
            return tuple(t.numpy() for t in _gae(reward, value, terminated, truncated, next_value, gamma, lam))
        """)
    code, text, table, _ = _check(tmp_path, capsys, "gae", as_numpy, "--clause", "GAE-1")
    cell = table["implementations"][str(as_numpy)]["clauses"]["GAE-1"]
    assert code == 1 and "returned a numpy.ndarray, where the interface returns torch tensors" in cell["message"]


def test_an_unsupported_rule_that_matches_nothing_it_covers_fails_the_check(tmp_path, capsys):
    rules = tmp_path / "rules.unsupported"
    rules.write_text("GAE-1 if gamma == 7.5   # gamma is never 7.5\n")
    code, text, _, _ = _check(tmp_path, capsys, "gae", "rlspec.reference.gae", "--clause", "GAE-1", "--unsupported",
                              str(rules))
    assert code == 1 and "unsupported rule matched nothing it covers: GAE-1 if gamma == 7.5" in text, text
