"""The compiler's graph IR (chapter 10): a training step as a graph of a few primitive ops.

`teenygrad.compile` captures one call of a function of Tensors as a graph of `Node`s. Every Tensor op, however
big (softmax, layer norm, attention, cross-entropy, AdamW), is written in these primitives, so the passes and
the code generator only ever meet this short list:

    sources      load (a buffer the step reads: an input, a parameter, an optimizer state), const, arange
    elementwise  unary: neg exp log sqrt recip tanh cast;  binary: add sub mul div pow maximum lt eq;
                 ternary: where
    reductions   sum, max over some axes (the reduced axes keep size 1, as keepdim=True)
    contraction  matmul: (..., m, k) @ (..., k, n), batch axes equal (broadcasting is done by expand first)
    movement     reshape permute expand slice: views, no data moves; `cat` (a copy) joins along an axis
    effects      assign: write a value into a loaded buffer (an in-place parameter update)

Shapes are explicit: elementwise ops take operands of one shape, so a broadcast is an `expand` in the graph
(and the view-folding pass turns it into a stride of 0). Every constructor below checks its operands and
infers the result's shape and dtype, so a malformed graph fails where it is built, naming the op.

A `Node` is immutable and compared by identity; passes that need structural equality (common-subexpression
elimination) build keys from `(op, arg, dtype, shape, srcs)`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

UNARY = ("neg", "exp", "log", "sqrt", "recip", "tanh", "cast")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "lt", "eq")
COMPARE = ("lt", "eq")  # their result is bool
FLOAT_ONLY = ("exp", "log", "sqrt", "recip", "tanh", "pow")  # of floats only: the front end casts an int first
TERNARY = ("where",)
REDUCE = ("sum", "max")
MOVEMENT = ("reshape", "permute", "expand", "slice")
SOURCES = ("load", "const", "arange")
OPS = (*SOURCES, *UNARY, *BINARY, *TERNARY, *REDUCE, "matmul", *MOVEMENT, "cat", "assign")
DTYPES = ("float32", "float64", "int64", "bool")
_PROMOTE = {"bool": 0, "int64": 1, "float32": 2, "float64": 3}


@dataclass(frozen=True, eq=False)
class Buffer:
    """A buffer the step reads or writes: `name` for printing; `array` is the storage (None while tracing)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    array: Any = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class Node:
    """One op's result. `arg` is op specific:

    load: the Buffer;  const: the Python value;  arange: the axis counted along;  cast: the target dtype;
    sum/max: the sorted tuple of reduced axes;  reshape/expand: the new shape;  permute: the order of axes;
    slice: one (start, stop, step) per axis (step may be negative: a flip);  cat: the axis;  others: None.
    """
    op: str
    srcs: tuple[Node, ...]
    shape: tuple[int, ...]
    dtype: str
    arg: Any = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.shape}, {self.dtype}{'' if self.arg is None else f', {self.arg!r}'})"


def _fail(op: str, msg: str) -> None:
    raise ValueError(f"ir.{op}: {msg}")


def _check_dtype(op: str, dtype: str) -> str:
    if dtype not in DTYPES:
        _fail(op, f"unknown dtype {dtype!r}; the IR knows {', '.join(DTYPES)}")
    return dtype


# ---- constructors: each checks its operands and infers shape and dtype ------------------------------------

def load(buf: Buffer) -> Node:
    return Node("load", (), tuple(buf.shape), _check_dtype("load", buf.dtype), buf)


def const(value: float | int | bool, dtype: str, shape: tuple[int, ...] = ()) -> Node:
    return Node("const", (), tuple(shape), _check_dtype("const", dtype), value)


def arange(shape: tuple[int, ...], axis: int) -> Node:
    """The index along `axis` at every position of `shape` (int64): one-hot encodings and masks come from it."""
    if not 0 <= axis < len(shape):
        _fail("arange", f"axis {axis} out of range for shape {shape}")
    return Node("arange", (), tuple(shape), "int64", axis)


def unary(op: str, x: Node, dtype: str | None = None) -> Node:
    if op not in UNARY:
        _fail(op, f"not a unary op; they are {', '.join(UNARY)}")
    if op == "cast":
        return Node("cast", (x,), x.shape, _check_dtype("cast", dtype or ""), dtype)
    if op in FLOAT_ONLY and not x.dtype.startswith("float"):
        _fail(op, f"of {x.dtype}: a float op, cast the operand first")
    return Node(op, (x,), x.shape, x.dtype)


