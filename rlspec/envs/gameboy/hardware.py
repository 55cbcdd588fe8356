"""The DMG machine's state as one Warp struct, and the hardware that runs beside the CPU, one M-cycle at a time:
the timer, the PPU's timing (it calls ppu.py's pixels), the joypad lines.

Sources (facts only, no emulator's code): Pan Docs (https://gbdev.io/pandocs/) "Timer and Divider Registers",
"Timer obscure behaviour", "Interrupts", "LCD Status Registers", "STAT interrupt", "Rendering overview",
"Joypad Input". Where a program can observe a timing detail that Pan Docs leaves open, PyBoy 2.8.1 decides
(named below); tests/gameboy compares with it.

``Machine`` (N envs; all arrays but ``rom`` are per env, [N, ...]):

* ``rom`` [rom_size] uint8: the cartridge, ONE array shared by every env (read-only); ``rom_mask`` = size - 1;
  ``boot`` [256] uint8: a boot ROM (shared), mapped over 0x0000-0x00FF while ``boot_on`` [N] int32 is 1;
* ``mbc`` the controller (NO_MBC, MBC1, MBC3, MBC5), ``ram_size`` the cartridge RAM's bytes (0: none);
* ``line`` ``tac_bits`` ``interrupts`` ``mbc1_bank_mask`` ``half_carry`` ``startup_lead`` (and ``screen``'s four
  knobs): the wiring (``Wiring``; the DMG's unless a test plants a fault);
* ``regs`` [N, 8] int32 B C D E H L F A; ``sp`` ``pc`` ``ime`` ``ei_delay`` ``status`` ``halt_bug`` [N] int32;
* ``cycles`` [N] int64 T-cycles run; ``instructions`` [N] int32; ``opcodes`` [N, 512] int32 (executions per
  base opcode and 256 + CB opcode); ``done`` ``fetched`` [N] int32: T-cycles of the current instruction the
  hardware has caught up with, bytes it fetched (see ``sync``);
* ``wram`` [N, 8192], ``vram`` [N, 8192], ``oam`` [N, 160], ``io`` [N, 128] (0xFF00-0xFF7F), ``hram`` [N, 128]
  (0xFF80-0xFFFE and IE at index 127), ``cram`` [N, max(ram_size, 1)] uint8;
* ``bank`` [N, 4] int32: MBC registers (RAM enable, ROM bank, RAM bank / upper bits, MBC1 mode / MBC3 latch);
  ``rtc`` [N, 10] uint8: MBC3 clock registers S M H DL DH, then their latched copy;
* ``div`` [N] int32: the 16-bit divider (DIV is its upper byte); ``reload`` [N] int32: the TIMA reload
  pipeline (1: overflowed this M-cycle, 2: reloaded and interrupt requested);
* ``dot`` [N] int32: T-cycle within the 70224 of a frame (LCD off: since it went off, mod 70224; negative for the
  START_DELAY after the LCD is switched on);
  ``stat_line`` [N] int32: the STAT interrupt line;
* ``screen`` (ppu.py ``Screen``): the frame buffer [N, 5760] packed2 and the pixel pipeline's state;
  ``frames`` [N] int32: frames ended (``frame_end``); ``first_frame`` [N] int32: 1 from LCD on to its VBlank;
* ``buttons`` [N] int32: input, bit set = pressed: Right Left Up Down A B Select Start (bits 0-7);
  ``joy`` [N] int32: the P10-P13 lines last seen (for the joypad interrupt's falling edge).
"""

from __future__ import annotations

from dataclasses import dataclass

import warp as wp

from rlspec.envs.gameboy import ppu

wp.config.log_level = wp.LOG_WARNING  # no banner or module-load lines on stdout: a command's stdout is its result
wp.init()
wp.set_module_options({"enable_backward": False})

NO_MBC, MBC1, MBC3, MBC5 = 0, 1, 3, 5
RUNNING, HALTED, STOPPED, LOCKED = 0, 1, 2, 3
LINE, LINES, FRAME = 456, 154, 70224  # T-cycles per scanline, scanlines per frame, T-cycles per frame
P1, DIV, TIMA, TMA, TAC, IF, LCDC, STAT, LY, LYC, DMA = 0x00, 0x04, 0x05, 0x06, 0x07, 0x0F, 0x40, 0x41, 0x44, 0x45, 0x46
VBLANK, LCD_STAT, TIMER, SERIAL, JOYPAD = 1, 2, 4, 8, 16  # IF / IE bits, in priority order

