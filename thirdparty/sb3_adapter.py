"""Stable-Baselines3 2.9.2 behind contracts ``gae``, ``numerics`` (its normalizers) and ``collector``.

gae (``RolloutBuffer.compute_returns_and_advantage`` + the timeout bootstrap of
``OnPolicyAlgorithm.collect_rollouts``; spec/gae.py)
    SB3's buffer has no truncation flag: its collect loop folds the bootstrap into the reward,
    ``rewards += gamma * V(terminal_obs)`` where the step hit a time limit (truncated and not
    terminated), and ends the episode either way. The adapter builds exactly what that loop hands the
    buffer (golden_bridge/sb3_rollout_buffer.py checks this conversion against SB3 itself):
    rewards (float32, a VecEnv's reward buffer) += γ·next_value on time-limit steps (the loop's own
    statement, next_value as the float32 [1] tensor ``predict_values`` returns), episode_starts =
    cat(1, done[:-1]) with done = terminated or truncated, last_values = next_value[T−1], dones =
    done[T−1]; fills a real
    ``RolloutBuffer`` (n_envs = the flattened batch) through ``add`` and returns its advantages and
    returns. Flags enter as floats: 0/1 flags give exactly SB3's booleans.
numerics (``RunningMeanStd``, ``VecNormalize.normalize_obs``; spec/numerics/)
    RunningMeanStd(shape, epsilon) = SB3's ``RunningMeanStd(epsilon, shape)`` on numpy arrays (state read
    back as float64 tensors; ``state_dict`` / ``load_state_dict`` move its three attributes).
    ObsNormalizer(shape, epsilon, clip): ``commit(batch)`` = ``obs_rms.update(batch)`` (what VecNormalize
    does on every step in training mode), ``normalize(obs)`` = ``VecNormalize.normalize_obs`` (statistics
    untouched) run on a stand-in holding VecNormalize's attributes (clip_obs, epsilon, norm_obs, obs_rms).
    SB3 has no counterpart of the other numerics names (PPO's advantage normalization, ratio clipping
    and losses are inline in ``PPO.train``): they are unsupported.
collector (``OnPolicyAlgorithm.collect_rollouts`` filling PPO's ``RolloutBuffer``; spec/collector.py)
    A real ``PPO("MlpPolicy", DummyVecEnv([Monitor(f()) for f in envs.env_fns]), n_steps=steps)`` (SB3's own
    same-step vector, whatever the given vector's mode), ``_setup_learn`` then one ``collect_rollouts``, as
    ``learn`` does. Rows are the buffer's: observations, actions (the Gaussian samples; the env gets them
    clipped), rewards (with SB3's γ·V(terminal_observation) folded in at a time limit). The buffer keeps no
    next state: next_obs is the next row's observation inside an episode (``_last_obs`` after the last row),
    NaN at an episode end (the final observation went into V and is not stored). Its only flag is done =
    terminated or truncated (``episode_starts`` of the next row, ``_last_episode_starts`` after the last):
    terminated = done, truncated = False, which is what the buffer's GAE reads. Episodes are the Monitors'
    (per env, in order). SB3 refuses n_steps·n_envs <= 1 (PPO's assertion): those examples are unsupported.
trainer (``PPO.learn`` with ``CheckpointCallback``, ``PPO.save`` / ``PPO.load``; spec/trainer.py)
    A PPO on Pendulum-v1 (a DummyVecEnv of one env; n_steps = batch_size = UNIT = 64, one epoch, a [16] MLP), as
    SB3's docs save and resume: a fresh run is ``PPO(..., seed=seed).learn(N, callback=CheckpointCallback(
    save_freq=UNIT))`` and a final ``save``; a resume loads the newest saved model (``PPO.load(path, env=...)``;
    none saved: a fresh run) and calls ``learn(N − num_timesteps, reset_num_timesteps=False)``, then ``save``.
    The fingerprint is the newest save's policy parameters, optimizer state and num_timesteps; steps its
    num_timesteps.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import CheckpointCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.running_mean_std import RunningMeanStd as _SB3RunningMeanStd
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.vec_normalize import VecNormalize

from rlspec.thirdparty import LITERAL_CUT, Declared, Unsupported, unsupported

LIBRARY = "stable-baselines3 2.9.2"
CONTRACTS = ("gae", "numerics", "collector", "trainer")


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def gae(reward, value, terminated, truncated, next_value, gamma, lam):
    T, batch = value.shape[0], value.shape[1:]
    n = math.prod(batch)
    flat = lambda t: t.reshape(t.shape[0], math.prod(t.shape[1:]))  # noqa: E731 - [T, *B] -> [T, N]
    term, trunc = flat(terminated).to(value.dtype), flat(truncated).to(value.dtype)
    done = 1 - (1 - term) * (1 - trunc)  # terminated or truncated (gym's done) [T, N]
    time_limit = (trunc * (1 - term)) != 0  # infos["TimeLimit.truncated"]
    rewards = _numpy(flat(reward)).astype(np.float32)  # a VecEnv's reward buffer is float32 [T, N]
    for t, i in time_limit.nonzero().tolist():
        terminal_value = flat(next_value)[t, i:i + 1].float()  # policy.predict_values(terminal_obs)[0]: [1]
        rewards[t][i] += gamma * terminal_value  # the collect loop's statement, as written there
    episode_starts = torch.cat([torch.ones(1, n, dtype=value.dtype), done[:-1]])  # [T, N]
    buffer = RolloutBuffer(T, spaces.Box(-1.0, 1.0, (1,), np.float32), spaces.Box(-1.0, 1.0, (1,), np.float32),
                           device="cpu", gae_lambda=lam, gamma=gamma, n_envs=n)
    zeros = np.zeros((n, 1), np.float32)
    for t in range(T):
        buffer.add(zeros, zeros, rewards[t], _numpy(episode_starts[t]), flat(value)[t].detach().clone(),
                   torch.zeros(n))
    last = flat(next_value)[-1] if T else torch.zeros(n, dtype=value.dtype)
    last_done = _numpy(done[-1]) if T else np.zeros(n)
    buffer.compute_returns_and_advantage(last_values=last.detach().clone(), dones=last_done)
    advantages = torch.from_numpy(buffer.advantages.copy()).reshape(T, *batch)
    returns = torch.from_numpy(buffer.returns.copy()).reshape(T, *batch)
    return advantages, returns


class RunningMeanStd:
    def __init__(self, shape=(), epsilon=1e-4):
        self._impl = _SB3RunningMeanStd(epsilon=epsilon, shape=shape)

    def update(self, x: torch.Tensor) -> None:
        self._impl.update(_numpy(x))

    @property
    def mean(self) -> torch.Tensor:
        return torch.as_tensor(np.array(self._impl.mean, dtype=np.float64))

    @property
    def var(self) -> torch.Tensor:
        return torch.as_tensor(np.array(self._impl.var, dtype=np.float64))

    @property
    def count(self) -> torch.Tensor:
        return torch.tensor(float(self._impl.count), dtype=torch.float64)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self._impl.mean = _numpy(torch.as_tensor(state["mean"])).copy()
        self._impl.var = _numpy(torch.as_tensor(state["var"])).copy()
        self._impl.count = float(state["count"])


class _VecNormalizeState:
    """The attributes VecNormalize.normalize_obs reads, without a VecEnv; SB3's own methods run on it."""

    norm_obs = True
    normalize_obs = VecNormalize.normalize_obs
    _normalize_obs = VecNormalize._normalize_obs

    def __init__(self, obs_rms: _SB3RunningMeanStd, clip_obs: float, epsilon: float):
        self.obs_rms, self.clip_obs, self.epsilon = obs_rms, clip_obs, epsilon


