"""Golden fixtures from OmniSafe 0.5.0's NaturalPG/TRPO/CPO/P3O actor updates (contract ``trust_region``).

Nothing imports the omnisafe package. ``utils/math.py`` (conjugate_gradients) and ``utils/distributed.py``
import only torch/numpy and load as files (``load_omnisafe_file``); the algorithm methods live in modules
that import the package, so the bridge parses those files from the wheel with ``ast``, compiles the named
methods unchanged and binds them to a small host object that supplies what they read: the actor, the
config, and a logger that records ``store`` calls. The actor is a tanh MLP Gaussian with OmniSafe's
GaussianLearningActor interface (forward -> Normal, log_prob summed over action dimensions, std), in
float64; its parameters are laid out as rlspec.spec.trust_region.tiny_policy's ("gaussian").
"""

from __future__ import annotations

import __future__
import ast
import types

import numpy as np
import torch
import torch.nn.functional as F

from rlspec.golden_bridge.manifest import Fixture
from rlspec.golden_bridge.omnisafe_lagrange import PACKAGE, VERSION, load_omnisafe_file, omnisafe_source
from rlspec.spec.trust_region import tiny_policy

F64 = torch.float64
OBS, HIDDEN, ACT, N = 3, 4, 2, 48  # tiny actor: obs 3 -> 4 tanh -> 2 actions; 48 samples
CFG = dict(target_kl=0.01, cg_iters=15, cg_damping=0.1, fvp_sample_freq=1, cost_limit=25.0, kappa=20.0, clip=0.2,
           entropy_coef=0.0)  # OmniSafe's TRPO/CPO/P3O.yaml values
ALGOS = "omnisafe/algorithms/on_policy/"


def omnisafe_functions(member: str, names: tuple[str, ...], cls: str | None = None) -> dict[str, types.FunctionType]:
    """The functions ``names`` defined in ``member`` (at module level, or in class ``cls``), compiled from the
    wheel's source as they are, in a namespace holding what their bodies reference."""
    source, filename = omnisafe_source(member)
    body = ast.parse(source).body
    if cls is not None:
        body = next(node for node in body if isinstance(node, ast.ClassDef) and node.name == cls).body
    found = [node for node in body if isinstance(node, ast.FunctionDef) and node.name in names]
    missing = set(names) - {node.name for node in found}
    if missing:
        raise LookupError(f"{member}: {sorted(missing)} not found")
    namespace = dict(torch=torch, np=np, F=F, distributed=load_omnisafe_file("omnisafe/utils/distributed.py"),
                     conjugate_gradients=load_omnisafe_file("omnisafe/utils/math.py").conjugate_gradients,
                     **_TOOLS)
    code = compile(ast.Module(body=found, type_ignores=[]), filename, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)  # noqa: S102 - the pinned wheel's own code
    return {name: namespace[name] for name in names}


_TOOLS: dict = {}


def _load_tools() -> None:
    if not _TOOLS:
        names = ("get_flat_params_from", "get_flat_gradients_from", "set_param_values_to_model")
        _TOOLS.update(omnisafe_functions("omnisafe/utils/tools.py", names))


class TinyActor(torch.nn.Module):
    """OmniSafe GaussianLearningActor's interface and parameter order (log_std, then the mean MLP's)."""

    def __init__(self, theta: torch.Tensor):
        super().__init__()
        self.mean = torch.nn.Sequential(torch.nn.Linear(OBS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, ACT))
        self.log_std = torch.nn.Parameter(torch.zeros(ACT))
        self.double()
        with torch.no_grad():
            for p, chunk in zip(self.parameters(), theta.split([p.numel() for p in self.parameters()])):  # flat order
                p.copy_(chunk.view_as(p))

    def forward(self, obs: torch.Tensor) -> torch.distributions.Normal:
        self._current_dist = torch.distributions.Normal(self.mean(obs), torch.exp(self.log_std))
        return self._current_dist

    def log_prob(self, act: torch.Tensor) -> torch.Tensor:
        return self._current_dist.log_prob(act).sum(axis=-1)

    @property
    def std(self) -> float:
        return torch.exp(self.log_std).mean().item()


