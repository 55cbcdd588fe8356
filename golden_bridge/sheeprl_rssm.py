"""Golden fixture from sheeprl 0.8.4's DreamerV3 RSSM (``sheeprl.algos.dreamer_v3.agent.RSSM``), built as
its ``build_agent`` builds it (RecurrentModel, RepresentationModel, transition MLP; LayerNorm eps 1e-3,
SiLU, learned initial state, unimix 0.01) at a tiny size, with weights drawn here and stored in our layout.

The unroll is sheeprl's ``train`` loop: ``project_observations`` once, ``dynamic(..., projected=True)`` per
step with its shifted actions (zero at t = 0), ``prior_logits`` of the whole sequence. sheeprl samples the
posterior from the global RNG; the fixture replaces each of its samples, before the next step, by the
spec's sampler applied to sheeprl's posterior logits (inverse CDF on ``rand((B, S), generator)``), so the
samples are stored indices that an implementation of the contract reproduces with the same generator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from sheeprl.algos.dreamer_v3.agent import RSSM, RecurrentModel, RepresentationModel
from sheeprl.models.models import MLP, LayerNorm
from torch import nn

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "sheeprl"
H, HIDDEN, S, K, E, A = 8, 8, 4, 4, 5, 3  # deter, hidden, stoch, classes, embed_dim, num_actions
T, B = 6, 3
UNIMIX, LN_EPS = 0.01, 1e-3

# sheeprl's state_dict names -> the contract's layout (rlspec.contracts.rssm.RSSMParameters)
NAMES = {
    "initial_recurrent_state": "initial_h",
    "recurrent_model.mlp._model.0.weight": "img_in.weight",
    "recurrent_model.mlp._model.1.weight": "img_in_norm.weight",
    "recurrent_model.mlp._model.1.bias": "img_in_norm.bias",
    "recurrent_model.rnn.linear.weight": "gru.weight",
    "recurrent_model.rnn.layer_norm.weight": "gru_norm.weight",
    "recurrent_model.rnn.layer_norm.bias": "gru_norm.bias",
    "representation_model._model.0.weight": "post_hidden.weight",
    "representation_model._model.1.weight": "post_norm.weight",
    "representation_model._model.1.bias": "post_norm.bias",
    "representation_model._model.3.weight": "post_out.weight",
    "representation_model._model.3.bias": "post_out.bias",
    "transition_model._model.0.weight": "prior_hidden.weight",
    "transition_model._model.1.weight": "prior_norm.weight",
    "transition_model._model.1.bias": "prior_norm.bias",
    "transition_model._model.3.weight": "prior_out.weight",
    "transition_model._model.3.bias": "prior_out.bias",
}


def _round(t: torch.Tensor, step: float = 1 / 64) -> torch.Tensor:
    return (torch.round(t / step) * step).float()


def build_sheeprl_rssm(deter: int = H, hidden: int = HIDDEN, stoch: int = S, classes: int = K, embed_dim: int = E,
                       num_actions: int = A) -> RSSM:
    """sheeprl's RSSM as its build_agent makes it (stoch·classes latent, one hidden layer per MLP)."""
    ln = dict(eps=LN_EPS)
    sk = stoch * classes
    mlp_args = dict(hidden_sizes=[hidden], activation=nn.SiLU, layer_args={"bias": False}, flatten_dim=None,
                    norm_layer=[LayerNorm], norm_args=[dict(ln, normalized_shape=hidden)])
    recurrent = RecurrentModel(input_size=num_actions + sk, recurrent_state_size=deter, dense_units=hidden,
                               activation_fn=nn.SiLU, layer_norm_cls=LayerNorm, layer_norm_kw=dict(ln))
    representation = RepresentationModel(deter, input_dims=deter + embed_dim, output_dim=sk, **mlp_args)
    transition = MLP(input_dims=deter, output_dim=sk, **mlp_args)
    return RSSM(recurrent, representation, transition, distribution_cfg={"validate_args": False}, discrete=classes,
                unimix=UNIMIX, learnable_initial_recurrent_state=True)


def load_our_weights(rssm: RSSM, state_dict: dict[str, torch.Tensor]) -> None:
    """Copy weights in the contract's layout into sheeprl's RSSM."""
    rssm.load_state_dict({name: state_dict[key] for name, key in NAMES.items()})


