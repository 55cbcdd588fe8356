"""Stable-Baselines3 2.9.2 PPO (continuous actions) on a Meta-World v3 task: the anchor the bonus engine's token
learner (PPO + V-trace over 11 tokens per action dimension, benchmarks/bonus/ablation.py's baseline arm) is
judged against, on the same task, env-step budget, episode limit, success rule and seeds.

    nox -s bench_sb3_metaworld -- --task reach-v3 --seeds 0 1 2 3 4 --total-steps 150000 --out runs/sb3-mw

Each seed logs with SB3's own CSV logger into OUT/TASK/PPO-sSEED/progress.csv (`rollout/success_rate`: SB3's
share of successful episodes among the last 100, from the `is_success` this script's wrapper sets) which
`rlspec report` reads beside the bonus engine's runs, and after training writes OUT/TASK/PPO-sSEED/greedy.json:
the deterministic policy's success over EVAL_EPISODES episodes of envs seeded as `rlspec eval` seeds the token
learner's (an index no training env uses). A seed whose greedy.json exists is not run again (an interrupted seed
runs again from the start). OUT/sb3_metaworld.json holds the settings (SETTINGS: SB3's PPO defaults with
n_steps set so one rollout of NUM_ENVS envs is SB3's default 2,048 steps; VecNormalize of observations and
rewards, SB3 zoo's MuJoCo recipe) and what differs from the token learner (DIFFERENCES).

The env is the one the token learner steps (rlspec/envs/metaworld_tokens.py): gymnasium.make("Meta-World/MT1",
env_name=TASK, seed=SeedSequence([seed, i, 0])), an episode ends at its first success (terminated) or after
EPISODE_STEPS steps (truncated), never re-seeded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

NUM_ENVS, EPISODE_STEPS, EVAL_EPISODES, EVAL_ENV = 8, 200, 20, 1_000_003
SETTINGS = {"policy": "MlpPolicy", "n_steps": 2048 // NUM_ENVS, "batch_size": 64, "n_epochs": 10,
            "learning_rate": 3e-4, "gamma": 0.99, "gae_lambda": 0.95, "clip_range": 0.2, "ent_coef": 0.0,
            "vf_coef": 0.5, "max_grad_norm": 0.5, "normalize": "VecNormalize(norm_obs, norm_reward)",
            "num_envs": NUM_ENVS, "episode_steps": EPISODE_STEPS, "terminate_on_success": True, "device": "cpu",
            "torch_threads": 1}
ACTIONS = ("continuous", "tokens")  # --actions: SB3's Gaussian, or the token learner's tokens (MultiDiscrete)
CONTINUOUS = "continuous Gaussian actions (the token learner picks one of 11 tokens per action dimension)"
DIFFERENCES = [
    "on-policy PPO with GAE (the token learner: PPO with V-trace targets over the newest fragment and 3 replayed ones)",
    "SB3's [64, 64] tanh actor and critic (the token learner: its own MLP, rlspec/algos/bonus_vtrace.py)",
    "VecNormalize of observations and rewards (the token learner: rewards divided by the return's std, "
    "learner.normalize_returns; observations normalized only with learner.normalize_obs, on in --preset metaworld)",
    "10 epochs of 32 minibatches of 64 over each 2,048-step rollout (the token learner: learner.epochs epochs, 10 in "
    "--preset metaworld and 4 by default, of 4 minibatches over each 256-step fragment and 3 replayed ones)",
    "success rate: SB3's last 100 finished episodes (the token learner logs the last ep_window = 50)",
]


def differences(actions: str) -> list[str]:
    """What differs from the token learner with these actions (none about actions with --actions tokens)."""
    return ([CONTINUOUS] if actions == "continuous" else []) + DIFFERENCES


def env_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, index, 0]).generate_state(1)[0])


def make_env(task: str, seed: int, index: int, tokens: bool = False):
    """One Meta-World env as the token learner's vector makes it, ending at success or EPISODE_STEPS, its info
    carrying SB3's `is_success`; with ``tokens`` its actions are the token learner's: one of N_BINS tokens per
    dimension (MultiDiscrete), each the value TOKEN_VALUES gives it there."""
    import gymnasium
    import metaworld  # noqa: F401  (registers Meta-World/*)

    from rlspec.envs.metaworld_tokens import N_BINS, TOKEN_VALUES

    class TokenActions(gymnasium.ActionWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.action_space = gymnasium.spaces.MultiDiscrete([N_BINS] * env.action_space.shape[0])

        def action(self, action):
            return TOKEN_VALUES[np.asarray(action, dtype=np.int64)]  # [A] tokens -> [A] values

    class SuccessEnds(gymnasium.Wrapper):
        def reset(self, **kwargs):
            self.t = 0
            return self.env.reset(**kwargs)

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.t += 1
            success = bool(info["success"])
            terminated = terminated or success
            truncated = not terminated and (truncated or self.t >= EPISODE_STEPS)
            return obs, reward, terminated, truncated, {**info, "is_success": success}

    env = gymnasium.make("Meta-World/MT1", env_name=task, disable_env_checker=True, seed=env_seed(seed, index))
    return TokenActions(SuccessEnds(env)) if tokens else SuccessEnds(env)


def greedy_success(model, vec_normalize, task: str, seed: int, episodes: int = EVAL_EPISODES,
                   tokens: bool = False) -> float:
    """The deterministic policy's success rate over ``episodes`` episodes of one env seeded EVAL_ENV."""
    env = make_env(task, seed, EVAL_ENV, tokens)
    wins = 0
    for _ in range(episodes):
        obs, _ = env.reset()
        done, info = False, {}
        while not done:
            action, _ = model.predict(vec_normalize.normalize_obs(obs[None]), deterministic=True)
            obs, _, terminated, truncated, info = env.step(action[0])
            done = terminated or truncated
        wins += bool(info.get("is_success"))
    return wins / episodes


