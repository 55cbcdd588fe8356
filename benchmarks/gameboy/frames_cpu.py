"""The Warp Game Boy on CPU: emulated frames per CPU second at 1, 64 and 1,024 envs, beside PyBoy 2.8.1.

    python -m benchmarks.gameboy.frames_cpu [OUT_DIR]   (default benchmarks/gameboy/results/: frames_cpu.json, .md)

Backends: ``warp-cpu`` (warp_gb.GameBoyVec on device cpu), ``pyboy`` (the contract's reference: one tick and one
rendered frame a frame), ``pyboy-skip`` (PyBoy's own frame skip: the frames before a call's last not rendered).

Workload: programs/busy.gb (programs.py ``busy``), from the project's boot ROM, after its set-up (WARMUP frames):
background, window and 40 objects on, the CPU never halted. Both emulators run it the same way frame for frame
(checked here: env 0's last frame and WRAM against PyBoy's after the same frames), so a frame is the same work.

Rates are frames per second of this process's CPU time (``time.process_time``): Warp's CPU device runs its
threads one after another on one core and PyBoy runs one emulator per process, so per CPU second is what each
gets from one core; on a machine with C cores, PyBoy's best is C processes (C times its rate), the Warp core's
on CPU one process. Runs of ~SECONDS of CPU time, the backends and sizes interleaved, REPEATS rounds, the
median kept. On CUDA the same kernel runs one env per GPU thread; its figures need a GPU (the GPU gate).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from rlspec.contracts.gb_emulator import FRAME_SHAPE
from rlspec.envs.gameboy import build, pyboy_gb, warp_gb
from rlspec.envs.pyboy_env import screen_shades
from rlspec.evidence.cpu import identity as cpu_identity
from rlspec.reference.packed2 import pack

ROM = build.HERE / "busy.gb"
WARMUP = 40  # frames: the boot ROM (~9), the set-up with the LCD off (~16), the first frames of the loop
SIZES = {"warp-cpu": (1, 64, 1024), "pyboy": (1,), "pyboy-skip": (1,)}
FRAMES_PER_CALL = {1: 8, 64: 2, 1024: 1}  # frames a step() call runs (one kernel launch on the Warp core)
REPEATS, SECONDS = 3, 2.0
GBXCULE = dict(frames_per_s=413_000, envs=16_384, frameskip=24, hardware="DGX Spark (GB10 GPU)",
               source="bkase/gbxcule's README: ~17,200 env steps/s at frame skip 24")


class PyBoySkip(pyboy_gb.GameBoyVec):
    """PyBoy's own fastest frame skip: the frames before the last not rendered (tick(k - 1, False), then one
    rendered); the contract's reference renders every frame (pyboy_gb.py says why)."""

    def step(self, buttons, frames=1, out=None):
        for k, env in enumerate(self.envs):
            env.tick(frames - 1, False)
            env.tick(1, True)
            out[k] = pack(torch.from_numpy(screen_shades(env)))
        return out


BACKENDS = {"warp-cpu": warp_gb.GameBoyVec, "pyboy": pyboy_gb.GameBoyVec, "pyboy-skip": PyBoySkip}


def one_run(gb, n: int, k: int, out: torch.Tensor) -> float:
    """Emulated frames (all envs) per CPU second over ~SECONDS of CPU time."""
    frames, cpu0 = 0, time.process_time()
    buttons = torch.zeros(n, dtype=torch.int64)
    while time.process_time() - cpu0 < SECONDS:
        gb.step(buttons, k, out)
        frames += k * n
    return frames / (time.process_time() - cpu0)


def throughput() -> tuple[dict[str, dict[int, float]], dict[str, float]]:
    rom, made = ROM.read_bytes(), {}
    for backend, sizes in SIZES.items():
        for n in sizes:
            gb, out = BACKENDS[backend](rom, n), torch.empty(n, *FRAME_SHAPE, dtype=torch.uint8)
            gb.step(torch.zeros(n, dtype=torch.int64), WARMUP, out)
            made[backend, n] = (gb, out)
    runs = {key: [] for key in made}
    for _ in range(REPEATS):  # interleaved: a busy spell of the machine hits every configuration alike
        for (backend, n), (gb, out) in made.items():
            runs[backend, n].append(one_run(gb, n, FRAMES_PER_CALL[n], out))
    rates = {b: {n: statistics.median(runs[b, n]) for n in sizes} for b, sizes in SIZES.items()}
    return rates, {f"{b}/{n}": [round(r, 1) for r in runs[b, n]] for b, n in runs}


def agrees(frames: int = 120) -> bool:
    """Env 0 of 4 Warp envs and PyBoy show the same last frame and WRAM after ``frames`` frames."""
    rom, none = ROM.read_bytes(), torch.zeros(4, dtype=torch.int64)
    fast, ref = warp_gb.GameBoyVec(rom, 4), pyboy_gb.GameBoyVec(rom, 1)
    a, b = fast.step(none, frames), ref.step(none[:1], frames)
    return bool(torch.equal(a[:1], b) and torch.equal(fast.memory(0xC000, 0xE000)[:1], ref.memory(0xC000, 0xE000)))


def markdown(report: dict) -> str:
    rates, pyboy = report["frames_per_cpu_s"], report["frames_per_cpu_s"]["pyboy"]["1"]
    lines = ["| backend | envs | frames / CPU s | / PyBoy's (one process, every frame rendered) |",
             "|---|---:|---:|---:|"]
    for backend, by_n in rates.items():
        for n, rate in by_n.items():
            lines.append(f"| {backend} | {int(n):,} | {rate:,.0f} | {rate / pyboy:.2f}× |")
    g = report["context"]["gbxcule"]
    lines += ["", f"Same frames as PyBoy on this workload: {'yes' if report['agrees_with_pyboy'] else 'NO'}. "
                  f"Context, not compared: gbxcule reports ~{g['frames_per_s']:,} frames/s at {g['envs']:,} envs "
                  f"on a {g['hardware']}, frame skip {g['frameskip']} ({g['source']})."]
    return "\n".join(lines) + "\n"


def main(out_dir: Path) -> None:
    torch.set_num_threads(1)
    rates, runs = throughput()
    report = dict(
        what="emulated Game Boy frames per CPU second: the Warp core on device cpu and PyBoy 2.8.1, one process",
        machine=dict(cpu=cpu_identity(), cores=os.cpu_count(), load_average=os.getloadavg(), torch_threads=1,
                     python=platform.python_version(), torch=torch.__version__),
        setup=dict(rom=ROM.name, warmup_frames=WARMUP, frames_per_call={str(n): k for n, k in FRAMES_PER_CALL.items()},
                   repeats=REPEATS, seconds_per_run=SECONDS, buttons="none",
                   frames="written every call into a caller-given uint8 [N, 144, 40] buffer"),
        frames_per_cpu_s={b: {str(n): round(v, 1) for n, v in r.items()} for b, r in rates.items()},
        runs=runs,
        agrees_with_pyboy=agrees(),
        context=dict(gbxcule=GBXCULE),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "frames_cpu.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "frames_cpu.md").write_text(markdown(report))
    print(markdown(report))
    if not report["agrees_with_pyboy"]:
        sys.exit("the Warp core and PyBoy disagree on the workload: the rates do not compare the same work")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if sys.argv[1:] else Path(__file__).parent / "results")
