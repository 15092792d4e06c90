"""The transformer's fused ops (chapter 9): linear, layer norm, RMS norm and causal self-attention, each one
kernel forward and one backward (`teenygrad.kernels.fused`), their gradient rules beside them.

Composed from Tensor ops, a layer norm is ~8 kernels and as many full-size temporaries, attention a dozen
nodes per layer; fused, each reads its inputs once and writes its outputs once, and its backward uses what the
forward saved (per-row mean and 1/std; the attention probabilities). `teenygrad.functional` exposes them as
`F.linear`, `F.layer_norm`, ...; `F.unfused` swaps in the composed versions, so chapter 9 can measure what
each fusion buys. Linear's backward rule is exercise 7's piece; layer norm's and RMS norm's backward, attention's
backward and the KV-cached attention are exercise 9's: their kernels are defined inside them.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad import autograd, devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.kernels.fused import fast, parallel
from teenygrad.kernels.jit import CHUNKS, parallel_pays, prange
from teenygrad.kernels.matmul import matmul_tiled_into, tiled_buffers
from teenygrad.ops.buffers import array, as_float, contiguous, detached, new
from teenygrad.ops.matmul import matmul, matmul_bias
from teenygrad.tensor import Tensor, float32, ones, zeros


def _rows(x: Tensor) -> tuple[Tensor, np.ndarray]:
    """x as a contiguous (rows, last dim) tensor and the numpy view the kernels take."""
    x2 = contiguous(x).reshape(-1, x.shape[-1])
    return x2, array(x2)


def _param(t: Tensor | None, n: int, fill: float, like: Tensor, name: str) -> Tensor:
    """A norm's weight or bias: given (shape (n,), cast to like's dtype) or the identity (ones, zeros)."""
    if t is None:
        return (ones if fill else zeros)(n, dtype=like.dtype, device=like.device)
    if t.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) for a last dim of {n}, got {t.shape}")
    return t if t.dtype == like.dtype else t.to(like.dtype)


_COMPILED: dict[str, object] = {}  # the kernels of exercise 9's pieces below, compiled on their first call


# ---- linear: y = x W^T + b ---------------------------------------------------------------------------------

def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b.  x (..., in), weight (out, in), bias (out,) -> (..., out).

    One op with one backward rule rather than three (transpose, matmul, broadcast add):
        dx = g W,   dW = g^T x (summed over all rows),   db = g summed over all rows."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.linear(x, weight, bias)
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input has {x.shape[-1]} features but weight {weight.shape} "
                         f"expects {weight.shape[1]}")
    if bias is None:
        out = matmul(detached(x), detached(weight).T)  # W^T is a strided view: no copy
    else:
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
        devices.same("linear", x, weight, bias)
        out = matmul_bias(detached(x), detached(weight).T, detached(bias))  # on a GPU one launch, bias included
    inputs = (x, weight) if bias is None else (x, weight, bias)
    if any(t._requires_grad for t in inputs):
        autograd.record("linear", out, inputs, x=x.detach(), w=weight.detach())
    return out


@exercise("07-neural-nets", "linear")
def linear_backward(ctx: autograd.Node, g: Tensor) -> tuple:
    """The backward rule of the op "linear", y = x W^T + b: g is dL/dy (..., out). ctx.x (..., in) and ctx.w (out, in)
    are what the forward saved; ctx.inputs is (x, weight) or (x, weight, bias), and ctx.needs[i] says whether
    input i wants a gradient (else its entry is None or False). Returns (dx shaped like x, dW (out, in)), with
    db (out,) third when there is a bias: dx = g W, dW = g^T x and db = g, summed over every leading dim."""
    x, w = ctx.x, ctx.w
    g2 = g.reshape(-1, g.shape[-1])
    dx = ctx.needs[0] and g @ w                                             # (..., out) @ (out, in)
    dw = ctx.needs[1] and g2.T @ x.reshape(-1, x.shape[-1])                 # (out, rows) @ (rows, in)
    if len(ctx.inputs) == 2:
        return dx, dw
    return dx, dw, ctx.needs[2] and g2.sum(0)                               # (out,)


# ---- layer norm: y = (x - mean) / sqrt(var + eps) * w + b, over the last dim -----------------------------------

def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise the last dim to mean 0, variance 1, then scale and shift (one fused kernel each way):
    y = (x - mean) / sqrt(var + eps) * weight + bias   (var is the biased variance, as in PyTorch)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.layer_norm(x, weight, bias, eps)
    x = as_float(x)
    C = x.shape[-1]
    w, b = _param(weight, C, 1.0, x, "layer_norm weight"), _param(bias, C, 0.0, x, "layer_norm bias")
    device = devices.same("layer_norm", x, w, b)
    x2, xa = _rows(detached(x))
    out = new(x2.shape, x.dtype, device)
    mean, rstd = new((x2.shape[0],), x.dtype, device), new((x2.shape[0],), x.dtype, device)
    on(device)["layer_norm"](xa, array(contiguous(detached(w))), array(contiguous(detached(b))), eps, array(out),
                          array(mean), array(rstd))
    out = out.reshape(x.shape)
    if x._requires_grad or w._requires_grad or b._requires_grad:
        autograd.record("layer_norm", out, (x, w, b), x=x2, w=w.detach(), mean=mean, rstd=rstd)
    return out


@exercise("09-gpt", "layer_norm_backward")
def layer_norm_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The backward rule of the op "layer_norm", y = (x - mean) / sqrt(var + eps) * w + b over the last dim.

    g: dL/dy, shaped like the input x (..., C). ctx holds what the forward saved: ctx.x, x as a contiguous
    (R, C) tensor of its rows; ctx.w, the weight (C,) (ones when the norm has none); ctx.mean and ctx.rstd (R,),
    each row's mean and 1 / sqrt(var + eps); ctx.inputs, the op's inputs (x, weight, bias). Returns (dx shaped
    like the input x, dw of shape (C,), db of shape (C,)), in g's dtype."""
    run = _COMPILED.get("layer_norm_backward")
    if run is None:  # the kernels are defined here, so nothing else in the package computes this piece
        @fast
        def layer_norm_backward_serial(x, w, mean, rstd, g, dx, dw, db, lo, hi):
            """Rows lo..hi. With xhat = (x - mean) rstd and gh = g w (per row):
            dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), dw += sum of g xhat, db += sum of g."""
            C = x.shape[1]
            for r in range(lo, hi):
                m, s = mean[r], rstd[r]
                a = 0.0  # sum of gh
                bsum = 0.0  # sum of gh * xhat
                for c in range(C):
                    xh = (x[r, c] - m) * s
                    gh = g[r, c] * w[c]
                    a += gh
                    bsum += gh * xh
                    dw[c] += g[r, c] * xh
                    db[c] += g[r, c]
                a /= C
                bsum /= C
                for c in range(C):
                    dx[r, c] = s * (g[r, c] * w[c] - a - (x[r, c] - m) * s * bsum)

        @parallel
        def layer_norm_backward_parallel(x, w, mean, rstd, g, dx, dw, db):
            """Each chunk of rows adds into its own row of partial sums, so no two threads ever add into the
            same place; after the parallel loop, one thread adds the partial sums into dw, db."""
            R, C = x.shape
            dw_parts, db_parts = np.zeros((CHUNKS, C), dw.dtype), np.zeros((CHUNKS, C), db.dtype)
            for k in prange(CHUNKS):
                lo, hi = k * R // CHUNKS, (k + 1) * R // CHUNKS
                layer_norm_backward_serial(x, w, mean, rstd, g, dx, dw_parts[k], db_parts[k], lo, hi)
            for k in range(CHUNKS):
                for c in range(C):
                    dw[c] += dw_parts[k, c]
                    db[c] += db_parts[k, c]

        def launch(x, w, mean, rstd, g, dx, dw, db):
            if parallel_pays(g.size):
                layer_norm_backward_parallel(x, w, mean, rstd, g, dx, dw, db)
            else:
                layer_norm_backward_serial(x, w, mean, rstd, g, dx, dw, db, 0, x.shape[0])
        run = _COMPILED["layer_norm_backward"] = launch
    g2, ga = _rows(g)
    dx = new(g2.shape, g.dtype)
    dw, db = zeros(g2.shape[1], dtype=g.dtype), zeros(g2.shape[1], dtype=g.dtype)
    run(array(ctx.x), array(ctx.w), array(ctx.mean), array(ctx.rstd), ga, array(dx), array(dw), array(db))
    return dx.reshape(ctx.inputs[0].shape), dw, db


