"""The reward hook end to end on a real tiny CLIP: shaping against the float64 ``shaping`` oracle, the
prompt-swap sign flip (PPOLagSem design §15.8 b), capture interval, batching and OOM backoff, fail-soft,
telemetry."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file
from semantic_helpers import SAFE, UNSAFE, config, frames

from rlspec.reference import shaping as oracle
from rlspec.semantics.adapter import SemanticRewardAdapter
from rlspec.semantics.manager import SemanticManager
from rlspec.semantics.telemetry import SEMANTIC_KEYS

B, T_TOTAL, GAMMA = 4, 200, 0.9


def adapter_on(backend, **overrides) -> SemanticRewardAdapter:
    """An adapter over an already loaded backend (one model load per test session)."""
    cfg = config(backend.model_dir, **overrides)
    manager = SemanticManager(cfg, B, GAMMA, T_TOTAL, backend=backend)
    return SemanticRewardAdapter(cfg, B, GAMMA, T_TOTAL, manager=manager)


def rollout(adapter, steps: int, seed: int = 0, done_at=((1, 0), (3, 2))):
    """Drive the hook for ``steps`` vectorized steps; returns (rewards, shaped, frames or None, dones) per step."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(steps):
        rewards = torch.randn(B, generator=g)
        dones = torch.zeros(B, dtype=torch.bool)
        for step, env in done_at:
            dones[env] |= step == k
        fr = frames(B, seed=100 * seed + k) if adapter.capture_due(k * B) else None
        out.append((rewards, adapter(k * B, rewards, torch.zeros(B), dones, fr), fr, dones))
    return out


@pytest.mark.parametrize("potential", [False, True])
def test_shaping_matches_the_float64_oracle(clip32, potential):
    """Pooling (window 3, cleared at dones), capture every 2nd step, running z-normalization, cosine β,
    additive or potential shaping: the adapter's rewards equal the reference shaping applied by hand."""
    adapter = adapter_on(clip32, shaping_enable=True, potential_enable=potential, capture_interval=2,
                         temporal_window=3, beta_start=0.5, norm_window=7)
    steps = rollout(adapter, 8)
    m = adapter.manager
    mu = (oracle.prompt_centroid(m.backend.text_features(list(SAFE)).double()),
          oracle.prompt_centroid(m.backend.text_features(list(UNSAFE)).double()))
    pool = oracle.TemporalPool(B, mu[0].shape[0], 3)
    norm = oracle.MarginNormalizer(7, 1.0, True)
    pot = oracle.PotentialShaper(B, GAMMA)
    shaped_any = False
    for k, (rewards, shaped, fr, dones) in enumerate(steps):
        want = rewards.double()
        if fr is not None:
            captured = torch.ones(B, dtype=torch.bool)
            pooled = pool(m.backend.image_features(fr).double(), captured)
            margin = norm(oracle.semantic_margin(pooled, *mu))
            beta = oracle.beta_schedule(k * B, T_TOTAL, 0.5, 0.5)
            want = (want + pot(margin, captured, beta) if potential
                    else oracle.additive_shaping(want, beta, margin, captured))
            shaped_any |= bool((shaped != rewards).any())
        else:
            assert torch.equal(shaped, rewards), f"step {k}: not captured, yet shaped"
        # float32 embeddings, z-scored by a std of ~0.02: errors of ~eps32 / 0.02 per unit of β·m̄
        torch.testing.assert_close(shaped.double(), want, rtol=0, atol=1e-5, msg=lambda msg: f"step {k}: {msg}")
        pool.reset(dones)
        pot.reset(dones)
    assert shaped_any


def test_margin_sign_flips_when_prompt_sets_are_swapped(clip32):
    """Seed §15.8 (b): swapping the safe and unsafe prompt lists negates every margin exactly (raw and
    normalized) and the additive shaping term up to the reward's rounding."""
    a = adapter_on(clip32, shaping_enable=True, beta_start=0.3)
    b = adapter_on(clip32, shaping_enable=True, beta_start=0.3, safe_prompts=UNSAFE, unsafe_prompts=SAFE)
    g = torch.Generator().manual_seed(1)
    for k in range(4):
        rewards, e = torch.randn(B, generator=g), a.manager.embed(frames(B, seed=k))[0]
        captured = torch.ones(B, dtype=torch.bool)
        shaped_a, raw_a, norm_a = a.manager.shape(rewards, k * B, e, captured)
        shaped_b, raw_b, norm_b = b.manager.shape(rewards, k * B, e, captured)
        assert float(raw_a.abs().min()) > 0
        assert torch.equal(raw_b, -raw_a) and torch.equal(norm_b, -norm_a), (raw_a, raw_b)
        torch.testing.assert_close(shaped_b - rewards, -(shaped_a - rewards), rtol=0, atol=1e-6)


