"""The contract gb_emulator's start (the project's boot ROM on the Warp core and on PyBoy 2.8.1) and its command
line: the boot ROM's hand-over state, the two programs the contract leaves out with their differences named,
`rlspec check gb_emulator --rom` on a user's ROM, and the usage errors of --rom / --rom-frames."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from rlspec import cli
from rlspec.contracts import gb_emulator as gb
from rlspec.envs.gameboy import build, emulator, pyboy_gb, warp_gb
from rlspec.envs.gameboy.programs import FRAMES, HALT_BUG
from rlspec.spec import gb_emulator as spec

pytest.importorskip("pyboy")


def test_the_boot_rom_hands_over_in_the_post_boot_state():
    """After the boot ROM: PC 0x0100, the DMG's post-boot registers, the LCD on, DIV just reset, WRAM clear, and
    0x0000-0x00FF the cartridge's again (FF50 written)."""
    rom = bytearray((build.HERE / "alu.gb").read_bytes())
    rom[0x100:0x102] = b"\x18\xfe"  # jr -2: the cartridge spins at 0x0100
    emu = emulator.Emulator(bytes(rom), 2, boot=gb.boot_rom())
    assert emu.register("PC").tolist() == [0x0000] * 2 and (emu.region("boot_on") == 1).all()
    emu.step_frames(spec.BOOT_FRAMES)
    assert emu.register("PC").tolist() == [0x0100] * 2 and (emu.region("boot_on") == 0).all()
    for name, value in emulator.POST_BOOT.items():
        if name != "PC":
            assert emu.register(name).tolist() == [value] * 2, name
    io = emu.region("io")[0]
    assert io[0x40] == 0x91 and io[0x47] == 0xFC and (emu.region("wram") == 0).all()
    assert emu.region("div")[0] < 70224 * 2  # reset during the boot ROM's last frames


def test_a_bad_boot_rom_is_rejected():
    rom = (build.HERE / "alu.gb").read_bytes()
    with pytest.raises(ValueError, match="^boot: expected the 256 bytes of a DMG boot ROM, got 255 bytes"):
        emulator.Emulator(rom, 1, boot=bytes(255))


def _after(name: str, impl, frames: int) -> tuple[torch.Tensor, torch.Tensor]:
    vec = impl.GameBoyVec((build.HERE / f"{name}.gb").read_bytes(), 1)
    vec.step(torch.zeros(1, dtype=torch.int64), frames)
    return vec.memory(0xC000, 0xE000)[0], vec.registers()[0]


# address -> (Warp core, PyBoy 2.8.1) after each left-out program, run from the boot ROM
LEFT_OUT_DIFFERENCES = {
    "interrupts": {HALT_BUG: (2, 1)},  # the HALT bug: the hardware's, not PyBoy's
    "ppu": {0xC496: (0xC6, 0xC4),  # STAT read right after HALT wakes on LYC = 20: mode 2 here, mode 0 in PyBoy
            0xC4A9: (0x80, 0x84)},  # LY after the LCD is switched on again (the last sample)
}


@pytest.mark.parametrize("name", spec.LEFT_OUT)
def test_the_programs_left_out_differ_exactly_where_named(name):
    frames = spec.BOOT_FRAMES + FRAMES[name] + 10  # ppu runs 2 frames past its budget from the boot ROM
    (core, core_regs), (ref, ref_regs) = _after(name, warp_gb, frames), _after(name, pyboy_gb, frames)
    differ = {0xC000 + int(a): (int(core[a]), int(ref[a])) for a in (core != ref).nonzero().flatten()}
    assert differ == LEFT_OUT_DIFFERENCES[name]
    assert torch.equal(core_regs, ref_regs)


def test_every_program_the_contract_plays_has_halted_by_its_last_frame():
    """So GB-2 compares each program's results, not a state halfway through it."""
    for rom in (r for r in spec.roms() if r.name not in ("busy", "room")):  # those two loop by design
        vec = warp_gb.GameBoyVec(rom.data, 1)
        vec.step(torch.zeros(1, dtype=torch.int64), rom.frames - 1)
        pc = vec.registers()[0, 9].item()
        assert vec.emu.region("status")[0] == emulator.HALTED, rom.name
        vec.step(torch.zeros(1, dtype=torch.int64), 1)
        assert vec.registers()[0, 9].item() == pc, rom.name


def _check(tmp_path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "report"
    code = cli.main(["check", "gb_emulator", "--impl", "rlspec.envs.gameboy.warp_gb", "--profile", "ci",
                     "--out", str(out), "--jobs", "1", *args])
    return code, json.loads((out / "report.json").read_text())


def test_a_users_rom_is_played_instead_of_the_programs(tmp_path, monkeypatch, capsys):
    """A ROM of the user's that equals PyBoy passes; one that waits on the joypad interrupt with the d-pad
    selected while random buttons include A/B/Select/Start fails GB-2 naming the file (PyBoy raises that interrupt
    on any press: the contract's docstring), with a reproduce command that plays the same ROM."""
    monkeypatch.setenv(gb.ROMS_ENV, "")  # --rom hands the ROMs over in the environment: monkeypatch puts back
    monkeypatch.setenv(gb.FRAMES_ENV, str(gb.USER_FRAMES))  # what was there before the test
    mine, waits = tmp_path / "mine.gb", tmp_path / "waits.gb"
    shutil.copy(build.HERE / "dma.gb", mine)
    shutil.copy(build.HERE / "joypad.gb", waits)
    code, _ = _check(tmp_path, "--rom", str(mine), "--rom-frames", "30")
    assert code == 0, capsys.readouterr().out
    code, _ = _check(tmp_path, "--rom", str(waits), "--rom-frames", "30", "--clause", "GB-2")
    text = capsys.readouterr().out
    assert code == 1 and "[GB-2] waits.gb, step" in text, text
    assert f"--rom {waits} --rom-frames 30 --clause GB-2" in text, text


@pytest.mark.parametrize("args, says", [
    (["twohot", "--rom", "x.gb"], "--rom and --rom-frames apply to contract gb_emulator only"),
    (["gb_emulator", "--rom", "missing.gb"], "--rom missing.gb: expected a Game Boy ROM of at least 32768 bytes, "
                                             "got no such file"),
    (["gb_emulator", "--rom", "small.gb"], "--rom small.gb: expected a Game Boy ROM of at least 32768 bytes, got "
                                           "100 bytes"),
    (["gb_emulator", "--rom-frames", "40"], "--rom-frames: expected --rom FILE with it"),
    (["gb_emulator", "--rom", "big.gb", "--rom-frames", "0"], "--rom-frames: expected an int >= 1, got 0"),
])
def test_rom_usage_errors(args, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.gb").write_bytes(bytes(100))
    (tmp_path / "big.gb").write_bytes(bytes(gb.MIN_ROM))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["check", *args])
    assert exit_.value.code == 2 and says in capsys.readouterr().err
