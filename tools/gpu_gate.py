"""The offline GPU gate, in two halves (standard library only, so `run` needs nothing installed first).

    python3 tools/gpu_gate.py prepare [--dest .gpu-offline] [--cuda-arch 90] [--python 3.12] [--part-mib 0]
    python3 tools/gpu_gate.py run --out DIR [--bundle .gpu-offline] [--budget-s 480]

`prepare` runs where pip reaches PyPI. It downloads the wheels a CUDA PyTorch image lacks for tests/gpu and
the GPU benchmarks (warp-lang, pyboy and its SDL binding, sheeprl and the pure-Python packages its DreamerV3
path imports), shrinks the two large ones so the folder can travel with the checkout, and writes
`<dest>/bundle.json` (file names, sizes, sha256, what was checked here):
- warp-lang: its CPU kernel compiler (bin/warp-clang.so), examples and tests are dropped, and the CUDA code
  in bin/warp.so is pruned to the target architecture: every fat binary image of another sm_XY is zeroed in
  place (the ELF layout is unchanged; the CUDA driver only ever loads the image of the device's own
  architecture). The wheel is rewritten with LZMA compression (pip reads it like any wheel).
- pyboy: debug symbols stripped from its extension modules, Cython sources dropped.
`--part-mib N` splits files so that no part folder holds more than N MiB (`part-1/`, `part-2/`, ...), for a
transfer limited per copy; `run` joins them and checks each file's sha256.

`run` runs on the GPU machine without network: it installs the bundle's wheels and this checkout with
`pip --no-index --no-deps --no-build-isolation` into a private target folder, beside the machine's own torch
and Triton, then runs each check as a subprocess with its own time cap inside one overall budget (default
8 minutes): environment, Warp and PyBoy smoke tests, `pytest -m gpu tests/gpu`, `rlspec check` with compiled
Triton kernels on CUDA, and the DreamerV3 train step against sheeprl on CUDA. It writes `gpu_gate.json` (each
check: passed / failed / skipped / timed out, why, seconds, the numbers it reported), `gpu_gate.log` and
`bench.json` (every bench-results/*.json merged) into --out, rewriting the summary after every check so a
cut run still says how far it got. Without CUDA every GPU check is skipped with that reason. Exit status: 0
when nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

# What a CUDA PyTorch image (torch, triton, transformers, numpy, hypothesis, pytest, matplotlib, lightning,
# tensorboard, opencv) lacks for tests/gpu and the GPU benchmarks. Versions: the project's pins (pyproject.toml)
# and, for sheeprl's path, the versions its own CPU benchmark runs with.
PACKAGES = (
    "warp-lang==1.19.0",
    "pyboy==2.8.1", "pysdl2==0.9.17", "pysdl2-dll==2.32.10",
    "sheeprl==0.8.4", "gymnasium==1.2.2", "farama-notifications==0.0.4", "hydra-core==1.3.2",
    "omegaconf==2.3.0", "antlr4-python3-runtime==4.9.3", "python-dotenv==1.2.1",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
WARP_DROP = ("warp/bin/warp-clang.so", "warp/examples/", "warp/tests/")

FATBIN_MAGIC = 0xBA55ED50
FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the images that follow
IMAGE_HEADER = struct.Struct("<HHIQ")  # kind (1 PTX, 2 ELF), version, header size, payload size
IMAGE_ARCH_OFFSET = 28  # uint32 sm_XY as XY, inside each image header


# ----------------------------------------------------------------------------------------------- prepare

def elf_section(data: bytes, name: str) -> tuple[int, int] | None:
    """(file offset, size) of an ELF64 little-endian section by name, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i: int) -> tuple[int, int, int]:  # name offset, file offset, size
        base = shoff + i * shentsize
        return (struct.unpack_from("<I", data, base)[0], *struct.unpack_from("<QQ", data, base + 0x18))
    strtab = header(shstrndx)[1]
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.index(b"\0", strtab + name_off)
        if data[strtab + name_off:end].decode() == name:
            return offset, size
    return None


