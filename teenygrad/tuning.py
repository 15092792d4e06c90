"""Two process-wide settings that make training faster (chapter 9), applied only when you ask:

    import teenygrad as tg
    tg.tune()        # before the first parallel kernel runs (first thing in a training script)

Importing teenygrad changes nothing in your process; `tune()` changes two things, and says which:

- OpenMP's spin count. numba's parallel kernels run on an OpenMP pool (GNU libgomp) whose idle threads spin
  300,000 rounds before they sleep. On a machine busy with other work the spinning threads steal the cores the
  working ones need (a 256x30x200 matmul took 25 ms instead of 0.4); never spinning costs a wake-up per
  parallel kernel, ~20% of a GPT step when the machine is quiet. A short spin (GOMP_SPINCOUNT=10000,
  microseconds) keeps both. libgomp reads it once, when the pool starts: after the first parallel kernel it is
  too late, and `tune()` says so. `benchmarks/gpt.py` measures the difference.
- glibc's malloc thresholds. A training step allocates its activations afresh (a GPT step: hundreds of
  arrays, many over a megabyte). glibc serves big requests with fresh pages from the kernel and returns them
  on free, so every step pays again for the first touch of each page: ~2,700 page faults and ~7 ms of system
  time per step of chapter 9's GPT. Raising the thresholds keeps up to 512 MiB of freed memory in the
  process (requests over 64 MiB still get their own pages) and the faults drop to ~0 (tests/test_ch09_tuning.py).

A value you set yourself (GOMP_SPINCOUNT, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ in the environment)
always wins.
"""
from __future__ import annotations

import os

SPIN_COUNT = "10000"
MMAP_THRESHOLD, TRIM_THRESHOLD = 64 << 20, 512 << 20


def _pool_started() -> bool:
    """Has libgomp read GOMP_SPINCOUNT already? It does when it is loaded: by numba's first parallel kernel, or
    by another library with OpenMP inside (PyTorch: one libgomp.so.1 then serves both, so importing torch
    first fixes the spin count for teenygrad too)."""
    try:
        from numba.np.ufunc import parallel
        if getattr(parallel, "_is_initialized", False):
            return True
    except ImportError:
        pass
    try:
        with open("/proc/self/maps") as maps:  # Linux: the shared libraries this process has loaded
            return any("libgomp" in line for line in maps)
    except OSError:
        return False


def _keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; False where the C library has no mallopt (macOS, musl)."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def tune() -> dict[str, str]:
    """Apply the two settings (see the module docstring); returns {setting: what happened} for each."""
    done = {}
    if "GOMP_SPINCOUNT" in os.environ:
        done["GOMP_SPINCOUNT"] = f"left at {os.environ['GOMP_SPINCOUNT']} (set before)"
    elif _pool_started():
        done["GOMP_SPINCOUNT"] = ("not set: OpenMP already started (a parallel kernel ran, or torch was imported); "
                                  "call tune() first")
    else:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
        done["GOMP_SPINCOUNT"] = f"set to {SPIN_COUNT}"
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        done["malloc"] = "left alone (MALLOC_* set before)"
    else:
        done["malloc"] = "keeps freed memory" if _keep_freed_memory() else "unchanged (no glibc mallopt here)"
    return done
