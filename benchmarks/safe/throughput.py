"""Safe-RL throughput: env steps/s of the reference engine (in-process vector env), the fast engine's env
workers (shared-memory transport) and Stable-Baselines3 2.9.2 PPO (DummyVecEnv and SubprocVecEnv), the same
[64, 64] tanh networks, for each number of envs, rollout only and rollout + update, in one run.

    MUJOCO_GL=egl python -m benchmarks.safe.throughput [--env SafetyPointGoal1-v0] [--envs 4 8]
        [--workers 1 2] [--learner-steps 1] [--steps 2048] [--rounds 3] [--note "machine state"] [--out DIR]
        (writes safe_throughput.json and .png)

Needs the `safety` environment (nox -s safety's venv) for Safety-Gymnasium ids; ToyGoal-v0 runs anywhere.
SB3 arms run when stable-baselines3 imports: the bench_sb3_safe venv has it (``nox -s bench_sb3_safe
--install-only``, then ``.nox/bench_sb3_safe/bin/python -m benchmarks.safe.throughput``; SB3 is installed
--no-deps there: it declares gymnasium ≥ 0.29 but runs with the 0.28.1 Safety-Gymnasium needs).

Arms of a group (``--steps`` env steps per round, all envs together):

* rlspec: ``rlspec.engines.safe.collect`` (policy forward for all envs in one batch, env steps, Sauté/scaler
  feedback, rollout storage), then the PPOLag update (``rlspec.algos.trust_region.update``); the fast
  engine's workers with ``--workers`` processes, and with ``--learner-steps`` processes plus the learner
  stepping the first slice itself (the engine's ``learner_steps``), the latter again with blocking waits
  (``spin_s=0``: what polling the pipes before blocking gains, rlspec/envs/subproc_vector.py ``receive``);
* SB3: ``PPO.collect_rollouts`` (which also evaluates the critic per step and computes GAE), then
  ``PPO.train()``; SubprocVecEnv runs one env per process (SB3 cannot put several in one), started with
  ``forkserver``, SB3's default where available;
* the ceiling: the envs' own ``step`` alone, one process, uniform random actions; × usable cores.

Both updates take 10 epochs of minibatches of 64, no KL early stop; what SB3 cannot express is listed in the
JSON (``update_differences``). Rounds are interleaved: round r times every arm once, in an order rotated by
r, so a change of the machine's load hits every arm alike; the median of the rounds is kept. Wall rates
count; the CPU seconds of this process and the arm's workers are kept too, the part of the numbers that a
loaded machine disturbs least. The JSON keeps the load average before and after and ``--note``.
Reported, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from rlspec.algos.safe_ppo import Kit, PPOConfig, SafetyConfig, make_state
from rlspec.algos.safe_update import update
from rlspec.engines.safe import collect
from rlspec.envs import safety_gym
from rlspec.envs.subproc_vector import SPIN_S, SubprocSafeVectorEnv
from rlspec.evidence.cpu import identity as cpu_identity

EPOCHS, MINIBATCH = 10, 64
PPO = PPOConfig(update_iters=EPOCHS, batch_size=MINIBATCH, target_kl=None)  # what SB3's PPO can match
SB3_START = "forkserver"
REFERENCE, SB3_DUMMY, SB3_SUBPROC, CEILING = ("reference (in-process)", "SB3 2.9.2 PPO (DummyVecEnv)",
                                              "SB3 2.9.2 PPO (SubprocVecEnv)", "env step alone (1 process)")
UPDATE_DIFFERENCES = [
    "PPOLag trains three networks (actor, reward critic, cost critic) and takes a Lagrange multiplier step; "
    "SB3 PPO trains two (actor, value)",
    "rlspec: one Adam per network, gradient norm clipped per network at 40, critic L2 penalty 0.001; SB3: one "
    "Adam over the policy, global gradient norm clip 0.5, vf_coef 0.5",
    "rlspec: reward advantages standardized and cost advantages centered over the whole rollout, the "
    "observation normalizer committed after the update; SB3: advantages normalized per minibatch, no "
    "observation normalizer",
    "rlspec evaluates the critics in the update; SB3 in the rollout (collect_rollouts: a value per step, then "
    "GAE), so SB3's rollout carries work that rlspec's update does",
]


def worker_name(w: int, learner: bool = False, blocking: bool = False) -> str:
    return f"fast ({w} worker{'s' * (w > 1)}{' + learner' * learner}{', blocking' * blocking})"


@dataclass
class Arm:
    """One engine of a group. ``rollout()`` collects the round's steps, ``update()`` (None: none) learns from
    them; ``pids``: its worker processes, whose CPU time counts with this process's."""

    name: str
    rollout: Callable[[], None]
    update: Callable[[], None] | None
    close: Callable[[], None]
    pids: list[int] = field(default_factory=list)


