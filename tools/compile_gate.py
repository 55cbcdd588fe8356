"""The offline sm_90 compile gate: every Triton kernel of fast/, in every specialization the wrappers launch,
built for an H100 / H200 (sm_90) on a machine with no GPU and no driver, the way a launch builds it (Python →
TTIR → TTGIR → LLVM IR → PTX → cubin, Triton's bundled ptxas included). Each cubin's registers, stack (spills)
and shared memory are read back with the bundled cuobjdump.

    python tools/compile_gate.py [--out FILE.json] [--only KERNEL ...]

``--out`` writes the results as JSON and, beside it, FILE.md: one row per specialization (registers, stack
bytes, i.e. spills, and shared memory as cuobjdump reports them; sm_90 reserves 1 KB of shared memory per block).

Exit 0 when every specialization compiles, 1 otherwise (each failure named, with the compiler's message).

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


@dataclasses.dataclass(frozen=True)
class Spec:
    """One specialization: kernel ``module.kernel`` with its arguments' Triton types and constexpr values."""

    module: str  # under rlspec.fast
    kernel: str
    signature: dict[str, str]  # argument -> "*fp32", "i32", ... or "constexpr"
    constexprs: dict[str, Any]
    num_warps: int = 4

    @property
    def name(self) -> str:
        pointers = ",".join(t for t in self.signature.values() if t.startswith("*"))
        consts = ",".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"{self.module}.{self.kernel}[{pointers}; {consts}]"


def _sig(names: str, kinds: dict[str, str]) -> dict[str, str]:
    """{arg: type} for the space-separated ``names``, each typed by ``kinds`` (constexpr where not given)."""
    return {n: kinds.get(n, "constexpr") for n in names.split()}


def specializations() -> list[Spec]:
    """What the wrappers launch on CUDA (their dtype dispatch, their CUDA tiles), read from the modules."""
    from rlspec.contracts.rssm import DETER, UPDATE_BIAS
    from rlspec.contracts.twohot import DEFAULT_BINS
    from rlspec.fast import packed2_triton, returns_triton, rssm_triton, twohot_triton

    out = []
    for levels in ("u8", "i16", "i32", "i64"):  # uint8 codes; float16/bfloat16, float32, float64 as bits
        out.append(Spec("packed2_triton", "_unpack_kernel", _sig("packed_ptr levels_ptr out_ptr n BLOCK", {
            "packed_ptr": "*u8", "levels_ptr": f"*{levels}", "out_ptr": f"*{levels}", "n": "i32"}),
            dict(BLOCK=packed2_triton.BLOCK)))
    max_chunk, block_b = returns_triton.TILES["cuda"]
    for dtype in ("fp32", "fp64"):  # float16/bfloat16 compute in float32
        for has_offset in (False, True):
            for chunk in (2, max_chunk):  # T = 1 and long rollouts
                ptrs = dict.fromkeys("base_ptr coef_ptr init_ptr offset_ptr out_ptr shifted_ptr".split(), f"*{dtype}")
                out.append(Spec("returns_triton", "_backward_scan_kernel", _sig(
                    "base_ptr coef_ptr init_ptr offset_ptr out_ptr shifted_ptr T B n_chunks HAS_OFFSET CHUNK BLOCK_B",
                    {**ptrs, "T": "i32", "B": "i32", "n_chunks": "i32"}),
                    dict(HAS_OFFSET=has_offset, CHUNK=chunk, BLOCK_B=block_b), returns_triton.NUM_WARPS))
    for logits, compute in (("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp32"), ("fp64", "fp64")):
        for bins in (DEFAULT_BINS, 41):
            block_bins = 1 << (bins - 1).bit_length()
            out.append(Spec("twohot_triton", "_log_prob_kernel", _sig(
                "logits_ptr x_ptr bins_ptr out_ptr R n BLOCK_ROWS BLOCK_BINS", {
                    "logits_ptr": f"*{logits}", "x_ptr": f"*{logits}", "bins_ptr": f"*{compute}",
                    "out_ptr": f"*{logits}", "R": "i32", "n": "i32"}),
                dict(BLOCK_ROWS=max(1, twohot_triton.TILE // block_bins), BLOCK_BINS=block_bins)))
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


def compile_one(fn, signature: dict[str, str], constexprs: dict[str, Any], num_warps: int = 4):
    """triton.compile of ``fn`` (a @triton.jit function) for TARGET: the CompiledKernel (raises on failure)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    aligned = {(i,): [["tt.divisibility", POINTER_ALIGN]] for i, t in enumerate(signature.values()) if t[0] == "*"}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=GPUTarget(*TARGET), options=dict(num_warps=num_warps))


def run(spec: Spec) -> dict[str, Any]:
    import importlib

    fn = getattr(importlib.import_module(f"rlspec.fast.{spec.module}"), spec.kernel)
    start = time.perf_counter()
    row: dict[str, Any] = dict(name=spec.name, module=spec.module, kernel=spec.kernel, signature=spec.signature,
                               constexprs=spec.constexprs, num_warps=spec.num_warps)
    try:
        compiled = compile_one(fn, spec.signature, spec.constexprs, spec.num_warps)
    except Exception as err:  # noqa: BLE001 - reported per specialization
        return dict(row, ok=False, error=f"{type(err).__name__}: {str(err).strip()[:2000]}",
                    seconds=round(time.perf_counter() - start, 2))
    return dict(row, ok=True, seconds=round(time.perf_counter() - start, 2), **resources(compiled.asm["cubin"]))


def markdown(report: dict[str, Any]) -> str:
    """The report as a table (what FILE.md holds)."""
    lines = [f"# sm_90 compile gate, Triton {report['triton']}", "",
             f"Written by `python tools/compile_gate.py --out` from the JSON beside this file: {report['compiled']} "
             f"of {len(report['specializations'])} specializations compiled.", "",
             "| kernel | pointers | constexprs | warps | registers | stack (B) | shared (B) |",
             "|---|---|---|---|---|---|---|"]
    for r in report["specializations"]:
        pointers = ", ".join(t for t in r["signature"].values() if t.startswith("*"))
        consts = ", ".join(f"{k}={v}" for k, v in r["constexprs"].items())
        usage = (f"{r['reg']} | {r['stack']} | {r['shared']}" if r["ok"] else "FAILED | | ")
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
        usage = (f"{r['reg']} registers, {r['stack']} B stack, {r['shared']} B shared" if r["ok"] and "reg" in r
                 else "")
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['name']} {r['seconds']:.1f} s {usage or r.get('error', '')}")
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
