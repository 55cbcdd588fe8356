"""The Warp Game Boy (rlspec/envs/gameboy: sm83.py, memory.py, hardware.py, emulator.py) against PyBoy on the
committed test programs, plus what PyBoy cannot show: M-cycle counts against the published table, illegal
opcodes, ROM writes, STOP, EI's delay, the post-boot registers and argument checks."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from rlspec.envs.gameboy import build, emulator, sm83
from rlspec.envs.gameboy.programs import BENCH, BOOT, FRAMES, HALT_BUG, PRESS, PROGRAMS

pyboy = pytest.importorskip("pyboy")

N_ENVS = 4
WRAM, HRAM, OAM = (0xC000, 0xE000), (0xFF80, 0xFFFF), (0xFE00, 0xFEA0)
COMPARED = ("A", "F", "B", "C", "D", "E", "HL", "SP", "PC")
BUTTONS = ("right", "left", "up", "down", "a", "b", "select", "start")  # Emulator.buttons bits 0-7
# Where PyBoy 2.8.1 and the hardware (Pan Docs) differ, and a program observes it: address -> (core, PyBoy).
# The HALT bug: PyBoy does not implement it (HALT with IME 0 and an interrupt pending runs on normally).
KNOWN = dict(interrupts={HALT_BUG: (2, 1)})

# M-cycles per base opcode, gbdev.io/gb-opcodes/optables (Pan Docs "CPU Instruction Set"): "n/t" not taken /
# taken, "-" illegal, "CB" the prefix (CB opcodes: 2, on (HL) 4, BIT b,(HL) 3).
CYCLE_TABLE = """
1 3 2 2 1 1 2 1 5 2 2 2 1 1 2 1
1 3 2 2 1 1 2 1 3 2 2 2 1 1 2 1
2/3 3 2 2 1 1 2 1 2/3 2 2 2 1 1 2 1
2/3 3 2 2 3 3 3 1 2/3 2 2 2 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
2 2 2 2 2 2 1 2 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
1 1 1 1 1 1 2 1 1 1 1 1 1 1 2 1
2/5 3 3/4 4 3/6 4 2 4 2/5 4 3/4 CB 3/6 6 2 4
2/5 3 3/4 - 3/6 4 2 4 2/5 4 3/4 - 3/6 - 2 4
3 3 2 - - 4 2 4 4 1 4 - - - 2 4
3 3 2 1 - 4 2 4 3 2 4 1 - - 2 4
""".split()
BRANCHES = {0x18, 0x20, 0x28, 0x30, 0x38, 0xC0, 0xC2, 0xC3, 0xC4, 0xC7, 0xC8, 0xC9, 0xCA, 0xCC, 0xCD, 0xCF, 0xD0,
            0xD2, 0xD4, 0xD7, 0xD8, 0xD9, 0xDA, 0xDC, 0xDF, 0xE7, 0xE9, 0xEF, 0xF7, 0xFF}
LENGTH_2 = {0x10, 0x18, 0x20, 0x28, 0x30, 0x38, 0xE0, 0xE8, 0xF0, 0xF8} | set(range(0x06, 0x40, 8)) | set(
    range(0xC6, 0x100, 8))
LENGTH_3 = {0x01, 0x11, 0x21, 0x31, 0x08, 0xC2, 0xC3, 0xC4, 0xCA, 0xCC, 0xCD, 0xD2, 0xD4, 0xDA, 0xDC, 0xEA, 0xFA}


def cycles_of(op: int, taken: bool = False) -> int:
    entry = CYCLE_TABLE[op]
    return int(entry.split("/")[taken]) if "/" in entry else int(entry)


def cb_cycles(op: int) -> int:
    return 2 if op & 7 != 6 else 3 if op >> 6 == 1 else 4


def rom_with(code: bytes, at: int = 0x100) -> bytes:
    """A 32 KiB ROM-only image with ``code`` at ``at`` (the rest 0xFF, as makebin fills; header type, ROM and RAM
    size 0)."""
    rom = bytearray(b"\xff" * 0x8000)
    rom[0x147:0x14A] = bytes(3)
    rom[at:at + len(code)] = code
    return bytes(rom)


def run(rom: bytes, n_envs: int = 1, max_instructions: int = 2**31 - 1, frames: int = 1,
        wiring: emulator.Wiring = emulator.Wiring()) -> emulator.Emulator:
    emu = emulator.Emulator(rom, n_envs, wiring=wiring)
    emu.step(emulator.FRAME * frames, max_instructions)
    return emu


def differences(core: dict, pyboy: dict, known: dict | None = None) -> list[str]:
    """What differs between a core env and PyBoy (each a dict: "memory" [65536] with WRAM, OAM and HRAM filled,
    and the registers): the first differing byte of each region (with the count) and every differing register,
    each with both values; empty when equal. ``known`` {address: (core, PyBoy)} are expected differences: each
    must be there exactly, and is not reported."""
    out = []
    cm, pm = core["memory"].copy(), pyboy["memory"]
    for address, (core_value, pyboy_value) in (known or {}).items():
        if (cm[address], pm[address]) != (core_value, pyboy_value):
            out.append(f"known difference at 0x{address:04X}: expected core 0x{core_value:02X}, PyBoy "
                       f"0x{pyboy_value:02X}; got core 0x{cm[address]:02X}, PyBoy 0x{pm[address]:02X}")
        cm[address] = pm[address]
    for lo, hi in (WRAM, OAM, HRAM):
        diff = np.nonzero(cm[lo:hi] != pm[lo:hi])[0]
        if diff.size:
            a = lo + int(diff[0])
            out.append(f"memory 0x{a:04X}: core 0x{cm[a]:02X}, PyBoy 0x{pm[a]:02X} "
                       f"({diff.size} differing bytes in 0x{lo:04X}-0x{hi - 1:04X})")
    out += [f"register {r}: core 0x{core[r]:X}, PyBoy 0x{pyboy[r]:X}" for r in COMPARED if core[r] != pyboy[r]]
    return out


def core_env(emu: emulator.Emulator, env: int) -> dict:
    memory = np.zeros(0x10000, dtype=np.uint8)
    memory[WRAM[0]:WRAM[1]] = emu.region("wram")[env]
    memory[OAM[0]:OAM[1]] = emu.region("oam")[env]
    memory[HRAM[0]:HRAM[1]] = emu.region("hram")[env, :127]
    return dict(memory=memory, **{r: int(emu.register(r)[env]) for r in COMPARED})


def run_core(name: str, n_envs: int = N_ENVS, wiring: emulator.Wiring = emulator.Wiring()) -> emulator.Emulator:
    """The program for FRAMES[name] frames; PRESS: buttons held from a frame on."""
    emu = emulator.Emulator((build.HERE / f"{name}.gb").read_bytes(), n_envs, wiring=wiring)
    at, pressed = PRESS.get(name, (FRAMES[name], ()))
    emu.step_frames(at)
    emu.buttons = sum(1 << BUTTONS.index(b) for b in pressed)
    emu.step_frames(FRAMES[name] - at)
    return emu


def run_pyboy(name: str) -> dict:
    """The program in PyBoy: its boot ROM runs (frames until PC is in the cartridge, from 0x0100 on), then
    FRAMES[name] frames (PRESS: the buttons pressed after that many). PyBoy keeps PC on the HALT opcode while
    halted; the SM83 has already fetched it (PC after HALT, where execution resumes on wake-up), which is the
    core's convention: PC is reported + 1 when PyBoy is parked on a HALT."""
    emu = pyboy.PyBoy(str(build.HERE / f"{name}.gb"), window="null", sound_emulated=False, cgb=False,
                      log_level="ERROR")
    try:
        emu.set_emulation_speed(0)
        regs = emu.register_file
        for _ in range(600):
            emu.tick(1, False)
            if regs.PC >= 0x100:
                break
        else:
            raise AssertionError(f"{name}: PyBoy's boot ROM did not hand over to the cartridge")
        at, pressed = PRESS.get(name, (FRAMES[name], ()))
        emu.tick(at, False)
        for button in pressed:
            emu.button_press(button)
        emu.tick(FRAMES[name] - at, False)
        memory = np.zeros(0x10000, dtype=np.uint8)
        for lo, hi in (WRAM, OAM, HRAM):
            memory[lo:hi] = emu.memory[lo:hi]
        values = {r: getattr(regs, r) for r in COMPARED}
        values["PC"] += emu.memory[regs.PC] == 0x76
        return dict(memory=memory, **values)
    finally:
        emu.stop(save=False)