def rlspec_arm(name: str, envs, per_env: int) -> Arm:
    """An rlspec vector env (in-process or workers) driven by the engines' collect and the PPOLag update."""
    state = make_state("PPOLag", PPO, SafetyConfig(), envs.obs_dim, envs.act_dim, envs.num_envs, Kit.reference(),
                       torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    envs.reset()
    collect(state, envs, 10, gen)  # warm-up
    last = []

    def rollout():
        last[:] = [collect(state, envs, per_env, gen)]
        envs.pop_finished()

    def learn():
        update(state, last[0], 0.0, PPO, SafetyConfig(), Kit.reference(), gen)

    return Arm(name, rollout, learn, envs.close, [p.pid for p in getattr(envs, "procs", [])])


def make_sb3_env(env_id: str):
    """One Safety-Gymnasium env with Gymnasium's 5-tuple API (module level: SubprocVecEnv pickles it)."""
    import gymnasium

    class WrapperAttr(gymnasium.Wrapper):
        """SB3 2.9.2's vector envs read attributes with get_wrapper_attr (gymnasium ≥ 1.0); 0.28.1 has none."""

        def get_wrapper_attr(self, name: str):
            return getattr(self, name)

    sg = safety_gym.import_safety_gymnasium()
    return WrapperAttr(sg.wrappers.SafetyGymnasium2Gymnasium(sg.make(env_id)))


def sb3_arm(name: str, env_id: str, num_envs: int, per_env: int, subproc: bool) -> Arm:
    """Stable-Baselines3 PPO's collect_rollouts and train() on the same networks and update sizes."""
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [functools.partial(make_sb3_env, env_id)] * num_envs
    venv = SubprocVecEnv(fns, start_method=SB3_START) if subproc else DummyVecEnv(fns)
    model = SB3PPO("MlpPolicy", venv, n_steps=per_env, batch_size=MINIBATCH, n_epochs=EPOCHS, seed=0, device="cpu",
                   policy_kwargs=dict(net_arch=[64, 64], activation_fn=torch.nn.Tanh))
    _, callback = model._setup_learn(total_timesteps=10**9)
    callback.on_training_start(locals(), globals())
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=10)  # warm-up

    def rollout():
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=per_env)

    return Arm(name, rollout, model.train, venv.close, [p.pid for p in getattr(venv, "processes", [])])


