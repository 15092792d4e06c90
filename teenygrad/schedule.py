"""Scheduling (chapter 10): which nodes are stored in memory, which kernels compute them, and where they live.

After view folding, the graph is trees of elementwise ops whose leaves are constants and `view`s of stored
nodes. Only a few kinds of node are *stored* (written to memory by a kernel): loads (the caller's arrays),
reductions, matmuls, cats, forced copies (`contiguous`), the step's outputs and the values it assigns. Every
elementwise op is computed inside the kernel that needs it, in registers: that is elementwise fusion.

The stored nodes are taken in an order that computes each as soon as what it reads is ready (`_eager_order`),
short side branches first: a weight's gradient right after its dy, while dy is still in cache, and
same-shaped optimizer updates side by side. Each stored node becomes an `Item`; consecutive items are fused
into one `Kernel` when that is legal:
  - a reduction's consumers (softmax: max, then sum of exp(x - max), then exp(x - max) / sum) share its
    outer loop when they read it only "along the row" (a view with stride 0 on the reduced axes): the
    reduced value is then a local variable, and is written to memory only when someone outside needs it;
  - sums down the columns (a bias's gradient, a layer norm's weight's) share a pass over rows of the same
    elements (dx, a matmul's epilogue), each chunk of rows keeping a row of running sums (`_shared_loop`);
  - a matmul's epilogue (bias + GELU) is one pass over the product right after the matmul, which writes in
    place when nothing else reads the raw product (the matmul itself is chapter 3's tiled kernel, compiled
    once: generating it into every kernel cost seconds of numba compile per product).
Buffer planning then gives every intermediate a slot of scratch memory, reusing a slot once the last kernel
that reads its previous tenant is done; `assign`s write straight into the parameter when that is safe, and a
product only copied into another layout (attention's heads put back side by side) is written in that layout.

Not done yet (each a known way to go faster, none needed for correctness):
  - an elementwise result read by several kernels is recomputed in each, unless it reads more than a few
    arrays (`passes.fold_views` stores those first): cheap for a bias-add or a scale, wasteful for a short
    chain with exp or tanh, which a cost model could store once when that pays;
  - side by side (horizontal) fusion joins only neighbours; a matmul's prologue is stored first, not fused;
  - an assign writes in place only from a loop kernel whose other stages don't read the old value;
    otherwise the new value goes to scratch and is copied over at the end.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from teenygrad import ir
from teenygrad.ir import Node
from teenygrad.passes import ELEMENTWISE, Graph, View, reshape_expr
from teenygrad.triangles import Triangles

LOOP, MATMUL, CAT, COPY = "loop", "matmul", "cat", "copy"


@dataclass
class Item:
    """One stored node and how it is computed: `expr` is the expression tree a loop evaluates (for a reduction
    its operand); `shape` the loop's iteration space; `inner` the axes looped innermost (reduced axes)."""
    node: Node
    kind: str                      # LOOP (reduce or store), MATMUL or CAT
    expr: Node | None
    shape: tuple[int, ...]
    inner: tuple[int, ...]
    leaves: list[Node] = field(default_factory=list)  # the view nodes its expressions read


@dataclass
class Kernel:
    kind: str
    items: list[Item]
    local: set[int] = field(default_factory=set)  # ids of reductions kept in a register, never stored

    @property
    def shape(self) -> tuple[int, ...]:
        return self.items[0].shape

    @property
    def inner(self) -> tuple[int, ...]:
        return self.items[0].inner


@dataclass
class Slot:
    """A flat array the program reads or writes: an input (a Buffer), an output (fresh each call), scratch."""
    kind: str          # "input", "output", "scratch"
    dtype: str
    size: int
    index: int         # position among the inputs / outputs / scratch arrays


@dataclass
class Schedule:
    kernels: list[Kernel]
    inputs: list[ir.Buffer]
    slots: dict[int, Slot]                        # id(stored node or load) -> its slot
    copies: list[tuple[Slot, Slot]]               # after every kernel: (source, target) for assigns
    outputs: list[Node]
    scratch: list[tuple[str, int]]                # (dtype, size) of each scratch array
    n_outputs: int = 0
    out_slots: list[Slot] = field(default_factory=list)
    writes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # id(matmul) -> strides it writes at
    causal: dict[int, int] = field(default_factory=dict)  # id(matmul) -> zeros it may skip (`teenygrad.triangles`)


