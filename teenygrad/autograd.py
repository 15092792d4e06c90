"""Reverse-mode automatic differentiation on tensors: the graph, the backward pass, and one rule per op.

The graph is recorded as the forward runs. Every op that has an input with `requires_grad=True` gives its
output a `Node` (its `ctx`, also `tensor.grad_fn`): the op's name, its inputs, and whatever the op saved
for its backward rule. When nothing requires grad, nothing is recorded: an op pays one attribute check.
`y.backward()` walks the graph from y back to the leaves (the tensors you created with requires_grad=True)
in reverse topological order, calls each node's rule to turn dL/d(out) into dL/d(input) for every input,
adds up the gradients of tensors used more than once, and finally adds them into the leaves' `.grad`.

Rule calling convention
-----------------------
A rule is a function `rule(ctx, g) -> tuple`, found in `RULES` by op name when backward reaches the node.

  g      dL/d(out): the gradient of the final result with respect to this op's output. A Tensor of the
         output's shape and dtype; it may be a non-contiguous view (e.g. the stride-0 expansion a `sum`
         rule returns), so treat it as read-only.
  ctx    what the forward call recorded:
           ctx.op      the op name (a key of RULES)
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
from typing import Callable, ContextManager

from teenygrad import dispatch
from teenygrad._swap import swapped
from teenygrad.kernels.layout import prod
from teenygrad.tensor import Tensor, full, int64, zeros
from teenygrad.tensor_views import _basic_index

Rule = Callable[["Node", Tensor], tuple]

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
        self._versions = {k: _VERSIONS.get(id(v._buf), 0) for k, v in saved.items() if isinstance(v, Tensor)} \
            if _VERSIONS else None

    def check_versions(self) -> None:
        for k, t in self._saved.items():
            if isinstance(t, Tensor) and _VERSIONS.get(id(t._buf), 0) != (self._versions or {}).get(k, 0):
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
    if value and t.dtype == int64:
        raise TypeError("requires_grad: only float tensors can require gradients, got an int64 tensor "
                        "(indices and class labels are not differentiable)")
    if not value and t._ctx is not None:
        raise RuntimeError("requires_grad: cannot switch it off on a tensor computed from others; use detach()")
    t._requires_grad = bool(value)
    return t


# ---- the rules -----------------------------------------------------------------------------------------

def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum `grad`, the gradient of a broadcast result, back down to an input's `shape`.

    Broadcasting reads one input element at many output positions, so its gradient is the sum of theirs:
    sum over the leading dims the input did not have, and over dims where the input had size 1 (keeping
    them as size 1). Returns grad itself when the shapes already match (no copy).
        unbroadcast(g of shape (4, 2, 3), (2, 1)) == g.sum(axis=(0, 2), keepdim=True).reshape(2, 1)
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"unbroadcast: gradient of shape {grad.shape} has fewer dims than shape {shape}")
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and grad.shape[lead + d] != 1)
    return grad.sum(axes, keepdim=True).reshape(shape)


def _expand_back(g: Tensor, ctx: Node) -> Tensor:
    """Undo a reduction's shape: put the reduced axes back as size 1, then expand (stride 0, no copy)."""
    return g.reshape(tuple(1 if d in ctx.axes else n for d, n in enumerate(ctx.shape))).expand(ctx.shape)


def _max_backward(ctx: Node, g: Tensor) -> tuple[Tensor]:
    """The gradient goes to one position per reduced group: the *first* maximum in row-major order of the
    reduced axes (argmax's tie rule), so ties never split or duplicate it."""
    kept = [d for d in range(ctx.x.ndim) if d not in ctx.axes]
    kshape = tuple(ctx.shape[d] for d in kept)
    where = ctx.x.argmax(ctx.axes).reshape(*kshape, 1)  # flat position inside each reduced group
    dx = dispatch.scatter_add(g.reshape(*kshape, 1), (*kshape, prod(tuple(ctx.shape[d] for d in ctx.axes))), -1, where)
    order = kept + list(ctx.axes)  # dx is laid out as x.permute(order): move the axes back
    return (dx.reshape(*kshape, *(ctx.shape[d] for d in ctx.axes)).permute(*_inverse(order)),)


