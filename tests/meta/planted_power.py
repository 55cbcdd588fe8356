"""Planted bugs for the classes of gaps automated mutants of reference/ slipped through (issue 8 §4): each is
one surviving mutant of its class, kept so that the clause added to kill it stays."""

from __future__ import annotations

import functools
import types

import torch

from planted import Planted

from rlspec.contracts.twohot import odd_extension
from rlspec.reference import twohot as ref_twohot
from rlspec.reference import vtrace as ref_vtrace


def _twohot(**overrides) -> types.SimpleNamespace:
    base = {n: getattr(ref_twohot, n) for n in ("symlog", "symexp", "twohot_encode", "log_prob", "mean")}
    return types.SimpleNamespace(**{**base, **overrides})


# --- documented defaults -----------------------------------------------------------------------------
def _vtrace_default_rho_bar(log_rho, discount, reward, value, bootstrap_value, rho_bar=2.0, c_bar=1.0, lam=1.0,
                            pg_rho_bar=None):
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)


def _twohot_default_high(fn):
    """``fn`` with the documented high=20.0 default changed to 10.0."""
    @functools.wraps(fn)
    def wrapped(*args, high=10.0, **kwargs):
        return fn(*args, high=high, **kwargs)
    return wrapped


# --- lists of bad calls ------------------------------------------------------------------------------
def _symlog_unchecked(x):  # no dtype check: an int tensor comes back as ints, silently
    return odd_extension(torch.log1p, x.double()).to(x.dtype)


PLANTED_POWER = (
    Planted("vtrace default rho_bar 2.0", "vtrace", types.SimpleNamespace(vtrace=_vtrace_default_rho_bar),
            "VTRACE-14", "omitted vs passed explicitly", ("VTRACE-1", "VTRACE-2", "VTRACE-4")),
    Planted("twohot default high 10.0", "twohot",
            _twohot(**{n: _twohot_default_high(getattr(ref_twohot, n)) for n in ("twohot_encode", "log_prob", "mean")}),
            "TWOHOT-26", "omitted vs passed explicitly", ("TWOHOT-11", "TWOHOT-12", "TWOHOT-14")),
    Planted("symlog accepts int tensors", "twohot", _twohot(symlog=_symlog_unchecked), "TWOHOT-25",
            "symlog with torch.int64 x: accepted silently", ("TWOHOT-1", "TWOHOT-4")),
)
