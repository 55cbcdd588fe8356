"""Exit the room (validation, Dreamer plan M8): the greedy success rate of DreamerV3 on the room-exit task
(reach the door within the contract's 64-step limit) from the uniform random policy's rate to >= 0.9, with the
"reference" arm (execution local, LocalExecution: PyBoy) and the "fast" arm (execution device, DeviceExecution:
the Warp room, here on the CPU), from the same seed (ARMS: the arm names the committed results carry); env steps, updates and wall time to reach 0.9, and the fast / reference env-step ratio
(goal: within ±20%).

    nice -n 10 python -m benchmarks.dreamer.room_exit [--engines reference fast] [--steps N] [--chunk C]
        [--seeds S ...] [--episodes K] [--runs DIR] [--out benchmarks/dreamer/results]
    python -m benchmarks.dreamer.room_exit --report-only --runs DIR     # redraw from finished runs

Each engine trains in chunks of C env steps (``run(stop_after_steps=C)`` then ``--resume``: bit for bit the
same run as a straight one, rlspec/engines/dreamer/loop.py); after every chunk the greedy policy (argmax of the
actor, ``rlspec eval``) runs K episodes on fresh PyBoy rooms (eval seed = run seed + 1000003, the same for
every checkpoint and both engines). RUN/greedy.json holds one row per checkpoint: env steps, updates, training
wall and CPU time so far (eval excluded; one torch thread, so the CPU time is the wall time the run takes alone
on a core) and the greedy success rate. The random rate: uniform random actions on
20,000 episodes of the Warp room (identical to the ROM: contract room_env). The settings are OVERRIDES below
(a small model; the task's own step limit, reward and termination). Reported, never asserted in the suite.

Why pool 1 (every pixel of the 72 × 80 frame): the player is a 16 × 16 sprite in light grey (shade 1); at the
default pool 4 it is 2 × 2 pooled pixels worth ~0.4 of the summed reconstruction error, the posterior never
encoded it (KL at the free-bits floor, reconstructions of the empty room, measured at 30k env steps) and the
agent was blind: reward and continue heads predicted the base rate at the door. Learning rates 3e-4 (world
model, actor, critic; the defaults 1e-4 / 8e-5, the DreamerV3 paper's, moved the policy's entropy by < 0.5% in
4k env steps; sheeprl 0.8.4's own are 1e-4 / 3e-5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from rlspec.contracts.room_env import NUM_ACTIONS, STEP_LIMIT
from rlspec.engines import dreamer
from rlspec.evidence.cpu import identity as cpu_identity

ARMS = {"reference": "local", "fast": "device"}  # arm -> execution; the results JSON names the arms
ARM_OVERRIDES = {"reference": [], "fast": ["device=cpu"]}  # the device execution's own keys

GOAL = 0.9  # greedy success rate
RATIO_TOLERANCE = 0.2  # fast env steps within ±20% of the reference's
OVERRIDES = ["task=room-exit", f"step_limit={STEP_LIMIT}", "num_envs=4", "min_ready_steps=1024", "train_ratio=32",
             "replay_capacity=20000", "log_every=512", "torch_threads=1",
             "dreamer.deter=128", "dreamer.stoch=8", "dreamer.classes=8", "dreamer.hidden=128",
             "dreamer.embed_dim=128", "dreamer.pool=1", "dreamer.mlp_hidden=128", "dreamer.mlp_layers=2",
             "dreamer.horizon=15", "dreamer.batch_size=8", "dreamer.seq_len=32",
             "dreamer.wm_lr=3e-4", "dreamer.actor_lr=3e-4", "dreamer.critic_lr=3e-4"]


def random_rate(episodes: int = 20_000, num_envs: int = 256, seed: int = 12345, device: str = "cpu") -> float:
    """Success rate of uniform random actions on the Warp room (room-exit, the contract's step limit)."""
    from rlspec.envs.room.warp_room import RoomVecEnv

    env = RoomVecEnv(num_envs, "room-exit", step_limit=STEP_LIMIT, seed=seed, device=device)
    env.reset()
    gen = torch.Generator().manual_seed(seed)
    ended = successes = 0
    while ended < episodes:  # the same draws on any device: the actions are drawn on the CPU
        out = env.step(torch.randint(0, NUM_ACTIONS, (num_envs,), generator=gen).to(device), render=False)
        ended += int((out.terminated | out.truncated).sum())
        successes += int(out.success.sum())
    return successes / ended


def arm_config(engine: str, run_keys: list[str] = ()):
    """The validated config of ``engine``'s arm: OVERRIDES (with this invocation's --set), its execution and
    that execution's own keys, then ``run_keys``."""
    cfg = dreamer.build_config("default", [f"execution={ARMS[engine]}", *OVERRIDES, *ARM_OVERRIDES[engine],
                                           *run_keys])
    dreamer.validate(cfg)
    return cfg


def train_engine(engine: str, run: Path, steps: int, chunk: int, seed: int, episodes: int,
                 start_cells: bool = False) -> list[dict]:
    """Train ``engine`` in chunks with a greedy evaluation after each (``episodes`` episodes, or with
    ``start_cells`` one from every start cell: RUN/greedy_cells.json); returns (and writes) RUN/greedy.json."""
    cfg = arm_config(engine, [f"seed={seed}", f"total_steps={steps}", f"checkpoint_every={chunk}"])
    rows_path = run / ("greedy_cells.json" if start_cells else "greedy.json")
    rows = json.loads(rows_path.read_text()) if rows_path.is_file() else []
    wall = rows[-1]["wall_s"] if rows else 0.0
    cpu = rows[-1].get("cpu_s") if rows else 0.0  # None: a row written before CPU time was recorded
    done = rows[-1]["env_steps"] if rows else 0
    while done < steps:
        t0, c0 = time.perf_counter(), time.process_time()
        dreamer.execution(cfg).run(run, resume=done > 0, stop_after_steps=chunk, show_progress=False)
        wall += time.perf_counter() - t0
        cpu = None if cpu is None else cpu + time.process_time() - c0
        summary = json.loads((run / "summary.json").read_text())
        dreamer.evaluate(run, ["--start-cells"] if start_cells else ["--episodes", str(episodes)])
        ev = json.loads((run / "eval/eval.json").read_text())
        done = int(summary["step"])
        rows.append({"env_steps": done, "updates": int(summary["Train/updates"]), "wall_s": round(wall, 1),
                     "cpu_s": None if cpu is None else round(cpu, 1),
                     "greedy_success": ev["SuccessRate"], "greedy_ep_len": ev["EpLen"],
                     "train_success_window": summary.get("Metrics/SuccessRate")})
        rows_path.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"{engine}: {rows[-1]}", flush=True)
    return rows


