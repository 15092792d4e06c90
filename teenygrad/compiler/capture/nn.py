"""Composite ops written once in other ops, and the optimizers as graphs ending in assigns (chapter 10).

Eagerly, chapter 9 fused these ops by hand: one kernel forward, one backward. A compiler wants the opposite: the
op written in small pieces, so its passes can fuse them with their neighbours (a bias and GELU after a matmul).
So inside a trace each of them is composed from Tensor ops, the ones chapter 7 and 9 compose them from
(`F.layer_norm_unfused` and friends), and autograd records the pieces: the backward needs no kernel.

    cross_entropy      log_softmax (max subtracted: stable), then the target's entry picked by a one-hot, mean
    index_select       one-hot rows (arange == index) @ the table: an embedding is a matmul; its gradient too
    linear             x @ W^T + b, recorded as one "linear" node (its rule is three matmuls and a sum)
    layer_norm, rms_norm, causal_self_attention (with its mask from aranges), GELU (capture/ops.py, tanh form)
    SGD, Adam, AdamW   the update of every parameter (and of m, v, the velocity) as assigns; the learning rate and
                       the bias corrections are inputs read at each call, the step counters are host effects
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad import autograd, optim
from teenygrad.compiler import ir
from teenygrad.compiler.capture.lazy import CaptureError, bcast, binop, c, cast, current, node_of, wrap
from teenygrad.compiler.capture.ops import index_tensor, one_hot
from teenygrad.kernels.layout import normalize_axis
from teenygrad.ops.buffers import as_float
from teenygrad.tensor import Tensor, int64

__all__ = ["cross_entropy", "index_select", "linear", "layer_norm", "rms_norm", "causal_self_attention",
           "causal_mask", "optimizer_step", "clip_grad_norm"]


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    logits, targets = as_float(logits), index_tensor(targets, "cross_entropy")
    if logits.ndim == 0 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} must be the shape of logits {logits.shape} "
                         f"without its last (class) axis")
    R, C = targets.size, logits.shape[-1]
    if R == 0 or C == 0:
        raise ValueError(f"cross_entropy: need at least one row and one class, got logits of shape {logits.shape}")
    picked = logits.reshape(R, C).log_softmax(-1).gather(1, targets.reshape(R, 1))   # log p[target], (R, 1)
    return picked.sum() * (-1.0 / R)


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    axis = normalize_axis(axis, x.ndim, "index_select")
    index = index_tensor(index, "index_select")
    n, K = x.shape[axis], index.size
    rest = x.shape[:axis] + x.shape[axis + 1:]
    hit = one_hot(ir.reshape(node_of(index), (K,)), n)                           # (K, n) bool
    if x.dtype == int64:  # integers: pick with where (a matmul would give floats); no gradient to record
        inner = int(np.prod(rest, dtype=np.int64))
        table = ir.reshape(ir.permute(node_of(x), (axis, *(d for d in range(x.ndim) if d != axis))), (1, n, inner))
        picked = bcast(table, (K, n, inner))
        rows = ir.reduce("sum", ir.where(bcast(ir.reshape(hit, (K, n, 1)), picked.shape), picked, c(0, picked)), (1,))
        out = wrap(ir.reshape(rows, (K, *rest)))
    else:
        table = x.permute(axis, *(d for d in range(x.ndim) if d != axis)).reshape(n, -1)   # (n, rest)
        out = (wrap(cast(hit, x.dtype)) @ table).reshape(K, *rest)
    order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, x.ndim))          # K back to where axis was
    return out.permute(*order).reshape(*x.shape[:axis], *index.shape, *x.shape[axis + 1:])


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input has {x.shape[-1]} features but weight {weight.shape} "
                         f"expects {weight.shape[1]}")
    out = x.detach() @ weight.detach().T
    if bias is not None:
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
        out = wrap(binop("add", node_of(out), cast(node_of(bias), out.dtype)))
    inputs = (x, weight) if bias is None else (x, weight, bias)
    if any(t._requires_grad for t in inputs):
        autograd.record("linear", out, inputs, x=x.detach(), w=weight.detach())
    return out


def _param(t: Tensor | None, n: int, like: Tensor, name: str) -> Tensor | None:
    if t is not None and t.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) for a last dim of {n}, got {t.shape}")
    return t if t is None or t.dtype == like.dtype else t.to(like.dtype)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    x = as_float(x)
    w = _param(weight, x.shape[-1], x, "layer_norm weight")
    b = _param(bias, x.shape[-1], x, "layer_norm bias")
    xc = x - x.mean(-1, keepdim=True)
    y = xc / ((xc * xc).mean(-1, keepdim=True) + eps).sqrt()
    y = y if w is None else y * w
    return y if b is None else y + b


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    x = as_float(x)
    w = _param(weight, x.shape[-1], x, "rms_norm weight")
    y = x / ((x * x).mean(-1, keepdim=True) + eps).sqrt()
    return y if w is None else y * w


def causal_mask(tq: int, tk: int, dtype: np.dtype) -> Tensor:
    """(tq, tk): 0 where query i may look at key j (j <= i + tk - tq), -inf after it; from two aranges."""
    rows, cols = ir.arange((tq, tk), 0), ir.arange((tq, tk), 1)
    late = ir.binary("lt", ir.binary("add", rows, ir.const(tk - tq, "int64", (tq, tk))), cols)
    return wrap(ir.where(late, ir.const(-np.inf, str(dtype), (tq, tk)), ir.const(0.0, str(dtype), (tq, tk))))


def causal_self_attention(qkv: Tensor, n_head: int) -> Tensor:
    """Per head: softmax(q k^T / sqrt(hs) + causal mask) v, the heads side by side (as `F.causal_attention`)."""
    B, T, C3 = qkv.shape
    if C3 % (3 * n_head):
        raise ValueError(f"causal_self_attention: last dim {C3} must be 3 * n_head * head_size (n_head={n_head})")
    C = C3 // 3
    hs = C // n_head
    q, k, v = (qkv[:, :, i * C:(i + 1) * C].reshape(B, T, n_head, hs).transpose(1, 2) for i in range(3))
    att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hs))
    att = (att + causal_mask(T, T, att.dtype)).softmax(-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


# ---- optimizers ----------------------------------------------------------------------------------------------

def _state(key: tuple, store: dict, i: int, p: Tensor, prefix: str) -> ir.Node:
    """An optimizer's state array for parameter i as a buffer (its current value if this trace updated it)."""
    trace = current()
    entry = trace.current.get(key)
    if entry is not None:
        return entry[2]
    return trace.bind(key, store, p.shape, p.dtype, lambda args: store[i].reshape(-1), prefix)


