"""From Tensor ops to kernel calls: one function per kind of op.

Each function here checks its arguments (with errors that name the op and the shapes), picks the
result dtype and shape, allocates the output, lays out the operands the way its kernel expects
(see the calling conventions in `teenygrad.kernels`) and calls the kernel registered in `KERNELS`.

Autograd hooks in here: every op passes through exactly one of these functions, so recording "how was
this tensor made" for backward is one `autograd.record(...)` line per function, behind an
`if x._requires_grad` check (that check is all an op pays when nothing requires grad). The forward code
works on `_data(x)`, an alias without the graph, so its internal reshapes and transposes record nothing.
The launchers for the fused backward kernels (`teenygrad.kernels.backward`) are at the end.

Type promotion: float64 with anything -> float64; float32 with float32 or int64 -> float32;
int64 with int64 -> int64. A Python scalar takes the tensor's dtype (a Python float with an int64
tensor gives float32). Functions that only make sense on reals (exp, log, ..., div, pow, mean,
softmax) turn int64 inputs into float32.
"""
from __future__ import annotations

import numpy as np

from teenygrad import autograd
from teenygrad.kernels import DEFAULTS, KERNELS
from teenygrad.kernels import backward as backward_kernels
from teenygrad.kernels.layout import (broadcast_shapes, broadcast_strides, coalesce, ints, normalize_axes,
                                      normalize_axis, prod)
from teenygrad.tensor import Tensor, float32, float64, int64

FLOAT_ONLY_UNARY = {"exp", "log", "sqrt", "tanh", "sigmoid", "gelu"}
FLOAT_ONLY_BINARY = {"div", "pow"}
NOT_DIFFERENTIABLE = {"eq", "ne", "lt", "le", "gt", "ge", "gelu_backward"}
Scalar = int | float

# the backward kernels join the registry (and its defaults), so kernels.use() can swap them too
KERNELS.update(backward_kernels.KERNELS)
DEFAULTS.update(backward_kernels.KERNELS)


def result_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    if a == float64 or b == float64:
        return float64
    return float32


def as_float(x: Tensor) -> Tensor:
    return x.to(float32) if x.dtype == int64 else x


def _data(x: Tensor) -> Tensor:
    """x without its graph (an alias of the same memory), for the internal views of a forward pass."""
    return x.detach() if x._requires_grad else x


def _cast(x: Tensor, dtype: np.dtype) -> Tensor:
    """x.to(dtype) without recording a cast: the op using it records its own node."""
    return x if x.dtype == dtype else contiguous(x, dtype)


def _new(shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
    """A fresh contiguous tensor (uninitialised)."""
    return Tensor._contiguous(np.empty(prod(shape), dtype=dtype), shape)


def _scalar_tensor(value: Scalar, like: Tensor, op: str) -> Tensor:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, np.generic) and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise TypeError(f"{op}: unsupported operand of type {type(value).__name__}")
    dtype = float32 if (like.dtype == int64 and isinstance(value, float)) else like.dtype
    return Tensor._contiguous(np.full(1, value, dtype=dtype), ())


# ---- elementwise -----------------------------------------------------------------------------------

def unary(op: str, x: Tensor) -> Tensor:
    """out = f(x), elementwise."""
    if op in FLOAT_ONLY_UNARY:
        x = as_float(x)
    out = _new(x.shape, x.dtype)
    if out._buf.size:
        if x.is_contiguous():
            shape, sx = (out._buf.size,), (1,)
        else:
            shape, (sx,) = coalesce(x.shape, x.strides)
        KERNELS[op](ints(shape), x._buf, ints(sx), x.offset, out._buf)
    if x._requires_grad:
        autograd.record(op, out, (x,), x=x, out=out)
    return out


