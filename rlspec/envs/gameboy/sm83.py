"""The SM83 (DMG Game Boy) CPU as an NVIDIA Warp kernel: one emulator per Warp thread, ``device="cpu"`` or CUDA.

Sources (facts only, no emulator's code): Pan Docs, "CPU Registers and Flags", "CPU Instruction Set",
"Power Up Sequence", "Memory Map" (https://gbdev.io/pandocs/); the gbdev opcode table
(https://gbdev.io/gb-opcodes/optables/) for lengths and M-cycle counts; the x/y/z/p/q decoding of the
Z80-family opcode byte (op = x:2 y:3 z:3, y = p:2 q:1), which the SM83 table follows.

State per env (``State``, numpy after ``run``; N envs):

* ``regs``   [N, 8] int32: B C D E H L F A. F sits at index 6, where the 3-bit register field means (HL),
  so ``regs[i, r]`` is register r for every r != 6; pairs BC DE HL are (0,1) (2,3) (4,5), AF is (7,6);
* ``sp``, ``pc`` [N] int32; ``ime`` [N] int32 (0/1); ``ei_delay`` [N] int32 (EI's pending enable);
* ``status`` [N] int32: RUNNING, HALTED (HALT executed), STOPPED (STOP executed), LOCKED (illegal opcode;
  PC left on it); an env that is not RUNNING is not stepped again;
* ``cycles`` [N] int64 (M-cycles), ``instructions`` [N] int32 (executed, the locking fetch not counted);
* ``opcodes`` [N, 512] int32: how often each base opcode (0..255) and CB opcode (256 + op) executed;
* ``memory`` [N, 65536] uint8: the flat address space (no MBC, no IO side effects in this increment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no banner or module-load lines on stdout: a command's stdout is its result
wp.init()
wp.set_module_options({"enable_backward": False})

ROM_SIZE = 0x8000  # a ROM-only cartridge (no MBC): 0x0000-0x7FFF
MEMORY_SIZE = 0x10000
REGISTERS = ("B", "C", "D", "E", "H", "L", "F", "A")  # the columns of State.regs
RUNNING, HALTED, STOPPED, LOCKED = 0, 1, 2, 3
STATUS_NAMES = ("running", "halted", "stopped", "locked")
# Pan Docs "Power Up Sequence", DMG: registers as the boot ROM leaves them (F = Z, H and C set: the header
# checksum byte 0x014D is non-zero, as makebin writes it).
POST_BOOT = dict(A=0x01, F=0xB0, B=0x00, C=0x13, D=0x00, E=0xD8, H=0x01, L=0x4D, SP=0xFFFE, PC=0x0100)
ILLEGAL = (0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD)

_RUNNING, _HALTED, _STOPPED, _LOCKED = (wp.constant(s) for s in (RUNNING, HALTED, STOPPED, LOCKED))
_F, _A = wp.constant(6), wp.constant(7)  # columns of regs

Mem = wp.array2d(dtype=wp.uint8)  # [N, 65536]
Regs = wp.array2d(dtype=wp.int32)  # [N, 8]
Vec = wp.array(dtype=wp.int32)  # [N]


# ---- memory: ROM read-only, echo RAM -------------------------------------------------------------------------

@wp.func
def _rd(mem: Mem, i: int, addr: int) -> int:
    """The byte at addr; 0xE000-0xFDFF reads 0xC000-0xDDFF (Pan Docs "Echo RAM")."""
    a = addr
    if a >= 0xE000 and a < 0xFE00:
        a = a - 0x2000
    return int(mem[i, a])


@wp.func
def _wr(mem: Mem, i: int, addr: int, v: int):
    """Store v at addr; writes to the ROM (0x0000-0x7FFF) are dropped (no MBC), echo RAM writes WRAM."""
    if addr >= 0x8000:
        a = addr
        if a >= 0xE000 and a < 0xFE00:
            a = a - 0x2000
        mem[i, a] = wp.uint8(v & 0xFF)


@wp.func
def _fetch(mem: Mem, pc: Vec, i: int) -> int:
    """The byte at PC; PC advances."""
    p = pc[i]
    pc[i] = (p + 1) & 0xFFFF
    return _rd(mem, i, p)


@wp.func
def _fetch16(mem: Mem, pc: Vec, i: int) -> int:
    """A little-endian 16-bit immediate."""
    lo = _fetch(mem, pc, i)
    return lo | (_fetch(mem, pc, i) << 8)


@wp.func
def _signed(u: int) -> int:
    """An 8-bit two's-complement offset e as -128..127."""
    return wp.where(u >= 128, u - 256, u)


