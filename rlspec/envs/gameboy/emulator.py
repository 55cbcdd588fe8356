"""A batch of DMG Game Boys stepped by frames: ``Emulator(rom, n_envs, device)``, one env per Warp thread.

Sources: Pan Docs (https://gbdev.io/pandocs/) "The Cartridge Header" (0x147 type, 0x148 ROM size, 0x149 RAM
size), "Power Up Sequence" (the DMG's registers after the boot ROM).

The cartridge ROM is one array for all envs (up to 8 MiB, never copied per env). Per env the state is
``bytes_per_env`` bytes: WRAM 8192, VRAM 8192, OAM 160, IO 128, HRAM + IE 128, the RTC 10, the MBC's registers
16, the CPU registers 32, the CPU's and the hardware's counters (``Machine`` in hardware.py) 68 and the opcode
histogram 2048: 18974 bytes, plus the cartridge RAM (the header's size, 0 to 131072; at least 1 allocated).

Start state: the DMG post-boot registers (``POST_BOOT``), IME 0, memory zero, IO as Pan Docs lists (LCDC 0x91,
IF 0xE1, BGP 0xFC, DIV 0xAB with the divider's low byte 0), and the PPU at dot 0 of a frame (LY 0, mode 2: the
boot ROM's hand-over point in the frame is not modelled).
"""

from __future__ import annotations

import numpy as np
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

REGISTERS = ("B", "C", "D", "E", "H", "L", "F", "A")  # the columns of regs
STATUS_NAMES = ("running", "halted", "stopped", "locked")
# Pan Docs "Power Up Sequence", DMG: registers as the boot ROM leaves them (F = Z, H and C set: the header
# checksum byte 0x014D is non-zero, as makebin writes it).
POST_BOOT = dict(A=0x01, F=0xB0, B=0x00, C=0x13, D=0x00, E=0xD8, H=0x01, L=0x4D, SP=0xFFFE, PC=0x0100)
POST_BOOT_IO = {0x02: 0x7E, 0x0F: 0xE1, 0x10: 0x80, 0x11: 0xBF, 0x12: 0xF3, 0x14: 0xBF, 0x16: 0x3F,
                0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F, 0x1E: 0xBF, 0x20: 0xFF, 0x23: 0xBF, 0x24: 0x77,
                0x25: 0xF3, 0x26: 0xF1, 0x40: 0x91, 0x41: 0x06, 0x46: 0xFF, 0x47: 0xFC}
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
def _step(m: Machine, budget: wp.int64, max_instructions: int):
    """Each env runs until it has run ``budget`` more T-cycles (the last instruction may overrun; the rest carries
    into the next call), ``max_instructions`` instructions, or it stops or locks."""
    i = wp.tid()
    joypad_update(m, i)  # the buttons may have changed since the last call
    end = m.cycles[i] + budget
    first = m.instructions[i]
    while m.cycles[i] < end and m.instructions[i] - first < max_instructions and m.status[i] <= 1:
        m.cycles[i] = m.cycles[i] + wp.int64(4 * sm83.step(m, i))


def _check_int(name: str, value, low: int, high: int = 2**31 - 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or value > high:
        raise ValueError(f"{name}: expected an int in [{low}, {high}], got {value!r}")


class Emulator:
    """``n_envs`` Game Boys running ``rom``; ``step_frames``/``step``, then read the state (numpy copies)."""

    def __init__(self, rom: bytes, n_envs: int, device: str = "cpu", wiring: Wiring = Wiring()):
        mbc, ram = cartridge(rom)
        _check_int("n_envs", n_envs, 1)
        if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
            raise ValueError(f"device: expected 'cpu' or 'cuda[:k]', got {device!r}")
        self.device, self.n_envs = device, n_envs
        n = n_envs

        def full(value, dtype=np.int32, shape=()):
            return wp.array(np.full((n, *shape), value, dtype=dtype), device=device)

        regs = np.tile(np.array([POST_BOOT[r] for r in REGISTERS], dtype=np.int32), (n, 1))
        io = np.zeros((n, 128), dtype=np.uint8)
        for r, v in POST_BOOT_IO.items():
            io[:, r] = v
        bank = np.tile(np.array([0, 1, 0, 0], dtype=np.int32), (n, 1))
        m = Machine()
        m.rom = wp.array(np.frombuffer(bytes(rom), dtype=np.uint8), device=device)
        m.rom_mask, m.ram_size, m.mbc = len(rom) - 1, ram, mbc
        m.line, m.tac_bits, m.interrupts, m.mbc1_bank_mask = (wiring.line, wiring.tac_bits, wiring.interrupts,
                                                              wiring.mbc1_bank_mask)
        m.regs, m.bank, m.io = (wp.array(a, device=device) for a in (regs, bank, io))
        m.sp, m.pc = full(POST_BOOT["SP"]), full(POST_BOOT["PC"])
        m.ime, m.ei_delay, m.status, m.halt_bug, m.instructions, m.done, m.fetched = (full(0) for _ in range(7))
        m.cycles = full(0, np.int64)
        m.opcodes = full(0, shape=(512,))
        m.wram, m.vram, m.oam, m.hram, m.cram, m.rtc = (
            full(0, np.uint8, (size,)) for size in (0x2000, 0x2000, 160, 128, max(ram, 1), 10))
        m.div = full(0xAB00)
        m.reload, m.dot, m.stat_line, m.buttons = (full(0) for _ in range(4))
        m.joy = full(0xF)
        self.machine = m

    # ---- running --------------------------------------------------------------------------------------------

    def step(self, t_cycles: int, max_instructions: int = 2**31 - 1) -> None:
        """Run every env for ``t_cycles`` T-cycles (or until ``max_instructions`` more instructions, or it stops
        or locks: a STOPPED or LOCKED env stays frozen)."""
        _check_int("t_cycles", t_cycles, 0, 2**62)
        _check_int("max_instructions", max_instructions, 0)
        wp.launch(_step, dim=self.n_envs, device=self.device, inputs=[self.machine, t_cycles, max_instructions])

    def step_frames(self, k: int = 1) -> None:
        """Run every env for k frames of 70224 T-cycles (17556 M-cycles)."""
        _check_int("k", k, 0, 2**40)
        self.step(FRAME * k)

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
        "dot"; "opcodes" [N, 512]."""
        if name not in REGIONS:
            raise ValueError(f"name: expected one of {sorted(REGIONS)}, got {name!r}")
        return getattr(self.machine, name).numpy()

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
                                                          "bank")]
        return sum(a.size * wp.types.type_size_in_bytes(a.dtype) for a in arrays) // self.n_envs


REGIONS = ("wram", "vram", "oam", "io", "hram", "cram", "rtc", "cycles", "instructions", "status", "ime", "div",
           "dot", "opcodes")
__all__ = ["Emulator", "Wiring", "cartridge", "FRAME", "POST_BOOT", "REGISTERS", "STATUS_NAMES", "RUNNING", "HALTED",
           "STOPPED", "LOCKED"]
