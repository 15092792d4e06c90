"""Judge for assignment 10-compiler: seven pieces of teenygrad's compiler (exercises/10-compiler.ipynb).

The learner writes `codegen.index_expr` (part `index_expr`: a view's flat position as Python source),
`passes.fold_constants`, `passes.merge_cats`, `passes.transpose_products`, `codegen.expr.Expr.emit` (part `emit`:
the code of one node of every op kind), the fusion rules `is_row_view`, `aligned`, `can_join` and `can_follow`
(part `fusion`) and the kernels of sums down columns, `codegen.kernels.column_kernel` and `combine_kernel` (part
`columns`). In the grading sandbox every other part is a stub, so no hidden test runs tg.compile's whole
pipeline: each runs its piece alone, on graphs the notebook rebuilds from the plain data below with the builders of
its first cell (copied here: FUSION_GRAPH ... EXPRESSION, kept equal by tests/test_ch10_compiler.py), and this
judge, which runs with the whole package, computes the reference with teenygrad's own pieces or numpy.

  index_expr  (shape, strides, offset)      -> (the position its source gives for every element, its terms, its "*"s)
  fold_constants (x, row, codes, bits)      -> (the values with the learner's folding among the passes
                                               (backend="passes"), nodes before, nodes after, constant ops left)
  merge_cats  (rows, lengths, nonzero, extra, seed)  -> (the value of cat_sum(...) after merge_cats, its adds,
                                               its cats): the package's counts, the original graph's value
  transpose_products (dims, orders, seed)   -> (the outputs' values, flattened; the shapes of the products left)
  emit        (shape, views, prog, consts, fdata, idata, bits)  -> the value emit's code gives at every point
                                               of expression(...) (run in Python), against ir.evaluate on the
                                               views' gathered values; the dtype must be the root's
  fusion      (kind, sizes, codes)          -> (the kernel of each item that fuse makes of fusion_graph(...),
                                               each item's rank after): the package's fuse
  columns     (shape, axes, codes, bits, path, seed) -> (column_graph(...)'s values run as plain Python, compiled,
                                               (kernel, rows, chunks) of each call of run): numpy's values, and
                                               the calls the package's generator makes, with the stand-ins of the
                                               other parts the notebook installs (passes that change nothing,
                                               fusion that never fuses), serial or parallel (`force_path`)
The programs (teenygrad.grading.random_program, PROGRAM_OPS) are computed here again in numpy: the oracle.
"""
from __future__ import annotations

import contextlib
import math
import re
from typing import Iterator

import numpy as np

import teenygrad as tg
from autograder.judges import Case, Part, compare
from teenygrad import grading
from teenygrad.compiler import ir, passes
from teenygrad.compiler.backend import run_passes
from teenygrad.compiler.codegen import generate
from teenygrad.compiler.passes import Graph, View
from teenygrad.compiler.schedule import STORED, fusion, schedule
from teenygrad.compiler.schedule.items import item_of
from teenygrad.compiler.schedule.order import eager_order
from teenygrad.grading import PROGRAM_OPS
from teenygrad.kernels.jit import force_path

EXPR_OPS = ("const", "cast", "neg", "exp", "log", "sqrt", "recip", "tanh", "add", "sub", "mul", "div", "pow",
            "maximum", "lt", "eq", "where")
DTYPES = ir.DTYPES  # ("float32", "float64", "int64", "bool")
EXPR_ARITY = {op: (0, 0, 0) if op == "const" else (1, 1, 1) if op == "where" else (1, 1, 0) if op in ir.BINARY
              else (1, 0, 0) for op in EXPR_OPS}  # which of a prog row's a, b, c are values read

ROWS = ("centre rows", "softmax twice", "square twice", "shift columns")  # reductions and their readers


@contextlib.contextmanager
def book_pieces() -> Iterator[None]:
    """The package's own pieces of this exercise for a `with` block, whatever a process installed (the grader's
    process installs none; a test that runs the judge in the learner's process does)."""
    saved: dict[str, list] = {}
    for (assignment, part, _), fn in tg.edition.installed_functions().items():
        if assignment == "10-compiler":
            saved.setdefault(part, []).append(fn)
    for part in saved:
        tg.edition.uninstall("10-compiler", part)
    try:
        yield
    finally:
        for part, fns in saved.items():
            tg.edition.install("10-compiler", part, *fns)


