"""Views, basic indexing and in-place writes, lazily (chapter 10).

A view (reshape, permute, expand, a slice, even a reversed one) moves no data; in the graph it is one movement
node, and the back end's view folding turns it into index arithmetic. Each records the eager op's autograd node
(`reshape`, `permute`, `expand`, `index`), so chapter 6's rules move the gradient back; basic indexing's rule
(`into_zeros`) becomes a padding of g with zeros, built from flips, `cat` and reshapes. `t[...] = v` on a tensor
that lives outside the function (a parameter, an argument) is an `assign` of the whole tensor.
"""
from __future__ import annotations

import numpy as np

from teenygrad import autograd
from teenygrad.compiler import ir
from teenygrad.compiler.capture.lazy import CaptureError, LazyTensor, bcast, cast, current, node_of, wrap
from teenygrad.compiler.capture.ops import Scalar, scalar_operand
from teenygrad.kernels.layout import broadcast_shapes, normalize_axis, shape_args
from teenygrad.tensor import Tensor
from teenygrad.tensor_views import parse_key

# ---- views -------------------------------------------------------------------------------------------------------

def _view(op: str, src: Tensor, node: ir.Node, **saved: object) -> Tensor:
    out = wrap(node)
    return autograd.record(op, out, (src,), **saved) if src._requires_grad else out


def reshape(x: Tensor, shape: tuple, op: str = "reshape") -> Tensor:
    new = x._infer_shape(shape_args(shape), op)
    return _view("reshape", x, ir.reshape(node_of(x), new), shape=x.shape)


def permute(x: Tensor, dims: tuple) -> Tensor:
    order = tuple(normalize_axis(d, x.ndim, "permute") for d in shape_args(dims))
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"permute: {tuple(dims)} is not a permutation of the {x.ndim} axes")
    return _view("permute", x, ir.permute(node_of(x), order), dims=order)


def expand(x: Tensor, sizes: tuple) -> Tensor:
    sizes = shape_args(sizes)
    if len(sizes) < x.ndim:
        raise ValueError(f"expand: cannot expand shape {x.shape} to {sizes} (fewer dimensions)")
    pad = len(sizes) - x.ndim
    shape = list(sizes[:pad])
    for s, n in zip(sizes[pad:], x.shape):
        if s == -1 or s == n:
            shape.append(n)
        elif n == 1 and s >= 0:
            shape.append(s)
        else:
            raise ValueError(f"expand: cannot expand shape {x.shape} to {sizes}")
    if any(s < 0 for s in shape):
        raise ValueError(f"expand: -1 is not allowed for the new leading dimensions in {sizes}")
    return _view("expand", x, bcast(node_of(x), tuple(shape)), shape=x.shape)


def squeeze(x: Tensor, axis: int | None) -> Tensor:
    if axis is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        a = normalize_axis(axis, x.ndim, "squeeze")
        shape = tuple(n for d, n in enumerate(x.shape) if d != a or n != 1)
    return _view("reshape", x, ir.reshape(node_of(x), shape), shape=x.shape)


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    a = normalize_axis(axis, x.ndim + 1, "unsqueeze")
    return _view("reshape", x, ir.reshape(node_of(x), x.shape[:a] + (1,) + x.shape[a:]), shape=x.shape)


def index_plan(shape: tuple[int, ...], key: tuple) -> tuple[tuple, tuple[int, ...]]:
    """Basic indexing as one slice per axis (an int i is i:i+1) and the result's shape (ints dropped, None
    added), from the key as `tensor_views.parse_key` reads it for eager views (the same checks and errors)."""
    spec, out = [], []
    for k in parse_key(shape, key):
        if k is None:
            out.append(1)
        elif isinstance(k, int):
            spec.append((k, k + 1, 1))
        else:
            spec.append(k)
            out.append(len(range(*k)))
    return tuple(spec), tuple(out)


def getitem(x: Tensor, key: object) -> Tensor:
    if isinstance(key, (Tensor, list, np.ndarray)):
        return x.index_select(0, key)
    key = key if isinstance(key, tuple) else (key,)
    spec, shape = index_plan(x.shape, key)
    sliced = ir.slice_(node_of(x), spec) if spec else node_of(x)
    return _view("index", x, ir.reshape(sliced, shape), shape=x.shape, key=key)