_IF, _TIMA, _TMA, _TAC, _LCDC, _STAT, _LY, _LYC = (wp.constant(r) for r in (IF, TIMA, TMA, TAC, LCDC, STAT, LY, LYC))
_FRAME = wp.constant(FRAME)
START_DELAY = 8  # T-cycles from an LCDC write's access to the end of its instruction (every store form)
_START_DELAY = wp.constant(START_DELAY)
# PyBoy 2.8.1's first frame after the LCD is switched on: its line 0 starts in mode 0 and is 8 T-cycles short
# (PyBoy's "startup line"), so every line of that frame comes 8 T-cycles early; line 153 makes up for it (the
# frame still ends at 70224). A program polling LY in that frame sees it (programs.busy does).
STARTUP_LEAD = 8



@dataclass(frozen=True)
class Wiring:
    """The constants that tie the machine together, as data (tests plant faults by changing one): T-cycles per
    scanline, the divider bit for TAC 0-3 (a nibble each, TAC 0 lowest), the IE/IF bits that can dispatch, the
    MBC1 ROM bank register's bits, the nibble mask of the 8-bit adder's half carry (H: the carry out of bit 3),
    the T-cycles the frame after LCD on runs ahead (``STARTUP_LEAD``);
    the PPU's (ppu.py ``Screen``): objects per line, the VRAM offset of tile 0 in the signed tile-data mode, the
    X-priority's sign, whether the window's line counter also counts hidden lines."""

    line: int = LINE
    tac_bits: int = 0x7539
    interrupts: int = 0x1F
    mbc1_bank_mask: int = 0x1F
    half_carry: int = 0xF
    startup_lead: int = STARTUP_LEAD
    obj_limit: int = ppu.MAX_OBJS
    signed_tiles: int = 0x1000
    x_priority: int = 1
    window_hidden: int = 0


U8 = wp.array2d(dtype=wp.uint8)
I32 = wp.array2d(dtype=wp.int32)
Vec = wp.array(dtype=wp.int32)


@wp.struct
class Machine:
    rom: wp.array(dtype=wp.uint8)
    boot: wp.array(dtype=wp.uint8)
    rom_mask: int
    ram_size: int
    mbc: int
    line: int
    tac_bits: int
    interrupts: int
    mbc1_bank_mask: int
    half_carry: int
    startup_lead: int
    regs: I32
    sp: Vec
    pc: Vec
    ime: Vec
    ei_delay: Vec
    status: Vec
    halt_bug: Vec
    cycles: wp.array(dtype=wp.int64)
    instructions: Vec
    opcodes: I32
    done: Vec
    fetched: Vec
    wram: U8
    vram: U8
    oam: U8
    io: U8
    hram: U8
    cram: U8
    bank: I32
    rtc: U8
    div: Vec
    reload: Vec
    dot: Vec
    stat_line: Vec
    screen: ppu.Screen
    frames: Vec
    first_frame: Vec
    buttons: Vec
    joy: Vec
    boot_on: Vec


@wp.func
def io(m: Machine, i: int, r: int) -> int:
    return int(m.io[i, r])


@wp.func
def set_io(m: Machine, i: int, r: int, v: int):
    m.io[i, r] = wp.uint8(v & 0xFF)


@wp.func
def request(m: Machine, i: int, bit: int):
    """Set an IF bit (Pan Docs "Interrupts": FF0F)."""
    set_io(m, i, _IF, io(m, i, _IF) | bit)


# ---- timer (Pan Docs "Timer and Divider Registers", "Timer obscure behaviour") ---------------------------------

@wp.func
def timer_signal(m: Machine, i: int) -> bool:
    """TAC enable AND the divider bit TAC selects: 4096 Hz bit 9, 262144 Hz bit 3, 65536 Hz bit 5, 16384 Hz bit 7;
    TIMA counts the falling edges of this signal."""
    tac = io(m, i, _TAC)
    bit = (m.tac_bits >> (4 * (tac & 3))) & 0xF
    return (tac & 4) != 0 and ((m.div[i] >> bit) & 1) == 1


