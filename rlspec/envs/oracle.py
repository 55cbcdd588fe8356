"""The true margin of a safe-RL env's state: the oracle beside PPOLagSem's vision margin (PPOLagSem's
``semantic.margin_source=oracle``). The upper bound of what a perfect perceiver of "near a hazard" and "near the
goal" gives the same shaping design; nothing is rendered.
"""

from __future__ import annotations

import numpy as np


def oracle_margin(env) -> float:
    """The true margin of an env's state, the oracle of PPOLagSem's shaping (SemanticConfig.margin_source):
    m = (distance from the agent to the nearest hazard's edge) − (distance to the goal), in metres, the larger
    the safer and the closer to the goal. Safety-Gymnasium's goal tasks read it from the builder's task (agent,
    hazards, goal positions: nothing rendered); ToyGoal-v0 computes its own; any other env raises ValueError."""
    inner = getattr(env, "env", env)  # ForcedCost
    if hasattr(inner, "oracle_margin"):
        return inner.oracle_margin()
    task = getattr(getattr(inner, "unwrapped", inner), "task", None)
    if task is None or not hasattr(task, "hazards") or not hasattr(task, "dist_goal"):
        raise ValueError(f"oracle_margin: {type(inner).__name__} has no hazards and goal to measure (a Safety-"
                         f"Gymnasium goal task or ToyGoal-v0 is needed)")
    p = np.asarray(task.agent.pos)[:2]
    edges = [np.linalg.norm(p - np.asarray(h)[:2]) - task.hazards.size for h in task.hazards.pos]
    return float(min(edges) - task.dist_goal())