def test_capture_interval_and_telemetry(clip32):
    adapter = adapter_on(clip32, shaping_enable=True, capture_interval=3, beta_start=0.2)
    steps = rollout(adapter, 7)
    captured = [k for k, (_, _, fr, _) in enumerate(steps) if fr is not None]
    assert captured == [0, 3, 6]
    tele = adapter.telemetry()
    assert set(tele) == set(SEMANTIC_KEYS)
    rewards = torch.stack([s[0] for s in steps]).double()
    shaping = torch.stack([s[1] for s in steps]).double() - rewards
    assert tele["Semantics/CaptureCount"] == 3 and tele["Semantics/CaptureIntervalEffective"] == 3
    assert tele["Semantics/Debug/EmbedAttempts"] == 3 * B == tele["Semantics/Debug/EmbedSuccess"]
    assert tele["Semantics/ShapingRewardRatio"] == pytest.approx(float(shaping.mean() / rewards.mean()), rel=1e-6)
    assert tele["Semantics/Shaping/Min"] == pytest.approx(float(shaping.min()), abs=1e-12)
    assert tele["Semantics/Shaping/Max"] == pytest.approx(float(shaping.max()), abs=1e-12)
    assert tele["Semantics/RawReward"] == pytest.approx(float(rewards.mean()), rel=1e-9)
    assert tele["Semantics/Shaping/RMS"] == pytest.approx(float(shaping.square().mean().sqrt()), rel=1e-6)
    assert tele["Semantics/RawReward/RMS"] == pytest.approx(float(rewards.square().mean().sqrt()), rel=1e-9)
    per_capture_std = [float(shaping[k].std(unbiased=False)) for k in captured]
    assert tele["Semantics/ShapingStd"] == pytest.approx(sum(per_capture_std) / 3, rel=1e-6)
    assert tele["Semantics/Beta"] == pytest.approx(oracle.beta_schedule(6 * B, T_TOTAL, 0.2, 0.5), rel=1e-12)
    assert tele["Semantics/FailSoftEvents"] == 0 and tele["Semantics/EmbedSuccessRate"] == 1.0
    adapter(7 * B, torch.zeros(B), torch.zeros(B), torch.zeros(B, dtype=torch.bool))  # not a capture step
    assert adapter.telemetry()["Semantics/CaptureIntervalEffective"] == 1  # a new window: 1 step since step 6


def test_temporal_window_fill_and_episode_reset(clip32):
    adapter = adapter_on(clip32, shaping_enable=True, temporal_window=4)
    fills = []
    for k in range(3):
        dones = torch.tensor([k == 1, False, False, False])
        adapter(k * B, torch.zeros(B), torch.zeros(B), dones, frames(B, seed=k))
        fills.append(adapter.telemetry()["Semantics/TemporalWindowFill"])
    # env 0's pool is cleared after step 1: lengths (1,1,1,1), (0,2,2,2), (1,3,3,3)
    assert fills == [pytest.approx(1 / 4), pytest.approx(6 / 16), pytest.approx(10 / 16)]


@pytest.mark.parametrize("batch_max", [0, 3])
def test_batched_embeddings_equal_per_frame(clip32, batch_max):
    adapter = adapter_on(clip32, batch_max=batch_max)
    images = frames(8, seed=5)
    batched, _ = adapter.manager.embed(images)
    single = torch.cat([adapter.manager.embed(images[i:i + 1])[0] for i in range(8)])
    torch.testing.assert_close(batched, single, rtol=1e-5, atol=1e-6)


def test_oom_backoff_halves_the_batch(clip32, monkeypatch):
    """A real torch.OutOfMemoryError from the model's forward for batches above 2: the batch is halved
    (8 → 4 → 2) and the embeddings are those of an unconstrained run; the smaller cap persists."""
    adapter = adapter_on(clip32, batch_max=0)
    images = frames(B * 2, seed=3)
    want, _ = adapter.manager.embed(images)
    real, sizes = clip32.model.get_image_features, []

    def forward(**inputs):
        sizes.append(inputs["pixel_values"].shape[0])
        if sizes[-1] > 2:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB (batch {sizes[-1]})")
        return real(**inputs)

    monkeypatch.setattr(clip32.model, "get_image_features", forward)
    adapter.manager.batch_cap = 8
    got, _ = adapter.manager.embed(images)
    assert sizes == [8, 4, 2, 2, 2, 2] and adapter.manager.oom_backoffs == 2 and adapter.manager.batch_cap == 2
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    sizes.clear()
    adapter.manager.embed(images)
    assert sizes == [2, 2, 2, 2] and adapter.manager.oom_backoffs == 2


