"""``SemanticRewardAdapter`` (PPOLagSem design §4.4, §23, §25.2, §26.3): the reward hook an on-policy engine calls
once per vectorized step, *before* it stores the rewards; the PPO core is untouched.

    adapter(global_step, rewards [B], costs [B], dones [B], frames=None) -> rewards' [B]

``global_step`` is the number of env steps taken before this vectorized step (β is annealed over env
steps; this step is vectorized step k = global_step // B). Frames are captured when
``capture_due(global_step)`` (k % capture_interval == 0): the engine renders only then, uint8
[B, H, W, 3] (one frame per env, the observation each env arrived at) or [1, H, W, 3] (one render,
broadcast to every env, §16.1). ``dones[b]`` says this step ended env b's episode; its pool and
potential are cleared after this step's shaping.

Fail-soft (§2 principle 4, §28.4 point 4): a model that did not load, an embedding that raises (OOM
after backoff, anything else) or returns non-finite rows, a capture step without frames — each leaves
the affected rewards bit for bit unshaped, adds 1 to Semantics/FailSoftEvents, logs a warning once per
kind, and training goes on. Wrong arguments (shapes, dtypes) are the caller's bug and raise, naming
the argument.
"""

from __future__ import annotations

import logging
import math

import torch

from rlspec.semantics.config import SemanticConfig
from rlspec.semantics.kit import SemanticKit
from rlspec.semantics.manager import SemanticManager
from rlspec.semantics.risk import RiskBuffer
from rlspec.semantics.telemetry import clip_status_code

log = logging.getLogger("rlspec.semantics")


class _Window:
    """The per-epoch sums behind the windowed Semantics/* keys (reset by each ``telemetry()``)."""

    def __init__(self):
        self.reward_sum = self.shaping_sum = 0.0
        self.reward_sq_sum = self.shaping_sq_sum = 0.0  # Σ r², Σ shaping²: the RMS keys
        self.shaping_min, self.shaping_max = math.inf, -math.inf
        self.env_steps = 0
        self.std_sum, self.batches = 0.0, 0
        self.raw_margin_sum = self.norm_margin_sum = 0.0
        self.margins = 0
        self.latency_sum, self.latencies = 0.0, 0
        self.attempts = self.successes = 0
        self.max_gap = 0


