"""sheeprl 0.8.4's DreamerV3 config keys for rlspec's model sizes: the hydra overrides shared by the train-step
benchmark (dreamer_train_step.py) and the room benchmark (sheeprl_room.py). Imports no sheeprl.

The model's sizes, as both benchmarks name them: dense (sheeprl's dense_units = our RSSM / head width
``hidden``), recurrent (deter), stoch × classes, cnn_mult, and the hidden layers of the actor and critic
(``mlp_layers``; the actor-critic width ``mlp_hidden`` may differ from dense). rlspec's reward and continue heads
have one hidden layer whatever mlp_layers is (sheeprl's follow ``algo.mlp_layers`` unless set: set here).
"""

from __future__ import annotations

WM = "algo.world_model"
# size name -> the sheeprl keys it sets (algo.dense_units is also the default width of sheeprl's heads and decoder)
MODEL_KEYS: dict[str, tuple[str, ...]] = {
    "dense": ("algo.dense_units", f"{WM}.recurrent_model.dense_units", f"{WM}.transition_model.hidden_size",
              f"{WM}.representation_model.hidden_size"),
    "recurrent": (f"{WM}.recurrent_model.recurrent_state_size",),
    "stoch": (f"{WM}.stochastic_size",),
    "classes": (f"{WM}.discrete_size",),
    "cnn_mult": (f"{WM}.encoder.cnn_channels_multiplier",),  # the decoder's follows it
    "mlp_layers": ("algo.actor.mlp_layers", "algo.critic.mlp_layers"),
    "mlp_hidden": ("algo.actor.dense_units", "algo.critic.dense_units"),
}
HEAD_LAYERS = 1  # rlspec's reward and continue heads: one hidden layer, whatever mlp_layers is
HEADS = [f"algo.mlp_layers={HEAD_LAYERS}",
         *(f"{WM}.{head}.mlp_layers={HEAD_LAYERS}" for head in ("reward_model", "discount_model"))]


def model_overrides(*, dense: int, recurrent: int, stoch: int, classes: int, cnn_mult: int, mlp_layers: int,
                    mlp_hidden: int | None = None) -> list[str]:
    """The hydra overrides giving sheeprl's DreamerV3 rlspec's network sizes (``mlp_hidden`` defaults to dense)."""
    sizes = dict(dense=dense, recurrent=recurrent, stoch=stoch, classes=classes, cnn_mult=cnn_mult,
                 mlp_layers=mlp_layers, mlp_hidden=dense if mlp_hidden is None else mlp_hidden)
    return [*HEADS, *(f"{key}={sizes[name]}" for name, keys in MODEL_KEYS.items() for key in keys)]


def unfused_adam() -> list[str]:
    """torch's single-tensor Adam in all three optimizers (sheeprl's configs default to fused=True; ours is
    foreach=False)."""
    return [f"algo.{part}.optimizer.fused=False" for part in ("world_model", "actor", "critic")]
