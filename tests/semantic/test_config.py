"""``semantic_cfgs``: off by default, validated field by field, and light to import (§25.16)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlspec.semantics.config import SemanticConfig
from rlspec.semantics.telemetry import keys


def test_every_flag_defaults_to_off():
    cfg = SemanticConfig()
    assert not (cfg.enable or cfg.shaping_enable or cfg.potential_enable or cfg.risk_enable or cfg.modulation_enable)
    assert keys(cfg) == ()
    assert cfg.dtype_preference == ("bfloat16", "float16", "float32") and cfg.model_device == "cuda:0"


def test_round_trip_and_lists_become_tuples():
    cfg = SemanticConfig.from_dict({"enable": True, "safe_prompts": ["a", "b"], "dtype_preference": ["float32"]})
    assert cfg.safe_prompts == ("a", "b") and cfg.dtype_preference == ("float32",)
    assert SemanticConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("field, value, says", [
    ("capture_interval", 0, "an int >= 1"),
    ("risk_batch_size", -1, "an int >= 0"),
    ("temporal_window", 2.0, "an int >= 1"),
    ("beta_end_step_fraction", 0.0, "a number in (0, 1]"),
    ("discount", 1.5, "a number in [0, 1]"),
    ("threshold_percentile", 100.0, "a number in (0, 100)"),
    ("margin_scale", float("nan"), "a number in (0, inf)"),
    ("shaping_enable", 1, "a bool"),
    ("safe_prompts", ("ok", " "), "a non-empty list of non-empty strings"),
    ("dtype_preference", ("float32", "int8"), "distinct names from"),
])
def test_bad_fields_are_rejected_naming_field_and_value(field, value, says):
    with pytest.raises(ValueError) as info:
        SemanticConfig(**{field: value})
    message = str(info.value)
    assert f"field '{field}'" in message and says in message and repr(value) in message, message


def test_unknown_keys_and_modulation_without_risk():
    with pytest.raises(ValueError, match=r"unknown keys \['clip_batch_max'\]"):
        SemanticConfig.from_dict({"clip_batch_max": 4})
    with pytest.raises(ValueError, match="'modulation_enable'.*risk_enable"):
        SemanticConfig(enable=True, modulation_enable=True)


def test_reading_the_config_imports_nothing_semantic():
    """An engine reads semantic_cfgs and calls build_hooks with semantics off: None, and no transformers,
    no shaping, no manager imported."""
    code = ("import sys, rlspec.semantics, rlspec.semantics.config, rlspec.semantics.telemetry; "
            "from rlspec.semantics import build_hooks; from rlspec.semantics.config import SemanticConfig; "
            "assert build_hooks(SemanticConfig(), num_envs=4, gamma=0.99, total_steps=10, seed=0) is None; "
            "print(sorted(m for m in sys.modules if m.startswith(('transformers', 'huggingface_hub', "
            "'rlspec.fast', 'rlspec.reference', 'rlspec.spec', 'rlspec.semantics.')) ))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['rlspec.semantics.config', 'rlspec.semantics.telemetry']", out
