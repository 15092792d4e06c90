"""Which device the GPU kernels run on, decided before numba.cuda is imported: `TEENYGRAD_CUDA` = auto | sim | gpu.

numba.cuda reads whether to simulate once, when it is imported; so this module sets numba's setting first (not the
environment: importing a module of teenygrad changes no process setting)."""
from __future__ import annotations

import os
import sys

CHOICE_ENV = "TEENYGRAD_CUDA"


def _gpu_present() -> bool:
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/proc/driver/nvidia/version"))


def _choose() -> bool:
    """True when the kernels run in numba-cuda's simulator."""
    choice = os.environ.get(CHOICE_ENV, "auto")
    if choice not in ("auto", "sim", "gpu"):
        raise ValueError(f"{CHOICE_ENV}={choice!r}: expected auto, sim or gpu")
    if choice == "gpu" and not _gpu_present():
        raise RuntimeError(f"{CHOICE_ENV}=gpu but no CUDA driver was found: unset it to run in the simulator")
    simulate = choice == "sim" or (choice == "auto" and not _gpu_present())
    if simulate and "numba.cuda" not in sys.modules:  # numba.cuda reads the setting once, when imported
        from numba.core import config  # (the setting, not the environment: importing changes no process setting)
        config.ENABLE_CUDASIM = 1
    return simulate


_choose()

from numba import cuda  # noqa: E402 - after the choice above
from numba.core import config  # noqa: E402

# what numba.cuda is, simulator or GPU target: the choice above, unless numba.cuda was imported before it (as
# benchmarks/gpu.py --ptx does, to compile for a GPU on a machine without one)
SIMULATED = bool(config.ENABLE_CUDASIM)


def describe() -> str:
    return "numba-cuda simulator (no GPU)" if SIMULATED else cuda.get_current_device().name.decode()
