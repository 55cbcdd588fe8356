"""rlspec/algos/dreamer.py on synthetic replay batches (no emulator): the row alignment handed to behavior,
determinism of train_step, the policy's reset on is_first, the slow critic following the critic."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlspec.algos import dreamer as core
from rlspec.reference import behavior, twohot

CFG = core.DreamerConfig(deter=16, stoch=4, classes=4, hidden=16, embed_dim=16, pool=8, mlp_hidden=16,
                         mlp_layers=1, horizon=3, batch_size=2, seq_len=5)


def _batch(gen: torch.Generator, T: int = 5, B: int = 2) -> dict:
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0] = True
    return {"obs": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=gen),
            "action": torch.randint(0, 5, (T, B), dtype=torch.int32, generator=gen),
            "reward": (torch.rand(T, B, generator=gen) < 0.3).float(), "is_first": first,
            "continue": torch.ones(T, B)}


def _state(seed: int = 0, kit: core.Kit | None = None):
    gen = torch.Generator().manual_seed(seed)
    return core.make_state(CFG, 5, kit or core.Kit.reference(), gen), gen


@pytest.mark.parametrize("head_input", ["next", "state"])
def test_behavior_gets_the_heads_predictions_as_arrival_rows(head_input):
    """'next' (the default): the heads read the imagined s_t for the transition arriving at it (no shift);
    'state': they read the state a transition leaves, so row t is the heads' output on s_{t−1}."""
    seen = {}

    def spy(reward, cont_logits, value_logits, slow_value_logits, actor_logits, actions, start_terminal, ema, cfg):
        seen.update(reward=reward, cont=cont_logits, start_terminal=start_terminal)
        return behavior.behavior_losses(reward, cont_logits, value_logits, slow_value_logits, actor_logits, actions,
                                        start_terminal, ema, cfg)

    def imagine(*args):
        seen["imag"] = behavior.imagine(*args)
        return seen["imag"]

    kit = dataclasses.replace(core.Kit.reference(), behavior_losses=spy, imagine=imagine)
    gen = torch.Generator().manual_seed(0)
    state = core.make_state(dataclasses.replace(CFG, head_input=head_input), 5, kit, gen)
    wm_before = {k: v.clone() for k, v in state.wm.state_dict().items()}
    core.train_step(state, _batch(gen), gen)
    # the heads of the world model as it was when behaviour ran (after its own step): recompute now, with
    # the world model unchanged since (only the actor and critic stepped after imagination)
    f = core.features(*seen["imag"].states)  # [H+1, T·B, F]
    _, reward_logits, cont_logits = state.wm.heads(f)
    c = state.wm.config
    reward_out = twohot.mean(reward_logits, c.reward_bins, c.reward_low, c.reward_high)
    rows = slice(1, None) if head_input == "next" else slice(None, -1)
    assert seen["reward"].shape == (CFG.horizon + 1, 10)
    assert torch.equal(seen["reward"][0], torch.zeros(10)) and torch.equal(seen["cont"][0], torch.zeros(10))
    assert torch.equal(seen["reward"][1:], reward_out[rows].detach())
    assert torch.equal(seen["cont"][1:], cont_logits[rows].detach())
    assert not seen["start_terminal"].any()
    assert any(not torch.equal(v, state.wm.state_dict()[k]) for k, v in wm_before.items())  # the model did learn


