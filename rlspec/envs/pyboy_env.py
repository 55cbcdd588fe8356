"""Any Game Boy ROM through PyBoy as an RL environment, with rewards and terminations read from RAM.

``PyBoyGame`` runs one emulator (PyBoy 2.8, headless ``window="null"``, no sound, unthrottled): one env
step presses the action's button (held for the whole step, released when the next action differs), emulates
``frameskip`` frames and renders only the last one. The observation is contract ``packed2``'s frame: the
R channel of PyBoy's screen (255/153/85/0 for shades 0..3 with the default DMG palette; the emulator is
forced into DMG mode) at every second pixel in both axes, packed four to a byte least-significant first,
``[1, 72, 20]`` uint8.

What a step is worth comes from a ``RamTask``, which reads (and, to reset a game that supports it, writes)
the Game Boy's memory: ``memory[addr]`` is a byte of the 64 KiB address space (work RAM is 0xC000-0xDFFF).
``RoomTask`` (rlspec/envs/room/pyboy_room.py) is the project's ROM's; ``RamChangeTask`` below is the generic
"success when a RAM byte leaves the value it had at reset".

A user's own ROM (``rlspec train dreamer --env pyboy --rom ROM [--state STATE] --plugin PLUGIN``) takes its
task from a *plug-in*: a Python file (``my_rewards.py``) or an importable module (``mypkg.rewards``) with

    def reward(memory) -> float        # required: the reward of the step just emulated
    def done(memory) -> bool           # required: the episode ended in the game (terminated)
    def success(memory) -> bool        # optional (default: done): counted in the success rate
    def reset(memory, seed) -> None    # optional: at every episode start, after the save state is loaded;
                                       #   may write RAM (seed: 16 bits of the env's seed stream)
    BUTTONS = (None, "up", "down", "left", "right")  # optional: the action set, one PyBoy button name
                                       #   (a, b, start, select, up, down, left, right) or None per action

``memory`` is ``pyboy.memory``: ``memory[0xD35E]`` reads a byte. The functions are called after the step's
``frameskip`` frames, in the order reward, done, success; a reward that is not a finite number, or a
done/success/booted that is not a bool (or the int 0 or 1), stops the run naming the plug-in and the
function. Every env loads its own copy of the module, so
module-level variables (e.g. the deepest row reached) are per env. Every episode starts from the save state
(``--state``, written by ``pyboy.save_state``) or, without one, from the machine as it was right after boot;
the reset then emulates ``frameskip`` frames with no button held. The game runs on its own: a step is
``frameskip`` frames with the action's button held, nothing more. A plug-in may also define
``booted(memory) -> bool`` (default True): power-on frames are emulated until it is true (before the save
state, if any, is first loaded). rlspec/envs/exit_oak.py is one plug-in (Dreamer plan's "Exit Oak": a user's own
Pokémon Red and a save state in Oak's lab).

No ROM ever ships with rlspec except its own (rlspec/envs/room/room.gb) and nothing is downloaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import math
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

with warnings.catch_warnings():  # pysdl2 announces its bundled SDL2 at import; the null window never uses it
    warnings.simplefilter("ignore", UserWarning)
    from pyboy import PyBoy

from rlspec.contracts.room_env import OBS_SHAPE, SCREEN_R, episode_seed
from rlspec.contracts.validate import require_int
from rlspec.fast.packed2 import pack

DPAD_ACTIONS = (None, "up", "down", "left", "right")  # action id -> PyBoy button (None: nothing pressed)
BOOT_FRAMES = 600  # at most this many frames for a task's ``booted`` to become true
_SHADE_OF_R = np.full(256, 255, dtype=np.uint8)  # R channel -> shade 0..3, 255 for any other value
_SHADE_OF_R[list(SCREEN_R)] = np.arange(4, dtype=np.uint8)


class RamTask:
    """Reward/termination plug-in: the default gives 0 reward and never terminates. Subclass and override.

    ``memory`` is PyBoy's ``pyboy.memory`` (``memory[addr]`` reads, ``memory[addr] = v`` writes a byte).
    The env calls: ``booted`` once per frame after power-on until it is true; at every reset (after the save
    state, if any, is loaded) ``on_reset`` then ``frameskip`` frames; at every step ``on_step`` with the button
    already held, then ``frameskip`` frames; after the frames of both, ``synced`` (False: the game did not
    finish its update in time, an error) and ``outcome``.
    """

    buttons: tuple[str | None, ...] = DPAD_ACTIONS  # the action space: one button (or None) per action id
    min_frameskip = 1  # the fewest frames per step after which the screen shows the step's update

    def booted(self, memory) -> bool:
        return True

    def on_reset(self, memory, seed: int) -> None:
        """``seed``: 16 bits from the env's seed stream (ignored by games that cannot be seeded)."""

    def on_step(self, memory, action: int) -> None:
        pass

    def synced(self, memory) -> bool:
        return True

    def outcome(self, memory) -> tuple[float, bool, bool]:
        """(reward, terminated, success) of the step just emulated."""
        return 0.0, False, False