@wp.func
def _push(mem: Mem, sp: Vec, i: int, v: int):
    """SP -= 2; high byte at SP+1, low byte at SP."""
    s = (sp[i] - 1) & 0xFFFF
    _wr(mem, i, s, v >> 8)
    s = (s - 1) & 0xFFFF
    _wr(mem, i, s, v & 0xFF)
    sp[i] = s


@wp.func
def _pop(mem: Mem, sp: Vec, i: int) -> int:
    s = sp[i]
    lo = _rd(mem, i, s)
    hi = _rd(mem, i, (s + 1) & 0xFFFF)
    sp[i] = (s + 2) & 0xFFFF
    return lo | (hi << 8)


# ---- registers -----------------------------------------------------------------------------------------------

@wp.func
def _hl(regs: Regs, i: int) -> int:
    return (regs[i, 4] << 8) | regs[i, 5]


@wp.func
def _get8(regs: Regs, mem: Mem, i: int, r: int) -> int:
    """The 3-bit register field r: B C D E H L (HL) A."""
    if r == 6:
        return _rd(mem, i, _hl(regs, i))
    return regs[i, r]


@wp.func
def _set8(regs: Regs, mem: Mem, i: int, r: int, v: int):
    if r == 6:
        _wr(mem, i, _hl(regs, i), v)
    else:
        regs[i, r] = v & 0xFF


@wp.func
def _get16(regs: Regs, sp: Vec, i: int, p: int) -> int:
    """The 2-bit pair field p of LD rr,nn / INC rr / DEC rr / ADD HL,rr: BC DE HL SP."""
    if p == 3:
        return sp[i]
    return (regs[i, 2 * p] << 8) | regs[i, 2 * p + 1]


@wp.func
def _set16(regs: Regs, sp: Vec, i: int, p: int, v: int):
    if p == 3:
        sp[i] = v & 0xFFFF
    else:
        regs[i, 2 * p] = (v >> 8) & 0xFF
        regs[i, 2 * p + 1] = v & 0xFF


@wp.func
def _get_stack_pair(regs: Regs, i: int, p: int) -> int:
    """The pair field of PUSH/POP: BC DE HL AF."""
    if p == 3:
        return (regs[i, _A] << 8) | regs[i, _F]
    return (regs[i, 2 * p] << 8) | regs[i, 2 * p + 1]


@wp.func
def _set_stack_pair(regs: Regs, i: int, p: int, v: int):
    """POP: F's low nibble does not exist and reads 0."""
    if p == 3:
        regs[i, _A] = (v >> 8) & 0xFF
        regs[i, _F] = v & 0xF0
    else:
        regs[i, 2 * p] = (v >> 8) & 0xFF
        regs[i, 2 * p + 1] = v & 0xFF


# ---- flags ---------------------------------------------------------------------------------------------------

@wp.func
def _flags(z: bool, n: bool, h: bool, c: bool) -> int:
    """F from the four flags: Z 0x80, N 0x40, H 0x20, C 0x10 (the low nibble is always 0)."""
    return wp.where(z, 0x80, 0) | wp.where(n, 0x40, 0) | wp.where(h, 0x20, 0) | wp.where(c, 0x10, 0)


@wp.func
def _carry(regs: Regs, i: int) -> int:
    return (regs[i, _F] >> 4) & 1


@wp.func
def _condition(regs: Regs, i: int, cc: int) -> bool:
    """The 2-bit condition field: NZ Z NC C."""
    f = regs[i, _F]
    flag = wp.where(cc < 2, (f >> 7) & 1, (f >> 4) & 1)
    return flag == (cc & 1)


# ---- operation groups ----------------------------------------------------------------------------------------

