"""Code generation (chapter 10): each scheduled kernel becomes the Python source of a numba function.

The generated code is the loops chapter 9 wrote by hand, written by a program instead. A loop kernel is

    for o in range(first, last):         # the outer index: every axis not reduced (rows)
        i0 = o // 64; i1 = o % 64        # unravelled into one index per axis
        acc = 0.0                        # a reduction: the inner loop accumulates into a register
        for i2 in range(128):
            t0 = x[u(i0*8192 + i1*128 + i2)]        # a view is just index arithmetic: offset + i . strides
            acc += np.exp(t0 - r5)
        ...

(a serial function over rows first..last; when the work pays, `run` hands it to `parallel_for`, one compiled
driver for all kernels, which shares chunks of the rows among threads), every elementwise op one line of
straight-line code (SSA: one variable per node), constants module-level globals of the graph's dtype (a bare
Python `0.5` would make numba compute a float32 graph in float64). Shapes and strides are literals in the
source, so LLVM folds the index arithmetic and vectorises the inner loop; only the rows' bounds are arguments.
A plain Python function `run` calls the kernels in order. (It could be compiled too, making a step one
call into machine code, but numba then links every kernel into it again: measured, a third more compile
time for a few microseconds a kernel saved.) Kernels that differ only in the arrays they touch (a layer
repeated) are generated once. A matmul is a call of chapter 3's tiled kernel on views of the flat arrays
(`teenygrad.kernels.matmul_views`, compiled once for all shapes), its epilogue a loop kernel of its own.

Floats keep the graph's dtype. Sums accumulate in float64 and are rounded once, as the hand kernels do. float32
exp and tanh use the hand kernels' vectorisable `exp32` and `tanh32` (relative error ~2e-7). Max reductions use
`max(acc, v)`, as the hand kernels do: it vectorises, but a NaN in the row is dropped (numpy's max gives NaN).
"""
from __future__ import annotations

import math
import re

import numpy as np

from teenygrad import ir
from teenygrad.edition import exercise
from teenygrad.ir import Node
from teenygrad.kernels import jit
from teenygrad.kernels.jit import CHUNKS, num_threads
from teenygrad.kernels.matmul import MR, NR
from teenygrad.passes import ELEMENTWISE, View
from teenygrad.schedule import CAT, LOOP, MATMUL, Item, Kernel, Schedule, Slot, tree
from teenygrad.triangles import rows_stop_at_diagonal

FASTMATH = '{"reassoc", "contract", "nsz"}'   # reorder sums (to vectorise them), fuse multiply-adds; inf/nan kept
_CAST = {"float32": "np.float32", "float64": "np.float64", "int64": "np.int64"}
_FUNC = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "tanh": "np.tanh"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "eq": "=="}
_COST = {"exp": 8, "log": 8, "tanh": 8, "sqrt": 4, "pow": 16, "div": 2, "recip": 2}


def slot_name(s: Slot) -> str:
    return {"input": "in", "output": "out", "scratch": "s"}[s.kind] + str(s.index)


class _Source:
    """Lines of Python being written, with indentation, fresh variable names and module-level constants."""

    def __init__(self, consts: dict) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.consts = consts
        self.count = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def var(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value, dtype: str) -> str:
        if dtype == "bool":
            return str(bool(value))
        text = f"{_CAST[dtype]}({value!r})" if not (isinstance(value, float) and not math.isfinite(value)) \
            else f"{_CAST[dtype]}(float('{value}'))"
        name = f"{dtype[0].upper()}{dtype[-2:] if dtype != 'int64' else ''}_" + \
            repr(value).replace("-", "m").replace(".", "_").replace("+", "").replace("'", "")
        name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)  # F32_0_5, F64_minf
        return self.consts.setdefault(text, name)


@exercise("10-compiler", "index_expr")
def index_expr(view: View, names: list[str]) -> str:
    """The position in its flat buffer of element (names[0], names[1], ...) of `view`, as Python source:
    offset + i0 * stride0 + i1 * stride1 + ..., leaving out what is always 0 (a zero offset, a broadcast axis's
    stride 0, an axis of length 1) and writing a stride of 1 as the bare name. "0" when nothing is left."""
    terms = [str(view.offset)] if view.offset else []
    terms += [names[d] if st == 1 else f"{names[d]} * {st}" for d, st in enumerate(view.strides)
              if st != 0 and view.shape[d] != 1]
    return " + ".join(terms) or "0"


