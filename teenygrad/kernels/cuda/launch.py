"""Launch configurations (chapter 11): how many blocks of how many threads cover a kernel's work.

A grid of blocks covers the work, each block at most 1024 threads; the x axis runs along the work's last (contiguous)
axis so that a warp's 32 threads touch 32 neighbouring elements. The limits hold on every NVIDIA GPU since 2010."""
from __future__ import annotations

import collections
import contextlib
import sys
from typing import Iterator

from teenygrad.edition import exercise

MAX_THREADS = 1024  # threads a block, on every NVIDIA GPU since 2010
MAX_BLOCK = (1024, 1024, 64)  # a block's x, y, z
MAX_GRID = (2**31 - 1, 65535, 65535)  # a grid's x, y, z
WARP = 32


@exercise("11-gpu-kernels", "launch")
def launch_config(shape: tuple[int, ...], threads: int = 256) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block), each (x, y, z), to launch a kernel with one thread per element of `shape`.

    `shape` has 1 to 3 axes in numpy's order, each >= 0 (empty work still launches); x runs along its last axis
    (contiguous: a warp's 32 threads read 32 neighbouring elements), y along the one before, z the one before that,
    and an axis `shape` lacks has size 1. `threads` (1 to 1024) is the most threads a block may have. What holds,
    with n the work's size along an axis, b the block's and g the grid's:
    - every b and g is an int >= 1; b <= (1024, 1024, 64) and g <= (2**31 - 1, 65535, 65535) in (x, y, z);
      b_x * b_y * b_z <= threads;
    - coverage: g * b >= n, or g is at its cap (the kernel covers the rest with a grid-stride loop);
    - no idle block: (g - 1) * b < n when n >= 1, and g = 1 when n = 0;
    - coalesced: b_x >= min(32, n_x, threads);
    - busy: b_x * b_y * b_z * 2 >= min(threads, n_x * n_y * n_z) (at least half the threads a block can use)."""
    n = [int(s) for s in reversed(shape)] + [1] * (3 - len(shape))
    block = [1, 1, 1]
    left = int(threads)
    for axis in range(3):
        want = -(-max(n[axis], 1) // WARP) * WARP if axis == 0 else max(n[axis], 1)
        block[axis] = max(1, min(left, want, MAX_BLOCK[axis]))
        left //= block[axis]
    grid = [max(1, min(-(-n[axis] // block[axis]), MAX_GRID[axis])) for axis in range(3)]
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


@contextlib.contextmanager
def counted_launches() -> Iterator[collections.Counter]:
    """Count the kernel launches made inside a `with` block, by kernel name: every `kernel[grid, block](...)` of a
    numba-cuda kernel, on a GPU or in the simulator. (A launcher of the kernel table may launch several kernels, or
    none for empty work: counting its calls would not count launches.)"""
    from teenygrad.kernels.cuda.device import cuda
    kind = type(cuda.jit(lambda: None))  # the class of every kernel: the GPU's dispatcher, or the simulator's
    configure = kind.__getitem__
    counts: collections.Counter = collections.Counter()

    def counted(kernel, config):  # noqa: ANN001, ANN202 - the class's own signature
        fn = kernel.py_func  # a kernel a factory makes, named `kernel`, goes by its factory's name
        counts[fn.__name__ if fn.__name__ != "kernel" else fn.__qualname__.split(".<locals>")[0]] += 1
        return configure(kernel, config)
    kind.__getitem__ = counted
    try:
        yield counts
    finally:
        kind.__getitem__ = configure


@contextlib.contextmanager
def counted_transfers() -> Iterator[collections.Counter]:
    """Count the copies between the computer's memory and the GPU made inside a `with` block, by direction and by the
    teenygrad function that asked for them ("to the GPU: cross_entropy", "back: raise_if_set"): every `cuda.to_device`
    and every device array's `copy_to_host` and `copy_to_device`. Each one waits: numba copies on the stream the
    kernels run on, so a copy starts only after every launch queued before it has finished, and Python waits for it."""
    from teenygrad.kernels.cuda.device import cuda
    kind = type(cuda.device_array(1))  # the class of every device array: the GPU's, or the simulator's
    saved = {"to_device": cuda.to_device, "copy_to_host": kind.copy_to_host, "copy_to_device": kind.copy_to_device}
    counts: collections.Counter = collections.Counter()

    def asker() -> str:  # the nearest teenygrad function up the stack, past the buffer helpers
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename.replace("\\", "/")
            if "/teenygrad/" in path and not path.endswith(("/devices.py", "/launch.py")):
                return frame.f_code.co_name
            frame = frame.f_back
        return "(not teenygrad)"

    def counted(name: str, direction: str):  # noqa: ANN202
        def copy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - numba's own signatures
            counts[f"{direction}: {asker()}"] += 1
            return saved[name](*args, **kwargs)
        return copy
    own = {name: name in vars(kind) for name in ("copy_to_host", "copy_to_device")}  # else inherited: put nothing back
    cuda.to_device = counted("to_device", "to the GPU")
    kind.copy_to_host, kind.copy_to_device = counted("copy_to_host", "back"), counted("copy_to_device", "to the GPU")
    try:
        yield counts
    finally:
        cuda.to_device = saved["to_device"]
        for name, defined_there in own.items():
            if defined_there:
                setattr(kind, name, saved[name])
            else:
                delattr(kind, name)
