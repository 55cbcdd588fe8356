"""`rlspec eval RUN --episodes K --video` on runs of both Dreamer engines: the MP4 read back has one frame per
vector step plus the reset's, at the stated size, and its first frame is the env's first observation
(packed2 unpacked to grayscale, upscaled), within the codec's loss."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_dreamer_engine import TINY

from rlspec import cli
from rlspec.engines import dreamer

imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")

EXECUTION = {"local": ["execution=local"],
             "device": ["execution=device", "commit_stride=2", "steps_per_rollout=2", "sync_every=2", "device=cpu"]}


@pytest.mark.parametrize("execution", sorted(EXECUTION))
def test_eval_video_has_one_frame_per_step(tmp_path, capsys, execution):
    run = tmp_path / "run"
    overrides = [*TINY, *EXECUTION[execution], "total_steps=32", "checkpoint_every=32"]
    assert cli.main(["train", "dreamer", "--quiet", "--out", str(run), *[a for kv in overrides for a in ("--set", kv)]]) == 0
    assert cli.main(["eval", str(run), "--episodes", "3", "--video", "--scale", "2", "--seed", "7"]) == 0
    result = json.loads((run / "eval/eval.json").read_text())
    assert result["episodes"] == 3 and result["steps"] >= 10  # step_limit 10: at least one episode's length
    frames = imageio.mimread(run / "eval/episodes.mp4", memtest=False)
    assert len(frames) == result["steps"] + 1 == result["video_frames"]
    assert frames[0].shape[:2] == (72 * 2, 2 * 80 * 2 + 2)  # two envs side by side, a 2-pixel bar between
    cfg = dreamer.load_config(run)
    envs = dreamer.make_envs(cfg, 7)
    want = dreamer.video_frame(envs.reset().obs, 2).astype(np.float64)
    envs.close()
    got = frames[0].astype(np.float64).mean(-1) if frames[0].ndim == 3 else frames[0].astype(np.float64)
    assert np.abs(got - want).mean() < 6, "the first frame is the reset's observation"
    other = dreamer.video_frame(torch.zeros(2, 1, 72, 20, dtype=torch.uint8), 2)  # an all-white screen
    assert np.abs(got - other).mean() > 20


def test_video_frame_shades_and_layout():
    obs = torch.zeros(2, 1, 72, 20, dtype=torch.uint8)
    obs[0, 0, 0, 0] = 0b11_10_01_00  # env 0, row 0: pixels 0..3 have shades 0, 1, 2, 3
    img = dreamer.video_frame(obs, 3)
    assert img.shape == (216, 2 * 240 + 2) and img.dtype == np.uint8
    assert [int(img[0, 3 * x]) for x in range(5)] == [255, 170, 85, 0, 255]
    assert (img[:3, :12] == np.repeat([255, 170, 85, 0], 3)).all()  # 3 × 3 blocks
    assert (img[:, 240:242] == 128).all() and (img[:, 242:] == 255).all()  # the bar, then env 1 (white)
