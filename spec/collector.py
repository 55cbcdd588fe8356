"""Contract ``collector``: a vector-env collector turns env steps into stored transitions, in both of Gymnasium
1.x's autoreset modes.

Sources: Gymnasium 1.x vector API, "Autoreset Mode": in next-step mode (the default) the step after an episode
ends resets that sub-env and returns its first observation with reward 0 and both flags False, the action
ignored; in same-step mode the step that ends an episode resets at once, returns the next episode's first
observation and puts the real last one in ``info["final_obs"]`` (mask ``info["_final_obs"]``). Pardo et al. 2018
(a truncated step bootstraps from its real final state); Stable-Baselines3's VecEnv keeps it in
``infos[i]["terminal_observation"]`` (same-step).

Interface
---------
    collect(envs, obs, policy, steps) -> mapping
        envs     a gymnasium.vector.SyncVectorEnv of N scripted sub-envs, already reset; its mode is
                 ``envs.metadata["autoreset_mode"]``; ``envs.env_fns`` builds more of the same sub-envs for a
                 collector that runs its own vector (they log into the same record)
        obs      [N, 4] float64, what reset returned
        policy   obs [N, 4] -> actions [N, 1] float32 in [−1, 1]; a collector may act with its own policy
        steps    how many vector steps to take
    returns      obs [M, 4], action [M, 1], reward [M], next_obs [M, 4], terminated [M], truncated [M] (numpy
                 arrays, torch tensors or lists; one row per stored transition, M rows in any order) and
                 "episodes": [(env index, return, length)], one per finished episode, in finishing order

The scripted env
----------------
An observation is (env index, episode index, step t in the episode, kind): kind 0 is a reset observation,
1 a state inside the episode, 2 the final observation. Each episode's length (1..5) and ending (terminated,
truncated, or both) are drawn for the case. The reward of a step is 100·episode + t + a/2, so a stored
reward tells which state and action it came from. Every real step is recorded (obs, action, reward, flags,
the real next state); a next-step reset is not a step.

A transition's next state is s_{t+1} of the same episode, or the final observation at its last step: that
is what a truncated step bootstraps from, and what a terminal step ends in. The reset observation is the
next episode's first obs and never anyone's next state.
"""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from rlspec.contracts.collector import FIELDS, MODES, NEXT_STEP, SAME_STEP
from rlspec.spec.core import Contract, Property, by_category, fail

CLAUSES = {
    "COLL-1": "every stored transition is a step the env took: its obs, action and reward are those of one "
              "recorded step (reward = 100·episode + t + a/2; a stored action outside [−1, 1] counts as its clip, "
              "the Gaussian-policy convention of storing the sample the env gets clipped)",
    "COLL-2": "next_obs is the state the step reached: s_{t+1} of the same episode, or the final observation at an "
              "episode's last step (terminated or truncated), never the next episode's reset observation, in both "
              "autoreset modes",
    "COLL-3": "an episode starts from its reset observation: no stored transition starts from a final observation "
              "(next-step mode: the step that only resets a sub-env is not a transition)",
    "COLL-4": "every step the env took is stored exactly once: none lost, none duplicated",
    "COLL-5": "terminated and truncated are stored as the env set them (a step with both keeps both)",
    "COLL-6": "the episodes reported are the env's finished episodes, per env in order: return = the sum of its "
              "rewards, length = its number of steps",
}

CATEGORIES = by_category(maths=tuple(CLAUSES))
_SB3 = ("Stable-Baselines3's RolloutBuffer stores a different representation: no next state, done = terminated or "
        "truncated, and γ·V(terminal_observation) folded into a time limit's reward. That is a correct GAE input, "
        "but not the transitions the env produced; ")
_LIBRARIES = ("Both adapted library collectors store another representation: Stable-Baselines3's RolloutBuffer keeps "
              "no next state and folds γ·V(terminal_observation) into a time limit's reward (a correct GAE input); "
              "CleanRL's ppo.py loop reads the next row's observation as the next state (the reset one after an "
              "end) and treats a truncation as a terminal. Both merge the flags into done = terminated or truncated; ")
