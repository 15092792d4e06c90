"""The compiler (chapter 10): `tg.compile(step)` runs a whole training step as a few generated numba kernels.

    step = tg.compile(train_step)     # the first call traces; later calls with the same signature run the program
    loss = step(x, y)

The pipeline, each stage a module (or a folder where a stage has several ideas) of this package:

    capture/     a Tensor function, run once on lazy tensors        ->  a graph of IR nodes    (compiled.py, capture/)
                 (the op layer hands every op to capture/ while `teenygrad.tracing.active` is True)
    ir.py        the graph: a few primitive ops (elementwise, reduce, matmul, movement, cat, assign),
                 and `evaluate`, the numpy reference every later stage is tested against
    passes.py    rewrites of the graph: constant folding, dead code, common subexpressions, cats,
                 transposed products, view folding (movement ops become index arithmetic)
    schedule/    which nodes are stored, which kernels compute them (the fusion rules), the order
                 they run in, and the memory each value lives in
    codegen/     each kernel as the Python source of a numba function, and the module that runs them
    backend.py   the module compiled (cached on disk, kernels compiled in parallel) into a `Program`
    compiled.py  `compile` and `Compiled`: the call's guards, tracing again when a signature changes

What users call is here: `compile`, `Compiled`, `CaptureError` and the back-end choice (`BACKENDS`: "numba",
or "reference" and "passes", which run the graph op by op in numpy, to test the stages apart). The rest of
teenygrad reaches the compiler only through this file; the one thing outside it is `teenygrad.tracing`, the flag
the op layer reads on every op: it imports nothing, so the op layer stays free of import loops and of the
compiler's weight. `TEENYGRAD_DEBUG=1/2/3` prints the schedule, the IR after each pass, the generated source.
"""
from teenygrad.compiler.capture.lazy import CaptureError
from teenygrad.compiler.compiled import BACKENDS, Compiled, ReferenceProgram, compile, compile_graph

__all__ = ["compile", "Compiled", "CaptureError", "BACKENDS", "ReferenceProgram", "compile_graph"]
