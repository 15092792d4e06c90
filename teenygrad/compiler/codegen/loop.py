"""A loop kernel (chapter 10): one fused loop over rows, each stage a reduction or a store (`loop_kernel`).

The package's docstring (`teenygrad.compiler.codegen`) shows what such a kernel looks like."""
from __future__ import annotations

import numpy as np

from teenygrad.compiler import ir
from teenygrad.compiler.codegen.expr import Expr, index_expr, init_value
from teenygrad.compiler.codegen.source import CAST, Call, Source, header, loops, slot_name, slots_of, unravel
from teenygrad.compiler.passes import ELEMENTWISE, View
from teenygrad.compiler.schedule import Item, Kernel, Schedule, is_column, tree
from teenygrad.compiler.schedule.triangles import rows_stop_at_diagonal
from teenygrad.kernels import jit
from teenygrad.kernels.jit import CHUNKS

COST = {"exp": 8, "log": 8, "tanh": 8, "sqrt": 4, "pow": 16, "div": 2, "recip": 2}


def loop_kernel(name: str, kern: Kernel, sched: Schedule, src: Source) -> Call:
    """A fused loop: outer loop over rows, then for each item an inner loop (a reduction or a store)."""
    shape, inner = kern.shape, list(kern.inner)
    names = [f"i{d}" for d in range(len(shape))]
    outer = [d for d in range(len(shape)) if d not in inner]
    n_outer, chunks, cols = row_count(kern), chunk_count(kern), column_stages(kern)
    stage = {id(it): c for c, it in enumerate(cols)}  # id(item) -> its row of accumulators
    args = slots_of(kern, sched) + ["p0"] * bool(cols and chunks)
    # an exp (or tanh, log) a reduction's pass computes and a later stage needs again (softmax's e^(x - max), summed,
    # then divided by the sum) is kept in a row buffer by that pass, and read back, not computed twice
    at = index_expr(View.contiguous(tuple(shape[d] for d in inner)), [names[d] for d in inner])
    trees = [set(map(id, tree(it.expr))) for it in kern.items]
    keeps, saved = [[] for _ in kern.items], {}
    for k, it in enumerate(kern.items):
        if it.node.op in ir.REDUCE and id(it) not in stage:
            keeps[k] = [m for m in tree(it.expr) if m.op in ("exp", "tanh", "log") and id(m) not in saved and
                        any(id(m) in ids for ids in trees[k + 1:])]
            saved.update({id(m): f"row{len(saved) + j}" for j, m in enumerate(keeps[k])})  # one buffer each
    causal = rows_stop_at_diagonal(kern.items, shape, kern.inner)
    header(name, [*args, "first", "last"], src)
    for m in (m for keep in keeps for m in keep):
        src.line(f"{saved[id(m)]} = np.empty({int(np.prod([shape[d] for d in inner], dtype=np.int64))}, "
                 f"{CAST[m.dtype]})")
    for c in range(len(cols)):  # column sums: a row of accumulators, each row of the loop added in
        src.line(f"col{c} = np.zeros({shape[-1]}, np.float64)")
    src.line("for o in range(first, last):")
    src.depth += 1
    unravel(src, outer, shape, names, "o")
    local: dict[int, str] = {}
    for k, it in enumerate(kern.items):
        base = src.depth
        n = it.node
        mine = {id(m) for m in keeps[k]}  # what this stage keeps, it computes
        expr = Expr(src, sched, names, local, {i: r for i, r in saved.items() if i not in mine}, at)
        if id(it) in stage:
            loops(src, inner, shape, names)
            src.line(f"col{stage[id(it)]}[{names[-1]}] += {expr(it.expr)}")
            src.depth = base
        elif n.op in ir.REDUCE:
            acc = src.var("acc")
            src.line(f"{acc} = " + (init_value(n) if n.op == "sum" or n.dtype != "float32" else
                                    src.const(float("-inf"), "float32")))
            loops(src, inner, shape, names, causal)
            v = expr(it.expr)
            for m in keeps[k]:
                src.line(f"{saved[id(m)]}[u({at})] = {expr(m)}")
            if n.op == "sum":
                src.line(f"{acc} += {v}")
            else:
                src.line(f"{acc} = max({acc}, {v})")  # as the hand kernels: vectorises, but drops a NaN
            src.depth = base
            r = src.var("r")
            src.line(f"{r} = {acc} != 0" if n.dtype == "bool" else f"{r} = {CAST[n.dtype]}({acc})")
            local[id(n)] = r
            if id(n) not in kern.local:
                src.line(f"{slot_name(sched.slots[id(n)])}[u({index_expr(View.contiguous(n.shape), names)})] = {r}")
        else:
            store = f"{slot_name(sched.slots[id(n)])}[u({index_expr(View.contiguous(shape), names)})]"
            loops(src, inner, shape, names, causal)
            src.line(f"{store} = {expr(it.expr)}")
            src.depth = base
            if causal:  # above the diagonal the value is proven 0
                src.line(f"for {names[-1]} in range({names[-2]} + 1, {shape[-1]}): {store} = {src.const(0, n.dtype)}")
    src.depth = 1
    if cols and chunks:  # each chunk of rows leaves its partial sums in p0, `combine_kernel` adds them up
        src.line(f"band = (first * {chunks} + {n_outer - 1}) // {n_outer}  # the chunk: first = band * rows // chunks")
    for c, it in enumerate(cols):
        if chunks:
            src.line(f"for j in range({shape[-1]}): p0[({c * chunks} + band) * {shape[-1]} + j] = col{c}[j]")
        else:
            src.line(f"for j in range({shape[-1]}): {slot_name(sched.slots[id(it.node)])}[u(j)] = "
                     f"{CAST[it.node.dtype]}(col{c}[j])")
    return args, n_outer, chunks


def column_stages(kern: Kernel) -> list[Item]:
    """The column sums (`schedule.is_column`) that share a loop kernel's pass over rows (`schedule._shared_loop`)."""
    return [it for it in kern.items[1:] if is_column(it) and it.inner != kern.inner]


def row_count(kern: Kernel) -> int:
    return int(np.prod([n for d, n in enumerate(kern.shape) if d not in kern.inner], dtype=np.int64))


def chunk_count(kern: Kernel) -> int:
    """How many chunks of a loop kernel's rows `parallel_for` shares among threads (0: run serially)."""
    return min(row_count(kern), CHUNKS) if row_count(kern) > 1 and work(kern) >= jit.PARALLEL_MIN_WORK else 0


def work(kern: Kernel) -> int:
    cost = 0
    for it in kern.items:
        nodes = tree(it.expr)
        per = 1 + sum(COST.get(n.op, 0) for n in nodes if n.op in ELEMENTWISE)
        cost += per * int(np.prod(it.shape, dtype=np.int64))
    return cost
