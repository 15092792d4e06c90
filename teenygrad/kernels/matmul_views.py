"""The compiler's matmul (chapter 10): chapter 3's tiled kernel on strided views of flat arrays, compiled once.

A generated program (`compiler.codegen`) keeps every array flat and reads operands through views (an offset and
one stride per axis). Its matmuls call these two kernels from the program's Python driver, with the views'
numbers as arguments, rather than generating a function that calls `matmul_tiled`: numba would compile and
optimise the whole tiled kernel again inside each generated function (seconds each, for every product of a
step), where these are compiled once, for all shapes, and cached with the package.

Operands have four axes, (b0, b1, m, k) @ (b0, b1, k, n) -> (b0, b1, m, n) (a plain product has b0 = b1 = 1;
strides are in elements). The work is cut into b0 * b1 * blocks tasks, each one block of `step` rows of one
product, or `step` columns when a single product is wider than tall: as `matmul_parallel` cuts a product, so
each thread packs only its own columns of B.
"""
from __future__ import annotations

import numpy as np

from teenygrad.kernels.jit import kernel, prange
from teenygrad.kernels.matmul import matmul_tiled, matmul_tiled_into, tiled_buffers


@kernel
def _views(a, a_offset, a_strides, b, b_offset, b_strides, c, c_strides, shape):
    """The operands and the product as 4-d arrays (strides in bytes for as_strided). The product is written
    through its strides too: into another array's layout (the heads side by side) when the compiler says so."""
    b0, b1, m, k, n = shape
    size = a.itemsize
    A = np.lib.stride_tricks.as_strided(a[a_offset:], shape=(b0, b1, m, k), strides=(
        a_strides[0] * size, a_strides[1] * size, a_strides[2] * size, a_strides[3] * size))
    B = np.lib.stride_tricks.as_strided(b[b_offset:], shape=(b0, b1, k, n), strides=(
        b_strides[0] * size, b_strides[1] * size, b_strides[2] * size, b_strides[3] * size))
    C = np.lib.stride_tricks.as_strided(c, shape=(b0, b1, m, n), strides=(
        c_strides[0] * size, c_strides[1] * size, c_strides[2] * size, c_strides[3] * size))
    return A, B, C


@kernel(inline=True)
def _task(A, B, C, t, blocks, step, by_rows, causal):
    """Task t: rows (by_rows) or columns lo..hi of one product of the batch; or, when `causal` (a mode of
    `matmul_tiled_into`: the compiler proved A triangular, `schedule.triangles`), the whole product, skipping the
    zeros. Inlined into both drivers: called as a function from the parallel loop, the copy numba loads from its
    disk cache ran 2.5x slower than the one it had just compiled (numba issue #8085; 768x128 @ 128x512: 4.8 ms vs
    1.9 ms)."""
    i0, i1 = t // blocks // A.shape[1], t // blocks % A.shape[1]
    lo = (t % blocks) * step
    if causal:
        bp, edge = tiled_buffers(C, A.shape[3], B.shape[3])
        matmul_tiled_into(A[i0, i1], B[i0, i1], C[i0, i1], bp, edge, causal)
    elif by_rows:
        hi = min(lo + step, A.shape[2])
        if hi > lo:
            matmul_tiled(A[i0, i1, lo:hi], B[i0, i1], C[i0, i1, lo:hi])
    else:
        hi = min(lo + step, B.shape[3])
        if hi > lo:
            matmul_tiled(A[i0, i1], B[i0, i1, :, lo:hi], C[i0, i1, :, lo:hi])


@kernel
def matmul_views(a, a_offset, a_strides, b, b_offset, b_strides, c, c_strides, shape, blocks, step, by_rows, causal):
    """(view of c) = (view of a) @ (view of b), on the calling thread. shape: (b0, b1, m, k, n); blocks must be 1
    when `causal` is not 0."""
    A, B, C = _views(a, a_offset, a_strides, b, b_offset, b_strides, c, c_strides, shape)
    for t in range(shape[0] * shape[1] * blocks):
        _task(A, B, C, t, blocks, step, by_rows, causal)


@kernel(parallel=True)
def matmul_views_parallel(a, a_offset, a_strides, b, b_offset, b_strides, c, c_strides, shape, blocks, step,
                          by_rows, causal):
    """`matmul_views` with its tasks shared among threads."""
    A, B, C = _views(a, a_offset, a_strides, b, b_offset, b_strides, c, c_strides, shape)
    for t in prange(shape[0] * shape[1] * blocks):
        _task(A, B, C, t, blocks, step, by_rows, causal)