def tree(expr: Node | None) -> list[Node]:
    """The nodes of one kernel's expression: its elementwise ops and the views and constants they read
    (not what lies beyond a view: that was computed by another kernel, or is a buffer)."""
    out, seen, stack = [], set(), [expr] if expr is not None else []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if n.op in ELEMENTWISE:
            stack.extend(n.srcs)
    return out


def _leaves(expr: Node) -> list[Node]:
    """The view nodes an expression tree reads (through elementwise ops)."""
    return [n for n in tree(expr) if n.op == "view"]


def _item(n: Node) -> Item:
    if n.op in ir.REDUCE:
        x = n.srcs[0]
        return Item(n, LOOP, x, x.shape, n.arg, _leaves(x))
    if n.op == "matmul":
        return Item(n, MATMUL, None, n.shape, (), list(n.srcs))
    if n.op == "cat":
        return Item(n, CAT, None, n.shape, (), [v for s in n.srcs for v in _leaves(s)])
    expr = n.srcs[0] if n.op == "contiguous" else n
    return Item(n, LOOP, expr, n.shape, (len(n.shape) - 1,) if n.shape else (), _leaves(expr))


def _is_row_view(v: Node, shape: tuple[int, ...], inner: tuple[int, ...]) -> bool:
    """Does view `v` read its (reduced) source at the current outer index, the same value along the row?"""
    src: Node = v.srcs[0]
    want = View.contiguous(src.shape).strides
    return v.shape == shape and v.arg.offset == 0 and all(
        (v.arg.strides[d] == 0) if d in inner else (v.arg.strides[d] == want[d] or shape[d] == 1)
        for d in range(len(shape))) and all(src.shape[d] == 1 for d in inner)


def _can_join(k: Kernel, it: Item) -> bool:
    """Is it legal (and worth it) to compute item `it` inside kernel `k`, after k's items?"""
    members = {id(i.node): i for i in k.items}
    reads = [v for v in it.leaves if id(v.srcs[0]) in members]
    if not reads or it.kind != LOOP:
        return False
    if k.kind == MATMUL:  # an epilogue: reads the product at the very element it writes
        if len(k.items) > 1 or it.node.op in ir.REDUCE or it.node.size != k.items[0].node.size:
            return False
        expr = it.expr if it.shape == k.shape else reshape_expr(it.expr, k.shape)  # reshape(gelu(x @ w + b))
        if expr is None:
            return False
        leaves = _leaves(expr)
        if not all(v.arg.is_contiguous() for v in leaves if id(v.srcs[0]) in members):
            return False
        it.expr, it.shape, it.leaves = expr, k.shape, leaves
        return True
    return _aligned(k, it, reads, members)


def _aligned(k: Kernel, it: Item, reads: list[Node], members: dict[int, Item]) -> bool:
    """Can `it` be one more stage of loop kernel `k`? If it loops over the same rows, and reads k's stages only in
    the row at hand: a reduction along it, or a stored value at the element it writes (Adam's update, its moments)."""
    if it.shape != k.shape or it.inner != k.inner and it.node.op in ir.REDUCE:
        return False
    return all(_is_row_view(v, k.shape, k.inner) if members[id(v.srcs[0])].node.op in ir.REDUCE else
               v.arg == View.contiguous(k.shape) and v.srcs[0].shape == k.shape and it.inner == k.inner for v in reads)


SIDE_BY_SIDE = 8  # stages one kernel may hold side by side: two parameters' updates (numba compiles a kernel of 70
                  # stages, every bias's update at once, in 9 s, superlinearly; in a few kernels, in about 2)


