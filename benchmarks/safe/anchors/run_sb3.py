"""Stable-Baselines3 2.9.2 PPO, unconstrained, on Safety-Gymnasium with the settings rlspec's PPO runs: the
reward-only anchor of the safe-RL side-by-side comparison (rlspec PPO beside SB3 PPO and OmniSafe PPO).

    nox -s bench_sb3_safe -- --seeds 0 1 2 --total-steps 200000 --steps-per-epoch 4000 [--out runs/sb3]
    python -m benchmarks.safe.anchors.run_sb3 --write-only                   # OUT/sb3_safe.json only, nothing trained

Runs in the bench_sb3_safe environment (the `safety` extra and Safety-Gymnasium as `nox -s safety`, plus SB3
2.9.2 and cloudpickle --no-deps), one thread, CPU.
Each seed logs with SB3's own CSV logger into OUT/PPO-sSEED/progress.csv, which `rlspec report` and
benchmarks/safe/vs_omnisafe.py read beside rlspec's and OmniSafe's runs. SB3 logs no cost: a callback (not the
algorithm) sums each episode's `info["cost"]` and records `rollout/ep_cost_mean` over the last `ep_window`
episodes, as it records `rollout/ep_rew_mean`. A seed whose progress.csv reached the total is not run again (an
interrupted one runs again from the start).

``MAPPING`` gives every rlspec PPO key SB3 has an argument for (the JSON lists both values); ``DIFFERENCES`` is
what SB3 cannot express, written into the JSON as the issue asks.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import deque
from pathlib import Path

from rlspec.engines.safe import build_config
from rlspec.runs.config import ConfigError

ENV = "SafetyPointGoal1-v0"
ACT_DIM = 2  # SafetyPointGoal1-v0's action dimensions (the Point robot's two actuators)
# rlspec key -> SB3 PPO argument (values equal by construction, taken from rlspec's resolved config, except
# ent_coef: SB3's entropy is the sum over action dimensions, rlspec's (OmniSafe's) their mean, so
# ent_coef = entropy_coef / ACT_DIM gives the same bonus)
MAPPING = {
    "ppo.update_iters": "n_epochs", "ppo.batch_size": "batch_size", "ppo.clip": "clip_range",
    "ppo.target_kl": "target_kl", "ppo.entropy_coef": "ent_coef", "ppo.gamma": "gamma", "ppo.lam": "gae_lambda",
    "ppo.max_grad_norm": "max_grad_norm", "ppo.standardize_reward_adv": "normalize_advantage",
    "ppo.actor_lr": "learning_rate",
}
DIFFERENCES = [
    "one Adam optimizer over actor and critic with the joint loss pi + 0.5·value (rlspec: two optimizers, "
    "ppo.critic_lr for the critic)",
    "KL early stop: SB3 stops an epoch when the minibatch's approximate KL exceeds 1.5·target_kl (rlspec, as "
    "OmniSafe: after an update iteration whose KL over the whole batch exceeds target_kl)",
    "no L2 penalty on the critic's weights (rlspec ppo.critic_norm_coef)",
    "observation normalization by VecNormalize (running mean/std, observations clipped to ±10; rlspec: OmniSafe's "
    "normalizer, clipped to ±5)",
    "no cost critic and no Lagrange multiplier: the reward-only anchor of PPO",
    "linear learning-rate decay as SB3's schedule of the remaining progress (rlspec: per epoch)",
]


def sb3_kwargs(cfg, seed: int, steps_per_epoch: int, num_envs: int) -> dict:
    """SB3 PPO's arguments from rlspec's resolved config (MAPPING) and the shared run settings."""
    ppo = cfg.ppo
    kwargs = {arg: getattr(ppo, key.split(".")[1]) for key, arg in MAPPING.items()}
    kwargs["ent_coef"] = ppo.entropy_coef / ACT_DIM
    return {**kwargs, "linear_lr_decay": ppo.linear_lr_decay, "n_steps": steps_per_epoch // num_envs, "seed": seed,
            "device": "cpu", "hidden": list(ppo.hidden), "activation": ppo.activation,
            "stats_window_size": cfg.ep_window}  # rollout/ep_rew_mean over the episodes rlspec's EpRet averages


def shared(seed: int, total_steps: int, steps_per_epoch: int, num_envs: int) -> list[str]:
    """The override set, as rlspec's --set list (the PPO arm of benchmarks/safe/learning.py runs it; ep_window 50:
    OmniSafe's hard-coded episode window, benchmarks/safe/anchors/run_omnisafe.py)."""
    return ["algo=PPO", f"env_id={ENV}", f"seed={seed}", f"total_steps={total_steps}",
            f"steps_per_epoch={steps_per_epoch}", f"num_envs={num_envs}", "torch_threads=1", "ep_window=50"]


