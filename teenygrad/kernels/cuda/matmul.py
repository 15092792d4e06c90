"""The SGEMM ladder (chapter 11): float32 out = a @ b on the GPU, one kernel a rung, each meant to beat the last.

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
- `sgemm_vectorised`: the same with a's tile transposed in shared memory, so a thread's TM values of a are
  neighbours, as its TN values of b are, and loaded 4 at a time (16-byte vector loads: a quarter of the
  instructions; see ALIGN for what numba needs to emit them).
- `sgemm_warptiled`: a level between block and thread: each warp computes a compact part of the block's tile, so
  the 32 threads that run together read few distinct shared-memory values; 8 x 8 outputs a thread.
- `sgemm_double_buffered`: the warp-tiled kernel with two copies of the shared tiles: the next step's global loads
  are in flight while the block computes on this step's, and one `syncthreads` a step instead of two.
`LADDER` lists them in order; `matmul` is the top rung. The order is siboehm's CUDA C worklog's; whether each rung
is faster than the one before in numba-cuda only a GPU can say (benchmarks/gpu.py measures it). Tile sizes are
arguments (fixed when a kernel compiles, so each size is its own kernel, cached): the simulator's tests use small
ones, a GPU the defaults.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.cuda.device import SIMULATED, cuda

# Vector loads from shared memory (`ld.shared.v4.f32`: 4 floats, 16 bytes, one instruction) need two things the
# compiler can see: the shared array is 16-byte aligned, and the index is a multiple of 4 floats. numba gives both
# only if asked: `alignment=16` (which the simulator refuses, hence None there), and UNSIGNED indices (a signed one
# gets numba's negative-index wrap-around, `i < 0 ? i + n : i`, which hides that it is a multiple of 4). Checked in
# the PTX numba-cuda 0.30.4 emits for sm_90: with either missing, 4 floats take four `ld.shared.f32`.
ALIGN = None if SIMULATED else 16


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
def blocked_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, vectorised: bool = False) -> Callable:
    """A block computes a BM x BN tile of out with (BM / TM) * (BN / TN) threads, each a TM x TN block of it.

    Per step of BK along K the block stages a's BM x BK tile and b's BK x BN tile in shared memory (every thread
    loading its share, neighbouring threads neighbouring elements), then each thread, for each k, reads TM values
    of a's tile and TN of b's into registers and does TM * TN multiply-adds with them. TN = 1 is the 1-D form.

    `vectorised`: a's tile is stored TRANSPOSED (BK x BM), so for each k a thread's TM values of a are neighbours,
    as its TN values of b already are, and both are read with unsigned indices from 16-byte aligned tiles: the
    compiler then loads them 4 at a time (see ALIGN), a quarter of the load instructions. The price is paid once a
    tile, when it is stored: neighbouring threads, reading along a row of a (coalesced), write down a column of
    the shared tile, several of them into one memory bank."""
    threads = (BM // TM) * (BN // TN)
    across = BN // TN  # threads along a row of the tile
    # (decided here: a shared array's shape and alignment must be constants when the kernel compiles)
    a_tile, align = ((BK, BM), ALIGN) if vectorised else ((BM, BK), None)
    if vectorised:  # where a's (r, k) and b's (k, c) are in their shared tiles
        @cuda.jit(device=True)
        def a_at(r, k):
            return np.uint64(k), np.uint64(r)

        @cuda.jit(device=True)
        def b_at(k, c):
            return np.uint64(k), np.uint64(c)
    else:
        @cuda.jit(device=True)
        def a_at(r, k):
            return r, k

        @cuda.jit(device=True)
        def b_at(k, c):
            return k, c

    @cuda.jit
    def kernel(a, b, out):
        sa = cuda.shared.array(a_tile, dtype=np.float32, alignment=align)
        sb = cuda.shared.array((BK, BN), dtype=np.float32, alignment=align)
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
                sa[a_at(r, c)] = a[row0 + r, k0 + c] if row0 + r < M and k0 + c < K else np.float32(0.0)
            for e in range(tid, BK * BN, threads):  # b's tile: neighbouring threads read neighbouring columns
                r, c = e // BN, e % BN
                sb[r, c] = b[k0 + r, col0 + c] if k0 + r < K and col0 + c < N else np.float32(0.0)
            cuda.syncthreads()  # the tiles are complete before anyone reads them
            for k in range(BK):
                for i in range(TM):
                    ra[i] = sa[a_at(trow * TM + i, k)]
                for j in range(TN):
                    rb[j] = sb[b_at(k, tcol * TN + j)]
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


def _threads(BM: int, BN: int, TM: int, TN: int) -> int:
    """Threads a block of a register-blocked kernel, after checking that its tile splits into TM x TN blocks."""
    if BM % TM or BN % TN:
        raise ValueError(f"a {BM} x {BN} tile does not split into {TM} x {TN} blocks of outputs")
    threads = (BM // TM) * (BN // TN)
    if threads > 1024:
        raise ValueError(f"{threads} threads a block: at most 1024 (make TM or TN larger, or the tile smaller)")
    return threads


def _blocked(a, b, out, BM: int, BN: int, BK: int, TM: int, TN: int, vectorised: bool = False) -> None:
    threads = _threads(BM, BN, TM, TN)
    M, N = out.shape
    blocked_kernel(BM, BN, BK, TM, TN, vectorised)[_grid(M, N, BM, BN), threads](a, b, out)


def sgemm_blocked_1d(a, b, out, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 8) -> None:
    """out = a @ b, each thread TM outputs of one column of a BM x BN tile (512 threads a block by default)."""
    _blocked(a, b, out, BM, BN, BK, TM, 1)


def sgemm_blocked_2d(a, b, out, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 4, TN: int = 4) -> None:
    """out = a @ b, each thread a TM x TN block of outputs of a BM x BN tile (256 threads a block by default)."""
    _blocked(a, b, out, BM, BN, BK, TM, TN)


def sgemm_vectorised(a, b, out, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 4, TN: int = 4) -> None:
    """out = a @ b, as `sgemm_blocked_2d` but with a's tile transposed in shared memory and vector loads from it."""
    _blocked(a, b, out, BM, BN, BK, TM, TN, vectorised=True)