def _scalar_input(fn, dtype: np.dtype, name: str) -> ir.Node:
    """A number computed at each call (before the step counters move) and read by the graph."""
    return current().bind(None, None, (), dtype, lambda args: np.array([fn()], dtype=dtype), name)


def optimizer_step(opt: optim.Optimizer) -> None:
    """`opt.step()` inside a trace: every parameter with a gradient gets its update as assigns."""
    kind = type(opt)._update
    if kind not in (optim.SGD._update, optim.Adam._update):
        raise CaptureError(f"{type(opt).__name__}.step: only SGD, Adam and AdamW steps are captured; run the "
                           f"optimizer step outside the compiled function")
    if not isinstance(opt.lr, (int, float)):
        raise CaptureError(f"{type(opt).__name__}.step: opt.lr is a {type(opt.lr).__name__}; set opt.lr to a Python "
                           f"number outside the compiled function (it is read at every call, so a schedule works)")
    trace = current()
    done = sum(1 for e in trace.host_effects if getattr(e, "opt", None) is opt)  # steps of opt earlier in the trace
    adam = kind is optim.Adam._update
    hyper = (opt.betas, opt.eps, opt.weight_decay, opt.decoupled) if adam else (opt.momentum, opt.weight_decay)
    trace.guards.append((lambda: (opt.betas, opt.eps, opt.weight_decay, opt.decoupled) if adam else
                         (opt.momentum, opt.weight_decay), hyper, f"{type(opt).__name__}'s hyperparameters"))

    def count() -> None:
        opt.steps += 1
        for i in stepped:
            opt.t[i] = opt.t.get(i, 0) + 1
    count.opt, stepped = opt, []
    lrs: dict = {}
    for i, p in enumerate(opt.params):
        if p.grad is None:
            continue
        if p.grad.shape != p.shape:
            raise ValueError(f"optimizer: a gradient of shape {p.grad.shape} for a parameter of shape {p.shape}")
        dt = p.dtype
        if dt not in lrs:  # one input per dtype: the learning rate and AdamW's shrink factor 1 - lr wd
            lrs[dt] = (_scalar_input(lambda: opt.lr, dt, "lr"),
                       _scalar_input(lambda: 1.0 - opt.lr * opt.weight_decay, dt, "shrink") if adam else None)
        (lr, shrink), w, g = lrs[dt], node_of(p), cast(node_of(p.grad), dt)
        if adam:
            stepped.append(i)
            new = _adam(opt, i, p, w, g, shrink, done)
        else:
            new = _sgd(opt, i, p, w, g, lr)
        trace.assign_tensor(p, new)
    trace.host_effects.append(count)


