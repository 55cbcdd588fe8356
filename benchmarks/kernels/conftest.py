"""Shared by the benchmark modules: two torch threads, the device axis and ``check_and_time``.

Each benchmark is labelled for benchmarks/kernels/ratios.py through ``extra_info``: ``op`` (e.g.
"twohot.log_prob"), ``impl`` ("reference", "fast-torch", "fast-triton", "sheeprl") and ``device``.
"""

from __future__ import annotations

import pytest
import torch

from rlspec.evidence import cpu


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (/proc/loadavg), None where there is none (not Linux)."""
    try:
        return [float(v) for v in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


LOAD_AT_START = load_average()  # conftest is imported before the first benchmark runs
NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
AGREE = dict(rtol=1e-3, atol=1e-3, check_dtype=False)  # loose: only "the same work was done"


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    """The CPU identity (model, x86-64 level, vector flags, caches) in the JSON's machine_info: every ratio is
    only true of the CPU it was measured on; benchmarks/kernels/ratios.py prints and keeps it. Also the load average
    when the session started and when the JSON is written (on a shared machine it says how quiet the run was),
    and pytest's arguments."""
    machine_info["cpu_identity"] = cpu.identity()
    machine_info["loadavg"] = {"start": LOAD_AT_START, "end": load_average()}
    machine_info["pytest_args"] = list(config.invocation_params.args)  # what ran: files, -m, -k


@pytest.fixture(autouse=True)
def two_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=NO_CUDA)])
def device(request) -> str:
    return request.param


@pytest.fixture
def impl(request, device) -> str:
    """The implementation's name (modules parametrize it, indirect=True); skipped where it does not run."""
    if request.param == "reference" and device != "cpu":
        pytest.skip("the reference is the float64 CPU oracle")
    if request.param == "fast-triton" and device == "cpu":
        pytest.skip("Triton is interpreted on CPU: far too slow at this size")
    return request.param


@pytest.fixture
def check_and_time(impl, device, benchmark):
    """check_and_time(op, fn, expected): check fn() against fast-torch's ``expected``, then time fn()."""

    def run(op: str, fn, expected) -> None:
        torch.testing.assert_close(fn(), expected, **AGREE,
                                   msg=lambda m: f"{impl} disagrees with fast-torch: {m}")
        benchmark.group = op if device == "cpu" else f"{op}@{device}"
        benchmark.extra_info.update(op=op, impl=impl, device=device)
        benchmark(fn if device == "cpu" else lambda: (fn(), torch.cuda.synchronize()))

    return run
