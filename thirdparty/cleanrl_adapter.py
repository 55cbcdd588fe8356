"""CleanRL's ``ppo.py`` behind contracts ``gae`` (1.2.0's GAE block, spec/gae.py) and ``collector`` (its
rollout-storage loop, spec/collector.py).

CleanRL keeps each algorithm as one script (PyPI ``cleanrl`` 1.2.0 supports Python < 3.11 only), so the
adapter reads ``cleanrl/ppo.py`` out of the pinned wheel (rlspec.thirdparty.wheel), finds the block that
computes the advantages (the ``with torch.no_grad():`` statement after "bootstrap value if not done") with
``ast`` and executes that block, unchanged, on the contract's inputs.

Conversion: ppo.py stores ``dones[t]`` = the done flag *before* step t (``dones[step] = next_done``) with
gym's done = terminated or truncated, and ``next_done`` = the flag after the last step. So rewards = r,
values = v, dones = cat(0, done[:-1]), next_done = done[T−1], and ``agent.get_value(next_obs)`` returns
next_value[T−1] (the bootstrap at the rollout cut). The batch is flattened to ppo.py's [num_steps,
num_envs]. Flags enter as floats (1 − (1 − terminated)(1 − truncated)): 0/1 flags give exactly ppo.py's.

collector: ``_rollout`` is ppo.py's rollout-storage loop rewritten line for line from the gymnasium version of
the script, github.com/vwxyzjn/cleanrl ``cleanrl/ppo.py`` at commit fe8d8a03 (last changed in e421c2e5): lines
171-176 (storage setup), 179-183 (start the game) and 192-215 (``for step in range(0, args.num_steps)``). Two
changes, both marked: the episode log of lines 210-215 (print, ``writer.add_scalar``) appends (env, return,
length) instead, the env index taken with ``enumerate``; and the agent is a stand-in (ppo.py's Agent is
Categorical and line 165 asserts a Discrete action space; the contract's action is a Box): it acts with the
contract's policy, log-probabilities and values 0, which the loop only stores. 1.2.0's wheel holds the same loop
on gym 0.21's API (its lines 167-211: done = the env's done, TimeLimit included), storing the same arrays.
The envs are what lines 81-91 and 162-164 build, as gymnasium 0.29 (CleanRL's pin, 0.29.1) steps them:
``_Gymnasium029Vector`` over the contract's sub-envs (``envs.env_fns``), each wrapped in gymnasium's
RecordEpisodeStatistics, with 0.29's same-step autoreset and its infos["final_observation"] /
infos["final_info"] object arrays, whatever the given vector's mode.
Conversion: the loop stores obs[t], actions[t], rewards[t] and dones[t] = the done flag *before* step t; the
state after step t is implicit, obs[t + 1] (``next_obs`` after the last step), which is what the GAE block
reads as s_{t+1} (``values[t + 1]``, masked by 1 − dones[t + 1]). So next_obs = obs[t + 1], done = dones[t + 1]
(``next_done`` after the last step), terminated = done, truncated = False; episodes are the logged ones.
"""

from __future__ import annotations

import ast
import math
import textwrap
import types

import numpy as np
import torch
from gymnasium.wrappers import RecordEpisodeStatistics

from rlspec.thirdparty import LITERAL_CUT, Declared
from rlspec.thirdparty.wheel import read_source

LIBRARY = "cleanrl 1.2.0 (ppo.py; collector: ppo.py at fe8d8a03)"
CONTRACTS = ("gae", "collector")


def _gae_block() -> types.CodeType:
    """The compiled advantage block of ppo.py: the ``with`` statement whose body assigns lastgaelam."""
    source, filename = read_source("cleanrl", "1.2.0", "cleanrl/ppo.py")
    blocks = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.With)
              and any(isinstance(n, ast.Name) and n.id == "lastgaelam" for n in ast.walk(node))]
    if len(blocks) != 1:
        raise LookupError(f"{filename}: expected one `with` block computing lastgaelam, found {len(blocks)}")
    return compile(textwrap.dedent(ast.get_source_segment(source, blocks[0])), f"{filename}:{blocks[0].lineno}",
                   "exec")


_BLOCK = _gae_block()


class _Agent:
    """What the block asks of ppo.py's Agent: the value of the observation after the last step."""

    def __init__(self, value: torch.Tensor):
        self._value = value

    def get_value(self, next_obs) -> torch.Tensor:
        return self._value


def gae(reward, value, terminated, truncated, next_value, gamma, lam):
    T, batch = value.shape[0], value.shape[1:]
    flat = lambda t: t.reshape(t.shape[0], math.prod(t.shape[1:]))  # noqa: E731 - [T, *B] -> [T, N]
    done = 1 - (1 - flat(terminated).to(value.dtype)) * (1 - flat(truncated).to(value.dtype))  # [T, N]
    n = flat(value).shape[1]
    namespace = dict(
        torch=torch, device="cpu", next_obs=None,
        agent=_Agent(flat(next_value)[-1] if T else torch.zeros(n, dtype=value.dtype)),
        args=types.SimpleNamespace(num_steps=T, gamma=gamma, gae_lambda=lam),
        rewards=flat(reward), values=flat(value),
        dones=torch.cat([torch.zeros(1, n, dtype=value.dtype), done[:-1]]) if T else done,
        next_done=done[-1] if T else torch.zeros(n, dtype=value.dtype))
    exec(_BLOCK, namespace)  # noqa: S102 - ppo.py's own advantage block, unchanged
    return namespace["advantages"].reshape(T, *batch), namespace["returns"].reshape(T, *batch)


