"""Planted bugs for ``room_env``: the Warp twin or the PyBoy reference with exactly one bug each, the way an
emulator port or an env wrapper typically gets it wrong (collision, palette, bit order, flags, seeding,
validation, the frame-skip protocol).

Table bugs replace one of the Warp env's data tables (``_tables``); output bugs post-process what a correct
env produced; PyBoy bugs swap in a game whose ``shades`` (or frame skip) is wrong.
"""

from __future__ import annotations

import types

import numpy as np
import torch
from planted import Planted

from rlspec.contracts import room_env as game
from rlspec.envs.pyboy_env import PyBoyGame, screen_shades
from rlspec.envs.room import pyboy_room, warp_room
from rlspec.reference.packed2 import unpack

W = warp_room.RoomVecEnv


def _impl(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(RoomVecEnv=cls)


def _with_table(name: str, edit):
    class Env(W):
        def _tables(self):
            tables = super()._tables()
            return {**tables, name: edit(tables[name].clone())}
    return Env


def _collide_one_column_off(cells):  # tests the cell to the right of the target
    return torch.roll(cells, -1, dims=1)


def _obstacles_passable(cells):
    return torch.where(cells == game.OBSTACLE, game.FLOOR, cells)


def _door_is_floor(cells):
    return torch.where(cells == game.DOOR, game.FLOOR, cells)


def _inverted_room(room):  # shade = 3 - v: white walls on a black floor
    return 3 - room


class _MsbFirst(W):  # the first pixel of a byte in the most significant pair (numpy.packbits' order)
    def _render(self, out, *names):
        super()._render(out, *names)
        v = unpack(out)  # [N, 1, 72, 80]
        out.copy_(v[..., 0::4] << 6 | v[..., 1::4] << 4 | v[..., 2::4] << 2 | v[..., 3::4])


class _TruncationAsTermination(W):
    def step(self, actions, out=None, final_out=None):
        s = super().step(actions, out, final_out)
        s.terminated.logical_or_(s.truncated)
        s.truncated.zero_()
        return s


class _SeedIgnored(W):  # validated, then every episode uses seed 0
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.seed = 0


class _UncheckedActions(W):  # invalid ids counted on the device and played as no-ops, never reported
    def __init__(self, *args, **kw):
        super().__init__(*args, check_actions=False, **kw)


class _StepsBeforeChecking(W):  # advances the game with clamped actions, then validates
    def step(self, actions, out=None, final_out=None):
        if isinstance(actions, torch.Tensor) and actions.shape == (self.num_envs,) and not actions.is_floating_point():
            super().step(actions.clamp(0, game.NUM_ACTIONS - 1))
        return super().step(actions, out, final_out)


class _ScenarioIgnored(W):  # standing-still plays as room-exit
    def __init__(self, num_envs, scenario="room-exit", **kw):
        super().__init__(num_envs, "room-exit", **kw)
        self.scenario_asked = scenario


def _pyboy_with(shades=None, frameskip=None):
    class Game(PyBoyGame):
        def shades(self):
            return super().shades() if shades is None else shades(self)

    class Task(pyboy_room.RoomTask):
        min_frameskip = 1

    class Env(pyboy_room.RoomVecEnv):
        @staticmethod
        def _game(scenario, fs):
            return Game(pyboy_room.ROM, Task(scenario), frameskip=frameskip or fs)
    return Env


SWAPPED_R = np.full(256, 255, dtype=np.uint8)
SWAPPED_R[[255, 153, 85, 0]] = [0, 2, 1, 3]  # 153 and 85 exchanged


def _swapped_shades(g):
    return SWAPPED_R[g.pyboy.screen.ndarray[:, :, 0]]


def _odd_phase(g):  # shifted by one pixel: the env's every-second-pixel then starts at (1, 1)
    return np.roll(screen_shades(g.pyboy), (-1, -1), axis=(0, 1))


class _RenderBeforeReset(W):  # render() draws the frame an env ended on, not the next episode's first
    def render(self, out):
        self._render(out, "final_row", "final_col", "final_steps")
        return out


class _ResetKeepsReward(W):  # reset() restores the flags and cells but leaves the last step's reward
    def reset(self, out=None):
        kept = self.reward.clone()
        step = super().reset(out)
        self.reward.copy_(kept)
        return step


class _ResetKeepsEpisodeIds(W):  # reset() places the players again but keeps counting episodes
    def reset(self, out=None):
        kept = self.state["episode"].clone()
        step = super().reset(out)
        self.state["episode"].copy_(kept)
        return step


class _DefaultSeedOne(W):  # the documented default seed is 0
    def __init__(self, num_envs, scenario="room-exit", *, step_limit=game.STEP_LIMIT, seed=1, **kw):
        super().__init__(num_envs, scenario, step_limit=step_limit, seed=seed, **kw)


class _RenderUnchecked(W):  # render(out) launches on whatever it is given
    def render(self, out):
        self._render(out, "row", "col", "steps")
        return out


class _StepsBeforeReset(W):  # an env never reset steps from its zeroed state (row 0, col 0: inside a wall)
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._started = True


PLANTED_ROOM_ENV = (
    Planted("collision one column off", "room_env", _impl(_with_table("cells", _collide_one_column_off)),
            "ROOM-3", "final_out differs", ("ROOM-2", "ROOM-6", "ROOM-7")),
    Planted("collision one column off (twin)", "room_env", _impl(_with_table("cells", _collide_one_column_off)),
            "ROOM-1", "differs", ()),
    Planted("obstacles do not block", "room_env", _impl(_with_table("cells", _obstacles_passable)),
            "ROOM-3", "final_out differs", ("ROOM-2", "ROOM-5")),
    Planted("inverted shade mapping", "room_env", _impl(_with_table("room", _inverted_room)),
            "ROOM-2", "obs differs", ("ROOM-5", "ROOM-8")),
    Planted("MSB-first packing", "room_env", _impl(_MsbFirst), "ROOM-2", "obs differs", ("ROOM-5", "ROOM-9")),
    Planted("truncation reported as termination", "room_env", _impl(_TruncationAsTermination), "ROOM-5",
            "truncated", ("ROOM-2", "ROOM-3")),
    Planted("door does not terminate", "room_env", _impl(_with_table("cells", _door_is_floor)), "ROOM-4",
            "terminated", ("ROOM-2", "ROOM-5")),
    Planted("seed ignored", "room_env", _impl(_SeedIgnored), "ROOM-2", "obs differs", ("ROOM-7", "ROOM-8")),
    Planted("bad action ids played as no-ops", "room_env", _impl(_UncheckedActions), "ROOM-8", "accepted silently",
            ("ROOM-2", "ROOM-3")),
    Planted("state advanced before validation", "room_env", _impl(_StepsBeforeChecking), "ROOM-9", "step",
            ("ROOM-2", "ROOM-8")),
    Planted("standing-still moves", "room_env", _impl(_ScenarioIgnored), "ROOM-6", "differs", ("ROOM-2", "ROOM-3")),
    Planted("PyBoy shades 153/85 swapped", "room_env", _impl(_pyboy_with(shades=_swapped_shades)), "ROOM-2",
            "obs differs", ("ROOM-5",)),
    Planted("PyBoy subsampled at odd pixels", "room_env", _impl(_pyboy_with(shades=_odd_phase)), "ROOM-2",
            "obs differs", ("ROOM-5",)),
    Planted("PyBoy frame skip 2 (the update is not on screen yet)", "room_env", _impl(_pyboy_with(frameskip=2)),
            "ROOM-3", "final_out differs", ("ROOM-5",)),
    Planted("deferred render shows the pre-reset frame", "room_env", _impl(_RenderBeforeReset), "ROOM-10",
            "obs differs", ("ROOM-1", "ROOM-2", "ROOM-7")),
    Planted("reset keeps the last reward", "room_env", _impl(_ResetKeepsReward), "ROOM-12", "reward",
            ("ROOM-1", "ROOM-2", "ROOM-4")),
    Planted("reset keeps counting episodes", "room_env", _impl(_ResetKeepsEpisodeIds), "ROOM-12", "episode_id",
            ("ROOM-1", "ROOM-2", "ROOM-5")),
    Planted("default seed 1", "room_env", _impl(_DefaultSeedOne), "ROOM-11", "differs", ("ROOM-1", "ROOM-2")),
    Planted("render(out) not validated", "room_env", _impl(_RenderUnchecked), "ROOM-8", "render(out)",
            ("ROOM-1", "ROOM-10")),
    Planted("step before reset accepted", "room_env", _impl(_StepsBeforeReset), "ROOM-13", "was accepted",
            ("ROOM-1", "ROOM-2", "ROOM-8")),
)
