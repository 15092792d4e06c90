"""Reductions and softmax (chapters 2, 4 and 6): sum, max, argmax, mean over any axes; softmax and
log-softmax along one axis. Forward kernels in `teenygrad.kernels.reduce` / `.softmax`; rules below.

Every reduction is brought to one shape first: an (M, N) matrix whose rows are the kept axes and whose
columns are the reduced ones, read with the input's own strides when they allow it (`_as_matrix`).
"""
from __future__ import annotations

from teenygrad import autograd, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.kernels.layout import coalesce, normalize_axes, normalize_axis, prod
from teenygrad.ops.buffers import as_float, contiguous, detached, new
from teenygrad.ops.elementwise import binary
from teenygrad.ops.movement import scatter_add
from teenygrad.tensor import Tensor, int64


def _as_matrix(x: Tensor, axes: tuple[int, ...]) -> tuple[Tensor, int, int, int, int]:
    """View x as an (M, N) matrix with kept axes as rows and `axes` as columns: (x, M, sm, N, sn).

    Uses x's own strides when the kept axes (and the reduced axes) coalesce into one dimension each;
    otherwise makes a contiguous copy with the reduced axes moved last.
    """
    kept = [d for d in range(x.ndim) if d not in axes]
    M, N = prod(tuple(x.shape[d] for d in kept)), prod(tuple(x.shape[d] for d in axes))
    if N == 0 or M == 0:
        return x, M, 0, N, 0
    kshape, (ks,) = coalesce(tuple(x.shape[d] for d in kept), tuple(x.strides[d] for d in kept))
    rshape, (rs,) = coalesce(tuple(x.shape[d] for d in axes), tuple(x.strides[d] for d in axes))
    if len(kshape) == 1 and len(rshape) == 1:
        return x, M, ks[0], N, rs[0]
    x = contiguous(x.permute(*kept, *axes))
    return x, M, N, N, 1


def reduce(op: str, x: Tensor, axis: int | tuple[int, ...] | None, keepdim: bool) -> Tensor:
    """sum / max / argmax over `axis` (an int, a tuple, or None for all axes)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.reduce(op, x, axis, keepdim)
    axes = normalize_axes(axis, x.ndim, op)
    xm, M, sm, N, sn = _as_matrix(detached(x), axes)
    if N == 0 and op != "sum":
        raise ValueError(f"{op}: cannot reduce over an empty axis (shape {x.shape}, axis {axis})")
    if keepdim:
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    else:
        out_shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
    out = new(out_shape, int64 if op == "argmax" else x.dtype, x.device)
    if M:
        on(x.device)[op](xm._buf, xm.offset, M, sm, N, sn, out._buf)
    if x._requires_grad and op != "argmax":
        autograd.record(op, out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape)
    return out


def mean(x: Tensor, axis: int | tuple[int, ...] | None, keepdim: bool) -> Tensor:
    """mean = sum / (number of reduced elements)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.mean(x, axis, keepdim)
    x = as_float(x)
    axes = normalize_axes(axis, x.ndim, "mean")
    n = prod(tuple(x.shape[d] for d in axes))
    out = binary("mul", reduce("sum", detached(x), axes, keepdim), 1.0 / n if n else float("nan"))
    if x._requires_grad:
        autograd.record("mean", out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape, scale=1.0 / max(n, 1))
    return out


