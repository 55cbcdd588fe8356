"""The SM83 (DMG Game Boy) CPU as Warp functions over a ``Machine`` (hardware.py), one env per Warp thread.

Sources (facts only, no emulator's code): Pan Docs, "CPU Registers and Flags", "CPU Instruction Set",
"Interrupts", "halt bug" (https://gbdev.io/pandocs/); the gbdev opcode table (https://gbdev.io/gb-opcodes/
optables/) for lengths and M-cycle counts; the x/y/z/p/q decoding of the Z80-family opcode byte (op = x:2 y:3
z:3, y = p:2 q:1), which the SM83 table follows.

Registers: ``m.regs[i]`` is B C D E H L F A; F sits at index 6, where the 3-bit register field means (HL), so
``regs[i, r]`` is register r for every r != 6; pairs BC DE HL are (0,1) (2,3) (4,5), AF is (7,6).

``step`` is one CPU step: dispatch a pending interrupt (IME = 1: priority VBlank, STAT, Timer, Serial, Joypad;
5 M-cycles, IME cleared, PC pushed, jump to 0x40/48/50/58/60), or one HALTed M-cycle (HALT waits for
IE & IF != 0, with or without IME), or one instruction; then the hardware catches up with its cycles. EI sets
IME after the next instruction; a STOP or an illegal opcode (the CPU hangs; PC left on it) freezes the env.
"""

from __future__ import annotations

import warp as wp

from rlspec.envs.gameboy.hardware import HALTED, LOCKED, RUNNING, STOPPED, Machine, sync
from rlspec.envs.gameboy.memory import read, write

ILLEGAL = (0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD)

_RUNNING, _HALTED, _STOPPED, _LOCKED = (wp.constant(s) for s in (RUNNING, HALTED, STOPPED, LOCKED))
_F, _A = wp.constant(6), wp.constant(7)  # columns of regs


@wp.func
def _pending(m: Machine, i: int) -> int:
    """IE & IF: the interrupts requested and enabled."""
    return int(m.hram[i, 127]) & int(m.io[i, 0x0F]) & m.interrupts


@wp.func
def _fetch(m: Machine, i: int) -> int:
    """The byte at PC; PC advances, except once after the HALT bug (Pan Docs "halt bug")."""
    p = m.pc[i]
    if m.halt_bug[i] == 1:
        m.halt_bug[i] = 0
    else:
        m.pc[i] = (p + 1) & 0xFFFF
    m.fetched[i] = m.fetched[i] + 1
    return read(m, i, p)


@wp.func
def _fetch16(m: Machine, i: int) -> int:
    """A little-endian 16-bit immediate."""
    lo = _fetch(m, i)
    return lo | (_fetch(m, i) << 8)


@wp.func
def _signed(u: int) -> int:
    """An 8-bit two's-complement offset e as -128..127."""
    return wp.where(u >= 128, u - 256, u)


@wp.func
def _push(m: Machine, i: int, v: int):
    """SP -= 2; high byte at SP+1, low byte at SP."""
    s = (m.sp[i] - 1) & 0xFFFF
    write(m, i, s, v >> 8)
    s = (s - 1) & 0xFFFF
    write(m, i, s, v & 0xFF)
    m.sp[i] = s


@wp.func
def _pop(m: Machine, i: int) -> int:
    s = m.sp[i]
    lo = read(m, i, s)
    hi = read(m, i, (s + 1) & 0xFFFF)
    m.sp[i] = (s + 2) & 0xFFFF
    return lo | (hi << 8)


# ---- registers -----------------------------------------------------------------------------------------------

@wp.func
def _hl(m: Machine, i: int) -> int:
    return (m.regs[i, 4] << 8) | m.regs[i, 5]


@wp.func
def _get8(m: Machine, i: int, r: int) -> int:
    """The 3-bit register field r: B C D E H L (HL) A."""
    if r == 6:
        return read(m, i, _hl(m, i))
    return m.regs[i, r]


@wp.func
def _set8(m: Machine, i: int, r: int, v: int):
    if r == 6:
        write(m, i, _hl(m, i), v)
    else:
        m.regs[i, r] = v & 0xFF


@wp.func
def _get16(m: Machine, i: int, p: int) -> int:
    """The 2-bit pair field p of LD rr,nn / INC rr / DEC rr / ADD HL,rr: BC DE HL SP."""
    if p == 3:
        return m.sp[i]
    return (m.regs[i, 2 * p] << 8) | m.regs[i, 2 * p + 1]


@wp.func
def _set16(m: Machine, i: int, p: int, v: int):
    if p == 3:
        m.sp[i] = v & 0xFFFF
    else:
        m.regs[i, 2 * p] = (v >> 8) & 0xFF
        m.regs[i, 2 * p + 1] = v & 0xFF


