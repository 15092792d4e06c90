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
The other kernels (matmuls, cats, sums down columns) are in `kernels.py`, and the module that calls them all, in
order, in `program.py`.

Floats keep the graph's dtype. Sums accumulate in float64 and are rounded once, as the hand kernels do. float32
exp and tanh use the hand kernels' vectorisable `exp32` and `tanh32` (relative error ~2e-7), exp guarded to 0 at or
below -87 and inf at or above 88 (numpy's float32 exp is tiny there, and finite up to 88.72). Max reductions use
`max(acc, v)`, as the hand kernels do: it vectorises, but a NaN in the row is dropped (numpy's max gives NaN).
"""

from teenygrad.compiler.codegen.expr import index_expr
from teenygrad.compiler.codegen.program import generate
from teenygrad.compiler.codegen.source import slot_name

__all__ = ["generate", "index_expr", "slot_name"]
