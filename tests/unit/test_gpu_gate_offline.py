"""tools/gpu_gate.py without a GPU and without network: the fat-binary pruner on a real ELF shared object,
the wheel rewrite, and the `run` half end to end over a prepared folder (pip --no-index), where every GPU
check must be skipped with its reason and the summary must say so."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_gate", ROOT / "tools" / "gpu_gate.py")
gpu_gate = sys.modules["gpu_gate"] = importlib.util.module_from_spec(spec)  # dataclasses look the module up
spec.loader.exec_module(gpu_gate)

IMAGES = ((2, 80, b"sm80-cubin" * 7), (2, 90, b"sm90-cubin" * 5), (1, 75, b"ptx75" * 9))  # kind, arch, payload


def fatbin(images) -> bytes:
    """A fat binary in the layout the pruner reads: a 16-byte header, then 64-byte image headers + payloads."""
    body = b""
    for kind, arch, payload in images:
        header = struct.pack("<HHIQ", kind, 1, 64, len(payload)) + bytes(12) + struct.pack("<I", arch)
        body += header + bytes(64 - len(header)) + payload
    blob = struct.pack("<IHHQ", gpu_gate.FATBIN_MAGIC, 1, 16, len(body)) + body
    return blob + bytes(-len(blob) % 8)


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory) -> Path:
    """A real shared object whose .nv_fatbin section holds two fat binaries (C compiler needed: CI has g++)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler on this machine")
    data = fatbin(IMAGES) + fatbin(IMAGES[1:])
    tmp = tmp_path_factory.mktemp("so")
    array = ", ".join(str(b) for b in data)
    (tmp / "f.c").write_text(f'__attribute__((section(".nv_fatbin"), used, aligned(8))) const unsigned char '
                             f"fat[{len(data)}] = {{{array}}};\nint answer(void) {{ return 42; }}\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp / "f.so"), str(tmp / "f.c")], check=True)
    return tmp / "f.so"


def payload_at(data: bytes, payload: bytes) -> list[int]:
    return [i for i in range(len(data)) if data.startswith(payload, i)]


def test_prune_keeps_the_target_architecture_and_zeroes_the_rest(shared_object, tmp_path):
    original = shared_object.read_bytes()
    pruned, stats = gpu_gate.prune_shared_object(original, keep_arch=90)
    assert len(pruned) == len(original)
    assert stats == {"fatbins": 2, "kept_bytes": 2 * len(IMAGES[1][2]),
                     "zeroed_bytes": len(IMAGES[0][2]) + 2 * len(IMAGES[2][2])}
    assert len(payload_at(pruned, IMAGES[1][2])) == 2  # sm_90 in both fat binaries, untouched
    assert payload_at(pruned, IMAGES[0][2]) == [] and payload_at(pruned, IMAGES[2][2]) == []
    changed = [i for i in range(len(original)) if original[i] != pruned[i]]
    offset, size = gpu_gate.elf_section(original, ".nv_fatbin")
    assert changed and offset <= min(changed) and max(changed) < offset + size  # nothing outside the section
    (tmp_path / "pruned.so").write_bytes(pruned)
    assert ctypes.CDLL(str(tmp_path / "pruned.so")).answer() == 42  # still a loadable shared object


def test_prune_refuses_what_would_leave_no_cuda_code(shared_object):
    with pytest.raises(ValueError, match="no image for sm_100"):
        gpu_gate.prune_shared_object(shared_object.read_bytes(), keep_arch=100)
    with pytest.raises(ValueError, match="not an ELF64"):
        gpu_gate.prune_shared_object(b"#!/bin/sh\n" + bytes(64), keep_arch=90)


def make_wheel(path: Path, files: dict[str, bytes]) -> Path:
    dist = path.name.split("-")[0] + "-" + path.name.split("-")[1] + ".dist-info"
    name = path.name.split("-")[0]
    files = {**files, f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {path.name.split('-')[1]}\n"
             .encode(), f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(gpu_gate._record_line(n, c) + "\n" for n, c in files.items()) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, c in files.items():
            z.writestr(n, c)
        z.writestr(f"{dist}/RECORD", record)
    return path


def test_warp_wheel_rewrite_drops_the_cpu_compiler_and_records_what_it_holds(shared_object, tmp_path):
    src = make_wheel(tmp_path / "warp_lang-1.19.0-py3-none-any.whl", {
        "warp/__init__.py": b"__version__ = '1.19.0'\n", "warp/bin/warp.so": shared_object.read_bytes(),
        "warp/bin/warp-clang.so": b"\0" * 1000, "warp/examples/demo.py": b"print()\n", "warp/tests/t.py": b"x\n"})
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    notes = gpu_gate.rewrite_wheel(src, out, gpu_gate.warp_transform(90))
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"warp/__init__.py", "warp/bin/warp.so"} <= names
        assert not any(n.startswith(("warp/examples/", "warp/tests/")) or n.endswith("warp-clang.so") for n in names)
        assert all(i.compress_type == zipfile.ZIP_LZMA for i in z.infolist())
        record = z.read("warp_lang-1.19.0.dist-info/RECORD").decode().splitlines()
        assert sorted(line.split(",")[0] for line in record) == sorted(names)
        for line in record:
            name, digest, size = line.split(",")
            if digest:
                assert line == gpu_gate._record_line(name, z.read(name))
        assert payload_at(z.read("warp/bin/warp.so"), IMAGES[0][2]) == []
    assert notes["dropped_bytes"] == 1000 + len(b"print()\n") + len(b"x\n")
    assert notes["warp.so"]["fatbins"] == 2


def bundle_with_probe(tmp_path: Path, part_bytes: int = 0) -> Path:
    """A prepared folder holding one tiny pure-Python wheel (what `prepare` writes, less the downloads)."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    wheel = make_wheel(tmp_path / "gate_probe-1.0-py3-none-any.whl", {"gate_probe.py": b"VALUE = 7\n"})
    out = bundle / wheel.name
    gpu_gate.rewrite_wheel(wheel, out, gpu_gate.keep_transform)
    files = [dict(name=out.name, bytes=out.stat().st_size, sha256=hashlib.sha256(out.read_bytes()).hexdigest())]
    if part_bytes:
        files[0]["parts"] = gpu_gate.split_into_parts([out], bundle, part_bytes)[0]
    (bundle / "bundle.json").write_text(json.dumps(dict(files=files)))
    return bundle


def run_gate(tmp_path: Path, bundle: Path, *extra: str) -> tuple[int, dict]:
    out, site = tmp_path / "out", tmp_path / "site"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_gate.py"), "run", "--out", str(out), "--bundle",
                           str(bundle), "--site", str(site), *extra], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    return done.returncode, json.loads((out / "gpu_gate.json").read_text())


def test_run_installs_offline_and_skips_every_gpu_check_without_cuda(tmp_path):
    started = gpu_gate.time.time()
    code, summary = run_gate(tmp_path, bundle_with_probe(tmp_path))
    checks = {c["name"]: c for c in summary["checks"]}
    assert checks["install"]["status"] == "passed", checks["install"]
    assert checks["install"]["details"]["wheels"] == ["gate_probe-1.0-py3-none-any.whl"]
    assert checks["environment"]["status"] == "passed" and summary["environment"]["cuda_available"] is False
    for name in ("warp_cuda_kernel", "pytest_tests_gpu", "dreamer_train_step_vs_sheeprl_cuda",
                 "dreamer_room_exit_cuda", "rlspec_check_triton_compiled"):
        assert checks[name]["status"] == "skipped" and "CUDA is not available" in checks[name]["reason"], name
    assert checks["pyboy_room_rom"]["status"] == "passed"  # the ROM runs in PyBoy here (the test env has it)
    assert checks["pyboy_room_rom"]["details"]["rlspec"].startswith(str(tmp_path / "site"))  # not the checkout's
    assert code == 0 and summary["counts"]["failed"] == 0
    site = tmp_path / "site"
    probe = subprocess.run([sys.executable, "-c", "import gate_probe, rlspec; print(gate_probe.VALUE, rlspec.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(site)}, check=True)
    value, where = probe.stdout.split()
    assert value == "7" and Path(where).is_relative_to(site)  # the checkout itself was installed into the target
    assert (tmp_path / "out" / "gpu_gate.log").read_text().count("--no-index") == 1
    assert not (ROOT / "build").exists() or (ROOT / "build").stat().st_mtime < started  # nothing built in the tree


def test_run_joins_parts_and_refuses_a_damaged_one(tmp_path):
    bundle = bundle_with_probe(tmp_path, part_bytes=300)
    parts = json.loads((bundle / "bundle.json").read_text())["files"][0]["parts"]
    assert len(parts) > 2 and len({p.split("/")[0] for p in parts}) == len(parts)  # one chunk a part at 300 B
    assert gpu_gate.bundle_wheels(bundle)[0].name == "gate_probe-1.0-py3-none-any.whl"
    first = bundle / parts[0]
    first.write_bytes(first.read_bytes()[:-1] + b"?")
    code, summary = run_gate(tmp_path, bundle, "--only", "pyboy_room_rom")
    checks = {c["name"]: c for c in summary["checks"]}
    assert code == 1
    assert checks["install"]["status"] == "failed" and "sha256" in checks["install"]["reason"]
    assert checks["pyboy_room_rom"]["status"] == "skipped" and "needs install" in checks["pyboy_room_rom"]["reason"]


def test_a_check_past_its_cap_is_killed_and_reported(tmp_path):
    gate = gpu_gate.Gate(out=tmp_path, bundle=tmp_path, deadline=gpu_gate.time.monotonic() + 60, site=tmp_path)
    check = gpu_gate.Check("sleeper")
    assert gate.sh(check, [sys.executable, "-c", "import time; time.sleep(60)"], cap=1) is None
    assert check.status == "timed out" and "1 s" in check.reason


def test_room_exit_figures_read_the_run_the_way_its_files_hold_it(tmp_path):
    """Rates over the run's training wall time, the last replay ratio, and the overlap of the actor's and
    learner's seconds: 0 when they add up to the wall time, 1 when the shorter one hid under the longer."""
    (tmp_path / "greedy_cells.json").write_text(json.dumps([
        {"env_steps": 2048, "updates": 256, "wall_s": 10.0, "greedy_success": 0.1},
        {"env_steps": 4096, "updates": 512, "wall_s": 20.0, "greedy_success": 0.5}]))
    (tmp_path / "metrics.csv").write_text("step,Train/replay_ratio,Time/actor_s,Time/learner_s\n"
                                          "2048,31.0,4.0,10.0\n4096,32.0,4.0,10.0\n")
    figures = gpu_gate.room_exit_figures(tmp_path)
    assert figures["env_steps_per_s"] == 204.8 and figures["updates_per_s"] == 25.6
    assert figures["replay_ratio"] == 32.0 and figures["greedy_success"] == 0.5
    assert (figures["actor_s"], figures["learner_s"]) == (8.0, 20.0)
    assert figures["overlap"] == 1.0  # 8 + 20 - 20 over 8: the actor hid under the learner
    (tmp_path / "metrics.csv").write_text("step,Train/replay_ratio,Time/actor_s,Time/learner_s\n"
                                          "4096,32.0,6.0,14.0\n")
    assert gpu_gate.room_exit_figures(tmp_path)["overlap"] == 0.0  # 6 + 14 = 20: one after the other
