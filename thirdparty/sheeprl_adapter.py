"""sheeprl 0.8.4's DreamerV3 pieces behind contracts ``twohot``, ``lambda_return`` and ``return_ema``.

twohot (spec/twohot.py)
    symlog, symexp = ``sheeprl.utils.utils.symlog`` / ``symexp``. log_prob and mean build
    ``TwoHotEncodingDistribution(logits, dims=1, low=low, high=high)`` (DreamerV3's reward and critic
    heads) and call ``.log_prob(x[..., None])`` (sheeprl's targets carry a trailing event dim of 1) and
    ``.mean[..., 0]``. sheeprl takes the number of bins from ``logits.shape[-1]``: ``num_bins`` has nothing
    to map to and is not used. The two-hot encoding exists only inside ``log_prob``: ``twohot_encode`` is
    unsupported (TWOHOT-12/13 check the encoding through log_prob).
lambda_return (``sheeprl.algos.dreamer_v3.utils.compute_lambda_values``; spec/lambda_return.py)
    sheeprl indexes by arrival and folds γ into the continues (spec/lambda_return.py "Conversion to
    sheeprl 0.8.4"): rewards = r, values = v[1:], continues = γ·c·(1 − is_first[1:]) (an episode start
    cuts like a terminal; sheeprl has no is_first). sheeprl has no truncation input either: a truncation that
    is not terminal is folded, rewards_t = r_t + γ·c_t·next_value_t with continues_t = 0.
return_ema (``sheeprl.algos.dreamer_v3.utils.Moments``; spec/return_ema.py)
    ReturnEMA(decay, max_range, percentile_low, percentile_high) = Moments(decay, max_=max_range, ...):
    the contract's default max_range 1.0 is sheeprl's DreamerV3 config (``moments.max: 1.0``), not
    Moments' own default 1e8. ``update(x)`` = ``Moments.forward(x, fabric)`` with a single-process fabric
    whose ``all_gather`` is the identity.
"""

from __future__ import annotations

import torch
from sheeprl.algos.dreamer_v3.utils import Moments, compute_lambda_values
from sheeprl.utils.distribution import TwoHotEncodingDistribution
from sheeprl.utils.utils import symexp, symlog

from rlspec.contracts.return_ema import DEFAULTS as REMA_DEFAULTS
from rlspec.contracts.twohot import DEFAULT_BINS, DEFAULT_HIGH, DEFAULT_LOW
from rlspec.thirdparty import Declared, LITERAL_CUT, unsupported

LIBRARY = "sheeprl 0.8.4"
CONTRACTS = ("twohot", "lambda_return", "return_ema")

__all__ = ["symlog", "symexp", "twohot_encode", "log_prob", "mean", "lambda_return", "ReturnEMA"]

twohot_encode = unsupported("twohot_encode", "sheeprl 0.8.4 has no public two-hot encoder; the encoding is "
                                             "internal to TwoHotEncodingDistribution.log_prob")


def log_prob(logits, x, num_bins=DEFAULT_BINS, low=DEFAULT_LOW, high=DEFAULT_HIGH):
    return TwoHotEncodingDistribution(logits, dims=1, low=low, high=high).log_prob(x.unsqueeze(-1))


def mean(logits, num_bins=DEFAULT_BINS, low=DEFAULT_LOW, high=DEFAULT_HIGH):
    return TwoHotEncodingDistribution(logits, dims=1, low=low, high=high).mean.squeeze(-1)


def lambda_return(reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None):
    continues = gamma * cont
    if is_first is not None:
        continues = continues * (1 - is_first[1:].to(cont.dtype))
    if truncated is not None:  # no truncation input: folded, r_t + γc_t·b_t then a zero continue
        time_limit = (truncated != 0) & (cont != 0)
        reward = torch.where(time_limit, reward + gamma * cont * next_value, reward)
        continues = torch.where(truncated != 0, torch.zeros_like(continues), continues)
    return compute_lambda_values(rewards=reward, values=value[1:], continues=continues, lmbda=lam)


class _SingleProcess:
    """The one method Moments needs of a lightning Fabric, for one process."""

    @staticmethod
    def all_gather(x: torch.Tensor) -> torch.Tensor:
        return x


class ReturnEMA(Moments):
    def __init__(self, decay=REMA_DEFAULTS["decay"], max_range=REMA_DEFAULTS["max_range"],
                 percentile_low=REMA_DEFAULTS["percentile_low"], percentile_high=REMA_DEFAULTS["percentile_high"]):
        super().__init__(decay=decay, max_=max_range, percentile_low=percentile_low, percentile_high=percentile_high)

    def update(self, x: torch.Tensor):
        return self(x, _SingleProcess())


