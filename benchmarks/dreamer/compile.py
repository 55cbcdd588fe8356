"""Does torch.compile pay for the Dreamer train step on this CPU? ``train_step`` (rlspec/algos/dreamer.py) of
the eager fast kit (the anchor) against ``Kit.fast(compile=True)`` (fast/world_model_compiled.py), from one
seed on one synthetic replay batch, at the engine's smoke preset size and at DreamerConfig's default size.

    python -m benchmarks.dreamer.compile    # JSON: benchmarks/dreamer/results/dreamer_compile_cpu.json

Per arm: ``--warmup`` steps (the compiled arm compiles in them: their wall time is reported as
``first_steps_s``), then the median (and least) wall time of ``--steps`` steps, the arms' steps
alternating. ``speedup`` = eager median / compiled median (> 1: compile pays); ``speedup_of_min`` the same
for the least times (the less load-sensitive figure on a shared machine). One torch thread by default, as
the engines run (``torch_threads``). The machine's 1-minute load average is recorded beside.

Not timed here: the fused LayerNorm-GRU (fast/rssm_triton.py) — on CPU it runs under the Triton interpreter,
whose speed means nothing; its compiled timing needs CUDA (tests/gpu/test_rssm_triton_cuda.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from rlspec.algos import dreamer as core
from rlspec.engines.dreamer import NUM_ACTIONS, PRESETS
from rlspec.evidence.cpu import identity as cpu_identity

SMOKE = core.DreamerConfig(**{k.split(".", 1)[1]: v for k, v in PRESETS["smoke"].items() if k.startswith("dreamer.")})
SIZES = {"smoke": SMOKE, "default": core.DreamerConfig()}


def batch(cfg: core.DreamerConfig, gen: torch.Generator) -> dict:
    """A replay batch [T, B] of the room's layout (packed2 frames [T, B, 1, 72, 20] uint8), one reset at t = 0."""
    T, B = cfg.seq_len, cfg.batch_size
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0] = True
    return {"obs": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=gen),
            "action": torch.randint(0, NUM_ACTIONS, (T, B), generator=gen),
            "reward": (torch.rand(T, B, generator=gen) < 0.3).float(), "is_first": first,
            "continue": torch.ones(T, B)}


def time_arms(cfg: core.DreamerConfig, kits: tuple[str, ...], warmup: int, steps: int) -> dict:
    """Both arms built from seed 0, warmed up in turn, then timed step by step in alternation (load on a shared
    machine falls on both alike)."""
    arms = {}
    for kit in kits:
        gen = torch.Generator().manual_seed(0)
        state = core.make_state(cfg, NUM_ACTIONS, core.Kit.named(kit), gen)
        data = batch(cfg, gen)
        start = time.perf_counter()
        for _ in range(warmup):
            core.train_step(state, data, gen)
        arms[kit] = dict(state=state, data=data, gen=gen, first=time.perf_counter() - start, times=[])
    for _ in range(steps):
        for arm in arms.values():
            start = time.perf_counter()
            arm["metrics"] = core.train_step(arm["state"], arm["data"], arm["gen"])
            arm["times"].append(time.perf_counter() - start)
    return {kit: dict(first_steps_s=round(a["first"], 3), step_s=round(statistics.median(a["times"]), 4),
                      min_step_s=round(min(a["times"]), 4), steps_s=[round(t, 4) for t in a["times"]],
                      loss=float(a["metrics"]["Loss/loss"]))
            for kit, a in arms.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {}
    for size in args.sizes:
        cfg = SIZES[size]
        arms = time_arms(cfg, ("fast", "fast-compiled"), args.warmup, args.steps)
        eager, compiled = arms["fast"]["step_s"], arms["fast-compiled"]["step_s"]
        results[size] = dict(config=dict(deter=cfg.deter, hidden=cfg.hidden, stoch=cfg.stoch, classes=cfg.classes,
                                         batch_size=cfg.batch_size, seq_len=cfg.seq_len, horizon=cfg.horizon),
                             arms=arms, speedup=round(eager / compiled, 3),
                             speedup_of_min=round(arms["fast"]["min_step_s"] / arms["fast-compiled"]["min_step_s"], 3),
                             load_avg_1min=os.getloadavg()[0])
        print(f"{size}: eager {eager:.3f} s/step, compiled {compiled:.3f} s/step (first {args.warmup} steps "
              f"{arms['fast-compiled']['first_steps_s']:.0f} s), speedup {eager / compiled:.2f}x", flush=True)
    report = dict(benchmark="dreamer train_step: eager fast kit vs Kit.fast(compile=True)", anchor="fast (eager)",
                  device="cpu", threads=args.threads, torch=torch.__version__, machine=platform.machine(),
                  cpu=cpu_identity(), cpus=os.cpu_count(), warmup=args.warmup, steps=args.steps, results=results)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "dreamer_compile_cpu.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
