"""Movement kernels on the GPU (chapter 11): the strided copy (and dtype cast), gather, index_select, and the two
backward kernels of the indexing ops, scatter_add and index_add. The CPU kernels' calling conventions
(teenygrad/kernels/movement.py), with numba-cuda device arrays for buffers.

copy(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset)     dst(i) = src(i), converting the dtype
gather(x, idx, out, outer, n_src, n_idx, inner)                            out[o,k,i] = x[o,idx[o,k,i],i]
index_select(x, idx, out, outer, n_src, inner)                             out[o,k,i] = x[o,idx[k],i]
scatter_add(g, idx, out, outer, n_src, n_idx, inner)                       out[o,idx[o,k,i],i] += g[o,k,i]
index_add(g, idx, out, outer, n_src, inner)                                out[o,idx[k],i] += g[o,k,i]

One thread an element of the output (of g for the backwards), in a grid-stride loop: neighbouring threads take
neighbouring elements of the contiguous side, so its loads or stores coalesce (a transposing copy's other side does
not: a tiled transpose through shared memory would fix that, and is not here).

Indices count from the end when negative, as on the CPU. A kernel cannot raise, so gather and index_select record
an index outside [-n_src, n_src) in a one-element flag (and write nothing for it), and the launcher raises the CPU's
IndexError after the launch: the price is a 4-byte copy back, which waits for the kernel to finish. The flag lives on
the GPU for good (`error_flag`), 0 until an index is out of range, and is set back to 0 before the error is raised:
so the check copies nothing TO the GPU (a copy there would also wait for every launch before it). The backwards do
not check (their index is the forward's, checked there); an out-of-range entry is skipped, never written.

fill(out, value) sets every element of a 1-D out, arange(out, start, step) writes start, start + step, ...: on a
GPU, zeros, ones and positions are made there, by a launch that returns at once, where a copy from the computer's
memory would first wait for every launch before it.

The backwards add into `out`, which the caller has zeroed: an index that repeats sends several threads to one
element, and `out[j] += v` from two threads at once would lose one of the additions (both read the old value, both
write). `cuda.atomic.add` makes each read-add-write one indivisible step in memory. (So the sum's order, and its
float rounding, can differ from run to run; the CPU adds in index order.)
"""
from __future__ import annotations

import numpy as np

from teenygrad.devices import Buffer
from teenygrad.kernels.cuda.device import cuda
from teenygrad.kernels.cuda.elementwise import flat_config, ints, strided_offset


@cuda.jit
def copy_kernel(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        # the store converts to dst's dtype (float to int64 truncates, as numpy's astype and the CPU kernel do)
        dst[strided_offset(i, shape, dst_strides, dst_offset)] = src[strided_offset(i, shape, src_strides, src_offset)]


def copy(shape: np.ndarray, src: Buffer, src_strides: np.ndarray, src_offset: int, dst: Buffer, dst_strides: np.ndarray,
         dst_offset: int) -> None:
    """The strided copy: dst(i) = src(i) for every index i of `shape`, converting to dst's dtype; nothing else of
    dst is written. Thread j takes the j-th index in row-major order of `shape`."""
    n = int(np.prod(shape))
    blocks, threads = flat_config(n)
    copy_kernel[blocks, threads](ints(shape), src, ints(src_strides), src_offset, dst, ints(dst_strides), dst_offset, n)


@cuda.jit(device=True)
def wrapped(k, n_src):
    """Index k into n_src, negative counted from the end; -1 when it is out of range."""
    if k < 0:
        k += n_src
    return k if 0 <= k < n_src else -1


@cuda.jit
def gather_kernel(x, idx, out, n, n_src, n_idx, inner, bad):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):  # j = (o*n_idx + k)*inner + i
        o, i = j // (n_idx * inner), j % inner
        k = wrapped(idx[j], n_src)
        if k < 0:
            bad[0] = 1  # every offending thread writes the same 1: no race worth a lock
        else:
            out[j] = x[(o * n_src + k) * inner + i]


@cuda.jit
def index_select_kernel(x, idx, out, n, n_src, inner, bad):
    n_idx = idx.shape[0]
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        o, k, i = j // (n_idx * inner), (j // inner) % n_idx, j % inner
        src = wrapped(idx[k], n_src)
        if src < 0:
            bad[0] = 1
        else:
            out[j] = x[(o * n_src + src) * inner + i]  # a warp copies `inner` neighbouring elements of one row


_FLAG: list = []  # the error flag, made on the first check


