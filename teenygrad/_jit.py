"""How teenygrad compiles its kernels.

Every kernel is a plain Python function decorated with `@kernel` (or `@kernel(parallel=True)`). Numba
compiles it to machine code on first call and caches the result on disk (`cache=True`): in
`__pycache__` beside the source, or, when the package directory is read-only, in numba's per-user cache
directory (set NUMBA_CACHE_DIR to choose another), so a second Python process starts without recompiling.

Debugging switch: `TEENYGRAD_JIT=0` (set before importing teenygrad) runs every kernel as plain Python,
so print() and pdb work inside kernels. Slow, but the results are the same.
"""
from __future__ import annotations

import os
from typing import Callable

# Parallel kernels run on numba's OpenMP pool (GNU libgomp), whose idle threads spin before they sleep:
# 300,000 rounds by default. On a machine busy with other work (a second test worker, a book build) the
# spinning threads steal the cores the working ones need: a 256x30x200 matmul took 25 ms instead of 0.4.
# Never spinning (OMP_WAIT_POLICY=PASSIVE) fixes that but costs a wake-up per parallel kernel, ~20% of a
# GPT training step on a quiet machine. A short spin (10,000 rounds, microseconds) keeps both: measured on
# the chapter 9 GPT step, as fast as passive under load and within a few percent of spinning when quiet.
# Read when numba starts the pool (the first parallel kernel); values the user sets win.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")


def _keep_freed_memory() -> None:
    """Let freed arrays' memory be reused by the next ones instead of handing it back to the OS.

    A training step allocates its activations and gradients afresh (a GPT step: hundreds of arrays, many
    over a megabyte). glibc's malloc serves big requests with fresh pages from the kernel and returns them on
    free, so every step paid again for the first touch of each page: ~2,700 page faults and ~7 ms of
    system time per step of chapter 9's GPT. Raising the thresholds keeps freed memory in the process (up
    to 512 MiB of it; requests over 64 MiB still get their own pages), and the faults drop to ~0.
    glibc only (Linux); elsewhere, or if MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ are set, nothing changes."""
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt  # AttributeError where the C library has none (macOS, musl)
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_MMAP_THRESHOLD, 64 << 20)
    mallopt(M_TRIM_THRESHOLD, 512 << 20)


_keep_freed_memory()

import numba  # noqa: E402

JIT_ENABLED = os.environ.get("TEENYGRAD_JIT", "1").strip().lower() not in ("0", "false", "no", "off")

prange = numba.prange if JIT_ENABLED else range


def kernel(fn: Callable | None = None, *, parallel: bool = False, fastmath: bool = False, numpy_errors: bool = False):
    """Compile `fn` with numba (nopython mode, cached on disk), unless TEENYGRAD_JIT=0.

    numpy_errors: x / 0 gives inf or nan as in numpy instead of raising ZeroDivisionError as in Python;
    the check for a zero divisor is a branch per division, which stops the loop from being vectorised."""

    def wrap(f: Callable) -> Callable:
        if not JIT_ENABLED:
            return f
        return numba.njit(cache=True, parallel=parallel, fastmath=fastmath, nogil=True,
                          error_model="numpy" if numpy_errors else "python")(f)

    return wrap(fn) if fn is not None else wrap