def program(x: np.ndarray, row: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """grading.random_program in numpy."""
    n = x.shape[0]
    for code in np.atleast_1d(codes):
        op = PROGRAM_OPS[int(code) % len(PROGRAM_OPS)]
        if op == "exp":
            x = np.exp(x * 0.5)
        elif op == "tanh twice":
            x = np.tanh(x) * 1.5
        elif op == "square twice":
            x = x * x - (x * x).sum(1, keepdims=True) / n
        elif op == "add row":
            x = x + row
        elif op == "flip":
            x = x[::-1]
        elif op == "transpose":
            x = x.T
        elif op == "interleave":
            x = np.concatenate([x[::2], x[1::2]], 0)
        elif op == "centre rows":
            x = x - x.max(1, keepdims=True)
        elif op == "shift columns":
            x = x + x.sum(0, keepdims=True) / n
        elif op == "softmax twice":
            e = np.exp(x - x.max(1, keepdims=True))
            s = e / e.sum(1, keepdims=True)
            x = s + s * x
    return x  # "identities": x * 1 + 0 + 0


def _codes(rng: np.random.Generator, must: tuple[str, ...], count: int) -> np.ndarray:
    """`count` op codes, at least two of them from `must`, in random order."""
    picks = [PROGRAM_OPS.index(m) for m in rng.choice(must, 2)]
    picks += [int(c) for c in rng.integers(0, len(PROGRAM_OPS), count - 2)]
    return np.array(rng.permutation(picks), dtype=np.int64)


def _program_case(rng: np.random.Generator, must: tuple[str, ...], bits: int) -> Case:
    n = int(rng.integers(3, 8))
    x = rng.standard_normal((n, n))
    return x, rng.standard_normal(n), _codes(rng, must, int(rng.integers(3, 6))), bits


def _view_case(rng: np.random.Generator) -> Case:
    ndim = int(rng.integers(1, 5))
    shape = rng.integers(1, 5, ndim)
    strides = rng.integers(-9, 10, ndim) * (rng.random(ndim) < 0.8)  # some 0: broadcast axes
    offset = int(rng.integers(0, 3)) * int(rng.integers(0, 40))
    return shape.astype(np.int64), strides.astype(np.int64), offset


def _index_cases(rng: np.random.Generator) -> list[Case]:
    views = [_view_case(rng) for _ in range(12)]
    views.append((np.array([3, 1, 4]), np.array([4, 99, 1]), 0))   # a length-1 axis: its stride never counts
    views.append((np.array([5]), np.array([0]), 7))                 # one element broadcast: the offset alone
    return views


def _check_index(case: Case, got: tuple) -> str | None:
    shape, strides, offset = np.atleast_1d(case[0]), np.atleast_1d(case[1]), int(case[2])
    grid = np.indices(tuple(int(s) for s in shape)).reshape(len(shape), -1)
    want = offset + (grid * strides[:, None]).sum(0)
    kept = [int(st) for st, n in zip(strides, shape) if st != 0 and n != 1]  # the terms written, besides the offset
    terms, stars = max(1, int(offset != 0) + len(kept)), sum(st != 1 for st in kept)
    what = f"index_expr of a view of shape {tuple(shape)}, strides {tuple(strides)}, offset {offset}"
    if len(got) != 3:
        return f"{what}: expected (positions, terms, multiplications), got {len(got)} outputs"
    why = compare(got[:1], (want,), Part(cases=lambda rng: [], rtol=0, atol=0))
    if why is not None:
        return f"{what}: {why}"
    if (int(got[1]), int(got[2])) != (terms, stars):
        return (f"{what}: expected {terms} term(s) and {stars} multiplication(s) (leave out what is always 0, write a "
                f"stride of 1 as the bare name), got {int(got[1])} and {int(got[2])}")
    return None


def _check_values(case: Case, got: tuple, outputs: str, passes: str) -> tuple[list[str], str | None]:
    """(the program's ops, why the values in `got` are wrong or it has not the `outputs` a pass reports, or None)."""
    x, row, codes, bits = case
    ops = [PROGRAM_OPS[int(c) % len(PROGRAM_OPS)] for c in np.atleast_1d(codes)]
    if len(got) != len(outputs.split(", ")):
        return ops, f"expected ({outputs}), got {len(got)} outputs"
    want = program(np.asarray(x, np.float64), np.asarray(row, np.float64), codes)
    part = Part(cases=lambda rng: [], rtol=1e-9 if bits == 64 else 2e-4, atol=1e-9 if bits == 64 else 2e-5)
    why = compare(got[:1], (want,), part)
    return ops, None if why is None else f"the program {ops} in float{bits}, with {passes} among the passes: {why}"


def _fold_cases(rng: np.random.Generator) -> list[Case]:
    return [_program_case(rng, ("identities",), bits) for bits in (64, 64, 32)]


def _check_fold(case: Case, got: tuple) -> str | None:
    ops, why = _check_values(case, got, "values, nodes before, nodes after, constant ops left",
                             "your constant folding")
    if why is not None:
        return why
    before, after, left = int(got[1]), int(got[2]), int(got[3])
    if left:
        return f"the program {ops}: after your folding {left} op(s) still have only constants as sources"
    if not after < before:  # "identities" multiplies by 1 and adds 0
        return f"the program {ops} multiplies by 1 and adds 0, but your folding left {after} of its {before} nodes"
    return None




# ---- the builders of the notebook's first cell (the hidden tests rebuild each case's graph with them) -------------


def fusion_graph(kind, sizes, codes):
    # a graph for the fusion part: 0 grading.random_program (rows, columns, views), 1 a product and what follows
    # it, 2 parameter updates (assigns) side by side
    n, m, k = (int(s) for s in sizes)
    codes = [int(c) for c in np.atleast_1d(codes)]
    if kind == 0:
        step = tg.compile(lambda x, row: grading.random_program(x, row, codes), backend="reference")
        step(tg.zeros(n, n, dtype=tg.float64), tg.zeros(n, dtype=tg.float64))  # capture only
        return Graph(step.program.outputs, step.program.effects)

    def load(name, shape):
        return ir.load(ir.Buffer(name, shape, "float64"))
    if kind == 1:
        x, w, b = load("x", (n * m, k)), load("w", (k, n)), load("b", (n,))
        product = ir.matmul(x, w)
        y = ir.binary("add", product, ir.expand(ir.reshape(b, (1, n)), (n * m, n)))
        if codes[0] % 2:
            y = ir.binary("mul", y, ir.unary("tanh", y))
        if codes[0] % 3 == 1:
            y = ir.reshape(y, (n, m, n))
        if codes[0] % 3 == 2:
            y = ir.binary("sub", y, ir.expand(ir.reduce("sum", y, (1,)), y.shape))
        if codes[0] % 4 == 3:  # a second reader of the product
            return Graph([y, ir.unary("tanh", product)])
        return Graph([y])
    effects = []
    for j, c in enumerate(codes):  # m = 0.9 m + g; p = p - 0.1 m, for a p of shape (n, m) or (m, n)
        shape = (n, m) if c % 4 else (m, n)
        p, g, mom = load(f"p{j}", shape), load(f"g{j}", shape), load(f"m{j}", shape)
        new_m = ir.binary("add", ir.binary("mul", mom, ir.const(0.9, "float64", shape)), g)
        if c % 5 == 4 and effects and effects[-1].shape == shape:  # reads the parameter the update before assigns
            new_m = ir.binary("add", new_m, effects[-1].srcs[0])
        new_p = ir.binary("sub", p, ir.binary("mul", new_m, ir.const(0.1, "float64", shape)))
        effects += [ir.assign(mom, new_m), ir.assign(p, new_p)]
    return Graph([], effects)


def items_of(graph):
    # the schedule's items (schedule.schedule's first lines) of a graph after view folding, and its targets
    graph = passes.fold_views(passes.eliminate_dead(graph))
    order = eager_order(ir.toposort(graph.roots))
    want = {id(n) for n in graph.outputs} | {id(e.srcs[1]) for e in graph.effects}
    targets = {id(e.srcs[1]): e.srcs[0].arg for e in graph.effects}
    items = [item_of(n) for n in order if n.op in STORED or id(n) in want and n.op not in ("load", "assign")]
    return items, targets


def kernel_of(items, kernels):
    # for each item, the number of the kernel it is in
    where = {id(it): j for j, kern in enumerate(kernels) for it in kern.items}
    return np.array([where[id(it)] for it in items], dtype=np.int64)


def cat_sum(rows, lengths, nonzero, extra, seed):
    # a sum of cats along axis 1 of (rows, L): cat c's piece j has lengths[c, j] columns (none when 0), zeros
    # where nonzero[c, j] is 0
    data = np.random.default_rng(seed)
    total = None
    for c, (lens, nz) in enumerate(zip(np.atleast_2d(lengths), np.atleast_2d(nonzero))):
        pieces = [ir.load(ir.Buffer(f"c{c}p{j}", (rows, int(w)), "float64", data.standard_normal((rows, int(w)))))
                  if z else ir.const(0.0, "float64", (rows, int(w))) for j, (w, z) in enumerate(zip(lens, nz)) if w]
        cat = ir.cat(pieces, 1)
        total = cat if total is None else ir.binary("add", total, cat)
    if extra == 1:  # a sum with something that is not a cat
        total = ir.binary("add", total, ir.load(ir.Buffer("y", total.shape, "float64",
                                                          data.standard_normal(total.shape))))
    if extra == 2:  # a sum with a cat along the other axis: its first row, zeros below
        top = ir.load(ir.Buffer("top", (1, total.shape[1]), "float64", data.standard_normal((1, total.shape[1]))))
        total = ir.binary("add", total, ir.cat([top, ir.const(0.0, "float64", (rows - 1, total.shape[1]))], 0))
    return Graph([total])


def products(dims, orders, seed):
    # a product (b.., m, k) @ (b.., k, n), dims = (b.., m, k, n), read by one permute per row of orders (an order
    # of its axes; a row of -1: read as it is, times 2)
    data = np.random.default_rng(seed)
    *batch, m, k, n = (int(d) for d in np.atleast_1d(dims))
    a = ir.load(ir.Buffer("a", (*batch, m, k), "float64", data.standard_normal((*batch, m, k))))
    b = ir.load(ir.Buffer("b", (*batch, k, n), "float64", data.standard_normal((*batch, k, n))))
    mm = ir.matmul(a, b)
    outs = [ir.binary("mul", mm, ir.const(2.0, "float64", mm.shape)) if order[0] < 0 else
            ir.unary("exp", ir.permute(mm, tuple(int(o) for o in order))) for order in np.atleast_2d(orders)]
    return Graph(outs)


def expression(shape, views, prog, consts, fdata, idata, bits):
    # an expression tree over views: views rows (kind, offset, strides...) read 0 a float buffer, 1 an int64
    # buffer, 2 an arange, 3 a row sum held in a register; prog rows (op, a, b, c) build on the values so far
    # (const: consts[a] of dtype DTYPES[b]; cast: to DTYPES[b]); returns (the root, the register's sum)
    shape, fdt = tuple(int(s) for s in np.atleast_1d(shape)), "float32" if bits == 32 else "float64"
    f = ir.load(ir.Buffer("f", (fdata.size,), fdt, np.asarray(fdata, fdt)))
    i = ir.load(ir.Buffer("i", (idata.size,), "int64", np.asarray(idata, np.int64)))
    rows = np.asarray(fdata[:math.prod(shape)], fdt).reshape(shape)
    reg = ir.reduce("sum", ir.load(ir.Buffer("r", shape, fdt, rows)), (len(shape) - 1,))
    values = []
    for kind, offset, *strides in np.atleast_2d(views):
        base = [f, i, ir.arange(shape, int(np.argmax(np.abs(strides)))), reg][int(kind)]
        view = View(shape, tuple(int(s) for s in strides), int(offset))
        values.append(ir.Node("view", (base,), shape, base.dtype, view))
    for op, a, b, c in np.atleast_2d(prog):
        name = EXPR_OPS[int(op)]
        if name == "const":
            values.append(ir.const(np.asarray(consts[int(a)], DTYPES[int(b)]).item(), DTYPES[int(b)], shape))
        elif name == "cast":
            values.append(ir.unary("cast", values[int(a)], DTYPES[int(b)]))
        elif name == "where":
            values.append(ir.where(values[int(a)], values[int(b)], values[int(c)]))
        elif name in ir.BINARY:
            values.append(ir.binary(name, values[int(a)], values[int(b)]))
        else:
            values.append(ir.unary(name, values[int(a)]))
    return values[-1], reg


def column_graph(shape, axes, codes, bits, seed):
    # the outputs for the columns part: a reduction over `axes` (never the last) of an expression of loads x and y
    # of `shape` (codes[0]: the expression; codes[1]: 0 sum, 1 max); codes[2] = 1 adds a loop over rows, tanh(x),
    # and the sums over every axis but the last of x * y and of y, which share its pass. float{bits}, or int64 (0)
    data = np.random.default_rng(seed)
    shape, dtype = tuple(int(s) for s in np.atleast_1d(shape)), {64: "float64", 32: "float32", 0: "int64"}[int(bits)]
    x, y = (ir.load(ir.Buffer(name, shape, dtype, (data.standard_normal(shape) * 4).astype(dtype))) for name in "xy")
    code, op, rows = (int(c) for c in np.atleast_1d(codes))
    if code == 0 or code == 1 and dtype == "int64":
        e = ir.binary("mul", x, y)
    elif code == 1:
        e = ir.binary("add", ir.unary("tanh", x), y)
    elif code == 2:
        e = ir.binary("maximum", x, ir.unary("neg", y))
    elif code == 3:
        e = ir.binary("sub", x, ir.binary("mul", y, y))
    else:  # never above 0
        e = ir.unary("neg", ir.binary("mul", x, x))
    outs = [ir.reduce(["sum", "max"][op], e, tuple(int(a) for a in np.atleast_1d(axes)))]
    if rows:
        every = tuple(range(len(shape) - 1))
        outs += [ir.unary("tanh", x), ir.reduce("sum", ir.binary("mul", x, y), every), ir.reduce("sum", y, every)]
    return outs


# ---- merge_cats ----------------------------------------------------------------------------------------------------

def _partition(rng: np.random.Generator, cats: int, overlap: bool) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, nonzero) of `cats` cats of one width: segments each owned by at most one cat (or, with `overlap`,
    any), a cat's run of segments it does not own sometimes one zero piece (padded with length 0)."""
    widths = rng.integers(1, 4, int(rng.integers(2, 5)))
    owner = rng.integers(-1, cats, widths.size)
    lengths = np.zeros((cats, widths.size), np.int64)
    nonzero = np.zeros((cats, widths.size), np.int64)
    for c in range(cats):
        mine = (owner == c) | (overlap & (rng.random(widths.size) < 0.5))
        row, nz = [], []
        for w, m in zip(widths, mine):
            if not m and nz and not nz[-1] and rng.random() < 0.5:
                row[-1] += int(w)  # one zero piece for two segments
            else:
                row.append(int(w))
                nz.append(int(m))
        lengths[c, :len(row)], nonzero[c, :len(nz)] = row, nz
    return lengths, nonzero