@wp.func
def _alu(regs: Regs, i: int, y: int, b: int):
    """A = A op b for op y: ADD ADC SUB SBC AND XOR OR CP (CP keeps A). H is the carry out of bit 3 (borrow
    into bit 4 for SUB/SBC/CP), C the carry out of bit 7 (borrow); AND sets H."""
    a = regs[i, _A]
    c = wp.where(y == 1 or y == 3, _carry(regs, i), 0)
    r = 0
    f = 0
    if y < 2:
        r = a + b + c
        f = _flags((r & 0xFF) == 0, False, (a & 0xF) + (b & 0xF) + c > 0xF, r > 0xFF)
    elif y == 4:
        r = a & b
        f = _flags(r == 0, False, True, False)
    elif y == 5:
        r = a ^ b
        f = _flags(r == 0, False, False, False)
    elif y == 6:
        r = a | b
        f = _flags(r == 0, False, False, False)
    else:
        r = a - b - c
        f = _flags((r & 0xFF) == 0, True, (a & 0xF) - (b & 0xF) - c < 0, r < 0)
    regs[i, _F] = f
    if y != 7:
        regs[i, _A] = r & 0xFF


@wp.func
def _shift(y: int, v: int, c: int) -> int:
    """CB rotate/shift y on v with carry-in c: RLC RRC RL RR SLA SRA SWAP SRL; returns result | carry_out << 8."""
    r = 0
    out = 0
    if y == 0:
        out = v >> 7
        r = (v << 1) | out
    elif y == 1:
        out = v & 1
        r = (v >> 1) | (out << 7)
    elif y == 2:
        out = v >> 7
        r = (v << 1) | c
    elif y == 3:
        out = v & 1
        r = (v >> 1) | (c << 7)
    elif y == 4:
        out = v >> 7
        r = v << 1
    elif y == 5:
        out = v & 1
        r = (v >> 1) | (v & 0x80)
    elif y == 6:
        r = (v << 4) | (v >> 4)
    else:
        out = v & 1
        r = v >> 1
    return (r & 0xFF) | (out << 8)


@wp.func
def _daa(a: int, f: int) -> int:
    """DAA: BCD-correct A after an ADD/ADC (N = 0) or SUB/SBC (N = 1) from N, H, C; Z from the result, H
    cleared, N kept, C set when an addition overflowed 99 (kept otherwise). Returns A | F << 8."""
    n = (f & 0x40) != 0
    c = (f & 0x10) != 0
    r = a
    if not n:
        if c or a > 0x99:
            r = r + 0x60
            c = True
        if (f & 0x20) != 0 or (a & 0xF) > 9:
            r = r + 0x06
    else:
        if c:
            r = r - 0x60
        if (f & 0x20) != 0:
            r = r - 0x06
    r = r & 0xFF
    return r | (_flags(r == 0, n, False, c) << 8)


@wp.func
def _accumulator(regs: Regs, i: int, y: int):
    """Block 0, z = 7: RLCA RRCA RLA RRA (as CB's RLC RRC RL RR on A but Z = 0), DAA, CPL, SCF, CCF."""
    a = regs[i, _A]
    f = regs[i, _F]
    if y < 4:
        rc = _shift(y, a, _carry(regs, i))
        regs[i, _A] = rc & 0xFF
        regs[i, _F] = _flags(False, False, False, (rc >> 8) == 1)
    elif y == 4:
        af = _daa(a, f)
        regs[i, _A] = af & 0xFF
        regs[i, _F] = af >> 8
    elif y == 5:
        regs[i, _A] = a ^ 0xFF
        regs[i, _F] = f | 0x60
    elif y == 6:
        regs[i, _F] = (f & 0x80) | 0x10
    else:
        regs[i, _F] = (f & 0x80) | ((f & 0x10) ^ 0x10)


@wp.func
def _sp_offset(regs: Regs, sp: Vec, i: int, u: int) -> int:
    """SP + e of ADD SP,e and LD HL,SP+e: Z = N = 0, H and C the carries out of bits 3 and 7 of the
    unsigned low-byte addition SP.lo + u."""
    s = sp[i]
    regs[i, _F] = _flags(False, False, (s & 0xF) + (u & 0xF) > 0xF, (s & 0xFF) + u > 0xFF)
    return (s + _signed(u)) & 0xFFFF


