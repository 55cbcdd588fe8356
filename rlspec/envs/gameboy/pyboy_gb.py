"""The reference ``GameBoyVec`` of contract ``gb_emulator`` (rlspec/contracts/gb_emulator.py): one PyBoy 2.8.1
per env (headless, no sound, DMG mode), each running the project's boot ROM, buttons pressed and released
between steps, the last frame of each step rendered and packed (PyBoy's screen: R channel 255/153/85/0 =
shades 0..3 with its default DMG palette)."""

from __future__ import annotations

import io

import pyboy
import torch

from rlspec.contracts.gb_emulator import (
    BOOT_ROM,
    BUTTONS,
    FRAME_SHAPE,
    REGISTERS,
    check_buttons,
    check_frames,
    check_num_envs,
    check_out,
    check_range,
    check_rom,
)
from rlspec.envs.pyboy_env import screen_shades
from rlspec.reference.packed2 import pack

QUIET = 5  # PyBoy's log level past INFO, its highest (at "ERROR" it still prints "No RTC file found" to stdout)


def _register(registers, name: str) -> int:
    """PyBoy's register file has A F B C D E, HL as a pair, SP, PC."""
    if name in ("H", "L"):
        return registers.HL >> 8 if name == "H" else registers.HL & 0xFF
    return getattr(registers, name)


class GameBoyVec:
    def __init__(self, rom: bytes, num_envs: int):
        self.num_envs = check_num_envs(num_envs)
        rom = check_rom(rom)
        self.envs = [pyboy.PyBoy(io.BytesIO(rom), window="null", sound_emulated=False, cgb=False, log_level=QUIET,
                                 bootrom=str(BOOT_ROM)) for _ in range(num_envs)]
        for env in self.envs:
            env.set_emulation_speed(0)
        self.held = [0] * num_envs

    def step(self, buttons: torch.Tensor, frames: int = 1, out: torch.Tensor | None = None) -> torch.Tensor:
        held = check_buttons(buttons, self.num_envs).tolist()
        check_frames(frames)
        out = check_out(out, self.num_envs)
        if out is None:
            out = torch.empty(self.num_envs, *FRAME_SHAPE, dtype=torch.uint8)
        for k, env in enumerate(self.envs):
            self._press(k, held[k])
            for _ in range(frames):  # one tick a frame: PyBoy 2.8.1's tick(120) shows another window than 120
                env.tick(1, True)    # ticks of one frame (programs/busy.gb); tick(k) agrees for k <= 8 there
            out[k] = pack(torch.from_numpy(screen_shades(env)))  # [144, 160] -> [144, 40]
        return out

    def _press(self, k: int, buttons: int) -> None:
        env, before = self.envs[k], self.held[k]
        for bit, name in enumerate(BUTTONS):
            if (before ^ buttons) >> bit & 1:
                (env.button_press if buttons >> bit & 1 else env.button_release)(name)
        self.held[k] = buttons

    def memory(self, start: int, stop: int) -> torch.Tensor:
        check_range(start, stop)
        return torch.tensor([env.memory[start:stop] for env in self.envs], dtype=torch.uint8)

    def registers(self) -> torch.Tensor:
        """[N, 10] int32 (PyBoy keeps PC on a HALT it is halted on, the contract's convention)."""
        return torch.tensor([[_register(env.register_file, r) for r in REGISTERS] for env in self.envs],
                            dtype=torch.int32)

    def close(self) -> None:
        for env in self.envs:
            env.stop(save=False)
