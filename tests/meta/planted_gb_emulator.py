"""Planted bugs for ``gb_emulator``: the Warp Game Boy with one wiring fault each (``Wiring``: the constants that
tie the machine together, as an emulator port typically gets them wrong), or its wrapper / a PyBoy wrapper with
one bug in what it returns, validates or when it writes."""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.gb_emulator import check_buttons, check_frames, check_out
from rlspec.envs.gameboy import emulator, pyboy_gb, warp_gb
from rlspec.reference.packed2 import pack, unpack

W = warp_gb.GameBoyVec


def _impl(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(GameBoyVec=cls)


def _wired(**fault) -> types.SimpleNamespace:
    class GameBoyVec(W):
        def __init__(self, rom, num_envs):
            super().__init__(rom, num_envs, wiring=emulator.Wiring(**fault))
    return _impl(GameBoyVec)


class _MsbFirst(W):  # the leftmost pixel of a byte in its most significant pair (numpy.packbits' order)
    def step(self, buttons, frames=1, out=None):
        check_out(out, self.num_envs)
        v = unpack(super().step(buttons, frames).contiguous())  # [N, 144, 160]
        packed = v[..., 0::4] << 6 | v[..., 1::4] << 4 | v[..., 2::4] << 2 | v[..., 3::4]
        return packed if out is None else out.copy_(packed)


class _FirstFrameOfSkip(W):  # frame skip: the frame kept is the first of the k, not the last
    def step(self, buttons, frames=1, out=None):
        check_frames(frames)
        out = super().step(buttons, 1, out)
        if frames > 1:
            self.emu.step_frames(frames - 1)
        return out


class _EnvZeroButtons(W):  # every env plays env 0's buttons
    def step(self, buttons, frames=1, out=None):
        return super().step(buttons[:1].expand_as(buttons).contiguous() if len(buttons) else buttons, frames, out)


class _ButtonsMasked(W):  # buttons taken modulo 256 instead of checked
    def step(self, buttons, frames=1, out=None):
        return super().step(buttons & 0xFF if isinstance(buttons, torch.Tensor) else buttons, frames, out)


class _RunsBeforeChecking(W):  # the frames are emulated before out is checked
    def step(self, buttons, frames=1, out=None):
        self.emu.buttons = check_buttons(buttons, self.num_envs).numpy()
        self.emu.step_frames(check_frames(frames))
        check_out(out, self.num_envs)
        frame = torch.from_numpy(self.emu.frame.copy())
        return frame if out is None else out.copy_(frame)


class _MemoryInt32(W):
    def memory(self, start, stop):
        return super().memory(start, stop).to(torch.int32)


class _HaltedPcPastHalt(W):  # PC while halted as the core holds it, one past the HALT
    def registers(self):
        r = super().registers()
        r[:, 9] += torch.from_numpy(self.emu.region("status") == emulator.HALTED).to(torch.int32)
        return r


class _PyBoySwappedShades(pyboy_gb.GameBoyVec):  # a PyBoy wrapper mapping the screen's 153/85 to shades 2/1
    def step(self, buttons, frames=1, out=None):
        check_out(out, self.num_envs)
        frame = unpack(super().step(buttons, frames).contiguous())
        packed = pack(torch.where(frame == 1, 2, torch.where(frame == 2, 1, frame)).to(torch.uint8))
        return packed if out is None else out.copy_(packed)


PLANTED_GB_EMULATOR = (
    Planted("half carry out of bit 2", "gb_emulator", _wired(half_carry=0x7), "GB-2", "the state differs",
            ("GB-4", "GB-5")),
    Planted("timer counts the wrong divider bit", "gb_emulator", _wired(tac_bits=0x7549), "GB-2",
            "the state differs", ("GB-4",)),
    Planted("a scanline one dot short", "gb_emulator", _wired(line=455), "GB-2", "the state differs", ("GB-4",)),
    Planted("the frame after LCD on not ahead (PyBoy's startup line)", "gb_emulator", _wired(startup_lead=0),
            "GB-2", "busy", ("GB-4",)),
    Planted("MBC1 bank bit 4 not switched", "gb_emulator", _wired(mbc1_bank_mask=0x0F), "GB-2", "the state differs",
            ("GB-4",)),
    Planted("9 objects per line", "gb_emulator", _wired(obj_limit=9), "GB-1", "the frame differs", ("GB-4",)),
    Planted("window line counter follows LY", "gb_emulator", _wired(window_hidden=1), "GB-1", "the frame differs",
            ("GB-4",)),
    Planted("signed tiles based at 0x8800", "gb_emulator", _wired(signed_tiles=0x0800), "GB-1", "the frame differs",
            ("GB-4",)),
    Planted("the larger X wins among objects", "gb_emulator", _wired(x_priority=-1), "GB-1", "the frame differs",
            ("GB-4",)),
    Planted("MSB-first packing", "gb_emulator", _impl(_MsbFirst), "GB-1", "the frame differs", ("GB-2", "GB-5")),
    Planted("frame skip keeps the first frame", "gb_emulator", _impl(_FirstFrameOfSkip), "GB-3", "differs from",
            ("GB-2", "GB-5")),
    Planted("env 0's buttons for every env", "gb_emulator", _impl(_EnvZeroButtons), "GB-2", "env 1", ("GB-4",)),
    Planted("buttons masked to 8 bits", "gb_emulator", _impl(_ButtonsMasked), "GB-5", "accepted silently",
            ("GB-1", "GB-4")),
    Planted("frames emulated before out is checked", "gb_emulator", _impl(_RunsBeforeChecking), "GB-6",
            "differs from an emulator never given it", ("GB-4", "GB-5")),
    Planted("memory as int32", "gb_emulator", _impl(_MemoryInt32), "GB-4", "memory(", ("GB-5", "GB-6")),
    Planted("PC one past the HALT while halted", "gb_emulator", _impl(_HaltedPcPastHalt), "GB-2", "PC 0x",
            ("GB-1", "GB-4")),
    Planted("PyBoy shades 153/85 swapped", "gb_emulator", _impl(_PyBoySwappedShades), "GB-1", "the frame differs",
            ("GB-4", "GB-5")),
)
