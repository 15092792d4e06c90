"""Softmax and log-softmax (chapter 4) along the last axis of an (M, N) strided matrix.

    softmax(x)_n     = exp(x_n - c) / sum_k exp(x_k - c)
    log_softmax(x)_n = (x_n - c) - log(sum_k exp(x_k - c))
with c = max_k x_k. Subtracting the max changes nothing mathematically (it cancels) but keeps every
exponent <= 0, so exp never overflows, and the largest term is exp(0) = 1, so the sum never underflows
to 0 (the log stays finite).

Calling convention (both forward kernels):
    fn(x, x_offset, M, sm, N, sn, out)   element (m, n) is x[x_offset + m*sm + n*sn];
                                         out: contiguous (M*N,), row-major, out[m*N + n].

Rows are independent, so for large inputs (the logits of a language model: rows = batch*time,
N = vocabulary) the rows are split across cores with prange. Each row writes only its own slice of
`out`, so there are no races. Small inputs stay serial: starting the thread pool costs microseconds.

The backward kernels take the forward's output y and g = dL/dy, both contiguous (M, N), and write dx:
    softmax_backward(y, g, M, N, dx)        dx = y * (g - sum_n g*y)
    log_softmax_backward(y, g, M, N, dx)    dx = g - exp(y) * sum_n g
"""
from __future__ import annotations

import math

from teenygrad.kernels.elementwise import u  # unsigned indices let numba vectorize
from teenygrad.kernels.jit import kernel, parallel_pays, prange


@kernel
def softmax_row(x, base, N, sn, out, o, log):
    """One row: max, then sum of shifted exps, then normalise (log=True gives log-softmax)."""
    c = x[u(base)]
    for n in range(1, N):
        v = x[u(base + n * sn)]
        if v > c:
            c = v
    total = 0.0
    for n in range(N):
        e = math.exp(x[u(base + n * sn)] - c)
        out[u(o + n)] = e
        total += e
    if log:
        lse = math.log(total)
        for n in range(N):
            out[u(o + n)] = (x[u(base + n * sn)] - c) - lse
    else:
        inv = 1.0 / total
        for n in range(N):
            out[u(o + n)] *= inv


@kernel
def softmax_serial(x, x_offset, M, sm, N, sn, out, log):
    for m in range(M):
        softmax_row(x, x_offset + m * sm, N, sn, out, m * N, log)


@kernel(parallel=True)
def softmax_parallel(x, x_offset, M, sm, N, sn, out, log):
    for m in prange(M):
        softmax_row(x, x_offset + m * sm, N, sn, out, m * N, log)


def softmax(x, x_offset: int, M: int, sm: int, N: int, sn: int, out) -> None:
    if N == 0:
        return
    run = softmax_parallel if M > 1 and parallel_pays(M * N) else softmax_serial
    run(x, x_offset, M, sm, N, sn, out, False)


def log_softmax(x, x_offset: int, M: int, sm: int, N: int, sn: int, out) -> None:
    if N == 0:
        return
    run = softmax_parallel if M > 1 and parallel_pays(M * N) else softmax_serial
    run(x, x_offset, M, sm, N, sn, out, True)


@kernel
def softmax_backward(y, g, M, N, dx):
    # y_n = e^{x_n} / Z, so dy_n/dx_k = y_n (1[n=k] - y_k) and dx_k = sum_n g_n dy_n/dx_k = y_k (g_k - sum_n g_n y_n)
    for m in range(M):
        base = m * N
        dot = 0.0
        for n in range(N):
            dot += g[u(base + n)] * y[u(base + n)]
        for n in range(N):
            dx[u(base + n)] = y[u(base + n)] * (g[u(base + n)] - dot)


@kernel
def log_softmax_backward(y, g, M, N, dx):
    # y_n = x_n - log Z, so dy_n/dx_k = 1[n=k] - softmax_k and dx_k = g_k - softmax_k sum_n g_n; softmax = e^y
    for m in range(M):
        base = m * N
        total = 0.0
        for n in range(N):
            total += g[u(base + n)]
        for n in range(N):
            dx[u(base + n)] = g[u(base + n)] - math.exp(y[u(base + n)]) * total