def prune_fatbin(data: bytearray, start: int, size: int, keep_arch: int) -> dict[str, int]:
    """Zero, in place, the payload of every fat binary image in data[start:start+size] whose architecture is
    not keep_arch. Returns bytes kept and zeroed. Fat binaries are 8-byte aligned; padding is skipped."""
    pos, end, kept, zeroed, found = start, start + size, 0, 0, 0
    while pos + FATBIN_HEADER.size <= end:
        magic, _, header_size, images = FATBIN_HEADER.unpack_from(data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8
            continue
        found += 1
        image, images_end = pos + header_size, pos + header_size + images
        while image < images_end:
            _, _, image_header, payload = IMAGE_HEADER.unpack_from(data, image)
            arch, = struct.unpack_from("<I", data, image + IMAGE_ARCH_OFFSET)
            body = image + image_header
            if arch == keep_arch:
                kept += payload
            else:
                data[body:body + payload] = bytes(payload)
                zeroed += payload
            image = body + payload
        if image != images_end:
            raise ValueError(f"fat binary at {pos:#x}: images end at {image:#x}, header says {images_end:#x}")
        pos = images_end + (-(images_end - start) % 8)
    if not found:
        raise ValueError("no fat binary found in the section")
    if not kept:
        raise ValueError(f"no image for sm_{keep_arch}: pruning would leave no CUDA code")
    return {"fatbins": found, "kept_bytes": kept, "zeroed_bytes": zeroed}


def prune_shared_object(data: bytes, keep_arch: int) -> tuple[bytes, dict[str, int]]:
    """A copy of a shared object whose .nv_fatbin keeps only sm_<keep_arch> images."""
    section = elf_section(data, ".nv_fatbin")
    if section is None:
        raise ValueError("no .nv_fatbin section")
    out = bytearray(data)
    stats = prune_fatbin(out, *section, keep_arch)
    return bytes(out), stats


def _record_line(name: str, content: bytes) -> str:
    digest = hashlib.sha256(content).digest()
    return f"{name},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{len(content)}"


def rewrite_wheel(src: Path, dst: Path, transform) -> dict:
    """Copy a wheel through transform(name, content) -> content | None (None drops the file), LZMA-compressed,
    with a RECORD that matches what it holds."""
    record_name, records, notes = None, [], {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_LZMA) as zout:
        for info in zin.infolist():
            if info.filename.endswith(".dist-info/RECORD"):
                record_name = info.filename
                continue
            content = transform(info.filename, zin.read(info), notes)
            if content is None:
                continue
            out = zipfile.ZipInfo(info.filename, info.date_time)
            out.external_attr, out.compress_type = info.external_attr, zipfile.ZIP_LZMA
            zout.writestr(out, content)
            records.append(_record_line(info.filename, content))
        if record_name is None:
            raise ValueError(f"{src.name}: no .dist-info/RECORD")
        records.append(f"{record_name},,")
        zout.writestr(record_name, "\n".join(records) + "\n")
    return notes


def warp_transform(keep_arch: int):
    def transform(name: str, content: bytes, notes: dict) -> bytes | None:
        if any(name == d or (d.endswith("/") and name.startswith(d)) for d in WARP_DROP):
            notes["dropped_bytes"] = notes.get("dropped_bytes", 0) + len(content)
            return None
        if name == "warp/bin/warp.so":
            content, notes["warp.so"] = prune_shared_object(content, keep_arch)
        return content
    return transform


def strip_transform(name: str, content: bytes, notes: dict) -> bytes | None:
    """Extension modules without debug symbols (strip --strip-unneeded); Cython sources dropped."""
    if name.endswith((".c", ".pyx", ".pxd")):
        return None
    if name.endswith(".so") and shutil.which("strip"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lib.so"
            path.write_bytes(content)
            subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)
            return path.read_bytes()
    return content


def keep_transform(name: str, content: bytes, notes: dict) -> bytes:
    return content


def _transform_for(wheel: Path, keep_arch: int):
    if wheel.name.startswith("warp_lang-"):
        return warp_transform(keep_arch)
    return strip_transform if wheel.name.startswith(("pyboy-", "pysdl2_dll-")) else keep_transform


def download(specs, into: Path, python: str) -> list[Path]:
    """One wheel per spec for the target Python and Linux x86-64: a published wheel where there is one, else
    (a pure-Python package published as an sdist only) a wheel built here."""
    into.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    found = []
    for spec in specs:
        name, version = spec.split("==")
        prefix = f"{name.replace('-', '_').lower()}-{version}-"
        match = [w for w in into.glob("*.whl") if w.name.lower().startswith(prefix)]
        if not match:
            fetch = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                     python, "--implementation", "cp", *platforms, "-d", str(into), spec]
            if subprocess.run(fetch).returncode != 0:
                subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(into), spec], check=True)
            match = [w for w in into.glob("*.whl") if w.name.lower().startswith(prefix)]
        if len(match) != 1:
            raise SystemExit(f"prepare: expected one wheel for {spec} in {into}, found {[w.name for w in match]}")
        found += match
    return found


