"""Config dataclasses as the command line: one docstring per field, which is its help.

A config is a dataclass whose fields may themselves be dataclasses (``ppo.clip``). Values come from the
defaults, a preset (a dict of dotted keys), ``--set key=value`` overrides, or a run's config.json; an
unknown key is an error naming it and the known ones. No hydra, no tyro: the standard library only.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import re
import textwrap
import types
import typing
from functools import cache
from typing import Any, Callable


class ConfigError(ValueError):
    """A bad key or value in a preset, a --set override or a config.json."""


def surfaced(cfg: Any, build: Callable[[], Any]) -> None:
    """Run ``build`` (constructing the objects a config makes, on stand-in sizes) and turn the ValueError or
    TypeError an object's own validation raises into a ConfigError naming the config key: the argument it
    names ("argument 'cost_limit'") matched to the one key of that name (safety.cost_limit). So a value only an
    object checks is refused before the run, by key, not as a traceback mid-setup."""
    try:
        build()
    except (ValueError, TypeError) as err:
        named = re.search(r"argument '([A-Za-z_]\w*)'", str(err))
        keys = [k for k in _dotted_fields(cfg) if named and k.rsplit(".", 1)[-1] == named.group(1)]
        where = f"config key {keys[0]!r}" if len(keys) == 1 else "config"
        raise ConfigError(f"{where}: {err}") from None


def _dotted_fields(cfg: Any, prefix: str = "") -> list[str]:
    """Every field of a (nested) config dataclass, dotted."""
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        out += (_dotted_fields(value, f"{prefix}{f.name}.") if dataclasses.is_dataclass(value)
                else [f"{prefix}{f.name}"])
    return out


def bad(key: str, expected: str, got: Any, why: str = "") -> ConfigError:
    """The error for a config key's value: the key, what it must be, what it is (and ``why`` it is wrong)."""
    return ConfigError(f"config key {key!r}: expected {expected}, got {got!r}" + f" ({why})" * bool(why))


@cache
def field_docs(cls: type) -> dict[str, str]:
    """name -> the docstring written under the field in the class body (the CLI help); a subclass inherits
    its bases' and may redefine them."""
    docs = {}
    for base in reversed(cls.__mro__[1:]):
        if dataclasses.is_dataclass(base):
            docs.update(field_docs(base))
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    for stmt, nxt in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs


def owned_keys(cls: type, executions: tuple[str, ...]) -> dict[str, str]:
    """key -> the execution it belongs to: a field whose docstring begins with an execution's name and a colon
    ("device: where the device execution runs", "Ray: trainer actors") is that execution's alone."""
    return {key: e for key, doc in field_docs(cls).items() for e in executions if doc.lower().startswith(f"{e.lower()}:")}


def inert_values(cls: type, executions: tuple[str, ...], inert: dict[str, Any] | None = None) -> dict[str, Any]:
    """owned key -> the value it must keep under the other executions: ``inert``'s, else the class default."""
    fields = _fields(cls)
    return {k: (inert or {}).get(k, fields[k].default) for k in owned_keys(cls, executions)}


def refuse_other_executions(cfg: Any, executions: tuple[str, ...], inert: dict[str, Any] | None = None) -> None:
    """A key another execution owns (owned_keys) set away from its inert value is refused, naming the key and
    its execution: it would be recorded in config.json and do nothing."""
    owner = owned_keys(type(cfg), executions)
    for key, value in inert_values(type(cfg), executions, inert).items():
        if owner[key] != cfg.execution and getattr(cfg, key) != value:
            raise bad(key, f"{value!r} with execution {cfg.execution} (the key is execution {owner[key]}'s: it "
                           f"does nothing here)", getattr(cfg, key))


def for_execution(cfg: Any, execution: str, executions: tuple[str, ...], inert: dict[str, Any] | None = None) -> Any:
    """``cfg`` run by ``execution`` (`rlspec compare`'s other run): the keys other executions own reset."""
    owner = owned_keys(type(cfg), executions)
    reset = {k: v for k, v in inert_values(type(cfg), executions, inert).items() if owner[k] != execution}
    return dataclasses.replace(cfg, execution=execution, **reset)


UNUSED = object()  # an Engine.decides value: the key is never read (any value given for it contradicts)


