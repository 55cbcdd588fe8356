"""Meta-World tasks with token actions, vectorized (success-set design's setting): ``metaworld:<name>-v3``.

Needs the `bonus` extra (metaworld 3.1.1, MuJoCo 3; no rendering). Each env is
``gymnasium.make("Meta-World/MT1", env_name=name, seed=...)``, stepped in this process.

Token scheme (the same as TokenReach-v0's): the continuous action a ∈ [-1, 1]^ACTION_DIM (Meta-World: 4 = the
end-effector's xyz velocity and the gripper) is discretized per dimension into N_BINS evenly spaced values,
token i ↦ -1 + 2i/(N_BINS − 1); the policy picks one token per dimension.

Episodes: ``terminate_on_success`` (default) ends an episode at the first step with info["success"]
(terminated: success is absorbing for the bonus phase's success pool); otherwise it runs to the limit.
``episode_steps`` (≤ Meta-World's 500) truncates. Env i is made with seed SeedSequence([seed, i]) and never
re-seeded, so a straight run is reproducible; MuJoCo state is not checkpointed: ``load_state_dict``
re-makes the envs from (seed, restarts) and starts fresh episodes (episodes in progress at the checkpoint
are lost, and the episode assembler counts them as gaps) — a resumed Meta-World run is not bit-identical
to a straight one, unlike TokenReach-v0.
"""

from __future__ import annotations

import numpy as np

from rlspec.envs.token_reach import TokenStep, require_tokens

N_BINS = 11
TOKEN_VALUES = np.linspace(-1.0, 1.0, N_BINS, dtype=np.float32)  # [N_BINS] token -> action value, per dimension
MAX_EPISODE_STEPS = 500  # Meta-World's max_path_length


def parse_task(task: str) -> str:
    """'metaworld:push-v3' -> 'push-v3' (checked against Meta-World's list)."""
    import metaworld

    name = task.split(":", 1)[1]
    if name not in metaworld.ALL_V3_ENVIRONMENTS:
        raise ValueError(f"task {task!r}: unknown Meta-World environment {name!r}; known: "
                         f"{', '.join(sorted(metaworld.ALL_V3_ENVIRONMENTS))}")
    return name


class MetaWorldTokenVector:
    n_bins = N_BINS

    def __init__(self, task: str, num_envs: int, seed: int, first_env: int = 0, episode_steps: int = 200,
                 terminate_on_success: bool = True):
        if not 1 <= episode_steps <= MAX_EPISODE_STEPS:
            raise ValueError(f"MetaWorldTokenVector: argument 'episode_steps' must be in [1, {MAX_EPISODE_STEPS}], "
                             f"got {episode_steps}")
        self.name = parse_task(task)
        self.num_envs, self.seed, self.first_env = num_envs, seed, first_env
        self.episode_steps, self.terminate_on_success = episode_steps, terminate_on_success
        self.restarts = 0
        self._make()
        self.obs_dim = self.envs[0].observation_space.shape[0]
        self.action_dim = self.envs[0].action_space.shape[0]
        self.values = TOKEN_VALUES  # [N_BINS] token -> action value

    def _make(self) -> None:
        import gymnasium
        import metaworld  # noqa: F401  (registers Meta-World/*)

        self.envs = [gymnasium.make("Meta-World/MT1", env_name=self.name, disable_env_checker=True,
                                    seed=int(np.random.SeedSequence([self.seed, self.first_env + i, self.restarts])
                                             .generate_state(1)[0]))
                     for i in range(self.num_envs)]
        self.episodes = np.zeros(self.num_envs, dtype=np.int64)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self._obs = np.zeros((self.num_envs, self.envs[0].observation_space.shape[0]), dtype=np.float32)

    def _start(self, i: int) -> None:
        self._obs[i] = self.envs[i].reset()[0]
        self.episodes[i] += 1
        self.t[i] = 0

    def obs(self) -> np.ndarray:
        return self._obs.copy()  # [N, OBS]

    def reset(self) -> np.ndarray:
        for i in range(self.num_envs):
            self._start(i)
        return self.obs()

    def step(self, tokens: np.ndarray) -> TokenStep:
        tokens = require_tokens("MetaWorldTokenVector.step", tokens, self.num_envs, self.action_dim, N_BINS)
        n = self.num_envs
        reward, success = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=bool)
        terminated, truncated = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        final_obs = np.zeros_like(self._obs)
        for i, env in enumerate(self.envs):
            obs, r, term, trunc, info = env.step(self.values[tokens[i]])
            self.t[i] += 1
            success[i] = bool(info["success"])
            terminated[i] = term or (self.terminate_on_success and success[i])
            truncated[i] = not terminated[i] and (trunc or self.t[i] >= self.episode_steps)
            reward[i], final_obs[i], self._obs[i] = r, obs, obs
            if terminated[i] or truncated[i]:
                self._start(i)
        return TokenStep(self.obs(), reward, terminated, truncated, success, final_obs)

    def state_dict(self) -> dict:
        return {"restarts": self.restarts, "episodes": self.episodes.copy()}

    def load_state_dict(self, state: dict) -> None:
        """Fresh envs and episodes (module docstring): episode counters continue, so episode ids stay unique."""
        episodes = state["episodes"].copy()
        self.restarts = state["restarts"] + 1
        self._make()
        self.reset()
        self.episodes = episodes + 1