def _pad_axis(node: ir.Node, axis: int, n: int, spec: tuple[int, int, int]) -> ir.Node:
    """Put the `count` entries of `node` along `axis` back at positions start, start+step, ... of an axis of n
    (zeros elsewhere): the gradient of a slice, from flips, interleaved zeros and cat."""
    start, stop, step = spec
    count = node.shape[axis]
    sh = node.shape
    zeros = lambda k: ir.const(0, node.dtype, sh[:axis] + (k,) + sh[axis + 1:])  # noqa: E731
    if count == 0:
        return zeros(n)
    first = start
    if step < 0:  # reversed: flip it, then it is a forward slice from its last position
        node = ir.slice_(node, tuple((count - 1, -1, -1) if d == axis else (0, m, 1) for d, m in enumerate(sh)))
        first, step = start + step * (count - 1), -step
    if step > 1:  # interleave step - 1 zeros after every entry, then drop the trailing ones
        wide = ir.cat([ir.reshape(node, sh[:axis + 1] + (1,) + sh[axis + 1:]),
                       ir.const(0, node.dtype, sh[:axis + 1] + (step - 1,) + sh[axis + 1:])], axis + 1)
        node = ir.reshape(wide, sh[:axis] + (count * step,) + sh[axis + 1:])
        node = ir.slice_(node, tuple((0, (count - 1) * step + 1, 1) if d == axis else (0, m, 1)
                                     for d, m in enumerate(node.shape)))
    after = n - first - node.shape[axis]
    parts = ([zeros(first)] if first else []) + [node] + ([zeros(after)] if after else [])
    return ir.cat(parts, axis) if len(parts) > 1 else node


def into_zeros(g: Tensor, shape: tuple[int, ...], key: tuple) -> Tensor:
    """Backward of basic indexing: zeros of the input's shape with g where the view read."""
    spec, _ = index_plan(shape, key)
    node = ir.reshape(node_of(g), tuple(len(range(*s)) for s in spec))
    for axis, (s, n) in enumerate(zip(spec, shape)):
        if s != (0, n, 1):
            node = _pad_axis(node, axis, n, s)
    return wrap(node)


# ---- writes and creation ------------------------------------------------------------------------------------------

def _read_since_made(x: LazyTensor) -> bool:
    """Has any tensor made in this trace after x been computed from x's node (a view of it, an op on it)?"""
    created = current().created
    after = next((i + 1 for i in range(len(created) - 1, -1, -1) if created[i] is x), 0)
    seen: set[int] = set()
    stack = [t._node for t in created[after:]]
    while stack:
        n = stack.pop()
        if n is x._node:
            return True
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.srcs)
    return False


def setitem(x: Tensor, key: object, value: Tensor | Scalar) -> None:
    """x[...] = value inside a trace: an assign of the whole of a tensor that lives outside the function (a
    parameter, or a Tensor argument, whose memory the call then writes)."""
    if autograd.grad_enabled and (x._requires_grad or (isinstance(value, Tensor) and value._requires_grad)):
        raise RuntimeError("setitem: in-place writes are not recorded by autograd, so a tensor that requires "
                           "grad cannot be written into or copied from; use no_grad() (e.g. for a parameter "
                           "update) or build a new tensor with cat/stack")
    key = key if isinstance(key, tuple) else (key,)
    spec, shape = index_plan(x.shape, key)
    node = getattr(x, "_node", None)
    if type(x) is LazyTensor and getattr(x, "_arg_key", None) is None and node is not None and node.op == "const" \
            and node.arg == 0:
        # zeros made in the trace, written into (a gradient written where a view read, as a learner's index rule
        # does): the zeros padded around the value instead. Something that read x before the write holds the
        # zeros' node, and eagerly it would see the written values: refused rather than computed wrong
        if _read_since_made(x):
            raise CaptureError("setitem: this zeros tensor was read (a view or an op took it) before part of it "
                               "was written; write into it before reading it, or run the function eagerly")
        v = value if isinstance(value, Tensor) else scalar_operand(value, x, "setitem")
        x._node = node_of(into_zeros(wrap(bcast(cast(node_of(v), x.dtype), shape)), x.shape, key))
        return
    if shape != x.shape or any(s != (0, n, 1) for s, n in zip(spec, x.shape)):
        raise CaptureError("setitem: writing into part of a tensor (a slice) cannot be captured yet; write the "
                           "whole tensor (t[...] = new value), or run the function eagerly")
    arg = getattr(x, "_arg_key", None)
    if type(x) is LazyTensor and arg is None:
        raise CaptureError("setitem: writing into a tensor computed inside a compiled function cannot be captured; "
                           "build the new value with cat/stack or arithmetic instead")
    v = value if isinstance(value, Tensor) else scalar_operand(value, x, "setitem")
    if broadcast_shapes(v.shape, x.shape, "copy") != x.shape:
        raise ValueError(f"copy: cannot write shape {v.shape} into shape {x.shape}")
    trace, node = current(), bcast(cast(node_of(v), x.dtype), x.shape)
    if arg is not None:  # an argument: the caller's tensor is written; later reads in the trace see the new value
        trace.assign(arg, node)
        x._node = node
        return
    trace.assign_tensor(x, node)
    autograd.bump_version(x._buf)  # as eagerly: a saved copy of the old values is now stale
