"""Fast ``room_env`` (spec/room_env.py): the room game as two NVIDIA Warp kernels stepping N envs at once, on
``device="cpu"`` (single-threaded, the CPU gate) or CUDA, bit-identical to the ROM in PyBoy.

* ``_step`` (one thread per env): the rules of rlspec/contracts/room_env.py, including the same-step
  auto-reset (the next episode's 16-bit seed from ``episode_seed``, the start cell from ``xorshift16``).
* ``_render`` (one thread per env and observed row, [N, 72]): the empty room's packed row, then, in the
  player's cell (8 observed pixels = bytes 2c and 2c+1), the pose's shade where the sprite is opaque, else
  the room's, packed least-significant pixel first (packed2). The room and the poses are decoded once from
  the contract's pictures and palettes into shade tables (and the room packed once).

``step(actions, out)`` writes the frames straight into ``out``; with the replay ring (Dreamer plan M6 direct
write) the frame of step t+1 belongs in ``obs_slot(t+1)``, which exists once row t (with this step's reward)
is pushed, so the actor calls ``step(actions, render=False)``, pushes, then ``render(ring.obs_slot(t+1))``.
On CUDA nothing crosses to the host, the kernels run on the current torch stream, and with
``check_actions=False`` not even the action check reads back (invalid ids are then counted in
``violations`` on the device and played as no-ops). The ``Step`` tensors other than ``obs`` are
the env's own buffers, overwritten by the next call (pointers stable): copy what you keep.
"""

from __future__ import annotations

import torch
import warp as wp

from rlspec.contracts import room_env as game
from rlspec.contracts.room_env import OBS_SHAPE, STEP_LIMIT, Step, validate_actions, validate_config, validate_out
from rlspec.fast.packed2 import pack

wp.config.log_level = wp.LOG_WARNING  # no banner or module-load lines on stdout: a command's stdout is its result
wp.init()
wp.set_module_options({"enable_backward": False})

BACKEND_NOTE = "warp-cuda" if wp.is_cuda_available() else "warp-cpu"
OBS_H = OBS_SHAPE[1]  # 72 observed rows


# the game's codes as kernel constants (rlspec/contracts/room_env.py)
_WALL, _OBSTACLE, _DOOR = wp.constant(game.WALL), wp.constant(game.OBSTACLE), wp.constant(game.DOOR)
_ROOM_EXIT, _TRANSPARENT = wp.constant(game.SCENARIOS["room-exit"]), wp.constant(game.TRANSPARENT)
_REWARD = wp.constant(game.SUCCESS_REWARD)
_M0, _M1, _M2, _M3, _M4, _M5 = (wp.constant(wp.uint32(k)) for k in (  # episode_seed's multipliers and offset
    0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x85EBCA6B, 0xC2B2AE35))


@wp.func
def _episode_seed(seed: wp.uint32, env: int, episode: int) -> int:
    """contracts.room_env.episode_seed in uint32 arithmetic (wrapping multiplication)."""
    h = seed * _M0 + wp.uint32(env) * _M1 + wp.uint32(episode) * _M2 + _M3
    h = h ^ (h >> wp.uint32(16))
    h = h * _M4
    h = h ^ (h >> wp.uint32(13))
    h = h * _M5
    h = h ^ (h >> wp.uint32(16))
    return int(h & wp.uint32(0xFFFF))


@wp.func
def _start_index(seed16: int, n_free: int) -> int:
    """xorshift16 (7, 9, 8) of the seed, modulo the number of free cells (the ROM's reset)."""
    s = seed16
    s = s ^ ((s << 7) & 0xFFFF)
    s = s ^ (s >> 9)
    s = s ^ ((s << 8) & 0xFFFF)
    return s % n_free


@wp.kernel
def _reset(free: wp.array(dtype=wp.int32, ndim=2), seed: wp.uint32, row: wp.array(dtype=wp.int32),
           col: wp.array(dtype=wp.int32), steps: wp.array(dtype=wp.int32), episode: wp.array(dtype=wp.int32)):
    i = wp.tid()
    k = _start_index(_episode_seed(seed, i, 0), free.shape[0])
    row[i] = free[k, 0]
    col[i] = free[k, 1]
    steps[i] = 0
    episode[i] = 0