def binary(op: str, a: Node, b: Node) -> Node:
    if op not in BINARY:
        _fail(op, f"not a binary op; they are {', '.join(BINARY)}")
    if a.shape != b.shape:
        _fail(op, f"operands of shapes {a.shape} and {b.shape}: expand them to one shape first")
    if a.dtype != b.dtype:
        _fail(op, f"operands of dtypes {a.dtype} and {b.dtype}: cast one first")
    if op in FLOAT_ONLY and not a.dtype.startswith("float"):
        _fail(op, f"of {a.dtype}: a float op, cast the operands first")
    return Node(op, (a, b), a.shape, "bool" if op in COMPARE else a.dtype)


def where(cond: Node, a: Node, b: Node) -> Node:
    if cond.dtype != "bool":
        _fail("where", f"the condition must be bool, not {cond.dtype}")
    if not cond.shape == a.shape == b.shape or a.dtype != b.dtype:
        _fail("where", f"operands {cond.shape}, {a.shape} {a.dtype}, {b.shape} {b.dtype}: one shape, one dtype")
    return Node("where", (cond, a, b), a.shape, a.dtype)


def reduce(op: str, x: Node, axes: Iterable[int]) -> Node:
    axes = tuple(sorted(set(int(a) for a in axes)))
    if op not in REDUCE:
        _fail(op, f"not a reduction; they are {', '.join(REDUCE)}")
    if any(not 0 <= a < len(x.shape) for a in axes):
        _fail(op, f"axes {axes} out of range for shape {x.shape}")
    if all(x.shape[a] == 1 for a in axes):  # over axes of one element (or none) a reduction is x itself
        return x
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    return Node(op, (x,), shape, x.dtype, axes)


def matmul(a: Node, b: Node) -> Node:
    if len(a.shape) < 2 or len(a.shape) != len(b.shape):
        _fail("matmul", f"operands {a.shape} @ {b.shape}: both (..., m, k) and (..., k, n), same number of axes")
    if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2] or a.dtype != b.dtype:
        _fail("matmul", f"operands {a.shape} {a.dtype} @ {b.shape} {b.dtype}: batch axes equal, k equal, one dtype")
    return Node("matmul", (a, b), (*a.shape[:-1], b.shape[-1]), a.dtype)


