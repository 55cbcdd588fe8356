"""OmniSafe 0.5.0's own on-policy algorithms, trained through its own ``omnisafe.Agent`` on Safety-Gymnasium with
the settings rlspec's safe engine runs: the anchor side of the safe-RL side-by-side comparison.

    nox -s bench_omnisafe [-- --algos PPOLag --seeds 0 1 2 3 4 --total-steps 200000 --steps-per-epoch 4000]
    python -m benchmarks.safe.anchors.run_omnisafe --write-only [--algos ...] [--out DIR]  # the JSON only

Both sides run at OmniSafe's defaults (rlspec's safe engine's defaults are OmniSafe 0.5.0's PPO-family yaml;
``TABLE`` maps every such rlspec key to OmniSafe's and the JSON lists each one, its two values and whether they
are equal; where an algorithm's yaml differs, e.g. CPO's update_iters 10, batch_size 128 and critic lr 1e-3,
``rlspec_anchor_sets`` holds the rlspec --set overrides that give rlspec OmniSafe's value) plus ONE
shared override set (``shared``: seed, env, total steps, steps per epoch, envs, one thread, CPU), written into
OUT/omnisafe_safe.json both as rlspec's ``--set`` list and as OmniSafe's ``custom_cfgs``. Each (algo, seed) logs
into OmniSafe's own layout, OUT/<algo>-{<env>}/seed-<SSS>-<time>/progress.csv, which ``rlspec report`` reads
beside rlspec runs; a seed whose progress.csv reached total_steps is not run again (OmniSafe cannot resume: an
interrupted seed runs again from the start, its incomplete directory left for inspection and passed over).

OmniSafe runs in the session's own venv, imported after rlspec's Safety-Gymnasium import shim (Python >= 3.11:
rlspec/envs/safety_gym.py); the runtime never imports it.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from rlspec.engines.safe import build_config
from rlspec.runs.config import ConfigError

ALGOS = ("PPO", "PPOLag", "CPO", "CPPOPID")
ENV = "SafetyPointGoal1-v0"
# (rlspec key, OmniSafe key, rlspec value -> OmniSafe's form or None, the algorithms it applies to: None = all)
PPO_FAMILY, TRUST_REGION = ("PPO", "PPOLag", "CPPOPID"), ("CPO",)
TABLE: list[tuple[str, str, object, tuple[str, ...] | None]] = [
    ("ppo.update_iters", "algo_cfgs.update_iters", None, None),
    ("ppo.batch_size", "algo_cfgs.batch_size", None, None),
    ("ppo.clip", "algo_cfgs.clip", None, PPO_FAMILY),
    ("ppo.target_kl", "algo_cfgs.target_kl", None, PPO_FAMILY),
    ("ppo.target_kl", "algo_cfgs.kl_early_stop", lambda v: v is not None, PPO_FAMILY),  # None: no early stop
    ("ppo.entropy_coef", "algo_cfgs.entropy_coef", None, None),
    ("ppo.gamma", "algo_cfgs.gamma", None, None),
    ("ppo.cost_gamma", "algo_cfgs.cost_gamma", None, None),
    ("ppo.lam", "algo_cfgs.lam", None, None),
    ("ppo.lam_c", "algo_cfgs.lam_c", None, None),
    ("ppo.max_grad_norm", "algo_cfgs.max_grad_norm", None, None),
    ("ppo.max_grad_norm", "algo_cfgs.use_max_grad_norm", lambda v: v is not None, None),
    ("ppo.critic_norm_coef", "algo_cfgs.critic_norm_coef", None, None),
    ("ppo.standardize_reward_adv", "algo_cfgs.standardized_rew_adv", None, None),
    ("ppo.center_cost_adv", "algo_cfgs.standardized_cost_adv", None, None),  # OmniSafe's only centers A_c
    ("ppo.obs_normalize", "algo_cfgs.obs_normalize", None, None),
    ("ppo.reward_normalize", "algo_cfgs.reward_normalize", None, None),
    ("ppo.actor_lr", "model_cfgs.actor.lr", None, None),
    ("ppo.critic_lr", "model_cfgs.critic.lr", None, None),
    ("ppo.hidden", "model_cfgs.actor.hidden_sizes", list, None),
    ("ppo.hidden", "model_cfgs.critic.hidden_sizes", list, None),
    ("ppo.activation", "model_cfgs.actor.activation", None, None),
    ("ppo.linear_lr_decay", "model_cfgs.linear_lr_decay", None, None),
    ("safety.cost_limit", "lagrange_cfgs.cost_limit", None, ("PPOLag", "CPPOPID")),
    ("safety.cost_limit", "algo_cfgs.cost_limit", None, TRUST_REGION),
    ("safety.lagrangian_multiplier_init", "lagrange_cfgs.lagrangian_multiplier_init", None, ("PPOLag", "CPPOPID")),
    ("safety.lambda_lr", "lagrange_cfgs.lambda_lr", None, ("PPOLag",)),
    ("safety.pid_kp", "lagrange_cfgs.pid_kp", None, ("CPPOPID",)),
    ("safety.pid_ki", "lagrange_cfgs.pid_ki", None, ("CPPOPID",)),
    ("safety.pid_kd", "lagrange_cfgs.pid_kd", None, ("CPPOPID",)),
    ("safety.pid_d_delay", "lagrange_cfgs.pid_d_delay", None, ("CPPOPID",)),
    ("trust_region.target_kl", "algo_cfgs.target_kl", None, TRUST_REGION),
    ("trust_region.cg_iters", "algo_cfgs.cg_iters", None, TRUST_REGION),
    ("trust_region.cg_damping", "algo_cfgs.cg_damping", None, TRUST_REGION),
    ("trust_region.fvp_sample_freq", "algo_cfgs.fvp_sample_freq", None, TRUST_REGION),
]


# OmniSafe's on-policy algorithms average Metrics/EpRet, EpCost, EpLen over the last 50 episodes, hard-coded
# (omnisafe/algorithms/on_policy/base/policy_gradient.py: register_key(..., window_length=50); the yaml's
# logger_cfgs.window_lens is not read there) and PPOLag's J_c is that EpCost mean: rlspec's ep_window must be 50
# on the same work (benchmarks/safe/learning.py's own budget sets 20)
OMNISAFE_EP_WINDOW = 50


def shared(algo: str, seed: int, total_steps: int, steps_per_epoch: int, num_envs: int) -> dict:
    """The one override set both sides run with: rlspec's --set list and OmniSafe's custom_cfgs."""
    return {"rlspec": [f"algo={algo}", f"env_id={ENV}", f"seed={seed}", f"total_steps={total_steps}",
                       f"steps_per_epoch={steps_per_epoch}", f"num_envs={num_envs}", "torch_threads=1",
                       f"ep_window={OMNISAFE_EP_WINDOW}"],
            "omnisafe": {"seed": seed, "train_cfgs": {"total_steps": total_steps, "vector_env_nums": num_envs,
                                                      "parallel": 1, "device": "cpu", "torch_threads": 1},
                         "algo_cfgs": {"steps_per_epoch": steps_per_epoch}}}


def _get(tree: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            raise KeyError(dotted)
        tree = tree[part]
    return tree


def _rlspec_value(cfg, key: str):
    value = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


def defaults_table(algo: str, omnisafe_defaults: dict, overrides: list[str]) -> list[dict]:
    """One row per TABLE entry that applies to ``algo``: rlspec's value (its defaults + ``overrides``) in
    OmniSafe's form, OmniSafe's default (its <algo>.yaml ``defaults``) and whether they are equal; an entry whose
    key the yaml lacks is listed with omnisafe_value None and a note."""
    cfg = build_config("default", [f"algo={algo}", *overrides])
    rows = []
    for key, theirs, convert, algos in TABLE:
        if algos is not None and algo not in algos:
            continue
        ours = _plain(convert(_rlspec_value(cfg, key)) if convert else _rlspec_value(cfg, key))
        row = {"rlspec": key, "omnisafe": theirs, "rlspec_value": ours}
        try:
            their = _plain(_get(omnisafe_defaults, theirs))
        except KeyError:
            rows.append({**row, "omnisafe_value": None, "equal": None, "note": f"not in OmniSafe's {algo}.yaml"})
            continue
        rows.append({**row, "omnisafe_value": their, "equal": ours == their})
    return rows


def anchor_sets(rows: list[dict]) -> list[str]:
    """rlspec --set overrides that give rlspec OmniSafe's default where the two differ and rlspec's key holds the
    value itself (not one converted from it, e.g. a flag derived from None)."""
    direct = {(key, theirs) for key, theirs, convert, _ in TABLE if convert is None}
    return [f"{r['rlspec']}={_int_if_whole(r['omnisafe_value'])}" for r in rows
            if r["equal"] is False and r["omnisafe_value"] is not None and (r["rlspec"], r["omnisafe"]) in direct]


def _int_if_whole(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _plain(value):
    """Tuples as lists, ints that are floats as floats: the same value compares equal in both tools' forms."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def omnisafe_defaults(algo: str) -> dict:
    """OmniSafe's own defaults of ``algo``: its configs/on-policy/<algo>.yaml ``defaults`` section."""
    import yaml

    path = Path(import_omnisafe().__file__).parent / "configs" / "on-policy" / f"{algo}.yaml"
    return yaml.safe_load(path.read_text())["defaults"]


