"""The op layer's launchers, lazily (chapter 10): each builds graph nodes where the eager launcher runs a kernel.

While a compiled function is traced, every launcher of `teenygrad.ops` hands its arguments here (the views of
`teenygrad.tensor_views` go to `teenygrad.compiler.capture.views`). Each function below has the eager launcher's name,
arguments, checks and result dtype, and records the *same* autograd node (op name and saved values), so chapter
6's engine and the gradient rules beside each op run unchanged on lazy tensors: their Tensor ops come back here
and become graph nodes too. That is how `loss.backward()` is captured. A rule that calls a kernel directly has
a lazy twin (`softmax_backward`, `scatter_add`, `gelu_backward` here; `into_zeros` in `views.py`); ops whose
rules are kernels or exercise pieces (cross-entropy, the fused transformer ops, index_select) are written from
other ops instead, in `teenygrad.compiler.capture.nn`, so autograd records their pieces.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from teenygrad import autograd
from teenygrad.compiler import ir
from teenygrad.compiler.capture.lazy import (
    CaptureError,
    LazyTensor,
    bcast,
    binop,
    c,
    cast,
    constant,
    current,
    first_argmax,
    node_of,
    where,
    wrap,
)
from teenygrad.kernels.elementwise import GELU_A, GELU_K
from teenygrad.kernels.layout import broadcast_shapes, normalize_axes, normalize_axis, prod
from teenygrad.ops.buffers import as_float, result_dtype
from teenygrad.ops.elementwise import FLOAT_ONLY_BINARY, FLOAT_ONLY_UNARY, NOT_DIFFERENTIABLE
from teenygrad.ops.movement import check_cat
from teenygrad.tensor import Tensor, float32, int64

Scalar = int | float


# ---- elementwise --------------------------------------------------------------------------------------------

def _gelu(x: ir.Node) -> ir.Node:
    """0.5 x (1 + tanh(k (x + a x^3))), as the kernel writes it."""
    inner = ir.binary("mul", c(GELU_K, x), ir.binary("add", x, ir.binary("mul", ir.binary("mul", ir.binary(
        "mul", c(GELU_A, x), x), x), x)))
    return ir.binary("mul", ir.binary("mul", c(0.5, x), x), ir.binary("add", c(1.0, x), ir.unary("tanh", inner)))


def _sigmoid(x: ir.Node) -> ir.Node:
    """1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: exp never overflows where it is used."""
    z = ir.unary("exp", x)
    low = ir.binary("div", z, ir.binary("add", c(1.0, x), z))
    high = ir.unary("recip", ir.binary("add", c(1.0, x), ir.unary("exp", ir.unary("neg", x))))
    return ir.where(ir.binary("lt", x, c(0, x)), low, high)


_UNARY = {
    "neg": lambda x: ir.unary("neg", x), "exp": lambda x: ir.unary("exp", x), "log": lambda x: ir.unary("log", x),
    "sqrt": lambda x: ir.unary("sqrt", x), "tanh": lambda x: ir.unary("tanh", x), "sigmoid": _sigmoid,
    "relu": lambda x: ir.where(ir.binary("lt", c(0, x), x), x, c(0, x)),            # v if v > 0 else 0
    "abs": lambda x: ir.where(ir.binary("lt", x, c(0, x)), ir.unary("neg", x), x),  # v if v >= 0 else -v
    "gelu": _gelu,
}


def unary(op: str, x: Tensor) -> Tensor:
    if op in FLOAT_ONLY_UNARY:
        x = as_float(x)
    out = wrap(_UNARY[op](node_of(x)))
    if x._requires_grad:
        autograd.record(op, out, (x,), x=x, out=out)
    return out


def _gelu_backward(x: ir.Node, g: ir.Node) -> ir.Node:
    """g * gelu'(x) = g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2)), t = tanh(k (x + a x^3))."""
    m = lambda a, b: ir.binary("mul", a, b)  # noqa: E731
    t = ir.unary("tanh", m(c(GELU_K, x), ir.binary("add", x, m(m(m(c(GELU_A, x), x), x), x))))
    left = m(c(0.5, x), ir.binary("add", c(1.0, x), t))
    right = m(m(m(m(c(0.5, x), x), ir.binary("sub", c(1.0, x), m(t, t))), c(GELU_K, x)),
              ir.binary("add", c(1.0, x), m(m(c(3.0 * GELU_A, x), x), x)))
    return m(g, ir.binary("add", left, right))


