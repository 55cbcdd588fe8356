"""Planted bugs for contract ``collector``: a loop over the vector env with one switch per known collector bug
(each entry turns exactly one on). Each names the clause that must catch it; ``spared`` clauses must pass."""

from __future__ import annotations

import types

import numpy as np
from planted import Planted

from rlspec.contracts.collector import FIELDS, NEXT_STEP, SAME_STEP, autoreset_mode, real_next_obs


def _collector(*, final_obs=True, final_obs_on_truncation=True, mode=None, merged_flags=False, keep_return=False,
               previous_action=False):
    """The reference loop, with switches: read info["final_obs"] (at all, or only where terminated), take the
    autoreset mode from the env or as given, store terminated | truncated as terminated, keep the episode return
    across episodes, store the previous step's action."""

    def collect(envs, obs, policy, steps):
        run_mode = mode or autoreset_mode(envs)
        n = envs.num_envs
        rows = {k: [] for k in FIELDS}
        episodes, ret, length = [], np.zeros(n), np.zeros(n, dtype=np.int64)
        resetting, last_action = np.zeros(n, dtype=bool), None
        for _ in range(steps):
            action = np.asarray(policy(obs))
            next_obs, reward, terminated, truncated, info = envs.step(action)
            real = real_next_obs(run_mode, next_obs, info) if final_obs else np.array(next_obs)
            if not final_obs_on_truncation:
                real = np.where(np.asarray(terminated)[:, None], real, next_obs)
            stored = last_action if previous_action and last_action is not None else action
            for i in np.flatnonzero(~resetting):
                term = terminated[i] or (merged_flags and truncated[i])
                trunc = truncated[i] and not merged_flags
                for k, v in zip(FIELDS, (obs[i], stored[i], reward[i], real[i], term, trunc)):
                    rows[k].append(v)
                ret[i] += reward[i]
                length[i] += 1
                if terminated[i] or truncated[i]:
                    episodes.append((int(i), float(ret[i]), int(length[i])))
                    ret[i] = ret[i] if keep_return else 0.0
                    length[i] = 0
            ended = np.asarray(terminated) | np.asarray(truncated)
            resetting = ended if run_mode == NEXT_STEP else np.zeros(n, dtype=bool)
            obs, last_action = next_obs, action
        return dict({k: np.asarray(v) for k, v in rows.items()}, episodes=episodes)

    return types.SimpleNamespace(collect=collect)


OTHERS = ("COLL-1", "COLL-2", "COLL-3", "COLL-4", "COLL-5", "COLL-6")


def _spared(*failing: str) -> tuple[str, ...]:
    return tuple(c for c in OTHERS if c not in failing)


PLANTED_COLLECTOR = (
    Planted("collector: next_obs is the returned observation (final_obs not read)", "collector",
            _collector(final_obs=False), "COLL-2", "reset observation", _spared("COLL-2")),
    Planted("collector: final_obs read only where terminated (a truncation bootstraps the reset obs)", "collector",
            _collector(final_obs_on_truncation=False), "COLL-2", "truncated=True", _spared("COLL-2")),
    Planted("collector: a next-step env read as same-step (the reset step stored)", "collector",
            _collector(mode=SAME_STEP), "COLL-3", "final observation", ("COLL-5",)),
    Planted("collector: a same-step env read as next-step (each new episode's first step dropped)", "collector",
            _collector(mode=NEXT_STEP), "COLL-4", "lost", ("COLL-1", "COLL-3", "COLL-5")),
    Planted("collector: done = terminated or truncated stored as terminated", "collector",
            _collector(merged_flags=True), "COLL-5", "(terminated, truncated)", _spared("COLL-5")),
    Planted("collector: the episode return carried into the next episode", "collector",
            _collector(keep_return=True), "COLL-6", "episodes (return, length)", _spared("COLL-6")),
    Planted("collector: the previous step's action stored", "collector", _collector(previous_action=True),
            "COLL-1", "action", _spared("COLL-1")),
)
