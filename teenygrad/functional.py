"""The neural-network functions `teenygrad.nn` layers call, as plain functions on Tensors (`import
teenygrad.functional as F`).

Each one is differentiable: it either composes Tensor ops (autograd records them) or is one fused op
with its own kernel and backward rule (chapter 9 shows what each fusion buys).
"""
from __future__ import annotations

from typing import ContextManager

import numpy as np

from teenygrad import autograd, dispatch
from teenygrad._jit import JIT_ENABLED
from teenygrad._swap import swapped
from teenygrad.autograd import Node
from teenygrad.kernels import fused
from teenygrad.tensor import Tensor, ones, rand, zeros

__all__ = ["linear", "embedding", "layer_norm", "rms_norm", "dropout", "causal_attention", "causal_self_attention",
           "cached_attention", "cross_entropy", "gelu", "layer_norm_unfused", "rms_norm_unfused"]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b.  x (..., in), weight (out, in), bias (out,) -> (..., out).

    One op with one backward rule rather than three (transpose, matmul, broadcast add):
        dx = g W,   dW = g^T x (summed over all rows),   db = g summed over all rows."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input has {x.shape[-1]} features but weight {weight.shape} expects {weight.shape[1]}")
    out = dispatch.matmul(dispatch._data(x), dispatch._data(weight).T)  # W^T is a strided view: no copy
    if bias is not None:
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
        y2, b = dispatch._array(out).reshape(-1, out.shape[-1]), dispatch._array(_cast_like(bias, out))
        fused.add_rows_parallel(y2, b) if _big(out.size) else fused.add_rows(y2, b, 0, y2.shape[0])
    inputs = (x, weight) if bias is None else (x, weight, bias)
    if any(t._requires_grad for t in inputs) and autograd.grad_enabled:
        autograd.record("linear", out, inputs, x=x.detach(), w=weight.detach())
    return out


def _cast_like(t: Tensor, like: Tensor) -> Tensor:
    t = t if t.dtype == like.dtype else dispatch.contiguous(t, like.dtype)
    return t if t.is_contiguous() else dispatch.contiguous(t)


def _linear_backward(ctx: Node, g: Tensor) -> tuple:
    x, w = ctx.x, ctx.w
    g2 = g.reshape(-1, g.shape[-1])
    dx = ctx.needs[0] and g @ w                                             # (..., out) @ (out, in)
    dw = ctx.needs[1] and g2.T @ x.reshape(-1, x.shape[-1])                 # (out, rows) @ (rows, in)
    if len(ctx.inputs) == 2:
        return dx, dw
    return dx, dw, ctx.needs[2] and g2.sum(0)


def embedding(index: Tensor, weight: Tensor) -> Tensor:
    """Rows of `weight` (num, dim) picked by the integer `index` (any shape) -> (*index.shape, dim)."""
    flat = index.reshape(-1)
    return weight.index_select(0, flat).reshape(*index.shape, weight.shape[1])


