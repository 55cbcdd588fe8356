"""PPOLagSem's semantic side (PPOLagSem design): a frozen vision-language model shapes rewards early, a risk head
learns the truncated discounted cost from its embeddings, and the risk predictions may damp the
Lagrange multiplier's learning rate. Strictly opt-in: this package's ``__init__`` imports nothing
(``build_hooks`` imports the hooks only for an enabled config), and
``rlspec.semantics.config`` (the only module an engine reads while ``enable`` is False) imports neither
transformers nor the shaping contract (§25.16, contract ``parity`` PARITY-3).

Modules (imports point down; each is imported only when semantics are enabled):
    config      SemanticConfig: every §8 field, validated, one docstring per field
    backend     VisionLanguageBackend: AutoModel/AutoProcessor, safetensors only, dtype fallback, devices
    manager     SemanticManager: centroids, batched embedding with OOM backoff, margin → shaping
    risk        RiskBuffer, RiskHead, RiskTrainer: the auxiliary truncated-discounted-cost predictor
    modulation  LambdaModulator: the λ learning-rate scale from the risk predictions
    adapter     SemanticRewardAdapter: the reward hook (fail-soft), telemetry counters
    hooks       PPOLagSemHooks: the three calls an engine makes (shape rewards, after update, λ scale)
    telemetry   the logged keys (§7, §15.5, §28.2)
    tiny        tiny random CLIP / SigLIP folders built offline (tests, benchmarks, smoke runs)
    probe       ``rlspec probe``: prompt-centroid separability and annotated frames (§30)
"""


def build_hooks(cfg, *, num_envs: int, gamma: float, total_steps: int, seed: int, kit: str = "fast"):
    """The engine's one call: ``PPOLagSemHooks`` for an enabled ``SemanticConfig``, ``None`` for a disabled
    one — and then nothing semantic is imported or allocated (§25.16), so the run is plain PPOLag. ``kit``
    (the run's, reference or fast) chooses the shaping, modulation and risk_target implementations as it
    chooses the core's."""
    if not cfg.enable:
        return None
    from rlspec.semantics.hooks import PPOLagSemHooks
    from rlspec.semantics.kit import SemanticKit

    return PPOLagSemHooks(cfg, num_envs=num_envs, gamma=gamma, total_steps=total_steps, seed=seed,
                          kit=SemanticKit.named(kit))
