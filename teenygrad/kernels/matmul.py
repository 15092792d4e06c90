"""Matrix multiplication kernels: the story of Chapter 3, one step per kernel.

Every kernel has the same calling convention, which the rest of teenygrad relies on:

    fn(a, b, out) -> None

`a` is (M, K), `b` is (K, N), `out` is (M, N) and preallocated; all three are C-contiguous numpy arrays of
the same float dtype (float32 or float64). The kernel overwrites `out` with `a @ b` (zeros when K == 0).
(`matmul_tiled`, `matmul_parallel` and `matmul` also accept `a` and `b` with any non-negative strides, so
teenygrad hands them transposed views, such as a linear layer's W^T, without copying.)

The steps, slowest to fastest (`KERNELS` lists them in this order):

1. `matmul_naive`      the textbook i-j-k triple loop: one dot product per output element.
2. `matmul_reordered`  i-k-j order: the inner loop streams contiguous rows of `b` and `out`.
3. `matmul_blocked`    cache blocking: work on tiles of A, B and C that stay in the L1/L2 caches
                       (in `blocked.py`: a launcher over tiles and a tile kernel, exercise 3's pieces).
4. `matmul_tiled`      register tiling: pack B into panels and let a micro-kernel keep an MR x NR
                       block of C in vector registers for the whole K loop.
5. `matmul_parallel`   the tiled kernel on every core, each thread owning a different block of C.

`matmul(a, b, out)` is the default (the fastest step, with a serial path for small products, where
starting threads costs more than it saves) and `matmul_batched(a, b, out)` multiplies stacks of
matrices, (batch, M, K) @ (batch, K, N) -> (batch, M, N), as attention does.

No numpy arithmetic happens here: numpy only provides storage (np.empty / np.zeros scratch buffers).
"""
from __future__ import annotations

import numpy as np

from teenygrad.kernels.blocked import BLOCK_I, BLOCK_J, BLOCK_K, matmul_blocked  # noqa: F401 - step 3, re-exported
from teenygrad.kernels.cpu import host, micro_kernel_shape
from teenygrad.kernels.jit import any_layout, kernel, num_threads, parallel_pays, prange
from teenygrad.kernels.registers import local_array, vector_fma, vector_store, vector_store_at, vector_zero

# ---------------------------------------------------------------------------------------------------
# Tuning constants. Measured on an AMD EPYC (Zen 4: AVX-512 + FMA, 32 KiB L1d and 1 MiB L2 per core,
# 32 MiB shared L3); `benchmarks/matmul.py` is the script that measures them.
# ---------------------------------------------------------------------------------------------------

# Step 3 (cache blocking): its block sizes BLOCK_I, BLOCK_K, BLOCK_J live with it, in `blocked.py`.

# Steps 4-5 (register tiling): the micro-kernel computes an MR x NR block of C, sized for the vector unit
# numba compiles for (teenygrad/kernels/cpu.py). AVX-512: 6 x 32, two 512-bit vectors of float32 per row,
# 12 of the 32 registers; each step of the K loop does 6 broadcasts, 2 vector loads and 12 fused
# multiply-adds. AVX2: 4 x 16 in 8 of 16 registers (6 x 16 would need 12 + 2 + 6 broadcasts: 20, and spill);
# ARM64 (NEON): 4 x 16 in 16 of 32.
# numba compiles MR and NR into the kernels as constants, and its disk cache is keyed on this file and the
# target CPU's name and features, not on these values. That is safe because they are a function of exactly
# that CPU: the same processor always gets the same shape, and another one misses the cache and recompiles.
MR, NR = micro_kernel_shape(host().vector)
assert MR in (4, 6), "the micro-kernel below writes out six accumulator rows by hand, the last two optional"
# Cache blocking around the micro-kernel (as in BLIS / GotoBLAS), tuned by measurement:
KC = 512    # depth of a packed panel. Each tile costs a little beside its multiply-adds (writing back C), so
            # deep panels amortise it, and C is read and written only K/KC times. The
            # KC x NR micro-panel of B (64 KiB float32) then lives in L2 rather than L1: Zen 4's L2
            # feeds 64 bytes per cycle, enough for the 2 loads per 12 FMAs the micro-kernel needs; the
            # MR x KC block of A it meets (12 KiB) stays in L1.
