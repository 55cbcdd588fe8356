"""rlspec/envs/safety_frames.py on SafetyPointGoal1-v0: frames rendered headless at the asked size, labels from
the env's true state that agree with the env's own cost (a step with cost > 0 is inside a hazard, so it is
labelled "hazard"), reproducible from the seed. Needs safety_gymnasium and MUJOCO_GL=egl or osmesa."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlspec.envs.safety_gym import import_safety_gymnasium

try:
    import_safety_gymnasium()
except ModuleNotFoundError as err:
    pytest.skip(f"safety_gymnasium is not installed: {err}", allow_module_level=True)
if os.environ.get("MUJOCO_GL") not in ("egl", "osmesa"):
    pytest.skip("headless MuJoCo rendering needs MUJOCO_GL=egl or osmesa (nox -s safety sets egl)",
                allow_module_level=True)

from rlspec.envs.safety_frames import safety_frames  # noqa: E402


def test_frames_labels_and_costs_agree_and_repeat():
    frames, labels, costs, episodes = safety_frames("SafetyPointGoal1-v0", 600, 32, seed=4)
    assert frames.shape == (600, 32, 32, 3) and frames.dtype == np.uint8 and frames.std() > 0
    assert set(labels) == {"clear", "goal", "hazard"}  # the scripted modes reach all three
    inside = costs > 0
    assert inside.any() and all(labels[i] == "hazard" for i in np.flatnonzero(inside))
    again = safety_frames("SafetyPointGoal1-v0", 600, 32, seed=4)
    assert np.array_equal(again[0], frames) and again[1] == labels and np.array_equal(again[2], costs)
    # one episode per layout: 100 scripted steps each, and a new one wherever the env ended one early
    assert episodes[0] == 0 and (np.diff(episodes) >= 0).all() and np.array_equal(again[3], episodes)
    assert episodes[-1] + 1 >= 600 // 100 and set(np.diff(episodes)) <= {0, 1}
