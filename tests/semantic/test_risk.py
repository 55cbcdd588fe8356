"""Risk head and λ modulation (PPOLagSem design §5.2, §4.0.5, §15.8 c) on real tiny-CLIP embeddings."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
import torch
from semantic_helpers import config, disk

from rlspec.reference.lagrange import DualAscent
from rlspec.reference.modulation import modulation_scale as reference_modulation
from rlspec.reference.risk_target import risk_target as reference_risk_target
from rlspec.semantics.adapter import SemanticRewardAdapter
from rlspec.semantics.hooks import PPOLagSemHooks, prompts_sha256
from rlspec.semantics.manager import SemanticManager
from rlspec.semantics.risk import RiskBuffer, RiskTrainer, calibration, held_out, pearson
from rlspec.semantics.telemetry import CALIBRATION_KEYS, keys

B, T = 8, 16  # envs, steps per episode
RADII = 1 + 0.8 * np.arange(T)  # the hazard grows as the agent approaches it
COST = (RADII > 9).astype(np.float32)  # cost 1 in the last 6 steps of each episode


@pytest.fixture(scope="module")
def disk_embeddings(clip32):
    return clip32.image_features(np.stack([disk(r) for r in RADII]))  # [T, D]: one per phase


def fill(buffer: RiskBuffer, e: torch.Tensor, steps: int, cost_of=None, capture_every: int = 1) -> None:
    """Env b is at phase (k + 2b) % T at step k and ends its episode at phase T − 1."""
    rng = np.random.default_rng(0)
    for k in range(steps):
        phase = (k + 2 * np.arange(B)) % T
        cost = COST[phase] if cost_of is None else cost_of(phase, rng)
        step = buffer.record_step(torch.tensor(cost), torch.tensor(phase == T - 1))
        if k % capture_every == 0:
            buffer.record_capture(step, torch.arange(B), e[phase])


@pytest.mark.parametrize("learnable", [True, False])
def test_risk_correlation_rises_on_monotonic_costs(clip32, disk_embeddings, learnable):
    """§15.8 (c): costs that follow the frames (a growing hazard) are learned, Risk/Corr rises to > 0.9;
    a control with costs drawn independently of the frames stays below 0.5 under the same training."""
    cfg = config(clip32.model_dir, risk_enable=True, risk_horizon=6, discount=0.9, risk_min_samples=32,
                 risk_batch_size=64, risk_update_iters=40, risk_lr=1e-2, window_size=2 * T)
    buffer = RiskBuffer(B, cfg.window_size, torch.device("cpu"))
    unrelated = lambda phase, rng: rng.random(B).astype(np.float32) < 0.4  # noqa: E731 - costs blind to frames
    fill(buffer, disk_embeddings, 2 * T, None if learnable else unrelated)
    trainer = RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    e, g = buffer.dataset(cfg.discount, cfg.risk_horizon, True)
    before = pearson(trainer.predict(e), g)
    corrs = [trainer.update(buffer)["Risk/Corr"] for _ in range(4)]
    assert corrs[-1] == pytest.approx(pearson(trainer.predict(e), g), abs=1e-9)
    if learnable:
        assert corrs[-1] > 0.9 and corrs[-1] > corrs[0] + 0.1 and corrs[-1] > before + 0.3, (before, corrs)
    else:
        assert corrs[-1] < 0.5, (before, corrs)


def test_targets_are_read_at_captures_of_the_per_step_stream(disk_embeddings):
    """Targets: the reference risk_target over the last window_size steps of every env's cost/done
    stream, read at the captured steps (capture every 3rd step, after the ring wrapped)."""
    window, H, gamma = 20, 5, 0.8
    buffer = RiskBuffer(B, window, torch.device("cpu"))
    fill(buffer, disk_embeddings, 47, cost_of=lambda phase, rng: rng.random(B).astype(np.float32), capture_every=3)
    rng = np.random.default_rng(0)
    costs = torch.tensor(np.stack([rng.random(B).astype(np.float32) for _ in range(47)]))  # [47, B] as filled
    dones = torch.tensor(np.stack([(k + 2 * np.arange(B)) % T == T - 1 for k in range(47)]))
    g = reference_risk_target(costs[-window:], dones[-window:], gamma, H)  # [20, B]
    captured = [k for k in range(47 - window, 47) if k % 3 == 0]
    e, target = buffer.dataset(gamma, H, True)
    torch.testing.assert_close(target, g[[k - (47 - window) for k in captured]].reshape(-1), rtol=1e-6, atol=1e-6)
    assert e.shape == (len(captured) * B, disk_embeddings.shape[1])
    _, unmasked = buffer.dataset(gamma, H, False)  # risk_episode_mask_enable=False: sums across dones
    g_unmasked = reference_risk_target(costs[-window:], torch.zeros(window, B, dtype=torch.bool), gamma, H)
    torch.testing.assert_close(unmasked, g_unmasked[[k - (47 - window) for k in captured]].reshape(-1))


def test_schedule_gates_and_sample_counts(clip32, disk_embeddings):
    cfg = config(clip32.model_dir, risk_enable=True, risk_min_samples=100, risk_batch_size=0, risk_update_iters=3)
    buffer = RiskBuffer(B, 64, torch.device("cpu"))
    fill(buffer, disk_embeddings, 12)  # 96 samples < 100
    trainer = RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    params = [p.clone() for p in trainer.head.parameters()]
    skipped = trainer.update(buffer)
    assert skipped["Risk/TrainStatusCode"] == 1 and skipped["Risk/TrainSamples"] == 0
    assert all(torch.equal(p, q) for p, q in zip(params, trainer.head.parameters()))
    fill(buffer, disk_embeddings, 1)  # 104 samples: full batch, 3 iterations
    ran = trainer.update(buffer)
    assert ran["Risk/TrainStatusCode"] == 0 and ran["Risk/TrainSamples"] == 3 * 104
    assert ran["Risk/Buf/Embeddings"] == 104 and ran["Risk/Buf/Costs"] == 13 * B
    assert ran["Risk/LR"] == cfg.risk_lr and trainer.head.net[0].weight.dtype == torch.float32
    batched = RiskTrainer(config(clip32.model_dir, risk_enable=True, risk_min_samples=10, risk_batch_size=10,
                                 risk_update_iters=2), disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    assert batched.update(buffer)["Risk/TrainSamples"] == 20


def test_nan_events_are_counted_and_left_out(clip32, disk_embeddings):
    cfg = config(clip32.model_dir, risk_enable=True, risk_min_samples=8)
    buffer = RiskBuffer(B, 32, torch.device("cpu"))
    fill(buffer, disk_embeddings, 4)
    cost = torch.zeros(B)
    cost[3] = float("nan")
    step = buffer.record_step(cost, torch.zeros(B, dtype=torch.bool))
    bad = disk_embeddings[:2].clone()
    bad[1, 0] = float("inf")
    buffer.record_capture(step, torch.tensor([0, 1]), bad)
    assert buffer.cost[step, 3] == 0.0 and buffer.nan_events == 1
    trainer = RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    out = trainer.update(buffer)
    assert out["Risk/NanEvents"] == 2 and out["Risk/TrainStatusCode"] == 0  # the inf row left out
    assert np.isfinite(out["Risk/Loss"]) and np.isfinite(out["Risk/Corr"])


def test_bf16_embeddings_feed_a_float32_head(clip32, disk_embeddings):
    cfg = config(clip32.model_dir, risk_enable=True, risk_min_samples=8)
    buffer = RiskBuffer(B, 32, torch.device("cpu"))
    fill(buffer, disk_embeddings.bfloat16(), 4)  # a GPU host keeps the model's reduced precision (§15.3)
    trainer = RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    assert trainer.update(buffer)["Risk/TrainStatusCode"] == 0
    assert trainer.predict(buffer.embeddings()).dtype == torch.float32


def test_risk_and_modulation_leave_the_global_rng_alone(clip32, disk_embeddings):
    state = torch.get_rng_state()
    cfg = config(clip32.model_dir, risk_enable=True, risk_min_samples=8, risk_batch_size=16, risk_update_iters=2)
    buffer = RiskBuffer(B, 32, torch.device("cpu"))
    fill(buffer, disk_embeddings, 8)
    RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0).update(buffer)
    assert torch.equal(torch.get_rng_state(), state)


def _modulated_rollout(clip32, **overrides):
    """Three updates of a real 4-env rollout through the hooks (2, 4, 6 episodes done); per update the
    telemetry after lambda_scale(), and the hooks."""
    cfg = config(clip32.model_dir, risk_enable=True, modulation_enable=True, modulation_min_episodes=5,
                 risk_min_samples=16, risk_update_iters=20, risk_lr=3e-3, alpha_modulation=2.0, window_size=64,
                 **overrides)
    manager = SemanticManager(cfg, 4, 0.99, 10**6, backend=clip32)
    hooks = PPOLagSemHooks(cfg, num_envs=4, gamma=0.99, total_steps=10**6, seed=0,
                           adapter=SemanticRewardAdapter(cfg, 4, 0.99, 10**6, manager=manager))
    images = np.stack([disk(r) for r in RADII])
    rows = []
    for update in range(3):
        for k in range(update * T // 2, (update + 1) * T // 2):
            phase = (k + 4 * np.arange(4)) % T
            hooks.shape_rewards(k * 4, torch.zeros(4), torch.tensor(COST[phase]), torch.tensor(phase == T - 1),
                                images[phase])
        logs = hooks.after_update()
        scale = hooks.lambda_scale()
        logs |= hooks.telemetry()
        assert set(logs) == set(keys(cfg)) and logs["Risk/ModulationScale"] == scale
        rows.append(logs)
    assert hooks.adapter.episodes_completed == 6  # envs end at steps 3, 7 | 11, 15 | 19, 23: 2, 4, 6 episodes
    return rows, hooks


def test_modulation_scales_the_lambda_learning_rate(clip32):
    """Through the hooks on a real rollout: M = 1 and inactive before modulation_min_episodes, then the
    modulation contract's value on the head's predictions of the buffer, and the Lagrange step (contract
    lagrange, DualAscent) moves λ by η·M·(J_c − d)."""
    rows, hooks = _modulated_rollout(clip32)
    scales = [r["Risk/ModulationScale"] for r in rows]
    assert scales[:2] == [1.0, 1.0] and [r["Risk/ModulationActive"] for r in rows] == [0.0, 0.0, 1.0]
    preds = hooks.risk.predict(hooks.adapter.buffer.embeddings())
    want = float(reference_modulation(preds, 6, min_episodes=5, alpha=2.0))
    assert scales[2] == pytest.approx(want, rel=1e-6) and 1 / 3 <= scales[2] < 1.0
    assert [r["Risk/ModulationRaw"] for r in rows] == scales  # no smoothing by default
    lagrange = DualAscent(cost_limit=1.0, lr=0.1, lambda_init=0.5)
    assert float(lagrange.update(3.0, scale=scales[2])) == pytest.approx(0.5 + 0.1 * scales[2] * 2.0, rel=1e-12)


def test_modulation_ema_and_correlation_gate_through_the_hooks(clip32):
    """§4.0.5.1's planned extensions: M ← (1 − β)·M + β·M_raw; M_raw = 1 (inactive) while Risk/Corr of the last
    risk update is below modulation_corr_min, and the contract's value once it is not."""
    plain, _ = _modulated_rollout(clip32)
    corr, raw = plain[2]["Risk/Corr"], plain[2]["Risk/ModulationScale"]
    assert 0 < corr < 1 and raw < 1.0
    smooth, _ = _modulated_rollout(clip32, modulation_ema=0.25)
    assert [r["Risk/ModulationRaw"] for r in smooth] == [1.0, 1.0, raw]
    assert smooth[2]["Risk/ModulationScale"] == pytest.approx(0.75 + 0.25 * raw, rel=1e-12)
    shut, _ = _modulated_rollout(clip32, modulation_corr_min=min(1.0, corr + 1e-3))
    assert [r["Risk/ModulationScale"] for r in shut] == [1.0] * 3 and shut[2]["Risk/ModulationActive"] == 0.0
    assert shut[2]["Risk/Corr"] == corr  # the gate reads the head's correlation, it changes nothing else
    open_, _ = _modulated_rollout(clip32, modulation_corr_min=corr - 1e-3)
    assert open_[2]["Risk/ModulationScale"] == raw and open_[2]["Risk/ModulationActive"] == 1.0