def softmax(op: str, x: Tensor, axis: int) -> Tensor:
    """softmax / log_softmax along one axis (the kernels work on rows, so that axis is moved last)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.softmax(op, x, axis)
    x_in = x = as_float(x)
    axis = normalize_axis(axis, x.ndim, op)
    x = detached(x)
    scalar = x.ndim == 0
    if scalar:
        x = x.reshape(1)
    last = x.ndim - 1
    xt = x.transpose(axis, last) if axis != last else x
    xm, M, sm, N, sn = _as_matrix(xt, (last,))
    out = new(xt.shape, x.dtype, x.device)
    if M and N:
        on(x.device)[op](xm._buf, xm.offset, M, sm, N, sn, out._buf)
    out = out.transpose(axis, last) if axis != last else out
    out = out.reshape(()) if scalar else out
    if x_in._requires_grad:
        autograd.record(op, out, (x_in,), out=out, axis=axis)
    return out


@exercise("06-tensor-autograd", "kernel_launchers")
def softmax_grad(op: str, y: Tensor, g: Tensor, axis: int) -> Tensor:
    """dx = dL/dx for y = softmax(x) (op "softmax") or y = log_softmax(x) (op "log_softmax") along `axis`, from the
    forward's output y and g = dL/dy (both of one shape, any layout, y's dtype float32 or float64; `axis`
    non-negative; a 0-d y is one row of one element). Returns a new Tensor of y's shape and dtype.

    The work is one call of exercise 4's row kernel, `KERNELS[op + "_backward"](y, g, M, N, dx)`, which wants
    the rows along the last axis and all three as contiguous flat (M*N,) numpy arrays of y's dtype: move `axis`
    last, lay y and g out contiguously, run it, and move the axis back. No kernel call for an empty tensor."""
    scalar = y.ndim == 0
    if scalar:
        y, g = y.reshape(1), g.reshape(1)
    last = y.ndim - 1
    if axis != last:
        y, g = y.transpose(axis, last), g.transpose(axis, last)
    y = contiguous(y)
    g = contiguous(g, y.dtype)
    dx = new(y.shape, y.dtype, y.device)
    if dx.size:
        N = y.shape[-1]
        on(y.device)[op + "_backward"](y._buf[y.offset:], g._buf[g.offset:], dx.size // N, N, dx._buf)
    dx = dx.transpose(axis, last) if axis != last else dx
    return dx.reshape(()) if scalar else dx


def _softmax_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """The rule of softmax and log_softmax (ctx.op): the kernels' launcher, or inside tg.compile's trace its lazy
    twin (so a learner's launcher, which runs kernels, is never handed lazy tensors)."""
    grad = tracing.hooks.softmax_backward if tracing.active else softmax_grad
    return (grad(ctx.op, ctx.out, g, ctx.axis),)


# ---- the rules of sum, mean and max (exercise 6, part "reduction_rules") ----------------------------------------
# Each reads ctx.x (the input; max only), ctx.shape (x's shape), ctx.axes (the reduced axes: a sorted tuple of
# non-negative ints, every axis for x.sum()), ctx.keepdim (are the reduced axes still in g's shape, as size 1?);
# mean also ctx.scale = 1 / (number of elements averaged). Each returns (dx,), dx of x's shape.

@exercise("06-tensor-autograd", "reduction_rules")
def sum_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.sum(axes, keepdim): every element of x enters one output element with coefficient 1, so dx is g
    copied along the reduced axes (a view of g is fine: the reduced axes put back as size 1, then expanded)."""
    kept = tuple(1 if d in ctx.axes else n for d, n in enumerate(ctx.shape))
    return (g.reshape(kept).expand(ctx.shape),)


@exercise("06-tensor-autograd", "reduction_rules")
def mean_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.mean(axes, keepdim) = sum / n: dx is g * ctx.scale (1 / n) copied along the reduced axes."""
    kept = tuple(1 if d in ctx.axes else n for d, n in enumerate(ctx.shape))
    return ((g * ctx.scale).reshape(kept).expand(ctx.shape),)


@exercise("06-tensor-autograd", "reduction_rules")
def max_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.max(axes, keepdim): the gradient goes to one position per reduced group, the *first* maximum in
    row-major order of the reduced axes (argmax's tie rule), so ties never split or duplicate it; 0 elsewhere."""
    kept = [d for d in range(ctx.x.ndim) if d not in ctx.axes]
    kshape = tuple(ctx.shape[d] for d in kept)
    where = ctx.x.argmax(ctx.axes).reshape(*kshape, 1)  # flat position inside each reduced group
    scatter = tracing.hooks.scatter_add if tracing.active else scatter_add  # inside tg.compile's trace: lazy
    dx = scatter(g.reshape(*kshape, 1), (*kshape, prod(tuple(ctx.shape[d] for d in ctx.axes))), -1, where)
    order = kept + list(ctx.axes)  # dx is laid out as x.permute(order): move the axes back
    back = [order.index(d) for d in range(len(order))]
    return (dx.reshape(*kshape, *(ctx.shape[d] for d in ctx.axes)).permute(*back),)


RULES = {
    "sum": sum_backward,                                       # every summed element gets g
    "mean": mean_backward,                                     # ... times 1/n
    "max": max_backward,                                       # g goes to the (first) argmax, 0 elsewhere
    "softmax": _softmax_rule,                                  # y (g - sum g y), one kernel
    "log_softmax": _softmax_rule,                              # g - e^y sum g, one kernel
}