# ---- RMS norm: y = x / sqrt(mean(x^2) + eps) * w ------------------------------------------------------------

def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (no centring, no bias), fused."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.rms_norm(x, weight, eps)
    x = as_float(x)
    w = _param(weight, x.shape[-1], 1.0, x, "rms_norm weight")
    device = devices.same("rms_norm", x, w)
    x2, xa = _rows(detached(x))
    out, rstd = new(x2.shape, x.dtype, device), new((x2.shape[0],), x.dtype, device)
    on(device)["rms_norm"](xa, array(contiguous(detached(w))), eps, array(out), array(rstd))
    out = out.reshape(x.shape)
    if x._requires_grad or w._requires_grad:
        autograd.record("rms_norm", out, (x, w), x=x2, w=w.detach(), rstd=rstd)
    return out


@exercise("09-gpt", "rms_norm_backward")
def rms_norm_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor]:
    """The backward rule of the op "rms_norm", y = x / sqrt(mean(x^2) + eps) * w over the last dim.

    g: dL/dy, shaped like the input x (..., C). ctx holds what the forward saved: ctx.x, x as a contiguous
    (R, C) tensor of its rows; ctx.w, the weight (C,) (ones when the norm has none); ctx.rstd (R,), each row's
    1 / sqrt(mean(x^2) + eps); ctx.inputs, the op's inputs (x, weight). Returns (dx shaped like the input x,
    dw of shape (C,)), in g's dtype."""
    run = _COMPILED.get("rms_norm_backward")
    if run is None:  # the kernels are defined here, so nothing else in the package computes this piece
        @fast
        def rms_norm_backward_serial(x, w, rstd, g, dx, dw, lo, hi):
            """Rows lo..hi. With xhat = x rstd and gh = g w: dx = rstd (gh - xhat mean(gh xhat)), dw += sum g xhat."""
            C = x.shape[1]
            for r in range(lo, hi):
                s = rstd[r]
                bsum = 0.0
                for c in range(C):
                    xh = x[r, c] * s
                    bsum += g[r, c] * w[c] * xh
                    dw[c] += g[r, c] * xh
                bsum /= C
                for c in range(C):
                    dx[r, c] = s * (g[r, c] * w[c] - x[r, c] * s * bsum)

        @parallel
        def rms_norm_backward_parallel(x, w, rstd, g, dx, dw):
            """Partial sums of dw per chunk of rows, added up at the end (as in layer norm's backward)."""
            R, C = x.shape
            dw_parts = np.zeros((CHUNKS, C), dw.dtype)
            for k in prange(CHUNKS):
                rms_norm_backward_serial(x, w, rstd, g, dx, dw_parts[k], k * R // CHUNKS, (k + 1) * R // CHUNKS)
            for k in range(CHUNKS):
                for c in range(C):
                    dw[c] += dw_parts[k, c]

        def launch(x, w, rstd, g, dx, dw):
            if parallel_pays(g.size):
                rms_norm_backward_parallel(x, w, rstd, g, dx, dw)
            else:
                rms_norm_backward_serial(x, w, rstd, g, dx, dw, 0, x.shape[0])
        run = _COMPILED["rms_norm_backward"] = launch
    g2, ga = _rows(g)
    dx, dw = new(g2.shape, g.dtype), zeros(g2.shape[1], dtype=g.dtype)
    run(array(ctx.x), array(ctx.w), array(ctx.rstd), ga, array(dx), array(dw))
    return dx.reshape(ctx.inputs[0].shape), dw


# ---- causal self-attention -------------------------------------------------------------------------------------

def causal_self_attention(qkv: Tensor, n_head: int) -> Tensor:
    """Multi-head causal self-attention, fused: qkv (B, T, 3C), the q, k, v projections side by side
    -> y (B, T, C), the heads' outputs side by side. Per head h (columns h*hs:(h+1)*hs of q, k, v):
    y_h = softmax(q_h k_h^T / sqrt(hs) + causal mask) v_h. The same as splitting the heads out and
    calling `F.causal_attention`, without the copies; the probabilities are kept for backward."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.causal_self_attention(qkv, n_head)
    B, T, C3 = qkv.shape
    if C3 % (3 * n_head):
        raise ValueError(f"causal_self_attention: last dim {C3} must be 3 * n_head * head_size (n_head={n_head})")
    qkv_in, qkv = qkv, contiguous(detached(qkv))
    y, att = new((B, T, C3 // 3), qkv.dtype, qkv.device), new((B, n_head, T, T), qkv.dtype, qkv.device)
    on(qkv.device)["attention"](array(qkv), n_head, array(y), array(att))
    if qkv_in._requires_grad:
        autograd.record("attention", y, (qkv_in,), qkv=qkv, att=att)
    return y


@exercise("09-gpt", "attention_backward")
def attention_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """The backward rule of the op "attention" (`causal_self_attention`): from g = dL/dy (B, T, C) to
    (dL/dqkv,), one tensor (B, T, 3C) in g's dtype. ctx holds what the forward saved: ctx.qkv, the
    contiguous input (B, T, 3C) (q, k, v side by side, head h in columns h*hs:(h+1)*hs of each), and ctx.att,
    the probabilities P (B, n_head, T, T) of every head (0 above the diagonal); hs = C / n_head."""
    run = _COMPILED.get("attention_backward")
    if run is None:  # the kernels are defined here, so nothing else in the package computes this piece
        @fast
        def softmax_causal_backward(p, dp, scale):
            """dp <- scale * p * (dp - rowsum(dp * p)) in place (0 above the diagonal): from dL/dP to dL/dS."""
            T = p.shape[0]
            for i in range(T):
                prow, drow = p[i, :i + 1], dp[i]
                dot = 0.0
                for j in range(prow.size):
                    dot += drow[j] * prow[j]
                for j in range(prow.size):
                    drow[j] = scale * prow[j] * (drow[j] - dot)
                for j in range(i + 1, T):
                    drow[j] = 0

        @fast
        def attention_backward_serial(qkv, att, g, dqkv, lo, hi):
            """Pairs bh = b * nh + h in lo..hi. With P the saved probabilities: dP = g v^T, dv = P^T g,
            dS = P * (dP - rowsum(dP * P)) / sqrt(hs), dq = dS k, dk = dS^T q."""
            B, T, C3 = qkv.shape
            C = C3 // 3
            nh = att.shape[1]
            hs = C // nh
            ds = np.empty((T, T), qkv.dtype)
            bp, edge = tiled_buffers(ds, max(T, hs), max(T, hs))
            for bh in range(lo, hi):
                b, h = bh // nh, bh % nh
                x, dx, p = qkv[b], dqkv[b], att[b, h]
                gh = g[b, :, h * hs:(h + 1) * hs]                                  # (T, hs)
                qc, kc, vc = h * hs, C + h * hs, 2 * C + h * hs                    # the head's first columns
                matmul_tiled_into(gh, x[:, vc:vc + hs].T, ds, bp, edge, 1)               # dP = g v^T
                matmul_tiled_into(p.T, gh, dx[:, vc:vc + hs], bp, edge, 3)               # dv = P^T g
                softmax_causal_backward(p, ds, 1.0 / math.sqrt(hs))                      # dS, in place
                matmul_tiled_into(ds, x[:, kc:kc + hs], dx[:, qc:qc + hs], bp, edge, 2)   # dq = dS k
                matmul_tiled_into(ds.T, x[:, qc:qc + hs], dx[:, kc:kc + hs], bp, edge, 3) # dk = dS^T q

        @parallel
        def attention_backward_parallel(qkv, att, g, dqkv):
            pairs = qkv.shape[0] * att.shape[1]
            for k in prange(CHUNKS):
                attention_backward_serial(qkv, att, g, dqkv, k * pairs // CHUNKS, (k + 1) * pairs // CHUNKS)

        def launch(qkv, att, g, dqkv):
            B, T, C3 = qkv.shape  # twice the forward's products
            if parallel_pays(B * T * T * C3 // 3):
                attention_backward_parallel(qkv, att, g, dqkv)
            else:
                attention_backward_serial(qkv, att, g, dqkv, 0, B * att.shape[1])
        run = _COMPILED["attention_backward"] = launch
    dqkv = new(ctx.qkv.shape, g.dtype)
    run(array(ctx.qkv), array(ctx.att), array(contiguous(g)), array(dqkv))
    return (dqkv,)


@exercise("09-gpt", "cached_attention")
def cached_attention(qkv: Tensor, k_cache: np.ndarray, v_cache: np.ndarray, start: int, n_head: int) -> Tensor:
    """Causal self-attention of T new positions start..start+T-1 against a KV cache, for generation (no
    gradient): qkv (B, T, 3C) -> a new float32 Tensor (B, T, C). The new keys and values are written into k_cache,
    v_cache (numpy float32 arrays (B, n_head, block_size, hs), changed in place) at their positions; each query
    sees the positions up to its own. RuntimeError if qkv requires grad while recording is on; ValueError if
    start + T exceeds the cache's block_size."""
    if qkv._requires_grad and autograd.grad_enabled:
        raise RuntimeError("cached_attention: generation only; run it under teenygrad.no_grad()")
    B, T, C3 = qkv.shape
    if start + T > k_cache.shape[2]:
        raise ValueError(f"cached_attention: positions up to {start + T} but the cache holds {k_cache.shape[2]}")
    run = _COMPILED.get("cached_attention")
    if run is None:  # the kernel is defined here, so nothing else in the package computes this piece
        @fast
        def attention_cached(qkv, kc, vc, start, nh, y):
            """Write the T new keys and values into kc, vc at start..start+T-1, then let the query of
            position p attend to the cached keys and values of positions 0..p."""
            B, T, C3 = qkv.shape
            C = C3 // 3
            hs = C // nh
            scale = 1.0 / math.sqrt(hs)
            s = np.empty(start + T, qkv.dtype)
            for b in range(B):
                for h in range(nh):
                    for t in range(T):
                        for d in range(hs):
                            kc[b, h, start + t, d] = qkv[b, t, C + h * hs + d]
                            vc[b, h, start + t, d] = qkv[b, t, 2 * C + h * hs + d]
                    keys, values = kc[b, h], vc[b, h]
                    for t in range(T):
                        n = start + t + 1  # positions 0..start+t are visible
                        y_row = y[b, t]
                        mx = -np.inf
                        for j in range(n):
                            acc = 0.0
                            for d in range(hs):
                                acc += qkv[b, t, h * hs + d] * keys[j, d]
                            s[j] = acc * scale
                            mx = max(mx, s[j])
                        tot = 0.0
                        for j in range(n):
                            s[j] = math.exp(s[j] - mx)
                            tot += s[j]
                        for d in range(hs):
                            y_row[h * hs + d] = 0.0
                        for j in range(n):
                            p = s[j] / tot
                            for d in range(hs):
                                y_row[h * hs + d] += p * values[j, d]
        run = _COMPILED["cached_attention"] = attention_cached
    qkv = contiguous(detached(qkv), float32)
    y = new((B, T, C3 // 3), qkv.dtype)
    run(array(qkv), k_cache, v_cache, start, n_head, array(y))
    return y


# ---- the rules on the GPU: the pieces above define their CPU kernels inside them; on another device the same
# launch runs that device's kernel of the piece's name, with the arguments the piece's kernel takes

def _layer_norm_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    if g.device == "cpu":
        return layer_norm_backward(ctx, g)
    g2, ga = _rows(g)
    C = g2.shape[1]  # dw and db: written by the device's kernel (the CPU piece's kernel adds into zeros instead)
    dx, dw, db = new(g2.shape, g.dtype, g.device), new((C,), g.dtype, g.device), new((C,), g.dtype, g.device)
    on(g.device)["layer_norm_backward"](array(ctx.x), array(ctx.w), array(ctx.mean), array(ctx.rstd), ga, array(dx),
                                        array(dw), array(db))
    return dx.reshape(ctx.inputs[0].shape), dw, db


def _rms_norm_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor]:
    if g.device == "cpu":
        return rms_norm_backward(ctx, g)
    g2, ga = _rows(g)
    dx, dw = new(g2.shape, g.dtype, g.device), new((g2.shape[1],), g.dtype, g.device)  # both written by the kernel
    on(g.device)["rms_norm_backward"](array(ctx.x), array(ctx.w), array(ctx.rstd), ga, array(dx), array(dw))
    return dx.reshape(ctx.inputs[0].shape), dw


def _attention_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    if g.device == "cpu":
        return attention_backward(ctx, g)
    dqkv = new(ctx.qkv.shape, g.dtype, g.device)
    on(g.device)["attention_backward"](array(ctx.qkv), array(ctx.att), array(contiguous(g)), array(dqkv))
    return (dqkv,)


RULES = {
    "linear": linear_backward,             # dx = g W, dW = g^T x, db = sum of g
    "layer_norm": _layer_norm_rule,        # one kernel: dx, dw, db (on the CPU a piece of exercise 9)
    "rms_norm": _rms_norm_rule,            # one kernel: dx, dw (on the CPU a piece of exercise 9)
    "attention": _attention_rule,          # one kernel: dqkv (on the CPU a piece of exercise 9)
}