def _can_follow(k: Kernel, it: Item, targets: dict[int, ir.Buffer]) -> bool:
    """Horizontal fusion: may `it` join the kernel just before it (one parameter's moments and update)? If the loops
    agree, and no stage reads a buffer another assigns (`targets`: value -> buffer): that would stop it in place."""
    if k.kind != LOOP or it.kind != LOOP or it.node.op in ir.REDUCE or it.inner != k.inner or \
            len(k.items) >= SIDE_BY_SIDE:
        return False
    loads = [{id(v.srcs[0].arg) for v in i.leaves if v.srcs[0].op == "load"} for i in [*k.items, it]]
    writes = {id(targets[id(i.node)]) for i in k.items if id(i.node) in targets}
    if writes & loads[-1] or id(it.node) in targets and id(targets[id(it.node)]) in set().union(*loads[:-1]):
        return False
    members = {id(i.node): i for i in k.items}
    return _aligned(k, it, [v for v in it.leaves if id(v.srcs[0]) in members], members)


def is_column(it: Item) -> bool:
    """Is `it` a sum over every axis but the last (a bias's gradient: the sum over rows of dy (R, C))?"""
    return it.node.op == "sum" and it.node.dtype.startswith("float") and len(it.shape) > 1 and \
        tuple(it.inner) == tuple(range(len(it.shape) - 1))


def _shared_loop(kernels: list[Kernel], ready: int, it: Item, targets: dict[int, ir.Buffer]) -> int | None:
    """Column sums (`is_column`) and a loop over rows of the same elements share one pass: a layer norm's
    backward reads dy and x once for dx (rows) and its weight's and bias's gradients (columns), as chapter 9's hand
    kernel does. `it` may join the first kernel from `ready` on (the last that makes what `it` reads) that loops
    over the same elements and is either column sums none of which `it` reads (`it` loops over rows: it goes first),
    or rows that `it`, a column sum, reads only at the element it visits: a loop (a sum over (B*T, C) reads one over
    (B, T, C) reshaped) or a matmul's epilogue (dh = (dy W2^T) * gelu'(h)). Not one that assigns what `it` reads."""
    rows = it.kind == LOOP and len(it.shape) > 1 and tuple(it.inner) == (len(it.shape) - 1,)
    if not (rows or it.kind == LOOP and is_column(it)):
        return None
    for j in range(max(ready, 0), len(kernels)):
        k = kernels[j]
        epilogue = k.kind == MATMUL and len(k.items) > 1 and not rows  # a column sum of a matmul's epilogue's result
        if not (k.kind == LOOP or epilogue) or not k.items or len(k.items) >= SIDE_BY_SIDE or \
                math.prod(k.shape) != math.prod(it.shape) or k.shape[-1:] != it.shape[-1:] or \
                rows and k.shape != it.shape:
            continue
        expr = it.expr if k.shape == it.shape else reshape_expr(it.expr, k.shape)  # (R, C) as (B, T, C)
        leaves = _leaves(expr) if expr is not None else []
        members = {id(i.node): i for i in k.items[epilogue:]}  # (not the raw product: the epilogue overwrites it)
        mine = [v for v in leaves if id(v.srcs[0]) in members]
        if expr is None or any(id(v.srcs[0]) == id(k.items[0].node) for v in leaves) and epilogue or \
                {id(targets[m]) for m in members if m in targets} & \
                {id(v.srcs[0].arg) for v in leaves if v.srcs[0].op == "load"}:
            continue
        if rows and all(map(is_column, k.items)) and not mine:  # (a column sum is complete after the last row only)
            return j
        if not rows and not is_column(k.items[0]) and all(  # k's rows, read at this element
                _is_row_view(v, k.shape, k.inner) if members[id(v.srcs[0])].node.op in ir.REDUCE else
                v.arg == View.contiguous(k.shape) and v.srcs[0].size == math.prod(k.shape) for v in mine):
            it.expr, it.shape, it.inner, it.leaves = expr, k.shape, tuple(range(len(k.shape) - 1)), leaves
            return j
    return None


def _join_columns(kernels: list[Kernel], j: int, it: Item, made_by: dict[int, int]) -> None:
    """`it` joins kernel j (`_shared_loop`), rows first; later kernels of column sums of the same shape whose
    inputs are made before j move in too (a layer norm's bias's and weight's, each followed by its norm's sum)."""
    kern = kernels[j]
    if is_column(it):
        kern.items.append(it)
        return
    kern.items.insert(0, it)
    for later in kernels[j + 1:]:
        if later.kind == LOOP and later.items and all(map(is_column, later.items)) and later.shape == it.shape and \
                len(kern.items) + len(later.items) <= SIDE_BY_SIDE and \
                all(made_by.get(id(v.srcs[0]), -1) < j for c in later.items for v in c.leaves):
            kern.items += later.items
            made_by.update({id(c.node): j for c in later.items})
            later.items = []


