"""Reverse-mode automatic differentiation on tensors (chapter 6): the engine. It records the graph as the
forward runs and walks it backward; the rules it calls, one per op, live beside each op's forward in
`teenygrad.ops` (the table `teenygrad.ops.RULES`).

The graph is recorded as the forward runs. Every op that has an input with `requires_grad=True` gives its
output a `Node` (its `ctx`, also `tensor.grad_fn`): the op's name, its inputs, and whatever the op saved
for its backward rule. When nothing requires grad, nothing is recorded: an op pays one attribute check.
`y.backward()` walks the graph from y back to the leaves (the tensors you created with requires_grad=True)
in reverse topological order, calls each node's rule to turn dL/d(out) into dL/d(input) for every input,
adds up the gradients of tensors used more than once, and finally adds them into the leaves' `.grad`.
That walk (`topological_order`, `backward`) is exercise 6's part "backward"; `unbroadcast` and most rules are
its other parts (marked where they are defined, in `teenygrad.ops`).

Rule calling convention
-----------------------
A rule is a function `rule(ctx, g) -> tuple`, found in `teenygrad.ops.RULES` by op name when backward
reaches the node.

  g      dL/d(out): the gradient of the final result with respect to this op's output. A Tensor of the
         output's shape and dtype; it may be a non-contiguous view (e.g. the stride-0 expansion a `sum`
         rule returns), so treat it as read-only.
  ctx    what the forward call recorded:
           ctx.op      the op name (a key of the rule table)
           ctx.inputs  the input tensors, in order (a Python scalar operand appears as a 0-d tensor)
           ctx.needs   one bool per input: does that input need a gradient?
         and, by name, what the op saved. Every entry in the table below says what it reads; in short:
           unary ops         ctx.x (the input), ctx.out (the output)
           binary ops        ctx.a, ctx.b (the inputs, *before* broadcasting), ctx.out
           matmul            ctx.a, ctx.b
           sum, mean, max    ctx.x, ctx.axes (sorted tuple of reduced axes), ctx.keepdim, ctx.shape (x's);
                             mean also ctx.scale (1 / number of elements averaged)
           softmax, log_softmax      ctx.out, ctx.axis
           views             ctx.shape (the input's shape); permute ctx.dims; index ctx.key; cast ctx.dtype
           gather, index_select      ctx.shape, ctx.axis, ctx.index;  cat ctx.axis, ctx.spans
           cross_entropy     ctx.x (logits as (rows, C)), ctx.targets, ctx.lse (per row), ctx.shape
  return one gradient per input, in input order, each with *that input's shape* (the engine checks, and
         casts it to the input's dtype). For an input that needs no gradient return None or False:
         `ctx.needs[i] and expr` skips computing expr. Computing it anyway is allowed, just wasted work.

Rules run with recording switched off (as under `no_grad()`), so their Tensor ops build no graph. Swap in
your own rules for a block with `use_rules(add=my_add)`; the rules in effect when backward runs are used.

In-place changes: every tensor saved in a ctx is checked at backward time against the version counter
of its buffer, which `t[...] = v` bumps (writes through `.numpy()` are not seen).
"""
from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Callable, ContextManager

import numpy as np

from teenygrad import devices
from teenygrad._swap import swapped
from teenygrad.edition import exercise

if TYPE_CHECKING:  # the engine handles Tensors but never builds one from scratch: no import of teenygrad.tensor
    from teenygrad.tensor import Tensor

Rule = Callable[["Node", "Tensor"], tuple]

# ---- grad mode -------------------------------------------------------------------------------------

grad_enabled: bool = True  # read by every recording op; switched off by no_grad() and during backward


def is_grad_enabled() -> bool:
    return grad_enabled


class no_grad(contextlib.ContextDecorator):  # noqa: N801 - named like a function, as in PyTorch
    """Record nothing inside: `with teenygrad.no_grad(): ...`, or as a decorator, `@no_grad()` or `@no_grad`.

    For evaluation and for updating parameters: results have requires_grad=False and no graph."""

    def __new__(cls, fn: Callable | None = None):
        self = super().__new__(cls)
        self._prev: list[bool] = []  # a stack, so one instance can be entered recursively (as a decorator)
        return self if fn is None else self(fn)

    def __enter__(self) -> None:
        global grad_enabled
        self._prev.append(grad_enabled)
        grad_enabled = False

    def __exit__(self, *exc: object) -> None:
        global grad_enabled
        grad_enabled = self._prev.pop()


def _is_tensor(v: object) -> bool:
    """Is v a Tensor? (Checked by its class's autograd attribute: this module does not import Tensor.)"""
    return hasattr(type(v), "_requires_grad")


# ---- in-place versions -----------------------------------------------------------------------------

_VERSIONS: dict[int, int] = {}  # id(buffer) -> number of in-place writes; only buffers ever written