@wp.func
def _prefix_cb(regs: Regs, mem: Mem, pc: Vec, i: int, opcodes: Regs) -> int:
    """A CB-prefixed opcode (x: shift group / BIT / RES / SET; y: operation or bit; z: register). Returns its
    M-cycles including the prefix: 2, with (HL) 4, BIT b,(HL) 3."""
    op = _fetch(mem, pc, i)
    opcodes[i, 256 + op] = opcodes[i, 256 + op] + 1
    x = op >> 6
    y = (op >> 3) & 7
    z = op & 7
    v = _get8(regs, mem, i, z)
    if x == 1:
        bit_clear = ((v >> y) & 1) == 0
        regs[i, _F] = (regs[i, _F] & 0x10) | _flags(bit_clear, False, True, False)
        return wp.where(z == 6, 3, 2)
    if x == 0:
        rc = _shift(y, v, _carry(regs, i))
        regs[i, _F] = _flags((rc & 0xFF) == 0, False, False, (rc >> 8) == 1)
        _set8(regs, mem, i, z, rc)
    elif x == 2:
        _set8(regs, mem, i, z, v & ((1 << y) ^ 0xFF))
    else:
        _set8(regs, mem, i, z, v | (1 << y))
    return wp.where(z == 6, 4, 2)


@wp.func
def _block0(regs: Regs, mem: Mem, sp: Vec, pc: Vec, status: Vec, i: int, y: int, z: int) -> int:
    """Opcodes 0x00-0x3F; returns M-cycles."""
    p = y >> 1
    q = y & 1
    if z == 0:
        if y == 0:  # NOP
            return 1
        if y == 1:  # LD (nn),SP
            nn = _fetch16(mem, pc, i)
            _wr(mem, i, nn, sp[i] & 0xFF)
            _wr(mem, i, (nn + 1) & 0xFFFF, sp[i] >> 8)
            return 5
        if y == 2:  # STOP (2 bytes: 0x10 0x00): the env stops
            _fetch(mem, pc, i)
            status[i] = _STOPPED
            return 1
        e = _signed(_fetch(mem, pc, i))  # JR e (y = 3), JR cc,e (y = 4..7: cc = y - 4)
        if y == 3 or _condition(regs, i, y - 4):
            pc[i] = (pc[i] + e) & 0xFFFF
            return 3
        return 2
    if z == 1:
        if q == 0:  # LD rr,nn
            _set16(regs, sp, i, p, _fetch16(mem, pc, i))
            return 3
        hl = _hl(regs, i)  # ADD HL,rr: H from bit 11, C from bit 15, Z kept
        v = _get16(regs, sp, i, p)
        regs[i, _F] = (regs[i, _F] & 0x80) | _flags(False, False, (hl & 0xFFF) + (v & 0xFFF) > 0xFFF,
                                                     hl + v > 0xFFFF)
        _set16(regs, sp, i, 2, hl + v)
        return 2
    if z == 2:  # LD (BC),A  LD (DE),A  LD (HL+),A  LD (HL-),A and the loads of A (q = 1)
        addr = _get16(regs, sp, i, wp.min(p, 2))
        if p == 2:
            _set16(regs, sp, i, 2, addr + 1)
        elif p == 3:
            _set16(regs, sp, i, 2, addr - 1)
        if q == 0:
            _wr(mem, i, addr, regs[i, _A])
        else:
            regs[i, _A] = _rd(mem, i, addr)
        return 2
    if z == 3:  # INC rr / DEC rr (no flags)
        _set16(regs, sp, i, p, _get16(regs, sp, i, p) + 1 - 2 * q)
        return 2
    if z == 4 or z == 5:  # INC r / DEC r: C kept
        v = _get8(regs, mem, i, y)
        dec = z == 5
        r = (v + wp.where(dec, -1, 1)) & 0xFF
        h = wp.where(dec, (v & 0xF) == 0, (v & 0xF) == 0xF)
        regs[i, _F] = (regs[i, _F] & 0x10) | _flags(r == 0, dec, h, False)
        _set8(regs, mem, i, y, r)
        return wp.where(y == 6, 3, 1)
    if z == 6:  # LD r,n
        _set8(regs, mem, i, y, _fetch(mem, pc, i))
        return wp.where(y == 6, 3, 2)
    _accumulator(regs, i, y)
    return 1


@wp.func
def _lock(pc: Vec, status: Vec, i: int) -> int:
    """An illegal opcode: the CPU hangs (Pan Docs); PC stays on it."""
    pc[i] = (pc[i] - 1) & 0xFFFF
    status[i] = _LOCKED
    return 1


