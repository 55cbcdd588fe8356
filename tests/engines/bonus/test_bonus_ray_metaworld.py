"""The bonus engine's real components: Meta-World token tasks and the Ray execution with two
trainer actors in one gloo process group, and its inference actor. Needs the `bonus` extra (cpu_gate installs
it). The Ray tests share one local Ray (started once: ~3 s)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rlspec import cli
from rlspec.engines import bonus
from rlspec.runs.compare import difference
from rlspec.runs.rundir import read_metrics

metaworld = pytest.importorskip("metaworld")
pytestmark = pytest.mark.xdist_group("ray")  # `pytest -n N --dist loadgroup`: one worker, one local Ray


def test_metaworld_tokens_map_to_actions_truncate_and_keep_ids_unique_after_a_restart():
    from rlspec.envs.metaworld_tokens import N_BINS, MetaWorldTokenVector

    envs = MetaWorldTokenVector("metaworld:reach-v3", 2, seed=0, first_env=4, episode_steps=5)
    obs = envs.reset()
    assert obs.shape == (2, 39) and envs.action_dim == 4
    np.testing.assert_array_equal(envs.values[[0, N_BINS // 2, N_BINS - 1]], [-1.0, 0.0, 1.0])
    for k in range(5):
        out = envs.step(np.full((2, 4), N_BINS // 2))
    assert out.truncated.all() and not out.terminated.any() and (envs.t == 0).all() and (envs.episodes == 2).all()
    same = MetaWorldTokenVector("metaworld:reach-v3", 2, seed=0, first_env=4, episode_steps=5)
    np.testing.assert_array_equal(same.reset(), obs)  # env i is made from (seed, global index)
    state = envs.state_dict()
    envs.load_state_dict(state)
    assert (envs.episodes > state["episodes"]).all() and (envs.t == 0).all()
    with pytest.raises(ValueError, match="'tokens' must be ints in"):
        envs.step(np.full((2, 4), N_BINS))


def test_unknown_metaworld_task_is_a_config_error():
    from rlspec.runs.config import ConfigError

    with pytest.raises(ConfigError, match="config key 'task': .*unknown Meta-World environment 'fly-v3'"):
        bonus.validate(bonus.build_config(overrides=["task=metaworld:fly-v3"]))


def test_local_engine_trains_on_metaworld(tmp_path):
    cfg = bonus.build_config("smoke", ["task=metaworld:reach-v3", "num_envs=2", "fragment_len=16",
                                       "total_steps=64", "episode_steps=20"])
    rows = read_metrics(bonus.run(cfg, tmp_path / "mw", show_progress=False))
    assert len(rows) == 2 and all(math.isfinite(r["Loss/Loss_pi"]) for r in rows)
    assert rows[-1]["Metrics/EpLen"] <= 20 and rows[-1]["episodes/finished"] >= 2


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _tiny(*overrides: str):
    """A short Ray run with every path taken: the EMA-best broadcast, bonus time, normalized observations (their
    statistics from the replay actor to the trainers, and with the weights to the workers or the actor)."""
    return bonus.build_config("smoke", ["execution=ray", "rollout_workers=2", "num_envs=2", "fragment_len=64",
                                        "best_workers=1", "best_every=2", "best_perturb_std=0.01",
                                        "learner.normalize_obs=true", *overrides])


def test_inference_actor_serves_what_each_worker_would_sample_itself(ray_session):
    """Same weights and seed: the actor's tokens and log-probabilities are the local policy's, worker by worker
    (worker 0 on the current weights, worker 1 on its perturbed copy of the EMA-best ones), in any request order."""
    from rlspec.algos.bonus_vtrace import BonusKit, act, load_policy, make_learner
    from rlspec.engines.bonus.ray import InferenceActor, make_policy, worker_generator
    from rlspec.envs.token_reach import TokenReachVector

    cfg = _tiny("inference=actor")
    envs = TokenReachVector(2, 0)
    dims = (envs.obs_dim, envs.action_dim, envs.n_bins)
    gen = torch.Generator().manual_seed(7)
    current, best = (make_learner(cfg.learner, *dims, BonusKit.reference(), gen).policy.state_dict() for _ in range(2))
    server = InferenceActor.remote(cfg, dims)
    ray_session.get([server.load_best_weights.remote(best), server.begin_round.remote(current)])
    obs = [torch.randn(2, dims[0], generator=gen) for _ in range(3)]
    served = {w: [] for w in (0, 1)}
    for o in obs:
        for w in (1, 0):  # requests interleaved, best worker first
            served[w].append(ray_session.get(server.act.remote(w, o)))
    for w, weights in ((0, current), (1, best)):
        policy, g = make_policy(cfg, dims), worker_generator(cfg, w)
        load_policy(policy, weights, cfg.best_perturb_std if w else 0.0, g)
        for o, (tokens, logp) in zip(obs, served[w]):
            t_ref, l_ref = act(policy, o, g)
            assert torch.equal(tokens, t_ref) and torch.equal(logp, l_ref)
    assert not torch.equal(served[0][0][1], served[1][0][1])  # the two workers' policies differ
    ray_session.kill(server)


def test_ray_run_with_the_inference_actor_is_the_run_with_worker_policies(ray_session):
    """inference=actor and inference=local draw the same numbers: a short token-reach run (EMA-best broadcast
    through the actor, bonus time included) logs identical metrics with finite losses, and a checkpoint
    round trip carries the actor's generators (the update after a restore is the update before it)."""
    from rlspec.engines.bonus.ray import RayWorld

    def updates(cfg, first: int, n: int, state: dict | None = None, save_after: int = 0):
        """(n updates' metrics from update ``first`` on, the world's state after ``save_after`` of them)."""
        w, out, saved = RayWorld(cfg), [], None
        try:
            if state is not None:
                w.load_state_dict(state)
            for k in range(first, first + n):
                out.append(w.train_update((k + 1) * bonus.steps_per_update(cfg)))
                saved = w.state_dict() if len(out) == save_after else saved
            return out, saved
        finally:
            w.close()

    rows = {"local": updates(_tiny("inference=local"), 0, 6)[0]}
    cfg = _tiny("inference=actor")
    bonus.validate(cfg)
    rows["actor"], state = updates(cfg, 0, 7, save_after=6)
    (resumed,), _ = updates(cfg, 6, 1, state)  # the checkpoint after 6 updates, in fresh actors
    drop = lambda r: {k: v for k, v in r.items() if k != "Time/env_steps_per_s"}  # noqa: E731
    for actor, local in zip(rows["actor"][:6], rows["local"], strict=True):
        assert drop(actor) == pytest.approx(drop(local), nan_ok=True, rel=0, abs=0)
    assert drop(resumed) == pytest.approx(drop(rows["actor"][6]), nan_ok=True, rel=0, abs=0)
    assert all(math.isfinite(r["Loss/Loss_pi"]) and math.isfinite(r["Loss/Loss_value"]) for r in rows["actor"])
    assert rows["actor"][-1]["episodes/finished"] > 0 and any(r["bonus/ran"] == 1 for r in rows["actor"])
    with pytest.raises(bonus.runconfig.ConfigError, match=r"config key 'inference': expected 'local' with execution "
                                                          r"local \(the key is execution ray's"):
        bonus.validate(bonus.build_config("smoke", ["inference=actor"]))


