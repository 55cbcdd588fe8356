"""The Warp SM83 core (rlspec/envs/gameboy/sm83.py) against PyBoy on the committed test programs, plus what
PyBoy cannot show: M-cycle counts against the published table, illegal opcodes, ROM writes, STOP, EI's delay,
the post-boot registers and argument checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rlspec.envs.gameboy import build, sm83
from rlspec.envs.gameboy.programs import PROGRAMS

pyboy = pytest.importorskip("pyboy")

N_ENVS = 4
BUDGET = 1_000_000  # instructions; every program halts after fewer than 80 000
MAX_FRAMES = 600
WRAM, HRAM = (0xC000, 0xE000), (0xFF80, 0xFFFF)
COMPARED = ("A", "F", "B", "C", "D", "E", "HL", "SP", "PC")

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
    """A 32 KiB ROM-only image with ``code`` at ``at`` (the rest 0xFF, as makebin fills)."""
    rom = bytearray(b"\xff" * sm83.ROM_SIZE)
    rom[at:at + len(code)] = code
    return bytes(rom)


def differences(core_memory: np.ndarray, core_regs: dict, pyboy_memory: np.ndarray, pyboy_regs: dict) -> list[str]:
    """What differs between a core env and PyBoy: the first differing WRAM/HRAM byte (with the count) and every
    differing register, each with both values; empty when equal."""
    out = []
    for lo, hi in (WRAM, HRAM):
        diff = np.nonzero(core_memory[lo:hi] != pyboy_memory[lo:hi])[0]
        if diff.size:
            a = lo + int(diff[0])
            out.append(f"memory 0x{a:04X}: core 0x{core_memory[a]:02X}, PyBoy 0x{pyboy_memory[a]:02X} "
                       f"({diff.size} differing bytes in 0x{lo:04X}-0x{hi - 1:04X})")
    out += [f"register {r}: core 0x{core_regs[r]:X}, PyBoy 0x{pyboy_regs[r]:X}" for r in COMPARED
            if core_regs[r] != pyboy_regs[r]]
    return out


def core_env(state: sm83.State, env: int) -> tuple[np.ndarray, dict]:
    return state.memory[env], {r: int(state.register(r)[env]) for r in COMPARED}


def run_pyboy(path: Path) -> tuple[np.ndarray, dict]:
    """Run ``path`` in PyBoy (its own boot ROM first) until the CPU is parked on a HALT opcode; WRAM/HRAM and
    the registers. PyBoy keeps PC on the HALT opcode while halted; the SM83 has already fetched it (PC after
    HALT, where execution resumes on wake-up), which is the core's convention: PC is reported + 1."""
    emu = pyboy.PyBoy(str(path), window="null", sound_emulated=False, cgb=False, log_level="ERROR")
    try:
        emu.set_emulation_speed(0)
        regs = emu.register_file
        for _ in range(MAX_FRAMES):
            emu.tick(1, False)
            if regs.PC >= 0x150 and emu.memory[regs.PC] == 0x76:
                break
        else:
            raise AssertionError(f"{path.name}: PyBoy did not reach a HALT in {MAX_FRAMES} frames (PC {regs.PC:#x})")
        memory = np.zeros(sm83.MEMORY_SIZE, dtype=np.uint8)
        for lo, hi in (WRAM, HRAM):
            memory[lo:hi] = emu.memory[lo:hi]
        values = {r: getattr(regs, r) for r in COMPARED}
        values["PC"] += 1
        return memory, values
    finally:
        emu.stop(save=False)


@pytest.fixture(scope="module")
def results():
    """name -> (core State over N_ENVS envs, PyBoy memory, PyBoy registers)."""
    out = {}
    for name in PROGRAMS:
        path = build.HERE / f"{name}.gb"
        out[name] = (sm83.run(path.read_bytes(), N_ENVS, BUDGET), *run_pyboy(path))
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pyboy(results, name):
    state, pyboy_memory, pyboy_regs = results[name]
    assert (state.status == sm83.HALTED).all(), [sm83.STATUS_NAMES[s] for s in state.status]
    for env in range(1, N_ENVS):  # the envs are independent copies: all agree
        assert not differences(*core_env(state, env), *core_env(state, 0)), f"env {env} differs from env 0"
        assert state.cycles[env] == state.cycles[0] and state.instructions[env] == state.instructions[0]
    diff = differences(*core_env(state, 0), pyboy_memory, pyboy_regs)
    assert not diff, f"{name}: " + "; ".join(diff)


def test_programs_execute_every_opcode(results):
    """Together the programs execute every valid base opcode but STOP (test_stop) and all 256 CB opcodes."""
    counts = sum(state.opcodes[0] for state, _, _ in results.values())
    base_missing = {op for op in range(256) if counts[op] == 0}
    assert base_missing == {0x10, *sm83.ILLEGAL}, sorted(hex(op) for op in base_missing)
    assert (counts[256:] > 0).all(), [hex(op) for op in range(256) if counts[256 + op] == 0]