def error_flag():
    """A one-element int32 array on the GPU, 0 unless a kernel just found a bad index (see `raise_if_set`)."""
    if not _FLAG:
        _FLAG.append(cuda.to_device(np.zeros(1, np.int32)))
    return _FLAG[0]


def raise_if_set(flag, error: Exception) -> None:
    """Copy the flag back (waiting for the launch that set it) and raise `error` if it is set, the flag 0 again."""
    if flag.copy_to_host()[0]:
        flag.copy_to_device(np.zeros(1, np.int32))
        raise error


def _checked(op: str, kernel, n: int, *args) -> None:
    """Launch `kernel` with the error flag as its last argument; raise the CPU's IndexError if it set it."""
    blocks, threads = flat_config(n)
    kernel[blocks, threads](*args, error_flag())
    raise_if_set(error_flag(), IndexError(f"{op}: index out of range"))


def gather(x: Buffer, idx: Buffer, out: Buffer, outer: int, n_src: int, n_idx: int, inner: int) -> None:
    """out[o, k, i] = x[o, idx[o, k, i], i]: x contiguous (outer, n_src, inner), idx and out (outer, n_idx, inner)."""
    n = outer * n_idx * inner
    _checked("gather", gather_kernel, n, x, idx, out, n, n_src, n_idx, inner)


def index_select(x: Buffer, idx: Buffer, out: Buffer, outer: int, n_src: int, inner: int) -> None:
    """out[o, k, i] = x[o, idx[k], i]: x contiguous (outer, n_src, inner), idx int64 (n_idx,), out
    (outer, n_idx, inner). An embedding lookup: each row of x a token's vector."""
    n = outer * idx.shape[0] * inner
    _checked("index_select", index_select_kernel, n, x, idx, out, n, n_src, inner)


@cuda.jit
def scatter_add_kernel(g, idx, out, n, n_src, n_idx, inner):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        o, i = j // (n_idx * inner), j % inner
        k = wrapped(idx[j], n_src)
        if k >= 0:
            cuda.atomic.add(out, (o * n_src + k) * inner + i, g[j])  # repeats add up: see the module docstring


@cuda.jit
def index_add_kernel(g, idx, out, n, n_src, inner):
    n_idx = idx.shape[0]
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        o, k, i = j // (n_idx * inner), (j // inner) % n_idx, j % inner
        dst = wrapped(idx[k], n_src)
        if dst >= 0:
            cuda.atomic.add(out, (o * n_src + dst) * inner + i, g[j])


def scatter_add(g: Buffer, idx: Buffer, out: Buffer, outer: int, n_src: int, n_idx: int, inner: int) -> None:
    """gather's backward: out[o, idx[o, k, i], i] += g[o, k, i]; out (outer, n_src, inner), zeroed by the caller;
    g and idx contiguous (outer, n_idx, inner)."""
    n = outer * n_idx * inner
    blocks, threads = flat_config(n)
    scatter_add_kernel[blocks, threads](g, idx, out, n, n_src, n_idx, inner)


def index_add(g: Buffer, idx: Buffer, out: Buffer, outer: int, n_src: int, inner: int) -> None:
    """index_select's backward (the embedding's gradient): out[o, idx[k], i] += g[o, k, i]; out (outer, n_src,
    inner), zeroed by the caller; g contiguous (outer, n_idx, inner), idx int64 (n_idx,)."""
    n = outer * idx.shape[0] * inner
    blocks, threads = flat_config(n)
    index_add_kernel[blocks, threads](g, idx, out, n, n_src, inner)


@cuda.jit
def fill_kernel(out, value):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = value  # (converted to out's dtype on the store)


def fill(out: Buffer, value: float) -> None:
    """out[:] = value for a 1-D device array, on the GPU (no copy from the computer's memory)."""
    if out.shape[0]:
        blocks, threads = flat_config(out.shape[0])
        fill_kernel[blocks, threads](out, value)


@cuda.jit
def arange_kernel(out, start, step):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = start + i * step


def arange(out: Buffer, start: int, step: int) -> None:
    """out[i] = start + i * step for a 1-D device array (integers: exact), on the GPU."""
    if out.shape[0]:
        blocks, threads = flat_config(out.shape[0])
        arange_kernel[blocks, threads](out, start, step)


KERNELS = {"copy": copy, "gather": gather, "index_select": index_select, "scatter_add": scatter_add,
           "index_add": index_add, "fill": fill, "arange": arange}
