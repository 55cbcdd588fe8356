"""The room env's other doors: Gymnasium (single and vector), the user-ROM path (save state + RAM plug-in,
driven by buttons alone), the replay ring's direct write, and bad input to the PyBoy runner. Every check
uses the project's own ROM in a real PyBoy and the real Warp kernels (device="cpu")."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from rlspec.contracts import room_env as game
from rlspec.envs.pyboy_env import PyBoyEnv, PyBoyGame, RamChangeTask, load_task, screen_shades
from rlspec.envs.room import pyboy_room, warp_room
from rlspec.envs.room.gym_room import RoomVectorEnv, room_env, vec_env
from rlspec.fast.replay import ReplayRing
from rlspec.spec import room_env as spec


def _plan(num_envs=2, seed=3, step_limit=12, steps=40, greed=0.8, scenario="room-exit"):
    case = spec._case(scenario=scenario, num_envs=num_envs, seed=seed, step_limit=step_limit, steps=steps,
                      greed=greed)
    return case, *spec._plan(case)


def test_single_env_passes_gymnasiums_checker():
    env = room_env(step_limit=8)
    check_env(env, skip_render_check=True)
    env.close()


def test_single_env_follows_the_rules_across_episodes():
    """The Gymnasium env (one emulator, reset by hand) gives the model's frames, rewards and flags."""
    case, first, actions, expected = _plan(num_envs=1, steps=50, greed=0.9)
    env = room_env(step_limit=case["step_limit"])
    obs, info = env.reset(seed=case["seed"])
    assert np.array_equal(obs, first.obs[0].numpy()) and info["episode_id"] == 0
    for t, a in enumerate(actions[:, 0].tolist()):
        want, want_final = expected[t]
        obs, reward, terminated, truncated, info = env.step(a)
        assert np.array_equal(obs, want_final[0].numpy()), f"step {t}: frame"
        assert (reward, terminated, truncated, info["success"]) == (
            float(want.reward[0]), bool(want.terminated[0]), bool(want.truncated[0]), bool(want.success[0])), t
        if terminated or truncated:
            obs, info = env.reset()
            assert np.array_equal(obs, want.obs[0].numpy()) and info["episode_id"] == int(want.episode_id[0])
    assert int(expected[-1][0].episode_id[0]) >= 2  # the plan crossed several episodes
    env.close()


@pytest.mark.parametrize("backend", ["pyboy", "warp"])
def test_vector_env_same_step_autoreset(backend):
    case, first, actions, expected = _plan(num_envs=3, steps=40)
    env = RoomVectorEnv(3, backend=backend, step_limit=case["step_limit"], seed=99)
    obs, infos = env.reset(seed=case["seed"])
    assert env.observation_space.contains(obs) and np.array_equal(obs, first.obs.numpy())
    ended_once = False
    for t, a in enumerate(actions.numpy()):
        want, want_final = expected[t]
        obs, reward, terminated, truncated, infos = env.step(a)
        assert np.array_equal(obs, want.obs.numpy()) and np.array_equal(reward, want.reward.numpy())
        assert np.array_equal(terminated, want.terminated.numpy()) and np.array_equal(truncated, want.truncated.numpy())
        assert np.array_equal(infos["episode_id"], want.episode_id.numpy())
        ended = terminated | truncated
        if ended.any():
            ended_once = True
            assert np.array_equal(infos["_final_obs"], ended)
            for i in np.flatnonzero(ended):
                assert np.array_equal(infos["final_obs"][i], want_final[i].numpy()), (t, i)
        else:
            assert "final_obs" not in infos
    assert ended_once
    env.close()


def test_vector_env_rejects_bad_input():
    with pytest.raises(ValueError, match="backend"):
        RoomVectorEnv(1, backend="gpu")
    env = RoomVectorEnv(2, backend="warp")
    env.reset()
    with pytest.raises(TypeError, match="actions.*float"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="actions.*outside 0..4"):
        env.step(np.array([0, 7]))
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-3)


def _free_running_state(tmp_path, seed16: int, moves: list[int]):
    """A save state of the ROM as an ordinary game (MODE | FREE_RUN): the player placed from seed16 and
    moved by ``moves`` through the handshake, then saved."""
    g = PyBoyGame(pyboy_room.ROM, pyboy_room.RoomTask(free_run=True), frameskip=4)
    g.reset(seed16)
    for a in moves:
        g.step(a)
    path = tmp_path / "room.state"
    with open(path, "wb") as f:
        g.pyboy.save_state(f)
    cell = (g.memory[game.RAM["ROW"]], g.memory[game.RAM["COL"]])
    g.close()
    return path, cell


def test_user_rom_path_save_state_and_ram_plugin(tmp_path):
    """``--env pyboy --rom ROM --state S`` with a generic plug-in: the ROM polls the d-pad by itself (no
    handshake), reset reloads the state, and success is a RAM byte changing (the ROM's EXITED)."""
    path, cell = _free_running_state(tmp_path, 1234, [4, 4])
    task = load_task("rlspec.envs.pyboy_env:RamChangeTask", address=game.RAM["EXITED"])
    env = PyBoyEnv(pyboy_room.ROM, task, state=path, frameskip=game.FREE_RUN_PERIOD, step_limit=40)
    path_to_door = _path_to_door(cell)
    for episode in range(2):  # reset reloads the state: the same walk succeeds twice
        obs, info = env.reset()
        assert info["episode_id"] == episode
        assert spec.player_cells(torch.from_numpy(obs)) == [cell], "the frame after reset shows the saved position"
        rewards = []
        for a in path_to_door + [0, 0]:  # the game's own update may land one step late
            _, reward, terminated, truncated, info = env.step(a)
            rewards.append(reward)
            if terminated:
                break
        assert terminated and info["success"] and not truncated, rewards
        assert rewards == [0.0] * (len(rewards) - 1) + [1.0] and len(rewards) >= len(path_to_door), rewards
    env.close()


