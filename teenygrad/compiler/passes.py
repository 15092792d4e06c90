"""The compiler's passes (chapter 10): small functions from graph to graph, each printable.

A compiler is a pipeline of rewrites. Each pass here takes a `Graph` (the outputs a step returns and the
`assign` effects it performs) and returns a new one; nodes are immutable, so a pass rebuilds what it changes
and shares the rest. `Graph.format()` prints the IR (`ir.format_graph`), so a learner can watch each pass:

    fold_constants   an op whose operands are all constants is computed now, once (and x*1, x+0 vanish)
    eliminate_dead   nodes nothing needs are dropped (the graph keeps only what its roots reach)
    eliminate_common two nodes with the same op, argument and operands are one node (CSE)
    merge_cats       a sum of zero-padded pieces that do not overlap (a sliced tensor's gradient) is one cat
    fold_views       chains of reshape/permute/expand/slice become one strided `view` of a buffer: a view is
                     index arithmetic (offset + sum of index * stride), so no data moves. Views are pushed
                     down through elementwise ops (permute(a + b) = permute(a) + permute(b)) until they sit on
                     a buffer. A reshape that strides cannot express (a transposed matrix flattened) forces a
                     copy: a `contiguous` node, which the scheduler turns into a copy kernel.

Pushing a view below an elementwise op computes the op once per element of the view: for a permute or a
slice that is the same work, but an expand of an expensive result (exp of a row vector broadcast over rows)
recomputes it for every row, unless LLVM hoists it out of the inner loop (it does when the expanded axis is
the inner one).

After `fold_views` two ops appear that the front end never writes: `view` (arg: a `View`; its source is a
load, an arange, or a node the scheduler will store in memory) and `contiguous` (a forced copy).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from teenygrad.compiler import ir
from teenygrad.compiler.ir import Node
from teenygrad.edition import exercise
from teenygrad.kernels.layout import contiguous_strides, view_strides

ELEMENTWISE = (*ir.UNARY, *ir.BINARY, *ir.TERNARY)
STORED = ("load", "arange", *ir.REDUCE, "matmul", "cat", "contiguous")  # what a view's source may be
SHARED_READS = 3  # an expression several nodes read is stored first when it reads more arrays (fold_views)


@dataclass(frozen=True)
class View:
    """Element i (a multi-index) of the view is element offset + sum(i[d] * strides[d]) of its source, read as
    a flat array. For an arange source the value itself is that number (the index counted along)."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> View:
        return View(tuple(shape), tuple(contiguous_strides(tuple(shape))), 0)

    def is_contiguous(self) -> bool:
        return self.offset == 0 and self.strides == tuple(contiguous_strides(self.shape)) or \
            all(n == 1 for n in self.shape) and self.offset == 0

    def permute(self, order: tuple[int, ...]) -> View:
        return View(tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order), self.offset)

    def expand(self, shape: tuple[int, ...]) -> View:
        return View(shape, tuple(0 if m != n else s for m, n, s in zip(self.shape, shape, self.strides)), self.offset)

    def slice(self, spec: tuple[tuple[int, int, int], ...]) -> View:
        shape = tuple(len(range(*s)) for s in spec)
        offset = self.offset + sum(start * st for (start, _, _), st, n in zip(spec, self.strides, shape) if n)
        return View(shape, tuple(st * step for (_, _, step), st in zip(spec, self.strides)), offset)

    def reshape(self, shape: tuple[int, ...]) -> View | None:
        """The same elements in row-major order under a new shape, or None when one stride per axis can't say it."""
        if 0 in shape:
            return View.contiguous(shape)
        strides = view_strides(self.shape, self.strides, shape)
        return None if strides is None else View(tuple(shape), tuple(strides), self.offset)

    def __str__(self) -> str:
        return f"strides={self.strides} offset={self.offset}"


@dataclass
class Graph:
    """What a pass takes and returns: the step's outputs and its effects (assigns), and optionally `extra`
    nodes that were built but are not needed (what `eliminate_dead` drops)."""
    outputs: list[Node]
    effects: list[Node] = field(default_factory=list)
    extra: list[Node] = field(default_factory=list)

    @property
    def roots(self) -> list[Node]:
        return [*self.outputs, *self.effects]

    def nodes(self) -> list[Node]:
        return ir.toposort([*self.roots, *self.extra])

    def format(self) -> str:
        return ir.format_graph([*self.roots, *self.extra])

    def rebuild(self, fn: Callable[[Node, tuple[Node, ...]], Node]) -> Graph:
        """Walk the graph sources first; `fn(old_node, new_srcs)` returns each node's replacement."""
        new: dict[int, Node] = {}
        for n in self.nodes():
            new[id(n)] = fn(n, tuple(new[id(s)] for s in n.srcs))
        return Graph([new[id(n)] for n in self.outputs], [new[id(n)] for n in self.effects],
                     [new[id(n)] for n in self.extra])