class _Expr:
    """Emits the straight-line code of one expression tree at one point of the iteration space."""

    def __init__(self, src: _Source, sched: Schedule, names: list[str], local: dict[int, str],
                 saved: dict[int, str] | None = None, at: str = "") -> None:
        self.src, self.sched, self.names, self.local = src, sched, names, local
        self.memo: dict[int, str] = {}
        self.saved, self.at = saved or {}, at  # values an earlier stage kept in a row buffer, read at index `at`

    def __call__(self, n: Node) -> str:
        if id(n) not in self.memo:
            if id(n) in self.saved:
                self.memo[id(n)] = self.src.var()
                self.src.line(f"{self.memo[id(n)]} = {self.saved[id(n)]}[u({self.at})]")
            else:
                self.memo[id(n)] = self._emit(n)
        return self.memo[id(n)]

    def _emit(self, n: Node) -> str:
        src = self.src
        if n.op == "const":
            return src.const(n.arg, n.dtype)
        if n.op == "view":
            base = n.srcs[0]
            if id(base) in self.local:           # a reduction of this kernel, held in a register
                return self.local[id(base)]
            index = index_expr(n.arg, self.names)
            if base.op == "arange":
                return f"np.int64({index})"
            v = src.var()
            src.line(f"{v} = {slot_name(self.sched.slots[id(base)])}[u({index})]")
            return v
        a = [self(s) for s in n.srcs]
        if n.op in _INFIX:
            text = f"{a[0]} {_INFIX[n.op]} {a[1]}"
        elif n.op == "div":
            text = f"{a[0]} / {a[1]}" if n.dtype != "int64" else f"np.int64({a[0]} / {a[1]})"
        elif n.op == "exp" and n.dtype == "float32":  # vectorisable; outside (-87, 88) what libm gives
            e = src.var()
            src.line(f"{e} = exp32({a[0]})")
            text = (f"{e} if {a[0]} < {src.const(88.0, 'float32')} and {a[0]} > {src.const(-87.0, 'float32')} "
                    f"else ({src.const(0.0, 'float32')} if {a[0]} <= {src.const(-87.0, 'float32')} "
                    f"else {a[0]} * {src.const(float('inf'), 'float32')})")
        elif n.op == "tanh" and n.dtype == "float32":
            text = f"tanh32({a[0]})"
        elif n.op in _FUNC:
            text = f"{_FUNC[n.op]}({a[0]})"
        elif n.op == "neg":
            text = f"-{a[0]}"
        elif n.op == "recip":
            text = f"{src.const(1.0, n.dtype)} / {a[0]}"
        elif n.op == "pow":
            text = f"{a[0]} ** {a[1]}"
        elif n.op == "maximum":
            text = f"np.maximum({a[0]}, {a[1]})"
        elif n.op == "where":
            text = f"{a[1]} if {a[0]} else {a[2]}"
        elif n.op == "cast":
            text = f"{a[0]} != 0" if n.dtype == "bool" else f"{_CAST[n.dtype]}({a[0]})"
        else:
            raise NotImplementedError(f"codegen: no code for op {n.op!r}")
        v = src.var()
        src.line(f"{v} = {text}")
        return v


def _loops(src: _Source, axes: list[int], shape: tuple[int, ...], names: list[str], causal: bool = False) -> None:
    for d in axes:  # causal: the last axis j stops at the row i (`triangles.rows_stop_at_diagonal`)
        src.line(f"for {names[d]} in range({f'{names[d - 1]} + 1' if causal else shape[d]}):")
        src.depth += 1


def _unravel(src: _Source, outer: list[int], shape: tuple[int, ...], names: list[str], flat: str) -> None:
    """One index per outer axis from the flat outer index (row-major)."""
    step = 1
    for j, d in enumerate(reversed(outer)):
        div = f"{flat} // {step}" if step > 1 else flat
        src.line(f"{names[d]} = {div}" + (f" % {shape[d]}" if j < len(outer) - 1 else ""))
        step *= shape[d]


def _work(kern: Kernel) -> int:
    cost = 0
    for it in kern.items:
        nodes = tree(it.expr)
        per = 1 + sum(_COST.get(n.op, 0) for n in nodes if n.op in ELEMENTWISE)
        cost += per * int(np.prod(it.shape, dtype=np.int64))
    return cost


