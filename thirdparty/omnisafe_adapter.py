"""OmniSafe 0.5.0's Lagrangian controllers behind contract ``lagrange`` (spec/lagrange.py), and its P3O cost term
behind ``trust_region``'s ``p3o_cost_violation`` (spec/trust_region.py).

The files ``omnisafe/common/lagrange.py``, ``pid_lagrange.py`` and ``simmer_agent.py`` are read out of the
pinned wheel and executed as bare modules (rlspec.thirdparty.wheel): importing the ``omnisafe`` package
would pull in its environment registry. ``simmer_agent.py`` imports ``omnisafe.utils.config.Config`` for
annotations only; a stub stands in for that one name.

Conversions (all explicit, nothing validated on OmniSafe's behalf):

* ``DualAscent(cost_limit, lr, lambda_init)`` = ``Lagrange(cost_limit, lambda_init, lr, "SGD")``: with
  SGD OmniSafe's update is the projected ascent λ ← max(0, λ + η·(J_c − d)) its docstring states.
* ``OmniSafeLagrange(...)`` = ``Lagrange(..., lambda_optimizer="Adam")``.
* ``update(jc, scale=M)``: the modulation M multiplies the λ learning rate (PPOLagSem design §4.0.5); OmniSafe's
  knob for that is its optimizer's ``lr``, set to ``lambda_lr·M`` for the step; an M that is not finite
  and > 0 maps onto no learning rate and is unsupported.
* ``PIDLagrangian(...).update(jc)`` = ``pid_update(jc)``; λ is ``lagrangian_multiplier`` (a Python float,
  returned as a float64 0-d tensor).
* ``skipped``: OmniSafe never skips an update, so the count is always 0.
* ``SimmerPID(kp, ki, kd, polyak, budget_bound).act(b, J̃_c)`` = ``SimmerPIDAgent(cfgs, budget_bound)
  .act(b, J̃_c)`` with ``cfgs`` carrying kp, ki, kd, polyak.
* ``SauteBudget``: OmniSafe's Sauté lives in ``adapter/saute_adapter.py``, bound to its environment
  wrappers and ``OnPolicyAdapter``: unsupported here.
* ``p3o_cost_violation(J_c, d, γ_c)``: the right-hand side of ``Jc = ...`` in ``P3O._loss_pi_cost``
  (``algorithms/on_policy/penalty_function/p3o.py``), read out of the wheel and evaluated with a logger whose
  ``Metrics/EpCost`` is J_c and a config whose ``cost_limit`` is d. The rest of trust_region (CG, the Fisher
  product, line search, CPO's step, P3O's loss) are methods bound to OmniSafe's actor, logger and config:
  ``fixtures/trust_region`` pins them against the reference instead.
"""

from __future__ import annotations

import ast
import math
import types

import torch

from rlspec.contracts.lagrange import LAGRANGE_DEFAULTS, PID_DEFAULTS, SIMMER_DEFAULTS
from rlspec.thirdparty import Declared, Unsupported, unsupported
from rlspec.thirdparty.wheel import load_module, read_source

PACKAGE, VERSION = "omnisafe", "0.5.0"
LIBRARY = f"{PACKAGE} {VERSION}"
CONTRACTS = ("lagrange", "trust_region")

_lagrange = load_module(PACKAGE, VERSION, "omnisafe/common/lagrange.py")
_pid = load_module(PACKAGE, VERSION, "omnisafe/common/pid_lagrange.py")
_simmer = load_module(PACKAGE, VERSION, "omnisafe/common/simmer_agent.py",
                      stubs={"omnisafe.utils.config": {"Config": dict}})


class _Lagrange:
    """OmniSafe's ``Lagrange`` with the contract's ``update(jc, scale)``."""

    def __init__(self, cost_limit: float, init: float, lr: float, optimizer: str,
                 upper_bound: float | None = None):
        self._lr = lr
        self._impl = _lagrange.Lagrange(cost_limit=cost_limit, lagrangian_multiplier_init=init, lambda_lr=lr,
                                        lambda_optimizer=optimizer, lagrangian_upper_bound=upper_bound)
        self.skipped = torch.zeros((), dtype=torch.int64)

    @property
    def lagrangian_multiplier(self) -> torch.Tensor:
        return self._impl.lagrangian_multiplier.detach()

    def update(self, jc, scale=1.0) -> torch.Tensor:
        factor = float(scale)
        if not (math.isfinite(factor) and factor > 0):
            raise Unsupported(f"OmniSafe has no modulation scale: M = {factor!r} maps onto no learning rate "
                              "(only a finite M > 0 scales lambda_lr)")
        self._impl.lambda_optimizer.param_groups[0]["lr"] = self._lr * factor
        self._impl.update_lagrange_multiplier(jc)
        return self.lagrangian_multiplier.clone()


class DualAscent(_Lagrange):
    def __init__(self, cost_limit: float = 25.0, lr: float = 0.035, lambda_init: float = 0.0):
        super().__init__(cost_limit, lambda_init, lr, "SGD")