def _imagined_outcome_of_each_action(head_input: str) -> tuple[torch.Tensor, torch.Tensor]:
    """From one start state, one imagined step per action a = 0..4 (random heads): behavior's arrival row 1
    (reward, continue logit) of that step, [5] each."""
    gen = torch.Generator().manual_seed(3)
    state = core.make_state(dataclasses.replace(CFG, head_input=head_input), 5, core.Kit.reference(), gen)
    wm = state.wm
    with torch.no_grad():
        for head in (wm.reward_head, wm.continue_head):  # the reward head starts at zero: give it weights
            head.out.weight.copy_(torch.randn(head.out.weight.shape, generator=gen))
        h0 = torch.randn(1, CFG.deter, generator=gen).expand(5, -1)  # [5, H]: the same start for every action
        z0 = torch.nn.functional.one_hot(torch.randint(0, CFG.classes, (1, CFG.stoch), generator=gen),
                                         CFG.classes).float().expand(5, -1, -1)  # [5, S, K]
        _, h1, z1 = wm.rssm.img_step(h0, z0, torch.arange(5), gen)
        f = torch.stack((core.features(h0, z0), core.features(h1, z1)))  # [2, 5, F]: s_0, s_1
        reward_logits, cont_logits = wm.reward_continue(f)
        c = wm.config
        reward_out = twohot.mean(reward_logits, c.reward_bins, c.reward_low, c.reward_high)
        reward, cont = core.arrival_rows(reward_out, cont_logits, head_input)
    return reward[1], cont[1]


def test_the_imagined_reward_and_continue_of_a_step_depend_on_its_action():
    """The room-exit bug (a step's reward predicted without its action): the door's reward and termination must
    be reachable by choosing the action that enters it. With the default heads, the 5 actions from one state give 5 different predictions."""
    reward, cont = _imagined_outcome_of_each_action(core.DreamerConfig.head_input)
    assert len(set(reward.tolist())) == 5 and len(set(cont.tolist())) == 5, (reward, cont)


def test_state_heads_give_every_action_the_same_reward_and_continue():
    """Why 'state' cannot learn the room: the prediction for a transition is made before its action is known."""
    reward, cont = _imagined_outcome_of_each_action("state")
    assert len(set(reward.tolist())) == 1 and len(set(cont.tolist())) == 1, (reward, cont)


def test_train_step_same_seed_same_update():
    results = []
    for _ in range(2):
        state, gen = _state()
        batch = _batch(gen)
        metrics = [core.train_step(state, batch, gen) for _ in range(2)]
        results.append((metrics, state.state_dict()))
    (m1, s1), (m2, s2) = results
    assert m1 == m2 and all(math.isfinite(float(v)) for m in m1 for v in m.values())  # 0-d tensors
    assert all(torch.equal(s1["actor"][k], s2["actor"][k]) for k in s1["actor"])
    assert all(torch.equal(s1["wm"][k], s2["wm"][k]) for k in s1["wm"])


def test_slow_critic_moves_toward_the_critic_at_slow_rate():
    state, gen = _state()
    slow0 = [p.clone() for p in state.slow_critic.parameters()]
    core.train_step(state, _batch(gen), gen)
    r = CFG.slow_rate
    for s0, c, s in zip(slow0, state.critic.parameters(), state.slow_critic.parameters()):
        expected = (r * c.detach().double() + (1 - r) * s0.double()).to(s.dtype)
        assert torch.equal(s, expected)


def test_policy_step_resets_where_is_first():
    state, gen = _state()
    obs = _batch(gen)["obs"][0]  # [2, 1, 72, 20]
    junk = (torch.randn(2, CFG.deter, generator=gen), torch.eye(CFG.classes)[torch.zeros(2, CFG.stoch).long()])
    first = torch.ones(2, dtype=torch.bool)
    prev = torch.tensor([3, 1])
    _, fresh = core.policy_step(state, obs, prev, first, None, torch.Generator().manual_seed(7), greedy=True)
    _, reset = core.policy_step(state, obs, prev, first, junk, torch.Generator().manual_seed(7), greedy=True)
    assert torch.equal(fresh[0], reset[0]) and torch.equal(fresh[1], reset[1])
    _, kept = core.policy_step(state, obs, prev, ~first, junk, torch.Generator().manual_seed(7), greedy=True)
    assert not torch.equal(fresh[0], kept[0])


def test_reconstruct_open_loop_agrees_with_the_posterior_over_its_context():
    state, gen = _state()
    batch = _batch(gen)
    real, recon, imagined = core.reconstruct(state, batch, torch.Generator().manual_seed(1), context=2)
    assert real.shape == recon.shape == imagined.shape == (5, 2, 9, 10)
    assert torch.equal(real, state.wm.frames(batch["obs"]).reshape(5, 2, 9, 10))
    assert torch.equal(imagined[:2], recon[:2]) and not torch.equal(imagined[2:], recon[2:])
    _, recon_all, imagined_all = core.reconstruct(state, batch, torch.Generator().manual_seed(1), context=5)
    assert torch.equal(recon_all, recon) and torch.equal(imagined_all, recon)


