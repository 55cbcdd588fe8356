"""The DMG address space as Warp functions: the cartridge's MBC (ROM-only, MBC1, MBC3, MBC5), the per-env RAMs,
the IO registers with their side effects, and OAM DMA.

Sources (facts only, no emulator's code): Pan Docs (https://gbdev.io/pandocs/) "Memory Map", "MBC1", "MBC3",
"MBC5", "The Cartridge Header", "OAM DMA Transfer", "Hardware Registers", "Interrupts"; PyBoy 2.8.1 where a
program observes a choice Pan Docs leaves open (named below).

* 0x0000-0x7FFF ROM: bank 0 then the switchable bank, offsets masked to the ROM's size (a bank number past the
  end wraps); writes set the MBC's registers;
* 0xA000-0xBFFF cartridge RAM (MBC3: or the latched RTC register 0x08-0x0C); 0xFF when disabled or absent;
* 0xE000-0xFDFF echo of 0xC000-0xDDFF; 0xFEA0-0xFEFF unusable: reads 0x00, writes dropped (Pan Docs "FEA0-FEFF
  range", DMG, OAM not blocked: this core does not block VRAM/OAM in modes 2/3);
* IO: unmapped registers (0xFF03, 0xFF08-0xFF0E, 0xFF4C-0xFF7F) read 0xFF; the APU (0xFF10-0xFF3F) and serial
  registers are not emulated: stored and read back as written; DMA (0xFF46) copies 160 bytes at once.

An IO access observes the hardware (timer, PPU) as of the instruction's start plus 4 T-cycles per byte fetched
after the opcode (``sync``): where PyBoy 2.8.1 places the accesses of LDH, LD (C), LD (nn) and LD (rr) — one
M-cycle before the hardware's access cycle, for every such form alike, so a program comparing two IO accesses
sees no difference.
"""

from __future__ import annotations

import warp as wp

from rlspec.envs.gameboy.hardware import (
    DIV,
    DMA,
    IF,
    LCDC,
    LY,
    LYC,
    MBC1,
    MBC3,
    MBC5,
    NO_MBC,
    P1,
    STAT,
    TAC,
    TIMA,
    TMA,
    Machine,
    io,
    joypad_lines,
    joypad_update,
    lcdc_write,
    set_io,
    stat_update,
    sync,
    timer_write,
)

_NO_MBC, _MBC1, _MBC3, _MBC5 = (wp.constant(k) for k in (NO_MBC, MBC1, MBC3, MBC5))
_P1, _DIV, _TIMA, _TMA, _TAC, _IF = (wp.constant(r) for r in (P1, DIV, TIMA, TMA, TAC, IF))
_LCDC, _STAT, _LY, _LYC, _DMA = (wp.constant(r) for r in (LCDC, STAT, LY, LYC, DMA))
_BOOT = wp.constant(0x50)  # writing a non-zero value unmaps the boot ROM (Pan Docs "Memory Map": FF50)
_ENABLE, _ROMB, _RAMB, _MODE = wp.constant(0), wp.constant(1), wp.constant(2), wp.constant(3)  # columns of bank


# ---- cartridge -------------------------------------------------------------------------------------------------

@wp.func
def rom_read(m: Machine, i: int, a: int) -> int:
    """0x0000-0x00FF: the boot ROM while it is mapped; 0x0000-0x3FFF: bank 0 (MBC1 mode 1: bank upper2 << 5);
    0x4000-0x7FFF: the selected bank (MBC1: upper2 << 5 | lower5; no MBC: bank 1)."""
    if a < 0x100 and m.boot_on[i] == 1:
        return int(m.boot[a])
    bank = 0
    if a >= 0x4000:
        bank = m.bank[i, _ROMB]
        if m.mbc == _MBC1:
            bank = bank | (m.bank[i, _RAMB] << 5)
    elif m.mbc == _MBC1 and m.bank[i, _MODE] == 1:
        bank = m.bank[i, _RAMB] << 5
    return int(m.rom[(bank * 0x4000 + (a & 0x3FFF)) & m.rom_mask])