@wp.func
def _get_stack_pair(m: Machine, i: int, p: int) -> int:
    """The pair field of PUSH/POP: BC DE HL AF."""
    if p == 3:
        return (m.regs[i, _A] << 8) | m.regs[i, _F]
    return (m.regs[i, 2 * p] << 8) | m.regs[i, 2 * p + 1]


@wp.func
def _set_stack_pair(m: Machine, i: int, p: int, v: int):
    """POP: F's low nibble does not exist and reads 0."""
    if p == 3:
        m.regs[i, _A] = (v >> 8) & 0xFF
        m.regs[i, _F] = v & 0xF0
    else:
        m.regs[i, 2 * p] = (v >> 8) & 0xFF
        m.regs[i, 2 * p + 1] = v & 0xFF


# ---- flags ---------------------------------------------------------------------------------------------------

@wp.func
def _flags(z: bool, n: bool, h: bool, c: bool) -> int:
    """F from the four flags: Z 0x80, N 0x40, H 0x20, C 0x10 (the low nibble is always 0)."""
    return wp.where(z, 0x80, 0) | wp.where(n, 0x40, 0) | wp.where(h, 0x20, 0) | wp.where(c, 0x10, 0)


@wp.func
def _carry(m: Machine, i: int) -> int:
    return (m.regs[i, _F] >> 4) & 1


@wp.func
def _condition(m: Machine, i: int, cc: int) -> bool:
    """The 2-bit condition field: NZ Z NC C."""
    f = m.regs[i, _F]
    flag = wp.where(cc < 2, (f >> 7) & 1, (f >> 4) & 1)
    return flag == (cc & 1)


# ---- operation groups ----------------------------------------------------------------------------------------

@wp.func
def _alu(m: Machine, i: int, y: int, b: int):
    """A = A op b for op y: ADD ADC SUB SBC AND XOR OR CP (CP keeps A). H is the carry out of bit 3 (borrow
    into bit 4 for SUB/SBC/CP), C the carry out of bit 7 (borrow); AND sets H."""
    a = m.regs[i, _A]
    c = wp.where(y == 1 or y == 3, _carry(m, i), 0)
    r = 0
    f = 0
    if y < 2:
        r = a + b + c
        f = _flags((r & 0xFF) == 0, False, (a & m.half_carry) + (b & m.half_carry) + c > m.half_carry, r > 0xFF)
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
    m.regs[i, _F] = f
    if y != 7:
        m.regs[i, _A] = r & 0xFF


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
def _accumulator(m: Machine, i: int, y: int):
    """Block 0, z = 7: RLCA RRCA RLA RRA (as CB's RLC RRC RL RR on A but Z = 0), DAA, CPL, SCF, CCF."""
    a = m.regs[i, _A]
    f = m.regs[i, _F]
    if y < 4:
        rc = _shift(y, a, _carry(m, i))
        m.regs[i, _A] = rc & 0xFF
        m.regs[i, _F] = _flags(False, False, False, (rc >> 8) == 1)
    elif y == 4:
        af = _daa(a, f)
        m.regs[i, _A] = af & 0xFF
        m.regs[i, _F] = af >> 8
    elif y == 5:
        m.regs[i, _A] = a ^ 0xFF
        m.regs[i, _F] = f | 0x60
    elif y == 6:
        m.regs[i, _F] = (f & 0x80) | 0x10
    else:
        m.regs[i, _F] = (f & 0x80) | ((f & 0x10) ^ 0x10)


@wp.func
def _sp_offset(m: Machine, i: int, u: int) -> int:
    """SP + e of ADD SP,e and LD HL,SP+e: Z = N = 0, H and C the carries out of bits 3 and 7 of the
    unsigned low-byte addition SP.lo + u."""
    s = m.sp[i]
    m.regs[i, _F] = _flags(False, False, (s & 0xF) + (u & 0xF) > 0xF, (s & 0xFF) + u > 0xFF)
    return (s + _signed(u)) & 0xFFFF


@wp.func
def _prefix_cb(m: Machine, i: int) -> int:
    """A CB-prefixed opcode (x: shift group / BIT / RES / SET; y: operation or bit; z: register). Returns its
    M-cycles including the prefix: 2, with (HL) 4, BIT b,(HL) 3."""
    op = _fetch(m, i)
    m.opcodes[i, 256 + op] = m.opcodes[i, 256 + op] + 1
    x = op >> 6
    y = (op >> 3) & 7
    z = op & 7
    v = _get8(m, i, z)
    if x == 1:
        bit_clear = ((v >> y) & 1) == 0
        m.regs[i, _F] = (m.regs[i, _F] & 0x10) | _flags(bit_clear, False, True, False)
        return wp.where(z == 6, 3, 2)
    if x == 0:
        rc = _shift(y, v, _carry(m, i))
        m.regs[i, _F] = _flags((rc & 0xFF) == 0, False, False, (rc >> 8) == 1)
        _set8(m, i, z, rc)
    elif x == 2:
        _set8(m, i, z, v & ((1 << y) ^ 0xFF))
    else:
        _set8(m, i, z, v | (1 << y))
    return wp.where(z == 6, 4, 2)