def _compare(op: str, a: ir.Node, b: ir.Node) -> ir.Node:
    """Comparisons give 0/1 in the operands' dtype (teenygrad's rule), built from lt and eq."""
    f = lambda n: cast(n, a.dtype)  # noqa: E731
    if op == "eq":
        return f(ir.binary("eq", a, b))
    if op == "ne":
        return f(ir.binary("eq", ir.binary("eq", a, b), ir.const(False, "bool", a.shape)))
    if op in ("lt", "gt"):
        return f(ir.binary("lt", a, b) if op == "lt" else ir.binary("lt", b, a))
    less = ir.binary("lt", a, b) if op == "le" else ir.binary("lt", b, a)
    return ir.binary("add", f(less), f(ir.binary("eq", a, b)))


def scalar_operand(value: object, like: Tensor, op: str) -> Tensor:
    """A Python number (or a Python float passed to the compiled function) as a 0-d tensor of like's dtype."""
    dtype = like.dtype
    if isinstance(value, LazyTensor):  # a weak scalar
        if dtype == int64:
            dtype = float32
        return wrap(cast(value._node, dtype))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, np.generic) and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise TypeError(f"{op}: unsupported operand of type {type(value).__name__}")
    if dtype == int64 and isinstance(value, float):
        dtype = float32
    return wrap(ir.const(value, str(dtype), ()))


def _is_weak(x: object) -> bool:
    return not isinstance(x, Tensor) or getattr(x, "_weak", False)