class ObsNormalizer:
    def __init__(self, shape=(), epsilon=1e-8, clip=10.0):
        self.rms = RunningMeanStd(shape=shape)
        self._vec = _VecNormalizeState(self.rms._impl, clip, epsilon)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self._vec.normalize_obs(_numpy(obs)))

    def commit(self, batch: torch.Tensor) -> None:
        self.rms.update(batch)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state)


_INLINE = "SB3 has no standalone counterpart (PPO.train computes it inline)"
safe_standardize = unsupported("safe_standardize", _INLINE)
safe_zero_center = unsupported("safe_zero_center", _INLINE)
ratio_guard = unsupported("ratio_guard", _INLINE)
LossGuard = unsupported("LossGuard", "SB3 has no loss guard")
masked_component_weights = unsupported("masked_component_weights", "SB3 has no per-component reward weighting")
kl_early_stop = unsupported("kl_early_stop", _INLINE + " (target_kl check inside the epoch loop)")
kl_guarded_updates = unsupported("kl_guarded_updates", _INLINE + " (target_kl check inside the epoch loop)")
value_loss = unsupported("value_loss", _INLINE)
masked_mean = unsupported("masked_mean", "SB3 has no per-head action masks")
masked_policy_loss = unsupported("masked_policy_loss", "SB3 has no per-head action masks")
entropy_loss = unsupported("entropy_loss", _INLINE)

