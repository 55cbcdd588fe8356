"""Fault probes: the engines tried as a new user would, through the real command line, each probe a fresh
process in a scratch directory. A probe passes when the exit status is the documented one (README, "When
something goes wrong"), stderr holds no traceback, and what must not change did not change.

    nox -s faults [-- --only ID ...]        (or: python tools/fault_probes.py [--out benchmarks/kit/results/faults] [--only ID ...])

Writes OUT/probes.json and OUT/probes.md: per probe its class, command, exit status, verdict, the last
line it said and the time it ran (with --only, the other probes' rows already in OUT/probes.json are kept).
Verdicts: ok; silent (exit 0 where the run is wrong: non-finite figures logged, or a result that should
have been refused); lost (a file that must be kept changed or vanished); traceback; unclear (another exit
status, or more than one line where one is promised). Exits 1 if any probe is not ok. Needs the main
environment (`pip install -e ".[test,dreamer,bonus]"`); the Safety-Gymnasium probes run only where
it is installed and are listed as not run otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
PY = [sys.executable, "-m", "rlspec.cli"]
SAFE = ["safe", "--algo", "PPOLag", "--env", "ToyGoal-v0", "--preset", "smoke"]  # 4 epochs × 1000 steps
DREAMER = ["dreamer", *[a for kv in (  # 2 envs × 48 env steps; checkpoints at 16, 32, 48
    "num_envs=2", "total_steps=48", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64", "step_limit=10",
    "log_every=8", "checkpoint_every=16", "ep_window=5", "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4",
    "dreamer.hidden=16", "dreamer.embed_dim=16", "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1",
    "dreamer.horizon=4", "dreamer.batch_size=2", "dreamer.seq_len=8") for a in ("--set", kv)]]
BONUS = ["bonus", "--preset", "smoke", "--set", "total_steps=1024", "--set", "checkpoint_every=2"]  # 4 updates
ENGINES = {"safe": SAFE, "dreamer": DREAMER, "bonus": BONUS}
STOP = {"safe": ["--stop-after-epochs", "2"], "dreamer": ["--stop-after-steps", "16"],
        "bonus": ["--stop-after-updates", "2"]}


def sh(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", RAY_AUTH_MODE="disabled", PYTHONPATH=str(ROOT))
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def rl(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    return sh([*PY, *argv], cwd)


def files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name != ".lock"} if run.exists() else {}


def nonfinite_rows(run: Path) -> list[str]:
    """Loss/* cells of metrics.csv that are not finite numbers."""
    path = run / "metrics.csv"
    if not path.exists():
        return []
    rows = list(csv.DictReader(path.read_text().splitlines()))
    return [f"{k}@{r.get('step', '?')}" for r in rows for k, v in r.items()
            if k and k.startswith("Loss/") and v not in ("", None) and not math.isfinite(float(v))]


class Probe:
    """One probe's outcome: the last process's exit status and stderr, and what the checks found."""

    def __init__(self, pid: str, klass: str, expect: set[int]):
        self.pid, self.klass, self.expect, self.problems = pid, klass, expect, []
        self.command, self.rc, self.said = "", None, ""

    def ran(self, proc: subprocess.CompletedProcess, argv: list[str]) -> subprocess.CompletedProcess:
        self.command, self.rc = " ".join(["rlspec", *argv]), proc.returncode
        lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("Warp ")]
        out = proc.stdout.strip().splitlines()
        self.said = lines[-1] if lines else out[-1] if out else ""
        if "Traceback" in proc.stderr:
            self.problems.append(("traceback", proc.stderr.strip().splitlines()[-1]))
        return proc

    def need(self, ok: bool, verdict: str, why: str) -> None:
        if not ok:
            self.problems.append((verdict, why))

    def verdict(self) -> dict:
        if self.rc is not None and self.rc not in self.expect:
            kind = "silent" if self.rc == 0 else "unclear"
            self.problems.insert(0, (kind, f"exit {self.rc}, expected {sorted(self.expect)}"))
        order = ("traceback", "lost", "silent", "unclear")
        worst = min((p[0] for p in self.problems), key=order.index, default="ok")
        return dict(id=self.pid, klass=self.klass, command=self.command, exit=self.rc, expected=sorted(self.expect),
                    verdict=worst, problems=[f"{k}: {w}" for k, w in self.problems], said=self.said)


# -------------------------------------------------------------------------------------------- probes
def run_probe(p: Probe, tmp: Path, *argv: str) -> subprocess.CompletedProcess:
    return p.ran(rl(tmp, *argv), list(argv))


def finished(tmp: Path, engine: str, name: str = "run", *extra: str) -> Path:
    out = tmp / name
    proc = rl(tmp, "train", *ENGINES[engine], "--quiet", "--out", str(out), *extra)
    if proc.returncode != 0:
        raise RuntimeError(f"setup run of {engine} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return out


def divergence(engine: str, *sets: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        p = Probe(f"diverge-{engine}", "divergence", {3})
        proc = run_probe(p, tmp, "train", *ENGINES[engine], "--quiet", "--out", str(tmp / "run"),
                         *[a for kv in sets for a in ("--set", kv)])
        p.need(not nonfinite_rows(tmp / "run"), "silent", f"non-finite rows logged: {nonfinite_rows(tmp / 'run')[:3]}")
        kept = (tmp / "run/checkpoints/last.pt").exists()
        p.need(kept or "no checkpoint was written yet" in proc.stderr, "lost", "the clean checkpoint it names is gone")
        return p
    return probe


def compare_divergence(tmp: Path) -> Probe:
    p = Probe("compare-diverge-safe", "divergence", {3})
    run_probe(p, tmp, "compare", *SAFE, "--quiet", "--out", str(tmp / "cmp"), "--set", "ppo.actor_lr=1e9",
              "--set", "ppo.critic_lr=1e9")
    p.need(not (tmp / "cmp/compare.json").exists(), "silent", "a comparison was written for a diverged run")
    return p


def stop_between_vector_steps(tmp: Path) -> Probe:
    p = Probe("stop-after-7-steps", "checkpoints", {0})
    run_probe(p, tmp, "train", *DREAMER, "--quiet", "--out", str(tmp / "run"), "--stop-after-steps", "7")
    p.need((tmp / "run/checkpoints/last.pt").exists(), "lost", "no checkpoint written")
    return p


def unchanged_after(p: Probe, tmp: Path, run: Path, *argv: str) -> Probe:
    """Run ``argv`` as probe ``p``; every file of ``run`` must be as it was before."""
    before = files(run)
    run_probe(p, tmp, *argv)
    p.need(files(run) == before, "lost", f"files of {run.name} changed")
    return p


def resume_finished(engine: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        run = finished(tmp, engine)
        return unchanged_after(Probe(f"resume-finished-{engine}", "checkpoints", {0}), tmp, run,
                               "train", engine, "--quiet", "--resume", str(run))
    return probe


def extend_finished(engine: str, more: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        run = finished(tmp, engine)
        rows = len((run / "metrics.csv").read_text().splitlines())
        p = Probe(f"extend-finished-{engine}", "checkpoints", {0})
        run_probe(p, tmp, "train", engine, "--quiet", "--resume", str(run), "--set", f"total_steps={more}")
        p.need(len((run / "metrics.csv").read_text().splitlines()) > rows, "silent", "no rows added")
        return p
    return probe


def cut_row(tmp: Path) -> Probe:
    run = tmp / "run"
    rl(tmp, "train", *SAFE, "--quiet", "--out", str(run), *STOP["safe"])
    with open(run / "metrics.csv", "ab") as f:
        f.write(b"3000,0.5,")  # a row cut mid-write
    p = Probe("cut-row-safe", "checkpoints", {0})
    proc = run_probe(p, tmp, "train", "safe", "--resume", str(run))
    data = (run / "metrics.csv").read_bytes()
    p.need(b"\r" not in data and data.endswith(b"\n"), "silent", "mixed line endings or an unterminated row")
    p.need("dropped" in proc.stderr or "cut" in proc.stderr, "unclear", "the dropped row was not mentioned")
    return p


def two_writers(engine: str, resume: bool) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        run = tmp / "run"
        if resume:
            rl(tmp, "train", *ENGINES[engine], "--quiet", "--out", str(run), *STOP[engine])
            argv = ["train", engine, "--quiet", "--resume", str(run)]
        else:
            argv = ["train", *ENGINES[engine], "--quiet", "--out", str(run)]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", RAY_AUTH_MODE="disabled", PYTHONPATH=str(ROOT))
        procs = [subprocess.Popen([*PY, *argv], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for _ in range(2)]
        outs = [(proc, *proc.communicate(timeout=600)) for proc in procs]
        p = Probe(f"{'resume' if resume else 'fresh'}-twice-at-once-{engine}", "lock", {2})
        codes = sorted(proc.returncode for proc, _, _ in outs)
        loser = max(outs, key=lambda o: o[0].returncode)
        p.ran(subprocess.CompletedProcess(argv, loser[0].returncode, loser[1], loser[2]), argv)
        p.need(codes == [0, 2], "lost" if codes == [0, 0] else "unclear", f"exit statuses {codes}, expected [0, 2]")
        steps = [r.split(",")[0] for r in (run / "metrics.csv").read_text().splitlines()[1:]]
        p.need(len(steps) == len(set(steps)), "lost", "duplicated metrics rows")
        return p
    return probe


def bad_setting(engine: str, setting: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        p = Probe(f"bad-{setting}", "validation", {2})
        proc = run_probe(p, tmp, "train", *ENGINES[engine], "--quiet", "--out", str(tmp / "run"), "--set", setting)
        p.need(not (tmp / "run").exists(), "lost", "a run directory was created for a refused config")
        p.need(setting.split("=")[0] in proc.stderr, "unclear", "the key is not named")
        return p
    return probe


def damaged(engine: str, what: str, verb: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        run = finished(tmp, engine, "run", *STOP[engine])
        target = run / ("checkpoints/last.pt" if what == "checkpoint" else "config.json")
        target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
        argv = ["train", engine, "--quiet", "--resume", str(run)] if verb == "resume" else \
            ["eval", str(run), "--episodes", "1"]
        return unchanged_after(Probe(f"{verb}-damaged-{what}-{engine}", "corrupt input", {2}), tmp, run, *argv)
    return probe


def foreign_checkpoint(engine: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        a = finished(tmp, engine, "a", *STOP[engine])
        b = finished(tmp, engine, "b", *STOP[engine])
        (b / "checkpoints/last.pt").write_bytes((a / "checkpoints/last.pt").read_bytes())
        return unchanged_after(Probe(f"foreign-checkpoint-{engine}", "corrupt input", {2}), tmp, b,
                               "train", engine, "--quiet", "--resume", str(b))
    return probe


def other_engine(tmp: Path) -> Probe:
    run = finished(tmp, "safe", "run", *STOP["safe"])
    return unchanged_after(Probe("resume-with-another-engine", "corrupt input", {2}), tmp, run,
                           "train", "bonus", "--quiet", "--resume", str(run))


def plain(pid: str, klass: str, expect: set[int], *argv: str, setup: Callable[[Path], None] | None = None,
          fresh: str | None = None) -> Callable[[Path], Probe]:
    """A command whose exit status and single line are the whole check; ``fresh``: a path that must not be
    created."""
    def probe(tmp: Path) -> Probe:
        if setup:
            setup(tmp)
        p = Probe(pid, klass, expect)
        run_probe(p, tmp, *[a.replace("{tmp}", str(tmp)) for a in argv])
        p.need(fresh is None or not (tmp / fresh).exists(), "lost", f"{fresh} was created")
        return p
    return probe


def garbage(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).write_bytes(data)


def bad_plugin(tmp: Path) -> None:
    (tmp / "raises.py").write_text("def reset(memory, seed):\n    pass\n\ndef reward(memory):\n"
                                   "    raise RuntimeError('the plug-in failed')\n\ndef done(memory):\n    return False\n")


def plugin_raises(tmp: Path) -> Probe:
    bad_plugin(tmp)
    rom = ROOT / "rlspec/envs/room/room.gb"
    argv = ["train", *DREAMER, "--quiet", "--out", str(tmp / "run"), "--env", "pyboy", "--rom", str(rom),
            "--plugin", str(tmp / "raises.py")]
    first = rl(tmp, *argv)
    p = Probe("plugin-reward-raises", "dead run directory", {2, 3})
    p.ran(first, argv)
    again = rl(tmp, *argv)  # the same command again must not say "use --resume" about a dead directory
    p.need(again.returncode == first.returncode, "unclear",
           f"the rerun ended differently (exit {again.returncode}): {again.stderr.strip()[-200:]}")
    return p


def ctrl_c(tmp: Path) -> Probe:
    run = tmp / "run"
    argv = ["train", *SAFE, "--out", str(run), "--set", "total_steps=200000"]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([*PY, *argv], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    deadline = time.monotonic() + 300
    while not (run / "checkpoints/last.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    p = Probe("ctrl-c-safe", "interrupt", {130})
    p.ran(subprocess.CompletedProcess(argv, proc.returncode, out, err), argv)
    p.need("--resume" in err, "unclear", "does not say how to go on")
    p.need((run / "checkpoints/last.pt").exists(), "lost", "checkpoint gone")
    return p


def first_row_progress(tmp: Path) -> Probe:
    p = Probe("progress-from-first-row-safe", "silence", {0})
    proc = run_probe(p, tmp, "train", *SAFE, "--out", str(tmp / "run"), "--stop-after-epochs", "1")
    p.need("1,000" in proc.stderr or "1000" in proc.stderr, "unclear", "no progress line at the first row (step 1000)")
    return p


def warp_banner(tmp: Path) -> Probe:
    proc = sh([sys.executable, "-c", "import rlspec.envs.room.warp_room as w; import warp; warp.init()"], tmp)
    p = Probe("warp-banner-not-on-stdout", "noise", {0})
    p.ran(proc, ["(import the Warp room; warp.init())"])
    p.need(proc.stdout.strip() == "", "unclear", f"stdout: {proc.stdout.strip()[:120]}")
    return p


def help_time(tmp: Path) -> Probe:
    t0 = time.monotonic()
    proc = rl(tmp, "--help")
    p = Probe("help-speed", "noise", {0})
    p.ran(proc, ["--help"])
    p.said = f"{time.monotonic() - t0:.2f} s (recorded, not asserted)"
    return p


def pipe_closed(tmp: Path) -> Probe:
    read, write = os.pipe()
    os.close(read)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*PY, "list"], stdout=write, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env)
    os.close(write)
    p = Probe("list-into-a-closed-pipe", "noise", {141})
    p.ran(subprocess.CompletedProcess(["list"], proc.returncode, "", proc.stderr), ["list", "|", "head", "-1"])
    p.need(proc.stderr == "", "unclear", proc.stderr[-200:])
    return p


def ray_eval(tmp: Path) -> Probe:
    run = finished(tmp, "bonus", "run", "--set", "execution=ray", "--set", "total_steps=512")
    p = Probe("eval-ray-bonus-run", "crash on a README path", {0})
    run_probe(p, tmp, "eval", str(run), "--episodes", "2")
    return p


def safety_gym_needed(pid: str, *argv: str) -> Callable[[Path], Probe]:
    """Probes whose path needs Safety-Gymnasium: in the main environment the documented answer is exit 2 with
    the install step named."""
    return plain(pid, "crash on a README path", {2}, *argv, fresh="run")


PROBES: dict[str, Callable[[Path], Probe]] = {
    "diverge-safe": divergence("safe", "ppo.actor_lr=1e9", "ppo.critic_lr=1e9"),
    "diverge-dreamer": divergence("dreamer", "dreamer.wm_lr=1e9", "dreamer.actor_lr=1e9", "dreamer.critic_lr=1e9"),
    # lr 1e30: the critic's outputs overflow, so the guard replaces every value loss of an update (at 1e9 the
    # run stays finite since its advantages are zero-centred exactly: absurd, not divergent)
    "diverge-bonus": divergence("bonus", "learner.lr=1e30"),
    "compare-diverge-safe": compare_divergence,
    "stop-after-7-steps": stop_between_vector_steps,
    **{f"resume-finished-{e}": resume_finished(e) for e in ENGINES},
    "extend-finished-dreamer": extend_finished("dreamer", "64"),
    "extend-finished-safe": extend_finished("safe", "6000"),
    "cut-row-safe": cut_row,
    **{f"resume-twice-at-once-{e}": two_writers(e, True) for e in ENGINES},
    "fresh-twice-at-once-safe": two_writers("safe", False),
    **{f"bad-{s}": bad_setting(e, s) for e, s in [
        ("safe", "ppo.gamma=2"), ("safe", "ppo.batch_size=0"), ("safe", "ppo.update_iters=0"),
        ("safe", "ppo.actor_lr=nan"), ("bonus", "learner.epochs=0"), ("bonus", "learner.minibatches=100000"),
        ("bonus", "learner.lr=nan"), ("dreamer", "dreamer.wm_lr=nan")]},
    **{f"{v}-damaged-{w}-{e}": damaged(e, w, v) for e in ENGINES for w in ("checkpoint", "config") for v in
       ("resume", "eval")},
    **{f"foreign-checkpoint-{e}": foreign_checkpoint(e) for e in ENGINES},
    "resume-with-another-engine": other_engine,
    "eval-episodes-0": plain("eval-episodes-0", "validation", {2}, "eval", "{tmp}/run", "--episodes", "0",
                             setup=lambda tmp: finished(tmp, "safe", "run", *STOP["safe"])),
    "unknown-env": plain("unknown-env", "validation", {2}, "train", "safe", "--algo", "PPOLag", "--env", "Nope-v0",
                         "--quiet", "--out", "{tmp}/run", fresh="run"),
    "garbage-rom": plain("garbage-rom", "corrupt input", {2}, "train", *DREAMER, "--quiet", "--out", "{tmp}/run",
                         "--env", "pyboy", "--rom", "{tmp}/bad.gb", "--plugin", "rlspec.envs.exit_oak",
                         setup=garbage("bad.gb", b"\x00" * 1000), fresh="run"),
    "garbage-save-state": plain("garbage-save-state", "corrupt input", {2}, "train", *DREAMER, "--quiet", "--out",
                                "{tmp}/run", "--env", "pyboy", "--rom", str(ROOT / "rlspec/envs/room/room.gb"),
                                "--state", "{tmp}/bad.state", "--plugin", "{tmp}/raises.py",
                                setup=lambda tmp: (garbage("bad.state", b"junk" * 100)(tmp), bad_plugin(tmp)),
                                fresh="run"),
    "plugin-reward-raises": plugin_raises,
    "ctrl-c-safe": ctrl_c,
    "progress-from-first-row-safe": first_row_progress,
    "eval-ray-bonus-run": ray_eval,
    "warp-banner-not-on-stdout": warp_banner,
    "help-speed": help_time,
    "list-into-a-closed-pipe": pipe_closed,
}
# ------------------------------------------------------------- the implementation under test (rlspec check)
REF_GAE = "from rlspec.reference.gae import gae as _gae\n"
IMPLS = {  # name -> an --impl module of contract gae that misbehaves in one way
    "exit-at-import": "import sys\nsys.exit(0)\n",
    "exit-in-call": REF_GAE + "def gae(*a, **k):\n    import sys\n    sys.exit(0)\n",
    "os-exit": REF_GAE + "def gae(*a, **k):\n    import os\n    os._exit(3)\n",
    "segfault": REF_GAE + "def gae(*a, **k):\n    import ctypes\n    ctypes.string_at(0)\n",
    "hang": REF_GAE + "def gae(*a, **k):\n    while True:\n        pass\n",
    "mutates": REF_GAE + "def gae(reward, *a, **k):\n    out = _gae(reward, *a, **k)\n    reward.add_(1)\n"
                         "    return out\n",
    "numpy": REF_GAE + "def gae(*a, **k):\n    return tuple(x.numpy() for x in _gae(*a, **k))\n",
}


def check_impl(name: str, expect: set[int], says: str, *extra: str) -> Callable[[Path], Probe]:
    """`rlspec check gae --impl IMPL` of a misbehaving implementation: the documented status, a line naming the
    outcome, and a report written (never an exit 0 with nothing printed)."""
    def probe(tmp: Path) -> Probe:
        (tmp / "impl.py").write_text(IMPLS[name])
        p = Probe(f"check-impl-{name}", "kit isolation", expect)
        proc = run_probe(p, tmp, "check", "gae", "--impl", str(tmp / "impl.py"), "--out", str(tmp / "r"), *extra)
        p.need(says in proc.stdout + proc.stderr, "unclear", f"{says!r} not said")
        p.need((tmp / "r/report.json").exists(), "lost", "no report written")
        return p
    return probe


def replay_token(pid: str, token: str) -> Callable[[Path], Probe]:
    return plain(pid, "kit isolation", {2}, "check", "gae", "--reproduce", token, "--out", "{tmp}/r")


def foreign_token() -> str:
    import zlib

    body = "vtrace:VTRACE-1:0:AAAA"
    return f"{body}:{zlib.crc32(body.encode()):08x}"


def session_processes(sid: int, grace_s: float = 5.0) -> list[str]:
    """The live processes of session ``sid`` once ``grace_s`` has passed without them all ending (a zombie,
    such as multiprocessing's resource tracker between its parent's exit and init's reaping, is not live)."""
    end = time.monotonic() + grace_s
    while True:
        ps = subprocess.run(["ps", "-s", str(sid), "-o", "stat=,args="], capture_output=True, text=True).stdout
        rows = [line.split(None, 1) for line in ps.splitlines() if line.strip()]
        live = [row[-1] for row in rows if not row[0].startswith("Z")]
        if not live or time.monotonic() > end:
            return live
        time.sleep(0.5)


def check_signal(tmp: Path) -> Probe:
    """SIGTERM to `rlspec check all --jobs 2` once a table is finished: exit 143, the finished tables kept, and
    no worker process left behind."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    argv = ["check", "all", "--jobs", "2", "--out", str(tmp / "r")]
    proc = subprocess.Popen([*PY, *argv], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    time.sleep(60)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    p = Probe("check-sigterm-jobs-2", "signals", {143})
    p.ran(subprocess.CompletedProcess(argv, proc.returncode, out, err), argv)
    left = session_processes(proc.pid)
    p.need(not left, "lost", f"{len(left)} worker processes still running: {'; '.join(left)[:200]}")
    p.need("interrupted (SIGTERM)" in err, "unclear", "no line on the interruption")
    return p


# ---------------------------------------------------------------------------- runs that lose nothing
def resume_without_checkpoint(tmp: Path) -> Probe:
    run = finished(tmp, "safe", "run", *STOP["safe"])
    (run / "checkpoints/last.pt").unlink()
    return unchanged_after(Probe("resume-no-checkpoint-with-rows", "data loss", {2}), tmp, run,
                           "train", "safe", "--quiet", "--resume", str(run))


def out_into(pid: str, plant: dict[str, str]) -> Callable[[Path], Probe]:
    """--out into a folder that holds someone's files: refused, every file as it was."""
    def probe(tmp: Path) -> Probe:
        folder = tmp / "theirs"
        for name, text in plant.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        return unchanged_after(Probe(pid, "data loss", {2}), tmp, folder, "train", *SAFE, "--quiet", "--out",
                               str(folder))
    return probe


def hand_edited_config(tmp: Path) -> Probe:
    run = finished(tmp, "dreamer", "run", *STOP["dreamer"])
    cfg = json.loads((run / "config.json").read_text())
    cfg["config"]["dreamer"]["wm_lr"] = 0.5
    (run / "config.json").write_text(json.dumps(cfg))
    return unchanged_after(Probe("resume-hand-edited-config", "data loss", {2}), tmp, run,
                           "train", "dreamer", "--quiet", "--resume", str(run))


# ------------------------------------------------------------------------------ signals and outputs
RAY_BONUS = ["bonus", "--preset", "smoke", *[a for kv in ("execution=ray", "rollout_workers=2", "num_envs=2",
                                                          "checkpoint_every=1") for a in ("--set", kv)]]


def signalled(signum: int, name: str = "safe", engine: list[str] = SAFE) -> Callable[[Path], Probe]:
    """``signum`` to a training process once it has a checkpoint: the Ctrl-C ending, its status 128 + signum."""
    def probe(tmp: Path) -> Probe:
        run = tmp / "run"
        argv = ["train", *engine, "--out", str(run), "--set", "total_steps=200000"]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
        proc = subprocess.Popen([*PY, *argv], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        deadline = time.monotonic() + 300
        while not (run / "checkpoints/last.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
        p = Probe(f"{signal.Signals(signum).name.lower()}-{name}", "signals", {128 + signum})
        p.ran(subprocess.CompletedProcess(argv, proc.returncode, out, err), argv)
        p.need("--resume" in err, "unclear", "does not say how to go on")
        p.need((run / "checkpoints/last.pt").exists(), "lost", "checkpoint gone")
        p.need(not list(run.rglob("*.tmp*")), "lost", "temporary files left")
        return p
    return probe


def summary_step(tmp: Path) -> Probe:
    """A stop between metric rows: summary.json's step is the checkpoint's, not the last row's."""
    p = Probe("summary-step-after-stop", "outputs", {0})
    run_probe(p, tmp, "train", *DREAMER, "--quiet", "--out", str(tmp / "run"), "--stop-after-steps", "12")
    summary = json.loads((tmp / "run/summary.json").read_text())
    p.need(summary.get("step") == summary.get("checkpoint_step") == 12, "silent", f"summary: step "
           f"{summary.get('step')}, checkpoint_step {summary.get('checkpoint_step')}, expected 12")
    return p


def eval_names_checkpoint(tmp: Path) -> Probe:
    run = finished(tmp, "safe", "run", *STOP["safe"])
    p = Probe("eval-records-checkpoint-step", "outputs", {0})
    run_probe(p, tmp, "eval", str(run), "--episodes", "1")
    result = json.loads((run / "eval/eval.json").read_text())
    p.need(result.get("checkpoint_step") == 2000, "silent", f"checkpoint_step {result.get('checkpoint_step')}")
    return p


def strict_json(tmp: Path) -> Probe:
    """A report of runs whose cost is never logged: every JSON written parses with a strict parser."""
    p = Probe("report-json-strict", "outputs", {0})
    run = finished(tmp, "dreamer", "run")
    run_probe(p, tmp, "report", str(run), "--out", str(tmp / "rep"))
    for path in [tmp / "rep/report.json", run / "summary.json"]:
        try:
            json.loads(path.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as err:
            p.need(False, "silent", f"{path.name} is not strict JSON ({err})")
    return p


def report_cell(tmp: Path) -> Probe:
    run = finished(tmp, "safe", "run", *STOP["safe"])
    lines = (run / "metrics.csv").read_text().splitlines()
    head = lines[0].split(",")
    cells = lines[1].split(",")
    cells[head.index("Metrics/EpRet")] = "n/a"
    (run / "metrics.csv").write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    return unchanged_after(Probe("report-cell-not-a-number", "tracebacks", {2}), tmp, run, "report", str(run),
                           "--out", str(tmp / "rep"))


def bad_plugin_result(pid: str, body: str) -> Callable[[Path], Probe]:
    def probe(tmp: Path) -> Probe:
        (tmp / "plugin.py").write_text(body)
        p = Probe(pid, "tracebacks", {3})
        proc = run_probe(p, tmp, "train", *DREAMER, "--quiet", "--out", str(tmp / "run"), "--env", "pyboy", "--rom",
                         str(ROOT / "rlspec/envs/room/room.gb"), "--plugin", str(tmp / "plugin.py"))
        p.need(f"plug-in {tmp / 'plugin.py'}" in proc.stderr, "unclear", "the plug-in is not named")
        return p
    return probe


def compare_again(tmp: Path) -> Probe:
    (tmp / "cmp").mkdir()
    (tmp / "cmp/notes.txt").write_text("mine")
    return unchanged_after(Probe("compare-into-a-used-folder", "outputs", {2}), tmp, tmp / "cmp", "compare", *SAFE,
                           "--quiet", "--out", str(tmp / "cmp"))


def keys(pid: str, *argv: str) -> Callable[[Path], Probe]:
    """A key that would do nothing, or two options that disagree: exit 2 naming the key, nothing created."""
    key = [a.split("=")[0] for a in argv if "=" in a][-1]  # the probe's own key, after the engine's base settings

    def probe(tmp: Path) -> Probe:
        p = Probe(pid, "keys that do nothing", {2})
        proc = run_probe(p, tmp, "train", *argv, "--quiet", "--out", str(tmp / "run"))
        p.need(f"'{key}'" in proc.stderr, "unclear", f"the key {key!r} is not named")
        p.need(not (tmp / "run").exists(), "lost", "a run directory was created")
        return p
    return probe


PROBES.update({
    "check-impl-exit-at-import": check_impl("exit-at-import", {1}, "FAILED TO LOAD"),
    "check-impl-exit-in-call": check_impl("exit-in-call", {1}, "CRASH"),
    "check-impl-os-exit": check_impl("os-exit", {1}, "CRASH"),
    "check-impl-segfault": check_impl("segfault", {1}, "CRASH"),
    "check-impl-hang": check_impl("hang", {1}, "HANG", "--timeout", "10", "--clause", "GAE-1"),
    "check-impl-mutates": check_impl("mutates", {1}, "MUTATES-INPUT"),
    "check-impl-numpy": check_impl("numpy", {1}, "numpy"),
    "check-junk-token": replay_token("check-junk-token", "QUFBQQ=="),
    "check-foreign-token": replay_token("check-foreign-token", foreign_token()),
    "check-dead-rule": plain("check-dead-rule", "kit isolation", {2}, "check", "gae", "--unsupported",
                             "{tmp}/rules.txt", "--out", "{tmp}/r",
                             setup=garbage("rules.txt", b"GAE-3 if gamam > 0.5\n")),
    "check-binary-rules": plain("check-binary-rules", "tracebacks", {2}, "check", "gae", "--unsupported",
                                "{tmp}/rules.txt", "--out", "{tmp}/r", setup=garbage("rules.txt", b"\xff\xfe\x00")),
    "check-out-is-a-file": plain("check-out-is-a-file", "tracebacks", {2}, "check", "gae", "--out", "{tmp}/f",
                                 setup=garbage("f", b"mine")),
    "check-sigterm-jobs-2": check_signal,
    "resume-no-checkpoint-with-rows": resume_without_checkpoint,
    "out-into-someones-config": out_into("out-into-someones-config", {"config.json": '{"mine": 1}', "tb/x": "t"}),
    "out-into-a-full-folder": out_into("out-into-a-full-folder", {"notes.txt": "mine"}),
    "resume-hand-edited-config": hand_edited_config,
    "dreamer-local-kit": keys("dreamer-local-kit", *DREAMER, "--set", "kit=fast-triton"),
    "dreamer-local-device": keys("dreamer-local-device", *DREAMER, "--set", "device=tpu"),
    "bonus-local-trainers": keys("bonus-local-trainers", *BONUS, "--set", "trainers=2"),
    "safe-key-the-algo-never-reads": keys("safe-key-the-algo-never-reads", *SAFE, "--set",
                                          "trust_region.cg_iters=20"),
    "bonus-ablation-vs-top-k": keys("bonus-ablation-vs-top-k", *BONUS, "--ablation", "top1", "--set",
                                    "bonus.top_k=4"),
    "bonus-task-vs-set-task": keys("bonus-task-vs-set-task", *BONUS, "--task", "token-reach", "--set",
                                   "task=metaworld:push-v3"),
    "bad-safety.cost_limit=-5": bad_setting("safe", "safety.cost_limit=-5"),
    "bad-ppo.activation=sigmoid": bad_setting("safe", "ppo.activation=sigmoid"),
    "sigterm-safe": signalled(signal.SIGTERM),
    "sighup-safe": signalled(signal.SIGHUP),
    "sigterm-bonus-ray": signalled(signal.SIGTERM, "bonus-ray", RAY_BONUS),  # ray.init installs its own handler
    "eval-seed-negative": plain("eval-seed-negative", "tracebacks", {2}, "eval", "{tmp}/run", "--seed", "-5",
                                setup=lambda tmp: finished(tmp, "safe", "run", *STOP["safe"])),
    "report-cell-not-a-number": report_cell,
    "report-same-run-thrice": plain("report-same-run-thrice", "outputs", {2}, "report", "{tmp}/run", "{tmp}/run",
                                    "{tmp}/run", "--out", "{tmp}/rep", fresh="rep",
                                    setup=lambda tmp: finished(tmp, "safe", "run", *STOP["safe"])),
    "report-out-is-a-file": plain("report-out-is-a-file", "tracebacks", {2}, "report", "{tmp}/run", "--out",
                                  "{tmp}/f", setup=lambda tmp: (finished(tmp, "safe", "run", *STOP["safe"]),
                                                                garbage("f", b"mine")(tmp))),
    "plugin-reward-nan": bad_plugin_result("plugin-reward-nan", "reward = lambda m: float('nan')\n"
                                                                "done = lambda m: False\n"),
    "plugin-done-says-no": bad_plugin_result("plugin-done-says-no", "reward = lambda m: 0.0\ndone = lambda m: 'no'\n"),
    "summary-step-after-stop": summary_step,
    "eval-records-checkpoint-step": eval_names_checkpoint,
    "report-json-strict": strict_json,
    "compare-into-a-used-folder": compare_again,
})
SAFETY_GYM = {  # the README's lines that need the `safety` extra; in the main environment: exit 2, by name
    "safe-parallel-main-env": safety_gym_needed("safe-parallel-main-env", "train", "safe", "--set",
                                                "execution=parallel", "--algo", "CPPOPID", "--preset", "smoke",
                                                "--quiet", "--out", "{tmp}/run"),
    "ppolagsem-main-env": safety_gym_needed("ppolagsem-main-env", "train", "safe", "--algo", "PPOLagSem",
                                            "--preset", "smoke", "--quiet", "--out", "{tmp}/run"),
}


def to_markdown(rows: list[dict], meta: dict) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("ok", "silent", "lost", "traceback", "unclear")}
    lines = ["# Fault probes", "", f"`{meta['command']}` on {meta['date']} ({meta['python']}): {len(rows)} probes, "
             + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".", "",
             "| probe | class | exit (expected) | verdict | last line said | ran |", "|---|---|---|---|---|---|"]
    for r in rows:
        said = (r["said"] or "").replace("|", "\\|")[:160]
        lines.append(f"| {r['id']} | {r['klass']} | {r['exit']} ({', '.join(map(str, r['expected']))}) | "
                     f"{'; '.join(r['problems']) or r['verdict']} | {said} | {r.get('ran', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/kit/results/faults")
    ap.add_argument("--only", nargs="*", help="probe ids (default: all)")
    args = ap.parse_args(argv)
    probes = {**PROBES, **SAFETY_GYM}
    unknown = sorted(set(args.only or ()) - set(probes))
    if unknown:
        ap.error(f"unknown probe {unknown[0]!r}; known: {', '.join(probes)}")
    rows = []
    for pid, probe in probes.items():
        if args.only and pid not in args.only:
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="rlspec-probe-") as tmp:
            try:
                row = probe(Path(tmp)).verdict()
            except Exception as err:  # noqa: BLE001 - a probe whose setup failed is reported, not fatal
                row = dict(id=pid, klass="setup", command="", exit=None, expected=[], verdict="unclear",
                           problems=[f"setup: {type(err).__name__}: {str(err)[-300:]}"], said="")
        row.update(seconds=round(time.monotonic() - t0, 1), ran=time.strftime("%Y-%m-%d %H:%M"))
        rows.append(row)
        print(f"{row['verdict']:>9}  {pid}  ({row['seconds']} s) {'; '.join(row['problems'])}", flush=True)
    meta = dict(command="nox -s faults", date=time.strftime("%Y-%m-%d"), python=sys.version.split()[0])
    old = args.out / "probes.json"
    if args.only and old.exists():  # the other probes' rows of the last run stay
        kept = {r["id"]: r for r in json.loads(old.read_text())["probes"]}
        kept.update({r["id"]: r for r in rows})
        rows = [kept[pid] for pid in probes if pid in kept]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "probes.json").write_text(json.dumps(dict(meta, probes=rows), indent=1) + "\n")
    (args.out / "probes.md").write_text(to_markdown(rows, meta))
    print(f"wrote {args.out / 'probes.json'} and probes.md")
    return 0 if all(r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
