"""The transformer's fused ops on the GPU (chapter 11): the bias add, layer norm, RMS norm and causal self-attention,
forward and backward, with the CPU kernels' conventions (teenygrad/kernels/fused.py, and the backward pieces'
kernels in teenygrad/ops/fused.py) on numba-cuda device arrays of float32 or float64.

    add_bias(y, b)                                       y (R, C) += b (C,), in place
    layer_norm(x, w, b, eps, y, mean, rstd)              x, y (R, C); w, b (C,); mean, rstd (R,) written
    rms_norm(x, w, eps, y, rstd)                         x, y (R, C); w (C,); rstd (R,) written
    attention(qkv, nh, y, att)                           qkv (B, T, 3C) -> y (B, T, C), att (B, nh, T, T)
    layer_norm_backward(x, w, mean, rstd, g, dx, dw, db) dx written; dw, db (C,) written (the CPU piece's arrive
    rms_norm_backward(x, w, rstd, g, dx, dw)             zeroed); the same without the bias
    attention_backward(qkv, att, g, dqkv)                dqkv (B, T, 3C) written

How the work is split:
- a norm is one block a row: the row's threads each fold a strided slice of it (neighbouring threads, neighbouring
  elements: coalesced), then combine their values in a shared-memory tree (`reduce.block_sum`);
- the weights' gradients are sums over ROWS, so a second kernel gives a thread a column (a warp reads 32
  neighbouring elements of a row) and a slice of the rows; each thread adds its partial sum into dw, db with one
  `cuda.atomic.add`: one atomic per (slice, column), not per element;
- attention is one block a query row (batch, head, i): the block's threads take the keys j <= i, the scores go
  into that row of `att` (which the forward must write anyway), softmax with a block max and a block sum, then
  the threads take the head's columns of y. Positions above the diagonal are written 0 and never computed.
  Its backward: one block a query row for dS and dq, then one block a KEY row for dk and dv (sums down a column
  of P and dS); dS lives in a scratch array the size of att between the two.
Every kernel loops over its rows (and threads over their elements) with a grid stride, so any size runs on any
grid. Shared arrays have a dtype fixed when the kernel compiles, so each kernel comes from a factory cached by dtype.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.cuda.launch import launch_config
from teenygrad.kernels.cuda.movement import fill
from teenygrad.kernels.cuda.reduce import block_max, block_sum  # the block's tree in shared memory

# threads a block, a power of two (the tree reductions halve it); the simulator runs every thread of a block as a
# Python thread, each block in turn, so there a few threads (still fewer than a row has elements in the tests)
THREADS = 8 if SIMULATED else 256
MAX_BLOCKS = 65535  # blocks a launch at most: the grid-stride loops cover the rest
ROW_SLICES = 4 if SIMULATED else 64  # slices of the rows the weight-gradient kernels split a column into


def _blocks(n: int) -> int:
    return max(1, min(n, MAX_BLOCKS))


# ---- linear: the bias add -----------------------------------------------------------------------------------------

@cuda.jit
def add_bias_kernel(y, b):
    R, C = y.shape
    for i in range(cuda.grid(1), R * C, cuda.gridsize(1)):  # neighbouring threads, neighbouring elements
        c = i % C
        y[i // C, c] += b[c]


def add_bias(y, b) -> None:
    """y (R, C) += b (C,) in place, one thread an element (grid-stride)."""
    if y.size:
        grid, block = launch_config((y.size,), THREADS)
        add_bias_kernel[grid, block](y, b)


# ---- norms ----------------------------------------------------------------------------------------------------------

@functools.cache
def norm_kernels(dtype: type) -> dict[str, Callable]:
    """The norms' kernels for float arrays of `dtype` (np.float32 or np.float64). Constants are made in that dtype
    (`dtype(0.0)`): a Python float would turn float32 arithmetic into float64, half as fast or worse on a GPU."""

    @cuda.jit
    def layer_norm_kernel(x, w, b, eps, y, mean, rstd):
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        R, C = x.shape
        n = dtype(C)
        for r in range(cuda.blockIdx.x, R, cuda.gridDim.x):
            s = dtype(0.0)
            for c in range(t, C, THREADS):
                s += x[r, c]
            m = block_sum(part, t, THREADS, s) / n
            s = dtype(0.0)
            for c in range(t, C, THREADS):  # the variance about the mean (two passes: no cancellation)
                d = x[r, c] - m
                s += d * d
            inv = dtype(1.0) / math.sqrt(block_sum(part, t, THREADS, s) / n + eps)
            for c in range(t, C, THREADS):
                y[r, c] = (x[r, c] - m) * inv * w[c] + b[c]
            if t == 0:
                mean[r] = m
                rstd[r] = inv

    @cuda.jit
    def layer_norm_dx_kernel(x, w, mean, rstd, g, dx, dw, db):
        """With xhat = (x - mean) rstd and gh = g w: dx = rstd (gh - mean(gh) - xhat mean(gh xhat)). Block 0 also
        zeroes dw and db, which the next launch adds the rows' sums into (launches on one stream run in order)."""
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        R, C = x.shape
        n = dtype(C)
        if cuda.blockIdx.x == 0:
            for c in range(t, C, THREADS):
                dw[c] = dtype(0.0)
                db[c] = dtype(0.0)
        for r in range(cuda.blockIdx.x, R, cuda.gridDim.x):
            m, s = mean[r], rstd[r]
            a = dtype(0.0)
            bsum = dtype(0.0)
            for c in range(t, C, THREADS):
                gh = g[r, c] * w[c]
                a += gh
                bsum += gh * (x[r, c] - m) * s
            a = block_sum(part, t, THREADS, a) / n
            bsum = block_sum(part, t, THREADS, bsum) / n
            for c in range(t, C, THREADS):
                dx[r, c] = s * (g[r, c] * w[c] - a - (x[r, c] - m) * s * bsum)

    @cuda.jit
    def layer_norm_dwdb_kernel(x, mean, rstd, g, dw, db):
        """dw[c] += sum over rows of g xhat, db[c] += sum of g: a thread a column, the grid's y a slice of rows."""
        R, C = x.shape
        for c in range(cuda.grid(1), C, cuda.gridsize(1)):
            sw = dtype(0.0)
            sb = dtype(0.0)
            for r in range(cuda.blockIdx.y, R, cuda.gridDim.y):
                sw += g[r, c] * (x[r, c] - mean[r]) * rstd[r]
                sb += g[r, c]
            cuda.atomic.add(dw, c, sw)  # the slices of the rows meet here: one atomic a slice
            cuda.atomic.add(db, c, sb)

    @cuda.jit
    def rms_norm_kernel(x, w, eps, y, rstd):
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        R, C = x.shape
        n = dtype(C)
        for r in range(cuda.blockIdx.x, R, cuda.gridDim.x):
            s = dtype(0.0)
            for c in range(t, C, THREADS):
                s += x[r, c] * x[r, c]
            inv = dtype(1.0) / math.sqrt(block_sum(part, t, THREADS, s) / n + eps)
            for c in range(t, C, THREADS):
                y[r, c] = x[r, c] * inv * w[c]
            if t == 0:
                rstd[r] = inv

    @cuda.jit
    def rms_norm_dx_kernel(x, w, rstd, g, dx, dw):
        """With xhat = x rstd and gh = g w: dx = rstd (gh - xhat mean(gh xhat)); block 0 zeroes dw (as layer norm's)."""
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        R, C = x.shape
        n = dtype(C)
        if cuda.blockIdx.x == 0:
            for c in range(t, C, THREADS):
                dw[c] = dtype(0.0)
        for r in range(cuda.blockIdx.x, R, cuda.gridDim.x):
            s = rstd[r]
            bsum = dtype(0.0)
            for c in range(t, C, THREADS):
                bsum += g[r, c] * w[c] * x[r, c] * s
            bsum = block_sum(part, t, THREADS, bsum) / n
            for c in range(t, C, THREADS):
                dx[r, c] = s * (g[r, c] * w[c] - x[r, c] * s * bsum)

    @cuda.jit
    def rms_norm_dw_kernel(x, rstd, g, dw):
        """dw[c] += sum over rows of g xhat (as layer norm's)."""
        R, C = x.shape
        for c in range(cuda.grid(1), C, cuda.gridsize(1)):
            sw = dtype(0.0)
            for r in range(cuda.blockIdx.y, R, cuda.gridDim.y):
                sw += g[r, c] * x[r, c] * rstd[r]
            cuda.atomic.add(dw, c, sw)

    return {"layer_norm": layer_norm_kernel, "layer_norm_dx": layer_norm_dx_kernel,
            "layer_norm_dwdb": layer_norm_dwdb_kernel, "rms_norm": rms_norm_kernel, "rms_norm_dx": rms_norm_dx_kernel,
            "rms_norm_dw": rms_norm_dw_kernel}


