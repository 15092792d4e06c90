"""The Tensor (chapter 2): a flat buffer seen through a shape, strides and an offset.

    element (i0, ..., ik)  =  buffer[offset + i0*strides[0] + ... + ik*strides[k]]      (strides in elements)

A contiguous (2, 3) tensor has strides (3, 1). Its transpose is the *same buffer* with shape (3, 2) and
strides (1, 3): no element moves. Slicing, permuting, expanding (stride 0 repeats an element) and most
reshapes are such views: they build a new (shape, strides, offset) and copy nothing. Arithmetic runs in
teenygrad's own kernels (`teenygrad.kernels`), launched by the op layer (`teenygrad.ops`, one module per
family of ops, each op's gradient rule beside it); numpy only holds the buffer and converts data in and out.

dtypes: float32 (the default for floats), float64 (for gradient checks), int64 (indices). Comparisons
(==, <, ...) return 0/1 tensors of the operands' dtype, not bools: masks then multiply directly.

Autograd: `Tensor(data, requires_grad=True)` makes a leaf; ops on it record a graph and `loss.backward()`
fills `.grad` (see `teenygrad.autograd`). Comparisons and argmax have no gradient and record nothing.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from teenygrad import autograd, devices, tracing
from teenygrad.kernels.layout import contiguous_strides, is_contiguous, prod, shape_args
from teenygrad.tensor_views import TensorViews

float32, float64, int64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)
DTYPES = (float32, float64, int64)
Scalar = int | float


def as_dtype(dtype: object) -> np.dtype:
    """Accepts teenygrad.float32, np.float32, 'float32', ...; rejects other dtypes by name."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unsupported dtype {dtype!r}; teenygrad supports float32, float64, int64") from None
    if dt not in DTYPES:
        raise TypeError(f"unsupported dtype {dt}; teenygrad supports float32, float64, int64")
    return dt


def _default_dtype(arr: np.ndarray, from_numpy: bool) -> np.dtype:
    """numpy float arrays keep their precision; Python floats become float32; integers int64; bools float32."""
    kind = arr.dtype.kind
    if kind == "f" and from_numpy and arr.dtype in (float32, float64):
        return arr.dtype
    if kind in "fb":
        return float32
    if kind in "iu":
        return int64
    raise TypeError(f"unsupported dtype {arr.dtype}; teenygrad supports float32, float64, int64")