def binary(op: str, a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    """out = f(a, b), elementwise, with numpy broadcasting. One of a, b may be a Python scalar."""
    if not isinstance(a, Tensor):
        a = _scalar_tensor(a, b, op)
    elif not isinstance(b, Tensor):
        b = _scalar_tensor(b, a, op)
    a_in, b_in = a, b
    dtype = result_dtype(a.dtype, b.dtype)
    if dtype == int64 and op in FLOAT_ONLY_BINARY:
        dtype = float32
    a, b = _cast(a, dtype), _cast(b, dtype)
    if a.shape == b.shape and a.is_contiguous() and b.is_contiguous():  # fast path: one flat loop
        out_shape = a.shape
        shape, sa, sb = (prod(out_shape),), (1,), (1,)
    elif not b.shape and a.is_contiguous():  # tensor op scalar: a flat loop, b read with stride 0
        out_shape = a.shape
        shape, sa, sb = (prod(out_shape),), (1,), (0,)
    elif not a.shape and b.is_contiguous():  # scalar op tensor
        out_shape = b.shape
        shape, sa, sb = (prod(out_shape),), (0,), (1,)
    else:
        out_shape = broadcast_shapes(a.shape, b.shape, op)
        shape, (sa, sb) = coalesce(out_shape, broadcast_strides(a.shape, a.strides, out_shape),
                                   broadcast_strides(b.shape, b.strides, out_shape))
    out = _new(out_shape, dtype)
    if out._buf.size:
        KERNELS[op](ints(shape), a._buf, ints(sa), a.offset, b._buf, ints(sb), b.offset, out._buf)
    if (a_in._requires_grad or b_in._requires_grad) and op not in NOT_DIFFERENTIABLE:
        autograd.record(op, out, (a_in, b_in), a=a_in, b=b_in, out=out)
    return out


def copy_into(src: Tensor, dst: Tensor) -> None:
    """dst[...] = src (same shape, or src broadcastable to dst's shape), converting dtype if needed."""
    if src.shape != dst.shape:
        if broadcast_shapes(src.shape, dst.shape, "copy") != dst.shape:
            raise ValueError(f"copy: cannot write shape {src.shape} into shape {dst.shape}")
    if not dst.size:
        return
    shape, (ss, ds) = coalesce(dst.shape, broadcast_strides(src.shape, src.strides, dst.shape), dst.strides)
    KERNELS["copy"](ints(shape), src._buf, ints(ss), src.offset, dst._buf, ints(ds), dst.offset)


def contiguous(x: Tensor, dtype: np.dtype | None = None) -> Tensor:
    """A contiguous copy of x (in `dtype` if given)."""
    out = _new(x.shape, dtype or x.dtype)
    copy_into(x, out)
    return out


# ---- reductions -------------------------------------------------------------------------------------

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
    axes = normalize_axes(axis, x.ndim, op)
    xm, M, sm, N, sn = _as_matrix(_data(x), axes)
    if N == 0 and op != "sum":
        raise ValueError(f"{op}: cannot reduce over an empty axis (shape {x.shape}, axis {axis})")
    if keepdim:
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    else:
        out_shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
    out = _new(out_shape, int64 if op == "argmax" else x.dtype)
    if M:
        KERNELS[op](xm._buf, xm.offset, M, sm, N, sn, out._buf)
    if x._requires_grad and op != "argmax":
        autograd.record(op, out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape)
    return out


def mean(x: Tensor, axis: int | tuple[int, ...] | None, keepdim: bool) -> Tensor:
    """mean = sum / (number of reduced elements)."""
    x = as_float(x)
    axes = normalize_axes(axis, x.ndim, "mean")
    n = prod(tuple(x.shape[d] for d in axes))
    out = binary("mul", reduce("sum", _data(x), axes, keepdim), 1.0 / n if n else float("nan"))
    if x._requires_grad:
        autograd.record("mean", out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape, scale=1.0 / max(n, 1))
    return out


def softmax(op: str, x: Tensor, axis: int) -> Tensor:
    """softmax / log_softmax along one axis (the kernels work on rows, so that axis is moved last)."""
    x_in = x = as_float(x)
    axis = normalize_axis(axis, x.ndim, op)
    x = _data(x)
    scalar = x.ndim == 0
    if scalar:
        x = x.reshape(1)
    last = x.ndim - 1
    xt = x.transpose(axis, last) if axis != last else x
    xm, M, sm, N, sn = _as_matrix(xt, (last,))
    out = _new(xt.shape, x.dtype)
    if M and N:
        KERNELS[op](xm._buf, xm.offset, M, sm, N, sn, out._buf)
    out = out.transpose(axis, last) if axis != last else out
    out = out.reshape(()) if scalar else out
    if x_in._requires_grad:
        autograd.record(op, out, (x_in,), out=out, axis=axis)
    return out


# ---- matmul -----------------------------------------------------------------------------------------

def _array(x: Tensor) -> np.ndarray:
    """numpy view of a contiguous tensor (for the matmul kernels, which take shaped arrays)."""
    return x._buf[x.offset:x.offset + x.size].reshape(x.shape)


def _matrix(x: Tensor) -> np.ndarray:
    """numpy view of a 2-D tensor with its own strides (transposed, sliced, expanded): no copy. teenygrad's
    matmul kernels pack their operands into blocks anyway, so they can read any layout. A kernel swapped in
    with `kernels.use(matmul=...)` gets contiguous arrays, as documented; so does a tensor with a negative
    stride (numpy views must start at their lowest address here)."""
    if x.is_contiguous():
        return _array(x)
    if min(x.strides) < 0 or KERNELS["matmul"] is not DEFAULTS["matmul"]:
        return _array(contiguous(x))
    item = x._buf.itemsize
    return np.ndarray(x.shape, x.dtype, buffer=x._buf, offset=x.offset * item, strides=[s * item for s in x.strides])


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy's rules: (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast;
    a 1-D left operand is a row vector, a 1-D right operand a column vector (that dim is then dropped)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be Tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape}: operands must have at least 1 dimension")
    a_in, b_in, a, b = a, b, _data(a), _data(b)
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a.reshape(1, a.shape[0])
    if b_vec:
        b = b.reshape(b.shape[0], 1)
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align ({K} != {K2})")
    dtype = result_dtype(a.dtype, b.dtype)
    if dtype == int64:
        dtype = float32
    if b.ndim == 2:  # (..., M, K) @ (K, N): fold the batch into the rows, one 2-D matmul
        batch = a.shape[:-2]
        a2 = _cast(a, dtype).reshape(prod(batch) * M, K)  # a view when the batch folds into the rows
        out = _new(batch + (M, N), dtype)
        if out.size:  # transposed operands (x @ w.T, a.T @ g) go in as strided views: packing reads them
            KERNELS["matmul"](_matrix(a2), _matrix(_cast(b, dtype)), _array(out.reshape(prod(batch) * M, N)))
    else:
        try:
            batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul")
        except ValueError:
            raise ValueError(f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast") from None
        B = prod(batch)
        a3 = contiguous(a.expand(*batch, M, K), dtype).reshape(B, M, K)
        b3 = contiguous(b.expand(*batch, K, N), dtype).reshape(B, K, N)
        out = _new(batch + (M, N), dtype)
        if out.size:
            KERNELS["matmul_batched"](_array(a3), _array(b3), _array(out.reshape(B, M, N)))
    if a_vec:
        out = out.reshape(*out.shape[:-2], N)
    if b_vec:
        out = out.reshape(*out.shape[:-1])
    if a_in._requires_grad or b_in._requires_grad:
        autograd.record("matmul", out, (a_in, b_in), a=a_in, b=b_in)
    return out


# ---- indexing and joining ---------------------------------------------------------------------------

def _index_tensor(index: Tensor, op: str) -> Tensor:
    if not isinstance(index, Tensor):
        index = Tensor(index, dtype=int64)
    if index.dtype != int64:
        raise TypeError(f"{op}: index must have dtype int64, got {index.dtype}")
    return index if index.is_contiguous() else contiguous(index)


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """out[..., k, ...] = x[..., index[..., k, ...], ...] along `axis`; index.shape equals x.shape except
    along `axis`, and out has index's shape."""
    axis = normalize_axis(axis, x.ndim, "gather")
    index = _index_tensor(index, "gather")
    if index.ndim != x.ndim or any(i != s for d, (i, s) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ValueError(f"gather: index shape {index.shape} must match input shape {x.shape} except on axis {axis}")
    x_in, x = x, (x if x.is_contiguous() else contiguous(x))
    out = _new(index.shape, x.dtype)
    if out.size:
        if x.shape[axis] == 0:
            raise IndexError(f"gather: axis {axis} of shape {x.shape} is empty")
        outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
        KERNELS["gather"](x._buf[x.offset:], index._buf[index.offset:], out._buf,
                          outer, x.shape[axis], index.shape[axis], inner)
    if x_in._requires_grad:
        autograd.record("gather", out, (x_in,), shape=x.shape, axis=axis, index=index)
    return out


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """Pick whole slices along `axis`: out shape = x.shape[:axis] + index.shape + x.shape[axis+1:]."""
    axis = normalize_axis(axis, x.ndim, "index_select")
    index = _index_tensor(index, "index_select")
    x_in, x = x, (x if x.is_contiguous() else contiguous(x))
    out = _new(x.shape[:axis] + index.shape + x.shape[axis + 1:], x.dtype)
    if out.size:
        if x.shape[axis] == 0:
            raise IndexError(f"index_select: axis {axis} of shape {x.shape} is empty")
        outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
        KERNELS["index_select"](x._buf[x.offset:], index._buf[index.offset:index.offset + index.size], out._buf,
                                outer, x.shape[axis], inner)
    if x_in._requires_grad:
        autograd.record("index_select", out, (x_in,), shape=x.shape, axis=axis, index=index)
    return out


def cat(tensors: list[Tensor] | tuple[Tensor, ...], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis; all other sizes must agree."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: need at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "cat")
    dtype = first.dtype
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(s != f for d, (s, f) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"cat: shapes {first.shape} and {t.shape} differ outside axis {axis}")
        dtype = result_dtype(dtype, t.dtype)
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    out = _new(tuple(shape), dtype)
    start, spans = 0, []
    for t in tensors:
        size = t.shape[axis]
        copy_into(t, out._narrow(axis, start, size))  # write into a view of the output slab
        spans.append((start, size))
        start += size
    if any(t._requires_grad for t in tensors):
        autograd.record("cat", out, tuple(tensors), axis=axis, spans=spans)
    return out


def stack(tensors: list[Tensor] | tuple[Tensor, ...], axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: need at least one tensor")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: shapes {tensors[0].shape} and {t.shape} differ")
    axis = normalize_axis(axis, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(axis) for t in tensors], axis)  # autograd: unsqueeze, then cat, each with its rule


# ---- cross-entropy and the fused backward kernels ---------------------------------------------------

def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """mean over rows of -log softmax(logits)[target]: logits (..., C), int64 targets of shape (...).

    Computed as log-sum-exp minus the target's logit, with the max subtracted inside the exp, so huge
    logits neither overflow nor lose the loss; the backward is softmax - onehot in one kernel."""
    logits, targets = as_float(logits), _index_tensor(targets, "cross_entropy")
    if logits.ndim == 0 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} must be the shape of logits {logits.shape} "
                         f"without its last (class) axis")
    x = contiguous(logits) if not logits.is_contiguous() else _data(logits)
    R, C = targets.size, logits.shape[-1]
    if R == 0 or C == 0:
        raise ValueError(f"cross_entropy: need at least one row and one class, got logits of shape {logits.shape}")
    x, t = x.reshape(R, C), targets.reshape(R)
    lse, losses = np.empty(R), np.empty(R)  # float64 scratch: the kernel's per-row results
    KERNELS["cross_entropy"](x._buf[x.offset:x.offset + x.size], t._buf[t.offset:t.offset + R], lse, losses)
    out = _cast(binary("mul", reduce("sum", Tensor._contiguous(losses, (R,)), None, False), 1.0 / R), x.dtype)
    if logits._requires_grad:
        autograd.record("cross_entropy", out, (logits,), x=x, targets=t, lse=Tensor._contiguous(lse, (R,)),
                        shape=logits.shape)
    return out


