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
The other kernels (matmuls, cats, sums down columns) and the module that calls them all, in order, are
generated in `teenygrad.codegen_program`.

Floats keep the graph's dtype. Sums accumulate in float64 and are rounded once, as the hand kernels do. float32
exp and tanh use the hand kernels' vectorisable `exp32` and `tanh32` (relative error ~2e-7). Max reductions use
`max(acc, v)`, as the hand kernels do: it vectorises, but a NaN in the row is dropped (numpy's max gives NaN).
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad import ir
from teenygrad.edition import exercise
from teenygrad.ir import Node
from teenygrad.kernels import jit
from teenygrad.kernels.jit import CHUNKS
from teenygrad.passes import ELEMENTWISE, View
from teenygrad.schedule import Item, Kernel, Schedule, Slot, is_column, tree
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


def loop_kernel(name: str, kern: Kernel, sched: Schedule, src: _Source) -> Call:
    """A fused loop: outer loop over rows, then for each item an inner loop (a reduction or a store)."""
    shape, inner = kern.shape, list(kern.inner)
    names = [f"i{d}" for d in range(len(shape))]
    outer = [d for d in range(len(shape)) if d not in inner]
    n_outer, chunks, cols = _rows(kern), _chunks(kern), column_stages(kern)
    stage = {id(it): c for c, it in enumerate(cols)}  # id(item) -> its row of accumulators
    args = _slots_of(kern, sched) + ["p0"] * bool(cols and chunks)
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
    _header(name, [*args, "first", "last"], src)
    for m in (m for keep in keeps for m in keep):
        src.line(f"{saved[id(m)]} = np.empty({int(np.prod([shape[d] for d in inner], dtype=np.int64))}, "
                 f"{_CAST[m.dtype]})")
    for c in range(len(cols)):  # column sums: a row of accumulators, each row of the loop added in
        src.line(f"col{c} = np.zeros({shape[-1]}, np.float64)")
    src.line("for o in range(first, last):")
    src.depth += 1
    _unravel(src, outer, shape, names, "o")
    local: dict[int, str] = {}
    for k, it in enumerate(kern.items):
        base = src.depth
        n = it.node
        mine = {id(m) for m in keeps[k]}  # what this stage keeps, it computes
        expr = _Expr(src, sched, names, local, {i: r for i, r in saved.items() if i not in mine}, at)
        if id(it) in stage:
            _loops(src, inner, shape, names)
            src.line(f"col{stage[id(it)]}[{names[-1]}] += {expr(it.expr)}")
            src.depth = base
        elif n.op in ir.REDUCE:
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
    src.depth = 1
    if cols and chunks:  # each chunk of rows leaves its partial sums in p0, `combine_kernel` adds them up
        src.line(f"band = (first * {chunks} + {n_outer - 1}) // {n_outer}  # the chunk: first = band * rows // chunks")
    for c, it in enumerate(cols):
        if chunks:
            src.line(f"for j in range({shape[-1]}): p0[({c * chunks} + band) * {shape[-1]} + j] = col{c}[j]")
        else:
            src.line(f"for j in range({shape[-1]}): {slot_name(sched.slots[id(it.node)])}[u(j)] = "
                     f"{_CAST[it.node.dtype]}(col{c}[j])")
    return args, n_outer, chunks


def column_stages(kern: Kernel) -> list[Item]:
    """The column sums (`schedule.is_column`) that share a loop kernel's pass over rows (`schedule._shared_loop`)."""
    return [it for it in kern.items[1:] if is_column(it) and it.inner != kern.inner]


def _rows(kern: Kernel) -> int:
    return int(np.prod([n for d, n in enumerate(kern.shape) if d not in kern.inner], dtype=np.int64))


def _chunks(kern: Kernel) -> int:
    """How many chunks of a loop kernel's rows `parallel_for` shares among threads (0: run serially)."""
    return min(_rows(kern), CHUNKS) if _rows(kern) > 1 and _work(kern) >= jit.PARALLEL_MIN_WORK else 0


def _init(n: Node) -> str:
    if n.op == "sum":
        return "0.0" if n.dtype.startswith("float") else "0"
    return {"bool": "False", "int64": "-9223372036854775807 - 1"}.get(n.dtype, "-np.inf")
