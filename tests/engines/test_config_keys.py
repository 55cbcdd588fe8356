"""Keys never do nothing (rlspec/runs/config.py, rlspec/runs/shell.py): a key one execution owns (its field
docstring begins "device:", "parallel:", "Ray:") is refused under the others, for every such key of every engine
by construction; a key given two values, or set against the key that decides it (bonus's --ablation), is
refused naming both; `rlspec compare` runs each execution with the other's keys reset."""

from __future__ import annotations

import dataclasses

import pytest

from rlspec import cli
from rlspec.engines.bonus.config import EXECUTIONS as BONUS_EXECUTIONS
from rlspec.engines.bonus.config import BonusConfig
from rlspec.engines.dreamer.config import EXECUTIONS as DREAMER_EXECUTIONS
from rlspec.engines.dreamer.config import DreamerRunConfig
from rlspec.engines.safe.config import EXECUTIONS as SAFE_EXECUTIONS
from rlspec.engines.safe.config import PARALLEL_ONLY, SafeConfig
from rlspec.runs import config as runconfig

ENGINES = {"safe": (SafeConfig, SAFE_EXECUTIONS, PARALLEL_ONLY), "dreamer": (DreamerRunConfig, DREAMER_EXECUTIONS, None),
           "bonus": (BonusConfig, BONUS_EXECUTIONS, None)}


def _other_value(value):
    """A valid-looking value other than ``value`` of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return {"auto": "cpu", "cpu": "cuda", "fast": "fast-triton", "local": "actor"}.get(value, f"{value}-other")


def test_every_engine_has_keys_owned_by_an_execution_and_they_are_the_documented_ones():
    owned = {name: runconfig.owned_keys(cls, executions) for name, (cls, executions, _) in ENGINES.items()}
    assert owned["safe"] == {"env_workers": "parallel", "learner_steps": "parallel", "device": "parallel"}
    assert owned["dreamer"] == dict.fromkeys(("kit", "device", "steps_per_rollout", "commit_stride", "sync_every",
                                              "value_checks"), "device")
    assert owned["bonus"] == dict.fromkeys(("rollout_workers", "trainers", "inference", "best_workers",
                                            "best_every", "best_ema", "best_perturb_std"), "ray")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_key_of_another_execution_is_refused_naming_it_and_its_execution(engine):
    cls, executions, inert = ENGINES[engine]
    owners = runconfig.owned_keys(cls, executions)
    for key, owner in owners.items():
        for execution in executions:
            if execution == owner:
                continue
            base = dataclasses.replace(cls(), execution=execution, **{k: v for k, v in runconfig.inert_values(
                cls, executions, inert).items()})
            runconfig.refuse_other_executions(base, executions, inert)  # the inert values pass
            wrong = dataclasses.replace(base, **{key: _other_value(getattr(base, key))})
            with pytest.raises(runconfig.ConfigError) as err:
                runconfig.refuse_other_executions(wrong, executions, inert)
            assert str(err.value).startswith(f"config key {key!r}: expected ")
            assert f"with execution {execution} (the key is execution {owner}'s: it does nothing here)" in str(err.value)
            ran = runconfig.for_execution(wrong, execution, executions, inert)  # compare's other run: reset
            assert getattr(ran, key) == getattr(base, key) and ran.execution == execution
            runconfig.refuse_other_executions(ran, executions, inert)


@pytest.mark.parametrize("argv, says", [
    (["train", "dreamer", "--set", "kit=fast-triton"], "config key 'kit': expected 'fast' with execution local "
                                                       "(the key is execution device's"),
    (["train", "dreamer", "--set", "device=tpu"], "config key 'device': expected 'auto' with execution local"),
    (["train", "bonus", "--set", "trainers=2"], "config key 'trainers': expected 1 with execution local"),
    (["train", "bonus", "--task", "token-reach", "--set", "task=metaworld:push-v3"],
     "config key 'task' is given two values, 'token-reach' by its flag and 'metaworld:push-v3' by --set"),
    (["train", "safe", "--algo", "PPOLag", "--set", "algo=CPO"],
     "config key 'algo' is given two values, 'PPOLag' by its flag and 'CPO' by --set: give it once"),
    (["train", "bonus", "--ablation", "top1", "--set", "bonus.top_k=4"],
     "config key 'bonus.top_k' = 4 contradicts --ablation top1, which runs it at 1: drop one"),
    (["train", "bonus", "--ablation", "baseline", "--set", "pool_size=8"],
     "config key 'pool_size' = 8 contradicts --ablation baseline, which never reads it: drop one"),
    (["train", "bonus", "--ablation", "queue", "--set", "bonus.tau=2"],
     "config key 'bonus.tau' = 2 contradicts --ablation queue, which never reads it: drop one"),
    (["train", "bonus", "--ablation", "topk", "--set", "bonus.num_prototypes=3"],
     "config key 'bonus.num_prototypes' = 3 contradicts --ablation topk, which never reads it: drop one"),
    (["compare", "bonus", "--ablation", "top1", "--set", "bonus.top_k=2"], "contradicts --ablation top1"),
    (["train", "bonus", "--set", "execution=ray", "--set", "best_ema=0.5"],
     "config key 'best_ema' = 0.5 contradicts best_workers 0, which never reads it: drop one"),
    (["train", "bonus", "--set", "episode_steps=100"], "contradicts task token-reach, whose episodes have their own"),
    (["train", "safe", "--algo", "PPOLag", "--set", "trust_region.cg_iters=20"],
     "config key 'trust_region.cg_iters' = 20 contradicts algo PPOLag, which never reads it: drop one"),
    (["train", "safe", "--set", "semantic.beta_start=0.5"], "contradicts semantic.enable false, which never reads it"),
    (["train", "dreamer", "--set", "dreamer.cnn_mult=4"], "contradicts dreamer.encoder mlp, which never reads it"),
    (["train", "dreamer", "--set", "dreamer.encoder=conv", "--set", "dreamer.embed_dim=64"],
     "config key 'dreamer.embed_dim' = 64 contradicts dreamer.encoder conv, whose embedding size follows from"),
])
def test_contradictory_options_are_refused_before_anything_is_written(tmp_path, capsys, argv, says):
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


def test_an_ablation_s_own_value_and_a_repeated_equal_value_are_fine():
    from rlspec.engines import bonus

    cfg = bonus.build_config("default", ["bonus.top_k=1", "seed=3", "seed=4"], ablation="top1")
    assert cfg.bonus.top_k == 1 and cfg.seed == 4  # --set twice: the later wins (no flag involved)
    from rlspec.engines.bonus.loop import DESCRIPTION
    from rlspec.runs.shell import refuse_contradictions

    refuse_contradictions(DESCRIPTION, cfg, ["ablation=top1"], ["bonus.top_k=1"])  # the ablation's own value
    bonus.validate(bonus.build_config("smoke", [], ablation="baseline"))  # a preset's bonus keys: not the user's
