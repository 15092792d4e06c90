"""The transformer's fused ops (chapter 9): linear, layer norm, RMS norm and causal self-attention, each one
kernel forward and one backward (`teenygrad.kernels.fused`), their gradient rules beside them.

Composed from Tensor ops, a layer norm is ~8 kernels and as many full-size temporaries, attention a dozen
nodes per layer; fused, each reads its inputs once and writes its outputs once, and its backward uses what the
forward saved (per-row mean and 1/std; the attention probabilities). `teenygrad.functional` exposes them as
`F.linear`, `F.layer_norm`, ...; `F.unfused` swaps in the composed versions, so chapter 9 can measure what
each fusion buys.
"""
from __future__ import annotations

import numpy as np

from teenygrad import autograd
from teenygrad.kernels import KERNELS
from teenygrad.ops.buffers import array, as_float, contiguous, detached, new
from teenygrad.ops.matmul import matmul
from teenygrad.tensor import Tensor, float32, ones, zeros


def _rows(x: Tensor) -> tuple[Tensor, np.ndarray]:
    """x as a contiguous (rows, last dim) tensor and the numpy view the kernels take."""
    x2 = contiguous(x).reshape(-1, x.shape[-1])
    return x2, array(x2)


def _param(t: Tensor | None, n: int, fill: float, like: Tensor, name: str) -> Tensor:
    """A norm's weight or bias: given (shape (n,), cast to like's dtype) or the identity (ones, zeros)."""
    if t is None:
        return (ones if fill else zeros)(n, dtype=like.dtype)
    if t.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) for a last dim of {n}, got {t.shape}")
    return t if t.dtype == like.dtype else t.to(like.dtype)


# ---- linear: y = x W^T + b ---------------------------------------------------------------------------------

def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b.  x (..., in), weight (out, in), bias (out,) -> (..., out).

    One op with one backward rule rather than three (transpose, matmul, broadcast add):
        dx = g W,   dW = g^T x (summed over all rows),   db = g summed over all rows."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input has {x.shape[-1]} features but weight {weight.shape} "
                         f"expects {weight.shape[1]}")
    out = matmul(detached(x), detached(weight).T)  # W^T is a strided view: no copy
    if bias is not None:
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
        KERNELS["add_bias"](array(out).reshape(-1, out.shape[-1]), array(contiguous(detached(bias), out.dtype)))
    inputs = (x, weight) if bias is None else (x, weight, bias)
    if any(t._requires_grad for t in inputs):
        autograd.record("linear", out, inputs, x=x.detach(), w=weight.detach())
    return out


def _linear_backward(ctx: autograd.Node, g: Tensor) -> tuple:
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
    x = as_float(x)
    C = x.shape[-1]
    w, b = _param(weight, C, 1.0, x, "layer_norm weight"), _param(bias, C, 0.0, x, "layer_norm bias")
    x2, xa = _rows(detached(x))
    out = new(x2.shape, x.dtype)
    mean, rstd = new((x2.shape[0],), x.dtype), new((x2.shape[0],), x.dtype)
    KERNELS["layer_norm"](xa, array(contiguous(detached(w))), array(contiguous(detached(b))), eps, array(out),
                          array(mean), array(rstd))
    out = out.reshape(x.shape)
    if x._requires_grad or w._requires_grad or b._requires_grad:
        autograd.record("layer_norm", out, (x, w, b), x=x2, w=w.detach(), mean=mean, rstd=rstd)
    return out


def _layer_norm_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """With xhat = (x - mean) * rstd and gh = g * w:  dx = rstd (gh - mean(gh) - xhat mean(gh xhat)),
    dw = sum over rows of g xhat,  db = sum over rows of g."""
    g2, ga = _rows(g)
    dx = new(g2.shape, g.dtype)
    dw, db = zeros(g2.shape[1], dtype=g.dtype), zeros(g2.shape[1], dtype=g.dtype)
    KERNELS["layer_norm_backward"](array(ctx.x), array(ctx.w), array(ctx.mean), array(ctx.rstd), ga, array(dx),
                                   array(dw), array(db))
    return dx.reshape(ctx.inputs[0].shape), dw, db