def finished(out: Path, seed: int, total_steps: int) -> bool:
    progress = out / f"PPO-s{seed}" / "progress.csv"
    if not progress.is_file():
        return False
    with open(progress, newline="") as f:
        steps = [float(r["time/total_timesteps"]) for r in csv.DictReader(f) if r.get("time/total_timesteps")]
    return bool(steps) and steps[-1] >= total_steps


def train(kwargs: dict, total_steps: int, num_envs: int, ep_window: int, out: Path) -> None:
    """One SB3 run: DummyVecEnv of num_envs envs, VecMonitor (SB3's episode return), VecNormalize(obs), SB3's
    CSV logger, the cost callback."""
    import torch
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

    from benchmarks.safe.throughput import make_sb3_env

    class EpisodeCost(BaseCallback):
        """Sums info["cost"] per env and episode; records the mean of the last ep_window finished episodes."""

        def _on_training_start(self) -> None:
            self.running, self.done = [0.0] * num_envs, deque(maxlen=ep_window)

        def _on_step(self) -> bool:
            for i, (info, end) in enumerate(zip(self.locals["infos"], self.locals["dones"])):
                self.running[i] += float(info.get("cost", 0.0))
                if end:
                    self.done.append(self.running[i])
                    self.running[i] = 0.0
            return True

        def _on_rollout_end(self) -> None:
            if self.done:
                self.logger.record("rollout/ep_cost_mean", sum(self.done) / len(self.done))

    torch.set_num_threads(1)
    kw = dict(kwargs)
    lr, decay = kw.pop("learning_rate"), kw.pop("linear_lr_decay")
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[kw.pop("activation")]
    hidden = kw.pop("hidden")
    monitored = VecMonitor(DummyVecEnv([lambda: make_sb3_env(ENV)] * num_envs))
    if monitored.action_space.shape != (ACT_DIM,):
        raise ConfigError(f"{ENV}: action shape: expected ({ACT_DIM},) (ent_coef's scale), got "
                          f"{monitored.action_space.shape}")
    venv = VecNormalize(monitored, norm_obs=True, norm_reward=False)
    model = SB3PPO("MlpPolicy", venv, learning_rate=(lambda left: lr * left) if decay else lr,
                   policy_kwargs={"net_arch": {"pi": hidden, "vf": hidden}, "activation_fn": act}, **kw)
    model.set_logger(configure(str(out), ["csv"]))
    model.learn(total_timesteps=total_steps, callback=EpisodeCost())
    venv.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--total-steps", type=int, default=200_000)
    p.add_argument("--steps-per-epoch", type=int, default=4_000)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("runs/sb3"))
    p.add_argument("--write-only", action="store_true", help="write OUT/sb3_safe.json, train nothing")
    args = p.parse_args(argv)
    if args.steps_per_epoch % args.num_envs or args.total_steps < args.steps_per_epoch:
        print(f"sb3_safe: --steps-per-epoch: expected a multiple of --num-envs = {args.num_envs} and at most "
              f"--total-steps = {args.total_steps}, got {args.steps_per_epoch}", file=sys.stderr)
        return 2
    try:
        cfg = build_config("default", shared(args.seeds[0], args.total_steps, args.steps_per_epoch, args.num_envs))
    except ConfigError as err:
        print(f"sb3_safe: {err}", file=sys.stderr)
        return 2
    report = {"what": "Stable-Baselines3 2.9.2 PPO (unconstrained) with rlspec PPO's settings", "env": ENV,
              "mapping": MAPPING, "differences": DIFFERENCES, "ep_window": cfg.ep_window, "seeds": {}}
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        kwargs = sb3_kwargs(cfg, seed, args.steps_per_epoch, args.num_envs)
        report["seeds"][seed] = {"rlspec_sets": shared(seed, args.total_steps, args.steps_per_epoch, args.num_envs),
                                 "sb3": kwargs}
        if not args.write_only and not finished(args.out, seed, args.total_steps):
            try:
                train(kwargs, args.total_steps, args.num_envs, cfg.ep_window, args.out / f"PPO-s{seed}")
            except ConfigError as err:
                print(f"sb3_safe: {err}", file=sys.stderr)
                return 2
        (args.out / "sb3_safe.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out / 'sb3_safe.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
