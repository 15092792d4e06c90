"""Elementwise kernels on the GPU: one thread an output element, over strided, broadcast views (chapter 11).

The calling convention is the CPU kernels' (teenygrad/kernels/__init__.py): a strided operand is
(buffer, strides, offset), `shape` and the strides are int64 arrays (the launchers pass them on as tuples: `ints`),
`out` is contiguous and row-major. Each thread
turns its flat output index into the operands' offsets, digit by digit of `shape`, as chapter 2's view did on the
CPU. The grid has a fixed number of blocks and each thread walks the output with a stride of the whole grid (a
grid-stride loop): any size runs on any launch, and neighbouring threads write neighbouring elements, so a warp's
32 stores land in one or two memory transactions (coalescing).

The ops are the CPU table's, with its formulas and its IEEE answers (x / 0 = inf, log 0 = -inf, nan where numpy
gives nan): the unary neg exp log sqrt tanh sigmoid relu gelu abs, the binary add sub mul div pow maximum, the
comparisons eq ne lt le gt ge (1 or 0 in the operands' dtype) and gelu_backward (binary: x, then g). A kernel
compiles once per dtype on its first launch (float32, float64, int64 where the op allows it); constants such as
GELU's are float64 (the CPU's strided kernels compute in float64 too): an elementwise kernel waits on memory, not
on arithmetic, on a GPU with fast float64 (H100/H200: half float32's rate; a gaming GPU's 1/64 would show).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teenygrad.devices import Buffer
from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.elementwise import GELU_A, GELU_K  # GELU's constants, written once (the CPU's module)


@cuda.jit(device=True)
def strided_offset(flat, shape, strides, offset):
    """The buffer position of the element at row-major position `flat` of `shape`."""
    pos = offset
    for d in range(len(shape) - 1, -1, -1):  # the last axis varies fastest
        pos += (flat % shape[d]) * strides[d]
        flat //= shape[d]
    return pos


def _named(kernel: Callable, f: Callable) -> Callable:
    """kernel compiled, named after its formula f (`exp_kernel`): what profilers and `counted_launches` show."""
    kernel.__name__ = kernel.__qualname__ = f"{f.__name__.strip('_')}_kernel"
    return cuda.jit(kernel)


def _unary_kernel(f: Callable) -> Callable:
    fn = cuda.jit(device=True)(f)

    def kernel(shape, x, x_strides, x_offset, out):
        start = cuda.grid(1)
        for i in range(start, out.shape[0], cuda.gridsize(1)):
            out[i] = fn(x[strided_offset(i, shape, x_strides, x_offset)])
    return _named(kernel, f)


def _binary_kernel(f: Callable) -> Callable:
    fn = cuda.jit(device=True)(f)

    def kernel(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
        start = cuda.grid(1)
        for i in range(start, out.shape[0], cuda.gridsize(1)):
            out[i] = fn(a[strided_offset(i, shape, a_strides, a_offset)],
                        b[strided_offset(i, shape, b_strides, b_offset)])
    return _named(kernel, f)


# ---- the math of one element: the CPU kernels' formulas (teenygrad/kernels/elementwise.py), IEEE results where
# Python's math would raise (the simulator runs these as Python; a GPU never raises, but the answers must agree)

def _neg(x):
    return -x


def _exp(x):
    if x > 709.0:  # exp overflows float64 past 709.78: inf, as the CPU's safe_exp (Python's math would raise)
        return math.inf
    return math.exp(x)


def _log(x):
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else math.nan  # the CPU's safe_log: log 0 = -inf, log of a negative (or nan) = nan


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _tanh(x):
    return math.tanh(x)


def _sigmoid(x):
    if x >= 0:  # the CPU's stable_sigmoid: through e^-|x|, so exp never overflows
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _relu(x):
    return x if x > 0 else 0  # 0, not x * 0: relu(nan) is 0, as on the CPU


def _gelu(x):
    # the CPU's tanh approximation (GPT-2's), in float64 as the CPU's strided kernel computes it
    return 0.5 * x * (1.0 + math.tanh(GELU_K * (x + GELU_A * x * x * x)))


def _abs(x):
    return x if x >= 0 else -x


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


def _mul(a, b):
    return a * b


def _div(a, b):
    if b != 0:
        return a / b
    if a == 0 or a != a:  # the CPU's safe_div: 0 / 0 and nan / 0 are nan, x / +-0 is +-inf
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _pow(a, b):
    if a < 0 and b != math.floor(b):  # the CPU's safe_pow: a real power of a negative base is nan
        return math.nan
    if a == 0 and b < 0:
        return math.inf
    return math.pow(a, b)


def _maximum(a, b):
    return a if (a >= b or a != a) else b  # nan when either is nan (numpy's rule, and the CPU's)


def _gelu_backward(x, g):
    # g * gelu'(x), the CPU's gelu_grad: where t is +-1 exactly the second term is 0, written so (x^2 overflows
    # past ~1e154, and 0 * inf would be nan)
    t = math.tanh(GELU_K * (x + GELU_A * x * x * x))
    if t * t == 1.0:
        return g * (0.5 * (1.0 + t))
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_A * x * x))


# comparisons write 1 or 0, converted to out's dtype (the operands'), as on the CPU; with nan all are false but ne
def _eq(a, b):
    return 1 if a == b else 0


def _ne(a, b):
    return 1 if a != b else 0


def _lt(a, b):
    return 1 if a < b else 0


def _le(a, b):
    return 1 if a <= b else 0


def _gt(a, b):
    return 1 if a > b else 0


def _ge(a, b):
    return 1 if a >= b else 0


UNARY_KERNELS = {name: _unary_kernel(f) for name, f in
                 {"neg": _neg, "exp": _exp, "log": _log, "sqrt": _sqrt, "tanh": _tanh, "sigmoid": _sigmoid,
                  "relu": _relu, "gelu": _gelu, "abs": _abs}.items()}
BINARY_KERNELS = {name: _binary_kernel(f) for name, f in
                  {"add": _add, "sub": _sub, "mul": _mul, "div": _div, "pow": _pow, "maximum": _maximum,
                   "eq": _eq, "ne": _ne, "lt": _lt, "le": _le, "gt": _gt, "ge": _ge,
                   "gelu_backward": _gelu_backward}.items()}

# Threads a block: 256 on a GPU (8 warps; enough blocks fit on a multiprocessor to hide memory latency), 32 in the
# simulator, which runs every thread as a Python thread. The grid is capped: past MAX_BLOCKS blocks the grid-stride
# loop covers the rest (a GPU holds ~2048 threads a multiprocessor, 132 of them on an H100/H200: 1024 blocks of 256
# fill it; in the simulator a small cap means fewer Python threads started, and the tests' shapes go round the loop).
THREADS = 32 if SIMULATED else 256
MAX_BLOCKS = 4 if SIMULATED else 1024


def flat_config(n: int) -> tuple[int, int]:
    """(blocks, threads) for a grid-stride loop over n items: no idle block, at most MAX_BLOCKS."""
    return max(1, min(-(-n // THREADS), MAX_BLOCKS)), THREADS


def _launch(kernel: Callable, n: int, *args: object) -> None:
    blocks, threads = flat_config(n)
    kernel[blocks, threads](*args)


def ints(values: np.ndarray | tuple[int, ...]) -> tuple[int, ...]:
    """A shape or strides (an int64 array, as the op layer hands them) as a tuple of ints, which a kernel receives
    by value, in its arguments: a numpy array would be copied to the GPU and back around every launch, and the copy
    back waits for the kernel. (numba compiles a kernel once for each tuple length: once a rank.)"""
    return tuple(int(v) for v in values)


def unary(name: str) -> Callable:
    """The launcher of unary op `name`: fn(shape, x, x_strides, x_offset, out) (the CPU kernels' convention)."""
    kernel = UNARY_KERNELS[name]

    def launch(shape: np.ndarray, x: Buffer, x_strides: np.ndarray, x_offset: int, out: Buffer) -> None:
        _launch(kernel, int(np.prod(shape)), ints(shape), x, ints(x_strides), x_offset, out)
    launch.__name__ = name
    return launch


def binary(name: str) -> Callable:
    """The launcher of binary op `name`: fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)."""
    kernel = BINARY_KERNELS[name]

    def launch(shape: np.ndarray, a: Buffer, a_strides: np.ndarray, a_offset: int, b: Buffer, b_strides: np.ndarray,
               b_offset: int, out: Buffer) -> None:
        _launch(kernel, int(np.prod(shape)), ints(shape), a, ints(a_strides), a_offset, b, ints(b_strides), b_offset,
                out)
    launch.__name__ = name
    return launch


UNARY = {name: unary(name) for name in UNARY_KERNELS}
BINARY = {name: binary(name) for name in ("add", "sub", "mul", "div", "pow", "maximum")}
COMPARISONS = {name: binary(name) for name in ("eq", "ne", "lt", "le", "gt", "ge")}
GELU_BACKWARD = binary("gelu_backward")
