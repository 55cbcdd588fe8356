"""sheeprl's DreamerV3 on the room (benchmarks/dreamer/anchors/run_sheeprl.py): the config writer maps rlspec's
room-exit preset onto sheeprl's keys, and states what it cannot map; the room's image env
(rlspec.envs.room.sheeprl_env). Needs no sheeprl."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

from benchmarks.dreamer.anchors import run_sheeprl as bench
from rlspec.contracts.room_env import SCREEN_R
from rlspec.engines.dreamer import build_config
from rlspec.reference import packed2

WM = "algo.world_model"


def as_dict(overrides: list[str]) -> dict[str, str]:
    pairs = [o.split("=", 1) for o in overrides]
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"a key set twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    return dict(pairs)


def rlspec_keys(cfg) -> set[str]:
    top = {f.name for f in dataclasses.fields(cfg)} - {"dreamer"}
    return top | {f"dreamer.{f.name}" for f in dataclasses.fields(cfg.dreamer)}


def test_every_rlspec_key_is_mapped_fixed_or_ignored_once():
    groups = [set(bench.TABLE), set(bench.SHEEPRL_FIXED), set(bench.GEOMETRY), set(bench.IGNORED)]
    assert sum(map(len, groups)) == len(set().union(*groups))  # disjoint
    assert set().union(*groups) == rlspec_keys(build_config("room-exit"))


def test_room_exit_overrides_carry_the_presets_values(tmp_path):
    cfg = build_config("room-exit", ["seed=2"])
    d = cfg.dreamer
    o = as_dict(bench.overrides(cfg, tmp_path))
    expected = {
        f"{WM}.recurrent_model.recurrent_state_size": d.deter, f"{WM}.stochastic_size": d.stoch,
        f"{WM}.discrete_size": d.classes, "algo.dense_units": d.hidden, f"{WM}.transition_model.hidden_size": d.hidden,
        f"{WM}.representation_model.hidden_size": d.hidden, f"{WM}.recurrent_model.dense_units": d.hidden,
        "algo.actor.dense_units": d.mlp_hidden, "algo.critic.dense_units": d.mlp_hidden,
        "algo.actor.mlp_layers": d.mlp_layers, "algo.critic.mlp_layers": d.mlp_layers,
        f"{WM}.reward_model.mlp_layers": 1, f"{WM}.discount_model.mlp_layers": 1,  # rlspec's heads: one layer
        f"{WM}.encoder.cnn_channels_multiplier": d.cnn_mult, "algo.horizon": d.horizon,
        "algo.per_rank_batch_size": d.batch_size, "algo.per_rank_sequence_length": d.seq_len,
        "algo.learning_starts": cfg.min_ready_steps, "algo.total_steps": cfg.total_steps, "seed": 2,
        "env.num_envs": cfg.num_envs, "num_threads": cfg.torch_threads,
        "buffer.size": cfg.replay_capacity * cfg.num_envs,
        "+env.wrapper.scenario": cfg.task, "+env.wrapper.step_limit": cfg.step_limit,
        "+env.wrapper.frameskip": cfg.frameskip, "env.action_repeat": 1, "fabric.accelerator": "cpu",
        "env.screen_size": 64, "algo.cnn_keys.encoder": "[rgb]", "env.grayscale": True,
        "+env.wrapper.frame": list(d.frame),
    }
    for key, value in expected.items():
        assert o[key] == str(value), key
    floats = {f"{WM}.optimizer.lr": d.wm_lr, "algo.actor.optimizer.lr": d.actor_lr,
              "algo.critic.optimizer.lr": d.critic_lr, "algo.gamma": d.gamma, "algo.lmbda": d.lam,
              "algo.critic.tau": d.slow_rate, f"{WM}.kl_free_nats": d.free_bits,
              "algo.replay_ratio": cfg.train_ratio / (d.batch_size * d.seq_len)}
    for key, value in floats.items():
        assert float(o[key]) == value, key
    assert float(o["algo.replay_ratio"]) * d.batch_size * d.seq_len == cfg.train_ratio  # 32 replayed / env step
    assert o["env.id"] == "rlspec.envs.room.sheeprl_env:RlspecRoom-v0"
    assert o["hydra.run.dir"] == str(tmp_path / cfg.task / "s2")


def test_differences_name_only_what_differs():
    preset = build_config("room-exit")
    found = bench.differences(preset)
    assert found[-len(bench.IMPLEMENTATION):] == bench.IMPLEMENTATION
    specific = found[:-len(bench.IMPLEMENTATION)]
    assert [line.split(":")[0] for line in specific] == ["dreamer.head_input", "frame"]
    assert "72 x 80 frame through 3 conv stages" in specific[1] and "64 x 64 through 4 stages" in specific[1]
    assert "same crop resized" in specific[1]
    # sheeprl's own geometry and heads: nothing but its implementation differs
    same = build_config("room-exit", ["dreamer.frame=64,64", "dreamer.cnn_stages=4", "dreamer.head_input=posterior",
                                      "replay_ends=true"])
    assert bench.differences(same) == bench.IMPLEMENTATION
    assert bench.geometry(same) == (64, None)
    pooled = build_config("room-exit", ["dreamer.frame=64,64", "dreamer.cnn_stages=4",
                                        "dreamer.head_input=posterior", "dreamer.pool=2"])
    assert [line.split(":")[0] for line in bench.differences(pooled)][:2] == ["dreamer.pool", "frame"]
    assert bench.geometry(pooled)[0] == 32


def test_another_env_is_refused(tmp_path):
    cfg = dataclasses.replace(build_config("room-exit"), env="pyboy")
    with pytest.raises(SystemExit, match="config key 'env': expected 'room', got 'pyboy'"):
        bench.overrides(cfg, tmp_path)


def test_write_only_writes_the_json_and_bad_overrides_exit_2(tmp_path, capsys):
    assert bench.main(["--write-only", "--seeds", "0", "1", "--out", str(tmp_path)]) == 0
    report = __import__("json").loads((tmp_path / "sheeprl_room.json").read_text())
    assert set(report["overrides"]) == {"0", "1"} and report["runs"] == {}
    assert {row["rlspec"] for row in report["mapping"]} == set(bench.TABLE)
    assert report["differences"] == bench.differences(build_config("room-exit"))
    assert bench.main(["--write-only", "--set", "num_envs=0", "--out", str(tmp_path)]) == 2
    assert "config key 'num_envs'" in capsys.readouterr().err


def test_frame_image_is_the_gray_pyboy_draws():
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 4, (1, 72, 80), generator=g, dtype=torch.uint8)  # [1, 72, 80] shades
    from rlspec.envs.room.sheeprl_env import frame_image

    image = frame_image(packed2.pack(codes).numpy())
    assert image.shape == (72, 80, 1) and image.dtype == np.uint8
    np.testing.assert_array_equal(image[..., 0], np.array(SCREEN_R, dtype=np.uint8)[codes[0].numpy()])


def test_frame_image_crops_as_the_world_model_does():
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 4, (1, 72, 80), generator=g, dtype=torch.uint8)
    from rlspec.contracts.world_model import WorldModelConfig
    from rlspec.envs.room.sheeprl_env import frame_image

    whole = frame_image(packed2.pack(codes).numpy())
    (top, left) = WorldModelConfig(num_actions=5, frame=(64, 64)).crop_offset
    assert (top, left) == (4, 8)
    crop = frame_image(packed2.pack(codes).numpy(), (64, 64))
    assert crop.shape == (64, 64, 1)
    np.testing.assert_array_equal(crop, whole[4:68, 8:72])


def test_cropped_env_obs_is_the_crop_of_the_whole_frame():
    make = "rlspec.envs.room.sheeprl_env:RlspecRoom-v0"
    whole, crop = gymnasium.make(make, step_limit=5), gymnasium.make(make, step_limit=5, frame=[64, 64])
    try:
        assert crop.observation_space["rgb"].shape == (64, 64, 1)
        a, b = whole.reset(seed=3)[0]["rgb"], crop.reset(seed=3)[0]["rgb"]
        np.testing.assert_array_equal(b, a[4:68, 8:72])
        for action in (1, 3, 2):
            a, b = whole.step(action)[0]["rgb"], crop.step(action)[0]["rgb"]
            np.testing.assert_array_equal(b, a[4:68, 8:72])
    finally:
        whole.close(), crop.close()
    with pytest.raises(ValueError, match=r"argument 'frame'.*got \(80, 64\)"):
        gymnasium.make(make, frame=(80, 64))


def test_the_64_crop_is_lossless_for_the_player():
    """Every cell the player can stand on lies inside the centered 64 x 64 crop (the rest is wall)."""
    from rlspec.contracts import room_env as game

    top, left, size, cell = 4, 8, 64, game.CELL // 2  # observed pixels: every second screen pixel
    for r, c in game.FREE_CELLS:
        assert top <= r * cell and (r + 1) * cell <= top + size and left <= c * cell and (c + 1) * cell <= left + size


def test_env_id_makes_the_room_with_image_obs():
    env = gymnasium.make("rlspec.envs.room.sheeprl_env:RlspecRoom-v0", step_limit=3, render_mode="rgb_array")
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space["rgb"].shape == (72, 80, 1) and env.observation_space.contains(obs)
        assert set(np.unique(obs["rgb"])) <= set(SCREEN_R)
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(0)  # no-op: the player stays, no door
        assert (reward, terminated, truncated) == (0.0, False, True)  # truncated at step_limit
        np.testing.assert_array_equal(env.render(), np.repeat(obs["rgb"], 3, axis=-1))
    finally:
        env.close()
    with pytest.raises(ValueError, match="render_mode"):
        gymnasium.make("rlspec.envs.room.sheeprl_env:RlspecRoom-v0", render_mode="human")


def test_chunks_resume_from_the_last_checkpoint(tmp_path):
    assert bench.chunk_ends(0, 2048, None) == [2048]
    assert bench.chunk_ends(0, 2048, 512) == [512, 1024, 1536, 2048]
    assert bench.chunk_ends(1000, 2048, 512) == [1512, 2024, 2048]  # an interrupted run: on from its checkpoint
    assert bench.chunk_ends(2048, 2048, 512) == [] and bench.chunk_ends(0, 2048, 4096) == [2048]
    assert bench.last_checkpoint(tmp_path) == (0, None)
    for version, step in ((0, 256), (0, 512), (1, 1024), (10, 768)):
        ckpt = tmp_path / f"version_{version}" / "checkpoint" / f"ckpt_{step}_0.ckpt"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpt.touch()
    assert bench.last_checkpoint(tmp_path) == (1024, tmp_path / "version_1" / "checkpoint" / "ckpt_1024_0.ckpt")


def test_a_chunk_sheeprl_cannot_stop_at_exits_2(tmp_path, capsys):
    assert bench.main(["--chunk", "510", "--out", str(tmp_path)]) == 2  # 4 envs: 510 is not a policy step
    assert "--chunk: expected a positive multiple of num_envs = 4, got 510" in capsys.readouterr().err


def test_greedy_rows_carry_the_training_time_up_to_each_checkpoint(tmp_path, monkeypatch):
    """evaluate_seed: one row per checkpoint not yet evaluated, with the wall and CPU seconds of the chunks up to
    it (None when a chunk before it ran untimed); rows already there are kept, not evaluated again."""
    cfg = bench.seed_config("room-exit", [], 3, 2048)
    path = bench.seed_dir(tmp_path, cfg)
    for version, step in ((0, 512), (1, 1024), (2, 1536)):
        ckpt = path / f"version_{version}" / "checkpoint" / f"ckpt_{step}_0.ckpt"
        ckpt.parent.mkdir(parents=True)
        ckpt.touch()
    (path / bench.CHUNKS).write_text('[{"env_steps": 1024, "wall_s": 10.0, "cpu_s": 8.0}, '
                                     '{"env_steps": 1536, "wall_s": 5.5, "cpu_s": 4.0}]')  # 512: run untimed
    seen = []

    def greedy(version, ckpt, seed, episodes, start_cells):
        seen.append((version.name, seed, episodes) if not start_cells else ("cells", version.name))
        return {"greedy_success": len(seen) / 4}

    monkeypatch.setattr(bench, "greedy_eval", greedy)
    rows = bench.evaluate_seed(cfg, tmp_path, 20)
    assert seen == [("version_0", 3, 20), ("version_1", 3, 20), ("version_2", 3, 20)]
    assert [(r["env_steps"], r["wall_s"], r["cpu_s"]) for r in rows] == [(512, None, None), (1024, None, None),
                                                                         (1536, None, None)]
    (path / bench.CHUNKS).write_text('[{"env_steps": 512, "wall_s": 1.0, "cpu_s": 1.0}, '
                                     '{"env_steps": 1024, "wall_s": 10.0, "cpu_s": 8.0}]')
    (path / bench.GREEDY).write_text('[{"env_steps": 512, "wall_s": 1.0, "cpu_s": 1.0, "greedy_success": 0.0}]')
    rows = bench.evaluate_seed(cfg, tmp_path, 20)
    assert [(r["env_steps"], r["wall_s"], r["cpu_s"]) for r in rows] == [(512, 1.0, 1.0), (1024, 11.0, 9.0),
                                                                         (1536, None, None)]
    assert len(seen) == 5 and rows == __import__("json").loads((path / bench.GREEDY).read_text())
    cells = bench.evaluate_seed(cfg, tmp_path, 20, start_cells=True)  # its own file: every checkpoint again
    assert seen[5:] == [("cells", "version_0"), ("cells", "version_1"), ("cells", "version_2")]
    assert cells == __import__("json").loads((path / bench.GREEDY_CELLS).read_text()) and len(cells) == 3


def test_sheeprl_is_launched_with_the_configs_thread_count(tmp_path, monkeypatch):
    """sheeprl sets OMP_NUM_THREADS only after torch is imported (too late); run_seed launches it with the
    thread counts already in its environment, and a process started so runs torch on that many threads."""
    import subprocess
    import sys

    cfg = bench.seed_config("room-exit", ["torch_threads=1"], 0, 4)
    launched, real_run = [], subprocess.run

    def run(argv, check, env):
        launched.append(env)
        ckpt = bench.seed_dir(tmp_path, cfg) / "version_0" / "checkpoint" / "ckpt_4_0.ckpt"
        ckpt.parent.mkdir(parents=True)
        ckpt.touch()

    monkeypatch.setattr(bench.subprocess, "run", run)
    bench.run_seed(cfg, tmp_path, None, 0)
    env = launched[0]
    assert (env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"]) == ("1", "1")
    probe = "import torch; print(torch.get_num_threads())"
    threads = real_run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert threads.stdout.strip() == "1"
