"""What a schedule is made of (chapter 10): an `Item` (one stored node and the loop that computes it), a `Kernel`
(items fused into one pass), a `Slot` (a flat array) and the `Schedule` itself; `tree` and `view_leaves` walk one
kernel's expression."""
from __future__ import annotations

from dataclasses import dataclass, field

from teenygrad.compiler import ir
from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import ELEMENTWISE

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
    causal: dict[int, int] = field(default_factory=dict)  # id(matmul) -> zeros it may skip (`triangles.py`)


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


def view_leaves(expr: Node) -> list[Node]:
    """The view nodes an expression tree reads (through elementwise ops)."""
    return [n for n in tree(expr) if n.op == "view"]


def item_of(n: Node) -> Item:
    if n.op in ir.REDUCE:
        x = n.srcs[0]
        return Item(n, LOOP, x, x.shape, n.arg, view_leaves(x))
    if n.op == "matmul":
        return Item(n, MATMUL, None, n.shape, (), list(n.srcs))
    if n.op == "cat":
        return Item(n, CAT, None, n.shape, (), [v for s in n.srcs for v in view_leaves(s)])
    expr = n.srcs[0] if n.op == "contiguous" else n
    return Item(n, LOOP, expr, n.shape, (len(n.shape) - 1,) if n.shape else (), view_leaves(expr))