@wp.func
def _block0(m: Machine, i: int, y: int, z: int) -> int:
    """Opcodes 0x00-0x3F; returns M-cycles."""
    p = y >> 1
    q = y & 1
    if z == 0:
        if y == 0:  # NOP
            return 1
        if y == 1:  # LD (nn),SP
            nn = _fetch16(m, i)
            write(m, i, nn, m.sp[i] & 0xFF)
            write(m, i, (nn + 1) & 0xFFFF, m.sp[i] >> 8)
            return 5
        if y == 2:  # STOP (2 bytes: 0x10 0x00): the env stops
            _fetch(m, i)
            m.status[i] = _STOPPED
            return 1
        e = _signed(_fetch(m, i))  # JR e (y = 3), JR cc,e (y = 4..7: cc = y - 4)
        if y == 3 or _condition(m, i, y - 4):
            m.pc[i] = (m.pc[i] + e) & 0xFFFF
            return 3
        return 2
    if z == 1:
        if q == 0:  # LD rr,nn
            _set16(m, i, p, _fetch16(m, i))
            return 3
        hl = _hl(m, i)  # ADD HL,rr: H from bit 11, C from bit 15, Z kept
        v = _get16(m, i, p)
        m.regs[i, _F] = (m.regs[i, _F] & 0x80) | _flags(False, False, (hl & 0xFFF) + (v & 0xFFF) > 0xFFF,
                                                     hl + v > 0xFFFF)
        _set16(m, i, 2, hl + v)
        return 2
    if z == 2:  # LD (BC),A  LD (DE),A  LD (HL+),A  LD (HL-),A and the loads of A (q = 1)
        addr = _get16(m, i, wp.min(p, 2))
        if p == 2:
            _set16(m, i, 2, addr + 1)
        elif p == 3:
            _set16(m, i, 2, addr - 1)
        if q == 0:
            write(m, i, addr, m.regs[i, _A])
        else:
            m.regs[i, _A] = read(m, i, addr)
        return 2
    if z == 3:  # INC rr / DEC rr (no flags)
        _set16(m, i, p, _get16(m, i, p) + 1 - 2 * q)
        return 2
    if z == 4 or z == 5:  # INC r / DEC r: C kept
        v = _get8(m, i, y)
        dec = z == 5
        r = (v + wp.where(dec, -1, 1)) & 0xFF
        h = wp.where(dec, (v & 0xF) == 0, (v & 0xF) == 0xF)
        m.regs[i, _F] = (m.regs[i, _F] & 0x10) | _flags(r == 0, dec, h, False)
        _set8(m, i, y, r)
        return wp.where(y == 6, 3, 1)
    if z == 6:  # LD r,n
        _set8(m, i, y, _fetch(m, i))
        return wp.where(y == 6, 3, 2)
    _accumulator(m, i, y)
    return 1


@wp.func
def _lock(m: Machine, i: int) -> int:
    """An illegal opcode: the CPU hangs (Pan Docs); PC stays on it."""
    m.pc[i] = (m.pc[i] - 1) & 0xFFFF
    m.status[i] = _LOCKED
    return 1


