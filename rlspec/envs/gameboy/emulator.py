"""A batch of DMG Game Boys stepped by frames: ``Emulator(rom, n_envs, device)``, one env per Warp thread.

Sources: Pan Docs (https://gbdev.io/pandocs/) "The Cartridge Header" (0x147 type, 0x148 ROM size, 0x149 RAM
size), "Power Up Sequence" (the DMG's registers after the boot ROM).

The cartridge ROM is one array for all envs (up to 8 MiB, never copied per env). Per env the state is
``bytes_per_env`` bytes: WRAM 8192, VRAM 8192, OAM 160, IO 128, HRAM + IE 128, the RTC 10, the MBC's registers
16, the CPU registers 32, the CPU's and the hardware's counters (``Machine`` in hardware.py) 80, the opcode
histogram 2048, the frame buffer 5760 (packed2, 2 bits a pixel) and the PPU's line state 48: 24794 bytes, plus
the cartridge RAM (the header's size, 0 to 131072; at least 1 allocated).

Frames: ``step_frames(k, out)`` runs until k frames have ended, where PyBoy 2.8.1's ``tick`` ends one (hardware
``frame_end``: every 70224 T-cycles with the LCD on, at LCD on and off, every 70224 T-cycles while it is off), and
writes the last one as packed2 [N, 144, 40] into ``out`` (in the kernel, no host copy).

Start state: the DMG post-boot registers (``POST_BOOT``), IME 0, memory zero, IO as Pan Docs lists (LCDC 0x91,
IF 0xE1, BGP 0xFC, DIV 0xAB with the divider's low byte 0), and the PPU at dot 0 of a frame (LY 0, mode 2: the
boot ROM's hand-over point in the frame is not modelled).
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from rlspec.envs.gameboy import sm83
from rlspec.envs.gameboy.hardware import (
    FRAME,
    HALTED,
    LOCKED,
    MBC1,
    MBC3,
    MBC5,
    NO_MBC,
    RUNNING,
    STOPPED,
    Machine,
    Wiring,
    joypad_update,
)
from rlspec.envs.gameboy.ppu import FRAME_BYTES, HEIGHT, MAX_OBJS, ROW_BYTES, WIDTH, Screen

wp.set_module_options({"enable_backward": False})  # the kernel's module: forward only, no adjoint code to compile

REGISTERS = ("B", "C", "D", "E", "H", "L", "F", "A")  # the columns of regs
STATUS_NAMES = ("running", "halted", "stopped", "locked")
# Pan Docs "Power Up Sequence", DMG: registers as the boot ROM leaves them (F = Z, H and C set: the header
# checksum byte 0x014D is non-zero, as makebin writes it).
POST_BOOT = dict(A=0x01, F=0xB0, B=0x00, C=0x13, D=0x00, E=0xD8, H=0x01, L=0x4D, SP=0xFFFE, PC=0x0100)
POST_BOOT_IO = {0x02: 0x7E, 0x0F: 0xE1, 0x10: 0x80, 0x11: 0xBF, 0x12: 0xF3, 0x14: 0xBF, 0x16: 0x3F,
                0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F, 0x1E: 0xBF, 0x20: 0xFF, 0x23: 0xBF, 0x24: 0x77,
                0x25: 0xF3, 0x26: 0xF1, 0x40: 0x91, 0x41: 0x06, 0x46: 0xFF, 0x47: 0xFC}
# With a boot ROM (``Emulator(..., boot=)``): the power-on state it starts from (registers 0, PC 0, the LCD off,
# every IO register 0 but BGP 0xFC and OBP0/OBP1 0xFF, the divider 0: PyBoy 2.8.1's power-on values); the boot
# ROM sets the rest and unmaps itself (FF50) as it jumps to 0x0100.
POWER_ON = dict.fromkeys(("A", "F", "B", "C", "D", "E", "H", "L", "SP", "PC"), 0)
POWER_ON_IO = {0x47: 0xFC, 0x48: 0xFF, 0x49: 0xFF}
MBC_OF_TYPE = {0x00: NO_MBC, 0x01: MBC1, 0x02: MBC1, 0x03: MBC1, 0x0F: MBC3, 0x10: MBC3, 0x11: MBC3, 0x12: MBC3,
               0x13: MBC3, 0x19: MBC5, 0x1A: MBC5, 0x1B: MBC5, 0x1C: MBC5, 0x1D: MBC5, 0x1E: MBC5}
RAM_SIZES = {0: 0, 1: 0x800, 2: 0x2000, 3: 0x8000, 4: 0x20000, 5: 0x10000}  # 0x149 code -> bytes
MAX_RAM = {NO_MBC: 0, MBC1: 0x8000, MBC3: 0x8000, MBC5: 0x20000}
MAX_ROM_CODE = {NO_MBC: 0, MBC1: 6, MBC3: 6, MBC5: 8}  # 0x148: 32 KiB << code; MBC1 up to 2 MiB, MBC3 2 MiB


def cartridge(rom: bytes) -> tuple[int, int]:
    """(MBC, RAM bytes) from the header; ValueError for a type this core lacks or sizes that do not fit."""
    if not isinstance(rom, (bytes, bytearray)) or len(rom) < 0x8000:
        got = f"{len(rom)} bytes" if isinstance(rom, (bytes, bytearray)) else type(rom).__name__
        raise ValueError(f"rom: expected bytes of at least 32768 (a cartridge with its header), got {got}")
    kind, rom_code, ram_code = rom[0x147], rom[0x148], rom[0x149]
    if kind not in MBC_OF_TYPE:
        raise ValueError(f"rom: cartridge type 0x{kind:02X} (header byte 0x147) is not supported; supported: "
                         + " ".join(f"0x{t:02X}" for t in MBC_OF_TYPE))
    mbc = MBC_OF_TYPE[kind]
    if rom_code > MAX_ROM_CODE[mbc] or len(rom) != 0x8000 << rom_code:
        raise ValueError(f"rom: header byte 0x148 = 0x{rom_code:02X} (type 0x{kind:02X}) does not describe the "
                         f"{len(rom)} bytes given")
    ram = RAM_SIZES.get(ram_code, -1)
    if ram < 0 or ram > MAX_RAM[mbc]:
        raise ValueError(f"rom: header byte 0x149 = 0x{ram_code:02X} is not a RAM size for type 0x{kind:02X}")
    return mbc, ram


@wp.kernel
def _step(m: Machine, budget: wp.int64, max_instructions: int, frames: int, out: wp.array3d(dtype=wp.uint8),
          copy_out: int):
    """Each env runs until it has run ``budget`` more T-cycles (the last instruction may overrun; the rest carries
    into the next call), ``max_instructions`` instructions or ``frames`` frames, or it stops or locks; then, if
    ``copy_out``, its frame buffer goes to out [N, 144, 40]."""
    i = wp.tid()
    joypad_update(m, i)  # the buttons may have changed since the last call
    end = m.cycles[i] + budget
    first = m.instructions[i]
    start = m.frames[i]
    while (m.cycles[i] < end and m.instructions[i] - first < max_instructions and m.frames[i] - start < frames
           and m.status[i] <= 1):
        m.cycles[i] = m.cycles[i] + wp.int64(4 * sm83.step(m, i))
    if copy_out == 1:
        for k in range(FRAME_BYTES):
            out[i, k // ROW_BYTES, k % ROW_BYTES] = m.screen.frame[i, k]


def _check_int(name: str, value, low: int, high: int = 2**31 - 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or value > high:
        raise ValueError(f"{name}: expected an int in [{low}, {high}], got {value!r}")


class Emulator:
    """``n_envs`` Game Boys running ``rom``; ``step_frames``/``step``, then read the state (numpy copies)."""

    def __init__(self, rom: bytes, n_envs: int, device: str = "cpu", wiring: Wiring = Wiring(),
                 boot: bytes | None = None):
        mbc, ram = cartridge(rom)
        _check_int("n_envs", n_envs, 1)
        if boot is not None and (not isinstance(boot, (bytes, bytearray)) or len(boot) != 0x100):
            raise ValueError(f"boot: expected the 256 bytes of a DMG boot ROM, got "
                             f"{len(boot) if isinstance(boot, (bytes, bytearray)) else type(boot).__name__}"
                             f"{' bytes' if isinstance(boot, (bytes, bytearray)) else ''}")
        _check_int("wiring.obj_limit", wiring.obj_limit, 0, MAX_OBJS)  # Screen.objs holds at most MAX_OBJS
        if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
            raise ValueError(f"device: expected 'cpu' or 'cuda[:k]', got {device!r}")
        self.device, self.n_envs = device, n_envs
        n = n_envs

        def full(value, dtype=np.int32, shape=()):
            return wp.array(np.full((n, *shape), value, dtype=dtype), device=device)

        start = POWER_ON if boot is not None else POST_BOOT
        regs = np.tile(np.array([start[r] for r in REGISTERS], dtype=np.int32), (n, 1))
        io = np.zeros((n, 128), dtype=np.uint8)
        for r, v in (POWER_ON_IO if boot is not None else POST_BOOT_IO).items():
            io[:, r] = v
        bank = np.tile(np.array([0, 1, 0, 0], dtype=np.int32), (n, 1))
        m = Machine()
        m.rom = wp.array(np.frombuffer(bytes(rom), dtype=np.uint8), device=device)
        m.boot = wp.array(np.frombuffer(bytes(boot or bytes(0x100)), dtype=np.uint8), device=device)
        m.boot_on = full(int(boot is not None))
        m.rom_mask, m.ram_size, m.mbc = len(rom) - 1, ram, mbc
        m.line, m.tac_bits, m.interrupts, m.mbc1_bank_mask, m.half_carry, m.startup_lead = (
            wiring.line, wiring.tac_bits, wiring.interrupts, wiring.mbc1_bank_mask, wiring.half_carry,
            wiring.startup_lead)
        m.regs, m.bank, m.io = (wp.array(a, device=device) for a in (regs, bank, io))
        m.sp, m.pc = full(start["SP"]), full(start["PC"])
        m.ime, m.ei_delay, m.status, m.halt_bug, m.instructions, m.done, m.fetched = (full(0) for _ in range(7))
        m.cycles = full(0, np.int64)
        m.opcodes = full(0, shape=(512,))
        m.wram, m.vram, m.oam, m.hram, m.cram, m.rtc = (
            full(0, np.uint8, (size,)) for size in (0x2000, 0x2000, 160, 128, max(ram, 1), 10))
        m.div = full(0 if boot is not None else 0xAB00)
        m.reload, m.dot, m.stat_line, m.buttons, m.frames, m.first_frame = (full(0) for _ in range(6))
        m.joy = full(0xF)
        screen = Screen()
        screen.frame = full(0, np.uint8, (FRAME_BYTES,))
        screen.objs = full(0, shape=(MAX_OBJS,))
        screen.window_line, screen.window_wy = full(0), full(0)
        screen.obj_limit, screen.signed_tiles, screen.x_priority, screen.window_hidden = (
            wiring.obj_limit, wiring.signed_tiles, wiring.x_priority, wiring.window_hidden)
        m.screen = screen
        self.machine = m
        self._no_out = wp.zeros((1, 1, 1), dtype=wp.uint8, device=device)

    # ---- running --------------------------------------------------------------------------------------------

    def step(self, t_cycles: int, max_instructions: int = 2**31 - 1) -> None:
        """Run every env for ``t_cycles`` T-cycles (or until ``max_instructions`` more instructions, or it stops
        or locks: a STOPPED or LOCKED env stays frozen)."""
        _check_int("t_cycles", t_cycles, 0, 2**62)
        _check_int("max_instructions", max_instructions, 0)
        self._launch(t_cycles, max_instructions, 2**31 - 1, None)

    def step_frames(self, k: int = 1, out=None) -> None:
        """Run every env for k frames (the module docstring: 70224 T-cycles each while the LCD stays on); ``out``: a
        uint8 torch tensor or numpy array [N, 144, 40] on this device, C-contiguous, that receives the last
        frame as packed2 (``frame``)."""
        _check_int("k", k, 0, 2**30)
        self._launch(2**62, 2**31 - 1, k, out)

    def _launch(self, t_cycles: int, max_instructions: int, frames: int, out) -> None:
        target = self._no_out if out is None else self._wrap_out(out)
        wp.launch(_step, dim=self.n_envs, device=self.device,
                  inputs=[self.machine, t_cycles, max_instructions, frames, target, int(out is not None)])

    def _wrap_out(self, out) -> wp.array:
        """``out`` as a Warp array sharing its memory, or ValueError naming what is wrong with it."""
        shape = (self.n_envs, HEIGHT, ROW_BYTES)
        if isinstance(out, torch.Tensor):
            ok = (out.dtype == torch.uint8 and tuple(out.shape) == shape and out.is_contiguous()
                  and wp.device_from_torch(out.device) == wp.get_device(self.device))
            what = f"{out.dtype} {tuple(out.shape)} on {out.device}"
        elif isinstance(out, np.ndarray):
            ok = out.dtype == np.uint8 and out.shape == shape and out.flags.c_contiguous and self.device == "cpu"
            what = f"numpy {out.dtype} {out.shape}"
        else:
            ok, what = False, type(out).__name__
        if not ok:
            raise ValueError(f"out: expected a C-contiguous uint8 torch tensor (or numpy array on cpu) of shape "
                             f"{shape} on {self.device}, got {what}")
        if isinstance(out, torch.Tensor):
            return wp.from_torch(out, dtype=wp.uint8)
        return wp.array(out, dtype=wp.uint8, device="cpu", copy=False)

    @property
    def buttons(self) -> np.ndarray:
        """[N] int32, bit set = held: Right Left Up Down A B Select Start (bits 0-7); set before ``step``."""
        return self.machine.buttons.numpy()

    @buttons.setter
    def buttons(self, value) -> None:
        b = np.broadcast_to(np.asarray(value), (self.n_envs,))
        if not np.issubdtype(b.dtype, np.integer) or (b < 0).any() or (b > 0xFF).any():
            raise ValueError(f"buttons: expected ints in [0, 255] per env, got {value!r}")
        self.machine.buttons.assign(b.astype(np.int32))

    # ---- state ----------------------------------------------------------------------------------------------

    def register(self, name: str) -> np.ndarray:
        """[N] values of an 8-bit register ("A" .. "L", "F"), a pair ("AF" "BC" "DE" "HL"), "SP" or "PC"."""
        if name in REGISTERS:
            return self.machine.regs.numpy()[:, REGISTERS.index(name)].copy()
        if name in ("SP", "PC"):
            return getattr(self.machine, name.lower()).numpy()
        if len(name) == 2 and all(r in REGISTERS for r in name):
            return (self.register(name[0]) << 8) | self.register(name[1])
        raise ValueError(f"name: expected one of {REGISTERS}, AF BC DE HL, SP, PC; got {name!r}")

    def region(self, name: str) -> np.ndarray:
        """[N, size] uint8 copy of "wram", "vram", "oam", "io" (0xFF00-0xFF7F as stored), "hram" (0xFF80-0xFFFF,
        IE last), "cram", "rtc"; or [N] of a counter: "cycles" (T-cycles), "instructions", "status", "ime", "div",
        "dot", "boot_on" (1 while the boot ROM is mapped); "opcodes" [N, 512]."""
        if name not in REGIONS:
            raise ValueError(f"name: expected one of {sorted(REGIONS)}, got {name!r}")
        return getattr(self.machine, name).numpy()

    @property
    def frame(self) -> np.ndarray:
        """[N, 144, 40] uint8 packed2 copy of the frame buffer (after ``step_frames``: the last frame)."""
        return self.machine.screen.frame.numpy().reshape(self.n_envs, HEIGHT, ROW_BYTES)

    @property
    def shades(self) -> np.ndarray:
        """[N, 144, 160] uint8 shades 0 (lightest) .. 3 (darkest) of ``frame`` (packed2 unpacked: byte x // 4,
        bits 2(x % 4))."""
        pairs = (self.frame[..., None] >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 3  # [N, 144, 40, 4]
        return pairs.reshape(self.n_envs, HEIGHT, WIDTH)

    def write_wram(self, address: int, value: int) -> None:
        """Store value (0-255) at address (0xC000-0xDFFF) in every env's work RAM, between steps (a RAM
        task's mailbox)."""
        _check_int("address", address, 0xC000, 0xDFFF)
        _check_int("value", value, 0, 0xFF)
        wram = self.machine.wram.numpy()
        wram[:, address - 0xC000] = value
        self.machine.wram.assign(wram)

    @property
    def ly(self) -> np.ndarray:
        return self.region("io")[:, 0x44].astype(np.int32)

    @property
    def interrupt_flags(self) -> np.ndarray:
        """[N] IF (0xFF0F) as the CPU reads it (upper 3 bits 1)."""
        return self.region("io")[:, 0x0F].astype(np.int32) | 0xE0

    @property
    def interrupt_enable(self) -> np.ndarray:
        return self.region("hram")[:, 127].astype(np.int32)

    @property
    def bytes_per_env(self) -> int:
        """Bytes of state one env holds (every per-env array; the shared ROM excluded)."""
        m = self.machine
        arrays = [getattr(m, name) for name in REGIONS + ("sp", "pc", "ei_delay", "halt_bug", "done", "fetched",
                                                          "reload", "stat_line", "buttons", "joy", "regs",
                                                          "bank", "frames", "first_frame")]
        s = m.screen
        arrays += [s.frame, s.objs, s.window_line, s.window_wy]
        return sum(a.size * wp.types.type_size_in_bytes(a.dtype) for a in arrays) // self.n_envs


REGIONS = ("wram", "vram", "oam", "io", "hram", "cram", "rtc", "cycles", "instructions", "status", "ime", "div",
           "dot", "opcodes", "boot_on")
__all__ = ["Emulator", "Wiring", "cartridge", "FRAME", "POST_BOOT", "REGISTERS", "STATUS_NAMES", "RUNNING", "HALTED",
           "STOPPED", "LOCKED"]