NC = 1024   # columns of B packed at a time: the KC x NC block of B (2 MiB float32), in L2 and L3
# Re-measured on a Zen 3 (AVX2, 4 x 16 micro-kernel, 32 KiB L1d, 512 KiB L2), single thread and parallel, on the
# GPT's products: KC from 256 to 512 and NC from 128 to 1024 all came within 3% of each other.

# `matmul` goes parallel when `parallel_pays(M*N*K // 4)`: a multiply-add in the micro-kernel's registers
# counts a quarter of an element operation (see teenygrad.kernels.jit), so the cut is at 64^3 multiply-adds.
# (Measured: at 64^3 serial and parallel tie, at 128^3 parallel is ~1.5x faster. On a machine busy with
# other work, threads that wait for a free core cost far more, another reason to stay serial when small.)


# ---------------------------------------------------------------------------------------------------
# 1. Naive
# ---------------------------------------------------------------------------------------------------
@kernel
def matmul_naive(a, b, out):
    """The definition, out[i, j] = sum_k a[i, k] * b[k, j], as an i-j-k triple loop.

    Each output element is one dot product. The inner loop walks down a *column* of `b`: consecutive k
    are N elements apart in memory, so every multiply-add touches a new cache line and nothing can be
    vectorised. It does 2*M*N*K flops but spends nearly all its time waiting for memory.
    The sum is accumulated in float64 (a scalar, so it costs nothing extra) and rounded once at the end.
    """
    M, K = a.shape
    N = b.shape[1]
    for i in range(M):
        for j in range(N):
            acc = 0.0
            for k in range(K):
                acc += a[i, k] * b[k, j]
            out[i, j] = acc


# ---------------------------------------------------------------------------------------------------
# 2. Loop reordering
# ---------------------------------------------------------------------------------------------------
@kernel
def matmul_reordered(a, b, out):
    """Same arithmetic, loops in i-k-j order: out[i, :] += a[i, k] * b[k, :].

    Now the inner loop runs along a *row* of `b` and a row of `out`, both contiguous. Every byte of each
    cache line fetched is used, the hardware prefetcher sees a simple stream, and the compiler turns the
    inner loop into SIMD instructions (16 float32 multiply-adds per AVX-512 instruction). Same flops,
    several times faster: the first lesson is that memory order matters more than operation count.
    """
    M, K = a.shape
    N = b.shape[1]
    for i in range(M):
        for j in range(N):
            out[i, j] = 0
        for k in range(K):
            aik = a[i, k]
            for j in range(N):
                out[i, j] += aik * b[k, j]


# ---------------------------------------------------------------------------------------------------
# 3. Cache blocking: `matmul_blocked` in blocked.py (a launcher over tiles and a tile kernel, exercise 3)
# ---------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------
# 4. Register tiling: a packed B and a micro-kernel
# ---------------------------------------------------------------------------------------------------
@kernel
def _pack_b_panel(b, p0, kc, j0, n, bp, base):
    """Copy b[p0:p0+kc, j0:j0+n] (n <= NR) into bp[base:] as a kc x NR panel, zero-padded to NR columns:
    bp[base + p*NR + j] = b[p0 + p, j0 + j]. The loops follow b's layout, so the reads are in memory order
    whether b is a plain matrix or a transposed view (W^T in a linear layer)."""
    panel = bp[base:base + kc * NR]
    if b.strides[0] >= b.strides[1]:  # rows of b contiguous (or nearly): copy row by row
        for p in range(kc):
            src, dst = b[p0 + p, j0:j0 + n], panel[p * NR:(p + 1) * NR]  # slices indexed from 0 (see step 3)
            if n == NR and b.strides[1] == b.itemsize:  # a whole contiguous row: one vector copy (numba's loop
                vector_store(dst, src, NR, False)       # over a strided view copies one float at a time, and for
                continue                                # a short A, M = 128, packing B took a tenth of the product)
            for j in range(n):
                dst[j] = src[j]
            for j in range(n, NR):
                dst[j] = 0
    else:  # columns contiguous (a transposed view): copy 8 depths of each column at a time, so the 8 rows of the
        # panel being written stay in L1 (column by column, a deep panel's kc rows were evicted before the next
        # column reached them: W^T of a 512 x 128 weight packed 2x slower)
        deep = kc - kc % 8
        for p in range(0, deep, 8):
            for j in range(n):
                src, dst = b[p0 + p:p0 + p + 8, j0 + j], panel[p * NR + j:]
                for q in range(8):
                    dst[q * NR] = src[q]
        for p in range(deep, kc):
            for j in range(n):
                panel[p * NR + j] = b[p0 + p, j0 + j]
        for p in range(kc):
            for j in range(n, NR):
                panel[p * NR + j] = 0