def _cats_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for cats, overlap, extra in [(2, False, 0), (3, False, 0), (3, False, 0), (2, True, 0), (3, True, 0),
                                 (2, False, 1), (3, False, 0), (4, False, 0), (2, False, 2)]:
        lengths, nonzero = _partition(rng, cats, overlap)
        rows = int(rng.integers(2 if extra == 2 else 1, 4))
        cases.append((rows, lengths, nonzero, extra, int(rng.integers(0, 2**31))))
    return cases


def _counts(graph: Graph) -> tuple[int, int]:
    nodes = graph.nodes()
    return sum(n.op == "add" for n in nodes), sum(n.op == "cat" for n in nodes)


def _check_cats(case: Case, got: tuple) -> str | None:
    if len(got) != 3:
        return f"expected (value, adds, cats), got {len(got)} outputs"
    graph = cat_sum(*case)
    want = ir.evaluate(graph.outputs)[0]
    lengths = np.atleast_2d(case[1]).tolist()
    why = compare(got[:1], (want,), Part(cases=lambda rng: [], rtol=1e-12, atol=1e-12))
    if why is not None:
        return f"the sum of cats with piece widths {lengths}, after your merge_cats: {why}"
    with book_pieces():
        adds, cats = _counts(passes.merge_cats(graph))
    if (int(got[1]), int(got[2])) != (adds, cats):
        return (f"the sum of cats with piece widths {lengths} (non-zero: {np.atleast_2d(case[2]).tolist()}) "
                f"should leave {adds} add(s) and {cats} cat(s), your merge_cats left {int(got[1])} and {int(got[2])}")
    return None