def layer_norm_unfused(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                       eps: float = 1e-5) -> Tensor:
    """Composed from Tensor ops (the reference `layer_norm` is checked against). Normalise the last dim to mean 0, variance 1, then scale and shift:
    y = (x - mean) / sqrt(var + eps) * weight + bias   (var is the biased variance, as in PyTorch)."""
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    y = xc / ((xc * xc).mean(-1, keepdim=True) + eps).sqrt()
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def rms_norm_unfused(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Composed from Tensor ops. y = x / sqrt(mean(x^2) + eps) * weight, over the last dim (no centring, no bias)."""
    y = x / ((x * x).mean(-1, keepdim=True) + eps).sqrt()
    return y if weight is None else y * weight


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p), so the expected value is
    unchanged; the identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = (rand(*x.shape, dtype=x.dtype) >= p).to(x.dtype)
    return x * keep * (1.0 / (1.0 - p))


_MASKS: dict[tuple[int, int, str], Tensor] = {}


def _causal_mask(tq: int, tk: int, dtype: np.dtype) -> Tensor:
    """(tq, tk) additive mask: 0 where query i may look at key j (j <= i + tk - tq), -inf after it."""
    key = (tq, tk, str(dtype))
    if key not in _MASKS:
        m = np.triu(np.full((tq, tk), -np.inf), k=tk - tq + 1)
        _MASKS[key] = Tensor(m, dtype=dtype)
    return _MASKS[key]


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(hs) + causal mask) v.   q (..., Tq, hs), k and v (..., Tk, hs) -> (..., Tq, hs).

    With Tk > Tq (a KV cache), the queries are the last Tq positions of the Tk keys."""
    tq, hs, tk = q.shape[-2], q.shape[-1], k.shape[-2]
    att = (q @ k.transpose(-1, -2)) * (1.0 / float(np.sqrt(hs)))  # (..., Tq, Tk)
    att = (att + _causal_mask(tq, tk, att.dtype)).softmax(-1)
    return att @ v


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean of -log softmax(logits)[target] over rows; logits (N, C), targets (N,) int64. Fused and stable."""
    return logits.cross_entropy(targets)



# ---- fused ops: one kernel forward, one backward (teenygrad/kernels/fused.py) --------------------------

def _rows(x: Tensor) -> tuple[Tensor, np.ndarray]:
    """x as a contiguous (rows, last dim) tensor and the numpy view the kernels take."""
    x2 = dispatch.contiguous(x) if not x.is_contiguous() else x
    x2 = x2.reshape(-1, x.shape[-1])
    return x2, dispatch._array(x2)


def _big(work: int) -> bool:
    """Worth waking the other threads for? (See teenygrad/kernels/fused.py.)"""
    return JIT_ENABLED and work >= fused.PARALLEL_MIN_WORK


def _param(t: Tensor | None, n: int, fill: float, like: Tensor, name: str) -> Tensor:
    if t is None:
        return (ones if fill else zeros)(n, dtype=like.dtype)
    if t.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) for a last dim of {n}, got {t.shape}")
    return t if t.dtype == like.dtype else t.to(like.dtype)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise the last dim to mean 0, variance 1, then scale and shift (one fused kernel each way):
    y = (x - mean) / sqrt(var + eps) * weight + bias   (var is the biased variance, as in PyTorch)."""
    x = dispatch.as_float(x)
    C = x.shape[-1]
    w, b = _param(weight, C, 1.0, x, "layer_norm weight"), _param(bias, C, 0.0, x, "layer_norm bias")
    x2, xa = _rows(x)
    out = dispatch._new(x2.shape, x.dtype)
    mean, rstd = dispatch._new((x2.shape[0],), x.dtype), dispatch._new((x2.shape[0],), x.dtype)
    args = (xa, dispatch._array(w.contiguous()), dispatch._array(b.contiguous()), eps, dispatch._array(out),
            dispatch._array(mean), dispatch._array(rstd))
    fused.layer_norm_forward_parallel(*args) if _big(xa.size) else fused.layer_norm_forward(*args, 0, xa.shape[0])
    out = out.reshape(x.shape)
    if (x._requires_grad or w._requires_grad or b._requires_grad) and autograd.grad_enabled:
        autograd.record("layer_norm", out, (x, w, b), x=x2.detach(), w=w.detach(), mean=mean, rstd=rstd)
    return out


def _layer_norm_backward(ctx: Node, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    g2, ga = _rows(g)
    dx = dispatch._new(g2.shape, g.dtype)
    R, C = g2.shape
    dw, db = zeros(C, dtype=g.dtype), zeros(C, dtype=g.dtype)
    args = (dispatch._array(ctx.x), dispatch._array(ctx.w), dispatch._array(ctx.mean), dispatch._array(ctx.rstd), ga,
            dispatch._array(dx), dispatch._array(dw), dispatch._array(db))
    if _big(g2.size):
        fused.layer_norm_backward_parallel(*args)
    else:
        fused.layer_norm_backward(*args, 0, R)
    return dx.reshape(ctx.inputs[0].shape), dw, db


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (no centring, no bias), fused."""
    x = dispatch.as_float(x)
    C = x.shape[-1]
    w = _param(weight, C, 1.0, x, "rms_norm weight")
    x2, xa = _rows(x)
    out = dispatch._new(x2.shape, x.dtype)
    rstd = dispatch._new((x2.shape[0],), x.dtype)
    args = (xa, dispatch._array(w.contiguous()), eps, dispatch._array(out), dispatch._array(rstd))
    fused.rms_norm_forward_parallel(*args) if _big(xa.size) else fused.rms_norm_forward(*args, 0, xa.shape[0])
    out = out.reshape(x.shape)
    if (x._requires_grad or w._requires_grad) and autograd.grad_enabled:
        autograd.record("rms_norm", out, (x, w), x=x2.detach(), w=w.detach(), rstd=rstd)
    return out


def _rms_norm_backward(ctx: Node, g: Tensor) -> tuple[Tensor, Tensor]:
    g2, ga = _rows(g)
    dx = dispatch._new(g2.shape, g.dtype)
    dw = zeros(g2.shape[1], dtype=g.dtype)
    args = (dispatch._array(ctx.x), dispatch._array(ctx.w), dispatch._array(ctx.rstd), ga, dispatch._array(dx),
            dispatch._array(dw))
    if _big(g2.size):
        fused.rms_norm_backward_parallel(*args)
    else:
        fused.rms_norm_backward(*args, 0, g2.shape[0])
    return dx.reshape(ctx.inputs[0].shape), dw


def causal_self_attention(qkv: Tensor, n_head: int) -> Tensor:
    """Multi-head causal self-attention, fused: qkv (B, T, 3C), the q, k, v projections side by side
    -> y (B, T, C), the heads' outputs side by side. Per head h (columns h*hs:(h+1)*hs of q, k, v):
    y_h = softmax(q_h k_h^T / sqrt(hs) + causal mask) v_h. The same as splitting the heads out and
    calling `causal_attention`, without the copies; the probabilities are kept for backward."""
    B, T, C3 = qkv.shape
    if C3 % (3 * n_head):
        raise ValueError(f"causal_self_attention: last dim {C3} must be 3 * n_head * head_size (n_head={n_head})")
    qkv_in, qkv = qkv, (dispatch.contiguous(qkv) if not qkv.is_contiguous() else qkv)
    y = dispatch._new((B, T, C3 // 3), qkv.dtype)
    att = dispatch._new((B, n_head, T, T), qkv.dtype)
    args = (dispatch._array(qkv), n_head, dispatch._array(y), dispatch._array(att))
    if _big(B * T * T * C3 // 6):
        fused.attention_forward_parallel(*args)
    else:
        fused.attention_forward(*args, 0, B * n_head)
    if qkv_in._requires_grad and autograd.grad_enabled:
        autograd.record("attention", y, (qkv_in,), qkv=qkv.detach(), att=att)
    return y


def cached_attention(qkv: Tensor, k_cache: np.ndarray, v_cache: np.ndarray, start: int, n_head: int) -> Tensor:
    """Causal self-attention of T new positions start..start+T-1 against a KV cache, for generation (no
    gradient): qkv (B, T, 3C) -> (B, T, C). The new keys and values are written into k_cache, v_cache
    (B, n_head, block_size, hs) at their positions; each query sees the positions up to its own."""
    if qkv._requires_grad and autograd.grad_enabled:
        raise RuntimeError("cached_attention: generation only; run it under teenygrad.no_grad()")
    B, T, C3 = qkv.shape
    if start + T > k_cache.shape[2]:
        raise ValueError(f"cached_attention: positions up to {start + T} but the cache holds {k_cache.shape[2]}")
    qkv = dispatch.contiguous(qkv, np.dtype(np.float32)) if not qkv.is_contiguous() or qkv.dtype != np.float32 else qkv
    y = dispatch._new((B, T, C3 // 3), qkv.dtype)
    fused.attention_cached(dispatch._array(qkv), k_cache, v_cache, start, n_head, dispatch._array(y))
    return y


def _attention_backward(ctx: Node, g: Tensor) -> tuple[Tensor]:
    g = dispatch.contiguous(g) if not g.is_contiguous() else g
    dqkv = dispatch._new(ctx.qkv.shape, g.dtype)
    args = (dispatch._array(ctx.qkv), dispatch._array(ctx.att), dispatch._array(g), dispatch._array(dqkv))
    B, T, C3 = ctx.qkv.shape
    if _big(B * T * T * C3 // 3):
        fused.attention_backward_parallel(*args)
    else:
        fused.attention_backward(*args, 0, B * ctx.att.shape[1])
    return (dqkv,)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). In float32 one parallel
    kernel with a vectorisable tanh each way; other dtypes (and views) take `Tensor.gelu`."""
    if x.dtype != np.float32 or not x.is_contiguous():
        return x.gelu()
    out = dispatch._new(x.shape, x.dtype)
    args = (dispatch._array(x).reshape(-1), dispatch._array(out).reshape(-1))
    fused.gelu32_forward_parallel(*args) if _big(x.size * 8) else fused.gelu32_forward(*args, 0, x.size)
    if x._requires_grad and autograd.grad_enabled:
        autograd.record("gelu32", out, (x,), x=x.detach())
    return out


def _gelu_backward(ctx: Node, g: Tensor) -> tuple[Tensor]:
    g = g if g.is_contiguous() else dispatch.contiguous(g)
    dx = dispatch._new(g.shape, g.dtype)
    args = (dispatch._array(ctx.x).reshape(-1), dispatch._array(g).reshape(-1), dispatch._array(dx).reshape(-1))
    fused.gelu32_backward_parallel(*args) if _big(g.size * 8) else fused.gelu32_backward(*args, 0, g.size)
    return (dx,)


# ---- the composed versions, to measure what each fusion buys (chapter 9) ------------------------------

def linear_unfused(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    y = x @ weight.T                                  # three nodes: transpose, matmul, broadcast add
    return y if bias is None else y + bias


def causal_self_attention_unfused(qkv: Tensor, n_head: int) -> Tensor:
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = (qkv[:, :, i * C:(i + 1) * C].reshape(B, T, n_head, C // n_head).transpose(1, 2) for i in range(3))
    return causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)  # heads back side by side


def gelu_unfused(x: Tensor) -> Tensor:
    return x.gelu()


FUSIONS = {"linear": linear_unfused, "layer_norm": layer_norm_unfused, "rms_norm": rms_norm_unfused,
           "causal_self_attention": causal_self_attention_unfused, "gelu": gelu_unfused}


def unfused(*names: str) -> ContextManager[None]:
    """Run a block with some fused ops replaced by their composed versions (all of them by default):
    `with F.unfused("gelu"): model(x)`. Models call `F.<name>` at run time, so they pick the swap up."""
    unknown = [n for n in names if n not in FUSIONS]
    if unknown:
        raise KeyError(f"unfused: unknown fused op(s) {unknown}; known: {sorted(FUSIONS)}")
    return swapped(globals(), "fused op", **{n: FUSIONS[n] for n in (names or FUSIONS)})


FUSED_RULES = {"linear": _linear_backward, "gelu32": _gelu_backward, "layer_norm": _layer_norm_backward, "rms_norm": _rms_norm_backward, "attention": _attention_backward}
autograd.RULES.update(FUSED_RULES)
autograd.DEFAULT_RULES.update(FUSED_RULES)