def ceiling_arm(env_id: str, num_envs: int, per_env: int) -> Arm:
    """The envs' own step, one process, uniform random actions (autoreset by the env's own reset)."""
    envs = [safety_gym.make_env(env_id) for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    rng = np.random.default_rng(0)
    low, high = envs[0].action_space.low, envs[0].action_space.high

    def rollout():
        for a in rng.uniform(low, high, (per_env, num_envs, len(low))):  # [T, N, A]
            for env, action in zip(envs, a):
                *_, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()

    return Arm(CEILING, rollout, None, lambda: [getattr(e, "close", lambda: None)() for e in envs])


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) of this process and of the live processes ``pids``."""
    tick = os.sysconf("SC_CLK_TCK")
    total = time.process_time()
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (man 5 proc, fields 14 and 15)
    return total


def time_round(arm: Arm) -> dict[str, float]:
    """One round of ``arm``: wall seconds of its rollout and its update, CPU seconds of its rollout."""
    c0, w0 = cpu_seconds(arm.pids), time.perf_counter()
    arm.rollout()
    w1, c1 = time.perf_counter(), cpu_seconds(arm.pids)
    if arm.update is not None:
        arm.update()
    return {"rollout_s": w1 - w0, "update_s": time.perf_counter() - w1, "rollout_cpu_s": c1 - c0}


def schedule(names: list[str], rounds: int) -> list[str]:
    """Round-robin order of the timed rounds: round r runs every arm once, starting at arm r mod len(names)."""
    k = len(names)
    return [names[(r + i) % k] for r in range(rounds) for i in range(k)]


def summarize(samples: list[dict[str, float]], steps: int, has_update: bool) -> dict:
    """Median rates of one arm's rounds (env steps/s); rollout + update only for an arm with an update."""
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    both = statistics.median(s["rollout_s"] + s["update_s"] for s in samples)
    return {"steps": steps, "rounds": len(samples), "rollout_steps_per_s": steps / med["rollout_s"],
            "rollout_update_steps_per_s": steps / both if has_update else None,
            "update_s": med["update_s"] if has_update else None,
            "rollout_cpu_steps_per_s": steps / med["rollout_cpu_s"], "samples": samples}


def ratios(group: dict, arm: str, baselines: list[str], metric: str) -> dict[str, float]:
    """``arm``'s ``metric`` over each measured baseline's (baselines absent from the group are skipped)."""
    return {b: group[arm][metric] / group[b][metric] for b in baselines
            if b in group and group[arm][metric] and group[b][metric]}


def run_group(makers: list[Callable[[], Arm]], steps: int, rounds: int) -> dict:
    """The arms made, each timed ``rounds`` times, interleaved (``schedule``), then closed (those made, on any
    failure); {name: summary}."""
    arms: list[Arm] = []
    try:
        for make in makers:
            arms.append(make())
        by_name = {a.name: a for a in arms}
        samples: dict[str, list] = {a.name: [] for a in arms}
        for name in schedule(list(by_name), rounds):
            samples[name].append(time_round(by_name[name]))
    finally:
        for arm in arms:
            arm.close()
    return {name: summarize(s, steps, by_name[name].update is not None) for name, s in samples.items()}


def arm_makers(env_id: str, num_envs: int, workers: list[int], learner: list[int], per_env: int,
               sb3: bool) -> list[Callable[[], Arm]]:
    """The group's arms, to be made: the reference, each number of workers (alone, then with the learner
    stepping a slice), SB3's two vector envs, the ceiling."""
    part = functools.partial

    def fast(w: int, here: bool, blocking: bool = False) -> Arm:
        envs = SubprocSafeVectorEnv(env_id, num_envs, 0, w, caller_steps=here, spin_s=0.0 if blocking else SPIN_S)
        return rlspec_arm(worker_name(w, here, blocking), envs, per_env)

    makers = [lambda: rlspec_arm(REFERENCE, safety_gym.make_vector(env_id, num_envs, 0), per_env)]
    makers += [part(fast, w, False) for w in workers] + [part(fast, w, True) for w in learner]
    makers += [part(fast, w, True, True) for w in learner]  # the same without polling: what the polling gains
    if sb3:
        makers += [part(sb3_arm, name, env_id, num_envs, per_env, subproc)
                   for name, subproc in ((SB3_DUMMY, False), (SB3_SUBPROC, True))]
    return makers + [part(ceiling_arm, env_id, num_envs, per_env)]


def add_ratios(group: dict, cores: int) -> None:
    """Ratios of every arm to the reference and to SB3's two vector envs; the ceiling (env step × cores)."""
    for name, r in group.items():
        r["ratios"] = {m: ratios(group, name, [REFERENCE, SB3_DUMMY, SB3_SUBPROC], m)
                       for m in ("rollout_steps_per_s", "rollout_update_steps_per_s")}
    group[CEILING]["ceiling_steps_per_s"] = group[CEILING]["rollout_steps_per_s"] * cores


