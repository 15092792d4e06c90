"""What a kernel costs (chapter 10), for the printed schedule and the chapter's figures: bytes moved and
floating-point operations."""
from __future__ import annotations

import numpy as np

from teenygrad.compiler import ir
from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import ELEMENTWISE
from teenygrad.compiler.schedule.items import LOOP, MATMUL, Kernel, Schedule, tree


def kernel_cost(kern: Kernel, sched: Schedule) -> tuple[int, int]:
    """(bytes moved, floating-point operations): every distinct array read once, every stored value written."""
    read: dict[int, int] = {}
    flops = 0
    for it in kern.items:
        for v in it.leaves:
            src = v.srcs[0]
            if id(src) in sched.slots and not (kern.kind == LOOP and id(src) in kern.local):
                size = min(v.size if 0 not in v.arg.strides else distinct(v), src.size)
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


def distinct(v: Node) -> int:
    return int(np.prod([n for n, s in zip(v.shape, v.arg.strides) if s != 0], dtype=np.int64))
