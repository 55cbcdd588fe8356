"""``SemanticManager`` (PPOLagSem design §4.1, §5.1, §5.4, §15.2, §15.3, §26.3): prompt centroids, batched frame
embedding with out-of-memory backoff, and margin → normalized margin → shaped reward, all of the shaping
maths through the ``shaping`` contract's fast implementation.

Per vectorized step (B envs, D the embedding width; every tensor on ``host_device`` unless said):
    e [B, D]          frame embeddings, L2-normalized, host precision (cpu: float32; cuda: model dtype)
    ē = pool(e)       per-env mean of the episode's last ``temporal_window`` captured embeddings (§33)
    m = cos(ē, μ_safe) − cos(ē, μ_unsafe)                       [n] over the n captured envs (§5.1)
    (margin_source 'oracle': m = the env's (nearest hazard edge − goal distance), no model, no frames)
    m̄ = clamp(z(m)·margin_scale, −2, 2)                          running z-score over ``norm_window`` margins
    β_t = cosine(β_0 → 0 at beta_end_step_fraction·total_steps), t the global env step
    r' = r + β_t·m̄  (additive)   or   r + β_t·(γ·m̄ − m̄_last)  (potential, φ = m̄; §4.0.3)
Envs not captured keep r bit for bit (additive) or get exactly 0 (potential). ``end_episodes`` clears
the pools and potentials of finished envs, so nothing crosses an episode boundary.
"""

from __future__ import annotations

import time
from types import ModuleType

import torch

from rlspec.fast import shaping as fast_shaping
from rlspec.semantics.backend import LoadReport, VisionLanguageBackend, as_frame_list, resolve_device
from rlspec.semantics.config import SemanticConfig


