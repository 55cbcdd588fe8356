"""Contract ``gb_emulator``: a batched Game Boy (DMG) emulator, frame for frame and byte for byte against PyBoy.

Source: the Dreamer plan's batched GPU Game Boy (Warp steps thousands of emulators, frames land as packed2 in
the replay ring). The interface, its constants and the shared argument checks are in
rlspec/contracts/gb_emulator.py; the reference is PyBoy 2.8.1 (rlspec/envs/gameboy/pyboy_gb.py), the fast
implementation the Warp emulator (rlspec/envs/gameboy/warp_gb.py).

Interface
---------
    gb = GameBoyVec(rom: bytes, num_envs: int)          # power-on, then the project's boot ROM
    gb.step(buttons [N] int, frames=1, out=None) -> [N, 144, 40] uint8 packed2 (out itself when given)
    gb.memory(start, stop) -> [N, stop - start] uint8   # inside VRAM, WRAM, OAM or HRAM
    gb.registers() -> [N, 10] int32                     # A F B C D E H L SP PC

Which ROMs
----------
The clauses that run a game run every ROM of the set: by default the project's test programs
(rlspec/envs/gameboy/programs: every opcode and flag case, the timer, DMA, MBC1/3/5 banking, the joypad, the
background, window, objects and palettes; ``busy``, a loop that polls LY from the frame the LCD is switched on)
and the room ROM (rlspec/envs/room/room.gb). Two programs stay out,
for differences between PyBoy 2.8.1 and the Warp core that tests/gameboy names with their values: ``interrupts``
(the HALT bug, which the hardware has and PyBoy lacks) and ``ppu`` (the STAT mode read right after HALT wakes on
an LYC interrupt, and LY right after the LCD is switched on again, where the two differ by one M-cycle).

Your own ROM: ``rlspec check gb_emulator --rom MY.gb [--rom-frames 600]``, or the environment variable
``RLSPEC_GB_ROMS`` (paths joined by the path separator; ``RLSPEC_GB_FRAMES`` the frames each runs) under pytest.
Each case then plays the ROM for that many frames with random buttons (half of the steps none, the others a
random set of the eight) held for 1 to 4 frames a step, on 1 to 3 envs with different buttons: "the fast path is
exact on my game" is what GB-1 and GB-2 say when they pass.

Where PyBoy 2.8.1 departs from the hardware (Pan Docs "Joypad Input") and a ROM could see it: it raises the
joypad interrupt on any button's press, whether its group (P14 d-pad, P15 buttons) is selected or not, and reads
both groups selected at once as no button pressed. The Warp core does what the hardware does. So the boot ROM
leaves P1 with neither group selected, and the ``joypad`` program, which waits for the joypad interrupt with the
d-pad selected, is played with d-pad buttons only; a ROM of yours that waits on that interrupt with a group
deselected will differ from PyBoy there.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from rlspec.contracts.gb_emulator import FRAME_SHAPE, MIN_ROM, REGIONS, REGISTERS, user_frames, user_roms
from rlspec.reference.packed2 import unpack
from rlspec.spec.core import Contract, Property, by_category, expect_rejection, fail

CLAUSES = {
    "GB-1": "frames: for the same ROM, buttons and frames per step, every step's frame (the last of its frames, "
            "packed2 [N, 144, 40]) equals PyBoy 2.8.1's running the same boot ROM, for every env",
    "GB-2": "state at frame ends: after every step, VRAM, WRAM, OAM and HRAM (memory) and A F B C D E H L SP PC "
            "(registers) equal PyBoy 2.8.1's",
    "GB-3": "frame skip: step(buttons, frames=k) ends where k calls of step(buttons, frames=1) end: the same frame, "
            "memory and registers",
    "GB-4": "out and dtypes: step writes the frame into out and returns out itself; without out it returns a new "
            "uint8 [N, 144, 40]; memory(start, stop) is uint8 [N, stop - start], registers() int32 [N, 10]",
    "GB-5": "bad input is rejected naming the field: a ROM under 32 KiB or not bytes, num_envs < 1, buttons "
            "outside 0..255 or of another dtype or shape, frames < 1, out of another shape, dtype or layout, a "
            "memory range outside one region",
    "GB-6": "a rejected call changes nothing: the next steps give what they would have, and out is not written",
}

CATEGORIES = by_category(maths=("GB-1", "GB-2", "GB-3", "GB-4"), validation=("GB-5", "GB-6"))

INTERFACE = ("GameBoyVec",)
"""
GameBoyVec(rom: bytes, num_envs: int)
    .step(buttons: Tensor, frames: int = 1, out: Tensor | None = None) -> Tensor
    .memory(start: int, stop: int) -> Tensor
    .registers() -> Tensor
