"""Reference ``room_env`` (spec/room_env.py): the project's ROM (room.gb) in PyBoy, one emulator per env.

``RoomTask`` is the ROM's RAM plug-in (rlspec/envs/pyboy_env.py ``RamTask``): a reset writes the 16-bit seed
and the scenario into the mailbox with CMD = reset, a step writes CMD = step (the ROM latches the held
d-pad button itself), both set REQ = 1 and the ROM clears it once its sprites show the update (three
frames later, hence ``min_frameskip``). Reward and termination come from the ROM's EXITED byte; the step
limit is counted here, on the env side.

``RoomVecEnv`` is the contract's vector interface, on CPU tensors: reset()/step(actions) write packed2
frames into ``out`` (or a new tensor) and return a ``Step``; an episode that ends is reset in the same
step (the obs written is the next episode's first; ``final_out`` receives the frame before that reset).
``step(actions, render=False)`` writes no frame; ``render(out)`` writes the current ones later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from rlspec.contracts.room_env import (
    ACTION_NAMES,
    CMD_RESET,
    CMD_STEP,
    FRAMESKIP,
    FREE_RUN,
    MIN_FRAMESKIP,
    OBS_SHAPE,
    RAM,
    READY_MAGIC,
    SCENARIOS,
    STEP_LIMIT,
    SUCCESS_REWARD,
    Step,
    episode_seed,
    validate_actions,
    validate_config,
    validate_first_seeds,
    validate_out,
)
from rlspec.contracts.validate import require_int
from rlspec.envs.pyboy_env import PyBoyGame, RamTask, pack_frames

ROM = Path(__file__).resolve().parent / "room.gb"
BACKEND_NOTE = "PyBoy"


class RoomTask(RamTask):
    buttons = tuple(None if name == "noop" else name for name in ACTION_NAMES)  # the d-pad, in action-id order
    min_frameskip = MIN_FRAMESKIP

    def __init__(self, scenario: str = "room-exit", free_run: bool = False):
        """``free_run``: reset the ROM into its ordinary-game mode (it also updates on its own every
        FREE_RUN_PERIOD frames), e.g. to make a save state for the user-ROM path."""
        validate_config("RoomTask", 1, scenario, 1, 0)
        self.mode = SCENARIOS[scenario] | (FREE_RUN if free_run else 0)

    def booted(self, memory) -> bool:
        return memory[RAM["READY"]] == READY_MAGIC

    def on_reset(self, memory, seed: int) -> None:
        memory[RAM["SEED_LO"]], memory[RAM["SEED_HI"]] = seed & 0xFF, seed >> 8
        memory[RAM["MODE"]] = self.mode
        self._request(memory, CMD_RESET)

    def on_step(self, memory, action: int) -> None:
        self._request(memory, CMD_STEP)

    def synced(self, memory) -> bool:
        return memory[RAM["REQ"]] == 0

    def outcome(self, memory) -> tuple[float, bool, bool]:
        exited = memory[RAM["EXITED"]] == 1
        return (SUCCESS_REWARD if exited else 0.0), exited, exited

    @staticmethod
    def _request(memory, cmd: int) -> None:
        memory[RAM["CMD"]] = cmd
        memory[RAM["REQ"]] = 1


class RoomVecEnv:
    """``num_envs`` emulators stepped in turn (CPU); see the module docstring and contracts Step."""

    def __init__(self, num_envs: int, scenario: str = "room-exit", *, step_limit: int = STEP_LIMIT, seed: int = 0,
                 frameskip: int = FRAMESKIP, device: str | torch.device = "cpu",
                 make_game: Callable[[], PyBoyGame] | None = None, first_seeds: Sequence[int] | None = None):
        """``make_game``: another game instead of the room (one call per env; the user-ROM path: a PyBoyGame
        of the user's ROM and plug-in, whose frameskip it sets), stepped with the same same-step auto-reset.
        ``first_seeds``: env i's first episode (at every reset()) from the 16-bit seed first_seeds[i] instead of
        episode_seed(seed, i, 0), e.g. ``cell_seeds()`` to start one env on each free cell; later episodes as usual."""
        validate_config("RoomVecEnv", num_envs, scenario, step_limit, seed)
        self.first_seeds = validate_first_seeds("RoomVecEnv", first_seeds, num_envs)
        require_int("RoomVecEnv", "frameskip", frameskip, 1 if make_game else MIN_FRAMESKIP)
        if torch.device(device).type != "cpu":
            raise ValueError(f"RoomVecEnv: argument 'device' must be 'cpu' (PyBoy emulates on the host), got {device}")
        self.num_envs, self.scenario, self.step_limit, self.seed = num_envs, scenario, step_limit, seed
        self.device = torch.device("cpu")
        self.games = [make_game() if make_game else self._game(scenario, frameskip) for _ in range(num_envs)]
        self.episode = [0] * num_envs  # episode id of each env
        self.steps = [0] * num_envs  # steps of each env's current episode
        self.frames = torch.zeros(num_envs, *OBS_SHAPE, dtype=torch.uint8)  # [N, 1, 72, 20] the current obs
        self._started = False

    @staticmethod
    def _game(scenario: str, frameskip: int) -> PyBoyGame:
        return PyBoyGame(ROM, RoomTask(scenario), frameskip=frameskip)

    def reset(self, out: torch.Tensor | None = None) -> Step:
        out = self._out("reset", "out", out)
        for i, game in enumerate(self.games):
            game.reset(episode_seed(self.seed, i, 0) if self.first_seeds is None else self.first_seeds[i])
        self.frames = pack_frames(np.stack([game.shades() for game in self.games]))  # [N, 1, 72, 20]
        out.copy_(self.frames)
        self.episode, self.steps = [0] * self.num_envs, [0] * self.num_envs
        self._started = True
        n = self.num_envs
        false = torch.zeros(n, dtype=torch.bool)
        return Step(out, torch.zeros(n), false, false.clone(), false.clone(), torch.ones(n, dtype=torch.bool),
                    torch.zeros(n, dtype=torch.int32))

    def step(self, actions: torch.Tensor, out: torch.Tensor | None = None,
             final_out: torch.Tensor | None = None, render: bool = True) -> Step:
        validate_actions("RoomVecEnv.step", actions, self.num_envs, self.device,
                         num_actions=len(self.games[0].task.buttons))
        out = self._out("step", "out", out) if render else None
        if final_out is not None:
            validate_out("RoomVecEnv.step", "final_out", final_out, self.num_envs, self.device)
        if not self._started:
            raise RuntimeError("RoomVecEnv.step: call reset() first")
        reward, terminated, truncated, success, final, shades = [], [], [], [], [], []
        for i, (game, action) in enumerate(zip(self.games, actions.tolist())):
            r, term, succ = game.step(action)
            self.steps[i] += 1
            trunc = not term and self.steps[i] >= self.step_limit
            final.append(game.shades())
            if term or trunc:
                self.episode[i] += 1
                self.steps[i] = 0
                game.reset(episode_seed(self.seed, i, self.episode[i]))
            shades.append(game.shades())
            reward.append(r), terminated.append(term), truncated.append(trunc), success.append(succ)
        if final_out is not None:
            final_out.copy_(pack_frames(np.stack(final)))
        self.frames = pack_frames(np.stack(shades))  # [N, 1, 72, 20]
        if render:
            out.copy_(self.frames)
        flags = [torch.tensor(f, dtype=torch.bool) for f in (terminated, truncated, success)]
        return Step(out, torch.tensor(reward, dtype=torch.float32), *flags, flags[0] | flags[1],
                    torch.tensor(self.episode, dtype=torch.int32))

    def render(self, out: torch.Tensor) -> torch.Tensor:
        """Write the current frames (what the last reset/step returned as obs) into ``out``."""
        validate_out("RoomVecEnv.render", "out", out, self.num_envs, self.device)
        if not self._started:
            raise RuntimeError("RoomVecEnv.render: call reset() first")
        return out.copy_(self.frames)

    def close(self) -> None:
        for game in self.games:
            game.close()

    def _out(self, fn: str, name: str, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return torch.empty(self.num_envs, *OBS_SHAPE, dtype=torch.uint8)
        validate_out(f"RoomVecEnv.{fn}", name, out, self.num_envs, self.device)
        return out
