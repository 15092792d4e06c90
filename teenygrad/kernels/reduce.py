"""Reduction kernels (chapters 2 and 3): sum, max, argmax over the last axis of an (M, N) strided matrix
(`sum_rows`, `max_rows`, `argmax_rows`: exercise 3's pieces, each a launcher that compiles its loop on first call).

Every reduction is brought to one shape first (see `teenygrad.ops.reductions`): the kept axes are flattened
into M rows and the reduced axes into N columns, so that element (m, n) is
    x[x_offset + m*sm + n*sn].
Calling convention (the same for sum, max and argmax):
    fn(x, x_offset, M, sm, N, sn, out)     out: contiguous, length M;  out[m] = reduce_n x(m, n)
argmax writes int64 positions n (the first one on ties; numpy's rule that nan wins).

Loop order matters for speed: walking memory with stride 1 is fast, jumping is slow. When the rows are
closer together in memory than the columns (|sm| < |sn|, e.g. summing a C-order matrix over axis 0),
we sweep n in the outer loop and update all M partial results in the inner one.

Sums accumulate in float64 (a float32 running sum of a million numbers loses ~3 digits); the sum kernel
may reassociate (add in a different order) so the compiler can use SIMD: only rounding changes.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.elementwise import u  # unsigned indices let numba vectorize
from teenygrad.kernels.jit import kernel

_COMPILED: dict[str, Callable] = {}  # name -> the loop of a piece below, compiled on its first call


@exercise("03-kernels", "sum_rows")
def sum_rows(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray) -> None:
    """The `sum` kernel: out[m] = sum over n of x[x_offset + m*sm + n*sn], for m < M (0 when N == 0).

    Accumulates in float64. When the rows are closer together in memory than the columns (|sm| < |sn|, the sum
    over axis 0 of a C-order matrix), it sweeps n in the outer loop and adds each row of the matrix into M
    running totals, so memory is still read in order. The compiled loop lives inside this launcher, which is
    exercise 3's piece (`KERNELS["sum"]` is this function)."""
    kern = _COMPILED.get("sum")
    if kern is None:
        @kernel(fastmath={"reassoc"})  # let LLVM reorder the additions, so it can use SIMD
        def kern(x, x_offset, M, sm, N, sn, out):
            if sm != 0 and (sm if sm > 0 else -sm) < (sn if sn > 0 else -sn):
                acc = np.zeros(M, dtype=np.float64)
                for n in range(N):
                    base = x_offset + n * sn
                    for m in range(M):
                        acc[m] += x[u(base + m * sm)]
                for m in range(M):
                    out[m] = acc[m]
            else:
                for m in range(M):
                    s = 0.0
                    base = x_offset + m * sm
                    for n in range(N):
                        s += x[u(base + n * sn)]
                    out[m] = s

        _COMPILED["sum"] = kern
    kern(x, x_offset, M, sm, N, sn, out)


@exercise("03-kernels", "max_rows")
def max_rows(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray) -> None:
    """The `max` kernel: out[m] = the largest of x[x_offset + m*sm + n*sn] over n < N, for m < M; nan when any
    of them is nan (numpy's rule). Requires N >= 1 (the max of nothing is undefined; the op raises first).

    Like `sum_rows`, it sweeps the matrix row by row into M running maxima when |sm| < |sn|. Its inner loops are
    branch-free (a select, and a separate "saw a nan" flag) so that the compiler can vectorise them."""
    kern = _COMPILED.get("max")
    if kern is None:
        @kernel
        def kern(x, x_offset, M, sm, N, sn, out):
            if sm != 0 and (sm if sm > 0 else -sm) < (sn if sn > 0 else -sn):
                nan = np.zeros(M, dtype=np.bool_)
                for m in range(M):
                    out[m] = x[u(x_offset + m * sm)]
                for n in range(1, N):
                    base = x_offset + n * sn
                    for m in range(M):
                        v = x[u(base + m * sm)]
                        out[m] = v if v > out[m] else out[m]
                        nan[m] |= v != v
                for m in range(M):
                    if nan[m] or out[m] != out[m]:
                        out[m] = math.nan
            else:
                for m in range(M):
                    base = x_offset + m * sm
                    best = x[u(base)]
                    nan = best != best
                    for n in range(1, N):
                        v = x[u(base + n * sn)]
                        best = v if v > best else best
                        nan |= v != v
                    out[m] = best
                    if nan:
                        out[m] = math.nan

        _COMPILED["max"] = kern
    kern(x, x_offset, M, sm, N, sn, out)


@exercise("03-kernels", "max_rows")
def argmax_rows(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray) -> None:
    """The `argmax` kernel: out[m] (int64) = the position n < N of the largest x[x_offset + m*sm + n*sn]: the
    first one on ties, and the first nan if there is one (numpy's rule). Requires N >= 1.

    Row by row whatever the strides: argmax is mostly taken over a contiguous last axis (class scores)."""
    kern = _COMPILED.get("argmax")
    if kern is None:
        @kernel
        def kern(x, x_offset, M, sm, N, sn, out):
            for m in range(M):
                base = x_offset + m * sm
                best, arg = x[u(base)], 0
                for n in range(1, N):
                    v = x[u(base + n * sn)]
                    if v > best or (v != v and best == best):  # a larger value, or the first nan
                        best, arg = v, n
                out[m] = arg

        _COMPILED["argmax"] = kern
    kern(x, x_offset, M, sm, N, sn, out)