class _Logger:
    def __init__(self, ep_cost: float):
        self.ep_cost, self.stored = ep_cost, {}

    def log(self, *args, **kwargs) -> None:
        pass

    def store(self, values: dict) -> None:
        self.stored.update(values)

    def get_stats(self, key: str) -> tuple[float]:
        assert key == "Metrics/EpCost", key
        return (self.ep_cost,)


def omnisafe_algorithm(name: str, theta: torch.Tensor, ep_cost: float = 0.0, **cfg):
    """A host object carrying OmniSafe's own methods for ``name`` in {"TRPO", "CPO", "P3O"}."""
    _load_tools()
    methods = omnisafe_functions(ALGOS + "base/policy_gradient.py", ("_compute_adv_surrogate", "_loss_pi"),
                                 "PolicyGradient")
    methods["_fvp"] = omnisafe_functions(ALGOS + "base/natural_pg.py", ("_fvp",), "NaturalPG")["_fvp"]
    methods.update(omnisafe_functions(ALGOS + "base/trpo.py", ("_search_step_size", "_update_actor"), "TRPO"))
    if name == "CPO":
        methods.update(omnisafe_functions(ALGOS + "second_order/cpo.py", (
            "_cpo_search_step", "_loss_pi_cost", "_determine_case", "_step_direction", "_update_actor"), "CPO"))
    if name == "P3O":
        methods["_loss_pi"] = omnisafe_functions(ALGOS + "base/ppo.py", ("_loss_pi",), "PPO")["_loss_pi"]
        methods["_loss_pi_cost"] = omnisafe_functions(ALGOS + "penalty_function/p3o.py", ("_loss_pi_cost",),
                                                      "P3O")["_loss_pi_cost"]
    for search in {"_search_step_size", "_cpo_search_step"} & set(methods):  # record the line search's direction
        methods[search] = _recording(methods[search])
    host = type(f"OmniSafe{name}", (), methods)()
    actor = TinyActor(theta)
    host._actor_critic = types.SimpleNamespace(actor=actor, zero_grad=actor.zero_grad)
    host._cfgs = types.SimpleNamespace(algo_cfgs=types.SimpleNamespace(**{**CFG, **cfg}))
    host._logger = _Logger(ep_cost)
    return host


def _recording(search):
    def wrapped(self, **kwargs):
        self.search_direction = kwargs["step_direction"].detach().clone()
        return search(self, **kwargs)
    return wrapped


def _flat(host) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in host._actor_critic.actor.parameters()])


def batch(seed: int) -> dict[str, torch.Tensor]:
    """θ₀ [28] and a rollout batch of N samples from π_θ₀ (actions, their log-probs, advantages)."""
    g = torch.Generator().manual_seed(seed)
    n = HIDDEN * OBS + HIDDEN + ACT * HIDDEN + ACT + ACT
    theta = 0.5 * torch.randn(n, generator=g, dtype=F64)
    obs = torch.randn(N, OBS, generator=g, dtype=F64)
    dist = tiny_policy("gaussian", theta, obs, HIDDEN, ACT)
    act = dist.mean + dist.stddev * torch.randn(N, ACT, generator=g, dtype=F64)
    standard = lambda v: (v - v.mean()) / v.std()  # noqa: E731 - OmniSafe standardizes advantages
    return dict(theta=theta, obs=obs, act=act, logp=dist.log_prob(act).sum(-1),
                adv_r=standard(torch.randn(N, generator=g, dtype=F64)),
                adv_c=standard(torch.randn(N, generator=g, dtype=F64) + 0.5 * act[:, 0]))


def _update(host, data: dict, adv_c: torch.Tensor) -> None:
    host._update_actor(data["obs"], data["act"], data["logp"], data["adv_r"], adv_c)