class Tensor(TensorViews):
    """An n-dimensional array of float32, float64 or int64 numbers. See the module docstring."""

    __hash__ = object.__hash__  # we override ==, but tensors stay usable as dict keys (by identity)
    # autograd state, as class defaults: a tensor that never meets autograd pays nothing for it
    _requires_grad: bool = False
    _ctx = None  # the autograd.Node that made this tensor; None for leaves
    _retain: bool = False  # keep .grad although not a leaf (retain_grad)
    grad: Tensor | None = None  # dL/d(self), summed over backward calls; kept on leaves

    def __init__(self, data: object, dtype: object = None, requires_grad: bool = False,
                 device: str = "cpu") -> None:
        if tracing.active:  # inside teenygrad.compile's trace, host data would be frozen in: refused
            tracing.hooks.from_data()
        if isinstance(data, Tensor):
            data = data.numpy()
        from_numpy = isinstance(data, (np.ndarray, np.generic))
        arr = np.asarray(data)
        dt = as_dtype(dtype) if dtype is not None else _default_dtype(arr, from_numpy)
        arr = np.array(arr, dtype=dt, copy=True, order="C")  # our own copy, in row-major order
        self._buf: devices.Buffer = devices.from_host(arr.reshape(-1), devices.check(device))
        self.shape: tuple[int, ...] = arr.shape
        self.strides: tuple[int, ...] = contiguous_strides(arr.shape)
        self.offset: int = 0
        if requires_grad:
            autograd.set_requires_grad(self, True)

    @classmethod
    def _make(cls, buf: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Tensor:
        """A tensor over an existing buffer (no checks, no copy): how every view is born."""
        t = cls.__new__(cls)
        t._buf, t.shape, t.strides, t.offset = buf, shape, strides, offset
        return t

    @classmethod
    def _contiguous(cls, buf: np.ndarray, shape: tuple[int, ...]) -> Tensor:
        return cls._make(buf, shape, contiguous_strides(shape), 0)

    # ---- basic properties ----------------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self._buf.dtype

    @property
    def device(self) -> str:
        """Where the numbers live: "cpu" (a numpy buffer) or "cuda" (a GPU's memory, or numba-cuda's simulator)."""
        return devices.of(self._buf)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def is_contiguous(self) -> bool:
        """True when the elements sit in row-major order without gaps (then reshape is always a view)."""
        return is_contiguous(self.shape, self.strides)

    def data_ptr(self) -> int:
        """Address of the first element: two tensors sharing memory have related data pointers."""
        if self.device == "cuda":
            return self._buf.__cuda_array_interface__["data"][0] + self.offset * self.dtype.itemsize
        return self._buf.ctypes.data + self.offset * self._buf.itemsize

    # ---- getting data out ----------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy array that *shares memory* with this tensor (read-only when some dim is broadcast); of a tensor
        on "cuda", a copy in the computer's memory."""
        if self.size == 0:
            return np.empty(self.shape, dtype=self.dtype)
        if self.device == "cuda":
            return Tensor._make(devices.to_host(self._buf), self.shape, self.strides, self.offset).numpy().copy()
        item = self._buf.itemsize
        broadcast = any(st == 0 and n > 1 for n, st in zip(self.shape, self.strides))
        return np.lib.stride_tricks.as_strided(self._buf[self.offset:], self.shape,
                                               tuple(st * item for st in self.strides), writeable=not broadcast)

    def tolist(self) -> list | Scalar:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        if self.size != 1:
            raise ValueError(f"item: only a tensor with one element can be converted to a Python number, "
                             f"got shape {self.shape}")
        if self.device == "cuda":
            return devices.to_host(self._buf[self.offset:self.offset + 1])[0].item()
        return self._buf[self.offset].item()

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(", threshold=1000)
        grad = f", grad_fn=<{self._ctx.op}>" if self._ctx else ", requires_grad=True" if self._requires_grad else ""
        device = ", device='cuda'" if self.device == "cuda" else ""
        return f"tensor({body}, dtype={self.dtype}{device}{grad})"

    # ---- autograd (the graph, the rules and the backward pass live in teenygrad.autograd) ------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        autograd.set_requires_grad(self, value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make this (float, leaf) tensor a parameter whose gradient backward computes; returns self."""
        return autograd.set_requires_grad(self, requires_grad)

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self) -> autograd.Node | None:
        """The node (op, inputs, saved values) that made this tensor, None for leaves."""
        return self._ctx

    def backward(self, grad: Tensor | Scalar | None = None) -> None:
        """Add d(self)/d(leaf) into leaf.grad for every leaf that requires grad. A scalar's implicit
        gradient is 1; for any other shape pass `grad`, dL/d(self), and get dL/d(leaf)."""
        if grad is None and self.size == 1 and self.device != "cpu":  # the 1 made on the GPU (ops.buffers.full_buffer)
            grad = ones(self.shape, dtype=self.dtype, device=self.device)
        autograd.backward(self, grad)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (.grad becomes None; the next backward starts afresh)."""
        self.grad = None

    def retain_grad(self) -> Tensor:
        """Keep .grad on this non-leaf tensor too (backward normally fills only leaves)."""
        self._retain = True
        return self

    def detach(self) -> Tensor:
        """The same memory without the graph: gradients stop here."""
        return Tensor._make(self._buf, self.shape, self.strides, self.offset)

    def _record_view(self, op: str, out: Tensor, **saved: object) -> Tensor:
        return autograd.record(op, out, (self,), **saved)

    def _add_into(self, other: Tensor) -> None:
        """self += other in place, for the backward pass summing gradients into a buffer it owns."""
        elementwise.add_into(self, other)

    # ---- dtype and layout ----------------------------------------------------------------------------
    def to(self, dtype: object) -> Tensor:
        """This tensor in another dtype, or on another device: `t.to(float64)`, `t.to("cuda")`, `t.to("cpu")`
        (itself when it already is; else a copy, recorded for autograd: the gradient goes back where it came from)."""
        if dtype is self._buf.dtype:  # the common case, checked first because binary ops call this twice
            return self
        if isinstance(dtype, str) and dtype.split(":")[0] in devices.DEVICES:
            return movement.to_device(self, devices.check(dtype))
        dt = as_dtype(dtype)
        if dt == self.dtype:
            return self
        out = buffers.copy(self, dt)
        return autograd.record("cast", out, (self,), dtype=self.dtype) if self._requires_grad and dt != int64 else out

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def long(self) -> Tensor:
        return self.to(int64)

    def contiguous(self) -> Tensor:
        """Itself if already contiguous, else a row-major copy (the `copy` kernel)."""
        return self if self.is_contiguous() else self.clone()

    def clone(self) -> Tensor:
        out = buffers.copy(self)
        return autograd.record("copy", out, (self,)) if self._requires_grad else out

    def _write(self, target: Tensor, value: Tensor | Scalar) -> None:
        """target[...] = value, where target is a view of self (used by __setitem__). Autograd records no
        writes, so writing into (or from) a tensor that requires grad is refused unless under no_grad()."""
        src = value if isinstance(value, Tensor) else Tensor(value, dtype=self.dtype)
        if autograd.grad_enabled and (self._requires_grad or src._requires_grad):
            raise RuntimeError("setitem: in-place writes are not recorded by autograd, so a tensor that requires "
                               "grad cannot be written into or copied from; use no_grad() (e.g. for a parameter "
                               "update) or build a new tensor with cat/stack")
        buffers.copy_into(src, target)
        autograd.bump_version(self._buf)  # a saved copy of the old values is now stale: backward will say so

    # ---- elementwise math (kernels: teenygrad.kernels.elementwise) -----------------------------------------
    def neg(self) -> Tensor:
        return elementwise.unary("neg", self)

    def exp(self) -> Tensor:
        return elementwise.unary("exp", self)

    def log(self) -> Tensor:
        """Natural logarithm (log 0 = -inf, log of a negative number = nan)."""
        return elementwise.unary("log", self)

    def sqrt(self) -> Tensor:
        return elementwise.unary("sqrt", self)

    def tanh(self) -> Tensor:
        return elementwise.unary("tanh", self)

    def sigmoid(self) -> Tensor:
        """1 / (1 + exp(-x)), computed without overflow for large |x|."""
        return elementwise.unary("sigmoid", self)

    def relu(self) -> Tensor:
        """max(x, 0)."""
        return elementwise.unary("relu", self)

    def gelu(self) -> Tensor:
        """GELU, *tanh approximation* (as in GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        return elementwise.unary("gelu", self)

    def abs(self) -> Tensor:
        return elementwise.unary("abs", self)

    def add(self, other: Tensor | Scalar) -> Tensor:
        return elementwise.binary("add", self, other)

    def sub(self, other: Tensor | Scalar) -> Tensor:
        return elementwise.binary("sub", self, other)

    def mul(self, other: Tensor | Scalar) -> Tensor:
        return elementwise.binary("mul", self, other)

    def div(self, other: Tensor | Scalar) -> Tensor:
        return elementwise.binary("div", self, other)

    def pow(self, other: Tensor | Scalar) -> Tensor:
        return elementwise.binary("pow", self, other)

    def maximum(self, other: Tensor | Scalar) -> Tensor:
        """Elementwise max(a, b) (with broadcasting); nan if either is nan."""
        return elementwise.binary("maximum", self, other)

    __neg__, __abs__ = neg, abs

    def __add__(self, o): return _binary_or_not("add", self, o)
    def __radd__(self, o): return _binary_or_not("add", o, self)
    def __sub__(self, o): return _binary_or_not("sub", self, o)
    def __rsub__(self, o): return _binary_or_not("sub", o, self)
    def __mul__(self, o): return _binary_or_not("mul", self, o)
    def __rmul__(self, o): return _binary_or_not("mul", o, self)
    def __truediv__(self, o): return _binary_or_not("div", self, o)
    def __rtruediv__(self, o): return _binary_or_not("div", o, self)
    def __pow__(self, o): return _binary_or_not("pow", self, o)
    def __rpow__(self, o): return _binary_or_not("pow", o, self)
    # comparisons give 0/1 tensors of the operands' dtype (see the module docstring)
    def __eq__(self, o): return _binary_or_not("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return _binary_or_not("ne", self, o)  # type: ignore[override]
    def __lt__(self, o): return _binary_or_not("lt", self, o)
    def __le__(self, o): return _binary_or_not("le", self, o)
    def __gt__(self, o): return _binary_or_not("gt", self, o)
    def __ge__(self, o): return _binary_or_not("ge", self, o)

    def __matmul__(self, other: Tensor) -> Tensor:
        return matmul_ops.matmul(self, other) if isinstance(other, Tensor) else NotImplemented

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return matmul_ops.matmul(other, self) if isinstance(other, Tensor) else NotImplemented

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product with numpy's rules (batch dims broadcast; 1-D operands are vectors)."""
        return matmul_ops.matmul(self, other)

    # ---- reductions (kernels: teenygrad.kernels.reduce) ----------------------------------------------------
    def sum(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
        """Sum over `axis` (an int, a tuple of ints, or None = all); keepdim leaves size-1 axes in place."""
        return reductions.reduce("sum", self, axis, keepdim)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
        """Largest element over `axis`. Its gradient goes to the first maximum (argmax's rule) on ties."""
        return reductions.reduce("max", self, axis, keepdim)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
        return reductions.mean(self, axis, keepdim)

    def argmax(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
        """int64 position of the (first) largest element; over several axes, the position in those axes
        flattened in row-major order (like numpy on a reshaped array)."""
        return reductions.reduce("argmax", self, axis, keepdim)

    def softmax(self, axis: int = -1) -> Tensor:
        """exp(x - max) / sum(exp(x - max)) along `axis`: subtracting the max keeps exp from overflowing."""
        return reductions.softmax("softmax", self, axis)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """(x - max) - log(sum(exp(x - max))) along `axis`: never log(0), never overflow."""
        return reductions.softmax("log_softmax", self, axis)

    # ---- indexing (kernels: teenygrad.kernels.movement) ----------------------------------------------------
    def gather(self, axis: int, index: Tensor) -> Tensor:
        """out[i][j] = self[index[i][j]][j] for axis 0 (and likewise for other axes); out has index's shape."""
        return movement.gather(self, axis, index)

    def index_select(self, axis: int, index: Tensor | Sequence[int]) -> Tensor:
        """Whole slices along `axis` picked by an int64 index: an embedding lookup is
        `table.index_select(0, token_ids)` of shape token_ids.shape + (dim,)."""
        return movement.index_select(self, axis, index)

    def cross_entropy(self, targets: Tensor) -> Tensor:
        """Mean over rows of -log softmax(self)[target] for logits (..., C) and int64 class targets (...)."""
        return losses.cross_entropy(self, targets)


def _binary_or_not(op: str, a: object, b: object) -> Tensor:
    """Python operators return NotImplemented for operand types we do not know (so Python can try the
    other operand's method, or raise its usual TypeError)."""
    for x in (a, b):
        if not isinstance(x, (Tensor, int, float, np.integer, np.floating)) or isinstance(x, bool):
            return NotImplemented
    return elementwise.binary(op, a, b)


# ---- creation -------------------------------------------------------------------------------------------

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the global random generator used by rand/randn (and by anything else random in teenygrad)."""
    global _generator
    _generator = np.random.default_rng(seed)


def default_generator() -> np.random.Generator:
    """The global generator rand/randn draw from when given none (the one `manual_seed` last made)."""
    return _generator


def tensor(data: object, dtype: object = None, requires_grad: bool = False, device: str = "cpu") -> Tensor:
    """Same as Tensor(data, dtype, requires_grad, device): nested lists, a numpy array, or a scalar (always copied)."""
    return Tensor(data, dtype=dtype, requires_grad=requires_grad, device=device)


def _dtype_or_default(dtype: object, default: np.dtype = float32) -> np.dtype:
    return default if dtype is None else as_dtype(dtype)


def full(shape: Sequence[int] | int, value: Scalar, dtype: object = None, device: str = "cpu") -> Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dt = _dtype_or_default(dtype, int64 if isinstance(value, int) and not isinstance(value, bool) else float32)
    if tracing.active:  # inside teenygrad.compile's trace: a constant node
        return tracing.hooks.full(shape, value, dt)
    return Tensor._contiguous(buffers.full_buffer(prod(shape), value, dt, devices.check(device)), shape)


def zeros(*shape: int | Sequence[int], dtype: object = None, device: str = "cpu") -> Tensor:
    return full(shape_args(shape), 0.0, _dtype_or_default(dtype), device)


def ones(*shape: int | Sequence[int], dtype: object = None, device: str = "cpu") -> Tensor:
    return full(shape_args(shape), 1.0, _dtype_or_default(dtype), device)


def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: object = None,
           device: str = "cpu") -> Tensor:
    """start, start+step, ... < stop (like range); int64 for int arguments, else float32."""
    if stop is None:
        start, stop = 0, start
    is_int = all(isinstance(v, int) for v in (start, stop, step))
    if tracing.active:  # inside teenygrad.compile's trace: an arange node
        return tracing.hooks.arange(start, stop, step, _dtype_or_default(dtype, int64 if is_int else float32))
    dt, device = _dtype_or_default(dtype, int64 if is_int else float32), devices.check(device)
    if device != "cpu" and is_int and step:  # made on the GPU (see ops.buffers.full_buffer)
        n = len(range(start, stop, step))
        return Tensor._contiguous(buffers.arange_buffer(start, step, n, dt, device), (n,))
    return Tensor(np.arange(start, stop, step), dtype=dt, device=device)


def rand(*shape: int | Sequence[int], dtype: object = None, generator: np.random.Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1). `generator=np.random.default_rng(seed)` for a private stream."""
    return _random("rand", "random", shape, dtype, generator)


def randn(*shape: int | Sequence[int], dtype: object = None, generator: np.random.Generator | None = None) -> Tensor:
    """Standard normal samples (mean 0, variance 1)."""
    return _random("randn", "standard_normal", shape, dtype, generator)


def _random(name: str, method: str, shape: tuple, dtype: object, generator: np.random.Generator | None) -> Tensor:
    dt = _dtype_or_default(dtype)
    if dt == int64:
        raise TypeError(f"{name}: dtype must be float32 or float64")
    shape = shape_args(shape)
    if tracing.active:  # inside teenygrad.compile's trace: an input the compiled step draws at every call
        return tracing.hooks.random(method, shape, dt, generator)
    return Tensor._contiguous(getattr(generator or _generator, method)(prod(shape), dtype=dt), shape)


def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Concatenate along an existing axis."""
    return movement.cat(tensors, axis)


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Stack same-shaped tensors along a new axis."""
    return movement.stack(tensors, axis)


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean over rows of -log softmax(logits)[target]; fused and stable (see Tensor.cross_entropy)."""
    return losses.cross_entropy(logits, targets)


# The op layer builds Tensors, so it imports this module; the methods above call it. Imported last, when
# Tensor exists: the one import loop in teenygrad, Tensor <-> ops.
from teenygrad.ops import buffers, elementwise, losses, movement, reductions  # noqa: E402
from teenygrad.ops import matmul as matmul_ops  # noqa: E402