def _path_to_door(cell):
    moves, (r, c) = [], cell
    while game.CELLS[r][c] != game.DOOR:
        a = spec.toward_door()[(r, c)]
        moves.append(a)
        r, c = r + game.MOVES[a][0], c + game.MOVES[a][1]
    return moves


def test_ram_change_task_and_load_task_reject_bad_input():
    with pytest.raises(ValueError, match="address"):
        RamChangeTask(0x10000)
    with pytest.raises(ValueError, match="target"):
        load_task("rlspec.envs.pyboy_env.RamChangeTask")
    with pytest.raises(TypeError, match="not a RamTask"):
        load_task("collections:OrderedDict")


def test_pyboy_game_rejects_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="rom"):
        PyBoyGame(tmp_path / "missing.gb", pyboy_room.RoomTask())
    with pytest.raises(ValueError, match="frameskip.*>= 3.*2"):
        PyBoyGame(pyboy_room.ROM, pyboy_room.RoomTask(), frameskip=2)
    with pytest.raises(ValueError, match="scenario"):
        pyboy_room.RoomTask("exit-the-room")


def test_screen_with_another_palette_is_rejected():
    g = PyBoyGame(pyboy_room.ROM, pyboy_room.RoomTask())
    g.pyboy.set_color_palette((0xFFFFFF, 0xAAAAAA, 0x555555, 0x000000))
    g.pyboy.tick(2, True, False)
    with pytest.raises(ValueError, match="R = 170"):
        screen_shades(g.pyboy)
    g.close()


def test_warp_env_writes_straight_into_the_replay_ring():
    """The actor loop of the Dreamer plan M6 on CPU: step(render=False), push row t, render into obs_slot(t+1). The
    ring's own checks (is_first / episode_id / continue invariants) pass and its rows are the model's."""
    case, first, actions, expected = _plan(num_envs=3, steps=30, step_limit=9)
    n, cap = 3, 64
    env = warp_room.RoomVecEnv(n, step_limit=case["step_limit"], seed=case["seed"])
    ring = ReplayRing(cap, n, device="cpu")
    slot_ptr = {}
    step = env.reset(out=ring.obs_slot(0))
    is_first, episode_id = step.is_first.clone(), step.episode_id.clone()
    for t, a in enumerate(actions):
        step = env.step(a, render=False)
        ring.push(None, a.to(torch.int32), step.reward.clone(), is_first, (~step.terminated).float(), episode_id)
        slot = ring.obs_slot(t + 1)
        slot_ptr.setdefault((t + 1) % cap, slot.data_ptr())
        assert env.render(slot).data_ptr() == slot.data_ptr()
        is_first, episode_id = step.is_first.clone(), step.episode_id.clone()
    store = ring.storage()
    want_obs = torch.stack([first.obs] + [e[0].obs for e in expected[:-1]])  # obs_t of rows 0..T-1
    assert torch.equal(store["obs"][:len(actions)], want_obs)
    assert torch.equal(store["reward"][:len(actions)], torch.stack([e[0].reward for e in expected]))
    assert torch.equal(store["continue"][:len(actions)], torch.stack([(~e[0].terminated).float() for e in expected]))
    assert bool(store["is_first"][:len(actions)].any(1)[1:].any()), "the plan ended episodes"


def test_warp_unchecked_actions_are_counted_not_hidden():
    env = warp_room.RoomVecEnv(3, check_actions=False)
    env.reset()
    step = env.step(torch.tensor([0, 9, -2]))  # no host read: played as no-ops, counted on the device
    assert int(env.violations) == 2 and not bool(step.terminated.any())
    assert vec_env("warp", 1).device == torch.device("cpu")


def test_load_task_from_a_file(tmp_path):
    (tmp_path / "my_task.py").write_text(
        "from rlspec.envs.pyboy_env import RamChangeTask\n"
        "class ExitedTask(RamChangeTask):\n"
        "    def __init__(self):\n"
        f"        super().__init__(address={game.RAM['EXITED']}, reward=5.0)\n")
    task = load_task(f"{tmp_path / 'my_task.py'}:ExitedTask")
    assert (task.address, task.reward) == (game.RAM["EXITED"], 5.0)
    with pytest.raises(FileNotFoundError, match="target"):
        load_task(f"{tmp_path / 'missing.py'}:ExitedTask")


def test_warp_backends_print_nothing_on_stdout():
    """A command's stdout is its result (a JSON line, a table): Warp's banner and module-load lines stay off it."""
    code = ("import torch\nfrom rlspec.envs.room import warp_room\nfrom rlspec.fast import packed2_warp\n"
            "env = warp_room.RoomVecEnv(2)\nenv.reset()\nenv.step(torch.zeros(2, dtype=torch.int32))\n"
            "packed2_warp.unpack(env.reset().obs)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.stdout == ""
