"""Contract ``parity``: with semantics disabled, PPOLagSem's update *is* the PPO-Lagrangian update.

Source: the PPOLagSem design §2 principle 1 ("Parity First"), §4.4 (adapter swap), §25.1 and §25.16 "Parity Guarantee
Statement": with ``semantic_cfgs.enable=False`` the code executes identical operations (order, tensors,
gradients) as baseline PPO-Lagrange; no additional modules, parameters or memory allocations; identical
logged keys. The seed verifies it with curves "within stochastic variance"; this contract checks the
stronger, cheaper statement on one update: bit-identical.

The update under test (§2A PPOLag, §4.0.2, §5.5; the advantage combination of OmniSafe's PPOLag)
-----------------------------------------------------------------------------------------------
batch: obs [N, obs_dim], act [N] (int64, discrete actions), logp_old [N], adv_r [N], adv_c [N],
target_value_r [N], target_value_c [N], ep_cost (J_c, a float). With λ the multiplier before the update:

    Â_r = (adv_r − mean) / (std + 1e-8)   (population std),   Â_c = adv_c − mean(adv_c)
    A   = (Â_r − λ·Â_c) / (1 + λ)                                             (OmniSafe PPOLag)
    for each of ``epochs`` passes, minibatches of ``minibatch_size`` from a permutation drawn from the
    learner's own generator:
        ρ = exp(log π_θ(a|s) − logp_old)
        L = −mean(min(ρ·A, clip(ρ, 1−ε, 1+ε)·A)) + c_v·mean((V_r(s) − target_value_r)²)
            + c_vc·mean((V_c(s) − target_value_c)²) − c_H·mean(H(π_θ(·|s)));  one Adam step on L
    λ ← max(0, λ + η_λ·(J_c − d))                                           (§2A, §5.5 step 4)
    logs: minibatch means of the losses, entropy and clip fraction, and the new λ.

Interface
---------
    make_learner(config: dict, seed: int) -> learner                       the plain PPO-Lagrangian learner
    make_semantic_learner(config: dict, semantic_cfgs: dict, seed: int) -> learner   through the wrapper
Both return a ``torch.nn.Module`` with ``update(batch) -> dict[str, float]``, ``log_prob(obs, act) -> [N]``
(the current policy), ``optimizer_state_dict() -> dict`` and ``lagrangian_multiplier`` (a float). The
wrapped learner also has ``process_rewards(reward [B], step, embeddings=None, captured=None,
is_first=None) -> reward' [B]``, the rollout hook that shapes rewards when semantics are on. Everything
random (initialization, minibatch order) comes from ``torch.Generator().manual_seed(seed)``.
``semantic_cfgs={"enable": False}`` is the disabled configuration (§8: every flag defaults to off).
An implementation module may name its semantic code in ``SEMANTIC_MODULES`` (module names); PARITY-3
forbids those and the known embedding and shaping modules.

dtype: the learner's parameters are ``config["dtype"]`` (default float64); parity is bitwise in any dtype.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from hypothesis import strategies as st

from rlspec.contracts.parity import ADV_EPS, DEFAULT_CONFIG, DISABLED, FORBIDDEN_MODULES
from rlspec.contracts.shaping import CLAMP, NORM_EPS
from rlspec.spec.core import Contract, Property, by_category, expect_rejection, fail
from rlspec.spec.power import global_rng_untouched

CLAUSES = {
    "PARITY-1": "with semantics disabled the wrapped update is bit-identical to the plain one: parameters, "
                "optimizer state, lambda and logged keys and values, over consecutive updates",
    "PARITY-2": "the disabled wrapper allocates nothing semantic: the same parameters, buffers and submodule "
                "types as the plain learner, and no attribute holding semantic objects",
    "PARITY-3": "constructing and updating the disabled wrapper imports no embedding or shaping code",
    "PARITY-4": "with semantics disabled the rollout hook returns the rewards bit for bit",
    "PARITY-5": "the check is not vacuous: the seed drives initialization and minibatch order, and an "
                "update changes the parameters",
    "PARITY-6": "the plain update's clipped surrogate uses A = (A_r_std - lam A_c_ctr)/(1+lam) (one full "
                "minibatch, known ratios) and lambda steps to max(0, lam + lr (J_c - d))",
    "PARITY-7": "constructing, updating and the rollout hook (plain and disabled wrapper) leave the caller's global "
                "RNG streams (torch, numpy, random) untouched: everything random comes from the learner's generator",
    "PARITY-8": "the one-minibatch probe logs the entropy mean(H(pi(.|s))) and ClipFrac mean(|r - 1| > eps) of the "
                "pre-update policy, and squared-error critic losses: shifting target_value_r by ±c changes only "
                "Loss_reward_critic, with second difference 2c² (likewise target_value_c and Loss_cost_critic)",
    "PARITY-9": "the Adam step descends L term by term: after one single-minibatch update, both critic losses on the "
                "same batch are lower, and with zero advantages (only −c_H·H moves the actor) the entropy is higher",
    "PARITY-10": "each epoch's minibatches partition the batch: with minibatch_size dividing N and a negligible lr "
                 "(1e-12), the logged Train/Entropy and Train/ClipFrac equal their whole-batch values",
    "PARITY-11": "a bad batch (a missing key, obs of the wrong width, act out of range, a NaN advantage, a NaN "
                 "ep_cost) is rejected naming the argument, before anything is updated",
    "PARITY-12": "with semantics enabled (§4.0.3, §5.1, §5.4, §8, §28.3) the rollout hook returns r + beta_t * clamp(scale * "
                 "z(m), ±2) on captured envs (or the potential increment beta(gamma phi - phi_last)), m = cos(pooled, mu_safe) - "
                 "cos(pooled, mu_unsafe) of the episode's last temporal_window captured embeddings, z over the last "
                 "norm_window margins; unset keys take the §8/§28.3 defaults (enable False, temporal_window 1, "
                 "norm_window 1000, margin_scale 1, margin_norm_enable True, potential off); no embeddings: rewards "
                 "unchanged; update logs Semantics/Beta, Semantics/ClampFrac and Semantics/CaptureCount",
    "PARITY-13": "each Adam step uses its own minibatch's gradient (no accumulation across steps): with lr 1e-7 "
                 "(an almost constant gradient), float64 and one minibatch per epoch, two epochs move the parameters "
                 "by at most 2·lr each, the largest move 2·lr within 0.1% (Adam's first steps are lr·g/|g|)",
}

CATEGORIES = by_category(
    maths=("PARITY-1", "PARITY-2", "PARITY-3", "PARITY-4", "PARITY-5", "PARITY-6", "PARITY-7", "PARITY-8",
           "PARITY-9", "PARITY-10", "PARITY-12", "PARITY-13"),
    validation=("PARITY-11",),
)

INTERFACE = ("make_learner", "make_semantic_learner")

# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)


def make_batch(cfg: dict, n: int, seed: int, logp_old: torch.Tensor | None = None) -> dict:
    """A synthetic batch of n transitions from an explicit generator (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    dtype = cfg["dtype"]
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    return dict(obs=rnd(n, cfg["obs_dim"]), act=torch.randint(0, cfg["n_actions"], (n,), generator=g),
                logp_old=(-math.log(cfg["n_actions"]) + 0.3 * rnd(n)) if logp_old is None else logp_old,
                adv_r=rnd(n), adv_c=rnd(n), target_value_r=rnd(n), target_value_c=rnd(n),
                ep_cost=float(50 * torch.rand((), generator=g, dtype=torch.float64)))


@st.composite
def cases(draw):
    cfg = dict(DEFAULT_CONFIG, epochs=draw(st.sampled_from([1, 2])), minibatch_size=draw(st.sampled_from([4, 8, 16])),
               lagrangian_init=draw(st.sampled_from([0.0, 0.001, 0.5, 3.0])),
               dtype=draw(st.sampled_from([torch.float32, torch.float64])))
    return dict(config=cfg, n=draw(st.sampled_from([8, 16])), seed=draw(seeds), batch_seed=draw(seeds))


EXAMPLES = (dict(config=DEFAULT_CONFIG, n=16, seed=0, batch_seed=1),
            dict(config=dict(DEFAULT_CONFIG, dtype=torch.float32, minibatch_size=5), n=8, seed=7, batch_seed=2))


# --------------------------------------------------------------------------------------------------
# Bitwise comparison
# --------------------------------------------------------------------------------------------------
def _first_difference(a, b, path: str = "") -> str | None:
    """Where two nested structures (dicts, lists, tensors, numbers) differ bit for bit, or None."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype != b.dtype \
                or a.shape != b.shape or not torch.equal(a, b):
            return f"{path or 'value'}: {_short(a)} vs {_short(b)}"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{path or 'keys'}: keys {sorted(map(str, a))} vs {sorted(map(str, b))}"
        for k in a:
            diff = _first_difference(a[k], b[k], f"{path}[{k!r}]")
            if diff:
                return diff
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (u, v) in enumerate(zip(a, b)):
            diff = _first_difference(u, v, f"{path}[{i}]")
            if diff:
                return diff
        return None
    same = (a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return None if same and type(a) is type(b) else f"{path or 'value'}: {a!r} vs {b!r}"


def _short(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    return f"tensor(shape={tuple(t.shape)}, dtype={t.dtype}, first={t.reshape(-1)[:3].tolist()})"


def _snapshot(learner) -> dict:
    return dict(parameters=[p.detach().clone() for p in learner.parameters()],
                buffers=[b.detach().clone() for b in learner.buffers()],
                optimizer=learner.optimizer_state_dict(), lagrangian_multiplier=learner.lagrangian_multiplier)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_bit_identical(impl, config, n, seed, batch_seed):
    plain, wrapped = impl.make_learner(config, seed), impl.make_semantic_learner(config, dict(DISABLED), seed)
    diff = _first_difference(_snapshot(plain), _snapshot(wrapped))
    if diff:
        fail("PARITY-1", f"before any update, plain vs wrapped (semantics disabled) differ at {diff}", seed=seed)
    for step in range(2):
        batch = make_batch(config, n, batch_seed + step)
        logs_plain, logs_wrapped = plain.update(batch), wrapped.update(batch)
        for what, a, b in (("logged keys", sorted(logs_plain), sorted(logs_wrapped)),
                           ("logs", logs_plain, logs_wrapped),
                           ("state", _snapshot(plain), _snapshot(wrapped))):
            diff = _first_difference(a, b)
            if diff:
                fail("PARITY-1", f"after update {step + 1}, {what} of the plain vs the wrapped learner (semantics "
                                 f"disabled) differ: {diff}", seed=seed, batch_seed=batch_seed + step,
                     config={k: v for k, v in config.items() if k != "dtype"})


def _types(module: torch.nn.Module, skip: tuple) -> list[str]:
    return sorted(type(m).__qualname__ for m in module.modules() if not isinstance(m, skip))


def _forbidden(impl) -> tuple[str, ...]:
    return FORBIDDEN_MODULES + tuple(getattr(impl, "SEMANTIC_MODULES", ()))


def check_no_semantic_allocation(impl):
    config, seed = DEFAULT_CONFIG, 0
    plain, wrapped = impl.make_learner(config, seed), impl.make_semantic_learner(config, dict(DISABLED), seed)
    for what, a, b in (("parameters", plain.parameters(), wrapped.parameters()),
                       ("buffers", plain.buffers(), wrapped.buffers())):
        sig_a = [(tuple(t.shape), t.dtype) for t in a]
        sig_b = [(tuple(t.shape), t.dtype) for t in b]
        if sig_a != sig_b:
            fail("PARITY-2", f"the disabled wrapper has {what} {sig_b}, the plain learner {sig_a}")
    base, wrapper = type(plain), type(wrapped)
    got, want = _types(wrapped, (base, wrapper)), _types(plain, (base, wrapper))
    if got != want:
        fail("PARITY-2", f"the disabled wrapper holds submodules {got}, the plain learner {want}")
    forbidden = _forbidden(impl)
    for name, value in vars(wrapped).items():
        module = type(value).__module__
        if any(module == f or module.startswith(f + ".") for f in forbidden):
            fail("PARITY-2", f"the disabled wrapper's attribute {name!r} holds a {type(value).__qualname__} from "
                             f"{module}: a semantic object allocated although semantics are off")


_IMPORT_PROBE = textwrap.dedent("""
    import json, sys
    sys.path[:0] = {paths}
    from rlspec.registry import load_object
    from rlspec.spec.parity import DEFAULT_CONFIG, DISABLED, make_batch
    forbidden = {forbidden}
    loaded = lambda: sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))
    module = load_object({target})
    after_import = loaded()
    learner = getattr(module, {factory})(DEFAULT_CONFIG, dict(DISABLED), 0)
    learner.update(make_batch(DEFAULT_CONFIG, 16, 1))
    print(json.dumps(dict(after_import=after_import, after_update=loaded())))