def _header(name: str, args: list[str], src: _Source) -> None:
    src.line(f"@kernel(fastmath={FASTMATH}, numpy_errors=True)")
    src.line(f"def {name}({', '.join(args)}):")
    src.depth += 1


def _open(name: str, args: list[str], src: _Source, var: str = "o") -> None:
    """Start a kernel: a serial function over rows first..last of its outer loop. `run` calls it on all rows,
    or, when the work pays, hands it to `parallel_for` (teenygrad.kernels.parallel_for), which shares chunks of
    the rows among threads. The bounds are arguments, not literals, on purpose: with every trip count of a loop
    nest a constant, LLVM unrolls the nest and compiles for seconds (measured: 17 s for a three-line copy)."""
    _header(name, [*args, "first", "last"], src)
    src.line(f"for {var} in range(first, last):")
    src.depth += 1


def _slots_of(kern: Kernel, sched: Schedule) -> list[str]:
    names = []
    for it in kern.items:
        for n in [*(v.srcs[0] for v in it.leaves), it.node]:
            if id(n) in sched.slots and not (n.op in ir.REDUCE and id(n) in kern.local):
                names.append(slot_name(sched.slots[id(n)]))
    return list(dict.fromkeys(names))


Call = tuple[list[str], int | None, int]  # a kernel's arrays, the rows run calls it on (None: no rows), threads' chunks


def _column(kern: Kernel) -> tuple[list[int], int, int, int] | None:
    """For a reduction over leading axes only (a bias's gradient: the sum over rows of (R, C)): its outer axes,
    their size C, its bands of rows (1: serial; more: shared among threads), and its blocks of columns (more than
    1 when C is wide enough to share among threads by columns, each block still reading whole lines of memory:
    then no partial sums). None for any other kernel."""
    shape, n, outer = kern.shape, kern.items[0].node, [d for d in range(len(kern.shape)) if d not in kern.inner]
    if len(kern.items) > 1 or n.op not in ir.REDUCE or not outer or outer[-1] != len(shape) - 1:
        return None
    n_outer, rows = (int(np.prod([shape[d] for d in axes], dtype=np.int64)) for axes in (outer, kern.inner))
    parallel = rows > 1 and n.dtype.startswith("float") and _work(kern) >= jit.PARALLEL_MIN_WORK
    wide = parallel and n_outer >= 256 * CHUNKS  # (12, 64, 128) -> (64, 128): 12 bands of one row were 4x slower
    return outer, n_outer, min(rows, CHUNKS) if parallel and not wide else 1, CHUNKS if wide else 1


def loop_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """A fused loop: outer loop over rows, then for each item an inner loop (a reduction or a store)."""
    if _column(kern):
        return column_kernel(name, kern, sched, src)
    shape, inner = kern.shape, list(kern.inner)
    names = [f"i{d}" for d in range(len(shape))]
    outer = [d for d in range(len(shape)) if d not in inner]
    n_outer = int(np.prod([shape[d] for d in outer], dtype=np.int64))
    parallel = n_outer > 1 and _work(kern) >= jit.PARALLEL_MIN_WORK
    args = _slots_of(kern, sched)
    # an exp (or tanh, log) a reduction's pass computes and a later stage needs again (softmax's e^(x - max), summed,
    # then divided by the sum) is kept in a row buffer by that pass, and read back, not computed twice
    at = index_expr(View.contiguous(tuple(shape[d] for d in inner)), [names[d] for d in inner])
    trees = [set(map(id, tree(it.expr))) for it in kern.items]
    keeps, saved = [[] for _ in kern.items], {}
    for k, it in enumerate(kern.items):
        if it.node.op in ir.REDUCE:
            keeps[k] = [m for m in tree(it.expr) if m.op in ("exp", "tanh", "log") and id(m) not in saved and
                        any(id(m) in ids for ids in trees[k + 1:])]
            saved.update({id(m): f"row{len(saved) + j}" for j, m in enumerate(keeps[k])})  # one buffer each
    causal = rows_stop_at_diagonal(kern.items, shape, kern.inner)
    _header(name, [*args, "first", "last"], src)
    for m in (m for keep in keeps for m in keep):
        src.line(f"{saved[id(m)]} = np.empty({int(np.prod([shape[d] for d in inner], dtype=np.int64))}, "
                 f"{_CAST[m.dtype]})")
    src.line("for o in range(first, last):")
    src.depth += 1
    _unravel(src, outer, shape, names, "o")
    local: dict[int, str] = {}
    for k, it in enumerate(kern.items):
        base = src.depth
        n = it.node
        mine = {id(m) for m in keeps[k]}  # what this stage keeps, it computes
        expr = _Expr(src, sched, names, local, {i: r for i, r in saved.items() if i not in mine}, at)
        if n.op in ir.REDUCE:
            acc = src.var("acc")
            src.line(f"{acc} = " + (_init(n) if n.op == "sum" or n.dtype != "float32" else
                                    src.const(float("-inf"), "float32")))
            _loops(src, inner, shape, names, causal)
            v = expr(it.expr)
            for m in keeps[k]:
                src.line(f"{saved[id(m)]}[u({at})] = {expr(m)}")
            if n.op == "sum":
                src.line(f"{acc} += {v}")
            else:
                src.line(f"{acc} = max({acc}, {v})")  # as the hand kernels: vectorises, but drops a NaN
            src.depth = base
            r = src.var("r")
            src.line(f"{r} = {acc} != 0" if n.dtype == "bool" else f"{r} = {_CAST[n.dtype]}({acc})")
            local[id(n)] = r
            if id(n) not in kern.local:
                src.line(f"{slot_name(sched.slots[id(n)])}[u({index_expr(View.contiguous(n.shape), names)})] = {r}")
        else:
            store = f"{slot_name(sched.slots[id(n)])}[u({index_expr(View.contiguous(shape), names)})]"
            _loops(src, inner, shape, names, causal)
            src.line(f"{store} = {expr(it.expr)}")
            src.depth = base
            if causal:  # above the diagonal the value is proven 0
                src.line(f"for {names[-1]} in range({names[-2]} + 1, {shape[-1]}): {store} = {src.const(0, n.dtype)}")
    return args, n_outer, min(n_outer, CHUNKS) if parallel else 0


