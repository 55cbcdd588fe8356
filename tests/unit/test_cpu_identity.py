"""rlspec/evidence/cpu.py: the CPU identity the bench JSONs carry, parsed from canned /proc/cpuinfo and sysfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlspec.evidence import cpu

# an Intel Sapphire Rapids guest (AVX-512, AMX), two processor blocks (trimmed to the fields that matter)
INTEL = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
cpu cores\t: 2
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse \
sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni \
pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm \
3dnowprefetch fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm avx512f avx512dq rdseed adx smap \
avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 \
arat avx512vbmi umip avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid \
amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse sse2

"""

# this repository's AMD EPYC (Zen 3 guest): AVX2 and FMA, no AVX-512
AMD = """\
processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cache size\t: 512 KB
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht \
syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid extd_apicid \
tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave \
avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext vmmcall \
fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec \
xgetbv1 xsaves clzero xsaveerptr arat umip vaes vpclmulqdq rdpid fsrm
bogomips\t: 4890.85

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
"""


def sysfs(root: Path, entries: list[tuple[str, str, str]]) -> Path:
    """A fake /sys/devices/system/cpu with cpu0's cache indexN/{level,type,size}."""
    for i, (level, kind, size) in enumerate(entries):
        d = root / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    return root


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_intel_avx512_is_v4_with_amx(tmp_path):
    root = sysfs(tmp_path / "sys", [("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "2048K"),
                                    ("3", "Unified", "107520K")])
    ident = cpu.identity(write(tmp_path, INTEL), root)
    assert ident["model"] == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert ident["vendor"] == "GenuineIntel"
    assert ident["isa_level"] == "x86-64-v4"
    assert ident["flags"] == ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512cd", "avx512dq",
                              "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
                              "amx_int8"]
    assert ident["caches"] == {"L1d": 48 << 10, "L1i": 32 << 10, "L2": 2 << 20, "L3": 105 << 20}
    assert ident["logical_cpus"] == 2  # processor blocks; the second block's flags are not read
    assert ident["hypervisor"] is True
    assert cpu.label(ident).startswith("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz, x86-64-v4 "
                                       "(avx2 fma avx512f avx512_bf16 amx_tile), L1d 48 KiB, L2 2 MiB, L3 105 MiB")


def test_amd_avx2_is_v3_without_avx512(tmp_path):
    root = sysfs(tmp_path / "sys", [("1", "Data", "32K"), ("2", "Unified", "512K"), ("3", "Unified", "32768K")])
    ident = cpu.identity(write(tmp_path, AMD), root)
    assert (ident["model"], ident["vendor"], ident["isa_level"]) == ("AMD EPYC", "AuthenticAMD", "x86-64-v3")
    assert ident["flags"] == ["sse4_2", "avx", "avx2", "fma", "f16c"]
    assert ident["caches"] == {"L1d": 32 << 10, "L2": 512 << 10, "L3": 32 << 20}
    assert ident["logical_cpus"] == 2
    assert "x86-64-v3 (avx2 fma; no avx512f), L1d 32 KiB, L2 512 KiB, L3 32 MiB" in cpu.label(ident)


@pytest.mark.parametrize(("drop", "level"), [("avx512bw", "x86-64-v3"), ("avx2", "x86-64-v2"),
                                              ("sse4_2", "x86-64")])
def test_level_needs_every_flag_of_it_and_below(drop, level):
    flags = cpu.parse_cpuinfo(INTEL)["flags"] - {drop}
    assert cpu.isa_level(flags) == level


def test_missing_sources_degrade(tmp_path):
    ident = cpu.identity(tmp_path / "no-cpuinfo", tmp_path / "no-sysfs")
    assert ident["isa_level"] is None and ident["flags"] == [] and ident["caches"] == {}
    assert ident["model"]  # platform's name instead
    assert "x86-64" not in cpu.label(ident)


@pytest.mark.parametrize(("text", "size"), [("48K", 48 << 10), ("32768K", 32 << 20), ("2 MiB", 2 << 20),
                                             ("1024", 1024)])
def test_parse_size(text, size):
    assert cpu.parse_size(text) == size
