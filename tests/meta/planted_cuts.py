"""Planted bugs for the returns family's cuts: the fast twins with their recursion step ``carry_step`` as
it was, base + coef·y multiplied through a cut (coef = 0) instead of selecting base. Equal to the right
step on every finite carry (the maths isolation clauses pass); after a cut whose later episode overflowed to
inf, 0·inf = NaN leaks back (the robustness clauses fail).
lambda_return's CPU path runs its recursion in C++ (fast/recursion.py ``scan``, the same select): the bug is
planted in the torch loop, so the C++ scan is switched off while it runs."""

from __future__ import annotations

import types
from unittest import mock

import torch
from planted import Planted

from rlspec.fast import gae as fast_gae
from rlspec.fast import lambda_return as fast_lambda
from rlspec.fast import recursion
from rlspec.fast import risk_target as fast_risk
from rlspec.fast import vtrace as fast_vtrace


def _multiplied(module, name: str):
    """``module.name`` run with carry_step = addcmul (no select at a cut), in the torch loop."""

    def run(*args, **kwargs):
        with mock.patch.object(module, "carry_step", torch.addcmul), \
                mock.patch.object(recursion, "scan_runs_here", lambda base: False):
            return getattr(module, name)(*args, **kwargs)

    return types.SimpleNamespace(**{name: run})


PLANTED_CUTS = (
    Planted("gae: cut by multiplication (0·inf from an overflowing episode)", "gae", _multiplied(fast_gae, "gae"),
            "GAE-13", "overflowing to inf", ("GAE-1", "GAE-4", "GAE-5", "GAE-6")),
    Planted("lambda_return: continue cut by multiplication", "lambda_return",
            _multiplied(fast_lambda, "lambda_return"), "LAMBDA-13", "overflowing to inf", ("LAMBDA-1", "LAMBDA-3", "LAMBDA-7")),
    Planted("lambda_return: is_first cut by multiplication", "lambda_return",
            _multiplied(fast_lambda, "lambda_return"), "LAMBDA-14", "overflowing to inf", ("LAMBDA-1", "LAMBDA-6", "LAMBDA-7")),
    Planted("vtrace: zero discount cut by multiplication", "vtrace", _multiplied(fast_vtrace, "vtrace"),
            "VTRACE-16", "overflowing to inf", ("VTRACE-1", "VTRACE-2", "VTRACE-6")),
    Planted("risk_target: done cut by multiplication", "risk_target", _multiplied(fast_risk, "risk_target"),
            "RISK-14", "overflowing to inf", ("RISK-1", "RISK-2", "RISK-3", "RISK-5")),
)
