"""Fused kernels for the transformer's hot paths: layer norm, RMS norm and causal self-attention, each
forward and backward in one pass over the data.

Composed from Tensor ops, a layer norm is ~8 kernels and as many full-size temporaries (mean, x - mean,
its square, ...), and attention is two batched matmuls, a mask, a softmax and four copies to move heads
around. Each kernel here reads its inputs once and writes its outputs once; the backward kernels use
what the forward saved (per-row mean and 1/std; the attention probabilities).

Shapes: norms work on rows, x (R, C) contiguous. Attention reads a (B, T, 3C) `qkv` buffer (the
q, k, v projections side by side, heads of size hs = C / nh inside each) and writes y (B, T, C): head
h of token t lands at y[b, t, h*hs:(h+1)*hs], which is already the layout the next linear layer wants.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad._jit import kernel, prange


# ---- linear: the bias add ------------------------------------------------------------------------------

@kernel(parallel=True, fastmath=True)
def add_rows(y, b):
    """y[r, :] += b for every row r of y (R, C): the bias of a linear layer, added in place."""
    for r in prange(y.shape[0]):
        for c in range(y.shape[1]):
            y[r, c] += b[c]


# ---- layer norm: y = (x - mean) / sqrt(var + eps) * w + b ----------------------------------------------

@kernel(parallel=True, fastmath=True, numpy_errors=True)
def layer_norm_forward(x, w, b, eps, y, mean, rstd):
    """x, y (R, C); w, b (C,); writes y and the per-row mean and rstd = 1 / sqrt(var + eps)."""
    R, C = x.shape
    for r in prange(R):
        m = 0.0
        for c in range(C):
            m += x[r, c]
        m /= C
        v = 0.0
        for c in range(C):
            d = x[r, c] - m
            v += d * d
        s = 1.0 / math.sqrt(v / C + eps)
        for c in range(C):
            y[r, c] = (x[r, c] - m) * s * w[c] + b[c]
        mean[r], rstd[r] = m, s


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def layer_norm_backward(x, w, mean, rstd, g, dx, dw_parts, db_parts):
    """With xhat = (x - mean) * rstd and gh = g * w (per row):
        dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
        dw = sum over rows of g * xhat,   db = sum over rows of g.
    Rows are split into one chunk per slot of dw_parts/db_parts (P, C) so threads never share a sum;
    the caller adds the P partial sums."""
    R, C = x.shape
    P = dw_parts.shape[0]
    for p in prange(P):
        dw_parts[p, :] = 0.0
        db_parts[p, :] = 0.0
        for r in range(p * R // P, (p + 1) * R // P):
            m, s = mean[r], rstd[r]
            a = 0.0  # mean of gh
            bsum = 0.0  # mean of gh * xhat
            for c in range(C):
                xh = (x[r, c] - m) * s
                gh = g[r, c] * w[c]
                a += gh
                bsum += gh * xh
                dw_parts[p, c] += g[r, c] * xh
                db_parts[p, c] += g[r, c]
            a /= C
            bsum /= C
            for c in range(C):
                xh = (x[r, c] - m) * s
                dx[r, c] = s * (g[r, c] * w[c] - a - xh * bsum)


# ---- RMS norm: y = x / sqrt(mean(x^2) + eps) * w -------------------------------------------------------

@kernel(parallel=True, fastmath=True, numpy_errors=True)
def rms_norm_forward(x, w, eps, y, rstd):
    R, C = x.shape
    for r in prange(R):
        ss = 0.0
        for c in range(C):
            ss += x[r, c] * x[r, c]
        s = 1.0 / math.sqrt(ss / C + eps)
        for c in range(C):
            y[r, c] = x[r, c] * s * w[c]
        rstd[r] = s


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def rms_norm_backward(x, w, rstd, g, dx, dw_parts):
    """With xhat = x * rstd and gh = g * w:  dx = rstd * (gh - xhat * mean(gh * xhat)),  dw = sum g * xhat."""
    R, C = x.shape
    P = dw_parts.shape[0]
    for p in prange(P):
        dw_parts[p, :] = 0.0
        for r in range(p * R // P, (p + 1) * R // P):
            s = rstd[r]
            bsum = 0.0
            for c in range(C):
                xh = x[r, c] * s
                bsum += g[r, c] * w[c] * xh
                dw_parts[p, c] += g[r, c] * xh
            bsum /= C
            for c in range(C):
                dx[r, c] = s * (g[r, c] * w[c] - x[r, c] * s * bsum)


# ---- causal self-attention -------------------------------------------------------------------------
# Each (batch, head) pair is independent, so pairs are shared among threads. A pair first copies its
# slices of q, k, v into small contiguous arrays (k also transposed), so every inner loop below runs
# along contiguous memory with no reduction in it, which the compiler turns into SIMD instructions.

@kernel
def _head(src, b, col, hs, dst, transpose):
    """dst <- src[b, :, col:col+hs], as (T, hs), or (hs, T) when `transpose`."""
    for t in range(src.shape[1]):
        for d in range(hs):
            if transpose:
                dst[d, t] = src[b, t, col + d]
            else:
                dst[t, d] = src[b, t, col + d]


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def attention_forward(qkv, nh, y, att):
    """qkv (B, T, 3C) -> y (B, T, C), att (B, nh, T, T) the probabilities (0 above the diagonal).
    For one (batch, head): S = q k^T / sqrt(hs) with S[i, j] = -inf for j > i, P = softmax(S) by rows, y = P v."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // nh
    scale = 1.0 / math.sqrt(hs)
    for bh in prange(B * nh):
        b, h = bh // nh, bh % nh
        q, kt, v = np.empty((T, hs), qkv.dtype), np.empty((hs, T), qkv.dtype), np.empty((T, hs), qkv.dtype)
        _head(qkv, b, h * hs, hs, q, False)
        _head(qkv, b, C + h * hs, hs, kt, True)
        _head(qkv, b, 2 * C + h * hs, hs, v, False)
        s = np.empty(T, qkv.dtype)
        acc = np.empty(hs, qkv.dtype)
        for i in range(T):
            n = i + 1  # keys 0..i are visible
            s[:n] = 0.0
            for d in range(hs):  # s[j] = q_i . k_j, accumulated along j
                qd = q[i, d] * scale
                for j in range(n):
                    s[j] += qd * kt[d, j]
            mx = s[0]
            for j in range(1, n):
                mx = max(mx, s[j])
            tot = 0.0
            for j in range(n):
                s[j] = math.exp(s[j] - mx)
                tot += s[j]
            inv = 1.0 / tot
            acc[:] = 0.0
            for j in range(n):  # y_i = sum_j p_ij v_j
                p = s[j] * inv
                att[b, h, i, j] = p
                for d in range(hs):
                    acc[d] += p * v[j, d]
            att[b, h, i, n:] = 0.0
            y[b, i, h * hs:(h + 1) * hs] = acc


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def attention_backward(qkv, att, g, dqkv):
    """g = dL/dy (B, T, C) -> dqkv (B, T, 3C). For one (batch, head), with P the saved probabilities:
        dP = g v^T,  dv = P^T g,  dS = P * (dP - rowsum(dP * P)),  dq = dS k / sqrt(hs),  dk = dS^T q / sqrt(hs)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    nh = att.shape[1]
    hs = C // nh
    scale = 1.0 / math.sqrt(hs)
    for bh in prange(B * nh):
        b, h = bh // nh, bh % nh
        q, k = np.empty((T, hs), qkv.dtype), np.empty((T, hs), qkv.dtype)
        vt, gh = np.empty((hs, T), qkv.dtype), np.empty((T, hs), qkv.dtype)
        _head(qkv, b, h * hs, hs, q, False)
        _head(qkv, b, C + h * hs, hs, k, False)
        _head(qkv, b, 2 * C + h * hs, hs, vt, True)
        _head(g, b, h * hs, hs, gh, False)
        dq, dk, dv = np.zeros((T, hs), qkv.dtype), np.zeros((T, hs), qkv.dtype), np.zeros((T, hs), qkv.dtype)
        dp = np.empty(T, qkv.dtype)
        for i in range(T):
            n = i + 1
            dp[:n] = 0.0
            for d in range(hs):  # dP[i, j] = g_i . v_j
                gd = gh[i, d]
                for j in range(n):
                    dp[j] += gd * vt[d, j]
            dot = 0.0
            for j in range(n):
                dot += dp[j] * att[b, h, i, j]
            for j in range(n):
                p = att[b, h, i, j]
                ds = p * (dp[j] - dot) * scale
                for d in range(hs):
                    dv[j, d] += p * gh[i, d]
                    dq[i, d] += ds * k[j, d]
                    dk[j, d] += ds * q[i, d]
        for t in range(T):
            dqkv[b, t, h * hs:(h + 1) * hs] = dq[t]
            dqkv[b, t, C + h * hs:C + (h + 1) * hs] = dk[t]
            dqkv[b, t, 2 * C + h * hs:2 * C + (h + 1) * hs] = dv[t]


# ---- GELU (tanh approximation) in float32, elementwise over contiguous data, on all cores --------------

@kernel(fastmath=True, numpy_errors=True)
def tanh32(x):
    """tanh by a rational approximation (Eigen's float32 one, max error 4e-7), which the compiler can
    vectorise, unlike a call to libm's tanh per element."""
    x = min(max(x, np.float32(-7.9053111)), np.float32(7.9053111))
    x2 = x * x
    p = np.float32(-2.76076847742355e-16)
    p = p * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    q = np.float32(1.19825839466702e-06)
    q = q * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    return x * p / q


K = np.float32(0.7978845608028654)  # sqrt(2 / pi)
BLOCK = 8192  # elements per task: enough to amortise scheduling, small enough to share out


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def gelu32_forward(x, out):
    """out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x and out flat float32."""
    n = x.size
    for c in prange((n + BLOCK - 1) // BLOCK):
        for i in range(c * BLOCK, min(n, (c + 1) * BLOCK)):
            v = x[i]
            out[i] = np.float32(0.5) * v * (np.float32(1.0) + tanh32(K * (v + np.float32(0.044715) * v * v * v)))


@kernel(parallel=True, fastmath=True, numpy_errors=True)
def gelu32_backward(x, g, out):
    """out = g * gelu'(x) = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))."""
    n = x.size
    for c in prange((n + BLOCK - 1) // BLOCK):
        for i in range(c * BLOCK, min(n, (c + 1) * BLOCK)):
            v = x[i]
            t = tanh32(K * (v + np.float32(0.044715) * v * v * v))
            out[i] = g[i] * (np.float32(0.5) * (np.float32(1.0) + t) + np.float32(0.5) * v * (np.float32(1.0) - t * t)
                             * K * (np.float32(1.0) + np.float32(3.0 * 0.044715) * v * v))
