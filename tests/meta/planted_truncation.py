"""Planted bugs for the collector layout of the returns family: truncation inside a batch (``lambda_return`` and
``vtrace`` with ``truncated`` / ``next_value``) and the concatenation clause (``gae``, ``lambda_return``,
``vtrace``). Each implementation validates its input with the contract's own validators, then makes exactly one
mistake: most are the reference fed rewritten inputs, a short loop where no rewrite expresses the bug.

Each entry names the clause that must catch it; ``spared`` clauses (the bad-input one included) must still pass.
"""

from __future__ import annotations

import types

import torch
from planted import Planted
from planted_returns import _bootstrap_from_next_row, _carry_across_truncation

from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.contracts.returns import validate_truncation
from rlspec.contracts.vtrace import validate_vtrace
from rlspec.fast.recursion import carry_step
from rlspec.reference import lambda_return as ref_lambda
from rlspec.reference import vtrace as ref_vtrace


# ------------------------------------------------------------------------------------------- lambda
def _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value):
    first = validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    return first, validate_truncation("lambda_return", truncated, next_value, reward, "reward")


def _lambda_next_row(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """A truncated step bootstraps from v_{t+1}: the reset observation, the next trajectory's first value."""
    _, trunc = _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value)
    nxt = None if trunc is None else value[1:]
    return ref_lambda.lambda_return(reward, cont, value, gamma, lam, is_first, truncated, nxt)


def _lambda_truncation_terminal(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """CleanRL's done = terminated or truncated: a truncated step bootstraps nothing."""
    _, trunc = _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value)
    nxt = None if trunc is None else torch.zeros_like(next_value)
    return ref_lambda.lambda_return(reward, cont, value, gamma, lam, is_first, truncated, nxt)


def _lambda_carried(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """At a truncated step R_t = r_t + γc_t·((1 − λ)·b_t + λ·R_{t+1}): the next episode's return leaks in."""
    first, trunc = _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value)
    if trunc is None:
        return ref_lambda.lambda_return(reward, cont, value, gamma, lam, is_first)
    r, c, v, b = (x.double() for x in (reward, cont, value, next_value))
    f = torch.zeros_like(v, dtype=torch.bool) if first is None else first
    R, out = v[-1], torch.empty_like(r)
    for t in reversed(range(r.shape[0])):
        following = torch.where(trunc[t], b[t], v[t + 1])
        discount = torch.where(f[t + 1] & ~trunc[t], torch.zeros_like(c[t]), gamma * c[t])
        R = out[t] = carry_step(r[t], discount, (1 - lam) * following + lam * R)
    return out.to(reward.dtype)


def _lambda_terminal_bootstraps(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """A step with c_t = 0 and truncated bootstraps γ·b_t: the continue is not read at a truncation."""
    _, trunc = _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value)
    c = cont if trunc is None else torch.where(trunc, torch.ones_like(cont), cont)
    return ref_lambda.lambda_return(reward, c, value, gamma, lam, is_first, truncated, next_value)


def _lambda_reset_bootstraps(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """next_value is read at every reset (is_first[t+1]), not only at a truncation."""
    first, trunc = _lambda_validated(reward, cont, value, gamma, lam, is_first, truncated, next_value)
    if trunc is not None and first is not None:
        truncated = trunc | first[1:]
    return ref_lambda.lambda_return(reward, cont, value, gamma, lam, is_first, truncated, next_value)


def _lambda_lone_next_value(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    """next_value given without truncated is dropped silently (the pair is validated only when both are given)."""
    if truncated is None or next_value is None:
        truncated = next_value = None
    return ref_lambda.lambda_return(reward, cont, value, gamma, lam, is_first, truncated, next_value)


# ------------------------------------------------------------------------------------------- vtrace
def _vtrace_validated(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                      truncated, next_value):
    pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam,
                                 pg_rho_bar)
    return pg_rho_bar, validate_truncation("vtrace", truncated, next_value, value, "value")


def _in_batch_next(value, bootstrap_value):
    return torch.cat([value[1:], bootstrap_value.unsqueeze(0)])  # [T, B]: the batch's next row


def _vtrace_next_trajectory(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                            pg_rho_bar=None, truncated=None, next_value=None):
    """TorchRL before pytorch/rl#4210: at an in-batch truncation the next trajectory's first value bootstraps."""
    _, trunc = _vtrace_validated(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                                 truncated, next_value)
    nxt = None if trunc is None else _in_batch_next(value, bootstrap_value)
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                             truncated, nxt)


def _vtrace_carried(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                    pg_rho_bar=None, truncated=None, next_value=None):
    """δ_t bootstraps b_t at a truncation, but the trace goes on into the next episode."""
    pg_bar, trunc = _vtrace_validated(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam,
                                      pg_rho_bar, truncated, next_value)
    if trunc is None:
        return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)
    lr, d, r, v, boot, b = (x.double() for x in (log_rho, discount, reward, value, bootstrap_value, next_value))
    ratio = torch.exp(lr)
    next_v = torch.where(trunc, b, _in_batch_next(v, boot))
    delta = ratio.clamp(max=rho_bar) * (r + d * next_v - v)
    trace = d * lam * ratio.clamp(max=c_bar)
    diff, acc = torch.zeros_like(v), v.new_zeros(v.shape[1:])
    for t in reversed(range(v.shape[0])):
        acc = diff[t] = carry_step(delta[t], trace[t], acc)
    vs = v + diff
    next_vs = torch.where(trunc, b, _in_batch_next(vs, boot))
    pg = ratio.clamp(max=pg_bar) * (carry_step(r, d, next_vs) - v)
    return vs.to(value.dtype), pg.to(value.dtype)