def test_first_imagined_rewards_and_values_are_zero():
    state, gen = _state()
    f = torch.randn(3, 7, state.wm.config.feature_dim, generator=gen)
    c = state.wm.config
    reward = twohot.mean(state.wm.heads(f)[1], c.reward_bins, c.reward_low, c.reward_high)  # [3, 7]
    assert reward.shape == (3, 7) and reward.abs().max() < 1e-6  # 0 up to the support's float rounding
    assert twohot.mean(state.critic(f)).abs().max() < 1e-6


def test_fast_kit_same_weights_and_updates_within_float32_rounding():
    """Kit.fast(): the core takes it unchanged; from one seed it builds the reference kit's weights exactly,
    and three updates on one batch give the reference's metrics to float32 rounding (the split RSSM matmuls
    and the fused losses round differently: ~1e-7 relative here)."""
    runs = {}
    for name in ("reference", "fast"):  # fast-compiled: tests/engines/dreamer/test_dreamer_fast_variants.py
        state, gen = _state(kit=core.Kit.named(name))
        init = {k: v.clone() for k, v in state.wm.state_dict().items()}  # before the updates
        batch = _batch(gen)
        runs[name] = init, [core.train_step(state, batch, gen) for _ in range(3)]
    (init_r, m_r), (init_f, m_f) = runs["reference"], runs["fast"]
    assert init_r.keys() == init_f.keys() and all(torch.equal(init_r[k], init_f[k]) for k in init_r)
    for a, b in zip(m_r, m_f):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-5, msg=k)


@pytest.mark.parametrize("kit", ["reference", "fast"])
def test_a_masked_action_is_an_absent_action(kit):
    """An action masked out by a −inf logit (p = 0): the behaviour losses and their gradients are those of the
    policy without that action, and the masked logit gets gradient 0 — not NaN (0·log 0 in the entropy)."""
    k = core.Kit.named(kit)
    cfg = core.behavior_config(CFG)
    H, B, A = cfg.horizon, 3, 4
    g = torch.Generator().manual_seed(0)
    inputs = dict(reward=torch.randn(H + 1, B, generator=g), cont_logits=torch.randn(H + 1, B, generator=g),
                  value_logits=torch.randn(H + 1, B, cfg.num_bins, generator=g),
                  slow_value_logits=torch.randn(H + 1, B, cfg.num_bins, generator=g),
                  actions=torch.randint(0, A - 1, (H + 1, B), generator=g),
                  start_terminal=torch.zeros(B, dtype=torch.bool))
    logits = torch.randn(H + 1, B, A, generator=g)
    logits[..., -1] = float("-inf")  # action A−1 masked everywhere
    results = []
    for actor_logits in (logits, logits[..., :-1]):  # masked, and the same policy without the action
        actor_logits = actor_logits.clone().requires_grad_(True)
        out = k.behavior_losses(actor_logits=actor_logits, return_ema=k.ReturnEMA(), cfg=cfg, **inputs)
        out["actor_loss"].backward()
        results.append((out["actor_loss"].detach(), out["entropy"], actor_logits.grad))
    (loss, entropy, grad), (loss_without, entropy_without, grad_without) = results
    assert torch.isfinite(grad).all(), "a masked logit gave the actor a non-finite gradient"
    torch.testing.assert_close(loss, loss_without)
    torch.testing.assert_close(entropy, entropy_without)
    torch.testing.assert_close(grad[..., :-1], grad_without)
    assert torch.equal(grad[..., -1], torch.zeros(H + 1, B))


