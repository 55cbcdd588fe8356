"""Contract ``numerics`` (spec/numerics/__init__.py): Properties of bad arguments, hyper-parameters, defaults,
thresholds and detached copies (NUM-21, 23..27)."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import (
    KL_MULTIPLIER,
    LOG_RATIO_CLAMP,
    OBS_CLIP,
    OBS_EPSILON,
    RATIO_MAX,
    RATIO_MIN,
    RMS_EPSILON,
    STD_EPS,
)
from rlspec.spec.core import (
    expect_rejection,
    fail,
)
from rlspec.spec.numerics._common import dtypes, standardize_cases, streams
from rlspec.spec.power import same_with_defaults
from rlspec.spec.scalars import check_scalar_types


# --------------------------------------------------------------------------------------------------
# Properties: bad arguments
# --------------------------------------------------------------------------------------------------
def _bad_calls() -> list[tuple[str, list[str], list[str]]]:
    """(call as source, names the error must mention, values it must mention)."""
    return [
        ("impl.safe_standardize(torch.ones(3), eps=0.0)", ["eps"], ["0.0"]),
        ("impl.safe_standardize(torch.ones(3, dtype=torch.int64))", ["x"], ["int64"]),
        ("impl.safe_zero_center(torch.ones(3, dtype=torch.int64))", ["x"], ["int64"]),
        ("impl.RunningMeanStd(shape=(3,), epsilon=-1e-4)", ["epsilon"], ["-0.0001"]),
        ("impl.RunningMeanStd(shape=(0,))", ["shape"], ["(0,)"]),
        ("impl.ObsNormalizer(shape=(3,), clip=0.0)", ["clip"], ["0.0"]),
        ("impl.ObsNormalizer(shape=(3,), epsilon=0.0)", ["epsilon"], ["0.0"]),
        ("impl.ObsNormalizer(shape=(3,)).normalize(torch.zeros(2, 4))", ["obs"], ["(2, 4)"]),
        ("impl.ObsNormalizer(shape=(3,)).load_state_dict({'mean': torch.zeros(3)})", ["state"], ["var"]),
        ("impl.ratio_guard(torch.zeros(3), torch.zeros(4))", ["old_log_prob"], ["(4,)"]),
        ("impl.LossGuard()(torch.zeros(2), 'policy')", ["loss"], ["(2,)"]),
        ("impl.masked_component_weights(torch.zeros(4, 3), torch.zeros(2))", ["logits"], ["(2,)"]),
        ("impl.kl_early_stop(torch.zeros(3), -0.01)", ["target_kl"], ["-0.01"]),
        ("impl.kl_early_stop(torch.zeros(0), 0.01)", ["log_ratio"], ["empty"]),
        ("impl.kl_guarded_updates(lambda i: torch.zeros(2), lambda i, lr: None, 2, 0.0)", ["target_kl"], ["0.0"]),
        ("impl.value_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3), value_clip=0.0)", ["value_clip"], ["0.0"]),
        ("impl.value_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3))", ["old_values"], ["(2,)"]),
        ("impl.masked_mean(torch.zeros(3), torch.ones(3))", ["mask"], ["float32"]),
        ("impl.masked_mean(torch.zeros(3), torch.ones(2, dtype=torch.bool))", ["mask"], ["(2,)"]),
        ("impl.masked_policy_loss(torch.ones(3), torch.ones(3), torch.ones(3, dtype=torch.bool), clip_ratio=-0.2)",
         ["clip_ratio"], ["-0.2"]),
    ]


def _called(call: str) -> str:
    """The interface name a bad call (source text 'impl.NAME(...)...') exercises."""
    return call.removeprefix("impl.").split("(", 1)[0]


def check_rejects_args(impl, fn):
    for call, names, mentions in _bad_calls():
        if _called(call) == fn:
            expect_rejection("NUM-21", lambda call=call: eval(call, {"impl": impl, "torch": torch}),
                             names=names, mentions=mentions, what=call)


def check_empty_case_strategy():
    return st.fixed_dictionaries(dict(shape=st.sampled_from([(0,), (0, 3), (2, 0)]), dtype=dtypes))


stream_cases = streams()
clip_cases = st.builds(lambda c, clip: dict(c, clip=clip), stream_cases, st.sampled_from([OBS_CLIP, 1.0]))
bad_cases = st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), stream_cases,
                      st.sampled_from(["nan", "inf", "-inf", "empty", "int", "shape"]), st.integers(0, 10**6))
propagate_cases = st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), standardize_cases(),
                            st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(0, 10**6))
_STD = ("safe_standardize", "safe_zero_center")

SCALAR_FUNCTIONS = ("safe_standardize", "RunningMeanStd", "ObsNormalizer", "value_loss", "masked_policy_loss",
                    "kl_early_stop")


def check_scalar_hyperparameters(impl, x, eps, fn):
    flat = x.reshape(-1)
    rows = flat.reshape(-1, 1)  # [N, 1]
    g = torch.Generator().manual_seed(flat.numel())
    old = (flat + 0.1 * torch.randn(flat.shape, generator=g, dtype=torch.float64).to(x.dtype))

    def statistics_after(obj, step):
        step(obj)(rows)
        return obj.state_dict()

    runs = {  # fn -> (its hyper-parameters, the call returning what to compare)
        "safe_standardize": (dict(eps=eps), lambda eps: impl.safe_standardize(x, eps)),
        "RunningMeanStd": (dict(epsilon=RMS_EPSILON), lambda epsilon: statistics_after(
            impl.RunningMeanStd(shape=(1,), epsilon=epsilon), lambda o: o.update)),
        "ObsNormalizer": (dict(epsilon=eps, clip=OBS_CLIP), lambda epsilon, clip: (lambda n: (
            statistics_after(n, lambda o: o.commit), n.normalize(rows)))(
            impl.ObsNormalizer(shape=(1,), epsilon=epsilon, clip=clip))),
        "value_loss": (dict(value_clip=0.2), lambda value_clip: impl.value_loss(flat, old, flat.flip(0), value_clip)),
        "masked_policy_loss": (dict(clip_ratio=0.2), lambda clip_ratio: impl.masked_policy_loss(
            (flat - old).clamp(-5, 5).exp(), flat, torch.ones_like(flat, dtype=torch.bool), clip_ratio)),
        "kl_early_stop": (dict(target_kl=0.01), lambda target_kl: impl.kl_early_stop((flat - old).clamp(-5, 5),
                                                                                     target_kl)),
    }
    params, call = runs[fn]
    check_scalar_types("NUM-23", call, params, x=x)


DEFAULT_FUNCTIONS = ("safe_standardize", "RunningMeanStd", "ObsNormalizer", "value_loss", "masked_policy_loss",
                     "masked_component_weights")


def check_defaults(impl, x, eps, fn):
    flat = x.reshape(-1)
    rows = flat.reshape(-1, 1)  # [N, 1]
    old = flat - 12.5  # |v - old| beyond the value clip
    ratio = (flat - flat.flip(0)).clamp(-3, 3).exp()
    ones = torch.ones_like(flat, dtype=torch.bool)
    if fn == "masked_component_weights" and flat.numel() < 2:
        return  # a component's std needs two rows
    adv = torch.stack([flat, flat.flip(0), torch.zeros_like(flat)], -1)

    def normalizer(**kw):
        norm = impl.ObsNormalizer(shape=(1,), **kw)
        norm.commit(rows)
        return norm.normalize(100 * rows)

    def running(**kw):
        rms = impl.RunningMeanStd(shape=(1,), **kw)
        rms.update(rows)
        return rms.state_dict()

    runs = {  # fn -> (its documented defaults, the call with some of them given)
        "safe_standardize": (dict(eps=STD_EPS), lambda kw: impl.safe_standardize(x, **kw)),
        "RunningMeanStd": (dict(epsilon=RMS_EPSILON), lambda kw: running(**kw)),
        "ObsNormalizer": (dict(epsilon=OBS_EPSILON, clip=OBS_CLIP), lambda kw: normalizer(**kw)),
        "value_loss": (dict(value_clip=10.0), lambda kw: impl.value_loss(flat, old, 3 * flat.flip(0), **kw)),
        "masked_policy_loss": (dict(clip_ratio=0.2), lambda kw: impl.masked_policy_loss(ratio, flat, ones, **kw)),
        "masked_component_weights": (dict(std_eps=STD_EPS), lambda kw: impl.masked_component_weights(
            adv, torch.zeros(3, dtype=x.dtype), **kw)),
    }
    defaults, run = runs[fn]
    same_with_defaults("NUM-24", fn, run, defaults, x=x)


def check_rejects_more(impl, fn):
    mask = torch.ones(3, dtype=torch.bool)
    calls = (
        (lambda: impl.masked_mean(torch.zeros(3, dtype=torch.int64), mask), ["x"], "masked_mean with int64 x"),
        (lambda: impl.masked_policy_loss(torch.ones(3), torch.ones(2), mask), ["advantages"],
         "masked_policy_loss with advantages (2,) for ratio (3,)"),
        (lambda: impl.masked_policy_loss(torch.ones(3), torch.ones(3), torch.ones(3)), ["mask"],
         "masked_policy_loss with a float mask"),
        (lambda: impl.kl_guarded_updates(lambda i: torch.zeros(2), lambda i, lr: None, 0, -1.0), ["target_kl"],
         "kl_guarded_updates(n_steps=0, target_kl=-1.0)"),
    )
    for call, names, what in calls:
        if what.split(" ", 1)[0].split("(", 1)[0] == fn:
            expect_rejection("NUM-25", call, names=names, what=what)


def check_thresholds(impl, fn):
    {"safe_standardize": _threshold_standardize, "masked_component_weights": _threshold_components,
     "ratio_guard": _threshold_ratio, "kl_early_stop": _threshold_kl}[fn](impl)


def _threshold_standardize(impl):
    x = torch.tensor([-2.0, 0.0, 2.0], dtype=torch.float64)  # sigma = 2 exactly
    got = impl.safe_standardize(x, eps=2.0)
    if got.tolist() != [-1.0, 0.0, 1.0]:
        fail("NUM-26", f"safe_standardize([-2, 0, 2], eps=2.0) = {got.tolist()}, expected [-1, 0, 1]: sigma = 2 == eps "
                       "standardizes (zero-centring is for sigma < eps)")


def _threshold_components(impl):
    adv = torch.tensor([[-2.0, -2.0], [0.0, 0.0], [2.0, 20.0]], dtype=torch.float64)  # component stds 2, 11.01...
    _, valid = impl.masked_component_weights(adv, torch.zeros(2, dtype=torch.float64), std_eps=2.0)
    if valid.tolist() != [False, True]:
        fail("NUM-26", f"masked_component_weights with component stds [2, ~11] and std_eps = 2 gives valid = "
                       f"{valid.tolist()}, expected [False, True]: a std equal to std_eps is masked")


def _threshold_ratio(impl):
    d = torch.tensor([LOG_RATIO_CLAMP, -LOG_RATIO_CLAMP, math.log(RATIO_MAX), math.log(RATIO_MIN)], dtype=torch.float64)
    _, events = impl.ratio_guard(d, torch.zeros(4, dtype=torch.float64))
    counts = {k: int(v) for k, v in events.items()}
    if counts.get("log_ratio_clamped") != 0 or counts.get("ratio_clamped") != 2:
        fail("NUM-26", f"ratio_guard events {counts} for Δ = [20, -20, ln 100, ln 0.01]: expected log_ratio_clamped 0 "
                       "(|Δ| == 20 is not beyond the clamp) and ratio_clamped 2 (only ±20 lie outside [ln 0.01, ln 100])")


def _threshold_kl(impl):
    for k in range(1, 200):  # a Δ whose k3 estimate k is exactly KL_MULTIPLIER times a float target
        lr = torch.tensor([0.01 * k, -0.005 * k], dtype=torch.float64)
        _, kl = impl.kl_early_stop(lr, None)
        target = float(kl) / KL_MULTIPLIER
        if target > 0 and KL_MULTIPLIER * target == float(kl):
            stop, _ = impl.kl_early_stop(lr, target)
            if bool(stop):
                fail("NUM-26", f"kl_early_stop stops with KL = {float(kl)!r} == {KL_MULTIPLIER} * target_kl "
                               f"({target!r}): only KL > {KL_MULTIPLIER}·target_kl stops")
            return


def check_copies_detached(impl, x, eps, fn):
    if fn == "kl_guarded_updates":
        return _detached_kl(impl)
    rows = x.reshape(-1, 1)
    obj, twin = getattr(impl, fn)(shape=(1,)), getattr(impl, fn)(shape=(1,))
    obj.update(rows) if fn == "RunningMeanStd" else obj.commit(rows)
    twin.update(rows) if fn == "RunningMeanStd" else twin.commit(rows)
    for v in obj.state_dict().values():
        v.fill_(-3.0)
    for (k, got), (_, want) in zip(obj.state_dict().items(), twin.state_dict().items()):
        if not torch.equal(got, want):
            fail("NUM-27", f"{fn}.state_dict()['{k}'] = {got.tolist()} after the caller wrote into a state_dict(),"
                           f" expected {want.tolist()}: return copies", x=x)


def _detached_kl(impl):
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    kls, _ = impl.kl_guarded_updates(lambda i: w * torch.tensor([0.1, -0.2], dtype=torch.float64),
                                     lambda i, lr: None, 2, 0.01)
    attached = [i for i, k in enumerate(kls) if isinstance(k, torch.Tensor) and (k.requires_grad or k.grad_fn)]
    if attached:
        fail("NUM-27", f"kl_guarded_updates' KL estimates {attached} require grad: the estimate is a statistic of the "
                       "pre-step policy, computed on the detached log-ratio")


def check_ratio_gradient(impl, dtype):
    new = torch.tensor([800.0, -800.0, 30.0, -30.0, 0.5], dtype=dtype, requires_grad=True)
    ratio, _ = impl.ratio_guard(new, torch.zeros(5, dtype=dtype))
    (grad,) = torch.autograd.grad(ratio.sum(), new)
    want = torch.tensor([0.0, 0.0, 0.0, 0.0, math.exp(0.5)], dtype=torch.float64)
    if not bool(torch.isfinite(grad).all()) or not torch.allclose(grad.double(), want, rtol=1e-5, atol=0.0):
        fail("NUM-28", f"d ratio / d new_log_prob = {grad.tolist()} for Δ = [800, -800, 30, -30, 0.5] ({dtype}), "
                       f"expected {want.tolist()}: finite, 0 where clamped")