class OmniSafeLagrange(_Lagrange):
    def __init__(self, cost_limit: float = LAGRANGE_DEFAULTS["cost_limit"],
                 lagrangian_multiplier_init: float = LAGRANGE_DEFAULTS["lagrangian_multiplier_init"],
                 lambda_lr: float = LAGRANGE_DEFAULTS["lambda_lr"],
                 lagrangian_upper_bound: float | None = LAGRANGE_DEFAULTS["lagrangian_upper_bound"]):
        super().__init__(cost_limit, lagrangian_multiplier_init, lambda_lr, "Adam", lagrangian_upper_bound)


class PIDLagrangian:
    def __init__(self, **config):
        self._impl = _pid.PIDLagrangian(**dict(PID_DEFAULTS, **config))
        self.skipped = torch.zeros((), dtype=torch.int64)

    @property
    def lagrangian_multiplier(self) -> torch.Tensor:
        return torch.tensor(self._impl.lagrangian_multiplier, dtype=torch.float64)

    def update(self, jc) -> torch.Tensor:
        self._impl.pid_update(jc)
        return self.lagrangian_multiplier


class SimmerPID:
    def __init__(self, **config):
        config = dict(SIMMER_DEFAULTS, **config)
        cfgs = types.SimpleNamespace(**{k: config[k] for k in ("kp", "ki", "kd", "polyak")})
        self._impl = _simmer.SimmerPIDAgent(cfgs=cfgs, budget_bound=torch.as_tensor(config["budget_bound"]))

    def act(self, safety_budget: torch.Tensor, ep_cost) -> torch.Tensor:
        return self._impl.act(safety_budget, ep_cost)


SauteBudget = unsupported("SauteBudget", "OmniSafe's Sauté is SauteAdapter (adapter/saute_adapter.py), bound to "
                                         "its env wrappers and OnPolicyAdapter; no standalone budget to adapt")


def _p3o_violation_expression():
    """OmniSafe's own expression for P3O's c: the value of ``Jc = ...`` in ``P3O._loss_pi_cost``, compiled."""
    source, filename = read_source(PACKAGE, VERSION, "omnisafe/algorithms/on_policy/penalty_function/p3o.py")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["Jc"]:
            return compile(ast.Expression(node.value), filename, "eval")
    raise LookupError(f"{filename}: no assignment 'Jc = ...' (P3O._loss_pi_cost) to adapt")


_P3O_JC = _p3o_violation_expression()


def p3o_cost_violation(cost_return, cost_limit, cost_gamma):
    """OmniSafe's c with its logger's EpCost = J_c and cost_limit = d; OmniSafe does not read γ_c here."""
    def get_stats(key):
        if key != "Metrics/EpCost":
            raise Unsupported(f"P3O's c reads the logger's {key!r}, which the contract does not give")
        return (cost_return,)

    algo = types.SimpleNamespace(_logger=types.SimpleNamespace(get_stats=get_stats),
                                 _cfgs=types.SimpleNamespace(algo_cfgs=types.SimpleNamespace(cost_limit=cost_limit)))
    return eval(_P3O_JC, {}, {"self": algo})  # noqa: S307 - OmniSafe's expression from the pinned wheel


BOUND_METHODS = ("not adapted: OmniSafe's CG, Fisher product, line search, CPO step and P3O loss are methods bound to "
                 "its actor, logger and config (fixtures/trust_region pins them against the reference)")

DECLARED = {
    "LAG-7": Declared("bug", "a non-finite J_c is not skipped: Lagrange turns λ into NaN for good (the NaN "
                             "gradient enters Adam's moments; clamp_ keeps NaN); PIDLagrangian sets λ to 0 for "
                             "good (max(0.0, nan) is 0.0 while its EMA terms stay NaN): the constraint is "
                             "silently switched off; skip the update when not math.isfinite(Jc)"),
    "LAG-8": Declared("accepts", "no configuration is validated: negative cost_limit, λ_0 (clamped to 0 "
                                 "silently), gains, EMA alphas outside [0, 1], pid_d_delay 0 are taken as given"),
    "LAG-18": Declared("accepts", "J_c is not checked: a non-scalar J_c fails inside autograd with RuntimeError ('grad "
                                 "can be implicitly created only for scalar outputs'), not an error naming jc"),
    "LAG-15": Declared("bug", "hyper-parameters are used as given: a np.float64 lagrangian_multiplier_init makes λ "
                              "a float64 Parameter (torch.as_tensor(max(init, 0.0))), a float stays float32; take "
                              "float(init)"),
    **{f"TR-{i}": Declared("unsupported", BOUND_METHODS) for i in range(1, 19)},
    "TR-19": Declared("difference", "P3O's c is EpCost − cost_limit (p3o.py _loss_pi_cost: Jc = "
                                    "get_stats('Metrics/EpCost')[0] − cost_limit): the undiscounted episode cost, "
                                    "without the paper's (1 − γ_c) (omnisafe#118)"),
    "TR-20": Declared("accepts", "γ_c is not an argument of OmniSafe's term: γ_c = 1 or NaN cannot be refused, and a "
                                 "NaN EpCost passes into the ReLU"),
}
