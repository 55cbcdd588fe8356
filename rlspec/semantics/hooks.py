"""``PPOLagSemHooks``: the whole semantic side behind the calls a PPO-Lagrangian engine makes (PPOLagSem design
§4.4, §25.1, §25.15). The engine builds it only when ``cfg.enable`` (importing this module is the
engine's first semantic import) and otherwise runs plain PPOLag:

    hooks = PPOLagSemHooks(cfg, num_envs=B, gamma=γ, total_steps=T, seed=s)
    per vectorized step, before storing the rollout:
        frames = render() if hooks.capture_due(global_step) else None
        rewards = hooks.shape_rewards(global_step, rewards, costs, dones, frames)
    each epoch:
        λ update with scale=hooks.lambda_scale()        (M; 1.0 without modulation)
        PPO update (untouched)
        logs |= hooks.after_update()                   (risk head training, Risk/* keys)
        logs |= hooks.telemetry()                      (Semantics/* and modulation keys)
    once, into the run's metadata: hooks.metadata()     (§13: prompts, their hash, model identity)
    into each checkpoint: hooks.state_dict(); on resume: hooks.load_state_dict(...)

Everything the hooks carry from step to step is in ``state_dict()``: the adapter's counters, telemetry
window and risk buffer, the manager's margin normalizer, potentials, temporal pools, β and batch cap, the
risk head with its optimizer and generator, the modulator's last values. The frozen model and the prompt
centroids are not (they are rebuilt from the config, deterministically). A hooks object that loads the
state of another continues exactly as that one would have.
"""

from __future__ import annotations

import hashlib
import io
import json

import torch

from rlspec.semantics.adapter import SemanticRewardAdapter
from rlspec.semantics.config import SemanticConfig
from rlspec.semantics.kit import SemanticKit
from rlspec.semantics.modulation import LambdaModulator
from rlspec.semantics.risk import RiskTrainer, risk_metrics