def binary(op: str, a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    weak_a, weak_b = _is_weak(a), _is_weak(b)
    if weak_a and not weak_b:
        a = scalar_operand(a, b, op)
    elif weak_b and not weak_a:
        b = scalar_operand(b, a, op)
    elif weak_a and weak_b:  # a Python float argument and a number: float64, and the result stays a "number"
        a, b = (x if isinstance(x, Tensor) else wrap(ir.const(float(x), "float64", ())) for x in (a, b))
    dtype = result_dtype(a.dtype, b.dtype)
    if dtype == int64 and op in FLOAT_ONLY_BINARY:
        dtype = float32
    shape = broadcast_shapes(a.shape, b.shape, op)
    x, y = bcast(cast(node_of(a), dtype), shape), bcast(cast(node_of(b), dtype), shape)
    if op == "gelu_backward":
        node = _gelu_backward(x, y)
    elif op in ("eq", "ne", "lt", "le", "gt", "ge"):
        node = _compare(op, x, y)
    else:
        node = ir.binary(op, x, y)
    out = wrap(node, weak=weak_a and weak_b)
    if (a._requires_grad or b._requires_grad) and op not in NOT_DIFFERENTIABLE:
        autograd.record(op, out, (a, b), a=a, b=b, out=out)
    return out


def add_into(acc: Tensor, x: Tensor) -> None:
    """The backward pass summing gradients: acc is its own fresh lazy sum, so it can take the new node."""
    if type(acc) is not LazyTensor:
        raise CaptureError("internal: backward accumulated into a concrete tensor during a trace")
    acc._node = ir.binary("add", acc._node, cast(node_of(x), acc.dtype))


# ---- reductions -----------------------------------------------------------------------------------------------

def reduce(op: str, x: Tensor, axis: int | tuple[int, ...] | None, keepdim: bool) -> Tensor:
    axes = normalize_axes(axis, x.ndim, op)
    if prod(tuple(x.shape[d] for d in axes)) == 0 and op != "sum":
        raise ValueError(f"{op}: cannot reduce over an empty axis (shape {x.shape}, axis {axis})")
    n = node_of(x)
    r = first_argmax(n, axes) if op == "argmax" else ir.reduce(op, n, axes)
    if not keepdim:
        r = ir.reshape(r, tuple(s for d, s in enumerate(x.shape) if d not in axes))
    out = wrap(r)
    if x._requires_grad and op != "argmax":
        autograd.record(op, out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape)
    return out


def mean(x: Tensor, axis: int | tuple[int, ...] | None, keepdim: bool) -> Tensor:
    x = as_float(x)
    axes = normalize_axes(axis, x.ndim, "mean")
    n = prod(tuple(x.shape[d] for d in axes))
    out = binary("mul", reduce("sum", x.detach(), axes, keepdim), 1.0 / n if n else float("nan"))
    if x._requires_grad:
        autograd.record("mean", out, (x,), x=x, axes=axes, keepdim=keepdim, shape=x.shape, scale=1.0 / max(n, 1))
    return out


def softmax(op: str, x: Tensor, axis: int) -> Tensor:
    """softmax = e / sum e and log_softmax = z - log(sum e), with z = x - max and e = exp(z), along `axis`."""
    x = as_float(x)
    axis = normalize_axis(axis, x.ndim, op)
    n = node_of(x)
    if not x.shape:
        n = ir.reshape(n, (1,))
    z = binop("sub", n, ir.reduce("max", n, (axis,)))
    e = ir.unary("exp", z)
    s = ir.reduce("sum", e, (axis,))
    y = binop("div", e, s) if op == "softmax" else binop("sub", z, ir.unary("log", s))
    out = wrap(ir.reshape(y, x.shape))
    if x._requires_grad:
        autograd.record(op, out, (x,), out=out, axis=axis)
    return out


def softmax_backward(op: str, y: Tensor, g: Tensor, axis: int) -> Tensor:
    """dx = y (g - sum(g y)) for softmax, g - e^y sum(g) for log_softmax (the kernels' formulas)."""
    yn, gn = node_of(y), cast(node_of(g), y.dtype)
    if not y.shape:
        yn, gn = ir.reshape(yn, (1,)), ir.reshape(gn, (1,))
    if op == "softmax":
        dx = ir.binary("mul", yn, binop("sub", gn, ir.reduce("sum", ir.binary("mul", gn, yn), (axis,))))
    else:
        dx = ir.binary("sub", gn, binop("mul", ir.unary("exp", yn), ir.reduce("sum", gn, (axis,))))
    return wrap(ir.reshape(dx, y.shape))


# ---- matmul, copies ----------------------------------------------------------------------------------------------

def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be Tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape}: operands must have at least 1 dimension")
    dtype = result_dtype(a.dtype, b.dtype)
    dtype = float32 if dtype == int64 else dtype
    x, y = cast(node_of(a), dtype), cast(node_of(b), dtype)
    x = ir.reshape(x, (1, a.shape[0])) if a.ndim == 1 else x
    y = ir.reshape(y, (b.shape[0], 1)) if b.ndim == 1 else y
    (M, K), (K2, N) = x.shape[-2:], y.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {x.shape} and {y.shape} do not align ({K} != {K2})")
    if len(y.shape) == 2:  # (..., M, K) @ (K, N): the batch folds into the rows, one 2-D product
        batch = x.shape[:-2]
        out = ir.reshape(ir.matmul(ir.reshape(x, (prod(batch) * M, K)), y), batch + (M, N))
    else:
        try:
            batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], "matmul")
        except ValueError:
            raise ValueError(f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast") from None
        out = ir.matmul(bcast(x, batch + (M, K)), bcast(y, batch + (K, N)))
    if a.ndim == 1:
        out = ir.reshape(out, out.shape[:-2] + (N,))
    if b.ndim == 1:
        out = ir.reshape(out, out.shape[:-1])
    res = wrap(out)
    if a._requires_grad or b._requires_grad:
        autograd.record("matmul", res, (a, b), a=a, b=b)
    return res


def copy(x: Tensor, dtype: np.dtype | None = None) -> Tensor:
    """A copy is the same value in a graph: a new tensor on the node (cast if asked). Records nothing."""
    return wrap(cast(node_of(x), dtype or x.dtype))


# ---- indexing and joining --------------------------------------------------------------------------------------

def index_tensor(index: Tensor | Sequence[int], op: str) -> Tensor:
    if not isinstance(index, Tensor):
        index = constant(np.asarray(index, dtype=np.int64))  # a literal list: part of the program
    if index.dtype != int64:
        raise TypeError(f"{op}: index must have dtype int64, got {index.dtype}")
    return index


def _normalized(idx: ir.Node, n: int) -> ir.Node:
    """Negative indices count from the end (as the kernels' checked_index). An index out of range cannot be
    seen while tracing, so the graph also counts them; the call raises IndexError when the count is not 0."""
    low, high = ir.binary("lt", idx, c(-n, idx)), ir.binary("lt", c(n - 1, idx), idx)
    bad = ir.binary("add", cast(low, "int64"), cast(high, "int64"))
    current().checks.append(ir.reshape(ir.reduce("sum", bad, range(len(idx.shape))), ()))
    return ir.where(ir.binary("lt", idx, c(0, idx)), ir.binary("add", idx, c(n, idx)), idx)


def one_hot(idx: ir.Node, n: int) -> ir.Node:
    """bool (..., n): position j of row r is idx[r] == j."""
    shape = idx.shape + (n,)
    column = bcast(ir.reshape(_normalized(idx, n), idx.shape + (1,)), shape)
    return ir.binary("eq", column, ir.arange(shape, len(idx.shape)))


def _axis_last(node: ir.Node, axis: int) -> tuple[ir.Node, tuple[int, ...]]:
    order = tuple(d for d in range(len(node.shape)) if d != axis) + (axis,)
    return ir.permute(node, order), order


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(order))


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    axis = normalize_axis(axis, x.ndim, "gather")
    index = index_tensor(index, "gather")
    if index.ndim != x.ndim or any(i != s for d, (i, s) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ValueError(f"gather: index shape {index.shape} must match input shape {x.shape} except on axis {axis}")
    xp, order = _axis_last(node_of(x), axis)
    ip, _ = _axis_last(node_of(index), axis)
    n = x.shape[axis]
    hit = one_hot(ip, n)                                                     # (..., K, n)
    picked = where(hit, ir.reshape(xp, xp.shape[:-1] + (1, n)), ir.const(0, xp.dtype, ()))    # (..., K, n)
    out = wrap(ir.permute(ir.reshape(ir.reduce("sum", picked, (len(hit.shape) - 1,)), ip.shape), _inverse(order)))
    if x._requires_grad:
        autograd.record("gather", out, (x,), shape=x.shape, axis=axis, index=index)
    return out


def scatter_add(g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """Backward of gather: out[..., index[..., k, ...], ...] += g[..., k, ...] as a sum over a one-hot."""
    axis = normalize_axis(axis, len(shape), "scatter_add")
    gp, order = _axis_last(node_of(g), axis)
    ip, _ = _axis_last(node_of(index), axis)
    n = shape[axis]
    hit = one_hot(ip, n)                                                           # (..., K, n)
    spread = where(hit, ir.reshape(gp, gp.shape + (1,)), ir.const(0, gp.dtype, ()))
    summed = ir.reduce("sum", spread, (len(hit.shape) - 2,))                       # (..., 1, n)
    return wrap(ir.permute(ir.reshape(summed, gp.shape[:-1] + (n,)), _inverse(order)))


def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors, axis, dtype = check_cat(tensors, axis)
    out = wrap(ir.cat([cast(node_of(t), dtype) for t in tensors], axis))
    if any(t._requires_grad for t in tensors):
        starts = np.cumsum([0] + [t.shape[axis] for t in tensors])
        autograd.record("cat", out, tuple(tensors), axis=axis, spans=[(int(s), t.shape[axis]) for s, t in
                                                                      zip(starts, tensors)])
    return out


def full(shape: tuple[int, ...], value: Scalar, dtype: np.dtype) -> Tensor:
    return wrap(ir.const(value, str(dtype), tuple(shape)))


def arange(start: Scalar, stop: Scalar, step: Scalar, dtype: np.dtype) -> Tensor:
    n = len(np.arange(start, stop, step))
    i = ir.arange((n,), 0)
    if dtype == int64:
        return wrap(ir.binary("add", ir.binary("mul", i, ir.const(step, "int64", (n,))),
                              ir.const(start, "int64", (n,))))
    f = ir.unary("cast", i, "float64")  # as numpy: start + i * step in float64, then the dtype
    return wrap(cast(ir.binary("add", ir.binary("mul", f, c(float(step), f)), c(float(start), f)), dtype))


def from_data() -> None:
    raise CaptureError("tensor(data) inside a compiled function: values from Python or numpy would be frozen into the "
                       "compiled program, and data that changes between calls would silently be stale. Pass the "
                       "data in as a Tensor argument, or create the tensor outside the function")


def random(method: str, shape: tuple[int, ...], dtype: np.dtype, generator: np.random.Generator | None) -> Tensor:
    """rand / randn: numbers the compiled step draws (in numpy, from the same generator, in the same order as the
    eager function) at each call and passes in as an input buffer."""
    return wrap(current().random(method, shape, dtype, generator))