def _same(n: Node, srcs: tuple[Node, ...]) -> Node:
    """`n` itself when its sources did not change, else a copy on the new sources."""
    if all(a is b for a, b in zip(n.srcs, srcs)):
        return n
    return Node(n.op, srcs, n.shape, n.dtype, n.arg)


# ---- constant folding ----------------------------------------------------------------------------------

@exercise("10-compiler", "fold_constants")
def fold_constants(graph: Graph) -> Graph:
    """Compute at compile time every elementwise op (and movement op) whose operands are all constants, and
    drop identities: x + 0, x - 0, x * 1, x / 1 become x. A constant is one value broadcast over a shape."""
    def fold(n: Node, srcs: tuple[Node, ...]) -> Node:
        if srcs and all(s.op == "const" for s in srcs):
            if n.op in ir.MOVEMENT:
                return ir.const(srcs[0].arg, n.dtype, n.shape)
            if n.op in ELEMENTWISE:
                args = [Node("const", (), (), s.dtype, s.arg) for s in srcs]
                value = ir.evaluate([Node(n.op, tuple(args), (), n.dtype, n.arg)])[0]
                return ir.const(value.item(), n.dtype, n.shape)
        if n.op in ("add", "sub", "mul", "div") and srcs[1].op == "const":
            if srcs[1].arg == (1 if n.op in ("mul", "div") else 0):
                return srcs[0]
        if n.op in ("add", "mul") and srcs[0].op == "const" and srcs[0].arg == (1 if n.op == "mul" else 0):
            return srcs[1]
        return _same(n, srcs)
    return graph.rebuild(fold)


# ---- dead-code elimination -----------------------------------------------------------------------------

def eliminate_dead(graph: Graph) -> Graph:
    """Keep only what the outputs and effects need. An assign of a buffer's own unchanged value is dropped."""
    effects = [e for e in graph.effects if not (e.srcs[1].op == "load" and e.srcs[1].arg is e.srcs[0].arg)]
    return Graph(list(graph.outputs), effects, [])


# ---- common-subexpression elimination ------------------------------------------------------------------

def _key(n: Node, srcs: tuple[Node, ...]) -> tuple:
    arg = id(n.arg) if n.op == "load" else (type(n.arg).__name__, n.arg)  # a load is its Buffer, by identity
    if n.op == "const":
        arg = (n.arg, type(n.arg).__name__, bool(np.isnan(n.arg)) if isinstance(n.arg, float) else False)
    return (n.op, arg, n.dtype, n.shape, tuple(id(s) for s in srcs))


def eliminate_common(graph: Graph) -> Graph:
    """Merge nodes that compute the same thing: same op, argument, dtype, shape and (already merged) sources.
    Assigns are effects, never merged. (`_key` is what "the same" means; `graph.rebuild` visits the nodes
    inputs first, each with its sources already replaced.)"""
    seen: dict[tuple, Node] = {}

    def merge(n: Node, srcs: tuple[Node, ...]) -> Node:
        n = _same(n, srcs)
        if n.op == "assign":
            return n
        return seen.setdefault(_key(n, n.srcs), n)
    return graph.rebuild(merge)


# ---- sums of padded gradients ----------------------------------------------------------------------------