def import_check(wheel: Path, module: str) -> str:
    """Import `module` from the wheel's files with this machine's Python, where the wheel's tags allow."""
    if "-none-" not in wheel.name and f"cp{sys.version_info.major}{sys.version_info.minor}" not in wheel.name:
        return f"not checked here (wheel is for another Python than {platform.python_version()})"
    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(wheel).extractall(tmp)
        env = dict(os.environ, PYTHONPATH=tmp)
        done = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__version__)"], env=env,
                              capture_output=True, text=True, cwd=tmp)
    return "imports" if done.returncode == 0 else f"import failed: {done.stderr.strip().splitlines()[-1:]}"


def split_into_parts(files: list[Path], dest: Path, limit: int) -> list[list[str]]:
    """Move files into part-K/ folders of at most `limit` bytes each, chunking files larger than that; for each
    file, its chunks' paths relative to dest, in order."""
    parts, entries = [], []
    used = limit  # force a first part
    for path in files:
        data, chunks = path.read_bytes(), []
        for offset in range(0, max(len(data), 1), limit):
            chunk = data[offset:offset + limit]
            if used + len(chunk) > limit:
                parts.append(dest / f"part-{len(parts) + 1}")
                parts[-1].mkdir()
                used = 0
            name = f"{path.name}.{len(chunks):03d}"
            (parts[-1] / name).write_bytes(chunk)
            chunks.append(f"{parts[-1].name}/{name}")
            used += len(chunk)
        path.unlink()
        entries.append(chunks)
    return entries


def prepare(args: argparse.Namespace) -> int:
    dest, cache = Path(args.dest), Path(args.cache)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = []
    for wheel in download(args.packages, cache, args.python):
        out = dest / wheel.name
        notes = rewrite_wheel(wheel, out, _transform_for(wheel, args.cuda_arch))
        module = {"warp_lang-": "warp", "pyboy-": "pyboy"}.get(wheel.name.split("-")[0] + "-")
        files.append(dict(name=out.name, bytes=out.stat().st_size, source_bytes=wheel.stat().st_size,
                          sha256=hashlib.sha256(out.read_bytes()).hexdigest(), notes=notes,
                          check=import_check(out, module) if module else "not checked (pure data/code)"))
        print(f"prepare: {out.name}: {wheel.stat().st_size / MIB:.1f} -> {out.stat().st_size / MIB:.1f} MiB; "
              f"{files[-1]['check']}")
    if args.part_mib:
        for entry, chunks in zip(files, split_into_parts([dest / f["name"] for f in files], dest, args.part_mib * MIB)):
            entry["parts"] = chunks
    bundle = dict(python=args.python, cuda_arch=args.cuda_arch, packages=list(args.packages), files=files,
                  total_bytes=sum(f["bytes"] for f in files))
    (dest / "bundle.json").write_text(json.dumps(bundle, indent=1) + "\n")
    print(f"prepare: {dest}: {len(files)} wheels, {bundle['total_bytes'] / MIB:.1f} MiB"
          + (f" in {len(list(dest.glob('part-*')))} parts of <= {args.part_mib} MiB" if args.part_mib else ""))
    return 0


# --------------------------------------------------------------------------------------------------- run

@dataclass
class Check:
    name: str
    status: str = "not run"  # passed | failed | skipped | timed out | not run
    reason: str = ""
    seconds: float = 0.0
    details: dict = field(default_factory=dict)


