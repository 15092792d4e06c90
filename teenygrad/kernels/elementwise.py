"""Elementwise kernels (chapters 2 and 3): out[i] = f(x[i]) and out[i] = f(a[i], b[i]) on strided buffers.

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
from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.jit import CHUNKS, kernel, parallel_pays, prange

u = np.uintp  # unsigned index: see the module docstring

# GELU, tanh approximation (as in GPT-2): gelu(x) = 0.5 x (1 + tanh(GELU_K (x + GELU_A x^3))). The only place
# these two constants are written; the float64 kernels and the vectorised float32 ones below read them.
GELU_K = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


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


# ---- exercise 3's pieces: the rest of the binary family, each a launcher that compiles its loop on first call -----
# A launcher, not a @kernel, so that a learner's function can be installed in its place (KERNELS["sub"] is it).
# Each loop is `add`'s: rows of the coalesced shape, each row's start in a and b from row_start, unsigned indices.

_COMPILED: dict[str, Callable] = {}  # name -> the compiled loop of a piece below


@exercise("03-kernels", "binary")
def sub(shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray, b_strides: np.ndarray,
        b_offset: int, out: np.ndarray) -> None:
    """The "sub" kernel (the binary convention of the module docstring): out[flat(i)] = a(i) - b(i)."""
    kern = _COMPILED.get("sub")
    if kern is None:
        @kernel
        def kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
            n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
            for r in range(out.size // n):
                ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
                o = r * n
                for j in range(n):
                    out[u(o + j)] = a[u(ia + j * sa)] - b[u(ib + j * sb)]

        _COMPILED["sub"] = kern
    kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


@exercise("03-kernels", "binary")
def mul(shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray, b_strides: np.ndarray,
        b_offset: int, out: np.ndarray) -> None:
    """The "mul" kernel: out[flat(i)] = a(i) * b(i)."""
    kern = _COMPILED.get("mul")
    if kern is None:
        @kernel
        def kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
            n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
            for r in range(out.size // n):
                ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
                o = r * n
                for j in range(n):
                    out[u(o + j)] = a[u(ia + j * sa)] * b[u(ib + j * sb)]

        _COMPILED["mul"] = kern
    kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


@exercise("03-kernels", "binary")
def pow(shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray,  # noqa: A001
        b_strides: np.ndarray, b_offset: int, out: np.ndarray) -> None:
    """The "pow" kernel: out[flat(i)] = a(i) ** b(i) with IEEE results where Python would raise (`safe_pow`): nan for
    a negative base and a fractional exponent, inf for 0 to a negative power. Floats only."""
    kern = _COMPILED.get("pow")
    if kern is None:
        @kernel
        def kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
            n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
            for r in range(out.size // n):
                ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
                o = r * n
                for j in range(n):
                    out[u(o + j)] = safe_pow(a[u(ia + j * sa)], b[u(ib + j * sb)])

        _COMPILED["pow"] = kern
    kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


@exercise("03-kernels", "binary")
def div(shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray, b_strides: np.ndarray,
        b_offset: int, out: np.ndarray) -> None:
    """The "div" kernel: out[flat(i)] = a(i) / b(i), with IEEE results where Python would raise (`safe_div`):
    x / 0 is inf with the sign of x times the sign of the zero, 0 / 0 and nan / 0 are nan. Floats only (the op
    casts integer operands to float32 first)."""
    kern = _COMPILED.get("div")
    if kern is None:
        @kernel
        def kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
            n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
            for r in range(out.size // n):
                ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
                o = r * n
                for j in range(n):
                    out[u(o + j)] = safe_div(a[u(ia + j * sa)], b[u(ib + j * sb)])

        _COMPILED["div"] = kern
    kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


@exercise("03-kernels", "binary")
def maximum(shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray,
            b_strides: np.ndarray, b_offset: int, out: np.ndarray) -> None:
    """The "maximum" kernel: out[flat(i)] = the larger of a(i) and b(i), and nan when either is nan (numpy's
    rule, which the max reduction follows too)."""
    kern = _COMPILED.get("maximum")
    if kern is None:
        @kernel
        def kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
            n, sa, sb = shape[-1], a_strides[-1], b_strides[-1]
            for r in range(out.size // n):
                ia, ib = row_start(r, shape, a_strides, a_offset), row_start(r, shape, b_strides, b_offset)
                o = r * n
                for j in range(n):
                    p, q = a[u(ia + j * sa)], b[u(ib + j * sb)]
                    out[u(o + j)] = p if (p >= q or p != p) else q  # p is nan, or the larger: p; else q

        _COMPILED["maximum"] = kern
    kern(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


@exercise("03-kernels", "binary")
def compare(op: int, shape: np.ndarray, a: np.ndarray, a_strides: np.ndarray, a_offset: int, b: np.ndarray,
            b_strides: np.ndarray, b_offset: int, out: np.ndarray) -> None:
    """The six comparison kernels in one: out[flat(i)] = 1 if a(i) OP b(i) else 0, in out's dtype (the operands'),
    where op 0..5 is ==, !=, <, <=, >, >= (`COMPARISONS`); a comparison with nan is false except !=.

    One compiled loop for all six: the branch on `op` goes the same way for every element, so the processor
    predicts it perfectly."""
    kern = _COMPILED.get("compare")
    if kern is None:
        @kernel
        def kern(op, shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
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

        _COMPILED["compare"] = kern
    kern(op, shape, a, a_strides, a_offset, b, b_strides, b_offset, out)


# ---- GELU: float32 data, contiguous, takes a vectorised path; anything else the strided kernels above ----
# math.tanh is a libm call per element, which stops the loop from becoming SIMD instructions; tanh32 is
# plain arithmetic. A GPT's MLP applies GELU to its widest activations, so this path is worth its lines.

fast = kernel(fastmath=True, numpy_errors=True)  # x / 0 -> inf, no zero-divisor branch: the loops vectorise
parallel = kernel(parallel=True, fastmath=True, numpy_errors=True)


# ---- exercise 9's piece: GELU and its derivative on any layout and dtype (float64, strided views); their scalar
# functions gelu_tanh and gelu_grad are defined inside, so nothing else in the package computes them.

@exercise("09-gpt", "gelu")
def gelu_strided(shape: np.ndarray, x: np.ndarray, x_strides: np.ndarray, x_offset: int, out: np.ndarray) -> None:
    """out[flat(i)] = gelu(x(i)), the unary convention of the module docstring, where
    gelu(x) = 0.5 x (1 + tanh(GELU_K (x + GELU_A x^3))), finite for every finite x (for |x| past ~1e102 x^3 is
    inf: tanh is then +-1 and gelu(x) is x or -0)."""
    kern = _COMPILED.get("gelu_strided")
    if kern is None:
        @kernel
        def gelu_tanh(x):
            return 0.5 * x * (1.0 + math.tanh(GELU_K * (x + GELU_A * x * x * x)))

        @kernel
        def kern(shape, x, x_strides, x_offset, out):
            n, sx = shape[-1], x_strides[-1]
            for r in range(out.size // n):
                ix, o = row_start(r, shape, x_strides, x_offset), r * n
                for j in range(n):
                    out[u(o + j)] = gelu_tanh(x[u(ix + j * sx)])

        _COMPILED["gelu_strided"] = kern
    kern(shape, x, x_strides, x_offset, out)


@exercise("09-gpt", "gelu")
def gelu_backward_strided(shape: np.ndarray, x: np.ndarray, x_strides: np.ndarray, x_offset: int, g: np.ndarray,
                          g_strides: np.ndarray, g_offset: int, out: np.ndarray) -> None:
    """out[flat(i)] = g(i) * gelu'(x(i)) (the binary convention, x first), where with t = tanh(k (x + a x^3)):
    gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2), k = GELU_K, a = GELU_A. Finite for every finite x:
    where t is +-1 exactly (|x| past ~19) the second term is 0, written so (x^2 overflows past ~1e154, and
    0 * inf would be nan); gelu' is then 1 or 0."""
    kern = _COMPILED.get("gelu_backward_strided")
    if kern is None:
        @kernel
        def gelu_grad(x):
            t = math.tanh(GELU_K * (x + GELU_A * x * x * x))
            if t * t == 1.0:
                return 0.5 * (1.0 + t)
            return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_A * x * x)

        @kernel
        def kern(shape, x, x_strides, x_offset, g, g_strides, g_offset, out):
            n, sx, sg = shape[-1], x_strides[-1], g_strides[-1]
            for r in range(out.size // n):
                ix, ig = row_start(r, shape, x_strides, x_offset), row_start(r, shape, g_strides, g_offset)
                o = r * n
                for j in range(n):
                    out[u(o + j)] = g[u(ig + j * sg)] * gelu_grad(x[u(ix + j * sx)])

        _COMPILED["gelu_backward_strided"] = kern
    kern(shape, x, x_strides, x_offset, g, g_strides, g_offset, out)


@fast
def tanh32(x):
    """tanh by a rational approximation (Eigen's float32 one, max error 4e-7), which the compiler can
    vectorise, unlike a call to libm's tanh per element."""
    x = min(max(x, np.float32(-7.9053111)), np.float32(7.9053111))
    x2 = x * x
    p = np.float32(-2.76076847742355e-16)
    p = p * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    q = np.float32(1.19825839466702e-06)
    q = q * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    return x * p / q


K32, A32 = np.float32(GELU_K), np.float32(GELU_A)


@fast
def gelu32_forward(x, out, lo, hi):
    """out = gelu(x) on elements lo..hi (float32, contiguous).
    (The loop runs over slices from 0: with x[i] for i in lo..hi the compiler must allow for negative
    indices, keeps numpy's wraparound check per element and does not vectorise; 5x slower measured.)"""
    x, out = x[lo:hi], out[lo:hi]
    for i in range(x.size):
        v = x[i]
        out[i] = np.float32(0.5) * v * (np.float32(1.0) + tanh32(K32 * (v + A32 * v * v * v)))


@parallel
def gelu32_forward_parallel(x, out):
    n = x.size
    for k in prange(CHUNKS):
        gelu32_forward(x, out, k * n // CHUNKS, (k + 1) * n // CHUNKS)


@fast
def gelu32_backward(x, g, out, lo, hi):
    """out = g * gelu'(x) on elements lo..hi (float32, contiguous); see gelu_backward_strided."""
    x, g, out = x[lo:hi], g[lo:hi], out[lo:hi]  # slices from 0: vectorises (see gelu32_forward)
    for i in range(x.size):
        v = x[i]
        t = tanh32(K32 * (v + A32 * v * v * v))
        out[i] = g[i] * (np.float32(0.5) * (np.float32(1.0) + t) + np.float32(0.5) * v * (np.float32(1.0) - t * t)
                         * K32 * (np.float32(1.0) + np.float32(3.0) * A32 * v * v))


@parallel
def gelu32_backward_parallel(x, g, out):
    n = x.size
    for k in prange(CHUNKS):
        gelu32_backward(x, g, out, k * n // CHUNKS, (k + 1) * n // CHUNKS)


def _flat32(shape, strides, x) -> bool:
    """Is this operand float32 and one contiguous run (coalesced to one dim of stride 1)?"""
    return x.dtype == np.float32 and shape.shape[0] == 1 and strides[0] == 1


def gelu(shape, x, x_strides, x_offset, out):
    """The "gelu" kernel (unary convention): the vectorised float32 loop when it applies, else gelu_strided."""
    if not _flat32(shape, x_strides, x):
        return gelu_strided(shape, x, x_strides, x_offset, out)
    x = x[x_offset:x_offset + out.size]
    if parallel_pays(8 * out.size):  # a tanh is about 8 element operations
        gelu32_forward_parallel(x, out)
    else:
        gelu32_forward(x, out, 0, out.size)


def gelu_backward(shape, x, x_strides, x_offset, g, g_strides, g_offset, out):
    """out = g * gelu'(x) (binary convention): vectorised for float32 runs, else gelu_backward_strided."""
    if not (_flat32(shape, x_strides, x) and _flat32(shape, g_strides, g)):
        return gelu_backward_strided(shape, x, x_strides, x_offset, g, g_strides, g_offset, out)
    x, g = x[x_offset:x_offset + out.size], g[g_offset:g_offset + out.size]
    if parallel_pays(8 * out.size):
        gelu32_backward_parallel(x, g, out)
    else:
        gelu32_backward(x, g, out, 0, out.size)


UNARY = {"neg": neg, "exp": exp, "log": log, "sqrt": sqrt, "tanh": tanh, "sigmoid": sigmoid,
         "relu": relu, "gelu": gelu, "abs": abs}
BINARY = {"add": add, "sub": sub, "mul": mul, "div": div, "pow": pow, "maximum": maximum}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
