"""The offline sm_90 compile gate: every Triton kernel of fast/, in every specialization the wrappers launch,
built for an H100 / H200 (sm_90) on a machine with no GPU and no driver, the way a launch builds it (Python →
TTIR → TTGIR → LLVM IR → PTX → cubin, Triton's bundled ptxas included). Each cubin's registers, stack (spills)
and shared memory are read back with the bundled cuobjdump.

    python tools/compile_gate.py [--out FILE.json] [--only KERNEL ...]

``--out`` writes the results as JSON and, beside it, FILE.md: one row per specialization (registers, stack
bytes, i.e. spills, as cuobjdump reports them; the shared memory a launch requests, i.e. Triton's dynamic
shared memory, plus the 1 KB sm_90 reserves per block; the widest global load, and the asynchronous copies
(cp.async), read from the PTX).

Exit 0 when every specialization compiles and shows the machine code its kernel's design promises (a
specialization's ``expect``: 128-bit loads, or pipelined cp.async copies), 1 otherwise (each failure named,
with the compiler's message or the missing property).

Why: the CPU gate runs the kernels under the Triton interpreter (TRITON_INTERPRET=1), which accepts code the
compiler rejects (a loop-carried variable that changes type, ``break``, a call to a plain Python function; the
planted defects of tests/unit/test_compile_gate.py) and never sees the CUDA tiles (returns_triton.TILES["cuda"]).
What this gate cannot catch: the numerics of compiled code, races, out-of-bounds accesses, a driver or PTX
version the machine refuses at load, and timings: those need the GPU gate (tools/gpu_gate.py).

It must run with TRITON_INTERPRET unset. fast/triton_mode refuses to import a compiled backend without CUDA;
here torch.cuda.is_available answers True for that import only: nothing is launched.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = ("cuda", 90, 32)  # backend, compute capability, warp size: GPUTarget of an H100 / H200
POINTER_ALIGN = 16  # bytes: torch's allocations; launch time marks such pointers tt.divisibility 16
INT_ALIGN = 16  # launch time marks an integer argument that is a multiple of 16 tt.divisibility 16 too
SHARED_LIMIT = 232_448  # bytes of shared memory one block may use on sm_90 (227 KiB)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One specialization: kernel ``module.kernel`` with its arguments' Triton types and constexpr values."""

    module: str  # under rlspec.fast
    kernel: str
    signature: dict[str, str]  # argument -> "*fp32", "i32", ... or "constexpr"
    constexprs: dict[str, Any]
    num_warps: int = 4
    divisible: tuple[str, ...] = ()  # integer arguments compiled as multiples of 16 (e.g. a batch of 16384)
    expect: dict[str, Any] = dataclasses.field(default_factory=dict)  # min_load_bits, min_store_bits, async_copies

    @property
    def name(self) -> str:
        pointers = ",".join(t for t in self.signature.values() if t.startswith("*"))
        consts = ",".join(f"{k}={v}" for k, v in self.constexprs.items())
        ints = "".join(f"; {n}%16=0" for n in self.divisible)
        return f"{self.module}.{self.kernel}[{pointers}; {consts}{ints}]"


def _sig(names: str, kinds: dict[str, str]) -> dict[str, str]:
    """{arg: type} for the space-separated ``names``, each typed by ``kinds`` (constexpr where not given)."""
    return {n: kinds.get(n, "constexpr") for n in names.split()}