@dataclass
class Gate:
    out: Path
    bundle: Path
    deadline: float
    site: Path
    checks: list[Check] = field(default_factory=list)
    env: dict = field(default_factory=dict)

    def write(self) -> None:
        summary = dict(checks=[asdict(c) for c in self.checks], environment=self.env,
                       counts={s: sum(c.status == s for c in self.checks)
                               for s in ("passed", "failed", "skipped", "timed out")})
        (self.out / "gpu_gate.json").write_text(json.dumps(summary, indent=1) + "\n")

    def log(self, text: str) -> None:
        with open(self.out / "gpu_gate.log", "a") as f:
            f.write(text if text.endswith("\n") else text + "\n")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def sh(self, check: Check, cmd: list[str], cap: float, env: dict | None = None) -> subprocess.CompletedProcess | None:
        """Run cmd in its own process group, killed whole at min(cap, time left); output into the log."""
        limit = min(cap, self.left())
        if self.left() < 5:
            check.status, check.reason = "skipped", "the gate's time budget is spent"
            return None
        self.log(f"\n$ {' '.join(cmd)}   (cap {limit:.0f} s)")
        with subprocess.Popen(cmd, cwd=ROOT, env=env or self.child_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
            try:
                output, _ = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                output, _ = proc.communicate()
                check.status, check.reason = "timed out", f"killed after {limit:.0f} s (its cap)"
                self.log(output[-20000:])
                return None
        self.log(output[-20000:])
        return subprocess.CompletedProcess(cmd, proc.returncode, output)

    def child_env(self) -> dict:
        path = os.pathsep.join(p for p in (str(self.site), os.environ.get("PYTHONPATH", "")) if p)
        # PYTHONSAFEPATH: the checkout's root is the working directory, and its rlspec/ folder alone (without
        # spec/, reference/, fast/ mapped into it) must not shadow the installed package
        return dict(os.environ, PYTHONPATH=path, PYTHONSAFEPATH="1", PYTHONUNBUFFERED="1", HYPOTHESIS_PROFILE="ci",
                    PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")


def run_check(gate: Gate, name: str, body, *, needs: tuple[str, ...] = ()) -> Check:
    check = Check(name)
    gate.checks.append(check)
    missing = [n for n in needs if not any(c.name == n and c.status == "passed" for c in gate.checks)]
    start = time.monotonic()
    if missing:
        check.status, check.reason = "skipped", f"needs {', '.join(missing)}, which did not pass"
    else:
        try:
            body(gate, check)
        except Exception as exc:  # a check's own bug is that check's failure, never the gate's end
            check.status, check.reason = "failed", f"{type(exc).__name__}: {exc}"
    check.seconds = round(time.monotonic() - start, 2)
    gate.log(f"== {name}: {check.status} {check.reason}")
    gate.write()
    return check


def _python(gate: Gate, check: Check, code: str, cap: float) -> dict | None:
    """Run `code` (which prints one JSON object last) with the gate's environment; its JSON or None."""
    done = gate.sh(check, [sys.executable, "-c", code], cap)
    if done is None:
        return None
    if done.returncode != 0:
        check.status, check.reason = "failed", (done.stdout.strip().splitlines() or ["no output"])[-1][-300:]
        return None
    result = json.loads(done.stdout.strip().splitlines()[-1])
    check.status = "passed"
    return result


ENVIRONMENT = """
import json, platform, torch
info = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
            cuda_available=torch.cuda.is_available())
try:
    import triton; info["triton"] = triton.__version__
except ImportError as e:
    info["triton"] = f"missing: {e}"
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(device=p.name, capability=f"{p.major}.{p.minor}", memory_gib=round(p.total_memory / 2**30, 1),
                multiprocessors=p.multi_processor_count)
print(json.dumps(info))
"""


def check_environment(gate: Gate, check: Check) -> None:
    info = _python(gate, check, ENVIRONMENT, 60)
    if info is not None:
        gate.env.update(info)
        check.details = info
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
            gate.env["nvidia_smi"] = q.stdout.strip()


def bundle_wheels(bundle: Path) -> list[Path]:
    """The bundle's wheels, joined from part folders where prepare split them, each checked by sha256."""
    manifest = json.loads((bundle / "bundle.json").read_text())
    wheels = []
    for entry in manifest["files"]:
        path = bundle / entry["name"]
        if "parts" in entry:
            missing = [p for p in entry["parts"] if not (bundle / p).is_file()]
            if missing:
                raise FileNotFoundError(f"{entry['name']}: parts missing: {', '.join(missing)}")
            path = Path(tempfile.mkdtemp(prefix="gpu-gate-")) / entry["name"]
            with open(path, "wb") as out:
                for part in entry["parts"]:
                    out.write((bundle / part).read_bytes())
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            raise ValueError(f"{entry['name']}: sha256 {digest[:12]}..., bundle.json says {entry['sha256'][:12]}...")
        wheels.append(path)
    return wheels


def check_install(gate: Gate, check: Check) -> None:
    wheels = bundle_wheels(gate.bundle) if (gate.bundle / "bundle.json").is_file() else []
    check.details["wheels"] = [w.name for w in wheels]
    if not wheels:
        check.details["note"] = f"no bundle at {gate.bundle}: the checkout alone (run prepare where pip has network)"
    # built from a copy: an in-tree build would leave build/ in the checkout, whose stale files a later build
    # would package again
    source = Path(tempfile.mkdtemp(prefix="gpu-gate-src-")) / "rlspec"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".nox", ".venv", "build", "*.egg-info",
                                                                 ".gpu-offline", "bench-results", "__pycache__"))
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation", "--no-compile",
           "--no-cache-dir", "--upgrade", "--target", str(gate.site), *map(str, wheels), str(source)]
    done = gate.sh(check, cmd, 180)
    if done is not None:
        check.status = "passed" if done.returncode == 0 else "failed"
        if done.returncode:
            check.reason = f"pip exited {done.returncode} (gpu_gate.log has its output)"