def column_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """A reduction over leading axes (`_column`). Walking down each column would touch a new cache line per
    element; instead a row of accumulators takes the rows as they lie in memory, the inner loop along a whole
    row (on (768, 128) float32, 4-8x faster than chunks of columns each walking every row). Its "rows" are bands
    of rows: one, stored into the output; or several, each into its row of partials `p0`, for `combine_kernel`."""
    shape, n, (outer, n_outer, bands, blocks) = kern.shape, kern.items[0].node, _column(kern)
    inner, names = [d for d in range(len(shape)) if d not in outer], [f"i{d}" for d in range(len(shape))]
    rows = int(np.prod([shape[d] for d in inner], dtype=np.int64))
    acc_dtype = "np.float64" if n.op == "sum" and n.dtype.startswith("float") else _CAST.get(n.dtype, "np.bool_")
    args = [a for a in _slots_of(kern, sched) if bands == 1 or a != slot_name(sched.slots[id(n)])]
    args += ["p0"] if bands > 1 else []
    _open(name, args, src, "ch")
    init = _init(n) if n.op == "sum" or n.dtype != "float32" else src.const(float("-inf"), "float32")
    src.line(f"acc = np.full({n_outer}, {init}, {acc_dtype})")
    cols = f"ch * {n_outer} // {blocks}, (ch + 1) * {n_outer} // {blocks}" if blocks > 1 else f"{n_outer}"
    src.line(f"for r in range({rows if blocks > 1 else f'ch * {rows} // {bands}, (ch + 1) * {rows} // {bands}'}):")
    src.depth += 1
    _unravel(src, inner, shape, names, "r")
    src.line(f"for o in range({cols}):")
    src.depth += 1
    _unravel(src, outer, shape, names, "o")
    v = _Expr(src, sched, names, {})(kern.items[0].expr)
    src.line(f"acc[o] += {v}" if n.op == "sum" else f"acc[o] = max(acc[o], {v})")
    src.depth = 2
    src.line(f"for o in range({cols}):")
    if bands > 1:
        src.line(f"    p0[ch * {n_outer} + o] = acc[o]")
        return args, bands, bands
    cast = "acc[o] != 0" if n.dtype == "bool" else f"{_CAST[n.dtype]}(acc[o])"
    src.line(f"    {slot_name(sched.slots[id(n)])}[u(o)] = {cast}")
    return args, blocks, blocks if blocks > 1 else 0


