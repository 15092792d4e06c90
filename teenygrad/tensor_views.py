"""Views (chapter 2): new (shape, strides, offset) over the same buffer; nothing is copied.

    t.T                 shape (3, 2), strides (1, 3)   from shape (2, 3), strides (3, 1)
    t[:, ::2]           stride of axis 1 doubles
    t[::-1]             negative stride, offset at the last row
    t.expand(4, 2, 3)   new leading axis with stride 0: every "copy" reads the same elements
    t.reshape(6)        a view when the elements can be walked with new strides, else a copy

`TensorViews` is a mixin of `Tensor`: it needs only `_make`, `shape`, `strides`, `offset` and `_buf`, plus,
for autograd, `_requires_grad` and `_record_view` (each view of a tensor that requires grad records a node
whose rule moves the gradient back through the same index map; see `teenygrad.ops.movement`).
"""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from teenygrad import tracing
from teenygrad.edition import exercise
from teenygrad.kernels.layout import contiguous_strides, normalize_axis, prod, shape_args, view_strides


class TensorViews:
    """Shape-changing operations that share memory with the original tensor."""

    def reshape(self, *shape: int | Sequence[int]) -> TensorViews:
        """Same elements (in row-major order), new shape; one size may be -1 (inferred).
        A view when the strides allow it, otherwise a copy."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.reshape(self, shape)
        new = self._infer_shape(shape_args(shape), "reshape")
        # a contiguous tensor always views as any shape (the common case, so it skips the general walk)
        strides = contiguous_strides(new) if self.is_contiguous() else view_strides(self.shape, self.strides, new)
        if strides is None:  # the layout cannot be walked with new strides: copy, then view the copy
            src = self.contiguous()  # (records a "copy" node when self requires grad)
            out = self._make(src._buf, new, contiguous_strides(new), src.offset)
        else:
            src, out = self, self._make(self._buf, new, strides, self.offset)
        return src._record_view("reshape", out, shape=src.shape) if self._requires_grad else out

    def view(self, *shape: int | Sequence[int]) -> TensorViews:
        """Like reshape, but never copies: raises if the layout does not allow a view."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.reshape(self, shape, "view")
        new = self._infer_shape(shape_args(shape), "view")
        strides = view_strides(self.shape, self.strides, new)
        if strides is None:
            raise ValueError(f"view: shape {new} is not compatible with the strides {self.strides} of shape "
                             f"{self.shape}; use reshape (which copies) or contiguous() first")
        out = self._make(self._buf, new, strides, self.offset)
        return self._record_view("reshape", out, shape=self.shape) if self._requires_grad else out

    def _infer_shape(self, shape: tuple[int, ...], op: str) -> tuple[int, ...]:
        if shape.count(-1) > 1:
            raise ValueError(f"{op}: only one dimension can be -1, got {shape}")
        if -1 in shape:
            known = prod(tuple(s for s in shape if s != -1))
            if known == 0 or self.size % known:
                raise ValueError(f"{op}: cannot reshape tensor of shape {self.shape} into {shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if prod(shape) != self.size or any(s < 0 for s in shape):
            raise ValueError(f"{op}: cannot reshape tensor of shape {self.shape} into {shape}")
        return shape

    def permute(self, *dims: int | Sequence[int]) -> TensorViews:
        """Reorder axes: result axis i is input axis dims[i]."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.permute(self, dims)
        order = tuple(normalize_axis(d, self.ndim, "permute") for d in shape_args(dims))
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute: {tuple(dims)} is not a permutation of the {self.ndim} axes")
        out = self._make(self._buf, tuple(self.shape[d] for d in order),
                         tuple(self.strides[d] for d in order), self.offset)
        return self._record_view("permute", out, dims=order) if self._requires_grad else out

    def transpose(self, dim0: int = -2, dim1: int = -1) -> TensorViews:
        """Swap two axes (by default the last two)."""
        order = list(range(self.ndim))
        a, b = normalize_axis(dim0, self.ndim, "transpose"), normalize_axis(dim1, self.ndim, "transpose")
        order[a], order[b] = order[b], order[a]
        return self.permute(*order)

    @property
    def T(self) -> TensorViews:  # noqa: N802 - numpy's name
        """All axes reversed (the usual transpose for a matrix)."""
        return self.permute(*reversed(range(self.ndim)))

    def expand(self, *sizes: int | Sequence[int]) -> TensorViews:
        """Repeat size-1 axes (and add leading axes) without copying: their stride becomes 0.
        -1 keeps a size."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.expand(self, sizes)
        sizes = shape_args(sizes)
        if len(sizes) < self.ndim:
            raise ValueError(f"expand: cannot expand shape {self.shape} to {sizes} (fewer dimensions)")
        pad = len(sizes) - self.ndim
        shape, strides = list(sizes[:pad]), [0] * pad
        for s, n, st in zip(sizes[pad:], self.shape, self.strides):
            if s == -1 or s == n:
                shape.append(n)
                strides.append(st)
            elif n == 1 and s >= 0:
                shape.append(s)
                strides.append(0)
            else:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {sizes}")
        if any(s < 0 for s in shape):
            raise ValueError(f"expand: -1 is not allowed for the new leading dimensions in {sizes}")
        out = self._make(self._buf, tuple(shape), tuple(strides), self.offset)
        return self._record_view("expand", out, shape=self.shape) if self._requires_grad else out

    def squeeze(self, axis: int | None = None) -> TensorViews:
        """Drop size-1 axes (all of them, or just `axis` if it has size 1)."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.squeeze(self, axis)
        if axis is None:
            keep = [d for d in range(self.ndim) if self.shape[d] != 1]
        else:
            a = normalize_axis(axis, self.ndim, "squeeze")
            keep = [d for d in range(self.ndim) if d != a or self.shape[d] != 1]
        out = self._make(self._buf, tuple(self.shape[d] for d in keep),
                         tuple(self.strides[d] for d in keep), self.offset)
        return self._record_view("reshape", out, shape=self.shape) if self._requires_grad else out

    def unsqueeze(self, axis: int) -> TensorViews:
        """Insert a size-1 axis at position `axis` (which may be ndim, or negative)."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.unsqueeze(self, axis)
        a = normalize_axis(axis, self.ndim + 1, "unsqueeze")
        out = self._make(self._buf, self.shape[:a] + (1,) + self.shape[a:],
                         self.strides[:a] + (0,) + self.strides[a:], self.offset)
        return self._record_view("reshape", out, shape=self.shape) if self._requires_grad else out

    def flatten(self, start: int = 0, end: int = -1) -> TensorViews:
        """Merge axes start..end (inclusive) into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s, e = normalize_axis(start, self.ndim, "flatten"), normalize_axis(end, self.ndim, "flatten")
        return self.reshape(*self.shape[:s], prod(self.shape[s:e + 1]), *self.shape[e + 1:])

    def _narrow(self, axis: int, start: int, length: int) -> TensorViews:
        """View of `length` entries along `axis` from `start` (no checks, no autograd: internal)."""
        shape = self.shape[:axis] + (length,) + self.shape[axis + 1:]
        return self._make(self._buf, shape, self.strides, self.offset + start * self.strides[axis])

    def __getitem__(self, key: object) -> TensorViews:
        """Basic indexing is a view: ints, slices (any step, also negative), None (new axis), `...`.
        An int64 tensor (or list) as the whole key selects rows: t[idx] == t.index_select(0, idx)."""
        if tracing.active:  # inside teenygrad.compile's trace: a graph node
            return tracing.hooks.getitem(self, key)
        if isinstance(key, (TensorViews, list, np.ndarray)):
            return self.index_select(0, key)
        key = key if isinstance(key, tuple) else (key,)
        out = basic_index(self, key)
        return self._record_view("index", out, shape=self.shape, key=key) if self._requires_grad else out

    def __setitem__(self, key: object, value: object) -> None:
        """Write into a view: t[0] = 1.0, t[:, 2:4] = other (broadcast to the view's shape)."""
        if tracing.active:  # inside teenygrad.compile's trace: an assign of the whole tensor
            return tracing.hooks.setitem(self, key, value)
        target = basic_index(self, key if isinstance(key, tuple) else (key,))
        self._write(target, value)


def basic_index(t: TensorViews, key: tuple) -> TensorViews:
    """t[key] for a key of ints, slices, None and Ellipsis: a view (see `index_view`)."""
    shape, strides, offset = index_view(t.shape, t.strides, t.offset, key)
    return t._make(t._buf, shape, strides, offset)


@exercise("02-tensors", "indexing")
def index_view(shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
               key: tuple) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The (shape, strides, offset) of t[key], for t with (shape, strides, offset): read `parse_key(shape, key)`
    (its checks and errors are this function's), one entry per axis of the result or of t. None adds an axis of
    size 1 and stride 0. An int i drops its axis and moves the offset to index i of it. A slice's (start, stop,
    step) keeps len(range(start, stop, step)) indices: the stride is multiplied by step, and the offset moves to
    index start (not when the slice is empty: a view without elements reads nothing)."""
    new_shape, new_strides, d = [], [], 0
    for k in parse_key(shape, key):
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        if isinstance(k, int):
            offset += k * strides[d]
        else:
            n = len(range(*k))
            if n:
                offset += k[0] * strides[d]
            new_shape.append(n)
            new_strides.append(strides[d] * k[2])
        d += 1
    return tuple(new_shape), tuple(new_strides), offset


@exercise("02-tensors", "indexing")
def parse_key(shape: tuple[int, ...], key: tuple) -> list[None | int | tuple[int, int, int]]:
    """Basic indexing's key checked and spelled out, one entry per axis it touches, in order: None (a new axis of
    size 1), an int (the index picked, counted from 0: a negative i counts from the end; the axis is dropped) or
    a slice's (start, stop, step) as `slice.indices` gives it for the axis; the Ellipsis becomes whole slices,
    (0, n, 1), of the axes it stands for (as many as the key's ints and slices leave, possibly none), and the axes
    after the key whole slices too. Key items are ints (anything `operator.index` takes), slices, None and
    Ellipsis; another item raises TypeError. IndexError for more ints and slices than axes, for two Ellipsis, and
    for an int i outside -n <= i < n of its axis. The one parser of keys: eager views (`index_view`) and lazy ones
    (`compiler.capture`) both read it."""
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out: list[None | int | tuple[int, int, int]] = []
    d = 0
    for k in key:
        if k is None:
            out.append(None)
        elif k is Ellipsis:
            out += [(0, shape[d + j], 1) for j in range(len(shape) - consumed)]
            d += len(shape) - consumed
        elif isinstance(k, slice):
            out.append(k.indices(shape[d]))
            d += 1
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise TypeError(f"unsupported index {k!r} of type {type(k).__name__}") from None
            if not -shape[d] <= i < shape[d]:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {shape[d]}")
            out.append(i % shape[d])
            d += 1
    return out + [(0, n, 1) for n in shape[d:]]