def needs_cuda(gate: Gate, check: Check) -> bool:
    if not gate.env.get("cuda_available"):
        check.status, check.reason = "skipped", "CUDA is not available on this machine"
        return False
    return True


WARP_SMOKE = """
import json, warp as wp
wp.init()
@wp.kernel
def twice(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 2.0 * float(i)
a = wp.zeros(1024, dtype=float, device="cuda:0")
wp.launch(twice, dim=1024, inputs=[a], device="cuda:0")
got = a.numpy()
assert all(got[i] == 2.0 * i for i in range(1024)), got[:8]
print(json.dumps(dict(warp=wp.__version__, devices=[str(d) for d in wp.get_devices()])))
"""


def check_warp(gate: Gate, check: Check) -> None:
    if needs_cuda(gate, check):
        path = Path(tempfile.mkdtemp(prefix="gpu-gate-")) / "warp_smoke.py"  # Warp reads kernels' source files
        path.write_text(WARP_SMOKE)
        done = gate.sh(check, [sys.executable, str(path)], 120)
        if done is not None:
            check.status = "passed" if done.returncode == 0 else "failed"
            tail = done.stdout.strip().splitlines() or ["no output"]
            check.reason = "" if done.returncode == 0 else tail[-1][-300:]
            if done.returncode == 0:
                check.details = json.loads(tail[-1])


PYBOY_SMOKE = """
import json
from importlib.resources import files
from pyboy import PyBoy
rom = files("rlspec.envs.room") / "room.gb"
pb = PyBoy(str(rom), window="null", sound_emulated=False)
for _ in range(60):
    pb.tick()
shades = sorted(set(int(v) for v in pb.screen.ndarray[..., 0].ravel()))
pb.stop(save=False)
assert len(shades) > 1, f"blank screen: shades {shades}"
import rlspec
print(json.dumps(dict(frames=60, shades=shades, rlspec=rlspec.__file__)))
"""


def check_pyboy(gate: Gate, check: Check) -> None:
    result = _python(gate, check, PYBOY_SMOKE, 60)
    if result is not None:
        check.details = result


def check_pytest_gpu(gate: Gate, check: Check) -> None:
    if not needs_cuda(gate, check):
        return
    junit = Path(tempfile.mkdtemp(prefix="gpu-gate-")) / "junit.xml"
    done = gate.sh(check, [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rA", "-p",
                           "no:cacheprovider", f"--junitxml={junit}"], 300)
    if junit.is_file():
        check.details = junit_outcomes(junit.read_text())
        shutil.copy(junit, gate.out / "junit.xml")
    if done is not None:
        check.status = "passed" if done.returncode == 0 else "failed"
        check.reason = "" if done.returncode == 0 else f"pytest exited {done.returncode}"


