"""Elementwise ops (chapters 2 and 6): out = f(x) and out = f(a, b), with numpy broadcasting. Each op's
forward is one kernel call (`teenygrad.kernels.elementwise`); its gradient rule is one line in `RULES` below.

A rule turns g = dL/d(out) into dL/d(input) for each input (the calling convention is in
`teenygrad.autograd`). For a binary op the inputs were broadcast to the output's shape, so each partial is
summed back down to its input's shape (`unbroadcast`, the gradient of broadcasting).
"""
from __future__ import annotations

from teenygrad import autograd, devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.kernels.layout import broadcast_shapes, broadcast_strides, coalesce, ints, prod
from teenygrad.ops.buffers import Scalar, as_float, cast, new, result_dtype, scalar_tensor
from teenygrad.ops.movement import unbroadcast
from teenygrad.tensor import Tensor, float32, int64

FLOAT_ONLY_UNARY = {"exp", "log", "sqrt", "tanh", "sigmoid", "gelu"}
FLOAT_ONLY_BINARY = {"div", "pow"}
NOT_DIFFERENTIABLE = {"eq", "ne", "lt", "le", "gt", "ge", "gelu_backward"}


def unary(op: str, x: Tensor) -> Tensor:
    """out = f(x), elementwise."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.unary(op, x)
    if op in FLOAT_ONLY_UNARY:
        x = as_float(x)
    out = new(x.shape, x.dtype, x.device)
    if out._buf.size:
        if x.is_contiguous():
            shape, sx = (out._buf.size,), (1,)
        else:
            shape, (sx,) = coalesce(x.shape, x.strides)
        on(x.device)[op](ints(shape), x._buf, ints(sx), x.offset, out._buf)
    if x._requires_grad:
        autograd.record(op, out, (x,), x=x, out=out)
    return out


def binary(op: str, a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    """out = f(a, b), elementwise, with numpy broadcasting. One of a, b may be a Python scalar."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.binary(op, a, b)
    if not isinstance(a, Tensor):
        a = scalar_tensor(a, b, op)
    elif not isinstance(b, Tensor):
        b = scalar_tensor(b, a, op)
    a_in, b_in = a, b
    device = devices.same(op, a, b)
    dtype = result_dtype(a.dtype, b.dtype)
    if dtype == int64 and op in FLOAT_ONLY_BINARY:
        dtype = float32
    a, b = cast(a, dtype), cast(b, dtype)
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
    out = new(out_shape, dtype, device)
    if out._buf.size:
        on(device)[op](ints(shape), a._buf, ints(sa), a.offset, b._buf, ints(sb), b.offset, out._buf)
    if (a_in._requires_grad or b_in._requires_grad) and op not in NOT_DIFFERENTIABLE:
        autograd.record(op, out, (a_in, b_in), a=a_in, b=b_in, out=out)
    return out


def add_into(acc: Tensor, x: Tensor) -> None:
    """acc += x in place (acc fresh and contiguous, x of its shape and dtype): how backward sums gradients."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.add_into(acc, x)
    if acc.size:
        shape, (sa, sx) = coalesce(acc.shape, acc.strides, x.strides)
        on(acc.device)["add"](ints(shape), acc._buf, ints(sa), acc.offset, x._buf, ints(sx), x.offset, acc._buf)


# ---- the rules exercise 6 asks for (part "elementwise_rules"); chapter 6 writes neg, exp, log, add, sub, mul ----
# A unary rule reads ctx.x (the input) and ctx.out (the output) and returns (dx,); a binary rule reads ctx.a, ctx.b
# (the inputs *before* broadcasting), ctx.out and ctx.needs, and returns (da, db), each summed back to its input's
# shape, or False for an input that needs no gradient.

@exercise("06-tensor-autograd", "elementwise_rules")
def sqrt_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = sqrt(x): dx = g / (2 sqrt(x)) = g / (2 out)."""
    return (g / (ctx.out * 2),)


@exercise("06-tensor-autograd", "elementwise_rules")
def tanh_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = tanh(x): dx = g (1 - tanh^2 x) = g (1 - out^2)."""
    return (g * (1 - ctx.out * ctx.out),)


@exercise("06-tensor-autograd", "elementwise_rules")
def sigmoid_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = s(x) = 1 / (1 + e^-x): dx = g s(x) (1 - s(x)) = g out (1 - out)."""
    return (g * ctx.out * (1 - ctx.out),)


