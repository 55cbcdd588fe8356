"""Golden fixtures from OmniSafe 0.5.0's ``Lagrange`` and ``PIDLagrangian`` (contract ``lagrange``).

The two files ``omnisafe/common/lagrange.py`` and ``pid_lagrange.py`` import only torch / the stdlib, but
importing the ``omnisafe`` package pulls in its environment registry, so they are loaded *as files* from
the wheel that ``nox -s fixtures`` downloads (``pip download omnisafe==0.5.0 --no-deps``) into the
directory named by ``OMNISAFE_WHEEL_DIR``. Nothing here installs or imports the omnisafe package.
"""

from __future__ import annotations

import os
import types
import zipfile
from pathlib import Path

import torch

from rlspec.golden_bridge.manifest import Fixture

PACKAGE, VERSION = "omnisafe", "0.5.0"
EPS32 = torch.finfo(torch.float32).eps


def omnisafe_source(member: str) -> tuple[str, str]:
    """(source text, a filename for tracebacks) of ``member`` in the pinned wheel."""
    wheel_dir = Path(os.environ.get("OMNISAFE_WHEEL_DIR", ""))
    wheels = sorted(wheel_dir.glob(f"{PACKAGE}-{VERSION}-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no {PACKAGE}-{VERSION} wheel in OMNISAFE_WHEEL_DIR={str(wheel_dir)!r}; "
                                f"run: pip download {PACKAGE}=={VERSION} --no-deps -d DIR")
    return zipfile.ZipFile(wheels[0]).read(member).decode(), f"{wheels[0].name}/{member}"


def load_omnisafe_file(member: str) -> types.ModuleType:
    """Execute ``member`` (e.g. "omnisafe/common/lagrange.py") from the pinned wheel as a bare module."""
    source, filename = omnisafe_source(member)
    module = types.ModuleType(f"_omnisafe_file_{Path(member).stem}")
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - pinned file
    return module


def jc_series(seed: int) -> torch.Tensor:
    """A fixed J_c [40] series: above the limit, at it, far below (λ driven to 0), back up, noise."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.round(torch.randn(12, generator=g, dtype=torch.float64) * 80) / 8  # [12], 1/8 steps
    return torch.cat([torch.tensor([40.0, 40.0, 33.5, 25.0, 25.0, 12.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                    0.0, 0.0, 30.0, 60.0, 90.0, 26.0, 24.0, 25.125, 100.0, 3.0, 0.5, 50.0],
                                   dtype=torch.float64),
                      torch.tensor([25.0, 27.5, 22.5, 25.0], dtype=torch.float64),
                      (25.0 + noise).clamp(min=0.0)])  # [40]


def lagrange_adam(seed: int = 0) -> Fixture:
    lagrange = load_omnisafe_file("omnisafe/common/lagrange.py")
    jc = jc_series(seed)
    configs = ((25.0, 0.001, 0.035), (0.0, 0.0, 0.5), (5.0, 2.0, 0.01))  # (d, λ0, lr): defaults and two more
    rows = []
    for d, lam0, lr in configs:
        lag = lagrange.Lagrange(cost_limit=d, lagrangian_multiplier_init=lam0, lambda_lr=lr, lambda_optimizer="Adam")
        seq = []
        for x in jc.tolist():
            lag.update_lagrange_multiplier(x)
            seq.append(lag.lagrangian_multiplier.detach().clone())
        rows.append(torch.stack(seq))
    return Fixture(
        path="lagrange/omnisafe_lagrange.json", contract="lagrange", package=PACKAGE,
        qualname="omnisafe.common.lagrange.Lagrange.update_lagrange_multiplier", seed=seed,
        atol=40 * 64 * EPS32, rtol=64 * EPS32,
        why="OmniSafe keeps λ and Adam's state in float32: each of the 40 steps rounds λ (|λ| < 4) and a step "
            "of size ~lr at a few ulp; 64 ulp per step, accumulated",
        convention="Lagrange(cost_limit=d, lagrangian_multiplier_init=λ0, lambda_lr=lr, 'Adam') for config[k] = "
                   "(d, λ0, lr); update_lagrange_multiplier(jc[t]) in order; expected lam[k, t] = λ after step t; "
                   "ours: OmniSafeLagrange(d, λ0, lr).update(jc[t])",
        inputs=dict(jc=jc, config=torch.tensor(configs, dtype=torch.float64)),
        expected=dict(lam=torch.stack(rows).float()), version=VERSION)


def pid_lagrangian(seed: int = 0) -> Fixture:
    pid = load_omnisafe_file("omnisafe/common/pid_lagrange.py")
    jc = jc_series(seed)
    # (kp, ki, kd, d_delay, alpha_p, alpha_d, sum_norm, diff_norm, penalty_max, λ0, d)
    configs = ((0.1, 0.01, 0.01, 10, 0.95, 0.95, 1, 0, 100.0, 0.001, 25.0),  # OmniSafe CPPOPID defaults
               (1.0, 0.1, 0.5, 3, 0.5, 0.8, 0, 0, 2.0, 0.0, 20.0),  # penalty_max active, short delay
               (0.5, 0.05, 0.2, 1, 0.0, 0.5, 0, 1, 100.0, 0.3, 10.0))  # diff_norm: I and λ clipped to [0, 1]
    rows = []
    for kp, ki, kd, delay, ap, ad, sn, dn, pmax, lam0, d in configs:
        ctl = pid.PIDLagrangian(pid_kp=kp, pid_ki=ki, pid_kd=kd, pid_d_delay=delay, pid_delta_p_ema_alpha=ap,
                                pid_delta_d_ema_alpha=ad, sum_norm=bool(sn), diff_norm=bool(dn), penalty_max=pmax,
                                lagrangian_multiplier_init=lam0, cost_limit=d)
        seq = []
        for x in jc.tolist():
            ctl.pid_update(x)
            seq.append(ctl.lagrangian_multiplier)
        rows.append(torch.tensor(seq, dtype=torch.float64))
    return Fixture(
        path="lagrange/omnisafe_pid_lagrangian.json", contract="lagrange", package=PACKAGE,
        qualname="omnisafe.common.pid_lagrange.PIDLagrangian.pid_update", seed=seed,
        atol=1e-9, rtol=1e-12,
        why="OmniSafe's PID runs in Python floats (float64) like the reference; a float32 twin is held to its own "
            "eps by the golden test, this tolerance is the float64 one (sums of 40 terms of size <= 100)",
        convention="PIDLagrangian(**config[k]) (columns: kp, ki, kd, d_delay, alpha_p, alpha_d, sum_norm, "
                   "diff_norm, penalty_max, λ0, d); pid_update(jc[t]) in order; expected lam[k, t] = "
                   "lagrangian_multiplier after update t; ours: PIDLagrangian(...).update(jc[t])",
        inputs=dict(jc=jc, config=torch.tensor(configs, dtype=torch.float64)),
        expected=dict(lam=torch.stack(rows)), version=VERSION)


GENERATORS = [lagrange_adam, pid_lagrangian]