def junit_outcomes(xml: str) -> dict:
    """{test id: passed | failed | error | skipped: reason} from pytest's JUnit XML."""
    import xml.etree.ElementTree as ET
    outcomes = {}
    for case in ET.fromstring(xml).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = f"{'failed' if kind == 'failure' else kind}: {(node.get('message') or '')[:200]}"
        outcomes[test] = outcome
    return outcomes


CHECK_CONTRACTS = ("twohot", "lambda_return", "gae", "vtrace", "packed2", "rssm")


def check_contracts_compiled(gate: Gate, check: Check) -> None:
    if not needs_cuda(gate, check):
        return
    results = {}
    for contract in CHECK_CONTRACTS:
        sub = Check(contract)
        done = gate.sh(sub, [sys.executable, "-m", "rlspec.cli", "check", contract, "--triton", "compiled", "--out",
                             str(Path(tempfile.mkdtemp(prefix="gpu-gate-")))], 240)
        results[contract] = sub.status if done is None else ("passed" if done.returncode == 0 else "failed")
    check.details = results
    bad = {c: s for c, s in results.items() if s != "passed"}
    check.status = "passed" if not bad else "failed"
    check.reason = ", ".join(f"{c} {s}" for c, s in bad.items())


def check_bench_sheeprl(gate: Gate, check: Check) -> None:
    if not needs_cuda(gate, check):
        return
    failed = []
    for precision, seconds in TRAIN_STEP_ARMS:
        out = Path(tempfile.mkdtemp(prefix="gpu-gate-"))
        done = gate.sh(check, [sys.executable, "-m", "benchmarks.dreamer.train_step", "--configs", "1m", "xs", "s",
                               "--steps", "5", "--warmup", "2", "--device", "cuda", "--precision", precision,
                               "--out", str(out)], seconds,
                       # the checkout after the site: its benchmarks/ package, never its rlspec/ folder
                       env=dict(gate.child_env(),
                                PYTHONPATH=os.pathsep.join((gate.child_env()["PYTHONPATH"], str(ROOT)))))
        for result in out.glob("*.json"):
            check.details[f"{precision}/{result.name}"] = json.loads(result.read_text())
        if done is None or done.returncode != 0:
            failed.append(f"{precision} " + ("did not finish" if done is None else f"exited {done.returncode}"))
    if not failed:
        check.status = "passed"
    elif check.status not in ("timed out", "skipped"):  # what sh said of an arm it stopped stays
        check.status = "failed"
    check.reason = "; ".join(failed) + (" (gpu_gate.log)" if failed else "")


TRAIN_STEP_ARMS = (("fp32", 180), ("bf16-mixed", 150))  # (precision, seconds): ms and launches per update


ROOM_EXIT_STEPS = 20_480  # the comparison's budget: 2,560 updates at the room-exit preset's replay ratio
CONV = ("dreamer.encoder=conv", "dreamer.cnn_stages=3", "dreamer.cnn_mult=8")  # the committed conv arm


def check_room_exit_cuda(gate: Gate, check: Check) -> None:
    """The fast engine (device execution) training room-exit end to end on CUDA: env steps/s and updates/s of
    the whole run, the replay ratio it held, the actor's and learner's seconds and how far they overlapped,
    and the greedy success from every start cell at the end."""
    if not needs_cuda(gate, check):
        return
    out = Path(tempfile.mkdtemp(prefix="gpu-gate-"))
    sets = [a for key in CONV for a in ("--set", key)]
    done = gate.sh(check, [sys.executable, "-m", "benchmarks.dreamer.room_exit", "--engines", "fast", "--seeds", "0",
                           "--steps", str(ROOM_EXIT_STEPS), "--chunk", str(ROOM_EXIT_STEPS), "--start-cells",
                           "--device", "cuda", *sets, "--runs", str(out / "runs"), "--out", str(out)], 200,
                   env=dict(gate.child_env(), PYTHONPATH=os.pathsep.join((gate.child_env()["PYTHONPATH"], str(ROOT)))))
    run = next((p.parent for p in (out / "runs").rglob("greedy_cells.json")), None)
    if run is not None:
        check.details = room_exit_figures(run)
    if done is not None:
        check.status = "passed" if done.returncode == 0 and run is not None else "failed"
        check.reason = "" if check.status == "passed" else f"exited {done.returncode} (gpu_gate.log)"