@wp.func
def mbc_write(m: Machine, i: int, a: int, v: int):
    """0x0000-0x1FFF RAM (and RTC) enable: low nibble 0xA; 0x2000-0x3FFF ROM bank: MBC1 5 bits (0 -> 1), MBC3 7 bits
    (0 -> 1), MBC5 bits 0-7 at 0x2000-0x2FFF and bit 8 at 0x3000-0x3FFF (0 allowed); 0x4000-0x5FFF: MBC1 the 2
    upper bits, MBC3 RAM bank 0-3 or RTC register 0x08-0x0C, MBC5 RAM bank 0-15; 0x6000-0x7FFF: MBC1 mode, MBC3
    latch (writing 0 then 1 copies the clock registers to the latched ones)."""
    if m.mbc == _NO_MBC:
        return
    if a < 0x2000:
        m.bank[i, _ENABLE] = wp.where((v & 0xF) == 0xA, 1, 0)
    elif a < 0x4000:
        if m.mbc == _MBC5:
            bank = m.bank[i, _ROMB]
            m.bank[i, _ROMB] = wp.where(a < 0x3000, (bank & 0x100) | v, ((v & 1) << 8) | (bank & 0xFF))
        else:
            bank = v & wp.where(m.mbc == _MBC1, m.mbc1_bank_mask, 0x7F)
            m.bank[i, _ROMB] = wp.max(bank, 1)
    elif a < 0x6000:
        m.bank[i, _RAMB] = v & wp.where(m.mbc == _MBC1, 3, wp.where(m.mbc == _MBC5, 0xF, 0xFF))
    elif m.mbc == _MBC1:
        m.bank[i, _MODE] = v & 1
    else:
        if m.mbc == _MBC3 and m.bank[i, _MODE] == 0 and v == 1:
            for r in range(5):
                m.rtc[i, 5 + r] = m.rtc[i, r]
        m.bank[i, _MODE] = v


@wp.func
def rtc_register(m: Machine, i: int) -> int:
    """The MBC3 clock register mapped at 0xA000 (0-4: S M H DL DH), or -1."""
    r = m.bank[i, _RAMB] - 8
    if m.mbc == _MBC3 and r >= 0 and r < 5:
        return r
    return -1


@wp.func
def cram_offset(m: Machine, i: int, a: int) -> int:
    """The cartridge RAM byte at a (masked to its size), or -1 when RAM is disabled, absent or not mapped."""
    if m.ram_size == 0 or m.bank[i, _ENABLE] == 0 or rtc_register(m, i) >= 0:
        return -1
    bank = m.bank[i, _RAMB]
    if m.mbc == _MBC1:
        bank = bank * m.bank[i, _MODE]  # mode 0: RAM bank 0
    return (bank * 0x2000 + a - 0xA000) & (m.ram_size - 1)


@wp.func
def cram_read(m: Machine, i: int, a: int) -> int:
    r = rtc_register(m, i)
    if r >= 0 and m.bank[i, _ENABLE] == 1:
        return int(m.rtc[i, 5 + r])
    k = cram_offset(m, i, a)
    if k < 0:
        return 0xFF
    return int(m.cram[i, k])


@wp.func
def cram_write(m: Machine, i: int, a: int, v: int):
    """RAM, or an MBC3 clock register (S and M 6 bits, H 5, DL 8, DH: day bit 8, halt bit 6, carry bit 7). The
    clock does not tick in this increment: it holds what was written."""
    r = rtc_register(m, i)
    if r >= 0 and m.bank[i, _ENABLE] == 1:
        mask = wp.where(r < 2, 0x3F, wp.where(r == 2, 0x1F, wp.where(r == 3, 0xFF, 0xC1)))
        m.rtc[i, r] = wp.uint8(v & mask)
        return
    k = cram_offset(m, i, a)
    if k >= 0:
        m.cram[i, k] = wp.uint8(v)


# ---- IO registers ----------------------------------------------------------------------------------------------

