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


# ---- layer norm: y = (x - mean) / sqrt(var + eps) * w + b ----------------------------------------------

@kernel(parallel=True, fastmath=True)
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


@kernel(parallel=True, fastmath=True)
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

@kernel(parallel=True, fastmath=True)
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


@kernel(parallel=True, fastmath=True)
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

@kernel(parallel=True, fastmath=True)
def attention_forward(qkv, nh, y, att):
    """qkv (B, T, 3C) -> y (B, T, C), att (B, nh, T, T) the probabilities (0 above the diagonal).

    For one (batch, head): S = q k^T / sqrt(hs), S[i, j] = -inf for j > i, P = softmax(S) row-wise,
    y = P v. Each (b, h) is independent: they are shared among threads."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // nh
    scale = 1.0 / math.sqrt(hs)
    for bh in prange(B * nh):
        b, h = bh // nh, bh % nh
        kt = np.empty((hs, T), qkv.dtype)  # k transposed: the score loop then runs along contiguous j
        for j in range(T):
            for d in range(hs):
                kt[d, j] = qkv[b, j, C + h * hs + d]
        s = np.empty(T, qkv.dtype)
        acc = np.empty(hs, qkv.dtype)
        for i in range(T):
            n = i + 1  # keys 0..i are visible
            s[:n] = 0.0
            for d in range(hs):
                qd = qkv[b, i, h * hs + d] * scale
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
            for j in range(n):
                p = s[j] * inv
                att[b, h, i, j] = p
                for d in range(hs):
                    acc[d] += p * qkv[b, j, 2 * C + h * hs + d]
            att[b, h, i, n:] = 0.0
            for d in range(hs):
                y[b, i, h * hs + d] = acc[d]


@kernel(parallel=True, fastmath=True)
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
        q0, k0, v0 = h * hs, C + h * hs, 2 * C + h * hs
        dk = np.zeros((T, hs), qkv.dtype)
        dv = np.zeros((T, hs), qkv.dtype)
        ds = np.empty(T, qkv.dtype)
        dq = np.empty(hs, qkv.dtype)
        for i in range(T):
            n = i + 1
            dot = 0.0  # rowsum(dP * P)
            for j in range(n):
                dp = 0.0
                for d in range(hs):
                    dp += g[b, i, q0 + d] * qkv[b, j, v0 + d]
                ds[j] = dp
                dot += dp * att[b, h, i, j]
            dq[:] = 0.0
            for j in range(n):
                p = att[b, h, i, j]
                dsj = p * (ds[j] - dot) * scale
                for d in range(hs):
                    dv[j, d] += p * g[b, i, q0 + d]
                    dq[d] += dsj * qkv[b, j, k0 + d]
                    dk[j, d] += dsj * qkv[b, i, q0 + d]
            for d in range(hs):
                dqkv[b, i, q0 + d] = dq[d]
        for j in range(T):
            for d in range(hs):
                dqkv[b, j, k0 + d] = dk[j, d]
                dqkv[b, j, v0 + d] = dv[j, d]
