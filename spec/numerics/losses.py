"""Contract ``numerics`` (spec/numerics/__init__.py): Properties of component masking, the KL early stop, value
clipping, masked means and the entropy loss (NUM-16..22, 29, 31, 32)."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import (
    COMPONENTS,
    GERMINATE,
    KL_MULTIPLIER,
    MODES,
    STD_EPS,
    WAIT,
    causal_head_masks,
    component_std,
)
from rlspec.spec.core import (
    assert_close,
    assert_grads_close,
    expect_rejection,
    fail,
    named_grads,
)
from rlspec.spec.numerics._common import _eps, dtypes, seeds


# --------------------------------------------------------------------------------------------------
# Properties: component masking, KL early stop, value clipping, masked means
# --------------------------------------------------------------------------------------------------
def mode_case(mode: str, n: int = 8, seed: int = 0) -> dict:
    """Numerics note §2: advantages [n, 6] whose inactive components are always zero."""
    g = torch.Generator().manual_seed(seed)
    adv = torch.randn(n, len(COMPONENTS), generator=g)
    adv[:, MODES[mode]:] = 0.0
    return dict(advantages=adv, logits=torch.randn(len(COMPONENTS), generator=g), std_eps=STD_EPS,
                active=MODES[mode])


@st.composite
def component_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    n, c = draw(st.integers(1, 12)), draw(st.integers(1, 7))
    adv = torch.randn(n, c, generator=g, dtype=torch.float64)
    dead = torch.rand(c, generator=g) < 0.4
    adv[:, dead] = torch.randn(c, generator=g, dtype=torch.float64)[dead]  # constant columns
    logits = 3 * torch.randn(c, generator=g, dtype=torch.float64)
    return dict(advantages=adv.to(dtype), logits=logits.to(dtype), std_eps=STD_EPS, active=None)


def check_component_mask(impl, advantages, logits, std_eps, active):
    lg = logits.clone().requires_grad_(True)
    weights, valid = impl.masked_component_weights(advantages, lg, std_eps=std_eps)
    want_valid = component_std(advantages.double()) > std_eps
    inputs = dict(advantages=advantages, logits=logits)
    if not torch.equal(valid.cpu(), want_valid):
        fail("NUM-16", f"valid = {valid.tolist()}, expected std > {std_eps:g}: {want_valid.tolist()}", **inputs)
    if active is not None and int(valid.sum()) != active:
        fail("NUM-16", f"{int(valid.sum())} active components, numerics note §2 expects {active}", **inputs)
    l64 = logits.double().masked_fill(~want_valid, -math.inf)
    want = torch.softmax(l64, 0).nan_to_num(0.0) if bool(want_valid.any()) else torch.zeros_like(l64)
    e = _eps(logits.dtype)
    assert_close("NUM-16", "weights (softmax over the valid components only)", weights.detach(), want,
                 atol=8 * e, **inputs)
    masked = weights[~want_valid]
    if bool((masked != 0).any()):
        fail("NUM-16", f"masked components got weights {masked.tolist()}, expected exactly 0", **inputs)
    probe = torch.arange(1.0, len(logits) + 1, dtype=weights.dtype)
    if weights.requires_grad:  # all masked: constant zeros, no graph
        (weights * probe).sum().backward()
    grad = lg.grad if lg.grad is not None else torch.zeros_like(lg)
    if not bool(torch.isfinite(grad).all()) or bool((grad[~want_valid] != 0).any()):
        fail("NUM-16", f"gradient w.r.t. the logits is {grad.tolist()}: must be finite and exactly 0 on the "
                       f"masked components {(~want_valid).tolist()}", **inputs)


@st.composite
def kl_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 50))
    lr = draw(st.sampled_from([1e-4, 0.05, 0.3, 2.0])) * torch.randn(n, generator=g, dtype=torch.float64)
    if draw(st.integers(0, 9)) == 0:
        lr[torch.randint(0, n, (), generator=g)] = draw(st.sampled_from([math.nan, math.inf]))
    return dict(log_ratio=lr.to(draw(dtypes)), target_kl=draw(st.sampled_from([None, 0.01, 0.02, 0.1])))


KL_EXAMPLES = (
    dict(log_ratio=torch.zeros(4), target_kl=0.01),  # kl = 0 exactly
    dict(log_ratio=torch.tensor([math.nan, 0.0]), target_kl=0.01),  # NaN estimate stops
    dict(log_ratio=torch.full((3,), 1e-5), target_kl=1e-12),  # tiny Δ: expm1 keeps k3 > 0
)


def check_kl(impl, log_ratio, target_kl):
    stop, kl = impl.kl_early_stop(log_ratio, target_kl)
    d = log_ratio.double()
    want = (torch.expm1(d) - d).mean()
    e = _eps(log_ratio.dtype)
    tol = 8 * e * float((torch.expm1(d).abs() + d.abs()).nan_to_num(0.0).mean()) + 1e-300
    inputs = dict(log_ratio=log_ratio, target_kl=target_kl)
    assert_close("NUM-17", "k3 estimate mean(exp(Δ) - 1 - Δ)", kl.detach(), want, atol=tol, rtol=8 * e, **inputs)
    if bool(torch.isfinite(kl)) and float(kl) < 0:
        fail("NUM-17", f"kl = {float(kl)!r} < 0: k3 is non-negative", **inputs)
    want_stop = False if target_kl is None else not (float(kl) <= KL_MULTIPLIER * target_kl)
    if not isinstance(stop, torch.Tensor) or bool(stop) != want_stop:
        fail("NUM-17", f"stop = {stop!r} for kl = {float(kl)!r}, expected {want_stop} (stop iff not kl <= "
                       f"1.5·target_kl; NaN stops; None never stops)", **inputs)


@st.composite
def update_plans(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n_steps = draw(st.integers(1, 6))
    z = torch.randn(n_steps, 32, generator=g, dtype=torch.float64)  # per-minibatch features
    deltas = draw(st.sampled_from([0.02, 0.1, 0.3])) * (0.5 + torch.rand(n_steps, generator=g, dtype=torch.float64))
    return dict(z=z, deltas=deltas, target_kl=draw(st.sampled_from([None, 0.005, 0.02, 0.1])))


def check_kl_ordering(impl, z, deltas, target_kl):
    """A recorder: θ is the policy; log_ratio_fn(i) = θ·z_i (old log-probs 0), step_fn(i) adds deltas[i]."""
    theta = [0.0]
    log: list[tuple] = []

    def log_ratio_fn(i):
        log.append(("estimate", i, theta[0]))
        return theta[0] * z[i]

    def step_fn(i, log_ratio):
        log.append(("step", i, theta[0]))
        theta[0] += float(deltas[i])

    kls, steps_taken = impl.kl_guarded_updates(log_ratio_fn, step_fn, len(deltas), target_kl)
    inputs = dict(deltas=deltas, target_kl=target_kl)
    pre, th = [], 0.0  # the pre-step θ of step i is the sum of the earlier steps
    for i in range(len(deltas)):
        pre.append(th)
        th += float(deltas[i])

    def k3(t: float, i: int) -> float:
        return float((torch.expm1(t * z[i]) - t * z[i]).mean())

    for i, kl in enumerate(kls):
        want, got = k3(pre[i], i), float(kl)
        if abs(got - want) > 1e-9 * (1 + want):
            after = k3(pre[i] + float(deltas[i]), i)
            where = "AFTER the optimizer step" if abs(got - after) <= 1e-9 * (1 + after) else "elsewhere"
            fail("NUM-18", f"the KL deciding step {i} = {got:.6g} matches log-probs {where} ({after:.6g}); "
                           f"expected the pre-step estimate {want:.6g}", log=log, **inputs)
    stops = [i for i in range(len(deltas)) if target_kl is not None and k3(pre[i], i) > KL_MULTIPLIER * target_kl]
    want_taken = stops[0] if stops else len(deltas)
    taken = [e[1] for e in log if e[0] == "step"]
    if steps_taken != want_taken or taken != list(range(want_taken)):
        fail("NUM-18", f"steps taken {taken} (reported {steps_taken}), expected steps 0..{want_taken - 1}: the "
                       f"first estimate above 1.5·target_kl must skip its step and all later ones", log=log, **inputs)
    if len(kls) != want_taken + bool(stops):
        fail("NUM-18", f"{len(kls)} KL estimates, expected one per attempted step ({want_taken + bool(stops)})",
             log=log)


@st.composite
def value_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    old = 20 * torch.randn(n, generator=g, dtype=torch.float64)
    values = old + draw(st.sampled_from([0.1, 1.0, 15.0])) * torch.randn(n, generator=g, dtype=torch.float64)
    returns = old + 10 * torch.randn(n, generator=g, dtype=torch.float64)
    dtype = draw(dtypes)
    return dict(values=values.to(dtype), old_values=old.to(dtype), returns=returns.to(dtype),
                value_clip=draw(st.sampled_from([10.0, 0.5, 3.0, None])))


VALUE_EXAMPLES = (  # a move of 1 from old: inside value_clip = 10, outside a policy clip of 0.2
    dict(values=torch.tensor([1.0, -1.0]), old_values=torch.zeros(2), returns=torch.tensor([5.0, 5.0]),
         value_clip=10.0),
)


def check_value_loss(impl, values, old_values, returns, value_clip):
    got = impl.value_loss(values, old_values, returns, value_clip=value_clip)
    v, o, r = values.double(), old_values.double(), returns.double()
    unclipped = (v - r) ** 2
    if value_clip is None:
        want = 0.5 * unclipped.mean()
    else:
        clipped = (o + (v - o).clamp(-value_clip, value_clip) - r) ** 2
        want = 0.5 * torch.maximum(unclipped, clipped).mean()
    e = _eps(values.dtype)
    scale = float((v.abs() + o.abs() + r.abs()).max())
    assert_close("NUM-19", f"value_loss (value_clip={value_clip})", got.detach(), want,
                 atol=16 * e * scale * (1 + scale), rtol=16 * e, values=values, old_values=old_values,
                 returns=returns)


@st.composite
def masked_cases(draw, poison: bool):
    """ratio, advantages [n] for the causal head masks of op_actions [n]; with ``poison`` the masked-out entries
    are overwritten with NaN / inf by the checks (NUM-32)."""
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    op = torch.randint(0, 3, (n,), generator=g)
    if draw(st.booleans()):
        op[:] = WAIT  # blueprint/blend heads with no relevant sample
    ratio = torch.exp(0.3 * torch.randn(n, generator=g, dtype=torch.float64))
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    dtype = draw(dtypes)
    return dict(op_actions=op, ratio=ratio.to(dtype), advantages=adv.to(dtype),
                clip_ratio=draw(st.sampled_from([0.2, 0.1, 0.5])), poison=poison)


def _masked_examples(poison: bool) -> tuple[dict, ...]:
    return (dict(op_actions=torch.tensor([WAIT] * 4), ratio=torch.ones(4), advantages=torch.ones(4), clip_ratio=0.2,
                 poison=poison),)


def check_masked(impl, op_actions, ratio, advantages, clip_ratio, poison, fn):
    clause = "NUM-32" if poison else "NUM-20"
    for head, mask in causal_head_masks(op_actions).items():
        r, a = ratio.clone(), advantages.clone()
        if poison:  # masked-out samples carry garbage: a head with no causal effect must not see it
            r[~mask], a[~mask] = math.nan, math.inf
        r64, a64 = r.double(), a.double()
        surr = torch.where(mask, torch.minimum(r64 * a64, r64.clamp(1 - clip_ratio, 1 + clip_ratio) * a64), 0.0)
        a64 = torch.where(mask, a64, 0.0)
        n = mask.sum().clamp(min=1)
        e = _eps(ratio.dtype)
        inputs = dict(head=head, mask=mask, ratio=r, advantages=a, clip_ratio=clip_ratio)
        relevant = f"for head '{head}' ({int(mask.sum())} relevant)"
        if fn == "masked_mean":
            assert_close(clause, f"masked_mean(advantages) {relevant}", impl.masked_mean(a, mask).detach(),
                         a64.sum() / n, atol=8 * e * (1 + float(a64.abs().sum())), **inputs)
        else:
            assert_close(clause, f"masked_policy_loss {relevant}",
                         impl.masked_policy_loss(r, a, mask, clip_ratio=clip_ratio).detach(), -surr.sum() / n,
                         atol=16 * e * (1 + float(surr.abs().sum())), **inputs)


@st.composite
def entropy_cases(draw, poison: bool):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    op = torch.randint(0, 3, (n,), generator=g)
    op[: draw(st.integers(0, n))] = WAIT  # rarely germinating: blueprint/blend act on few steps, maybe none
    dtype = draw(dtypes)
    entropy = {head: torch.rand(n, generator=g, dtype=torch.float64).mul(2).to(dtype)
               for head in ("op", "slot", "blueprint", "blend")}
    coef = draw(st.sampled_from([None, {}, {"blueprint": 1.5, "blend": 2.0}, {"op": 0.0, "slot": 0.5}]))
    return dict(op_actions=op, entropy=entropy, coef=coef, poison=poison)


def check_entropy(impl, op_actions, entropy, coef, poison):
    clause = "NUM-32" if poison else "NUM-22"
    masks = causal_head_masks(op_actions)
    if poison:  # steps where a head did nothing carry garbage: they must never reach its mean
        entropy = {h: torch.where(masks[h], e, torch.full_like(e, math.nan)) for h, e in entropy.items()}
    loss, per_head = impl.entropy_loss(entropy, masks, coef)
    want_total = 0.0
    e = _eps(next(iter(entropy.values())).dtype)
    for head, h in entropy.items():
        m = masks[head]
        want = torch.where(m, h.double(), 0.0).sum() / m.sum().clamp(min=1)
        want_total = want_total - (coef or {}).get(head, 1.0) * want
        assert_close(clause, f"entropy of head '{head}' ({int(m.sum())} active steps)", per_head[head].detach(),
                     want, atol=8 * e * (1 + float(want.abs())), head=head, mask=m, entropy=h)
    assert_close(clause, "entropy_loss", loss.detach(), want_total, atol=32 * e * (1 + abs(float(want_total))),
                 coef=coef, op_actions=op_actions)


def check_entropy_rejects(impl, op_actions, entropy, coef, poison):
    masks = causal_head_masks(op_actions)
    some = next(iter(entropy.values()))
    expect_rejection("NUM-31", lambda: impl.entropy_loss(entropy, masks, {"nonexistent_head": 1.0}),
                     names=["coef"], mentions=["nonexistent_head"], what="entropy_loss with a coef for an unknown head")
    expect_rejection("NUM-31", lambda: impl.entropy_loss(entropy, {"op": masks["op"]}, None), names=["masks"],
                     what="entropy_loss with masks for one head of four")
    expect_rejection("NUM-31", lambda: impl.entropy_loss({"op": some}, {"op": masks["op"]}, {"op": -1.0}),
                     names=["coef", "op"], mentions=["-1.0"], what="entropy_loss with a negative coefficient")


def _leaves(tensors: dict, dtype=None) -> dict:
    """Fresh leaves requiring grad (in ``dtype`` if given) of the floating tensors of ``tensors``."""
    return {k: v.detach().to(dtype or v.dtype).clone().requires_grad_(True) for k, v in tensors.items()}


def _value_loss64(values, old_values, returns, value_clip):
    unclipped = (values - returns) ** 2
    if value_clip is None:
        return 0.5 * unclipped.mean()
    clipped = (old_values + (values - old_values).clamp(-value_clip, value_clip) - returns) ** 2
    return 0.5 * torch.maximum(unclipped, clipped).mean()


def _policy_loss64(ratio, advantages, mask, clip_ratio):
    r, a = ratio[mask], advantages[mask]
    return -torch.minimum(r * a, r.clamp(1 - clip_ratio, 1 + clip_ratio) * a).sum() / mask.sum().clamp(min=1)


def _entropy_loss64(entropy, masks, coef):
    return -sum((coef or {}).get(h, 1.0) * e[masks[h]].sum() / masks[h].sum().clamp(min=1) for h, e in entropy.items())


def _tol(dtype: torch.dtype) -> dict:
    return dict(atol=64 * _eps(dtype), rtol=64 * _eps(dtype))


def check_value_loss_gradient(impl, values, old_values, returns, value_clip):
    got_in = _leaves(dict(values=values, old_values=old_values, returns=returns))
    want_in = _leaves(got_in, torch.float64)
    got = named_grads(impl.value_loss(*got_in.values(), value_clip=value_clip), got_in)
    want = named_grads(_value_loss64(*want_in.values(), value_clip), want_in)
    assert_grads_close("NUM-29", f"value_loss (value_clip={value_clip})", got, want, **_tol(values.dtype),
                       values=values, old_values=old_values, returns=returns)


def check_policy_loss_gradient(impl, op_actions, ratio, advantages, clip_ratio, poison):
    clause = "NUM-32" if poison else "NUM-29"
    for head, mask in causal_head_masks(op_actions).items():
        r, a = ratio.clone(), advantages.clone()
        if poison:  # garbage where the head did nothing: its gradient there must be 0, not NaN
            r[~mask], a[~mask] = math.nan, math.inf
        got_in = _leaves(dict(ratio=r, advantages=a))
        want_in = _leaves(got_in, torch.float64)
        got = named_grads(impl.masked_policy_loss(*got_in.values(), mask, clip_ratio=clip_ratio), got_in)
        want = named_grads(_policy_loss64(*want_in.values(), mask, clip_ratio), want_in)
        assert_grads_close(clause, f"masked_policy_loss for head '{head}' ({int(mask.sum())} relevant)", got, want,
                           **_tol(ratio.dtype), mask=mask, ratio=r, advantages=a, clip_ratio=clip_ratio)


def check_entropy_gradient(impl, op_actions, entropy, coef, poison):
    masks = causal_head_masks(op_actions)
    if poison:
        entropy = {h: torch.where(masks[h], e, torch.full_like(e, math.nan)) for h, e in entropy.items()}
    got_in = _leaves(entropy)
    want_in = _leaves(entropy, torch.float64)
    got = named_grads(impl.entropy_loss(got_in, masks, coef)[0], got_in)
    want = named_grads(_entropy_loss64(want_in, masks, coef), want_in)
    assert_grads_close("NUM-32" if poison else "NUM-29", f"entropy_loss (coef {coef})", got, want, **_tol(next(iter(entropy.values())).dtype),
                       op_actions=op_actions)


def _entropy_examples(poison: bool) -> tuple[dict, ...]:
    return (dict(op_actions=torch.tensor([WAIT] * 5 + [GERMINATE]), coef=None, poison=poison,
                 entropy={h: torch.linspace(0.1, 1.0, 6) for h in ("op", "slot", "blueprint", "blend")}),)