def specializations() -> list[Spec]:
    """What the wrappers launch on CUDA (their dtype dispatch, their CUDA tiles), read from the modules."""
    import torch

    from rlspec.contracts.rssm import DETER, UPDATE_BIAS
    from rlspec.contracts.twohot import DEFAULT_BINS
    from rlspec.fast import packed2_triton, returns_triton, rssm_triton, twohot_triton

    out = []
    for levels in ("u8", "i16", "i32", "i64"):  # uint8 codes; float16/bfloat16, float32, float64 as bits
        for divisible in ((), ("n",)):  # any byte count; a multiple of 16, as frames are (128-bit stores)
            out.append(Spec("packed2_triton", "_unpack_kernel", _sig("packed_ptr levels_ptr out_ptr n BLOCK", {
                "packed_ptr": "*u8", "levels_ptr": f"*{levels}", "out_ptr": f"*{levels}", "n": "i32"}),
                dict(BLOCK=packed2_triton.BLOCK), 4, divisible, dict(min_store_bits=128) if divisible else {}))
    max_chunk, block_b = returns_triton.TILES["cuda"]
    for dtype in ("fp32", "fp64"):  # float16/bfloat16 compute in float32
        for has_offset in (False, True):
            for chunk, divisible in ((2, ()), (max_chunk, ()), (max_chunk, ("B",))):  # T = 1; long rollouts
                ptrs = dict.fromkeys("base_ptr coef_ptr init_ptr offset_ptr out_ptr shifted_ptr".split(), f"*{dtype}")
                out.append(Spec("returns_triton", "_backward_scan_kernel", _sig(
                    "base_ptr coef_ptr init_ptr offset_ptr out_ptr shifted_ptr T B n_chunks HAS_OFFSET CHUNK BLOCK_B "
                    "STAGES", {**ptrs, "T": "i32", "B": "i32", "n_chunks": "i32"}),
                    dict(HAS_OFFSET=has_offset, CHUNK=chunk, BLOCK_B=block_b, STAGES=returns_triton.STAGES),
                    returns_triton.NUM_WARPS, divisible, dict(async_copies=chunk == max_chunk)))
    for logits, compute, dtype in (("fp16", "fp32", torch.float16), ("bf16", "fp32", torch.bfloat16),
                                   ("fp32", "fp32", torch.float32), ("fp64", "fp64", torch.float64)):
        for bins in (DEFAULT_BINS, 41):
            block_bins = 1 << (bins - 1).bit_length()
            out.append(Spec("twohot_triton", "_log_prob_kernel", _sig(
                "logits_ptr x_ptr bins_ptr out_ptr R n BLOCK_ROWS BLOCK_BINS VEC", {
                    "logits_ptr": f"*{logits}", "x_ptr": f"*{logits}", "bins_ptr": f"*{compute}",
                    "out_ptr": f"*{logits}", "R": "i32", "n": "i32"}),
                dict(BLOCK_ROWS=max(1, twohot_triton.TILE // block_bins), BLOCK_BINS=block_bins,
                     VEC=twohot_triton.vector(dtype)), expect=dict(min_load_bits=128)))
    for h in (64, DETER, 4096):  # the presets' smallest, the default, DreamerV3's largest
        block = 1 << (h - 1).bit_length()
        floats = {"H": "i32", "eps": "fp32"}
        out.append(Spec("rssm_triton", "_forward_kernel", _sig("y_ptr w_ptr b_ptr h_ptr out_ptr H eps UPDATE BLOCK", {
            **dict.fromkeys("y_ptr w_ptr b_ptr h_ptr out_ptr".split(), "*fp32"), **floats}),
            dict(UPDATE=UPDATE_BIAS, BLOCK=block), rssm_triton.warps_for(block)))
        out.append(Spec("rssm_triton", "_backward_kernel", _sig(
            "y_ptr w_ptr b_ptr h_ptr grad_ptr dy_ptr dh_ptr dw_ptr db_ptr H eps UPDATE BLOCK", {
                **dict.fromkeys("y_ptr w_ptr b_ptr h_ptr grad_ptr dy_ptr dh_ptr dw_ptr db_ptr".split(), "*fp32"),
                **floats}), dict(UPDATE=UPDATE_BIAS, BLOCK=block), rssm_triton.warps_for(block)))
    return out


def _allow_compiled_import() -> None:
    """fast/triton_mode imports a compiled backend only where CUDA is available: say it is (nothing launches)."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise SystemExit("compile_gate: unset TRITON_INTERPRET (the interpreter compiles nothing)")
    import torch

    torch.cuda.is_available = lambda: True


def resources(cubin: bytes) -> dict[str, int]:
    """REG, STACK, SHARED and LOCAL of the cubin's one function (cuobjdump --dump-resource-usage)."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    found = dict(re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text))
    return {k.lower(): int(v) for k, v in found.items()}


def compile_one(fn, signature: dict[str, str], constexprs: dict[str, Any], num_warps: int = 4,
                divisible: tuple[str, ...] = ()):
    """triton.compile of ``fn`` (a @triton.jit function) for TARGET: the CompiledKernel (raises on failure).
    Pointers are 16-byte aligned, and the integer arguments named in ``divisible`` multiples of 16, as a
    launch specializes them."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    aligned = {(i,): [["tt.divisibility", POINTER_ALIGN if t[0] == "*" else INT_ALIGN]]
               for i, (name, t) in enumerate(signature.items()) if t[0] == "*" or name in divisible}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=GPUTarget(*TARGET), options=dict(num_warps=num_warps))


def machine_code(compiled) -> dict[str, Any]:
    """What the design of a kernel shows in its code: the shared memory a launch requests (Triton's dynamic
    shared memory) and, from the PTX, the global loads by width in bits and the asynchronous copies."""
    ptx = compiled.asm["ptx"]

    def widths(op: str) -> dict[str, int]:  # {bits: count} of op's global accesses, e.g. ld.global.v4.b32: 128
        out: dict[str, int] = {}
        for vector, bits in re.findall(rf"\b{op}\.global(?:\.[a-z_]+\d*)*?(?:\.v(\d))?\.[bfsu](\d+)\b", ptx):
            key = str(int(vector or 1) * int(bits))
            out[key] = out.get(key, 0) + 1
        return out

    return dict(shared_dynamic=int(compiled.metadata.shared), load_bits=widths("ld"), store_bits=widths("st"),
                async_copies=len(re.findall(r"\bcp\.async\.c[ag]\.shared", ptx)))


def unmet(spec: Spec, code: dict[str, Any]) -> list[str]:
    """The properties ``spec.expect`` promises that ``code`` (machine_code) lacks."""
    out = []
    for access in ("load", "store"):
        widest, wanted = max(map(int, code[f"{access}_bits"]), default=0), spec.expect.get(f"min_{access}_bits", 0)
        if widest < wanted:
            out.append(f"widest global {access} {widest} bits, expected {wanted}")
    if spec.expect.get("async_copies") and not code["async_copies"]:
        out.append("no cp.async copies: the loop's loads are not pipelined")
    if code["shared_dynamic"] + 1024 > SHARED_LIMIT:
        out.append(f"shared memory {code['shared_dynamic'] + 1024} B, limit {SHARED_LIMIT} B")
    return out


def run(spec: Spec) -> dict[str, Any]:
    import importlib

    fn = getattr(importlib.import_module(f"rlspec.fast.{spec.module}"), spec.kernel)
    start = time.perf_counter()
    row: dict[str, Any] = dict(name=spec.name, module=spec.module, kernel=spec.kernel, signature=spec.signature,
                               constexprs=spec.constexprs, num_warps=spec.num_warps, divisible=list(spec.divisible),
                               expect=spec.expect)
    try:
        compiled = compile_one(fn, spec.signature, spec.constexprs, spec.num_warps, spec.divisible)
    except Exception as err:  # noqa: BLE001 - reported per specialization
        return dict(row, ok=False, error=f"{type(err).__name__}: {str(err).strip()[:2000]}",
                    seconds=round(time.perf_counter() - start, 2))
    code = machine_code(compiled)
    problems = unmet(spec, code)
    return dict(row, ok=not problems, seconds=round(time.perf_counter() - start, 2), **resources(compiled.asm["cubin"]),
                **code, **({"error": "; ".join(problems)} if problems else {}))


def markdown(report: dict[str, Any]) -> str:
    """The report as a table (what FILE.md holds)."""
    lines = [f"# sm_90 compile gate, Triton {report['triton']}", "",
             f"Written by `python tools/compile_gate.py --out` from the JSON beside this file: {report['compiled']} "
             f"of {len(report['specializations'])} specializations compiled.", "",
             "Shared memory is what a launch requests plus the 1 KB sm_90 reserves; loads and stores are the PTX's",
             "global accesses by width in bits (count); cp.async counts the asynchronous copies of a pipelined loop.",
             "", "| kernel | pointers | constexprs | warps | registers | stack (B) | shared (B) | loads | stores "
             "| cp.async |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["specializations"]:
        pointers = ", ".join(t for t in r["signature"].values() if t.startswith("*"))
        consts = ", ".join([f"{k}={v}" for k, v in r["constexprs"].items()] + [f"{n}%16=0" for n in r["divisible"]])
        if "reg" in r:
            loads, stores = (", ".join(f"{b}: {n}" for b, n in sorted(r[f"{a}_bits"].items(), key=lambda i: -int(i[0])))
                             for a in ("load", "store"))
            usage = (f"{r['reg']} | {r['stack']} | {r['shared_dynamic'] + 1024} | {loads} | {stores} | "
                     f"{r['async_copies']}") + ("" if r["ok"] else f" (FAILED: {r['error']})")
        else:
            usage = "FAILED | | | | |"
        lines.append(f"| {r['module']}.{r['kernel']} | {pointers} | {consts} | {r['num_warps']} | {usage} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/compile_gate.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--only", nargs="*", help="kernels to compile (default: all)")
    args = ap.parse_args(argv)
    _allow_compiled_import()
    import triton

    rows = [run(s) for s in specializations() if not args.only or s.kernel in args.only]
    for r in rows:
        usage = (f"{r['reg']} registers, {r['stack']} B stack, {r['shared_dynamic'] + 1024} B shared, loads "
                 f"{r['load_bits']} stores {r['store_bits']} bits, {r['async_copies']} cp.async" if "reg" in r else "")
        usage += f" {r['error']}" if "error" in r else ""
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['name']} {r['seconds']:.1f} s {usage}")
    report = dict(triton=triton.__version__, target=list(TARGET), compiled=sum(r["ok"] for r in rows),
                  specializations=rows)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown(report))
    failed = [r["name"] for r in rows if not r["ok"]]
    print(f"compile_gate: {len(rows) - len(failed)} of {len(rows)} specializations compiled for sm_90 "
          f"(Triton {triton.__version__})" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