WARP = 32  # threads a warp: the hardware's, on every NVIDIA GPU


def _warp_shape(BM: int, BN: int, WM: int, WN: int, WNITER: int, TM: int, TN: int) -> tuple[int, int]:
    """(WMITER, threads a block) of a warp-tiled kernel, after checking that its tiles fit together."""
    if BM % WM or BN % WN:
        raise ValueError(f"a {BM} x {BN} block tile does not split into {WM} x {WN} warp tiles")
    per_warp = WARP * TM * TN * WNITER  # outputs a warp computes in one sub-tile step along its rows
    if (WM * WN) % per_warp or WN % (WNITER * TN):
        raise ValueError(f"a {WM} x {WN} warp tile does not split among {WARP} threads of {TM} x {TN} outputs "
                         f"in {WNITER} steps along its columns")
    WMITER = WM * WN // per_warp
    if WM % (WMITER * TM):
        raise ValueError(f"a {WM} x {WN} warp tile's sub-tiles do not hold {WARP} threads of {TM} x {TN} outputs")
    threads = (BM // WM) * (BN // WN) * WARP
    if threads > 1024:
        raise ValueError(f"{threads} threads a block: at most 1024 (make the warp tiles larger)")
    return WMITER, threads


@cuda.jit(device=True)
def _bias_element(bias, c):
    """The epilogue's addend for column c of a product with a bias."""
    return bias[c]


@cuda.jit(device=True)
def _no_bias(bias, c):
    """The epilogue's addend without a bias: 0 (one add a stored output, beside the K multiply-adds behind it)."""
    return np.float32(0.0)


@functools.cache
def warptiled_kernel(BM: int, BN: int, BK: int, WM: int, WN: int, WNITER: int, TM: int, TN: int,
                     double_buffered: bool, transposed: tuple[bool, bool] = (False, False),
                     with_bias: bool = False) -> Callable:
    """A block computes a BM x BN tile of out; each of its warps a WM x WN part of it (the warp tile); each thread
    of a warp WMITER x WNITER blocks of TM x TN outputs, one in each WSUBM x WSUBN sub-tile of the warp tile.

    Why a level between the block and the thread: the 32 threads of a warp run each instruction together. When a
    warp's outputs form one compact sub-tile, for each k its threads read only WSUBM values of a's tile and WSUBN
    of b's, each shared by several of them (a broadcast), so shared memory serves the warp in few transactions;
    and a thread holding RM = WMITER * TM values of a and RN = WNITER * TN of b in registers does RM * RN
    multiply-adds with them (64 for 16 loads at the defaults). a's tile is transposed in shared memory (see
    `blocked_kernel`'s `vectorised`).

    `double_buffered`: two copies of each shared tile. While the block computes on one copy, every thread has
    already issued the global loads of the next step's tiles (into registers, `pa` and `pb`), so their latency
    (hundreds of cycles) hides behind the arithmetic; after the arithmetic the registers go into the other copy,
    and one `syncthreads` a step (instead of two) separates the steps: the copy written in step s was last read in
    step s - 1, which every thread finished before that step's `syncthreads`.

    `transposed` = (ta, tb): the kernel is handed an operand's transpose, contiguous, and reads it as the operand:
    with ta, `a` is the (K, M) matrix whose transpose is the product's left operand, and the kernel reads a[k, i]
    for a's element (i, k); with tb, `b` is (N, K) likewise. So a linear layer's x @ w.T and x.T @ g need no copy
    (and no launch) to make the operand contiguous. The loads then run along the rows of what is handed over, so
    that neighbouring threads still read neighbouring elements.

    `with_bias`: the kernel takes a fourth argument, bias (N,), and adds bias[c] to column c as it stores the
    outputs (the product's epilogue): a linear layer's x @ w.T + b is one launch, not a product and then a pass
    that reads and writes every output again."""
    ta, tb = transposed
    WMITER, threads = _warp_shape(BM, BN, WM, WN, WNITER, TM, TN)
    WSUBM, WSUBN = WM // WMITER, WN // WNITER
    sub_across = WSUBN // TN  # threads along a row of a sub-tile
    warps_across = BN // WN
    buffers = 2 if double_buffered else 1
    LA, LB = -(-BM * BK // threads), -(-BK * BN // threads)  # tile elements each thread loads
    # a thread's outputs: RM x RN (computed here: a local array's shape must be a constant when the kernel
    # compiles, and an expression inside the kernel is not one; the simulator does not notice, the GPU's compiler does)
    RM, RN = WMITER * TM, WNITER * TN
    # When every term of a thread's offset into a tile is a multiple of 4, writing the offset as 4 * (offset // 4)
    # (the same number) shows the compiler it is one, and it loads the thread's values 4 at a time (see ALIGN):
    # without it, PTX showed some of them loaded one by one
    QA = 4 if WM % 4 == 0 and WSUBM % 4 == 0 and TM % 4 == 0 else 1
    QB = 4 if WN % 4 == 0 and WSUBN % 4 == 0 and TN % 4 == 0 else 1
    bias_at = _bias_element if with_bias else _no_bias  # the epilogue's addend (chosen when the kernel compiles)

    @cuda.jit(device=True)
    def a_place(e):
        """Element e of a thread block's share of a's tile: (row, k) in the tile. Neighbouring threads take
        neighbouring elements of a row of what is read (a, or a^T's storage when ta): coalesced."""
        return (e % BM, e // BM) if ta else (e // BK, e % BK)

    @cuda.jit(device=True)
    def b_place(e):
        """Element e of b's tile: (k, column) in the tile, along rows of b (or of b^T's storage when tb)."""
        return (e % BK, e // BK) if tb else (e // BN, e % BN)

    @cuda.jit(device=True)
    def load_tiles(a, b, pa, pb, k0, row0, col0, tid, M, N, K):
        """This thread's share of a's BM x BK and b's BK x BN tiles at k0, into registers (0 past an edge)."""
        for n in range(LA):
            e = tid + n * threads
            r, c = a_place(e)
            inside = e < BM * BK and row0 + r < M and k0 + c < K
            if ta:
                pa[n] = a[k0 + c, row0 + r] if inside else np.float32(0.0)
            else:
                pa[n] = a[row0 + r, k0 + c] if inside else np.float32(0.0)
        for n in range(LB):
            e = tid + n * threads
            r, c = b_place(e)
            inside = e < BK * BN and k0 + r < K and col0 + c < N
            if tb:
                pb[n] = b[col0 + c, k0 + r] if inside else np.float32(0.0)
            else:
                pb[n] = b[k0 + r, col0 + c] if inside else np.float32(0.0)

    @cuda.jit(device=True)
    def store_tiles(sa, sb, buf, pa, pb, tid):
        """The registers `load_tiles` filled, into shared copy `buf` of the tiles (a's transposed)."""
        for n in range(LA):
            e = tid + n * threads
            if e < BM * BK:
                r, c = a_place(e)
                sa[buf, c, r] = pa[n]
        for n in range(LB):
            e = tid + n * threads
            if e < BK * BN:
                r, c = b_place(e)
                sb[buf, r, c] = pb[n]

    @cuda.jit(device=True)
    def multiply_tiles(sa, sb, buf, ra, rb, acc, wrow, wcol, trow, tcol):
        """acc += this thread's part of (a's tile) @ (b's tile), from shared copy `buf`."""
        for k in range(BK):
            for wm in range(WMITER):
                row = np.uint64(QA) * np.uint64((wrow * WM + wm * WSUBM + trow * TM) // QA)  # the same number (see QA)
                for i in range(TM):  # unsigned indices: vector loads (see ALIGN)
                    ra[wm * TM + i] = sa[np.uint64(buf), np.uint64(k), row + np.uint64(i)]
            for wn in range(WNITER):
                col = np.uint64(QB) * np.uint64((wcol * WN + wn * WSUBN + tcol * TN) // QB)
                for j in range(TN):
                    rb[wn * TN + j] = sb[np.uint64(buf), np.uint64(k), col + np.uint64(j)]
            for i in range(RM):  # RM * RN multiply-adds for RM + RN loads from shared memory
                for j in range(RN):
                    acc[i, j] += ra[i] * rb[j]

    @cuda.jit(device=True)
    def tile_product(a, b, out, bias):
        """The whole kernel: this block's tile of out = a @ b (+ bias, see `bias_at`)."""
        sa = cuda.shared.array((buffers, BK, BM), dtype=np.float32, alignment=ALIGN)
        sb = cuda.shared.array((buffers, BK, BN), dtype=np.float32, alignment=ALIGN)
        pa = cuda.local.array(LA, dtype=np.float32)  # tile elements on their way to shared memory
        pb = cuda.local.array(LB, dtype=np.float32)
        acc = cuda.local.array((RM, RN), dtype=np.float32)  # this thread's outputs, in registers
        ra = cuda.local.array(RM, dtype=np.float32)
        rb = cuda.local.array(RN, dtype=np.float32)
        tid = cuda.threadIdx.x
        warp, lane = tid // WARP, tid % WARP
        wrow, wcol = warp // warps_across, warp % warps_across  # the warp's tile, in the block's
        trow, tcol = lane // sub_across, lane % sub_across  # the thread's TM x TN block, in each sub-tile
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        for i in range(RM):
            for j in range(RN):
                acc[i, j] = np.float32(0.0)
        M, N = out.shape
        K = a.shape[0] if ta else a.shape[1]
        steps = (K + BK - 1) // BK
        if double_buffered:  # (fixed when the kernel compiles: every thread takes the same branch)
            load_tiles(a, b, pa, pb, 0, row0, col0, tid, M, N, K)
            store_tiles(sa, sb, 0, pa, pb, tid)
            cuda.syncthreads()
            for step in range(steps):
                cur = step % 2
                if step + 1 < steps:  # issue the next tiles' loads; their latency hides behind the arithmetic
                    load_tiles(a, b, pa, pb, (step + 1) * BK, row0, col0, tid, M, N, K)
                multiply_tiles(sa, sb, cur, ra, rb, acc, wrow, wcol, trow, tcol)
                if step + 1 < steps:  # into the other copy: its last readers finished before the last syncthreads
                    store_tiles(sa, sb, 1 - cur, pa, pb, tid)
                cuda.syncthreads()  # (the same `steps` for every thread: all of them reach it, every step)
        else:
            for step in range(steps):
                load_tiles(a, b, pa, pb, step * BK, row0, col0, tid, M, N, K)
                store_tiles(sa, sb, 0, pa, pb, tid)
                cuda.syncthreads()  # the tiles are complete before anyone reads them
                multiply_tiles(sa, sb, 0, ra, rb, acc, wrow, wcol, trow, tcol)
                cuda.syncthreads()  # everyone is done with them before the next step overwrites them
        for wm in range(WMITER):
            for i in range(TM):
                r = row0 + wrow * WM + wm * WSUBM + trow * TM + i
                for wn in range(WNITER):
                    for j in range(TN):
                        c = col0 + wcol * WN + wn * WSUBN + tcol * TN + j
                        if r < M and c < N:
                            out[r, c] = acc[wm * TM + i, wn * TN + j] + bias_at(bias, c)

    if with_bias:
        @cuda.jit
        def kernel(a, b, out, bias):
            tile_product(a, b, out, bias)
    else:
        @cuda.jit
        def kernel(a, b, out):
            tile_product(a, b, out, out)  # no bias: `out` stands in for it and is never read as one (`_no_bias`)
    return kernel



def sgemm_warptiled(a, b, out, BM: int = 128, BN: int = 128, BK: int = 8, WM: int = 64, WN: int = 32,
                    WNITER: int = 2, TM: int = 8, TN: int = 4) -> None:
    """out = a @ b, each warp a WM x WN part of a block's BM x BN tile ((BM / WM) * (BN / WN) warps a block: 256
    threads at the defaults), each thread RM x RN = (WMITER * TM) x (WNITER * TN) outputs (8 x 8)."""
    _warptiled(a, b, out, BM, BN, BK, WM, WN, WNITER, TM, TN, False)


def sgemm_double_buffered(a, b, out, BM: int = 128, BN: int = 128, BK: int = 8, WM: int = 64, WN: int = 32,
                          WNITER: int = 2, TM: int = 8, TN: int = 4,
                          transposed: tuple[bool, bool] = (False, False), bias=None) -> None:
    """out = a @ b, `sgemm_warptiled` with the next step's tiles loaded while the block computes on this step's
    (`transposed`: `warptiled_kernel`'s, an operand handed over as its transpose; `bias` (N,): out = a @ b + bias,
    added as the outputs are stored)."""
    _warptiled(a, b, out, BM, BN, BK, WM, WN, WNITER, TM, TN, True, transposed, bias)


def _warptiled(a, b, out, BM: int, BN: int, BK: int, WM: int, WN: int, WNITER: int, TM: int, TN: int,
               double_buffered: bool, transposed: tuple[bool, bool] = (False, False), bias=None) -> None:
    _, threads = _warp_shape(BM, BN, WM, WN, WNITER, TM, TN)
    M, N = out.shape
    kernel = warptiled_kernel(BM, BN, BK, WM, WN, WNITER, TM, TN, double_buffered, transposed, bias is not None)
    if bias is None:
        kernel[_grid(M, N, BM, BN), threads](a, b, out)
    else:
        kernel[_grid(M, N, BM, BN), threads](a, b, out, bias)


LADDER: list[tuple[str, Callable]] = [
    ("naive", sgemm_naive), ("coalesced", sgemm_coalesced), ("shared", sgemm_shared),
    ("blocked_1d", sgemm_blocked_1d), ("blocked_2d", sgemm_blocked_2d), ("vectorised", sgemm_vectorised),
    ("warptiled", sgemm_warptiled), ("double_buffered", sgemm_double_buffered),
]


def matmul(a, b, out) -> None:
    """out = a @ b on the ladder's top rung (the CPU kernels' convention: (M, K) @ (K, N) into (M, N))."""
    sgemm_double_buffered(a, b, out)