@pytest.fixture(scope="module")
def results():
    """name -> (core Emulator over N_ENVS envs, PyBoy's state)."""
    return {name: (run_core(name), run_pyboy(name)) for name in PROGRAMS}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pyboy(results, name):
    emu, pyboy_state = results[name]
    assert (emu.region("status") == emulator.HALTED).all(), [emulator.STATUS_NAMES[s] for s in emu.region("status")]
    for env in range(1, N_ENVS):  # the envs are independent copies: all agree
        assert not differences(core_env(emu, env), core_env(emu, 0)), f"env {env} differs from env 0"
        assert emu.region("cycles")[env] == emu.region("cycles")[0]
    diff = differences(core_env(emu, 0), pyboy_state, KNOWN.get(name))
    assert not diff, f"{name}: " + "; ".join(diff)


def test_programs_execute_every_opcode(results):
    """Together the programs execute every valid base opcode but STOP (test_stop) and all 256 CB opcodes."""
    counts = sum(emu.region("opcodes")[0] for emu, _ in results.values())
    base_missing = {op for op in range(256) if counts[op] == 0}
    assert base_missing == {0x10, *sm83.ILLEGAL}, sorted(hex(op) for op in base_missing)
    assert (counts[256:] > 0).all(), [hex(op) for op in range(256) if counts[256 + op] == 0]