def value_at(cfg: Any, dotted: str) -> Any:
    """The value of a dotted key ("bonus.top_k") of a (nested) config."""
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def flat_keys(cls: type, prefix: str = "") -> list[str]:
    """Every settable dotted key of a config class."""
    out = []
    for name, tp in _types(cls).items():
        if name not in _fields(cls):
            continue
        if dataclasses.is_dataclass(tp):
            out += flat_keys(tp, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def _unknown(key: str, cls: type, where: str) -> ConfigError:
    return ConfigError(f"{where}: unknown config key {key!r}; known keys: {', '.join(flat_keys(cls))}")


def parse_value(key: str, text: str, tp: Any) -> Any:
    """The text of a --set value as the field's type: bool (true/false/1/0), int, float, str, None
    (for an optional field: 'none'), tuple/list (JSON list or comma-separated)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in ("none", "null"):
            return None
        inner = [a for a in args if a is not type(None)]
        return parse_value(key, text, inner[0])
    if origin is typing.Literal:
        if text not in args:
            raise bad(key, f"one of {list(args)}", text)
        return text
    try:
        if tp is bool:
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return low in ("true", "1", "yes")
        if tp is int:
            return int(text)
        if tp is float:
            return _not_nan(key, float(text))
        if tp is str:
            return text
        if origin in (tuple, list):
            items = json.loads(text) if text.startswith("[") else [s for s in text.split(",") if s]
            return tuple(parse_value(key, str(i), args[0]) for i in items)
    except ValueError as err:
        raise ConfigError(f"config key {key!r}: expected {getattr(tp, '__name__', tp)}, got {text!r}") from err
    raise ConfigError(f"config key {key!r}: unsupported field type {tp!r}")


def _check_value(key: str, value: Any, tp: Any) -> Any:
    """A JSON/preset value checked against the field's type (ints are accepted for floats)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _check_value(key, value, next(a for a in args if a is not type(None)))
    if origin is typing.Literal:
        if value not in args:
            raise bad(key, f"one of {list(args)}", value)
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise bad(key, "a list", value)
        return tuple(_check_value(key, v, args[0]) for v in value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(f"config key {key!r}: expected {tp.__name__}, got {value!r} ({type(value).__name__})")
    return _not_nan(key, value) if tp is float else value


def _not_nan(key: str, value: float) -> float:
    """NaN is no setting of any key (it would only poison the run later)."""
    if math.isnan(value):
        raise bad(key, "a number", math.nan)
    return value


def replace(cfg: Any, values: dict[str, Any], where: str = "config") -> Any:
    """A copy of ``cfg`` with dotted ``key -> value`` set (values already typed, e.g. from JSON)."""
    cls = type(cfg)
    nested: dict[str, dict[str, Any]] = {}
    direct: dict[str, Any] = {}
    hints = _types(cls)
    for key, value in values.items():
        head, _, rest = key.partition(".")
        if head not in _fields(cls):
            raise _unknown(key, cls, where)
        if dataclasses.is_dataclass(hints[head]):
            if not rest:
                if not isinstance(value, dict):
                    raise ConfigError(f"{where}: config key {key!r} is a group; set its fields ({key}.NAME)")
                nested.setdefault(head, {}).update(value)
            else:
                nested.setdefault(head, {})[rest] = value
        elif rest:
            raise _unknown(key, cls, where)
        else:
            direct[head] = _check_value(key, value, hints[head])
    for head, sub in nested.items():
        try:
            direct[head] = replace(getattr(cfg, head), sub, where)
        except ConfigError as err:
            raise ConfigError(str(err).replace("key '", f"key '{head}.", 1)) from None
    try:
        return dataclasses.replace(cfg, **direct)
    except ConfigError:
        raise
    except ValueError as err:  # a config class's own validation (__post_init__), e.g. SemanticConfig's
        raise ConfigError(f"{where}: {err}") from None


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    """``--set key=value`` strings applied in order (the value parsed as the field's type)."""
    cls, values = type(cfg), {}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key = key.strip()
        values[key] = parse_value(key, text.strip(), _field_type(cls, key))
    return replace(cfg, values, "--set")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The keys every engine's run config has (an engine's config class extends it, redeclaring a key only to give
    it another default or a more specific docstring; rlspec/engines)."""

    seed: int = 0
    """Seed of the run's generator (weights, actions, minibatches, replay picks) and of every episode's reset."""
    num_envs: int = 1
    """Environments stepped together (all of this process's envs)."""
    total_steps: int = 100_000
    """Env steps of the whole run (all envs together)."""
    ep_window: int = 50
    """Finished episodes averaged in the Metrics/Ep* (and SuccessRate) columns."""
    checkpoint_every: int = 1
    """Write RUN/checkpoints/last.pt every this many of the engine's units (those of its --stop-after-UNIT:
    safe epochs, bonus updates, dreamer env steps) and at the end."""
    torch_threads: int = 1
    """torch.set_num_threads for the run (1: the same numbers on any machine)."""
    kit: str = "reference"
    """Which implementations of the contracts the run calls: reference (rlspec/reference, the truth) or fast
    (their rlspec/fast twins, within the contracts' tolerances of the reference)."""
    execution: str = "local"
    """How the run executes: local (one process) or the engine's other executions (safe: parallel, dreamer:
    device, bonus: ray). Which implementations run is ``kit``'s business, where they run is this key's."""
    plots: bool = True
    """Draw RUN/plots/*.png (Dreamer: and its reconstruction strip) when the run ends; false: none (`rlspec plot
    RUN` draws the curves from metrics.csv later)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a key's value must be: in words (the error message) and as a test."""

    expected: str
    ok: Callable[[Any], bool]


POSITIVE = Rule("a finite float > 0", lambda v: math.isfinite(v) and v > 0)
UNIT = Rule("a float in [0, 1]", lambda v: 0 <= v <= 1)


def one_of(values) -> Rule:
    allowed = list(values)
    return Rule(f"one of {allowed}", lambda v: v in allowed)


def at_least(least: int) -> Rule:
    return Rule(f"an int >= {least}", lambda v: v >= least)


def at_most(most: int, why: str) -> Rule:
    return Rule(f"an int in 1..{most} ({why})", lambda v: 1 <= v <= most)


def check(cfg: Any, rules: dict[str, Rule]) -> None:
    """ConfigError naming the first key (dotted for nested groups) whose value breaks its rule (field,
    expected, actual); a None value (an optional feature off) passes."""
    for key, rule in rules.items():
        value = cfg
        for part in key.split("."):
            value = getattr(value, part)
        if value is not None and not rule.ok(value):
            raise bad(key, rule.expected, value)


def require_at_least(cfg: Any, minimums: dict[str, int]) -> None:
    """ConfigError for the first int key (dotted for nested groups) below its least value."""
    check(cfg, {key: at_least(least) for key, least in minimums.items()})


def _field_type(cls: type, key: str) -> Any:
    head, _, rest = key.partition(".")
    hints = _types(cls)
    if head not in _fields(cls):
        raise _unknown(key, cls, "--set")
    if rest:
        if not dataclasses.is_dataclass(hints[head]):
            raise _unknown(key, cls, "--set")
        try:
            return _field_type(hints[head], rest)
        except ConfigError:
            raise _unknown(key, cls, "--set") from None
    if dataclasses.is_dataclass(hints[head]):
        raise ConfigError(f"--set: config key {key!r} is a group; set its fields ({key}.NAME)")
    return hints[head]


def to_dict(cfg: Any) -> dict[str, Any]:
    """JSON-ready nested dict (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def from_dict(cls: type, values: dict[str, Any], where: str = "config.json") -> Any:
    """A config of class ``cls`` from a nested dict (unknown keys are errors)."""
    return replace(cls(), dict(values), where)


def help_text(cls: type, prefix: str = "") -> str:
    """One line per key: name, type, default and the field's docstring (the --set reference)."""
    lines = []
    defaults = cls()
    for name, tp in _types(cls).items():
        if name not in _fields(cls):
            continue
        if dataclasses.is_dataclass(tp):
            lines.append(help_text(tp, f"{prefix}{name}."))
            continue
        value = getattr(defaults, name)
        if typing.get_origin(tp) is typing.Literal:
            tname = " | ".join(map(str, typing.get_args(tp)))
        else:
            tname = str(tp).replace("typing.", "") if typing.get_origin(tp) else tp.__name__
        lines.append(f"  {prefix}{name} ({tname}, default {value!r}): {field_docs(cls).get(name, '')}")
    return "\n".join(lines)