def bound(group: dict, cores: int) -> dict[str, float]:
    """Amdahl's bound on ``cores``: the best env steps/s of any execution that does the reference's work, its
    rollout split perfectly over the cores and its update (one learner, serial) as long as the reference's:
    rollout R·cores; rollout + update T / (T/(R·cores) + U) for T steps per round, R the reference's rollout
    rate, U its update seconds."""
    ref = group[REFERENCE]
    rollout_s = ref["steps"] / ref["rollout_steps_per_s"]
    return {"rollout_steps_per_s": ref["rollout_steps_per_s"] * cores,
            "rollout_update_steps_per_s": ref["steps"] / (rollout_s / cores + ref["update_s"])}


def goals(results: dict, arm: str, cores: int, target: float = 1.5) -> dict:
    """Per group and metric: the ratios of the fast ``arm`` to the reference and SB3's SubprocVecEnv, whether
    each reaches ``target``, and Amdahl's ``bound`` on the same ratio (whether the target is reachable at all
    without a faster update)."""
    out = {}
    for g, group in results.items():
        fast = group.get(arm)
        if fast is None:
            continue
        best = bound(group, cores)
        for metric, rs in fast["ratios"].items():
            out[f"{g}, {metric}"] = {b: {"ratio": rs[b], "met": rs[b] >= target,
                                         "bound": best[metric] / group[b][metric],
                                         "reachable": best[metric] / group[b][metric] >= target}
                                     for b in (REFERENCE, SB3_SUBPROC) if b in rs}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="SafetyPointGoal1-v0")
    p.add_argument("--envs", type=int, nargs="+", default=[4, 8], help="numbers of envs, one group each")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--learner-steps", type=int, nargs="*", default=[1],
                   help="numbers of workers to run again with the learner stepping a slice too")
    p.add_argument("--steps", type=int, default=2048,
                   help="env steps per round, all envs together (a multiple of 64 and of each --envs: whole "
                        "minibatches)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--note", default="", help="the machine's state, kept in the JSON (e.g. shared, loaded)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    try:
        import stable_baselines3  # noqa: F401
        sb3 = args.env not in safety_gym.TOY_ENVS
    except ImportError as err:
        print(f"SB3 not measured: {err}")
        sb3 = False
    cores = len(os.sched_getaffinity(0))
    load_before, results = os.getloadavg(), {}
    for n in args.envs:
        per_env = args.steps // n
        makers = arm_makers(args.env, n, args.workers, args.learner_steps, per_env, sb3)
        results[f"{n} envs"] = run_group(makers, per_env * n, args.rounds)
        add_ratios(results[f"{n} envs"], cores)
        show(n, results[f"{n} envs"])
    command = shlex.join(sys.argv[1:] if argv is None else argv)
    report = {"env": args.env, "num_envs": args.envs, "workers": args.workers,
              "learner_steps": args.learner_steps, "rounds": args.rounds,
              "command": f"MUJOCO_GL=egl python -m benchmarks.safe.throughput {command}",
              "load_average_before": load_before, "load_average_after": os.getloadavg(), "note": args.note,
              "usable_cores": cores, "machine": platform.machine(), "python": platform.python_version(),
              "cpu": cpu_identity(), "torch": torch.__version__, "versions": safety_gym.versions() | sb3_version(),
              "ppo_update": {"epochs": EPOCHS, "minibatch": MINIBATCH, "target_kl": None},
              "sb3_subproc_start_method": SB3_START if sb3 else None, "update_differences": UPDATE_DIFFERENCES,
              "amdahl_bound": {g: bound(group, cores) for g, group in results.items()},
              "goals_2_workers": goals(results, worker_name(2), cores),
              "goals_1_worker_and_learner": goals(results, worker_name(1, True), cores), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "safe_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "safe_throughput.md").write_text(markdown(report))
    plot(results, args.out / "safe_throughput.png", f"{args.env}: env steps/s (wall, median of {args.rounds} "
                                                     f"interleaved rounds; ratio to the reference)")
    return 0


def label(arm: str) -> str:
    """The page's name of a recorded arm: the JSON's "fast (...)" arms are the parallel execution's (their
    names predate the execution key and are kept as recorded)."""
    return f"parallel, {arm[len('fast ('):-1]}" if arm.startswith("fast (") else arm


def _rate(group: dict, arm: str, metric: str, with_ratio: bool) -> str:
    r = group[arm]
    value = r.get(metric)
    if value is None:
        return ""
    ratio = r["ratios"][metric].get(REFERENCE)
    return f"{value:.0f}/s" + (f" ({ratio:.2f}×)" if with_ratio and ratio is not None else "")


def markdown(report: dict) -> str:
    """The JSON's table: per arm and group, env steps/s of the rollout and of rollout + update (the parallel
    arms with their ratio to the reference), the goal's arm in bold; then the envs' ceiling and Amdahl's bound."""
    results, cores = report["results"], report["usable_cores"]
    groups = list(results)
    goal_arm = worker_name(1, True)
    head = " | ".join(f"{g}: rollout | + update" for g in groups)
    lines = [f"| {report['env']}, {cores} cores | {head} |", "|---|" + "---|---|" * len(groups)]
    arms = [a for a in results[groups[0]] if a != CEILING]
    for arm in arms:
        cells = [_rate(results[g], arm, m, arm.startswith("fast (")) for g in groups
                 for m in ("rollout_steps_per_s", "rollout_update_steps_per_s")]
        name = label(arm)
        if arm == goal_arm:
            name, cells = f"**{name}**", [f"**{c}**" if c else c for c in cells]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(f"| ceiling: env step alone × {cores} cores | " + " | ".join(
        f"{results[g][CEILING]['ceiling_steps_per_s']:.0f}/s | " for g in groups) + " |")
    bounds = report["amdahl_bound"]
    lines.append(f"| Amdahl's bound (reference's rollout on {cores} cores, its update serial) | " + " | ".join(
        f"{bounds[g]['rollout_steps_per_s']:.0f}/s | {bounds[g]['rollout_update_steps_per_s']:.0f}/s" for g in groups)
        + " |")
    return "\n".join(lines) + "\n"


def sb3_version() -> dict[str, str]:
    from importlib import metadata

    try:
        return {"stable-baselines3": metadata.version("stable-baselines3")}
    except metadata.PackageNotFoundError:
        return {}


def show(num_envs: int, group: dict) -> None:
    for name, r in group.items():
        both = r["rollout_update_steps_per_s"]
        print(f"{num_envs} envs, {name:31s} rollout {r['rollout_steps_per_s']:7.0f}/s "
              f"({r['ratios']['rollout_steps_per_s'].get(REFERENCE, 0):.2f}× ref)"
              + (f"  + update {both:7.0f}/s" if both else f"  ceiling {r.get('ceiling_steps_per_s', 0):7.0f}/s"))


def plot(results: dict, path: Path, title: str) -> None:
    """Two panels (rollout only; rollout + update): one bar per (group, arm), labelled with its ratio to the
    group's reference; the ceiling (env step alone × cores) as a line per group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("rollout_steps_per_s", "rollout only"), ("rollout_update_steps_per_s", "rollout + update")]
    arms = [a for a in dict.fromkeys(a for g in results.values() for a in g) if a != CEILING]
    rows = [(g, a) for g, group in results.items() for a in arms if a in group]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.32 * len(rows)), dpi=100, sharey=True)
    for ax, (metric, label) in zip(axes, metrics):
        vals = [results[g][a][metric] or 0.0 for g, a in rows]
        bars = ax.barh([f"{g}: {a}" for g, a in rows], vals, color=[f"C{arms.index(a)}" for _, a in rows])
        for bar, (g, a) in zip(bars, rows):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                    f" {results[g][a]['ratios'][metric].get(REFERENCE, 0):.2f}×", va="center", fontsize=8)
        for g, group in results.items():
            ys = [i for i, (gg, _) in enumerate(rows) if gg == g]
            first = g == next(iter(results))
            ax.vlines(group[CEILING]["ceiling_steps_per_s"], min(ys) - 0.4, max(ys) + 0.4, colors="k",
                      linestyles="dashed", label="ceiling: env step alone × cores" if first else None)
        ax.margins(x=0.15)
        ax.set_xlabel(f"env steps / s, {label}")
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