def test_modulation_ema_recursion_and_an_old_checkpoint(clip32, clip_dir):
    """The EMA over a sequence of raw scales is the closed form Σ β(1 − β)^(n−k) M_k + (1 − β)^n; a modulator
    state written before the EMA and the gate (no ModulationRaw, no corr) resumes with M as its memory."""
    from rlspec.semantics.modulation import LambdaModulator

    cfg = config(clip_dir, risk_enable=True, modulation_enable=True, modulation_min_episodes=0,
                 modulation_ema=0.3, alpha_modulation=2.0)
    mod = LambdaModulator(cfg)
    gen = torch.Generator().manual_seed(0)
    raws, got = [], []
    for _ in range(5):
        preds = torch.rand(32, generator=gen) * 3
        got.append(mod.scale(preds, 10, corr=0.0))
        raws.append(float(reference_modulation(preds, 10, min_episodes=0, alpha=2.0)))
    for n in range(5):
        closed = sum(0.3 * 0.7 ** (n - k) * raws[k] for k in range(n + 1)) + 0.7 ** (n + 1)
        assert got[n] == pytest.approx(closed, rel=1e-6)  # the fast modulation: float32
    gated = LambdaModulator(dataclasses.replace(cfg, modulation_corr_min=0.5))
    gated.last = dict(mod.last)
    assert gated.scale(torch.rand(32, generator=gen), 10, corr=0.4) == pytest.approx(0.7 * got[-1] + 0.3, rel=1e-12)
    assert gated.last["Risk/ModulationRaw"] == 1.0 and gated.last["Risk/ModulationActive"] == 0.0
    hooks = PPOLagSemHooks(cfg, num_envs=2, gamma=0.99, total_steps=100, seed=0)
    state = torch.load(io.BytesIO(hooks.state_dict()["blob"]), weights_only=False)
    state["modulator"] = {"Risk/ModulationScale": 0.6, "Risk/ModulationActive": 1.0}
    if state["risk"] is not None:
        del state["risk"]["corr"]
    buf = io.BytesIO()
    torch.save(state, buf)
    hooks.load_state_dict({"blob": buf.getvalue()})
    assert hooks.modulator.last["Risk/ModulationScale"] == 0.6 and hooks.modulator.last["Risk/ModulationRaw"] == 0.6