def _matmul_backward(ctx: Node, g: Tensor) -> tuple[Tensor | bool, Tensor | bool]:
    """out = a @ b:  da = g @ b^T,  db = a^T @ g, then summed over broadcast batch dims. A 1-D operand
    was a row (a) or column (b) vector whose dim the forward dropped: put it back in g, and take it out again."""
    a, b = ctx.a, ctx.b
    a2, b2 = (a.reshape(1, -1) if a.ndim == 1 else a), (b.reshape(-1, 1) if b.ndim == 1 else b)
    g = g.unsqueeze(-1) if b.ndim == 1 else g
    g = g.unsqueeze(-2) if a.ndim == 1 else g
    da = ctx.needs[0] and unbroadcast(g @ b2.transpose(-1, -2), a2.shape).reshape(a.shape)
    if not ctx.needs[1]:
        return da, False
    if b2.ndim == 2:  # b shared by the whole batch: fold the batch into one (K, rows) @ (rows, N) product
        return da, (a2.reshape(-1, a2.shape[-1]).T @ g.reshape(-1, g.shape[-1])).reshape(b.shape)
    return da, unbroadcast(a2.transpose(-1, -2) @ g, b2.shape).reshape(b.shape)


def _into_zeros(g: Tensor, shape: tuple[int, ...], key: tuple) -> Tensor:
    """Backward of basic indexing: zeros of the input's shape with g written where the view read."""
    dx = zeros(shape, dtype=g.dtype)
    dispatch.copy_into(g, _basic_index(dx, key))  # not dx[key] = g: a fresh buffer needs no version count
    return dx


def _inverse(dims: list[int] | tuple[int, ...]) -> list[int]:
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return inv


