"""Elementwise kernels on the GPU: one thread an output element, over strided, broadcast views (chapter 11).

The calling convention is the CPU kernels' (teenygrad/kernels/__init__.py): a strided operand is
(buffer, strides, offset), `shape` and the strides are int64 arrays, `out` is contiguous and row-major. Each thread
turns its flat output index into the operands' offsets, digit by digit of `shape`, as chapter 2's view did on the
CPU. The grid has a fixed number of blocks and each thread walks the output with a stride of the whole grid (a
grid-stride loop): any size runs on any launch, and neighbouring threads write neighbouring elements, so a warp's
32 stores land in one or two memory transactions (coalescing).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teenygrad.kernels.cuda.device import cuda
from teenygrad.kernels.cuda.launch import launch_config


@cuda.jit(device=True)
def strided_offset(flat, shape, strides, offset):
    """The buffer position of the element at row-major position `flat` of `shape`."""
    pos = offset
    for d in range(shape.shape[0] - 1, -1, -1):  # the last axis varies fastest
        pos += (flat % shape[d]) * strides[d]
        flat //= shape[d]
    return pos


def _unary_kernel(f: Callable) -> Callable:
    fn = cuda.jit(device=True)(f)

    @cuda.jit
    def kernel(shape, x, x_strides, x_offset, out):
        start = cuda.grid(1)
        for i in range(start, out.shape[0], cuda.gridsize(1)):
            out[i] = fn(x[strided_offset(i, shape, x_strides, x_offset)])
    return kernel


def _binary_kernel(f: Callable) -> Callable:
    fn = cuda.jit(device=True)(f)

    @cuda.jit
    def kernel(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
        start = cuda.grid(1)
        for i in range(start, out.shape[0], cuda.gridsize(1)):
            out[i] = fn(a[strided_offset(i, shape, a_strides, a_offset)],
                        b[strided_offset(i, shape, b_strides, b_offset)])
    return kernel


def _neg(x):
    return -x


def _exp(x):
    return math.exp(x)


def _relu(x):
    return x if x > 0 else x * 0


def _tanh(x):
    return math.tanh(x)


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


def _mul(a, b):
    return a * b


def _div(a, b):
    return a / b


def _maximum(a, b):
    return a if a >= b else b


UNARY_KERNELS = {"neg": _unary_kernel(_neg), "exp": _unary_kernel(_exp), "relu": _unary_kernel(_relu),
                 "tanh": _unary_kernel(_tanh)}
BINARY_KERNELS = {"add": _binary_kernel(_add), "sub": _binary_kernel(_sub), "mul": _binary_kernel(_mul),
                  "div": _binary_kernel(_div), "maximum": _binary_kernel(_maximum)}


def _launch(kernel, n: int, *args) -> None:
    grid, block = launch_config((n,))
    kernel[grid, block](*args)


def unary(name: str) -> Callable:
    """The launcher of unary op `name`: fn(shape, x, x_strides, x_offset, out) (the CPU kernels' convention)."""
    kernel = UNARY_KERNELS[name]

    def launch(shape, x, x_strides, x_offset, out) -> None:
        _launch(kernel, int(np.prod(shape)), shape, x, x_strides, x_offset, out)
    launch.__name__ = name
    return launch


def binary(name: str) -> Callable:
    """The launcher of binary op `name`: fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)."""
    kernel = BINARY_KERNELS[name]

    def launch(shape, a, a_strides, a_offset, b, b_strides, b_offset, out) -> None:
        _launch(kernel, int(np.prod(shape)), shape, a, a_strides, a_offset, b, b_strides, b_offset, out)
    launch.__name__ = name
    return launch


UNARY = {name: unary(name) for name in UNARY_KERNELS}
BINARY = {name: binary(name) for name in BINARY_KERNELS}