def finished(out: Path, algo: str, seed: int, total_steps: int) -> Path | None:
    """The seed's OmniSafe log directory whose progress.csv reached total_steps, or None."""
    for run in sorted(out.glob(f"{algo}-{{{ENV}}}/seed-{seed:03d}-*")):
        progress = run / "progress.csv"
        if progress.is_file():
            rows = list(csv.DictReader(progress.open()))
            if rows and float(rows[-1]["TotalEnvSteps"]) >= total_steps:
                return run
    return None


def import_omnisafe():
    """omnisafe, imported after rlspec's Safety-Gymnasium shim (Python >= 3.11: rlspec/envs/safety_gym.py)."""
    from rlspec.envs import safety_gym

    safety_gym.import_safety_gymnasium()
    import omnisafe

    return omnisafe


def run_omnisafe(algo: str, custom_cfgs: dict, out: Path) -> None:
    cfgs = {**custom_cfgs, "logger_cfgs": {"use_wandb": False, "use_tensorboard": True, "log_dir": str(out)}}
    import_omnisafe().Agent(algo, ENV, custom_cfgs=cfgs).learn()


def earlier_report(path: Path, lambda_updates: int) -> dict:
    """OUT/omnisafe_safe.json as an earlier invocation left it (its algorithms and seeds are kept; this
    invocation's are added to them), or a new one; an earlier file for another env or budget is an error (its
    seeds are not this budget's)."""
    if not path.is_file():
        return {"what": "OmniSafe 0.5.0's own algorithms through omnisafe.Agent, with the override set rlspec runs",
                "env": ENV, "lambda_updates": lambda_updates, "algos": {}}
    earlier = json.loads(path.read_text())
    for key, expected in (("env", ENV), ("lambda_updates", lambda_updates)):
        if earlier.get(key) != expected:
            raise ConfigError(f"{path}: {key}: expected {expected!r} (this invocation's), got "
                              f"{earlier.get(key)!r}: run this budget into another --out")
    return earlier