LABELS = {"reference": "reference (PyBoy)", "fast": "fast (Warp room, CPU)"}


def _reached(report: dict, engine: str) -> str:
    r, best = report["reached"].get(engine), report["best"][engine]
    if r is None:
        return f"not reached; best {best['greedy_success']:.3g} at {best['env_steps']:,} env steps"
    return f"{r['env_steps']:,} env steps, {r['updates']:,} updates, {r['wall_s']:,.0f} s"


def _after(report: dict, engine: str) -> str:
    """The lowest greedy success of the evaluations after the goal was first reached, to the last one."""
    r, rows = report["reached"].get(engine), report["curves"][engine]
    later = [row for row in rows if r is not None and row["env_steps"] > r["env_steps"]]
    if not later:
        return "—"
    return f"≥ {min(row['greedy_success'] for row in later):.3g} at every evaluation to {later[-1]['env_steps']:,}"


def markdown(report: dict) -> str:
    """The JSON's table: per engine the env steps, updates and training seconds to greedy success GOAL, what the
    evaluations after it gave, the fast / reference ratio and the training speed."""
    engines = [e for e in LABELS if e in report["curves"]]
    ratio = report["fast_over_reference_env_steps"]
    rows = [("uniform random policy, success within the step limit", lambda e: f"{report['random_success_rate']:.3g}"),
            (f"greedy success ≥ {GOAL} first at ({report['eval_episodes']} episodes per evaluation)",
             lambda e: _reached(report, e)),
            ("after that", lambda e: _after(report, e)),
            ("fast / reference env steps to the goal", lambda e: "" if e != "fast" or ratio is None else
             f"{ratio:.2f} (goal: within ±{RATIO_TOLERANCE:.0%})"),
            ("speed while training (env steps/s, updates/s)",
             lambda e: f"{report['speed'][e]['env_steps_per_s']:g}, {report['speed'][e]['updates_per_s']:g}")]
    lines = ["| | " + " | ".join(LABELS[e] for e in engines) + " |", "|---|" + "---|" * len(engines)]
    lines += [f"| {name} | " + " | ".join(cell(e) for e in engines) + " |" for name, cell in rows]
    return "\n".join(lines) + "\n"


def first_at_goal(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r["greedy_success"] >= GOAL), None)


def run_dir(runs: Path, engine: str, seed: int) -> Path:
    return runs / engine / f"s{seed}"


