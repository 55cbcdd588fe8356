"""Fault probes: the engines tried as a new user would, through the real command line, each probe a fresh
process in a scratch directory. A probe passes when the exit status is the documented one (README, "When
something goes wrong"), stderr holds no traceback, and what must not change did not change.

    python tools/fault_probes.py [--out docs/faults] [--only ID ...]

Writes OUT/probes.json and OUT/probes.md: per probe its class, command, exit status, verdict, the last
line it said and the time it ran (with --only, the other probes' rows already in OUT/probes.json are kept). Verdicts: ok; silent (exit 0 where the run is wrong: non-finite figures logged, or a result
that should have been refused); lost (a file that must be kept changed or vanished); traceback; unclear
(another exit status, or more than one line where one is promised). Exits 1 if any probe is not ok. Needs
the main environment (`pip install -e ".[test,dreamer,bonus]"`); the Safety-Gymnasium probes run only where
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
    "diverge-bonus": divergence("bonus", "learner.lr=1e9"),
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
SAFETY_GYM = {  # the README's lines that need the `safety` extra; in the main environment: exit 2, by name
    "safe-fast-main-env": safety_gym_needed("safe-fast-main-env", "train", "safe-fast", "--algo", "CPPOPID",
                                            "--preset", "smoke", "--quiet", "--out", "{tmp}/run"),
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
    ap.add_argument("--out", type=Path, default=ROOT / "docs/faults")
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
    meta = dict(command="python tools/fault_probes.py", date=time.strftime("%Y-%m-%d"), python=sys.version.split()[0])
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
