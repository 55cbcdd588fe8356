"""The logged keys of PPOLagSem (PPOLagSem design §7, §15.5, §28.2, §33.3), pre-registered (§2 principle 5): an
engine with semantics enabled logs exactly ``keys(cfg)`` every epoch, all floats (CSV and TensorBoard
scalars). Windowed keys cover the epoch since the previous log; counters are cumulative.

Semantics/* (every epoch while ``enable``):
    RawReward                 mean environment reward before shaping (window)
    Shaping/Mean, /Min, /Max  r' − r over every env step (window; 0 where nothing was shaped)
    Shaping/RMS, RawReward/RMS   √mean((r' − r)²) and √mean(r²) over every env step (window): their ratio is the
                              shaping's size against the reward's whatever their signs (the band of §4.0.7)
    ShapingRewardRatio        E[shaping] / E[r] (window; 0 when |E[r]| < 1e-12)           §4.0.7
    ShapingStd                mean over capture batches of the std of the per-env shaping values   §4.0.7
    RawMargin, NormMargin     mean margin·margin_scale and mean clamped z-margin of the captures (window)
    Beta                      β_t at the last shaped step
    ClampFrac                 clamped margins / all margins (cumulative)                  §28.2
    CaptureCount              successful capture steps (cumulative)
    CaptureIntervalEffective  longest run of vectorized steps without a successful capture (window,
                              including the run still open): capture_interval when all is well
    EmbedLatencyMs            model time per frame, ms (window)
    EmbedSuccessRate          finite embeddings / frames attempted (window; 1 with no attempt)
    Debug/EmbedAttempts, Debug/EmbedSuccess   frames attempted / embedded finitely (cumulative)
    Debug/ClipStatus          CLIP_STATUS code of the load status (the text is in the run metadata)
    Debug/ClipFallbackCPU     1 when a cuda model device fell back to cpu (fallback_cpu_no_cuda)
    TemporalWindowFill        mean pool length / temporal_window (0 when the window is 1)  §33.3
    FailSoftEvents            semantic failures absorbed with zero shaping (cumulative)    §2 principle 4
    OOMBackoffs, BatchCap     batch halvings on out-of-memory (cumulative), frames per forward now
Risk/* (``risk_enable``; after each PPO update, see risk.py): Loss, PredMean, TargetMean, Corr,
    TrainSamples, LR, NanEvents, TrainStatusCode, TrainStatusMsgLen, Buf/Embeddings, Buf/Costs, Buf/Dones;
    (``risk_holdout_fraction`` > 0) ECE, HeldOut/Corr, HeldOut/Samples, Reliability/{Pred,Target}/0..9;
    (``modulation_enable``) ModulationScale, ModulationRaw, ModulationActive.
"""

from __future__ import annotations

from rlspec.semantics.config import RELIABILITY_BINS, SemanticConfig

SEMANTIC_KEYS = (
    "Semantics/RawReward", "Semantics/Shaping/Mean", "Semantics/Shaping/Min", "Semantics/Shaping/Max",
    "Semantics/Shaping/RMS", "Semantics/RawReward/RMS",
    "Semantics/ShapingRewardRatio", "Semantics/ShapingStd", "Semantics/RawMargin", "Semantics/NormMargin",
    "Semantics/Beta", "Semantics/ClampFrac", "Semantics/CaptureCount", "Semantics/CaptureIntervalEffective",
    "Semantics/EmbedLatencyMs", "Semantics/EmbedSuccessRate", "Semantics/Debug/EmbedAttempts",
    "Semantics/Debug/EmbedSuccess", "Semantics/Debug/ClipStatus", "Semantics/Debug/ClipFallbackCPU",
    "Semantics/TemporalWindowFill", "Semantics/FailSoftEvents", "Semantics/OOMBackoffs", "Semantics/BatchCap",
)
RISK_KEYS = (
    "Risk/Loss", "Risk/PredMean", "Risk/TargetMean", "Risk/Corr", "Risk/TrainSamples", "Risk/LR",
    "Risk/NanEvents", "Risk/TrainStatusCode", "Risk/TrainStatusMsgLen", "Risk/Buf/Embeddings", "Risk/Buf/Costs",
    "Risk/Buf/Dones",
)
MODULATION_KEYS = ("Risk/ModulationScale", "Risk/ModulationRaw", "Risk/ModulationActive")
CALIBRATION_KEYS = ("Risk/ECE", "Risk/HeldOut/Corr", "Risk/HeldOut/Samples",
                    *(f"Risk/Reliability/{side}/{b}" for side in ("Pred", "Target") for b in range(RELIABILITY_BINS)))

# Semantics/Debug/ClipStatus: 1-3 loaded (the dtype), 4 no model (margin_source 'oracle'), 0 not loaded yet, < 0 the
# load error
CLIP_STATUS = {"ok_st_float32": 1, "ok_st_float16": 2, "ok_st_bfloat16": 3, "oracle": 4, "not_loaded": 0,
               "load_error:NoSafeTensorsWeights": -1, "load_error:ModelNotFound": -2,
               "load_error:NonFiniteEmbeddings": -3, "load_error:MissingDependency": -5}
OTHER_LOAD_ERROR = -4


def clip_status_code(status: str) -> int:
    return CLIP_STATUS.get(status, OTHER_LOAD_ERROR)


def keys(cfg: SemanticConfig) -> tuple[str, ...]:
    """The keys an engine logs each epoch under ``cfg`` (none while semantics are disabled)."""
    if not cfg.enable:
        return ()
    return (SEMANTIC_KEYS + (RISK_KEYS if cfg.risk_enable else ())
            + (CALIBRATION_KEYS if cfg.calibrated else ())
            + (MODULATION_KEYS if cfg.modulation_enable else ()))