def fvp_cg(seed: int = 0) -> Fixture:
    data = batch(seed)
    host = omnisafe_algorithm("TRPO", data["theta"])
    host._fvp_obs = data["obs"]
    g = torch.Generator().manual_seed(seed + 1)
    vectors = torch.randn(3, data["theta"].numel(), generator=g, dtype=F64)
    products = torch.stack([host._fvp(v).detach() for v in vectors])
    solve = load_omnisafe_file("omnisafe/utils/math.py").conjugate_gradients(host._fvp, vectors[0], CFG["cg_iters"])
    return Fixture(
        path="trust_region/omnisafe_fvp_cg.json", contract="trust_region", package=PACKAGE,
        qualname="omnisafe NaturalPG._fvp; omnisafe.utils.math.conjugate_gradients", seed=seed,
        atol=1e-10, rtol=1e-9,
        why="float64 on both sides; products of a 28-parameter Hessian (entries O(1)) round at ~1e-15, CG's 15 "
            "iterations amplify that by the condition number (damping 0.1 bounds it by ~1e3)",
        convention="fvp: kl_fn = mean of KL(π_θ0 ‖ π_θ) over the [N, A] elements (OmniSafe's reduction), damping "
                   "cg_damping = 0.1; expected fvp[i] = _fvp(v[i]); x = conjugate_gradients(_fvp, v[0], 15), whose "
                   "eps = 1e-6 in both denominators: ours conjugate_gradient(fvp, v[0], 15, eps=1e-6)",
        inputs=dict(theta=data["theta"], obs=data["obs"], act=data["act"], logp=data["logp"], v=vectors),
        expected=dict(fvp=products, x=solve.detach()), version=VERSION)


def trpo(seed: int = 0) -> Fixture:
    data = batch(seed)
    target_kls = (0.01, 0.2, 3.0)  # the default; and trust regions wide enough for the model to break down
    rows = []
    for target_kl in target_kls:
        host = omnisafe_algorithm("TRPO", data["theta"], target_kl=target_kl)
        _update(host, data, data["adv_c"])
        logs = host._logger.stored
        rows.append(dict(theta_new=_flat(host), direction=host.search_direction,
                         stats=torch.tensor([logs["Misc/AcceptanceStep"], logs["Misc/xHx"], logs["Misc/Alpha"]],
                                            dtype=F64)))
    return Fixture(
        path="trust_region/omnisafe_trpo.json", contract="trust_region", package=PACKAGE,
        qualname="omnisafe.algorithms.on_policy.base.trpo.TRPO._update_actor", seed=seed,
        atol=1e-9, rtol=1e-7,
        why="float64 actor; OmniSafe's CG adds eps = 1e-6 (ours is given the same), its loss_before and KL pass "
            "through dist_avg, which rounds them to float32 (only a decision at a float32 margin could differ)",
        convention="TRPO(target_kl = target_kl[k], cg_iters 15, cg_damping 0.1)._update_actor(obs, act, logp, adv_r, "
                   "adv_c) from θ0 = theta; expected theta_new[k], direction[k] (the step before the line search) and "
                   "stats[k] = (AcceptanceStep, xHx, Alpha); ours: g = ∇ mean(ratio·adv_r), x = CG(fvp, g, 15, eps = "
                   "1e-6), step = natural_step(x, xᵀFx), line_search(max_steps 15, decay 0.8)",
        inputs=dict(**data, target_kl=torch.tensor(target_kls, dtype=F64)),
        expected={k: torch.stack([r[k] for r in rows]) for k in rows[0]}, version=VERSION)


CPO_STATS = ("Misc/OptimCase", "Misc/q", "Misc/r", "Misc/s", "Misc/A", "Misc/B", "Misc/Lambda_star", "Misc/Nu_star",
             "Misc/AcceptanceStep")


