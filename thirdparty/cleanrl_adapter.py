"""CleanRL 1.2.0's ``ppo.py`` GAE block behind contract ``gae`` (spec/gae.py).

CleanRL keeps each algorithm as one script (PyPI ``cleanrl`` 1.2.0 supports Python < 3.11 only), so the
adapter reads ``cleanrl/ppo.py`` out of the pinned wheel (rlspec.thirdparty.wheel), finds the block that
computes the advantages (the ``with torch.no_grad():`` statement after "bootstrap value if not done") with
``ast`` and executes that block, unchanged, on the contract's inputs.

Conversion: ppo.py stores ``dones[t]`` = the done flag *before* step t (``dones[step] = next_done``) with
gym's done = terminated or truncated, and ``next_done`` = the flag after the last step. So rewards = r,
values = v, dones = cat(0, done[:-1]), next_done = done[T−1], and ``agent.get_value(next_obs)`` returns
next_value[T−1] (the bootstrap at the rollout cut). The batch is flattened to ppo.py's [num_steps,
num_envs]. Flags enter as floats (1 − (1 − terminated)(1 − truncated)): 0/1 flags give exactly ppo.py's.
"""

from __future__ import annotations

import ast
import math
import textwrap
import types

import torch

from rlspec.thirdparty import Declared, LITERAL_CUT
from rlspec.thirdparty.wheel import read_source

LIBRARY = "cleanrl 1.2.0 (ppo.py)"
CONTRACTS = ("gae",)


def _gae_block() -> types.CodeType:
    """The compiled advantage block of ppo.py: the ``with`` statement whose body assigns lastgaelam."""
    source, filename = read_source("cleanrl", "1.2.0", "cleanrl/ppo.py")
    blocks = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.With)
              and any(isinstance(n, ast.Name) and n.id == "lastgaelam" for n in ast.walk(node))]
    if len(blocks) != 1:
        raise LookupError(f"{filename}: expected one `with` block computing lastgaelam, found {len(blocks)}")
    return compile(textwrap.dedent(ast.get_source_segment(source, blocks[0])), f"{filename}:{blocks[0].lineno}",
                   "exec")


_BLOCK = _gae_block()


class _Agent:
    """What the block asks of ppo.py's Agent: the value of the observation after the last step."""

    def __init__(self, value: torch.Tensor):
        self._value = value

    def get_value(self, next_obs) -> torch.Tensor:
        return self._value


def gae(reward, value, terminated, truncated, next_value, gamma, lam):
    T, batch = value.shape[0], value.shape[1:]
    flat = lambda t: t.reshape(t.shape[0], math.prod(t.shape[1:]))  # noqa: E731 - [T, *B] -> [T, N]
    done = 1 - (1 - flat(terminated).to(value.dtype)) * (1 - flat(truncated).to(value.dtype))  # [T, N]
    n = flat(value).shape[1]
    namespace = dict(
        torch=torch, device="cpu", next_obs=None,
        agent=_Agent(flat(next_value)[-1] if T else torch.zeros(n, dtype=value.dtype)),
        args=types.SimpleNamespace(num_steps=T, gamma=gamma, gae_lambda=lam),
        rewards=flat(reward), values=flat(value),
        dones=torch.cat([torch.zeros(1, n, dtype=value.dtype), done[:-1]]) if T else done,
        next_done=done[-1] if T else torch.zeros(n, dtype=value.dtype))
    exec(_BLOCK, namespace)  # noqa: S102 - ppo.py's own advantage block, unchanged
    return namespace["advantages"].reshape(T, *batch), namespace["returns"].reshape(T, *batch)


NO_BOOTSTRAP = ("ppo.py ends the episode on done = terminated or truncated and never bootstraps a time limit "
                "(spec/gae.py names CleanRL's convention); bootstrap V(final_observation) on truncation as SB3 does")
DECLARED = {
    "GAE-13": Declared("difference", f"ppo.py's advantage loop {LITERAL_CUT}"),
    "GAE-1": Declared("difference", NO_BOOTSTRAP + " (advantages differ on every truncated episode)"),
    "GAE-3": Declared("difference", NO_BOOTSTRAP + " (next_value at a truncated step changes nothing)"),
    "GAE-12": Declared("difference", "ppo.py's args come from tyro as Python floats; handed np.float32 values "
                                     "the block computes args.gamma * args.gae_lambda in float32 (NEP 50), "
                                     "other bits"),
    "GAE-9": Declared("accepts", "a script block, no input checks: a shape mismatch fails in torch broadcasting "
                                 "without naming the argument"),
    "GAE-10": Declared("accepts", "no input checks: args.gamma and args.gae_lambda outside [0, 1] are used as given"),
    "GAE-11": Declared("accepts", "no input checks: NaN/Inf rewards and values propagate into the advantages"),
}