def room_exit_figures(run: Path) -> dict:
    """From a room_exit run folder: its last greedy evaluation and the metrics rows' sums and last values."""
    import csv

    greedy = json.loads((run / "greedy_cells.json").read_text())[-1]
    rows = list(csv.DictReader((run / "metrics.csv").open()))

    def total(key: str) -> float:
        return sum(float(r[key]) for r in rows if r.get(key) not in (None, ""))

    actor, learner, wall = total("Time/actor_s"), total("Time/learner_s"), greedy["wall_s"]
    return {"env_steps": greedy["env_steps"], "updates": greedy["updates"], "wall_s": wall,
            "env_steps_per_s": greedy["env_steps"] / wall, "updates_per_s": greedy["updates"] / wall,
            "replay_ratio": float(rows[-1]["Train/replay_ratio"]) if rows else None,
            "actor_s": actor, "learner_s": learner,
            # 0: the parts ran one after the other; 1: the shorter part hid entirely under the longer one
            "overlap": max(0.0, actor + learner - wall) / min(actor, learner) if min(actor, learner) > 0 else None,
            "greedy_success": greedy["greedy_success"]}


CHECKS = (  # (name, body, what it needs): in priority order, the whole inside the budget
    ("install", check_install, ()),
    ("environment", check_environment, ("install",)),
    ("warp_cuda_kernel", check_warp, ("install", "environment")),
    ("pyboy_room_rom", check_pyboy, ("install",)),
    ("pytest_tests_gpu", check_pytest_gpu, ("install", "environment")),
    ("dreamer_train_step_vs_sheeprl_cuda", check_bench_sheeprl, ("install", "environment")),
    ("dreamer_room_exit_cuda", check_room_exit_cuda, ("install", "environment")),
    ("rlspec_check_triton_compiled", check_contracts_compiled, ("install", "environment")),
)


def collect_bench(gate: Gate) -> None:
    merged = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "bench-results").glob("*.json"))}
    (gate.out / "bench.json").write_text(json.dumps(merged, indent=1) + "\n")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("gpu_gate.json", "gpu_gate.log", "bench.json", "junit.xml"):
        (out / stale).unlink(missing_ok=True)
    site = Path(args.site or tempfile.mkdtemp(prefix="gpu-gate-site-"))
    gate = Gate(out=out, bundle=Path(args.bundle), deadline=time.monotonic() + args.budget_s, site=site)
    for name, body, needs in CHECKS:
        if args.only and name not in args.only and name not in ("install", "environment"):
            continue
        run_check(gate, name, body, needs=needs)
    collect_bench(gate)
    gate.write()
    counts = json.loads((out / "gpu_gate.json").read_text())["counts"]
    print(f"gpu gate: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
          f"{counts['timed out']} timed out; {out / 'gpu_gate.json'}")
    return 1 if counts["failed"] or counts["timed out"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_gate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("prepare", help="with network: build the folder of wheels the GPU machine lacks")
    p.add_argument("--dest", default=str(ROOT / ".gpu-offline"))
    p.add_argument("--cache", default=str(Path.home() / ".cache" / "rlspec-gpu-gate"), help="downloaded wheels")
    p.add_argument("--python", default="3.12", help="the GPU machine's Python (major.minor)")
    p.add_argument("--cuda-arch", type=int, default=90, help="the GPU's sm_XY as XY (H100/H200: 90)")
    p.add_argument("--part-mib", type=int, default=0, help="split into part folders of at most this many MiB")
    p.add_argument("--packages", nargs="+", default=list(PACKAGES))
    r = sub.add_parser("run", help="on the GPU machine, no network: install, check, summarize")
    r.add_argument("--out", required=True, help="folder for gpu_gate.json, gpu_gate.log, bench.json, junit.xml")
    r.add_argument("--bundle", default=str(ROOT / ".gpu-offline"))
    r.add_argument("--budget-s", type=float, default=480, help="the whole run's time budget")
    r.add_argument("--site", help="install target (default: a fresh temporary folder)")
    r.add_argument("--only", nargs="+", choices=[c[0] for c in CHECKS], help="run these checks (and install)")
    args = parser.parse_args(argv)
    return prepare(args) if args.verb == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
