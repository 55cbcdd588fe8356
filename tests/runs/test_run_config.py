"""rlspec.runs.config: field docstrings as help, --set overrides, unknown keys named with the known ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rlspec.runs.config import ConfigError, apply_overrides, field_docs, flat_keys, from_dict, help_text, to_dict


@dataclass(frozen=True)
class Inner:
    clip: float = 0.2
    """PPO clip ε."""
    sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths."""


@dataclass(frozen=True)
class Outer:
    seed: int = 0
    """Seed of every generator."""
    mode: str = "a"
    """A
    two-line doc."""
    limit: float | None = None
    """Optional limit."""
    on: bool = False
    """A switch."""
    inner: Inner = field(default_factory=Inner)
    """Nested group."""


def test_field_docs_are_the_help():
    assert field_docs(Outer)["mode"] == "A two-line doc."
    assert field_docs(Inner) == {"clip": "PPO clip ε.", "sizes": "Hidden layer widths."}
    text = help_text(Outer)
    assert "inner.clip (float, default 0.2): PPO clip ε." in text and "seed (int, default 0)" in text


def test_overrides_parse_each_type():
    cfg = apply_overrides(Outer(), ["seed=3", "on=true", "limit=2.5", "inner.clip=0.1", "inner.sizes=32,16",
                                    "mode=b"])
    assert cfg == Outer(seed=3, mode="b", limit=2.5, on=True, inner=Inner(clip=0.1, sizes=(32, 16)))
    assert apply_overrides(cfg, ["limit=none"]).limit is None


@pytest.mark.parametrize("item, needle", [
    ("sed=1", "unknown config key 'sed'; known keys: seed, mode, limit, on, inner.clip, inner.sizes"),
    ("inner.clp=1", "unknown config key 'inner.clp'"),
    ("seed.x=1", "unknown config key 'seed.x'"),
    ("seed=one", "config key 'seed': expected int, got 'one'"),
    ("on=maybe", "config key 'on': expected bool"),
    ("seed", "--set expects key=value"),
    ("inner=1", "is a group"),
])
def test_bad_overrides_are_named(item, needle):
    with pytest.raises(ConfigError, match=None) as err:
        apply_overrides(Outer(), [item])
    assert needle in str(err.value)


def test_json_round_trip_and_unknown_keys():
    cfg = Outer(seed=5, inner=Inner(sizes=(8,)))
    assert from_dict(Outer, to_dict(cfg)) == cfg
    assert flat_keys(Outer) == ["seed", "mode", "limit", "on", "inner.clip", "inner.sizes"]
    with pytest.raises(ConfigError, match="unknown config key 'inner.bogus'"):
        from_dict(Outer, {"inner": {"bogus": 1}})
    with pytest.raises(ConfigError, match="config key 'seed': expected int, got 1.5"):
        from_dict(Outer, {"seed": 1.5})


@dataclass(frozen=True)
class Derived(Outer):
    workers: int = 2
    """Worker processes."""


def test_subclass_inherits_field_docs_and_keys():
    docs = field_docs(Derived)
    assert docs["seed"] == "Seed of every generator." and docs["workers"] == "Worker processes."
    assert flat_keys(Derived)[-1] == "workers"
    assert apply_overrides(Derived(), ["workers=4", "inner.clip=0.3"]).workers == 4
