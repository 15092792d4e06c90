"""What every generated kernel is written with (chapter 10): lines of Python source with their indentation, fresh
variable names and module-level constants (`Source`); a kernel's header and its loop over rows; the loops and
indices of an iteration space; the names of the flat arrays a kernel reads and writes."""
from __future__ import annotations

import math

from teenygrad.compiler import ir
from teenygrad.compiler.schedule import Kernel, Schedule, Slot

FASTMATH = '{"reassoc", "contract", "nsz"}'   # reorder sums (to vectorise them), fuse multiply-adds; inf/nan kept
CAST = {"float32": "np.float32", "float64": "np.float64", "int64": "np.int64"}


def slot_name(s: Slot) -> str:
    return {"input": "in", "output": "out", "scratch": "s"}[s.kind] + str(s.index)


class Source:
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
        text = f"{CAST[dtype]}({value!r})" if not (isinstance(value, float) and not math.isfinite(value)) \
            else f"{CAST[dtype]}(float('{value}'))"
        name = f"{dtype[0].upper()}{dtype[-2:] if dtype != 'int64' else ''}_" + \
            repr(value).replace("-", "m").replace(".", "_").replace("+", "").replace("'", "")
        name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)  # F32_0_5, F64_minf
        return self.consts.setdefault(text, name)


def header(name: str, args: list[str], src: Source) -> None:
    src.line(f"@kernel(fastmath={FASTMATH}, numpy_errors=True)")
    src.line(f"def {name}({', '.join(args)}):")
    src.depth += 1


def open_rows(name: str, args: list[str], src: Source, var: str = "o") -> None:
    """Start a kernel: a serial function over rows first..last of its outer loop. `run` calls it on all rows,
    or, when the work pays, hands it to `parallel_for` (teenygrad.kernels.parallel_for), which shares chunks of
    the rows among threads. The bounds are arguments, not literals, on purpose: with every trip count of a loop
    nest a constant, LLVM unrolls the nest and compiles for seconds (measured: 17 s for a three-line copy)."""
    header(name, [*args, "first", "last"], src)
    src.line(f"for {var} in range(first, last):")
    src.depth += 1


def loops(src: Source, axes: list[int], shape: tuple[int, ...], names: list[str], causal: bool = False) -> None:
    for d in axes:  # causal: the last axis j stops at the row i (`triangles.rows_stop_at_diagonal`)
        src.line(f"for {names[d]} in range({f'{names[d - 1]} + 1' if causal else shape[d]}):")
        src.depth += 1


def unravel(src: Source, outer: list[int], shape: tuple[int, ...], names: list[str], flat: str) -> None:
    """One index per outer axis from the flat outer index (row-major)."""
    step = 1
    for j, d in enumerate(reversed(outer)):
        div = f"{flat} // {step}" if step > 1 else flat
        src.line(f"{names[d]} = {div}" + (f" % {shape[d]}" if j < len(outer) - 1 else ""))
        step *= shape[d]


def slots_of(kern: Kernel, sched: Schedule) -> list[str]:
    names = []
    for it in kern.items:
        for n in [*(v.srcs[0] for v in it.leaves), it.node]:
            if id(n) in sched.slots and not (n.op in ir.REDUCE and id(n) in kern.local):
                names.append(slot_name(sched.slots[id(n)]))
    return list(dict.fromkeys(names))


Call = tuple[list[str], int | None, int]  # a kernel's arrays, the rows run calls it on (None: no rows), threads' chunks
