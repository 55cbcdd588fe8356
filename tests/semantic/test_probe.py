"""``rlspec probe`` (PPOLagSem design §30) on a real tiny CLIP: statistics against an independent computation,
the prompt-swap sign flip, annotated frames, folder / GIF / mp4 inputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch.nn.functional as F
from PIL import Image, ImageSequence
from semantic_helpers import SAFE, UNSAFE, disk

from rlspec.cli import main

RADII = (2, 6, 10, 14)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The same four frames as a folder of PNGs, an animated GIF and an mp4."""
    import imageio.v3 as iio

    root = tmp_path_factory.mktemp("probe-in")
    images = [disk(r, size=48) for r in RADII]
    (root / "pngs").mkdir()
    for i, image in enumerate(images):
        Image.fromarray(image).save(root / "pngs" / f"f{i}.png")
    Image.fromarray(images[0]).save(root / "clip.gif", save_all=True,
                                    append_images=[Image.fromarray(x) for x in images[1:]], duration=100, loop=0)
    iio.imwrite(root / "clip.mp4", np.stack(images), fps=10)
    return root, images


def run_probe(frames_path, out, clip_dir, safe=SAFE, unsafe=UNSAFE) -> dict:
    code = main(["probe", "--frames", str(frames_path), "--safe", *safe, "--unsafe", *unsafe, "--model", str(clip_dir),
                 "--dtype", "float32", "--device", "cpu", "--out", str(out)])
    assert code == 0
    return json.loads((out / "centroids_and_stats.json").read_text())


def test_statistics_match_an_independent_computation(inputs, clip_dir, clip32, tmp_path):
    root, images = inputs
    stats = run_probe(root / "pngs", tmp_path / "out", clip_dir)
    safe = F.normalize(clip32.text_features(list(SAFE)).double(), dim=-1)  # [2, D]
    unsafe = F.normalize(clip32.text_features(list(UNSAFE)).double(), dim=-1)
    mu_s, mu_u = F.normalize(safe.mean(0), dim=0), F.normalize(unsafe.mean(0), dim=0)
    e = F.normalize(clip32.image_features(np.stack(images)).double(), dim=-1)  # [4, D]
    margins = e @ mu_s - e @ mu_u
    got = [row["margin"] for row in stats["per_frame"]]
    np.testing.assert_allclose(got, margins.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose([r["safe_sim"] - r["unsafe_sim"] for r in stats["per_frame"]], got, atol=1e-6)
    p = stats["prompts"]
    cos = float(mu_s @ mu_u)
    assert p["centroid_cosine"] == pytest.approx(cos, abs=1e-6)
    assert p["centroid_angle_deg"] == pytest.approx(math.degrees(math.acos(cos)), abs=1e-3)
    assert p["centroid_distance"] == pytest.approx(math.sqrt(2 - 2 * cos), abs=1e-5)  # unit centroids
    assert p["intra_safe"] == pytest.approx(float(safe[0] @ safe[1]), abs=1e-6)
    assert p["inter"] == pytest.approx(float((safe @ unsafe.T).mean()), abs=1e-6)
    assert stats["frames"]["margin"]["mean"] == pytest.approx(float(margins.mean()), abs=1e-5)
    assert stats["frames"]["count"] == 4 and stats["status"] == "ok_st_float32"
    np.testing.assert_allclose(stats["centroids"]["safe"], mu_s.numpy(), atol=1e-6)


def test_swapped_prompts_negate_the_margins(inputs, clip_dir, tmp_path):
    root, _ = inputs
    a = run_probe(root / "pngs", tmp_path / "a", clip_dir)
    b = run_probe(root / "pngs", tmp_path / "b", clip_dir, safe=UNSAFE, unsafe=SAFE)
    np.testing.assert_allclose([r["margin"] for r in b["per_frame"]], [-r["margin"] for r in a["per_frame"]],
                               rtol=0, atol=1e-7)
    assert min(abs(r["margin"]) for r in a["per_frame"]) > 0
    assert b["prompts"]["centroid_cosine"] == pytest.approx(a["prompts"]["centroid_cosine"], abs=1e-7)
    assert a["prompts_sha256"] != b["prompts_sha256"]


def test_annotated_frames_and_video_inputs(inputs, clip_dir, tmp_path):
    root, images = inputs
    folder = run_probe(root / "pngs", tmp_path / "png", clip_dir)
    gif = run_probe(root / "clip.gif", tmp_path / "gif", clip_dir)
    mp4 = run_probe(root / "clip.mp4", tmp_path / "mp4", clip_dir)
    # two flat colours survive the GIF palette exactly; mp4 is lossy (chroma subsampling at the edges)
    np.testing.assert_allclose([r["margin"] for r in gif["per_frame"]], [r["margin"] for r in folder["per_frame"]],
                               atol=1e-6)
    assert mp4["frames"]["count"] == 4
    np.testing.assert_allclose([r["margin"] for r in mp4["per_frame"]], [r["margin"] for r in folder["per_frame"]],
                               atol=0.05)
    pngs = sorted((tmp_path / "png" / "frames").glob("*.png"))
    assert [p.name for p in pngs] == ["00000.png", "00001.png", "00002.png", "00003.png"]
    scale = math.ceil(256 / 48)
    with Image.open(pngs[0]) as first:
        assert first.size == (48 * scale, 48 * scale + 28)
        band = np.asarray(first)[:28]
        assert band.max() > 200  # white text was drawn on the black band
    with Image.open(tmp_path / "png" / "annotated.gif") as anim:
        assert sum(1 for _ in ImageSequence.Iterator(anim)) == 4


def test_unloadable_model_fails_with_status(inputs, tmp_path, capsys):
    root, _ = inputs
    code = main(["probe", "--frames", str(root / "pngs"), "--safe", "a", "--unsafe", "b", "--model",
                 str(tmp_path / "nothing-here"), "--out", str(tmp_path / "out")])
    assert code == 1 and "load_error:ModelNotFound" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_empty_folder_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no image files"):
        main(["probe", "--frames", str(tmp_path / "empty"), "--safe", "a", "--unsafe", "b"])
