"""The Triton returns scan (fast/returns_triton.py) on CUDA ("Speed": GPU). The CPU gate runs
the same kernel under the interpreter with tiny tiles; this checks the compiled code at full size.

* parity: fast-triton ``gae`` and ``lambda_return`` at [512, 16384] on CUDA vs the float64 CPU reference,
  within the contracts' GAE-1 / LAMBDA-1 tolerances, in float32 and float64;
* no host synchronization: everything after input validation (the coefficients and the scan launch)
  runs under ``torch.cuda.set_sync_debug_mode("error")``; validation itself reads flags back by design;
* bandwidth: bytes moved / time as a fraction of the device-to-device copy bandwidth measured in the same
  run, for the scan kernel alone and for the whole call (minimal bytes of its inputs and outputs), with
  fast-torch beside it. Written to bench-results/returns_gpu.json; reported, never asserted (issue goal:
  the scan at >= 50% of the copy bandwidth).
"""

from __future__ import annotations

import pytest
import torch
from cuda_util import copy_bandwidth, cuda_seconds, sync_is_an_error, write_report

from rlspec.contracts.gae import validate_gae
from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.fast import gae as fast_gae
from rlspec.fast import gae_triton, lambda_return_triton, vtrace_triton
from rlspec.fast import lambda_return as fast_lambda
from rlspec.fast.returns_triton import backward_scan
from rlspec.reference import gae as ref_gae
from rlspec.reference import lambda_return as ref_lambda
from rlspec.reference import vtrace as ref_vtrace
from rlspec.spec.core import assert_close
from rlspec.spec.gae import _tol as gae_tolerance
from rlspec.spec.lambda_return import tolerance as lambda_tolerance
from rlspec.spec.returns import assert_within
from rlspec.spec.vtrace import error_bounds as vtrace_error_bounds

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="CUDA is not available: the compiled Triton scan needs a GPU"),
]

T, B = 512, 16384
GAMMA, LAM = 0.99, 0.95
TARGET_FRACTION = 0.5
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])


def _compiled():
    assert gae_triton.BACKEND_NOTE == "cuda", "TRITON_INTERPRET is set: unset it to test the compiled kernel"


@pytest.fixture(scope="module")
def lambda_case():
    """Our lambda_return arguments as float64 holding float32 values (both dtypes see the same numbers),
    with 1% terminals, continue probabilities in every 7th column and a few is_first cuts; and the
    float64 reference's R [T, B]."""
    g = torch.Generator().manual_seed(0)
    cont = (torch.rand(T, B, generator=g) > 0.01).double()
    cont[:, ::7] = torch.rand(T, cont[:, ::7].shape[1], generator=g).double()
    case = dict(reward=torch.randn(T, B, generator=g).double(), cont=cont,
                value=(10 * torch.randn(T + 1, B, generator=g)).double(), gamma=GAMMA, lam=LAM,
                is_first=torch.rand(T + 1, B, generator=g) < 0.005)
    return case, ref_lambda.lambda_return(**case)


@pytest.fixture(scope="module")
def gae_case():
    """Our gae arguments (float64 holding float32 values; 1% terminated, 0.5% truncated) and the float64
    reference's (advantages, returns)."""
    g = torch.Generator().manual_seed(1)
    u = torch.rand(T, B, generator=g)
    case = dict(reward=torch.randn(T, B, generator=g).double(), value=(10 * torch.randn(T, B, generator=g)).double(),
                terminated=u < 0.01, truncated=(u >= 0.01) & (u < 0.015),
                next_value=(10 * torch.randn(T, B, generator=g)).double(), gamma=GAMMA, lam=LAM)
    return case, ref_gae.gae(**case)


def _on_cuda(case: dict, dtype: torch.dtype) -> dict:
    return {k: (v.to("cuda", dtype) if v.is_floating_point() else v.cuda()) if isinstance(v, torch.Tensor) else v
            for k, v in case.items()}


@DTYPES
def test_lambda_return_matches_reference_on_cuda(lambda_case, dtype):
    _compiled()
    case, want = lambda_case
    x = _on_cuda(case, dtype)
    got = lambda_return_triton.lambda_return(**x)
    assert got.is_cuda and got.dtype == dtype and got.shape == want.shape
    assert_close("LAMBDA-1", f"fast-triton lambda_return on CUDA ({dtype})", got.cpu(), want,
                 atol=lambda_tolerance(x["reward"], x["value"]))


@DTYPES
def test_gae_matches_reference_on_cuda(gae_case, dtype):
    _compiled()
    case, (want_adv, want_ret) = gae_case
    x = _on_cuda(case, dtype)
    adv, ret = gae_triton.gae(**x)
    assert adv.is_cuda and adv.dtype == dtype and adv.shape == want_adv.shape
    tol = gae_tolerance({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in x.items()})
    assert_close("GAE-1", f"fast-triton advantages on CUDA ({dtype})", adv.cpu(), want_adv, atol=tol)
    assert_close("GAE-1", f"fast-triton returns on CUDA ({dtype})", ret.cpu(), want_ret, atol=tol)