def cpo(seed: int = 0) -> Fixture:
    data = batch(seed)
    probe = omnisafe_algorithm("CPO", data["theta"], ep_cost=CFG["cost_limit"])
    _update(probe, data, data["adv_c"])
    s = float(probe._logger.stored["Misc/s"])
    # c = J_c − d at multiples t of sqrt(2δs): t < −1 case 3, −1 <= t < 0 case 2, 0 <= t <= 1 case 1, t > 1 case 0;
    # and a zero cost gradient (adv_c = 0) with c < 0: case 4
    # (−adv_c flips the sign of b, hence of r = gᵀF⁻¹b)
    unit = (2 * CFG["target_kl"] * s) ** 0.5
    scenarios = [(t * unit, data["adv_c"]) for t in (-2.0, -0.6, 0.0, 0.4, 0.9, 2.0)]
    scenarios += [(t * unit, -data["adv_c"]) for t in (-0.6, 0.4)] + [(-1.0, torch.zeros_like(data["adv_c"]))]
    rows = []
    for c, adv_c in scenarios:
        host = omnisafe_algorithm("CPO", data["theta"], ep_cost=CFG["cost_limit"] + c)
        _update(host, data, adv_c)
        logs = host._logger.stored
        rows.append(dict(theta_new=_flat(host), direction=host.search_direction,
                         stats=torch.tensor([float(logs[k]) for k in CPO_STATS], dtype=F64)))
    return Fixture(
        path="trust_region/omnisafe_cpo.json", contract="trust_region", package=PACKAGE,
        qualname="omnisafe.algorithms.on_policy.second_order.cpo.CPO._update_actor", seed=seed,
        atol=1e-9, rtol=1e-7,
        why="float64 actor; CG eps = 1e-6 given to ours too; q, r, s, A, B are sums of 28 products (~1e-15 each) "
            "amplified by CG; dist_avg rounds the line search's losses to float32 (decisions only)",
        convention="CPO(target_kl 0.01, cg_iters 15, cg_damping 0.1, cost_limit 25)._update_actor with EpCost = "
                   "25 + c[k] and cost advantages adv_c[k]; stats[k] = (OptimCase, q, r, s, A, B, Lambda_star, "
                   "Nu_star, AcceptanceStep) (case 4 logs A = B = 0), direction[k] = the step handed to "
                   "_cpo_search_step, theta_new[k]; ours: g, b = ∇ of mean(ratio·adv_r), mean(ratio·adv_c), x, p = "
                   "CG(fvp, ·, 15, eps = 1e-6), q = xᵀFx, cpo_step, line_search(cost_before = mean(adv_c), "
                   "cost_violation = c, require_improvement = case > 1, max_steps 20). OmniSafe's dual takes r with "
                   "the descent sign (spec/trust_region.py): its Lambda_star, Nu_star and direction match ours only "
                   "where that sign does not change the solution",
        inputs=dict(**{k: v for k, v in data.items() if k != "adv_c"},
                    adv_c=torch.stack([a for _, a in scenarios]), c=torch.tensor([c for c, _ in scenarios], dtype=F64)),
        expected={k: torch.stack([r[k] for r in rows]) for k in rows[0]}, version=VERSION)


def p3o(seed: int = 0) -> Fixture:
    data = batch(seed)
    g = torch.Generator().manual_seed(seed + 2)
    theta = data["theta"] + 0.3 * torch.randn(data["theta"].numel(), generator=g, dtype=F64)  # ratios away from 1
    dist = tiny_policy("gaussian", theta, data["obs"], HIDDEN, ACT)
    s_c = float((torch.exp(dist.log_prob(data["act"]).sum(-1) - data["logp"]) * data["adv_c"]).mean())
    costs = (-5.0, 0.0, -s_c - 0.05, -s_c + 0.05, -s_c + 1.0)  # the penalty off, at the kink's two sides, on
    rows = []
    for c in costs:
        host = omnisafe_algorithm("P3O", theta, ep_cost=CFG["cost_limit"] + c)
        actor = host._actor_critic.actor
        loss_r = host._loss_pi(data["obs"], data["act"], data["logp"], data["adv_r"])
        loss_c = host._loss_pi_cost(data["obs"], data["act"], data["logp"], data["adv_c"])
        grad = torch.autograd.grad(loss_r + loss_c, tuple(actor.parameters()))
        rows.append(dict(loss=torch.stack([loss_r.detach(), loss_c.detach()]),
                         grad=torch.cat([t.reshape(-1) for t in grad])))
    return Fixture(
        path="trust_region/omnisafe_p3o.json", contract="trust_region", package=PACKAGE,
        qualname="omnisafe PPO._loss_pi + P3O._loss_pi_cost", seed=seed,
        atol=1e-12, rtol=1e-10,
        why="float64 on both sides: means of 48 terms of size O(10) (κ = 20) and their gradients",
        convention="P3O(kappa 20, clip 0.2, entropy_coef 0) at θ = theta_eval with EpCost = 25 + c[k]: expected "
                   "loss[k] = (PPO _loss_pi, P3O _loss_pi_cost), grad[k] = ∇_θ of their sum; ours: ratio = "
                   "exp(log π_θ(act) − logp), p3o_loss(ratio, adv_r, adv_c, c[k], 20, 0.2) -> (reward_loss, "
                   "cost_penalty)",
        inputs=dict(**data, theta_eval=theta, c=torch.tensor(costs, dtype=F64)),
        expected={k: torch.stack([r[k] for r in rows]) for k in rows[0]}, version=VERSION)


GENERATORS = [fvp_cg, trpo, cpo, p3o]
