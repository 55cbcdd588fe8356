"""rlspec semantics fit (rlspec/semantics/fit.py) at tiny sizes: the labelling and the AUC against closed forms;
the trainer on synthetic frames whose meaning is drawn in (a red disc at the robot: HAZARD, a green one: GOAL,
both far: CLEAR) must learn to separate them where the untrained model (the negative control) does not, save a
folder the runtime loader reads, and refuse bad arguments. Real Safety-Gymnasium frames: tests/safe."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlspec import cli
from rlspec.envs.safety_frames import label_of, steer
from rlspec.semantics import fit as sf

SIZE = 32


def test_label_of_is_the_nearest_edge_rule():
    hazards = np.array([[1.0, 0.0], [0.0, 3.0]])
    goal = np.array([-2.0, 0.0])
    assert label_of(np.array([0.51, 0.0]), hazards, 0.2, goal, 0.3) == "hazard"  # 0.29 from the edge
    assert label_of(np.array([0.9, 0.0]), hazards, 0.2, goal, 0.3) == "hazard"  # inside
    assert label_of(np.array([0.49, 0.0]), hazards, 0.2, goal, 0.3) == "clear"  # 0.31 from the edge
    assert label_of(np.array([-1.41, 0.0]), hazards, 0.2, goal, 0.3) == "goal"  # 0.29 from the goal's edge
    assert label_of(np.array([-1.8, 0.0]), np.empty((0, 2)), 0.2, goal, 0.3) == "goal"
    assert sf.label_indices(["hazard", "clear", "goal"]).tolist() == [sf.HAZARD, sf.CLEAR, sf.GOAL]
    with pytest.raises(ValueError, match=r"labels must be among \('clear', 'goal', 'hazard'\), got \['wall'\]"):
        sf.label_indices(["clear", "wall"])


def test_steer_drives_by_the_cosine_and_turns_by_the_bearing():
    east, origin = np.array([1.0, 0.0]), np.zeros(2)
    np.testing.assert_allclose(steer(east, origin, np.array([2.0, 0.0])), [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(steer(east, origin, np.array([0.0, 1.0])), [0.0, 1.0], atol=1e-12)  # left: +
    np.testing.assert_allclose(steer(east, origin, np.array([1.0, -1.0])), [np.sqrt(0.5), -0.5], atol=1e-12)
    np.testing.assert_allclose(steer(east, origin, np.array([-1.0, 1e-9])), [0.0, 1.0], atol=1e-6)  # behind


def test_auc_is_the_mann_whitney_probability():
    scores = np.array([0.9, 0.8, 0.3, 0.3, 0.1])
    positive = np.array([True, False, True, False, False])
    assert sf.auc(scores, positive) == pytest.approx((3 + 1 + 0.5) / 6)  # 0.9 beats 3; 0.3 beats 0.1, ties 0.3
    assert sf.auc(scores, np.zeros(5, bool)) != sf.auc(scores, np.zeros(5, bool))  # NaN: no positives


def disc_frames(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Grey floor, a blue robot square at a random place; HAZARD: a red disc on it, GOAL: a green disc on it,
    CLEAR: both discs in the far corner from it."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    frames, labels = np.full((n, SIZE, SIZE, 3), 128, np.uint8), rng.integers(0, 3, n)
    for f, label in zip(frames, labels):
        r, c = rng.integers(6, SIZE - 6, 2)
        far = (SIZE - 1 - r, SIZE - 1 - c)
        red = (r, c) if label == sf.HAZARD else far
        green = (r, c) if label == sf.GOAL else (far[0], c if label == sf.HAZARD else far[1])
        for (cy, cx), colour in ((red, (200, 30, 30)), (green, (30, 200, 30))):
            f[(yy - cy) ** 2 + (xx - cx) ** 2 <= 25] = colour
        f[r - 2:r + 2, c - 2:c + 2] = (30, 30, 220)
    return frames, labels


def test_fit_learns_what_the_frames_show_and_saves_a_loadable_model(tmp_path):
    frames, labels = disc_frames(300, seed=0)
    report = sf.fit(frames, labels, tmp_path / "clip", epochs=12, batch=32, lr=2e-3, seed=0, log=lambda _: None)
    assert report["loss"][-1] < 0.5 * report["loss"][0]
    assert report["held_out_accuracy"] > 0.8
    assert report["auc_trained"] > 0.9 and report["auc_trained"] > report["auc_untrained"] + 0.2
    assert json.loads((tmp_path / "clip" / "fit.json").read_text())["auc_trained"] == report["auc_trained"]
    # the folder is what the runtime loads (safetensors + processor): the same AUC through probe_auc again
    assert sf.probe_auc(tmp_path / "clip", frames[:60], labels[:60]) > 0.8
    assert sorted(report["labels"]) == ["clear", "goal", "hazard"] and report["held_out"] == 60


def test_cli_refuses_bad_arguments_and_a_non_empty_folder(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    for argv, said in ((["--out", str(tmp_path / "full")], "exists and is not empty"),
                       (["--out", str(tmp_path / "m"), "--size", "30"], "--size: got 30")):
        with pytest.raises(SystemExit) as exit_:  # argparse's error: usage and the message, no traceback
            cli.main(["semantics", "fit", *argv])
        assert exit_.value.code == 2 and said in capsys.readouterr().err
    assert (tmp_path / "full" / "x").read_text() == "keep" and not (tmp_path / "m").exists()
    assert cli.main(["semantics", "train"]) == 2
    assert "expected the sub-verb fit" in capsys.readouterr().err


def test_main_renders_fits_and_checks_the_labels_against_the_cost(tmp_path, capsys):
    """The command with a stand-in renderer (synthetic frames; costs > 0 on hazard frames but one): fit.json
    records the env, the label counts and the share of costly steps labelled hazard."""
    frames, labels = disc_frames(60, seed=1)
    names = [sf.LABELS[k] for k in labels]
    costs = (labels == sf.HAZARD).astype(float)
    costs[np.flatnonzero(labels == sf.CLEAR)[0]] = 1.0  # a costly step labelled clear: the check sees it
    seen = {}
    def render(env_id, n, size, seed):
        seen.update(env_id=env_id, n=n, size=size, seed=seed)
        return frames, names, costs, np.arange(60) // 10  # six episodes of ten frames
    out = tmp_path / "m"
    assert sf.main(["--out", str(out), "--frames", "60", "--size", "32", "--epochs", "1", "--env", "E"],
                   render=render) == 0
    assert seen == {"env_id": "E", "n": 60, "size": 32, "seed": 0}
    report = json.loads((out / "fit.json").read_text())
    hazards = int((labels == sf.HAZARD).sum())
    assert report["env"] == "E" and report["hazard_label_where_cost"] == pytest.approx(hazards / (hazards + 1))
    assert report["split"] == "episode" and report["held_out"] == 20  # the 20% share, rounded up to episodes
    assert json.loads(capsys.readouterr().out)["labels"] == report["labels"]


def test_the_episode_split_holds_out_whole_episodes_and_the_frame_split_each_labels_share():
    labels = np.tile(np.array([sf.CLEAR] * 6 + [sf.GOAL] * 2 + [sf.HAZARD] * 2), 12)  # [120]
    episodes = np.repeat(np.arange(12), 10)  # 12 episodes of 10 frames
    train, held = sf._split(labels, 0.25, seed=3, episodes=episodes)
    assert not set(episodes[train]) & set(episodes[held])  # no episode on both sides
    assert len(held) == 30 and sorted(np.concatenate([train, held]).tolist()) == list(range(120))
    train, held = sf._split(labels, 0.25, seed=3)
    assert [int((labels[held] == k).sum()) for k in range(3)] == [18, 6, 6]  # a quarter of each label
    with pytest.raises(ValueError, match="at least 2 episodes, got 1"):
        sf._split(labels, 0.25, seed=3, episodes=np.zeros(120, int))
