"""The offline sm_90 compile gate (tools/compile_gate.py): every Triton kernel of fast/ compiles for sm_90 without
a GPU, its specializations are the ones the wrappers launch, and it rejects the planted defects the interpreter
runs (tests/unit/compile_gate_planted.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "tools" / "compile_gate.py"
PLANTED = Path(__file__).with_name("compile_gate_planted.py")
_spec = importlib.util.spec_from_file_location("compile_gate", GATE)
gate = sys.modules["compile_gate"] = importlib.util.module_from_spec(_spec)  # dataclasses look the module up
_spec.loader.exec_module(gate)

TRITON_TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
                torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64"}
CHOSEN_BY_CALLER = ("HAS_OFFSET", "UPDATE", "VEC")  # constexprs the call decides (VEC: by dtype); the others
# are tiles of the device
# bytes of stack a specialization may use: rssm's backward at BLOCK 4096 keeps 8; the tiles that spilled hundreds
# of bytes were resized (fast/twohot_triton.py TILE, fast/rssm_triton.py warps_for)
STACK_BUDGET = 64


def _compiled_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def _kernels_in_fast() -> set[tuple[str, str]]:
    """(module, function) of every @triton.jit function named *_kernel in fast/ (helpers are inlined)."""
    out = set()
    for path in (ROOT / "fast").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel") and any(
                    ast.unparse(d) == "triton.jit" for d in node.decorator_list):
                out.add((path.stem, node.name))
    return out


def test_every_kernel_compiles_for_sm90_and_reports_its_resources(tmp_path):
    out = tmp_path / "gate.json"
    proc = subprocess.run([sys.executable, str(GATE), "--out", str(out)], cwd=ROOT, env=_compiled_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["target"] == ["cuda", 90, 32] and report["compiled"] == len(report["specializations"])
    assert {(r["module"], r["kernel"]) for r in report["specializations"]} == _kernels_in_fast()
    assert all(0 < r["reg"] <= 255 for r in report["specializations"])
    spilling = [f"{r['name']}: {r['stack']} B" for r in report["specializations"] if r["stack"] > STACK_BUDGET]
    assert not spilling, f"stack (spills) past {STACK_BUDGET} B: {spilling}"
    assert all(r["shared_dynamic"] + 1024 <= gate.SHARED_LIMIT for r in report["specializations"])


def test_each_kernels_design_shows_in_its_machine_code(tmp_path):
    """The roofline redesigns, read back from the PTX: twohot's rows in 128-bit loads, packed2's pixels in 128-bit
    stores (bytes a multiple of 16), the returns scan's loop pipelined with cp.async copies."""
    out = tmp_path / "gate.json"
    proc = subprocess.run([sys.executable, str(GATE), "--out", str(out), "--only", "_log_prob_kernel",
                           "_unpack_kernel", "_backward_scan_kernel"], cwd=ROOT, env=_compiled_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = json.loads(out.read_text())["specializations"]

    def widest(r, access):
        return max(map(int, r[f"{access}_bits"]))

    twohot = [r for r in rows if r["kernel"] == "_log_prob_kernel"]
    assert twohot and all(widest(r, "load") == 128 for r in twohot)
    frames = [r for r in rows if r["kernel"] == "_unpack_kernel" and r["divisible"] == ["n"]]
    assert len(frames) == 4 and all(widest(r, "store") == 128 for r in frames)
    scans = [r for r in rows if r["kernel"] == "_backward_scan_kernel" and r["constexprs"]["CHUNK"] > 2]
    assert len(scans) == 8 and all(r["async_copies"] > 0 and r["load_bits"] in ({"32": 1}, {"64": 1}) for r in scans)


def _launches(monkeypatch) -> list[tuple]:
    """Record (module, kernel, pointer types, caller-chosen constexprs, warps) of every launch (interpreted here)."""
    seen = []

    class Recorder:
        def __init__(self, module, name):
            self.module, self.name, self.kernel = module, name, getattr(module, name)

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                pointers = tuple(f"*{TRITON_TYPES[a.dtype]}" for a in args if isinstance(a, torch.Tensor))
                chosen = tuple(sorted((k, v) for k, v in kwargs.items() if k in CHOSEN_BY_CALLER))
                seen.append((self.module.__name__.rsplit(".", 1)[1], self.name, pointers, chosen,
                             kwargs.get("num_warps", 4)))
                return self.kernel[grid](*args, **kwargs)
            return launch

    for module, name in _kernels_in_fast():
        mod = importlib.import_module(f"rlspec.fast.{module}")
        monkeypatch.setattr(mod, name, Recorder(mod, name))
    return seen


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the wrappers launch interpreted kernels")
def test_the_gate_compiles_every_dtype_and_choice_the_wrappers_launch(monkeypatch):
    from rlspec.fast import gae_triton, lambda_return_triton, packed2_triton, rssm_triton, twohot_triton

    seen = _launches(monkeypatch)
    packed = torch.randint(0, 256, (2, 3), dtype=torch.uint8)
    packed2_triton.unpack(packed)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        packed2_triton.unpack_normalized(packed, dtype)
        r, v = torch.randn(5, 3, dtype=dtype), torch.randn(5, 3, dtype=dtype)
        flags = torch.zeros(5, 3, dtype=torch.bool)
        gae_triton.gae(r, v, flags, flags, v, 0.99, 0.95)
        lambda_return_triton.lambda_return(r, torch.ones_like(r), torch.randn(6, 3, dtype=dtype), 0.99, 0.95)
        twohot_triton.log_prob(torch.randn(4, 255, dtype=dtype), torch.randn(4, dtype=dtype))
    h, y = torch.randn(2, 8, requires_grad=True), torch.randn(2, 24, requires_grad=True)
    rssm_triton.layer_norm_gru(y, torch.ones(24), torch.zeros(24), h, 1e-3).sum().backward()
    declared = {(s.module, s.kernel, tuple(t for t in s.signature.values() if t[0] == "*"),
                 tuple(sorted((k, v) for k, v in s.constexprs.items() if k in CHOSEN_BY_CALLER)),
                 s.num_warps) for s in gate.specializations()}
    assert {(m, k) for m, k, *_ in seen} == _kernels_in_fast()
    assert set(seen) <= declared, f"launched but not compiled by the gate: {sorted(set(seen) - declared)}"


_RUN_PLANTED = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("planted", sys.argv[1])
planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(planted)
x, out = torch.arange(1.0, 5.0), torch.zeros(1)
for name in planted.PLANTED:
    getattr(planted, name)[(1,)](x, out, N=4)
    assert out.item() == 10.0, (name, out.item())
print("interpreted: all ran")
"""

_COMPILE_PLANTED = """
import importlib.util, sys
gate_spec = importlib.util.spec_from_file_location("compile_gate", sys.argv[2])
gate = sys.modules["compile_gate"] = importlib.util.module_from_spec(gate_spec)
gate_spec.loader.exec_module(gate)
spec = importlib.util.spec_from_file_location("planted", sys.argv[1])
planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(planted)
for name in planted.PLANTED:
    try:
        gate.compile_one(getattr(planted, name), {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "constexpr"}, {"N": 4})
    except Exception as err:
        print(f"rejected {name}: " + " ".join(str(err).split())[-300:])
    else:
        print(f"compiled {name}")
"""


def test_the_gate_rejects_what_the_interpreter_runs():
    interpreted = subprocess.run([sys.executable, "-c", _RUN_PLANTED, str(PLANTED)], cwd=ROOT, capture_output=True,
                                 text=True, env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
    assert "interpreted: all ran" in interpreted.stdout, interpreted.stderr[-3000:]
    compiled = subprocess.run([sys.executable, "-c", _COMPILE_PLANTED, str(PLANTED), str(GATE)], cwd=ROOT,
                              capture_output=True, text=True, env=_compiled_env(), timeout=300)
    said = dict(line.split(": ", 1) for line in compiled.stdout.split("\n") if line.startswith("rejected "))
    assert said.keys() == {"rejected type_changes_in_loop", "rejected breaks_out_of_loop",
                           "rejected calls_plain_python"}, compiled.stdout + compiled.stderr[-3000:]
    assert "Loop-carried variable acc" in said["rejected type_changes_in_loop"]
    assert "Break" in said["rejected breaks_out_of_loop"]
    assert "_double" in said["rejected calls_plain_python"]


def test_the_gate_reports_a_design_regression_the_interpreter_cannot_see():
    import importlib.util as iu

    spec = iu.spec_from_file_location("planted", PLANTED)
    planted = iu.module_from_spec(spec)
    spec.loader.exec_module(planted)
    env = _compiled_env()
    script = f"""
import importlib.util, json, sys
gate_spec = importlib.util.spec_from_file_location("compile_gate", {str(GATE)!r})
gate = sys.modules["compile_gate"] = importlib.util.module_from_spec(gate_spec)
gate_spec.loader.exec_module(gate)
spec = importlib.util.spec_from_file_location("planted", {str(PLANTED)!r})
planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(planted)
sig = {{"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "ROWS": "constexpr", "COLS": "constexpr"}}
said = {{}}
for name, expect in planted.REGRESSIONS.items():
    compiled = gate.compile_one(getattr(planted, name), sig, {{"ROWS": 4, "COLS": 256}})
    s = gate.Spec("planted", name, sig, {{"ROWS": 4, "COLS": 256}}, expect=expect)
    said[name] = gate.unmet(s, gate.machine_code(compiled))
print(json.dumps(said))
"""
    compiled = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, env=env,
                              timeout=300)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    said = json.loads(compiled.stdout.strip().splitlines()[-1])
    assert said["row_relative_loads"] == ["widest global load 32 bits, expected 128"]
    assert said["unpipelined_loop"] == ["no cp.async copies: the loop's loads are not pipelined"]
    if os.environ.get("TRITON_INTERPRET") == "1":  # and interpreted they compute the right sums
        x, out = torch.arange(1.0, 13.0), torch.zeros(1)
        for name in planted.REGRESSIONS:
            getattr(planted, name)[(1,)](x, out, 3, ROWS=4, COLS=4)
            assert out.item() == 78.0, (name, out.item())