FLOAT32_BUFFER = ("RolloutBuffer stores rewards, values, advantages and returns in float32 numpy arrays "
                  "whatever the input dtype (buffers.py)")

def collect(envs, obs, policy, steps):
    n = envs.num_envs
    if steps * n <= 1:
        raise Unsupported(f"PPO asserts n_steps * n_envs > 1: got {steps} steps of {n} envs")
    vec = DummyVecEnv([lambda f=f: Monitor(f()) for f in envs.env_fns])
    model = PPO("MlpPolicy", vec, n_steps=steps, batch_size=steps * n, seed=0, device="cpu")
    _, callback = model._setup_learn(steps * n, callback=None)
    callback.on_training_start(locals(), globals())
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=steps)
    buf = model.rollout_buffer
    observations = buf.observations.reshape(steps, n, -1)  # [T, N, 4]
    done = np.concatenate([buf.episode_starts[1:], model._last_episode_starts[None]]).astype(bool)  # [T, N]
    following = np.concatenate([observations[1:], model._last_obs[None]])  # [T, N, 4]
    next_obs = np.where(done[..., None], np.nan, following)
    rows = dict(obs=observations, action=buf.actions.reshape(steps, n, -1), reward=buf.rewards, next_obs=next_obs,
                terminated=done, truncated=np.zeros_like(done))
    episodes = []
    for i, env in enumerate(vec.envs):
        episodes += [(i, r, length) for r, length in zip(env.get_episode_rewards(), env.get_episode_lengths())]
    return dict({k: v.reshape(steps * n, *v.shape[2:]) for k, v in rows.items()}, episodes=episodes)


UNIT = 64  # env steps of one rollout (n_steps of one env), then one update; MAX_STEPS defaults to 4 of them


def _model(seed: int) -> PPO:
    env = DummyVecEnv([lambda: gymnasium.make("Pendulum-v1")])
    return PPO("MlpPolicy", env, n_steps=UNIT, batch_size=UNIT, n_epochs=1, seed=seed, device="cpu",
               policy_kwargs=dict(net_arch=[16]))


