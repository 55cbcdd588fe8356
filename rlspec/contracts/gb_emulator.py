"""Runtime half of contract ``gb_emulator`` (spec/gb_emulator.py): a batched Game Boy's interface, its constants
and the argument checks every implementation shares.

``GameBoyVec(rom, num_envs)`` runs ``num_envs`` DMG Game Boys on one cartridge. Each starts at power-on and
runs the project's boot ROM (``boot_rom()``: rlspec/envs/gameboy/programs/boot.bin, 256 bytes written in
assembly by the project, built by ``python -m rlspec.envs.gameboy.build``): it clears the RAMs, sets the IO
and CPU registers to the DMG's post-boot values, resets the divider, switches the LCD on and hands over at
0x0100. Every state it leaves is set by its own code, so two emulators that run it are in the same state when
the cartridge starts, to the T-cycle; the DMG's own boot ROM (Nintendo's, with the logo check) never ships.

    step(buttons [N] int, frames=1, out=None) -> [N, 144, 40] uint8   # out itself when given
    memory(start, stop) -> [N, stop - start] uint8                   # within one REGIONS entry
    registers() -> [N, 10] int32                                     # REGISTERS

``step`` holds each env's buttons (bit k = ``BUTTONS[k]`` pressed) for ``frames`` frames and returns the last
frame as packed2 (contract ``packed2``: shade 0 lightest .. 3 darkest, four pixels a byte, the leftmost in the
least significant pair; row y is bytes 40y .. 40y + 39). A frame ends where PyBoy 2.8.1's ``tick`` ends one:
the PPU back at line 0, the LCD switched on or off, every 70,224 T-cycles while it is off. ``registers()``:
PC is the next instruction's address; while the CPU is halted, the HALT's own address.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used: the command line reads the constants before it loads torch
    import torch

HEIGHT, WIDTH, ROW_BYTES = 144, 160, 40  # lines, pixels, packed2 bytes a line
FRAME_SHAPE = (HEIGHT, ROW_BYTES)
BUTTONS = ("right", "left", "up", "down", "a", "b", "select", "start")  # bit k of a buttons value
REGISTERS = ("A", "F", "B", "C", "D", "E", "H", "L", "SP", "PC")  # the columns of registers()
REGIONS = {"vram": (0x8000, 0xA000), "wram": (0xC000, 0xE000), "oam": (0xFE00, 0xFEA0), "hram": (0xFF80, 0xFFFF)}
MIN_ROM = 0x8000  # bytes: the smallest cartridge (two 16 KiB banks, the header at 0x0100-0x014F)
BOOT_ROM = Path(__file__).resolve().parents[1] / "envs/gameboy/programs/boot.bin"
# A user's ROMs for the contract's clauses (``rlspec check gb_emulator --rom MY.gb``): paths joined by
# os.pathsep, and the frames each plays per case.
ROMS_ENV, FRAMES_ENV = "RLSPEC_GB_ROMS", "RLSPEC_GB_FRAMES"
USER_FRAMES = 600  # 10 s of play


def boot_rom() -> bytes:
    return BOOT_ROM.read_bytes()


def _shape(value) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)}"
    return type(value).__name__


def check_rom(rom) -> bytes:
    """``rom`` as bytes, or ValueError naming it: bytes (or bytearray) of at least 32 KiB."""
    if not isinstance(rom, (bytes, bytearray)) or len(rom) < MIN_ROM:
        got = f"{len(rom)} bytes" if isinstance(rom, (bytes, bytearray)) else type(rom).__name__
        raise ValueError(f"rom: expected the bytes of a cartridge, at least {MIN_ROM}, got {got}")
    return bytes(rom)


def check_num_envs(num_envs) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs: expected an int >= 1, got {num_envs!r}")
    return num_envs


def check_buttons(buttons, n: int) -> torch.Tensor:
    """[N] int64 copy of ``buttons`` on the CPU, or ValueError: an integer tensor of shape [N], values 0..255."""
    import torch

    ok = (isinstance(buttons, torch.Tensor) and not buttons.is_floating_point() and not buttons.is_complex()
          and buttons.dtype != torch.bool and tuple(buttons.shape) == (n,))
    if not ok:
        raise ValueError(f"buttons: expected an integer tensor of shape ({n},), got {_shape(buttons)}")
    b = buttons.detach().to("cpu", torch.int64)
    if bool(((b < 0) | (b > 0xFF)).any()):
        raise ValueError(f"buttons: expected values in 0..255 (bit k = {', '.join(BUTTONS)}), got "
                         f"{b[(b < 0) | (b > 0xFF)][0].item()}")
    return b


def check_frames(frames) -> int:
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames: expected an int >= 1, got {frames!r}")
    return frames


def check_out(out, n: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
    """``out`` (None allowed), or ValueError: a C-contiguous uint8 tensor [N, 144, 40] on ``device``."""
    import torch

    if out is None:
        return None
    shape = (n, *FRAME_SHAPE)
    ok = (isinstance(out, torch.Tensor) and out.dtype == torch.uint8 and tuple(out.shape) == shape
          and out.is_contiguous() and out.device == torch.device(device))
    if not ok:
        layout = "" if not isinstance(out, torch.Tensor) or out.is_contiguous() else " non-contiguous"
        where = f" on {out.device}" if isinstance(out, torch.Tensor) else ""
        raise ValueError(f"out: expected a contiguous uint8 tensor of shape {shape} on {torch.device(device)}, "
                         f"got {_shape(out)}{layout}{where}")
    return out


def user_roms() -> list[Path]:
    """The ROM paths in ``ROMS_ENV`` (empty: the contract plays the project's own)."""
    return [Path(p) for p in os.environ.get(ROMS_ENV, "").split(os.pathsep) if p]


def user_frames() -> int:
    return int(os.environ.get(FRAMES_ENV, USER_FRAMES))


def check_range(start, stop) -> str:
    """The REGIONS name holding [start, stop), or ValueError naming start/stop."""
    for name, (lo, hi) in REGIONS.items():
        if isinstance(start, int) and isinstance(stop, int) and lo <= start < stop <= hi:
            return name
    spans = ", ".join(f"{k} 0x{lo:04X}-0x{hi:04X}" for k, (lo, hi) in REGIONS.items())
    raise ValueError(f"start, stop: expected a range inside one region ({spans}), got {start!r}, {stop!r}")
