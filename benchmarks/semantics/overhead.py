"""PPOLagSem overhead benchmark (PPOLagSem design §8 P6: "< 10% FPS drop vs baseline" at capture_interval 20):
env steps/s of PPOLag and of PPOLagSem (additive shaping on, the tiny random CLIP in float32 on the CPU)
at capture_interval 1 and 20, same env, seed and budget, each arm a fresh `rlspec train safe` process, the
arms interleaved ``--repeats`` times (the median is reported). Writes JSON and a bar plot.

    MUJOCO_GL=egl python -m benchmarks.semantics.overhead --env SafetyPointGoal1-v0 --steps 4000

steps/s is read from each run's metrics.csv, which leaves out process start-up and model loading:
    rollout steps/s  = Σ steps / Σ Time/Rollout   (policy, env step, frame rendering, embedding, shaping)
    training steps/s = Σ steps / Σ (Time/Rollout + Time/Update)   (the engine's Time/FPS over the run)
PPOLagSem renders frames only on capture steps; PPOLag renders none, so the overhead includes the
rendering. The PPO update is the same in every arm (no risk head: shaping only). ``components`` in the
JSON splits the cost of one vectorized step in this process (one env, one torch thread): env step, env
step with its frame rendered, embedding one frame, the hooks on a capture step and on any other step; the
expected rollout slowdown at capture interval k is (render + capture hook) / k + other-step hook.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rlspec.evidence.cpu import identity as cpu_identity

ENGINE_ARGS = ["-m", "rlspec.cli", "train", "safe", "--quiet"]  # rlspec train safe
ROLLOUT, UPDATE = "Time/Rollout", "Time/Update"  # seconds of each epoch (metrics.csv columns)
STEPS_PER_EPOCH = 1000


def semantic_settings(model_dir: Path, capture_interval: int) -> list[str]:
    return ["semantic.enable=true", f"semantic.model_name={model_dir}", "semantic.model_device=cpu",
            "semantic.dtype_preference=float32", "semantic.shaping_enable=true",
            f"semantic.capture_interval={capture_interval}"]


def common_settings(args) -> list[str]:
    return [f"total_steps={args.steps}", f"steps_per_epoch={STEPS_PER_EPOCH}", f"seed={args.seed}", "num_envs=1",
            f"ppo.update_iters={args.update_iters}", f"frame_size={args.frame_size}"]


def run(name: str, algo: str, settings: list[str], args, out: Path) -> dict:
    run_dir = out / name
    cmd = [sys.executable, *ENGINE_ARGS, "--algo", algo, "--env", args.env, "--out", str(run_dir)]
    cmd += [x for s in common_settings(args) + settings for x in ("--set", s)]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - start
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    rollout = sum(float(r[ROLLOUT]) for r in rows)
    update = sum(float(r[UPDATE]) for r in rows)
    steps = len(rows) * STEPS_PER_EPOCH
    return dict(rollout_steps_per_s=steps / rollout, training_steps_per_s=steps / (rollout + update),
                wall_s=wall, epochs=len(rows))


def components(env: str, model_dir: Path, frame_size: int, n: int = 200) -> dict[str, float]:
    """Milliseconds per call of each piece of a PPOLagSem step (module docstring), medians of ``n`` calls."""
    import torch

    from rlspec.envs import safety_gym
    from rlspec.semantics import build_hooks
    from rlspec.semantics.config import SemanticConfig

    torch.set_num_threads(1)

    def ms(fn) -> float:
        fn()  # warm-up (the first render creates the GL context)
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
        return statistics.median(times)

    envs = safety_gym.make_vector(env, 1, 0, render_mode="rgb_array", width=frame_size, height=frame_size)
    envs.reset()
    action = torch.zeros(1, envs.act_dim)
    frames = envs.step(action, render=True).frames
    cfg = SemanticConfig(enable=True, model_name=str(model_dir), model_device="cpu", dtype_preference=("float32",),
                         shaping_enable=True, capture_interval=2)
    hooks = build_hooks(cfg, num_envs=1, gamma=0.99, total_steps=10**9, seed=0)
    zero, done = torch.zeros(1), torch.zeros(1, dtype=torch.bool)
    step = iter(range(0, 10**9, 2))  # capture_interval 2: even steps capture, odd steps do not
    out = dict(env_step=ms(lambda: envs.step(action)), env_step_with_render=ms(lambda: envs.step(action, render=True)),
               embed_one_frame=ms(lambda: hooks.adapter.manager.embed(frames)),
               hooks_capture_step=ms(lambda: hooks.shape_rewards(next(step), zero, zero, done, frames)),
               hooks_other_step=ms(lambda: hooks.shape_rewards(next(step) + 1, zero, zero, done, None)))
    envs.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="SafetyPointGoal1-v0")
    parser.add_argument("--steps", type=int, default=4000, help="env steps per run (1000 per epoch)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per arm, interleaved; the median is kept")
    parser.add_argument("--update-iters", type=int, default=10, help="ppo.update_iters of every arm")
    parser.add_argument("--frame-size", type=int, default=64, help="rendered frame width and height")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--runs", type=Path, default=None, help="run folders (default: a temporary folder)")
    args = parser.parse_args(argv)

    import tempfile

    from rlspec.semantics.tiny import save_tiny_clip

    scratch = args.runs or Path(tempfile.mkdtemp(prefix="semantic-overhead-"))
    model_dir = save_tiny_clip(scratch / "tiny-clip")
    arms = {"PPOLag": ("PPOLag", []),
            "PPOLagSem@1": ("PPOLagSem", semantic_settings(model_dir, 1)),
            "PPOLagSem@20": ("PPOLagSem", semantic_settings(model_dir, 20))}
    parts = components(args.env, model_dir, args.frame_size)
    samples: dict[str, list[dict]] = {name: [] for name in arms}
    for rep in range(args.repeats):
        for name, (algo, settings) in arms.items():
            samples[name].append(run(f"{name}-r{rep}", algo, settings, args, scratch))
    runs = {name: {k: statistics.median(s[k] for s in ss) for k in ss[0]} | {"samples": ss}
            for name, ss in samples.items()}
    drops = {name: {k: 1 - r[k] / runs["PPOLag"][k] for k in ("rollout_steps_per_s", "training_steps_per_s")}
             for name, r in runs.items() if name != "PPOLag"}
    report = dict(env=args.env, steps=args.steps, repeats=args.repeats, seed=args.seed, frame_size=args.frame_size,
                  update_iters=args.update_iters, model="tiny random CLIP (rlspec.semantics.tiny, float32, cpu)",
                  machine="shared 2-core CPU machine (other jobs running): compare arms, not absolute numbers",
                  cpu=cpu_identity(), components_ms=parts, runs=runs, drop_vs_PPOLag=drops,
                  goal_P6="training steps/s drop < 10% at capture_interval 20",
                  goal_P6_met=drops["PPOLagSem@20"]["training_steps_per_s"] < 0.10)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "semantic_overhead.json").write_text(json.dumps(report, indent=1))
    (args.out / "semantic_overhead.md").write_text(markdown(report))
    plot(runs, args.out / "semantic_overhead.png", args.env)
    print("ms per call:", json.dumps({k: round(v, 3) for k, v in parts.items()}))
    for name, r in runs.items():
        print(f"{name:<14} rollout {r['rollout_steps_per_s']:8.1f}  training {r['training_steps_per_s']:8.1f} "
              "env steps/s" + (f"  drop {100 * drops[name]['training_steps_per_s']:.1f}%" if name in drops else ""))
    return 0


LABELS = {"PPOLag": "PPOLag", "PPOLagSem@1": "PPOLagSem, capture_interval 1",
          "PPOLagSem@20": "PPOLagSem, capture_interval 20"}


def markdown(report: dict) -> str:
    """The JSON's table: per arm the median rollout and training env steps/s and the training drop against
    PPOLag, then P6's verdict."""
    rows = ["| arm | rollout env steps/s | training env steps/s | drop |", "|---|---|---|---|"]
    for name, r in report["runs"].items():
        drop = report["drop_vs_PPOLag"].get(name)
        rows.append(f"| {LABELS.get(name, name)} | {r['rollout_steps_per_s']:.1f} | {r['training_steps_per_s']:.1f} | "
                    + (f"{100 * drop['training_steps_per_s']:.0f}%" if drop else "—") + " |")
    verdict = "met" if report["goal_P6_met"] else "not met"
    return "\n".join(rows) + f"\n\nP6 ({report['goal_P6']}): **{verdict}**.\n"


def plot(runs: dict, path: Path, env: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    names, width = list(runs), 0.38
    for j, (key, label) in enumerate((("rollout_steps_per_s", "rollout"), ("training_steps_per_s", "training"))):
        xs = [i + (j - 0.5) * width for i in range(len(names))]
        ax.bar(xs, [runs[n][key] for n in names], width, label=label)
    ax.axhline(0.9 * runs["PPOLag"]["training_steps_per_s"], ls="--", color="k", lw=1,
               label="PPOLag training − 10% (goal P6)")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("env steps / s")
    ax.set_title(f"PPOLagSem overhead on {env} (tiny CLIP, CPU)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
