"""The compiler's back end in one call (chapter 10): graph -> passes -> schedule -> source -> numba -> Program.

    program = compile_graph(outputs, effects)     # ir.Nodes the front end captured
    results = program([array for each of program.inputs])

The pipeline: `fold_constants`, `eliminate_dead`, `eliminate_common`, `merge_cats`, `fold_views`,
`eliminate_common` again (view folding makes new duplicates), then `schedule` (fusion and buffer planning) and
`generate` (source).
The source is written to a file under the cache directory, named by its hash, and imported; numba compiles
its functions on the first call and caches the machine code beside it (`cache=True`), so a second process
that builds the same graph (same ops, shapes, dtypes, strides; the buffers' contents don't matter) starts
warm. Within a process, programs are also kept in memory by the same key.

Debugging: TEENYGRAD_DEBUG=1 prints the schedule (kernels, their fused ops, bytes moved, FLOPs), =2 also the
IR after each pass, =3 also the generated source. The same from Python: `program.describe()`,
`program.passes` (the IR after each pass), `program.source`, `program.path`.
TEENYGRAD_JIT=0 runs the same generated source as plain Python (slow, but print() and pdb work in it).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numba
import numpy as np

from teenygrad.compiler import ir
from teenygrad.compiler.codegen import generate, slot_name
from teenygrad.compiler.passes import (
    Graph,
    eliminate_common,
    eliminate_dead,
    fold_constants,
    fold_views,
    merge_cats,
    transpose_products,
)
from teenygrad.compiler.schedule import Schedule, kernel_cost, schedule, tree
from teenygrad.kernels.jit import JIT_ENABLED
from teenygrad.kernels.parallel_for import address_of, parallel_for

PASSES: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("fold_constants", fold_constants),
    ("eliminate_dead", eliminate_dead),
    ("eliminate_common", eliminate_common),
    ("merge_cats", merge_cats),
    ("transpose_products", transpose_products),
    ("fold_views", fold_views),
    ("eliminate_common", eliminate_common),
]


def debug_level() -> int:
    try:
        return int(os.environ.get("TEENYGRAD_DEBUG", "0") or 0)
    except ValueError:
        return 0


def cache_dir() -> Path:
    """Where generated sources (and numba's compiled code, beside them) live: $TEENYGRAD_CACHE_DIR, else
    $XDG_CACHE_HOME/teenygrad/compiled, else ~/.cache/teenygrad/compiled."""
    if os.environ.get("TEENYGRAD_CACHE_DIR"):
        return Path(os.environ["TEENYGRAD_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "teenygrad" / "compiled"


_MODULES: dict[str, object] = {}


def _load(source: str) -> tuple[object, Path]:
    """Import the generated source from its file (written once: an unchanged file keeps numba's cache valid)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"graph_{digest}.py"
    if not path.exists() or path.read_text() != source:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    if digest not in _MODULES:
        name = f"teenygrad_compiled_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[digest] = module
    return _MODULES[digest], path


_WORKER = """
import importlib.util, json, sys
import numba, numpy as np
from teenygrad.compiler.backend import compile_jobs
name, path, jobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location(name, path)
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
compile_jobs(module, jobs)
"""


def _types(dtypes: list[str]) -> tuple:
    return tuple(numba.typeof(np.empty(1, d)) for d in dtypes)


def compile_jobs(module: object, jobs: list[tuple[str, list[str]]]) -> None:
    """Compile each (function, its arrays' dtypes) of a generated module: a loop kernel for its arrays and its
    rows first..last, and `parallel_for` for a tuple of arrays it passes."""
    for name, dtypes in jobs:
        if name == "parallel_for":
            parallel_for.compile((numba.int64, numba.types.Tuple(_types(dtypes)), numba.int64, numba.int64))
        else:
            getattr(module, name).compile(_types(dtypes) + (numba.int64, numba.int64))


def compile_kernels(module: object, path: Path, sched: Schedule) -> None:
    """Compile the generated kernels now, for the arrays the program passes them (flat, C-contiguous), and fill
    the module's ADDRESS table for `parallel_for`. numba compiles one function at a time in a process; with a
    cold cache and more than one core, other processes compile a share of the kernels at the same time, and
    this one then loads their machine code from numba's disk cache (a worker that fails only leaves its share
    to this process)."""
    dtypes = {**{f"in{i}": str(b.dtype) for i, b in enumerate(sched.inputs)},
              **{f"out{i}": str(n.dtype) for i, n in enumerate(sched.outputs)},
              **{f"s{i}": str(d) for i, (d, _) in enumerate(sched.scratch)}, "p0": "float64"}
    kernels = {fn.__name__: [dtypes[n] for n in names] for fn, names, _, rows, _ in module.STEPS if rows is not None}
    if JIT_ENABLED:
        drivers = {("parallel_for", tuple(dtypes[n] for n in names))
                   for fn, names, _, rows, chunks in module.STEPS if chunks}
        jobs = [*kernels.items(), *((name, list(types)) for name, types in sorted(drivers))]
        digest = path.stem.split("_")[-1]
        # numba's cache folder for the module: __pycache__ beside it, or under NUMBA_CACHE_DIR when that is set
        cache = Path(getattr(module, next(iter(kernels)))._cache._cache_path) if kernels else None
        cold = cache is not None and not any(cache.glob(f"*{digest}*.nbi"))
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        workers = min(cores, 4) if cold and len(jobs) >= 8 else 1
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # this process's teenygrad
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, module.__name__, str(path),
                                   json.dumps(jobs[w::workers])], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for w in range(1, workers)]
        try:
            compile_jobs(module, jobs[::workers])
            for p in procs:
                p.wait()
        finally:
            for p in procs:
                p.kill()
        compile_jobs(module, [job for w in range(1, workers) for job in jobs[w::workers]])  # from the cache now
    for name, types in kernels.items():
        fn = getattr(module, name)
        module.ADDRESS[name] = address_of(fn, _types(types) + (numba.int64, numba.int64)) if JIT_ENABLED else fn


