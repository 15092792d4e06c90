"""What every op does around its kernel (chapter 2): pick the result dtype, allocate the output, and hand
the kernel flat buffers laid out the way its calling convention says (`teenygrad.kernels`).

Also the launchers of the one kernel every family needs, `copy` (strided copy and dtype cast): `copy_into`,
`copy` and `contiguous`.

Type promotion: float64 with anything -> float64; float32 with float32 or int64 -> float32;
int64 with int64 -> int64. A Python scalar takes the tensor's dtype (a Python float with an int64
tensor gives float32). Ops that only make sense on reals (exp, log, ..., div, pow, mean, softmax) turn
int64 inputs into float32.
"""
from __future__ import annotations

import numpy as np

from teenygrad import devices, tracing
from teenygrad.kernels import on
from teenygrad.kernels.layout import broadcast_shapes, broadcast_strides, coalesce, ints, prod
from teenygrad.tensor import Tensor, float32, float64, int64

Scalar = int | float


def result_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    if a == float64 or b == float64:
        return float64
    return float32


def as_float(x: Tensor) -> Tensor:
    return x.to(float32) if x.dtype == int64 else x


def detached(x: Tensor) -> Tensor:
    """x without its graph (an alias of the same memory), for the internal views of a forward pass."""
    return x.detach() if x._requires_grad else x


def new(shape: tuple[int, ...], dtype: np.dtype, device: str = "cpu") -> Tensor:
    """A fresh contiguous tensor (uninitialised) on `device`."""
    return Tensor._contiguous(devices.empty(prod(shape), dtype, device), shape)


def full_buffer(n: int, value: Scalar, dtype: np.dtype, device: str) -> devices.Buffer:
    """A fresh buffer of `n` elements, each `value` (converted to `dtype`, as np.full does), on `device`. On a GPU it
    is made there by the table's `fill`, a launch that returns at once: a copy from the computer's memory would first
    wait for every launch queued before it."""
    if device == "cpu":
        return np.full(n, value, dtype=dtype)
    buf = devices.empty(n, dtype, device)
    on(device)["fill"](buf, np.dtype(dtype).type(value))
    return buf


def arange_buffer(start: int, step: int, n: int, dtype: np.dtype, device: str) -> devices.Buffer:
    """A fresh buffer of the `n` integers start, start + step, ... in `dtype` on `device`, made there as `full_buffer`'s
    (the table's `arange`)."""
    if device == "cpu":
        return (start + step * np.arange(n)).astype(dtype)
    buf = devices.empty(n, dtype, device)
    on(device)["arange"](buf, start, step)
    return buf


def scalar_tensor(value: Scalar, like: Tensor, op: str) -> Tensor:
    """A Python (or numpy) number as a 0-d tensor of `like`'s dtype (float32 for a float with an int64 tensor)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, np.generic) and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise TypeError(f"{op}: unsupported operand of type {type(value).__name__}")
    dtype = float32 if (like.dtype == int64 and isinstance(value, float)) else like.dtype
    return Tensor._contiguous(full_buffer(1, value, dtype, like.device), ())


def array(x: Tensor) -> np.ndarray:
    """numpy view of a *contiguous* tensor with its shape (for kernels that take shaped arrays); of a tensor on
    "cuda", the device array's view."""
    return x._buf[x.offset:x.offset + x.size].reshape(x.shape)


# ---- the copy kernel's launchers -------------------------------------------------------------------------

def copy_into(src: Tensor, dst: Tensor) -> None:
    """dst[...] = src (same shape, or src broadcastable to dst's shape), converting dtype if needed."""
    if src.shape != dst.shape:
        if broadcast_shapes(src.shape, dst.shape, "copy") != dst.shape:
            raise ValueError(f"copy: cannot write shape {src.shape} into shape {dst.shape}")
    device = devices.same("copy", src, dst)
    if not dst.size:
        return
    shape, (ss, ds) = coalesce(dst.shape, broadcast_strides(src.shape, src.strides, dst.shape), dst.strides)
    on(device)["copy"](ints(shape), src._buf, ints(ss), src.offset, dst._buf, ints(ds), dst.offset)


def copy(x: Tensor, dtype: np.dtype | None = None) -> Tensor:
    """A fresh contiguous copy of x (in `dtype` if given). Records nothing: `Tensor.clone` and `to` do."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.copy(x, dtype)
    out = new(x.shape, dtype or x.dtype, x.device)
    copy_into(x, out)
    return out


def contiguous(x: Tensor, dtype: np.dtype | None = None) -> Tensor:
    """x itself when it is already contiguous (and of `dtype`), else a contiguous copy. Records nothing."""
    if x.is_contiguous() and (dtype is None or x.dtype == dtype):
        return x
    return copy(x, dtype)


def cast(x: Tensor, dtype: np.dtype) -> Tensor:
    """x in `dtype`: x itself when it has it (whatever its layout), else a contiguous converted copy.
    Records no cast: the op using it records its own node."""
    return x if x.dtype == dtype else copy(x, dtype)