"""

BOOT_FRAMES = 10  # frames before the cartridge runs: the boot ROM clears the RAMs (9 frames) and hands over
LEFT_OUT = ("interrupts", "ppu")  # module docstring
BUTTON_MASK = dict(joypad=0x0F)  # the d-pad only: module docstring
ROOM_FRAMES = 40
BUSY_FRAMES = 50  # programs.busy (the throughput benchmark's loop, which never halts): its set-up and 25 frames


class Rom(NamedTuple):
    name: str
    data: bytes
    frames: int  # frames each case runs
    buttons: int = 0xFF  # the buttons its cases press (bit k = BUTTONS[k])


def _reference():
    """PyBoy, imported on first use: it is the ``dreamer`` extra, and listing the other contracts must not need
    it."""
    from rlspec.envs.gameboy import pyboy_gb

    return pyboy_gb


@functools.lru_cache(maxsize=None)
def _project_roms() -> tuple[Rom, ...]:
    from rlspec.envs.gameboy.build import HERE
    from rlspec.envs.gameboy.programs import FRAMES

    room = HERE.parents[1] / "room/room.gb"  # rlspec/envs/room/room.gb, read without importing PyBoy

    programs = tuple(Rom(name, (HERE / f"{name}.gb").read_bytes(), BOOT_FRAMES + frames, BUTTON_MASK.get(name, 0xFF))
                     for name, frames in sorted(FRAMES.items()) if name not in LEFT_OUT)
    return (*programs, Rom("busy", (HERE / "busy.gb").read_bytes(), BUSY_FRAMES),
            Rom("room", room.read_bytes(), ROOM_FRAMES))


def roms() -> tuple[Rom, ...]:
    """The ROMs the clauses run: RLSPEC_GB_ROMS's (``rlspec check --rom``), else the project's."""
    paths = user_roms()
    return tuple(Rom(p.name, p.read_bytes(), user_frames()) for p in paths) if paths else _project_roms()


# --------------------------------------------------------------------------------------------------
# Playing a ROM: a case's buttons and frame counts, the trajectory an implementation gives
# --------------------------------------------------------------------------------------------------
class Moment(NamedTuple):
    """The state after one step: frame [N, 144, 40], memory {region: [N, size]}, registers [N, 10]."""

    frame: torch.Tensor
    memory: dict[str, torch.Tensor]
    registers: torch.Tensor


def schedule(case: dict, frames: int, mask: int = 0xFF) -> list[tuple[torch.Tensor, int]]:
    """[(buttons [N] int64, frames this step)] covering ``frames`` frames: per step and env no button half of the
    time, else a random set of the eight (of ``mask``'s), held for 1..max_skip frames."""
    g = torch.Generator().manual_seed(case["seed"])
    n, plan, done = case["num_envs"], [], 0
    while done < frames:
        k = min(int(torch.randint(1, case["max_skip"] + 1, (1,), generator=g)), frames - done)
        pressed = (torch.randint(0, 256, (n,), generator=g) & mask) * (torch.rand(n, generator=g) < 0.5)
        plan.append((pressed, k))
        done += k
    return plan


def moment(gb, frame: torch.Tensor) -> Moment:
    return Moment(frame.clone(), {name: gb.memory(lo, hi) for name, (lo, hi) in REGIONS.items()}, gb.registers())


def play(impl, rom: Rom, case: dict, plan=None) -> list[Moment]:
    gb = impl.GameBoyVec(rom.data, case["num_envs"])
    return [moment(gb, gb.step(buttons, k)) for buttons, k in plan or schedule(case, rom.frames, rom.buttons)]


@functools.lru_cache(maxsize=64)
def _expected(rom: Rom, num_envs: int, seed: int, max_skip: int) -> list[Moment]:
    return play(_reference(), rom, dict(num_envs=num_envs, seed=seed, max_skip=max_skip))


def expected(rom: Rom, case: dict) -> list[Moment]:
    return _expected(rom, case["num_envs"], case["seed"], case["max_skip"])


def _at(case: dict, rom: Rom, step: int, plan) -> str:
    done = sum(k for _, k in plan[:step + 1])
    return (f"{rom.name}, step {step} (frames {done - plan[step][1] + 1}-{done} after power-on), "
            f"num_envs={case['num_envs']}, seed={case['seed']}, max_skip={case['max_skip']}")


def frame_difference(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """The first differing env and pixel of two packed2 frames [N, 144, 40], with both shades."""
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return f"frame {got.dtype} {tuple(got.shape)}, expected {want.dtype} {tuple(want.shape)}"
    g, w = unpack(got.cpu().contiguous()), unpack(want)  # [N, 144, 160]
    diff = (g != w).nonzero()
    if not len(diff):
        return None
    env, y, x = diff[0].tolist()
    count = int((g[env] != w[env]).sum())
    return f"env {env} pixel (x {x}, y {y}): shade {g[env, y, x]}, PyBoy {w[env, y, x]} ({count} pixels differ)"


def state_difference(got: Moment, want: Moment) -> str | None:
    """The first differing byte of each region and every differing register of the first env that differs."""
    for env in range(want.registers.shape[0]):
        out = []
        for name, (lo, _) in REGIONS.items():
            g, w = got.memory[name][env].cpu(), want.memory[name][env]
            where = (g != w).nonzero()
            if len(where):
                a = int(where[0])
                out.append(f"{name} 0x{lo + a:04X}: 0x{int(g[a]):02X}, PyBoy 0x{int(w[a]):02X} ({len(where)} bytes "
                           "differ)")
        out += [f"{r} 0x{int(got.registers[env, k]):X}, PyBoy 0x{int(want.registers[env, k]):X}"
                for k, r in enumerate(REGISTERS) if int(got.registers[env, k]) != int(want.registers[env, k])]
        if out:
            return f"env {env}: " + "; ".join(out)
    return None


def check_frames(impl, **case):
    for rom in roms():
        plan = schedule(case, rom.frames, rom.buttons)
        for t, (got, want) in enumerate(zip(play(impl, rom, case, plan), expected(rom, case))):
            diff = frame_difference(got.frame, want.frame)
            if diff:
                fail("GB-1", f"{_at(case, rom, t, plan)}: the frame differs: {diff}")


def check_state(impl, **case):
    for rom in roms():
        plan = schedule(case, rom.frames, rom.buttons)
        for t, (got, want) in enumerate(zip(play(impl, rom, case, plan), expected(rom, case))):
            diff = state_difference(got, want)
            if diff:
                fail("GB-2", f"{_at(case, rom, t, plan)}: the state differs: {diff}")


def check_frame_skip(impl, **case):
    for rom in roms():
        plan = schedule(case, rom.frames, rom.buttons)
        singles = play(impl, rom, case, [(b, 1) for b, k in plan for _ in range(k)])
        ends = [sum(k for _, k in plan[:t + 1]) - 1 for t in range(len(plan))]
        for t, got in enumerate(play(impl, rom, case, plan)):
            want = singles[ends[t]]
            diff = frame_difference(got.frame, want.frame) or state_difference(got, want)
            if diff:
                fail("GB-3", f"{_at(case, rom, t, plan)}: step(buttons, frames={plan[t][1]}) differs from "
                             f"{plan[t][1]} steps of one frame: {diff.replace('PyBoy', 'one at a time')}")


def _first(num_envs: int):
    rom = roms()[0]
    return rom, schedule(dict(num_envs=num_envs, seed=1, max_skip=3), min(rom.frames, 24), rom.buttons)


def check_out(impl, num_envs):
    rom, plan = _first(num_envs)
    given, fresh = impl.GameBoyVec(rom.data, num_envs), impl.GameBoyVec(rom.data, num_envs)
    shape = (num_envs, *FRAME_SHAPE)
    for t, (buttons, k) in enumerate(plan):
        out = torch.full(shape, 0xAA, dtype=torch.uint8)
        returned, new = given.step(buttons, k, out), fresh.step(buttons, k)
        if returned is not out:
            fail("GB-4", f"step {t}: step(buttons, frames, out) did not return out itself", num_envs=num_envs)
        if not isinstance(new, torch.Tensor) or new.dtype != torch.uint8 or tuple(new.shape) != shape:
            fail("GB-4", f"step {t}: step(buttons, frames) returned {type(new).__name__} "
                         f"{getattr(new, 'dtype', '')} {tuple(getattr(new, 'shape', ()))}, expected uint8 {shape}")
        if not torch.equal(out, new.cpu()):
            fail("GB-4", f"step {t}: the frame written into out differs from the one returned without out: "
                         f"{frame_difference(out, new)}", num_envs=num_envs)
    for lo, hi in ((0xC000, 0xC010), (0xFF80, 0xFFFF), (0x9FFF, 0xA000)):
        m = given.memory(lo, hi)
        if not isinstance(m, torch.Tensor) or m.dtype != torch.uint8 or tuple(m.shape) != (num_envs, hi - lo):
            fail("GB-4", f"memory(0x{lo:04X}, 0x{hi:04X}) returned {getattr(m, 'dtype', type(m).__name__)} "
                         f"{tuple(getattr(m, 'shape', ()))}, expected uint8 {(num_envs, hi - lo)}")
    r = given.registers()
    if not isinstance(r, torch.Tensor) or r.dtype != torch.int32 or tuple(r.shape) != (num_envs, len(REGISTERS)):
        fail("GB-4", f"registers() returned {getattr(r, 'dtype', type(r).__name__)} {tuple(getattr(r, 'shape', ()))}, "
                     f"expected int32 {(num_envs, len(REGISTERS))}")


def _bad_inputs(n: int):
    """(what, call(gb), names, mentions)."""
    ok = torch.zeros(n, dtype=torch.int64)
    return (
        ("buttons 256", lambda gb: gb.step(torch.full((n,), 256)), ["buttons"], ["256", "0..255"]),
        ("buttons -1", lambda gb: gb.step(torch.full((n,), -1, dtype=torch.int32)), ["buttons"], ["-1"]),
        ("float buttons", lambda gb: gb.step(torch.zeros(n)), ["buttons"], ["float32"]),
        ("buttons as a list", lambda gb: gb.step([0] * n), ["buttons"], ["list"]),
        ("buttons [N+1]", lambda gb: gb.step(torch.zeros(n + 1, dtype=torch.int64)), ["buttons"], [f"({n + 1},)"]),
        ("frames 0", lambda gb: gb.step(ok, 0), ["frames"], ["0"]),
        ("frames 1.5", lambda gb: gb.step(ok, 1.5), ["frames"], ["1.5"]),
        ("out int32", lambda gb: gb.step(ok, 1, torch.zeros(n, *FRAME_SHAPE, dtype=torch.int32)), ["out"],
         ["uint8", "int32"]),
        ("out unpacked [N, 144, 160]", lambda gb: gb.step(ok, 1, torch.zeros(n, 144, 160, dtype=torch.uint8)),
         ["out"], [f"({n}, 144, 160)", f"({n}, 144, 40)"]),
        ("out non-contiguous", lambda gb: gb.step(ok, 1, torch.zeros(n, 40, 144, dtype=torch.uint8).transpose(1, 2)),
         ["out"], ["contiguous"]),
        ("memory across WRAM's end", lambda gb: gb.memory(0xDFF0, 0xE010), ["start", "stop"], [str(0xE010)]),
        ("memory in ROM", lambda gb: gb.memory(0x0100, 0x0150), ["start", "stop"], [str(0x0100)]),
        ("memory empty", lambda gb: gb.memory(0xC010, 0xC010), ["start", "stop"], [str(0xC010)]),
    )


def check_rejects(impl, num_envs):
    rom = roms()[0]
    for what, args, names, mentions in ((f"a ROM of {MIN_ROM - 1} bytes", (rom.data[:MIN_ROM - 1], 1), ["rom"],
                                         [str(MIN_ROM - 1)]),
                                        ("a ROM given as a path", (str(rom.name), 1), ["rom"], ["str"]),
                                        ("num_envs 0", (rom.data, 0), ["num_envs"], ["0"])):
        expect_rejection("GB-5", lambda args=args: impl.GameBoyVec(*args), names=names, mentions=mentions,
                         what=f"GameBoyVec({what})")
    gb = impl.GameBoyVec(rom.data, num_envs)
    for what, call, names, mentions in _bad_inputs(num_envs):
        expect_rejection("GB-5", lambda call=call: call(gb), names=names, mentions=mentions, what=what)


def check_rejection_keeps_state(impl, num_envs, bad):
    rom, plan = _first(num_envs)
    what, call, _, _ = _bad_inputs(num_envs)[bad]
    clean, tried = impl.GameBoyVec(rom.data, num_envs), impl.GameBoyVec(rom.data, num_envs)
    for t, (buttons, k) in enumerate(plan):
        if t == len(plan) // 2:
            out = torch.full((num_envs, *FRAME_SHAPE), 0x55, dtype=torch.uint8)
            for attempt, args in ((call, (tried,)), (tried.step, (torch.full((num_envs,), 256), k, out))):
                try:
                    attempt(*args)
                except (ValueError, TypeError):
                    pass
            if not bool((out == 0x55).all()):
                fail("GB-6", f"step(buttons 256, {k}, out) wrote into out before rejecting", num_envs=num_envs)
        want, got = (moment(gb, gb.step(buttons, k)) for gb in (clean, tried))
        diff = frame_difference(got.frame, want.frame) or state_difference(got, want)
        if diff:
            fail("GB-6", f"step {t} (the rejected call, {what}, came before step {len(plan) // 2}) differs from an "
                         f"emulator never given it: {diff.replace('PyBoy', 'untouched')}", num_envs=num_envs)


games = st.fixed_dictionaries(dict(num_envs=st.integers(1, 3), seed=st.integers(0, 2**31 - 1),
                                   max_skip=st.integers(1, 4)))
GAME_EXAMPLES = (dict(num_envs=2, seed=0, max_skip=3), dict(num_envs=1, seed=7, max_skip=1))
envs = st.fixed_dictionaries(dict(num_envs=st.integers(1, 3)))

PROPERTIES = (
    Property("GB-1", check_frames, games, GAME_EXAMPLES, INTERFACE, max_examples=1),
    Property("GB-2", check_state, games, GAME_EXAMPLES, INTERFACE, max_examples=1),
    Property("GB-3", check_frame_skip, games, GAME_EXAMPLES[:1], INTERFACE, max_examples=1),
    Property("GB-4", check_out, envs, (dict(num_envs=2),), INTERFACE, max_examples=2),
    Property("GB-5", check_rejects, envs, (dict(num_envs=2),), INTERFACE, max_examples=2),
    Property("GB-6", check_rejection_keeps_state,
             st.fixed_dictionaries(dict(num_envs=st.integers(1, 3), bad=st.integers(0, len(_bad_inputs(1)) - 1))),
             (dict(num_envs=2, bad=0), dict(num_envs=1, bad=7)), INTERFACE, max_examples=4),
)

CONTRACT = Contract("gb_emulator", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES)