RATIONALE = {
    "COLL-1": _SB3 + "the clause asks for the env's reward so that any consumer (a replay, V-trace, a cost "
                     "critic) can bootstrap with its own critic and discount.",
    "COLL-2": _LIBRARIES + "the clause asks for the final observation because a truncated step's target needs "
                           "it, and an off-policy or replayed consumer cannot recompute it later.",
    "COLL-5": _LIBRARIES + "the clause keeps the two flags apart because a truncation must bootstrap and a "
                           "terminal must not; merged, the difference survives only in SB3's reward fold.",
}

INTERFACE = ("collect",)
"""
collect(envs: gymnasium.vector.VectorEnv, obs [N, 4], policy, steps: int) -> {obs, action, reward, next_obs,
        terminated, truncated: [M, ...]; episodes: [(env, return, length)]}
"""

ENDINGS = ("terminated", "truncated", "both")
DEFAULT_EPISODE = (3, "truncated")  # after the drawn script
RESET, MIDDLE, FINAL = 0.0, 1.0, 2.0


# --------------------------------------------------------------------------------------------------
# The scripted env and its record
# --------------------------------------------------------------------------------------------------
@functools.cache
def _gymnasium():
    """gymnasium >= 1.1 (its vector API's autoreset modes), imported when a collector is first checked."""
    try:
        import gymnasium
    except ImportError:
        raise ImportError("contract collector needs gymnasium >= 1.1: pip install 'rlspec[gym]'") from None
    if not hasattr(gymnasium.vector, "AutoresetMode"):
        raise ImportError(f"contract collector needs gymnasium >= 1.1 (its autoreset modes), found "
                          f"{gymnasium.__version__}: pip install 'gymnasium>=1.1'")
    return gymnasium


@functools.cache
def scripted_env_class():
    """ScriptedEnv, a gymnasium.Env: sub-env ``index`` plays episodes of ``script[k]`` = (length, ending) steps and
    writes every step to ``record``."""
    gym = _gymnasium()

    class ScriptedEnv(gym.Env):
        metadata: dict = {"render_modes": []}
        observation_space = gym.spaces.Box(-1.0, 1e6, (4,), np.float64)
        action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def __init__(self, index: int, script: list[tuple[int, str]], record: list[dict]):
            self.index, self.script, self.record = index, script, record
            self.episode, self.t = -1, 0

        def _obs(self, kind: float) -> np.ndarray:
            return np.array([self.index, self.episode, self.t, kind], dtype=np.float64)

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            super().reset(seed=seed)
            self.episode, self.t = self.episode + 1, 0
            return self._obs(RESET), {}

        def step(self, action):
            length, ending = self.script[self.episode] if self.episode < len(self.script) else DEFAULT_EPISODE
            a = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
            before, reward = self._obs(RESET if self.t == 0 else MIDDLE), 100.0 * self.episode + self.t + a / 2
            self.t += 1
            last = self.t == length
            terminated, truncated = last and ending != "truncated", last and ending != "terminated"
            after = self._obs(FINAL if last else MIDDLE)
            self.record.append(dict(env=self.index, episode=self.episode, t=self.t - 1, obs=before, action=a,
                                    reward=reward, terminated=terminated, truncated=truncated, next_obs=after))
            return after, reward, terminated, truncated, {}

    return ScriptedEnv


def make_envs(case: dict) -> tuple[Any, list[dict]]:
    """(a gymnasium.vector.SyncVectorEnv of the case's sub-envs in its mode, the record they write)."""
    gym, env_class = _gymnasium(), scripted_env_class()
    record: list[dict] = []
    fns = [(lambda i=i: env_class(i, case["scripts"][i], record)) for i in range(case["num_envs"])]
    mode = {NEXT_STEP: gym.vector.AutoresetMode.NEXT_STEP, SAME_STEP: gym.vector.AutoresetMode.SAME_STEP}
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode[case["mode"]]), record


def policy_of(seed: int):
    """A deterministic policy: a_i = sin(w·obs_i) [N, 1] float32, w drawn from ``seed``."""
    w = np.random.default_rng(seed).normal(size=4)
    return lambda obs: np.sin(np.asarray(obs, dtype=np.float64) @ w).astype(np.float32).reshape(-1, 1)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