def record(path: Path, lambda_updates: int, algo: str, shared_sets: dict | None = None,
           runs: dict | None = None, **fields) -> None:
    """Adds one algorithm's override sets, finished runs and other fields to OUT/omnisafe_safe.json as it is on
    disk now: read again at each write (after every seed), so a session's end keeps the seeds that finished and
    invocations running at once into one --out keep each other's algorithms and seeds."""
    report = earlier_report(path, lambda_updates)
    entry = report["algos"].setdefault(algo, {"shared": {}, "runs": {}})
    entry["shared"].update(shared_sets or {})
    entry["runs"].update(runs or {})
    entry.update(fields)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(report, indent=2) + "\n")
    partial.replace(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=["PPOLag"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--total-steps", type=int, default=200_000)
    p.add_argument("--steps-per-epoch", type=int, default=4_000)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("runs/omnisafe"))
    p.add_argument("--write-only", action="store_true", help="write the JSON (the override set, the defaults "
                                                             "table), run nothing")
    args = p.parse_args(argv)
    if args.steps_per_epoch < 1 or args.total_steps < args.steps_per_epoch:
        print(f"omnisafe_safe: --total-steps: expected >= --steps-per-epoch = {args.steps_per_epoch}, got "
              f"{args.total_steps}", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    path, lambda_updates = out / "omnisafe_safe.json", args.total_steps // args.steps_per_epoch
    try:
        earlier_report(path, lambda_updates)  # another budget is refused before anything runs
        for algo in args.algos:
            sets = {str(seed): shared(algo, seed, args.total_steps, args.steps_per_epoch, args.num_envs)
                    for seed in args.seeds}
            if args.write_only:
                record(path, lambda_updates, algo, shared_sets=sets)
                continue
            rows = defaults_table(algo, omnisafe_defaults(algo), sets[str(args.seeds[0])]["rlspec"][1:])
            record(path, lambda_updates, algo, shared_sets=sets, defaults=rows,
                   defaults_differ=[row for row in rows if row["equal"] is not True],
                   rlspec_anchor_sets=anchor_sets(rows))  # rlspec's side adds these
            for seed in args.seeds:
                if finished(out, algo, seed, args.total_steps) is None:
                    run_omnisafe(algo, sets[str(seed)]["omnisafe"], out)
                run = finished(out, algo, seed, args.total_steps)
                record(path, lambda_updates, algo, runs={str(seed): str(run.relative_to(out))})  # beside the file
    except ConfigError as err:
        print(f"omnisafe_safe: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out / 'omnisafe_safe.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