def combine_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """A column reduction's second step: each column's partials, one per band of rows, added up (or maxed)."""
    n, (_, n_outer, bands, _) = kern.items[0].node, _column(kern)
    out, part = slot_name(sched.slots[id(n)]), f"p0[ch * {n_outer} + o]"
    _open(name, ["p0", out], src)
    src.line("acc = p0[o]")
    src.line(f"for ch in range(1, {bands}):")
    src.line(f"    acc += {part}" if n.op == "sum" else f"    acc = max(acc, {part})")
    src.line(f"{out}[u(o)] = {_CAST[n.dtype]}(acc)")
    return ["p0", out], n_outer, 0


def _init(n: Node) -> str:
    if n.op == "sum":
        return "0.0" if n.dtype.startswith("float") else "0"
    return {"bool": "False", "int64": "-9223372036854775807 - 1"}.get(n.dtype, "-np.inf")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def matmul_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """A plain Python function calling the tuned tiled matmul (chapter 3) on strided views of the flat arrays,
    `teenygrad.kernels.matmul_views` (compiled once for every shape, not once per generated kernel), on blocks
    of rows shared among threads. An epilogue, if fused, is a loop kernel of its own (`epilogue`)."""
    mm = kern.items[0].node
    a, b = mm.srcs
    *batch, m, k = a.shape
    n = b.shape[-1]
    nbatch = int(np.prod(batch, dtype=np.int64))
    parallel = nbatch * m * n * k // 4 >= jit.PARALLEL_MIN_WORK and nbatch * max(m, n) > MR
    # one block per thread, as matmul_parallel: of rows (each block packs all of B), or, for a single product
    # wider than tall, of columns (each packs only its columns of B)
    by_rows = nbatch > 1 or m >= n
    side, tile = (m, MR) if by_rows else (n, NR)
    blocks = max(1, min(_ceil(side, tile), _ceil(num_threads(), nbatch))) if parallel else 1
    step = _ceil(_ceil(side, blocks), tile) * tile if side else 1
    blocks = _ceil(side, step) if side else 0
    lead = (1,) * (2 - len(batch)) + tuple(batch)   # two batch axes, the missing ones of size 1
    pad = (0,) * (2 - len(batch))
    views = [f"{slot_name(sched.slots[id(v.srcs[0])])}, {v.arg.offset}, {pad + tuple(v.arg.strides)}" for v in (a, b)]
    out = pad + sched.writes.get(id(mm), View.contiguous(mm.shape).strides)
    args = list(dict.fromkeys(slot_name(sched.slots[id(n_)]) for n_ in (a.srcs[0], b.srcs[0], mm)))
    src.line(f"def {name}({', '.join(args)}):")
    src.line(f"    matmul_views{'_parallel' if parallel else ''}({views[0]}, {views[1]}, "
             f"{slot_name(sched.slots[id(mm)])}, {out}, {(*lead, m, k, n)}, {blocks}, {step}, {by_rows}, "
             f"{sched.causal.get(id(mm), 0) if blocks == 1 else 0})")
    return args, None, 0


def epilogue(kern: Kernel) -> Kernel:
    """A matmul's fused epilogue (bias + GELU) as a loop kernel over the product's shape, run right after it."""
    epi, shape = kern.items[1], kern.items[0].node.shape
    return Kernel(LOOP, [Item(epi.node, LOOP, epi.expr, shape, (len(shape) - 1,) if shape else (), epi.leaves)])


def cat_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """Join along an axis: each operand (an expression) is stored into its slice of the output. `run` calls it
    on parts first..last of `parts`: each operand's loop over its rows runs over those parts of its rows (bounds
    LLVM can't see, as in `_open`), all at once, or shared among threads when the copy is large."""
    node = kern.items[0].node
    parts = CHUNKS if node.size >= jit.PARALLEL_MIN_WORK else 1
    args = _slots_of(kern, sched)
    _header(name, [*args, "first", "last"], src)
    out, start = View.contiguous(node.shape), 0
    for part in node.srcs:
        names = [f"i{d}" for d in range(len(part.shape))]
        base = src.depth
        outer = list(range(len(part.shape) - 1))
        rows = int(np.prod(part.shape[:-1], dtype=np.int64))
        src.line(f"for o in range(first * {rows} // {parts}, last * {rows} // {parts}):")
        src.depth += 1
        _unravel(src, outer, part.shape, names, "o")
        _loops(src, [len(part.shape) - 1], part.shape, names)
        v = _Expr(src, sched, names, {})(part)
        target = View(part.shape, out.strides, start * out.strides[node.arg])
        src.line(f"{slot_name(sched.slots[id(node)])}[u({index_expr(target, names)})] = {v}")
        src.depth = base
        start += part.shape[node.arg]
    if not node.srcs or all(p.size == 0 for p in node.srcs):
        src.line("pass")
    return args, parts, parts if parts > 1 else 0