@wp.kernel
def _step(actions: wp.array(dtype=wp.int32), cells: wp.array(dtype=wp.int32, ndim=2),
          moves: wp.array(dtype=wp.int32, ndim=2), free: wp.array(dtype=wp.int32, ndim=2), mode: int,
          step_limit: int, seed: wp.uint32,
          row: wp.array(dtype=wp.int32), col: wp.array(dtype=wp.int32), steps: wp.array(dtype=wp.int32),
          episode: wp.array(dtype=wp.int32), final_row: wp.array(dtype=wp.int32),
          final_col: wp.array(dtype=wp.int32), final_steps: wp.array(dtype=wp.int32),
          reward: wp.array(dtype=wp.float32), terminated: wp.array(dtype=wp.bool),
          truncated: wp.array(dtype=wp.bool), success: wp.array(dtype=wp.bool), is_first: wp.array(dtype=wp.bool),
          violations: wp.array(dtype=wp.int32)):
    i = wp.tid()
    a = actions[i]
    if a < 0 or a >= moves.shape[0]:
        wp.atomic_add(violations, 0, 1)
        a = 0
    r = row[i]
    c = col[i]
    s = steps[i] + 1
    exited = False
    if mode == _ROOM_EXIT:  # the d-pad moves the player; walls and obstacles block, the door exits
        tr = r + moves[a, 0]
        tc = c + moves[a, 1]
        t = cells[tr, tc]
        if t != _WALL and t != _OBSTACLE:
            r = tr
            c = tc
            exited = t == _DOOR
    trunc = (not exited) and s >= step_limit
    final_row[i] = r
    final_col[i] = c
    final_steps[i] = s
    reward[i] = wp.where(exited, _REWARD, 0.0)
    terminated[i] = exited
    truncated[i] = trunc
    success[i] = exited
    is_first[i] = exited or trunc
    if exited or trunc:  # same-step auto-reset
        e = episode[i] + 1
        episode[i] = e
        k = _start_index(_episode_seed(seed, i, e), free.shape[0])
        r = free[k, 0]
        c = free[k, 1]
        s = 0
    row[i] = r
    col[i] = c
    steps[i] = s


@wp.kernel
def _render(row: wp.array(dtype=wp.int32), col: wp.array(dtype=wp.int32), steps: wp.array(dtype=wp.int32),
            room_packed: wp.array(dtype=wp.uint8, ndim=2), room: wp.array(dtype=wp.uint8, ndim=2),
            player: wp.array(dtype=wp.uint8, ndim=3), out: wp.array(dtype=wp.uint8, ndim=3)):
    i, y = wp.tid()  # env, observed row
    for b in range(room_packed.shape[1]):  # the empty room's packed row
        out[i, y, b] = room_packed[y, b]
    r = row[i]
    c = col[i]
    if y // 8 == r:  # the player's cell: observed columns 8c .. 8c+7 are exactly bytes 2c and 2c+1
        pose = (steps[i] >> 2) & 1
        for half in range(2):
            packed = int(0)
            for k in range(4):
                x = 4 * half + k  # column inside the cell
                v = int(room[y, 8 * c + x])
                p = int(player[pose, y - 8 * r, x])
                if p != _TRANSPARENT:  # else the room shows through
                    v = p
                packed = packed | (v << (2 * k))  # least-significant pixel first (packed2)
            out[i, y, 2 * c + half] = wp.uint8(packed)


def game_tables() -> dict[str, torch.Tensor]:
    """The game's data (CPU): cell types, moves, free cells, observed room and player shades."""
    return dict(
        cells=torch.tensor(game.CELLS, dtype=torch.int32),  # [ROWS, COLS]
        moves=torch.tensor(game.MOVES, dtype=torch.int32),  # [NUM_ACTIONS, 2]
        free=torch.tensor(game.FREE_CELLS, dtype=torch.int32),  # [n_free, 2]
        room=game.observed(game.background_shades()).contiguous(),  # [72, 80] uint8
        player=game.observed(game.player_shades()).contiguous(),  # [2, 8, 8] uint8, 4 = transparent
    )