@DTYPES
def test_vtrace_matches_reference_on_cuda(dtype):
    """V-trace's (vs − V) recursion through the same scan kernel, off-policy ratios, vs the float64 reference."""
    _compiled()
    g = torch.Generator().manual_seed(2)
    case = dict(log_rho=(0.5 * torch.randn(T, B, generator=g)).double(),
                discount=(GAMMA * (torch.rand(T, B, generator=g) > 0.01)).double(),
                reward=torch.randn(T, B, generator=g).double(), value=(10 * torch.randn(T, B, generator=g)).double(),
                bootstrap_value=(10 * torch.randn(B, generator=g)).double(), rho_bar=1.0, c_bar=1.0, lam=LAM,
                pg_rho_bar=None)
    want_vs, want_pg = ref_vtrace.vtrace(**case)
    x = _on_cuda(case, dtype)
    vs, pg = vtrace_triton.vtrace(**x)
    tol_vs, tol_pg = vtrace_error_bounds({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in x.items()})
    assert_within("VTRACE-1", f"fast-triton vs on CUDA ({dtype})", vs.cpu(), want_vs, tol_vs)
    assert_within("VTRACE-2", f"fast-triton pg advantage on CUDA ({dtype})", pg.cpu(), want_pg, tol_pg)


def _after_validation(lambda_x: dict, gae_x: dict) -> dict:
    """The work of the public calls after validation: {name: callable}. "... scan" = coefficients + scan
    kernel (as fast-triton runs it), "... kernel" = the kernel alone on precomputed coefficients."""
    first = validate_lambda_return("lambda_return", **lambda_x)  # reads data back: outside the checks
    term, trunc = validate_gae("gae", **gae_x)
    r, c, v = lambda_x["reward"], lambda_x["cont"], lambda_x["value"]
    rg, vg, bg = gae_x["reward"], gae_x["value"], gae_x["next_value"]
    lambda_coefs = fast_lambda.lambda_coefficients(r, c, v, GAMMA, LAM, first)  # (base, coef) [T, B]
    gae_coefs = fast_gae.gae_coefficients(rg, vg, term, trunc, bg, GAMMA, LAM)  # (δ, coef) [T, B]
    zeros = vg.new_zeros(vg.shape[1:])  # [B]: A_T = 0
    return {
        "lambda_return scan": lambda: backward_scan(*fast_lambda.lambda_coefficients(r, c, v, GAMMA, LAM, first),
                                                    v[-1]),
        "gae scan": lambda: backward_scan(*fast_gae.gae_coefficients(rg, vg, term, trunc, bg, GAMMA, LAM), zeros,
                                          offset=vg),
        "lambda_return kernel": lambda: backward_scan(*lambda_coefs, v[-1]),
        "gae kernel": lambda: backward_scan(*gae_coefs, zeros, offset=vg),
    }


def test_scan_launch_does_not_synchronize(lambda_case, gae_case):
    _compiled()
    lambda_x, gae_x = _on_cuda(lambda_case[0], torch.float32), _on_cuda(gae_case[0], torch.float32)
    calls = _after_validation(lambda_x, gae_x)
    for call in calls.values():
        call()  # warm-up: compiles the kernels
    with sync_is_an_error():
        R = calls["lambda_return scan"]()
        adv, ret = calls["gae scan"]()
    torch.testing.assert_close(R, lambda_return_triton.lambda_return(**lambda_x), rtol=0, atol=0)
    torch.testing.assert_close((adv, ret), gae_triton.gae(**gae_x), rtol=0, atol=0)


def test_scan_bandwidth_vs_device_copy(lambda_case, gae_case):
    _compiled()
    lambda_x, gae_x = _on_cuda(lambda_case[0], torch.float32), _on_cuda(gae_case[0], torch.float32)
    calls = _after_validation(lambda_x, gae_x)
    n, f32 = T * B, 4
    copy_bw = copy_bandwidth(5 * n * f32)  # as many bytes as the largest scan moves; read + written per second
    lambda_bytes, gae_bytes = 4 * n * f32, 5 * n * f32 + 2 * n  # the calls' inputs read + outputs written
    rows = [  # (contract, what, callable, bytes moved)
        ("lambda_return", "scan kernel", calls["lambda_return kernel"], 3 * n * f32),  # base, coef; R
        ("gae", "scan kernel", calls["gae kernel"], 5 * n * f32),  # δ, coef, value; advantages, returns
        ("lambda_return", "coefficients + scan", calls["lambda_return scan"], lambda_bytes),  # r, c, v; R
        ("gae", "coefficients + scan", calls["gae scan"], gae_bytes),  # r, v, b, 2 flags; A, returns
        ("lambda_return", "fast-triton call", lambda: lambda_return_triton.lambda_return(**lambda_x), lambda_bytes),
        ("gae", "fast-triton call", lambda: gae_triton.gae(**gae_x), gae_bytes),
        ("lambda_return", "fast-torch call", lambda: fast_lambda.lambda_return(**lambda_x), lambda_bytes),
        ("gae", "fast-torch call", lambda: fast_gae.gae(**gae_x), gae_bytes),
    ]
    results = []
    for contract, what, fn, moved in rows:
        seconds = cuda_seconds(fn)
        results.append(dict(contract=contract, what=what, shape=[T, B], dtype="float32", median_s=seconds,
                            bytes_moved=moved, bandwidth_gb_s=moved / seconds / 1e9,
                            fraction_of_copy=moved / seconds / copy_bw))
    report = dict(device=torch.cuda.get_device_name(), copy_bandwidth_gb_s=copy_bw / 1e9,
                  target_fraction=TARGET_FRACTION, results=results)
    write_report("returns_gpu", report)
    print(f"\ndevice-to-device copy: {copy_bw / 1e9:.1f} GB/s on {report['device']}")
    for r in results:
        print(f"  {r['contract']:<14} {r['what']:<20} {r['median_s'] * 1e3:8.3f} ms {r['bandwidth_gb_s']:8.1f} GB/s "
              f"= {r['fraction_of_copy']:.2f} of copy")
    assert all(r["fraction_of_copy"] > 0 for r in results), report