def _vtrace_pg_next_row(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                        pg_rho_bar=None, truncated=None, next_value=None):
    """vs right, but the pg advantage at a truncation bootstraps from the next row's vs."""
    pg_bar, trunc = _vtrace_validated(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam,
                                      pg_rho_bar, truncated, next_value)
    vs, pg = ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                               truncated, next_value)
    if trunc is None:
        return vs, pg
    ratio = torch.exp(log_rho.double()).clamp(max=pg_bar)
    next_vs = _in_batch_next(vs.double(), bootstrap_value.double())
    wrong = ratio * (carry_step(reward.double(), discount.double(), next_vs) - value.double())
    return vs, torch.where(trunc, wrong.to(pg.dtype), pg)


def _vtrace_terminal_bootstraps(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                                pg_rho_bar=None, truncated=None, next_value=None):
    """At a truncation the discount is the batch's γ (its largest), also where the step was terminal."""
    _, trunc = _vtrace_validated(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                                 truncated, next_value)
    d = discount if trunc is None else torch.where(trunc, discount.max(), discount)
    return ref_vtrace.vtrace(log_rho, d, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar, truncated,
                             next_value)


def _vtrace_nan_next_value(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                           pg_rho_bar=None, truncated=None, next_value=None):
    """NaN/Inf next values pass (nan_to_num'd before validation)."""
    nxt = None if next_value is None else torch.nan_to_num(next_value)
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                             truncated, nxt)


def _lam(fn):
    return types.SimpleNamespace(lambda_return=fn)


def _vt(fn):
    return types.SimpleNamespace(vtrace=fn)


# the clauses before the collector layout, but the spelling of hyper-parameters (the planted functions take
# plain numbers: no scalar_args)
LAMBDA_OLD = tuple(f"LAMBDA-{i}" for i in range(1, 15) if i != 12)
VTRACE_OLD = tuple(f"VTRACE-{i}" for i in range(1, 17) if i != 12)

PLANTED_TRUNCATION = (
    Planted("lambda_return: a truncation bootstraps from the next trajectory's first value", "lambda_return",
            _lam(_lambda_next_row), "LAMBDA-19", "run alone", LAMBDA_OLD + ("LAMBDA-17", "LAMBDA-18", "LAMBDA-20")),
    Planted("lambda_return: truncation treated as a terminal (done = terminated or truncated)", "lambda_return",
            _lam(_lambda_truncation_terminal), "LAMBDA-15", "truncated steps",
            LAMBDA_OLD + ("LAMBDA-16", "LAMBDA-17", "LAMBDA-18", "LAMBDA-20")),
    Planted("lambda_return: the return carried across a truncation", "lambda_return", _lam(_lambda_carried),
            "LAMBDA-16", "rows after", LAMBDA_OLD + ("LAMBDA-17", "LAMBDA-18", "LAMBDA-20")),
    Planted("lambda_return: a terminal truncated step bootstraps", "lambda_return",
            _lam(_lambda_terminal_bootstraps), "LAMBDA-17", "truncated cleared",
            LAMBDA_OLD + ("LAMBDA-16", "LAMBDA-20")),
    Planted("lambda_return: next_value read at every reset", "lambda_return", _lam(_lambda_reset_bootstraps),
            "LAMBDA-18", "next_value changed", LAMBDA_OLD + ("LAMBDA-17", "LAMBDA-20")),
    Planted("lambda_return: a lone next_value dropped silently", "lambda_return", _lam(_lambda_lone_next_value),
            "LAMBDA-20", "accepted silently", LAMBDA_OLD + ("LAMBDA-15", "LAMBDA-16", "LAMBDA-17", "LAMBDA-19")),
    Planted("vtrace: the next trajectory's value bootstraps a truncation (TorchRL before #4210)", "vtrace",
            _vt(_vtrace_next_trajectory), "VTRACE-21", "run alone",
            VTRACE_OLD + ("VTRACE-19", "VTRACE-20", "VTRACE-22")),
    Planted("vtrace: the trace carried across a truncation", "vtrace", _vt(_vtrace_carried), "VTRACE-18",
            "rows after", VTRACE_OLD + ("VTRACE-19", "VTRACE-20", "VTRACE-22")),
    Planted("vtrace: pg advantage bootstraps the next row's vs at a truncation", "vtrace", _vt(_vtrace_pg_next_row),
            "VTRACE-17", "pg_advantage with truncated steps", VTRACE_OLD + ("VTRACE-19", "VTRACE-20", "VTRACE-22")),
    Planted("vtrace: a terminal truncated step bootstraps", "vtrace", _vt(_vtrace_terminal_bootstraps), "VTRACE-19",
            "truncated cleared", VTRACE_OLD + ("VTRACE-22",)),
    Planted("vtrace: NaN next values accepted", "vtrace", _vt(_vtrace_nan_next_value), "VTRACE-22",
            "accepted silently", VTRACE_OLD + ("VTRACE-17", "VTRACE-18", "VTRACE-19", "VTRACE-20", "VTRACE-21")),
    Planted("gae: a truncation bootstraps from the next trajectory's first value", "gae",
            types.SimpleNamespace(gae=_bootstrap_from_next_row), "GAE-14", "run alone", ("GAE-2", "GAE-4", "GAE-7")),
    Planted("gae: the advantage carried across a truncation", "gae",
            types.SimpleNamespace(gae=_carry_across_truncation), "GAE-14", "run alone", ("GAE-2", "GAE-4", "GAE-7")),
)