def bump_version(buf: object) -> None:
    """Called by `t[...] = v`. The entry disappears with the buffer, so a recycled id starts again at 0."""
    key = id(buf)
    if key not in _VERSIONS:
        weakref.finalize(buf, _VERSIONS.pop, key, None)
        _VERSIONS[key] = 0
    _VERSIONS[key] += 1


# ---- recording ---------------------------------------------------------------------------------------

class Node:
    """How one tensor was made (the `ctx` a rule receives): op, inputs, needs, and the saved values."""

    def __init__(self, op: str, inputs: tuple[Tensor, ...], saved: dict[str, object]) -> None:
        self.__dict__.update(saved)
        self.op, self.inputs, self._saved = op, inputs, saved
        self.needs = tuple([x._requires_grad for x in inputs])
        # versions of the saved tensors' buffers; only tracked once some buffer was ever written in place
        self._versions = {k: _VERSIONS.get(id(v._buf), 0) for k, v in saved.items() if _is_tensor(v)} \
            if _VERSIONS else None

    def check_versions(self) -> None:
        for k, t in self._saved.items():
            if _is_tensor(t) and _VERSIONS.get(id(t._buf), 0) != (self._versions or {}).get(k, 0):
                raise RuntimeError(f"backward: a tensor needed for backward was modified in place (a tensor of "
                                   f"shape {t.shape} saved by {self.op!r}, written with t[...] = ... after the "
                                   f"forward pass); write into a clone() instead, or recompute the forward pass")

    def __repr__(self) -> str:
        return f"<{self.op} backward>"


def record(op: str, out: Tensor, inputs: tuple[Tensor, ...], /, **saved: object) -> Tensor:
    """Give `out` a Node (called by the ops, only when some input requires grad). An op that saves its
    output passes it as `out=out`; the node keeps an alias, since out -> node -> out would be a cycle."""
    if not grad_enabled:
        return out
    if "out" in saved:
        saved["out"] = out.detach()
    out._ctx = Node(op, inputs, saved)
    out._requires_grad = True
    return out


def set_requires_grad(t: Tensor, value: bool) -> Tensor:
    if value and t.dtype == np.int64:
        raise TypeError("requires_grad: only float tensors can require gradients, got an int64 tensor "
                        "(indices and class labels are not differentiable)")
    if not value and t._ctx is not None:
        raise RuntimeError("requires_grad: cannot switch it off on a tensor computed from others; use detach()")
    t._requires_grad = bool(value)
    return t


# ---- the rules -------------------------------------------------------------------------------------------

def _rules() -> dict[str, Rule]:
    """The rule table, `teenygrad.ops.RULES` (each op family's rules next to its forward). The op layer
    records into this engine, so it imports this module; the engine reads the table only when backward runs,
    which keeps the import graph free of loops."""
    from teenygrad.ops import RULES
    return RULES


def use_rules(**swaps: Rule) -> ContextManager[None]:
    """Run a block with some backward rules replaced: `with use_rules(add=my_add): loss.backward()`.
    The old rules come back when the block ends, also when it raises."""
    return swapped(_rules(), "op", **swaps)


# ---- the backward pass (exercise 6, part "backward") -------------------------------------------------------

@exercise("06-tensor-autograd", "backward")
def topological_order(root: Tensor) -> list[Tensor]:
    """The tensors backward visits, each after all of its inputs: every tensor with a node (`t._ctx` is not None)
    that `root` reaches through the inputs that need a gradient (`t._ctx.needs[i]`), `root` included when it has a
    node. Each exactly once, told apart by identity (`id`), never by value; leaves (no node) are not listed.
    Without recursion: a graph can be a chain of 30,000 ops, far deeper than Python's recursion limit."""
    order, visited, stack = [], set(), [(root, False)]  # iterative depth-first post-order
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
        elif t._ctx is not None and id(t) not in visited:
            visited.add(id(t))
            stack.append((t, True))
            stack.extend((x, False) for x, need in zip(t._ctx.inputs, t._ctx.needs) if need and x._ctx is not None)
    return order


