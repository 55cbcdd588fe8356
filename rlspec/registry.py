"""Which contracts exist and which implementations are checked against them.

Entries are import strings ("package.module" or "package.module:attr"), resolved lazily: listing the
registry imports nothing, so the CPU gate never pulls in Triton or Warp by accident, and a backend that
cannot be imported on this machine is reported as unavailable instead of crashing the run.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the test half is imported only when a contract is loaded
    from rlspec.spec.core import Contract

CONTRACTS: dict[str, str] = {
    "twohot": "rlspec.spec.twohot",
    "return_ema": "rlspec.spec.return_ema",
    "lambda_return": "rlspec.spec.lambda_return",
    "gae": "rlspec.spec.gae",
    "vtrace": "rlspec.spec.vtrace",
    "risk_target": "rlspec.spec.risk_target",
    "modulation": "rlspec.spec.modulation",
    "lagrange": "rlspec.spec.lagrange",
    "packed2": "rlspec.spec.packed2",
    "numerics": "rlspec.spec.numerics",
    "replay": "rlspec.spec.replay",
    "shaping": "rlspec.spec.shaping",
    "parity": "rlspec.spec.parity",
    "room_env": "rlspec.spec.room_env",
    "gb_emulator": "rlspec.spec.gb_emulator",
    "trust_region": "rlspec.spec.trust_region",
    "success_set": "rlspec.spec.success_set",
    "behavior": "rlspec.spec.behavior",
    "rssm": "rlspec.spec.rssm",
    "world_model": "rlspec.spec.world_model",
    "collector": "rlspec.spec.collector",
    "trainer": "rlspec.spec.trainer",
    "data_parallel": "rlspec.spec.data_parallel",
}

IMPLEMENTATIONS: dict[str, dict[str, str]] = {
    "twohot": {
        "reference": "rlspec.reference.twohot",
        "fast-torch": "rlspec.fast.twohot",
        "fast-triton": "rlspec.fast.twohot_triton",
        "fast-compiled": "rlspec.fast.twohot_compiled",
    },
    "return_ema": {
        "reference": "rlspec.reference.return_ema",
        "fast-torch": "rlspec.fast.return_ema",
    },
    "lambda_return": {
        "reference": "rlspec.reference.lambda_return",
        "fast-torch": "rlspec.fast.lambda_return",
        "fast-triton": "rlspec.fast.lambda_return_triton",
    },
    "gae": {
        "reference": "rlspec.reference.gae",
        "fast-torch": "rlspec.fast.gae",
        "fast-triton": "rlspec.fast.gae_triton",
    },
    "vtrace": {
        "reference": "rlspec.reference.vtrace",
        "fast-torch": "rlspec.fast.vtrace",
        "fast-triton": "rlspec.fast.vtrace_triton",
    },
    "risk_target": {
        "reference": "rlspec.reference.risk_target",
        "fast-torch": "rlspec.fast.risk_target",
    },
    "modulation": {
        "reference": "rlspec.reference.modulation",
        "fast-torch": "rlspec.fast.modulation",
    },
    "lagrange": {
        "reference": "rlspec.reference.lagrange",
        "fast-torch": "rlspec.fast.lagrange",
    },
    "packed2": {
        "reference": "rlspec.reference.packed2",
        "fast-torch": "rlspec.fast.packed2",
        "fast-triton": "rlspec.fast.packed2_triton",
        "fast-warp": "rlspec.fast.packed2_warp",
    },
    "numerics": {
        "reference": "rlspec.reference.numerics",
        "fast-torch": "rlspec.fast.numerics",
    },
    "replay": {
        "reference": "rlspec.reference.replay",
        "fast-torch": "rlspec.fast.replay",
    },
    "shaping": {
        "reference": "rlspec.reference.shaping",
        "fast-torch": "rlspec.fast.shaping",
    },
    "parity": {
        "reference": "rlspec.reference.parity",
    },
    "room_env": {
        "reference": "rlspec.envs.room.pyboy_room",
        "fast-warp": "rlspec.envs.room.warp_room",
    },
    "gb_emulator": {
        "reference": "rlspec.envs.gameboy.pyboy_gb",
        "fast-warp": "rlspec.envs.gameboy.warp_gb",
    },
    "trust_region": {
        "reference": "rlspec.reference.trust_region",
        "fast-torch": "rlspec.fast.trust_region",
    },
    "success_set": {
        "reference": "rlspec.reference.success_set",
        "fast-torch": "rlspec.fast.success_set",
    },
    "behavior": {
        "reference": "rlspec.reference.behavior",
        "fast-torch": "rlspec.fast.behavior",
    },
    "rssm": {
        "reference": "rlspec.reference.rssm",
        "fast-torch": "rlspec.fast.rssm",
        "fast-triton": "rlspec.fast.rssm_triton",
    },
    "world_model": {
        "reference": "rlspec.reference.world_model",
        "fast-torch": "rlspec.fast.world_model",
    },
    "collector": {
        "reference": "rlspec.reference.collector",
        "safe-engine": "rlspec.engines.safe.collector",
        "bonus-engine": "rlspec.engines.bonus.collector",
        "dreamer-engine": "rlspec.engines.dreamer.collector",
    },
    "trainer": {
        "reference": "rlspec.reference.trainer",
        "safe-engine": "rlspec.engines.safe.trainer",
        "dreamer-engine": "rlspec.engines.dreamer.trainer",
        "bonus-engine": "rlspec.engines.bonus.trainer",
    },
    "data_parallel": {
        "reference": "rlspec.reference.data_parallel",
        "safe-engine-ppolag": "rlspec.engines.safe.data_parallel:PPOLAG",
        "safe-engine-cpo": "rlspec.engines.safe.data_parallel:CPO",
        "bonus-engine": "rlspec.engines.bonus.data_parallel",
    },
}


# a run config's ``kit`` -> the implementation each contract registers under it (an engine's Kit is built from
# these modules: rlspec/algos/safe_ppo.py, bonus_vtrace.py, dreamer.py)
KIT_IMPLEMENTATIONS: dict[str, str] = {"reference": "reference", "fast": "fast-torch"}


def kit_modules(kit: str, contracts: tuple[str, ...]) -> dict[str, ModuleType]:
    """contract -> the module ``IMPLEMENTATIONS`` registers for it under the run kit ``kit`` (reference, fast)."""
    if kit not in KIT_IMPLEMENTATIONS:
        raise ValueError(f"kit_modules: argument 'kit' is {kit!r}, expected one of {list(KIT_IMPLEMENTATIONS)}")
    return {c: importlib.import_module(IMPLEMENTATIONS[c][KIT_IMPLEMENTATIONS[kit]]) for c in contracts}


def load_contract(name: str) -> Contract:
    if name not in CONTRACTS:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}")
    return importlib.import_module(CONTRACTS[name]).CONTRACT


def load_object(target: str) -> Any:
    """Import "pkg.module", "pkg.module:attr", "path/to/file.py" or "path/to/file.py:attr".

    A file is imported with its own directory first on sys.path (restored afterwards), so that it can
    import the files next to it (``import helper``)."""
    module_part, _, attr = target.partition(":")
    if module_part.endswith(".py") or Path(module_part).exists():
        path = Path(module_part).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {module_part} (resolved to {path})")
        mod_name = f"rlspec_user_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        saved = list(sys.path)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[mod_name]
            raise
        finally:
            sys.path[:] = saved
    else:
        module = importlib.import_module(module_part)
    if attr and not hasattr(module, attr):
        raise AttributeError(f"{module_part} has no attribute {attr!r}")
    return getattr(module, attr) if attr else module


def _to(x: Any, device: str) -> Any:
    import torch  # here, not at the top: `rlspec --help` reads CONTRACTS without loading torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


class OnDevice:
    """A function-based implementation whose module declares ``DEVICE`` (e.g. a compiled CUDA kernel):
    tensor arguments go to that device and tensor results come back to the CPU, where the properties
    draw their inputs and compare. Everything else (constants, errors raised) passes through."""

    def __init__(self, impl: Any, device: str):
        self._impl, self.device = impl, device
        self.BACKEND_NOTE = getattr(impl, "BACKEND_NOTE", device)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._impl, name)
        if not callable(attr) or isinstance(attr, type):
            return attr

        def on_device(*args, **kwargs):
            return _to(attr(*_to(args, self.device), **_to(kwargs, self.device)), "cpu")

        return on_device


@dataclasses.dataclass
class Resolved:
    name: str
    target: str  # as given (a registry entry, or --impl exactly as typed)
    impl: Any = None
    unavailable: str | None = None  # why this backend cannot run on this machine (not a failure)
    error: str | None = None  # why it failed to load (a failure: syntax error, exception at import, ...)

    @property
    def label(self) -> str:
        note = getattr(self.impl, "BACKEND_NOTE", "")
        return f"{self.name} ({note})" if note else self.name


def resolve(name: str, target: str, registered: bool = False) -> Resolved:
    """Load ``target``. A backend that says it cannot run here (fast/triton_mode.BackendUnavailable) is
    unavailable, and so is a registered one whose optional third-party package is not installed; any
    other load failure is an error."""
    try:
        impl = load_object(target)
    except Exception as err:  # noqa: BLE001 - reported, never crashed on
        unavailable = any(c.__name__ == "BackendUnavailable" for c in type(err).__mro__)  # fast/triton_mode.py
        if unavailable or (registered and _missing_dependency(err, target)):
            return Resolved(name, target, unavailable=f"{type(err).__name__}: {err}")
        return Resolved(name, target, error=load_error(err))
    device = getattr(impl, "DEVICE", "cpu")
    return Resolved(name, target, impl if device == "cpu" else OnDevice(impl, device))


def _missing_dependency(err: Exception, target: str) -> bool:
    """A ModuleNotFoundError for a package outside rlspec (e.g. warp not installed)."""
    missing = getattr(err, "name", None) or ""
    return isinstance(err, ModuleNotFoundError) and missing.split(".")[0] not in ("rlspec", target.split(".")[0])


def load_error(err: BaseException) -> str:
    """One line: the exception and where in the loaded code it was raised."""
    if isinstance(err, SyntaxError):
        return f"SyntaxError: {err.msg} ({err.filename}, line {err.lineno}): {(err.text or '').strip()}"
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if "importlib" not in f.filename and f.filename != __file__]
    where = f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


def implementations(contract: str) -> list[Resolved]:
    return [resolve(n, t, registered=True) for n, t in IMPLEMENTATIONS.get(contract, {}).items()]
