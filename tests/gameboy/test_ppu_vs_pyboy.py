"""The Warp Game Boy's pixels (rlspec/envs/gameboy/ppu.py) against PyBoy 2.8.1, frame for frame: the PPU test
programs (programs.py ``VIDEO``) and the room ROM (rlspec/envs/room/room.gb) driven through its mailbox.

Alignment: both run from their start (PyBoy: after its boot ROM hands over, PC >= 0x0100; the core: the post-boot
state) until the first frame that ends with the LCD on after one that ended with it off — the program's
``LCD on`` after its set-up, where both emulators end a frame; from there frame j of one is frame j of the other.

Where PyBoy 2.8.1 and Pan Docs differ on pixels (ppu.py's docstring: LCDC.0 = 0 with the window or objects behind
the background, an object behind the background over another object), the programs do not go; the blank frames
(LCD off, the first frame after LCD on: BGP's colour 0) are PyBoy's and the core's alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlspec.contracts.params import SCENARIOS
from rlspec.contracts.room_env import RAM
from rlspec.envs.gameboy import build, emulator
from rlspec.envs.gameboy.programs import VIDEO
from rlspec.envs.pyboy_env import screen_shades
from rlspec.envs.room.pyboy_room import ROM as ROOM
from rlspec.fast.packed2 import pack

pyboy = pytest.importorskip("pyboy")

N_ENVS = 3
ROOM_FRAMES = 64
ROOM_STEPS = "right right down down down left left up right right down right right up up left".split()
FRAMES_PER_STEP = 4  # rlspec.contracts.room_env.FRAMESKIP
BUTTON_BITS = dict(right=1, left=2, up=4, down=8)  # Emulator.buttons


def room_inputs(frame: int) -> tuple[dict[int, int], str | None]:
    """Mailbox writes and the d-pad button held before aligned frame ``frame`` of the room: a reset (seed 0x1234,
    scenario room-exit) at frame 0, then step k (1, 2, ...) every FRAMES_PER_STEP frames with button k of
    ROOM_STEPS held through it (pyboy_room.RoomTask's protocol)."""
    step, phase = divmod(frame, FRAMES_PER_STEP)
    button = ROOM_STEPS[step - 1] if 1 <= step <= len(ROOM_STEPS) else None
    if phase or step > len(ROOM_STEPS):
        return {}, button
    if step == 0:
        return {RAM["SEED_LO"]: 0x34, RAM["SEED_HI"]: 0x12, RAM["MODE"]: SCENARIOS["room-exit"], RAM["CMD"]: 1,
                RAM["REQ"]: 1}, None
    return {RAM["CMD"]: 0, RAM["REQ"]: 1}, button


def no_inputs(frame: int) -> tuple[dict[int, int], str | None]:
    return {}, None


class PyBoyRun:
    def __init__(self, path):
        self.emu = pyboy.PyBoy(str(path), window="null", sound_emulated=False, cgb=False, log_level="ERROR")
        self.emu.set_emulation_speed(0)
        self.held = None
        for _ in range(600):
            self.emu.tick(1, True)
            if self.emu.register_file.PC >= 0x100:
                break
        else:
            raise AssertionError(f"{path.name}: PyBoy's boot ROM did not hand over to the cartridge")

    def lcd_on(self) -> bool:
        return self.emu.memory[0xFF40] & 0x80 != 0

    def frame(self, writes: dict[int, int], button: str | None) -> np.ndarray:
        for address, value in writes.items():
            self.emu.memory[address] = value
        if button != self.held:
            if self.held:
                self.emu.button_release(self.held)
            if button:
                self.emu.button_press(button)
            self.held = button
        self.emu.tick(1, True)
        return screen_shades(self.emu)  # [144, 160]


class CoreRun:
    def __init__(self, path, n_envs: int, wiring: emulator.Wiring):
        self.emu = emulator.Emulator(path.read_bytes(), n_envs, wiring=wiring)
        self.out = torch.zeros(n_envs, 144, 40, dtype=torch.uint8)

    def lcd_on(self) -> bool:
        lcdc = self.emu.region("io")[:, 0x40]
        assert (lcdc == lcdc[0]).all(), lcdc
        return lcdc[0] & 0x80 != 0

    def frame(self, writes: dict[int, int], button: str | None) -> np.ndarray:
        for address, value in writes.items():
            self.emu.write_wram(address, value)
        self.emu.buttons = BUTTON_BITS[button] if button else 0
        self.emu.step_frames(1, self.out)
        return self.emu.shades  # [N, 144, 160]


def aligned(run, limit: int = 60) -> None:
    """Step ``run`` until a frame ends with the LCD on after one that ended with it off."""
    was_on = run.lcd_on()
    for _ in range(limit):
        run.frame({}, None)
        on = run.lcd_on()
        if on and not was_on:
            return
        was_on = on
    raise AssertionError(f"no LCD-on within {limit} frames")


def frames(run, count: int, inputs) -> np.ndarray:
    """[count, ...] the frames after alignment, with ``inputs(j)`` before frame j."""
    aligned(run)
    return np.stack([run.frame(*inputs(j)) for j in range(count)])


def first_difference(core: np.ndarray, reference: np.ndarray) -> str | None:
    """core [F, N, 144, 160] against reference [F, 144, 160]: the first differing frame, env, pixel and both
    shades (with the count of differing pixels in that frame), or None."""
    for f in range(len(reference)):
        for env in range(core.shape[1]):
            diff = np.argwhere(core[f, env] != reference[f])
            if diff.size:
                y, x = diff[0]
                return (f"frame {f} env {env} pixel (x {x}, y {y}): core {core[f, env, y, x]}, PyBoy "
                        f"{reference[f, y, x]} ({len(diff)} differing pixels in the frame)")
    return None


SOURCES = {**{name: (build.HERE / f"{name}.gb", count, no_inputs) for name, count in VIDEO.items()},
           "room": (ROOM, ROOM_FRAMES, room_inputs)}


@pytest.fixture(scope="module")
def reference():
    """name -> PyBoy's [F, 144, 160] shades after alignment."""
    return {name: frames(PyBoyRun(path), count, inputs) for name, (path, count, inputs) in SOURCES.items()}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_frames_match_pyboy(reference, name):
    """Every frame of every env equals PyBoy's; ``out`` holds pack(PyBoy's last frame) for each env."""
    path, count, inputs = SOURCES[name]
    run = CoreRun(path, N_ENVS, emulator.Wiring())
    core = frames(run, count, inputs)
    assert len(np.unique(reference[name].reshape(count, -1), axis=0)) > 1, "the frames never change"
    diff = first_difference(core, reference[name])
    assert diff is None, f"{name}: {diff}"
    last = pack(torch.from_numpy(reference[name][-1]))  # [144, 40]
    assert all(torch.equal(run.out[env], last) for env in range(N_ENVS))


@pytest.mark.parametrize("name, fault", [
    ("sprites", dict(obj_limit=9)),  # 9 objects per line, not 10
    ("window", dict(window_hidden=1)),  # the window's line counter not used: its row follows LY - WY
    ("bg", dict(signed_tiles=0x0800)),  # the signed tile-data mode based at 0x8800, not 0x9000
    ("sprites", dict(x_priority=-1)),  # overlapping objects: the larger X wins
])
def test_planted_fault_is_caught(reference, name, fault):
    path, count, inputs = SOURCES[name]
    core = frames(CoreRun(path, 1, emulator.Wiring(**fault)), count, inputs)
    assert first_difference(core, reference[name]) is not None, f"{name}: {fault} went unnoticed"


def test_frame_skip_writes_the_last_frame():
    """step_frames(k, out) runs k frames and leaves the k-th in out: the room stepped 4 frames a call equals the
    room stepped one frame a call, at every 4th frame; out is written only when given."""
    one, four = CoreRun(ROOM, 2, emulator.Wiring()), CoreRun(ROOM, 2, emulator.Wiring())
    aligned(one), aligned(four)
    for step in range(6):
        for j in range(FRAMES_PER_STEP):
            one.frame(*room_inputs(FRAMES_PER_STEP * step + j))
        writes, button = room_inputs(FRAMES_PER_STEP * step)
        for address, value in writes.items():
            four.emu.write_wram(address, value)
        four.emu.buttons = BUTTON_BITS[button] if button else 0
        four.emu.step_frames(FRAMES_PER_STEP, four.out)
        assert torch.equal(four.out, one.out), f"step {step}"
    before = four.out.clone()
    four.emu.step_frames(1)
    assert torch.equal(four.out, before) and (four.emu.frame == one.out.numpy()).all()


@pytest.mark.parametrize("out, actual", [
    (torch.zeros(N_ENVS, 144, 40, dtype=torch.int32), "torch.int32 (3, 144, 40) on cpu"),
    (torch.zeros(N_ENVS, 144, 20, dtype=torch.uint8), "torch.uint8 (3, 144, 20) on cpu"),
    (torch.zeros(N_ENVS, 40, 144, dtype=torch.uint8).transpose(1, 2), "torch.uint8 (3, 144, 40) on cpu"),
    (np.zeros((N_ENVS, 144, 40), dtype=np.int8), "numpy int8 (3, 144, 40)"),
    ([0], "list"),
])
def test_bad_out_raises(out, actual):
    emu = emulator.Emulator(ROOM.read_bytes(), N_ENVS)
    with pytest.raises(ValueError, match="^out: expected") as err:
        emu.step_frames(1, out)
    assert str(err.value).endswith(f"got {actual}")


def test_numpy_out_and_bytes_per_env():
    """A numpy out on cpu is written in place too; an env holds 24794 bytes (+ its cartridge RAM, 1 here)."""
    emu = emulator.Emulator(ROOM.read_bytes(), 2)
    out = np.full((2, 144, 40), 0xAA, dtype=np.uint8)
    emu.step_frames(20, out)
    assert (out == emu.frame).all() and emu.bytes_per_env == 24794 + 1