@exercise("06-tensor-autograd", "backward")
def backward(root: Tensor, grad: Tensor | float | None = None) -> None:
    """Add d(root)/d(leaf), times `grad`, into every leaf's .grad (Tensor.backward calls this).

    Checks, in this order: root of dtype int64 -> TypeError; root not requiring grad -> RuntimeError; `grad` None
    for a root of more than one element -> ValueError (a one-element root gets ones); a given `grad` becomes a
    Tensor of root's dtype, and a shape other than root's -> ValueError.

    The walk runs with recording off (as under `no_grad()`; the previous mode comes back afterwards, also when a
    rule raises). It visits `topological_order(root)` from the end, so a tensor's gradient is complete (the sum
    over all of its uses) before its node's rule runs; a tensor no gradient reached is skipped. For each node:
    `ctx.check_versions()` (raises if a saved tensor was written in place), then its rule, `rules[ctx.op]` with
    `rules` the table `teenygrad.ops.RULES` as it is when backward runs (`use_rules` swaps entries; a missing op
    -> KeyError naming it). The rule returns one gradient per input (a lone Tensor counts as one): another count
    -> ValueError. A gradient that is None or False, or for an input that needs none, is skipped; one that is not
    a Tensor -> TypeError; one whose shape is not its input's -> ValueError; it is cast to the input's dtype, and
    summed with the input's other gradients.

    Storing: a tensor with `_retain` set (retain_grad) gets its complete gradient added into its .grad when
    visited; every leaf reached (root too, when root is a leaf) at the end. Adding into .grad: when it is None,
    .grad becomes the gradient, copied unless no one else can see its buffer (not the caller's `grad`, not one a
    rule received or returned that may alias it); else .grad becomes a new tensor .grad + g: a .grad the user
    holds is never changed in place, and no two .grads share memory."""
    if root.dtype == np.int64:
        raise TypeError("backward: cannot differentiate an integer tensor (dtype int64)")
    if not root._requires_grad:
        raise RuntimeError("backward: this tensor does not require grad: no input had requires_grad=True, or "
                           "it was computed under no_grad() or from detach()ed tensors")
    if grad is None:
        if root.size != 1:
            raise ValueError(f"backward: grad must be given for a tensor of shape {root.shape}; only scalars "
                             f"get an implicit gradient of 1")
        grad = type(root)._contiguous(devices.from_host(np.ones(root.size, dtype=root.dtype), root.device),
                                      root.shape)
    else:
        grad = grad.to(root.dtype) if _is_tensor(grad) else type(root)(grad, dtype=root.dtype, device=root.device)
        if grad.shape != root.shape:
            raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {root.shape}")
    rules = _rules()
    grads: dict[int, Tensor] = {id(root): grad}  # id(tensor) -> dL/d(tensor) summed so far
    owned: set[int] = set()  # ids whose entry in grads is a sum we made ourselves: safe to add into in place
    # buffers already seen by a rule or stored in a .grad, by id. Weak: an entry goes when its buffer dies, since a
    # new buffer may then get the same id (a plain set of ids copied gradients no one else could see)
    handed: weakref.WeakValueDictionary = weakref.WeakValueDictionary({id(grad._buf): grad._buf})
    leaves: dict[int, Tensor] = {id(root): root} if root._ctx is None else {}
    check_versions = bool(_VERSIONS)

    def store(t: Tensor, g: Tensor) -> None:  # t.grad += g, never in place; g kept only if no one else sees it
        if t.grad is None:
            t.grad = g if g.is_contiguous() and id(g._buf) not in handed else g.clone()
        else:
            t.grad = t.grad + g
        handed[id(t.grad._buf)] = t.grad._buf

    global grad_enabled
    prev, grad_enabled = grad_enabled, False
    try:
        for t in reversed(topological_order(root)):  # outputs before inputs: a node's g is complete here
            g = grads.pop(id(t), None)
            if g is None:
                continue
            owned.discard(id(t))
            if t._retain:
                store(t, g)
            handed[id(g._buf)] = g._buf
            node = t._ctx
            if check_versions:
                node.check_versions()
            if node.op not in rules:
                raise KeyError(f"backward: no rule for op {node.op!r}; known ops: {', '.join(sorted(rules))}")
            out = rules[node.op](node, g)
            out = (out,) if _is_tensor(out) else tuple(out)
            if len(out) != len(node.inputs):
                raise ValueError(f"backward: the rule for {node.op!r} returned {len(out)} gradient(s) for "
                                 f"{len(node.inputs)} input(s); return one per input (None for no gradient)")
            for i, (x, gx) in enumerate(zip(node.inputs, out)):
                if not node.needs[i] or gx is None or gx is False:
                    continue
                if not _is_tensor(gx):
                    raise TypeError(f"backward: the rule for {node.op!r} returned a {type(gx).__name__} for input "
                                    f"{i}; gradients must be Tensors (or None)")
                if gx.shape != x.shape:
                    raise ValueError(f"backward: the rule for {node.op!r} returned a gradient of shape {gx.shape} "
                                     f"for input {i} of shape {x.shape} (a broadcast input needs its gradient "
                                     f"unbroadcast)")
                gx = gx if gx.dtype == x.dtype else gx.to(x.dtype)  # grad mode is off: .to records nothing
                key = id(x)
                if x._ctx is None:
                    leaves[key] = x
                old = grads.get(key)
                if old is None:
                    grads[key] = gx  # may alias g or another gradient: never written into
                elif key in owned:
                    old._add_into(gx)  # our own fresh sum: accumulate without a new buffer
                else:
                    grads[key] = old + gx
                    owned.add(key)
        for key, leaf in leaves.items():
            if key in grads:
                store(leaf, grads[key])
    finally:
        grad_enabled = prev