@wp.func
def tima_increment(m: Machine, i: int):
    """TIMA + 1; on overflow TIMA takes TMA and the reload pipeline starts (TIMA reads 0 for that M-cycle, the
    timer interrupt is requested one M-cycle later, as PyBoy 2.8.1 times it)."""
    t = io(m, i, _TIMA) + 1
    if t > 0xFF:
        set_io(m, i, _TIMA, io(m, i, _TMA))
        m.reload[i] = 1
    else:
        set_io(m, i, _TIMA, t)


@wp.func
def timer_tick(m: Machine, i: int):
    """One M-cycle: the reload pipeline advances, the divider counts 4 T-cycles, a falling edge increments TIMA."""
    if m.reload[i] == 1:
        request(m, i, TIMER)
        m.reload[i] = 2
    elif m.reload[i] == 2:
        m.reload[i] = 0
    before = timer_signal(m, i)
    m.div[i] = (m.div[i] + 4) & 0xFFFF
    if before and not timer_signal(m, i):
        tima_increment(m, i)


@wp.func
def timer_write(m: Machine, i: int, r: int, v: int):
    """DIV: the divider resets (a falling edge if the selected bit was 1); TIMA: ignored while the reload writes
    it; TMA: also lands in TIMA during the reload; TAC: a falling edge of the signal increments TIMA."""
    before = timer_signal(m, i)
    if r == _TIMA:
        if m.reload[i] != 2:
            set_io(m, i, _TIMA, v)
        return
    if r == _TMA:
        set_io(m, i, _TMA, v)
        if m.reload[i] != 0:
            set_io(m, i, _TIMA, v)
        return
    if r == _TAC:
        set_io(m, i, _TAC, v & 7)
    else:
        m.div[i] = 0
    if before and not timer_signal(m, i):
        tima_increment(m, i)


# ---- PPU timing (Pan Docs "LCD Status Registers", "STAT interrupt", "Rendering overview") ----------------------

@wp.func
def stat_update(m: Machine, i: int, mode: int):
    """STAT's mode bits and LYC=LY flag; a rising edge of the STAT line (LYC=LY, mode 0, 1, 2 sources ORed, so
    one source blocks another's edge: Pan Docs "STAT blocking") requests the STAT interrupt."""
    stat = io(m, i, _STAT) & 0x78
    coincide = io(m, i, _LY) == io(m, i, _LYC)
    line = (coincide and (stat & 0x40) != 0) or (mode < 3 and ((stat >> (mode + 3)) & 1) == 1)
    if line and m.stat_line[i] == 0:
        request(m, i, LCD_STAT)
    m.stat_line[i] = wp.where(line, 1, 0)
    set_io(m, i, _STAT, stat | wp.where(coincide, 4, 0) | mode)


@wp.func
def frame_end(m: Machine, i: int, blank: bool):
    """A frame ends (``Emulator.step_frames`` counts them): where PyBoy 2.8.1's ``tick`` returns — the PPU back
    at line 0, the LCD switched on or off, and every 70224 T-cycles while it is off; ``blank``: the frame shows
    the blank screen (ppu.blank)."""
    if blank:
        ppu.blank(m.screen, m.io, i)
    m.frames[i] = m.frames[i] + 1


