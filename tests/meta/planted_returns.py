"""Planted bugs for the returns family (``lambda_return``, ``gae``): after the contract's own input
validation, the reference fed the inputs a buggy implementation effectively uses, or a short loop where
no input rewrite expresses the bug.

Each entry names the clause that must catch it; ``spared`` clauses (the bad-input ones included) must
still pass.
"""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.gae import validate_gae
from rlspec.contracts.lambda_return import validate_lambda_return
from rlspec.reference import gae as ref_gae
from rlspec.reference import lambda_return as ref_lambda


# ------------------------------------------------------------------------------------------- lambda
def _no_continue(reward, cont, value, gamma, lam, is_first=None):  # discounts γ instead of γ·c_t
    validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    return ref_lambda.lambda_return(reward, torch.ones_like(cont), value, gamma, lam, is_first)


def _bootstrap_from_v_t(reward, cont, value, gamma, lam, is_first=None):  # v_t where v_{t+1} belongs
    validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    shifted = torch.cat([value[:1], value[:-1]])  # shifted[t+1] = v_t
    return ref_lambda.lambda_return(reward, cont, shifted, gamma, lam, is_first)


def _is_first_unaware(reward, cont, value, gamma, lam, is_first=None):  # the mask is validated, unused
    validate_lambda_return("lambda_return", reward, cont, value, gamma, lam, is_first)
    return ref_lambda.lambda_return(reward, cont, value, gamma, lam)


# ---------------------------------------------------------------------------------------------- gae
def _cleanrl(reward, value, terminated, truncated, next_value, gamma, lam):
    """CleanRL: done = terminated or truncated, and a done step bootstraps nothing."""
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    done = term | trunc
    return ref_gae.gae(reward, value, done, torch.zeros_like(done), next_value, gamma, lam)


def _bootstrap_from_next_row(reward, value, terminated, truncated, next_value, gamma, lam):
    """On a truncated step (before the last row) the next row's value, i.e. the next episode's V(s_0)."""
    _, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    inner = trunc.clone()
    inner[-1:] = False
    next_row = torch.cat([value[1:], value[-1:]])  # [T, B]: v_{t+1}
    return ref_gae.gae(reward, value, terminated, truncated, torch.where(inner, next_row, next_value),
                       gamma, lam)


def _carry_across_truncation(reward, value, terminated, truncated, next_value, gamma, lam):
    """PPO review read literally: next_non_terminal = 1 on truncation for δ *and* the recursion."""
    term, trunc = validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    T = value.shape[0]
    v, r, boot = value.double(), reward.double(), next_value.double()
    adv, next_adv = torch.zeros_like(v), v.new_zeros(v.shape[1:])
    for t in reversed(range(T)):
        last = t == T - 1
        next_value = torch.where(trunc[t] | last, boot[t], v[min(t + 1, T - 1)]) * ~term[t]
        carry = (~term[t]).double() * (0.0 if last else 1.0)  # carries A_{t+1} across a truncation
        next_adv = adv[t] = r[t] + gamma * next_value - v[t] + gamma * lam * carry * next_adv
    return adv.to(value.dtype), (adv + v).to(value.dtype)


def _both_as_truncation(reward, value, terminated, truncated, next_value, gamma, lam):
    """A step flagged terminated and truncated (gymnasium's TimeLimit at a terminal) bootstraps V(s'_t)."""
    validate_gae("gae", reward, value, terminated, truncated, next_value, gamma, lam)
    terminated = torch.as_tensor(terminated).bool()
    return ref_gae.gae(reward, value, terminated & ~torch.as_tensor(truncated).bool(), truncated, next_value,
                       gamma, lam)


PLANTED_RETURNS = (
    Planted("discount not multiplied by continue", "lambda_return",
            types.SimpleNamespace(lambda_return=_no_continue), "LAMBDA-3", "then rows after",
            ("LAMBDA-2", "LAMBDA-6", "LAMBDA-7", "LAMBDA-8", "LAMBDA-9", "LAMBDA-10", "LAMBDA-11")),
    Planted("off-by-one bootstrap v_t", "lambda_return",
            types.SimpleNamespace(lambda_return=_bootstrap_from_v_t), "LAMBDA-5", "r_t + γ·c_t·v_{t+1}",
            ("LAMBDA-2", "LAMBDA-3", "LAMBDA-7", "LAMBDA-8", "LAMBDA-9", "LAMBDA-10", "LAMBDA-11")),
    Planted("is_first ignored", "lambda_return", types.SimpleNamespace(lambda_return=_is_first_unaware),
            "LAMBDA-6", "is_first[",
            ("LAMBDA-3", "LAMBDA-4", "LAMBDA-5", "LAMBDA-8", "LAMBDA-9", "LAMBDA-10", "LAMBDA-11")),
    Planted("CleanRL done = terminated or truncated", "gae", types.SimpleNamespace(gae=_cleanrl),
            "GAE-3", "γ·Δ·(γλ)^(t−s)",
            ("GAE-2", "GAE-4", "GAE-5", "GAE-6", "GAE-7", "GAE-8", "GAE-9", "GAE-10", "GAE-11")),
    Planted("bootstrap from the next row on truncation", "gae",
            types.SimpleNamespace(gae=_bootstrap_from_next_row), "GAE-5", "one episode",
            ("GAE-2", "GAE-4", "GAE-6", "GAE-7", "GAE-8", "GAE-9", "GAE-10", "GAE-11")),
    Planted("terminated and truncated on one step bootstraps like a truncation", "gae",
            types.SimpleNamespace(gae=_both_as_truncation), "GAE-8", "both set",
            ("GAE-2", "GAE-5", "GAE-6", "GAE-7", "GAE-9", "GAE-10", "GAE-11")),
    Planted("advantage carried across a truncation", "gae",
            types.SimpleNamespace(gae=_carry_across_truncation), "GAE-5", "one episode",
            ("GAE-2", "GAE-4", "GAE-6", "GAE-7", "GAE-8", "GAE-9", "GAE-10", "GAE-11")),
)
