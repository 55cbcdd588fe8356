"""Gates. `nox -s cpu_gate` is the test command (README, .ci/run); see each session's docstring."""

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["cpu_gate"]
nox.options.reuse_existing_virtualenvs = True

# Sessions with their own environment (a third party that pins numpy < 2, an old gymnasium, ...) that the
# README's test command runs too: cpu_gate notifies each of them.
CPU_GATE_ALSO: list[str] = ["safety"]

# cpu_gate's pytest-xdist workers: one per core; a marked group (tests/engines/bonus/test_bonus_ray_metaworld.py: one local
# Ray) stays in one worker. `nox -s cpu_gate -- -n 0` runs the tests in one process.
WORKERS = ("-n", "auto", "--dist", "loadgroup")

# The exact versions of this project's set-up (torch 2.13.0 CPU among them: an unpinned torch pulls GBs of CUDA
# wheels); pyproject.toml declares ranges, so a user's environment keeps its own torch (nox -s user_torch).
CONSTRAINTS = ("-c", "constraints.txt")
PINNED_TORCH = next(line.split("==")[1] for line in Path("constraints.txt").read_text().splitlines()
                    if line.startswith("torch=="))
# the torch a user's project may already have (a CUDA build these machines hold locally): nox -s user_torch
USER_TORCH = "torch==2.14.1"
SHEEPRL = "sheeprl==0.8.4"
SB3 = "stable-baselines3==2.9.2"
RLAX = ("rlax==0.1.9", "jax[cpu]==0.10.2")
OMNISAFE = "omnisafe==0.5.0"  # fixtures: its lagrange files read out of the wheel; bench_omnisafe: installed --no-deps
# what OmniSafe 0.5.0 imports at `import omnisafe` beyond the safety extra (its own pins: pandas 2.0.3, numpy < 2)
OMNISAFE_DEPS = ("moviepy<2", "wandb>=0.13", "seaborn>=0.12.2", "gdown>=4.6", "typer>=0.7", "rich", "pandas==2.0.3",
                 "numpy<2")
TORCHRL = ("torchrl==0.14.1", "tensordict==0.14.3")  # torchrl 0.14.1 requires tensordict >=0.14.3,<0.15
SAFETY_GYMNASIUM = "safety-gymnasium==1.0.0"  # installed --no-deps after the `safety` extra
PINNED_TRITON = next(line.split("==")[1] for line in Path("constraints.txt").read_text().splitlines()
                     if line.startswith("triton=="))
TRITON_GPU_MACHINES = "3.6.0"  # the GPU machines' Triton (nox -s compile_gate compiles under both)
CLEANRL = "cleanrl==1.2.0"  # Python < 3.11 only: its ppo.py is read out of the wheel, never installed


def _install_project(session: nox.Session, extras: str = "test") -> None:
    session.install(*CONSTRAINTS, "-e", f".[{extras}]")


@nox.session
def cpu_gate(session: nox.Session) -> None:
    """Every check that runs without a GPU: conformance (reference, fast torch, Triton under
    TRITON_INTERPRET=1, Warp on device='cpu'), golden fixtures + manifest hashes, meta (planted bugs),
    unit tests, semantic tests on tiny real Hugging Face models (the `semantic` extra, part of `test`), the
    bonus engine on Ray and Meta-World (the `bonus` extra).
    Hypothesis runs its bounded, derandomized `ci` profile; the tests run in one pytest-xdist worker per core
    (WORKERS); the 20 slowest are listed at the end."""
    _install_project(session, "test,dreamer,bonus")
    session.env.update(TRITON_INTERPRET="1", HYPOTHESIS_PROFILE="ci", CUDA_VISIBLE_DEVICES="", RAY_AUTH_MODE="disabled")
    session.run("pytest", "-m", "not gpu and not bench", "-p", "no:cacheprovider", "--durations=20", *WORKERS,
                *session.posargs)
    for other in CPU_GATE_ALSO:
        session.notify(other)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml, the `docs` extra) built into site/ in strict mode: a broken link, a
    missing page or a page outside the nav fails it. `nox -s docs -- serve` serves it while you edit."""
    _install_project(session, "docs,spec,gym,dreamer")  # the contract pages import every spec module
    session.env.update(NO_MKDOCS_2_WARNING="1")
    session.run("mkdocs", *(session.posargs or ["build"]), "--strict")


@nox.session
def user_torch(session: nox.Session) -> None:
    """rlspec installed into a project that already has another torch than the pin: the environment gets
    USER_TORCH first (or `-- torch==X`), then `pip install -e .[spec]` without the constraints file, as a user
    installs; the session fails if pip replaced that torch, then runs every contract (`rlspec check all`) and the
    pytest plugin's outside-project test there. Not part of cpu_gate (a multi-GB CUDA build)."""
    wanted = session.posargs[0] if session.posargs else USER_TORCH
    session.install(wanted)
    version = ("python", "-c", "import warnings; warnings.simplefilter('ignore'); import torch; print(torch.__version__)")
    before = session.run(*version, silent=True).strip().splitlines()[-1]
    session.install("-e", ".[spec,gym]", "pytest>=8")
    after = session.run(*version, silent=True).strip().splitlines()[-1]
    if after != before:
        session.error(f"pip replaced the environment's torch {before} with {after}")
    session.log(f"torch {after} kept")
    session.env.update(HYPOTHESIS_PROFILE="ci", CUDA_VISIBLE_DEVICES="")
    session.run("rlspec", "check", "all", "--out", str(Path(session.create_tmp()) / "report"))
    session.run("pytest", "tests/unit/test_pytest_plugin.py", "-p", "no:cacheprovider", "-o", "addopts=")