def test_planted_difference_is_reported(results):
    """A planted wrong half-carry (H flipped in the F that the first ADD pushed, 0xDFFE) and a planted wrong
    register are both reported, with the address/register and both values."""
    emu, pyboy_state = results["alu"]
    core = core_env(emu, 0)
    core["memory"][0xDFFE] ^= 0x20
    core["E"] ^= 1
    diff = differences(core, pyboy_state)
    pm = pyboy_state["memory"]
    assert diff == [f"memory 0xDFFE: core 0x{core['memory'][0xDFFE]:02X}, PyBoy 0x{pm[0xDFFE]:02X} "
                    "(1 differing bytes in 0xC000-0xDFFF)",
                    f"register E: core 0x{core['E']:X}, PyBoy 0x{pyboy_state['E']:X}"]


@pytest.mark.parametrize("name, fault", [
    ("ppu", dict(line=455)),  # an off-by-one scanline
    ("timer", dict(tac_bits=0x7549)),  # TAC 1 counts the falling edges of divider bit 4, not 3
    ("interrupts", dict(interrupts=0x1B)),  # the timer interrupt is never taken (nor wakes HALT)
    ("mbc1", dict(mbc1_bank_mask=0x0F)),  # MBC1's ROM bank register loses bit 4: banks 16-31 not switched to
])
def test_planted_fault_is_caught(results, name, fault):
    """The same program on a core with one planted fault (``Wiring``) no longer matches PyBoy."""
    emu = run_core(name, 1, emulator.Wiring(**fault))
    assert differences(core_env(emu, 0), results[name][1], KNOWN.get(name)), f"{name}: {fault} went unnoticed"