episodes = st.lists(st.tuples(st.integers(1, 5), st.sampled_from(ENDINGS)), min_size=1, max_size=6)


@st.composite
def cases(draw):
    """N scripted sub-envs (their episodes' lengths and endings), a mode, a number of steps, a policy seed."""
    n = draw(st.integers(1, 3))
    return dict(num_envs=n, mode=draw(st.sampled_from(MODES)), steps=draw(st.integers(0, 16)),
                scripts=[draw(episodes) for _ in range(n)], seed=draw(st.integers(0, 2**31 - 1)))


def _pinned(mode: str) -> dict:
    """Length-1 episodes (an end at t = 0), both flags on one step, an episode still running at the end."""
    return dict(num_envs=3, mode=mode, steps=12, seed=0,
                scripts=[[(1, "truncated"), (1, "terminated"), (2, "both")], [(4, "truncated"), (3, "terminated")],
                         [(2, "both"), (5, "truncated")]])


EXAMPLES = (_pinned(NEXT_STEP), _pinned(SAME_STEP))


# --------------------------------------------------------------------------------------------------
# Running a collector and reading what it stored
# --------------------------------------------------------------------------------------------------
def _array(clause: str, out: Any, name: str) -> np.ndarray:
    if name not in out:
        fail(clause, f"collect returned no {name!r} (keys {sorted(out)})")
    x = out[name]
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _run(clause: str, impl, case: dict) -> tuple[dict, list[dict]]:
    envs, record = make_envs(case)
    obs, _ = envs.reset(seed=case["seed"])
    out = impl.collect(envs, obs, policy_of(case["seed"]), case["steps"])
    rows = {k: _array(clause, out, k) for k in FIELDS}
    m = rows["reward"].reshape(-1).shape[0]
    for k, width in (("obs", 4), ("next_obs", 4), ("action", 1)):
        x = rows[k]
        rows[k] = x.reshape(m, -1).astype(np.float64) if x.size else np.zeros((0, width))
        if rows[k].shape != (m, width):
            fail(clause, f"collect returned {k!r} of shape {tuple(x.shape)}, expected [{m}, {width}]")
    for k in ("reward", "terminated", "truncated"):
        rows[k] = rows[k].reshape(-1)
        if rows[k].shape[0] != m:
            fail(clause, f"collect returned {k!r} with {rows[k].shape[0]} rows, 'reward' with {m}")
    rows["episodes"] = out.get("episodes")
    return rows, record


def _key(obs: np.ndarray) -> tuple[int, int, int]:
    return int(obs[0]), int(obs[1]), int(obs[2])  # env, episode, t


def _steps(record: list[dict]) -> dict[tuple[int, int, int], dict]:
    return {(s["env"], s["episode"], s["t"]): s for s in record}


def _real_rows(rows: dict) -> list[int]:
    """Rows that start from a state the env stepped from (a final observation never is: COLL-3)."""
    return [i for i in range(len(rows["reward"])) if rows["obs"][i, 3] != FINAL]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)  # a float32 store rounds by < 1e-7 relative


def _inputs(case: dict) -> dict:
    return {k: case[k] for k in ("num_envs", "mode", "steps", "scripts", "seed")}


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_steps(impl, **case):
    rows, record = _run("COLL-1", impl, case)
    steps = _steps(record)
    for i in _real_rows(rows):
        step = steps.get(_key(rows["obs"][i]))
        if step is None:
            fail("COLL-1", f"row {i}: obs {rows['obs'][i].tolist()} is no state the env stepped from", **_inputs(case))
        for name, got, want in (("action", float(np.clip(rows["action"][i, 0], -1.0, 1.0)), step["action"]),
                                ("reward", float(rows["reward"][i]), step["reward"])):
            if not _close(got, want):
                fail("COLL-1", f"row {i} (env, episode, t = {_key(rows['obs'][i])}): {name} {got!r}, the env's step "
                               f"had {want!r}", **_inputs(case))