def test_ray_execution_two_trainers_stay_in_lockstep(tmp_path, ray_session):
    """Two trainer actors average gradients through gloo: after several updates (bonus time included) their
    weights are identical; the run logs finite losses and mines pairs; one worker acts with the perturbed EMA
    policy (off-policy fragments V-trace corrects)."""
    ray = ray_session
    from rlspec.engines.bonus.ray import RayWorld

    cfg = bonus.build_config("smoke", ["execution=ray", "rollout_workers=2", "trainers=2", "num_envs=2",
                                       "fragment_len=64", "best_workers=1", "best_every=3", "best_perturb_std=0.01",
                                       "learner.normalize_obs=true"])
    bonus.validate(cfg)
    w = RayWorld(cfg)
    try:
        rows = [w.train_update((k + 1) * bonus.steps_per_update(cfg)) for k in range(10)]
        w0, w1 = ray.get([t.weights.remote() for t in w.trainers])
        stats0, stats1 = w0.pop("norm._extra_state"), w1.pop("norm._extra_state")  # the observation statistics
        assert all(torch.equal(w0[k], w1[k]) for k in w0) and all(torch.equal(stats0[k], stats1[k]) for k in stats0)
        assert not torch.allclose(stats0["var"], torch.ones_like(stats0["var"]))  # every rank got the replay's
        assert all(math.isfinite(r["Loss/Loss_pi"]) for r in rows)
        assert rows[-1]["pairs/mined"] > 0 and rows[-1]["episodes/gaps"] == 0 and rows[-1]["bonus/errors"] == 0
        assert any(r["bonus/ran"] == 1 for r in rows)
        assert any(r["Train/RhoClipFrac"] > 0 for r in rows)  # the best worker's fragments are off-policy
        assert not torch.equal(w.best["net.0.weight"], w0["net.0.weight"])  # the EMA lags the weights
    finally:
        w.close()


def test_compare_runs_local_and_ray_side_by_side(tmp_path, ray_session):
    out = tmp_path / "cmp"
    code = cli.main(["compare", "bonus", "--preset", "smoke", "--quiet", "--out", str(out)])
    assert code == 0
    result = json.loads((out / "compare.json").read_text())
    assert set(result) == {"local", "ray", "difference"} and (out / "compare.png").stat().st_size > 0
    assert result["difference"]["EpRet"] == pytest.approx(difference(result["local"]["EpRet"], result["ray"]["EpRet"]))
    for name in ("local", "ray"):
        rows = read_metrics(out / name)
        tail = [r["Metrics/SuccessRate"] for r in rows[-max(1, len(rows) // 10):]
                if math.isfinite(r["Metrics/SuccessRate"])]
        assert result[name]["rows"] == len(rows) and result[name]["SuccessRate"] == pytest.approx(sum(tail) / len(tail))
        assert json.loads((out / name / "config.json").read_text())["config"]["execution"] == name
        assert cli.main(["eval", str(out / name), "--episodes", "2"]) == 0  # a Ray run's checkpoint evaluates too
        assert json.loads((out / name / "eval" / "eval.json").read_text())["episodes"] == 2