""")


def check_no_semantic_import(impl):
    factory = impl.make_semantic_learner
    module = sys.modules.get(factory.__module__)
    path = getattr(module, "__file__", None)
    if path is None:
        fail("PARITY-3", f"cannot probe imports: make_semantic_learner's module {factory.__module__!r} has no file")
    forbidden = _forbidden(impl)
    script = _IMPORT_PROBE.format(paths=repr([str(Path(path).parent)]), forbidden=repr(forbidden),
                                  target=repr(path), factory=repr(factory.__name__))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        fail("PARITY-3", f"the import probe failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if seen["after_import"]:
        fail("PARITY-3", f"importing {factory.__module__} ({path}) loads {seen['after_import']}: the embedding/"
                         "shaping code is imported even when semantics stay disabled")
    if seen["after_update"]:
        fail("PARITY-3", f"constructing and updating the disabled wrapper imports {seen['after_update']}")


def check_hook_identity(impl, config, n, seed, batch_seed):
    wrapped = impl.make_semantic_learner(config, dict(DISABLED), seed)
    g = torch.Generator().manual_seed(batch_seed)
    B = 1 + batch_seed % 4
    reward = torch.randn(B, generator=g, dtype=torch.float64).to(config["dtype"])
    before = reward.clone()
    calls = (dict(), dict(embeddings=torch.randn(B, 6, generator=g), captured=torch.ones(B, dtype=torch.bool),
                          is_first=torch.zeros(B, dtype=torch.bool)))
    for kwargs in calls:
        out = wrapped.process_rewards(reward, batch_seed % 1000, **kwargs)
        if not isinstance(out, torch.Tensor) or out.dtype != reward.dtype or not torch.equal(out, before) \
                or not torch.equal(reward, before):
            fail("PARITY-4", f"process_rewards with semantics disabled returned {_short(out)} "
                             f"(input now {_short(reward)}), expected the rewards {before.tolist()} unchanged",
                 kwargs=sorted(kwargs))


def check_not_vacuous(impl, config, n, seed, batch_seed):
    a, b, c = impl.make_learner(config, seed), impl.make_learner(config, seed), impl.make_learner(config, seed + 1)
    if _first_difference(_snapshot(a)["parameters"], _snapshot(c)["parameters"]) is None:
        fail("PARITY-5", f"seeds {seed} and {seed + 1} give identical initial parameters: the seed is not used")
    start = _snapshot(a)["parameters"]
    batch = make_batch(config, n, batch_seed)
    a.update(batch)
    b.update(batch)
    diff = _first_difference(_snapshot(a), _snapshot(b))
    if diff:
        fail("PARITY-5", f"two learners from seed {seed} differ after the same update: {diff}")
    if _first_difference(start, _snapshot(a)["parameters"]) is None:
        fail("PARITY-5", "an update left every parameter unchanged")
    if n > config["minibatch_size"]:  # several minibatches per epoch: their order must come from the seed
        other = impl.make_learner(config, seed + 1)
        other.load_state_dict(impl.make_learner(config, seed).state_dict())  # a's initial weights, c's generator
        other.update(batch)
        if _first_difference(_snapshot(a)["parameters"], _snapshot(other)["parameters"]) is None:
            fail("PARITY-5", f"seeds {seed} and {seed + 1} give the same minibatch order (identical updates from "
                             "identical weights): the update does not draw from the learner's generator")


def check_update_formula(impl, config, n, seed, batch_seed):
    cfg = dict(config, epochs=1, minibatch_size=n)
    learner = impl.make_learner(cfg, seed)
    probe = make_batch(cfg, n, batch_seed)
    delta = 0.3 * torch.randn(n, generator=torch.Generator().manual_seed(batch_seed), dtype=torch.float64)
    with torch.no_grad():  # logp_old = log π_θ − δ: the first (only) minibatch sees ratios e^δ, some clipped
        probe["logp_old"] = (learner.log_prob(probe["obs"], probe["act"]).double() - delta).to(cfg["dtype"])
    lam = float(learner.lagrangian_multiplier)
    adv_r, adv_c = probe["adv_r"].double(), probe["adv_c"].double()
    a_r = (adv_r - adv_r.mean()) / (adv_r.std(unbiased=False) + ADV_EPS)
    adv = (a_r - lam * (adv_c - adv_c.mean())) / (1 + lam)
    ratio = delta.exp()
    eps_clip = cfg["clip"]
    want_pi = float(-torch.minimum(ratio * adv, ratio.clamp(1 - eps_clip, 1 + eps_clip) * adv).mean())
    want_lam = max(0.0, lam + cfg["lambda_lr"] * (probe["ep_cost"] - cfg["cost_limit"]))
    logs = learner.update(probe)
    eps = torch.finfo(cfg["dtype"]).eps
    got_pi = float(logs.get("Loss/Loss_pi", math.nan))
    tol = 64 * eps * (1 + float(adv.abs().max()) * float(ratio.max())) * (1 + float(probe["logp_old"].abs().max()))
    if not abs(got_pi - want_pi) <= tol:
        fail("PARITY-6", f"Loss/Loss_pi = {got_pi!r} for ratios e^delta, expected "
                         f"-mean(min(r A, clip(r) A)) with A = (A_r_std - lam*A_c_ctr)/(1+lam): {want_pi!r} "
                         f"(lam = {lam!r}, tol {tol:.3g})", seed=seed, batch_seed=batch_seed)
    got_lam = float(learner.lagrangian_multiplier)
    if not abs(got_lam - want_lam) <= 4 * torch.finfo(torch.float64).eps * (1 + abs(want_lam)) or \
            float(logs.get("Metrics/LagrangeMultiplier", math.nan)) != got_lam:
        fail("PARITY-6", f"lambda after the update = {got_lam!r} (logged "
                         f"{logs.get('Metrics/LagrangeMultiplier')!r}), expected max(0, {lam!r} + "
                         f"{cfg['lambda_lr']} * ({probe['ep_cost']!r} - {cfg['cost_limit']})) = {want_lam!r}")


def check_global_rng(impl, config, n, seed, batch_seed):
    batch = make_batch(config, n, batch_seed)
    reward = torch.randn(3, generator=torch.Generator().manual_seed(batch_seed), dtype=torch.float64)
    plain = global_rng_untouched("PARITY-7", "make_learner", lambda: impl.make_learner(config, seed))
    wrapped = global_rng_untouched("PARITY-7", "make_semantic_learner (semantics disabled)",
                                   lambda: impl.make_semantic_learner(config, dict(DISABLED), seed))
    for name, learner in (("plain", plain), ("wrapped", wrapped)):
        global_rng_untouched("PARITY-7", f"the {name} learner's update", lambda: learner.update(batch))
    global_rng_untouched("PARITY-7", "process_rewards (semantics disabled)",
                         lambda: wrapped.process_rewards(reward, 0))


def _probe(impl, cfg, seed, batch):
    learner = impl.make_learner(cfg, seed)
    return learner, learner.update(batch)


def check_probe_logs(impl, config, n, seed, batch_seed):
    cfg = dict(config, epochs=1, minibatch_size=n)
    learner = impl.make_learner(cfg, seed)
    probe = make_batch(cfg, n, batch_seed)
    delta = 0.3 * torch.randn(n, generator=torch.Generator().manual_seed(batch_seed), dtype=torch.float64)
    with torch.no_grad():
        logp = torch.stack([learner.log_prob(probe["obs"], torch.full((n,), a, dtype=torch.int64)).double()
                            for a in range(cfg["n_actions"])], -1)  # [N, n_actions]
        probe["logp_old"] = (logp.gather(-1, probe["act"][:, None])[:, 0] - delta).to(cfg["dtype"])
    want_entropy = float(-(logp.exp() * logp).sum(-1).mean())
    logs = learner.update(probe)
    eps = torch.finfo(cfg["dtype"]).eps
    got = float(logs.get("Train/Entropy", math.nan))
    if not abs(got - want_entropy) <= 64 * eps * (1 + abs(want_entropy)):
        fail("PARITY-8", f"Train/Entropy = {got!r}, expected mean(H(pi(.|s))) of the pre-update policy "
                         f"{want_entropy!r}", seed=seed, batch_seed=batch_seed)
    off = (delta.exp() - 1).abs()
    if bool(((off - cfg["clip"]).abs() > 1e-4).all()):  # no ratio at the clip boundary (rounding could flip it)
        want_frac = float((off > cfg["clip"]).double().mean())
        got_frac = float(logs.get("Train/ClipFrac", math.nan))
        if not abs(got_frac - want_frac) <= 1e-12:
            fail("PARITY-8", f"Train/ClipFrac = {got_frac!r}, expected the fraction of |e^delta - 1| > "
                             f"{cfg['clip']}: {want_frac!r}", seed=seed, batch_seed=batch_seed)
    c = 0.5
    for target, loss, other in (("target_value_r", "Loss/Loss_reward_critic", "Loss/Loss_cost_critic"),
                                ("target_value_c", "Loss/Loss_cost_critic", "Loss/Loss_reward_critic")):
        runs = [_probe(impl, cfg, seed, dict(probe, **{target: probe[target] + shift}))[1] for shift in (0.0, c, -c)]
        base, plus, minus = (float(r.get(loss, math.nan)) for r in runs)
        second = plus + minus - 2 * base
        scale = 64 * eps * (1 + abs(plus) + abs(minus) + 2 * abs(base))
        if not abs(second - 2 * c * c) <= scale:
            fail("PARITY-8", f"{loss} with {target} shifted by +{c}, -{c}, 0: {plus!r}, {minus!r}, {base!r}; second "
                             f"difference {second!r}, expected 2c² = {2 * c * c!r} (mean((V - target)²))",
                 seed=seed, batch_seed=batch_seed)
        for key in (other, "Loss/Loss_pi", "Train/Entropy"):
            if any(r.get(key) != runs[0].get(key) for r in runs[1:]):
                fail("PARITY-8", f"shifting {target} changed {key}: {[r.get(key) for r in runs]} (only {loss} "
                                 f"may depend on it in the first minibatch)", seed=seed, batch_seed=batch_seed)


def check_critics_descend(impl, config, n, seed, batch_seed):
    cfg = dict(config, epochs=1, minibatch_size=n)
    probe = make_batch(cfg, n, batch_seed)
    probe.update(adv_r=torch.zeros_like(probe["adv_r"]), adv_c=torch.zeros_like(probe["adv_c"]))
    learner = impl.make_learner(cfg, seed)
    before = learner.update(probe)  # logged at the pre-update parameters
    after = impl.make_learner(cfg, seed)
    after.load_state_dict(learner.state_dict())
    again = after.update(probe)  # the same batch at the updated parameters
    for key, sign in (("Loss/Loss_reward_critic", 1), ("Loss/Loss_cost_critic", 1), ("Train/Entropy", -1)):
        if not sign * float(again.get(key, math.nan)) < sign * float(before.get(key, math.nan)):
            fail("PARITY-9", f"{key} = {before.get(key)!r} before and {again.get(key)!r} after one Adam step on "
                             "L = −mean(min(r A, clip(r) A)) + c_v·mean((V_r − t_r)²) + c_vc·mean((V_c − t_c)²) − c_H·H "
                             "with A = 0: the step moved it the wrong way", seed=seed, batch_seed=batch_seed)


def check_partition(impl, config, n, seed, batch_seed):
    cfg = dict(config, lr=1e-12, epochs=1, minibatch_size=n // 2)
    learner = impl.make_learner(cfg, seed)
    probe = make_batch(cfg, n, batch_seed)
    delta = 0.3 * torch.randn(n, generator=torch.Generator().manual_seed(batch_seed), dtype=torch.float64)
    with torch.no_grad():
        logp = torch.stack([learner.log_prob(probe["obs"], torch.full((n,), a, dtype=torch.int64)).double()
                            for a in range(cfg["n_actions"])], -1)  # [N, n_actions]
        probe["logp_old"] = (logp.gather(-1, probe["act"][:, None])[:, 0] - delta).to(cfg["dtype"])
    logs = learner.update(probe)
    entropy = float(-(logp.exp() * logp).sum(-1).mean())
    eps = torch.finfo(cfg["dtype"]).eps
    if not abs(float(logs.get("Train/Entropy", math.nan)) - entropy) <= 64 * eps * (1 + abs(entropy)) + 1e-9:
        fail("PARITY-10", f"Train/Entropy = {logs.get('Train/Entropy')!r} with 2 minibatches of {n // 2} and lr 1e-12, "
                          f"expected the whole batch's {entropy!r}: the minibatches do not partition the batch",
             seed=seed, batch_seed=batch_seed)
    off = (delta.exp() - 1).abs()
    if bool(((off - cfg["clip"]).abs() > 1e-4).all()):
        frac = float((off > cfg["clip"]).double().mean())
        if not abs(float(logs.get("Train/ClipFrac", math.nan)) - frac) <= 1e-12:
            fail("PARITY-10", f"Train/ClipFrac = {logs.get('Train/ClipFrac')!r} with 2 minibatches of {n // 2}, "
                              f"expected the whole batch's {frac!r}", seed=seed, batch_seed=batch_seed)


def check_rejects_batch(impl):
    cfg = DEFAULT_CONFIG
    good = make_batch(cfg, 8, 0)
    bad = (("batch", {k: v for k, v in good.items() if k != "adv_c"}),
           ("obs", dict(good, obs=good["obs"][:, :2])),
           ("act", dict(good, act=torch.full((8,), cfg["n_actions"], dtype=torch.int64))),
           ("adv_r", dict(good, adv_r=good["adv_r"].clone().index_fill_(0, torch.tensor([3]), math.nan))),
           ("ep_cost", dict(good, ep_cost=math.nan)))
    for name, batch in bad:
        learner = impl.make_learner(cfg, 0)
        before = _snapshot(learner)
        expect_rejection("PARITY-11", lambda: learner.update(batch), names=[name], what=f"update with a bad {name}")
        diff = _first_difference(before, _snapshot(learner))
        if diff:
            fail("PARITY-11", f"the rejected update (bad {name}) changed the learner: {diff}")


# --------------------------------------------------------------------------------------------------
# PARITY-12: the semantics-enabled hook against a float64 recomputation
# --------------------------------------------------------------------------------------------------
class _ShapingModel:
    """What the enabled hook must do (§4.0.3, §5.1, §5.4), in float64 from the semantic_cfgs and §8 defaults."""

    def __init__(self, sc: dict, num_envs: int):
        unit = lambda x: x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # noqa: E731
        self.unit = unit
        self.mu = [unit(unit(sc[k].double()).mean(0)) for k in ("safe_prompts", "unsafe_prompts")]  # 2 x [D]
        self.sc, self.window = sc, sc.get("temporal_window", 1)
        self.pools = [[] for _ in range(num_envs)]  # the episode's captured embeddings, [D] each
        self.margins: list[float] = []  # every normalized margin input seen
        self.last: list[float | None] = [None] * num_envs  # potential of the last capture
        self.clamped = self.count = self.captures = 0
        self.beta = 0.0

    def __call__(self, reward, step, embeddings, captured, is_first):  # [B] -> [B] float64
        sc, B = self.sc, reward.shape[0]
        for b in range(B):
            if is_first is not None and bool(is_first[b]):
                self.pools[b], self.last[b] = [], None
        captured = torch.ones(B, dtype=torch.bool) if captured is None else captured
        idx = captured.nonzero().flatten().tolist()
        for b in idx:
            self.pools[b] = (self.pools[b] + [embeddings[b].double()])[-self.window:]
        m = torch.tensor([float((self.unit(torch.stack(self.pools[b]).mean(0)) * (self.mu[0] - self.mu[1])).sum())
                          for b in idx], dtype=torch.float64)  # [C]
        if sc.get("margin_norm_enable", True) and idx:
            self.margins = (self.margins + m.tolist())[-sc.get("norm_window", 1000):]
            w = torch.tensor(self.margins, dtype=torch.float64)
            m = (m - w.mean()) / (w.std(unbiased=False) + NORM_EPS)
        y = m * sc.get("margin_scale", 1.0)
        self.clamped += int((y.abs() > CLAMP).sum())
        self.count += y.numel()
        phi = dict(zip(idx, y.clamp(-CLAMP, CLAMP).tolist()))
        progress = min(1.0, step / (sc["beta_end_step_fraction"] * sc["total_steps"]))
        self.beta = sc["beta_start"] * 0.5 * (1.0 + math.cos(math.pi * progress))
        self.captures += len(idx)
        out = reward.double().clone()
        for b, p in phi.items():
            if not sc.get("potential_enable", False):
                out[b] += self.beta * p
            else:
                out[b] += 0.0 if self.last[b] is None else self.beta * (sc["gamma"] * p - self.last[b])
                self.last[b] = p
        return out


def _semantic_script(seed: int, num_envs: int, explicit: bool) -> tuple[dict, list[dict]]:
    """semantic_cfgs (explicit non-default keys with the potential, or only the required ones) and hook calls."""
    g = torch.Generator().manual_seed(seed)
    D = 5
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    sc = dict(enable=True, num_envs=num_envs, safe_prompts=rnd(3, D), unsafe_prompts=rnd(3, D), gamma=0.9,
              total_steps=40, beta_start=0.5, beta_end_step_fraction=0.5)
    if explicit:
        sc.update(temporal_window=2, norm_window=5, margin_scale=3.0, margin_norm_enable=False, potential_enable=True)
    calls = []
    for step in range(4):
        captured = (torch.arange(num_envs) + step) % 3 != 0 if step % 2 else None  # [B]; None: all captured
        is_first = (torch.arange(num_envs) == step % num_envs) if step == 2 else None
        calls.append(dict(reward=rnd(num_envs), step=5 * step, embeddings=rnd(num_envs, D), captured=captured,
                          is_first=is_first))
    return sc, calls


def _semantic_logs(logs: dict, model: _ShapingModel) -> dict:
    want = {"Semantics/Beta": model.beta, "Semantics/ClampFrac": model.clamped / model.count if model.count else 0.0,
            "Semantics/CaptureCount": float(model.captures)}
    return {k: (logs.get(k), v) for k, v in want.items() if not (isinstance(logs.get(k), float)
                                                                 and abs(logs[k] - v) <= 1e-12 * (1 + abs(v)))}


def check_semantic_hook(impl, seed):
    batch = make_batch(DEFAULT_CONFIG, 8, seed)
    default = impl.make_semantic_learner(DEFAULT_CONFIG, {}, seed)  # no "enable": off (§8)
    reward = torch.randn(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    out = default.process_rewards(reward, 0, embeddings=torch.ones(3, 5))
    if not torch.equal(out, reward):
        fail("PARITY-12", f"semantic_cfgs without 'enable' shaped the rewards {reward.tolist()} into {out.tolist()}: "
                          "every semantic flag defaults to off (§8)", seed=seed)
    for explicit, num_envs in ((True, 4), (False, 1001)):  # 1001 margins: more than the default norm_window
        sc, calls = _semantic_script(seed, num_envs, explicit)
        learner = impl.make_semantic_learner(DEFAULT_CONFIG, sc, seed)
        model = _ShapingModel(sc, num_envs)
        bad = _semantic_logs(learner.update(batch), model)
        if bad:
            fail("PARITY-12", f"before any hook call, update logged (got, expected) {bad}", seed=seed, explicit=explicit)
        no_embed = learner.process_rewards(calls[0]["reward"], 0)
        if not torch.equal(no_embed, calls[0]["reward"]):
            fail("PARITY-12", "process_rewards without embeddings changed the rewards", seed=seed)
        for i, call in enumerate(calls):
            want = model(**call)
            got = learner.process_rewards(**call)
            err = float((got.double() - want).abs().max()) if got.shape == want.shape else math.inf
            if not err <= 1e-9 * (1 + float(want.abs().max())):
                k = int((got.double() - want).abs().argmax()) if got.shape == want.shape else 0
                fail("PARITY-12", f"hook call {i} (step {call['step']}): shaped reward[{k}] = "
                                  f"{got.reshape(-1)[k].item()!r}, expected {want[k].item()!r} (max error {err:.3g})",
                     seed=seed, explicit=explicit, semantic_cfgs=sorted(sc))
        bad = _semantic_logs(learner.update(batch), model)
        if bad:
            fail("PARITY-12", f"after {len(calls)} hook calls, update logged (got, expected) {bad}", seed=seed,
                 explicit=explicit)


def check_fresh_gradients(impl, config, n, seed, batch_seed):
    lr = 1e-7
    cfg = dict(config, lr=lr, epochs=2, minibatch_size=n, dtype=torch.float64)
    learner = impl.make_learner(cfg, seed)
    before = [p.detach().clone() for p in learner.parameters()]
    learner.update(make_batch(cfg, n, batch_seed))
    moved = max(float((p.detach() - b).abs().max()) for p, b in zip(learner.parameters(), before)) / lr
    if not abs(moved - 2.0) <= 2e-3:
        fail("PARITY-13", f"two single-minibatch Adam steps with lr {lr} moved a parameter by at most {moved!r}·lr, "
                          "expected 2·lr: a step's gradient is not its own minibatch's (missing zero_grad: the "
                          "second step sees g1 + g2, which Adam turns into a ~0.965·lr step)",
             seed=seed, batch_seed=batch_seed)


PROPERTIES = (
    Property("PARITY-1", check_bit_identical, cases(), EXAMPLES, INTERFACE, max_examples=6),
    Property("PARITY-2", check_no_semantic_allocation, requires=INTERFACE),
    Property("PARITY-3", check_no_semantic_import, requires=INTERFACE),
    Property("PARITY-4", check_hook_identity, cases(), EXAMPLES, INTERFACE, max_examples=10),
    Property("PARITY-5", check_not_vacuous, cases(), EXAMPLES, ("make_learner",), max_examples=5),
    Property("PARITY-6", check_update_formula, cases(), EXAMPLES, ("make_learner",), max_examples=10),
    Property("PARITY-7", check_global_rng, cases(), EXAMPLES, INTERFACE, max_examples=4),
    Property("PARITY-8", check_probe_logs, cases(), EXAMPLES, ("make_learner",), max_examples=6),
    Property("PARITY-9", check_critics_descend, cases(), EXAMPLES, ("make_learner",), max_examples=6),
    Property("PARITY-10", check_partition, cases(), EXAMPLES, ("make_learner",), max_examples=6),
    Property("PARITY-11", check_rejects_batch, requires=("make_learner",)),
    Property("PARITY-13", check_fresh_gradients, cases(), EXAMPLES, ("make_learner",), max_examples=4),
    Property("PARITY-12", check_semantic_hook, st.builds(dict, seed=st.integers(0, 2**20)), (dict(seed=0),),
             ("make_semantic_learner",), max_examples=2),
)

CONTRACT = Contract("parity", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES)
