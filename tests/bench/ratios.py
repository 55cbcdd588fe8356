"""Read a pytest-benchmark JSON (tests/bench), print each group's medians and the fast implementations'
speedups, check the issue's targets, and write ratios.json next to the input (bench-results/ratios.json):
{"cpu": the CPU identity the run recorded (rlspec/runs/cpu.py, via tests/bench/conftest.py), "groups": [...]}.

    python tests/bench/ratios.py bench-results/bench.json

speedup = other_median / fast_median (above 1: the fast implementation is faster); the targets are read
off these. The ratio of the minimums is printed and saved beside it: on a shared machine the medians
absorb other processes' load, the minimums much less. Benchmarks report, they do not gate: the exit
status is 0 whether or not a target is met.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from rlspec.runs import cpu

BASELINES = ("reference", "sheeprl", "cleanrl-loop", "fast-torch", "per-frame")
TARGETS = {  # op: (baseline, factor) from the issues' "Speed" sections
    "twohot.log_prob": ("sheeprl", 3.0),
    "twohot.mean": ("sheeprl", 2.0),
    "return_ema.update": ("sheeprl", 3.0),
    "lambda_return[15, 4096]": ("sheeprl", 1.0),
    "gae[512, 4096]": ("reference", 10.0),  # the "Python loop"
    "risk_target[2048, H=64]": ("reference", 20.0),
}


def group_stats(report: dict) -> dict[tuple[str, str], dict[str, dict]]:
    """(op, device) -> {impl: pytest-benchmark stats}, from the extra_info each benchmark carries."""
    groups: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for bench in report["benchmarks"]:
        info = bench["extra_info"]
        groups[info["op"], info["device"]][info["impl"]] = bench["stats"]
    return dict(sorted(groups.items()))


def summarize(op: str, device: str, stats: dict[str, dict]) -> dict:
    print(f"\n{op} [{device}]")
    for impl, s in sorted(stats.items(), key=lambda item: item[1]["median"]):
        print(f"  {impl:<12} median {s['median'] * 1e3:10.3f} ms   (min {s['min'] * 1e3:10.3f} ms, "
              f"{s['rounds']} rounds)")
    times = {impl: s["median"] for impl, s in stats.items()}
    mins = {impl: s["min"] for impl, s in stats.items()}
    target = TARGETS.get(op)
    speedups: dict[str, dict[str, float]] = {}
    min_speedups: dict[str, dict[str, float]] = {}
    verdicts: dict[str, str] = {}
    for fast in sorted(impl for impl in times if impl.startswith("fast-")):
        speedups[fast] = {base: times[base] / times[fast] for base in BASELINES if base in times and base != fast}
        min_speedups[fast] = {base: mins[base] / mins[fast] for base in BASELINES if base in mins and base != fast}
        for base, ratio in speedups[fast].items():
            print(f"  {fast} speedup over {base}: {ratio:7.2f}x   "
                  f"(minimums: {min_speedups[fast][base]:.2f}x)")
        if target is not None:
            base, factor = target
            verdicts[fast] = (f"{base} not measured (not installed?)" if base not in times
                              else "MET" if speedups[fast][base] >= factor else "NOT MET")
            print(f"  target: {fast} >= {factor:g}x over {base}: {verdicts[fast]}")
    return {"op": op, "device": device, "median_s": times, "min_s": mins, "speedup": speedups,
            "speedup_of_minimums": min_speedups, "target_x": target, "verdict": verdicts}


def main(path: str) -> None:
    report = json.loads(Path(path).read_text())
    machine = report.get("machine_info", {})
    ident = machine.get("cpu_identity")  # absent in a JSON written before it was recorded
    name = cpu.label(ident) if ident else machine.get("cpu", {}).get("brand_raw", "?")
    print(f"machine: {name}, python {machine.get('python_version', '?')}")
    rows = [summarize(op, device, stats) for (op, device), stats in group_stats(report).items()]
    if not rows:
        print("no benchmarks in the report (were they run with -m bench --benchmark-enable?)")
    out = Path(path).with_name("ratios.json")
    out.write_text(json.dumps({"cpu": ident, "groups": rows}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main(sys.argv[1])