@wp.func
def _block3(regs: Regs, mem: Mem, sp: Vec, pc: Vec, ime: Vec, ei_delay: Vec, status: Vec, opcodes: Regs,
            i: int, y: int, z: int) -> int:
    """Opcodes 0xC0-0xFF; returns M-cycles."""
    p = y >> 1
    q = y & 1
    if z == 0:
        if y < 4:  # RET cc
            if _condition(regs, i, y):
                pc[i] = _pop(mem, sp, i)
                return 5
            return 2
        if y == 4:  # LDH (n),A
            _wr(mem, i, 0xFF00 + _fetch(mem, pc, i), regs[i, _A])
            return 3
        if y == 6:  # LDH A,(n)
            regs[i, _A] = _rd(mem, i, 0xFF00 + _fetch(mem, pc, i))
            return 3
        r = _sp_offset(regs, sp, i, _fetch(mem, pc, i))
        if y == 5:  # ADD SP,e
            sp[i] = r
            return 4
        _set16(regs, sp, i, 2, r)  # LD HL,SP+e
        return 3
    if z == 1:
        if q == 0:  # POP rr
            _set_stack_pair(regs, i, p, _pop(mem, sp, i))
            return 3
        if p < 2:  # RET, RETI (enables IME at once)
            pc[i] = _pop(mem, sp, i)
            if p == 1:
                ime[i] = 1
            return 4
        if p == 2:  # JP HL
            pc[i] = _hl(regs, i)
            return 1
        sp[i] = _hl(regs, i)  # LD SP,HL
        return 2
    if z == 2:
        if y < 4:  # JP cc,nn
            nn = _fetch16(mem, pc, i)
            if _condition(regs, i, y):
                pc[i] = nn
                return 4
            return 3
        if y == 4:  # LD (C),A
            _wr(mem, i, 0xFF00 + regs[i, 1], regs[i, _A])
            return 2
        if y == 6:  # LD A,(C)
            regs[i, _A] = _rd(mem, i, 0xFF00 + regs[i, 1])
            return 2
        nn = _fetch16(mem, pc, i)
        if y == 5:  # LD (nn),A
            _wr(mem, i, nn, regs[i, _A])
        else:  # LD A,(nn)
            regs[i, _A] = _rd(mem, i, nn)
        return 4
    if z == 3:
        if y == 0:  # JP nn
            pc[i] = _fetch16(mem, pc, i)
            return 4
        if y == 1:
            return _prefix_cb(regs, mem, pc, i, opcodes)
        if y == 6:  # DI (also cancels a pending EI)
            ime[i] = 0
            ei_delay[i] = 0
            return 1
        if y == 7:  # EI: IME is set after the next instruction
            ei_delay[i] = 2
            return 1
        return _lock(pc, status, i)
    if z == 4:
        if y < 4:  # CALL cc,nn
            nn = _fetch16(mem, pc, i)
            if _condition(regs, i, y):
                _push(mem, sp, i, pc[i])
                pc[i] = nn
                return 6
            return 3
        return _lock(pc, status, i)
    if z == 5:
        if q == 0:  # PUSH rr
            _push(mem, sp, i, _get_stack_pair(regs, i, p))
            return 4
        if p == 0:  # CALL nn
            nn = _fetch16(mem, pc, i)
            _push(mem, sp, i, pc[i])
            pc[i] = nn
            return 6
        return _lock(pc, status, i)
    if z == 6:  # ALU A,n
        _alu(regs, i, y, _fetch(mem, pc, i))
        return 2
    _push(mem, sp, i, pc[i])  # RST y*8
    pc[i] = y * 8
    return 4


@wp.func
def _execute(regs: Regs, mem: Mem, sp: Vec, pc: Vec, ime: Vec, ei_delay: Vec, status: Vec, opcodes: Regs,
             i: int) -> int:
    """Fetch, decode (x = op >> 6) and execute one instruction; returns its M-cycles."""
    op = _fetch(mem, pc, i)
    opcodes[i, op] = opcodes[i, op] + 1
    x = op >> 6
    y = (op >> 3) & 7
    z = op & 7
    if x == 1:
        if op == 0x76:  # HALT (no interrupts yet: the env stops, PC after it)
            status[i] = _HALTED
            return 1
        _set8(regs, mem, i, y, _get8(regs, mem, i, z))  # LD r,r'
        return wp.where(y == 6 or z == 6, 2, 1)
    if x == 2:
        _alu(regs, i, y, _get8(regs, mem, i, z))  # ALU A,r
        return wp.where(z == 6, 2, 1)
    if x == 0:
        return _block0(regs, mem, sp, pc, status, i, y, z)
    return _block3(regs, mem, sp, pc, ime, ei_delay, status, opcodes, i, y, z)