@wp.func
def io_read(m: Machine, i: int, r: int) -> int:
    """FF00-FF7F, with the timer and PPU caught up to the access."""
    sync(m, i, 4 * (m.fetched[i] - 1))
    if r == _P1:
        return 0xC0 | (io(m, i, _P1) & 0x30) | joypad_lines(m, i)
    if r == _DIV:
        return m.div[i] >> 8
    if r == _TIMA and m.reload[i] == 1:
        return 0
    if r == _TAC:
        return io(m, i, _TAC) | 0xF8
    if r == _IF:
        return io(m, i, _IF) | 0xE0
    if r == _STAT:
        return io(m, i, _STAT) | 0x80
    if r == 0x03 or (r >= 0x08 and r < 0x0F) or r >= 0x4C:
        return 0xFF
    return io(m, i, r)


# ---- the bus ---------------------------------------------------------------------------------------------------

@wp.func
def read(m: Machine, i: int, a: int) -> int:
    """The byte the CPU reads at a (0..0xFFFF)."""
    if a < 0x8000:
        return rom_read(m, i, a)
    if a < 0xA000:
        return int(m.vram[i, a - 0x8000])
    if a < 0xC000:
        return cram_read(m, i, a)
    if a < 0xFE00:
        return int(m.wram[i, (a - 0xC000) & 0x1FFF])
    if a < 0xFEA0:
        return int(m.oam[i, a - 0xFE00])
    if a < 0xFF00:
        return 0x00
    if a < 0xFF80:
        return io_read(m, i, a - 0xFF00)
    return int(m.hram[i, a - 0xFF80])


@wp.func
def dma(m: Machine, i: int, v: int):
    """OAM DMA from v << 8 (0xE0-0xFF read as 0xC0-0xDF), all 160 bytes at once (the hardware takes 160 M-cycles;
    programs wait that long before reading OAM, so the instant copy is not observable by them)."""
    src = wp.where(v >= 0xE0, v - 0x20, v) << 8
    for k in range(160):
        m.oam[i, k] = wp.uint8(read(m, i, src + k))


@wp.func
def io_write(m: Machine, i: int, r: int, v: int):
    sync(m, i, 4 * (m.fetched[i] - 1))
    if r == _P1:
        set_io(m, i, _P1, v & 0x30)
        joypad_update(m, i)
    elif r == _DIV or r == _TIMA or r == _TMA or r == _TAC:
        timer_write(m, i, r, v)
    elif r == _IF:
        set_io(m, i, _IF, v & 0x1F)
    elif r == _LCDC:
        lcdc_write(m, i, v)
    elif r == _STAT:
        set_io(m, i, _STAT, (v & 0x78) | (io(m, i, _STAT) & 7))
        stat_update(m, i, io(m, i, _STAT) & 3)
    elif r == _LYC:
        set_io(m, i, _LYC, v)
        if (io(m, i, _LCDC) & 0x80) != 0:
            stat_update(m, i, io(m, i, _STAT) & 3)
    elif r == _BOOT:
        if v != 0:
            m.boot_on[i] = 0
    elif r != _LY:
        set_io(m, i, r, v)
        if r == _DMA:
            dma(m, i, v)


@wp.func
def write(m: Machine, i: int, a: int, value: int):
    """The CPU stores value (low byte) at a."""
    v = value & 0xFF
    if a < 0x8000:
        mbc_write(m, i, a, v)
    elif a < 0xA000:
        m.vram[i, a - 0x8000] = wp.uint8(v)
    elif a < 0xC000:
        cram_write(m, i, a, v)
    elif a < 0xFE00:
        m.wram[i, (a - 0xC000) & 0x1FFF] = wp.uint8(v)
    elif a < 0xFEA0:
        m.oam[i, a - 0xFE00] = wp.uint8(v)
    elif a >= 0xFF80:
        m.hram[i, a - 0xFF80] = wp.uint8(v)
    elif a >= 0xFF00:
        io_write(m, i, a - 0xFF00, v)