@kernel
def _pack_b(b, p0, kc, j0, nc, bp):
    """Copy the block b[p0:p0+kc, j0:j0+nc] into `bp` as NR-column panels (row p of panel s is NR
    consecutive elements: bp[s*NR*kc + p*NR + j] = b[p0 + p, j0 + s*NR + j])."""
    for s in range((nc + NR - 1) // NR):
        _pack_b_panel(b, p0, kc, j0 + s * NR, min(NR, nc - s * NR), bp, s * NR * kc)


@kernel
def _store_row(out_row, nr, acc, accumulate):
    """Write (or add, when `accumulate`) the first `nr` accumulators of one row into `out_row`."""
    if accumulate:
        for j in range(nr):
            out_row[j] += acc[j]
    else:
        for j in range(nr):
            out_row[j] = acc[j]


@kernel(fastmath=True)
def _micro_kernel(a_rows, bp, b0, step, out, i0, j0, nc, tiles, mr, accumulate):
    """The register-tiled heart: C[i0:i0+MR, j0:j0+NR] (+)= a_rows @ b_panel over the full depth kc = a_rows.shape[1],
    for `tiles` tiles side by side (j0, j0 + NR, ...: one strip of C, `nc` columns wide, sharing its rows of A).

    `a_rows` is an MR x kc block of A, read where it lies (any strides: MR rows of A, or MR neighbouring
    columns of a transposed A); tile t's panel, starting at bp[b0 + t*step], is a packed kc x NR panel of B
    (bp[b0 + t*step + p*NR + j] = B[p, j0 + t*NR + j]). (The loop over tiles is here, not in the caller, because
    a call of a compiled function has setup costs of its own: with one call per tile, a tile's fixed cost was
    ~75 ns, a third of its multiply-adds when kc = 128.)

    The MR x NR block of C is held in accumulator rows c0..c5 (written out by hand; with MR = 4 the
    `if MR > 4` rows are compiled out, MR being a constant), each NR wide (two vectors of float32 on AVX-512
    and AVX2, see cpu.micro_kernel_shape): stack arrays that are only ever cleared, updated and written whole
    (`teenygrad.kernels.registers`), so LLVM holds each as one vector value in registers for the whole tile:
    with AVX-512, NR = 32 and 12 zmm registers of 16 float32. At each step p of the depth loop we load NR values
    of the packed B panel (contiguous: two vector loads), broadcast MR values of A, and do MR x NR multiply-adds
    (12 FMA instructions on AVX-512). Nothing is written to memory until the loop ends, and every load is
    reused MR or NR times, so the kernel runs close to the FMA units' peak instead of the memory system's
    (measured ~110 GFLOPS on one Zen 4 core, float32). With float64 the same code holds 24 zmm registers of 8.
    (MR is 6 or 4, tied to this code: any other value means adding or removing accumulator rows.)
    Written as loops over each row's NR elements instead, the accumulators lived in registers only inside the
    depth loop, and went through the stack around it: a fixed ~40 ns per tile, which a product of depth 32
    (attention's q k^T) paid on top of ~110 ns of multiply-adds (measured on one Zen 4 core, float32).

    Each multiply-add is one FMA instruction (rounded once instead of twice); results differ from numpy in the
    last bits only.
    Edges: the packed B panel is zero-padded, so the full MR x NR block is always computed; only the
    valid `mr` x `nr` corner is written back.
    """
    kc = a_rows.shape[1]
    a0, a1, a2, a3 = a_rows[0], a_rows[1], a_rows[2], a_rows[3]
    a4, a5 = a_rows[MR - 2], a_rows[MR - 1]  # rows 4 and 5 when MR = 6 (with MR = 4, unused)
    c0 = local_array(NR, bp.dtype)
    c1 = local_array(NR, bp.dtype)
    c2 = local_array(NR, bp.dtype)
    c3 = local_array(NR, bp.dtype)
    c4 = local_array(NR, bp.dtype)
    c5 = local_array(NR, bp.dtype)
    whole = out.strides[1] == out.itemsize  # rows of C contiguous: nearly always
    for t in range(tiles):
        panel = b0 + t * step  # where tile t's panel starts in bp
        j, nr = j0 + t * NR, min(NR, nc - t * NR)
        vector_zero(c0, NR)
        vector_zero(c1, NR)
        vector_zero(c2, NR)
        vector_zero(c3, NR)
        if MR > 4:
            vector_zero(c4, NR)
            vector_zero(c5, NR)
        for p in range(kc):  # c_i += A[i, p] * B[p, j:j + NR], row p of the panel
            at = panel + p * NR
            vector_fma(c0, a0[p], bp, at, NR)
            vector_fma(c1, a1[p], bp, at, NR)
            vector_fma(c2, a2[p], bp, at, NR)
            vector_fma(c3, a3[p], bp, at, NR)
            if MR > 4:
                vector_fma(c4, a4[p], bp, at, NR)
                vector_fma(c5, a5[p], bp, at, NR)
        if mr == MR and nr == NR and whole:  # a whole tile
            vector_store_at(out, i0, j, c0, NR, accumulate)
            vector_store_at(out, i0 + 1, j, c1, NR, accumulate)
            vector_store_at(out, i0 + 2, j, c2, NR, accumulate)
            vector_store_at(out, i0 + 3, j, c3, NR, accumulate)
            if MR > 4:
                vector_store_at(out, i0 + 4, j, c4, NR, accumulate)
                vector_store_at(out, i0 + 5, j, c5, NR, accumulate)
            continue
        # an edge tile: each row goes out through `row`, so that the accumulators are still only read whole
        row = local_array(NR, bp.dtype)
        vector_store(row, c0, NR, False)
        _store_row(out[i0, j:j + nr], nr, row, accumulate)
        if mr > 1:
            vector_store(row, c1, NR, False)
            _store_row(out[i0 + 1, j:j + nr], nr, row, accumulate)
        if mr > 2:
            vector_store(row, c2, NR, False)
            _store_row(out[i0 + 2, j:j + nr], nr, row, accumulate)
        if mr > 3:
            vector_store(row, c3, NR, False)
            _store_row(out[i0 + 3, j:j + nr], nr, row, accumulate)
        if mr > 4:
            vector_store(row, c4, NR, False)
            _store_row(out[i0 + 4, j:j + nr], nr, row, accumulate)
        if mr > 5:
            vector_store(row, c5, NR, False)
            _store_row(out[i0 + 5, j:j + nr], nr, row, accumulate)


@kernel
def _zero(out):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = 0


@kernel
def matmul_tiled(a, b, out):
    """Register tiling over a packed B (after the GotoBLAS / BLIS design), on one core.

    Loops, outermost first:
      jc: NC columns of B at a time     -> pack B[pc:pc+KC, jc:jc+NC] into NR-wide panels
      pc: KC deep at a time             -> (as above)
      ir: MR rows of A at a time        -> an MR x KC strip of A, read in place (it stays in L1)
      jr: NR columns at a time          -> the micro-kernel (one call per strip), accumulators in registers
    Packing copies each block of B once into exactly the order the micro-kernel reads it, so its inner
    loop is pure contiguous loads; the copy costs O(KN) and is amortised over all M rows. A is not
    packed when its rows are contiguous: the micro-kernel needs only MR of its values per step, one from
    each of MR rows, and reading them in place costs the same as from a packed copy. (BLIS packs all of A,
    which pays when N is large; for the narrow products of a small transformer, N = 128, it took a third of
    the time.) A transposed A (a weight's gradient, x^T g) is the exception: its strip's MR values at each
    depth lie side by side, but each depth is a whole row of x further on, so the strip spans KC cache lines
    that, at strides such as 3 KiB, fall into a few cache sets and evict each other before the next tile
    reads them again. It is copied, MR values at a time, into a small contiguous block first (measured:
    the GPT's weight gradients 6-50% faster). The last rows, when M is not a multiple of MR, are copied
    into a block of MR rows, so the micro-kernel never reads past A.
    The first KC slice writes C, later slices add to it (so `out` needs no zeroing unless K == 0).
    Any strides work: the parallel kernel hands it blocks of rows or columns, the linear layer W^T.
    """
    bp, edge = tiled_buffers(a, a.shape[1], b.shape[1])
    matmul_tiled_into(a, b, out, bp, edge)


@kernel
def tiled_buffers(like, K, N):
    """Scratch space for `matmul_tiled_into` on products up to depth K and width N, in like's dtype: the
    packed block of B and the MR-row block for A's last rows. A kernel doing many small products (attention:
    two per head forward, four backward) allocates them once and passes them to every product."""
    kcmax = min(KC, K)
    return np.empty(((min(NC, N) + NR - 1) // NR) * NR * kcmax, like.dtype), np.zeros((MR, kcmax), like.dtype)


@kernel
def matmul_tiled_into(a, b, out, bp, edge, causal=0):
    """`matmul_tiled` with its scratch space passed in (from `tiled_buffers`), for attention's small products.

    `causal` skips the work a causal mask makes useless (i, j, k index rows of out, its columns, the depth):
      1: only out[i, j] with j <= i is wanted (S = q k^T): micro-tiles wholly above the diagonal are not
         computed, but set to 0 (so a reader that multiplies them by 0, or adds -inf, never meets an inf or nan);
      2: a[i, k] = 0 for k > i (y = P v, P lower-triangular): each strip of rows stops at its last row's k;
      3: a[i, k] = 0 for k < i (P^T g): each strip starts at its first row's k.

    The work is done by `_tiled_into`, handed views of any strides and `causal` as a plain integer: numba then
    compiles it once per dtype, not once for each combination of layouts and mode its callers pass (attention's
    kernels took 25 s to compile, 17 s so)."""
    _tiled_into(a[:, :], b[:, :], out[:, :], bp, edge, causal + 0)


@kernel
def _tiled_into(a, b, out, bp, edge, causal):
    """The body of `matmul_tiled_into`."""
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return
    if K == 0:
        _zero(out)
        return
    if bp.size < ((min(NC, N) + NR - 1) // NR) * NR * min(KC, K) or edge.shape[1] < min(KC, K):
        raise ValueError("matmul_tiled_into: scratch buffers too small for this product")
    # a transposed A, its strips shared by more than two tiles: copy each strip first (see matmul_tiled)
    copy_a = a.strides[0] == a.itemsize and a.strides[1] != a.itemsize and N > 2 * NR
    strip = np.empty((min(KC, K) if copy_a else 0, MR), a.dtype)  # strip[p, i] = A[ir + i, pc + p]
    for jc in range(0, N, NC):
        nc = min(NC, N - jc)
        for pc in range(0, K, KC):
            kc = min(KC, K - pc)
            _pack_b(b, pc, kc, jc, nc, bp)
            for ir in range(0, M, MR):
                mr = min(MR, M - ir)
                if mr == MR and copy_a:
                    for p in range(kc):  # the MR values of one depth: a contiguous vector copy
                        vector_store(strip[p], a[ir:ir + MR, pc + p], MR, False)
                    a_rows = strip[:kc].T
                elif mr == MR:
                    a_rows = a[ir:ir + MR, pc:pc + kc]
                else:  # the last few rows: copy them into the MR-row block (rows past mr are never stored)
                    for i in range(mr):
                        for p in range(kc):
                            edge[i, p] = a[ir + i, pc + p]
                    a_rows = edge[:, :kc]
                k0, k1 = 0, kc  # the depth range this strip needs (all of it unless causal is 2 or 3)
                if causal == 2:
                    k1 = min(kc, max(0, ir + mr - pc))
                elif causal == 3:
                    k0 = min(kc, max(0, ir - pc))
                width = nc  # the columns this strip needs: all, unless causal 1 leaves tiles above the diagonal
                if causal == 1:
                    width = min(nc, max(0, ir + mr - jc))
                    for i in range(ir, ir + mr if pc == 0 else ir):  # the tiles skipped: 0, once
                        for j in range(jc + (width + NR - 1) // NR * NR, jc + nc):
                            out[i, j] = 0
                _micro_kernel(a_rows[:, k0:k1], bp, k0 * NR, kc * NR, out, ir, jc, nc, (width + NR - 1) // NR, mr,
                              pc > 0)


# ---------------------------------------------------------------------------------------------------
# 5. Parallel
# ---------------------------------------------------------------------------------------------------
@any_layout  # called from Python with operands of every layout: one version reads them all (see any_layout)
@kernel(parallel=True)
def _matmul_parallel(a, b, out, tasks, by_rows):
    M = a.shape[0]
    N = b.shape[1]
    for t in prange(tasks):
        if by_rows:  # task t: a block of rows of C (a multiple of MR tall), from the same rows of A
            step = ((M + tasks - 1) // tasks + MR - 1) // MR * MR
            lo, hi = min(t * step, M), min((t + 1) * step, M)
            if hi > lo:
                matmul_tiled(a[lo:hi], b, out[lo:hi])
        else:        # task t: a block of columns of C (a multiple of NR wide), from the same columns of B
            step = ((N + tasks - 1) // tasks + NR - 1) // NR * NR
            lo, hi = min(t * step, N), min((t + 1) * step, N)
            if hi > lo:
                matmul_tiled(a, b[:, lo:hi], out[:, lo:hi])


def matmul_parallel(a, b, out):
    """`matmul_tiled` on all cores, in one parallel loop: C is cut into one block per thread, and each
    thread runs the serial kernel on its block, out[block] = a[rows] @ b[:, cols].

    The cut goes along the longer side of C: blocks of rows when M >= N (each thread packs all of B, the
    smaller operand), blocks of columns otherwise (each packs only its columns of B). Every thread writes
    only its own block of C and packs into its own buffer, so no two threads ever write the same memory:
    no locks, no races. One parallel loop per product, not one per packed block, because waking the
    threads costs microseconds each time (much more on a busy machine).
    (A thin Python wrapper: it asks numba for the thread count, which a cached kernel cannot do.)"""
    _matmul_parallel(a, b, out, num_threads(), a.shape[0] >= b.shape[1])


# ---------------------------------------------------------------------------------------------------
# Default and batched
# ---------------------------------------------------------------------------------------------------
KERNELS = {
    "naive": matmul_naive,
    "reordered": matmul_reordered,
    "blocked": matmul_blocked,
    "tiled": matmul_tiled,
    "parallel": matmul_parallel,
}
DEFAULT = "parallel"


def matmul(a, b, out):
    """The default kernel: `matmul_parallel`, or `matmul_tiled` for products too small to share out."""
    M, K = a.shape
    N = b.shape[1]
    if parallel_pays(M * N * K // 4):
        matmul_parallel(a, b, out)
    else:
        _matmul_tiled_any_layout(a, b, out)


_matmul_tiled_any_layout = any_layout(matmul_tiled)  # `matmul_tiled` itself stays callable from kernels


@any_layout
@kernel(parallel=True)
def _batched_over_batch(a, b, out):
    """One serial tiled matmul per batch element, batch elements shared among threads."""
    for t in prange(a.shape[0]):
        matmul_tiled(a[t], b[t], out[t])


def matmul_batched(a, b, out):
    """(batch, M, K) @ (batch, K, N) -> out (batch, M, N), all C-contiguous, same float dtype.

    Attention multiplies many small matrices (e.g. 48 of (64, 32) @ (32, 64)): each too small to split
    across threads, so the batch is shared among threads instead, each running the serial tiled kernel.
    With fewer batch elements than threads, each product is split across threads instead."""
    batch = a.shape[0]
    if batch == 0:
        return
    if batch < num_threads():
        for t in range(batch):
            matmul(a[t], b[t], out[t])
    else:
        _batched_over_batch(a, b, out)