class Program:
    """A compiled graph. `inputs`: the Buffers it reads, in the order `__call__` wants their arrays.
    Calling it with one contiguous array per input returns the outputs as fresh arrays; assigns write into
    the input arrays in place (after every read of the old values)."""

    def __init__(self, sched: Schedule, source: str, passes: list[tuple[str, str]]) -> None:
        self.schedule, self.source, self.passes = sched, source, passes
        self.inputs: list[ir.Buffer] = sched.inputs
        self.outputs = sched.outputs
        module, self.path = _load(source)
        self._run = module.run
        compile_kernels(module, self.path, sched)
        self._scratch = [np.empty(size, dtype) for dtype, size in sched.scratch]
        self._scratch.append(np.empty(module.PARTIALS, np.float64))  # p0: partial sums of column reductions
        # what each call checks and allocates, worked out once (a step calls with hundreds of arrays)
        self._in_spec = [(tuple(b.shape), np.dtype(b.dtype)) for b in self.inputs]
        self._out_spec = [(n.size, np.dtype(n.dtype), tuple(n.shape)) for n in self.outputs]
        self._out_index = []  # for each output: which earlier output it repeats (then it is copied), or None
        seen: dict[int, int] = {}
        for i, n in enumerate(self.outputs):
            self._out_index.append(seen.get(id(n)))
            seen.setdefault(id(n), i)

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(arrays) != len(self.inputs):
            raise ValueError(f"Program: expected {len(self.inputs)} arrays (one per program.inputs: "
                             f"{[b.name for b in self.inputs]}), got {len(arrays)}")
        flat = []
        for buf, (shape, dtype), a in zip(self.inputs, self._in_spec, arrays):
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
                got = f"{a.shape} {a.dtype}" if isinstance(a, np.ndarray) else type(a).__name__
                raise ValueError(f"Program: input {buf.name!r} must be a C-contiguous {buf.dtype} array of shape "
                                 f"{shape}, got {got} (use np.ascontiguousarray(x, dtype))")
            flat.append(a.reshape(-1))
        return [v.reshape(shape) for v, (_, _, shape) in zip(self.run_flat(flat), self._out_spec)]

    def run_flat(self, flat: list[np.ndarray]) -> list[np.ndarray]:
        """`__call__` for a caller that already holds one flat C-contiguous array of the right size and dtype per
        input (a compiled function's call, whose guards and getters make sure of it): nothing is checked, and
        the outputs come back flat."""
        outs = [np.empty(size, dtype) for size, dtype, _ in self._out_spec]
        if JIT_ENABLED:
            self._run(*flat, *outs, *self._scratch)
        else:
            with np.errstate(all="ignore"):
                self._run(*flat, *outs, *self._scratch)
        return [outs[j].copy() if j is not None else outs[i] for i, j in enumerate(self._out_index)]

    def profile(self, arrays: Sequence[np.ndarray], repeats: int = 5) -> list[float]:
        """Seconds each kernel takes (best of `repeats`), run one by one on these inputs (which assigns may
        overwrite). For finding the slow kernel of `describe()`'s list."""
        self(arrays)  # compile everything first
        env = {f"in{i}": np.ascontiguousarray(a).reshape(-1) for i, a in enumerate(arrays)}
        env.update({f"out{i}": np.empty(n.size, n.dtype) for i, n in enumerate(self.outputs)})
        env.update({f"s{i}": a for i, a in enumerate(self._scratch[:-1])}, p0=self._scratch[-1])
        times = [0.0] * len(self.schedule.kernels)
        module = sys.modules[self._run.__module__]
        for fn, names, k, rows, chunks in module.STEPS:  # a kernel may be two functions
            args = tuple(env[n] for n in names)
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                if rows is None:
                    fn(*args)
                elif chunks:
                    parallel_for(module.ADDRESS[fn.__name__], args, rows, chunks)
                else:
                    fn(*args, 0, rows)
                best = min(best, time.perf_counter() - t0)
            times[k] += best
        return times

    def describe(self) -> str:
        """The schedule: one line per kernel (its fused ops, bytes moved, FLOPs), then totals."""
        lines, total_bytes, total_flops = [], 0, 0
        for k, kern in enumerate(self.schedule.kernels):
            nbytes, flops = kernel_cost(kern, self.schedule)
            total_bytes, total_flops = total_bytes + nbytes, total_flops + flops
            ops = []
            for it in kern.items:
                fused = sorted({n.op for n in tree(it.expr)} - {"view", "const"}) or \
                    (["skips zeros"] if id(it.node) in self.schedule.causal else [])
                where = slot_name(self.schedule.slots[id(it.node)]) if id(it.node) in self.schedule.slots \
                    else "register"
                ops.append(f"{it.node.op}{it.node.shape}" + (f"[{' '.join(fused)}]" if fused else "") + f"->{where}")
            lines.append(f"k{k:<3} {kern.kind:<6} {nbytes / 1e6:9.3f} MB {flops / 1e6:9.3f} MFLOP  " + ", ".join(ops))
        for source, target in self.schedule.copies:
            lines.append(f"copy   {slot_name(source)} -> {slot_name(target)} (an assign not done in place)")
        lines.append(f"{len(self.schedule.kernels)} kernels, {total_bytes / 1e6:.3f} MB moved, "
                     f"{total_flops / 1e6:.3f} MFLOP, scratch {sum(s for _, s in self.schedule.scratch)} elements")
        return "\n".join(lines)


