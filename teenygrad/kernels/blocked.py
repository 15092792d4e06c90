"""Step 3 of chapter 3's matrix multiply: cache blocking, as a launcher over tiles and a tile kernel.

    matmul_blocked(a, b, out, block_i, block_k, block_j)     out = a @ b, one tile at a time
    matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1)           out[i0:i1, j0:j1] += a[i0:i1, k0:k1] @ b[k0:k1, j0:j1]

The reordered kernel (step 2) sweeps through *all* of `b` for every row of `out`; once `b` is larger than the
caches it is fetched from main memory again for every row of `a`. Blocking splits each of the three loops in
two, an outer loop over blocks and an inner loop within a block: the launcher walks the tiles (a BLOCK_I x
BLOCK_K tile of `a` meets a BLOCK_K x BLOCK_J tile of `b` and adds into a BLOCK_I x BLOCK_J tile of `out`),
and the tile kernel multiplies one tile with the reordered (i-k-j) loops, so the tile of `b` is reused by
BLOCK_I rows while it is still in the L2 cache. Same arithmetic, in the same order for every element of
`out` (k = 0, 1, ... one multiply-add at a time), so the result is bit for bit the reordered kernel's.

Both are exercise 3's pieces (`@exercise`): the tile kernel is compiled inside `matmul_tile`, so it is only
reachable through it. The block sizes are tuned on one machine (`benchmarks/matmul.py`): a BLOCK_K x BLOCK_J
tile of B (128 x 1024 float32 = 512 KiB) sits in L2 while BLOCK_I rows of A and C stream past it, and a
BLOCK_J strip of a row of C (4 KiB) stays in L1.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.jit import kernel

BLOCK_I = 32
BLOCK_K = 128
BLOCK_J = 1024

_COMPILED: dict[str, Callable] = {}  # the tile kernel, compiled on the first call of matmul_tile


@exercise("03-kernels", "matmul_tile")
def matmul_tile(a: np.ndarray, b: np.ndarray, out: np.ndarray, i0: int, i1: int, k0: int, k1: int, j0: int,
                j1: int) -> None:
    """out[i0:i1, j0:j1] += a[i0:i1, k0:k1] @ b[k0:k1, j0:j1], in place; nothing else of `out` is touched.

    Every out[i, j] of the tile gets a[i, k] * b[k, j] added for k = k0, k1 - 1, in that order, one
    multiply-add at a time in out's dtype (the reordered kernel's arithmetic). The inner loop runs over row
    slices from 0, so numba can prove its indices non-negative and vectorises it."""
    tile = _COMPILED.get("tile")
    if tile is None:
        @kernel
        def tile(a, b, out, i0, i1, k0, k1, j0, j1):
            for i in range(i0, i1):
                out_row = out[i, j0:j1]
                for k in range(k0, k1):
                    aik = a[i, k]
                    b_row = b[k, j0:j1]
                    for j in range(j1 - j0):  # from 0: provably non-negative indices, so it vectorises
                        out_row[j] += aik * b_row[j]

        _COMPILED["tile"] = tile
    tile(a, b, out, i0, i1, k0, k1, j0, j1)


@exercise("03-kernels", "matmul_blocked")
def matmul_blocked(a: np.ndarray, b: np.ndarray, out: np.ndarray, block_i: int = BLOCK_I, block_k: int = BLOCK_K,
                   block_j: int = BLOCK_J) -> None:
    """out = a @ b (the matmul kernels' convention: (M, K) @ (K, N) into a preallocated (M, N)), cache-blocked.

    `out` is zeroed, then every tile (i0, k0, j0), with i0 a multiple of block_i below M and so on, is
    multiplied by `matmul_tile` exactly once, the last tile in each direction cut at the matrix's edge."""
    M, K = a.shape
    N = b.shape[1]
    out[...] = 0  # numpy as storage: a fill, no arithmetic
    for i0 in range(0, M, block_i):
        i1 = min(i0 + block_i, M)
        for k0 in range(0, K, block_k):
            k1 = min(k0 + block_k, K)
            for j0 in range(0, N, block_j):
                matmul_tile(a, b, out, i0, i1, k0, k1, j0, min(j0 + block_j, N))
