"""The op layer's products on the GPU (chapter 11): the kernel table's `matmul`, `matmul_batched` and `matmul_bias`,
for any float dtype, any sizes and batches, on numba-cuda device arrays with the CPU kernels' conventions.

The SGEMM ladder (`matmul.py`) is float32 only: its shared tiles and registers are float32, fixed when a kernel
compiles. The op layer also multiplies float64 and batches of matrices, so the entries here send float32 2-D products
up the ladder, to its top rung (which reads a transposed operand in place and adds a linear layer's bias as it stores
its outputs), and everything else to one simple shared-memory tiled kernel per dtype, whose grid's z axis runs along
the batch: a batch is one launch, not B.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from teenygrad.devices import Transposed
from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.cuda.fused import add_bias
from teenygrad.kernels.cuda.matmul import sgemm_double_buffered
from teenygrad.kernels.cuda.movement import fill

# The top rung's tiles in the simulator: one warp a block (every simulated thread is a Python thread, so the GPU's
# 256 threads a block, each computing 8 x 8 outputs, would take minutes); the same kernel, only smaller tiles
SIM_TILES = {"BM": 32, "BN": 32, "BK": 8, "WM": 32, "WN": 32, "WNITER": 2, "TM": 4, "TN": 4}
TILE = 4 if SIMULATED else 16  # the tiled kernel's tile edge: 16 x 16 threads a block on a GPU, 4 x 4 simulated
GRID_CAP = 65535  # a grid's y and z axes hold at most this many blocks; the kernel's loops cover the rest


@functools.cache
def batched_kernel(dtype: type, tile: int) -> Callable:
    """out[z] = a[z] @ b[z] for a: (B, M, K), b: (B, K, N), out: (B, M, N) of `dtype`, tiles of tile x tile.

    `sgemm_shared`'s algorithm with two additions: the batch on the grid's z axis, and grid-stride loops over
    the batch and the tiles, so any B, M, N runs on any grid (a block's loop counts depend only on its block
    index and the sizes, so all its threads reach every `syncthreads` together)."""
    @cuda.jit
    def kernel(a, b, out):
        sa = cuda.shared.array((tile, tile), dtype=dtype)  # (the dtype: fixed when the kernel compiles)
        sb = cuda.shared.array((tile, tile), dtype=dtype)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        B, M, K = a.shape
        N = b.shape[2]
        zero = dtype(0.0)  # a constant of the data's dtype: float32 arithmetic stays float32
        for z in range(cuda.blockIdx.z, B, cuda.gridDim.z):
            for r0 in range(cuda.blockIdx.y * tile, M, cuda.gridDim.y * tile):
                for c0 in range(cuda.blockIdx.x * tile, N, cuda.gridDim.x * tile):
                    row, col = r0 + ty, c0 + tx
                    acc = zero
                    for k0 in range(0, K, tile):
                        sa[ty, tx] = a[z, row, k0 + tx] if row < M and k0 + tx < K else zero
                        sb[ty, tx] = b[z, k0 + ty, col] if k0 + ty < K and col < N else zero
                        cuda.syncthreads()  # the tiles are complete before anyone reads them
                        for k in range(tile):
                            acc += sa[ty, k] * sb[k, tx]
                        cuda.syncthreads()  # all have used the tiles before the next ones overwrite them
                    if row < M and col < N:
                        out[z, row, col] = acc
    return kernel


def matmul_batched(a, b, out) -> None:
    """out[i] = a[i] @ b[i] for contiguous a: (B, M, K), b: (B, K, N), out: (B, M, N), float32 or float64 device
    arrays (the CPU kernels' convention): one launch of the tiled kernel, the batch on the grid's z axis; out is
    overwritten (zeros when K == 0)."""
    B, M, N = out.shape
    if out.size == 0:  # nothing to compute (and a grid of 0 blocks does not launch)
        return
    if a.shape[2] == 0:
        fill(out.reshape(out.size), 0)  # a product over K = 0
        return
    grid = (min(-(-N // TILE), 2**31 - 1), min(-(-M // TILE), GRID_CAP), min(B, GRID_CAP))
    batched_kernel(np.dtype(out.dtype).type, TILE)[grid, (TILE, TILE)](a, b, out)


def matmul(a, b, out) -> None:
    """out = a @ b for contiguous a: (M, K), b: (K, N), out: (M, N) device arrays, the table's `matmul`: float32 on
    the ladder's top rung (its tiles smaller in the simulator), float64 on the tiled kernel; zeros when K == 0. A
    float32 operand may come as `devices.Transposed(storage)`: the operand is storage.T, read in place."""
    ta, tb = isinstance(a, Transposed), isinstance(b, Transposed)
    a, b = (a.storage if ta else a), (b.storage if tb else b)
    M, K = (a.shape[1], a.shape[0]) if ta else a.shape
    if out.size == 0:
        return
    if K == 0:
        fill(out.reshape(out.size), 0)  # a product over K = 0
    elif out.dtype == np.float32:
        sgemm_double_buffered(a, b, out, transposed=(ta, tb), **(SIM_TILES if SIMULATED else {}))
    elif ta or tb:
        raise TypeError("matmul: a transposed operand (devices.Transposed) is taken in float32 only")
    else:  # a batch of one: the same kernel
        N = out.shape[1]
        matmul_batched(a.reshape(1, M, K), b.reshape(1, K, N), out.reshape(1, M, N))


def matmul_bias(a, b, bias, out) -> None:
    """out = a @ b + bias, bias (N,) added to every row, the table's `matmul_bias` (a linear layer's forward): in
    float32 one launch of the ladder's top rung, the bias added as its outputs are stored; in float64 (or when
    K == 0) the product, then `add_bias`. The operands as `matmul`'s."""
    if out.size == 0:
        return
    ta = isinstance(a, Transposed)
    K = (a.storage.shape[0] if ta else a.shape[1])
    if out.dtype == np.float32 and K:
        tb = isinstance(b, Transposed)
        sgemm_double_buffered(a.storage if ta else a, b.storage if tb else b, out, transposed=(ta, tb), bias=bias,
                              **(SIM_TILES if SIMULATED else {}))
    else:
        matmul(a, b, out)
        add_bias(out, bias)
