"""Fusion rules (chapter 10): when an item may be computed inside a kernel that is already planned.

`fuse` takes the stored nodes' items in order and puts each into a kernel by the first rule that holds:
  1. `can_join`: vertical fusion into the kernel that makes the last thing it reads, a reduction's consumers
     reading it along the row (softmax), or a matmul's epilogue (bias + GELU);
  2. `can_follow`: horizontal fusion with the kernel just before it, loops that agree (one parameter's moments
     and update side by side);
  3. `shared_loop`: sums down columns sharing a pass over rows of the same elements (a layer norm's backward);
else it starts a kernel of its own. Each rule says why it is legal; a new rule is one more function here, tried
in `fuse`, with a test against the reference interpreter (CONTRIBUTING.md, "The compiler").
"""
from __future__ import annotations

import math

from teenygrad.compiler import ir
from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import View, reshape_expr
from teenygrad.compiler.schedule.items import LOOP, MATMUL, Item, Kernel, view_leaves
from teenygrad.edition import exercise


def fuse(items: list[Item], targets: dict[int, ir.Buffer]) -> list[Kernel]:
    """Group items, in order, into kernels. An item that joins a kernel runs earlier than the kernels in between,
    which is safe: none of them reads it, none writes what it reads. `targets`: assigned value -> its buffer."""
    kernels: list[Kernel] = []
    made_by: dict[int, int] = {}
    for it in items:
        deps = [made_by[id(v.srcs[0])] for v in it.leaves if id(v.srcs[0]) in made_by]
        k = max(deps, default=-1)
        if k >= 0 and kernels[k].kind in (LOOP, MATMUL) and can_join(kernels[k], it):
            kernels[k].items.append(it)
        elif kernels and kernels[-1].items and can_follow(kernels[-1], it, targets):
            k = len(kernels) - 1
            kernels[k].items.append(it)
        elif id(it.node) not in targets and (j := shared_loop(kernels, k, it, targets)) is not None:
            k = j
            join_columns(kernels, k, it, made_by)
        else:
            k = len(kernels)
            kernels.append(Kernel(it.kind, [it]))
        made_by[id(it.node)] = k
    return [kern for kern in kernels if kern.items]  # (column kernels another one took in: `join_columns`)


@exercise("10-compiler", "fusion")
def is_row_view(v: Node, shape: tuple[int, ...], inner: tuple[int, ...]) -> bool:
    """Does view `v` read its (reduced) source at the current outer index, the same value along the row? Decided
    from v alone: its View (v.arg) and its source's shape (v.srcs[0].shape)."""
    src: Node = v.srcs[0]
    want = View.contiguous(src.shape).strides
    return v.shape == shape and v.arg.offset == 0 and all(
        (v.arg.strides[d] == 0) if d in inner else (v.arg.strides[d] == want[d] or shape[d] == 1)
        for d in range(len(shape))) and all(src.shape[d] == 1 for d in inner)


@exercise("10-compiler", "fusion")
def can_join(k: Kernel, it: Item) -> bool:
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
        leaves = view_leaves(expr)
        if not all(v.arg.is_contiguous() for v in leaves if id(v.srcs[0]) in members):
            return False
        it.expr, it.shape, it.leaves = expr, k.shape, leaves  # it.inner unread: codegen runs it over the rows
        return True
    return aligned(k, it, reads, members)


@exercise("10-compiler", "fusion")
def aligned(k: Kernel, it: Item, reads: list[Node], members: dict[int, Item]) -> bool:
    """Can `it` be one more stage of loop kernel `k`? If it loops over the same shape (it.shape == k.shape, not just
    as many elements), and reads k's stages only in the row at hand: a reduction along it, or a stored value at the
    element it writes (Adam's update, its moments)."""
    if it.shape != k.shape or it.inner != k.inner and it.node.op in ir.REDUCE:
        return False
    return all(is_row_view(v, k.shape, k.inner) if members[id(v.srcs[0])].node.op in ir.REDUCE else
               v.arg == View.contiguous(k.shape) and v.srcs[0].shape == k.shape and it.inner == k.inner for v in reads)


SIDE_BY_SIDE = 8  # stages one kernel may hold side by side: two parameters' updates (numba compiles a kernel of 70
                  # stages, every bias's update at once, in 9 s, superlinearly; in a few kernels, in about 2)


@exercise("10-compiler", "fusion")
def can_follow(k: Kernel, it: Item, targets: dict[int, ir.Buffer]) -> bool:
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
    return aligned(k, it, [v for v in it.leaves if id(v.srcs[0]) in members], members)


def is_column(it: Item) -> bool:
    """Is `it` a sum over every axis but the last (a bias's gradient: the sum over rows of dy (R, C))?"""
    return it.node.op == "sum" and it.node.dtype.startswith("float") and len(it.shape) > 1 and \
        tuple(it.inner) == tuple(range(len(it.shape) - 1))


def shared_loop(kernels: list[Kernel], ready: int, it: Item, targets: dict[int, ir.Buffer]) -> int | None:
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
        leaves = view_leaves(expr) if expr is not None else []
        members = {id(i.node): i for i in k.items[epilogue:]}  # (not the raw product: the epilogue overwrites it)
        mine = [v for v in leaves if id(v.srcs[0]) in members]
        if expr is None or any(id(v.srcs[0]) == id(k.items[0].node) for v in leaves) and epilogue or \
                {id(targets[m]) for m in members if m in targets} & \
                {id(v.srcs[0].arg) for v in leaves if v.srcs[0].op == "load"}:
            continue
        if rows and all(map(is_column, k.items)) and not mine:  # (a column sum is complete after the last row only)
            return j
        if not rows and not is_column(k.items[0]) and all(  # k's rows, read at this element
                is_row_view(v, k.shape, k.inner) if members[id(v.srcs[0])].node.op in ir.REDUCE else
                v.arg == View.contiguous(k.shape) and v.srcs[0].size == math.prod(k.shape) for v in mine):
            it.expr, it.shape, it.inner, it.leaves = expr, k.shape, tuple(range(len(k.shape) - 1)), leaves
            return j
    return None


def join_columns(kernels: list[Kernel], j: int, it: Item, made_by: dict[int, int]) -> None:
    """`it` joins kernel j (`shared_loop`), rows first; later kernels of column sums of the same shape whose
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
