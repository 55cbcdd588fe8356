"""Which CPU a benchmark ran on: model, vendor, x86-64 instruction-set level, the vector flags that decide
which kernels the compilers and oneDNN pick, cache sizes and core count. Every speed figure is only true of
the CPU it was measured on (an AVX-512 Xeon and an AVX2 EPYC give different ratios), so the bench scripts
write ``identity()`` into their JSON and ``label(identity())`` into their plot titles.

Linux: /proc/cpuinfo (first processor block) and /sys/devices/system/cpu/cpu0/cache. Elsewhere the fields it
cannot read are None (model from ``platform``). No torch import: bench scripts may import it first.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
SYSFS_CPU = Path("/sys/devices/system/cpu")

# x86-64 micro-architecture levels (psABI), as Linux names the flags; each level includes the one before
LEVELS = (
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)
# the flags that change which vector kernels run (ours via -march=native, oneDNN's and torch's by dispatch)
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512cd", "avx512dq",
                "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
                "asimd", "sve")


def parse_cpuinfo(text: str) -> dict:
    """/proc/cpuinfo text -> {model, vendor, flags (set), logical_cpus}; from the first processor block
    (x86 'flags', ARM 'Features'); missing fields None."""
    first: dict[str, str] = {}
    processors = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            continue
        if key == "processor":
            processors += 1
        if processors <= 1:
            first.setdefault(key, value.strip())
    flags = first.get("flags", first.get("Features"))
    return {"model": first.get("model name"), "vendor": first.get("vendor_id", first.get("CPU implementer")),
            "flags": set(flags.split()) if flags is not None else set(), "logical_cpus": processors or None}


def isa_level(flags: set[str]) -> str | None:
    """The highest x86-64 level whose flags are all present ('x86-64' for none of them); None without flags."""
    if not flags:
        return None
    level = "x86-64"
    for name, required in LEVELS:
        if not flags.issuperset(required):
            break
        level = name
    return level


def parse_size(text: str) -> int:
    """sysfs / lscpu cache size ('48K', '1024K', '32M', '2 MiB') -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number = text.strip().rstrip("iB").strip()
    unit = number[-1:].upper()
    return int(number[:-1].strip()) * units[unit] if unit in units else int(number)


def caches(root: Path = SYSFS_CPU) -> dict[str, int]:
    """The caches of the first CPU, {'L1d': bytes, 'L1i': ..., 'L2': ..., 'L3': ...} (per instance: L1/L2 per
    core on most CPUs, L3 shared); {} where sysfs does not say."""
    out = {}
    for index in sorted((root / "cpu0" / "cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        out[f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")] = size
    return out


def identity(cpuinfo: Path = CPUINFO, sysfs: Path = SYSFS_CPU) -> dict:
    """{model, vendor, isa_level, flags (the VECTOR_FLAGS present, in that order), hypervisor, caches
    (bytes), logical_cpus, usable_cpus (this process's affinity), machine}."""
    try:
        info = parse_cpuinfo(cpuinfo.read_text())
    except OSError:
        info = {"model": None, "vendor": None, "flags": set(), "logical_cpus": None}
    flags = info["flags"]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"model": info["model"] or platform.processor() or platform.machine(), "vendor": info["vendor"],
            "isa_level": isa_level(flags), "flags": [f for f in VECTOR_FLAGS if f in flags],
            "hypervisor": "hypervisor" in flags, "caches": caches(sysfs),
            "logical_cpus": info["logical_cpus"] or os.cpu_count(), "usable_cpus": usable,
            "machine": platform.machine()}


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def label(ident: dict) -> str:
    """One line for a plot title: 'AMD EPYC, x86-64-v3 (avx2 fma; no avx512f), L1d 32 KiB, L2 512 KiB,
    L3 32 MiB, 2 CPUs'."""
    flags = ident["flags"]
    shown = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    missing = "" if "avx512f" in flags or ident["isa_level"] is None else "; no avx512f"
    isa = f", {ident['isa_level']} ({' '.join(shown)}{missing})" if ident["isa_level"] else ""
    cache = "".join(f", {k} {_size(v)}" for k, v in ident["caches"].items() if k != "L1i")
    return f"{ident['model']}{isa}{cache}, {ident['usable_cpus']} CPUs"
