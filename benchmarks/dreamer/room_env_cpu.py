"""Room env on CPU: env steps/s of the Warp twin (device="cpu") against the ROM in PyBoy at the same frame
skip, and the random policy's success rate on room-exit (the learning baseline).

    python -m benchmarks.dreamer.room_env_cpu [OUT_DIR]  (default benchmarks/dreamer/results/: room_env_cpu.json, .png)

Throughput: uniform random actions (one seeded torch.Generator), room-exit, step limit 64 (auto-resets
included), frames written into a caller-given buffer every step (the replay ring's direct write). Both run
in the calling thread (PyBoy steps its emulators in turn; Warp's CPU device is single-threaded), so the rate
is env steps per second of this process's CPU time (``time.process_time``): on a machine shared with other
jobs, wall time measures the neighbours too (both are recorded). Runs of ~1.5 s CPU, the backends and sizes
interleaved, 3 rounds, the median kept. The anchor is PyBoy at the same N.

Success rate: episodes that *start* in the first 2·limit steps of a 3·limit-step run of N envs (all of them
end inside the run, so short successful episodes are not over-counted), with a Wilson 95% interval; the
Warp twin plays them (the room_env contract makes the ROM's episodes identical: ROOM-1), and the ROM replays
the first envs' episodes as a check. Reported, never asserted.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from rlspec.contracts.room_env import FRAMESKIP, NUM_ACTIONS, OBS_SHAPE, STEP_LIMIT
from rlspec.envs.room import pyboy_room, warp_room
from rlspec.evidence.cpu import identity as cpu_identity

BACKENDS = {"pyboy": pyboy_room.RoomVecEnv, "warp-cpu": warp_room.RoomVecEnv}
SIZES = {"pyboy": (1, 4, 16), "warp-cpu": (1, 4, 16, 64, 256, 1024, 4096)}
LIMITS = (32, 64, 128, 256)
REPEATS, SECONDS = 3, 1.5


def one_run(env, n: int, g: torch.Generator, out: torch.Tensor) -> tuple[float, float]:
    """(env steps per CPU second, per wall second) over ~SECONDS of CPU time."""
    steps, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while time.process_time() - cpu0 < SECONDS:
        env.step(torch.randint(0, NUM_ACTIONS, (n,), generator=g), out)
        steps += 1
    return steps * n / (time.process_time() - cpu0), steps * n / (time.perf_counter() - wall0)


def throughput() -> dict[str, dict[int, dict[str, float]]]:
    envs = {}
    for backend, sizes in SIZES.items():
        for n in sizes:
            env = BACKENDS[backend](n, step_limit=STEP_LIMIT, seed=0)
            out, g = torch.empty(n, *OBS_SHAPE, dtype=torch.uint8), torch.Generator().manual_seed(0)
            env.reset(out)
            env.step(torch.randint(0, NUM_ACTIONS, (n,), generator=g), out)  # warm-up (kernel load, first frames)
            envs[backend, n] = (env, out, g)
    runs = {key: [] for key in envs}
    for _ in range(REPEATS):  # interleaved: a busy spell of the machine hits every configuration alike
        for (backend, n), (env, out, g) in envs.items():
            runs[backend, n].append(one_run(env, n, g, out))
    for env, _, _ in envs.values():
        env.close()
    median = lambda key, i: statistics.median(r[i] for r in runs[key])  # noqa: E731
    return {b: {n: dict(cpu=median((b, n), 0), wall=median((b, n), 1)) for n in sizes} for b, sizes in SIZES.items()}


def random_episodes(backend: str, n: int, limit: int, seed: int = 0) -> tuple[list[bool], list[int]]:
    """(success, length) of every episode that starts in the first 2·limit steps (see the module doc)."""
    env = BACKENDS[backend](n, step_limit=limit, seed=seed)
    env.reset()
    g = torch.Generator().manual_seed(seed)
    start = torch.zeros(n, dtype=torch.int64)  # [N] step at which each env's episode began
    success, length = [], []
    for t in range(3 * limit):
        s = env.step(torch.randint(0, NUM_ACTIONS, (n,), generator=g), render=False)
        ended = (s.terminated | s.truncated) & (start < 2 * limit)  # [N]
        success += s.terminated[ended].tolist()
        length += (t + 1 - start[ended]).tolist()
        start[s.terminated | s.truncated] = t + 1
    env.close()
    return success, length


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p, d = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return centre - half, centre + half


def main(out_dir: Path) -> None:
    torch.set_num_threads(1)
    rates = throughput()
    anchor = {n: r["cpu"] for n, r in rates["pyboy"].items()}
    ratios = {n: rates["warp-cpu"][n]["cpu"] / anchor[n] for n in anchor}
    baseline = {}
    for limit in LIMITS:
        success, length = random_episodes("warp-cpu", 2048, limit)
        k, m = sum(success), len(success)
        baseline[limit] = dict(episodes=m, successes=k, rate=k / m, wilson95=wilson(k, m),
                               mean_length=statistics.mean(length))
    check = random_episodes("pyboy", 8, STEP_LIMIT) == random_episodes("warp-cpu", 8, STEP_LIMIT)
    report = dict(
        what="room env steps/s on CPU (Warp twin vs the ROM in PyBoy) and the random policy's success rate",
        machine=dict(cpu=cpu_identity(), cores=os.cpu_count(),
                     load_average=os.getloadavg(), torch_threads=1, python=platform.python_version(),
                     torch=torch.__version__),
        setup=dict(scenario="room-exit", step_limit=STEP_LIMIT, frameskip_pyboy=FRAMESKIP, repeats=REPEATS,
                   seconds_per_run=SECONDS, actions="uniform random, torch.Generator seed 0",
                   frames="written every step into a caller-given uint8 [N, 1, 72, 20] buffer"),
        steps_per_cpu_s={b: {str(n): round(v["cpu"], 1) for n, v in r.items()} for b, r in rates.items()},
        steps_per_wall_s={b: {str(n): round(v["wall"], 1) for n, v in r.items()} for b, r in rates.items()},
        pyboy_frames_per_s={str(n): round(v * FRAMESKIP, 1) for n, v in anchor.items()},
        warp_over_pyboy_same_n={str(n): round(v, 2) for n, v in ratios.items()},
        random_policy_room_exit={str(k): v for k, v in baseline.items()},
        random_policy_rom_replay_identical=check,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "room_env_cpu.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out_dir / "room_env_cpu.png")
    print(json.dumps(report["steps_per_cpu_s"], indent=1), json.dumps(report["warp_over_pyboy_same_n"]))
    print({k: round(v["rate"], 4) for k, v in baseline.items()}, "ROM replay identical:", check)


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for backend, label in (("pyboy", f"ROM in PyBoy (frame skip {FRAMESKIP})"), ("warp-cpu", "Warp twin, CPU")):
        rates = report["steps_per_cpu_s"][backend]
        ax.loglog([int(n) for n in rates], list(rates.values()), "o-", label=label)
    for n, ratio in report["warp_over_pyboy_same_n"].items():
        ax.annotate(f"{ratio:.1f}x", (int(n), report["steps_per_cpu_s"]["warp-cpu"][n]), textcoords="offset points",
                    xytext=(4, -12), fontsize=8)
    ax.set(xlabel="envs N", ylabel="env steps / CPU second", title="room env, one CPU thread (Warp / PyBoy at same N)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    base = report["random_policy_room_exit"]
    limits = [int(k) for k in base]
    rates = [v["rate"] for v in base.values()]
    err = [[v["rate"] - v["wilson95"][0] for v in base.values()], [v["wilson95"][1] - v["rate"] for v in base.values()]]
    bx.errorbar(limits, rates, yerr=err, fmt="o-", capsize=3)
    bx.set(xlabel="step limit", ylabel="success rate", ylim=(0, 1), title="random policy, room-exit (95% Wilson)")
    bx.set_xticks(limits, [str(v) for v in limits])
    bx.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results")