class _Gymnasium029Vector:
    """The contract's sub-envs, each in RecordEpisodeStatistics (ppo.py's make_env), stepped as gymnasium 0.29's
    SyncVectorEnv does: an env whose episode ended is reset in the same step, its last observation and info
    going to infos["final_observation"] / infos["final_info"] (object arrays [N], None elsewhere)."""

    def __init__(self, env_fns):
        self.envs = [RecordEpisodeStatistics(fn()) for fn in env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space

    def reset(self, seed: int | None = None):
        obs = [env.reset(seed=None if seed is None else seed + i)[0] for i, env in enumerate(self.envs)]
        return np.stack(obs), {}

    def step(self, actions: np.ndarray):
        n = self.num_envs
        obs, reward = [None] * n, np.zeros(n)
        terminations, truncations = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        infos: dict = {}
        for i, env in enumerate(self.envs):
            obs[i], reward[i], terminations[i], truncations[i], info = env.step(actions[i])
            if terminations[i] or truncations[i]:
                for key, value in (("final_observation", obs[i]), ("final_info", info)):
                    infos.setdefault(key, np.full(n, None, dtype=object))[i] = value
                    infos.setdefault(f"_{key}", np.zeros(n, dtype=bool))[i] = True
                obs[i], _ = env.reset()
        return np.stack(obs), reward, terminations, truncations, infos


class _PolicyAgent:
    """Stands in for ppo.py's Agent in the loop: actions from the contract's policy, log-probabilities and
    values 0 (the loop only stores them)."""

    def __init__(self, policy):
        self.policy = policy

    def get_action_and_value(self, x: torch.Tensor):
        action = torch.as_tensor(self.policy(x.numpy()))  # [N, 1]
        return action, torch.zeros(x.shape[0]), None, torch.zeros(x.shape[0], 1)


def _rollout(args, envs, agent, device="cpu"):
    """ppo.py lines 171-176, 179-183 and 192-215 (module docstring): the storage [num_steps, num_envs, ...],
    next_obs and next_done after the last step, and the logged episodes (env, return, length)."""
    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.num_envs).to(device)
    episodes = []  # changed: the log of lines 210-215

    for step in range(0, args.num_steps):
        global_step += args.num_envs
        obs[step] = next_obs
        dones[step] = next_done

        # ALGO LOGIC: action logic
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        actions[step] = action
        logprobs[step] = logprob

        # TRY NOT TO MODIFY: execute the game and log data.
        next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
        next_done = np.logical_or(terminations, truncations)
        rewards[step] = torch.tensor(reward).to(device).view(-1)
        next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(next_done).to(device)

        if "final_info" in infos:
            for i, info in enumerate(infos["final_info"]):  # changed: enumerate, for the env index
                if info and "episode" in info:
                    episodes.append((i, info["episode"]["r"], info["episode"]["l"]))  # changed: print, writer
    return dict(obs=obs, actions=actions, rewards=rewards, dones=dones, next_obs=next_obs,
                next_done=next_done), episodes


def collect(envs, obs, policy, steps):
    if steps == 0:
        return dict(obs=[], action=[], reward=[], next_obs=[], terminated=[], truncated=[], episodes=[])
    args = types.SimpleNamespace(num_steps=steps, num_envs=envs.num_envs, seed=0)
    stored, episodes = _rollout(args, _Gymnasium029Vector(envs.env_fns), _PolicyAgent(policy))
    following = torch.cat([stored["obs"][1:], stored["next_obs"][None]])  # [T, N, 4]: obs[t + 1]
    done = torch.cat([stored["dones"][1:], stored["next_done"][None]]).bool()  # [T, N]: dones[t + 1]
    rows = dict(obs=stored["obs"], action=stored["actions"], reward=stored["rewards"], next_obs=following,
                terminated=done, truncated=torch.zeros_like(done))
    return dict({k: v.flatten(0, 1) for k, v in rows.items()}, episodes=episodes)


NO_BOOTSTRAP = ("ppo.py ends the episode on done = terminated or truncated and never bootstraps a time limit "
                "(spec/gae.py names CleanRL's convention); bootstrap V(final_observation) on truncation as SB3 does")
NO_NEXT_STATE = ("ppo.py stores no next state: s_{t+1} is the next row's obs[t + 1] (the GAE block's values[t + 1], "
                 "masked by 1 − dones[t + 1]), at an episode end the next episode's reset observation; "
                 "infos[\"final_observation\"] is never read, so a truncated step cannot bootstrap from its real "
                 "final state")
DECLARED = {
    "COLL-2": Declared("difference", NO_NEXT_STATE),
    "COLL-5": Declared("difference", "ppo.py keeps one flag, next_done = np.logical_or(terminations, truncations) "
                                     "(line 206): a time limit is stored, and bootstrapped, as a terminal "
                                     "(terminated = done, truncated = False here)"),
    "GAE-13": Declared("difference", f"ppo.py's advantage loop {LITERAL_CUT}"),
    "GAE-1": Declared("difference", NO_BOOTSTRAP + " (advantages differ on every truncated episode)"),
    "GAE-3": Declared("difference", NO_BOOTSTRAP + " (next_value at a truncated step changes nothing)"),
    "GAE-12": Declared("difference", "ppo.py's args come from tyro as Python floats; handed np.float32 values "
                                     "the block computes args.gamma * args.gae_lambda in float32 (NEP 50), "
                                     "other bits"),
    "GAE-9": Declared("accepts", "a script block, no input checks: a shape mismatch fails in torch broadcasting "
                                 "without naming the argument"),
    "GAE-10": Declared("accepts", "no input checks: args.gamma and args.gae_lambda outside [0, 1] are used as given"),
    "GAE-11": Declared("accepts", "no input checks: NaN/Inf rewards and values propagate into the advantages"),
}
