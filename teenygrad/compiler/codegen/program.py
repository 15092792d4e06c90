"""The module (chapter 10): one function per distinct kernel, and `run`, which calls them in order.

A plain Python function `run` calls the kernels in order. (It could be compiled too, making a step one call into
machine code, but numba then links every kernel into it again: measured, a third more compile time for a few
microseconds a kernel saved.) Kernels that differ only in the arrays they touch (a layer repeated) are generated
once."""
from __future__ import annotations

import functools
import re

from teenygrad.compiler.codegen.kernels import (
    cat_kernel,
    column_kernel,
    column_plan,
    combine_kernel,
    epilogue,
    matmul_kernel,
)
from teenygrad.compiler.codegen.loop import chunk_count, column_stages, loop_kernel
from teenygrad.compiler.codegen.source import Source, slot_name
from teenygrad.compiler.schedule import CAT, LOOP, MATMUL, Schedule


def canonical(lines: list[str], args: list[str]) -> str:
    """A kernel's source with its arrays renamed a0, a1, ... in argument order: kernels that differ only in
    which buffers they touch (the same layer, repeated) then have the same text, and are compiled once."""
    rename = {name: f"a{i}" for i, name in enumerate(args)}
    return re.sub(r"\b(?:in|out|s|p)\d+\b", lambda m: rename[m.group(0)], "\n".join(lines))


def call_line(name: str, args: list[str], rows: int | None, chunks: int) -> str:
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
             for k in ([kern, epilogue(kern)] if kern.kind == MATMUL and len(kern.items) >= 2 else [kern])]
    partials = 1  # float64s of p0, the partial sums of the column reductions split into bands
    for i, kern in parts:
        makers = [{LOOP: column_kernel if column_plan(kern) else loop_kernel, MATMUL: matmul_kernel,
                   CAT: cat_kernel}[kern.kind]]
        if kern.kind == LOOP and (column := column_plan(kern)) and column[2] > 1:  # banded: partials, then combined
            makers, partials = [*makers, combine_kernel], max(partials, column[1] * column[2])
        elif kern.kind == LOOP and (cols := column_stages(kern)) and chunk_count(kern):  # column sums, combined
            makers += [functools.partial(combine_kernel, stage=c) for c in range(len(cols))]
            partials = max(partials, len(cols) * chunk_count(kern) * kern.shape[-1])
        for make in makers:
            body = Source(consts)
            args, rows, chunks = make("KNAME", kern, sched, body)
            text = canonical(body.lines, args)
            calls.append((functions.setdefault(text, f"k{len(functions)}"), args, i, rows, chunks))
    lines = [call_line(name, args, rows, chunks) for name, args, _, rows, chunks in calls]
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