class RamChangeTask(RamTask):
    """Success (reward ``reward``, terminated) when the byte at ``address`` differs from its value at reset."""

    def __init__(self, address: int, reward: float = 1.0):
        require_int("RamChangeTask", "address", address, 0)
        if address > 0xFFFF:
            raise ValueError(f"RamChangeTask: argument 'address' must be in 0..0xFFFF, got {address:#x}")
        self.address, self.reward, self._start = address, float(reward), None

    def on_reset(self, memory, seed: int) -> None:
        self._start = memory[self.address]

    def outcome(self, memory) -> tuple[float, bool, bool]:
        changed = memory[self.address] != self._start
        return (self.reward if changed else 0.0), changed, changed


def _load_module(target: str, what: str, fresh: bool = False):
    """The module ``target`` names: a ``.py`` file (always a fresh copy) or a dotted module name (a fresh copy
    with ``fresh``, else the imported one)."""
    if target.endswith(".py"):
        path = Path(target).resolve()
        spec = importlib.util.spec_from_file_location(f"rlspec_plugin_{path.stem}", path)
        if spec is None or not path.is_file():
            raise FileNotFoundError(f"{what} names {path}, which is not a Python file")
    elif fresh:
        spec = importlib.util.find_spec(target)
        if spec is None:
            raise ModuleNotFoundError(f"{what} names module {target!r}, which is not importable")
    else:
        return importlib.import_module(target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_task(target: str, **kwargs: Any) -> RamTask:
    """``"package.module:Class"`` or ``"path/to/file.py:Class"`` -> ``Class(**kwargs)`` (a RamTask)."""
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"load_task: argument 'target' must be 'module:Class' or 'file.py:Class', got {target!r}")
    module = _load_module(module_name, "load_task: argument 'target'")
    task = getattr(module, attr)(**kwargs)
    missing = [m for m in ("booted", "on_reset", "on_step", "synced", "outcome", "buttons") if not hasattr(task, m)]
    if missing:
        raise TypeError(f"load_task: {target} is not a RamTask, it lacks {missing}")
    return task


BUTTONS = ("a", "b", "start", "select", "up", "down", "left", "right")  # PyBoy's button names


class PluginError(RuntimeError):
    """A plug-in function raised: names the plug-in, the function and the cause (the engine's subclass stops a
    run with exit 3)."""


class PluginTask(RamTask):
    """A RamTask from a plug-in module's functions (module docstring: the plug-in interface). A function that
    raises becomes ``error`` (a PluginError) naming it."""

    def __init__(self, module, name: str, error: type[PluginError] = PluginError):
        missing = [f for f in ("reward", "done") if not callable(getattr(module, f, None))]
        if missing:
            raise TypeError(f"plug-in {name}: expected functions reward(memory) and done(memory), it lacks {missing}")
        buttons = tuple(getattr(module, "BUTTONS", DPAD_ACTIONS))
        wrong = [b for b in buttons if b is not None and b not in BUTTONS]
        if not buttons or wrong:
            raise ValueError(f"plug-in {name}: BUTTONS: expected a non-empty tuple of None or {list(BUTTONS)}, got "
                             f"{buttons!r}")
        self.module, self.name, self.buttons, self.error = module, name, buttons, error

    def _call(self, fn: str, *args: Any, default: Any = None) -> Any:
        """The plug-in's ``fn(*args)``; ``default`` where it has none."""
        f = getattr(self.module, fn, None)
        if f is None:
            return default
        try:
            return f(*args)
        except Exception as err:  # noqa: BLE001 - the user's code: any failure is reported as the plug-in's
            raise self.error(f"plug-in {self.name}: {fn}() raised {type(err).__name__}: {err}") from err

    def _flag(self, fn: str, *args: Any, default: Any = None) -> bool:
        """``fn``'s result as a bool: a bool, or the int 0 or 1 (a RAM flag); anything else (the string "no",
        truthy) is ``error``."""
        value = self._call(fn, *args, default=default)
        if not isinstance(value, (bool, np.bool_)) and not (isinstance(value, (int, np.integer)) and value in (0, 1)):
            raise self.error(f"plug-in {self.name}: {fn}() returned {value!r} ({type(value).__name__}), expected a "
                             "bool (or the int 0 or 1)")
        return bool(value)

    def _reward(self, memory) -> float:
        """reward()'s result as a float; a non-number or a NaN/inf is ``error`` (it would train on garbage)."""
        value = self._call("reward", memory)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not math.isfinite(value):
            raise self.error(f"plug-in {self.name}: reward() returned {value!r} ({type(value).__name__}), expected "
                             "a finite number")
        return float(value)

    def booted(self, memory) -> bool:
        return self._flag("booted", memory, default=True)

    def on_reset(self, memory, seed: int) -> None:
        self._call("reset", memory, seed)

    def outcome(self, memory) -> tuple[float, bool, bool]:
        reward, done = self._reward(memory), self._flag("done", memory)
        return reward, done, self._flag("success", memory, default=done)