def test_hooks_refuse_a_disabled_config(clip_dir):
    with pytest.raises(ValueError, match="enable is False"):
        PPOLagSemHooks(config(clip_dir, enable=False), num_envs=2, gamma=0.99, total_steps=10, seed=0)


def test_metadata_records_prompts_hash_and_model(clip32, clip_dir):
    import hashlib
    import json

    cfg = config(clip_dir, risk_enable=True)
    manager = SemanticManager(cfg, 2, 0.99, 100, backend=clip32)
    hooks = PPOLagSemHooks(cfg, num_envs=2, gamma=0.99, total_steps=100, seed=0,
                           adapter=SemanticRewardAdapter(cfg, 2, 0.99, 100, manager=manager))
    meta = hooks.metadata()
    blob = json.dumps({"safe": list(cfg.safe_prompts), "unsafe": list(cfg.unsafe_prompts)}, ensure_ascii=False)
    assert meta["prompts_sha256"] == hashlib.sha256(blob.encode()).hexdigest()
    assert meta["safe_prompts"] == list(cfg.safe_prompts) and meta["config"]["risk_enable"] is True
    assert meta["model"]["weights_sha256"] == hashlib.sha256((clip_dir / "model.safetensors").read_bytes()).hexdigest()
    json.dumps(meta)  # serializable as is
    assert prompts_sha256(cfg.unsafe_prompts, cfg.safe_prompts) != meta["prompts_sha256"]