RULES: dict[str, Rule] = {
    # ---- elementwise, unary: out = f(x);  dx = g * f'(x) ------------------------------------------------
    "neg": lambda ctx, g: (-g,),                                             # d(-x) = -1
    "exp": lambda ctx, g: (g * ctx.out,),                                    # d e^x = e^x = out
    "log": lambda ctx, g: (g / ctx.x,),                                      # d log x = 1/x
    "sqrt": lambda ctx, g: (g / (ctx.out * 2),),                             # d sqrt(x) = 1 / (2 sqrt(x))
    "tanh": lambda ctx, g: (g * (1 - ctx.out * ctx.out),),                   # d tanh x = 1 - tanh^2 x
    "sigmoid": lambda ctx, g: (g * ctx.out * (1 - ctx.out),),                # d s(x) = s(x) (1 - s(x))
    "relu": lambda ctx, g: (g * (ctx.x > 0),),                               # 1 where x > 0, else 0 (0 at x = 0)
    "gelu": lambda ctx, g: (dispatch.binary("gelu_backward", ctx.x, g),),    # g * gelu'(x), one fused kernel
    "abs": lambda ctx, g: (g * ((ctx.x > 0) - (ctx.x < 0)),),                # sign(x) (0 at x = 0)
    # ---- elementwise, binary, with broadcasting: each partial is summed back to its input's shape ------
    "add": lambda ctx, g: (ctx.needs[0] and unbroadcast(g, ctx.a.shape),     # d(a+b)/da = 1
                           ctx.needs[1] and unbroadcast(g, ctx.b.shape)),    # d(a+b)/db = 1
    "sub": lambda ctx, g: (ctx.needs[0] and unbroadcast(g, ctx.a.shape),     # d(a-b)/da = 1
                           ctx.needs[1] and unbroadcast(-g, ctx.b.shape)),   # d(a-b)/db = -1
    "mul": lambda ctx, g: (ctx.needs[0] and unbroadcast(g * ctx.b, ctx.a.shape),   # d(ab)/da = b
                           ctx.needs[1] and unbroadcast(g * ctx.a, ctx.b.shape)),  # d(ab)/db = a
    "div": lambda ctx, g: (ctx.needs[0] and unbroadcast(g / ctx.b, ctx.a.shape),             # d(a/b)/da = 1/b
                           ctx.needs[1] and unbroadcast(-g * ctx.out / ctx.b, ctx.b.shape)),  # /db = -a/b^2
    "pow": lambda ctx, g: (ctx.needs[0] and unbroadcast(g * ctx.b * ctx.a ** (ctx.b - 1), ctx.a.shape),  # b a^(b-1)
                           ctx.needs[1] and unbroadcast(g * ctx.out * ctx.a.log(), ctx.b.shape)),       # a^b log a
    "maximum": lambda ctx, g: (ctx.needs[0] and unbroadcast(g * (ctx.a >= ctx.b), ctx.a.shape),  # 1 where a wins,
                               ctx.needs[1] and unbroadcast(g * (ctx.a < ctx.b), ctx.b.shape)),  # ties go to a
    # ---- views: move g back through the same index map ---------------------------------------------------
    "reshape": lambda ctx, g: (g.reshape(ctx.shape),),         # same elements, old shape (also view, (un)squeeze)
    "permute": lambda ctx, g: (g.permute(*_inverse(ctx.dims)),),  # undo the axis order (also transpose, .T)
    "expand": lambda ctx, g: (unbroadcast(g, ctx.shape),),     # each repeated read adds its gradient
    "index": lambda ctx, g: (_into_zeros(g, ctx.shape, ctx.key),),  # slices/ints: g where read, 0 elsewhere
    "copy": lambda ctx, g: (g,),                               # contiguous(), clone(): the identity
    "cast": lambda ctx, g: (g.to(ctx.dtype),),                 # float32 <-> float64: back to the input's dtype
    # ---- matmul and reductions -----------------------------------------------------------------------------
    "matmul": _matmul_backward,                                # da = g @ b^T, db = a^T @ g
    "sum": lambda ctx, g: (_expand_back(g, ctx),),             # every summed element gets g
    "mean": lambda ctx, g: (_expand_back(g * ctx.scale, ctx),),  # ... times 1/n
    "max": _max_backward,                                      # g goes to the (first) argmax, 0 elsewhere
    "softmax": lambda ctx, g: (dispatch.softmax_backward("softmax", ctx.out, g, ctx.axis),),  # y (g - sum g y)
    "log_softmax": lambda ctx, g: (dispatch.softmax_backward("log_softmax", ctx.out, g, ctx.axis),),  # g - e^y sum g
    # ---- indexing and joining ------------------------------------------------------------------------------
    "gather": lambda ctx, g: (dispatch.scatter_add(g, ctx.shape, ctx.axis, ctx.index),),  # repeats add up
    "index_select": lambda ctx, g: (dispatch.index_add(g, ctx.shape, ctx.axis, ctx.index),),  # embedding grad
    "cat": lambda ctx, g: tuple(g._narrow(ctx.axis, start, n) for start, n in ctx.spans),  # each its slice
    "cross_entropy": lambda ctx, g: (dispatch.cross_entropy_backward(ctx, g),),  # (softmax - onehot) / rows
}
DEFAULT_RULES: dict[str, Rule] = dict(RULES)


def use_rules(**swaps: Rule) -> ContextManager[None]:
    """Run a block with some backward rules replaced: `with use_rules(add=my_add): loss.backward()`.
    The old rules come back when the block ends, also when it raises."""
    return swapped(RULES, "op", **swaps)


# ---- the backward pass ----------------------------------------------------------------------------------

def backward(root: Tensor, grad: Tensor | float | None = None) -> None:
    """Add d(root)/d(leaf), times `grad`, into every leaf's .grad (see Tensor.backward)."""
    if root.dtype == int64:
        raise TypeError("backward: cannot differentiate an integer tensor (dtype int64)")
    if not root._requires_grad:
        raise RuntimeError("backward: this tensor does not require grad: no input had requires_grad=True, or "
                           "it was computed under no_grad() or from detach()ed tensors")
    if grad is None:
        if root.size != 1:
            raise ValueError(f"backward: grad must be given for a tensor of shape {root.shape}; only scalars "
                             f"get an implicit gradient of 1")
        grad = full(root.shape, 1.0, dtype=root.dtype)
    else:
        grad = grad.to(root.dtype) if isinstance(grad, Tensor) else Tensor(grad, dtype=root.dtype)
        if grad.shape != root.shape:
            raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {root.shape}")
    global grad_enabled
    prev, grad_enabled = grad_enabled, False
    try:
        _run(root, grad)
    finally:
        grad_enabled = prev


