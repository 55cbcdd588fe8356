"""``semantic_cfgs`` (PPOLagSem design §8, §18.5, §28.3): the configuration of PPOLagSem's semantic side.

Every flag defaults to off (§4.5: "All semantic flags default to False"), so ``SemanticConfig()`` is
plain PPOLag. This module imports only the standard library: an engine reads it whether or not
semantics are enabled, and reading it must not pull in transformers or the shaping code (§25.16).

Defaults the PPOLagSem design gives: model_device cuda:0 / host_device cpu (§15.1 row 9), the dtype chain
bf16 → fp16 → fp32 (§15.3), risk_lr 1e-3, margin_norm_enable True, margin_scale 1.0 (§28.3),
modulation_min_episodes 10 (§4.0.5.1), threshold_percentile 60 (§4.0.5 example), risk_batch_size 128
and risk_update_iters 1 (§18.5), norm_window 1000 (contract ``shaping``), window_size 2048 and
risk_horizon 64 (§29.2 "typical window sizes (≤2048, H=64)"), batch_max = the number of envs (§18.5,
written 0 here). Defaults the design leaves open and this module chooses: beta_start 0.05,
beta_end_step_fraction 0.5, capture_interval 1, risk_min_samples 64, risk_hidden 64, alpha_modulation
and slope 1.0, discount 0.99, the prompt lists. The seed's ``simple_mode`` ("simplified load path") is
not defined anywhere in it and is left out.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

DTYPE_NAMES = ("bfloat16", "float16", "float32")
MARGIN_SOURCES = ("vision", "oracle")  # SemanticConfig.margin_source


RELIABILITY_BINS = 10  # equal-count bins of the risk head's held-out predictions (risk.py calibration)

@dataclass(frozen=True)
class SemanticConfig:
    enable: bool = False
    """Master switch. False: PPOLagSem is PPOLag exactly; nothing semantic is imported or built (§25.16)."""
    model_name: str = "openai/clip-vit-base-patch16"
    """A local folder, or a Hugging Face model id already in the local cache: nothing is downloaded."""
    cache_dir: str = ""
    """Hugging Face cache folder to look ``model_name`` up in ('' = the default cache)."""
    model_device: str = "cuda:0"
    """Where the vision-language model (and the risk head) run; falls back to cpu without CUDA."""
    host_device: str = "cpu"
    """Where embeddings, centroids and shaping state live (§15.2); cpu means float32 copies (§15.3)."""
    dtype_preference: tuple[str, ...] = DTYPE_NAMES
    """Model dtypes tried in order; the first that loads and embeds finitely is kept (§15.3)."""
    safe_prompts: tuple[str, ...] = ("a robot on a clear open floor", "a robot driving towards a green goal")
    """Descriptions of safe scenes; their normalized mean is the safe centroid (§5.1)."""
    unsafe_prompts: tuple[str, ...] = ("a robot inside a red warning circle", "a robot touching a hazard")
    """Descriptions of unsafe scenes; their normalized mean is the unsafe centroid (§5.1)."""
    capture_interval: int = 1
    """Embed frames on every k-th vectorized step only; other steps are not shaped (§10)."""
    batch_across_envs: bool = True
    """Embed one frame per env in one batch (per-env shaping, §26); False: one frame, broadcast (§16.1)."""
    batch_max: int = 0
    """Most frames per model forward (0 = all envs at once, §18.5)."""
    oom_backoff: bool = True
    """On out-of-memory, halve the batch and retry instead of failing the capture (§26.3)."""
    temporal_window: int = 1
    """Per-env mean of the last k embeddings of the episode (§33; 1 = no pooling)."""
    shaping_enable: bool = False
    """Add the semantic shaping term to the rewards before storage."""
    margin_source: str = "vision"
    """Where the margin m comes from: 'vision' (the model's embeddings against the prompt centroids, §5.1) or
    'oracle' (no model, no rendering: the env's true distances, (nearest hazard edge) − (goal distance), at the
    same capture steps and through the same normalization and β: the most any vision model can give this
    shaping design). 'oracle' takes neither the risk head nor modulation (they read embeddings)."""
    potential_enable: bool = False
    """Potential-based shaping β(γφ' − φ) instead of additive β·m̄ (§4.0.3)."""
    beta_start: float = 0.05
    """Shaping coefficient β_0 at step 0 (cosine-annealed to 0)."""
    beta_end_step_fraction: float = 0.5
    """β reaches 0 at this fraction of the total env steps and stays there (§4.0.3)."""
    margin_norm_enable: bool = True
    """Running z-normalization of the margin over the last norm_window margins (§28.3)."""
    margin_scale: float = 1.0
    """Margin multiplier applied before the ±2 clamp (§28.3)."""
    norm_window: int = 1000
    """Margins kept for the running mean and std."""
    window_size: int = 2048
    """Vectorized steps of costs, dones and embeddings kept for the risk head (§8, §29.2)."""
    risk_enable: bool = False
    """Train the auxiliary risk head after each PPO update (§25.15)."""
    risk_lr: float = 1e-3
    """Adam learning rate of the risk head (§28.3)."""
    risk_hidden: int = 64
    """Width of the risk head's two hidden layers."""
    risk_horizon: int = 64
    """H of the truncated discounted cost target g_t = Σ_{k<H} γ_c^k c_{t+k} (§5.2)."""
    discount: float = 0.99
    """γ_c of the risk target."""
    risk_episode_mask_enable: bool = True
    """Stop each target at its episode's last step (§29.2.1); False sums across episode boundaries."""
    risk_min_samples: int = 64
    """Skip the risk update while fewer embeddings are buffered (§4)."""
    risk_batch_size: int = 128
    """Samples per risk step, drawn without replacement (0 = the full buffer, §5.2)."""
    risk_update_iters: int = 1
    """Risk steps per PPO update (§5.2)."""
    risk_holdout_fraction: float = 0.0
    """Share of the buffered embeddings held out of risk training to measure the head's calibration (§5.2,
    §12): a capture is held out when a fixed hash of its step falls below this (no random draw); Risk/ECE,
    Risk/HeldOut/*, Risk/Reliability/* are then logged (risk.py ``calibration``). 0: every row trains."""
    modulation_enable: bool = False
    """Scale the λ optimizer's learning rate by M ∈ (0, 1] from the risk predictions (§4.0.5)."""
    modulation_min_episodes: int = 10
    """No modulation (M = 1) before this many episodes have completed (§4.0.5.1)."""
    alpha_modulation: float = 1.0
    """α in M = 1 / (1 + α·σ(a))."""
    threshold_percentile: float = 60.0
    """p of the prediction quantile q_p (§4.0.5)."""
    slope: float = 1.0
    """Divides q_p in the gap's scale s = max(q_p / slope, ε) (§4.0.5)."""
    modulation_ema: float = 1.0
    """β of the smoothed scale M ← (1 − β)·M + β·M_raw, once per λ update (§4.0.5.1's planned EMA; M starts at
    1); 1.0: no smoothing, M = M_raw."""
    modulation_corr_min: float = -1.0
    """The quality gate (§4.0.5.1's planned corr_min): M_raw = 1 while the risk head's Pearson correlation
    with its targets at the last risk update (Risk/Corr) is below this; -1.0: no gate."""

    @property
    def calibrated(self) -> bool:
        """Whether runs log the risk head's calibration on held-out captures (Risk/ECE, Risk/Reliability/*)."""
        return self.enable and self.risk_enable and self.risk_holdout_fraction > 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # lists from JSON or a CLI become tuples (the config is frozen)
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
        _validate(self)

    @classmethod
    def from_dict(cls, values: dict) -> "SemanticConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"semantic_cfgs: unknown keys {unknown}; known keys: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}


def _bad(name: str, expected: str, value) -> ValueError:
    return ValueError(f"semantic_cfgs: field '{name}' must be {expected}, got {value!r}")


def _validate(cfg: SemanticConfig) -> None:
    bools = ("enable", "batch_across_envs", "oom_backoff", "shaping_enable", "potential_enable",
             "margin_norm_enable", "risk_enable", "risk_episode_mask_enable", "modulation_enable")
    for name in bools:
        if not isinstance(getattr(cfg, name), bool):
            raise _bad(name, "a bool", getattr(cfg, name))
    ints = dict(capture_interval=1, batch_max=0, temporal_window=1, norm_window=1, window_size=1,
                risk_hidden=1, risk_horizon=1, risk_min_samples=1, risk_batch_size=0, risk_update_iters=1,
                modulation_min_episodes=0)
    for name, minimum in ints.items():
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _bad(name, f"an int >= {minimum}", value)
    # name: (lo, hi, lo_open, hi_open)
    floats = dict(beta_start=(0, math.inf, False, True), beta_end_step_fraction=(0, 1, True, False),
                  margin_scale=(0, math.inf, True, True), risk_lr=(0, math.inf, True, True),
                  discount=(0, 1, False, False), alpha_modulation=(0, math.inf, False, True),
                  threshold_percentile=(0, 100, True, True), slope=(0, math.inf, True, True),
                  modulation_ema=(0, 1, True, False), modulation_corr_min=(-1, 1, False, False),
                  risk_holdout_fraction=(0, 0.5, False, False))
    for name, (lo, hi, lo_open, hi_open) in floats.items():
        value = getattr(cfg, name)
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi))
        if not ok:
            interval = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
            raise _bad(name, f"a number in {interval}", value)
    for name in ("model_name", "model_device", "host_device", "cache_dir"):
        if not isinstance(getattr(cfg, name), str):
            raise _bad(name, "a string", getattr(cfg, name))
    for name in ("safe_prompts", "unsafe_prompts"):
        prompts = getattr(cfg, name)
        if (not isinstance(prompts, tuple) or not prompts
                or not all(isinstance(p, str) and p.strip() for p in prompts)):
            raise _bad(name, "a non-empty list of non-empty strings", prompts)
    prefs = cfg.dtype_preference
    if (not isinstance(prefs, tuple) or not prefs or len(set(prefs)) != len(prefs)
            or not set(prefs) <= set(DTYPE_NAMES)):
        raise _bad("dtype_preference", f"a non-empty list of distinct names from {list(DTYPE_NAMES)}", prefs)
    if cfg.margin_source not in MARGIN_SOURCES:
        raise _bad("margin_source", f"one of {list(MARGIN_SOURCES)}", cfg.margin_source)
    if cfg.margin_source == "oracle" and cfg.risk_enable:
        raise _bad("risk_enable", "False with margin_source 'oracle' (the risk head learns from embeddings, and "
                                  "the oracle has none)", cfg.risk_enable)
    if cfg.modulation_enable and not cfg.risk_enable:
        raise _bad("modulation_enable", "False unless risk_enable is True (M is computed from the risk "
                                        "head's predictions)", cfg.modulation_enable)
