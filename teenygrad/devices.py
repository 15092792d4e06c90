"""Where a tensor's numbers live: "cpu" (a numpy buffer) or "cuda" (a numba-cuda device array) (chapter 11).

A tensor's buffer decides its device: every op reads the device from its operands, allocates its output there and
runs the kernel of that device's table (`teenygrad.kernels.on(device)`), so the op layer is written once for both.
Views, reshapes and the autograd graph never look at the numbers and work the same on either.

Nothing here imports numba.cuda until a tensor is first put on "cuda": a CPU-only program never pays for it, and
on a machine without a GPU "cuda" runs in numba-cuda's simulator (`teenygrad.kernels.cuda.device` says which).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

DEVICES = ("cpu", "cuda")
Buffer = Any  # a 1-D numpy array ("cpu") or a 1-D numba-cuda device array ("cuda")


class Transposed(NamedTuple):
    """A matrix operand handed to the GPU's `matmul` as the contiguous storage of its transpose: the operand is
    storage.T. The GPU kernels take contiguous arrays; a linear layer's x @ w.T and x.T @ g would otherwise copy their
    transposed operand first, a launch and a pass over its memory each."""
    storage: Buffer


def check(device: object) -> str:
    """The device named by `device` ("cpu", "cuda" or "cuda:0": there is one GPU), or one clear error."""
    name = str(device)
    if name == "cuda:0":
        name = "cuda"
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}: teenygrad has 'cpu' and 'cuda'")
    return name


def of(buf: Buffer) -> str:
    """The device a buffer lives on: "cuda" for a numba-cuda device array (a GPU's or the simulator's), else "cpu"
    (a numpy array, or the placeholder buffer of a tensor traced by `teenygrad.compile`, which compiles for the CPU).
    Asked of the buffer's type: a traced tensor's placeholder refuses every attribute asked of it."""
    return "cuda" if hasattr(type(buf), "copy_to_host") else "cpu"


def _cuda():
    from teenygrad.kernels.cuda.device import cuda  # decides GPU or simulator before numba.cuda is first imported
    return cuda


def empty(n: int, dtype: np.dtype, device: str) -> Buffer:
    """A fresh, uninitialised buffer of `n` elements on `device`."""
    if device == "cpu":
        return np.empty(n, dtype=dtype)
    return _cuda().device_array(n, dtype=dtype)


def from_host(arr: np.ndarray, device: str) -> Buffer:
    """A contiguous numpy array's elements in a buffer on `device` (the array itself on "cpu")."""
    if device == "cpu":
        return arr
    return _cuda().to_device(np.ascontiguousarray(arr))


def to_host(buf: Buffer) -> np.ndarray:
    """The buffer's elements in a numpy array (the buffer itself when it is one: no copy)."""
    return buf if isinstance(buf, np.ndarray) else buf.copy_to_host()


def same(op: str, *tensors: Any) -> str:
    """The one device all of `tensors` are on; an op given tensors on two devices raises, naming both."""
    device = None
    for t in tensors:
        d = of(t._buf)
        if device is None:
            device = d
        elif d != device:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {device} and {d}; move one "
                               f"with .to('{device}') or .to('{d}')")
    return device or "cpu"