def test_every_dreamer_key_reaches_its_contract_config_by_name():
    """DreamerConfig mirrors no config by hand: each key is WorldModelConfig's, BehaviorConfig's or listed as the
    engine's own, and every shared key's value (all changed from the defaults) arrives in the contract config."""
    from rlspec.contracts.behavior import BehaviorConfig
    from rlspec.contracts.world_model import WorldModelConfig

    wm, beh = ({f.name for f in dataclasses.fields(c)} for c in (WorldModelConfig, BehaviorConfig))
    keys = {f.name for f in dataclasses.fields(core.DreamerConfig)}
    assert keys - wm - beh == set(core.ENGINE_ONLY) and not wm & beh
    changed = dict(deter=8, stoch=3, classes=5, hidden=12, embed_dim=20, pool=2, frame=(64, 64), cnn_mult=3,
                   cnn_stages=3, free_bits=0.25, dyn_scale=0.7, rep_scale=0.2, unimix=0.05, head_input="state",
                   horizon=4, gamma=0.9, lam=0.8, entropy_coef=1e-3, slow_rate=0.1, slow_reg=0.5)
    assert set(changed) | {"encoder"} == keys & (wm | beh)  # every shared key is exercised here
    cfg = dataclasses.replace(core.DreamerConfig(), **changed)
    got = {**dataclasses.asdict(core.world_model_config(cfg, 7)), **dataclasses.asdict(core.behavior_config(cfg))}
    assert {k: got[k] for k in changed} == changed and got["num_actions"] == 7 and got["encoder"] == "mlp"


def _constant_batch(T: int = 5, B: int = 2) -> dict:
    """Every frame black, every action 0, every reward 1, no episode start after row 0."""
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0] = True
    return {"obs": torch.zeros(T, B, 1, 72, 20, dtype=torch.uint8), "action": torch.zeros(T, B, dtype=torch.int32),
            "reward": torch.ones(T, B), "is_first": first, "continue": torch.ones(T, B)}


@pytest.mark.parametrize("kit_name", ["reference", "fast"])
def test_a_constant_batch_gives_finite_losses_and_updates(kit_name):
    """A batch with nothing to tell apart (one frame, one action, one reward): every metric finite over three
    updates, the weights finite and moved. Its returns are constant, so the return normalizer's percentile
    range is 0 (contract return_ema: the scale max(1, range) never divides by it)."""
    state, gen = _state(kit=core.Kit.named(kit_name))
    before = {k: v.clone() for k, v in state.actor.state_dict().items()}
    for _ in range(3):
        metrics = core.train_step(state, _constant_batch(), gen)
        bad = [k for k, v in metrics.items() if not math.isfinite(float(v))]
        assert not bad, bad
    assert all(torch.isfinite(p).all() for p in state.wm.parameters())
    assert any(not torch.equal(v, state.actor.state_dict()[k]) for k, v in before.items())


def test_a_non_finite_loss_stops_the_run_naming_it():
    """Dreamer's guard is a stop, not a skip: a replay batch holds no non-finite value (the replay's value
    rules refuse one at push; a reward beyond the two-hot range is clipped to its last bin), so a non-finite
    loss means the model itself overflowed, and an update that skipped it would go on imagining with that
    model. The engine reads every update's metrics (check_finite) and stops as Diverged naming them; the run
    directory refuses to checkpoint non-finite weights (tests/engines/test_faults.py)."""
    from rlspec.engines.dreamer.loop import nonfinite_as_diverged
    from rlspec.runs.faults import Diverged, check_finite

    state, gen = _state()
    batch = _constant_batch()
    batch["reward"][2, 1] = math.inf  # clipped to the last bin: a finite update
    metrics = {k: float(v) for k, v in core.train_step(state, batch, gen).items()}
    check_finite(40, metrics, {})
    with torch.no_grad():
        state.wm.reward_head.out.bias.fill_(math.inf)  # an overflowed head: its loss is NaN, then the actor's
    with pytest.raises(Diverged, match=r"parameters of wm \(update 2: train_step stopped with RuntimeError") as err:
        with nonfinite_as_diverged(state, 48):  # as the engine calls train_step
            core.train_step(state, _constant_batch(), gen)
    assert "at step 48" in str(err.value)