@wp.func
def ppu_tick(m: Machine, i: int):
    """One M-cycle. LCD off: a blank frame ends every 70224 T-cycles. On: lines 0-143: mode 2 for 80 dots, mode 3
    for 172 (fixed: no SCX or object penalty), mode 0 for the rest of the 456, the line drawn as mode 3 ends;
    lines 144-153 mode 1, the VBlank interrupt at line 144 (the first frame after LCD on is blank there: Pan Docs
    "LCDC.7", as PyBoy). LY is the line, except that it advances 4 dots before the next line's mode 2 on lines
    0-142 (PyBoy 2.8.1's timing; LYC is compared with it then). Entering VBlank with STAT's mode-2 source on also
    requests STAT (as PyBoy)."""
    if m.dot[i] < 0:  # the LCD was just switched on: dot 0 is where the enabling instruction ends
        m.dot[i] = m.dot[i] + 4
        return
    dot = (m.dot[i] + 4) % _FRAME
    m.dot[i] = dot
    if (io(m, i, _LCDC) & 0x80) == 0:
        if dot == 0:
            frame_end(m, i, True)
        return
    t = dot  # the dot the line timing reads
    if m.first_frame[i] == 1:  # the frame the LCD was switched on in runs STARTUP_LEAD ahead, its end unchanged
        t = wp.min(dot + m.startup_lead, _FRAME - 1)
    line = t // m.line
    x = t % m.line
    mode = 1
    ly = line
    if line < 144:
        mode = wp.where(x < 80, 2, wp.where(x < 252, 3, 0))
        if m.first_frame[i] == 1 and line == 0 and x < 80:
            mode = 0  # the startup line begins in mode 0, without mode 2
        if x >= 452 and line < 143:
            ly = line + 1
    set_io(m, i, _LY, ly)
    stat_update(m, i, mode)
    if line < 144 and x == 0:
        ppu.line_start(m.screen, m.io, i, line)
    if line < 144 and x == 252:
        ppu.render_line(m.screen, m.vram, m.oam, m.io, i, line)
    if line == 144 and x == 0:
        request(m, i, VBLANK)
        if (io(m, i, _STAT) & 0x20) != 0 and m.stat_line[i] == 0:
            request(m, i, LCD_STAT)
        if m.first_frame[i] == 1:
            ppu.blank(m.screen, m.io, i)
        ppu.frame_start(m.screen, i)
    if dot == 0:
        m.first_frame[i] = 0
        frame_end(m, i, False)


@wp.func
def lcdc_write(m: Machine, i: int, v: int):
    """LCDC bit 7 off: the PPU stops with LY = 0 and mode 0, a blank frame ends; on: it starts at dot 0 of a
    frame as the enabling instruction ends (``START_DELAY`` T-cycles after the write's access, memory.py ``sync``:
    PyBoy 2.8.1 restarts its LCD clock there), that frame is blank (``first_frame``), and the frame before ends
    (PyBoy 2.8.1's frame boundaries)."""
    was_on = (io(m, i, _LCDC) & 0x80) != 0
    set_io(m, i, _LCDC, v)
    if was_on and (v & 0x80) == 0:
        m.dot[i] = 0
        set_io(m, i, _LY, 0)
        stat_update(m, i, 0)
        frame_end(m, i, True)
    elif not was_on and (v & 0x80) != 0:
        m.dot[i] = -_START_DELAY  # ppu_tick holds until the enabling instruction has ended
        m.first_frame[i] = 1
        ppu.frame_start(m.screen, i)
        ppu.line_start(m.screen, m.io, i, 0)
        frame_end(m, i, False)


# ---- joypad (Pan Docs "Joypad Input") --------------------------------------------------------------------------

@wp.func
def joypad_lines(m: Machine, i: int) -> int:
    """P10-P13 (0 = pressed): P14 low selects the d-pad (Right Left Up Down), P15 low the buttons (A B Select
    Start); a line is low if a selected group presses it."""
    select = io(m, i, 0)
    pressed = 0
    if (select & 0x10) == 0:
        pressed = pressed | (m.buttons[i] & 0xF)
    if (select & 0x20) == 0:
        pressed = pressed | ((m.buttons[i] >> 4) & 0xF)
    return 0xF & ~pressed


@wp.func
def joypad_update(m: Machine, i: int):
    """The joypad interrupt: any P10-P13 line falling (a press, or a selection change that shows one)."""
    lines = joypad_lines(m, i)
    if (m.joy[i] & ~lines) != 0:
        request(m, i, JOYPAD)
    m.joy[i] = lines


# ---- the clock -------------------------------------------------------------------------------------------------

@wp.func
def tick(m: Machine, i: int):
    """One M-cycle (4 T-cycles) of the hardware beside the CPU."""
    timer_tick(m, i)
    ppu_tick(m, i)


@wp.func
def sync(m: Machine, i: int, t: int):
    """Catch the hardware up to T-cycle t of the current instruction (``done`` is how far it is)."""
    while m.done[i] < t:
        tick(m, i)
        m.done[i] = m.done[i] + 4
