"""Kernels that move data without arithmetic (chapters 2 and 8): strided copy (and dtype cast), gather,
index_select.

copy(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset)
    dst(i) = src(i) for every index i of `shape` (coalesced, >= 1 dim), both sides strided; converts
    between dtypes. `contiguous()`, casts, `cat`, `stack` and slice assignment are all this one kernel.
    It is exercise 2's piece: its loop is compiled inside it (`KERNELS["copy"]` is this function).

gather(x, idx, out, outer, n_src, n_idx, inner)
    x: contiguous, read as (outer, n_src, inner); idx: contiguous int64 (outer, n_idx, inner);
    out: contiguous (outer, n_idx, inner);  out[o, k, i] = x[o, idx[o, k, i], i].

index_select(x, idx, out, outer, n_src, inner)
    x: contiguous (outer, n_src, inner); idx: contiguous int64 of length n_idx;
    out: contiguous (outer, n_idx, inner);  out[o, k, i] = x[o, idx[k], i]   (an embedding lookup).

Indices may be negative (counted from the end, as in numpy); anything outside [-n_src, n_src) raises
IndexError.

Their backwards are pieces of exercises, their kernels inside them (an index that repeats collects every gradient,
hence `+=`): gather's is exercise 6's `teenygrad.ops.movement.scatter_add`, index_select's (the embedding's
gradient) exercise 8's `teenygrad.ops.movement.index_add`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.elementwise import row_start, u
from teenygrad.kernels.jit import kernel

_COMPILED: dict[str, Callable] = {}  # the copy's loop, compiled on the first call of copy


@exercise("02-tensors", "copy")
def copy(shape: np.ndarray, src: np.ndarray, src_strides: np.ndarray, src_offset: int, dst: np.ndarray,
         dst_strides: np.ndarray, dst_offset: int) -> None:
    """The strided copy: dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides] for every index i of
    `shape`, converting to dst's dtype; nothing else of `dst` is written.

    `shape` (>= 1 dim, no zeros) and the strides are int64 arrays of one length; a stride may be negative or 0
    (a broadcast source). The last axis is the inner loop; every other index is one row, whose first element's
    position is found by unravelling the row's number over shape[:-1] in row-major order (the last of those
    axes fastest), so one compiled loop serves every rank."""
    kern = _COMPILED.get("copy")
    if kern is None:
        @kernel
        def kern(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset):
            ndim = shape.shape[0]
            n, ss, ds = shape[ndim - 1], src_strides[ndim - 1], dst_strides[ndim - 1]
            rows = 1
            for d in range(ndim - 1):
                rows *= shape[d]
            for r in range(rows):
                i = row_start(r, shape, src_strides, src_offset)
                o = row_start(r, shape, dst_strides, dst_offset)
                for j in range(n):
                    dst[u(o + j * ds)] = src[u(i + j * ss)]

        _COMPILED["copy"] = kern
    kern(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset)


@kernel
def checked_index(k, n_src):
    if k < 0:
        k += n_src
    if k < 0 or k >= n_src:
        raise IndexError("index out of range")
    return k


@kernel
def gather(x, idx, out, outer, n_src, n_idx, inner):
    for o in range(outer):
        for k in range(n_idx):
            row = (o * n_idx + k) * inner
            for i in range(inner):
                src = checked_index(idx[row + i], n_src)
                out[u(row + i)] = x[u((o * n_src + src) * inner + i)]


@kernel
def index_select(x, idx, out, outer, n_src, inner):
    n_idx = idx.shape[0]
    for o in range(outer):
        for k in range(n_idx):
            src = (o * n_src + checked_index(idx[k], n_src)) * inner
            dst = (o * n_idx + k) * inner
            for i in range(inner):
                out[u(dst + i)] = x[u(src + i)]
