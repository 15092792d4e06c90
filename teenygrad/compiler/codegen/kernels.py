"""The kernels that are not one loop over rows (chapter 10): matmuls, cats, and sums down columns.

A matmul is a call of chapter 3's tiled kernel on views of the flat arrays (`teenygrad.kernels.matmul_views`,
compiled once for all shapes), its epilogue a loop kernel of its own. A cat stores each operand into its slice. A
sum down the columns of (R, C) reads the rows as they lie in memory, into a row of accumulators per band of rows,
added up by a second kernel (`combine_kernel`). Each writer returns a `Call`: how `run` calls it (`program.py`)."""
from __future__ import annotations

import numpy as np

from teenygrad.compiler import ir
from teenygrad.compiler.codegen.expr import Expr, index_expr, init_value
from teenygrad.compiler.codegen.loop import chunk_count, column_stages, work
from teenygrad.compiler.codegen.source import CAST, Call, Source, header, loops, open_rows, slot_name, slots_of, unravel
from teenygrad.compiler.passes import View
from teenygrad.compiler.schedule import LOOP, Item, Kernel, Schedule
from teenygrad.edition import exercise
from teenygrad.kernels import jit
from teenygrad.kernels.jit import CHUNKS, num_threads
from teenygrad.kernels.matmul import MR, NR


def column_plan(kern: Kernel) -> tuple[list[int], int, int, int] | None:
    """For a reduction over leading axes only (a bias's gradient: the sum over rows of (R, C)): its outer axes,
    their size C, its bands of rows (1: serial; more: shared among threads), and its blocks of columns (more than
    1 when C is wide enough to share among threads by columns, each block still reading whole lines of memory:
    then no partial sums). None for any other kernel."""
    shape, n, outer = kern.shape, kern.items[0].node, [d for d in range(len(kern.shape)) if d not in kern.inner]
    if len(kern.items) > 1 or n.op not in ir.REDUCE or not outer or outer[-1] != len(shape) - 1:
        return None
    n_outer, rows = (int(np.prod([shape[d] for d in axes], dtype=np.int64)) for axes in (outer, kern.inner))
    parallel = rows > 1 and n.dtype.startswith("float") and work(kern) >= jit.PARALLEL_MIN_WORK
    wide = parallel and n_outer >= 256 * CHUNKS  # (12, 64, 128) -> (64, 128): 12 bands of one row were 4x slower
    return outer, n_outer, min(rows, CHUNKS) if parallel and not wide else 1, CHUNKS if wide else 1


@exercise("10-compiler", "columns")
def column_kernel(name: str, kern: Kernel, sched: Schedule, src: Source) -> Call:
    """A reduction over leading axes (`column_plan`: outer axes, their size n_outer, bands, blocks), written into `src`
    as one function `name` opened by `open_rows(name, args, src, "ch")`. Walking down each column would touch a new
    cache line per element; instead a row of accumulators (float64 for a float sum, else the node's dtype; the
    reduction's initial value) takes the rows as they lie in memory, the loop over rows outside and over the outer
    index inside (on (768, 128) float32, 4-8x faster than chunks of columns each walking every row). Chunk ch is all
    of it (one chunk), band ch of the rows (bands > 1: its results go to its row of partials, p0[ch * n_outer + o],
    for `combine_kernel`; the output is not an argument, p0 is the last), or block ch of the outer indices (blocks >
    1). The output gets each result at its outer index, in its dtype. Returns (the arrays, the chunks `run` calls
    it on: 1, bands or blocks, and 0 if serial, else the same number: shared among threads)."""
    shape, n, (outer, n_outer, bands, blocks) = kern.shape, kern.items[0].node, column_plan(kern)
    inner, names = [d for d in range(len(shape)) if d not in outer], [f"i{d}" for d in range(len(shape))]
    rows = int(np.prod([shape[d] for d in inner], dtype=np.int64))
    acc_dtype = "np.float64" if n.op == "sum" and n.dtype.startswith("float") else CAST.get(n.dtype, "np.bool_")
    args = [a for a in slots_of(kern, sched) if bands == 1 or a != slot_name(sched.slots[id(n)])]
    args += ["p0"] if bands > 1 else []
    open_rows(name, args, src, "ch")
    init = init_value(n) if n.op == "sum" or n.dtype != "float32" else src.const(float("-inf"), "float32")
    src.line(f"acc = np.full({n_outer}, {init}, {acc_dtype})")
    cols = f"ch * {n_outer} // {blocks}, (ch + 1) * {n_outer} // {blocks}" if blocks > 1 else f"{n_outer}"
    src.line(f"for r in range({rows if blocks > 1 else f'ch * {rows} // {bands}, (ch + 1) * {rows} // {bands}'}):")
    src.depth += 1
    unravel(src, inner, shape, names, "r")
    src.line(f"for o in range({cols}):")
    src.depth += 1
    unravel(src, outer, shape, names, "o")
    v = Expr(src, sched, names, {})(kern.items[0].expr)
    src.line(f"acc[o] += {v}" if n.op == "sum" else f"acc[o] = max(acc[o], {v})")
    src.depth = 2
    src.line(f"for o in range({cols}):")
    if bands > 1:
        src.line(f"    p0[ch * {n_outer} + o] = acc[o]")
        return args, bands, bands
    cast = "acc[o] != 0" if n.dtype == "bool" else f"{CAST[n.dtype]}(acc[o])"
    src.line(f"    {slot_name(sched.slots[id(n)])}[u(o)] = {cast}")
    return args, blocks, blocks if blocks > 1 else 0