def test_calibration_closed_forms():
    """ECE and the reliability curve against closed forms: a calibrated head reads 0 with the curve on the
    diagonal; g = 2·pred over 20 rows (10 bins of 2) gives p̄_b = 2b + 0.5, ḡ_b = 2·p̄_b, ECE = mean p̄_b = 9.5;
    the row order does not matter; fewer rows than bins leave NaN bins and weigh the rest by their counts."""
    pred = torch.arange(20.0)
    cal = calibration(pred, pred)
    assert cal["Risk/ECE"] == 0.0 and cal["Risk/HeldOut/Samples"] == 20.0 and cal["Risk/HeldOut/Corr"] == 1.0
    doubled = calibration(pred, 2 * pred)
    assert [doubled[f"Risk/Reliability/Pred/{b}"] for b in range(10)] == [2 * b + 0.5 for b in range(10)]
    assert [doubled[f"Risk/Reliability/Target/{b}"] for b in range(10)] == [4 * b + 1.0 for b in range(10)]
    assert doubled["Risk/ECE"] == pytest.approx(9.5, rel=1e-12)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(0))
    assert calibration(pred[perm], 2 * pred[perm]) == doubled
    few = calibration(torch.tensor([0.0, 1.0, 3.0]), torch.tensor([1.0, 1.0, 0.0]))  # 3 rows, 10 bins
    assert few["Risk/ECE"] == pytest.approx((1 + 0 + 3) / 3, rel=1e-12)
    assert sum(np.isnan(few[f"Risk/Reliability/Pred/{b}"]) for b in range(10)) == 7
    assert all(np.isnan(v) for v in calibration(torch.zeros(0), torch.zeros(0)).values() if v != 0.0)