def _weights(rssm: RSSM, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Our-layout weights: LayerNorm affine near (1, 0), linear weights U(±1/√fan_in)·2, W of h0 ~ N(0, 1)."""
    ours = {}
    for name, p in rssm.state_dict().items():
        key = NAMES[name]
        if key.endswith("norm.weight"):
            v = 1 + 0.2 * torch.randn(p.shape, generator=g)
        elif key.endswith("norm.bias") or key.endswith("out.bias") or key == "initial_h":
            v = (0.2 if key != "initial_h" else 1.0) * torch.randn(p.shape, generator=g)
        else:
            v = (2 * torch.rand(p.shape, generator=g) - 1) * 2 / p.shape[-1] ** 0.5
        ours[key] = _round(v)
    load_our_weights(rssm, ours)
    return ours


def _sample(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The spec's sampler: [B, S, K] log-probs, u [B, S] -> class index [B, S] (inverse CDF)."""
    return (logits.softmax(-1).cumsum(-1)[..., :-1] < u.unsqueeze(-1)).sum(-1)


def rssm_observe(seed: int = 0) -> Fixture:
    torch.manual_seed(seed)  # sheeprl draws its own (discarded) samples from the global RNG
    g = torch.Generator().manual_seed(seed)
    rssm = build_sheeprl_rssm()
    weights = _weights(rssm, g)
    embed = _round(torch.randn(T, B, E, generator=g), 1 / 16)  # [T, B, E]
    action = torch.randint(0, A, (T, B), generator=g)  # [T, B] ours: taken at obs t
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = True  # sheeprl's train() sets it
    is_first[2, 0] = is_first[4, 1] = is_first[5, 1] = True  # mid-sequence, and two in a row
    img_action = torch.randint(0, A, (B,), generator=g)
    sampler = torch.Generator().manual_seed(seed)  # the sampler's uniforms: rand((B, S)) per step

    # sheeprl's row layout: row t holds the previous action, zero at t = 0 (dreamer_v3.train)
    onehot = F.one_hot(action, A).float()
    batch_actions = torch.cat((torch.zeros_like(onehot[:1]), onehot[:-1]))  # [T, B, A]
    first = is_first.float().unsqueeze(-1)  # [T, B, 1]
    with torch.no_grad():
        initial = rssm.get_initial_states((1, B))
        h = torch.zeros_like(initial[0])
        z = torch.zeros_like(initial[1])
        projection = rssm.project_observations(embed)
        hs, posts, index = [], [], []
        for t in range(T):
            h, _, post = rssm.dynamic(z, h, batch_actions[t:t + 1], projection[t:t + 1], first[t:t + 1],
                                      initial, projected=True)
            post = post.view(1, B, S, K)
            i = _sample(post[0], torch.rand((B, S), generator=sampler))  # replaces sheeprl's sample
            z = F.one_hot(i, K).float().view(1, B, S, K)
            hs.append(h)
            posts.append(post)
            index.append(i)
        hs = torch.cat(hs)  # [T, B, H]
        priors = rssm.prior_logits(hs).view(T, B, S, K)
        # one imagination step from the last state (sheeprl's imagination(), its prior sample replaced)
        img_h = rssm.recurrent_model(torch.cat((z.flatten(-2), F.one_hot(img_action, A).float()[None]), -1), h)
        img_prior = rssm._transition(img_h)[0].view(B, S, K)  # [1, B, S*K] -> [B, S, K]
        img_h = img_h[0]  # [B, H]
        img_index = _sample(img_prior, torch.rand((B, S), generator=sampler))
    return Fixture(
        path="rssm/sheeprl_observe.json", contract="rssm", package=PACKAGE,
        qualname="sheeprl.algos.dreamer_v3.agent.RSSM.dynamic/prior_logits/imagination", seed=seed,
        atol=1e-5, rtol=1e-5,
        why="float32: sheeprl splits the posterior's first layer (project_observations + the h part) and "
            "resets by (1-f)·x + f·x0; a few ulp per step over T = 6 steps",
        convention="action[t] is ours (taken at obs t); sheeprl got row t = onehot(action[t-1]), 0 at t = 0. "
                   "is_first[0] = 1 as sheeprl's train(). Samples: sheeprl's own replaced by the spec's "
                   "inverse-CDF sampler on its logits with u = rand((B, S), Generator().manual_seed(seed)), "
                   "T draws for observe then one for img_step(state.h, state.z, img_action); indices stored "
                   "as float. Logits [T, B, S*K] stored as [T, B, S, K]. Weights stored in our layout "
                   "(golden_bridge/sheeprl_rssm.py NAMES)",
        inputs=dict(**{f"weight.{k}": v for k, v in weights.items()}, embed=embed, action=action.float(),
                    is_first=is_first.float(), img_action=img_action.float()),
        expected=dict(prior_logits=priors, post_logits=torch.cat(posts), h=hs, z_index=torch.stack(index).float(),
                      img_prior_logits=img_prior, img_h=img_h, img_z_index=img_index.float()))


GENERATORS = [rssm_observe]