def prompts_sha256(safe_prompts, unsafe_prompts) -> str:
    """sha256 of the JSON of both prompt lists, order kept (a reordered list is a different centroid
    only in rounding, but a different experiment record)."""
    blob = json.dumps({"safe": list(safe_prompts), "unsafe": list(unsafe_prompts)}, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class PPOLagSemHooks:
    def __init__(self, cfg: SemanticConfig, *, num_envs: int, gamma: float, total_steps: int, seed: int,
                 adapter: SemanticRewardAdapter | None = None, kit: SemanticKit | None = None):
        """``kit``: the shaping, modulation and risk_target implementations (default: the fast twins)."""
        kit = kit or SemanticKit.named("fast")
        if not cfg.enable:
            raise ValueError("PPOLagSemHooks: semantic_cfgs.enable is False; a disabled run must not build "
                             "semantic objects (run plain PPOLag instead)")
        self.cfg = cfg
        self.adapter = adapter or SemanticRewardAdapter(cfg, num_envs, gamma, total_steps, kit=kit)
        manager = self.adapter.manager
        self.risk = (RiskTrainer(cfg, manager.mu_safe.shape[0], manager.backend.device, seed)
                     if cfg.risk_enable and manager.ready else None)
        self.modulator = LambdaModulator(cfg, kit.modulation_scale) if cfg.modulation_enable else None

    def capture_due(self, global_step: int) -> bool:
        return self.adapter.capture_due(global_step)

    @property
    def oracle(self) -> bool:
        """Captures read the envs' true margins (margin_source 'oracle') instead of rendered frames."""
        return self.adapter.manager.oracle

    def shape_rewards(self, global_step: int, rewards: torch.Tensor, costs: torch.Tensor, dones: torch.Tensor,
                      frames=None, margins: torch.Tensor | None = None) -> torch.Tensor:
        return self.adapter(global_step, rewards, costs, dones, frames, margins)

    def after_update(self) -> dict[str, float]:
        """Train the risk head on the buffer (after the PPO update, §25.15); {} without risk_enable."""
        if not self.cfg.risk_enable:
            return {}
        if self.risk is None:
            return risk_metrics("semantics_unavailable", self.adapter.manager.report.status, lr=self.cfg.risk_lr,
                                nan_events=self.adapter.buffer.nan_events, sizes=self.adapter.buffer.sizes(),
                                holdout=self.cfg.risk_holdout_fraction > 0)
        return self.risk.update(self.adapter.buffer)

    def lambda_scale(self) -> float:
        """M for the next Lagrange update (1.0 without modulation, or while semantics are unavailable)."""
        if self.modulator is None or self.risk is None:
            return 1.0
        preds = self.risk.predict(self.adapter.buffer.embeddings()) if self.adapter.buffer.captures else torch.zeros(0)
        return self.modulator.scale(preds, self.adapter.episodes_completed, self.risk.corr)

    def telemetry(self) -> dict[str, float]:
        out = self.adapter.telemetry()
        if self.modulator is not None:
            out.update(self.modulator.last)
        return out

    # attributes carried from step to step (module docstring); everything else comes from the config
    _ADAPTER_STATE = ("buffer", "episodes_completed", "attempts", "successes", "captures", "fail_events",
                      "last_capture", "step_index", "window", "warned", "last_error")
    _MANAGER_STATE = ("batch_cap", "oom_backoffs", "normalizer", "potential", "fill", "beta", "pool")

    def state_dict(self) -> dict:
        """{"blob": bytes}: the torch.save of the step-to-step state, so that a checkpoint loaded onto the CPU
        (the engine's load_checkpoint) still puts each tensor back on its own device (a CUDA host's pools)."""
        adapter, manager = self.adapter, self.adapter.manager
        state = {"adapter": {k: getattr(adapter, k) for k in self._ADAPTER_STATE},
                 "manager": {k: getattr(manager, k) for k in self._MANAGER_STATE if hasattr(manager, k)},
                 "risk": None if self.risk is None else {
                     "head": self.risk.head.state_dict(), "optimizer": self.risk.optimizer.state_dict(),
                     "generator": self.risk.generator.get_state(), "nan_events": self.risk.nan_events,
                     "corr": self.risk.corr},
                 "modulator": None if self.modulator is None else dict(self.modulator.last)}
        buf = io.BytesIO()
        torch.save(state, buf)
        return {"blob": buf.getvalue()}

    def load_state_dict(self, state_dict: dict) -> None:
        state = torch.load(io.BytesIO(state_dict["blob"]), weights_only=False)
        if (state["risk"] is None) != (self.risk is None) or (state["modulator"] is None) != (self.modulator is None):
            raise ValueError("PPOLagSemHooks.load_state_dict: the state has risk head "
                             f"{state['risk'] is not None}, modulator {state['modulator'] is not None}; these hooks "
                             f"have {self.risk is not None}, {self.modulator is not None} (a different config)")
        for k, v in state["adapter"].items():
            setattr(self.adapter, k, v)
        for k, v in state["manager"].items():
            setattr(self.adapter.manager, k, v)
        if self.risk is not None:
            self.risk.head.load_state_dict(state["risk"]["head"])
            self.risk.optimizer.load_state_dict(state["risk"]["optimizer"])
            self.risk.generator.set_state(state["risk"]["generator"])
            self.risk.nan_events = state["risk"]["nan_events"]
            self.risk.corr = state["risk"].get("corr", 0.0)  # a checkpoint written before the gate: 0
        if self.modulator is not None:
            self.modulator.last = {"Risk/ModulationRaw": state["modulator"]["Risk/ModulationScale"],
                                   **state["modulator"]}

    def metadata(self) -> dict:
        """Run metadata (§13, §15.8): the configuration, prompt lists and their hash, load status, model
        identity (folder, cache revision, weights sha256, dtype, devices, library versions)."""
        m = self.adapter.manager
        report = m.report
        return dict(config=self.cfg.to_dict(), safe_prompts=list(self.cfg.safe_prompts),
                    unsafe_prompts=list(self.cfg.unsafe_prompts),
                    prompts_sha256=prompts_sha256(self.cfg.safe_prompts, self.cfg.unsafe_prompts),
                    status=report.status, device_status=report.device_status, host_device=str(m.host),
                    host_status=m.host_status, load_message=report.message, load_attempts=report.attempts,
                    model=m.backend.identity() if m.backend is not None else None)
