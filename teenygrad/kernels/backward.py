"""Fused backward kernels: gradients that would take several passes if written with Tensor ops.

The backward rules in `teenygrad.autograd` are mostly one line of Tensor ops. A few are one kernel each,
because the op-by-op version would read and write the data several times (softmax backward is four
elementwise passes plus a reduction) or because there is no Tensor op for it (scatter-add).

scatter_add(g, idx, out, outer, n_src, n_idx, inner)      backward of gather
    g, idx: contiguous (outer, n_idx, inner); out: contiguous (outer, n_src, inner), zero-filled;
    out[o, idx[o, k, i], i] += g[o, k, i]      (`+=`: an index that repeats collects every gradient)
index_add(g, idx, out, outer, n_src, inner)               backward of index_select (embedding lookup)
    g: contiguous (outer, n_idx, inner); idx: int64 of length n_idx; out: (outer, n_src, inner), zeroed;
    out[o, idx[k], i] += g[o, k, i]
softmax_backward(y, g, M, N, dx)        y = softmax(x), rows of length N:  dx = y * (g - sum_n g*y)
log_softmax_backward(y, g, M, N, dx)    y = log_softmax(x):                dx = g - exp(y) * sum_n g
gelu_backward(shape, x, sx, ox, g, sg, og, out)   binary-kernel convention (see teenygrad.kernels):
    out = g * gelu'(x), the derivative of the tanh approximation used by the forward.
cross_entropy(x, t, lse, losses)        x: contiguous (R, C) logits, t: int64 (R,) classes;
    lse[r] = log sum_c exp(x[r, c]) (computed as max + log sum exp(x - max)), losses[r] = lse[r] - x[r, t[r]]
cross_entropy_backward(x, t, lse, scale, dx)
    dx[r, c] = (exp(x[r, c] - lse[r]) - [c == t[r]]) * scale       (softmax minus one-hot, in one pass)

Indices are checked (negative indices count from the end, as in the forward gather/index_select; class
targets must lie in [0, C)).
"""
from __future__ import annotations

import math

from teenygrad._jit import kernel
from teenygrad.kernels.elementwise import SQRT_2_OVER_PI, row_start, u
from teenygrad.kernels.movement import checked_index


@kernel
def scatter_add(g, idx, out, outer, n_src, n_idx, inner):
    for o in range(outer):
        for k in range(n_idx):
            row = (o * n_idx + k) * inner
            for i in range(inner):
                dst = checked_index(idx[row + i], n_src)
                out[u((o * n_src + dst) * inner + i)] += g[u(row + i)]


@kernel
def index_add(g, idx, out, outer, n_src, inner):
    n_idx = idx.shape[0]
    for o in range(outer):
        for k in range(n_idx):
            dst = (o * n_src + checked_index(idx[k], n_src)) * inner
            src = (o * n_idx + k) * inner
            for i in range(inner):
                out[u(dst + i)] += g[u(src + i)]


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


@kernel
def gelu_grad(x):
    """d/dx [0.5 x (1 + tanh(k (x + 0.044715 x^3)))] with k = sqrt(2/pi):
    0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), where t = tanh(k (x + 0.044715 x^3))."""
    t = math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x)


@kernel
def gelu_backward(shape, x, x_strides, x_offset, g, g_strides, g_offset, out):
    n, sx, sg = shape[-1], x_strides[-1], g_strides[-1]
    for r in range(out.size // n):
        ix, ig = row_start(r, shape, x_strides, x_offset), row_start(r, shape, g_strides, g_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = g[u(ig + j * sg)] * gelu_grad(x[u(ix + j * sx)])


@kernel
def class_index(k, C):
    if k < 0 or k >= C:
        raise IndexError("cross_entropy: target class out of range")
    return k


@kernel
def cross_entropy(x, t, lse, losses):
    R = t.shape[0]
    C = x.shape[0] // R
    for r in range(R):
        base = r * C
        c = x[u(base)]
        for j in range(1, C):
            v = x[u(base + j)]
            c = v if v > c else c
        total = 0.0
        for j in range(C):
            total += math.exp(x[u(base + j)] - c)  # every exponent <= 0: no overflow; the max term is 1
        lse[r] = c + math.log(total)
        losses[r] = lse[r] - x[u(base + class_index(t[r], C))]


@kernel
def cross_entropy_backward(x, t, lse, scale, dx):
    R = t.shape[0]
    C = x.shape[0] // R
    for r in range(R):
        base = r * C
        for j in range(C):
            dx[u(base + j)] = math.exp(x[u(base + j)] - lse[r]) * scale
        dx[u(base + class_index(t[r], C))] -= scale


KERNELS = {"scatter_add": scatter_add, "index_add": index_add, "softmax_backward": softmax_backward,
           "log_softmax_backward": log_softmax_backward, "gelu_backward": gelu_backward,
           "cross_entropy": cross_entropy, "cross_entropy_backward": cross_entropy_backward}