def _canonical(lines: list[str], args: list[str]) -> str:
    """A kernel's source with its arrays renamed a0, a1, ... in argument order: kernels that differ only in
    which buffers they touch (the same layer, repeated) then have the same text, and are compiled once."""
    rename = {name: f"a{i}" for i, name in enumerate(args)}
    return re.sub(r"\b(?:in|out|s|p)\d+\b", lambda m: rename[m.group(0)], "\n".join(lines))


def _call(name: str, args: list[str], rows: int | None, chunks: int) -> str:
    """How `run` calls a kernel: a matmul's driver with its arrays; a loop kernel on all its rows, or on
    `chunks` slices of them shared among threads (`parallel_for` takes the kernel's address, ADDRESS[name])."""
    if rows is None:
        return f"{name}({', '.join(args)})"
    if chunks:
        return f"parallel_for(ADDRESS[{name!r}], ({''.join(a + ', ' for a in args)}), {rows}, {chunks})"
    return f"{name}({''.join(a + ', ' for a in args)}0, {rows})"


def generate(sched: Schedule) -> str:
    """The whole module: imports, constants, one function per distinct kernel, and `run`, which calls them
    in order. The program fills ADDRESS once the kernels are compiled (`backend.compile_kernels`)."""
    consts: dict[str, str] = {}
    functions: dict[str, str] = {}   # canonical source (with the name KNAME) -> function name
    calls: list[tuple[str, list[str], int, int | None, int]] = []  # (function, arrays, kernel, rows, chunks)
    parts = [(i, k) for i, kern in enumerate(sched.kernels)  # a matmul with an epilogue: two functions
             for k in ([kern, epilogue(kern)] if kern.kind == MATMUL and len(kern.items) == 2 else [kern])]
    partials = 1  # float64s of p0, the partial sums of the column reductions split into bands
    for i, kern in parts:
        makers = [{LOOP: loop_kernel, MATMUL: matmul_kernel, CAT: cat_kernel}[kern.kind]]
        if kern.kind == LOOP and (column := _column(kern)) and column[2] > 1:  # banded: partials, then combined
            makers, partials = [*makers, combine_kernel], max(partials, column[1] * column[2])
        for make in makers:
            body = _Source(consts)
            args, rows, chunks = make("KNAME", kern, sched, body)
            text = _canonical(body.lines, args)
            calls.append((functions.setdefault(text, f"k{len(functions)}"), args, i, rows, chunks))
    lines = [_call(name, args, rows, chunks) for name, args, _, rows, chunks in calls]
    for source, target in sched.copies:  # assigns that could not be written in place
        lines.append(f"{slot_name(target)}[:] = {slot_name(source)}[:{source.size}]")
    params = [f"in{i}" for i in range(len(sched.inputs))] + [f"out{i}" for i in range(sched.n_outputs)] + \
        [f"s{i}" for i in range(len(sched.scratch))] + ["p0"]
    head = ["import numpy as np", "",
            "from teenygrad.kernels.elementwise import tanh32, u",
            "from teenygrad.kernels.fused import exp32",
            "from teenygrad.kernels.jit import kernel",
            "from teenygrad.kernels.matmul_views import matmul_views, matmul_views_parallel",
            "from teenygrad.kernels.parallel_for import parallel_for", ""]
    head += [f"{name} = {text}" for text, name in sorted(consts.items(), key=lambda kv: kv[1])] + ["", ""]
    body = [text.replace("KNAME", name) + "\n\n" for text, name in functions.items()]
    steps = ["# what run calls, in order: (function, its arrays, its kernel in the schedule, rows, threads' chunks)",
             "STEPS = ["]
    steps += [f"    ({call[0]}, {tuple(call[1])}, {', '.join(map(str, call[2:]))})," for call in calls]
    steps += ["]", "ADDRESS: dict = {}  # kernel name -> its machine code's address, for parallel_for",
              f"PARTIALS = {partials}  # the size of p0 (float64), the partial sums of column reductions", "", ""]
    run = [f"def run({', '.join(params)}):"] + [f"    {line}" for line in lines or ["pass"]]
    return "\n".join(head + body + steps + run) + "\n"