def rewrite(outputs: list[ir.Node], effects: Sequence[ir.Node] = ()) -> Graph:
    """The graph after the passes that rewrite it in IR ops (before view folding, whose views only the code
    generator reads): what compile(..., backend="passes") runs op by op."""
    graph = Graph(list(outputs), list(effects))
    for _, fn in PASSES:
        if fn is fold_views:
            break
        graph = fn(graph)
    return graph


def run_passes(outputs: list[ir.Node], effects: Sequence[ir.Node] = ()) -> tuple[Graph, list[tuple[str, str]]]:
    """The graph after every pass, and the printed IR after each (for TEENYGRAD_DEBUG=2 and `program.passes`)."""
    graph = Graph(list(outputs), list(effects))
    shown = [("captured", graph.format())]
    for name, fn in PASSES:
        graph = fn(graph)
        shown.append((name, graph.format()))
    return graph, shown


def compile_graph(outputs: list[ir.Node], effects: Sequence[ir.Node] = ()) -> Program:
    """Compile the graph computing `outputs` and performing `effects` (ir.assign nodes) into a Program."""
    for e in effects:
        if not isinstance(e, ir.Node) or e.op != "assign":
            raise ValueError(f"compile_graph: effects must be ir.assign nodes, got {e!r}")
    for n in outputs:
        if not isinstance(n, ir.Node) or n.op == "assign":
            raise ValueError(f"compile_graph: outputs must be ir.Nodes that are not assigns, got {n!r}")
    graph, shown = run_passes(list(outputs), effects)
    sched = schedule(graph)
    source = generate(sched)
    program = Program(sched, source, shown)
    level = debug_level()
    if level >= 2:
        for name, text in shown:
            print(f"---- IR after {name} ----\n{text}")
    if level >= 1:
        print(f"---- schedule ({program.path}) ----\n{program.describe()}")
    if level >= 3:
        print(f"---- generated source ----\n{source}")
    return program
