"""``GameBoyVec`` of contract ``gb_emulator`` (rlspec/contracts/gb_emulator.py) on the Warp emulator: one Game
Boy per Warp thread, started from the project's boot ROM, frames written as packed2 straight into ``out`` (on
CUDA: the device buffer, e.g. a replay slot; no host copy)."""

from __future__ import annotations

import numpy as np
import torch

from rlspec.contracts.gb_emulator import (
    FRAME_SHAPE,
    REGIONS,
    REGISTERS,
    boot_rom,
    check_buttons,
    check_frames,
    check_num_envs,
    check_out,
    check_range,
    check_rom,
)
from rlspec.envs.gameboy.emulator import HALTED, Emulator, Wiring


class GameBoyVec:
    def __init__(self, rom: bytes, num_envs: int, *, device: str = "cpu", wiring: Wiring = Wiring()):
        self.num_envs = check_num_envs(num_envs)
        self.device = torch.device(device)
        self.emu = Emulator(check_rom(rom), num_envs, device=device, wiring=wiring, boot=boot_rom())

    def step(self, buttons: torch.Tensor, frames: int = 1, out: torch.Tensor | None = None) -> torch.Tensor:
        held = check_buttons(buttons, self.num_envs)
        check_frames(frames)
        out = check_out(out, self.num_envs, self.device)
        if out is None:
            out = torch.empty(self.num_envs, *FRAME_SHAPE, dtype=torch.uint8, device=self.device)
        self.emu.buttons = held.numpy()
        self.emu.step_frames(frames, out)
        return out

    def memory(self, start: int, stop: int) -> torch.Tensor:
        name = check_range(start, stop)
        base = REGIONS[name][0]
        return torch.from_numpy(self.emu.region(name)[:, start - base:stop - base].copy())

    def registers(self) -> torch.Tensor:
        """[N, 10] int32; the core has fetched a HALT it is halted on (its PC is one past it)."""
        halted = self.emu.region("status") == HALTED
        values = [self.emu.register(r) - (halted if r == "PC" else 0) for r in REGISTERS]
        return torch.from_numpy(np.stack(values, axis=1).astype(np.int32))