def _topo(root: Tensor) -> list[Tensor]:
    """Tensors with a Node, each after all of its inputs (iterative depth-first post-order: no recursion limit)."""
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
        elif t._ctx is not None and id(t) not in visited:
            visited.add(id(t))
            stack.append((t, True))
            stack.extend((x, False) for x, need in zip(t._ctx.inputs, t._ctx.needs) if need and x._ctx is not None)
    return order


def _run(root: Tensor, seed: Tensor) -> None:
    grads: dict[int, Tensor] = {id(root): seed}  # id(tensor) -> dL/d(tensor) summed so far
    owned: set[int] = set()  # ids whose entry in grads is a sum we made ourselves: safe to add into in place
    handed: set[int] = {id(seed._buf)}  # buffers already seen by a rule or stored in a .grad
    leaves: dict[int, Tensor] = {id(root): root} if root._ctx is None else {}
    check_versions = bool(_VERSIONS)
    for t in reversed(_topo(root)):  # outputs before inputs: a node's g is complete when we reach it
        g = grads.pop(id(t), None)
        if g is None:
            continue
        owned.discard(id(t))
        if t._retain:
            _store(t, g, handed)
        handed.add(id(g._buf))
        node = t._ctx
        if check_versions:
            node.check_versions()
        for i, (x, gx) in enumerate(zip(node.inputs, _call_rule(node, g))):
            if not node.needs[i] or gx is None or gx is False:
                continue
            gx = _conform(node, i, x, gx)
            key = id(x)
            if x._ctx is None:
                leaves[key] = x
            old = grads.get(key)
            if old is None:
                grads[key] = gx  # may alias g or another gradient: never written into
            elif key in owned:
                dispatch.add_into(old, gx)  # our own fresh sum: accumulate without a new buffer
            else:
                grads[key] = old + gx
                owned.add(key)
    for key, leaf in leaves.items():
        if key in grads:
            _store(leaf, grads[key], handed)


def _call_rule(node: Node, g: Tensor) -> tuple:
    try:
        rule = RULES[node.op]
    except KeyError:
        raise KeyError(f"backward: no rule for op {node.op!r}; known ops: {', '.join(sorted(RULES))}") from None
    out = rule(node, g)
    out = (out,) if isinstance(out, Tensor) else tuple(out)
    if len(out) != len(node.inputs):
        raise ValueError(f"backward: the rule for {node.op!r} returned {len(out)} gradient(s) for "
                         f"{len(node.inputs)} input(s); return one per input (None for no gradient)")
    return out


def _conform(node: Node, i: int, x: Tensor, gx: object) -> Tensor:
    """Check a rule's gradient for input i (a Tensor of the input's shape) and give it the input's dtype."""
    if not isinstance(gx, Tensor):
        raise TypeError(f"backward: the rule for {node.op!r} returned a {type(gx).__name__} for input {i}; "
                        f"gradients must be Tensors (or None)")
    if gx.shape != x.shape:
        raise ValueError(f"backward: the rule for {node.op!r} returned a gradient of shape {gx.shape} for input "
                         f"{i} of shape {x.shape} (a broadcast input needs its gradient unbroadcast)")
    return gx if gx.dtype == x.dtype else dispatch.contiguous(gx, x.dtype)


def _store(t: Tensor, g: Tensor, handed: set[int]) -> None:
    """t.grad += g. The first time, g is kept as it is when no one else can see its buffer, else copied;
    later, a new tensor is made (a .grad you hold is never changed under your feet)."""
    if t.grad is None:
        t.grad = g if g.is_contiguous() and id(g._buf) not in handed else dispatch.contiguous(g)
    else:
        t.grad = t.grad + g
    handed.add(id(t.grad._buf))