def check_next_obs(impl, **case):
    rows, record = _run("COLL-2", impl, case)
    steps = _steps(record)
    for i in _real_rows(rows):
        step = steps.get(_key(rows["obs"][i]))
        if step is not None and not np.array_equal(rows["next_obs"][i], step["next_obs"]):
            what = "the next episode's reset observation" if rows["next_obs"][i, 3] == RESET else "another state"
            fail("COLL-2", f"row {i} (env, episode, t = {_key(rows['obs'][i])}, terminated={step['terminated']}, "
                           f"truncated={step['truncated']}): next_obs {rows['next_obs'][i].tolist()} is {what}, the "
                           f"step reached {step['next_obs'].tolist()}", **_inputs(case))


def check_starts(impl, **case):
    rows, _ = _run("COLL-3", impl, case)
    final = [i for i in range(len(rows["reward"])) if rows["obs"][i, 3] == FINAL]
    if final:
        i = final[0]
        fail("COLL-3", f"{len(final)} stored transitions start from a final observation (first: row {i}, obs "
                       f"{rows['obs'][i].tolist()}, reward {float(rows['reward'][i])!r}): in {case['mode']} mode "
                       "the next episode starts from its reset observation", **_inputs(case))


def check_each_step_once(impl, **case):
    rows, record = _run("COLL-4", impl, case)
    stored = Counter(_key(rows["obs"][i]) for i in _real_rows(rows))
    taken = Counter((s["env"], s["episode"], s["t"]) for s in record)
    lost = sorted(taken - stored)
    extra = sorted(stored - taken)
    if lost or extra:
        fail("COLL-4", f"{len(record)} env steps, {sum(stored.values())} stored rows: lost (env, episode, t) "
                       f"{lost[:5]}, stored twice or never taken {extra[:5]}", **_inputs(case))


def check_flags(impl, **case):
    rows, record = _run("COLL-5", impl, case)
    steps = _steps(record)
    for i in _real_rows(rows):
        step = steps.get(_key(rows["obs"][i]))
        got = (bool(rows["terminated"][i]), bool(rows["truncated"][i]))
        if step is not None and got != (step["terminated"], step["truncated"]):
            fail("COLL-5", f"row {i} (env, episode, t = {_key(rows['obs'][i])}): (terminated, truncated) = {got}, "
                           f"the env set {(step['terminated'], step['truncated'])}", **_inputs(case))


def _finished(record: list[dict]) -> dict[int, list[tuple[float, int]]]:
    """env -> (return, length) of each episode that ended, in order."""
    ret, length, out = defaultdict(float), defaultdict(int), defaultdict(list)
    for s in record:
        key = (s["env"], s["episode"])
        ret[key] += s["reward"]
        length[key] += 1
        if s["terminated"] or s["truncated"]:
            out[s["env"]].append((ret[key], length[key]))
    return out


def check_episodes(impl, **case):
    rows, record = _run("COLL-6", impl, case)
    if rows["episodes"] is None:
        fail("COLL-6", "collect returned no 'episodes'", **_inputs(case))
    reported = defaultdict(list)
    for env, ret, length in rows["episodes"]:
        reported[int(env)].append((float(ret), int(length)))
    finished = _finished(record)
    for env in sorted(set(finished) | set(reported)):
        want, got = finished.get(env, []), reported.get(env, [])
        if len(got) != len(want) or any(g[1] != w[1] or not _close(g[0], w[0]) for g, w in zip(got, want)):
            fail("COLL-6", f"env {env}: episodes (return, length) reported {got}, the env's {want}", **_inputs(case))


PROPERTIES = (
    Property("COLL-1", check_steps, cases(), EXAMPLES, INTERFACE),
    Property("COLL-2", check_next_obs, cases(), EXAMPLES, INTERFACE),
    Property("COLL-3", check_starts, cases(), EXAMPLES, INTERFACE),
    Property("COLL-4", check_each_step_once, cases(), EXAMPLES, INTERFACE),
    Property("COLL-5", check_flags, cases(), EXAMPLES, INTERFACE),
    Property("COLL-6", check_episodes, cases(), EXAMPLES, INTERFACE),
)

CONTRACT = Contract("collector", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