@pytest.mark.parametrize("backoff", [False, True])
def test_oom_that_cannot_be_backed_off_is_fail_soft(clip32, monkeypatch, backoff):
    """OOM with backoff off, or at one frame: the step's rewards stay bit for bit, the event is counted,
    and the next step (model healthy again) is shaped."""
    adapter = adapter_on(clip32, shaping_enable=True, oom_backoff=backoff, beta_start=0.5)
    real = clip32.model.get_image_features
    monkeypatch.setattr(clip32.model, "get_image_features",
                        lambda **inputs: (_ for _ in ()).throw(torch.OutOfMemoryError("CUDA out of memory.")))
    rewards = torch.randn(B)
    assert torch.equal(adapter(0, rewards, torch.zeros(B), torch.zeros(B, dtype=torch.bool), frames(B)), rewards)
    tele = adapter.telemetry()
    assert tele["Semantics/FailSoftEvents"] == 1 and tele["Semantics/EmbedSuccessRate"] == 0.0
    assert tele["Semantics/OOMBackoffs"] == (2 if backoff else 0)  # 4 → 2 → 1, then OOM at one frame
    monkeypatch.setattr(clip32.model, "get_image_features", real)
    shaped = adapter(B, rewards, torch.zeros(B), torch.zeros(B, dtype=torch.bool), frames(B))
    assert not torch.equal(shaped, rewards)


def test_failures_leave_rewards_unshaped_and_are_counted(clip32, monkeypatch):
    """A model error on one step, a non-finite embedding row, a capture step without frames: each keeps
    the affected rewards bit for bit, counts one event, and shaping resumes afterwards."""
    adapter = adapter_on(clip32, shaping_enable=True, beta_start=0.5)
    real = clip32.model.get_image_features
    calls = []

    def forward(**inputs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("device-side assert triggered")
        out = real(**inputs)
        if len(calls) == 3:
            out.pooler_output[1] = float("nan")
        return out

    monkeypatch.setattr(clip32.model, "get_image_features", forward)
    no_done, r = torch.zeros(B, dtype=torch.bool), torch.randn(B)
    s0 = adapter(0, r, torch.zeros(B), no_done, frames(B, seed=0))
    s1 = adapter(B, r, torch.zeros(B), no_done, frames(B, seed=1))  # model error
    s2 = adapter(2 * B, r, torch.zeros(B), no_done, frames(B, seed=2))  # NaN row for env 1
    s3 = adapter(3 * B, r, torch.zeros(B), no_done, None)  # no frames
    assert not torch.equal(s0, r) and torch.equal(s1, r) and torch.equal(s3, r)
    assert s2[1] == r[1] and bool((s2[[0, 2, 3]] != r[[0, 2, 3]]).all())
    tele = adapter.telemetry()
    assert tele["Semantics/FailSoftEvents"] == 3
    assert tele["Semantics/Debug/EmbedAttempts"] == 3 * B and tele["Semantics/Debug/EmbedSuccess"] == 2 * B - 1


def test_failed_load_trains_on_unshaped(clip_dir, tmp_path):
    folder = tmp_path / "bin-only"
    shutil.copytree(clip_dir, folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    adapter = SemanticRewardAdapter(config(folder, shaping_enable=True), B, GAMMA, T_TOTAL)
    assert not adapter.manager.ready and not adapter.capture_due(0)
    for k in range(3):
        r = torch.randn(B)
        assert torch.equal(adapter(k * B, r, torch.zeros(B), torch.zeros(B, dtype=torch.bool), frames(B)), r)
    tele = adapter.telemetry()
    assert tele["Semantics/Debug/ClipStatus"] == -1 and tele["Semantics/FailSoftEvents"] == 1
    assert tele["Semantics/CaptureCount"] == 0


def test_single_frame_path_broadcasts(clip32, monkeypatch):
    """batch_across_envs=False (§16.1): one frame is embedded and its shaping reaches every env."""
    adapter = adapter_on(clip32, shaping_enable=True, batch_across_envs=False, margin_norm_enable=False)
    real, sizes = clip32.model.get_image_features, []
    monkeypatch.setattr(clip32.model, "get_image_features",
                        lambda **inputs: (sizes.append(inputs["pixel_values"].shape[0]), real(**inputs))[1])
    shaped = adapter(0, torch.zeros(B), torch.zeros(B), torch.zeros(B, dtype=torch.bool), frames(B))
    assert sizes == [1] and float(shaped.abs().min()) > 0 and bool((shaped == shaped[0]).all())


def test_bad_arguments_are_rejected(clip32):
    adapter = adapter_on(clip32)
    no_done = torch.zeros(B, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"'rewards' must be a floating tensor of shape \(4,\)"):
        adapter(0, torch.zeros(3), torch.zeros(B), no_done)
    with pytest.raises(ValueError, match="'dones' must be bool or 0/1"):
        adapter(0, torch.zeros(B), torch.zeros(B), torch.tensor([0, 2, 0, 0]))
    with pytest.raises(ValueError, match="'frames' must hold 1 or 4 frames"):
        adapter(0, torch.zeros(B), torch.zeros(B), no_done, frames(3))
    with pytest.raises(ValueError, match="'global_step' must be an int >= 0"):
        adapter(-1, torch.zeros(B), torch.zeros(B), no_done)