class RoomVecEnv:
    """N rooms stepped by Warp kernels on ``device``; same interface as the PyBoy reference."""

    def __init__(self, num_envs: int, scenario: str = "room-exit", *, step_limit: int = STEP_LIMIT, seed: int = 0,
                 device: str | torch.device = "cpu", check_actions: bool = True):
        validate_config("RoomVecEnv", num_envs, scenario, step_limit, seed)
        self.num_envs, self.scenario, self.step_limit, self.seed = num_envs, scenario, step_limit, seed
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.check_actions = check_actions
        self.tables = self._tables()
        self.tables["room_packed"] = pack(self.tables["room"])  # [72, 20] uint8, the empty room's frame
        n, dev = num_envs, self.device
        ints = ("row", "col", "steps", "episode", "final_row", "final_col", "final_steps")
        self.state = {k: torch.zeros(n, dtype=torch.int32, device=dev) for k in ints}  # each [N]
        self.reward = torch.zeros(n, dtype=torch.float32, device=dev)  # [N]
        self.flags = {k: torch.zeros(n, dtype=torch.bool, device=dev)
                      for k in ("terminated", "truncated", "success", "is_first")}  # each [N]
        self.violations = torch.zeros(1, dtype=torch.int32, device=dev)  # invalid action ids seen (unchecked)
        self._obs = torch.zeros(n, *OBS_SHAPE, dtype=torch.uint8, device=dev)  # [N, 1, 72, 20] when no out
        self._wp = {k: wp.from_torch(v) for k, v in {**self.tables, **self.state, **self.flags}.items()}
        self._wp.update(reward=wp.from_torch(self.reward), violations=wp.from_torch(self.violations))
        self._started = False

    def _tables(self) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device) for k, v in game_tables().items()}

    def reset(self, out: torch.Tensor | None = None) -> Step:
        out = self._out("reset", "out", out)
        w = self._wp
        self._launch(_reset, self.num_envs, [w["free"], wp.uint32(self.seed), w["row"], w["col"], w["steps"],
                                            w["episode"]])
        self.reward.zero_()
        for k, v in self.flags.items():
            v.fill_(k == "is_first")
        self._render(out, "row", "col", "steps")
        self._started = True
        return self._result(out)

    def step(self, actions: torch.Tensor, out: torch.Tensor | None = None,
             final_out: torch.Tensor | None = None, render: bool = True) -> Step:
        validate_actions("RoomVecEnv.step", actions, self.num_envs, self.device, self.check_actions)
        out = self._out("step", "out", out) if render else None
        if final_out is not None:
            validate_out("RoomVecEnv.step", "final_out", final_out, self.num_envs, self.device)
        if not self._started:
            raise RuntimeError("RoomVecEnv.step: call reset() first")
        w = self._wp
        acts = wp.from_torch(actions.to(torch.int32).contiguous())
        self._launch(_step, self.num_envs, [
            acts, w["cells"], w["moves"], w["free"], game.SCENARIOS[self.scenario], self.step_limit,
            wp.uint32(self.seed), w["row"], w["col"], w["steps"], w["episode"], w["final_row"], w["final_col"],
            w["final_steps"], w["reward"], w["terminated"], w["truncated"], w["success"], w["is_first"],
            w["violations"]])
        if final_out is not None:
            self._render(final_out, "final_row", "final_col", "final_steps")
        if render:
            self._render(out, "row", "col", "steps")
        return self._result(out)

    def render(self, out: torch.Tensor) -> torch.Tensor:
        """Write the current frames (what the last reset/step returned as obs) into ``out``."""
        validate_out("RoomVecEnv.render", "out", out, self.num_envs, self.device)
        if not self._started:
            raise RuntimeError("RoomVecEnv.render: call reset() first")
        self._render(out, "row", "col", "steps")
        return out

    def _render(self, out: torch.Tensor, row: str, col: str, steps: str) -> None:
        w, frames = self._wp, out.view(self.num_envs, *OBS_SHAPE[1:])  # [N, 72, 20]
        self._launch(_render, (self.num_envs, OBS_H), [w[row], w[col], w[steps], w["room_packed"], w["room"],
                                                       w["player"], wp.from_torch(frames)])

    def _launch(self, kernel, dim, inputs) -> None:
        device = wp.device_from_torch(self.device)
        stream = wp.stream_from_torch(torch.cuda.current_stream(self.device)) if device.is_cuda else None
        wp.launch(kernel, dim=dim, inputs=inputs, device=device, stream=stream)

    def _result(self, out: torch.Tensor) -> Step:
        f = self.flags
        return Step(out, self.reward, f["terminated"], f["truncated"], f["success"], f["is_first"],
                    self.state["episode"])

    def _out(self, fn: str, name: str, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return self._obs
        validate_out(f"RoomVecEnv.{fn}", name, out, self.num_envs, self.device)
        return out

    def close(self) -> None:
        pass
