"""Lazy tensors (chapter 10): while a compiled function is traced, a Tensor holds a graph node, not numbers.

Chapter 5 compiled a scalar graph by recording it on a tape as it ran; this is the same idea for tensors. Inside
a trace every op of the op layer is handed here (`teenygrad.tracing`) and returns a `LazyTensor`, whose `_node`
is an `ir.Node` built from the IR's few primitives. Nothing is computed: the graph is what the function *would*
compute, and `teenygrad.compiler` hands it to the back end, which runs it as often as we like.

A `Trace` remembers what the graph reads and writes:

    lift(t)       a Tensor that existed before the trace (a parameter, an optimizer's state) becomes a `load`
                  of an `ir.Buffer`, bound to the tensor so each call reads its current memory
    assign(t, v)  an in-place update (an optimizer step, `p[...] = v`) becomes an `assign` effect; later reads
                  of t in the same trace see v
    guards        facts the graph depends on (a tensor's shape, whether a .grad exists): a call where one of
                  them changed traces again
    random(...)   `rand`/`randn` (dropout's mask) become loads of buffers that each call fills first, drawing
                  from the same generator in the same order as the eager function would: the same numbers

Reading a lazy tensor's value (`.item()`, `.numpy()`, `bool()`, `float()`) raises `CaptureError`: the value does
not exist yet, so Python control flow cannot depend on it.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from teenygrad.compiler import ir
from teenygrad.kernels.layout import broadcast_shapes, contiguous_strides
from teenygrad.tensor import Tensor, default_generator, float32, float64, int64

__all__ = ["CaptureError", "LazyTensor", "EscapedTensor", "Trace", "current", "wrap", "node_of", "constant"]



class NoData:
    """The `_buf` of a lazy tensor: it has a dtype (so `Tensor.dtype` and autograd's bookkeeping work), but any
    attempt to read elements (an eager kernel, numpy, slicing) raises, instead of silently reading nothing."""

    __slots__ = ("dtype", "__weakref__")

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __getattr__(self, name: str) -> Any:
        raise CaptureError(f"code inside a compiled function read a traced tensor's memory directly (._buf.{name}), "
                           f"as an eager kernel or a learner's piece does; only teenygrad's ops are captured. Run the "
                           f"function eagerly, or move that code out of it")

    def __getitem__(self, key: object) -> Any:
        return self.__getattr__("__getitem__")

    def __len__(self) -> int:
        return self.__getattr__("__len__")


_EMPTY = {dt: NoData(dt) for dt in (float32, float64, int64)}  # the `_buf` of every lazy tensor


class CaptureError(RuntimeError):
    """Something a compiled function does cannot be captured in a graph; the message says what to do."""


def cannot(what: str) -> CaptureError:
    return CaptureError(f"{what} inside a compiled function: the tensor's value does not exist while the function "
                        f"is traced, so Python cannot branch on it or read it. Move this out of the compiled function "
                        f"(return the tensor and read it after the call), or run the function eagerly")


class LazyTensor(Tensor):
    """A Tensor whose value is a graph node (`_node`), inside a trace. Views and ops on it build more nodes.
    Its `_buf` is a `NoData` of its dtype, so `dtype` and the autograd engine's bookkeeping work unchanged."""

    _node: ir.Node
    _weak: bool = False  # a Python float passed in: takes the other operand's dtype, as a Python number does

    def numpy(self) -> np.ndarray:
        raise cannot("numpy()")

    def item(self) -> Any:
        raise cannot("item()")

    def tolist(self) -> Any:
        raise cannot("tolist()")

    def __bool__(self) -> bool:
        raise cannot("bool() (an `if` or `while` on a tensor)")

    def __float__(self) -> float:
        raise cannot("float()")

    def __int__(self) -> int:
        raise cannot("int()")

    def data_ptr(self) -> int:
        raise cannot("data_ptr()")

    def __repr__(self) -> str:
        grad = f", grad_fn=<{self._ctx.op}>" if self._ctx else ", requires_grad=True" if self._requires_grad else ""
        return f"LazyTensor(shape={self.shape}, dtype={self.dtype}, op={self._node.op}{grad})"

    def detach(self) -> LazyTensor:
        return wrap(self._node)

    @classmethod
    def _contiguous(cls, buf: np.ndarray, shape: tuple[int, ...]) -> LazyTensor:
        # the autograd engine makes backward's seed (ones) with type(root)._contiguous
        return constant(np.asarray(buf).reshape(shape))

    @classmethod
    def _make(cls, buf: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Tensor:
        raise CaptureError("internal: a view of a lazy tensor was made outside compiler.capture.ops (a missing hook)")

    def _narrow(self, axis: int, start: int, length: int) -> LazyTensor:
        spec = [(0, n, 1) for n in self.shape]
        spec[axis] = (start, start + length, 1)
        return wrap(ir.slice_(self._node, tuple(spec)))


class EscapedTensor(Tensor):
    """What a lazy tensor becomes when its trace ends: any use says where it came from."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__dict__"):
            return object.__getattribute__(self, name)
        raise CaptureError("a tensor computed inside a compiled function was used after the call (it was stored "
                           "somewhere, e.g. on a module or in a list); return it from the function instead")

    def __repr__(self) -> str:
        return "<a tensor from inside a compiled function's trace>"


# ---- the trace --------------------------------------------------------------------------------------------

Getter = Callable[[tuple], np.ndarray]  # the call's flat arguments -> one flat contiguous array


def whole(t: Tensor) -> bool:
    """Does t cover all of its buffer, in order (so the program can read and write that buffer itself)?"""
    return t.offset == 0 and t.size == t._buf.size and t.is_contiguous()


def _layout(t: Tensor) -> tuple:
    """What decides whether t is `whole` (and its getter), as plain attribute reads: a guard checks it every call."""
    return t.shape, t.strides, t.offset, t._buf.size, t._buf.dtype


def array_of(t: Tensor) -> np.ndarray:
    """t's elements as one flat contiguous array: its own buffer when t covers all of it (so an assign writes the
    tensor in place), else a copy."""
    if whole(t):
        return t._buf.reshape(-1)
    return np.ascontiguousarray(t.numpy()).reshape(-1)


class Trace:
    """What one trace of a function reads (bindings), writes (assigns), depends on (guards) and does on the host."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bindings: dict[ir.Buffer, Getter] = {}
        self.current: dict[Any, list] = {}    # key (id of a tensor or state) -> [object, load node, current node]
        self.assigns: dict[Any, ir.Node] = {}  # key -> the value to write back
        self.guards: list[tuple[Callable[[], Any], Any, str]] = []
        self.host_effects: list[Callable[[], None]] = []  # run at every call (an optimizer's step counters)
        self.params: dict[int, tuple[Tensor, Any]] = {}    # leaves that require grad -> (tensor, .grad at start)
        self.grad_of: dict[int, Tensor] = {}                # id(initial .grad) -> its parameter
        self.created: list[LazyTensor] = []
        self.checks: list[ir.Node] = []  # int64 counts of out-of-range indices: each call checks they are 0
        self.randoms: list[tuple[str, tuple[int, ...], np.dtype, Any]] = []  # (method, shape, dtype, generator)
        self.drawn: list[np.ndarray] = []  # this call's random numbers, one array per entry of randoms
        self._names = 0

    def name_for(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def bind(self, key: Any, obj: Any, shape: tuple[int, ...], dtype: np.dtype, getter: Getter, prefix: str) -> ir.Node:
        """A new buffer the graph loads, filled at each call by `getter`."""
        buf = ir.Buffer(self.name_for(prefix), tuple(shape), str(np.dtype(dtype)))
        self.bindings[buf] = getter
        node = ir.load(buf)
        if key is not None:
            self.current[key] = [obj, node, node]
        return node

    @staticmethod
    def key(t: Tensor) -> tuple:
        """Tensors are keyed by the memory they view: a parameter and its `detach()` are one buffer of the graph."""
        return ("memory", id(t._buf), t.offset, t.shape, t.strides)

    def watch(self, t: Tensor) -> None:
        """Remember a leaf that requires grad, and its .grad now (before this trace's backward changes it)."""
        if t._requires_grad and t._ctx is None and type(t) is not LazyTensor and id(t) not in self.params:
            self.params[id(t)] = (t, t.grad)
            if t.grad is not None:
                self.grad_of[id(t.grad)] = t

    def lift(self, t: Tensor) -> ir.Node:
        """The node of a concrete tensor: its current value (after any assign in this trace), loaded once."""
        self.watch(t)
        key = self.key(t)
        entry = self.current.get(key)
        if entry is not None:
            return entry[2]
        owner = self.grad_of.get(id(t))
        if owner is not None:  # a parameter's .grad: read whatever .grad is at call time, not this object
            return self.bind(key, t, t.shape, t.dtype, lambda args, p=owner: array_of(p.grad), "grad")
        self.guards.append((lambda t=t: _layout(t), _layout(t), "a tensor's layout"))
        get = (lambda args, t=t: t._buf.reshape(-1)) if whole(t) else (lambda args, t=t: array_of(t))  # guarded
        return self.bind(key, t, t.shape, t.dtype, get, "w" if t._requires_grad else "t")

    def assign_tensor(self, t: Tensor, value: ir.Node) -> None:
        self.lift(t)
        self.assign(self.key(t), value)

    def assign(self, key: Any, value: ir.Node) -> None:
        """Write `value` into the buffer bound to `key` at the end of the step; later reads in the trace see it."""
        entry = self.current[key]
        obj = entry[0]
        if isinstance(obj, Tensor) and not whole(obj):
            raise CaptureError("an in-place write into a view of a tensor (a slice, a transpose) cannot be captured: "
                               "the compiled program writes whole buffers. Write into the tensor itself, or run the "
                               "function eagerly")
        entry[2] = value
        self.assigns[key] = value

    def random(self, method: str, shape: tuple[int, ...], dtype: np.dtype, generator: Any) -> ir.Node:
        """A buffer of random numbers (`generator.<method>`, or the global generator's at call time), drawn anew
        by `draw` at each call."""
        index = len(self.randoms)
        self.randoms.append((method, tuple(shape), np.dtype(dtype), generator))
        return self.bind(None, None, shape, dtype, lambda args: self.drawn[index], "rand")

    def draw(self) -> None:
        """Draw this call's random numbers, in the order the traced function asked for them."""
        self.drawn = [getattr(gen or default_generator(), method)(int(np.prod(shape)), dtype=dtype)
                      for method, shape, dtype, gen in self.randoms]

    def effects(self) -> list[ir.Node]:
        return [ir.assign(self.current[k][1], v) for k, v in self.assigns.items()]


_TRACE: Trace | None = None


def current() -> Trace:
    if _TRACE is None:
        raise CaptureError("internal: a lazy op ran outside a trace")
    return _TRACE


def set_trace(trace: Trace | None) -> None:
    global _TRACE
    _TRACE = trace


# ---- nodes <-> tensors ----------------------------------------------------------------------------------

def wrap(node: ir.Node, weak: bool = False) -> LazyTensor:
    """A new lazy tensor holding `node` (no autograd history)."""
    if node.dtype == "bool":
        raise CaptureError(f"internal: a bool node {node} reached a tensor (cast it first)")
    t = LazyTensor.__new__(LazyTensor)
    t._node, t.shape, t._buf = node, node.shape, _EMPTY[np.dtype(node.dtype)]
    t.strides, t.offset = contiguous_strides(node.shape), 0
    if weak:
        t._weak = True
    if _TRACE is not None:
        _TRACE.created.append(t)
    return t


def node_of(x: Tensor) -> ir.Node:
    return x._node if type(x) is LazyTensor else current().lift(x)


def constant(arr: np.ndarray) -> LazyTensor:
    """A lazy tensor of fixed values: one `const` when all are equal, else a buffer holding a copy of them."""
    arr = np.asarray(arr)
    dt = np.dtype(arr.dtype)
    if arr.size and np.all(arr == arr.flat[0]):
        return wrap(ir.const(arr.flat[0].item(), str(dt), arr.shape))
    copy = np.array(arr, order="C").reshape(-1)
    return wrap(current().bind(None, None, arr.shape, dt, lambda args: copy, "c"))


def cast(node: ir.Node, dtype: np.dtype | str) -> ir.Node:
    dtype = str(np.dtype(dtype))
    return node if node.dtype == dtype else ir.unary("cast", node, dtype)


def bcast(node: ir.Node, shape: tuple[int, ...]) -> ir.Node:
    """numpy broadcasting as graph ops: leading axes of size 1 (a reshape), then an expand."""
    shape = tuple(shape)
    if node.shape == shape:
        return node
    node = ir.reshape(node, (1,) * (len(shape) - len(node.shape)) + node.shape)
    return ir.expand(node, shape)


def binop(op: str, a: ir.Node, b: ir.Node) -> ir.Node:
    """An elementwise binary op on nodes of any broadcastable shapes (same dtype)."""
    shape = broadcast_shapes(a.shape, b.shape, op)
    return ir.binary(op, bcast(a, shape), bcast(b, shape))


def c(value: float, like: ir.Node) -> ir.Node:
    """A constant of like's shape and dtype."""
    return ir.const(value, like.dtype, like.shape)


def where(cond: ir.Node, a: ir.Node, b: ir.Node) -> ir.Node:
    shape = broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where"), b.shape, "where")
    return ir.where(bcast(cond, shape), bcast(a, shape), bcast(b, shape))


def flat_position(shape: tuple[int, ...], axes: tuple[int, ...]) -> ir.Node:
    """At every position of `shape`, its index in the row-major order of the axes `axes` (int64)."""
    pos, stride = None, 1
    for a in reversed(axes):
        term = ir.arange(shape, a)
        if stride != 1:
            term = ir.binary("mul", term, ir.const(stride, "int64", shape))
        pos = term if pos is None else ir.binary("add", pos, term)
        stride *= shape[a]
    return pos if pos is not None else ir.const(0, "int64", shape)


def first_argmax(x: ir.Node, axes: tuple[int, ...]) -> ir.Node:
    """The position (in the reduced axes, row-major) of the first largest element: argmax's tie rule."""
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    hit = ir.binary("eq", x, bcast(ir.reduce("max", x, axes), x.shape))
    if x.dtype != "int64":  # nan is the largest element for argmax (numpy's rule): a nan is a hit
        hit = where(ir.binary("eq", x, x), hit, ir.const(True, "bool", x.shape))
    pos = where(hit, flat_position(x.shape, axes), ir.const(n, "int64", x.shape))
    return ir.unary("neg", ir.reduce("max", ir.unary("neg", pos), axes))
