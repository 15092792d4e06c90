"""Causal structure (chapter 10): which products may skip the zeros a causal mask leaves.

With a causal mask, attention's probabilities P are 0 wherever key j comes after query i (j > i), and so is the
gradient of its scores, dS = P (dP - rowsum(dP P)). A product with such a lower-triangular operand need not multiply
those zeros: chapter 3's tiled kernel skips them micro-tile by micro-tile (`matmul_tiled_into`'s causal modes), as
chapter 9's hand-written attention does. Here the compiler finds them itself, by a small abstract interpretation of
the scheduled expressions: what is each value at the elements with j > i of its last two axes?

    ZERO     0 there                 (a where() that picks 0 there, exp of -inf, 0 * x, 0 / x)
    NEG_INF  -inf there              (the mask's -inf, plus or minus a finite value)
    None     anything: not proven

Like chapter 9's kernel, which never reads the masked scores, it assumes the values it knows nothing about are
finite (and nonzero as divisors, as a softmax's row sum is): -inf + x is -inf, 0 * x and 0 / x are 0 only for such
an x (a step that already has inf or nan in its scores is wrong anyway).
"""
from __future__ import annotations

import math

from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import ELEMENTWISE, View

ZERO, NEG_INF = "zero", "-inf"
# matmul_tiled_into's modes: 1 when out[i, j] is wanted only for j <= i (S = q k^T, dP = g v^T: the rest is set to 0);
# 2 when a[i, k] = 0 for k > i (P v, dS k); 3 when a[i, k] = 0 for k < i (P^T g)
WANTED_BELOW, LOWER_A, UPPER_A = 1, 2, 3


def _index(n: Node) -> tuple[int, int] | None:
    """(axis, c) when n is the index along one of the last two axes plus a constant: (-2, c) is i + c."""
    if n.op == "add" and n.srcs[1].op == "const" and isinstance(n.srcs[1].arg, int):
        base = _index(n.srcs[0])
        return None if base is None else (base[0], base[1] + n.srcs[1].arg)
    if n.op != "view" or n.srcs[0].op != "arange" or len(n.shape) < 2:
        return None
    moving = [d for d, s in enumerate(n.arg.strides) if s != 0]
    if len(moving) != 1 or n.arg.strides[moving[0]] != 1 or moving[0] < len(n.shape) - 2:
        return None
    return moving[0] - len(n.shape), n.arg.offset


def _masks_upper(cond: Node) -> bool:
    """Is `cond` true at every j > i? lt(i + a, j + b) is true exactly where j > i + a - b."""
    if cond.op != "lt":
        return False
    row, col = _index(cond.srcs[0]), _index(cond.srcs[1])
    return row is not None and col is not None and row[0] == -2 and col[0] == -1 and row[1] <= col[1]


def _same_triangle(v: Node, transposed: bool = False) -> bool:
    """Does view v read its source's element (i, j) of the last two axes at its own (i, j) (or (j, i))?"""
    src: Node = v.srcs[0]
    if len(v.shape) < 2 or len(src.shape) < 2 or src.shape[-1] != src.shape[-2]:
        return False
    want = View.contiguous(src.shape).strides[-2:]
    strides = tuple(v.arg.strides[-2:])
    return v.shape[-2:] == src.shape[-2:] and strides == (want[::-1] if transposed else want) and \
        v.arg.offset % (src.shape[-1] * src.shape[-2]) == 0


class Triangles:
    """What every node of a scheduled graph is above the diagonal (memoized over the shared expressions)."""

    def __init__(self) -> None:
        self.memo: dict[int, str | None] = {}

    def stored(self, n: Node) -> str | None:
        """A stored node: a copy kernel's value is its expression's; other kinds are not looked into."""
        return self.value(n.srcs[0]) if n.op == "contiguous" else None

    def value(self, n: Node) -> str | None:
        if id(n) not in self.memo:
            self.memo[id(n)] = self._value(n)
        return self.memo[id(n)]

    def _value(self, n: Node) -> str | None:
        if n.op == "const":
            return ZERO if n.arg == 0 else NEG_INF if n.arg == -math.inf else None
        if n.op == "view":
            return self.stored(n.srcs[0]) if _same_triangle(n) else None
        if n.op == "where":
            return self.value(n.srcs[1]) if _masks_upper(n.srcs[0]) else None
        vals = [self.value(s) for s in n.srcs]
        a, b = vals[0], vals[-1]
        if n.op == "exp":
            return ZERO if a == NEG_INF else None
        if n.op in ("neg", "cast"):
            return ZERO if a == ZERO else None
        if n.op == "add" and NEG_INF in vals or n.op == "sub" and a == NEG_INF and b != NEG_INF:
            return NEG_INF
        if n.op in ("add", "sub") and a == b == ZERO or n.op == "mul" and ZERO in vals and NEG_INF not in vals:
            return ZERO
        return ZERO if n.op == "div" and a == ZERO and b is None else None

    def mode(self, mm: Node, readers: list[Node | None]) -> int:
        """The causal mode for the product mm = a @ b (0: compute everything), given the expressions that read it
        (None for a reader that is not an expression: a matmul, a cat, an output)."""
        a = mm.srcs[0]
        if a.op == "view" and a.shape[-1] == a.shape[-2] and self.stored(a.srcs[0]) == ZERO:
            return LOWER_A if _same_triangle(a) else UPPER_A if _same_triangle(a, transposed=True) else 0
        square = len(mm.shape) >= 2 and mm.shape[-1] == mm.shape[-2]
        return WANTED_BELOW if square and readers and all(e is not None and self._unread(e, mm) for e in readers) else 0

    def _unread(self, e: Node, mm: Node) -> bool:
        """Does e read mm only at its own (i, j), and above the diagonal only inside a value proven there (which
        then does not depend on mm's elements, as long as they are finite)?"""
        seen, stack = set(), [e]
        while stack:
            n = stack.pop()
            if id(n) not in seen:
                seen.add(id(n))
                if n.op == "view" and n.srcs[0] is mm and not _same_triangle(n):
                    return False
                stack.extend(n.srcs if n.op in ELEMENTWISE else ())
        return self._shielded(e, mm, {})

    def _shielded(self, e: Node, mm: Node, memo: dict[int, bool]) -> bool:
        if id(e) not in memo:
            memo[id(e)] = self.value(e) is not None or (e.srcs[0] is not mm if e.op == "view" else
                                                          e.op not in ELEMENTWISE or
                                                          all(self._shielded(s, mm, memo) for s in e.srcs))
        return memo[id(e)]


def rows_stop_at_diagonal(items: list, shape: tuple[int, ...], inner: tuple[int, ...]) -> bool:
    """Can a loop kernel over `shape`, reducing or storing along its last axis j for each row i of the axis before,
    stop every row at j = i? Yes when that (i, j) square is causal for every stage: a sum adds 0 above the diagonal,
    a max takes -inf there, a store writes 0 there (then written as such, not computed). Attention's softmax and
    its backward then do half the work, as chapter 9's `softmax_causal` does."""
    if len(shape) < 2 or tuple(inner) != (len(shape) - 1,) or shape[-1] != shape[-2]:
        return False
    tri = Triangles()
    want = {"sum": ZERO, "max": NEG_INF}
    return all(it.shape == shape and tri.value(it.expr) == want.get(it.node.op, ZERO) for it in items)
