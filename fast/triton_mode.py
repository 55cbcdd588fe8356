"""How this process runs the Triton backends — chosen by the caller, never by library code.

Triton decides when a kernel is defined (``@triton.jit``, at import) whether it is compiled for CUDA or
run by the interpreter on CPU tensors, from ``TRITON_INTERPRET``. The application sets it before any
Triton backend is imported: ``rlspec check --triton interpret|compiled|auto`` (the CLI), or the
environment (``nox -s cpu_gate`` sets ``TRITON_INTERPRET=1``). Importing a Triton backend that cannot
run here raises :class:`BackendUnavailable` with the reason, which the registry reports.
"""

from __future__ import annotations

import torch


class BackendUnavailable(ImportError):
    """This backend cannot run in this process; the message says why and what to change."""


try:
    import triton
except ImportError as err:
    raise BackendUnavailable(f"Triton is not installed ({err}); install the 'kernels' extra: "
                             "pip install 'rlspec[kernels]'") from err

INTERPRETED = bool(triton.knobs.runtime.interpret)
if not INTERPRETED and not torch.cuda.is_available():
    raise BackendUnavailable("Triton kernels need a CUDA device, or the Triton interpreter on CPU tensors: set "
                             "TRITON_INTERPRET=1 before the first Triton import (rlspec check --triton interpret)")

BACKEND_NOTE = "interpreted" if INTERPRETED else "cuda"
DEVICE = "cpu" if INTERPRETED else "cuda"  # where the kernels take their tensors
