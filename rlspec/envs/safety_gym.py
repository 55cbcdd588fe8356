"""Safety-Gymnasium environments (SafetyPointGoal1-v0, SafetyCarGoal1-v0, ...) for the safe-RL engines.

safety-gymnasium 1.0.0, the only PyPI release, does not import on Python ≥ 3.11: its task dataclasses
have numpy-array defaults, which Python 3.11's dataclasses reject ("mutable default <class
'numpy.ndarray'> ... use default_factory"). ``import_safety_gymnasium`` imports it with a shim that turns
each such default into ``default_factory=<copy of the array>`` for the duration of the import only (each
instance then owns its array, where 3.10 shared one object between instances; nothing in the package
mutates them in place). Install recipe (the ``safety`` extra and ``nox -s safety``):
``pip install safety-gymnasium==1.0.0 --no-deps`` plus gymnasium 0.28.1, gymnasium-robotics 1.2.2,
mujoco 2.3.3, numpy < 2, xmltodict, pyyaml, imageio. Offscreen frames on CPU need ``MUJOCO_GL=egl``
(Debian libegl1 libegl-mesa0 libgl1-mesa-dri) or ``MUJOCO_GL=osmesa`` (libosmesa6).

``make_vector(env_id, num_envs, seed)`` also serves ``ToyGoal-v0`` (rlspec/envs/toy_safe.py), which needs
no third party.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os
from typing import Iterator

import numpy as np

from rlspec.envs.safe_vector import SafeVectorEnv
from rlspec.envs.toy_safe import ToyGoal

TOY_ENVS = {"ToyGoal-v0": ToyGoal}


@contextlib.contextmanager
def _ndarray_defaults_as_factories() -> Iterator[None]:
    """While active, a dataclass field whose class-level default is an ndarray gets a default_factory
    returning a copy of it (what Python < 3.11 allowed as a shared default)."""
    original = dataclasses._get_field  # the one place dataclasses reads a field's default

    def get_field(cls, name, *args, **kwargs):
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, np.ndarray):
            setattr(cls, name, dataclasses.field(default_factory=functools.partial(np.copy, default)))
        return original(cls, name, *args, **kwargs)

    dataclasses._get_field = get_field
    try:
        yield
    finally:
        dataclasses._get_field = original


def import_safety_gymnasium():
    """The ``safety_gymnasium`` module, imported through the Python ≥ 3.11 shim (module docstring)."""
    import sys

    if "safety_gymnasium" in sys.modules:
        return sys.modules["safety_gymnasium"]
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"  # headless: MuJoCo reads it once, when it is first imported
    try:
        with _ndarray_defaults_as_factories():
            import safety_gymnasium
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "safety_gymnasium is not installed: see rlspec/envs/safety_gym.py for the recipe "
            "(pip install -e '.[safety]' then pip install safety-gymnasium==1.0.0 --no-deps; or nox -s safety)"
        ) from err
    return safety_gymnasium


def env_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot be made here (a sentence for the user), or None."""
    if env_id in TOY_ENVS:
        return None
    try:
        registered = import_safety_gymnasium().utils.registration.safe_registry
    except ModuleNotFoundError as err:
        return f"{env_id!r} is not a built-in env ({', '.join(TOY_ENVS)}) and needs Safety-Gymnasium: {err}"
    if env_id in registered:
        return None
    close = difflib.get_close_matches(env_id, sorted(registered), n=3)
    return (f"{env_id!r} is not a Safety-Gymnasium env" + (f"; did you mean {', '.join(close)}?" if close else
                                                           f" ({len(registered)} are, e.g. SafetyPointGoal1-v0)"))


def versions() -> dict[str, str]:
    """Versions of the simulator stack, for a run's versions.json (empty if it is not installed)."""
    from importlib import metadata

    out = {}
    for dist in ("safety-gymnasium", "gymnasium", "mujoco"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def make_env(env_id: str, forced_cost: float = 0.0, render_mode: str | None = None, **kwargs):
    """One env with Safety-Gymnasium's 6-tuple step API. ``forced_cost`` adds a constant cost per step."""
    if env_id in TOY_ENVS:
        size = {k: v for k, v in kwargs.items() if k in ("width", "height")}  # ToyGoal takes only the frame size
        return TOY_ENVS[env_id](forced_cost=forced_cost, **size)
    env = import_safety_gymnasium().make(env_id, render_mode=render_mode, **kwargs)
    return ForcedCost(env, forced_cost) if forced_cost else env


class ForcedCost:
    """Adds ``extra`` to every step's cost (a test aid: the Lagrange multiplier must rise)."""

    def __init__(self, env, extra: float):
        self.env, self.extra = env, extra
        self.observation_space, self.action_space = env.observation_space, env.action_space

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, cost, terminated, truncated, info = self.env.step(action)
        return obs, reward, float(cost) + self.extra, terminated, truncated, info

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


def make_vector(env_id: str, num_envs: int, seed: int, forced_cost: float = 0.0, first_index: int = 0,
                **render) -> SafeVectorEnv:
    """``num_envs`` copies of ``env_id`` in one process (rlspec/envs/safe_vector.py), global indices from
    ``first_index``; ``render``: render_mode="rgb_array", width, height (and Safety-Gymnasium's camera_name)."""
    return SafeVectorEnv(functools.partial(make_env, env_id, forced_cost, **render), num_envs, seed, first_index)