def test_committed_sources_are_generated():
    for name, generate in {**PROGRAMS, **BOOT, **BENCH}.items():
        assert (build.HERE / f"{name}.s").read_text() == generate(), f"programs/{name}.s is stale"


@pytest.mark.skipif(shutil.which("sdasgb") is None, reason="sdcc (sdasgb/sdldgb/makebin) not installed")
def test_committed_roms_rebuild():
    assert build.check() == []


def m_cycles(emu: emulator.Emulator) -> np.ndarray:
    return emu.region("cycles") // 4


def test_straight_line_cycles_match_the_table():
    """Every opcode that does not branch (base and CB), immediates 0, then HALT, from 0x0150 (``jp 0x0150`` at
    0x0100: the header stays) after ``ld sp,0xD000`` (the stack in WRAM), with no interrupt wired (the
    sequence's IO stores may set IE): the core's M-cycles equal the table's sum."""
    code, expected, count = bytearray([0x31, 0x00, 0xD0]), cycles_of(0xC3) + cycles_of(0x31), 2
    for op in range(256):
        if op in BRANCHES or op in sm83.ILLEGAL or op in (0x10, 0x76, 0xCB):
            continue
        code += bytes([op]) + bytes(1 if op in LENGTH_2 else 2 if op in LENGTH_3 else 0)
        expected, count = expected + cycles_of(op), count + 1
    for op in range(256):
        code += bytes([0xCB, op])
        expected, count = expected + cb_cycles(op), count + 1
    code.append(0x76)
    rom = bytearray(rom_with(bytes([0xC3, 0x50, 0x01])))
    rom[0x150:0x150 + len(code)] = code
    emu = run(bytes(rom), 2, count + 1, wiring=emulator.Wiring(interrupts=0))
    assert (emu.region("status") == emulator.HALTED).all()
    assert (m_cycles(emu) == expected + cycles_of(0x76)).all(), (m_cycles(emu), expected + 1)


def test_branch_cycles_taken_and_not_taken():
    """``xor a`` makes Z = 1, C = 0: each conditional form once taken and once not, to the next instruction."""
    at = 0x100
    code = bytearray([0xAF])  # xor a
    expected = cycles_of(0xAF)
    for op, taken in ((0x20, False), (0x28, True), (0x30, True), (0x38, False)):  # jr cc, +0
        code += bytes([op, 0])
        expected += cycles_of(op, taken)
    for op, taken in ((0xC2, False), (0xCA, True), (0xC4, False), (0xCC, True), (0xD4, True), (0xDC, False)):
        nxt = at + len(code) + 3  # jp/call cc, next instruction
        code += bytes([op, nxt & 0xFF, nxt >> 8])
        expected += cycles_of(op, taken)
    code += bytes([0xC0, 0xD8])  # ret nz, ret c: not taken
    expected += cycles_of(0xC0) + cycles_of(0xD8)
    sub = at + len(code) + 4
    code += bytes([0xCD, sub & 0xFF, sub >> 8, 0x76, 0xC8])  # call sub; halt; sub: ret z (taken)
    expected += cycles_of(0xCD) + cycles_of(0xC8, True) + cycles_of(0x76)
    emu = run(rom_with(bytes(code)), 1, 16)  # the 16 instructions, HALT the last
    assert emu.region("status")[0] == emulator.HALTED and m_cycles(emu)[0] == expected


@pytest.mark.parametrize("op", sm83.ILLEGAL)
def test_illegal_opcode_locks(op):
    """An illegal opcode locks the env: frozen from then on (PC on it, its clock stopped)."""
    emu = run(rom_with(bytes([0x00, op, 0x00])), 2, frames=2)
    assert (emu.region("status") == emulator.LOCKED).all() and (emu.register("PC") == 0x101).all()
    assert (emu.region("instructions") == 1).all() and (m_cycles(emu) == 2).all()


