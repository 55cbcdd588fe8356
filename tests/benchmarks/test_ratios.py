"""benchmarks/kernels/ratios.py on a small hand-made pytest-benchmark report: ratios, spreads, verdicts, the table
and the README block it replaces (not a benchmark: runs in the ordinary suite)."""

from __future__ import annotations

import json

import pytest

from benchmarks.kernels import ratios

CPU = {"model": "AMD EPYC", "vendor": "AuthenticAMD", "isa_level": "x86-64-v3", "flags": ["avx", "avx2", "fma"],
       "hypervisor": True, "caches": {}, "logical_cpus": 2, "usable_cpus": 2, "machine": "x86_64"}


def _bench(op: str, impl: str, median: float, lo: float, q1: float, q3: float) -> dict:
    return {"extra_info": {"op": op, "impl": impl, "device": "cpu"},
            "stats": {"min": lo, "median": median, "q1": q1, "q3": q3, "rounds": 10, "mean": median}}


def _report() -> dict:
    return {"machine_info": {"cpu_identity": CPU, "loadavg": {"start": [2.0, 1.5, 1.0], "end": [2.5, 1.6, 1.1]},
                             "pytest_args": ["benchmarks/kernels/test_bench_twohot.py", "-m", "bench"]},
            "datetime": "2026-11-27T00:00:00",
            "benchmarks": [_bench("twohot.mean", "sheeprl", 0.010, 0.008, 0.009, 0.012),
                           _bench("twohot.mean", "fast-compiled", 0.004, 0.002, 0.003, 0.005),
                           _bench("twohot.mean", "reference", 0.100, 0.090, 0.095, 0.110)]}


def test_ratios_spreads_verdicts_and_readme_block(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(_report()))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{ratios.BEGIN}\nold table\n{ratios.END}\nrest\n")
    kept = tmp_path / "results" / "kernels.json"
    other = {"cpu": {"model": "another CPU"}, "groups": []}
    kept.parent.mkdir()
    kept.write_text(json.dumps({"runs": {"another_cpu_avx512": other, "amd_epyc_avx2": {"groups": "stale"}}}))
    ratios.main([str(bench), "--record", str(kept), "--readme", str(readme)])

    runs = json.loads(kept.read_text())["runs"]
    assert runs["another_cpu_avx512"] == other  # another CPU's run stays; this CPU's is replaced
    recorded = runs["amd_epyc_avx2"]
    assert recorded["loadavg"] == {"start": [2.0, 1.5, 1.0], "end": [2.5, 1.6, 1.1]}
    assert recorded["pytest_args"] == ["benchmarks/kernels/test_bench_twohot.py", "-m", "bench"]
    (group,) = recorded["groups"]
    r = group["speedup"]["fast-compiled"]["sheeprl"]
    assert r["median"] == pytest.approx(2.5) and r["min"] == pytest.approx(4.0)
    assert r["iqr"] == pytest.approx([0.009 / 0.005, 0.012 / 0.003])
    assert group["verdict"] == {"fast-compiled": "MET"}  # 2.5× against the 1.5× target

    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith(f"{ratios.END}\nrest\n")
    row = next(line for line in text.splitlines() if line.startswith("| `twohot.mean`"))
    assert "**2.50×**" in row and "4.00×" in row and "1.80–4.00×" in row and "≥ 1.5×: MET" in row
    flat = " ".join(text.split())  # the head is wrapped
    assert "2.00/1.50/1.00 at the start, 2.50/1.60/1.10 at the end" in flat
    assert "**Loaded machine** (load 2.0 on 2 CPUs)" in flat  # above half the CPUs at the start: said in the head
    assert "reference" not in text.split(ratios.BEGIN)[1]  # sheeprl is the baseline shown, not the oracle


def test_readme_without_markers_is_refused(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(_report()))
    readme = tmp_path / "README.md"
    readme.write_text("no block\n")
    with pytest.raises(SystemExit, match="no <!-- kernel-bench:begin -->"):
        ratios.main([str(bench), "--readme", str(readme)])
    assert readme.read_text() == "no block\n"


def test_missing_report_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no benchmark JSON at"):
        ratios.main([str(tmp_path / "absent.json")])


@pytest.mark.parametrize("flags, slug", [(["avx2", "avx512f"], "amd_epyc_avx512"), (["avx2"], "amd_epyc_avx2"),
                                         ([], "amd_epyc_scalar")])
def test_cpu_slug(flags, slug):
    assert ratios.cpu_slug({**CPU, "flags": flags}) == slug
