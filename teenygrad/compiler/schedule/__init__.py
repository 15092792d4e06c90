"""Scheduling (chapter 10): which nodes are stored in memory, which kernels compute them, and where they live.

After view folding, the graph is trees of elementwise ops whose leaves are constants and `view`s of stored
nodes. Only a few kinds of node are *stored* (written to memory by a kernel): loads (the caller's arrays),
reductions, matmuls, cats, forced copies (`contiguous`), the step's outputs and the values it assigns. Every
elementwise op is computed inside the kernel that needs it, in registers: that is elementwise fusion.

The stored nodes are taken in an order that computes each as soon as what it reads is ready (`order.py`),
short side branches first: a weight's gradient right after its dy, while dy is still in cache, and
same-shaped optimizer updates side by side. Each stored node becomes an `Item`; consecutive items are fused
into one `Kernel` when that is legal:
  - a reduction's consumers (softmax: max, then sum of exp(x - max), then exp(x - max) / sum) share its
    outer loop when they read it only "along the row" (a view with stride 0 on the reduced axes): the
    reduced value is then a local variable, and is written to memory only when someone outside needs it;
  - sums down the columns (a bias's gradient, a layer norm's weight's) share a pass over rows of the same
    elements (dx, a matmul's epilogue), each chunk of rows keeping a row of running sums (`fusion.py`);
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

The package, phase by phase: `items.py` (what a schedule is made of), `order.py`, `fusion.py` (the fusion rules),
`memory.py` (slots and scratch), `triangles.py` (which products may skip a causal mask's zeros), `cost.py`.
"""
from __future__ import annotations

from teenygrad.compiler import ir
from teenygrad.compiler.passes import Graph
from teenygrad.compiler.schedule.cost import kernel_cost
from teenygrad.compiler.schedule.fusion import SIDE_BY_SIDE, fuse, is_column
from teenygrad.compiler.schedule.items import CAT, COPY, LOOP, MATMUL, Item, Kernel, Schedule, Slot, item_of, tree
from teenygrad.compiler.schedule.memory import (
    assign_in_place,
    epilogues_in_place,
    input_slots,
    keep_in_registers,
    kernel_readers,
    output_slots,
    scratch_slots,
    write_in_copy_layout,
)
from teenygrad.compiler.schedule.order import eager_order
from teenygrad.compiler.schedule.triangles import Triangles

__all__ = ["schedule", "Schedule", "Kernel", "Item", "Slot", "tree", "is_column", "kernel_cost", "SIDE_BY_SIDE",
           "LOOP", "MATMUL", "CAT", "COPY"]

STORED = (*ir.REDUCE, "matmul", "cat", "contiguous")  # the ops whose value is always written to memory


def schedule(graph: Graph) -> Schedule:
    """Group the stored nodes of a view-folded graph into kernels and plan their memory, phase by phase."""
    outputs, effects = graph.outputs, graph.effects
    order = eager_order(ir.toposort([*outputs, *effects]))
    want = {id(n) for n in outputs} | {id(e.srcs[1]) for e in effects}  # what the caller gets or assigns
    targets = {id(e.srcs[1]): e.srcs[0].arg for e in effects}            # assigned value -> its buffer
    items = [item_of(n) for n in order if n.op in STORED or id(n) in want and n.op not in ("load", "assign")]
    kernels = fuse(items, targets)
    kernels, writes, copied = write_in_copy_layout(kernels, want)
    readers = kernel_readers(kernels)
    keep_in_registers(kernels, readers, want)
    slots: dict = {}
    inputs, by_buffer = input_slots(order, slots)
    out_slots = output_slots(outputs, slots)
    copies = assign_in_place(effects, order, kernels, readers, slots, by_buffer)
    epilogues_in_place(kernels, readers, slots)
    scratch = scratch_slots(kernels, readers, slots, copies, copied)
    return Schedule(kernels, inputs, slots, [(slots[id(v)], t) for v, t in copies], list(outputs), scratch,
                    len(outputs), out_slots, writes, causal_products(kernels, want))


def causal_products(kernels: list[Kernel], want: set[int]) -> dict[int, int]:
    """Products with a triangular operand or result (`triangles.py`): id(matmul) -> the zeros it may skip."""
    mode, read_by = Triangles().mode, {}
    for it in (it for kern in kernels for it in kern.items):
        for v in it.leaves:
            read_by.setdefault(id(v.srcs[0]), []).append(it.expr if it.kind == LOOP else None)
    return {id(it.node): m for kern in kernels for it in kern.items if it.kind == MATMUL and
            (m := mode(it.node, read_by.get(id(it.node), []) + [None] * (id(it.node) in want)))}