class SemanticRewardAdapter:
    def __init__(self, cfg: SemanticConfig, num_envs: int, gamma: float, total_steps: int,
                 manager: SemanticManager | None = None, kit: SemanticKit | None = None):
        """``kit``: the shaping and risk_target implementations (default: the fast twins)."""
        kit = kit or SemanticKit.named("fast")
        self.cfg, self.num_envs = cfg, num_envs
        self.manager = manager or SemanticManager(cfg, num_envs, gamma, total_steps, shaping=kit.shaping)
        self.buffer = (RiskBuffer(num_envs, cfg.window_size, self.manager.host, kit.risk_target)
                       if cfg.risk_enable else None)
        self.episodes_completed = 0
        self.attempts = self.successes = self.captures = self.fail_events = 0
        self.last_capture: int | None = None  # vectorized step of the last successful capture
        self.step_index = -1
        self.window = _Window()
        self.warned: set[str] = set()
        self.last_error = ""
        if not self.manager.ready:
            self._fail("load", self.manager.report.message or self.manager.report.status)

    # ----------------------------------------------------------------------------------------------
    def capture_due(self, global_step: int) -> bool:
        return self.manager.ready and (global_step // self.num_envs) % self.cfg.capture_interval == 0

    def __call__(self, global_step: int, rewards: torch.Tensor, costs: torch.Tensor, dones: torch.Tensor,
                 frames=None, margins: torch.Tensor | None = None) -> torch.Tensor:
        """``margins`` [B]: the env's true margins of s'_t (margin_source 'oracle'), in place of ``frames``."""
        dones = self._validate(global_step, rewards, costs, dones)
        k = self.step_index = global_step // self.num_envs
        step = self.buffer.record_step(costs, dones) if self.buffer is not None else k
        shaped = rewards
        if self.capture_due(global_step):
            given = margins if self.manager.oracle else frames
            if given is None:
                what = "margins" if self.manager.oracle else "frames"
                self._fail(f"no_{what}", f"capture due at env step {global_step} but no {what} were passed")
            elif self.manager.oracle:
                shaped = self._shape_oracle(global_step, rewards, margins)
            else:
                shaped = self._capture(global_step, step, rewards, frames)
        self.manager.end_episodes(dones)
        self.episodes_completed += int(dones.sum())
        self._account(rewards, shaped)
        return shaped

    # ----------------------------------------------------------------------------------------------
    def _validate(self, global_step, rewards, costs, dones) -> torch.Tensor:
        B = self.num_envs
        if isinstance(global_step, bool) or not isinstance(global_step, int) or global_step < 0:
            raise ValueError(f"SemanticRewardAdapter: argument 'global_step' must be an int >= 0, got {global_step!r}")
        for name, t in (("rewards", rewards), ("costs", costs)):
            if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or tuple(t.shape) != (B,):
                got = f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"SemanticRewardAdapter: argument '{name}' must be a floating tensor of shape "
                                 f"({B},) (one per env), got {got}")
        if not isinstance(dones, torch.Tensor) or tuple(dones.shape) != (B,):
            got = tuple(dones.shape) if isinstance(dones, torch.Tensor) else type(dones).__name__
            raise ValueError(f"SemanticRewardAdapter: argument 'dones' must be a tensor of shape ({B},), got {got}")
        if dones.dtype != torch.bool:
            if not bool(((dones == 0) | (dones == 1)).all()):
                raise ValueError(f"SemanticRewardAdapter: argument 'dones' must be bool or 0/1, got values "
                                 f"{dones.unique().tolist()}")
            dones = dones != 0
        return dones

    def _capture(self, global_step: int, step: int, rewards: torch.Tensor, frames) -> torch.Tensor:
        """Embed, shape, record for the risk head; any failure leaves the rewards unshaped."""
        B, single = self.num_envs, (not self.cfg.batch_across_envs) or len(frames) == 1
        if not single and len(frames) != B:
            raise ValueError(f"SemanticRewardAdapter: argument 'frames' must hold 1 or {B} frames (one per env), "
                             f"got {len(frames)}")
        n = 1 if single else B
        self.attempts += n
        self.window.attempts += n
        try:
            e, ms = self.manager.embed(frames[:1] if single else frames)  # [n, D]
        except Exception as exc:  # fail-soft: OOM after backoff, processor or model errors
            self._fail(type(exc).__name__, f"embedding failed at env step {global_step}: {exc}")
            return rewards
        finite = torch.isfinite(e).all(-1)  # [n]
        good = int(finite.sum())
        self.successes += good
        self.window.successes += good
        self.window.latency_sum += ms
        self.window.latencies += 1
        if good < n:
            self._fail("nonfinite_embedding", f"{n - good} of {n} embeddings non-finite at env step {global_step}")
        if good == 0:
            return rewards
        if single:
            e, finite = e.expand(B, -1), finite.expand(B)
        self._count_capture()
        if self.buffer is not None:
            rows = torch.arange(n, device=finite.device)[finite[:n]]
            self.buffer.record_capture(step, rows, e[rows])
        if not self.cfg.shaping_enable:
            return rewards
        return self._shape(global_step, rewards, finite, lambda: self.manager.shape(rewards, global_step, e, finite))

    def _shape_oracle(self, global_step: int, rewards: torch.Tensor, margins: torch.Tensor) -> torch.Tensor:
        """The oracle's capture: every env's true margin [B] through the same normalization and shaping."""
        if not isinstance(margins, torch.Tensor) or tuple(margins.shape) != (self.num_envs,):
            got = tuple(margins.shape) if isinstance(margins, torch.Tensor) else type(margins).__name__
            raise ValueError(f"SemanticRewardAdapter: argument 'margins' must be a tensor of shape "
                             f"({self.num_envs},) (one per env), got {got}")
        finite = torch.isfinite(margins).to(self.manager.host)  # [B]
        self._count_capture()
        if not self.cfg.shaping_enable or not bool(finite.any()):
            return rewards
        m = margins.to(self.manager.host, torch.float32)[finite]
        return self._shape(global_step, rewards, finite,
                           lambda: self.manager.shape_margins(rewards, global_step, m, finite))

    def _shape(self, global_step: int, rewards: torch.Tensor, finite: torch.Tensor, shape) -> torch.Tensor:
        """r' from ``shape()`` (the manager's), its margins counted; any failure leaves the rewards unshaped."""
        try:
            shaped, raw, norm = shape()
        except Exception as exc:  # fail-soft
            self._fail(type(exc).__name__, f"shaping failed at env step {global_step}: {exc}")
            return rewards
        w = self.window
        w.raw_margin_sum += float(raw.double().sum())
        w.norm_margin_sum += float(norm.double().sum())
        w.margins += raw.numel()
        w.std_sum += float((shaped - rewards)[finite.to(rewards.device)].double().std(unbiased=False))
        w.batches += 1
        return shaped

    def _count_capture(self) -> None:
        k = self.step_index
        if self.last_capture is not None:
            self.window.max_gap = max(self.window.max_gap, k - self.last_capture)
        self.last_capture = k
        self.captures += 1

    def _fail(self, kind: str, message: str) -> None:
        self.fail_events += 1
        self.last_error = f"{kind}: {message}"
        if kind not in self.warned:
            self.warned.add(kind)
            log.warning("semantics fail-soft (%s): %s; shaping stays 0 and training goes on", kind, message)

    def _account(self, rewards: torch.Tensor, shaped: torch.Tensor) -> None:
        w = self.window
        delta = (shaped - rewards).double()
        w.reward_sum += float(rewards.double().sum())
        w.shaping_sum += float(delta.sum())
        w.reward_sq_sum += float(rewards.double().square().sum())
        w.shaping_sq_sum += float(delta.square().sum())
        w.shaping_min = min(w.shaping_min, float(delta.min()))
        w.shaping_max = max(w.shaping_max, float(delta.max()))
        w.env_steps += rewards.numel()

    # ----------------------------------------------------------------------------------------------
    def telemetry(self) -> dict[str, float]:
        """Every Semantics/* key (telemetry.py); the windowed ones cover the steps since the last call."""
        w, m = self.window, self.manager
        mean_r = w.reward_sum / w.env_steps if w.env_steps else 0.0
        mean_s = w.shaping_sum / w.env_steps if w.env_steps else 0.0
        open_gap = self.step_index - self.last_capture if self.last_capture is not None else self.step_index + 1
        out = {
            "Semantics/RawReward": mean_r,
            "Semantics/Shaping/Mean": mean_s,
            "Semantics/Shaping/Min": w.shaping_min if w.env_steps else 0.0,
            "Semantics/Shaping/Max": w.shaping_max if w.env_steps else 0.0,
            "Semantics/Shaping/RMS": math.sqrt(w.shaping_sq_sum / w.env_steps) if w.env_steps else 0.0,
            "Semantics/RawReward/RMS": math.sqrt(w.reward_sq_sum / w.env_steps) if w.env_steps else 0.0,
            "Semantics/ShapingRewardRatio": mean_s / mean_r if abs(mean_r) >= 1e-12 else 0.0,
            "Semantics/ShapingStd": w.std_sum / w.batches if w.batches else 0.0,
            "Semantics/RawMargin": w.raw_margin_sum / w.margins if w.margins else 0.0,
            "Semantics/NormMargin": w.norm_margin_sum / w.margins if w.margins else 0.0,
            "Semantics/Beta": float(m.beta),
            "Semantics/ClampFrac": float(m.normalizer.clamp_fraction),
            "Semantics/CaptureCount": float(self.captures),
            "Semantics/CaptureIntervalEffective": float(max(w.max_gap, open_gap)),
            "Semantics/EmbedLatencyMs": w.latency_sum / w.latencies if w.latencies else 0.0,
            "Semantics/EmbedSuccessRate": w.successes / w.attempts if w.attempts else 1.0,
            "Semantics/Debug/EmbedAttempts": float(self.attempts),
            "Semantics/Debug/EmbedSuccess": float(self.successes),
            "Semantics/Debug/ClipStatus": float(clip_status_code(m.report.status)),
            "Semantics/Debug/ClipFallbackCPU": float(m.report.device_status == "fallback_cpu_no_cuda"),
            "Semantics/TemporalWindowFill": m.window_fill,
            "Semantics/FailSoftEvents": float(self.fail_events),
            "Semantics/OOMBackoffs": float(m.oom_backoffs),
            "Semantics/BatchCap": float(m.batch_cap),
        }
        self.window = _Window()
        return out
