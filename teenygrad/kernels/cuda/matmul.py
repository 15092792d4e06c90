"""The SGEMM ladder (chapter 11): float32 out = a @ b on the GPU, one kernel a rung, each faster than the last.

Every rung computes out = a @ b for a: (M, K), b: (K, N), out: (M, N), any sizes >= 1 (edges are bounds-checked:
a load past an edge reads 0 and never touches memory, a store past an edge is skipped). What changes from rung to
rung is how often each element of a and b is loaded from global memory, and how well the loads are coalesced:
- `sgemm_naive`: one thread an output; a warp's threads take neighbouring ROWS, so their loads of a are 32 rows
  apart (32 transactions) and their stores scattered. Every output loads a row of a and a column of b: 2K loads
  for 2K FLOPs, 4 bytes a FLOP.
- `sgemm_coalesced`: the same, but a warp's threads take neighbouring COLUMNS: they read one element of a (a
  broadcast) and 32 neighbouring elements of b (one transaction), and store 32 neighbours.
- `sgemm_shared` (exercise 11): tiles of a and b staged in shared memory; each element loaded once per tile of
  out it is used by: a is loaded N / tile times, b M / tile times, instead of N and M times.
- `sgemm_blocked_1d`: each thread computes TM outputs of a column, reusing each element of b it reads from shared
  memory TM times (from registers): fewer shared-memory loads per FLOP, more work per thread.
- `sgemm_blocked_2d`: each thread computes a TM x TN block of outputs from TM values of a and TN of b held in
  registers: TM * TN multiply-adds for TM + TN shared-memory loads.
`LADDER` lists them in order; `matmul` is the best rung. Tile sizes are arguments (fixed when a kernel compiles,
so each size is its own kernel, cached): the simulator's tests use small ones, a GPU the defaults.
"""
from __future__ import annotations

import functools
from typing import Callable

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


def _grid(M: int, N: int, rows: int, cols: int) -> tuple[int, int]:
    """Blocks along out's columns (x) and rows (y) to cover (M, N) with blocks of rows x cols outputs."""
    return (N + cols - 1) // cols, (M + rows - 1) // rows


@cuda.jit
def naive_kernel(a, b, out):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # x: the fastest index in a warp, along ROWS
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < out.shape[0] and col < out.shape[1]:
        acc = np.float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        out[row, col] = acc


def sgemm_naive(a, b, out, block: int = 16) -> None:
    """out = a @ b, one thread an output, neighbouring threads on neighbouring rows (uncoalesced)."""
    M, N = out.shape
    naive_kernel[((M + block - 1) // block, (N + block - 1) // block), (block, block)](a, b, out)


@cuda.jit
def coalesced_kernel(a, b, out):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # x along COLUMNS: a warp reads 32 neighbours of b
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < out.shape[0] and col < out.shape[1]:
        acc = np.float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        out[row, col] = acc


def sgemm_coalesced(a, b, out, block: int = 16) -> None:
    """out = a @ b, one thread an output, neighbouring threads on neighbouring columns (coalesced)."""
    M, N = out.shape
    coalesced_kernel[_grid(M, N, block, block), (block, block)](a, b, out)


@functools.cache
def blocked_kernel(BM: int, BN: int, BK: int, TM: int, TN: int) -> Callable:
    """A block computes a BM x BN tile of out with (BM / TM) * (BN / TN) threads, each a TM x TN block of it.

    Per step of BK along K the block stages a's BM x BK tile and b's BK x BN tile in shared memory (every thread
    loading its share, neighbouring threads neighbouring elements), then each thread, for each k, reads TM values
    of a's tile and TN of b's into registers and does TM * TN multiply-adds with them. TN = 1 is the 1-D form."""
    threads = (BM // TM) * (BN // TN)
    across = BN // TN  # threads along a row of the tile

    @cuda.jit
    def kernel(a, b, out):
        sa = cuda.shared.array((BM, BK), dtype=np.float32)
        sb = cuda.shared.array((BK, BN), dtype=np.float32)
        acc = cuda.local.array((TM, TN), dtype=np.float32)  # registers: the thread's outputs
        ra = cuda.local.array(TM, dtype=np.float32)
        rb = cuda.local.array(TN, dtype=np.float32)
        tid = cuda.threadIdx.x
        trow, tcol = tid // across, tid % across
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, K = a.shape
        N = b.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = np.float32(0.0)
        for k0 in range(0, K, BK):
            for e in range(tid, BM * BK, threads):  # a's tile: neighbouring threads read along a row of a
                r, c = e // BK, e % BK
                sa[r, c] = a[row0 + r, k0 + c] if row0 + r < M and k0 + c < K else np.float32(0.0)
            for e in range(tid, BK * BN, threads):  # b's tile: neighbouring threads read neighbouring columns
                r, c = e // BN, e % BN
                sb[r, c] = b[k0 + r, col0 + c] if k0 + r < K and col0 + c < N else np.float32(0.0)
            cuda.syncthreads()  # the tiles are complete before anyone reads them
            for k in range(BK):
                for i in range(TM):
                    ra[i] = sa[trow * TM + i, k]
                for j in range(TN):
                    rb[j] = sb[k, tcol * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()  # everyone is done with the tiles before the next step overwrites them
        for i in range(TM):
            for j in range(TN):
                r, c = row0 + trow * TM + i, col0 + tcol * TN + j
                if r < M and c < N:
                    out[r, c] = acc[i, j]
    return kernel


def _blocked(a, b, out, BM: int, BN: int, BK: int, TM: int, TN: int) -> None:
    if BM % TM or BN % TN:
        raise ValueError(f"a {BM} x {BN} tile does not split into {TM} x {TN} blocks of outputs")
    threads = (BM // TM) * (BN // TN)
    if threads > 1024:
        raise ValueError(f"{threads} threads a block: at most 1024 (make TM or TN larger, or the tile smaller)")
    M, N = out.shape
    blocked_kernel(BM, BN, BK, TM, TN)[_grid(M, N, BM, BN), threads](a, b, out)


def sgemm_blocked_1d(a, b, out, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 8) -> None:
    """out = a @ b, each thread TM outputs of one column of a BM x BN tile (512 threads a block by default)."""
    _blocked(a, b, out, BM, BN, BK, TM, 1)


def sgemm_blocked_2d(a, b, out, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 4, TN: int = 4) -> None:
    """out = a @ b, each thread a TM x TN block of outputs of a BM x BN tile (256 threads a block by default)."""
    _blocked(a, b, out, BM, BN, BK, TM, TN)


LADDER: list[tuple[str, Callable]] = [
    ("naive", sgemm_naive), ("coalesced", sgemm_coalesced), ("shared", sgemm_shared),
    ("blocked_1d", sgemm_blocked_1d), ("blocked_2d", sgemm_blocked_2d),
]


def matmul(a, b, out) -> None:
    """out = a @ b on the ladder's top rung (the CPU kernels' convention: (M, K) @ (K, N) into (M, N))."""
    sgemm_blocked_2d(a, b, out)
