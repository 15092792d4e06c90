"""Reductions on the GPU (chapter 11): one block a row, the row's threads combining their values in shared memory.

A thread first folds a strided slice of the row (thread t takes elements t, t + threads, ...: neighbouring threads
read neighbouring elements, coalesced), then the block combines its `threads` partial values in a tree: in each
round the first half of the threads add the second half's values to theirs, log2(threads) rounds in all, with a
`syncthreads` between rounds (a round reads what the last one wrote). `threads` is a power of two.

Chapter 11's kernels (`sum_rows`, `softmax_rows`, `sum_rows_warp`) take a contiguous float32 matrix. The op layer's
(the second half: sum max argmax softmax log_softmax and the softmax backwards, `KERNELS`) take the CPU kernels'
strided (M, N) convention and any of the package's dtypes, built on the same tree (`block_sum`, `block_max`).
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from teenygrad.devices import Buffer
from teenygrad.edition import exercise
from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.cuda.elementwise import MAX_BLOCKS, THREADS, flat_config

MAX_THREADS = 1024


@cuda.jit
def sum_rows_kernel(x, out):
    part = cuda.shared.array(MAX_THREADS, dtype=np.float32)
    row, t, threads = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    total = np.float32(0.0)
    for j in range(t, x.shape[1], threads):
        total += x[row, j]
    part[t] = total
    cuda.syncthreads()
    step = threads // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()  # outside the `if`: every thread of the block must reach it
        step //= 2
    if t == 0:
        out[row] = part[0]


def sum_rows(x, out, threads: int = 256) -> None:
    """out[m] = the sum of row m of the float32 (M, N) array x, one block of `threads` (a power of two) a row."""
    if threads < 1 or threads > MAX_THREADS or threads & (threads - 1):
        raise ValueError(f"threads={threads}: a power of two from 1 to {MAX_THREADS}")
    sum_rows_kernel[x.shape[0], threads](x, out)


WARP = 32


@cuda.jit(device=True)
def warp_sum(value):
    """The sum of `value` over the 32 threads of a warp, in lane 0: each step, a lane adds the value of the lane
    `offset` above it, read straight from that lane's register (a shuffle): log2(32) = 5 steps, no shared memory,
    no syncthreads (a warp's lanes run each instruction together). Every lane of the warp must call it."""
    offset = WARP // 2
    while offset > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        offset //= 2
    return value


@cuda.jit
def sum_rows_warp_kernel(x, out):
    part = cuda.shared.array(WARP, dtype=np.float32)  # one sum a warp: at most 1024 / 32 warps a block
    row, t, threads = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    total = np.float32(0.0)
    for j in range(t, x.shape[1], threads):
        total += x[row, j]
    total = warp_sum(total)
    if t % WARP == 0:
        part[t // WARP] = total
    cuda.syncthreads()
    if t < WARP:  # the whole first warp (every lane takes this branch together): it adds the warps' sums
        total = warp_sum(part[t] if t < threads // WARP else np.float32(0.0))
        if t == 0:
            out[row] = total


def sum_rows_warp(x, out, threads: int = 256) -> None:
    """`sum_rows` with warp shuffles instead of a shared-memory tree: log2(32) shuffle steps in each warp, then one
    warp adds the warps' sums; one syncthreads instead of log2(threads). `threads` is a multiple of 32. Only on a
    GPU: numba-cuda's simulator has no shuffles (`sum_rows` is its twin there)."""
    if SIMULATED:
        raise RuntimeError("sum_rows_warp needs a GPU (warp shuffles, which the simulator lacks): use sum_rows")
    if threads < WARP or threads > MAX_THREADS or threads % WARP:
        raise ValueError(f"threads={threads}: a multiple of {WARP} from {WARP} to {MAX_THREADS}")
    sum_rows_warp_kernel[x.shape[0], threads](x, out)


@exercise("11-gpu-kernels", "softmax", kernel=True)
@cuda.jit
def softmax_rows_kernel(x, out):
    """One block a row: the row's max, then the sum of exp(x - max), each a shared-memory tree reduction, then
    out = exp(x - max) / sum."""
    part = cuda.shared.array(MAX_THREADS, dtype=np.float32)
    row, t, threads = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    n = x.shape[1]
    best = np.float32(-np.inf)  # a float64 constant would make the GPU compute the max in float64
    for j in range(t, n, threads):  # each thread folds a strided slice of the row: neighbours read neighbours
        best = max(best, x[row, j])
    part[t] = best
    cuda.syncthreads()
    step = threads // 2
    while step > 0:  # a tree: log2(threads) rounds, half the threads each round
        if t < step:
            part[t] = max(part[t], part[t + step])
        cuda.syncthreads()
        step //= 2
    top = part[0]
    cuda.syncthreads()  # everyone has read the max before part is reused
    total = np.float32(0.0)
    for j in range(t, n, threads):
        total += math.exp(x[row, j] - top)
    part[t] = total
    cuda.syncthreads()
    step = threads // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    total = part[0]
    for j in range(t, n, threads):
        out[row, j] = math.exp(x[row, j] - top) / total


@exercise("11-gpu-kernels", "softmax")
def softmax_rows(x, out, threads: int = 256) -> None:
    """out[m] = softmax(x[m]) for every row of the float32 (M, N) array x (M, N >= 1), stable (the row's max is
    subtracted first), one block of `threads` threads (a power of two, 1 to 1024) a row, each of the row's max and
    sum a block-level reduction in shared memory. x and out are device arrays or numpy arrays."""
    softmax_rows_kernel[x.shape[0], threads](x, out)


# ---- the op layer's reductions and row-wise softmax, in the CPU kernels' calling convention -----------------------
# fn(x, x_offset, M, sm, N, sn, out): element (m, n) of the (M, N) view is x[x_offset + m*sm + n*sn] (teenygrad's
# reductions bring every axis choice to this shape, teenygrad/ops/reductions.py). Chapter 11's kernels above took a
# contiguous float32 matrix; these take any strides and float32, float64 or int64 (softmax: the floats), so a
# shared array, whose dtype is fixed when the kernel compiles, is made in a kernel per dtype (`row_kernels`, cached).
# One block a row, as above; rows past the grid's MAX_BLOCKS go round a grid-stride loop (every thread of a block
# takes the same rows, so each reaches every syncthreads). Sums accumulate in the data's dtype (as chapter 11's and
# PyTorch's do): the tree adds log2(threads) roundings an element, the thread's fold N / threads; the CPU sums in
# float64, so float32 results agree to float32's precision, not bit for bit.

@cuda.jit(device=True)
def block_sum(part, t, threads, value):
    """The sum of `value` over the block's `threads` threads (a power of two), returned to every thread: a tree in
    the shared array `part` (the tree of `sum_rows_kernel`). Every thread of the block must call it."""
    part[t] = value
    cuda.syncthreads()
    step = threads // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    total = part[0]
    cuda.syncthreads()  # everyone has read the total before `part` is written again
    return total


@cuda.jit(device=True)
def block_max(part, t, threads, value):
    """The largest `value` over the block, to every thread; nan if any is nan (numpy's rule, and the CPU's)."""
    part[t] = value
    cuda.syncthreads()
    step = threads // 2
    while step > 0:
        if t < step:
            other = part[t + step]
            if other > part[t] or other != other:  # once nan, nothing is larger: it stays
                part[t] = other
        cuda.syncthreads()
        step //= 2
    best = part[0]
    cuda.syncthreads()
    return best


@cuda.jit(device=True)
def better(v, i, best, arg):
    """Does (value v at position i) beat (best at arg) for argmax: the larger value, the first position on a tie,
    the first nan (numpy's rule, the CPU's)?"""
    if best != best:
        return v != v and i < arg
    if v != v:
        return True
    return v > best or (v == best and i < arg)


@functools.cache
def row_kernels(dtype: str) -> dict[str, Callable]:
    """The row kernels for data of `dtype` (a name: "float32", "float64", "int64"), compiled on first launch."""
    typ = np.dtype(dtype).type

    @cuda.jit
    def sum_kernel(x, x_offset, M, sm, N, sn, out):
        part = cuda.shared.array(THREADS, dtype=typ)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for m in range(cuda.blockIdx.x, M, cuda.gridDim.x):
            base = x_offset + m * sm
            acc = typ(0)  # N == 0 leaves it 0: the sum of nothing
            for n in range(t, N, threads):  # neighbouring threads read neighbouring elements (when sn == 1)
                acc += x[base + n * sn]
            acc = block_sum(part, t, threads, acc)
            if t == 0:
                out[m] = acc

    @cuda.jit
    def max_kernel(x, x_offset, M, sm, N, sn, out):
        part = cuda.shared.array(THREADS, dtype=typ)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for m in range(cuda.blockIdx.x, M, cuda.gridDim.x):
            base = x_offset + m * sm
            best = x[base]  # the row's first element (N >= 1) starts every thread: it can't change the max
            for n in range(t, N, threads):
                v = x[base + n * sn]
                if v > best or v != v:
                    best = v
            best = block_max(part, t, threads, best)
            if t == 0:
                out[m] = best

    @cuda.jit
    def argmax_kernel(x, x_offset, M, sm, N, sn, out):
        vals = cuda.shared.array(THREADS, dtype=typ)
        args = cuda.shared.array(THREADS, dtype=np.int64)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for m in range(cuda.blockIdx.x, M, cuda.gridDim.x):
            base = x_offset + m * sm
            best, arg = x[base], 0  # element 0 is a real candidate: a thread with no elements offers it
            for n in range(t, N, threads):
                v = x[base + n * sn]
                if better(v, n, best, arg):
                    best, arg = v, n
            vals[t], args[t] = best, arg
            cuda.syncthreads()
            step = threads // 2
            while step > 0:  # the tree carries (value, position) pairs
                if t < step and better(vals[t + step], args[t + step], vals[t], args[t]):
                    vals[t], args[t] = vals[t + step], args[t + step]
                cuda.syncthreads()
                step //= 2
            if t == 0:
                out[m] = args[0]
            cuda.syncthreads()  # the next row writes vals and args only after thread 0 has read them

    @cuda.jit
    def softmax_kernel(x, x_offset, M, sm, N, sn, out, log):
        part = cuda.shared.array(THREADS, dtype=typ)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for m in range(cuda.blockIdx.x, M, cuda.gridDim.x):
            base = x_offset + m * sm
            top = x[base]
            for n in range(t, N, threads):
                top = max(top, x[base + n * sn])
            top = block_max(part, t, threads, top)
            total = typ(0)
            for n in range(t, N, threads):
                total += math.exp(x[base + n * sn] - top)  # every exponent <= 0: no overflow
            total = block_sum(part, t, threads, total)  # >= 1 (the max's term is exactly 1): its log is finite
            if log:
                lse = math.log(total)
                for n in range(t, N, threads):
                    out[m * N + n] = (x[base + n * sn] - top) - lse
            else:
                for n in range(t, N, threads):
                    out[m * N + n] = math.exp(x[base + n * sn] - top) / total

    @cuda.jit
    def softmax_backward_kernel(y, g, M, N, dx, log):
        part = cuda.shared.array(THREADS, dtype=typ)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for m in range(cuda.blockIdx.x, M, cuda.gridDim.x):
            base = m * N
            acc = typ(0)
            for n in range(t, N, threads):  # softmax: sum g*y; log_softmax: sum g
                acc += g[base + n] if log else g[base + n] * y[base + n]
            acc = block_sum(part, t, threads, acc)
            for n in range(t, N, threads):
                if log:
                    dx[base + n] = g[base + n] - math.exp(y[base + n]) * acc  # exp(y) is the softmax
                else:
                    dx[base + n] = y[base + n] * (g[base + n] - acc)

    return {"sum": sum_kernel, "max": max_kernel, "argmax": argmax_kernel, "softmax": softmax_kernel,
            "softmax_backward": softmax_backward_kernel}


@functools.cache
def column_kernels(dtype: str) -> dict[str, Callable]:
    """Reductions for views whose rows are closer in memory than their columns (|sm| < |sn|: the sum over axis 0
    of a row-major matrix): one thread a row, each walking its row alone, so that the threads of a warp read
    neighbouring rows, neighbouring addresses (a block a row would read with stride sn: one transaction a thread)."""
    typ = np.dtype(dtype).type

    @cuda.jit
    def sum_kernel(x, x_offset, M, sm, N, sn, out):
        for m in range(cuda.grid(1), M, cuda.gridsize(1)):
            acc = typ(0)
            for n in range(N):
                acc += x[x_offset + m * sm + n * sn]
            out[m] = acc

    @cuda.jit
    def max_kernel(x, x_offset, M, sm, N, sn, out):
        for m in range(cuda.grid(1), M, cuda.gridsize(1)):
            best = x[x_offset + m * sm]
            for n in range(1, N):
                v = x[x_offset + m * sm + n * sn]
                if v > best or v != v:
                    best = v
            out[m] = best

    @cuda.jit
    def argmax_kernel(x, x_offset, M, sm, N, sn, out):
        for m in range(cuda.grid(1), M, cuda.gridsize(1)):
            best, arg = x[x_offset + m * sm], 0
            for n in range(1, N):
                v = x[x_offset + m * sm + n * sn]
                if better(v, n, best, arg):
                    best, arg = v, n
            out[m] = arg

    return {"sum": sum_kernel, "max": max_kernel, "argmax": argmax_kernel}


def row_threads(N: int) -> int:
    """Threads a row's block: a power of two, enough for N elements up to THREADS, at least a warp on a GPU (a
    smaller block leaves lanes of its warp idle anyway; in the simulator, fewer Python threads)."""
    threads = 1 if SIMULATED else WARP
    while threads < min(N, THREADS):
        threads *= 2
    return threads


def _reduction(op: str) -> Callable:
    def launch(x: Buffer, x_offset: int, M: int, sm: int, N: int, sn: int, out: Buffer) -> None:
        if sm != 0 and abs(sm) < abs(sn) and M >= WARP:  # rows closer than columns, and a warp's worth of rows
            blocks, threads = flat_config(M)
            column_kernels(str(x.dtype))[op][blocks, threads](x, x_offset, M, sm, N, sn, out)
        else:
            row_kernels(str(x.dtype))[op][min(M, MAX_BLOCKS), row_threads(N)](x, x_offset, M, sm, N, sn, out)
    launch.__name__ = op
    launch.__doc__ = (f"The `{op}` kernel, the CPU's convention: out[m] = {op} over n of x[x_offset + m*sm + n*sn], "
                      f"m < M" + (" (int64 positions, the first on ties)." if op == "argmax" else "."))
    return launch


reduce_sum, reduce_max, reduce_argmax = _reduction("sum"), _reduction("max"), _reduction("argmax")


def softmax(x: Buffer, x_offset: int, M: int, sm: int, N: int, sn: int, out: Buffer) -> None:
    """out[m*N + n] = softmax of row m of the (M, N) view, stable (the row's max subtracted first); out contiguous."""
    if M and N:
        row_kernels(str(x.dtype))["softmax"][min(M, MAX_BLOCKS), row_threads(N)](x, x_offset, M, sm, N, sn, out, False)


def log_softmax(x: Buffer, x_offset: int, M: int, sm: int, N: int, sn: int, out: Buffer) -> None:
    """out[m*N + n] = (x(m, n) - max) - log sum_k exp(x(m, k) - max): the log-softmax of each row, stable."""
    if M and N:
        row_kernels(str(x.dtype))["softmax"][min(M, MAX_BLOCKS), row_threads(N)](x, x_offset, M, sm, N, sn, out, True)


def softmax_backward(y: Buffer, g: Buffer, M: int, N: int, dx: Buffer) -> None:
    """dx = y * (g - sum_n g*y) row by row, y = softmax(x); y, g, dx contiguous (M*N,)."""
    if M and N:
        row_kernels(str(y.dtype))["softmax_backward"][min(M, MAX_BLOCKS), row_threads(N)](y, g, M, N, dx, False)


def log_softmax_backward(y: Buffer, g: Buffer, M: int, N: int, dx: Buffer) -> None:
    """dx = g - exp(y) * sum_n g row by row, y = log_softmax(x); y, g, dx contiguous (M*N,)."""
    if M and N:
        row_kernels(str(y.dtype))["softmax_backward"][min(M, MAX_BLOCKS), row_threads(N)](y, g, M, N, dx, True)


KERNELS: dict[str, Callable] = {"sum": reduce_sum, "max": reduce_max, "argmax": reduce_argmax, "softmax": softmax,
                                "log_softmax": log_softmax, "softmax_backward": softmax_backward,
                                "log_softmax_backward": log_softmax_backward}