@exercise("06-tensor-autograd", "elementwise_rules")
def relu_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = max(x, 0): dx = g where x > 0, else 0 (0 at the kink x = 0)."""
    return (g * (ctx.x > 0),)  # comparisons give 0/1 tensors of x's dtype


@exercise("06-tensor-autograd", "elementwise_rules")
def abs_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = |x|: dx = g sign(x), with sign(0) = 0."""
    return (g * ((ctx.x > 0) - (ctx.x < 0)),)


@exercise("06-tensor-autograd", "elementwise_rules")
def div_backward(ctx: autograd.Node, g: Tensor) -> tuple:
    """out = a / b, broadcast: da = g / b, db = -g a / b^2 = -g out / b, each summed back to its input's shape."""
    da = ctx.needs[0] and unbroadcast(g / ctx.b, ctx.a.shape)
    db = ctx.needs[1] and unbroadcast(-g * ctx.out / ctx.b, ctx.b.shape)
    return da, db


@exercise("06-tensor-autograd", "elementwise_rules")
def pow_backward(ctx: autograd.Node, g: Tensor) -> tuple:
    """out = a ** b, both tensors, broadcast: da = g b a^(b-1), db = g a^b log a (= g out log a), each summed
    back to its input's shape; an input that needs no gradient gets False (for x ** 2 the exponent is a constant,
    and log of a negative base is nan: never compute it then)."""
    da = ctx.needs[0] and unbroadcast(g * ctx.b * ctx.a ** (ctx.b - 1), ctx.a.shape)
    db = ctx.needs[1] and unbroadcast(g * ctx.out * ctx.a.log(), ctx.b.shape)
    return da, db


@exercise("06-tensor-autograd", "elementwise_rules")
def maximum_backward(ctx: autograd.Node, g: Tensor) -> tuple:
    """out = maximum(a, b), broadcast: g goes to the larger operand, to a on a tie (a >= b), summed back to
    each input's shape."""
    da = ctx.needs[0] and unbroadcast(g * (ctx.a >= ctx.b), ctx.a.shape)  # comparisons give 0/1 tensors
    db = ctx.needs[1] and unbroadcast(g * (ctx.a < ctx.b), ctx.b.shape)
    return da, db


RULES = {
    # ---- unary: out = f(x);  dx = g * f'(x) -----------------------------------------------------------
    "neg": lambda ctx, g: (-g,),                                             # d(-x) = -1
    "exp": lambda ctx, g: (g * ctx.out,),                                    # d e^x = e^x = out
    "log": lambda ctx, g: (g / ctx.x,),                                      # d log x = 1/x
    "sqrt": sqrt_backward,                                                   # d sqrt(x) = 1 / (2 sqrt(x))
    "tanh": tanh_backward,                                                   # d tanh x = 1 - tanh^2 x
    "sigmoid": sigmoid_backward,                                             # d s(x) = s(x) (1 - s(x))
    "relu": relu_backward,                                                   # 1 where x > 0, else 0 (0 at x = 0)
    "gelu": lambda ctx, g: (binary("gelu_backward", ctx.x, g),),             # g * gelu'(x), one kernel
    "abs": abs_backward,                                                     # sign(x) (0 at x = 0)
    # ---- binary, with broadcasting: each partial is summed back to its input's shape -----------------------
    "add": lambda ctx, g: (ctx.needs[0] and unbroadcast(g, ctx.a.shape),     # d(a+b)/da = 1
                           ctx.needs[1] and unbroadcast(g, ctx.b.shape)),    # d(a+b)/db = 1
    "sub": lambda ctx, g: (ctx.needs[0] and unbroadcast(g, ctx.a.shape),     # d(a-b)/da = 1
                           ctx.needs[1] and unbroadcast(-g, ctx.b.shape)),   # d(a-b)/db = -1
    "mul": lambda ctx, g: (ctx.needs[0] and unbroadcast(g * ctx.b, ctx.a.shape),   # d(ab)/da = b
                           ctx.needs[1] and unbroadcast(g * ctx.a, ctx.b.shape)),  # d(ab)/db = a
    "div": div_backward,          # 1/b, and -a/b^2 for the divisor
    "pow": pow_backward,          # b a^(b-1), and a^b log a for the exponent
    "maximum": maximum_backward,  # g to the larger operand, to a on a tie
}