FLOAT32_BINS = ("TwoHotEncodingDistribution builds its bins with torch.linspace(low, high, n) in the default "
                "dtype: float64 logits get float32 bins; pass dtype=logits.dtype")
NO_CHECKS = "no input checks"
DECLARED = {
    "TWOHOT-23": Declared("accepts", "TwoHotEncodingDistribution validates no support: low and high are "
                                      "used as given (infinite or inverted) and the number of bins is taken from "
                                      "logits.shape[-1]"),
    "LAMBDA-13": Declared("difference", f"compute_lambda_values {LITERAL_CUT}"),
    "LAMBDA-14": Declared("difference", f"compute_lambda_values {LITERAL_CUT}"),
    "LAMBDA-20": Declared("accepts", "compute_lambda_values validates nothing and has no truncation input; the "
                                     "adapter's fold passes a lone or NaN next_value as given"),
    "TWOHOT-4": Declared("bug", "symlog is sign(x)·log(1 + |x|): for |x| below eps the 1 + |x| rounds to 1 and "
                                "symlog returns 0 (relative error 1); use torch.log1p"),
    "TWOHOT-25": Declared("accepts", "symlog/symexp check no dtype: an integer tensor is silently promoted to a float "
                                 "result"),
    "TWOHOT-12": Declared("bug", FLOAT32_BINS + " (log_prob off by ~1e-7 relative in float64)"),
    "TWOHOT-13": Declared("bug", FLOAT32_BINS + " (the two-hot of a float64 target is built on float32 bins)"),
    "TWOHOT-14": Declared("bug", FLOAT32_BINS + " (mean off by ~1e-10 relative in float64)"),
    "TWOHOT-15": Declared("bug", FLOAT32_BINS + " (uniform logits give a mean of ~3e-10, not 0, in float64)"),
    "TWOHOT-17": Declared("difference", "sheeprl takes the number of bins from logits.shape[-1]: there is no "
                                        "num_bins to disagree with"),
    "TWOHOT-18": Declared("accepts", "log_prob broadcasts a target whose shape is not logits.shape[:-1] + (1,) "
                                     "against the bins instead of rejecting it"),
    "TWOHOT-19": Declared("accepts", "integer logits fail inside softmax (NotImplementedError: "
                                     "softmax_lastdim_kernel_impl) without naming the argument"),
    "TWOHOT-20": Declared("accepts", "a NaN target is encoded one-hot on the lowest bin (bins <= NaN is all False, "
                                     "so below = above = 0): log_prob returns a finite, very negative value; "
                                     "reject NaN targets"),
    "TWOHOT-21": Declared("bug", "a −inf logit (a masked bin) makes log_prob NaN: target · log_pred multiplies "
                                 "the bin's zero two-hot weight by −inf; sum only over bins with a non-zero weight"),
    "TWOHOT-22": Declared("bug", "d symlog/dx and d symexp/dx at x = 0 are 0, not 1: autograd differentiates "
                                 "sign(x)·f(|x|) through torch.sign (derivative 0); e.g. symlog = torch.where(x < 0, "
                                 "-log1p(-x), log1p(x)) has slope 1 there"),
    "LAMBDA-8": Declared("bug", "T = 0 raises ValueError: compute_lambda_values calls torch.cat on an empty list; "
                                "return an empty tensor for an empty horizon"),
    "LAMBDA-9": Declared("accepts", f"{NO_CHECKS}: a shape mismatch fails in torch broadcasting without naming "
                                    "the argument; a dtype mismatch is promoted silently"),
    "LAMBDA-10": Declared("accepts", f"{NO_CHECKS}: γ and lmbda outside [0, 1] are used as given"),
    "LAMBDA-11": Declared("accepts", f"{NO_CHECKS}: NaN/Inf values and continues outside [0, 1] propagate"),
    "REMA-12": Declared("bug", "Moments.forward returns its own low/high buffers (detach() shares storage): a caller "
                                "writing into them rewrites the normalizer's state; return copies"),
    "REMA-6": Declared("accepts", "Moments.forward checks nothing: a NaN in the batch makes torch.quantile NaN and "
                                  "poisons low/high for good"),
    "REMA-9": Declared("bug", "a 0-d float64 tensor decay turns Moments' float32 low/high buffers into float64 "
                               "(self.low = decay * self.low + ...); take float(decay) at construction"),
    "REMA-8": Declared("accepts", "Moments checks no configuration (decay = 1 freezes the statistics at 0; "
                                  "percentiles outside [0, 1] fail only at the first update)"),
}