@wp.func
def _block3(m: Machine, i: int, y: int, z: int) -> int:
    """Opcodes 0xC0-0xFF; returns M-cycles."""
    p = y >> 1
    q = y & 1
    if z == 0:
        if y < 4:  # RET cc
            if _condition(m, i, y):
                m.pc[i] = _pop(m, i)
                return 5
            return 2
        if y == 4:  # LDH (n),A
            write(m, i, 0xFF00 + _fetch(m, i), m.regs[i, _A])
            return 3
        if y == 6:  # LDH A,(n)
            m.regs[i, _A] = read(m, i, 0xFF00 + _fetch(m, i))
            return 3
        r = _sp_offset(m, i, _fetch(m, i))
        if y == 5:  # ADD SP,e
            m.sp[i] = r
            return 4
        _set16(m, i, 2, r)  # LD HL,SP+e
        return 3
    if z == 1:
        if q == 0:  # POP rr
            _set_stack_pair(m, i, p, _pop(m, i))
            return 3
        if p < 2:  # RET, RETI (enables IME at once: an interrupt pending is dispatched next)
            m.pc[i] = _pop(m, i)
            if p == 1:
                m.ime[i] = 1
            return 4
        if p == 2:  # JP HL
            m.pc[i] = _hl(m, i)
            return 1
        m.sp[i] = _hl(m, i)  # LD SP,HL
        return 2
    if z == 2:
        if y < 4:  # JP cc,nn
            nn = _fetch16(m, i)
            if _condition(m, i, y):
                m.pc[i] = nn
                return 4
            return 3
        if y == 4:  # LD (C),A
            write(m, i, 0xFF00 + m.regs[i, 1], m.regs[i, _A])
            return 2
        if y == 6:  # LD A,(C)
            m.regs[i, _A] = read(m, i, 0xFF00 + m.regs[i, 1])
            return 2
        nn = _fetch16(m, i)
        if y == 5:  # LD (nn),A
            write(m, i, nn, m.regs[i, _A])
        else:  # LD A,(nn)
            m.regs[i, _A] = read(m, i, nn)
        return 4
    if z == 3:
        if y == 0:  # JP nn
            m.pc[i] = _fetch16(m, i)
            return 4
        if y == 1:
            return _prefix_cb(m, i)
        if y == 6:  # DI (also cancels a pending EI)
            m.ime[i] = 0
            m.ei_delay[i] = 0
            return 1
        if y == 7:  # EI: IME is set after the next instruction
            m.ei_delay[i] = 2
            return 1
        return _lock(m, i)
    if z == 4:
        if y < 4:  # CALL cc,nn
            nn = _fetch16(m, i)
            if _condition(m, i, y):
                _push(m, i, m.pc[i])
                m.pc[i] = nn
                return 6
            return 3
        return _lock(m, i)
    if z == 5:
        if q == 0:  # PUSH rr
            _push(m, i, _get_stack_pair(m, i, p))
            return 4
        if p == 0:  # CALL nn
            nn = _fetch16(m, i)
            _push(m, i, m.pc[i])
            m.pc[i] = nn
            return 6
        return _lock(m, i)
    if z == 6:  # ALU A,n
        _alu(m, i, y, _fetch(m, i))
        return 2
    _push(m, i, m.pc[i])  # RST y*8
    m.pc[i] = y * 8
    return 4


@wp.func
def _execute(m: Machine, i: int) -> int:
    """Fetch, decode (x = op >> 6) and execute one instruction; returns its M-cycles."""
    op = _fetch(m, i)
    m.opcodes[i, op] = m.opcodes[i, op] + 1
    x = op >> 6
    y = (op >> 3) & 7
    z = op & 7
    if x == 1:
        if op == 0x76:  # HALT; with IME = 0 and an interrupt pending it does not halt: the HALT bug
            if m.ime[i] == 0 and _pending(m, i) != 0:
                m.halt_bug[i] = 1
            else:
                m.status[i] = _HALTED
            return 1
        _set8(m, i, y, _get8(m, i, z))  # LD r,r'
        return wp.where(y == 6 or z == 6, 2, 1)
    if x == 2:
        _alu(m, i, y, _get8(m, i, z))  # ALU A,r
        return wp.where(z == 6, 2, 1)
    if x == 0:
        return _block0(m, i, y, z)
    return _block3(m, i, y, z)


@wp.func
def _dispatch(m: Machine, i: int, pending: int) -> int:
    """Service the highest-priority pending interrupt (the lowest bit): 5 M-cycles. After the HALT bug (EI; HALT
    with an interrupt pending) the pushed PC is the HALT's, which runs again on return (Pan Docs "halt bug")."""
    bit = int(0)
    while ((pending >> bit) & 1) == 0:
        bit = bit + 1
    m.io[i, 0x0F] = wp.uint8(int(m.io[i, 0x0F]) & ~(1 << bit))
    m.ime[i] = 0
    _push(m, i, (m.pc[i] - m.halt_bug[i]) & 0xFFFF)
    m.halt_bug[i] = 0
    m.pc[i] = 0x40 + 8 * bit
    return 5


@wp.func
def step(m: Machine, i: int) -> int:
    """One CPU step of a RUNNING or HALTED env (module docstring); returns its M-cycles."""
    m.done[i] = 0
    m.fetched[i] = 0
    pending = _pending(m, i)
    if m.status[i] == _HALTED:
        if pending == 0:
            sync(m, i, 4)
            return 1
        m.status[i] = _RUNNING
    mc = 0
    if m.ime[i] == 1 and pending != 0:
        mc = _dispatch(m, i, pending)
    else:
        mc = _execute(m, i)
        if m.status[i] != _LOCKED:
            m.instructions[i] = m.instructions[i] + 1
        if m.ei_delay[i] > 0:
            m.ei_delay[i] = m.ei_delay[i] - 1
            if m.ei_delay[i] == 0:
                m.ime[i] = 1
    sync(m, i, 4 * mc)
    return mc