@exercise("10-compiler", "merge_cats")
def merge_cats(graph: Graph) -> Graph:
    """A sum of cats whose non-zero parts do not overlap is one cat: the gradient of qkv[..., :C], qkv[..., C:2C]
    and qkv[..., 2C:] is three zero-padded pieces added up (three cats and an add, four passes over memory);
    joined, each piece is written once, at its place."""
    def merge(n: Node, srcs: tuple[Node, ...]) -> Node:
        if n.op != "add" or any(s.op != "cat" or s.arg != srcs[0].arg or s.dtype != n.dtype for s in srcs):
            return _same(n, srcs)
        axis, pieces, parts, at = srcs[0].arg, [], [], 0  # pieces: (start, part), the non-zero parts of both
        for c in srcs:
            starts = np.cumsum([0] + [p.shape[axis] for p in c.srcs])
            pieces += [(int(a), p) for a, p in zip(starts, c.srcs) if not (p.op == "const" and p.arg == 0)]
        zeros = lambda k: ir.const(0, n.dtype, n.shape[:axis] + (k,) + n.shape[axis + 1:])  # noqa: E731
        for start, part in sorted(pieces, key=lambda sp: sp[0]):
            if start < at:  # two non-zero parts overlap: leave the add
                return _same(n, srcs)
            parts += [zeros(start - at), part] if start > at else [part]
            at = start + part.shape[axis]
        return ir.cat(parts + ([zeros(n.shape[axis] - at)] if at < n.shape[axis] else []), axis)
    return graph.rebuild(merge)


# ---- transposed products -------------------------------------------------------------------------------

@exercise("10-compiler", "transpose_products")
def transpose_products(graph: Graph) -> Graph:
    """A batched product read only transposed (its last two axes swapped back) is computed transposed:
    (A B)^T = B^T A^T. Attention's key gradient is such a product, dk^T = q^T dS, read as dk: computed as
    dk = dS^T q it is written in the layout its reader wants, and, dS being causal (zero above the diagonal), it
    may skip dS's zeros as dv = P^T g does (`schedule/triangles.py`). Plain 2-d products (weights' gradients)
    are left alone: swapping their operands changes how the tuned kernel cuts them."""
    readers, roots = ir.readers(graph.nodes()), {id(n) for n in graph.roots}

    def swapped(rank: int) -> tuple[int, ...]:
        return (*range(rank - 2), rank - 1, rank - 2)

    def flip(n: Node, srcs: tuple[Node, ...]) -> Node:
        mm = n.srcs[0] if n.op == "permute" else None
        if mm is None or mm.op != "matmul" or len(mm.shape) < 3 or id(mm) in roots:
            return _same(n, srcs)
        rank = len(mm.shape)
        if any(r.op != "permute" or r.arg[-2:] != (rank - 1, rank - 2) for r in readers[id(mm)]):
            return _same(n, srcs)
        if id(mm) not in flipped:  # one product for all its readers
            a, b = srcs[0].srcs
            flipped[id(mm)] = ir.matmul(ir.permute(b, swapped(rank)), ir.permute(a, swapped(rank)))  # (A B)^T
        return ir.permute(flipped[id(mm)], tuple(swapped(rank)[i] for i in n.arg))
    flipped: dict[int, Node] = {}
    return graph.rebuild(flip)


# ---- view folding --------------------------------------------------------------------------------------

def _view_of(n: Node, view: View) -> Node:
    return Node("view", (n,), view.shape, n.dtype, view)


def _base_view(n: Node) -> View:
    """How a stored node or an arange is read when no movement op is applied."""
    if n.op == "arange":
        return View(n.shape, tuple(1 if d == n.arg else 0 for d in range(len(n.shape))), 0)
    return View.contiguous(n.shape)


