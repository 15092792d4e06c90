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


def _share_shared_arrays() -> None:
    """The simulator makes a block's shared array when a thread first asks for it, by a look-up and an insert with no
    lock between them: two threads of a launch's first block can both miss, each make its own array, and then compute
    from memory the others never see (found here as a launch's first block giving garbage, a few times in a thousand
    launches, more often the more the threads switch). This is the simulator's own `FakeCUDAShared.array` with the
    look-up and the insert under a lock: one array a line of the kernel, as a GPU's block has."""
    import sys
    import threading

    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support
    if getattr(kernelapi.FakeCUDAShared.array, "locked", False):
        return
    dynamic, lock = kernelapi.FakeCUDAShared.array, threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:  # the simulator's refusal, and dynamic shared memory: as before
            return dynamic(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)  # an array is known by the line of the kernel that asks for it, as the original
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            made = self._allocations.get(caller)
            if made is None:
                made = self._allocations[caller] = np.empty(shape, dtype)
        return made
    array.locked = True
    kernelapi.FakeCUDAShared.array = array


if SIMULATED:
    _share_shared_arrays()


def describe() -> str:
    return "numba-cuda simulator (no GPU)" if SIMULATED else cuda.get_current_device().name.decode()