def report(runs: Path, out_dir: Path, engines: list[str], seed: int, episodes: int, rate: float,
           note: str = "") -> dict:
    curves = {e: json.loads((run_dir(runs, e, seed) / "greedy.json").read_text()) for e in engines
              if (run_dir(runs, e, seed) / "greedy.json").is_file()}
    reached = {e: first_at_goal(rows) for e, rows in curves.items()}
    ref, fast = reached.get("reference"), reached.get("fast")
    ratio = fast["env_steps"] / ref["env_steps"] if ref and fast else None
    cfg = arm_config("reference")
    out = dict(
        what="DreamerV3 on the room's room-exit task: greedy success rate vs env steps, reference and fast engines",
        seed=seed,
        goal=f"greedy success >= {GOAL} from the random rate; fast env steps within ±{RATIO_TOLERANCE:.0%} of "
             "the reference's",
        random_success_rate=round(rate, 4), eval_episodes=episodes,
        reached={e: r for e, r in reached.items()},
        best={e: max(rows, key=lambda r: r["greedy_success"]) for e, rows in curves.items()},
        fast_over_reference_env_steps=ratio,
        speed={e: dict(env_steps=rows[-1]["env_steps"], updates=rows[-1]["updates"], train_wall_s=rows[-1]["wall_s"],
                       env_steps_per_s=round(rows[-1]["env_steps"] / rows[-1]["wall_s"], 2),
                       updates_per_s=round(rows[-1]["updates"] / rows[-1]["wall_s"], 3))
               for e, rows in curves.items()},
        meets_goal=bool(ref and fast and abs(ratio - 1) <= RATIO_TOLERANCE), note=note,
        config=dict(overrides=OVERRIDES, frameskip=cfg.frameskip, gamma=cfg.dreamer.gamma, lam=cfg.dreamer.lam,
                    entropy_coef=cfg.dreamer.entropy_coef, head_input=cfg.dreamer.head_input),
        machine=dict(cpu=cpu_identity(), cores=os.cpu_count(),
                     load_average=os.getloadavg(), python=platform.python_version(), torch=torch.__version__,
                     note="2 cores shared with other jobs; every run niced, one torch thread"),
        curves=curves,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "dreamer_room_exit.json").write_text(json.dumps(out, indent=2) + "\n")
    (out_dir / "dreamer_room_exit.md").write_text(markdown(out))
    plot(out, out_dir / "dreamer_room_exit.png")
    for e, r in reached.items():
        print(f"{e}: " + (f"{GOAL} at {r['env_steps']} env steps, {r['updates']} updates, {r['wall_s']} s"
                          if r else f"{GOAL} not reached; best {out['best'][e]}"))
    print(f"random rate {rate:.3f}; fast/reference env steps: {ratio}")
    return out


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for engine, rows in report["curves"].items():
        ax.plot([r["env_steps"] for r in rows], [r["greedy_success"] for r in rows], marker="o", ms=3,
                label=f"{engine} engine (greedy, {report['eval_episodes']} episodes)")
    ax.axhline(report["random_success_rate"], color="grey", ls=":", label="uniform random policy")
    ax.axhline(GOAL, color="green", ls="--", label=f"goal {GOAL}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("DreamerV3, room-exit (step limit 64)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", nargs="+", choices=list(ARMS), default=list(ARMS))
    p.add_argument("--steps", type=int, default=49_152, help="env steps per run (default 49152)")
    p.add_argument("--chunk", type=int, default=2_048, help="env steps between greedy evaluations (default 2048)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per engine and seed (the report: the "
                   "first seed; benchmarks/dreamer/vs_sheeprl.py compares all seeds with sheeprl's)")
    p.add_argument("--episodes", type=int, default=40, help="greedy episodes per evaluation (default 40)")
    p.add_argument("--start-cells", action="store_true", help="evaluate one episode from every start cell instead "
                   "(rlspec eval --start-cells; rows in RUN/greedy_cells.json, which --report-only does not read)")
    p.add_argument("--runs", type=Path, default=Path("runs/bench-room-exit"),
                   help="run directories: RUNS/<engine>/s<seed>")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--device", default="cpu", help="where the fast arm (the device execution) runs: cpu "
                   "(default) or cuda")
    p.add_argument("--report-only", action="store_true", help="no training: the report from --runs")
    p.add_argument("--note", default="", help="a sentence stored in the JSON (what the runs show)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override after OVERRIDES (e.g. dreamer.encoder=conv), stored in the JSON")
    args = p.parse_args()
    OVERRIDES.extend(args.set)  # the settings of this invocation: train_engine and report read OVERRIDES
    ARM_OVERRIDES["fast"] = [f"device={args.device}"]
    torch.set_num_threads(1)
    if not args.report_only:
        for seed in args.seeds:
            for engine in args.engines:
                train_engine(engine, run_dir(args.runs, engine, seed), args.steps, args.chunk, seed, args.episodes,
                             args.start_cells)
    report(args.runs, args.out, list(ARMS), args.seeds[0], args.episodes, random_rate(device=args.device), args.note)


if __name__ == "__main__":
    main()
