"""Elementwise kernels: out[i] = f(x[i]) and out[i] = f(a[i], b[i]) on strided buffers.

Every kernel gets the *coalesced* shape of the output (see `layout.coalesce`: at least one dim, size-1
dims dropped, mergeable dims merged) and, for each input, its flat buffer, its strides (broadcast dims
have stride 0) and its offset. The output is a fresh contiguous buffer of prod(shape) elements.

The loop: the output is a stack of "rows" along the last dim. For row r we find where it starts in each
input with `row_start` (unravel r over the leading dims), then walk the row with the last stride. A
contiguous tensor coalesces to a single row, so the common case is one flat loop; a (B*T, C) + (C,)
bias is B*T rows of length C.

Why not one generic loop taking `f` as an argument? numba can do it, but such a kernel cannot be cached
on disk, so every process would recompile. Each op therefore spells out its (short) loop.

Why serial? These kernels are memory-bound: on 2 cores a thread pool wins little on large arrays and
costs microseconds of start-up on the many small tensors of a training step.

Indices are wrapped in `u(...)` (np.uintp, an unsigned integer): a buffer position is never negative,
but numba cannot know that, and for a signed index it adds a "negative means from the end" check to
every access, which stops LLVM from vectorizing the loop. The cast removes the check (5x on a flat add).

Scalar helpers (`safe_div`, `safe_log`, ...) give IEEE results (inf, nan) instead of Python's
exceptions, so TEENYGRAD_JIT=0 (plain Python) and compiled runs agree.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad._jit import kernel

u = np.uintp  # unsigned index: see the module docstring

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@kernel
def row_start(r, shape, strides, offset):
    """Buffer position of the first element of row r: unravel r over shape[:-1] (row-major)."""
    pos = offset
    for d in range(shape.shape[0] - 2, -1, -1):
        pos += (r % shape[d]) * strides[d]
        r //= shape[d]
    return pos


# ---- scalar helpers: the math of one element ------------------------------------------------------

@kernel
def safe_exp(x):
    if x > 709.0:  # exp(709.79) overflows float64; Python would raise OverflowError
        return math.inf
    return math.exp(x)


@kernel
def safe_log(x):
    if x > 0.0:
        return math.log(x)
    if x == 0.0:
        return -math.inf
    return math.nan


@kernel
def safe_div(a, b):
    if b != 0.0:
        return a / b
    if a == 0.0 or a != a:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


@kernel
def safe_pow(a, b):
    if a < 0.0 and b != math.floor(b):
        return math.nan  # a real power of a negative base is undefined
    if a == 0.0 and b < 0.0:
        return math.inf
    return math.pow(a, b)


@kernel
def stable_sigmoid(x):
    """sigma(x) = 1/(1+e^-x), computed through e^-|x| so exp never overflows."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@kernel
def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


# ---- unary kernels: fn(shape, x, x_strides, x_offset, out) -----------------------------------------

@kernel
def neg(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = -x[u(ix + j * sx)]


@kernel
def exp(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = safe_exp(x[u(ix + j * sx)])


@kernel
def log(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = safe_log(x[u(ix + j * sx)])


@kernel
def sqrt(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            v = x[u(ix + j * sx)]
            out[u(o + j)] = math.sqrt(v) if v >= 0.0 else math.nan


@kernel
def tanh(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = math.tanh(x[u(ix + j * sx)])


@kernel
def sigmoid(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = stable_sigmoid(x[u(ix + j * sx)])


@kernel
def relu(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            v = x[u(ix + j * sx)]
            out[u(o + j)] = v if v > 0 else 0


@kernel
def gelu(shape, x, x_strides, x_offset, out):
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            out[u(o + j)] = gelu_tanh(x[u(ix + j * sx)])


@kernel
def abs(shape, x, x_strides, x_offset, out):  # noqa: A001 - the op's name
    n, sx = shape[-1], x_strides[-1]
    for r in range(out.size // n):
        ix, o = row_start(r, shape, x_strides, x_offset), r * n
        for j in range(n):
            v = x[u(ix + j * sx)]
            out[u(o + j)] = v if v >= 0 else -v


# ---- binary kernels: fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out) -----------------

@kernel
def add(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = a[u(ia + j * sa)] + b[u(ib + j * sb)]


@kernel
def sub(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = a[u(ia + j * sa)] - b[u(ib + j * sb)]


@kernel
def mul(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = a[u(ia + j * sa)] * b[u(ib + j * sb)]


@kernel
def div(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = safe_div(a[u(ia + j * sa)], b[u(ib + j * sb)])


@kernel
def pow(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):  # noqa: A001
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            out[u(o + j)] = safe_pow(a[u(ia + j * sa)], b[u(ib + j * sb)])


@kernel
def maximum(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            p, q = a[u(ia + j * sa)], b[u(ib + j * sb)]
            out[u(o + j)] = p if (p >= q or p != p) else q  # like numpy: nan wins


@kernel
def compare(op, shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    """Comparisons write 1 (true) or 0 (false). op: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge.

    One kernel for all six (the branch on `op` is the same for every element, so it predicts perfectly).
    """
    n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
    for r in range(out.size // n):
        ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
        o = r * n
        for j in range(n):
            p, q = a[u(ia + j * sa)], b[u(ib + j * sb)]
            if op == 0:
                t = p == q
            elif op == 1:
                t = p != q
            elif op == 2:
                t = p < q
            elif op == 3:
                t = p <= q
            elif op == 4:
                t = p > q
            else:
                t = p >= q
            out[u(o + j)] = 1 if t else 0


UNARY = {"neg": neg, "exp": exp, "log": log, "sqrt": sqrt, "tanh": tanh, "sigmoid": sigmoid,
         "relu": relu, "gelu": gelu, "abs": abs}
BINARY = {"add": add, "sub": sub, "mul": mul, "div": div, "pow": pow, "maximum": maximum}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
