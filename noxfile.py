"""Gates. `nox -s cpu_gate` is the test command (README, .ci/run); see each session's docstring."""

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["cpu_gate"]
nox.options.reuse_existing_virtualenvs = True

TORCH = "torch==2.13.0"  # pinned everywhere: an unpinned torch pulls GBs of CUDA wheels
SHEEPRL = "sheeprl==0.8.4"
SB3 = "stable-baselines3==2.9.2"
RLAX = ("rlax==0.1.9", "jax[cpu]==0.10.2")
OMNISAFE = "omnisafe==0.5.0"  # its lagrange files are read out of the wheel; never installed or imported


def _install_project(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("-e", ".")


@nox.session
def cpu_gate(session: nox.Session) -> None:
    """Every check that runs without a GPU: conformance (reference, fast torch, Triton under
    TRITON_INTERPRET=1, Warp on device='cpu'), golden fixtures + manifest hashes, meta (planted bugs),
    unit tests. Hypothesis runs its bounded, derandomized `ci` profile."""
    _install_project(session)
    session.env.update(TRITON_INTERPRET="1", HYPOTHESIS_PROFILE="ci", CUDA_VISIBLE_DEVICES="")
    session.run("pytest", "-m", "not gpu and not bench", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def gpu_gate(session: nox.Session) -> None:
    """CUDA-only checks: fast vs reference on the GPU, memcpy gate, pointer stability, stream/event
    ordering, throughput JSON. Skips cleanly when CUDA is absent."""
    _install_project(session)
    has_cuda = session.run("python", "-c", "import torch; print(torch.cuda.is_available())", silent=True)
    if has_cuda.strip() != "True":
        session.skip("CUDA is not available on this machine: gpu_gate has nothing to check")
    session.env.update(HYPOTHESIS_PROFILE="ci")
    session.run("pytest", "-m", "gpu", "tests/gpu", *session.posargs)


@nox.session
def fixtures(session: nox.Session) -> None:
    """Regenerate fixtures/ and fixtures/MANIFEST.json from the pinned third-party packages."""
    _install_project(session)
    session.install(SHEEPRL, SB3, *RLAX)
    wheel_dir = Path(session.create_tmp()) / "omnisafe-wheel"
    session.run("python", "-m", "pip", "download", OMNISAFE, "--no-deps", "--only-binary=:all:", "-d", str(wheel_dir))
    session.env["OMNISAFE_WHEEL_DIR"] = str(wheel_dir)
    session.run("python", "-m", "rlspec.golden_bridge", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: implementations (fast, reference, third party) compared in one run; JSON written to
    bench-results/, ratios printed."""
    _install_project(session)
    session.install(SHEEPRL)
    session.env.update(TRITON_INTERPRET="1")
    session.run("pytest", "tests/bench", "-m", "bench", "-p", "no:cacheprovider", "--benchmark-enable",
                "--benchmark-json=bench-results/bench.json", *session.posargs)
    session.run("python", "tests/bench/ratios.py", "bench-results/bench.json")