def _sgd(opt: optim.SGD, i: int, p: Tensor, w: ir.Node, g: ir.Node, lr: ir.Node) -> ir.Node:
    """d = g + wd p;  with momentum: buf = momentum buf + d, d = buf;  p - lr d   (the sgd kernel)."""
    d = ir.binary("add", g, ir.binary("mul", c(opt.weight_decay, w), w)) if opt.weight_decay else g
    if opt.momentum:
        opt._state(opt.velocity, i)
        key = ("velocity", id(opt), i)
        buf = _state(key, opt.velocity, i, p, "velocity")
        d = ir.binary("add", ir.binary("mul", c(opt.momentum, buf), buf), d)
        current().assign(key, d)
    return ir.binary("sub", w, binop("mul", lr, d))


def _adam(opt: optim.Adam, i: int, p: Tensor, w: ir.Node, g: ir.Node, shrink: ir.Node, done: int) -> ir.Node:
    """The adam kernel's arithmetic: m, v running averages; p shrunk (AdamW) and stepped by m / sqrt(v)."""
    b1, b2 = opt.betas
    mul, add = (lambda a, b: ir.binary("mul", a, b)), (lambda a, b: ir.binary("add", a, b))
    t = lambda: opt.t.get(i, 0) + done + 1  # noqa: E731 - this step's number, read at call time
    step = _scalar_input(lambda: opt.lr / (1.0 - b1 ** t()), p.dtype, "step")
    inv_root_bias2 = _scalar_input(lambda: 1.0 / math.sqrt(1.0 - b2 ** t()), p.dtype, "rbias")
    if not opt.decoupled and opt.weight_decay:
        g = add(g, mul(c(opt.weight_decay, w), w))
    opt._state(opt.m, i), opt._state(opt.v, i)
    mkey, vkey = ("m", id(opt), i), ("v", id(opt), i)
    m, v = _state(mkey, opt.m, i, p, "m"), _state(vkey, opt.v, i, p, "v")
    m = add(mul(c(b1, m), m), mul(c(1.0 - b1, g), g))
    v = add(mul(c(b2, v), v), mul(mul(c(1.0 - b2, g), g), g))
    current().assign(mkey, m)
    current().assign(vkey, v)
    if opt.decoupled:
        w = binop("mul", w, shrink)
    denom = add(mul(ir.unary("sqrt", v), bcast(inv_root_bias2, v.shape)), c(opt.eps, v))
    return ir.binary("sub", w, ir.binary("div", binop("mul", step, m), denom))


def clip_grad_norm(params, max_norm: float) -> Tensor:
    """Inside a trace: the gradients scaled together to a joint L2 norm of at most max_norm, with a `where`
    instead of Python's `if`. Returns the norm as a 0-d float64 tensor (return it from the function to read it)."""
    grads, seen = [], set()
    for p in params:
        if p.grad is not None and id(p) not in seen:
            seen.add(id(p))
            grads.append(p)
    total = ir.const(0.0, "float64", ())
    for p in grads:
        g = cast(node_of(p.grad), "float64")
        squares = ir.reduce("sum", ir.binary("mul", g, g), range(len(g.shape)))
        total = ir.binary("add", total, ir.reshape(squares, ()))
    total = ir.unary("sqrt", total)
    coef = ir.binary("div", c(float(max_norm), total), ir.binary("add", total, c(1e-6, total)))
    coef = ir.where(ir.binary("lt", coef, c(1.0, coef)), coef, c(1.0, coef))
    for p in grads:
        p.grad = wrap(binop("mul", node_of(p.grad), cast(coef, p.grad.dtype)))
    return wrap(total)