def _kernels(factory: Callable, x, name: str) -> Callable:
    return factory(np.dtype(x.dtype).type)[name]


def _columns_grid(R: int, C: int) -> tuple[tuple[int, int], int]:
    """(grid, threads) of a weight-gradient kernel: threads along the columns, the grid's y along slices of rows."""
    return (max(1, min(-(-C // THREADS), MAX_BLOCKS)), max(1, min(R, ROW_SLICES))), THREADS


def layer_norm(x, w, b, eps: float, y, mean, rstd) -> None:
    """y = (x - mean) / sqrt(var + eps) * w + b over the rows of x (R, C); each row's mean and rstd written."""
    R = x.shape[0]
    if R and x.shape[1]:
        kernel = _kernels(norm_kernels, x, "layer_norm")
        kernel[_blocks(R), THREADS](x, w, b, np.dtype(x.dtype).type(eps), y, mean, rstd)


def rms_norm(x, w, eps: float, y, rstd) -> None:
    """y = x / sqrt(mean(x^2) + eps) * w over the rows of x (R, C); each row's rstd written."""
    R = x.shape[0]
    if R and x.shape[1]:
        kernel = _kernels(norm_kernels, x, "rms_norm")
        kernel[_blocks(R), THREADS](x, w, np.dtype(x.dtype).type(eps), y, rstd)


def layer_norm_backward(x, w, mean, rstd, g, dx, dw, db) -> None:
    """Layer norm's gradients, all three written: dx (R, C); dw, db (C,), the sums over the rows (zeros for no rows).
    (The CPU piece adds into a zeroed dw and db; here the first launch zeroes them, so the caller need not: zeros
    made on the host would be copied over, and the copy would wait for every launch queued before it.)"""
    R, C = x.shape
    if R and C:
        _kernels(norm_kernels, x, "layer_norm_dx")[_blocks(R), THREADS](x, w, mean, rstd, g, dx, dw, db)
        grid, threads = _columns_grid(R, C)
        _kernels(norm_kernels, x, "layer_norm_dwdb")[grid, threads](x, mean, rstd, g, dw, db)
    else:
        fill(dw, 0)
        fill(db, 0)


def rms_norm_backward(x, w, rstd, g, dx, dw) -> None:
    """RMS norm's gradients, both written: dx (R, C); dw (C,), the sum over the rows (as layer norm's)."""
    R, C = x.shape
    if R and C:
        _kernels(norm_kernels, x, "rms_norm_dx")[_blocks(R), THREADS](x, w, rstd, g, dx, dw)
        grid, threads = _columns_grid(R, C)
        _kernels(norm_kernels, x, "rms_norm_dw")[grid, threads](x, rstd, g, dw)
    else:
        fill(dw, 0)


# ---- causal self-attention ------------------------------------------------------------------------------------------

@functools.cache
def attention_kernels(dtype: type) -> dict[str, Callable]:
    """Attention's kernels for `dtype`. A block takes one row at a time: row = (b * nh + h) * T + i."""

    @cuda.jit
    def forward_kernel(qkv, nh, y, att):
        """S_ij = q_i . k_j for j <= i, P_i = softmax(S_i / sqrt(hs)), y_i = sum_j P_ij v_j, P_i into att."""
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        B, T, C3 = qkv.shape
        C = C3 // 3
        hs = C // nh
        scale = dtype(1.0) / math.sqrt(dtype(hs))
        for row in range(cuda.blockIdx.x, B * nh * T, cuda.gridDim.x):
            i, bh = row % T, row // T
            b, h = bh // nh, bh % nh
            qc, kc, vc = h * hs, C + h * hs, 2 * C + h * hs  # the head's first columns of q, k and v
            p = att[b, h, i]
            mx = dtype(-math.inf)
            for j in range(t, i + 1, THREADS):  # the visible keys, a thread each
                s = dtype(0.0)
                for d in range(hs):
                    s += qkv[b, i, qc + d] * qkv[b, j, kc + d]
                p[j] = s  # the raw score, until the softmax replaces it (only this thread touches p[j])
                mx = max(mx, s)
            for j in range(i + 1 + t, T, THREADS):  # masked: 0, never computed
                p[j] = dtype(0.0)
            mx = block_max(part, t, THREADS, mx)
            tot = dtype(0.0)
            for j in range(t, i + 1, THREADS):  # shifted by the row's maximum: exp never overflows
                e = math.exp((p[j] - mx) * scale)
                p[j] = e
                tot += e
            inv = dtype(1.0) / block_sum(part, t, THREADS, tot)
            for j in range(t, i + 1, THREADS):
                p[j] *= inv
            cuda.syncthreads()  # the whole row of P is written before any thread reads all of it
            for d in range(t, hs, THREADS):  # the head's columns of y, a thread each
                acc = dtype(0.0)
                for j in range(i + 1):
                    acc += p[j] * qkv[b, j, vc + d]
                y[b, i, qc + d] = acc

    @cuda.jit
    def backward_rows_kernel(qkv, att, g, ds, dqkv):
        """Per query row i: dP_ij = g_i . v_j, dS_ij = P_ij (dP_ij - sum_j dP_ij P_ij) / sqrt(hs) into ds (0 above
        the diagonal), dq_i = sum_j dS_ij k_j into dqkv."""
        part = cuda.shared.array(THREADS, dtype=dtype)
        t = cuda.threadIdx.x
        B, T, C3 = qkv.shape
        C = C3 // 3
        nh = att.shape[1]
        hs = C // nh
        scale = dtype(1.0) / math.sqrt(dtype(hs))
        for row in range(cuda.blockIdx.x, B * nh * T, cuda.gridDim.x):
            i, bh = row % T, row // T
            b, h = bh // nh, bh % nh
            qc, kc, vc = h * hs, C + h * hs, 2 * C + h * hs
            p, dsr = att[b, h, i], ds[b, h, i]
            dot = dtype(0.0)
            for j in range(t, i + 1, THREADS):
                dp = dtype(0.0)
                for d in range(hs):
                    dp += g[b, i, qc + d] * qkv[b, j, vc + d]
                dsr[j] = dp
                dot += dp * p[j]
            for j in range(i + 1 + t, T, THREADS):
                dsr[j] = dtype(0.0)
            dot = block_sum(part, t, THREADS, dot)
            for j in range(t, i + 1, THREADS):  # (each thread rewrites only the dP_ij it wrote)
                dsr[j] = scale * p[j] * (dsr[j] - dot)
            cuda.syncthreads()  # the whole row of dS is written before any thread reads all of it
            for d in range(t, hs, THREADS):
                acc = dtype(0.0)
                for j in range(i + 1):
                    acc += dsr[j] * qkv[b, j, kc + d]
                dqkv[b, i, qc + d] = acc

    @cuda.jit
    def backward_columns_kernel(qkv, att, g, ds, dqkv):
        """Per key row j: dv_j = sum_{i >= j} P_ij g_i and dk_j = sum_{i >= j} dS_ij q_i (down a column of P, dS:
        every thread reads the same P_ij, a broadcast)."""
        B, T, C3 = qkv.shape
        C = C3 // 3
        nh = att.shape[1]
        hs = C // nh
        for row in range(cuda.blockIdx.x, B * nh * T, cuda.gridDim.x):
            j, bh = row % T, row // T
            b, h = bh // nh, bh % nh
            qc, kc, vc = h * hs, C + h * hs, 2 * C + h * hs
            for d in range(cuda.threadIdx.x, hs, cuda.blockDim.x):
                dv = dtype(0.0)
                dk = dtype(0.0)
                for i in range(j, T):  # the queries that see key j
                    dv += att[b, h, i, j] * g[b, i, qc + d]
                    dk += ds[b, h, i, j] * qkv[b, i, qc + d]
                dqkv[b, j, vc + d] = dv
                dqkv[b, j, kc + d] = dk

    return {"forward": forward_kernel, "rows": backward_rows_kernel, "columns": backward_columns_kernel}


def attention(qkv, nh: int, y, att) -> None:
    """Causal self-attention: qkv (B, T, 3C) -> y (B, T, C), the probabilities into att (B, nh, T, T)."""
    B, T, _ = qkv.shape
    if B * T:
        _kernels(attention_kernels, qkv, "forward")[_blocks(B * nh * T), THREADS](qkv, nh, y, att)


def attention_backward(qkv, att, g, dqkv) -> None:
    """From g = dL/dy (B, T, C) and the saved qkv, att to dqkv (B, T, 3C), written. dS goes through a scratch array
    the size of att (the CPU's kernel keeps a (T, T) one for each range of heads)."""
    B, T, _ = qkv.shape
    if B * T == 0:
        return
    ds = cuda.device_array(att.shape, dtype=att.dtype)
    blocks = _blocks(B * att.shape[1] * T)
    kernels = attention_kernels(np.dtype(qkv.dtype).type)
    kernels["rows"][blocks, THREADS](qkv, att, g, ds, dqkv)
    kernels["columns"][blocks, THREADS](qkv, att, g, ds, dqkv)  # after the rows: launches on one stream run in order


KERNELS: dict[str, Callable] = {
    "add_bias": add_bias, "layer_norm": layer_norm, "rms_norm": rms_norm, "attention": attention,
    "layer_norm_backward": layer_norm_backward, "rms_norm_backward": rms_norm_backward,
    "attention_backward": attention_backward,
}