class SemanticManager:
    def __init__(self, cfg: SemanticConfig, num_envs: int, gamma: float, total_steps: int,
                 backend: VisionLanguageBackend | None = None, shaping: ModuleType = fast_shaping):
        """Loads ``cfg.model_name`` (fail-soft: see ``ready`` and ``report``) unless a loaded ``backend``
        is given (tests and benchmarks share one). ``shaping``: contract shaping's implementation (the run's
        kit; default the fast twin)."""
        self.cfg, self.num_envs, self.gamma, self.total_steps = cfg, num_envs, gamma, total_steps
        self.shaping = shaping
        self.host, self.host_status = resolve_device(cfg.host_device)
        self.oracle = cfg.margin_source == "oracle"  # margins from the env's true distances: no model at all
        if self.oracle:
            report = LoadReport(status="oracle")
        elif backend is None:
            backend, report = VisionLanguageBackend.load(
                cfg.model_name, model_device=cfg.model_device, dtype_preference=cfg.dtype_preference,
                cache_dir=cfg.cache_dir, check_prompts=cfg.safe_prompts + cfg.unsafe_prompts)
        else:
            report = LoadReport(status=f"ok_st_{str(backend.dtype).removeprefix('torch.')}")
        self.backend, self.report = (None if self.oracle else backend), report
        self.batch_cap = cfg.batch_max or num_envs  # frames per forward; halved on each OOM (§26.3)
        self.oom_backoffs = 0
        self.normalizer = self.shaping.MarginNormalizer(cfg.norm_window, cfg.margin_scale, cfg.margin_norm_enable)
        self.potential = self.shaping.PotentialShaper(num_envs, gamma) if cfg.potential_enable else None
        self.fill = torch.zeros(num_envs, dtype=torch.int64, device=self.host)  # [B] embeddings in each pool
        self.beta = self.shaping.beta_schedule(0, total_steps, cfg.beta_start, cfg.beta_end_step_fraction)
        if self.backend is not None:
            self.mu_safe = self.centroid(cfg.safe_prompts)  # [D]
            self.mu_unsafe = self.centroid(cfg.unsafe_prompts)  # [D]
            self.pool = self.shaping.TemporalPool(num_envs, self.mu_safe.shape[0], cfg.temporal_window)

    @property
    def ready(self) -> bool:
        return self.oracle or self.backend is not None

    def to_host(self, x: torch.Tensor) -> torch.Tensor:
        """§15.3: reduced precision stays on a GPU host; a CPU host gets float32."""
        x = x.to(self.host)
        return x.float() if self.host.type == "cpu" else x

    def centroid(self, prompts) -> torch.Tensor:  # -> [D] unit
        return self.shaping.prompt_centroid(self.to_host(self.backend.text_features(list(prompts))))

    def embed(self, frames) -> tuple[torch.Tensor, float]:
        """(e [N, D] on the host, milliseconds per frame). Frames go through the model ``batch_cap`` at a
        time; an out-of-memory error halves ``batch_cap`` (kept for later calls) and retries the same
        frames, down to one frame, whose OOM propagates (§26.3: "halves the batch recursively")."""
        frames = as_frame_list(frames)
        start, parts, t0 = 0, [], time.perf_counter()
        while start < len(frames):
            chunk = frames[start:start + self.batch_cap]
            try:
                e = self.backend.image_features(chunk)  # [n, D] model dtype, model device
            except torch.OutOfMemoryError:
                if not self.cfg.oom_backoff or len(chunk) == 1:
                    raise
                self.batch_cap = max(1, len(chunk) // 2)
                self.oom_backoffs += 1
                if self.backend.device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            parts.append(self.to_host(e))
            start += len(chunk)
        return torch.cat(parts), 1e3 * (time.perf_counter() - t0) / len(frames)

    def shape(self, rewards: torch.Tensor, step: int, e: torch.Tensor, captured: torch.Tensor):
        """(r' [B], raw margins [n], normalized margins [n]) for rewards r [B], embeddings e [B, D] (rows of
        envs not captured are ignored) and the capture mask [B] (host); ``step`` is the global env step."""
        pooled = self.pool(e, captured)  # [B, D]
        self.fill = torch.where(captured, (self.fill + 1).clamp_max(self.cfg.temporal_window), self.fill)
        m = self.shaping.semantic_margin(pooled[captured], self.mu_safe, self.mu_unsafe)  # [n]
        return self.shape_margins(rewards, step, m, captured)

    def shape_margins(self, rewards: torch.Tensor, step: int, m: torch.Tensor, captured: torch.Tensor):
        """``shape`` from the raw margins m [n] of the captured envs (the embeddings' or the oracle's) on."""
        cfg = self.cfg
        self.beta = self.shaping.beta_schedule(step, self.total_steps, cfg.beta_start, cfg.beta_end_step_fraction)
        m = m.to(self.host)
        m_bar = self.normalizer(m)  # [n]
        margin = torch.zeros(self.num_envs, dtype=m_bar.dtype, device=self.host)
        margin[captured] = m_bar
        margin, mask = margin.to(rewards.device, rewards.dtype), captured.to(rewards.device)
        if self.potential is not None:
            shaped = rewards + self.potential(margin, mask, self.beta)
        else:
            shaped = self.shaping.additive_shaping(rewards, self.beta, margin, mask)
        return shaped, m * cfg.margin_scale, m_bar

    def end_episodes(self, done: torch.Tensor) -> None:
        """Forget the pools and potentials of the envs whose episode ended (done [B] bool, §33.2)."""
        done = done.to(self.host)
        self.fill = torch.where(done, torch.zeros_like(self.fill), self.fill)
        if self.backend is not None:
            self.pool.reset(done)
        if self.potential is not None:
            self.potential.reset(done)

    @property
    def window_fill(self) -> float:
        """Semantics/TemporalWindowFill: mean pool length / k over the envs (0 when k = 1, §33.3)."""
        k = self.cfg.temporal_window
        return 0.0 if k == 1 else float(self.fill.double().mean()) / k