def test_held_out_captures_are_a_fixed_share_never_trained_on(clip32, disk_embeddings):
    """held_out picks about the asked share of steps, the same ones every time, whatever the stride; the trainer
    leaves those rows out of every step (TrainSamples counts the others) and reports their calibration."""
    for stride in (1, 20):
        steps = range(0, 20_000 * stride, stride)
        share = np.mean([held_out(s, 0.2) for s in steps])
        assert abs(share - 0.2) < 0.02 and not any(held_out(s, 0.0) for s in steps)
    cfg = config(clip32.model_dir, risk_enable=True, risk_min_samples=8, risk_batch_size=0, risk_update_iters=3,
                 window_size=2 * T, risk_holdout_fraction=0.3)
    buffer = RiskBuffer(B, cfg.window_size, torch.device("cpu"))
    fill(buffer, disk_embeddings, 2 * T)
    held = buffer.held_out_rows(0.3)
    assert 0 < int(held.sum()) < len(held) and torch.equal(held, buffer.held_out_rows(0.3))
    trainer = RiskTrainer(cfg, disk_embeddings.shape[1], torch.device("cpu"), seed=0)
    logs = trainer.update(buffer)
    assert logs["Risk/TrainSamples"] == 3 * int((~held).sum())  # full-batch steps over the kept rows only
    e, g = buffer.dataset(cfg.discount, cfg.risk_horizon, True)
    assert {k: logs[k] for k in CALIBRATION_KEYS} == calibration(trainer.predict(e[held]), g[held])
    assert logs["Risk/HeldOut/Samples"] == int(held.sum()) and np.isfinite(logs["Risk/ECE"])
    skipped = RiskTrainer(dataclasses.replace(cfg, risk_min_samples=10**6), disk_embeddings.shape[1],
                          torch.device("cpu"), seed=0).update(buffer)
    assert set(skipped) == set(logs) and np.isnan(skipped["Risk/ECE"])  # the same keys, NaN when skipped


def test_calibration_keys_through_the_hooks_and_rlspec_plot(clip32, tmp_path):
    """With risk_holdout_fraction the hooks log the calibration keys every update (NaN until the risk head
    trains), and `rlspec plot` of a safe run draws Risk/ECE and the last reliability curve."""
    from rlspec import cli
    from rlspec.engines import safe
    from rlspec.runs import config as runconfig
    from rlspec.runs.rundir import RunDir

    rows, hooks = _modulated_rollout(clip32, risk_holdout_fraction=0.3)
    assert all(set(CALIBRATION_KEYS) <= set(r) for r in rows)
    assert 0 < rows[2]["Risk/HeldOut/Samples"] < rows[2]["Risk/Buf/Embeddings"] and np.isfinite(rows[2]["Risk/ECE"])
    cfg = safe.build_config(overrides=["algo=PPOLagSem", "semantic.enable=true", "semantic.risk_enable=true",
                                       f"semantic.model_name={clip32.model_dir}", "semantic.risk_holdout_fraction=0.3"])
    run = RunDir(tmp_path / "run", "safe", runconfig.to_dict(cfg))
    for step, r in enumerate(rows, 1):
        run.log(step * 1000, {k: v for k, v in r.items() if k.startswith("Risk/")})
    run.close()
    assert cli.main(["plot", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run/plots/risk_ece.png").is_file() and (tmp_path / "run/plots/risk_reliability.png").is_file()


@pytest.mark.parametrize("kit", ["reference", "fast"])
def test_the_semantic_side_follows_the_run_kit(clip_dir, kit):
    """build_hooks(kit=K) wires contract shaping, modulation and risk_target from kit K, as the core's Kit does:
    every object the hooks hold calls K's implementation."""
    import importlib

    from rlspec import registry
    from rlspec.semantics import build_hooks

    cfg = config(clip_dir, risk_enable=True, modulation_enable=True)
    hooks = build_hooks(cfg, num_envs=2, gamma=0.99, total_steps=100, seed=0, kit=kit)
    mods = {c: importlib.import_module(registry.IMPLEMENTATIONS[c][registry.KIT_IMPLEMENTATIONS[kit]])
            for c in ("shaping", "modulation", "risk_target")}
    manager = hooks.adapter.manager
    assert manager.shaping is mods["shaping"] and type(manager.normalizer) is mods["shaping"].MarginNormalizer
    assert hooks.modulator.modulation_scale is mods["modulation"].modulation_scale
    assert hooks.adapter.buffer.risk_target is mods["risk_target"].risk_target
    assert mods["shaping"].__name__.startswith({"reference": "rlspec.reference", "fast": "rlspec.fast"}[kit])