def _eager_order(order: list[Node]) -> list[Node]:
    """A topological order that computes each node as soon as all it reads is ready. (From the outputs, depth
    first, every dW = x^T dy came after the whole backward pass, its x and dy long out of cache.) Of the readers a
    node makes ready, the one with the longest way to the end of the step (dx, carrying the backward pass on) goes
    last: taken first, its chain ran on and left the MLP's dW1 39 kernels behind its 1.5 MB dy (step 1.3% slower)."""
    consumers = ir.readers(order)
    height: dict[int, int] = {}  # the longest path from a node to the end of the step
    for n in reversed(order):
        height[id(n)] = 1 + max((height[id(c)] for c in consumers.get(id(n), [])), default=0)
    done: set[int] = set()
    out: list[Node] = []
    for first in order:
        if id(first) in done:
            continue
        stack = [first]
        while stack:
            n = stack.pop()
            if id(n) in done or not all(id(s) in done for s in n.srcs):
                continue
            done.add(id(n))
            out.append(n)
            stack.extend(sorted(consumers.get(id(n), []), key=lambda c: -height[id(c)]))  # the shortest on top
    return out


def schedule(graph: Graph) -> Schedule:
    """Group the stored nodes of a view-folded graph into kernels and plan their memory."""
    outputs, effects = graph.outputs, graph.effects
    order = _eager_order(ir.toposort([*outputs, *effects]))
    stored_ops = (*ir.REDUCE, "matmul", "cat", "contiguous")
    want = {id(n) for n in outputs} | {id(e.srcs[1]) for e in effects}
    items = [_item(n) for n in order
             if n.op in stored_ops or (id(n) in want and n.op not in stored_ops and n.op not in ("load", "assign"))]
    # -- fusion: an item joins the kernel that produces the last thing it reads, when legal (it then runs
    #    earlier than the kernels in between, which is safe: none of them reads it, none writes what it reads)
    kernels: list[Kernel] = []
    made_by: dict[int, int] = {}
    targets = {id(e.srcs[1]): e.srcs[0].arg for e in effects}
    for it in items:
        deps = [made_by[id(v.srcs[0])] for v in it.leaves if id(v.srcs[0]) in made_by]
        k = max(deps, default=-1)
        if k >= 0 and kernels[k].kind in (LOOP, MATMUL) and _can_join(kernels[k], it):
            kernels[k].items.append(it)
        elif kernels and kernels[-1].items and _can_follow(kernels[-1], it, targets):
            k = len(kernels) - 1
            kernels[k].items.append(it)
        elif id(it.node) not in targets and (j := _shared_loop(kernels, k, it, targets)) is not None:
            k = j
            _join_columns(kernels, k, it, made_by)
        else:
            k = len(kernels)
            kernels.append(Kernel(it.kind, [it]))
        made_by[id(it.node)] = k
    kernels = [kern for kern in kernels if kern.items]  # (column kernels another one took in: `_join_columns`)
    # -- a product read only by a copy into another layout (the heads put back side by side) is written in that
    #    layout, and the copy vanishes: its readers read the product's slot
    uses: dict[int, int] = {}
    for it in (it for kern in kernels for it in kern.items):
        for v in it.leaves:
            uses[id(v.srcs[0])] = uses.get(id(v.srcs[0]), 0) + 1
    writes: dict[int, tuple[int, ...]] = {}
    copied: dict[int, Node] = {}  # id(matmul) -> the copy it writes
    owner = {id(it.node): kern for kern in kernels for it in kern.items}
    for kern in list(kernels):
        it = kern.items[0]
        mm = it.expr.srcs[0] if it.node.op == "contiguous" and it.expr.op == "view" else it.node
        if kern.kind == LOOP and len(kern.items) == 1 and mm.op == "matmul" and uses[id(mm)] == 1 and \
                len(owner[id(mm)].items) == 1 and id(mm) not in want and id(it.node) not in want and \
                (strides := _permuted_write(it.expr.arg, mm.shape)) is not None:
            writes[id(mm)], copied[id(mm)] = strides, it.node
            kernels.remove(kern)
    kernel_of = {id(it.node): k for k, kern in enumerate(kernels) for it in kern.items}
    readers: dict[int, set[int]] = {}   # id(stored node) -> kernels that read it through a view
    for k, kern in enumerate(kernels):
        for it in kern.items:
            for v in it.leaves:
                readers.setdefault(id(v.srcs[0]), set()).add(k)
    # -- reductions read only along the row inside their own kernel stay in registers
    for k, kern in enumerate(kernels):
        for it in kern.items:
            n = it.node
            if n.op in ir.REDUCE and id(n) not in want and readers.get(id(n), set()) <= {k} and kern.kind == LOOP:
                kern.local.add(id(n))
    # -- inputs: every buffer loaded, in order of first use
    inputs: list[ir.Buffer] = []
    slots: dict[int, Slot] = {}
    by_buffer: dict[int, Slot] = {}
    for n in order:
        if n.op == "load":
            if id(n.arg) not in by_buffer:
                by_buffer[id(n.arg)] = Slot("input", n.dtype, n.size, len(inputs))
                inputs.append(n.arg)
            slots[id(n)] = by_buffer[id(n.arg)]
    # -- outputs: fresh arrays
    out_slots = []
    for i, n in enumerate(outputs):
        s = Slot("output", n.dtype, n.size, i)
        out_slots.append(s)
        slots.setdefault(id(n), s)
    # -- assigns: in place when no later kernel (nor another stage of this one) reads the old value
    copies: list[tuple[Node, Slot]] = []
    for e in effects:
        target, value = e.srcs
        tslot = by_buffer[id(target.arg)]
        if any(c[1] is tslot for c in copies) or any(s is tslot for s in _assigned(slots, effects, e)):
            raise ValueError(f"compile_graph: buffer {target.arg.name!r} is assigned twice in one step")
        k = kernel_of[id(value)]
        kern = kernels[k]
        stage = next(it for it in kern.items if it.node is value)
        later = any(r > k for n in order if n.op == "load" and n.arg is target.arg for r in readers.get(id(n), ()))
        here = [v for it in kern.items for v in it.leaves if v.srcs[0].op == "load" and v.srcs[0].arg is target.arg]
        safe_here = all(v.arg.is_contiguous() and v.shape == value.shape and v in stage.leaves for v in here) and \
            not any(v in it.leaves for it in kern.items if it is not stage for v in here)
        if id(value) not in slots and kern.kind == LOOP and value.op not in ir.REDUCE and not later and safe_here:
            slots[id(value)] = tslot
        else:
            copies.append((value, tslot))
    # -- matmul epilogues write over the product when nothing else reads it
    for k, kern in enumerate(kernels):
        if kern.kind == MATMUL and len(kern.items) >= 2:
            mm, epi = kern.items[0].node, kern.items[1].node
            if id(mm) not in slots and id(epi) not in slots and readers.get(id(mm), set()) <= {k}:
                kern.local.add(id(epi))  # marker: the epilogue's slot is the product's
    # -- scratch: every other stored node, reusing slots whose last reader is done
    last = {nid: max(ks) for nid, ks in readers.items()}
    for k, kern in enumerate(kernels):  # a product overwritten by its epilogue lives as long as the epilogue
        if kern.kind == MATMUL and len(kern.items) >= 2 and id(kern.items[1].node) in kern.local:
            mm, epi = kern.items[0].node, kern.items[1].node
            last[id(mm)] = max(last.get(id(mm), k), last.get(id(epi), k))
    for value, _ in copies:
        last[id(value)] = len(kernels)
    scratch: list[tuple[str, int]] = []
    free: list[int] = []
    live: dict[int, list[int]] = {}  # kernel index -> scratch indices to free after it
    for k, kern in enumerate(kernels):
        for it in kern.items:
            n = it.node
            if id(n) in slots or id(n) in kern.local and n.op in ir.REDUCE:
                continue
            if kern.kind == MATMUL and len(kern.items) > 1 and it is kern.items[1] and id(n) in kern.local:
                slots[id(n)] = slots[id(kern.items[0].node)]
                continue
            fits = [i for i in free if scratch[i][0] == n.dtype and scratch[i][1] >= n.size]
            if fits:
                i = min(fits, key=lambda j: scratch[j][1])
                free.remove(i)
            else:
                i = len(scratch)
                scratch.append((n.dtype, n.size))
            slots[id(n)] = Slot("scratch", n.dtype, n.size, i)
            if id(n) in copied:  # written in its copy's layout: the copy's readers read it here
                slots[id(copied[id(n)])] = slots[id(n)]
                last[id(n)] = last.get(id(copied[id(n)]), k)
            live.setdefault(max(last.get(id(n), k), k), []).append(i)
        free.extend(live.pop(k, []))
    plan_copies = [(slots[id(v)], t) for v, t in copies]
    mode, read_by = Triangles().mode, {}  # products with a triangular operand or result: they may skip its zeros
    for it in (it for kern in kernels for it in kern.items):
        for v in it.leaves:
            read_by.setdefault(id(v.srcs[0]), []).append(it.expr if it.kind == LOOP else None)
    causal = {id(it.node): m for kern in kernels for it in kern.items if it.kind == MATMUL and
              (m := mode(it.node, read_by.get(id(it.node), []) + [None] * (id(it.node) in want)))}
    return Schedule(kernels, inputs, slots, plan_copies, list(outputs), scratch, len(outputs), out_slots, writes,
                    causal)