@wp.kernel
def _run(regs: Regs, mem: Mem, sp: Vec, pc: Vec, ime: Vec, ei_delay: Vec, status: Vec,
         cycles: wp.array(dtype=wp.int64), instructions: Vec, opcodes: Regs, max_instructions: int):
    """One thread per env: step until the env stops (HALT/STOP/lock) or max_instructions have executed."""
    i = wp.tid()
    n = int(0)
    m = wp.int64(0)
    while n < max_instructions and status[i] == _RUNNING:
        m = m + wp.int64(_execute(regs, mem, sp, pc, ime, ei_delay, status, opcodes, i))
        if status[i] != _LOCKED:
            n = n + 1
        if ei_delay[i] > 0:
            ei_delay[i] = ei_delay[i] - 1
            if ei_delay[i] == 0:
                ime[i] = 1
    cycles[i] = cycles[i] + m
    instructions[i] = instructions[i] + n


@dataclass
class State:
    """The envs after ``run`` (numpy arrays; shapes in the module docstring)."""

    regs: np.ndarray
    sp: np.ndarray
    pc: np.ndarray
    ime: np.ndarray
    ei_delay: np.ndarray
    status: np.ndarray
    cycles: np.ndarray
    instructions: np.ndarray
    opcodes: np.ndarray
    memory: np.ndarray

    def register(self, name: str) -> np.ndarray:
        """[N] values of an 8-bit register ("A" .. "L", "F"), a pair ("AF" "BC" "DE" "HL"), "SP" or "PC"."""
        if name in REGISTERS:
            return self.regs[:, REGISTERS.index(name)].copy()
        if name in ("SP", "PC"):
            return getattr(self, name.lower()).copy()
        if len(name) == 2 and all(r in REGISTERS for r in name):
            return (self.register(name[0]) << 8) | self.register(name[1])
        raise ValueError(f"name: expected one of {REGISTERS}, AF BC DE HL, SP, PC; got {name!r}")


def _validate(rom, n_envs, max_instructions, device) -> None:
    if not isinstance(rom, (bytes, bytearray)) or len(rom) != ROM_SIZE:
        got = f"{len(rom)} bytes" if isinstance(rom, (bytes, bytearray)) else type(rom).__name__
        raise ValueError(f"rom: expected bytes of length {ROM_SIZE} (a ROM-only cartridge), got {got}")
    for name, value, low in (("n_envs", n_envs, 1), ("max_instructions", max_instructions, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or value > 2**31 - 1:
            raise ValueError(f"{name}: expected an int in [{low}, 2**31 - 1], got {value!r}")
    if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:k]', got {device!r}")


def run(rom: bytes, n_envs: int, max_instructions: int, device: str = "cpu") -> State:
    """Load ``rom`` into each of ``n_envs`` envs, set the DMG post-boot registers (``POST_BOOT``; the rest of
    memory is 0, IME 0) and step every env until it halts, stops or locks, or ``max_instructions`` executed."""
    _validate(rom, n_envs, max_instructions, device)
    memory = np.zeros((n_envs, MEMORY_SIZE), dtype=np.uint8)
    memory[:, :ROM_SIZE] = np.frombuffer(bytes(rom), dtype=np.uint8)
    regs = np.tile(np.array([POST_BOOT[r] for r in REGISTERS], dtype=np.int32), (n_envs, 1))

    def vec(value, dtype=np.int32):
        return wp.array(np.full(n_envs, value, dtype=dtype), device=device)

    arrays = dict(regs=wp.array(regs, device=device), memory=wp.array(memory, device=device),
                  sp=vec(POST_BOOT["SP"]), pc=vec(POST_BOOT["PC"]), ime=vec(0), ei_delay=vec(0),
                  status=vec(RUNNING), cycles=vec(0, np.int64), instructions=vec(0),
                  opcodes=wp.zeros((n_envs, 512), dtype=wp.int32, device=device))
    a = arrays
    wp.launch(_run, dim=n_envs, device=device,
              inputs=[a["regs"], a["memory"], a["sp"], a["pc"], a["ime"], a["ei_delay"], a["status"],
                      a["cycles"], a["instructions"], a["opcodes"], max_instructions])
    return State(**{name: arr.numpy() for name, arr in arrays.items()})