@exercise("10-compiler", "columns")
def combine_kernel(name: str, kern: Kernel, sched: Schedule, src: Source, stage: int = -1) -> Call:
    """A column reduction's second step: each column's partials, one per band of rows, added up (or maxed) and stored
    in the node's dtype, by a function over the outer indices (`open_rows`, arrays p0 and the output). The reduction
    is the kernel's own (`column_kernel`; bands and n_outer from `column_plan`), or its column sum number `stage`
    (`column_stages`: chunk_count(kern) bands of kern.shape[-1] columns, after the partials of the stages before it).
    Returns (["p0", the output], n_outer, 0)."""
    if stage < 0:
        n, (_, n_outer, bands, _) = kern.items[0].node, column_plan(kern)
    else:
        n, n_outer, bands = column_stages(kern)[stage].node, kern.shape[-1], chunk_count(kern)
    base = max(stage, 0) * bands * n_outer
    out, part = slot_name(sched.slots[id(n)]), f"p0[{base} + ch * {n_outer} + o]"
    open_rows(name, ["p0", out], src)
    src.line(f"acc = p0[{base} + o]")
    src.line(f"for ch in range(1, {bands}):")
    src.line(f"    acc += {part}" if n.op == "sum" else f"    acc = max(acc, {part})")
    src.line(f"{out}[u(o)] = {CAST[n.dtype]}(acc)")
    return ["p0", out], n_outer, 0


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def matmul_kernel(name: str, kern: Kernel, sched: Schedule, src: Source) -> Call:
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
    blocks = max(1, min(ceil_div(side, tile), ceil_div(num_threads(), nbatch))) if parallel else 1
    step = ceil_div(ceil_div(side, blocks), tile) * tile if side else 1
    blocks = ceil_div(side, step) if side else 0
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
    return Kernel(LOOP, [Item(epi.node, LOOP, epi.expr, shape, (len(shape) - 1,) if shape else (), epi.leaves),
                         *kern.items[2:]])  # and sums down its columns (a bias's gradient: `schedule._shared_loop`)


def cat_kernel(name: str, kern: Kernel, sched: Schedule, src: Source) -> Call:
    """Join along an axis: each operand (an expression) is stored into its slice of the output. `run` calls it
    on parts first..last of `parts`: each operand's loop over its rows runs over those parts of its rows (bounds
    LLVM can't see, as in `open_rows`), all at once, or shared among threads when the copy is large."""
    node = kern.items[0].node
    parts = CHUNKS if node.size >= jit.PARALLEL_MIN_WORK else 1
    args = slots_of(kern, sched)
    header(name, [*args, "first", "last"], src)
    out, start = View.contiguous(node.shape), 0
    for part in node.srcs:
        names = [f"i{d}" for d in range(len(part.shape))]
        base = src.depth
        outer = list(range(len(part.shape) - 1))
        rows = int(np.prod(part.shape[:-1], dtype=np.int64))
        src.line(f"for o in range(first * {rows} // {parts}, last * {rows} // {parts}):")
        src.depth += 1
        unravel(src, outer, part.shape, names, "o")
        loops(src, [len(part.shape) - 1], part.shape, names)
        v = Expr(src, sched, names, {})(part)
        target = View(part.shape, out.strides, start * out.strides[node.arg])
        src.line(f"{slot_name(sched.slots[id(node)])}[u({index_expr(target, names)})] = {v}")
        src.depth = base
        start += part.shape[node.arg]
    if not node.srcs or all(p.size == 0 for p in node.srcs):
        src.line("pass")
    return args, parts, parts if parts > 1 else 0