def test_planted_difference_is_reported(results):
    """A planted wrong half-carry (H flipped in the F that the first ADD pushed, 0xDFFE) and a planted wrong
    register are both reported, with the address/register and both values."""
    state, pyboy_memory, pyboy_regs = results["alu"]
    memory, regs = core_env(state, 0)
    memory = memory.copy()
    memory[0xDFFE] ^= 0x20
    regs = dict(regs, E=regs["E"] ^ 1)
    diff = differences(memory, regs, pyboy_memory, pyboy_regs)
    assert diff == [f"memory 0xDFFE: core 0x{memory[0xDFFE]:02X}, PyBoy 0x{pyboy_memory[0xDFFE]:02X} "
                    "(1 differing bytes in 0xC000-0xDFFF)",
                    f"register E: core 0x{regs['E']:X}, PyBoy 0x{pyboy_regs['E']:X}"]


def test_committed_sources_are_generated():
    for name, generate in PROGRAMS.items():
        assert (build.HERE / f"{name}.s").read_text() == generate(), f"programs/{name}.s is stale"


@pytest.mark.skipif(shutil.which("sdasgb") is None, reason="sdcc (sdasgb/sdldgb/makebin) not installed")
def test_committed_roms_rebuild():
    assert build.check() == []


def test_straight_line_cycles_match_the_table():
    """Every opcode that does not branch (base and CB), immediates 0, then HALT: the core's M-cycles equal the
    table's sum (with a flat memory and no MBC, every write and stack access is harmless)."""
    code, expected = bytearray(), 0
    for op in range(256):
        if op in BRANCHES or op in sm83.ILLEGAL or op in (0x10, 0x76, 0xCB):
            continue
        code += bytes([op]) + bytes(1 if op in LENGTH_2 else 2 if op in LENGTH_3 else 0)
        expected += cycles_of(op)
    for op in range(256):
        code += bytes([0xCB, op])
        expected += cb_cycles(op)
    code.append(0x76)
    state = sm83.run(rom_with(bytes(code)), 2, BUDGET)
    assert (state.status == sm83.HALTED).all()
    assert (state.cycles == expected + cycles_of(0x76)).all(), (state.cycles, expected + 1)


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
    state = sm83.run(rom_with(bytes(code)), 1, 100)
    assert state.status[0] == sm83.HALTED and state.cycles[0] == expected


@pytest.mark.parametrize("op", sm83.ILLEGAL)
def test_illegal_opcode_locks(op):
    state = sm83.run(rom_with(bytes([0x00, op, 0x00])), 2, 100)
    assert (state.status == sm83.LOCKED).all() and (state.pc == 0x101).all() and (state.instructions == 1).all()


def test_stop_and_halt_stop_the_env():
    stop = sm83.run(rom_with(bytes([0x10, 0x00, 0x00])), 1, 100)
    halt = sm83.run(rom_with(bytes([0x76, 0x00])), 1, 100)
    assert (stop.status[0], stop.pc[0], stop.cycles[0]) == (sm83.STOPPED, 0x102, 1)
    assert (halt.status[0], halt.pc[0], halt.cycles[0]) == (sm83.HALTED, 0x101, 1)


def test_write_to_rom_is_ignored():
    """ld a,#0x55; ld (0x0200),a; ld a,(0x0200); ld (0x8000),a; halt — the ROM keeps 0x99, VRAM takes it."""
    rom = bytearray(rom_with(bytes([0x3E, 0x55, 0xEA, 0x00, 0x02, 0xFA, 0x00, 0x02, 0xEA, 0x00, 0x80, 0x76])))
    rom[0x200] = 0x99
    state = sm83.run(bytes(rom), 2, 100)
    assert (state.register("A") == 0x99).all() and (state.memory[:, 0x200] == 0x99).all()
    assert (state.memory[:, 0x8000] == 0x99).all()


def test_ei_enables_after_the_next_instruction():
    """ei; nop; nop; halt: IME is 0 after EI, 1 after the next instruction; ei; di leaves it 0; reti sets it."""
    ei = rom_with(bytes([0xFB, 0x00, 0x00, 0x76]))
    assert [sm83.run(ei, 1, k).ime[0] for k in (1, 2, 3)] == [0, 1, 1]
    assert sm83.run(rom_with(bytes([0xFB, 0xF3, 0x00, 0x00, 0x76])), 1, 4).ime[0] == 0
    reti = rom_with(bytes([0xCD, 0x04, 0x01, 0x76, 0xD9]))  # call 0x0104; halt; 0x0104: reti
    assert [sm83.run(reti, 1, k).ime[0] for k in (1, 2)] == [0, 1]


def test_post_boot_registers():
    state = sm83.run(rom_with(b""), 1, 0)
    assert {r: int(state.register(r)[0]) for r in sm83.POST_BOOT} == sm83.POST_BOOT
    assert state.ime[0] == 0 and state.status[0] == sm83.RUNNING and state.cycles[0] == 0


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
        sm83.run(**args)
    assert str(err.value).startswith(f"{field}: ") and str(err.value).endswith(f"got {actual}")
