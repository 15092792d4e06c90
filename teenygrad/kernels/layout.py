"""Shape and stride arithmetic shared by the Tensor and its kernel launches (chapter 2; pure Python, no kernels).

A tensor is a flat buffer plus `shape`, `strides` and `offset`: element (i0, i1, ..., ik) lives at
    buffer[offset + i0*strides[0] + i1*strides[1] + ... + ik*strides[k]]      (strides in elements).

Before a kernel runs, the dimensions are *coalesced*: size-1 dimensions are dropped, and two neighbouring
dimensions i, i+1 merge into one of size shape[i]*shape[i+1] when every operand can step over both with
a single stride (strides[i] == strides[i+1]*shape[i+1]). A contiguous (2, 3, 4) tensor becomes one flat
dimension of 24; a (B, T, C) + (C,) bias broadcast becomes two dimensions (B*T, C). Fewer dimensions mean
a tighter inner loop and less index arithmetic in the kernel.
"""
from __future__ import annotations

import operator
from functools import lru_cache

import numpy as np

from teenygrad.edition import exercise

Shape = tuple[int, ...]


def contiguous_strides(shape: Shape) -> Shape:
    """Row-major (C order) strides in elements: the last dimension moves fastest."""
    strides = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return tuple(strides)


def prod(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def is_contiguous(shape: Shape, strides: Shape) -> bool:
    """True when the elements are laid out in row-major order without gaps (size-1 dims may have any stride)."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 0:
            return True
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def normalize_axis(axis: int, ndim: int, op: str = "") -> int:
    """Map a possibly negative axis into [0, ndim), with an error that names the axis and the ndim."""
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        where = f"{op}: " if op else ""
        raise IndexError(f"{where}axis {axis} is out of range for a tensor with ndim {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | tuple[int, ...] | list[int] | None, ndim: int, op: str = "") -> tuple[int, ...]:
    """`None` means every axis; the result is sorted and free of duplicates."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    axes = sorted({normalize_axis(a, ndim, op) for a in axis})
    if len(axes) != len(axis):
        raise ValueError(f"{op}: repeated axis in {tuple(axis)}")
    return tuple(axes)


def broadcast_shapes(a: Shape, b: Shape, op: str) -> Shape:
    """numpy's rule: align shapes on the right; each pair of sizes must be equal or contain a 1."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"{op}: shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def broadcast_strides(shape: Shape, strides: Shape, out_shape: Shape) -> Shape:
    """Strides that read a tensor of `shape` as if it had `out_shape`: broadcast dims get stride 0."""
    pad = len(out_shape) - len(shape)
    res = [0] * pad
    for size, stride in zip(shape, strides):
        res.append(0 if size == 1 else stride)
    return tuple(res)


@exercise("02-tensors", "coalesce")
def coalesce(shape: Shape, *strides: Shape) -> tuple[Shape, list[Shape]]:
    """Drop size-1 dims and merge neighbours that every operand can walk with one stride.

    Always returns at least one dimension, so kernels can read `shape[-1]` unconditionally.
    The output of an elementwise kernel is contiguous, and contiguous strides always merge, so only
    the inputs' strides need checking.
    """
    dims = [i for i, s in enumerate(shape) if s != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    new_shape = [shape[dims[0]]]
    new_strides = [[st[dims[0]]] for st in strides]
    for i in dims[1:]:
        size = shape[i]
        if all(ns[-1] == st[i] * size for ns, st in zip(new_strides, strides)):
            new_shape[-1] *= size
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[i]
        else:
            new_shape.append(size)
            for ns, st in zip(new_strides, strides):
                ns.append(st[i])
    return tuple(new_shape), [tuple(ns) for ns in new_strides]


@lru_cache(maxsize=4096)
def ints(values: Shape) -> np.ndarray:
    """A (cached, never written) int64 array for passing shapes and strides to kernels.

    Kernels take shapes and strides as int64 arrays rather than tuples so that one compiled version
    serves every ndim (numba compiles a new version for every tuple length).
    """
    return np.array(values, dtype=np.int64).reshape(len(values))


@exercise("02-tensors", "view_strides")
def view_strides(old_shape: Shape, old_strides: Shape, new_shape: Shape) -> Shape | None:
    """Strides that let `new_shape` view the same elements in row-major order, or None if a copy is needed.

    Walks groups of old dims that are contiguous with each other ("chunks") and splits/merges them
    into the new dims; a new dim that would straddle two chunks cannot be expressed with one stride.
    """
    if prod(old_shape) == 0 or not old_shape:
        return contiguous_strides(new_shape)
    old = [(s, st) for s, st in zip(old_shape, old_strides) if s != 1]
    new_strides = [0] * len(new_shape)
    oi, ni = 0, 0
    while ni < len(new_shape) or oi < len(old):
        # skip size-1 new dims: their stride is arbitrary
        while ni < len(new_shape) and new_shape[ni] == 1:
            new_strides[ni] = 1
            ni += 1
        if oi == len(old):
            break
        # grow one chunk of old dims until its size equals a run of new dims
        chunk_size = old[oi][0]
        n_start, n_size = ni, new_shape[ni] if ni < len(new_shape) else 1
        ni += 1
        while chunk_size != n_size:
            if chunk_size < n_size:
                oi += 1
                if old[oi][1] * old[oi][0] != old[oi - 1][1]:
                    return None  # the old dims in this chunk are not contiguous with each other
                chunk_size *= old[oi][0]
            else:
                n_size *= new_shape[ni]
                ni += 1
        # assign strides to new dims n_start..ni-1, ending with the innermost old stride
        stride = old[oi][1]
        for k in range(ni - 1, n_start - 1, -1):
            new_strides[k] = stride
            stride *= new_shape[k]
        oi += 1
    return tuple(new_strides)


def shape_args(args: tuple) -> tuple[int, ...]:
    """A shape given either way, f(2, 3) or f((2, 3)), as a tuple of ints (numpy integers accepted)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(operator.index(a) for a in args)
