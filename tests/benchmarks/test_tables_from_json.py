"""No hand copy of a result: each committed results table is exactly what its script writes from the committed
JSON beside it, and recomputing a comparison's statistics from the JSON's own per-seed values gives the JSON's
figures again (so every verdict word in a table follows from the data it sits beside)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.bonus import ablation, vs_sb3
from benchmarks.dreamer import room_exit, train_step, vs_sheeprl
from benchmarks.gameboy import frames_cpu, sm90_build
from benchmarks.safe import learning, throughput, vs_omnisafe
from benchmarks.semantics import fit_splits, overhead, protocol

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks"
TABLES = [
    (vs_omnisafe.markdown, None, "safe/results/safe_vs_omnisafe"),
    (vs_omnisafe.markdown, None, "safe/results/ppo_kl_pass/safe_vs_omnisafe"),
    (vs_sb3.markdown, vs_sb3.rechecked, "bonus/results/bonus_vs_sb3_reach-v3"),
    (vs_sb3.markdown, vs_sb3.rechecked, "bonus/results/bonus_vs_sb3_push-v3"),
    (ablation.markdown, ablation.with_statistics, "bonus/results/bonus_ablation_metaworld_reach-v3"),
    (vs_sheeprl.markdown, vs_sheeprl.rechecked, "dreamer/results/dreamer_vs_sheeprl"),
    (vs_sheeprl.markdown, vs_sheeprl.rechecked, "dreamer/results/crop/dreamer_vs_sheeprl"),
    (room_exit.markdown, None, "dreamer/results/dreamer_room_exit_conv"),
    (room_exit.markdown, None, "dreamer/results/dreamer_room_exit"),
    (train_step.markdown, None, "dreamer/results/dreamer_train_step"),
    (train_step.markdown, None, "dreamer/results/dreamer_train_step_run1"),
    (protocol.markdown, protocol.rechecked, "semantics/results/semantic_protocol"),
    (overhead.markdown, None, "semantics/results/semantic_overhead"),
    (learning.markdown, None, "safe/results/safe_learning"),
    (throughput.markdown, None, "safe/results/safe_throughput"),
    (frames_cpu.markdown, None, "gameboy/results/frames_cpu"),
    (sm90_build.markdown, None, "gameboy/results/sm90_build"),
]


@pytest.mark.parametrize("markdown, recompute, stem", TABLES, ids=[t[2] for t in TABLES])
def test_a_committed_table_is_its_json_written_out(markdown, recompute, stem):
    result = json.loads((RESULTS / f"{stem}.json").read_text())
    assert markdown(result) == (RESULTS / f"{stem}.md").read_text()


def _same(a, b, path="") -> list[str]:
    """Where two JSON values differ (floats to 1e-9 relative, NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _same(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)):
        ok = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return [] if ok else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("markdown, recompute, stem", [t for t in TABLES if t[1]], ids=[t[2] for t in TABLES if t[1]])
def test_recomputing_a_comparison_from_its_per_seed_values_gives_its_figures(markdown, recompute, stem):
    stored = json.loads((RESULTS / f"{stem}.json").read_text())
    recomputed = json.loads(json.dumps(recompute(json.loads(json.dumps(stored)))))  # as written: string keys
    differences = _same(recomputed, stored)
    assert differences == [], differences[:10]


@pytest.mark.parametrize("rlspec_side, algos, stem", [
    ("rlspec", ["PPOLag", "PPO", "CPO", "CPPOPID"], "safe/results/safe_vs_omnisafe"),
    ("rlspec_kl_pass", ["PPO"], "safe/results/ppo_kl_pass/safe_vs_omnisafe"),
])
def test_the_safe_comparison_is_regenerated_from_the_kept_runs(rlspec_side, algos, stem, tmp_path, monkeypatch):
    """The one command the benchmarks page gives writes, from benchmarks/runs alone, the committed JSON (every
    figure, path and verdict) and table (its paths are relative to the checkout, where the command is run)."""
    monkeypatch.chdir(RESULTS.parent)
    code = vs_omnisafe.main(["--rlspec", f"benchmarks/runs/safe_vs_omnisafe/{rlspec_side}",
                             "--omnisafe", "benchmarks/runs/safe_vs_omnisafe/omnisafe",
                             "--sb3", "benchmarks/runs/safe_vs_omnisafe/sb3", "--algos", *algos,
                             "--total-steps", "200000", "--out", str(tmp_path)])
    assert code == 0
    made, kept = (json.loads(p.read_text()) for p in (tmp_path / "safe_vs_omnisafe.json", RESULTS / f"{stem}.json"))
    made.pop("machine"), kept.pop("machine")  # the machine the script ran on, not the runs'
    assert made == kept
    assert (tmp_path / "safe_vs_omnisafe.md").read_text() == (RESULTS / f"{stem}.md").read_text()


def test_the_fit_table_is_its_two_jsons_written_out():
    assert fit_splits.markdown(fit_splits.read()) == (fit_splits.RESULTS / "semantics_fit.md").read_text()