def load_plugin(target: str, error: type[PluginError] = PluginError) -> PluginTask:
    """A PluginTask of a fresh copy of the plug-in ``target`` (a ``.py`` file or a dotted module name); a
    plug-in function that raises becomes ``error``."""
    return PluginTask(_load_module(target, "plugin", fresh=True), target, error)


def screen_shades(pyboy: PyBoy) -> np.ndarray:
    """[144, 160] uint8 shades 0..3 of the last rendered frame; a pixel of another colour is an error."""
    shades = _SHADE_OF_R[pyboy.screen.ndarray[:, :, 0]]
    if (shades == 255).any():
        y, x = np.argwhere(shades == 255)[0]
        raise ValueError(f"screen pixel ({y}, {x}) has R = {pyboy.screen.ndarray[y, x, 0]}, expected one of "
                         f"{SCREEN_R} (PyBoy's default DMG palette): a custom palette or a colour game?")
    return shades


def pack_frames(shades: np.ndarray) -> torch.Tensor:
    """[..., 144, 160] shades -> [..., 1, 72, 20] packed2 (every second pixel from (0, 0), LSB first)."""
    sub = torch.from_numpy(np.ascontiguousarray(shades[..., ::2, ::2]))  # [..., 72, 80]
    return pack(sub).unsqueeze(-3)


ROM_BANK = 16 * 1024
HEADER = slice(0x134, 0x14D)  # the bytes the cartridge header checksum at 0x14D covers (Pan Docs, "0x14D")


def rom_problem(rom: Path) -> str | None:
    """Why ``rom`` is not a Game Boy ROM (a sentence), or None: whole 16 KiB banks, at least two, and the
    cartridge header checksum the boot ROM checks (x = x − byte − 1 over 0x134..0x14C)."""
    data = Path(rom).read_bytes()
    if len(data) < 2 * ROM_BANK or len(data) % ROM_BANK:
        return f"{len(data)} bytes, not a whole number (≥ 2) of {ROM_BANK}-byte banks"
    checksum = 0
    for byte in data[HEADER]:
        checksum = (checksum - byte - 1) & 0xFF
    if checksum != data[0x14D]:
        return f"its header checksum at 0x14D is {data[0x14D]:#04x}, its header gives {checksum:#04x}"
    return None


def state_problem(rom: Path, state: Path) -> str | None:
    """Why ``state`` is not a PyBoy save state that loads into ``rom`` (PyBoy's own words), or None."""
    pyboy = PyBoy(str(rom), window="null", sound_emulated=False, cgb=False, ram_file=io.BytesIO(), log_level="ERROR")
    try:
        pyboy.load_state(io.BytesIO(Path(state).read_bytes()))
    except Exception as err:  # PyBoy's errors on a foreign or damaged state vary
        return f"{type(err).__name__}: {err}"
    finally:
        pyboy.stop(save=False)
    return None