def _newest(out: Path) -> Path | None:
    """The saved model with the most steps (CheckpointCallback's ppo_<steps>_steps.zip)."""
    saved = sorted(out.glob("ppo_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1]))
    return saved[-1] if saved else None


def run(out, total_steps, seed, resume):
    out = Path(out)
    newest = _newest(out) if resume and out.is_dir() else None
    model = _model(seed) if newest is None else PPO.load(newest, env=_model(seed).get_env(), device="cpu")
    callback = CheckpointCallback(save_freq=UNIT, save_path=str(out), name_prefix="ppo")
    model.learn(total_steps - model.num_timesteps, callback=callback, reset_num_timesteps=newest is None)
    model.save(out / f"ppo_{model.num_timesteps}_steps.zip")


def steps(out):
    return PPO.load(_newest(Path(out)), device="cpu").num_timesteps


def fingerprint(out):
    model = PPO.load(_newest(Path(out)), device="cpu")
    return dict(policy=model.policy.state_dict(), optimizer=model.policy.optimizer.state_dict(),
                num_timesteps=model.num_timesteps)


NOT_RESUMED = ("PPO.save keeps the policy and its optimizer, not the env's state, the last observation or the "
               "torch / numpy / env generators (issues #1277, #1016); a loaded model resets its env and draws on "
               "from the generators as they are: a resumed run learns from other samples than the straight run")

NO_NEXT_STATE = ("RolloutBuffer keeps no next state: collect_rollouts folds γ·V(terminal_observation) into the "
                 "reward at a time limit and drops the final observation (the adapter stores NaN there)")

DECLARED = {
    "COLL-1": Declared("difference", "at a time limit the stored reward is r + γ·V(terminal_observation): "
                                     "collect_rollouts' timeout bootstrap (its issue #633) folded into the reward"),
    "COLL-2": Declared("difference", NO_NEXT_STATE),
    "TRAIN-3": Declared("difference", NOT_RESUMED),
    "TRAIN-4": Declared("difference", NOT_RESUMED + "; and PPO.save writes its zip in place, so a kill during a "
                                      "save can leave a file PPO.load refuses (\"No data found in the saved file\")"),
    "COLL-5": Declared("difference", "the buffer's only flag is done = terminated or truncated (episode_starts of "
                                     "the next row); a truncation's bootstrap lives in the reward instead"),
    "NUM-21": Declared("accepts", "RunningMeanStd(epsilon) checks nothing: a negative epsilon becomes the "
                                   "initial count"),
    "NUM-23": Declared("bug", "RunningMeanStd keeps count = epsilon as given: a np.float32 epsilon makes "
                                "the count, and the weights of every later update, float32"),
    "GAE-13": Declared("difference", f"RolloutBuffer.compute_returns_and_advantage {LITERAL_CUT}"),
    "GAE-1": Declared("difference", FLOAT32_BUFFER + ": float64 rollouts come back rounded to float32"),
    "GAE-3": Declared("difference", FLOAT32_BUFFER + ": the bootstrap's effect is rounded to float32"),
    "GAE-7": Declared("difference", FLOAT32_BUFFER + ": float64 inputs give float32 advantages and returns"),
    "GAE-9": Declared("accepts", "no input checks: a shape mismatch fails in torch/numpy broadcasting without "
                                 "naming the argument; a dtype mismatch is cast to float32 silently"),
    "GAE-10": Declared("accepts", "no input checks: gamma and gae_lambda outside [0, 1] are used as given"),
    "GAE-11": Declared("accepts", "no input checks: NaN/Inf rewards and values propagate into the advantages"),
    "GAE-12": Declared("bug", "gamma / gae_lambda are used as given: a np.float64 makes numpy (NEP 50) compute "
                              "the float32 buffer's recursion in float64, other bits; a 0-d tensor crashes "
                              "compute_returns_and_advantage (TypeError mixing tensor and ndarray); take float() "
                              "in RolloutBuffer.__init__"),
    "NUM-8": Declared("accepts", "RunningMeanStd.update checks nothing: a NaN/Inf batch poisons mean and var for "
                                 "good, an empty batch gives NaN statistics (numpy warns), integer batches pass"),
    "NUM-10": Declared("difference", "VecNormalize.normalize_obs casts normalized observations to float32 "
                                     "(.astype(np.float32)) whatever the input dtype"),
    "NUM-30": Declared("accepts", "VecNormalize updates obs_rms with whatever it is given (RunningMeanStd.update "
                                  "checks nothing): one NaN observation poisons the statistics for good"),
}