def reshape(x: Node, shape: tuple[int, ...]) -> Node:
    shape = tuple(int(n) for n in shape)
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        _fail("reshape", f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return x if shape == x.shape else Node("reshape", (x,), shape, x.dtype, shape)


def permute(x: Node, order: tuple[int, ...]) -> Node:
    order = tuple(int(i) for i in order)
    if sorted(order) != list(range(len(x.shape))):
        _fail("permute", f"{order} is not an order of the {len(x.shape)} axes of {x.shape}")
    if order == tuple(range(len(order))):
        return x
    return Node("permute", (x,), tuple(x.shape[i] for i in order), x.dtype, order)


def expand(x: Node, shape: tuple[int, ...]) -> Node:
    shape = tuple(int(n) for n in shape)
    if len(shape) != len(x.shape) or any(m != n and m != 1 for m, n in zip(x.shape, shape)):
        _fail("expand", f"cannot expand {x.shape} to {shape}: only axes of size 1 grow (reshape first to add axes)")
    return x if shape == x.shape else Node("expand", (x,), shape, x.dtype, shape)


def slice_(x: Node, spec: tuple[tuple[int, int, int], ...]) -> Node:
    """x[start:stop:step, ...] with one (start, stop, step) per axis, as Python's `slice.indices` gives them."""
    if len(spec) != len(x.shape):
        _fail("slice", f"{len(spec)} ranges for the {len(x.shape)} axes of {x.shape}")
    spec = tuple(tuple(int(v) for v in s) for s in spec)
    shape = tuple(len(range(*s)) for s in spec)
    for (start, stop, step), n in zip(spec, x.shape):
        if step == 0 or (len(range(start, stop, step)) and not (0 <= start < n and 0 <= start + step * (
                len(range(start, stop, step)) - 1) < n)):
            _fail("slice", f"range {start}:{stop}:{step} out of bounds for an axis of {n}")
    if all(s == (0, n, 1) for s, n in zip(spec, x.shape)):
        return x
    return Node("slice", (x,), shape, x.dtype, spec)


def cat(xs: list[Node], axis: int) -> Node:
    first = xs[0]
    if any(len(x.shape) != len(first.shape) or x.dtype != first.dtype or
           any(m != n for i, (m, n) in enumerate(zip(x.shape, first.shape)) if i != axis) for x in xs):
        _fail("cat", f"operands {[x.shape for x in xs]}: one dtype, equal sizes except along axis {axis}")
    shape = tuple(sum(x.shape[axis] for x in xs) if i == axis else n for i, n in enumerate(first.shape))
    return Node("cat", tuple(xs), shape, first.dtype, axis)


def assign(target: Node, value: Node) -> Node:
    """Write `value` into the buffer `target` loads (after every read of the old value in the step)."""
    if target.op != "load" or target.shape != value.shape or target.dtype != value.dtype:
        _fail("assign", f"target must be a load of value's shape and dtype, got {target} and {value}")
    return Node("assign", (target, value), value.shape, value.dtype)


# ---- walking and printing ------------------------------------------------------------------------------

def toposort(roots: Iterable[Node]) -> list[Node]:
    """Every node the roots depend on, each after its sources (iterative: graphs of a GPT step are deep)."""
    order, seen = [], set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((s, False) for s in reversed(node.srcs) if id(s) not in seen)
    return order


def readers(nodes: Iterable[Node]) -> dict[int, list[Node]]:
    """id(node) -> the nodes among `nodes` that read it (each once, in the order given)."""
    out: dict[int, list[Node]] = {}
    for n in nodes:
        for s in dict.fromkeys(n.srcs):
            out.setdefault(id(s), []).append(n)
    return out


def format_graph(roots: Iterable[Node]) -> str:
    """One line per node, SSA style: `%4 = add %2 %3    (8, 16) float32`."""
    names: dict[int, str] = {}
    lines = []
    for node in toposort(roots):
        names[id(node)] = f"%{len(names)}"
        arg = node.arg.name if isinstance(node.arg, Buffer) else node.arg
        args = " ".join(names[id(s)] for s in node.srcs) + ("" if arg is None else f" [{arg}]")
        lines.append(f"{names[id(node)]:>5} = {node.op:<8} {args:<28} {node.shape} {node.dtype}")
    return "\n".join(lines)


# ---- the oracle: the graph evaluated op by op in numpy (tests compare compiled kernels against it) -----------

_NP = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "recip": np.reciprocal, "tanh": np.tanh,
       "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
       "maximum": np.maximum, "lt": np.less, "eq": np.equal}


def evaluate(roots: list[Node]) -> list[np.ndarray]:
    """The value of each root, computed by numpy from the loads' `Buffer.array`s. Assigns are not performed:
    an assign's value is returned (the reference to compare an in-place update against)."""
    val: dict[int, np.ndarray] = {}
    for n in toposort(roots):
        s = [val[id(x)] for x in n.srcs]
        if n.op == "load":
            v = np.asarray(n.arg.array).reshape(n.shape)
        elif n.op == "const":
            v = np.full(n.shape, n.arg, dtype=n.dtype)
        elif n.op == "arange":
            v = np.broadcast_to(np.arange(n.shape[n.arg]).reshape(
                [-1 if i == n.arg else 1 for i in range(len(n.shape))]), n.shape)
        elif n.op == "cast":
            v = s[0].astype(n.dtype)
        elif n.op in _NP:
            with np.errstate(all="ignore"):
                v = _NP[n.op](*s)
        elif n.op == "where":
            v = np.where(*s)
        elif n.op in REDUCE:
            v = (np.sum if n.op == "sum" else np.max)(s[0], axis=n.arg, keepdims=True) if s[0].size or n.op == "sum" \
                else np.full(n.shape, -np.inf, n.dtype)
        elif n.op == "matmul":
            v = np.matmul(*s)
        elif n.op == "reshape":
            v = s[0].reshape(n.arg)
        elif n.op == "permute":
            v = s[0].transpose(n.arg)
        elif n.op == "expand":
            v = np.broadcast_to(s[0], n.arg)
        elif n.op == "slice":
            v = s[0][tuple(slice(a, b if b >= 0 else None, c) for a, b, c in n.arg)]
        elif n.op == "cat":
            v = np.concatenate(s, axis=n.arg)
        elif n.op == "assign":
            v = s[1]
        else:
            raise ValueError(f"ir.evaluate: unknown op {n.op!r}")
        val[id(n)] = np.asarray(v, dtype=n.dtype)
    return [val[id(r)] for r in roots]
