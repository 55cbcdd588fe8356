"""Safe-RL rollout throughput: env steps/s of the reference engine's in-process vector env against
the fast engine's worker processes (shared-memory transport) and Stable-Baselines3 2.9.2 PPO, the same network,
for each number of envs, in one run.

    python tests/bench/safe_throughput.py [--env SafetyPointGoal1-v0] [--envs 4 8] [--workers 1 2] [--steps 4000]
                                          [--note "machine state"] [--out docs/bench]
                                          (writes safe_throughput.json and .png)

Needs the `safety` environment (nox -s safety's venv) for Safety-Gymnasium ids; ToyGoal-v0 runs anywhere.
What is timed is ``rlspec.engines.safe.collect``: policy forward for all envs in one batch, env steps,
Sauté/scaler feedback, rollout storage; no update. Wall time (the fast engine's point is parallel env
steps in other processes) and this process's CPU time are both recorded; 3 rounds, the median kept. On a
machine shared with other jobs the wall rates measure the neighbours too: the JSON keeps the load average
before the run and ``--note``. The issue's goals (fast ≥ 1.5×
SB3 2.9.2 PPO, reference within 1.5× of SB3) are read off the ratios against SB3's own rollout collection
(``PPO.collect_rollouts`` over a DummyVecEnv of SafetyGymnasium2Gymnasium envs, the same network), measured
when stable-baselines3 imports: install it with ``pip install --no-deps stable-baselines3==2.9.2 cloudpickle``
(it declares gymnasium ≥ 0.29 but runs with 0.28.1). The baseline is SB3 if measured, else the reference.
Reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from rlspec.algos.safe_ppo import Kit, PPOConfig, SafetyConfig, make_state
from rlspec.engines.safe import collect
from rlspec.envs import safety_gym
from rlspec.envs.subproc_vector import SubprocSafeVectorEnv
from rlspec.runs.cpu import identity as cpu_identity


def measure(envs, steps_per_env: int, rounds: int = 3) -> dict:
    state = make_state("PPOLag", PPOConfig(), SafetyConfig(), envs.obs_dim, envs.act_dim, envs.num_envs,
                       Kit.reference(), torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    envs.reset()
    collect(state, envs, 10, gen)  # warm-up
    walls, cpus = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        collect(state, envs, steps_per_env, gen)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    envs.close()
    n = steps_per_env * envs.num_envs
    return {"steps": n, "wall_steps_per_s": n / statistics.median(walls),
            "process_cpu_steps_per_s": n / statistics.median(cpus)}


def measure_sb3(env_id: str, num_envs: int, steps_per_env: int, rounds: int = 3) -> dict:
    """Stable-Baselines3 PPO's rollout collection (DummyVecEnv, the same [64, 64] tanh network)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    sg = safety_gym.import_safety_gymnasium()
    venv = DummyVecEnv([lambda: sg.wrappers.SafetyGymnasium2Gymnasium(sg.make(env_id)) for _ in range(num_envs)])
    model = PPO("MlpPolicy", venv, n_steps=steps_per_env, seed=0, device="cpu",
                policy_kwargs=dict(net_arch=[64, 64], activation_fn=torch.nn.Tanh))
    _, callback = model._setup_learn(total_timesteps=10**9)
    callback.on_training_start(locals(), globals())
    walls, cpus = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=steps_per_env)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    venv.close()
    n = steps_per_env * num_envs
    return {"steps": n, "wall_steps_per_s": n / statistics.median(walls),
            "process_cpu_steps_per_s": n / statistics.median(cpus)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="SafetyPointGoal1-v0")
    p.add_argument("--envs", type=int, nargs="+", default=[4, 8], help="numbers of envs, one group each")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=4000, help="env steps per round (all envs together)")
    p.add_argument("--note", default="", help="the machine's state, kept in the JSON (e.g. shared, loaded)")
    p.add_argument("--out", type=Path, default=Path("docs/bench"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load = os.getloadavg()
    results = {f"{n} envs": measure_group(args.env, n, args.workers, args.steps // n) for n in args.envs}
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"env": args.env, "num_envs": args.envs, "machine": platform.machine(),
              "python": platform.python_version(), "cpu": cpu_identity(), "cpus": os.cpu_count(), "load_average_before": load, "note": args.note,
              "torch": torch.__version__, "versions": safety_gym.versions(), "results": results}
    (args.out / "safe_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out / "safe_throughput.png", f"{args.env}: rollout env steps/s (wall)")
    return 0


def measure_group(env_id: str, num_envs: int, workers: list[int], per_env: int) -> dict:
    """{engine: rates} for ``num_envs`` envs; ``wall_ratio_vs_baseline`` against SB3 if measured, else the
    reference."""
    group = {"reference (in-process)": measure(safety_gym.make_vector(env_id, num_envs, 0), per_env)}
    for w in workers:
        group[f"fast ({w} worker{'s' * (w > 1)})"] = measure(SubprocSafeVectorEnv(env_id, num_envs, 0, w), per_env)
    try:
        group["SB3 2.9.2 PPO (DummyVecEnv)"] = measure_sb3(env_id, num_envs, per_env)
    except ImportError as err:
        print(f"SB3 not measured: {err}")
    base = group.get("SB3 2.9.2 PPO (DummyVecEnv)", group["reference (in-process)"])["wall_steps_per_s"]
    for name, r in group.items():
        r["wall_ratio_vs_baseline"] = r["wall_steps_per_s"] / base
        print(f"{num_envs} envs, {name:28s} {r['wall_steps_per_s']:8.0f} steps/s wall  "
              f"({r['wall_ratio_vs_baseline']:.2f}× baseline)")
    return group


def plot(results: dict, path: Path, title: str) -> None:
    """One bar per (group, engine), coloured by engine, labelled with its ratio to the group's baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(dict.fromkeys(e for group in results.values() for e in group))
    rows = [(f"{g}: {e}", r, f"C{engines.index(e)}") for g, group in results.items() for e, r in group.items()]
    fig, ax = plt.subplots(figsize=(7, 1 + 0.35 * len(rows)), dpi=100)
    bars = ax.barh([n for n, _, _ in rows], [r["wall_steps_per_s"] for _, r, _ in rows], color=[c for *_, c in rows])
    for bar, (_, r, _) in zip(bars, rows):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {r['wall_ratio_vs_baseline']:.2f}×",
                va="center", fontsize=8)
    ax.margins(x=0.12)  # room for the ratio labels
    ax.set_xlabel("env steps / s (median of 3 rounds)")
    ax.set_title(title, fontsize=9)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
