"""The Warp Game Boy's kernel built for sm_90 (H100 / H200) offline: build time, registers, stack and spills.

    python -m benchmarks.gameboy.sm90_build [OUT_DIR]   (default benchmarks/gameboy/results/: sm90_build.json, .md)

Warp's NVRTC (inside warp.so, no GPU or driver needed) writes the module's PTX for sm_90
(``wp.compile_aot_module(emulator, arch=90, use_ptx=True)``); ``ptxas -v`` from the CUDA toolkit on PATH (or
/usr/local/cuda/bin) assembles it and reports the kernel's resources. Where that ptxas is older than the PTX ISA
NVRTC writes, the ``.version`` line is lowered to the one ptxas names and the JSON says so (the code uses
nothing newer here: ptxas would reject it). Minutes of one core: not part of cpu_gate.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import warp as wp

from rlspec.envs.gameboy import emulator

LIMITS = dict(registers=255, shared_bytes=232_448)  # sm_90: registers a thread can hold, shared memory per block
PTXAS = ("ptxas", "/usr/local/cuda/bin/ptxas", *sorted(str(p) for p in Path("/usr/local").glob("cuda-*/bin/ptxas")))


def ptxas() -> str:
    for candidate in PTXAS:
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    sys.exit("sm90_build: no ptxas (the CUDA toolkit's) on PATH or under /usr/local/cuda*/bin")


def assemble(ptx: Path, tool: str) -> tuple[str, str | None]:
    """(ptxas -v output, the PTX version lowered to, or None)."""
    text = ptx.read_text().replace("\0", "")  # NVRTC ends the PTX with a NUL
    lowered = None
    for _ in range(2):
        ptx.write_text(text)
        done = subprocess.run([tool, "-v", "-arch=sm_90", str(ptx), "-o", str(ptx.with_suffix(".cubin"))],
                              capture_output=True, text=True)
        wanted = re.search(r"Unsupported \.version (\S+); current version is '(\S+)'", done.stderr)
        if done.returncode == 0 or not wanted:
            break
        lowered = wanted.group(2)
        text = re.sub(r"^\.version \S+", f".version {lowered}", text, count=1, flags=re.M)
    if done.returncode != 0:
        sys.exit(f"sm90_build: ptxas failed:\n{done.stderr}")
    return done.stdout + done.stderr, lowered


def resources(log: str) -> dict:
    grab = lambda pattern: int(re.search(pattern, log).group(1))  # noqa: E731
    return dict(registers=grab(r"Used (\d+) registers"), stack_frame_bytes=grab(r"(\d+) bytes stack frame"),
                spill_store_bytes=grab(r"(\d+) bytes spill stores"), spill_load_bytes=grab(r"(\d+) bytes spill loads"),
                shared_bytes=grab(r"(\d+) bytes smem"))


def markdown(report: dict) -> str:
    r, b = report["resources"], report["build_s"]
    spills = r["spill_store_bytes"] + r["spill_load_bytes"]
    lines = ["| kernel | registers | stack frame (B) | spill stores / loads (B) | shared (B) | NVRTC (s) | ptxas (s) |",
             "|---|---:|---:|---:|---:|---:|---:|",
             f"| emulator._step | {r['registers']} | {r['stack_frame_bytes']:,} | {r['spill_store_bytes']:,} / "
             f"{r['spill_load_bytes']:,} | {r['shared_bytes']:,} | {b['nvrtc']:.0f} | {b['ptxas']:.0f} |", "",
             f"Registers at the limit ({LIMITS['registers']}): "
             f"{'yes' if r['registers'] >= LIMITS['registers'] else 'no'}; spills: {'yes' if spills else 'none'} "
             "(the goal is none)."]
    if report["ptx_version_lowered_to"]:
        lines[-1] += f" PTX ISA lowered to {report['ptx_version_lowered_to']} for {report['ptxas']}."
    return "\n".join(lines) + "\n"


def main(out_dir: Path) -> None:
    tool = ptxas()
    with tempfile.TemporaryDirectory() as tmp:
        wp.config.kernel_cache_dir = tmp  # a cold build, whatever is cached
        start = time.perf_counter()
        ptx = wp.compile_aot_module(emulator, arch=90, module_dir=tmp, use_ptx=True)[0]
        nvrtc = time.perf_counter() - start
        start = time.perf_counter()
        log, lowered = assemble(Path(ptx), tool)
        assembled = time.perf_counter() - start
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    report = dict(what="the Warp Game Boy's kernel (rlspec/envs/gameboy/emulator.py _step) built for sm_90 offline",
                  warp=wp.__version__, ptxas=version, ptx_version_lowered_to=lowered,
                  build_s=dict(nvrtc=round(nvrtc, 1), ptxas=round(assembled, 1)), resources=resources(log),
                  limits=LIMITS)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sm90_build.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "sm90_build.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if sys.argv[1:] else Path(__file__).parent / "results")