@nox.session
def safety(session: nox.Session) -> None:
    """Safety-Gymnasium checks (tests/safe: the import shim, replayable env checkpoints, a smoke run of every
    PPO-family algorithm, resume identity, PPOLagSem on rendered frames) in their own environment: the
    `safety` extra (gymnasium 0.28.1, gymnasium-robotics 1.2.2, mujoco 2.3.3, numpy < 2, transformers, ...)
    then safety-gymnasium 1.0.0 with --no-deps (it pins pygame 2.1.0, which has no Python 3.11 wheel).
    cpu_gate runs this session too."""
    session.install(*CONSTRAINTS, "-e", ".[safety,spec]", "pytest>=8", "pytest-benchmark>=4")
    session.install("--no-deps", SAFETY_GYMNASIUM)
    session.env.update(HYPOTHESIS_PROFILE="ci", CUDA_VISIBLE_DEVICES="", MUJOCO_GL="egl")  # headless frames (.ci/run)
    session.run("pytest", "tests/safe", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def gpu_gate(session: nox.Session) -> None:
    """CUDA-only checks: fast vs reference on the GPU, memcpy gate, pointer stability, stream/event
    ordering, throughput JSON. Skips cleanly when CUDA is absent."""
    _install_project(session, "test,dreamer")
    has_cuda = session.run("python", "-c", "import torch; print(torch.cuda.is_available())", silent=True)
    if has_cuda.strip() != "True":
        session.skip("CUDA is not available on this machine: gpu_gate has nothing to check")
    session.env.update(HYPOTHESIS_PROFILE="ci")
    session.run("pytest", "-m", "gpu", "tests/gpu", *session.posargs)


@nox.session
def compile_gate(session: nox.Session) -> None:
    """tools/compile_gate.py: every Triton kernel of fast/ compiled for sm_90 without a GPU, its registers,
    stack (spills) and shared memory, under the pinned Triton and under Triton 3.6 (the GPU machines': register
    pressure differs up to 2x between versions). Writes benchmarks/gpu/results/compile_gate/triton-VERSION.json.
    cpu_gate runs the pinned half (tests/unit/test_compile_gate.py)."""
    _install_project(session, "test")
    session.env.pop("TRITON_INTERPRET", None)
    out = Path("benchmarks/gpu/results/compile_gate")
    for triton in (PINNED_TRITON, TRITON_GPU_MACHINES):
        session.install(f"triton=={triton}")  # this session's environment only
        session.run("python", "tools/compile_gate.py", "--out", str(out / f"triton-{triton}.json"))


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
def rom(session: nox.Session) -> None:
    """Rebuild the room ROM with sdcc (Debian: apt-get install -y sdcc) and compare it byte for byte with the
    committed rlspec/envs/room/room.gb and its fixtures/MANIFEST.json entry. `nox -s rom -- --update`
    rewrites both after a deliberate change to room.c or the game's data. The SM83 test programs
    (rlspec/envs/gameboy/programs/) are rebuilt and compared the same way (rewritten with --update)."""
    session.install(*CONSTRAINTS, "-e", ".")
    session.run("python", "-m", "rlspec.golden_bridge.room_rom", *(session.posargs or ["--check"]))
    update = "--update" in session.posargs
    session.run("python", "-m", "rlspec.envs.gameboy.build", *([] if update else ["--check"]))


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: implementations (fast, reference, third party) compared in one run; JSON written to
    bench-results/, ratios printed."""
    _install_project(session)
    session.install(SHEEPRL)
    session.env.update(TRITON_INTERPRET="1")
    Path("bench-results").mkdir(exist_ok=True)  # pytest-benchmark opens --benchmark-json while parsing options
    session.run("pytest", "benchmarks/kernels", "-m", "bench", "-p", "no:cacheprovider", "--benchmark-enable",
                "--benchmark-json=bench-results/bench.json", *session.posargs)
    session.run("python", "-m", "benchmarks.kernels.ratios", "bench-results/bench.json")


@nox.session
def bench_sheeprl(session: nox.Session) -> None:
    """DreamerV3 train step of the reference and fast kits against sheeprl 0.8.4's own build_agent/train at an
    identical configuration (benchmarks/dreamer/train_step.py: fairness stated there and in the JSON); writes
    benchmarks/dreamer/results/dreamer_train_step.{json,png}. sheeprl lives in this session's venv only (torch
    stays 2.13.0; rlspec installed --no-deps beside it). `nox -s bench_sheeprl -- --configs 1m xs --steps 10`; on a GPU
    `-- --device cuda` (writes *_cuda.json/png, records host syncs). Not part of cpu_gate: the committed JSON
    and plot are what the README shows."""
    session.install(*CONSTRAINTS, SHEEPRL, "matplotlib>=3.8")  # sheeprl may not pull another torch
    session.install("--no-deps", "-e", ".")
    if "cuda" not in " ".join(session.posargs):
        session.env.update(CUDA_VISIBLE_DEVICES="")  # CPU unless `-- --device cuda` (the GPU comparison)
    session.run("nice", "python", "-m", "benchmarks.dreamer.train_step", *session.posargs, external=True)


@nox.session
def bench_omnisafe(session: nox.Session) -> None:
    """OmniSafe 0.5.0's own algorithms through omnisafe.Agent on SafetyPointGoal1-v0 with the override set
    rlspec's safe engine runs (benchmarks/safe/anchors/run_omnisafe.py: the set and the defaults table in
    runs/omnisafe/omnisafe_safe.json; the runs in OmniSafe's own log layout, which `rlspec report` reads). The
    safety environment (as `nox -s safety`) plus OmniSafe --no-deps and what it imports; rlspec's Safety-Gymnasium
    shim applied before it. Without arguments: a smoke run (PPOLag, seed 0, one epoch of 1,000 steps); the
    comparison: `nox -s bench_omnisafe -- --algos PPOLag --seeds 0 1 2 3 4 --total-steps 200000
    --steps-per-epoch 4000`. CPU, one thread, under nice."""
    session.install(*CONSTRAINTS, "-e", ".[safety]")
    session.install("--no-deps", SAFETY_GYMNASIUM, OMNISAFE)
    session.install(*OMNISAFE_DEPS)
    session.env.update(CUDA_VISIBLE_DEVICES="", MUJOCO_GL="egl")
    args = session.posargs or ["--algos", "PPOLag", "--seeds", "0", "--total-steps", "1000", "--steps-per-epoch",
                               "1000", "--out", "runs/omnisafe-smoke"]
    session.run("nice", "python", "-m", "benchmarks.safe.anchors.run_omnisafe", *args, external=True)


@nox.session
def bench_sb3_safe(session: nox.Session) -> None:
    """Stable-Baselines3 2.9.2 PPO, unconstrained, on SafetyPointGoal1-v0 with the settings rlspec's PPO runs
    (benchmarks/safe/anchors/run_sb3.py): the reward-only anchor of the safe-RL comparison. The safety environment (as
    `nox -s safety`) plus SB3 and cloudpickle --no-deps (SB3 declares gymnasium >= 0.29; it runs with the 0.28.1
    that Safety-Gymnasium needs). Without arguments: a smoke run (seed 0, one epoch of 1,000 steps, into
    runs/sb3-smoke); the comparison: `nox -s bench_sb3_safe -- --seeds 0 1 2 --total-steps 200000
    --steps-per-epoch 4000`. This venv also runs benchmarks/safe/throughput.py's SB3 arms. CPU, one thread,
    under nice."""
    session.install(*CONSTRAINTS, "-e", ".[safety]")
    session.install("--no-deps", SAFETY_GYMNASIUM, SB3, "cloudpickle>=3")
    session.env.update(CUDA_VISIBLE_DEVICES="", MUJOCO_GL="egl")
    args = session.posargs or ["--seeds", "0", "--total-steps", "1000", "--steps-per-epoch", "1000", "--out",
                               "runs/sb3-smoke"]
    session.run("nice", "python", "-m", "benchmarks.safe.anchors.run_sb3", *args, external=True)


@nox.session
def bench_sb3_metaworld(session: nox.Session) -> None:
    """Stable-Baselines3 2.9.2 PPO on a Meta-World v3 task (benchmarks/bonus/anchors/run_sb3.py): the anchor of the
    bonus engine's token learner, in its own environment (the `bonus` extra's metaworld plus SB3; nothing of SB3 in the
    runtime). Without arguments: a smoke run (reach-v3, seed 0, 4,096 env steps, into runs/sb3-mw-smoke); the
    comparison: `nox -s bench_sb3_metaworld -- --task reach-v3 --seeds 0 1 2 3 4 --total-steps 150000`. CPU,
    one thread, under nice."""
    session.install(*CONSTRAINTS, "-e", ".[bonus]", SB3)
    session.env.update(CUDA_VISIBLE_DEVICES="")
    args = session.posargs or ["--task", "reach-v3", "--seeds", "0", "--total-steps", "4096", "--out",
                               "runs/sb3-mw-smoke"]
    session.run("nice", "python", "-m", "benchmarks.bonus.anchors.run_sb3", *args, external=True)


@nox.session
def bench_sheeprl_room(session: nox.Session) -> None:
    """sheeprl 0.8.4's own DreamerV3, through its own CLI, on the room with the config written from rlspec's
    room-exit preset (benchmarks/dreamer/anchors/run_sheeprl.py: the key mapping and the differences sheeprl cannot
    express in runs/sheeprl-room/sheeprl_room.json, each seed's TensorBoard events read by rlspec's evaluation reader).
    sheeprl lives in this session's venv only (torch stays 2.13.0). Without arguments: a smoke run (seed 0, 512
    env steps, 256 random ones first); the comparison: `nox -s bench_sheeprl_room -- --seeds 0 1 2 --chunk 2048`
    (the preset's 20,480 env steps each, in resumed runs of 2,048; an interrupted seed goes on from its last
    checkpoint, a finished one is not run again). CPU, one thread, under nice."""
    session.install(*CONSTRAINTS, SHEEPRL, "-e", ".[dreamer,runs]")  # sheeprl may not pull another torch
    session.env.update(CUDA_VISIBLE_DEVICES="")
    args = session.posargs or ["--seeds", "0", "--total-steps", "512", "--set", "min_ready_steps=256",
                               "--set", "log_every=128", "--set", "checkpoint_every=256",
                               "--out", "runs/sheeprl-room-smoke"]
    session.run("nice", "python", "-m", "benchmarks.dreamer.anchors.run_sheeprl", *args, external=True)


@nox.session
def thirdparty(session: nox.Session) -> None:
    """The cross-implementation conformance table: installs the pinned third parties (torch stays 2.13.0),
    downloads the CleanRL and OmniSafe wheels whose files the adapters read, runs every adapter in
    thirdparty/ through the kit's runner and writes benchmarks/kit/results/thirdparty/conformance.{json,md}. Exits 1 on an
    undeclared failure or a stale declaration. Not part of cpu_gate: the committed table is what the README
    shows."""
    _install_project(session, extras="spec")
    tmp = Path(session.create_tmp())
    session.install(*CONSTRAINTS, SHEEPRL, SB3, *RLAX, *TORCHRL)  # no third party may pull another torch
    wheel_dir = tmp / "wheels"
    for spec in (CLEANRL, OMNISAFE):
        session.run("python", "-m", "pip", "download", spec, "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.10", "-d", str(wheel_dir))
    session.run("python", "-c", f"import torch; assert torch.__version__.split('+')[0] == '{PINNED_TORCH}', "
                                "torch.__version__")
    session.env["RLSPEC_WHEEL_DIR"] = str(wheel_dir)
    session.run("python", "-m", "rlspec.thirdparty", "--out", "benchmarks/kit/results/thirdparty", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing of reference/: one-change AST mutants of each reference/<contract>.py
    run against that contract's properties (`ci` profile, 2 workers, a timeout per mutant); writes
    benchmarks/kit/results/mutants/kill_rate.{json,md}. `nox -s mutants -- --contracts gae vtrace` reruns some contracts and
    keeps the others' results. Not part of cpu_gate: the committed table is what the README shows."""
    _install_project(session)
    session.env.update(HYPOTHESIS_PROFILE="ci", CUDA_VISIBLE_DEVICES="")
    session.run("python", "-m", "rlspec.spec.mutants", *session.posargs)


@nox.session
def faults(session: nox.Session) -> None:
    """The fault probes (tools/fault_probes.py): the kit and the engines tried as a new user would, through the
    real command line (an implementation that exits, crashes, hangs or mutates its input; runs into someone's
    folder; signals; keys that would do nothing; user mistakes that must not be tracebacks; outputs that
    mislead). Writes benchmarks/kit/results/faults/probes.{json,md}; `nox -s faults -- --only ID ...` reruns some probes and
    keeps the others' rows. About 1.5 hours on 2 cores; not part of cpu_gate."""
    _install_project(session, "test,dreamer,bonus")
    session.env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", RAY_AUTH_MODE="disabled")
    session.run("python", "tools/fault_probes.py", *session.posargs)
