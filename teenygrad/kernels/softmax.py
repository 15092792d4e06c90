"""Softmax and log-softmax (chapter 4) along the last axis of an (M, N) strided matrix.

    softmax(x)_n     = exp(x_n - c) / sum_k exp(x_k - c)
    log_softmax(x)_n = (x_n - c) - log(sum_k exp(x_k - c))
with c = max_k x_k. Subtracting the max changes nothing mathematically (it cancels) but keeps every
exponent <= 0, so exp never overflows, and the largest term is exp(0) = 1, so the sum never underflows
to 0 (the log stays finite).

Calling convention (both forward kernels, `KERNELS["softmax"]` and `KERNELS["log_softmax"]`):
    fn(x, x_offset, M, sm, N, sn, out)   element (m, n) is x[x_offset + m*sm + n*sn];
                                         out: contiguous (M*N,), row-major, out[m*N + n].

The backward kernels take the forward's output y and g = dL/dy, both contiguous (M, N), and write dx:
    softmax_backward(y, g, M, N, dx)        dx = y * (g - sum_n g*y)
    log_softmax_backward(y, g, M, N, dx)    dx = g - exp(y) * sum_n g

All three are exercise 4's pieces (`softmax_rows` behind both forwards, and the two backwards): their loops are
compiled inside them on the first call, so nothing else in the package computes a softmax.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.elementwise import u  # unsigned indices let numba vectorize
from teenygrad.kernels.jit import kernel, parallel_pays, prange

_COMPILED: dict[str, Callable] = {}  # each piece's loops, compiled on its first call


@exercise("04-classification", "softmax")
def softmax_rows(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray,
                 log: bool) -> None:
    """Row m of the (M, N) strided view of `x` (element (m, n) at x[x_offset + m*sm + n*sn]) goes to
    out[m*N : (m+1)*N], out contiguous: its softmax, or its log-softmax when `log`. M, N >= 1.

    Stable: each row's max is subtracted before exp, so no exponent is positive (logits of 1e30 are fine, and a
    -inf entry gives probability 0, log-probability -inf). Rows are independent, so a large call (the logits of a
    language model: rows = batch*time, N = vocabulary) splits them across cores when `parallel_pays`; each row
    writes only its own slice of `out`, so there are no races."""
    run = _COMPILED.get("softmax")
    if run is None:
        @kernel
        def row(x, base, N, sn, out, o, log):
            c = x[u(base)]  # the row's max: one pass
            for n in range(1, N):
                v = x[u(base + n * sn)]
                if v > c:
                    c = v
            total = 0.0  # the sum of the shifted exps, each <= 1; the max's is exactly 1, so total >= 1
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
        def serial(x, x_offset, M, sm, N, sn, out, log):
            for m in range(M):
                row(x, x_offset + m * sm, N, sn, out, m * N, log)

        @kernel(parallel=True)
        def parallel(x, x_offset, M, sm, N, sn, out, log):
            for m in prange(M):
                row(x, x_offset + m * sm, N, sn, out, m * N, log)

        def run(x, x_offset, M, sm, N, sn, out, log):
            go = parallel if M > 1 and parallel_pays(M * N) else serial
            go(x, x_offset, M, sm, N, sn, out, log)
        _COMPILED["softmax"] = run
    run(x, x_offset, M, sm, N, sn, out, log)


def softmax(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray) -> None:
    if M and N:
        softmax_rows(x, x_offset, M, sm, N, sn, out, False)


def log_softmax(x: np.ndarray, x_offset: int, M: int, sm: int, N: int, sn: int, out: np.ndarray) -> None:
    if M and N:
        softmax_rows(x, x_offset, M, sm, N, sn, out, True)


@exercise("04-classification", "softmax")
def softmax_backward(y: np.ndarray, g: np.ndarray, M: int, N: int, dx: np.ndarray) -> None:
    """dx = dL/dx for y = softmax(x) row by row, from y and g = dL/dy, all three contiguous (M*N,):
    dx[m, k] = y[m, k] * (g[m, k] - sum_n g[m, n] y[m, n])."""
    run = _COMPILED.get("softmax_backward")
    if run is None:
        # y_n = e^{x_n} / Z, so dy_n/dx_k = y_n (1[n=k] - y_k): dx_k = sum_n g_n dy_n/dx_k = y_k (g_k - sum_n g_n y_n)
        @kernel
        def run(y, g, M, N, dx):
            for m in range(M):
                base = m * N
                dot = 0.0
                for n in range(N):
                    dot += g[u(base + n)] * y[u(base + n)]
                for n in range(N):
                    dx[u(base + n)] = y[u(base + n)] * (g[u(base + n)] - dot)
        _COMPILED["softmax_backward"] = run
    run(y, g, M, N, dx)


@exercise("04-classification", "softmax")
def log_softmax_backward(y: np.ndarray, g: np.ndarray, M: int, N: int, dx: np.ndarray) -> None:
    """dx = dL/dx for y = log_softmax(x) row by row, from y and g = dL/dy, all three contiguous (M*N,):
    dx[m, k] = g[m, k] - exp(y[m, k]) * sum_n g[m, n] (exp(y) is the softmax)."""
    run = _COMPILED.get("log_softmax_backward")
    if run is None:
        # y_n = x_n - log Z, so dy_n/dx_k = 1[n=k] - softmax_k: dx_k = g_k - softmax_k sum_n g_n
        @kernel
        def run(y, g, M, N, dx):
            for m in range(M):
                base = m * N
                total = 0.0
                for n in range(N):
                    total += g[u(base + n)]
                for n in range(N):
                    dx[u(base + n)] = g[u(base + n)] - math.exp(y[u(base + n)]) * total
        _COMPILED["log_softmax_backward"] = run
    run(y, g, M, N, dx)
