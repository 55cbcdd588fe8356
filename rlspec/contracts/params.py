"""The contracts' parameters that a run config holds and the command line reads: the trust-region defaults
(OmniSafe 0.5.0's configs/on-policy/TRPO.yaml, CPO.yaml, P3O.yaml), the room's scenarios, the bonus phase's
SuccessSetConfig and the scalar validators it uses. Imports only the standard library, so that
`rlspec train ENGINE --help` builds its config reference without torch; rlspec.contracts.trust_region,
.room_env, .success_set and .validate re-export them.
"""

from __future__ import annotations

import dataclasses
import math

# contract trust_region: OmniSafe 0.5.0 defaults
CG_ITERS = 15  # TRPO.yaml / CPO.yaml cg_iters
CG_DAMPING = 0.1  # cg_damping: F + damping·I
MAX_KL = 0.01  # target_kl (TRPO, CPO; P3O uses 0.02 for its KL early stop)
TRPO_LINE_SEARCH_STEPS, CPO_LINE_SEARCH_STEPS = 15, 20  # total_steps of the two line searches
LINE_SEARCH_DECAY = 0.8
P3O_KAPPA, P3O_CLIP = 20.0, 0.2


def require_int(fn: str, name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{fn}: argument '{name}' must be an int >= {minimum}, got {value!r} "
                         f"({type(value).__name__})")


def require_range(fn: str, name: str, value: float, lo: float, hi: float,
                  lo_open: bool = False, hi_open: bool = False) -> None:
    interval = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{fn}: argument '{name}' must be a real number in {interval}, got {value!r} "
                        f"({type(value).__name__})")
    ok_lo = value > lo if lo_open else value >= lo
    ok_hi = value < hi if hi_open else value <= hi
    if not (ok_lo and ok_hi):
        raise ValueError(f"{fn}: argument '{name}' must lie in {interval}, got {value!r}")


# contract room_env: the scenarios, by the ROM's MODE byte
SCENARIOS = {"room-exit": 0, "standing-still": 1}


# contract success_set
@dataclasses.dataclass(frozen=True)
class SuccessSetConfig:
    """The bonus phase's hyper-parameters. The success-set design fixes ``cooldown_steps`` = 5000 and
    ``min_pairs`` = max(32, 2·batch_packs) (§2.3: BONUS_COOLDOWN_STEPS, BONUS_TRIGGER_MIN_PAIRS); the other
    defaults are rlspec's choices (the seed names the knobs, not their values)."""

    tau: float = 1.0
    """Temperature of Loss A: −w·log σ((Δ − margin)/τ)."""
    margin: float = 0.0
    """Ranking margin (0: the plain logistic ranking loss of §3.2)."""
    top_k: int = 4
    """Successes per failure (Top-K; 1 = the "Top-1" ablation)."""
    sim_threshold: float = 0.9
    """Divergence: first step with cos(fail_t, succ_t) < threshold, else argmin."""
    window: int = 8
    """w: the window is [t_d − w, t_d + w], clipped to both episodes."""
    cooldown_steps: int = 5000
    """No bonus within this many steps of the last one."""
    batch_packs: int = 16
    """Packs per bonus update (BONUS_BATCH_PACKS)."""
    min_pairs: int | None = None
    """Pairs in the queue needed to trigger a bonus phase (None: max(32, 2·batch_packs), success-set design §2.3)."""
    min_clusters: int = 2
    """Paired-queue cluster coverage needed (Part4)."""
    kl_guard: float = 0.02
    """Early stop once KL(π_before ‖ π) > kl_guard."""
    entropy_floor: float = 0.1
    """Early stop once the mean policy entropy < entropy_floor."""
    bonus_updates: int = 4
    """Fixed number of bonus updates (BONUS_UPDATES; the same on every rank)."""
    num_prototypes: int = 8
    """Success prototypes (Part4)."""
    prototype_ema: float = 0.05
    """α: prototype ← (1 − α)·prototype + α·embedding."""
    use_clusters: bool = True
    """Top-K across clusters when successes carry cluster ids (Part4)."""
    consume_packs: bool = True
    """BONUS_CONSUME_PACKS: sampled packs leave the queue."""
    diverse_clusters: bool = True
    """Sample packs that cover the most clusters first."""

    def __post_init__(self) -> None:
        fn = "SuccessSetConfig"
        require_range(fn, "tau", self.tau, 0.0, math.inf, lo_open=True, hi_open=True)
        require_range(fn, "margin", self.margin, -math.inf, math.inf, lo_open=True, hi_open=True)
        require_range(fn, "sim_threshold", self.sim_threshold, -1.0, 1.0)
        require_range(fn, "kl_guard", self.kl_guard, 0.0, math.inf, lo_open=True)
        require_range(fn, "entropy_floor", self.entropy_floor, -math.inf, math.inf, lo_open=True, hi_open=True)
        require_range(fn, "prototype_ema", self.prototype_ema, 0.0, 1.0)
        for name, minimum in (("top_k", 1), ("window", 0), ("cooldown_steps", 0), ("batch_packs", 1),
                              ("min_clusters", 0), ("bonus_updates", 1), ("num_prototypes", 1)):
            require_int(fn, name, getattr(self, name), minimum)
        if self.min_pairs is not None:
            require_int(fn, "min_pairs", self.min_pairs, 1)

    @property
    def resolved_min_pairs(self) -> int:
        return max(32, 2 * self.batch_packs) if self.min_pairs is None else self.min_pairs
