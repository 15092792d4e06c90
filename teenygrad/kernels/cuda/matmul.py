"""STAND-IN (helper E, for exercise 11's grading until the gpu-kernels branch is merged: take its version, keeping
this contract or telling exercise 11's judge, autograder/judges/gpu_kernels.py)."""
from __future__ import annotations

import functools

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.cuda.device import cuda


@exercise("11-gpu-kernels", "tiled", kernel=True)
@functools.cache
def shared_kernel(tile: int):
    """The tiled kernel for tiles of `tile` x `tile` (a shared array's size is fixed when the kernel compiles)."""
    @cuda.jit
    def sgemm_shared_kernel(a, b, out):
        sa = cuda.shared.array((tile, tile), dtype=np.float32)
        sb = cuda.shared.array((tile, tile), dtype=np.float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * tile + ty, cuda.blockIdx.x * tile + tx
        M, K = a.shape
        N = b.shape[1]
        acc = np.float32(0.0)
        for k0 in range(0, K, tile):
            # each thread loads one element of A's tile and one of B's: every element of A is loaded once per
            # block column (N / tile times), not once per output column (N times)
            sa[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else np.float32(0.0)
            sb[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else np.float32(0.0)
            cuda.syncthreads()
            for k in range(tile):
                acc += sa[ty, k] * sb[k, tx]
            cuda.syncthreads()  # all have used the tiles before the next ones overwrite them
        if row < M and col < N:
            out[row, col] = acc
    return sgemm_shared_kernel


@exercise("11-gpu-kernels", "tiled")
def sgemm_shared(a, b, out, tile: int = 32) -> None:
    """out = a @ b, float32, a: (M, K), b: (K, N), out: (M, N), any M, N, K >= 1 (not only multiples of `tile`).

    One block of tile x tile threads computes one tile x tile tile of out (block x along out's columns); it walks
    K a tile at a time, each thread loading one element of A's tile and one of B's into shared memory (or 0 past
    an edge, with no load), so every element of A is loaded exactly ceil(N / tile) times, every element of B
    ceil(M / tile) times, every element of out stored once and never loaded. a, b, out are device arrays, used in
    place, or numpy arrays; `tile` is 1 to 32."""
    M, N = out.shape
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    shared_kernel(tile)[grid, (tile, tile)](a, b, out)
