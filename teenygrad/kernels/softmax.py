"""Softmax and log-softmax along the last axis of an (M, N) strided matrix.

    softmax(x)_n     = exp(x_n - c) / sum_k exp(x_k - c)
    log_softmax(x)_n = (x_n - c) - log(sum_k exp(x_k - c))
with c = max_k x_k. Subtracting the max changes nothing mathematically (it cancels) but keeps every
exponent <= 0, so exp never overflows, and the largest term is exp(0) = 1, so the sum never underflows
to 0 (the log stays finite).

Calling convention (both kernels):
    fn(x, x_offset, M, sm, N, sn, out)   element (m, n) is x[x_offset + m*sm + n*sn];
                                         out: contiguous (M*N,), row-major, out[m*N + n].

Rows are independent, so for large inputs (the logits of a language model: rows = batch*time,
N = vocabulary) the rows are split across cores with prange. Each row writes only its own slice of
`out`, so there are no races. Small inputs stay serial: starting the thread pool costs microseconds.
"""
from __future__ import annotations

import math

from teenygrad._jit import kernel, prange
from teenygrad.kernels.elementwise import u  # unsigned indices let numba vectorize

PARALLEL_MIN_ELEMENTS = 1 << 16


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
    run = softmax_parallel if M > 1 and M * N >= PARALLEL_MIN_ELEMENTS else softmax_serial
    run(x, x_offset, M, sm, N, sn, out, False)


def log_softmax(x, x_offset: int, M: int, sm: int, N: int, sn: int, out) -> None:
    if N == 0:
        return
    run = softmax_parallel if M > 1 and M * N >= PARALLEL_MIN_ELEMENTS else softmax_serial
    run(x, x_offset, M, sm, N, sn, out, True)