def fold_views(graph: Graph) -> Graph:
    """Turn every chain of movement ops into one `view` on a stored node (see the module docstring)."""
    memo: dict[tuple, Node] = {}

    def move(n: Node, op: str, arg) -> Node:
        """Apply one movement op to an already folded node."""
        if n.op == "const":
            return ir.const(n.arg, n.dtype, _moved_shape(n.shape, op, arg))
        if n.op == "view":
            moved = getattr(n.arg, op)(arg)
            if moved is None:  # a reshape strides cannot express: copy, then view the copy
                return move(_wrap(Node("contiguous", (n,), n.shape, n.dtype)), op, arg)
            return _view_of(n.srcs[0], moved)
        if n.op in ELEMENTWISE:  # push the movement below the op: permute(a + b) = permute(a) + permute(b)
            key = (id(n), op, str(arg))
            if key not in memo:
                srcs = tuple(move(s, op, arg) for s in n.srcs)
                memo[key] = Node(n.op, srcs, srcs[-1].shape, n.dtype, n.arg)
            return memo[key]
        return move(_wrap(n), op, arg)

    # An elementwise result a matmul reads (through movement ops: the heads of q, k, v) is stored once, where it
    # is computed, and the matmul reads it as a strided view (not recomputed in one copy kernel per consumer).
    # So is a scalar computed from stored values that several nodes read (the gradient's clipping factor, read
    # by every parameter's update): stored once, rather than its whole expression (a sum over every gradient's
    # sum of squares) recomputed inside each reader.
    # And so is an expression that reads more than SHARED_READS arrays when several nodes read it (the residual
    # stream and its gradient, sums that grow by a term per layer): recomputed inside each reader, its cost
    # would grow with the square of the depth; stored, each reader reads one array.
    # And so is a value the step stores anyway (an output, an assigned value) that something else reads: read where
    # it is written, not recomputed (Adam's m', read by the update, from the old m: then m' could not be in place).
    store_first, readers, reads = set(), {}, {}
    assigned = {id(e.srcs[1]) for e in graph.effects} | {id(n) for n in graph.outputs}
    for s in [*(s for n in graph.nodes() for s in n.srcs), *graph.outputs]:  # an output counts as a reader
        readers[id(s)] = readers.get(id(s), 0) + 1
    # (Reductions are not counted: one read along its row, as layer norm's mean, is a register of the kernel
    # that computes it, and storing the expression there would split that kernel.)
    arrays = ("load", "matmul", "cat", "contiguous")
    for n in graph.nodes():
        if n.op in ELEMENTWISE or n.op in ir.MOVEMENT:  # the arrays its expression reads
            reads[id(n)] = frozenset().union(*({id(s)} if s.op in arrays or id(s) in store_first
                                               else reads.get(id(s), frozenset()) for s in n.srcs))
        if n.op in ELEMENTWISE and readers.get(id(n), 0) > 1 and (
                n.size == 1 or id(n) in assigned or len(reads[id(n)]) > SHARED_READS):
            store_first.add(id(n))
        if n.op == "matmul":
            for s in n.srcs:
                while s.op in ir.MOVEMENT:
                    s = s.srcs[0]
                if s.op in ELEMENTWISE:
                    store_first.add(id(s))

    def fold(n: Node, srcs: tuple[Node, ...]) -> Node:
        if n.op in ir.MOVEMENT:
            return move(srcs[0], n.op, n.arg)
        if n.op in ("load", "arange"):
            return n
        if id(n) in store_first:
            return Node("contiguous", (_same(n, tuple(_wrap(s) for s in srcs)),), n.shape, n.dtype)
        if n.op == "matmul":  # the matmul kernel reads strided operands, not expressions: store those first
            srcs = tuple(_wrap(s) for s in srcs)
            srcs = tuple(s if s.op == "view" and min(s.arg.strides, default=0) >= 0
                         else _wrap(Node("contiguous", (s,), s.shape, s.dtype)) for s in srcs)
        elif n.op == "assign":  # a value stored first is written where it is computed (in place when safe)
            srcs = (srcs[0], srcs[1] if id(n.srcs[1]) in store_first else _wrap(srcs[1]))
        else:
            srcs = tuple(_wrap(s) for s in srcs)
        return _same(n, srcs)

    folded = graph.rebuild(fold)
    outputs = [_wrap(n) if n.op in ("load", "arange") else n for n in folded.outputs]
    return Graph(outputs, folded.effects, folded.extra)


def reshape_expr(expr: Node, shape: tuple[int, ...]) -> Node | None:
    """The same elementwise expression computed over `shape` (same size, row-major order), with each view
    reshaped; None when some view can't be. (The scheduler uses it to fuse `reshape(gelu(x @ w + b))`.)"""
    memo: dict[int, Node | None] = {}

    def go(n: Node) -> Node | None:
        if id(n) not in memo:
            if n.op == "const":
                memo[id(n)] = ir.const(n.arg, n.dtype, shape)
            elif n.op == "view":
                v = n.arg.reshape(shape)
                memo[id(n)] = None if v is None else _view_of(n.srcs[0], v)
            else:
                srcs = [go(s) for s in n.srcs]
                memo[id(n)] = None if any(s is None for s in srcs) else Node(n.op, tuple(srcs), shape, n.dtype, n.arg)
        return memo[id(n)]
    return go(expr)


def _wrap(n: Node) -> Node:
    """A stored node (or an arange) as operands read it: through a view. Anything else is left alone."""
    return _view_of(n, _base_view(n)) if n.op in STORED else n


def _moved_shape(shape: tuple[int, ...], op: str, arg) -> tuple[int, ...]:
    if op in ("reshape", "expand"):
        return tuple(arg)
    if op == "permute":
        return tuple(shape[i] for i in arg)
    return tuple(len(range(*s)) for s in arg)