def test_stop_and_halt():
    """STOP freezes the env; HALT with IE = 0 waits for ever while the clock runs on."""
    stop = run(rom_with(bytes([0x10, 0x00, 0x00])))
    halt = run(rom_with(bytes([0x76, 0x00])), max_instructions=1)
    assert (stop.region("status")[0], stop.register("PC")[0], m_cycles(stop)[0]) == (emulator.STOPPED, 0x102, 1)
    assert (halt.region("status")[0], halt.register("PC")[0], m_cycles(halt)[0]) == (emulator.HALTED, 0x101, 1)
    halt.step(emulator.FRAME)
    assert halt.region("status")[0] == emulator.HALTED and halt.region("cycles")[0] == 4 + emulator.FRAME


def test_write_to_rom_is_ignored():
    """ld a,#0x55; ld (0x0200),a; ld a,(0x0200); ld (0x8000),a; halt — the ROM keeps 0x99, VRAM takes it."""
    rom = bytearray(rom_with(bytes([0x3E, 0x55, 0xEA, 0x00, 0x02, 0xFA, 0x00, 0x02, 0xEA, 0x00, 0x80, 0x76])))
    rom[0x200] = 0x99
    emu = run(bytes(rom), 2)
    assert (emu.register("A") == 0x99).all() and (emu.region("vram")[:, 0] == 0x99).all()


def test_ei_enables_after_the_next_instruction():
    """ei; nop; nop; halt: IME is 0 after EI, 1 after the next instruction; ei; di leaves it 0; reti sets it."""
    ei = rom_with(bytes([0xFB, 0x00, 0x00, 0x76]))
    assert [run(ei, 1, k).region("ime")[0] for k in (1, 2, 3)] == [0, 1, 1]
    assert run(rom_with(bytes([0xFB, 0xF3, 0x00, 0x00, 0x76])), 1, 4).region("ime")[0] == 0
    reti = rom_with(bytes([0xCD, 0x04, 0x01, 0x76, 0xD9]))  # call 0x0104; halt; 0x0104: reti
    assert [run(reti, 1, k).region("ime")[0] for k in (1, 2)] == [0, 1]


def test_post_boot_registers():
    emu = run(rom_with(b""), 1, 0)
    assert {r: int(emu.register(r)[0]) for r in emulator.POST_BOOT} == emulator.POST_BOOT
    assert emu.region("ime")[0] == 0 and emu.region("status")[0] == emulator.RUNNING and m_cycles(emu)[0] == 0


@pytest.mark.parametrize("field, kwargs, actual", [
    ("rom", dict(rom=b"\x00" * 100), "100 bytes"),
    ("rom", dict(rom="not bytes"), "str"),
    ("n_envs", dict(n_envs=0), "0"),
    ("n_envs", dict(n_envs=True), "True"),
    ("n_envs", dict(n_envs=2.0), "2.0"),
    ("max_instructions", dict(max_instructions=-1), "-1"),
    ("device", dict(device="tpu"), "'tpu'"),
])
def test_bad_arguments_raise(field, kwargs, actual):
    args = dict(rom=rom_with(b""), n_envs=1, max_instructions=1, device="cpu") | kwargs
    with pytest.raises(ValueError, match="expected") as err:
        emulator.Emulator(args["rom"], args["n_envs"], args["device"]).step(4, args["max_instructions"])
    assert str(err.value).startswith(f"{field}: ") and str(err.value).endswith(f"got {actual}")


@pytest.mark.parametrize("kind", [0x05, 0x08, 0x22, 0xFF])
def test_unsupported_cartridge_type_names_the_byte(kind):
    rom = bytearray(rom_with(b""))
    rom[0x147] = kind
    with pytest.raises(ValueError, match=f"cartridge type 0x{kind:02X} \\(header byte 0x147\\) is not supported"):
        emulator.Emulator(bytes(rom), 1)
