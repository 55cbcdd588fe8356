"""benchmarks/bonus/anchors/run_sb3.py's env is the token learner's: the same first observations for the same (seed,
env index) as rlspec's MetaWorldTokenVector (the eval env's index included), the same episode limit, and SB3's
`is_success` beside Meta-World's `success`. Needs the `bonus` extra (cpu_gate installs it); no SB3."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bonus.anchors import run_sb3 as sb3mw

metaworld = pytest.importorskip("metaworld")


def test_the_anchor_steps_the_token_learners_envs():
    from rlspec.envs.metaworld_tokens import MetaWorldTokenVector

    ours = MetaWorldTokenVector("metaworld:reach-v3", 3, seed=7, episode_steps=sb3mw.EPISODE_STEPS).reset()
    theirs = np.stack([sb3mw.make_env("reach-v3", 7, i).reset()[0] for i in range(3)])
    np.testing.assert_array_equal(theirs.astype(np.float32), ours)  # the token vector keeps float32
    evaluated = MetaWorldTokenVector("metaworld:reach-v3", 1, seed=7, first_env=sb3mw.EVAL_ENV).reset()
    first = sb3mw.make_env("reach-v3", 7, sb3mw.EVAL_ENV).reset()[0]
    np.testing.assert_array_equal(first[None].astype(np.float32), evaluated)


def test_episodes_end_at_the_limit_with_is_success():
    env = sb3mw.make_env("reach-v3", 0, 0)
    env.reset()
    for t in range(1, sb3mw.EPISODE_STEPS + 1):
        _, _, terminated, truncated, info = env.step(np.zeros(4, dtype=np.float32))  # standing still: no success
        assert info["is_success"] is False and not terminated and truncated == (t == sb3mw.EPISODE_STEPS)


def test_token_actions_are_the_token_learners():
    """--actions tokens: a MultiDiscrete of N_BINS tokens per dimension, each stepping the env with the value the
    token learner's vector gives it (the same next observations, token for token)."""
    from rlspec.envs.metaworld_tokens import N_BINS, MetaWorldTokenVector

    env = sb3mw.make_env("reach-v3", 4, 0, tokens=True)
    ours = MetaWorldTokenVector("metaworld:reach-v3", 1, seed=4, episode_steps=sb3mw.EPISODE_STEPS)
    assert list(env.action_space.nvec) == [N_BINS] * ours.action_dim
    np.testing.assert_array_equal(env.reset()[0].astype(np.float32), ours.reset()[0])
    rng = np.random.default_rng(0)
    for _ in range(5):
        tokens = rng.integers(0, N_BINS, ours.action_dim)
        theirs = env.step(tokens)[0]
        np.testing.assert_array_equal(theirs.astype(np.float32), ours.step(tokens[None]).obs[0])
    assert sb3mw.differences("tokens") == sb3mw.DIFFERENCES and sb3mw.differences("continuous")[0] == sb3mw.CONTINUOUS