# ---- RMS norm: y = x / sqrt(mean(x^2) + eps) * w ------------------------------------------------------------

def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (no centring, no bias), fused."""
    x = as_float(x)
    w = _param(weight, x.shape[-1], 1.0, x, "rms_norm weight")
    x2, xa = _rows(detached(x))
    out, rstd = new(x2.shape, x.dtype), new((x2.shape[0],), x.dtype)
    KERNELS["rms_norm"](xa, array(contiguous(detached(w))), eps, array(out), array(rstd))
    out = out.reshape(x.shape)
    if x._requires_grad or w._requires_grad:
        autograd.record("rms_norm", out, (x, w), x=x2, w=w.detach(), rstd=rstd)
    return out


def _rms_norm_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, Tensor]:
    """With xhat = x * rstd:  dx = rstd (g w - xhat mean(g w xhat)),  dw = sum over rows of g xhat."""
    g2, ga = _rows(g)
    dx, dw = new(g2.shape, g.dtype), zeros(g2.shape[1], dtype=g.dtype)
    KERNELS["rms_norm_backward"](array(ctx.x), array(ctx.w), array(ctx.rstd), ga, array(dx), array(dw))
    return dx.reshape(ctx.inputs[0].shape), dw


# ---- causal self-attention -------------------------------------------------------------------------------------

def causal_self_attention(qkv: Tensor, n_head: int) -> Tensor:
    """Multi-head causal self-attention, fused: qkv (B, T, 3C), the q, k, v projections side by side
    -> y (B, T, C), the heads' outputs side by side. Per head h (columns h*hs:(h+1)*hs of q, k, v):
    y_h = softmax(q_h k_h^T / sqrt(hs) + causal mask) v_h. The same as splitting the heads out and
    calling `F.causal_attention`, without the copies; the probabilities are kept for backward."""
    B, T, C3 = qkv.shape
    if C3 % (3 * n_head):
        raise ValueError(f"causal_self_attention: last dim {C3} must be 3 * n_head * head_size (n_head={n_head})")
    qkv_in, qkv = qkv, contiguous(detached(qkv))
    y, att = new((B, T, C3 // 3), qkv.dtype), new((B, n_head, T, T), qkv.dtype)
    KERNELS["attention"](array(qkv), n_head, array(y), array(att))
    if qkv_in._requires_grad:
        autograd.record("attention", y, (qkv_in,), qkv=qkv, att=att)
    return y


def _attention_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """With P the saved probabilities, per head: dP = g v^T, dv = P^T g, dS = P (dP - rowsum(dP P)) / sqrt(hs),
    dq = dS k, dk = dS^T q; written into the head's columns of dqkv."""
    dqkv = new(ctx.qkv.shape, g.dtype)
    KERNELS["attention_backward"](array(ctx.qkv), array(ctx.att), array(contiguous(g)), array(dqkv))
    return (dqkv,)


def cached_attention(qkv: Tensor, k_cache: np.ndarray, v_cache: np.ndarray, start: int, n_head: int) -> Tensor:
    """Causal self-attention of T new positions start..start+T-1 against a KV cache, for generation (no
    gradient): qkv (B, T, 3C) -> (B, T, C). The new keys and values are written into k_cache, v_cache
    (B, n_head, block_size, hs) at their positions; each query sees the positions up to its own."""
    if qkv._requires_grad and autograd.grad_enabled:
        raise RuntimeError("cached_attention: generation only; run it under teenygrad.no_grad()")
    B, T, C3 = qkv.shape
    if start + T > k_cache.shape[2]:
        raise ValueError(f"cached_attention: positions up to {start + T} but the cache holds {k_cache.shape[2]}")
    qkv = contiguous(detached(qkv), float32)
    y = new((B, T, C3 // 3), qkv.dtype)
    KERNELS["attention_cached"](array(qkv), k_cache, v_cache, start, n_head, array(y))
    return y


RULES = {
    "linear": _linear_backward,            # dx = g W, dW = g^T x, db = sum of g
    "layer_norm": _layer_norm_backward,    # one kernel: dx, dw, db
    "rms_norm": _rms_norm_backward,        # one kernel: dx, dw
    "attention": _attention_backward,      # one kernel: dqkv
}
