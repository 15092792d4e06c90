"""Reductions on the GPU (chapter 11): one block a row, the row's threads combining their values in shared memory.

A thread first folds a strided slice of the row (thread t takes elements t, t + threads, ...: neighbouring threads
read neighbouring elements, coalesced), then the block combines its `threads` partial values in a tree: in each
round the first half of the threads add the second half's values to theirs, log2(threads) rounds in all, with a
`syncthreads` between rounds (a round reads what the last one wrote). `threads` is a power of two.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.cuda.device import SIMULATED, cuda

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
