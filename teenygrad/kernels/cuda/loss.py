"""Cross-entropy on the GPU (chapter 11), the CPU kernels' conventions (teenygrad/kernels/loss.py):

cross_entropy(x, t, lse, losses)        x: contiguous (R, C) logits, t: int64 (R,) classes; lse and losses float64
    lse[r] = max_c x[r, c] + log sum_c exp(x[r, c] - max), losses[r] = lse[r] - x[r, t[r]]
cross_entropy_backward(x, t, lse, scale, dx)
    dx[r, c] = exp(x[r, c] - lse[r]) * scale - [c == t[r]] * scale      (softmax minus one-hot, in one pass)

The forward is one block a row (reduce.py's way): the row's max, then the sum of the shifted exps, each a tree in
shared memory, in float64 as the CPU's (lse is float64: one shared array of one dtype serves float32 and float64
logits). The backward needs no reduction (the forward kept lse): one thread an element, a grid-stride loop.
A target outside [0, C) raises IndexError as on the CPU: the forward's kernel sets a flag, read back after it (one
4-byte copy, which waits for the kernel); the backward trusts the forward's check and skips such a row's one-hot.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.devices import Buffer
from teenygrad.kernels.cuda.device import cuda
from teenygrad.kernels.cuda.elementwise import MAX_BLOCKS, THREADS, flat_config
from teenygrad.kernels.cuda.movement import error_flag, raise_if_set
from teenygrad.kernels.cuda.reduce import block_max, block_sum, row_threads


@cuda.jit
def cross_entropy_kernel(x, t, R, C, lse, losses, bad):
    part = cuda.shared.array(THREADS, dtype=np.float64)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, R, cuda.gridDim.x):  # one block a row; rows past the grid go round the loop
        base = r * C
        top = np.float64(x[base])
        for j in range(tid, C, threads):  # neighbouring threads read neighbouring logits: coalesced
            top = max(top, np.float64(x[base + j]))
        top = block_max(part, tid, threads, top)
        total = 0.0
        for j in range(tid, C, threads):
            total += math.exp(x[base + j] - top)  # every exponent <= 0: no overflow; the max's term is 1
        total = block_sum(part, tid, threads, total)
        if tid == 0:
            k = t[r]
            lse[r] = top + math.log(total)
            if 0 <= k < C:
                losses[r] = lse[r] - x[base + k]
            else:
                bad[0] = 1


@cuda.jit
def cross_entropy_backward_kernel(x, t, lse, scale, dx, n, C):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        r = i // C
        v = math.exp(x[i] - lse[r]) * scale
        if i - r * C == t[r]:
            v -= scale
        dx[i] = v


def cross_entropy(x: Buffer, t: Buffer, lse: Buffer, losses: Buffer) -> None:
    """lse[r] = log sum_c e^{x[r, c]} (stably), losses[r] = lse[r] - x[r, t[r]]: x contiguous (R, C), R = len(t);
    lse and losses float64 (R,). A target outside [0, C) raises IndexError."""
    R = t.shape[0]
    C = x.shape[0] // R
    cross_entropy_kernel[min(R, MAX_BLOCKS), row_threads(C)](x, t, R, C, lse, losses, error_flag())
    raise_if_set(error_flag(), IndexError("cross_entropy: target class out of range"))


def cross_entropy_backward(x: Buffer, t: Buffer, lse: Buffer, scale: float, dx: Buffer) -> None:
    """dx[r, c] = (e^{x[r, c] - lse[r]} - [c == t[r]]) * scale for the contiguous (R, C) x and dx."""
    n = x.shape[0]
    blocks, threads = flat_config(n)
    cross_entropy_backward_kernel[blocks, threads](x, t, lse, float(scale), dx, n, n // t.shape[0])


KERNELS = {"cross_entropy": cross_entropy, "cross_entropy_backward": cross_entropy_backward}
