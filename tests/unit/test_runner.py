"""The runner and CLI: any module by path, missing functions fail only their clauses, reports, messages."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from rlspec import cli, registry
from rlspec.spec.core import ContractViolation, assert_close, run_contract


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_partial_module_fails_only_its_missing_clauses(tmp_path):
    path = _write(tmp_path, "partial.py", "from rlspec.reference.twohot import symlog, symexp\n")
    outcomes = {o.clause: o for o in run_contract(registry.load_contract("twohot"), registry.load_object(str(path)))}
    assert {c for c, o in outcomes.items() if o.status == "pass"} == {"TWOHOT-1", "TWOHOT-2", "TWOHOT-3", "TWOHOT-4"}
    assert outcomes["TWOHOT-12"].status == "missing"
    assert "log_prob" in outcomes["TWOHOT-12"].message


def test_cli_checks_a_user_file_and_reports_the_violation(tmp_path, capsys):
    path = _write(tmp_path, "user_ema.py", """
        import torch
        from rlspec.reference.return_ema import ReturnEMA as _Ref

        class ReturnEMA(_Ref):
            def update(self, x):  # bug: no floor on invscale
                offset, _ = super().update(x)
                return offset, self.high - self.low
        """)
    out_dir = tmp_path / "report"
    code = cli.main(["check", "return_ema", "--impl", str(path), "--profile", "ci", "--out", str(out_dir)])
    text = capsys.readouterr().out
    assert code == 1
    assert "REMA-5" in text and "FAIL" in text and "1/max_range" in text
    table = json.loads((out_dir / "report.json").read_text())["tables"][0]
    cells = table["implementations"][str(path)]["clauses"]
    assert cells["REMA-5"]["status"] == "fail" and cells["REMA-3"]["status"] == "pass"
    assert "| REMA-5:" in (out_dir / "report.md").read_text()


def test_cli_passes_on_reference_and_reports_unimportable_impl(tmp_path, capsys):
    ok = cli.main(["check", "return_ema", "--impl", "rlspec.reference.return_ema", "--profile", "ci",
                   "--out", str(tmp_path / "a")])
    assert ok == 0 and "all clauses pass" in capsys.readouterr().out
    bad = cli.main(["check", "return_ema", "--impl", "no_such_module_xyz", "--profile", "ci",
                    "--out", str(tmp_path / "b")])
    assert bad == 1 and "FAILED TO LOAD no_such_module_xyz: ModuleNotFoundError" in capsys.readouterr().out


def test_cli_rejects_unknown_contract(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "nope"])
    assert "unknown contract 'nope'" in capsys.readouterr().err


def test_assert_close_reports_max_diffs_count_and_worst_points():
    got = torch.tensor([1.0, 2.0, 3.5, 4.0])
    with pytest.raises(ContractViolation) as err:
        assert_close("X-1", "values", got, torch.tensor([1.0, 2.0, 3.0, 4.25]), atol=1e-6, x=got)
    msg = str(err.value)
    assert msg.startswith("[X-1] values: 2 of 4 elements differ")
    assert "max |abs diff| = 0.5" in msg and "max |rel diff| = 0.167" in msg
    assert "worst: [2]: got 3.5, expected 3" in msg and "[3]: got 4, expected 4.25" in msg
    assert "inputs: x=tensor(shape=(4,), dtype=float32" in msg


def test_assert_close_matches_nan_only_with_nan():
    assert_close("X-2", "v", torch.tensor([float("nan")]), torch.tensor([float("nan")]), atol=0)
    with pytest.raises(ContractViolation, match="1 of 1"):
        assert_close("X-2", "v", torch.tensor([float("nan")]), torch.tensor([0.0]), atol=1.0)


def test_on_device_moves_tensor_arguments_and_brings_results_back():
    import types

    from rlspec.registry import OnDevice

    def probe(x, pair, *, y, scale=2.0):  # reports where its tensors arrived
        if scale < 0:
            raise ValueError("probe: argument 'scale' must be >= 0")
        return torch.tensor([x.is_meta, pair[0].is_meta, y.is_meta]), scale

    wrapped = OnDevice(types.SimpleNamespace(probe=probe, BINS=255), "meta")
    seen, scale = wrapped.probe(torch.zeros(2), (torch.ones(1), 3), y=torch.zeros(1))
    assert seen.tolist() == [True, True, True] and seen.device.type == "cpu" and scale == 2.0
    assert wrapped.BINS == 255 and wrapped.BACKEND_NOTE == "meta"
    with pytest.raises(ValueError, match="scale"):
        wrapped.probe(torch.zeros(1), (torch.zeros(1),), y=torch.zeros(1), scale=-1.0)


def test_a_contract_runs_unchanged_through_on_device():
    from rlspec.registry import OnDevice

    impl = OnDevice(registry.load_object("rlspec.fast.twohot"), "cpu")
    outcomes = run_contract(registry.load_contract("twohot"), impl)
    assert [o.clause for o in outcomes if o.status != "pass"] == []


def test_assert_close_relative_diff_of_an_infinite_or_zero_miss_is_inf():
    with pytest.raises(ContractViolation, match=r"max \|rel diff\| = inf"):
        assert_close("X-3", "v", torch.tensor([-5.0]), torch.tensor([float("-inf")]), atol=1e-6)
    with pytest.raises(ContractViolation, match=r"max \|abs diff\| = 0.5, max \|rel diff\| = inf"):
        assert_close("X-3", "v", torch.tensor([0.5]), torch.tensor([0.0]), atol=1e-6)