# ---- transpose_products --------------------------------------------------------------------------------------------

def _products_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for rank, plan in [(3, "swap"), (4, "swap"), (3, "swap"), (3, "plain"), (4, "batch"), (2, "swap"),
                       (4, "swap"), (3, "mixed")]:
        dims = rng.integers(1, 5, rank + 1)  # (batch.., m, k, n)
        dims[-3:] = rng.integers(2, 5, 3)
        batch = list(range(rank - 2))
        swap = [[*rng.permutation(batch).tolist(), rank - 1, rank - 2] for _ in range(int(rng.integers(1, 3)))]
        if plan == "plain":    # one reader reads the product as it is: it stays
            swap.append([-1] * rank)
        if plan == "batch":    # a reader that moves the batch axes only: the last two are not swapped
            swap.append([*reversed(batch), rank - 2, rank - 1])
        if plan == "mixed":    # a reader that swaps the last two and one that reads it as it is
            swap = [swap[0], [-1] * rank]
        cases.append((dims.astype(np.int64), np.array(swap, np.int64), int(rng.integers(0, 2**31))))
    return cases


def _products_outputs(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(the outputs' values, flattened; each product's shape and 1 if its first operand reads buffer b, flattened)."""
    values = np.concatenate([v.ravel() for v in ir.evaluate(graph.outputs)])
    return values, np.array([[*n.shape, int(any(s.op == "load" and s.arg.name == "b" for s in ir.toposort(n.srcs[:1])))]
                             for n in graph.nodes() if n.op == "matmul"], np.int64).ravel()


def _check_products(case: Case, got: tuple) -> str | None:
    if len(got) != 2:
        return f"expected (values, the products' shapes), got {len(got)} outputs"
    graph = products(*case)
    want, _ = _products_outputs(graph)
    with book_pieces():
        _, shapes = _products_outputs(passes.transpose_products(graph))
    dims, orders = tuple(int(d) for d in np.atleast_1d(case[0])), np.atleast_2d(case[1]).tolist()
    what = f"a product of shape {dims} read as {orders}"
    why = compare(got[:1], (want,), Part(cases=lambda rng: [], rtol=1e-12, atol=1e-12))
    if why is not None:
        return f"{what} (-1: read as it is), after your transpose_products: {why}"
    if got[1].shape != shapes.shape or not np.array_equal(got[1], shapes):
        return (f"{what}: the products left (shape, 1 if the first operand reads b) should be {shapes.tolist()}, "
                f"yours are {got[1].tolist()}")
    return None


# ---- emit ------------------------------------------------------------------------------------------------------------

def _expression_case(rng: np.random.Generator, bits: int, size: int, unary: bool = False) -> Case:
    """A random typed expression: its views, then `size` ops, each on values of the dtypes it accepts (`unary`:
    every unary op once, of a float view reading values beyond float32 exp's range, and their sum)."""
    ndim = int(rng.integers(1, 4))
    shape = rng.integers(1, 4, ndim)
    shape[-1] = int(rng.integers(2, 5))
    fdt = "float32" if bits == 32 else "float64"
    contiguous = View.contiguous(tuple(int(s) for s in shape)).strides
    views, kinds = [], [0, 0, 1, int(rng.integers(2, 4)), 0]
    for kind in kinds:
        if kind == 2:    # an arange along one axis
            strides = [int(d == rng.integers(0, ndim)) for d in range(ndim)]
            views.append([2, 0, *strides])
        elif kind == 3:  # the row's sum, in a register: the sum's contiguous strides, 0 along the row
            views.append([3, 0, *[s if d < ndim - 1 else 0 for d, s in enumerate(View.contiguous(
                (*shape[:-1].tolist(), 1)).strides)]])
        else:
            strides = rng.integers(-4, 5, ndim) * (rng.random(ndim) < 0.8)
            offset = int(np.sum(np.abs(strides) * (shape - 1))) + int(rng.integers(0, 3))
            views.append([kind, offset, *strides.tolist()] if rng.random() < 0.7 else [kind, 0, *contiguous])
    dtype = [fdt, fdt, "int64", "int64" if kinds[3] == 2 else fdt, fdt]
    consts = rng.standard_normal(8).round(3) * 2
    fresh_ints = [2]
    prog = [[EXPR_OPS.index("mul"), 3, 2, 0] if kinds[3] == 2 else [EXPR_OPS.index("add"), 0, 3, 0]]  # (the arange
    dtype.append(dtype[3])                                                              # or the register, read)

    def pick(*dts):
        return [j for j, d in enumerate(dtype) if d in dts]
    for op in ["neg", "exp", "log", "sqrt", "recip", "tanh"] if unary else []:
        prog.append([EXPR_OPS.index(op), 0, 0, 0])
        dtype.append(fdt)
    for _ in range(size):
        choice = rng.choice(["unary", "binary", "binary", "const", "cast", "compare", "where", "intdiv"])
        if choice == "unary":
            op = rng.choice(["neg", "exp", "log", "sqrt", "recip", "tanh"])
            a = int(rng.choice(pick(fdt)))
            row, dt = [EXPR_OPS.index(op), a, 0, 0], fdt
        elif choice in ("binary", "compare"):
            dt = str(rng.choice([fdt, fdt, "int64"]))
            ops = ["lt", "eq"] if choice == "compare" else ["add", "sub", "mul", "maximum"] + \
                (["div", "pow"] if dt == fdt else [])
            a, b = (int(j) for j in rng.choice(pick(dt), 2))
            row = [EXPR_OPS.index(str(rng.choice(ops))), a, b, 0]
            dt = "bool" if choice == "compare" else dt
        elif choice == "intdiv":  # a division of int64s, by an int64 buffer's view (1 ... 9: never 0)
            row, dt = [EXPR_OPS.index("div"), int(rng.choice(pick("int64"))), int(rng.choice(fresh_ints)), 0], "int64"
        elif choice == "const":
            dt = str(rng.choice([fdt, "int64", "bool"]))
            row = [EXPR_OPS.index("const"), int(rng.integers(0, 8)), DTYPES.index(dt), 0]
        elif choice == "cast":
            dt = str(rng.choice(["float32", "float64", "int64", "bool"]))
            src = pick(fdt, "int64", "bool") if dt != "int64" else [0, 1, 2] + pick("int64", "bool")
            row = [EXPR_OPS.index("cast"), int(rng.choice(src)), DTYPES.index(dt), 0]
        else:  # where(cond, a, b)
            if not pick("bool"):
                dtype.append("bool")
                prog.append([EXPR_OPS.index("lt"), 0, 1, 0])
            dt = str(rng.choice([fdt, "int64"]))
            a, b = (int(j) for j in rng.choice(pick(dt), 2))
            row = [EXPR_OPS.index("where"), int(rng.choice(pick("bool"))), a, b]
        prog.append(row)
        dtype.append(dt)
    if unary or rng.random() < 0.7:  # most roots read every value, summed (a value nothing reads is not emitted)
        used = {int(j) for r in prog for j, n in zip(r[1:], EXPR_ARITY[EXPR_OPS[r[0]]]) if n}
        acc = None
        for value in [j for j in range(len(dtype)) if j not in used]:
            as_float = value
            if dtype[value] != fdt:
                prog.append([EXPR_OPS.index("cast"), value, DTYPES.index(fdt), 0])
                dtype.append(fdt)
                as_float = len(dtype) - 1
            if acc is not None:
                prog.append([EXPR_OPS.index("add"), acc, as_float, 0])
                dtype.append(fdt)
            acc = len(dtype) - 1 if acc is not None else as_float
    fdata = rng.standard_normal(64).round(4)
    fdata[rng.integers(0, 64, 6)] = rng.choice([-100.0, -90.0, 90.0, 100.0], 6)  # beyond float32 exp's range
    if unary:  # view 0 reads some of them
        v = views[0]
        at = v[1] + (np.indices(tuple(shape)).reshape(ndim, -1) * np.array(v[2:])[:, None]).sum(0)
        fdata[rng.choice(at, 2)] = [100.0, 90.0]
    idata = rng.integers(1, 10, 64)
    return (shape.astype(np.int64), np.array(views, np.int64), np.array(prog, np.int64), consts, fdata, idata, bits)


def _emit_cases(rng: np.random.Generator) -> list[Case]:
    return [_expression_case(rng, bits, int(rng.integers(3, 9))) for bits in (64, 64, 64, 64, 32, 32, 32, 32)] + \
        [_expression_case(rng, bits, 14) for bits in (64, 32)] + \
        [_expression_case(rng, bits, 2, unary=True) for bits in (64, 32)]


def _gathered(view: ir.Node) -> ir.Node:
    """A view's values, read by numpy from its source (an arange's value is the index itself), as a load."""
    base, v = view.srcs[0], view.arg
    flat = np.arange(4096) if base.op == "arange" else np.asarray(ir.evaluate([base])[0]).ravel()
    grid = np.indices(v.shape).reshape(len(v.shape), -1) if v.shape else np.zeros((0, 1), np.int64)
    at = v.offset + (grid * np.array(v.strides, np.int64)[:, None]).sum(0)
    return ir.load(ir.Buffer("gathered", v.shape, view.dtype, flat[at].astype(view.dtype).reshape(v.shape)))


def _exp32_as_graded(e: ir.Node) -> ir.Node:
    """float32 exp as the contract states it (and the package computes it): e^a where -87 < a < 88, 0 at or below -87,
    a * inf at or above 88 (NaN for NaN); numpy's exp is finite up to 88.72 and tiny, not 0, down to -103.9."""
    a, shape = e.srcs[0], e.shape

    def c(v):
        return ir.const(v, "float32", shape)
    inside = ir.where(ir.binary("lt", c(-87.0), a), e, c(0.0))
    return ir.where(ir.binary("lt", a, c(88.0)), inside, ir.binary("mul", a, c(float("inf"))))


def _emit_reference(case: Case) -> np.ndarray:
    root, _ = expression(*case)
    new: dict[int, ir.Node] = {}

    def swap(n: ir.Node) -> ir.Node:
        if id(n) not in new:
            new[id(n)] = _gathered(n) if n.op == "view" else ir.Node(n.op, tuple(swap(s) for s in n.srcs), n.shape,
                                                                      n.dtype, n.arg)
            if n.op == "exp" and n.dtype == "float32":
                new[id(n)] = _exp32_as_graded(new[id(n)])
        return new[id(n)]
    with np.errstate(all="ignore"):
        return ir.evaluate([swap(root)])[0]


def _check_emit(case: Case, got: tuple) -> str | None:
    root, _ = expression(*case)
    ops = [EXPR_OPS[int(r[0])] for r in np.atleast_2d(case[2])]
    what = f"the expression {ops} over views (root {root.dtype})"
    if len(got) != 1:
        return f"{what}: expected one array of values, got {len(got)} outputs"
    want, value = _emit_reference(case), got[0]
    if value.shape != want.shape:
        return f"{what}: values of shape {value.shape}, expected {want.shape}"
    if value.dtype != want.dtype:
        return f"{what}: your code's values are {value.dtype}, the node's dtype is {want.dtype}"
    f32 = case[6] == 32 and want.dtype != np.float64
    tol = (1e-4, 1e-4) if f32 else (1e-12, 1e-12)
    if want.dtype.kind in "biu" and not np.array_equal(value, want) or want.dtype.kind == "f" and \
            not np.allclose(value, want, rtol=tol[0], atol=tol[1], equal_nan=True):
        bad = np.argwhere(~np.isclose(value, want, rtol=tol[0], atol=tol[1], equal_nan=True))[0]
        return f"{what}: at {tuple(int(b) for b in bad)} your code gives {value[tuple(bad)]}, not {want[tuple(bad)]}"
    return None


# ---- fusion ----------------------------------------------------------------------------------------------------------

def _fusion_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for ops in [("centre rows", "transpose", "exp"),   # a row's maximum read across the rows
                ("shift columns", "centre rows")]:      # a column sum, then a reduction along the rows
        cases.append((0, np.array([int(rng.integers(3, 7)), 1, 1]), np.array([PROGRAM_OPS.index(op) for op in ops])))
    for _ in range(4):
        cases.append((0, np.array([int(rng.integers(3, 7)), 1, 1]), _codes(rng, ROWS, int(rng.integers(3, 6)))))
    for code in [3, 7, 4, rng.choice([0, 2, 5, 6])]:  # 3 and 7: the product read twice; 4 and 7: reshaped
        cases.append((1, rng.integers(2, 5, 3), np.array([code])))
    same = np.array([1, 2, 3, 6, 7, 11])  # codes of updates of one shape that read no other's buffer
    for codes in (rng.integers(0, 20, 1), [int(rng.choice(same)), 9, int(rng.choice(same))],  # 9: reads the p before
                  rng.choice(same, int(rng.integers(9, 13))), rng.integers(0, 20, int(rng.integers(4, 8)))):
        cases.append((2, np.array([*rng.integers(2, 5, 2), 1]), np.asarray(codes, np.int64)))
    return cases


def _fusion_outputs(items: list, kernels: list) -> tuple[np.ndarray, np.ndarray]:
    return kernel_of(items, kernels), np.array([len(it.shape) for it in items], np.int64)


def _check_fusion(case: Case, got: tuple) -> str | None:
    if len(got) != 2:
        return f"expected (the kernel of each item, each item's rank), got {len(got)} outputs"
    with book_pieces():
        items, targets = items_of(fusion_graph(*case))
        want = _fusion_outputs(items, fusion.fuse(items, targets))
    codes = np.atleast_1d(case[2]).tolist()
    kind = ["the program " + str([PROGRAM_OPS[int(c) % len(PROGRAM_OPS)] for c in codes]),
            f"a product with what follows it (code {codes[0]})",
            f"{len(codes)} parameter update(s) (codes {codes})"][int(case[0])]
    ops = [it.node.op for it in items]
    if got[0].shape != want[0].shape or not np.array_equal(got[0], want[0]):
        return (f"{kind}: its items {ops} should go to kernels {want[0].tolist()}, "
                f"your rules put them in {got[0].tolist()}")
    if not np.array_equal(got[1], want[1]):
        return f"{kind}: after fusion the items' loops should have ranks {want[1].tolist()}, yours {got[1].tolist()}"
    return None


# ---- columns --------------------------------------------------------------------------------------------------------

def steps_of(source):
    # (kernel, rows (-1: none), chunks) of each call of a generated module's `run`, read from its STEPS
    steps = re.findall(r"^    \((k\d+), \(.*?\), (\d+), (None|\d+), (\d+)\),$", source, re.M)
    return np.array([[int(k), -1 if rows == "None" else int(rows), int(chunks)] for _, k, rows, chunks in steps],
                    np.int64).reshape(-1, 3)


@contextlib.contextmanager
def _as_the_notebook_runs() -> Iterator[None]:
    """The package's pieces, with the other parts' stand-ins that change the schedule as the notebook's: passes that
    change nothing, fusion rules that never fuse."""
    def never(name):
        def rule(*args):
            return False
        rule.__name__ = name
        return rule

    def same(name):
        def same_graph(graph):
            return graph
        same_graph.__name__ = name
        return same_graph
    with book_pieces(), contextlib.ExitStack() as stack:
        for part in ("fold_constants", "merge_cats", "transpose_products"):
            stack.enter_context(tg.edition.installed("10-compiler", part, same(part)))
        stack.enter_context(tg.edition.installed("10-compiler", "fusion", *map(never, ("is_row_view", "aligned",
                                                                                       "can_join", "can_follow"))))
        yield


def _columns_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for rank, axes, op, rows, bits, path in [
            (3, (0, 1), 1, 0, 32, 0), (3, (1,), 0, 0, 64, 0), (2, (0,), 0, 0, 0, 0),
            (2, (0,), 0, 0, 32, 1), (3, (0, 1), 1, 0, 64, 1), (3, (1,), 1, 0, 32, 1), (2, (0,), 0, 1, 64, 1),
            (2, (0,), 1, 0, 64, 0),
            (3, (0, 1), 1, 1, 32, 1), (2, (0,), 0, 0, 32, 2)]:
        shape = rng.integers(2, 7, rank)
        if path == 2:  # wide: shared among threads by blocks of columns
            shape = np.array([int(rng.integers(2, 4)), 256 * 16 + int(rng.integers(1, 300))])
        code = 4 if op and rng.random() < 0.5 else int(rng.integers(0, 4))  # 4: every value negative
        codes = np.array([code, op, rows], np.int64)
        cases.append((shape.astype(np.int64), np.array(axes, np.int64), codes, bits, min(path, 1),
                      int(rng.integers(0, 2**31))))
    return cases


def _check_columns(case: Case, got: tuple) -> str | None:
    shape, axes, codes, bits, path, seed = case
    outs = column_graph(shape, axes, codes, bits, seed)
    dtype = {0: "int64", 32: "float32", 64: "float64"}[int(bits)]
    what = (f"{[n.op for n in outs]} of shape {tuple(int(s) for s in np.atleast_1d(shape))} over axes "
            f"{tuple(int(a) for a in np.atleast_1d(axes))} ({dtype}, {['serial', 'parallel'][int(path)]})")
    if len(got) != 3:
        return f"{what}: expected (values run as Python, values compiled, the calls of run), got {len(got)} outputs"
    want = np.concatenate([v.ravel() for v in ir.evaluate(outs)])
    tol = {0: (0, 0), 32: (2e-4, 2e-5), 64: (1e-9, 1e-12)}[int(bits)]
    for value, how in zip(got[:2], ("run as plain Python", "compiled")):
        why = compare((value,), (want,), Part(cases=lambda rng: [], rtol=tol[0], atol=tol[1]))
        if why is not None:
            return f"{what}, {how}: {why}"
    with _as_the_notebook_runs(), force_path(["serial", "parallel"][int(path)]):
        steps = steps_of(generate(schedule(run_passes(outs)[0])))
    if got[2].shape != steps.shape or not np.array_equal(got[2], steps):
        return (f"{what}: run should call (kernel, rows, chunks) {steps.tolist()}, yours calls {got[2].tolist()} "
                "(the chunks and rows your kernels return)")
    return None


PARTS = {
    "index_expr": Part(cases=_index_cases, check=_check_index),
    "fold_constants": Part(cases=_fold_cases, check=_check_fold),
    "merge_cats": Part(cases=_cats_cases, check=_check_cats),
    "transpose_products": Part(cases=_products_cases, check=_check_products),
    "emit": Part(cases=_emit_cases, check=_check_emit),
    "fusion": Part(cases=_fusion_cases, check=_check_fusion),
    "columns": Part(cases=_columns_cases, check=_check_columns),
}