def train(task: str, seed: int, total_steps: int, out: Path, actions: str = "continuous",
          log_std_init: float | None = None) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

    torch.set_num_threads(1)
    run = out / task / f"PPO-s{seed}"
    if (run / "greedy.json").is_file():
        return json.loads((run / "greedy.json").read_text())
    run.mkdir(parents=True, exist_ok=True)
    tokens = actions == "tokens"
    venv = VecNormalize(VecMonitor(DummyVecEnv([lambda i=i: make_env(task, seed, i, tokens)
                                                for i in range(NUM_ENVS)])))
    ppo = {k: v for k, v in SETTINGS.items() if k not in ("normalize", "num_envs", "episode_steps",
                                                           "terminate_on_success", "torch_threads")}
    policy_kwargs = {} if log_std_init is None else {"log_std_init": log_std_init}  # SB3's default 0.0
    model = PPO(env=venv, seed=seed, verbose=0, policy_kwargs=policy_kwargs, **ppo)
    model.set_logger(configure(str(run), ["csv"]))
    model.learn(total_timesteps=total_steps)
    venv.training = False
    result = {"task": task, "seed": seed, "env_steps": int(model.num_timesteps),
              "greedy_success": greedy_success(model, venv, task, seed, tokens=tokens), "eval_episodes": EVAL_EPISODES,
              "actions": actions, "log_std_init": log_std_init}
    (run / "greedy.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="reach-v3", help="a Meta-World v3 environment name")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--total-steps", type=int, default=150_000)
    p.add_argument("--out", type=Path, default=Path("runs/sb3-mw"))
    p.add_argument("--actions", choices=ACTIONS, default="continuous",
                   help="tokens: the token learner's 11 tokens per dimension (MultiDiscrete) instead of Gaussian actions")
    p.add_argument("--log-std-init", type=float, help="the Gaussian's initial log std (SB3's default 0.0; continuous "
                   "only), e.g. a value tuned on this task so the anchor is not a straw man")
    args = p.parse_args(argv)
    if args.log_std_init is not None and args.actions != "continuous":
        p.error("--log-std-init: the tokens have no Gaussian (it goes with --actions continuous)")
    import metaworld

    if args.task not in metaworld.ALL_V3_ENVIRONMENTS:
        p.error(f"--task: expected a Meta-World v3 environment, got {args.task!r}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sb3_metaworld.json").write_text(json.dumps(
        {"what": "SB3 2.9.2 PPO on Meta-World (benchmarks/bonus/anchors/run_sb3.py)",
         "settings": {**SETTINGS, "actions": args.actions, "log_std_init": args.log_std_init},
         "differences_from_the_token_learner": differences(args.actions)}, indent=1))
    for seed in args.seeds:
        print(json.dumps(train(args.task, seed, args.total_steps, args.out, args.actions, args.log_std_init)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
