"""Golden fixture from sheeprl 0.8.4's DreamerV3 λ-returns (the only module that imports its
``compute_lambda_values``).

sheeprl indexes rewards on arrival (row k: the step arriving at s_{k+1}) and takes γ folded into the
continues; ours is transition-aligned (spec/lambda_return.py, "Conversion to sheeprl 0.8.4"). The
generator draws *our* arguments from an explicit ``torch.Generator``, converts them with the spec's
``to_sheeprl`` and runs sheeprl on them in float64: the function is dtype-agnostic (DreamerV3 calls it in
float32), and float64 pins the convention at a tolerance near rounding. The fixture stores what sheeprl was given
(rewards, values, continues) plus V(s_0), which sheeprl never reads; the golden test converts back with
``from_sheeprl``. Values are rounded to dyadic steps so the JSON stays a few KB.
"""

from __future__ import annotations

import torch
from sheeprl.algos.dreamer_v3.utils import compute_lambda_values

from rlspec.contracts.lambda_return import to_sheeprl
from rlspec.golden_bridge.manifest import Fixture
from rlspec.spec.lambda_return import tolerance

PACKAGE = "sheeprl"
T, B = 15, 6  # DreamerV3's imagination horizon, 6 columns
GAMMA, LAM = 0.997, 0.95  # ≈ 1 − 1/333 and DreamerV3's λ


def _round(t: torch.Tensor, step: float) -> torch.Tensor:
    return torch.round(t / step) * step


def lambda_values(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    reward = _round(torch.randn(T, B, generator=g, dtype=torch.float64), 1 / 64)  # r [T, B]
    value = _round(10 * torch.randn(T + 1, B, generator=g, dtype=torch.float64), 1 / 16)  # v [T+1, B]
    cont = (torch.rand(T, B, generator=g) > 0.15).double()  # c [T, B]: 0/1, as DreamerV3's continue mode
    cont[0, 1] = 0.0  # a terminal on the first transition: R_0 = r_0
    cont[T - 1, 2] = 0.0  # on the last one: v_T is not bootstrapped
    cont[:, 3] = 1.0  # no terminal: the λ-return reaches the bootstrap v_T
    cont[:, 5] = _round(torch.rand(T, generator=g, dtype=torch.float64), 1 / 256)  # a learned probability
    args = to_sheeprl(reward, cont, value, GAMMA)  # rewards = r, values = v[1:], continues = γ·c
    expected = compute_lambda_values(**args, lmbda=LAM)  # [T, B]
    return Fixture(
        path="lambda_return/sheeprl_lambda_values.json", contract="lambda_return", package=PACKAGE,
        qualname="sheeprl.algos.dreamer_v3.utils.compute_lambda_values", seed=seed,
        atol=2 * tolerance(reward, value), rtol=0.0,
        why="both sides float64, each within LAMBDA-1's 8·(T+1)·eps·M of the exact recursion "
            "(M = 1 + max|v| + T·max|r|): twice that",
        convention="sheeprl indexes by arrival and folds γ into continues; stored in its layout "
                   "(rewards, values, continues [15, 6] float64, lmbda = lam) plus first_value = V(s_0) (unread "
                   "by sheeprl); ours = from_sheeprl(rewards, values, continues, gamma, first_value): "
                   "r = rewards, v = cat(first_value, values), c = continues / gamma; generated with "
                   "to_sheeprl (spec/lambda_return.py); column 5 holds continue probabilities",
        inputs=dict(**args, first_value=value[0], gamma=torch.tensor(GAMMA, dtype=torch.float64),
                    lam=torch.tensor(LAM, dtype=torch.float64)),
        expected=dict(lambda_values=expected))


GENERATORS = [lambda_values]
