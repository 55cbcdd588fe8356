"""A user's own game on the Dreamer engine (``--env pyboy --rom ROM [--state STATE] --plugin PLUGIN``), tested
with the project's own ROM only: a save state of the room made mid-episode (in its free-running mode, an
ordinary game driven by buttons alone) and a plug-in written here that reads the room's RAM. The plug-in's
rewards and flags equal the built-in room's on the same actions; episodes start from the save state; a
run, its eval and its resume work; bad input names the key and loses nothing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from rlspec import cli
from rlspec.contracts import room_env as game
from rlspec.engines import dreamer
from rlspec.envs.pyboy_env import PluginError, PyBoyGame, load_plugin
from rlspec.envs.room import pyboy_room
from rlspec.runs.rundir import read_metrics
from rlspec.spec import room_env as spec

TINY = ["num_envs=2", "total_steps=40", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64",
        "step_limit=10", "log_every=8", "checkpoint_every=8", "ep_window=5", "frameskip=8",
        "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4", "dreamer.hidden=16", "dreamer.embed_dim=16",
        "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1", "dreamer.horizon=4",
        "dreamer.batch_size=2", "dreamer.seq_len=8"]
SEED = 5
PREFIX = [2, 2, 3]  # moves made before the state is saved (mid-episode)

PLUGIN = f'''"""The room's success read from its RAM (rlspec/contracts/room_env.py RAM["EXITED"])."""
EXITED = {game.RAM["EXITED"]:#x}
resets = []  # per env: this module is loaded once per env


def reset(memory, seed):
    resets.append(seed)


def reward(memory):
    return 1.0 if memory[EXITED] == 1 else 0.0


def done(memory):
    return memory[EXITED] == 1
'''


@pytest.fixture
def user_game(tmp_path):
    """(ROM, save state, plug-in file) of the room: the state saved after PREFIX from episode 0 of SEED."""
    g = PyBoyGame(pyboy_room.ROM, pyboy_room.RoomTask(free_run=True), frameskip=4)
    g.reset(game.episode_seed(SEED, 0, 0))
    for a in PREFIX:
        g.step(a)
    (tmp_path / "room.state").write_bytes(g.save_state())
    g.close()
    (tmp_path / "room_rewards.py").write_text(PLUGIN)
    return pyboy_room.ROM, tmp_path / "room.state", tmp_path / "room_rewards.py"


def _user_env(rom, state, plugin, num_envs=1):
    def make():
        return PyBoyGame(rom, load_plugin(str(plugin)), state=state, frameskip=game.FREE_RUN_PERIOD,
                         start_at_boot=True)

    return pyboy_room.RoomVecEnv(num_envs, seed=SEED, step_limit=64, frameskip=game.FREE_RUN_PERIOD,
                                 make_game=make)


def test_plugin_rewards_equal_the_room_rewards_from_a_mid_episode_save_state(user_game):
    rom, state, plugin = user_game
    builtin = pyboy_room.RoomVecEnv(1, seed=SEED, step_limit=64)
    builtin.reset()
    # the free-running game also updates once during the reset's frames (nothing held: a no-op update)
    for a in PREFIX + [0]:
        builtin.step(torch.tensor([a]))
    start = spec.player_cells(builtin.frames[0])[0]
    assert start != game.start_cell(game.episode_seed(SEED, 0, 0)), "the state is saved mid-episode"
    user = _user_env(rom, state, plugin)
    first = user.reset()
    assert torch.equal(first.obs, builtin.frames), "the first frame is the saved state's"
    r, c = start
    to_door = []
    while game.CELLS[r][c] != game.DOOR:
        a = spec.toward_door()[(r, c)]
        to_door.append(a)
        r, c = r + game.MOVES[a][0], c + game.MOVES[a][1]
    actions = [0, 1, 1, 2, 3, 4, 4, 3] + to_door  # bumps, back-and-forth, then out through the door
    got, want = [], []
    for a in actions:
        x, y = builtin.step(torch.tensor([a])), user.step(torch.tensor([a]))
        want.append((float(x.reward), bool(x.terminated), bool(x.success)))
        got.append((float(y.reward), bool(y.terminated), bool(y.success)))
        if x.terminated.any() or y.terminated.any():
            break
        assert torch.equal(x.obs, y.obs), f"frame after action {len(got)}"
    assert got == want and want[-1] == (1.0, True, True) and sum(w[0] for w in want) == 1.0, (got, want)
    builtin.close()
    # the episode after a termination starts from the save state again
    again = user.step(torch.tensor([0]))
    assert int(again.episode_id[0]) == 1 and spec.player_cells(user.frames[0]) != []
    assert user.games[0].task.module.resets == [game.episode_seed(SEED, 0, 0), game.episode_seed(SEED, 0, 1)]
    user.close()


def test_each_env_loads_its_own_copy_of_the_plugin(user_game):
    env = _user_env(*user_game, num_envs=2)
    env.reset()
    a, b = (g.task.module for g in env.games)
    assert a is not b and a.resets == [game.episode_seed(SEED, 0, 0)] and b.resets == [game.episode_seed(SEED, 1, 0)]
    env.close()


def _argv(out, options: dict, *extra):
    return ["train", "dreamer", *[x for kv in options.items() for x in kv], "--out", str(out), "--quiet",
            *[x for kv in TINY for x in ("--set", kv)], *extra]


def _options(rom, state, plugin) -> dict:
    return {"--env": "pyboy", "--rom": str(rom), "--state": str(state), "--plugin": str(plugin)}


def test_train_eval_and_resume_on_a_user_rom(user_game, tmp_path, capsys):
    rom, state, plugin = user_game
    options = _options(rom, state, plugin)
    assert cli.main(_argv(tmp_path / "straight", options)) == 0
    assert cli.main(_argv(tmp_path / "resumed", options, "--stop-after-steps", "24")) == 0
    assert cli.main(["train", "dreamer", "--resume", str(tmp_path / "resumed"), "--quiet"]) == 0
    cfg = dreamer.load_config(tmp_path / "straight")
    assert (cfg.env, cfg.rom, cfg.state, cfg.plugin) == ("pyboy", str(rom), str(state), str(plugin))
    rows = read_metrics(tmp_path / "straight")
    assert [r["step"] for r in rows] == [8, 16, 24, 32, 40]
    assert all(math.isfinite(r["Loss/recon_loss"]) for r in rows[2:])
    def deterministic(rs):  # repr: NaN (no value yet) compares equal
        return repr([{k: v for k, v in r.items() if not k.startswith(("Time/", "Memory/"))} for r in rs])

    assert deterministic(read_metrics(tmp_path / "resumed")) == deterministic(rows)  # env restored from the state
    versions = (tmp_path / "straight/versions.json").read_text()
    assert "user_rom_sha256" in versions and "user_state_sha256" in versions and "room_rom_sha256" not in versions
    capsys.readouterr()
    assert cli.main(["eval", str(tmp_path / "straight"), "--episodes", "2"]) == 0
    assert '"episodes": 2' in capsys.readouterr().out


@pytest.mark.parametrize("change,key,expected", [
    ({"--rom": "missing.gb"}, "rom", "an existing Game Boy ROM file"),
    ({"--state": "missing.state"}, "state", "an existing PyBoy save state file"),
    ({"--rom": "garbage.gb"}, "rom", "a Game Boy ROM file .*header checksum at 0x14D"),
    ({"--rom": "short.gb"}, "rom", "a Game Boy ROM file .*not a whole number"),
    ({"--state": "garbage.state"}, "state", "a PyBoy save state of this ROM .*garbage.state"),
    ({"--plugin": "missing.py"}, "plugin", "a plug-in that loads.*FileNotFoundError"),
    ({"--plugin": "no_done.py"}, "plugin", r"lacks \['done'\]"),
    ({"--env": "room"}, "rom", "empty with env room"),
    ({"--execution": "device"}, "execution", "local with env pyboy"),
])
def test_bad_user_rom_input_names_the_key_and_loses_nothing(user_game, tmp_path, capsys, change, key, expected):
    rom, state, plugin = user_game
    (tmp_path / "no_done.py").write_text("def reward(memory):\n    return 0.0\n")
    noise = torch.Generator().manual_seed(0)
    (tmp_path / "garbage.gb").write_bytes(bytes(torch.randint(0, 256, (32768,), generator=noise, dtype=torch.uint8)
                                                .tolist()))
    (tmp_path / "short.gb").write_bytes(Path(rom).read_bytes()[:20000])
    (tmp_path / "garbage.state").write_bytes(b"not a save state\n" * 64)
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    options = _options(rom, state, plugin)
    options.update({k: str(tmp_path / v) if "." in v else v for k, v in change.items()})
    assert cli.main(_argv(out, options)) == 2
    err = capsys.readouterr().err
    assert f"config key {key!r}: expected" in err and re.search(expected, err), err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and (out / "notes.txt").read_text() == "mine"


def test_exit_oak_plugin_on_a_fake_memory(tmp_path):
    """The shipped Exit Oak plug-in (no ROM: a dict standing in for Pokémon Red's RAM): progress toward the exit
    row, success when the map id leaves Oak's lab, a clear error for a state elsewhere, one copy per env."""
    task, other = load_plugin("rlspec.envs.exit_oak"), load_plugin("rlspec.envs.exit_oak")
    assert task.module is not other.module and task.buttons == (None, "up", "down", "left", "right")
    ram = {0xD35E: 0x28, 0xD361: 3, 0xD362: 5}  # in Oak's lab, Y 3
    task.on_reset(ram, 0)
    outcomes = []
    for y, map_id in ((4, 0x28), (3, 0x28), (4, 0x28), (6, 0x28), (11, 0x28), (0, 0x00)):
        ram[0xD361], ram[0xD35E] = y, map_id
        outcomes.append(task.outcome(ram))
    assert outcomes == [(0.05, False, False), (0.0, False, False), (0.0, False, False), (pytest.approx(0.1), False,
                        False), (pytest.approx(0.25), False, False), (1.0, True, True)]
    for name, body, says in (("nan", "reward = lambda m: float('nan')\ndone = lambda m: False\n",
                              "reward() returned nan (float), expected a finite number"),
                             ("none", "reward = lambda m: None\ndone = lambda m: False\n",
                              "reward() returned None (NoneType), expected a finite number"),
                             ("says_no", "reward = lambda m: 0.0\ndone = lambda m: 'no'\n",
                              "done() returned 'no' (str), expected a bool (or the int 0 or 1)"),
                             ("two", "reward = lambda m: 0.0\ndone = lambda m: False\nsuccess = lambda m: 2\n",
                              "success() returned 2 (int), expected a bool (or the int 0 or 1)")):
        (tmp_path / f"{name}.py").write_text(body)
        with pytest.raises(PluginError) as err:
            load_plugin(str(tmp_path / f"{name}.py")).outcome(ram)
        assert str(err.value) == f"plug-in {tmp_path / name}.py: {says}"
    flag = tmp_path / "flag.py"  # a RAM byte 0/1 as done() and a numpy reward are fine
    flag.write_text("import numpy as np\nreward = lambda m: np.float32(0.5)\ndone = lambda m: m[1]\n")
    assert load_plugin(str(flag)).outcome({1: 1}) == (0.5, True, True)
    with pytest.raises(PluginError, match=r"plug-in rlspec.envs.exit_oak: reset\(\) raised ValueError: exit_oak: "
                                          r"the save state is not in Oak's lab: wCurMap \(0xD35E\) = 0x00, expected 0x28"):
        task.on_reset(ram, 0)