class PyBoyGame:
    """One emulator, stepped by action ids; ``reset``/``step`` return the frame as packed2 [1, 72, 20]."""

    def __init__(self, rom: str | Path, task: RamTask, *, state: str | Path | None = None, frameskip: int = 4,
                 start_at_boot: bool = False):
        """``state``: a save state every reset loads; without one, ``start_at_boot`` makes every reset load the
        state right after boot (a user's game has no reset of its own), else a reset only calls the task."""
        rom = Path(rom)
        if not rom.is_file():
            raise FileNotFoundError(f"PyBoyGame: argument 'rom' is not a file: {rom}")
        require_int("PyBoyGame", "frameskip", frameskip, task.min_frameskip)
        self.task, self.frameskip = task, frameskip
        self._state = Path(state).read_bytes() if state is not None else None
        # ram_file: a fresh cartridge RAM (PyBoy would otherwise look for <rom>.ram beside the ROM)
        self.pyboy = PyBoy(str(rom), window="null", sound_emulated=False, cgb=False, ram_file=io.BytesIO(),
                           log_level="ERROR")
        self.pyboy.set_emulation_speed(0)
        self.memory = self.pyboy.memory
        for _ in range(BOOT_FRAMES):
            if task.booted(self.memory):
                break
            self.pyboy.tick(1, False, False)
        else:
            raise RuntimeError(f"PyBoyGame: {rom.name} did not boot within {BOOT_FRAMES} frames "
                               f"({type(task).__name__}.booted stayed False)")
        self._held: str | None = None
        if start_at_boot and self._state is None:
            self._state = self.save_state()

    def save_state(self) -> bytes:
        """The emulator's state now (``pyboy.save_state``): what ``--state`` files hold."""
        buf = io.BytesIO()
        self.pyboy.save_state(buf)
        return buf.getvalue()

    def reset(self, seed: int) -> torch.Tensor:
        if self._state is not None:
            self.pyboy.load_state(io.BytesIO(self._state))
            for button in filter(None, self.task.buttons):  # a state saved with a button down keeps it down
                self.pyboy.button_release(button)
            self._held = None
        self._hold(None)
        self.task.on_reset(self.memory, seed)
        self._frames("reset")
        return self.frame()

    def step(self, action: int) -> tuple[float, bool, bool]:
        """-> (reward, terminated, success); the new frame is ``frame()``."""
        self._hold(self.task.buttons[action])
        self.task.on_step(self.memory, action)
        self._frames("step")
        return self.task.outcome(self.memory)

    def shades(self) -> np.ndarray:
        """[144, 160] uint8 shades of the screen."""
        return screen_shades(self.pyboy)

    def frame(self) -> torch.Tensor:
        """[1, 72, 20] packed2 of the screen."""
        return pack_frames(self.shades())

    def close(self) -> None:
        self.pyboy.stop(save=False)

    def _hold(self, button: str | None) -> None:
        if button == self._held:
            return
        if self._held is not None:
            self.pyboy.button_release(self._held)
        if button is not None:
            self.pyboy.button_press(button)
        self._held = button

    def _frames(self, what: str) -> None:
        self.pyboy.tick(self.frameskip, True, False)  # render only the last frame
        if not self.task.synced(self.memory):
            raise RuntimeError(f"PyBoyGame: the game did not finish its {what} within frameskip={self.frameskip} "
                               f"frames ({type(self.task).__name__}.synced is False)")


class PyBoyEnv(gymnasium.Env):
    """Gymnasium env over ``PyBoyGame``: obs packed2 [1, 72, 20] uint8, Discrete(len(task.buttons)) actions,
    truncation after ``step_limit`` steps, info {"success", "episode_id", "seed"}. ``reset(seed=s)`` restarts
    the seed stream: episode k gets the 16-bit seed ``episode_seed(s, 0, k)``."""

    metadata = {"render_modes": []}

    def __init__(self, rom: str | Path, task: RamTask, *, state: str | Path | None = None, frameskip: int = 4,
                 step_limit: int = 1000):
        require_int("PyBoyEnv", "step_limit", step_limit, 1)
        self.game = PyBoyGame(rom, task, state=state, frameskip=frameskip)
        self.step_limit = step_limit
        self.observation_space = gymnasium.spaces.Box(0, 255, OBS_SHAPE, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(len(task.buttons))
        self._base_seed, self._episode, self._steps, self._seed16 = 0, -1, 0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._base_seed, self._episode = seed, -1
        self._episode += 1
        self._steps = 0
        self._seed16 = episode_seed(self._base_seed, 0, self._episode)
        obs = self.game.reset(self._seed16)
        return obs.numpy(), self._info(False)

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"PyBoyEnv.step: argument 'action' must be an int in 0..{self.action_space.n - 1}, "
                             f"got {action!r}")
        reward, terminated, success = self.game.step(int(action))
        self._steps += 1
        truncated = not terminated and self._steps >= self.step_limit
        return self.game.frame().numpy(), reward, terminated, truncated, self._info(success)

    def close(self):
        self.game.close()

    def _info(self, success: bool) -> dict:
        return {"success": success, "episode_id": self._episode, "seed": self._seed16}