def _permuted_write(v: View, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Where a product of `shape` goes in the layout of a copy that reads it through view `v`, as one stride per
    axis of the product; None unless `v` only permutes the product's axes."""
    src, dst = View.contiguous(shape).strides, View.contiguous(v.shape).strides
    out, used = [0] * len(shape), set()
    for d, (n, stride) in enumerate(zip(v.shape, v.strides)):
        a = next((a for a in range(len(shape)) if a not in used and shape[a] == n and src[a] == stride), None)
        if n > 1 and a is None:
            return None
        if n > 1:
            used.add(a)
            out[a] = dst[d]
    return tuple(out) if v.offset == 0 and all(shape[a] == 1 for a in range(len(shape)) if a not in used) else None


def _assigned(slots: dict[int, Slot], effects: list[Node], current: Node) -> list[Slot]:
    """Slots already claimed by earlier assigns done in place (to refuse two assigns to one buffer)."""
    out = []
    for e in effects:
        if e is current:
            break
        s = slots.get(id(e.srcs[1]))
        if s is not None and s.kind == "input":
            out.append(s)
    return out


# ---- what a kernel costs: for the printed schedule -------------------------------------------------------

def kernel_cost(kern: Kernel, sched: Schedule) -> tuple[int, int]:
    """(bytes moved, floating-point operations): every distinct array read once, every stored value written."""
    read: dict[int, int] = {}
    flops = 0
    for it in kern.items:
        for v in it.leaves:
            src = v.srcs[0]
            if id(src) in sched.slots and not (kern.kind == LOOP and id(src) in kern.local):
                size = min(v.size if 0 not in v.arg.strides else _distinct(v), src.size)
                read[id(src)] = max(read.get(id(src), 0), size * np.dtype(src.dtype).itemsize)
        if it.kind == MATMUL:
            a, b = it.node.srcs
            flops += 2 * it.node.size * a.shape[-1]
        elif it.expr is not None:
            ops = sum(1 for n in tree(it.expr) if n.op in ELEMENTWISE)
            flops += (ops + (it.node.op in ir.REDUCE)) * int(np.prod(it.shape, dtype=np.int64))
    written = sum(it.node.size * np.dtype(it.node.dtype).itemsize for it in kern.items
                  if not (it.node.op in ir.REDUCE and id(it.node) in kern.local))
    return sum(read.values()) + written, flops


def _distinct(v: Node) -> int:
    return int(np.prod([n for n, s in zip(v.shape, v.arg.strides) if s != 0], dtype=np.int64))