def cross_entropy_backward(ctx: autograd.Node, g: Tensor) -> Tensor:
    """d(loss)/d(logits) = g * (softmax(logits) - onehot(targets)) / rows, from the saved per-row lse."""
    x, t = ctx.x, ctx.targets
    dx = _new(x.shape, x.dtype)
    KERNELS["cross_entropy_backward"](x._buf[x.offset:x.offset + x.size], t._buf[t.offset:t.offset + t.size],
                                      ctx.lse._buf, float(g.item()) / t.size, dx._buf)
    return dx.reshape(ctx.shape)


def add_into(acc: Tensor, x: Tensor) -> None:
    """acc += x in place (acc fresh and contiguous, x of its shape and dtype): how backward sums gradients."""
    if acc.size:
        shape, (sa, sx) = coalesce(acc.shape, acc.strides, x.strides)
        KERNELS["add"](ints(shape), acc._buf, ints(sa), acc.offset, x._buf, ints(sx), x.offset, acc._buf)


def scatter_add(g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """Backward of gather: zeros of `shape`, then out[..., index[..., k, ...], ...] += g[..., k, ...]."""
    axis = normalize_axis(axis, len(shape), "scatter_add")
    g = g if g.is_contiguous() else contiguous(g)
    out = Tensor._contiguous(np.zeros(prod(shape), dtype=g.dtype), shape)
    if g.size:
        KERNELS["scatter_add"](g._buf[g.offset:], index._buf[index.offset:], out._buf, prod(shape[:axis]),
                               shape[axis], g.shape[axis], prod(shape[axis + 1:]))
    return out


def index_add(g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """Backward of index_select: zeros of `shape`, then out[..., index[k], ...] += g[..., k, ...]."""
    g = g if g.is_contiguous() else contiguous(g)
    out = Tensor._contiguous(np.zeros(prod(shape), dtype=g.dtype), shape)
    if g.size:
        KERNELS["index_add"](g._buf[g.offset:], index._buf[index.offset:index.offset + index.size], out._buf,
                             prod(shape[:axis]), shape[axis], prod(shape[axis + 1:]))
    return out


def softmax_backward(op: str, y: Tensor, g: Tensor, axis: int) -> Tensor:
    """dx for y = softmax(x) or log_softmax(x) along `axis`: rows moved last and made contiguous, one kernel."""
    scalar = y.ndim == 0
    if scalar:
        y, g = y.reshape(1), g.reshape(1)
    last = y.ndim - 1
    if axis != last:
        y, g = y.transpose(axis, last), g.transpose(axis, last)
    y = y if y.is_contiguous() else contiguous(y)
    g = g if g.is_contiguous() and g.dtype == y.dtype else contiguous(g, y.dtype)
    dx = _new(y.shape, y.dtype)
    if dx.size:
        N = y.shape[-1]
        KERNELS[op + "_backward"](y._buf[y.offset:], g._buf[g.offset:], dx.size // N, N, dx._buf)
    dx = dx.transpose(axis, last) if axis != last else dx
    return dx.reshape(()) if scalar else dx
